"""The fields of the argument classes a project parses its configs with.

A project often extends the upstream schema: alignment-handbook's ``src/alignment/configs.py``
subclasses TRL's ``SFTConfig`` (adding ``chat_template``), and its scripts parse
``TrlParser((ScriptArguments, SFTConfig, ModelConfig))``; run_clm-style scripts parse
``HfArgumentParser((ModelArguments, DataTrainingArguments, TrainingArguments))``. A YAML or
JSON config given to such a parser may hold any field of those classes. This module finds the
classes passed to an ``HfArgumentParser`` / ``TrlParser`` (or to the project's own subclass of
one, such as open-instruct's ``ArgumentParserPlus``) anywhere in the project, follows
their bases defined in the project, and returns their field names (annotated class
attributes) — the keys the project itself defines, which are not unknown keys. A parser built
in a helper that is handed the class (ms-swift's ``parse_args(class_type, argv)``) takes the
classes the helper's callers pass (``memlint.facts.parser_helpers``). A class the project builds
from a mapping read from a file (MFTCoder's ``args = MftTrainArgs(**json.load(f))``) parses that
file as surely, so its fields count too.

A script may also read a config file into a plain mapping and take its keys one by one
(x-flux's ``args = OmegaConf.load(path)`` then ``args.max_train_steps``, ``args.lr_scheduler``):
:func:`project_config_reads` returns each such reading, the loader and the keys read, so that a
file whose keys are the ones a script reads is judged as that script's own format.

Files are parsed (by ``ast``: nothing is compiled or run), never imported; only files that name a parser or a dataclass are parsed,
and each file's answer is kept while its size and modification time stay the same.
"""

from __future__ import annotations

import ast
import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from memlint.documents import reads
from memlint.facts.parser_helpers import caller_position, passed_classes
from memlint.facts.stamped_files import python_module, stamped
from memlint.python.library import is_library_dataclass

_PARSERS = re.compile(r"\b(?:HfArgumentParser|TrlParser)\b|\b\w*Parser\w*\(")  # or a project's subclass
_UPSTREAM = ("HfArgumentParser", "TrlParser")
# the "parser" of a class built from a mapping read from a file: MFTCoder's
# ``train_config = json.load(f)`` then ``args = MftTrainArgs(**train_config)``
_FROM_A_FILE = "**loaded"
_LOADERS = frozenset({"load", "loads", "safe_load", "full_load", "unsafe_load"})  # json, yaml, toml, OmegaConf
_DATACLASS = re.compile(r"@(?:dataclasses\.)?dataclass\b")  # HfArgumentParser takes dataclasses only
# a pydantic model's fields are a config's keys as surely (avnlp/llm-finetuning's
# ``MedQATrainConfig(BaseModel)``, built as ``MedQATrainConfig(**yaml.safe_load(open(path)))``)
_MODEL_CLASS = re.compile(r"^[ \t]*class[ \t]+\w+[ \t]*\([^)]*\b(?:BaseModel|BaseSettings)\b", re.M)
_CONFIG_OWNERS = frozenset({"OmegaConf", "yaml", "json", "toml", "tomllib"})
# a loader's call, or a loader imported under another name (open_lm's ``from omegaconf import
# OmegaConf as om`` then ``om.load(f)``)
_CONFIG_LOAD = re.compile(r"\b(?:OmegaConf|yaml|json)\.(?:safe_|full_|unsafe_)?load\(|\b(?:OmegaConf|yaml|json)\s+as\s+\w")
_SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", ".tox", ".memlint_cache", "site-packages"}

# a call that reads YAML: PyYAML's loaders (``yaml.load`` with the Loader it is given), and the
# tools' readers built on yaml.safe_load or a loader like it (HfArgumentParser, OmegaConf)
_YAML_READ = re.compile(r"\byaml\.(safe_load|full_load|unsafe_load|load)(?:_all)?\(([^()]*)|"
                        r"\b(parse_yaml_file|OmegaConf\.load)\(")
_CONSTRUCTING_LOADERS = re.compile(r"Loader\s*=\s*(?:yaml\.)?(?:C?FullLoader|C?UnsafeLoader|C?Loader)\b")
# the libraries whose argument dataclasses memlint has schemas for (``memlint.python.library``)
_READ_LIBRARIES = frozenset({"transformers", "trl", "peft"})
_HandedTo = tuple[str, "int | str", tuple[str, ...]]


@dataclass(frozen=True)
class _Reads:
    """A module's readings of config files into plain mappings (:func:`_config_reads`)."""

    # (the loader, the keys taken) for each place a mapping is loaded
    sites: frozenset[tuple[str, frozenset[str]]] = frozenset()
    # a loaded mapping handed to a function the module imports (from another module of the
    # project, perhaps): (the loader, the keys taken here, {(function, argument position or
    # keyword, the modules it may come from as the import names them)})
    handed_out: frozenset[tuple[str, frozenset[str], frozenset["_HandedTo"]]] = frozenset()
    # the keys each module-level function takes from each of its parameters: (function, the
    # parameter's position, its name, the keys)
    parameters: frozenset[tuple[str, int, str, frozenset[str]]] = frozenset()


