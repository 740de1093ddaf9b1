"""A script that reads all its arguments from one file: ``HfArgumentParser((CustomizedArguments,
TrainingArguments)).parse_json_file(json_file=args.train_args_file)`` (Firefly's ``train.py``,
the file from ``--train_args_file`` with a default path), ``parser.parse_yaml_file(
os.path.abspath(sys.argv[1]))`` (starcoder's ``chat/train.py``). The file's keys are the
script's command line: the project links each such file to the script (``project/runs.py``)."""

from __future__ import annotations

import libcst as cst

from memlint.facts.script_facts import ScriptFacts
from memlint.model.provenance import Sourced

_PARSE_FILE = {"parse_json_file": "json_file", "parse_yaml_file": "yaml_file", "parse_yaml_and_args": "yaml_arg"}


def recognise(ctx: ScriptFacts, call: cst.Call, names: frozenset[str], method: str | None) -> None:
    if method not in _PARSE_FILE or ctx.facts.arguments_file is not None:
        return
    # the methods of HfArgumentParser (and TrlParser, a project's subclass): argparse has none of
    # them, so the name says the parser even where the receiver was reassigned
    argument = ctx.values.arguments(call, (_PARSE_FILE[method],)).get(_PARSE_FILE[method])
    if argument is None:
        return
    if _reads_first_argument(argument):
        ctx.facts.arguments_file = Sourced("1", ctx.location(call), f"{method}(sys.argv[1])")
        return
    found = ctx.values.evaluate(argument)
    if found is None or len(found.options) != 1:
        return
    option = found.options[0]
    ctx.facts.arguments_file = Sourced(option, ctx.location(call), f"{method}(--{option})")
    if found.known and isinstance(found.value, str) and found.value and found.node is not None:
        ctx.facts.arguments_default = Sourced(found.value, ctx.location(found.node), f"default of --{option}")


def _reads_first_argument(expr: cst.BaseExpression) -> bool:
    """``sys.argv[1]``, or ``sys.argv[-1]`` (LOMO's ``train_lomo.py``: the last argument, the only
    one a launch passes), also inside ``os.path.abspath(...)``."""
    while type(expr) is cst.Call and expr.args:
        expr = expr.args[0].value
    if not (type(expr) is cst.Subscript and type(expr.value) is cst.Attribute and expr.value.attr.value == "argv"
            and len(expr.slice) == 1 and type(expr.slice[0].slice) is cst.Index):
        return False
    index = expr.slice[0].slice.value
    if type(index) is cst.UnaryOperation and type(index.operator) is cst.Minus:
        index = index.expression
        return type(index) is cst.Integer and index.value == "1"
    return type(index) is cst.Integer and index.value == "1"
