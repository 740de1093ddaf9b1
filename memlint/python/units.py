"""A module parsed one top-level statement at a time, so that an edit reparses what it changed.

The language server lints a script again on every edit, and an edit changes one top-level
statement (a function, a class, an assignment) while the others stay as they were. Here a
module's text is cut into *units*, each a top-level statement (with its decorators) and the
lines after it up to the next one; each unit is parsed by libcst alone and recorded
(``python_tree.record``: positions, children), and the units are joined into one
``cst.Module``. A unit whose text the previous version of the document had too is not parsed
or recorded again: its nodes, positions and children are reused.

The joined module is the one ``cst.parse_module`` builds from the whole text: the lines
between two statements that libcst gives to the second one (its ``leading_lines``) end the
first unit, where its parse left them in the unit's footer, and move over; a unit's positions
move down by the lines above it. When a file cannot be cut safely (no statements, ``\\r``
line ends, indentation styles that differ between units, a unit libcst reads differently
alone) ``parse_in_units`` returns None and the whole text is parsed at once.
"""

from __future__ import annotations

import ast
import weakref
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Mapping

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, ExpressionContext

from memlint.python.tree import Tree, parents_of, record, register


@dataclass(eq=False)
class Unit:
    """One top-level statement parsed alone; positions count lines from the unit's first."""

    text: str
    module: cst.Module
    positions: dict[cst.CSTNode, CodeRange]
    shape: dict[cst.CSTNode, list[cst.CSTNode]]
    parents: dict[cst.CSTNode, cst.CSTNode]  # of the statement's descendants, in ``parents_of`` order
    has_block: bool  # an indented block: the unit's default indent is the file's
    # the expression contexts of its names (``python_scopes.expression_contexts_of``), once asked
    contexts: dict[cst.CSTNode, ExpressionContext] | None = None
    # its nodes of some node classes, in ``parents`` order (``PythonSource.nodes_of``), once asked
    typed: dict[tuple[type, ...], list[cst.CSTNode]] = field(default_factory=dict)
    # the parses its nodes come from (one, but for a class made from an earlier version of it)
    parses: list["Parse"] = field(default_factory=list)
    # for a class made from an earlier version of it (``python_class_units``): what changed
    origin: "Origin | None" = None
    # for such a class: where each member's nodes begin in the order of ``positions``, and the
    # block's own place (``python_class_units._bounds``), worked out by the edit that made it
    bounds: list[int] | None = None
    # for such a class: how many nodes below each member ``parents`` has (``_spliced_parents``)
    sizes: list[int] | None = None
    # for such a class: the parses a member's nodes come from beyond its own, for a method some
    # of whose statements an edit parsed again (``python_method_units``)
    member_parses: dict[cst.CSTNode, tuple["Parse", ...]] = field(default_factory=dict)
    # for such a class: ``nodes_of``'s lists per member, in the block's order (``_by_member``)
    member_typed: dict[tuple[type, ...], list[list[cst.CSTNode]]] = field(default_factory=dict)

    def nodes_of(self, kinds: tuple[type, ...]) -> list[cst.CSTNode]:
        """The nodes below the statement of these (final) classes, in the order of ``parents``."""
        found = self.typed.get(kinds)
        if found is None:
            found = self._by_member(kinds) if self.sizes is not None else None
            if found is None:
                found = [node for node in self.parents if type(node) in kinds]
            self.typed[kinds] = found
        return found

    def _by_member(self, kinds: tuple[type, ...]) -> list[cst.CSTNode] | None:
        """``nodes_of`` for a class made from an earlier version (``sizes`` known): ``parents``
        lists the class's children, its members, each member's nodes from the last member to the
        first, then the class's other children's nodes (``class_units._spliced_parents``), so the
        list is joined from per-member lists, the members the edit kept taking theirs from the
        earlier version (a filter of ``parents`` walks the whole class: ~60,000 nodes on
        Accelerate's ``Accelerator``, per kinds asked, per edit). None when the counts disagree."""
        sizes = self.sizes
        statement = self.statement
        members = getattr(getattr(statement, "body", None), "body", None)
        children = self.shape.get(statement)
        if sizes is None or members is None or children is None or len(members) != len(sizes):
            return None
        keys = list(self.parents)
        head = len(children) + len(members)
        if head + sum(sizes) > len(keys):
            return None
        origin = self.origin
        earlier = origin.member_typed.get(kinds) if origin is not None and origin.member_typed is not None else None
        old_place: dict[int, int] = {}
        if earlier is not None and len(earlier) == len(origin.block.body):  # type: ignore[union-attr]
            removed = {id(member) for member in origin.removed}  # type: ignore[union-attr]
            old_place = {id(m): i for i, m in enumerate(origin.block.body) if id(m) not in removed}  # type: ignore[union-attr]
        runs: list[list[cst.CSTNode]] = [[] for _ in members]
        start = head
        for number in range(len(members) - 1, -1, -1):
            size = sizes[number]
            place = old_place.get(id(members[number]))
            runs[number] = (earlier[place] if place is not None and earlier is not None
                            else [node for node in keys[start:start + size] if type(node) in kinds])
            start += size
        self.member_typed[kinds] = runs
        found = [node for node in keys[:head] if type(node) in kinds]
        for run in reversed(runs):
            found += run
        found += [node for node in keys[start:] if type(node) in kinds]
        return found

    def nodes_in_order(self, kinds: tuple[type, ...]) -> list[cst.CSTNode]:
        """``nodes_of(kinds)`` sorted by where they start (ties in ``parents`` order)."""
        key = ("in order", kinds)
        found = self.typed.get(key)
        if found is None:
            positions = self.positions
            found = self.typed[key] = sorted(
                self.nodes_of(kinds), key=lambda n: (positions[n].start.line, positions[n].start.column))
        return found

    @property
    def statement(self) -> cst.BaseStatement:
        return self.module.body[0]


