"""AMP004: ``torch.cuda.amp.autocast`` / ``GradScaler`` (and the ``torch.cpu.amp`` ones) are deprecated."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import libcst as cst

from memlint.documents.kinds import DocumentKind
from memlint.facts.pinned_versions import pins
from memlint.lint.context import RuleContext
from memlint.model.diagnostics import Applicability, Edit, Fix, Position, Range, Severity, split_lines
from memlint.python.index import ModuleIndex, could_be_named, index_for
from memlint.python.syntax import dotted, positional
from memlint.rules.base import Example, Finding, Rule

# qualified name -> (class, device)
_DEPRECATED = {
    "torch.cuda.amp.autocast": ("autocast", "cuda"),
    "torch.cuda.amp.autocast_mode.autocast": ("autocast", "cuda"),
    "torch.cuda.amp.GradScaler": ("GradScaler", "cuda"),
    "torch.cuda.amp.grad_scaler.GradScaler": ("GradScaler", "cuda"),
    "torch.cpu.amp.autocast": ("autocast", "cpu"),
    "torch.cpu.amp.autocast_mode.autocast": ("autocast", "cpu"),
    "torch.cpu.amp.GradScaler": ("GradScaler", "cpu"),
    "torch.cpu.amp.grad_scaler.GradScaler": ("GradScaler", "cpu"),
}
_DEPRECATED_NAMES = frozenset(_DEPRECATED)
# the release that deprecated them: "`torch.cuda.amp.autocast(args...)` is deprecated" is a
# FutureWarning from torch 2.4.0 (torch/cuda/amp/autocast_mode.py); torch.amp.GradScaler
# arrived in 2.3
DEPRECATED_IN = "2.4.0"
# torch.cuda.amp.autocast(enabled, dtype, cache_enabled) vs torch.amp.autocast(device_type, dtype, enabled, ...)
_AUTOCAST_POSITIONS = ("enabled", "dtype", "cache_enabled")

_SCRIPT = """\
import torch
{imports}

model = build_model().cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
scaler = {scaler}

for x, y in loader:
    with {autocast}:
        loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
