"""Code actions for memlint's diagnostics, built from what each diagnostic carries in ``data``.

- the rule's fix, as a quick fix (preferred when the fix is safe);
- "Ignore CODE on this line" for Python and YAML (``# memlint: ignore[CODE]``, merged into a
  suppression comment already on the line);
- "Ignore CODE in this file" for JSON, which has no comments: a per-file ignore added to the
  settings file (see ``per_file_ignores``);
- MEM001's cheapest changes that make a run fit: edits of the lines that set the values
  (preferred), or actions that explain the change (a server command shows where to set it)
  when no edit can make it; "Ignore CODE on this line" comes after them, never preferred.

An action that would break the file (a comment appended inside a multi-line string or a
YAML block scalar) is not offered.
"""

from __future__ import annotations

import io
import tokenize
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from lsprotocol import types

from memlint.lint import suppress
from memlint.lsp.convert import SOURCE, position_at_offset, range_from_json, split_lines
from memlint.lsp.per_file_ignores import SettingsEdit

EXPLAIN_COMMAND = "memlint.explainSuggestion"
SUGGESTION_KIND = "quickfix.memlint.suggestion"
IGNORE_KIND = types.CodeActionKind.QuickFix


@dataclass(frozen=True)
class EditSupport:
    """How the client takes workspace edits."""

    document_changes: bool = False  # versioned TextDocumentEdits
    create_files: bool = False  # CreateFile resource operations

    @classmethod
    def of(cls, capabilities: types.ClientCapabilities) -> "EditSupport":
        workspace_edit = capabilities.workspace.workspace_edit if capabilities.workspace else None
        if workspace_edit is None:
            return cls()
        operations = workspace_edit.resource_operations or []
        return cls(
            document_changes=bool(workspace_edit.document_changes),
            create_files=bool(workspace_edit.document_changes) and types.ResourceOperationKind.Create in operations,
        )


def workspace_edit(edits: dict[str, list[types.TextEdit]], versions: dict[str, int | None],
                   support: EditSupport, create: Iterable[str] = ()) -> types.WorkspaceEdit:
    """Edits by URI; versioned when the client can check versions (a stale edit is refused)."""
    create = list(create)
    if not support.document_changes and not create:
        return types.WorkspaceEdit(changes=edits)
    changes: list[Any] = [types.CreateFile(uri=uri, options=types.CreateFileOptions(ignore_if_exists=True)) for uri in create]
    for uri, text_edits in edits.items():
        identifier = types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=versions.get(uri))
        changes.append(types.TextDocumentEdit(text_document=identifier, edits=list(text_edits)))
    return types.WorkspaceEdit(document_changes=changes)


def wanted(kind: str, only: Sequence[str] | None) -> bool:
    if not only:
        return True
    return any(kind == o or kind.startswith(f"{o}.") for o in only)


def is_ours(diagnostic: types.Diagnostic) -> bool:
    return diagnostic.source == SOURCE and isinstance(diagnostic.code, str)


def _data(diagnostic: types.Diagnostic) -> dict[str, Any]:
    return diagnostic.data if isinstance(diagnostic.data, dict) else {}


# ----------------------------------------------------------------- fixes


def fix_action(diagnostic: types.Diagnostic, versions: dict[str, int | None], support: EditSupport) -> types.CodeAction | None:
    fix = _data(diagnostic).get("fix")
    if not isinstance(fix, dict) or not fix.get("edits"):
        return None
    edits: dict[str, list[types.TextEdit]] = {}
    try:
        for edit in fix["edits"]:
            edits.setdefault(edit["uri"], []).append(
                types.TextEdit(range=range_from_json(edit["range"]), new_text=str(edit["newText"]))
            )
    except (KeyError, TypeError, ValueError):
        return None  # data the client mangled: offer nothing rather than a wrong edit
    safe = bool(fix.get("safe"))
    title = f"{diagnostic.code}: {fix.get('title') or 'apply the fix'}" + ("" if safe else " (unsafe)")
    return types.CodeAction(
        title=title,
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[diagnostic],
        is_preferred=safe,
        edit=workspace_edit(edits, versions, support),
    )


# ----------------------------------------------------------------- suppression comments


def _comment_on_line(text: str, line: int) -> bool:
    """Does ``line`` (1-based) of Python ``text`` hold a memlint comment token? None when the
    text does not tokenize (a buffer mid-edit): the caller cannot check, and trusts the edit."""
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.start[0] > line:
                return False
            if token.type == tokenize.COMMENT and token.start[0] == line and "memlint" in token.string:
                return True
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return True
    return False


