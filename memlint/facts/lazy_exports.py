"""The submodule a package's lazy ``__init__`` serves a name from.

Packages written in transformers' style (mPLUG-Owl's ``mplug_owl/__init__.py``, every model
folder of transformers itself) import nothing when they are imported: they hand a mapping of
submodule -> names to ``_LazyModule``, which imports the submodule when a name is first read::

    _import_structure = {"configuration_x": ["XConfig"], "tokenization_x": ["XTokenizer"]}
    try:
        ...
    else:
        _import_structure["modeling_x"] = ["XForConditionalGeneration", "XModel"]
    sys.modules[__name__] = _LazyModule(__name__, globals()["__file__"], _import_structure, ...)

``from package import XModel`` then reads ``package/modeling_x.py``, as a plain
``from .modeling_x import XModel`` in the ``__init__`` would. Read with ``ast``, never run.
"""

from __future__ import annotations

import ast

_MAPPING = "_import_structure"


def _names(node: ast.expr) -> list[str]:
    if isinstance(node, (ast.List, ast.Tuple)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _key(node: ast.expr) -> str | None:
    """``_import_structure["modeling_x"]`` -> "modeling_x"."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == _MAPPING:
        key = node.slice
        return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else None
    return None


def lazy_submodule(text: str, name: str) -> str | None:
    """The submodule (relative to the package) whose names ``_import_structure`` lists ``name``
    among, in the package ``__init__`` ``text``; None when it lists it nowhere."""
    if _MAPPING not in text or name not in text:
        return None
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id == _MAPPING and isinstance(node.value, ast.Dict):
                    for key, value in zip(node.value.keys, node.value.values):
                        if isinstance(key, ast.Constant) and isinstance(key.value, str) and name in _names(value):
                            return key.value
                elif _key(target) is not None and name in _names(node.value):
                    return _key(target)
        elif isinstance(node, ast.AugAssign) and _key(node.target) is not None and name in _names(node.value):
            return _key(node.target)  # ``_import_structure["modeling_x"] += ["XModel"]``
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("extend", "append") and _key(node.func.value) is not None:
            listed = [v for arg in node.args for v in _names(arg)]
            listed += [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if name in listed:
                return _key(node.func.value)
    return None
