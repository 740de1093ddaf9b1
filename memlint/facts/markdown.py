"""Launch commands written in a project's Markdown: its README's code blocks.

For many repositories the README is the only launcher there is (alignment-handbook's recipes:
``accelerate launch --config_file recipes/accelerate_configs/zero3.yaml scripts/sft.py --config
recipes/smollm2/sft/config.yaml``). Without it a recipe is judged alone, on one GPU with no ZeRO,
and a run that fits on the eight GPUs the README starts is reported out of memory.

A command is read only inside a fenced code block (```` ``` ```` or ``~~~``) whose info string is
empty, names a shell (``bash``, ``sh``, ``shell``, ``console``, ``zsh``), or names no language
whose text is something else: prose and Python, YAML or JSON blocks are left alone, while a block
labelled by an editor's accident (ChatGLM3's ```` ```angular2html ```` around ``python
finetune_hf.py ...``) is read, since only lines that start a launcher become launches. Each command is a launch as a shell script's would be (the same parser,
``$ `` prompts and ``VAR=value`` prefixes allowed); which of them start a script of the project is
for the project to decide (:meth:`memlint.project.Project.runs_for`).
"""

from __future__ import annotations

import copy
import posixpath
import re

from memlint.documents.parsed import ParsedDocument
from memlint.facts.extract import extractor
from memlint.facts.launchers import Invocation, blanked, command_region, invocations, launches_in
from memlint.facts.plan import RunFacts
from memlint.model.provenance import Sourced

SHELL_INFO = frozenset({"", "sh", "bash", "shell", "console", "zsh", "shell-session", "bash-session",
                        "sh-session", "terminal"})
# info strings of code blocks whose lines are not shell commands (a ``python train.py`` line in
# one is code or output, not a launch)
NOT_SHELL = frozenset({"python", "py", "python3", "pycon", "ipython", "json", "jsonc", "json5", "yaml", "yml",
                       "toml", "ini", "cfg", "xml", "html", "css", "js", "javascript", "ts", "typescript",
                       "c", "cpp", "c++", "cuda", "java", "go", "rust", "r", "sql", "latex", "tex", "bibtex",
                       "markdown", "md", "diff", "patch", "mermaid", "text", "txt", "plaintext", "log",
                       "output", "csv", "tsv", "dockerfile", "docker", "makefile", "make", "jinja", "jinja2",
                       "powershell", "ps1", "bat", "cmd", "batch", "matlab", "julia", "lua", "ruby", "php",
                       "scala", "kotlin", "swift", "protobuf", "proto", "graphql", "svg", "dot"})
_FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n]*)$", re.M)


def shell_blocks(text: str) -> list[tuple[int, int]]:
    """The (start, end) offsets of the bodies of the fenced code blocks that hold shell commands.
    A fence closes at the next fence line of the same character at least as long (CommonMark);
    an unclosed block runs to the end of the document."""
    blocks: list[tuple[int, int]] = []
    position = 0
    while True:
        opening = _FENCE.search(text, position)
        if opening is None:
            return blocks
        fence = opening.group("fence")
        info = opening.group("info").strip()
        if fence[0] == "`" and "`" in info:
            position = opening.end()  # an inline code span, not a fence
            continue
        body = opening.end() + 1
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.M).search(text, body)
        end = closing.start() if closing is not None else len(text)
        language = info.split()[0].lower().lstrip("{.").rstrip("}") if info else ""
        if (language in SHELL_INFO or language not in NOT_SHELL) and body <= end:
            blocks.append((body, end))
        if closing is None:
            return blocks
        position = closing.end()


@extractor("markdown")
def extract_markdown(parsed: ParsedDocument) -> list[RunFacts]:
    text = parsed.text
    if parsed.document.problem is not None or not text or ("```" not in text and "~~~" not in text):
        return []
    blocks = shell_blocks(text)
    kept: list[str] = []
    done = 0
    for start, end in blocks:
        kept += [blanked(text[done:start]), command_region(text, start, end, assignments=True)]
        done = end
    kept.append(blanked(text[done:]))
    out = []
    stand_ins = _stand_ins(text, blocks)
    for facts in launches_in(parsed, "".join(kept), blocks=[start for start, _ in blocks]):
        launched = facts.launches
        if launched is None:
            continue
        facts.launches = Sourced(launched.value, launched.origin, f"{launched.note} (a command in a code block)")
        out.append(facts)
        script = str(launched.value)
        for documented, stand_in, line in stand_ins:
            if posixpath.basename(script) == posixpath.basename(documented):
                other = copy.copy(facts)
                swapped = posixpath.join(posixpath.dirname(script), stand_in) if "/" not in stand_in else stand_in
                other.launches = Sourced(swapped, launched.origin, f"{launched.note} (a command in a code block, "
                                         f"with {stand_in} in place of {documented}, as line {line} says)")
                out.append(other)
    return out


# Prose that names a script as a stand-in for another in its documented commands ("supervised-fine-tune.py
# can be replaced by supervised-fine-tune-qlora.py if you want 4-bit fine-tuning", "replace `train.py` with
# `train_lora.py`", "use `train_lora.py` instead of `train.py`").
_SCRIPT = r"`?(?P<{}>[\w./-]+\.(?:py|sh))`?"
_STAND_IN = (
    re.compile(rf"{_SCRIPT.format('a')}\s+(?:can|could|may)\s+(?:also\s+)?be\s+replaced\s+(?:by|with)\s+"
               rf"{_SCRIPT.format('b')}", re.I),
    re.compile(rf"\breplac(?:e|ing)\s+{_SCRIPT.format('a')}\s+(?:by|with)\s+{_SCRIPT.format('b')}", re.I),
    re.compile(rf"\b(?:use|run)\s+{_SCRIPT.format('b')}\s+instead\s+of\s+{_SCRIPT.format('a')}", re.I),
)


def _stand_ins(text: str, blocks: list[tuple[int, int]]) -> list[tuple[str, str, int]]:
    """(documented script, its stand-in, 1-based line) for each such sentence outside the code blocks."""
    lowered = text.lower()
    if "replac" not in lowered and "instead of" not in lowered:
        return []
    prose = list(text)
    for start, end in blocks:
        prose[start:end] = ["\n" if c == "\n" else " " for c in text[start:end]]
    found = []
    for pattern in _STAND_IN:
        for match in pattern.finditer("".join(prose)):
            if posixpath.basename(match["a"]) != posixpath.basename(match["b"]):
                found.append((match["a"], match["b"], text.count("\n", 0, match.start()) + 1))
    return found


def shell_invocations(parsed: ParsedDocument) -> list[Invocation]:
    """The commands in the document's shell code blocks that run a shell script of the project
    (``sh scripts/finetune_with_accelerate_config.sh 8 configs/train_configs/sft/olmo.yaml``,
    ``sbatch --nodes=1 slurm/train.slurm --config v00.00``)."""
    text = parsed.text
    if parsed.document.problem is not None or not any(s in text for s in (".sh", ".slurm", ".sbatch", "sbatch")):
        return []
    kept = ["\n" if c == "\n" else " " for c in text]
    for start, end in shell_blocks(text):
        kept[start:end] = text[start:end]
    return invocations(parsed, "".join(kept))
