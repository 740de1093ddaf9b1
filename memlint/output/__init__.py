"""Output formats for ``memlint check``: they translate diagnostics, nothing more."""

from __future__ import annotations

from typing import Callable

from memlint.model.diagnostics import Diagnostic

Formatter = Callable[[list[Diagnostic], "FormatContext"], str]


class FormatContext:
    """What a formatter may need besides the diagnostics: file texts (for snippets), the
    working directory (for relative paths)."""

    def __init__(self, cwd, read_text: Callable[[str], str | None], color: bool = False) -> None:
        self.cwd = cwd
        self.read_text = read_text
        self.color = color

    def relative(self, path: str) -> str:
        from pathlib import Path

        try:
            return Path(path).resolve().relative_to(Path(self.cwd).resolve()).as_posix()
        except (ValueError, OSError):
            return str(path)


def formatter(name: str) -> Formatter:
    """The format's function; only its module is imported (JSON and SARIF load the rules for
    their names and links, which text output does not need)."""
    import importlib

    module, function = {
        "text": ("text", "format_text"),
        "concise": ("text", "format_concise"),
        "json": ("json_format", "format_json"),
        "sarif": ("sarif", "format_sarif"),
        "github": ("github", "format_github"),
        "gitlab": ("gitlab", "format_gitlab"),
    }[name]
    return getattr(importlib.import_module(f"memlint.output.{module}"), function)


FORMATS = ("text", "concise", "json", "sarif", "github", "gitlab")