class _Scan(NamedTuple):
    """What one module tells about the project's configs (:func:`_scan`)."""

    calls: frozenset[tuple[str, frozenset[str]]]  # its parser calls: (parser name, class names passed)
    classes: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]  # each class's (bases, annotated fields)
    helpers: dict[str, int]  # function name -> the position of its parameter handed to a parser
    reads: _Reads  # its readings of config files into plain mappings
    writes_options: bool  # does it write a config's items as command-line options
    imported_classes: frozenset[tuple[str, str]]  # the classes it passes a parser that it imports: (name, module)
    yaml_loads: frozenset[str]  # how it loads YAML: "safe", "constructing"


# path -> ((mtime_ns, size), its scan)
_FILES: dict[str, tuple[tuple[int, int], _Scan | None]] = {}


class ProjectClasses:
    """One walk of the project's classes and parser calls, for the questions a config's lint asks
    of them (the fields its parsers take, the shape of each class)."""

    def __init__(self, root: Path) -> None:
        self.calls, self.classes, self.parsers, self.imported = _project_scan(root)

    def argument_fields(self) -> frozenset[str]:
        """Field names of the classes the project's code passes to an argument parser (and of
        their bases defined in the project); empty when there are none."""
        return _fields({cls for callee, passed in self.calls if callee in self.parsers for cls in passed},
                       self.classes)

    def unread_argument_classes(self) -> frozenset[str]:
        """The classes the project's code passes to an argument parser that memlint cannot read:
        defined nowhere in the project, imported from a library (a module not of the project)
        other than those whose argument classes memlint knows (ssbuild's chatglm_finetuning parses its YAMLs with
        ``deep_training``'s ``TrainingArgumentsHF``, ``DataArguments`` and the like). Such a class
        may declare any key, so no key of the project's argument files is known to be unknown."""
        parsed = {cls for callee, passed in self.calls if callee in self.parsers for cls in passed}
        return frozenset(name for name, module in self.imported
                         if name in parsed and name not in self.classes
                         and module.split(".")[0] not in _READ_LIBRARIES and not is_library_dataclass(f"{module}.{name}"))

    def shaped_like(self, keys: set[str]) -> bool:
        """Is every one of ``keys`` a field of one class the project defines (with those of its
        bases in the project), or an option of one script's argparse parser? The shape of a config
        of the project's own format (open-r1-code-verifier's frozen ``SFTTrainingConfig``, filled
        field by field from its YAML by a loader of its own; fsdp-llm-posttrain's
        ``configs/rm_qwen3_single_gpu.yaml``, the ``--base-model``, ``--seq-len``,
        ``--grad-accum-steps`` of its ``train_rm.py`` written as a recipe)."""
        return any(keys <= _fields({name}, self.classes) for name in self.classes)

    def options_written_out(self, keys: set[str]) -> bool:
        """Is every one of ``keys`` an option of one script's argparse parser, and not all of them
        fields of the classes the project hands an ``HfArgumentParser``? Then the file is that
        script's command line written as a recipe, which no Trainer reads as its arguments."""
        return (any(keys <= _fields({name}, self.classes) for name in self.classes if name.startswith(_OPTIONS_OF))
                and not keys <= self.argument_fields())


def project_config_reads(root: Path) -> frozenset[tuple[str, frozenset[str]]]:
    """Each place the project's code reads a config file into a plain mapping and takes keys
    from it: (the loader, ``OmegaConf`` or ``yaml``/``json``; the keys read as attributes,
    subscripts or ``.get`` of the name the mapping is bound to, within one function)."""
    found: set[tuple[str, frozenset[str]]] = set()
    for path in _python_files(root):
        scan = _read(path)
        if scan is None:
            continue
        found.update(scan.reads.sites)
        # a mapping handed to another module's function (NguyenAnh2003/llama-finetuning's
        # ``params = load_params(path)`` then ``setup_training_params(params)``, imported from
        # ``setup/setup.py``): the keys that function takes from its parameter are read too
        for loader, keys, calls in scan.reads.handed_out:
            taken = set(keys)
            for function, slot, modules in calls:
                for module in modules:
                    target = _module_path(root, Path(path), module)
                    reads_there = _parameter_reads(str(target)) if target is not None else None
                    for name, position, parameter, read in reads_there or ():
                        if name == function and slot in (position, parameter):
                            taken |= read
            if taken:
                found.add((loader, frozenset(taken)))
    return frozenset(found)


def _module_path(root: Path, importer: Path, module: str) -> Path | None:
    """The project file a module name as ``importer`` writes it stands for: ``pkg.mod`` under
    the root, a ``src/`` folder or the importer's folder; ``.mod`` beside the importer."""
    dots = len(module) - len(module.lstrip("."))
    parts = [p for p in module.lstrip(".").split(".") if p]
    if not parts:
        return None
    bases = [importer.parents[dots - 1]] if dots and dots <= len(importer.parents) else \
        [] if dots else [root, root / "src", importer.parent]
    for base in bases:
        for candidate in (base.joinpath(*parts).with_suffix(".py"), base.joinpath(*parts, "__init__.py")):
            exists = candidate.is_file()
            reads.probe(os.path.abspath(candidate), exists)  # a module added later changes the answer
            if exists:
                return candidate
    return None


