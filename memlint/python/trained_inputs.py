"""Does a model class feed its language model ``inputs_embeds`` that require grad?

A multimodal model freezes its vision encoder, trains a projector of its own (``self.llama_proj
= nn.Linear(1408, hidden)``), and calls its LoRA-wrapped language model with ``inputs_embeds``
built from the projector's output and the frozen token embeddings (MiniGPT-4, MiniGPT4-video).
Those embeddings require grad, so reentrant checkpointing inside the language model still runs
its backward and gives the LoRA weights their gradients: the "inputs do not require grad"
pitfall of a late ``gradient_checkpointing_enable()`` (CKP001) does not happen.

The question is answered by following values through the methods of the class (and of its base
classes in the same module), pass after pass until the inputs are reached or nothing changes (a
local name by the assignments that reach where it is read; attributes, method results and what
is filled in place wherever it happens): a value requires
grad when it comes from calling a trained module of the class (one it builds itself from
``torch.nn``, from a class of this module or of its own project, and never turns off), from a
parameter it creates (``nn.Parameter``), from a tensor made with ``requires_grad=True`` or
switched on with ``requires_grad_()``, or from any of these through local names, the class's
attributes, the arguments and results of its methods, containers filled with ``append``, and
the tensor operations between them. What is computed under ``torch.no_grad()``, detached, or only
a shape, a device, a comparison or a ``*_like`` copy does not. Frozen token embeddings
(``get_input_embeddings()(ids)``, ``embed_tokens(ids)`` of the language model) are no source.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import libcst as cst

from memlint.python.gradient_switches import switches
from memlint.python.index import ModuleIndex
from memlint.python.syntax import dotted, is_false, iter_nodes, keyword, method_name, positional, receiver

# what reading from a tensor gives no gradient: its metadata, or its values cut off the graph
_NO_GRAD_ATTRIBUTES = frozenset({"shape", "device", "dtype", "ndim", "is_cuda", "requires_grad", "data", "grad"})
_NO_GRAD_METHODS = frozenset({
    "detach", "detach_", "size", "dim", "numel", "item", "tolist", "numpy", "long", "int", "bool", "nonzero",
    "argmax", "argmin", "argsort", "eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "get_device",
    "element_size", "stride", "is_contiguous",
})
_NO_GRAD_FUNCTIONS = frozenset({
    "len", "isinstance", "range", "print", "zeros_like", "ones_like", "empty_like", "full_like", "zeros", "ones",
    "empty", "full", "arange", "tensor", "as_tensor", "LongTensor", "randint", "randint_like", "multinomial",
})
# methods that put their argument into the receiver (a list, a tensor filled in place)
_FILLS_RECEIVER = frozenset({
    "append", "extend", "insert", "add", "update", "copy_", "index_put_", "index_copy_", "masked_scatter_",
    "scatter_", "put_", "setdefault",
})
# ``torch.nn`` callables that are functions or helpers, not modules a class trains
_NOT_MODULES = ("torch.nn.functional.", "torch.nn.utils.", "torch.nn.init.")
# ``torch.nn`` modules without parameters: the output of ``nn.Identity()`` is its input
_PARAMETERLESS = re.compile(
    r"Identity|Dropout\w*|Alpha\w*Dropout|ReLU6?|LeakyReLU|GELU|SiLU|Mish|ELU|SELU|CELU|GLU|Tanh\w*|Sigmoid|Hard\w+"
    r"|Softmax\w*|LogSoftmax|Softplus|Softsign|Softshrink|Tanhshrink|Threshold|Flatten|Unflatten|\w*Pool\dd"
    r"|Upsample\w*|Pixel\w*Shuffle|ChannelShuffle|\w*Pad\dd")
# the nodes a propagation pass reads: bindings, results, calls
_STEPS = frozenset({cst.Assign, cst.AugAssign, cst.AnnAssign, cst.NamedExpr, cst.For, cst.CompFor, cst.WithItem,
                    cst.Return, cst.Yield, cst.Call})
# containers: they train what they hold
_CONTAINERS = frozenset({"Sequential", "ModuleList", "ModuleDict"})


def trained_module_feeding(index: ModuleIndex, model: str, at: cst.CSTNode,
                           project_packages: frozenset[str] = frozenset()) -> str | None:
    """The trained module or parameter (``self.llama_proj``) from which the ``inputs_embeds`` that
    a model class passes to the model ``model`` names at ``at`` are computed, or None.

    ``model`` is ``self.llama_model`` inside the class, or a name (``llm``) that the script hands
    to a class of this module (``VisionLanguageModel(vision, llm)``, kept as ``self.llm``).
    ``project_packages``: the folders above the linted file in its project (``minigpt4`` and
    ``models`` for ``minigpt4/models/mini_gpt4.py``): a module built by a class imported from one
    of them (or through a relative import) is the project's own, like one built from ``torch.nn``."""
    try:
        for owner, attribute in _holders(index, model, at):
            found = _ClassFlow(index, owner, project_packages).source_feeding(attribute)
            if found is not None:
                return found
    except RecursionError:  # expressions nested thousands deep: nothing is known to require grad
        return None
    return None


