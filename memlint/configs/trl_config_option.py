"""A YAML file a TrlParser script takes with ``--config``: argparse converts its string values.

``TrlParser.parse_args_and_config`` reads the file named by ``--config`` with ``yaml.safe_load``
and makes each value the default of its option (``set_defaults_with_config``: trl 0.9.6's
``trl/commands/cli_utils.py``, the newest ``trl/scripts/utils.py``). argparse converts a default
that is a string through the option's ``type``, as it converts a typed-in argument, so
``learning_rate: 5e-5`` (a string to YAML 1.1, which wants a dot) arrives as the float 5e-05.
``HfArgumentParser.parse_yaml_file``/``parse_dict`` instead build the dataclass from the values as
they are, so there the string stays a string and CFG002 keeps its finding.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import jsonschema

from memlint.configs import schema
from memlint.configs.validation import Issue

if TYPE_CHECKING:
    from memlint.facts.plan import RunFacts
    from memlint.lint.context import RuleContext

# the call that reads ``--config`` (TrlParser's own method: HfArgumentParser has no such method)
_PARSES_CONFIG_OPTION = re.compile(r"^[^#\n]*\.parse_args_and_config\s*\(", re.MULTILINE)
_OPTION = "config"
# argparse's ``type=int`` refuses "1e3": an integer is not a float that happens to be whole
_STRICT = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _checker, value: isinstance(value, int) and not isinstance(value, bool)),
)


def without_converted_strings(ctx: RuleContext, found: list[Issue], project_fields: frozenset[str]) -> list[Issue]:
    """``found`` less the invalid top-level string values argparse converts into valid ones,
    when a launch hands this file to a TrlParser script with ``--config``, or the project writes
    its items as options (``project_fields``: the fields of the project's own argument classes)."""
    data = ctx.structured
    if data is None or not isinstance(data.value, dict):
        return found
    name = schema.schema_name_for(ctx.kind, data.value)
    if name is None:
        return found
    converted = {issue.path[0]: value for issue in found
                 if (value := _converted(name, data.value, issue)) is not None}
    if not converted or not (_taken_with_config_option(ctx) or _the_projects_options(ctx, data.value, name,
                                                                                      project_fields)):
        return found
    return [issue for issue in found if not (issue.category == "invalid" and len(issue.path) == 1
                                             and issue.path[0] in converted)]


def _converted(name: str, document: dict, issue: Issue) -> int | float | None:
    """The number argparse makes of an invalid top-level string value, if the schema takes it."""
    if issue.category != "invalid" or len(issue.path) != 1 or not isinstance(document.get(issue.path[0]), str):
        return None
    key = issue.path[0]
    text = document[key].strip()
    number: int | float
    try:
        number = int(text)
    except ValueError:
        try:
            number = float(text)
        except ValueError:
            return None
    checked = _STRICT(schema.load_schema(name))
    if any(error.absolute_path and error.absolute_path[0] == key
           for error in checked.iter_errors({**document, key: number})):
        return None
    return number


def _taken_with_config_option(ctx: RuleContext) -> bool:
    """Does a launch pass this file with ``--config`` to a script that calls
    ``parse_args_and_config``?"""
    here = Path(ctx.path).resolve()
    for launch in ctx.launches_of_this_config():
        assert launch.launches is not None
        if not _passes_with_config_option(ctx, launch, here):
            continue
        script = ctx.resolve_reference(str(launch.launches.value), launch.path)
        if script is not None and _PARSES_CONFIG_OPTION.search(ctx.text_of(script)):
            return True
    return False


def _the_projects_options(ctx: RuleContext, document: dict, name: str, project_fields: frozenset[str]) -> bool:
    """Is this file one the project's own parser reads, in a project that writes a config's
    items as command-line options first (``project_writes_configs_as_options``: ms-swift)? The
    file's keys say so: one of them is a field of the project's own argument classes that the
    Trainer's schema does not know (ms-swift's ``tuner_type``, ``model``, ``dataset``)."""
    from memlint.facts.project_arguments import project_writes_configs_as_options

    own = {key for key in document if isinstance(key, str)} & project_fields
    if not own - schema.top_level_keys(name):
        return False
    kept = ctx.shared.get("configs_as_options")
    if kept is None:
        kept = ctx.shared["configs_as_options"] = project_writes_configs_as_options(ctx.settings.root)
    return bool(kept)


def _passes_with_config_option(ctx: RuleContext, launch: RunFacts, here: Path) -> bool:
    written = launch.cli_args.get(_OPTION)
    if written is not None:
        passed = ctx.resolve_reference(str(written.value), launch.path)
        return passed is not None and passed.resolve() == here
    # a launcher's template filled in for this file (``--config recipes/$MODEL/config_$SUFFIX.yaml``)
    template = launch.template_config
    return launch.bound_config is not None and template is not None and template.note == f"--{_OPTION}"
