"""The editor's settings (section ``memlint`` of ``workspace/configuration``), layered over the
settings file that ``memlint.project.settings.discover`` finds, so that the editor and the CLI agree
on everything the editor does not set.

Editors send every key they know, set or not: VS Code sends the defaults from the extension's
``package.json``. Those defaults are ``null`` for the keys that also exist in the settings
file (``gpu``, ``gpus``, ``select``, ``ignore``), and ``null`` means "not set here": the file's
value stays. A key the user did set wins over the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memlint.project.settings import Settings

RUN_ON_TYPE = "onType"
RUN_ON_SAVE = "onSave"


@dataclass(frozen=True)
class EditorSettings:
    enable: bool = True
    run: str = RUN_ON_TYPE
    gpu: str | None = None
    gpus: int | None = None
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] | None = None
    # what was wrong with the values sent (reported to the user, the rest still applies)
    problems: tuple[str, ...] = field(default=(), compare=False)


def _codes(key: str, value: Any, problems: list[str]) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):  # "MEM001, MEM002" typed into a plain text field
        value = [v for v in value.split(",")]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        problems.append(f"memlint.{key}: expected a list of rule codes or prefixes, got {value!r}")
        return None
    return tuple(v.strip().upper() for v in value if v.strip())


def parse_editor_settings(raw: Any) -> EditorSettings:
    """Editor settings from what the client sent; bad values are named in ``problems`` and
    left unset (the file's value applies)."""
    if raw is None:
        return EditorSettings()
    if not isinstance(raw, dict):
        return EditorSettings(problems=(f"memlint: expected an object of settings, got {raw!r}",))
    if isinstance(raw.get("memlint"), dict) and "enable" not in raw:  # {"memlint": {...}}
        raw = raw["memlint"]
    problems: list[str] = []
    values: dict[str, Any] = {}

    enable = raw.get("enable")
    if enable is not None:
        if isinstance(enable, bool):
            values["enable"] = enable
        else:
            problems.append(f"memlint.enable: expected true or false, got {enable!r}")

    run = raw.get("run")
    if run is not None:
        if run in (RUN_ON_TYPE, RUN_ON_SAVE):
            values["run"] = run
        else:
            problems.append(f"memlint.run: expected {RUN_ON_TYPE!r} or {RUN_ON_SAVE!r}, got {run!r}")

    gpu = raw.get("gpu")
    if gpu is not None and gpu != "":
        from memlint.catalog.gpus import UnknownGpu, lookup_gpu

        if not isinstance(gpu, str):
            problems.append(f"memlint.gpu: expected a GPU name, got {gpu!r}")
        else:
            try:
                lookup_gpu(gpu)
                values["gpu"] = gpu.strip()
            except UnknownGpu as error:
                problems.append(f"memlint.gpu: {error}")

    gpus = raw.get("gpus")
    if gpus is not None:
        if isinstance(gpus, int) and not isinstance(gpus, bool) and gpus >= 1:
            values["gpus"] = gpus
        elif isinstance(gpus, float) and gpus.is_integer() and gpus >= 1:  # JSON numbers
            values["gpus"] = int(gpus)
        else:
            problems.append(f"memlint.gpus: expected a positive whole number, got {gpus!r}")

    for key in ("select", "ignore"):
        codes = _codes(key, raw.get(key), problems)
        if codes is not None:
            values[key] = codes
    return EditorSettings(**values, problems=tuple(problems))


def layer(file_settings: Settings, editor: EditorSettings) -> Settings:
    """The file's settings with the keys the editor set replaced by the editor's values."""
    return file_settings.with_overrides(
        gpu=editor.gpu,
        gpus=editor.gpus,
        select=editor.select,
        ignore=editor.ignore,
    )