def _holders(index: ModuleIndex, model: str, at: cst.CSTNode) -> list[tuple[cst.ClassDef, str]]:
    """``(class, attribute)`` pairs: where a class keeps the model ``model`` names."""
    if model.startswith("self."):
        owner = index.class_of(at)
        return [(owner, model[len("self."):])] if owner is not None else []
    found = []
    for call in index.calls:
        owner = index.classes.get(call.func.value) if type(call.func) is cst.Name else None
        if owner is None:
            continue
        init = _methods(index, owner).get("__init__")
        if init is None:
            continue
        for param, value in _bound_arguments(init, call):
            if dotted(value) == model:
                found += [(owner, attribute) for attribute in _stored_as(init, param)]
    return found


def _stored_as(init: cst.FunctionDef, param: str) -> list[str]:
    """The attributes ``__init__`` keeps its parameter ``param`` in (``self.llm = llm``)."""
    out = []
    for node in iter_nodes(init.body):
        if type(node) is not cst.Assign:
            continue
        for target in node.targets:
            for kept, value in _pairs(target.target, node.value):
                text = dotted(kept)
                if type(value) is cst.Name and value.value == param and text is not None and text.startswith("self."):
                    out.append(text[len("self."):])
    return out


def _pairs(target: cst.BaseExpression, value: cst.BaseExpression) -> list[tuple[cst.BaseExpression, cst.BaseExpression]]:
    """``(target, value)`` pairs of an assignment, ``a, b = x, y`` taken apart."""
    if type(target) in (cst.Tuple, cst.List) and type(value) in (cst.Tuple, cst.List) \
            and len(target.elements) == len(value.elements):  # type: ignore[attr-defined]
        return [pair for name, part in zip(target.elements, value.elements)  # type: ignore[attr-defined]
                for pair in _pairs(name.value, part.value)]
    return [(target, value)]


def _methods(index: ModuleIndex, owner: cst.ClassDef, depth: int = 0) -> dict[str, cst.FunctionDef]:
    """The methods of a class and of its base classes defined in the same module (its own first)."""
    methods: dict[str, cst.FunctionDef] = {}
    for statement in owner.body.body:
        if type(statement) is cst.FunctionDef:
            methods.setdefault(statement.name.value, statement)
    if depth < 4:
        for base in owner.bases:
            parent = index.classes.get(base.value.value) if type(base.value) is cst.Name else None
            if parent is not None and parent is not owner:
                for name, method in _methods(index, parent, depth + 1).items():
                    methods.setdefault(name, method)
    return methods


def _parameters(function: cst.FunctionDef) -> list[str]:
    params = function.params
    return [p.name.value for p in (*params.posonly_params, *params.params)]


def _bound_arguments(method: cst.FunctionDef, call: cst.Call) -> list[tuple[str, cst.BaseExpression]]:
    """``(parameter, argument)`` for the arguments ``call`` passes to ``method`` (``self``
    skipped): by position, by name, the rest to its ``*args`` and ``**kwargs``; an unpacked
    ``*xs`` or ``**options`` to every parameter it could fill."""
    names = _parameters(method)[1:]
    params = method.params
    star = params.star_arg.name.value if isinstance(params.star_arg, cst.Param) else None
    star_star = params.star_kwarg.name.value if params.star_kwarg is not None else None
    out = []
    for position, arg in enumerate(positional(call)):
        if position < len(names):
            out.append((names[position], arg.value))
        elif star is not None:
            out.append((star, arg.value))
    for arg in call.args:
        if arg.keyword is not None:
            name = arg.keyword.value
            if name in names or star_star is None:
                out.append((name, arg.value))
            else:
                out.append((star_star, arg.value))
        elif arg.star:
            filled = [*names, star] if arg.star == "*" else [*names, star_star]
            out += [(name, arg.value) for name in filled if name is not None]
    return out