"""


@dataclass(frozen=True)
class _Use:
    node: cst.CSTNode  # the reference (Name or Attribute)
    cls: str
    device: str


class DeprecatedCudaAmp(Rule):
    """## What it does
    Finds ``torch.cuda.amp.autocast``, ``torch.cuda.amp.GradScaler`` and their
    ``torch.cpu.amp`` twins, however they are imported (``from torch.cuda.amp import autocast
    as ac``, ``import torch.cuda.amp as amp``).

    ## Why it matters
    They are deprecated aliases: each use emits a FutureWarning ("`torch.cuda.amp.autocast(
    args...)` is deprecated. Please use `torch.amp.autocast('cuda', args...)` instead.") and
    they will be removed. Their signatures also differ from the replacements:
    ``torch.cuda.amp.autocast(enabled, dtype, cache_enabled)`` takes ``enabled`` first where
    ``torch.amp.autocast(device_type, dtype, enabled)`` takes the dtype, so swapping the name
    alone silently changes what positional arguments mean.

    A project that pins a torch release before 2.4 (``torch==2.0.1``), where they neither warn
    nor have ``torch.amp.GradScaler`` to move to, is not told. Nor is an import of them in an
    ``except ImportError:`` handler (``try: from torch.amp import autocast``): it runs only on a
    torch without ``torch.amp``, which does not warn.

    ## Fix
    ``torch.amp.autocast("cuda", ...)`` and ``torch.amp.GradScaler("cuda", ...)``. The fix
    (safe) rewrites the name, adds the device, turns autocast's positional arguments into
    keywords, and for ``from torch.cuda.amp import ...`` rewrites the import and every call
    of the imported names (only when every use is a call).
    """

    code = "AMP004"
    name = "deprecated-cuda-amp"
    severity = Severity.INFO
    kinds = frozenset({DocumentKind.PYTHON})
    python_needs = r"^amp$"  # torch.cuda.amp, torch.cpu.amp
    fix_applicability = Applicability.SAFE

    VALID = (
        Example(
            _SCRIPT.format(
                imports="",
                scaler='torch.amp.GradScaler("cuda")',
                autocast='torch.amp.autocast("cuda", dtype=torch.float16)',
            ),
            title="The device-generic torch.amp API",
        ),
        Example(
            _SCRIPT.format(
                imports="",
                scaler="torch.cuda.amp.GradScaler()",
                autocast="torch.cuda.amp.autocast(dtype=torch.float16)",
            ),
            files={"requirements.txt": "torch==2.0.1\ntransformers==4.31.0\n"},
            title="The project pins torch 2.0.1, which deprecated nothing yet",
        ),
        Example(
            _SCRIPT.format(
                imports="try:\n    from torch.amp import GradScaler, autocast\n"
                        "except ImportError:  # torch before 1.10\n"
                        "    from torch.cuda.amp import GradScaler, autocast",
                scaler='GradScaler("cuda")',
                autocast='autocast("cuda", dtype=torch.float16)',
            ),
            title="The old import only as the fallback of a failed import of torch.amp",
        ),
    )
    INVALID = (
        Example(
            _SCRIPT.format(
                imports="",
                scaler="torch.cuda.amp.GradScaler()",
                autocast="torch.cuda.amp.autocast(dtype=torch.float16)",
            ),
            lines=(6, 9),
            message="deprecated",
            fixed=_SCRIPT.format(
                imports="",
                scaler='torch.amp.GradScaler("cuda")',
                autocast='torch.amp.autocast("cuda", dtype=torch.float16)',
            ),
            title="Attribute spellings",
        ),
        Example(
            _SCRIPT.format(
                imports="from torch.cuda.amp import autocast as ac, GradScaler",
                scaler="GradScaler(2.0**14)",
                autocast="ac(True, torch.float16)",
            ),
            lines=(2, 2),
            message="deprecated",
            fixed=_SCRIPT.format(
                imports="from torch.amp import autocast as ac, GradScaler",
                scaler='GradScaler("cuda", 2.0**14)',
                autocast='ac("cuda", enabled=True, dtype=torch.float16)',
            ),
            title="An aliased import with positional arguments",
        ),
    )

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        torch = pins(ctx.settings.root, ctx.path).get("torch")
        if torch is not None and torch.only_before(DEPRECATED_IN):
            return  # the release the project pins neither warns nor has torch.amp.GradScaler
        index = index_for(ctx.python)
        if index is None:
            return
        yield from self._imports(ctx, index)
        yield from self._attributes(ctx, index)

    # ------------------------------------------------------------------ from torch.cuda.amp import ...

    def _imports(self, ctx, index: ModuleIndex) -> Iterator[Finding]:
        py = index.py
        for node in index.nodes_of(cst.ImportFrom):
            if node.module is None or isinstance(node.names, cst.ImportStar):
                continue
            module = py.code_of(node.module)
            if module not in ("torch.cuda.amp", "torch.cpu.amp") or _import_fallback(index, node):
                continue
            aliases = [a for a in node.names if f"{module}.{py.code_of(a.name)}" in _DEPRECATED]
            if not aliases:
                continue
            uses = {id(a): self._uses_of(index, a, module) for a in aliases}
            movable = len(aliases) == len(node.names) and all(
                _is_called(index, u.node)
                for a in aliases
                for u in uses[id(a)]
            )
            edits: list[Edit] | None = None
            if movable:
                edits = [Edit(ctx.path, py.range_of(node.module), "torch.amp")]
                for alias in aliases:
                    for use in uses[id(alias)]:
                        call_edits = _call_edits(ctx, index.parent(use.node), use)
                        if call_edits is None:
                            edits = None
                            break
                        edits.extend(call_edits)
                    if edits is None:
                        break
            for alias in aliases:
                cls, device = _DEPRECATED[f"{module}.{py.code_of(alias.name)}"]
                message = (
                    f"`{module}.{cls}` is deprecated and warns on every use; "
                    f'import `{cls}` from `torch.amp` and pass "{device}" first'
                )
                fix = Fix(f'use torch.amp.{cls}("{device}", ...)', tuple(edits), Applicability.SAFE) if edits else None
                yield Finding(range=py.range_of(alias), message=message, fix=fix)

    def _uses_of(self, index: ModuleIndex, alias: cst.ImportAlias, module: str) -> list[_Use]:
        py = index.py
        local = py.code_of(alias.asname.name) if alias.asname else py.code_of(alias.name)
        target = f"{module}.{py.code_of(alias.name)}"
        cls, device = _DEPRECATED[target]
        out = []
        for node in index.nodes_of(cst.Name):
            if node.value == local and target in index.qualified(node):
                parent = index.parent(node)
                if isinstance(parent, (cst.ImportAlias, cst.AsName)):
                    continue
                out.append(_Use(node, cls, device))
        return out

    # ------------------------------------------------------------------ torch.cuda.amp.autocast(...)

    def _attributes(self, ctx, index: ModuleIndex) -> Iterator[Finding]:
        py = index.py
        torch_imported = _binds_torch(py.module)
        for node in index.nodes_of(cst.Attribute):
            if not could_be_named(node, _DEPRECATED_NAMES):
                continue
            found = [q for q in index.qualified(node) if q in _DEPRECATED]
            if not found or isinstance(index.parent(node), (cst.ImportFrom, cst.Import, cst.ImportAlias)):
                continue
            cls, device = _DEPRECATED[found[0]]
            use = _Use(node, cls, device)
            parent = index.parent(node)
            fix = None
            if (
                isinstance(parent, cst.Call)
                and parent.func is node
                and (written := dotted(node))
                and (written.startswith("torch.") or torch_imported)
            ):
                call_edits = _call_edits(ctx, parent, use)
                if call_edits is not None:
                    fix = Fix(
                        f'use torch.amp.{cls}("{device}", ...)',
                        (Edit(ctx.path, py.range_of(node), f"torch.amp.{cls}"), *call_edits),
                        Applicability.SAFE,
                    )
            written = py.code_of(node)
            yield Finding(
                range=py.range_of(node),
                message=f'`{written}` is deprecated and warns on every use; use `torch.amp.{cls}("{device}", ...)`',
                fix=fix,
            )


_IMPORT_FAILURES = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


def _import_fallback(index: ModuleIndex, node: cst.CSTNode) -> bool:
    """Is ``node`` in an ``except ImportError:`` handler (``try: from torch.amp import autocast``
    ``except ImportError: from torch.cuda.amp import autocast``)? Such an import runs only where
    the first one fails, on a torch without ``torch.amp`` (before 1.10), which never warns."""
    current = index.parent(node)
    while current is not None and not isinstance(current, (cst.FunctionDef, cst.ClassDef, cst.Module)):
        if isinstance(current, cst.ExceptHandler):
            caught = current.type
            names = [caught] if caught is None or not isinstance(caught, cst.Tuple) else \
                [element.value for element in caught.elements]
            return any(name is None or (isinstance(name, (cst.Name, cst.Attribute)) and
                                        (dotted(name) or "").rsplit(".", 1)[-1] in _IMPORT_FAILURES)
                       for name in names)
        current = index.parent(current)
    return False


def _binds_torch(module: cst.Module) -> bool:
    for statement in module.body:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Import) and any(
                isinstance(a.name, cst.Name) and a.name.value == "torch" and a.asname is None for a in small.names
            ):
                return True
    return False


def _is_called(index: ModuleIndex, node: cst.CSTNode) -> bool:
    """Is ``node`` the function of a call (``autocast`` in ``autocast(...)``)?"""
    parent = index.parent(node)
    return isinstance(parent, cst.Call) and parent.func is node


def _call_edits(ctx, call: cst.CSTNode | None, use: _Use) -> list[Edit] | None:
    """Edits that add the device and (for autocast) name the positional arguments. Every edit
    replaces text (never a bare insertion), so the same edit offered twice applies once."""
    if not isinstance(call, cst.Call) or any(a.star == "*" for a in call.args):
        return None
    py = ctx.python
    func_end = py.range_of(call.func).end
    line_text = split_lines(py.text)[func_end.line - 1]
    paren = line_text.find("(", func_end.column)
    if paren < 0:
        return None
    open_paren = Range(Position(func_end.line, paren), Position(func_end.line, paren + 1))
    if not call.args:
        return [Edit(ctx.path, Range(open_paren.start, py.range_of(call).end), f'("{use.device}")')]
    edits = [Edit(ctx.path, open_paren, f'("{use.device}", ')]
    if use.cls == "autocast":
        for position, arg in enumerate(positional(call)):
            if position >= len(_AUTOCAST_POSITIONS):
                return None
            edits.append(
                Edit(ctx.path, py.range_of(arg.value), f"{_AUTOCAST_POSITIONS[position]}={py.code_of(arg.value)}")
            )
    return edits
