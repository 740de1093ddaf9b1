"""Launch commands in a Makefile's recipes (``make train``): many repositories keep their
training command there, with the model and batch size in make variables.

Each recipe line (a tab-indented line under a target) is read as a shell command, by the
launcher parser, in the Makefile's own text with everything else blanked, so that every fact is
located in the real file. Make's syntax is turned into the shell's at the same length:
``$(MODEL)`` reads as ``${MODEL}``, ``$$USER`` as the shell's ``$USER``, and a recipe's
``@``/``-``/``+`` prefix is dropped. A variable assignment at the top level (``MODEL ?= meta-llama/Llama-3.1-8B``,
``BATCH := 4``, ``LR = 1e-5``) sets the variable for every recipe, located at its value; one
written twice, or inside a conditional, is unknown. Nothing is run: not make, not its ``$(shell)``.
"""

from __future__ import annotations

import re

from memlint.documents.parsed import ParsedDocument
from memlint.facts.extract import extractor
from memlint.facts.launchers import launches_in
from memlint.facts.plan import RunFacts
from memlint.facts.shell_words import Value
from memlint.model.provenance import Sourced

# ``NAME ?= value`` / ``NAME := value`` / ``NAME = value`` / ``override NAME += value`` at column 0
_ASSIGNMENT = re.compile(
    r"^(?:export[ \t]+|override[ \t]+)?(?P<name>[A-Za-z_][\w.-]*)[ \t]*(?P<op>\?=|:=|::=|\+=|!=|=)[ \t]*(?P<value>[^\n#]*)",
    re.M,
)
_CONDITIONAL = re.compile(r"^[ \t]*(ifeq|ifneq|ifdef|ifndef|else|endif)\b")
_TARGET = re.compile(r"^[^\t#\s][^:=\n]*::?(?!=)")
_MAKE_VARIABLE = re.compile(r"\$\(([A-Za-z_][\w]*)\)")
_SHELL_VARIABLE = re.compile(r"\$\$(\w+|\{[^}\n]*\})")  # make's ``$$USER`` is the shell's ``$USER``


def recipe_text(text: str) -> str:
    """``text`` with all but its recipe lines blanked and make's syntax in the shell's, at the
    same length (offsets hold)."""
    kept = ["\n" if c == "\n" else " " for c in text]
    position = 0
    in_rule = continued = False
    for line in text.split("\n"):
        end = position + len(line)
        if (line.startswith("\t") and in_rule) or continued:
            body = line.lstrip(" \t")
            # a command's first line may carry make's prefixes; a continued line is the shell's
            stripped = body if continued else body.lstrip("@-+ \t")
            start = end - len(stripped)
            shell = _SHELL_VARIABLE.sub(lambda m: "$" + m.group(1) + " ",
                                        _MAKE_VARIABLE.sub(lambda m: "${" + m.group(1) + "}", stripped))
            kept[start:end] = shell
            continued = line.rstrip().endswith("\\")
        elif line.strip() and not line.lstrip().startswith("#"):
            in_rule = _TARGET.match(line) is not None and _ASSIGNMENT.match(line) is None
        position = end + 1
    return "".join(kept)


def make_variables(text: str) -> dict[str, Value | None]:
    """The top-level variable assignments, located at their values (None: unknown)."""
    found: dict[str, Value | None] = {}
    depth = 0
    for match in re.finditer(r"^[^\n]*", text, re.M):
        line = match.group(0)
        conditional = _CONDITIONAL.match(line)
        if conditional is not None:
            word = conditional.group(1)
            depth += 1 if word.startswith("if") else (-1 if word == "endif" else 0)
            continue
        if line.startswith("\t"):
            continue
        assigned = _ASSIGNMENT.match(line)
        if assigned is None:
            continue
        name, op, value = assigned.group("name"), assigned.group("op"), assigned.group("value").rstrip()
        start = match.start() + assigned.start("value")
        if depth or op in ("+=", "!=") or "$" in value or name in found or not value:
            found[name] = None  # conditional, appended, computed, or set twice: which value runs is unknown
        else:
            found[name] = Value(value.strip("\"'"), start + (1 if value[:1] in "\"'" else 0),
                                start + len(value) - (1 if value[-1:] in "\"'" else 0))
    return found


@extractor("makefile")
def extract_makefile(parsed: ParsedDocument) -> list[RunFacts]:
    text = parsed.text
    if parsed.document.problem is not None or not text or "\t" not in text:
        return []
    recipes = recipe_text(text)
    out = []
    for facts in launches_in(parsed, recipes, make_variables(text)):
        launched = facts.launches
        if launched is None:
            continue
        facts.launches = Sourced(launched.value, launched.origin, f"{launched.note} (a Makefile recipe)")
        out.append(facts)
    return out
