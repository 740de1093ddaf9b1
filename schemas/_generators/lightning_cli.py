"""LightningCLI configs (``python main.py fit --config config.yaml``) as a schema.

``LightningCLI(MyModel, MyDataModule)`` builds a jsonargparse parser (``lightning/pytorch/cli.py``):
``add_default_arguments_to_parser`` adds ``seed_everything``, the ``trainer`` (the ``Trainer``
class's ``__init__`` arguments), the ``model`` and the ``data``; ``add_configure_optimizers_method``
adds ``optimizer`` and ``lr_scheduler``; the subcommand adds the arguments of ``Trainer.fit`` it does
not skip (``ckpt_path``, ``weights_only``). Both files are read with ``ast`` from the installed
wheel (Lightning needs torch to import):

* the top level is closed: a key jsonargparse does not know is an error there;
* ``trainer`` is closed too, each ``Trainer.__init__`` argument typed by its annotation where it is
  a plain type (``int``, ``bool``, ``str``, ``float``, ``list``, ``dict``; ``Optional`` adds null)
  and open where it takes objects (``strategy``, ``logger``, ``callbacks``: a class path or a
  ``{class_path, init_args}`` block);
* ``model`` and ``data`` are the user's own classes (their ``__init__`` arguments, or
  ``{class_path, init_args}``): open.
"""

from __future__ import annotations

import ast

from .common import envelope, package_file

FILE = "lightning-cli.schema.json"
_SCALARS = {"int": "integer", "float": "number", "str": "string", "bool": "boolean", "list": "array",
            "dict": "object", "None": "null"}
# the subcommand's Trainer.fit arguments LightningCLI skips (cli.py ``subcommands``: "fit")
_FIT_SKIPPED = {"self", "model", "train_dataloaders", "val_dataloaders", "datamodule"}


def _function(tree: ast.Module, cls: str, name: str) -> ast.FunctionDef:
    klass = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    return next(n for n in klass.body if isinstance(n, ast.FunctionDef) and n.name == name)


def _types(annotation: ast.expr | None) -> list[str] | None:
    """JSON types of a plain annotation; None when it admits objects (a class, a type alias)."""
    if annotation is None:
        return None
    if isinstance(annotation, ast.Constant) and annotation.value is None:
        return ["null"]
    if isinstance(annotation, ast.Name):
        found = _SCALARS.get(annotation.id)
        return [found] if found else None
    if isinstance(annotation, ast.Subscript) and isinstance(annotation.value, ast.Name):
        outer = annotation.value.id
        if outer in ("list", "dict"):
            return [_SCALARS[outer]]
        inner = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
        if outer == "Optional":
            types = _types(inner[0])
            return None if types is None else [*types, "null"]
        if outer == "Union":
            out: list[str] = []
            for part in inner:
                types = _types(part)
                if types is None:
                    return None
                out += [t for t in types if t not in out]
            return out
    return None


def _arguments(function: ast.FunctionDef, skipped: set[str]) -> dict[str, dict]:
    arguments = function.args.args[len(function.args.args) - len(function.args.defaults):] + function.args.kwonlyargs
    defaults = function.args.defaults + [d for d in function.args.kw_defaults if d is not None]
    properties: dict[str, dict] = {}
    for argument, default in zip(arguments, defaults):
        if argument.arg in skipped:
            continue
        schema: dict = {}
        types = _types(argument.annotation)
        if types:
            schema["type"] = types[0] if len(types) == 1 else types
        if isinstance(default, ast.Constant) and default.value is not None:
            schema["default"] = default.value
        properties[argument.arg] = schema
    return properties


def build() -> dict[str, dict]:
    source = package_file("lightning", "pytorch/trainer/trainer.py")
    tree = ast.parse(source.read_text(encoding="utf-8"), filename=str(source))
    trainer = _arguments(_function(tree, "Trainer", "__init__"), {"self"})
    fit = _arguments(_function(tree, "Trainer", "fit"), _FIT_SKIPPED)
    user_class = {"description": "The user's class: its __init__ arguments, or {class_path, init_args}.",
                  "type": ["object", "string", "null"]}
    body = {
        "type": "object",
        "properties": {
            "seed_everything": {"type": ["boolean", "integer"], "default": True},
            "trainer": {"type": "object", "properties": trainer, "additionalProperties": False,
                        "description": "lightning.pytorch.Trainer's __init__ arguments."},
            "model": user_class,
            "data": user_class,
            "optimizer": {"type": ["object", "string", "null"]},
            "lr_scheduler": {"type": ["object", "string", "null"]},
            **fit,
        },
        "additionalProperties": False,
    }
    return {FILE: envelope(FILE, "LightningCLI config (python main.py fit --config config.yaml)", "lightning", body,
                           description="What LightningCLI's parser reads from a subcommand's config.")}
