"""Axolotl's FSDP1 keys, judged for the release a project runs.

Axolotl 0.20 removed FSDP1 (``axolotl/utils/schemas/validation.py`` of the 0.20.0 and 0.21.0
wheels: ``check_fsdp_version``, ``FSDP1_ONLY_REJECTED_KEYS``, ``FSDP1_ONLY_IGNORED_KEYS``): it
refuses a config with the top-level ``fsdp`` list, ``fsdp_version: 1`` or
``fsdp_config.sharding_strategy`` / ``forward_prefetch``, and drops the other FSDP1-only keys of
``fsdp_config`` with a warning. Before 0.20 ``fsdp_config`` was read through ``FSDPConfig``
(``axolotl/utils/schemas/fsdp.py``), which from 0.13 to 0.19 had ``sync_module_states`` and
``use_orig_params`` among its fields and no others of these; Axolotl strips the ``fsdp_`` prefix
first (``check_fsdp_config_kwargs_prefix``), so ``fsdp_sync_module_states`` is the same key.

The schema (0.21) has none of them, so every one read as an unknown key that "Axolotl does not
read": wrong for a project on 0.13-0.19 that sets ``sync_module_states``, and silent about 0.20
refusing ``sharding_strategy``. This module says what each release does with each.
"""

from __future__ import annotations

from dataclasses import replace

from packaging.version import InvalidVersion, Version

from memlint.configs.validation import Issue

REMOVED_IN = Version("0.20")
# FSDP1-only keys 0.20 refuses, and what to write instead (None: nothing)
REJECTED = {"sharding_strategy": "reshard_after_forward", "forward_prefetch": None}
# FSDP1-only keys 0.20 drops with a warning
IGNORED = ("sync_module_states", "backward_prefetch", "backward_prefetch_policy", "limit_all_gathers",
           "use_orig_params")
# fields of FSDPConfig from 0.13 to 0.19 (the schema, from 0.21, lacks them)
FIELDS_UNTIL_0_19 = {"sync_module_states": Version("0.13"), "use_orig_params": Version("0.13")}


def _version(release: str | None) -> Version | None:
    try:
        return Version(release) if release else None
    except InvalidVersion:
        return None


def judged(issues: list[Issue], release: str | None) -> list[Issue]:
    """``issues`` with the FSDP1 keys of ``fsdp_config`` (and the top-level ``fsdp`` list) judged
    for ``release`` (None: the newest, which has no FSDP1)."""
    version = _version(release)
    removed = version is None or version >= REMOVED_IN
    out: list[Issue] = []
    for issue in issues:
        if issue.path == ("fsdp",) and issue.category == "removed" and removed:
            out.append(replace(issue, message=issue.message.split(" (Axolotl ignores")[0] + (
                " (Axolotl 0.20 refuses a config that sets it: FSDP1 was removed; configure FSDP2 in "
                "`fsdp_config` with `fsdp_version: 2`)")))
            continue
        if len(issue.path) != 2 or issue.path[0] != "fsdp_config" or issue.category != "unknown":
            out.append(issue)
            continue
        key = str(issue.path[1])
        name = key[5:] if key.startswith("fsdp_") and key != "fsdp_version" else key
        if not removed:
            since = FIELDS_UNTIL_0_19.get(name)
            if since is not None and version is not None and version >= since:
                continue  # a field of FSDPConfig in the release the project runs
            out.append(issue)
            continue
        if name in REJECTED:
            instead = REJECTED[name]
            hint = f"; write `{instead}`" if instead else "; it has no FSDP2 equivalent"
            message = (f"`fsdp_config.{key}` is an FSDP1-only option: Axolotl 0.20 removed FSDP1 and refuses "
                       f"the config{hint}")
            out.append(replace(issue, category="removed", message=message, fix=None))
        elif name in IGNORED:
            read = " (read by Axolotl 0.13-0.19)" if name in FIELDS_UNTIL_0_19 else ""
            message = (f"`fsdp_config.{key}` is an FSDP1-only option{read}: Axolotl 0.20 removed FSDP1 and "
                       "drops it with a warning")
            out.append(replace(issue, category="removed", message=message, fix=None))
        else:
            out.append(issue)
    return out
