"""A script that reads all its arguments from one file: ``HfArgumentParser((CustomizedArguments,
TrainingArguments)).parse_json_file(json_file=args.train_args_file)`` (Firefly's ``train.py``,
the file from ``--train_args_file`` with a default path), ``parser.parse_yaml_file(
os.path.abspath(sys.argv[1]))`` (starcoder's ``chat/train.py``), ``TrlParser(...).parse_args_and_config()``
with ``--config recipe.yaml`` (the file's keys are the options' defaults). The file's keys are the
script's command line: the project links each such file to the script (``project/runs.py``)."""

from __future__ import annotations

import libcst as cst

from memlint.facts.script_facts import ScriptFacts
from memlint.model.provenance import Sourced

_PARSE_FILE = {"parse_json_file": "json_file", "parse_yaml_file": "yaml_file", "parse_yaml_and_args": "yaml_arg"}
_TRL_CONFIG_METHOD = "parse_args_and_config"  # TrlParser's: ``--config FILE`` sets the options' defaults


def recognise(ctx: ScriptFacts, call: cst.Call, names: frozenset[str], method: str | None) -> None:
    if ctx.facts.arguments_file is not None:
        return
    if method is None and type(call.func) is cst.Name and call.func.value == "setattr":
        _keys_set_on_options(ctx, call)
        return
    if method == _TRL_CONFIG_METHOD:
        # TrlParser reads the file ``--config`` names and makes each of its keys the default of
        # that option (``set_defaults_with_config``): the file is the command line, under the
        # options the launch writes
        ctx.facts.arguments_file = Sourced("config", ctx.location(call), f"{method}(--config)")
        ctx.facts.arguments_under_cli = True
        return
    if method not in _PARSE_FILE:
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


def _keys_set_on_options(ctx: ScriptFacts, call: cst.Call) -> None:
    """``yaml_config = get_yaml_file(args.config)`` then ``for k, v in yaml_config.items():
    setattr(args, k, v)`` (xRAG's ``train.py``, under "priority: CLI > YAML"): the file the option
    names is the script's command line, as a ``parse_yaml_file`` one is. Only a loop over the
    items of a name assigned, in the same function, from a call given the one option."""
    if len(call.args) != 3 or not all(type(a.value) is cst.Name for a in call.args):
        return
    target, key, value = (cst.ensure_type(a.value, cst.Name).value for a in call.args)
    loop = ctx.python.parent(call)
    while loop is not None and type(loop) is not cst.For:
        if type(loop) in (cst.FunctionDef, cst.ClassDef, cst.Module):
            return
        loop = ctx.python.parent(loop)
    if loop is None or not (type(loop.target) is cst.Tuple and [
            e.value.value if type(e.value) is cst.Name else None for e in loop.target.elements] == [key, value]):
        return
    items = loop.iter
    if not (type(items) is cst.Call and type(items.func) is cst.Attribute and items.func.attr.value == "items"
            and type(items.func.value) is cst.Name and not items.args):
        return
    loaded = _loaded_from(ctx, items.func.value.value, loop)
    if loaded is None or len(loaded.args) != 1:
        return
    found = ctx.values.evaluate(loaded.args[0].value)
    if found is None or len(found.options) != 1 or target not in ctx.python.code_of(loaded.args[0].value):
        return
    option = found.options[0]
    ctx.facts.arguments_file = Sourced(option, ctx.location(call), f"setattr({target}, ...) for each key of --{option}")
    ctx.facts.arguments_under_cli = _only_when_unset(ctx, call, loop, target, key)


def _only_when_unset(ctx: ScriptFacts, call: cst.Call, loop: cst.For, target: str, key: str) -> bool:
    """Is the ``setattr`` under ``if getattr(args, k) is None:`` (an option the command line left
    unset), so that the command line wins over the file?"""
    node = ctx.python.parent(call)
    while node is not None and node is not loop:
        if type(node) is cst.If and ctx.python.code_of(node.test).replace(" ", "") == f"getattr({target},{key})isNone":
            return True
        node = ctx.python.parent(node)
    return False


def _loaded_from(ctx: ScriptFacts, name: str, loop: cst.For) -> cst.Call | None:
    """The call whose result ``name`` is given last before ``loop``, in the loop's function."""
    function = ctx.python.parent(loop)
    while function is not None and type(function) not in (cst.FunctionDef, cst.Module):
        function = ctx.python.parent(function)
    before = ctx.python.place(loop)
    latest: cst.Call | None = None
    for assign in ctx.python.nodes_of(cst.Assign):
        if not (len(assign.targets) == 1 and type(assign.targets[0].target) is cst.Name
                and assign.targets[0].target.value == name and type(assign.value) is cst.Call):
            continue
        owner = ctx.python.parent(assign)
        while owner is not None and type(owner) not in (cst.FunctionDef, cst.Module):
            owner = ctx.python.parent(owner)
        if owner is function and ctx.python.place(assign) < before:
            latest = assign.value
    return latest