# path -> ((mtime_ns, size), the keys its functions take from their parameters)
_PARAMETER_FILES: dict[str, tuple[tuple[int, int], frozenset[tuple[str, int, str, frozenset[str]]] | None]] = {}


def _parameter_reads(path: str) -> frozenset[tuple[str, int, str, frozenset[str]]] | None:
    """(function, parameter position, parameter, keys taken) for the module-level functions of a
    project module that a loaded mapping is handed to (any module: it need name no loader)."""
    def derive(text: str) -> frozenset[tuple[str, int, str, frozenset[str]]] | None:
        module = python_module(text)
        if module is None:
            return None
        reads.document(path, reads.digest(text, None))
        return _config_reads(module).parameters

    return stamped(_PARAMETER_FILES, path, derive)


def project_writes_configs_as_options(root: Path) -> bool:
    """Does the project's code turn a config file into command-line text before its parser
    sees it? ms-swift's ``parse_yaml_args``: ``config = yaml.safe_load(f)``, then for each
    ``k, v`` of it ``--k`` and ``str(v)`` go into ``argv``. argparse then converts each value
    through its option's type, so ``learning_rate: 1e-4`` (a string to YAML 1.1) arrives as a
    float, as under TrlParser's ``--config``."""
    for path in _python_files(root):
        scan = _read(path)
        if scan is not None and scan.writes_options:
            return True
    return False


def script_argument_fields(root: Path, script: Path) -> frozenset[str]:
    """Field names of the classes one script passes to its argument parser (open-instruct's
    ``finetune.py``: ``ArgumentParserPlus((FlatArguments, TokenizerConfig))``), the classes and
    their bases found anywhere in the project: the keys a config that script parses may hold.
    Empty when the script parses no dataclasses."""
    parsed, classes = _script_classes(root, script)
    return _fields(parsed, classes)


def script_own_options(root: Path, script: Path) -> frozenset[str]:
    """The options a script parses into argument classes of its own alone: the fields of the
    classes it passes to its parser when each of them, and each base the project defines for
    them, derives from nothing outside the project (Reward-Model-Overoptimization's
    ``eval_grm.py``: ``HfArgumentParser(ScriptArguments)``, a plain dataclass of
    ``--per_device_eval_batch_size``, ``--max_length``, ``--log_dir``). Such options reach no
    ``TrainingArguments``; empty when a class extends one (or anything else not in the project)."""
    parsed, classes = _script_classes(root, script)
    lineage = _with_bases(parsed, classes) - {"object", "ABC"}
    if not parsed or any(name not in classes for name in lineage):
        return frozenset()  # a class the project does not define (TrainingArguments itself)
    return _fields(parsed, classes)


@functools.lru_cache(maxsize=256)
def script_argparse_options(text: str) -> frozenset[str]:
    """The options a script's text declares on an argparse parser it builds itself
    (``parser.add_argument("--model_dir")``, each spelling of an option with aliases), as a
    launcher's keys are written (``--max-length`` -> ``max_length``). sapbert's ``eval.py`` takes
    ``--model_dir``, ``--max_length`` and ``--use_cuda`` so and only encodes a dictionary."""
    if "add_argument" not in text or "ArgumentParser" not in text:
        return frozenset()
    module = python_module(text)
    if module is None:
        return frozenset()
    return frozenset(key for node in ast.walk(module) for key in _declared_options(node))