@dataclass(frozen=True, eq=False)
class Origin:
    """The earlier version a class's unit was made from (weakly: versions must not chain) and
    the members of its body the edit replaced (``removed``, that version's) by ``added``."""

    unit: "weakref.ref[Unit]"
    removed: tuple[cst.BaseStatement, ...]
    added: tuple[cst.BaseStatement, ...]
    block: cst.IndentedBlock  # that version's class body
    # that version's share of the rules' index (``python_statement_index``), if it had one: the
    # index is built after the earlier version of the document has gone
    index_part: object | None = None
    # that version's ``nodes_of`` lists per member (``Unit.member_typed``), kept for the same reason
    member_typed: dict[tuple[type, ...], list[list[cst.CSTNode]]] | None = None


def _parse_unit(text: str) -> Unit | None:
    try:
        module = cst.parse_module(text)
    except (cst.ParserSyntaxError, RecursionError, MemoryError):
        return None
    if len(module.body) != 1:
        return None
    try:
        recorded = record(module)
    except (RecursionError, KeyError):  # code nested too deep for libcst's codegen: parsed whole,
        return None  # its tree fails when first asked, where the rules expect it to
    if recorded.code != text:
        # libcst drops a blank line between trailing comments at the very end of a file
        # (``    # a\n\n  # b\n``); parsed whole, the same lines are kept
        return None
    positions, shape = recorded.positions, recorded.shape
    statement = module.body[0]
    return new_unit(text, module, positions, shape, parents_of(statement, shape),
                    any(type(n) is cst.IndentedBlock for n in shape))


def new_unit(text: str, module: cst.Module, positions: dict[cst.CSTNode, CodeRange],
             shape: dict[cst.CSTNode, list[cst.CSTNode]], parents: dict[cst.CSTNode, cst.CSTNode],
             has_block: bool) -> Unit:
    """A unit parsed alone: its nodes' children and the unit each node belongs to registered."""
    parse = Parse(module)
    register(parse, shape)
    parse.own(positions)
    unit = Unit(text, module, positions, shape, parents, has_block)
    parse.used_by(unit)
    return unit


