"""The rule reference: one Markdown page per rule, generated from the rule's own code.

A page is the rule's docstring sections plus its first INVALID example ("Example") and
first VALID example ("Use instead"), so the page, ``memlint rule CODE`` and the hover all
say what the tests check. ``python -m memlint.output.rule_pages`` writes ``rules/``;
``python -m memlint.output.rule_pages --check`` exits 1 when a committed page differs from what the code
generates (CI and ``tests/test_rule_docs.py`` run it).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:  # the rules (and libcst) load when a page is rendered, not with the CLI's parser
    from memlint.rules.base import Example, Rule


def all_rules() -> "dict[str, type[Rule]]":
    from memlint.rules import all_rules as registered

    return registered()


def section(doc: str, title: str) -> str:
    from memlint.rules.base import section as find

    return find(doc, title)


RULES_DIR = Path(__file__).resolve().parents[2] / "rules"  # beside the package in a checkout
INDEX = "README.md"

_FENCES = {
    ".py": "python",
    ".json": "json",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".toml": "toml",
    ".sh": "bash",
    ".cfg": "ini",
    ".ini": "ini",
}
_FIX = {
    None: "none",
    "safe": "safe — applied by `memlint check --fix`",
    "unsafe": "unsafe — offered in the editor and applied by `memlint check --fix --unsafe-fixes`",
}


def fence_language(path: str) -> str:
    """The Markdown fence language of an example file (``json`` for ``ds_config.json``)."""
    return _FENCES.get(Path(path).suffix.lower(), "text")


def sections(doc: str) -> list[tuple[str, str]]:
    """The ``## Title`` sections of a rule docstring, in order, with their text."""
    titles = re.findall(r"^\s*## (.+?)\s*$", doc or "", flags=re.MULTILINE)
    return [(title, section(doc, title)) for title in titles]


def _fenced(path: str, text: str | bytes) -> str:
    if isinstance(text, bytes):  # an example of a file that is not valid UTF-8: show its bytes
        text = text.decode("utf-8", "backslashreplace")
    body = text if text.endswith("\n") else text + "\n"
    fence = "````" if "```" in body else "```"
    return f"`{path}`:\n\n{fence}{fence_language(path)}\n{body}{fence}\n"


def _settings_block(example: Example) -> str:
    if not example.settings:
        return ""
    lines = ["[tool.memlint]"]
    for key, value in example.settings.items():
        rendered = (
            f'"{value}"' if isinstance(value, str) else str(value).lower() if isinstance(value, bool) else str(value)
        )
        lines.append(f"{key.replace('_', '-')} = {rendered}")
    return "With these settings:\n\n```toml\n" + "\n".join(lines) + "\n```\n"


def render_example(example: Example) -> str:
    parts = []
    if example.title:
        parts.append(f"{example.title}\n")
    settings = _settings_block(example)
    if settings:
        parts.append(settings)
    parts.append(_fenced(example.path, example.source))
    for path, text in example.files.items():
        parts.append(_fenced(path, text))
    return "\n".join(parts)


def render_rule(rule: type[Rule]) -> str:
    """The Markdown page of one rule."""
    lines = [f"# {rule.code}: {rule.name}", ""]
    lines.append(f"Severity: {rule.severity} · Fix: {_FIX.get(rule.fix_applicability, rule.fix_applicability)}")
    lines.append("")
    for title, text in sections(rule.__doc__ or ""):
        lines += [f"## {title}", "", text, ""]
    if rule.INVALID:
        lines += ["## Example", "", render_example(rule.INVALID[0])]
    if rule.VALID:
        lines += ["## Use instead", "", render_example(rule.VALID[0])]
    return "\n".join(lines).rstrip("\n") + "\n"


def short_summary(rule: type[Rule]) -> str:
    """The first sentence of what the rule does, on one line."""
    text = " ".join(rule.summary().split())
    first = re.split(r"(?<=\.)\s", text, maxsplit=1)[0]
    if first.endswith(":"):  # "finds X:" followed by a list
        first = first[:-1] + "."
    return first.replace("|", "\\|")