def _declared_options(node: ast.AST, dashes: str = "-") -> list[str]:
    """The option keys an ``add_argument("--max-length", "-l", ...)`` call declares, as a launcher
    writes them (``max_length``, ``l``; only the long ones with ``dashes="--"``); none for any
    other node."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"):
        return []
    return [a.value.lstrip("-").replace("-", "_") for a in node.args
            if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith(dashes)]


def _script_classes(root: Path, script: Path) -> tuple[set[str], _Classes]:
    """The classes ``script`` passes to an argument parser, and every class the project defines."""
    own = _read(str(script))
    if own is None:
        return set(), {}
    _, classes, parsers, _ = _project_scan(root)
    return {cls for callee, passed in own.calls if callee in parsers for cls in passed}, classes


_Classes = dict[str, list[tuple[tuple[str, ...], tuple[str, ...]]]]


def _project_scan(root: Path) -> tuple[set[tuple[str, frozenset[str]]], _Classes, set[str], set[tuple[str, str]]]:
    """Every parser call of the project, its classes (name -> their shapes), the names that
    are parsers (the upstream ones and the project's subclasses of them), and the parsed classes
    the project imports from outside it, each with the module it comes from."""
    calls: set[tuple[str, frozenset[str]]] = set()
    classes: _Classes = {}
    helpers: dict[str, int] = {}
    imported: set[tuple[str, str]] = set()
    files = list(_python_files(root))
    # the names a module of the project may be imported by: its files' and folders' names
    local = {part.removesuffix(".py") for path in files for part in Path(os.path.relpath(path, root)).parts}
    for path in files:
        found = _read(path)
        if found is None:
            continue
        calls.update(found.calls)
        imported.update((name, module) for name, module in found.imported_classes if module.split(".")[0] not in local)
        helpers.update(found.helpers)
        for name, shape in found.classes.items():
            classes.setdefault(name, []).append(shape)
    if helpers:  # ms-swift's parse_args(class_type, argv): the classes its callers pass
        calls.add((_UPSTREAM[0], frozenset(passed_classes(files, helpers))))
    # a project's own parser (open-instruct's ArgumentParserPlus(HfArgumentParser)) parses too
    parsers = {*_UPSTREAM, _FROM_A_FILE}
    grown = True
    while grown:
        grown = False
        for name, shapes in classes.items():
            if name not in parsers and any(set(bases) & parsers for bases, _ in shapes):
                parsers.add(name)
                grown = True
    return calls, classes, parsers, imported


def _fields(parsed: set[str], classes: _Classes) -> frozenset[str]:
    """The annotated fields of ``parsed`` classes and of their bases defined in the project."""
    return frozenset(field for name in _with_bases(parsed, classes)
                     for _bases, own in classes.get(name, ()) for field in own)


def _with_bases(parsed: set[str], classes: _Classes) -> set[str]:
    """``parsed`` and every base of theirs, the bases the project defines followed to theirs."""
    todo, seen = list(parsed), set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for bases, _own in classes.get(name, ()):
            todo.extend(bases)
    return seen


def _python_files(root: Path):
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = [d for d in subdirs if d not in _SKIP_DIRS and not d.startswith(".")]
        for name in files:
            if name.endswith(".py"):
                yield os.path.join(directory, name)


def _read(path: str) -> _Scan | None:
    return stamped(_FILES, path, lambda text: _scanned_text(path, text))


def _scanned_text(path: str, text: str) -> _Scan | None:
    if not (_PARSERS.search(text) or _DATACLASS.search(text) or _MODEL_CLASS.search(text)
            or ("(**" in text and "load" in text)
            or _CONFIG_LOAD.search(text) or _READER_CALL.search(text)):
        return None
    reads.document(path, reads.digest(text, None))
    return _scan(text, path)


# the name under which a script's argparse options are kept beside the project's classes: a file
# whose every key is one of them is the script's own options written as a file
_OPTIONS_OF = "argparse options of "


def _scan(text: str, path: str = "") -> _Scan | None:
    """The parser calls' class names and the classes' bases and annotated fields. Read with
    ``ast`` (CPython's parser, in C): this reads every dataclass module of the project, a
    hundred in a training library, and libcst's parser and visitor took a third of a second
    each for what ``ast`` answers in a few milliseconds. The nodes are met in the order a
    libcst visitor meets them (depth first, in source order), so a class defined twice keeps
    its last definition."""
    module = python_module(text)
    if module is None:
        return None
    names: set[tuple[str, frozenset[str]]] = set()
    classes: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    helpers: dict[str, int] = {}
    # ``_TRAIN_ARGS = [ModelArguments, DataArguments, ...]`` then ``HfArgumentParser(_TRAIN_ARGS)``
    # (LLaMA-Factory's hparams/parser.py): the classes a list of the module holds
    lists: dict[str, set[str]] = {}
    loaded: set[str] = set()  # names assigned a mapping read from a file
    unpacking: list[tuple[str, ast.AST]] = []  # ``Cls(**mapping)``: (class name, the mapping)
    renamed: dict[str, str] = {}  # ``from .arguments import FinetuneArgs as TrainArgs``
    imports: dict[str, str] = {}  # a name a from-import binds (as the module names it) -> the module
    options: list[str] = []  # ``parser.add_argument("--seq-len")`` -> seq_len
    stack: list[ast.AST] = [module]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Call):
            _parser_call(node, names)
            unpacking.extend(_unpacked_into_a_class(node))
            options.extend(_declared_options(node, "--"))
            options.extend(_destination(node))
        elif isinstance(node, ast.Assign) and _is_load(node.value):
            loaded.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.ImportFrom):
            renamed.update((a.asname, a.name) for a in node.names if a.asname is not None)
            if node.level == 0 and node.module:  # a relative import is of the project
                imports.update((a.name, node.module) for a in node.names)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, (ast.List, ast.Tuple)):
            held = {n for n in (_last_name(e) for e in node.value.elts) if n}
            if held:
                lists.setdefault(node.targets[0].id, set()).update(held)
        elif isinstance(node, ast.ClassDef):
            bases = tuple(n for n in (_last_name(b) for b in node.bases) if n)
            own = [s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
            classes[node.name] = (bases, tuple(own))
            unpacking.extend((node.name, mapping) for mapping in _built_by_its_classmethods(node))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _helper(node, helpers)
        stack.extend(reversed(list(ast.iter_child_nodes(node))))
    if lists:  # a parser given a list of the module: the classes the list holds
        names = {(callee, frozenset(c for name in passed for c in lists.get(name, {name}))) for callee, passed in names}
    for cls, mapping in unpacking:  # a class built from a mapping read from a file
        if _is_load(mapping) or (isinstance(mapping, ast.Name) and mapping.id in loaded):
            names.add((_FROM_A_FILE, frozenset({cls})))
    if renamed:
        names = {(callee, frozenset(renamed.get(name, name) for name in passed)) for callee, passed in names}
    if options and "ArgumentParser" in text:
        classes[_OPTIONS_OF + path] = ((), tuple(options))
    config_reads = _config_reads(module)
    # only a module that writes ``f"--{key}"`` can turn a config's items into options
    as_options = ('"--{' in text or "'--{" in text) and _config_items_as_options(module)
    yaml_loads = _yaml_loads(text)
    if not names and not classes and config_reads == _Reads() and not as_options and not yaml_loads:
        return None
    parsed_imports = frozenset((cls, imports[cls]) for _, passed in names for cls in passed if cls in imports)
    return _Scan(frozenset(names), classes, helpers, config_reads, as_options, parsed_imports, yaml_loads)


def _yaml_loads(text: str) -> frozenset[str]:
    """How a module reads YAML: "safe" (``yaml.safe_load``, a ``SafeLoader``, a tool's reader),
    "constructing" (``yaml.full_load``, ``yaml.load(f, Loader=yaml.FullLoader)``: Python tags such
    as ``!!python/tuple`` are read)."""
    found = set()
    for match in _YAML_READ.finditer(text):
        function, arguments = match.group(1), match.group(2) or ""
        constructing = function in ("full_load", "unsafe_load") or (
            function == "load" and _CONSTRUCTING_LOADERS.search(arguments) is not None)
        found.add("constructing" if constructing else "safe")
    return frozenset(found)


def project_reads_python_tags(root: Path) -> bool:
    """Does the project's code read its YAML only with loaders that construct Python tags
    (ssbuild's chatglm_finetuning: ``yaml.full_load`` of the train config, whose
    ``!!python/tuple`` is a tuple there), and never with a safe one or a tool's reader?"""
    loads: set[str] = set()
    for path in _python_files(root):
        scan = _read(path)
        if scan is not None:
            loads.update(scan.yaml_loads)
    return loads == {"constructing"}


def _destination(node: ast.Call) -> list[str]:
    """``add_argument(..., dest="lr")``: the attribute the option lands in."""
    if not (isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"):
        return []
    return [k.value.value for k in node.keywords
            if k.arg == "dest" and isinstance(k.value, ast.Constant) and isinstance(k.value.value, str)]


def _config_items_as_options(module: ast.Module) -> bool:
    """A function that reads a config file and writes each of its items as an option: a loop
    ``for k, v in config.items():`` over a mapping the function loaded, whose body builds the
    text ``f"--{k}"`` (ms-swift's ``parse_yaml_args``)."""
    for function in ast.walk(module):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        loaded = {t.id for node in ast.walk(function) if isinstance(node, ast.Assign) and _is_load(node.value)
                  for t in node.targets if isinstance(t, ast.Name)}
        for loop in ast.walk(function):
            if not (isinstance(loop, ast.For) and isinstance(loop.target, ast.Tuple) and loop.target.elts
                    and isinstance(loop.target.elts[0], ast.Name) and isinstance(loop.iter, ast.Call)
                    and isinstance(loop.iter.func, ast.Attribute) and loop.iter.func.attr == "items"
                    and isinstance(loop.iter.func.value, ast.Name) and loop.iter.func.value.id in loaded):
                continue
            key = loop.target.elts[0].id
            for text in ast.walk(loop):
                if isinstance(text, ast.JoinedStr) and len(text.values) >= 2 \
                        and isinstance(text.values[0], ast.Constant) and text.values[0].value == "--" \
                        and isinstance(text.values[1], ast.FormattedValue) \
                        and isinstance(text.values[1].value, ast.Name) and text.values[1].value.id == key:
                    return True
    return False


def _config_reads(module: ast.Module) -> _Reads:
    """In each function (and the module's own body), the names bound to a config file read into
    a mapping and the keys taken from them: ``cfg.lr``, ``cfg["lr"]``, ``cfg.get("lr")``. A
    mapping handed straight to a function of the module (Latte's ``main(OmegaConf.load(path))``)
    is that function's parameter; one handed to a function the module imports is recorded with
    the call, for :func:`project_config_reads` to add the keys that function takes."""
    out: set[tuple[str, frozenset[str]]] = set()
    functions = {n.name: n for n in module.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    owners = _loader_names(module)
    readers = _reader_functions(module, functions, owners)
    scopes: list[ast.AST] = [module, *(n for n in ast.walk(module) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))]
    # per scope: the names bound to a loaded mapping, the keys taken from each name, the calls of
    # the module's functions
    read_in: list[tuple[ast.AST, dict[str, str], dict[str, set[str]], list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, ast.Call]]]] = []
    foreign: dict[int, list[ast.Call]] = {}  # id(scope) -> its calls of functions the module does not define
    origins = _import_origins(module)
    for scope in scopes:
        loaders: dict[str, str] = {}
        keys: dict[str, set[str]] = {}
        calls: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, ast.Call]] = []
        assignments: list[ast.Assign] = []
        for node in _own_nodes(scope):
            loader = None
            if isinstance(node, ast.Assign):
                loader = _loader(node.value, owners) if _is_load(node.value) else _read_through(node.value, readers)
            if loader is not None:
                loaders.update((t.id, loader) for t in node.targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.Assign):
                assignments.append(node)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions:
                calls.append((functions[node.func.id], node))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args + node.keywords:
                foreign.setdefault(id(scope), []).append(node)
            key = _key_read(node)
            if key is not None:
                keys.setdefault(key[0], set()).add(key[1])
        grown = True
        while grown:  # ``cfg = om.merge(yaml_cfg, cli_cfg)`` (the walk is not in source order)
            grown = False
            for assignment in assignments:
                loader = _carried(assignment.value, loaders, owners)
                targets = [t.id for t in assignment.targets if isinstance(t, ast.Name) and t.id not in loaders]
                if loader is not None and targets:
                    loaders.update((target, loader) for target in targets)
                    grown = True
        read_in.append((scope, loaders, keys, calls))
    # a mapping handed on (``evaluate(model, tokenizer, eval_cfg)``) is the parameter it lands in,
    # through as many calls as hand it on
    handed: dict[int, dict[str, str]] = {}  # id(function) -> {parameter: loader}
    # (id(scope), name) -> the (id(function), parameter) it is handed to: the keys the callee
    # takes are the caller's mapping's keys too (a script's ``main`` reads the data keys, its
    # ``build_model(cfg)`` the LoRA ones)
    onward: dict[tuple[int, str], set[tuple[int, str]]] = {}
    for _ in range(len(scopes)):
        grown = False
        for scope, loaders, _keys, calls in read_in:
            bound = {**handed.get(id(scope), {}), **loaders}
            for function, call in calls:
                grown |= _hand_over(function, call, bound, owners, handed, onward.setdefault, id(scope))
        if not grown:
            break
    keys_of = {(id(scope), name): names for scope, _loaders, keys, _calls in read_in for name, names in keys.items()}

    # (id(scope), name) -> the calls of imported functions the mapping is handed to
    handed_away: dict[tuple[int, str], set[_HandedTo]] = {}
    for scope, loaders, _keys, _calls in read_in:
        bound = {**handed.get(id(scope), {}), **loaders}
        for call in foreign.get(id(scope), ()):
            assert isinstance(call.func, ast.Name)
            modules = origins.get(call.func.id, origins.get("*", ()))
            passed: list[tuple[int | str, ast.AST]] = [*enumerate(call.args)]
            passed += [(k.arg, k.value) for k in call.keywords if k.arg]
            for slot, argument in passed:
                if modules and isinstance(argument, ast.Name) and argument.id in bound:
                    handed_away.setdefault((id(scope), argument.id), set()).add((call.func.id, slot, modules))

    def reached(start: tuple[int, str]) -> tuple[set[str], set[_HandedTo]]:
        seen, stack, found, away = {start}, [start], set(), set()
        while stack:
            site = stack.pop()
            found |= keys_of.get(site, set())
            away |= handed_away.get(site, set())
            for nxt in onward.get(site, ()):
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return found, away

    handed_out: set[tuple[str, frozenset[str], frozenset[_HandedTo]]] = set()
    for scope, loaders, keys, _calls in read_in:
        for name, loader in {**handed.get(id(scope), {}), **loaders}.items():
            taken, away = reached((id(scope), name))
            if taken:
                out.add((loader, frozenset(taken)))
            if away:
                handed_out.add((loader, frozenset(taken), frozenset(away)))
    merged = _merged_into_options(module)
    if merged:
        out.add(("yaml/json", merged))
    parameters = frozenset(
        (name, position, parameter.arg, frozenset(keys_of[(id(function), parameter.arg)]))
        for name, function in functions.items()
        for position, parameter in enumerate(function.args.posonlyargs + function.args.args)
        if (id(function), parameter.arg) in keys_of)
    return _Reads(frozenset(out), frozenset(handed_out), parameters)