@dataclass
class _ClassFlow:
    """What requires grad in one class: local names per method, attributes, method results."""

    index: ModuleIndex
    owner: cst.ClassDef
    project_packages: frozenset[str]
    bound: set[tuple[int, str]] = field(default_factory=set)  # (id(binding statement), name)
    filled: set[tuple[int, str]] = field(default_factory=set)  # (id(method), name changed in place)
    parameters_passed: set[tuple[int, str]] = field(default_factory=set)  # (id(method), parameter)
    attributes: set[str] = field(default_factory=set)  # ``self.x`` holding such a value
    results: set[str] = field(default_factory=set)  # methods returning one
    changed: bool = False
    _reaching: dict[int, list[int]] = field(default_factory=dict)  # id(name read) -> ids of its bindings
    _graph: dict[int, bool] = field(default_factory=dict)  # id(expression) -> not under ``torch.no_grad()``
    _steps: dict[int, list[cst.CSTNode]] = field(default_factory=dict)  # id(method) -> what ``_pass`` reads
    methods: dict[str, cst.FunctionDef] = field(init=False)
    _nodes: dict[int, list[cst.CSTNode]] = field(init=False)  # id(method) -> its nodes, in source order
    modules: frozenset[str] = field(init=False)  # attributes holding a trained module
    parameters: frozenset[str] = field(init=False)  # attributes holding a trained parameter
    active: frozenset[str] = frozenset()  # the sources followed in this pass

    def __post_init__(self) -> None:
        self.methods = _methods(self.index, self.owner)
        self._nodes = {id(method): list(iter_nodes(method.body)) for method in self.methods.values()}
        self.modules, self.parameters = self._trained_sources()

    def source_feeding(self, model: str) -> str | None:
        """The trained source that the ``inputs_embeds`` of a ``self.<model>(...)`` call draw on
        (the first by name when several do), or None."""
        trained = sorted(self.modules | self.parameters)
        sinks = [(method, call) for method in self.methods.values() for call in self._calls(method)
                 if _calls_model(call, model) and keyword(call, "inputs_embeds") is not None]
        if not (trained and sinks and self._reaches(sinks, trained)):
            return None
        if len(trained) > 1:
            return "self." + next((t for t in trained if self._reaches(sinks, [t])), trained[0])
        return "self." + trained[0]

    def _reaches(self, sinks: list[tuple[cst.FunctionDef, cst.Call]], sources: list[str]) -> bool:
        """Do the ``inputs_embeds`` of one of ``sinks`` require grad when only ``sources`` train?
        Values are propagated pass after pass over the methods until one does, or until nothing
        changes (bounded: each pass adds a name, attribute or result, of which a class has
        finitely many)."""
        self.active = frozenset(sources)
        self.bound, self.filled, self.parameters_passed = set(), set(), set()
        self.attributes, self.results = set(), set()
        for _ in range(50):
            self.changed = False
            for method in self.methods.values():
                self._pass(method)
            for method, call in sinks:
                argument = keyword(call, "inputs_embeds")
                if argument is not None and self._requires_grad(argument.value, method):
                    return True
            if not self.changed:
                return False
        return False

    # ------------------------------------------------------------------ sources

    def _trained_sources(self) -> tuple[frozenset[str], frozenset[str]]:
        """``(modules, parameters)``: the attributes the class builds a trainable module or a
        parameter in, less those whose gradients something in the module turns off (and never
        back on)."""
        modules: set[str] = set()
        parameters: set[str] = set()
        for method in self.methods.values():
            for node in self._nodes[id(method)]:
                if type(node) is not cst.Assign:
                    continue
                for target in node.targets:
                    for kept, value in _pairs(target.target, node.value):
                        kind = self._builds(value) if type(value) is cst.Call else None
                        text = dotted(kept)
                        if kind is not None and text is not None and text.count(".") == 1 \
                                and text.startswith("self."):
                            (parameters if kind == "parameter" else modules).add(text[len("self."):])
        off, on = self._switched()
        everything_off = "" in off
        trained = {a for a in modules | parameters if a in on or not (a in off or everything_off)}
        return frozenset(modules & trained), frozenset(parameters & trained)

    def _builds(self, call: cst.Call) -> str | None:
        """"module" or "parameter" when ``call`` builds one the class trains, else None."""
        qualified = self.index.qualified(call.func)
        if "torch.nn.Parameter" in qualified or "torch.nn.parameter.Parameter" in qualified:
            switch = keyword(call, "requires_grad")
            return None if switch is not None and is_false(switch.value) else "parameter"
        torch_nn = [q for q in qualified if q.startswith("torch.nn.") and not q.startswith(_NOT_MODULES)]
        if torch_nn:
            return "module" if _torch_module_trains(self, torch_nn[0], call) else None
        if type(call.func) is cst.Name and call.func.value in self.index.classes:
            return "module"
        if any(q.startswith(".") or q.split(".", 1)[0] in self.project_packages for q in qualified) \
                and _names_a_class(call.func):
            return "module"
        return None

    def _switched(self) -> tuple[set[str], set[str]]:
        """The attributes (``""`` for the whole object) whose gradients the module turns off, and
        those it turns on: through ``self`` in the class, or through any name elsewhere
        (``model.llama_proj.requires_grad_(False)`` in a training script of the same file)."""
        off: set[str] = set()
        on: set[str] = set()
        inside = {id(node) for nodes in self._nodes.values() for node in nodes}
        for node in self.index.nodes_of(cst.For, cst.Call, cst.Assign):
            for what, turned in switches([node]):
                parts = what.split(".")
                if parts[0] == "self":
                    if id(node) not in inside:
                        continue
                    attribute = parts[1] if len(parts) > 1 else ""
                elif len(parts) > 1:
                    attribute = parts[1]  # ``model.llama_proj``: the attribute of whatever holds it
                else:
                    continue
                (on if turned else off).add(attribute)
        return off, on

    # ------------------------------------------------------------------ propagation

    def _calls(self, method: cst.FunctionDef) -> list[cst.Call]:
        return [node for node in self._nodes[id(method)] if type(node) is cst.Call]

    def _pass(self, method: cst.FunctionDef) -> None:
        steps = self._steps.get(id(method))
        if steps is None:
            steps = self._steps[id(method)] = [n for n in self._nodes[id(method)] if type(n) in _STEPS]
        for node in steps:
            if isinstance(node, cst.Assign):
                for target in node.targets:
                    self._assign(target.target, node.value, method, node)
            elif isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.NamedExpr)):
                if node.value is not None and self._requires_grad(node.value, method):
                    self._mark(node.target, method, node)
            elif isinstance(node, (cst.For, cst.CompFor)):
                self._iterate(node.target, node.iter, method, node)
            elif isinstance(node, cst.WithItem):
                if node.asname is not None and self._requires_grad(node.item, method):
                    self._mark(node.asname.name, method, node)
            elif isinstance(node, (cst.Return, cst.Yield)):
                if isinstance(node.value, cst.BaseExpression) and self._requires_grad(node.value, method):
                    self._add(self.results, method.name.value)
            elif isinstance(node, cst.Call):
                self._call_effects(node, method)

    def _assign(self, target: cst.BaseExpression, value: cst.BaseExpression, method: cst.FunctionDef,
                at: cst.CSTNode) -> None:
        """``a, b = x, y`` pairs its names with the values; any other assignment marks its
        targets when the value requires grad."""
        for name, part in _pairs(target, value):
            if self._requires_grad(part, method):
                self._mark(name, method, at)

    def _iterate(self, target: cst.BaseExpression, values: cst.BaseExpression, method: cst.FunctionDef,
                 at: cst.CSTNode) -> None:
        """``for i, x in enumerate(xs)`` marks ``x`` only, ``for a, b in zip(xs, ys)`` each name
        by its sequence; any other loop marks its targets when what it iterates requires grad."""
        if type(values) is cst.Call and type(values.func) is cst.Name and type(target) in (cst.Tuple, cst.List):
            elements = target.elements  # type: ignore[attr-defined]
            sequences = [arg.value for arg in values.args if arg.keyword is None and not arg.star]
            if values.func.value == "enumerate" and len(elements) == 2 and sequences:
                self._iterate(elements[1].value, sequences[0], method, at)
                return
            if values.func.value == "zip" and len(elements) == len(sequences) == len(values.args):
                for element, sequence in zip(elements, sequences):
                    self._iterate(element.value, sequence, method, at)
                return
        if self._requires_grad(values, method):
            self._mark(target, method, at)

    def _call_effects(self, call: cst.Call, method: cst.FunctionDef) -> None:
        """What a call marks besides its result: a method's parameters, a filled container, a
        tensor switched to require grad."""
        callee = self._method_called(call)
        if callee is not None:
            for param, value in _bound_arguments(callee, call):
                if self._requires_grad(value, method):
                    self._add(self.parameters_passed, (id(callee), param))
            return
        name = method_name(call)
        target = receiver(call)
        if target is None:
            return
        if name == "requires_grad_" and not (call.args and is_false(call.args[0].value)):
            self._mark(target, method, None)
        elif name in _FILLS_RECEIVER and any(self._requires_grad(arg.value, method) for arg in call.args):
            self._mark(target, method, None)

    def _mark(self, target: cst.BaseExpression, method: cst.FunctionDef, at: cst.CSTNode | None) -> None:
        """Mark what ``target`` binds as requiring grad: a name as bound by the statement ``at``,
        or, changed in place (``at`` None: ``xs.append(h)``, ``out[i] = h``), in the whole method."""
        if type(target) is cst.Name:
            if at is None:
                self._add(self.filled, (id(method), target.value))
            else:
                self._add(self.bound, (id(at), target.value))
        elif type(target) in (cst.Tuple, cst.List):
            for element in target.elements:  # type: ignore[attr-defined]
                self._mark(element.value, method, at)
        elif type(target) is cst.StarredElement:
            self._mark(target.value, method, at)
        elif type(target) is cst.Subscript:
            self._mark(target.value, method, None)
        elif type(target) is cst.Attribute:
            base = target.value
            if type(base) is cst.Name and base.value == "self":
                self._add(self.attributes, target.attr.value)
            else:
                self._mark(base, method, None)

    def _add(self, into: set, item) -> None:
        if item not in into:
            into.add(item)
            self.changed = True

    def _method_called(self, call: cst.Call) -> cst.FunctionDef | None:
        func = call.func
        if type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == "self":
            return self.methods.get(func.attr.value)
        return None

    def _requires_grad(self, expr: cst.BaseExpression, method: cst.FunctionDef) -> bool:
        """Does ``expr``, evaluated where it is written in ``method``, require grad?"""
        graph = self._graph.get(id(expr))
        if graph is None:
            graph = self._graph[id(expr)] = not self.index.under_no_grad(expr)
        return graph and self._carries(expr, method)

    def _carries(self, expr: cst.CSTNode, method: cst.FunctionDef) -> bool:
        kind = type(expr)
        if kind is cst.Name:
            return self._name_carries(expr, method)  # type: ignore[arg-type]
        if kind is cst.Attribute:
            attribute = expr.attr.value  # type: ignore[attr-defined]
            base = expr.value  # type: ignore[attr-defined]
            if attribute in _NO_GRAD_ATTRIBUTES:
                return False
            if type(base) is cst.Name and base.value == "self":
                return attribute in self.attributes or (attribute in self.parameters and attribute in self.active)
            return self._carries(base, method)
        if kind is cst.Call:
            return self._call_carries(expr, method)  # type: ignore[arg-type]
        if kind in (cst.Subscript, cst.StarredElement, cst.Element, cst.Arg, cst.DictElement, cst.Await):
            value = expr.value if kind is not cst.Await else expr.expression  # type: ignore[attr-defined]
            return self._carries(value, method)
        if kind is cst.BinaryOperation or kind is cst.BooleanOperation:
            return self._carries(expr.left, method) or self._carries(expr.right, method)  # type: ignore[attr-defined]
        if kind is cst.UnaryOperation:
            return not isinstance(expr.operator, cst.Not) and self._carries(expr.expression, method)  # type: ignore[attr-defined]
        if kind is cst.IfExp:
            return self._carries(expr.body, method) or self._carries(expr.orelse, method)  # type: ignore[attr-defined]
        if kind in (cst.Tuple, cst.List, cst.Set):
            return any(self._carries(e, method) for e in expr.elements)  # type: ignore[attr-defined]
        if kind is cst.Dict:
            return any(self._carries(e, method) for e in expr.elements  # type: ignore[attr-defined]
                       if type(e) is cst.DictElement or type(e) is cst.StarredDictElement)
        if kind is cst.StarredDictElement:
            return self._carries(expr.value, method)  # type: ignore[attr-defined]
        if kind in (cst.ListComp, cst.SetComp, cst.GeneratorExp):
            return self._carries(expr.elt, method)  # type: ignore[attr-defined]
        if kind is cst.DictComp:
            return self._carries(expr.value, method)  # type: ignore[attr-defined]
        return False

    def _name_carries(self, use: cst.Name, method: cst.FunctionDef) -> bool:
        """A name read in ``method``: bound by a comprehension around it, by the assignments that
        reach it, or a parameter a call of the method passed such a value; or filled in place."""
        name = use.value
        if (id(method), name) in self.filled:
            return True
        around = []
        for ancestor in self.index.ancestors(use):
            if ancestor is method:
                break
            around.append(id(ancestor))
            if type(ancestor) in (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp):
                loop = ancestor.for_in  # type: ignore[attr-defined]
                while loop is not None:
                    if name in _bound_names(loop.target):
                        return (id(loop), name) in self.bound
                    loop = loop.inner_for_in
        reaching = self._reaching.get(id(use))
        if reaching is None:
            # an assignment binds after its value is read: ``h = self.prompt_wrap(h)`` reads the
            # earlier ``h`` (a loop's target is bound before its body runs)
            reaching = self._reaching[id(use)] = [
                id(d.statement) for d in self.index.reaching(name, use)
                if id(d.statement) not in around or type(d.statement) in (cst.For, cst.CompFor)]
        if reaching:
            return any((statement, name) in self.bound for statement in reaching)
        return (id(method), name) in self.parameters_passed

    def _call_carries(self, call: cst.Call, method: cst.FunctionDef) -> bool:
        func = call.func
        argument = keyword(call, "requires_grad")
        if argument is not None:
            return not is_false(argument.value)
        name = method_name(call)
        if type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == "self":
            if func.attr.value in self.modules and func.attr.value in self.active:
                return True
            if func.attr.value in self.methods:
                return func.attr.value in self.results
        # ``self.llama_proj.forward(x)``
        if name == "forward" and type(func) is cst.Attribute and dotted(func.value) in {
                f"self.{m}" for m in self.modules & self.active}:
            return True
        if name in _NO_GRAD_METHODS and type(func) is cst.Attribute:
            return False
        if name in _NO_GRAD_FUNCTIONS:
            return False
        return self._carries(func, method) or any(self._carries(arg.value, method) for arg in call.args)