def _same_yaml(before: str, after: str) -> bool:
    from memlint.documents.structured import load

    old = load(before, "yaml")
    if not old.ok:
        return True  # cannot check a file that does not load: the comment is still a comment line
    new = load(after, "yaml")
    return new.ok and new.value == old.value


def ignore_line_action(diagnostic: types.Diagnostic, uri: str, text: str, version: int | None,
                       codec, support: EditSupport) -> types.CodeAction | None:
    syntax = _data(diagnostic).get("syntax")
    if syntax not in ("python", "yaml"):
        return None
    lines = split_lines(text)
    index = diagnostic.range.start.line
    if index >= len(lines):
        return None
    line = lines[index]
    new_line = suppress.add_to_line(line, str(diagnostic.code), syntax)
    if new_line == line:
        return None
    edited = "\n".join(lines[:index] + [new_line] + lines[index + 1:])
    original = "\n".join(lines)
    if syntax == "python" and not _comment_on_line(edited, index + 1):
        return None
    if syntax == "yaml" and not _same_yaml(original, edited):
        return None
    edit = types.TextEdit(
        range=types.Range(types.Position(index, 0), types.Position(index, codec.client_num_units(line))),
        new_text=new_line,
    )
    return types.CodeAction(
        title=f"Ignore {diagnostic.code} on this line",
        kind=IGNORE_KIND,
        diagnostics=[diagnostic],
        edit=workspace_edit({uri: [edit]}, {uri: version}, support),
    )


def ignore_file_action(diagnostic: types.Diagnostic, settings_edit: SettingsEdit, settings_uri: str,
                       settings_version: int | None, codec, support: EditSupport) -> types.CodeAction | None:
    """'Ignore CODE in this file' as a per-file ignore in the settings file (JSON documents)."""
    if settings_edit.created and not support.create_files:
        return None  # the client cannot create the settings file
    old, new = settings_edit.old_text, settings_edit.new_text
    prefix = 0
    while prefix < min(len(old), len(new)) and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < min(len(old), len(new)) - prefix and old[-1 - suffix] == new[-1 - suffix]:
        suffix += 1
    start = position_at_offset(codec, old, prefix)
    end = position_at_offset(codec, old, len(old) - suffix)
    text_edit = types.TextEdit(range=types.Range(start, end), new_text=new[prefix: len(new) - suffix])
    return types.CodeAction(
        title=f"Ignore {diagnostic.code} in this file (per-file-ignores in {settings_edit.path.name})",
        kind=IGNORE_KIND,
        diagnostics=[diagnostic],
        edit=workspace_edit({settings_uri: [text_edit]}, {settings_uri: settings_version}, support,
                            create=[settings_uri] if settings_edit.created else []),
    )


# ----------------------------------------------------------------- MEM001 suggestions


def suggestion_actions(diagnostic: types.Diagnostic, versions: dict[str, int | None], support: EditSupport,
                       limit: int = 4) -> list[types.CodeAction]:
    """The changes that make the run fit: an edit of the lines that set the values (preferred)
    when the files can say it, else an action that explains where to make the change. A
    change that does not make the run fit is no fix (the hover's sheet lists it)."""
    out = []
    for suggestion in [s for s in _data(diagnostic).get("suggestions") or [] if s.get("fits")][:limit]:
        title = (f"{diagnostic.code}: {suggestion['change']} "
                 f"(−{suggestion['saves_gib']:.1f} GiB → {suggestion['peak_gib']:.1f} GiB — fits)")
        edits: dict[str, list[types.TextEdit]] = {}
        try:
            for edit in suggestion.get("edits") or []:
                edits.setdefault(edit["uri"], []).append(
                    types.TextEdit(range=range_from_json(edit["range"]), new_text=str(edit["newText"])))
        except (KeyError, TypeError, ValueError):
            edits = {}  # data the client mangled: explain instead of a wrong edit
        if edits:
            out.append(types.CodeAction(title=title, kind=SUGGESTION_KIND, diagnostics=[diagnostic],
                                        is_preferred=True, edit=workspace_edit(edits, versions, support)))
            continue
        out.append(types.CodeAction(
            title=title,
            kind=SUGGESTION_KIND,
            diagnostics=[diagnostic],
            command=types.Command(title=title, command=EXPLAIN_COMMAND, arguments=[{
                "code": diagnostic.code,
                "change": suggestion["change"],
                "how": suggestion.get("how", ""),
            }]),
        ))
    return out


def explanation(argument: Any) -> str:
    """The message the explain command shows for one suggestion."""
    if not isinstance(argument, dict):
        return "memlint: nothing to explain"
    how = argument.get("how") or ""
    return f"memlint {argument.get('code', '')}: {argument.get('change', '')}" + (f" — set {how}" if how else "")