def unit_statements(text: str, tree: ast.Module) -> list[tuple[str, list[ast.stmt]]] | None:
    """The text cut before every top-level statement that starts on a line of its own (the
    first unit also holds the lines above the first statement), each piece with the statements
    of ``tree`` it holds."""
    if not tree.body or "\r" in text:
        return None
    starts: list[int] = []
    groups: list[list[ast.stmt]] = []
    end = 0
    for statement in tree.body:
        decorators = getattr(statement, "decorator_list", ())
        first = min([statement.lineno, *(d.lineno for d in decorators)])
        if first > end:  # not on the line of the previous statement (``a = 1; b = 2``)
            starts.append(first)
            groups.append([])
        groups[-1].append(statement)
        end = max(end, statement.end_lineno or statement.lineno)
    lines = text.split("\n")
    bounds = [0, *(start - 1 for start in starts[1:]), len(lines)]
    out = []
    for begin, stop in zip(bounds, bounds[1:]):
        chunk = "\n".join(lines[begin:stop])
        out.append(chunk + "\n" if stop < len(lines) else chunk)
    if len(out) != len(starts) or "".join(out) != text:
        return None
    return list(zip(out, groups))


def unit_texts(text: str, tree: ast.Module) -> list[str] | None:
    """The texts of ``unit_statements``."""
    cut = unit_statements(text, tree)
    return None if cut is None else [chunk for chunk, _ in cut]


class Parse:
    """The nodes of one libcst parse: a unit's, or the members of a class that an edit parsed
    again (``python_class_units``), and the units that use them, the latest last. A class's unit
    made from an earlier one shares its untouched members' nodes with it, so a node may belong to
    several units; keeping the owner per parse, not per node, makes a new version of a class
    cost what its new members cost. The parse keeps its module, so its nodes are alive (their
    ids cannot be reused) while any unit uses one of them."""

    __slots__ = ("module", "units", "shared", "__weakref__")

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.units: list[weakref.ref[Unit]] = []
        self.shared = False  # some of its nodes are not in every unit that uses it

    def own(self, nodes: Iterable[cst.CSTNode]) -> None:
        keys = [id(node) for node in nodes]
        _UNIT_OF.update(dict.fromkeys(keys, weakref.ref(self)))
        weakref.finalize(self, _forget_nodes, keys)

    def used_by(self, unit: Unit, shared: bool = False) -> None:
        self.units = [ref for ref in self.units if ref() is not None]
        self.units.append(weakref.ref(unit))
        self.shared = self.shared or shared
        unit.parses.append(self)


# The parse each node of a parsed unit comes from, by ``id(node)``: a joined module's positions
# find a node's unit here instead of copying every unit's positions into one dictionary on each
# join. Weakly: an entry goes with its parse (which keeps its nodes alive meanwhile).
_UNIT_OF: dict[int, "weakref.ref[Parse]"] = {}


def _forget_nodes(keys: list[int]) -> None:
    for key in keys:
        _UNIT_OF.pop(key, None)


def parse_of(node: object) -> Parse | None:
    """The parse ``node`` comes from."""
    ref = _UNIT_OF.get(id(node))
    return ref() if ref is not None else None


def parses_of(nodes: Iterable[object]) -> list[Parse]:
    """The distinct parses ``nodes`` come from, in the order of their first node: one lookup per
    node without a call (a method's thousands of nodes, after each edit of it)."""
    found: dict[int, Parse] = {}
    for ref in dict.fromkeys(map(_UNIT_OF.get, map(id, nodes))):
        parse = ref() if ref is not None else None
        if parse is not None:
            found.setdefault(id(parse), parse)
    return list(found.values())