def _bound_names(target: cst.BaseExpression) -> set[str]:
    if type(target) is cst.Name:
        return {target.value}
    if type(target) in (cst.Tuple, cst.List):
        return {n for e in target.elements for n in _bound_names(e.value)}  # type: ignore[attr-defined]
    return set()


def _calls_model(call: cst.Call, model: str) -> bool:
    """``self.llm(...)`` or ``self.llm.forward(...)`` for ``model`` ``"llm"``."""
    text = dotted(call.func)
    return text in (f"self.{model}", f"self.{model}.forward")


def _torch_module_trains(flow: _ClassFlow, qualified: str, call: cst.Call) -> bool:
    """Does a ``torch.nn`` module built by ``call`` have parameters that train? Not an activation,
    a pooling or ``nn.Identity()``; a container when one of the modules it holds does; a
    pretrained ``nn.Embedding.from_pretrained`` only with ``freeze=False``."""
    parts = qualified.split(".")
    if parts[-1] == "from_pretrained":
        freeze = keyword(call, "freeze")
        return freeze is not None and is_false(freeze.value)
    name = parts[-1]
    if _PARAMETERLESS.fullmatch(name):
        return False
    if name in _CONTAINERS:
        # anything but a parameterless ``torch.nn`` module (a list built elsewhere, an
        # ``OrderedDict``) may hold parameters
        return any(_may_train(flow, element) for arg in call.args for element in _held(arg))
    return True


def _may_train(flow: _ClassFlow, module: cst.BaseExpression) -> bool:
    if not isinstance(module, cst.Call):
        return True
    torch_nn = [q for q in flow.index.qualified(module.func) if q.startswith("torch.nn.")]
    return not torch_nn or _torch_module_trains(flow, torch_nn[0], module)


def _held(arg: cst.Arg) -> list[cst.BaseExpression]:
    """The modules an argument of ``nn.Sequential(...)`` / ``nn.ModuleList([...])`` gives: the
    elements of a list display, the values of a dict display, or the argument itself."""
    value = arg.value
    if arg.star == "" and isinstance(value, (cst.List, cst.Tuple)):
        return [e.value for e in value.elements]
    if arg.star == "" and isinstance(value, cst.Dict):
        return [e.value for e in value.elements if isinstance(e, cst.DictElement)]
    return [value]


def _names_a_class(func: cst.BaseExpression) -> bool:
    """A callee spelled like a class (``ProjectorMLP``) or a builder of one (``build_projector``)."""
    last = func.attr.value if type(func) is cst.Attribute else func.value if type(func) is cst.Name else ""
    return last[:1].isupper() or last.startswith(("build_", "create_", "make_"))