def render_index(rules: dict[str, type[Rule]]) -> str:
    lines = [
        "# Rule reference",
        "",
        "One page per rule, generated from the rules' code by `python -m memlint.output.rule_pages` "
        "(a test fails when a page is stale).",
        "",
        "| Code | Name | Severity | Summary |",
        "| --- | --- | --- | --- |",
    ]
    for code, rule in rules.items():
        lines.append(f"| [{code}]({code}.md) | {rule.name} | {rule.severity} | {short_summary(rule)} |")
    return "\n".join(lines) + "\n"


def expected_pages(rules: dict[str, type[Rule]] | None = None) -> dict[str, str]:
    """File name -> content of every page the rules generate."""
    rules = all_rules() if rules is None else rules
    pages = {f"{code}.md": render_rule(rule) for code, rule in rules.items()}
    pages[INDEX] = render_index(rules)
    return pages


def stale_pages(directory: Path = RULES_DIR) -> list[str]:
    """Pages that are missing, differ from the generated text, or belong to no rule."""
    expected = expected_pages()
    stale = []
    for name, text in expected.items():
        path = directory / name
        try:
            current = path.read_text(encoding="utf-8")
        except OSError:
            current = None
        if current != text:
            stale.append(name)
    if directory.is_dir():
        for path in sorted(directory.glob("*.md")):
            if path.name not in expected:
                stale.append(path.name)
    return sorted(stale)


def write_pages(directory: Path = RULES_DIR) -> list[str]:
    """Write every page; remove pages of rules that no longer exist. Returns what changed."""
    directory.mkdir(parents=True, exist_ok=True)
    changed = []
    expected = expected_pages()
    for name, text in expected.items():
        path = directory / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(name)
    for path in sorted(directory.glob("*.md")):
        if path.name not in expected:
            path.unlink()
            changed.append(path.name)
    return changed


# ---------------------------------------------------------------------- memlint rule


def find_rule(query: str) -> type[Rule]:
    """A rule by code (any case) or name; raise LookupError with suggestions."""
    rules = all_rules()
    wanted = query.strip()
    for code, rule in rules.items():
        if wanted.upper() == code or wanted.lower() == rule.name:
            return rule
    from memlint.catalog.names import suggestions

    hint = suggestions(wanted, [*rules, *(r.name for r in rules.values())])
    more = f"; did you mean {', '.join(hint)}?" if hint else ""
    raise LookupError(f"unknown rule {query!r}{more} (`memlint rule --all` lists them)")


def add_rule_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("code", nargs="?", help="a rule code (AMP001) or name (fp16-without-loss-scaling)")
    parser.add_argument("--all", action="store_true", help="list every rule")


def run_rule_command(args) -> int:
    """``memlint rule CODE`` prints the page; ``--all`` lists the rules; exit 2 on an unknown code."""
    if args.all:
        for code, rule in all_rules().items():
            print(f"{code}  {rule.name:<36} {str(rule.severity):<8} {short_summary(rule)}")
        return 0
    if not args.code:
        print("memlint: error: give a rule code, or --all", file=sys.stderr)
        return 2
    try:
        rule = find_rule(args.code)
    except LookupError as error:
        print(f"memlint: error: {error}", file=sys.stderr)
        return 2
    print(render_rule(rule), end="")
    return 0


# ---------------------------------------------------------------------- python -m memlint.output.rule_pages


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memlint.output.rule_pages", description="Generate the rule pages in rules/.")
    parser.add_argument("--check", action="store_true", help="exit 1 when a page is stale instead of writing")
    parser.add_argument("--dir", type=Path, default=RULES_DIR, help="where the pages live (default: rules/)")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_pages(args.dir)
        for name in stale:
            print(f"stale: {args.dir / name}", file=sys.stderr)
        if stale:
            print("run `python -m memlint.output.rule_pages` to regenerate the rule pages", file=sys.stderr)
            return 1
        return 0
    for name in write_pages(args.dir):
        print(f"wrote {args.dir / name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