# a project's own config reader, known by its name (xRAG's ``get_yaml_file(args.config)``)
_READER_NAME = re.compile(r"^(?:get|load|read|parse)_?(?:yaml|json|config|cfg|h?params|settings)(?:_?file|_?config)?$",
                          re.IGNORECASE)
_READER_CALL = re.compile(r"\b(?:get|load|read|parse)_?(?:yaml|json|config|cfg|h?params|settings)(?:_?file|_?config)?\(",
                          re.IGNORECASE)


def _import_origins(module: ast.Module) -> dict[str, tuple[str, ...]]:
    """Each name the module's from-imports bind -> the module it comes from, as written
    (``.utils`` for a relative one); ``*`` -> the modules it star-imports."""
    origins: dict[str, tuple[str, ...]] = {}
    stars: list[str] = []
    for node in module.body:
        if isinstance(node, ast.ImportFrom):
            written = "." * node.level + (node.module or "")
            for alias in node.names:
                if alias.name == "*":
                    stars.append(written)
                else:
                    origins[alias.asname or alias.name] = (written,)
    if stars:
        origins["*"] = tuple(stars)
    return origins


def _reader_functions(module: ast.Module, functions: dict, owners: dict[str, str]) -> dict[str, str]:
    """The module's own functions that return a config file read into a mapping, each with its
    loader: qwen-lora-finetuning's ``def load_config(path): with path.open() as f: return
    yaml.safe_load(f)``, called as ``cfg = load_config(args.config)``. A reader imported from
    another module is known by its name alone (``from utils import load_yaml_config``), read as
    PyYAML or JSON would read it."""
    readers: dict[str, str] = {}
    for name, function in functions.items():
        bound: dict[str, str] = {}
        for node in _own_nodes(function):
            if isinstance(node, ast.Assign) and _is_load(node.value):
                loader = _loader(node.value, owners)
                if loader is not None:
                    bound.update((t.id, loader) for t in node.targets if isinstance(t, ast.Name))
        for node in _own_nodes(function):
            if isinstance(node, ast.Return) and node.value is not None:
                value = node.value
                loader = _loader(value, owners) if _is_load(value) else (
                    bound.get(value.id) if isinstance(value, ast.Name) else None)
                if loader is not None:
                    readers[name] = loader
    for node in module.body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                local = alias.asname or alias.name
                if _READER_NAME.match(alias.name) and local not in readers:
                    readers[local] = "yaml/json"
    return readers


