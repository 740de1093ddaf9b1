"""A document parsed once: its kind, its tree (libcst or structured), its syntax problems."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable

import libcst as cst

from memlint.documents import kinds, structured
from memlint.documents.kinds import DocumentKind
from memlint.documents.reading import Document
from memlint.python import source as python_source
from memlint.python.tree import children

if TYPE_CHECKING:
    from memlint.facts.plan import RunFacts
    from memlint.python.prefilter import UsedNames


@dataclass
class ParsedDocument:
    """A document parsed once: its kind, its libcst tree or loaded config, its syntax problems,
    and what memlint found in it (facts) or failed on (failures)."""

    document: Document
    kind: DocumentKind
    python: python_source.PythonSource | None = None
    syntax_error: python_source.PythonSyntaxError | None = None
    structured: structured.Structured | None = None
    # the last version of this document that parsed (itself, or the one before a syntax error):
    # the statements an edit leaves alone are taken from it instead of parsed again
    reusable: python_source.PythonSource | None = field(default=None, repr=False, compare=False)
    # what ``memlint.facts.extract.extract`` found in it (None: not extracted yet)
    facts: "list[RunFacts] | None" = field(default=None, repr=False, compare=False)
    # what a script states that trains only through its project's trainer class
    # (``memlint.facts.script.handed_to_project_trainer``; None: not asked yet)
    handed_facts: "list[RunFacts] | None" = field(default=None, repr=False, compare=False)
    # memlint's own failures on it while reading it or extracting its facts (memlint.documents.failures)
    failures: list[str] = field(default_factory=list, repr=False, compare=False)
    # Python that ``memlint check``'s prefilter read and set aside (memlint.python.prefilter):
    # no tree, and nothing memlint reads could have found anything in it
    set_aside: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        self.kind = DocumentKind(self.kind)  # a syntax ("json") is a kind too; anything else is a bug

    @property
    def path(self) -> str:
        return self.document.path

    @property
    def text(self) -> str:
        return self.document.text


# Python that neither imports an ML library nor contains a training-loop word cannot define or
# configure a training run: memlint does not even parse it (a repository's web handlers and
# utilities cost two regular-expression scans). A loop helper module that imports nothing but
# receives the model and optimizer as arguments still has ``backward(`` or ``zero_grad``.
_TRAINING_IMPORT = re.compile(
    r"^[ \t]*(?:from|import)[ \t]+(?:torch|transformers|deepspeed|accelerate|peft|trl|bitsandbytes|"
    r"lightning|pytorch_lightning|axolotl|llamafactory|unsloth|liger_kernel|datasets|apex|"
    r"megatron|fairscale|composer|optimum|mlx|jax|flax|keras)\b",
    re.MULTILINE,
)
_TRAINING_WORD = re.compile(
    r"\.backward\(|zero_grad|optimizer|\bTrainer\b|TrainingArguments|from_pretrained|autocast|"
    r"GradScaler|gradient_checkpointing|empty_cache"
)


def is_training_code(text: str) -> bool:
    return _TRAINING_IMPORT.search(text) is not None or _TRAINING_WORD.search(text) is not None


def _nonlocal_at_module_level(module: cst.Module) -> cst.Nonlocal | None:
    """``nonlocal`` outside any function: ``ast.parse`` and libcst's parser accept it, CPython's
    compiler refuses it, and libcst's scope analysis raises NotImplementedError on it."""
    stack: list[cst.CSTNode] = list(module.body)
    while stack:
        node = stack.pop()
        if isinstance(node, cst.Nonlocal):
            return node
        if not isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.BaseExpression)):
            stack.extend(children(node))  # statements and blocks: expressions hold no statement
    return None


def parse_document(document: Document, previous: ParsedDocument | None = None, whole: bool = False,
                   wanted: "Callable[[UsedNames], bool] | None" = None) -> ParsedDocument:
    """``previous``: the same document as parsed before an edit (the language server's case):
    what did not change is not parsed again. ``whole``: the document will not be edited
    (``memlint check``): Python is parsed in one piece (``python_source.parse``), and set aside
    unparsed by libcst where ``wanted`` says no one needs it (asked of the names it uses)."""
    if document.problem is not None:
        return ParsedDocument(document, DocumentKind(document.syntax))
    if document.syntax == "python" and not is_training_code(document.text):
        return ParsedDocument(document, DocumentKind.PYTHON_OTHER)
    if document.syntax == "python":
        before = previous.reusable if previous is not None else None
        result = python_source.parse(document.text, before, whole=whole, wanted=wanted)
        if result is None:
            return ParsedDocument(document, DocumentKind.PYTHON, set_aside=True)
        if isinstance(result, python_source.PythonSyntaxError):
            # CPython puts some errors (a bad unindent, an unexpected end of file) one column
            # past the end of the line: keep the range inside the document
            error = replace(result, range=result.range.within(document.text))
            return ParsedDocument(document, DocumentKind.PYTHON, syntax_error=error, reusable=before)
        # the walk only where the keyword is written at all (a rare one: most scripts skip it)
        misplaced = _nonlocal_at_module_level(result.module) if "nonlocal" in document.text else None
        if misplaced is not None:
            error = python_source.PythonSyntaxError("nonlocal declaration not allowed at module level",
                                                    result.range_of(misplaced))
            return ParsedDocument(document, DocumentKind.PYTHON, syntax_error=error, reusable=result)
        return ParsedDocument(document, DocumentKind.PYTHON, python=result, reusable=result)
    if document.syntax == "other" and document.text.lstrip().startswith("{"):
        # a file whose name does not say JSON but whose content is a JSON object: a config
        # named by a launcher (open-instruct's ``--deepspeed_config_file stage3_accelerate.conf``)
        loaded = structured.load(document.text, "json")
        if loaded.ok and isinstance(loaded.value, dict):
            return ParsedDocument(document, kinds.detect(document.path, "json", loaded.value), structured=loaded)
    if document.syntax in ("json", "yaml"):
        loaded = structured.load(document.text, document.syntax)
        kind = kinds.detect(document.path, document.syntax, loaded.value)
        return ParsedDocument(document, kind, structured=loaded)
    return ParsedDocument(document, DocumentKind(document.syntax))