def _units(parse: Parse, node: object) -> Iterator[Unit]:
    """The live units of ``parse`` that hold ``node``, the latest first."""
    for ref in reversed(parse.units):
        unit = ref()
        if unit is not None and (not parse.shared or node in unit.positions):
            yield unit


def units_of(node: object) -> list[Unit]:
    """The parsed units ``node`` belongs to, the latest first (none for a node of no unit: a
    joined module, the statements a join rebuilt, a module parsed whole)."""
    parse = parse_of(node)
    return [] if parse is None else list(_units(parse, node))


def unit_of(node: object) -> Unit | None:
    """The latest parsed unit ``node`` belongs to (``units_of``)."""
    parse = parse_of(node)
    return None if parse is None else next(_units(parse, node), None)


def unit_among(node: object, units: Mapping[Unit, object]) -> Unit | None:
    """The unit of ``node`` that is a key of ``units`` (the units of one joined module)."""
    ref = _UNIT_OF.get(id(node))
    parse = ref() if ref is not None else None
    if parse is None:
        return None
    shared = parse.shared
    # ``_units`` written out: asked for every node whose answers are kept (thousands per edit)
    for ref in reversed(parse.units):
        unit = ref()
        if unit is not None and unit in units and (not shared or node in unit.positions):
            return unit
    return None


class _Positions(Mapping[cst.CSTNode, CodeRange]):
    """The units' positions in the whole module: a unit's own, moved down by the lines above
    it when asked (most nodes never are)."""

    def __init__(self, own: dict[cst.CSTNode, CodeRange]) -> None:
        self._own = own  # the module and the statements the join rebuilt
        self._offsets: dict[Unit, int] = {}  # lines above each unit of this module
        self._hidden: set[cst.CSTNode] = set()  # statements the join replaced by a rebuilt copy
        self._moved: dict[cst.CSTNode, CodeRange] = {}  # positions asked for, moved down

    def add(self, unit: Unit, offset: int) -> None:
        self._offsets[unit] = offset

    def forget(self, node: cst.CSTNode) -> None:
        self._hidden.add(node)
        self._moved.pop(node, None)

    def _unit_of(self, node: object) -> Unit | None:
        unit = unit_among(node, self._offsets)
        if unit is None or node in self._hidden or node is unit.module:
            return None
        return unit

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        found = self._own.get(node) or self._moved.get(node)
        if found is not None:
            return found
        unit = self._unit_of(node)
        if unit is None:
            raise KeyError(node)
        relative = unit.positions[node]
        offset = self._offsets[unit]
        if not offset:
            return relative
        # kept: the extractors and rules ask for the same nodes' positions again and again
        moved = self._moved[node] = CodeRange(CodePosition(relative.start.line + offset, relative.start.column),
                                            CodePosition(relative.end.line + offset, relative.end.column))
        return moved

    def __contains__(self, node: object) -> bool:
        return node in self._own or self._unit_of(node) is not None

    def __iter__(self) -> Iterator[cst.CSTNode]:
        yield from self._own
        for unit in self._offsets:
            yield from (node for node in unit.positions
                        if node not in self._own and node not in self._hidden and node is not unit.module)

    def __len__(self) -> int:
        return sum(1 for _ in self)


@dataclass(eq=False)
class Joined:
    module: cst.Module
    tree: Tree
    units: list[Unit]