def _read_through(value: ast.AST, readers: dict[str, str]) -> str | None:
    """The loader of ``load_config(path)`` when ``load_config`` is one of ``readers``."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
        return readers.get(value.func.id)
    return None


def _merged_into_options(module: ast.Module) -> frozenset[str]:
    """The keys a script takes from a config file it merges into its argparse options: xRAG's
    ``yaml_config = get_yaml_file(args.config)`` then ``for k, v in yaml_config.items():
    setattr(args, k, v)`` (or ``args = types.SimpleNamespace(**yaml_config)``). Such a file holds
    the script's options, not a Trainer's: the keys are the options the module defines
    (``add_argument("--max_seq_length")``) and the attributes it reads of the merged object."""
    loaded: set[str] = set()
    for node in ast.walk(module):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and (
                _is_load(node.value) or _READER_NAME.match(_last_name(node.value.func) or "")):
            loaded.update(t.id for t in node.targets if isinstance(t, ast.Name))
    if not loaded:
        return frozenset()
    targets: set[str] = set()
    for node in ast.walk(module):
        if isinstance(node, ast.For) and isinstance(node.iter, ast.Call) and isinstance(node.iter.func, ast.Attribute) \
                and node.iter.func.attr == "items" and isinstance(node.iter.func.value, ast.Name) \
                and node.iter.func.value.id in loaded:
            targets.update(c.args[0].id for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
                           and c.func.id == "setattr" and c.args and isinstance(c.args[0], ast.Name))
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                and _last_name(node.value.func) == "SimpleNamespace" \
                and any(k.arg is None and isinstance(k.value, ast.Name) and k.value.id in loaded for k in node.value.keywords):
            targets.update(t.id for t in node.targets if isinstance(t, ast.Name))
    if not targets:
        return frozenset()
    keys: set[str] = set()
    for node in ast.walk(module):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in targets:
            keys.add(node.attr)
        else:
            keys.update(_declared_options(node, dashes="--"))
    return frozenset(keys)


def _loader_names(module: ast.Module) -> dict[str, str]:
    """The names a module calls the config loaders by: ``OmegaConf``, ``yaml``, ... and the names
    it imports them as (``from omegaconf import OmegaConf as om``, ``import yaml as pyyaml``)."""
    names = {owner: owner for owner in _CONFIG_OWNERS}
    for node in ast.walk(module):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.asname is not None and alias.name.rpartition(".")[2] in _CONFIG_OWNERS:
                    names[alias.asname] = alias.name.rpartition(".")[2]
    return names


def _hand_over(function: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call, bound: dict[str, str],
               owners: dict[str, str], handed: dict[int, dict[str, str]], link, caller: int) -> bool:
    """The parameters of ``function`` that ``call`` passes a config loader's result to, directly
    or as a name ``bound`` to one (each such name ``link``-ed to the parameter it lands in);
    whether any is new."""
    def loader_of(argument: ast.AST) -> str | None:
        if isinstance(argument, ast.Name):
            return bound.get(argument.id)
        return _loader(argument, owners) if _is_load(argument) else None

    positional = [a.arg for a in function.args.posonlyargs + function.args.args]
    passed = [(positional[i], a) for i, a in enumerate(call.args) if i < len(positional)]
    passed += [(k.arg, k.value) for k in call.keywords if k.arg is not None]
    grown = False
    for parameter, argument in passed:
        loader = loader_of(argument)
        if loader is not None and isinstance(argument, ast.Name):
            link((caller, argument.id), set()).add((id(function), parameter))
        if loader is not None and handed.setdefault(id(function), {}).get(parameter) != loader:
            handed[id(function)][parameter] = loader
            grown = True
    return grown


def _own_nodes(scope: ast.AST):
    """The nodes of one function (or of the module) that no nested function holds."""
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def _loader(call: ast.AST, owners: dict[str, str]) -> str | None:
    """``OmegaConf`` or ``yaml/json`` for a config loader's call (not ``torch.load``'s checkpoint),
    ``owners`` the names the module calls the loaders by."""
    func = call.func if isinstance(call, ast.Call) else None
    owner = func.value if isinstance(func, ast.Attribute) else None
    if not isinstance(owner, ast.Name) or owner.id not in owners:
        return None
    return "OmegaConf" if owners[owner.id] == "OmegaConf" else "yaml/json"


# OmegaConf's calls that give back the mapping they are handed, merged or converted
_CARRYING = frozenset({"merge", "unsafe_merge", "create", "to_container", "to_object"})


def _carried(value: ast.AST, loaders: dict[str, str], owners: dict[str, str]) -> str | None:
    """The loader of a mapping that ``value`` hands on: ``om.merge(yaml_cfg, cli_cfg)`` (the file
    merged with the command line's overrides, mosaicml/examples' ``main.py``) or
    ``cast(DictConfig, cfg)``; None for anything else."""
    if not isinstance(value, ast.Call) or not value.args:
        return None
    func = value.func
    if _last_name(func) == "cast" and len(value.args) == 2:
        handed = value.args[1]
    elif isinstance(func, ast.Attribute) and func.attr in _CARRYING and isinstance(func.value, ast.Name) \
            and owners.get(func.value.id) == "OmegaConf":
        handed = value.args[0]
    else:
        return None
    return loaders.get(handed.id) if isinstance(handed, ast.Name) else None


def _key_read(node: ast.AST) -> tuple[str, str] | None:
    """``name.key`` (not a method call's name), ``name["key"]``, ``name.get("key")``: (name, key)."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.attr != "get":
        return node.value.id, node.attr
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
            and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.value.id, node.slice.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
            and isinstance(node.func.value, ast.Name) and node.args and isinstance(node.args[0], ast.Constant) \
            and isinstance(node.args[0].value, str):
        return node.func.value.id, node.args[0].value
    return None


def _helper(function: ast.FunctionDef | ast.AsyncFunctionDef, helpers: dict[str, int]) -> None:
    """A function that hands one of its parameters to a parser as the class (ms-swift's
    ``parse_args(class_type, argv)``: ``HfArgumentParser([class_type])``) is a helper."""
    for node in ast.walk(function):
        if not isinstance(node, ast.Call):
            continue
        found: set[tuple[str, frozenset[str]]] = set()
        _parser_call(node, found)
        for _, passed in found:
            for name in passed:
                position = caller_position(function, name)
                if position is not None:
                    helpers[function.name] = position


def _parser_call(node: ast.Call, names: set[tuple[str, frozenset[str]]]) -> None:
    """A call of a parser (by name: which names are parsers is known once every file is read)
    and the class names of its first argument."""
    callee = node.func.attr if isinstance(node.func, ast.Attribute) else (
        node.func.id if isinstance(node.func, ast.Name) else "")
    arguments = sorted([*node.args, *(k.value for k in node.keywords)], key=lambda a: (a.lineno, a.col_offset))
    if "Parser" not in callee or not arguments:
        return
    first = arguments[0]
    first = first.value if isinstance(first, ast.Starred) else first
    items = first.elts if isinstance(first, (ast.Tuple, ast.List)) else [first]
    passed = frozenset(n for n in (_last_name(i.value if isinstance(i, ast.Starred) else i) for i in items) if n)
    if passed:
        names.add((callee, passed))


def _is_load(expr: ast.AST) -> bool:
    """``json.load(f)``, ``yaml.safe_load(f)``, ``OmegaConf.load(path)``: a mapping read from a file."""
    return isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in _LOADERS


def _unpacked_into_a_class(node: ast.Call) -> list[tuple[str, ast.AST]]:
    """``MftTrainArgs(**train_config)``: the class takes the mapping's keys as its fields, as a
    parser would (whether the mapping was read from a file, and whether the class is one of the
    project's, is known once the module, and every file, is read)."""
    cls = _last_name(node.func)
    if cls is None or not cls[:1].isupper():
        return []
    return [(cls, k.value) for k in node.keywords if k.arg is None]


def _built_by_its_classmethods(node: ast.ClassDef) -> list[ast.AST]:
    """``return cls(**data)`` in a ``@classmethod`` of the class (llm-finetune-lab's
    ``FineTuningConfig.from_yaml``, after ``data = yaml.safe_load(f)``): the mappings the class
    is built from, as ``Cls(**mapping)`` would be."""
    mappings: list[ast.AST] = []
    for method in node.body:
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) or not method.args.args or \
                not any(_last_name(d) == "classmethod" for d in method.decorator_list):
            continue
        first = method.args.args[0].arg
        for inner in ast.walk(method):
            if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) and inner.func.id == first:
                mappings.extend(k.value for k in inner.keywords if k.arg is None)
    return mappings


def _last_name(expr: ast.AST) -> str | None:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return None
