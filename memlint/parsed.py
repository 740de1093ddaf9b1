"""A document parsed once: its kind, its tree (libcst or structured), its syntax problems."""

from __future__ import annotations

from dataclasses import dataclass

from memlint import kinds
from memlint.documents import Document
from memlint.sources import python as python_source
from memlint.sources import structured


@dataclass
class ParsedDocument:
    document: Document
    kind: str  # "python", "shell", "deepspeed", "accelerate", "axolotl", "llamafactory", "hf-args", "json", "yaml", "other"
    python: python_source.PythonSource | None = None
    syntax_error: python_source.PythonSyntaxError | None = None
    structured: structured.Structured | None = None

    @property
    def path(self) -> str:
        return self.document.path

    @property
    def text(self) -> str:
        return self.document.text


def parse_document(document: Document) -> ParsedDocument:
    if document.problem is not None:
        return ParsedDocument(document, document.syntax)
    if document.syntax == "python":
        result = python_source.parse(document.text)
        if isinstance(result, python_source.PythonSyntaxError):
            return ParsedDocument(document, "python", syntax_error=result)
        return ParsedDocument(document, "python", python=result)
    if document.syntax in ("json", "yaml"):
        loaded = structured.load(document.text, document.syntax)
        kind = kinds.detect(document.path, document.syntax, loaded.value)
        return ParsedDocument(document, kind, structured=loaded)
    return ParsedDocument(document, document.syntax)