def parse_in_units(text: str, tree: ast.Module, previous: list[Unit] = (),
                   texts: list[str] | None = None,
                   derive: Callable[[Unit, str], Unit | None] | None = None) -> Joined | None:
    """The module ``cst.parse_module(text)`` builds, from units parsed alone or reused from
    ``previous`` (the units of an earlier version of the text); None when the text cannot be
    cut safely. ``texts``: ``unit_texts(text, tree)`` when the caller has them. ``derive``:
    makes a changed unit from an earlier version of it (``python_class_units``), tried with
    the earlier units left over, in order, before a changed unit is parsed alone."""
    if texts is None:
        texts = unit_texts(text, tree)
    if texts is None:
        return None
    reusable: dict[str, list[Unit]] = {}
    for unit in previous:
        reusable.setdefault(unit.text, []).append(unit)
    units: list[Unit | None] = []
    for chunk in texts:
        spare = reusable.get(chunk)
        # a unit's nodes appear once only; statements with the same text keep their order
        units.append(spare.pop(0) if spare else None)
    if derive is not None and None in units:
        used = {id(unit) for unit in units if unit is not None}
        left = [unit for unit in previous if id(unit) not in used]
        for number, chunk in enumerate(texts):
            if units[number] is None:
                units[number] = _derived(chunk, left, derive)
    for number, chunk in enumerate(texts):
        if units[number] is None:
            units[number] = _parse_unit(chunk)
            if units[number] is None:
                return None
    return _join(text, units)  # type: ignore[arg-type]


def _derived(chunk: str, left: list[Unit], derive: Callable[[Unit, str], Unit | None]) -> Unit | None:
    """A unit of ``chunk`` made from one of the earlier units ``left`` (which it then uses up)."""
    header = chunk.split("\n", 1)[0]
    for number, old in enumerate(left):
        # the same first line (a class's header): made from it, or from none
        if old.text.split("\n", 1)[0] == header:
            unit = derive(old, chunk)
            if unit is not None:
                del left[number]
            return unit
    return None


def _join(text: str, units: list[Unit]) -> Joined | None:
    indents = {unit.module.default_indent for unit in units if unit.has_block}
    if len(indents) > 1 or any(unit.module.default_newline != "\n" for unit in units):
        return None  # units parsed alone would not keep the whole file's indentation
    if any(unit.module.header for unit in units[1:]) or any(
        not unit.module.has_trailing_newline for unit in units[:-1]
    ):
        return None
    body: list[cst.BaseStatement] = []
    own: dict[cst.CSTNode, CodeRange] = {}
    positions = _Positions(own)
    rebuilt: dict[cst.CSTNode, list[cst.CSTNode]] = {}  # nodes of this join, not of a unit
    line = 0  # lines above the current unit
    lines_before: list[cst.EmptyLine] = []
    for unit in units:
        statement = unit.statement
        positions.add(unit, line)
        if lines_before:
            # the lines between two statements belong to the second, as in a whole parse
            joined = statement.with_changes(leading_lines=[*lines_before, *statement.leading_lines])
            own[joined] = positions[statement]
            rebuilt[joined] = unit.shape[statement]
            positions.forget(statement)
            statement = joined
        body.append(statement)
        lines_before = list(unit.module.footer)
        line += unit.text.count("\n")
    last = units[-1].module
    module = cst.Module(
        body=body,
        header=units[0].module.header,
        footer=last.footer,
        encoding=units[0].module.encoding,
        default_indent=indents.pop() if indents else units[0].module.default_indent,
        default_newline="\n",
        has_trailing_newline=last.has_trailing_newline,
    )
    # the module ends where the last unit's module ends (libcst's codegen counts a missing final
    # newline as if it were there, so the end is taken from its own record, moved down)
    end = units[-1].positions[last].end
    own[module] = CodeRange(CodePosition(1, 0), CodePosition(end.line + line - units[-1].text.count("\n"), end.column))
    rebuilt[module] = body
    # what ``parents_of(module, shape)`` gives, in its order (the top-level statements, then
    # each statement's subtree from the last), from the units' own parents
    parents: dict[cst.CSTNode, cst.CSTNode] = dict.fromkeys(body, module)
    for unit, statement in zip(reversed(units), reversed(body)):
        parents.update(unit.parents)
        if statement is not unit.statement:  # rebuilt by the join: the same children, a new parent
            for child in unit.shape[unit.statement]:
                parents[child] = statement
    tree = Tree(positions, parents)
    register(tree, rebuilt)
    return Joined(module, tree, units)
