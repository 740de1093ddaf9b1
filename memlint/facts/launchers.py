"""Launcher scripts: ``torchrun``, ``deepspeed``, ``accelerate launch`` and ``python`` commands.

Each launch command in a shell script is one run: the script it launches (``launches``), the
options it passes to that script (``cli_args``, applied later through the script's
``cli_bindings``), the world size it starts (``--nproc_per_node`` x ``--nnodes``,
``--num_gpus``, ``--include localhost:0,1``, ``--num_processes``) and the configs it names
(``--deepspeed ds.json``, ``--config_file accelerate.yaml``). Every value is located in the
shell script, at the word that wrote it -- or at the variable assignment it expands.
"""

from __future__ import annotations

import bisect
import posixpath
import re
from dataclasses import dataclass, field
from itertools import accumulate

import libcst as cst

from memlint.catalog.models import looks_like_placeholder
from memlint.documents.parsed import ParsedDocument
from memlint.facts.extract import extractor
from memlint.facts.plan import MODEL_PARALLEL_ADVICE, SEQUENCE_SPLIT_ADVICE, RunFacts
from memlint.facts.shell_paths import anchored_assignments
from memlint.facts.shell_words import (
    Command,
    is_append,
    Value,
    Variables,
    Word,
    assignment,
    body_commands,
    body_words,
    commands,
    expand,
    line_starts,
    option_variables,
    template,
)
from memlint.facts.shell_writes import copied_from
from memlint.model.diagnostics import Position, Range
from memlint.model.provenance import Location, Sourced
from memlint.python import option_formulas
from memlint.python.options import option_key

# value-less options of each launcher (everything else takes a value unless written --x=y)
_FLAGS = {
    "torchrun": {"standalone", "no_python", "run_path", "module", "m", "virtual_local_rank", "monitor_interval"},
    "deepspeed": {"no_python", "no_local_rank", "no_ssh_check", "no_ssh", "force_multi", "save_pid", "module",
                  "elastic_training", "bind_cores_to_rank", "enable_each_rank_log", "autotuning_off"},
    "accelerate": {"quiet", "q", "cpu", "multi_gpu", "tpu", "enable_cpu_affinity", "dynamo_use_fullgraph",
                   "dynamo_use_dynamic", "dynamo_use_regional_compilation", "use_deepspeed", "use_fsdp",
                   "use_parallelism_config", "use_megatron_lm", "same_network", "module", "m", "no_python",
                   "tpu_cluster", "no_tpu_cluster", "tpu_use_sudo", "downcast_bf16", "fp8_use_autocast_during_eval",
                   "debug"},
    "python": {"u", "b", "bb", "B", "d", "E", "i", "I", "O", "OO", "q", "s", "S", "v", "V", "x", "P", "R"},
}
_PYTHON_VALUED = {"W", "X", "c"}
_MODULE_FLAGS = {"module", "m"}
_TORCHRUN_MODULES = ("torch.distributed.run", "torch.distributed.launch")
_CONFIG_SUFFIXES = (".json", ".yaml", ".yml")
_HYDRA_NAME = frozenset({"config_name", "cn"})  # Hydra's --config-name / -cn
_HYDRA_PATH = ("config_path", "cp")
# the note of the reference ``--config-path P --config-name X`` makes (the run reads that config's values)
CONFIG_OPTIONS_NOTE = "Hydra --config-path/--config-name"
POSITIONAL_CONFIG_NOTE = "config file passed to the script"
# a config an option hands to another model of the run than the trained policy: a reward model's
# own DeepSpeed plugin (Reward-Model-Overoptimization's ``--rm_deepspeed_plugin rm_zero3.json``
# beside the policy's ``--per_device_train_batch_size``), a teacher's or a critic's. The option
# uses the file (it is no unused config), but its settings are not the trained model's.
OTHER_MODEL_CONFIG = " (another model's config)"
_OTHER_MODELS = re.compile(r"^(?:rm|reward|reward_model|ref|reference|critic|value|teacher|judge|draft)[_-]")


@dataclass
class _Launch:
    launcher: str  # "torchrun", "deepspeed", "accelerate", "python"
    word: Word  # the launcher's own word (the run's anchor)
    options: dict[str, tuple[Word, Word | None]] = field(default_factory=dict)  # key -> (option, value word)
    module: bool = False
    script: Word | None = None
    arguments: list[Word] = field(default_factory=list)
    # nothing but a plain wrapper (nohup, time, env) before the launcher: not srun, mpirun or a
    # cluster submitter, which start one copy of the command per task
    alone: bool = False


def _is_python(text: str) -> bool:
    return re.fullmatch(r"(?:.*/)?python(?:3(?:\.\d+)?)?", text) is not None


def _find_launch(words: list[Word]) -> _Launch | None:
    """The launcher in a command (after env assignments and wrappers such as srun or nohup).
    A wrapper that runs a command given after ``--`` (a cluster submitter:
    ``python mason.py --cluster ... -- accelerate launch train.py``) launches that command."""
    launch = _first_launch(words)
    if launch is not None and launch.script is not None and launch.launcher == "python":
        for i, word in enumerate(launch.arguments):
            if word.raw == "--":
                for command in _wrapped_commands(launch.arguments[i + 1:]):
                    wrapped = _first_launch(command)
                    if wrapped is not None and wrapped.script is not None:
                        wrapped.alone = False  # the submitter decides how many copies run where
                        return wrapped
                break
    return launch


def _wrapped_commands(words: list[Word]) -> list[list[Word]]:
    """A submitter's command line, split where its escaped ``\\&\\&`` or ``\\;`` chain the
    commands it runs (open-instruct's ``mason.py ... -- source setup.sh \\&\\& python grpo.py``)."""
    commands: list[list[Word]] = [[]]
    for word in words:
        text, raw, start = word.text, word.raw, word.start
        while True:
            cut = min((text.find(s) for s in ("&&", ";") if s in text), default=-1)
            if cut < 0:
                break
            if text[:cut]:
                commands[-1].append(Word(text[:cut], text[:cut], start, start + cut))
            commands.append([])
            separator = 2 if text.startswith("&&", cut) else 1
            consumed = raw.find(text[cut + separator:]) if text[cut + separator:] else len(raw)
            start += max(consumed, 0)
            raw = raw[max(consumed, 0):]
            text = text[cut + separator:]
        if text:
            commands[-1].append(Word(text, raw, start, word.end))
    return [c for c in commands if c]


def _first_launch(words: list[Word]) -> _Launch | None:
    for i, word in enumerate(words):
        name = word.text.rsplit("/", 1)[-1]
        if name == "torchrun":
            return _parse(_Launch("torchrun", word), words[i + 1:])
        if name == "deepspeed":
            return _parse(_Launch("deepspeed", word), words[i + 1:])
        if name == "accelerate" and i + 1 < len(words) and words[i + 1].text == "launch":
            return _parse(_Launch("accelerate", word), words[i + 2:])
        if _is_python(name):
            rest = words[i + 1:]
            for j, arg in enumerate(rest):
                if arg.text == "-m" and j + 1 < len(rest) and rest[j + 1].text in _TORCHRUN_MODULES:
                    return _parse(_Launch("torchrun", word), rest[j + 2:])
                if not arg.text.startswith("-"):
                    break
            alone = all(w.text in _PLAIN_WRAPPERS or assignment(w) is not None for w in words[:i])
            return _parse(_Launch("python", word, alone=alone), rest)
    return None


# wrappers that run their command once, in this shell's process tree
_PLAIN_WRAPPERS = frozenset({"nohup", "exec", "time", "env", "command", "nice"})


def _parse(launch: _Launch, words: list[Word]) -> _Launch | None:
    """The launcher's own options, the script (or module), and the script's arguments."""
    flags = _FLAGS[launch.launcher]
    i = 0
    while i < len(words):
        word = words[i]
        text = word.text
        if text.startswith("-") and len(text) > 1:
            name, eq, _ = text.partition("=")
            key = option_key(name) if launch.launcher != "python" else name.lstrip("-")
            if key in _MODULE_FLAGS and not eq:
                launch.module = True
                if launch.launcher == "python":  # python -m pkg.module
                    if i + 1 < len(words):
                        launch.script = words[i + 1]
                        launch.arguments = words[i + 2:]
                    return launch
                i += 1
                continue
            if launch.launcher == "python" and key == "c":
                return None  # python -c "...": no script
            takes_value = not eq and (key not in flags if launch.launcher != "python" else key in _PYTHON_VALUED)
            if takes_value and i + 1 < len(words):
                launch.options[key] = (word, words[i + 1])
                i += 2
            else:
                launch.options[key] = (word, None)
                i += 1
            continue
        if launch.launcher == "python" and text == "-":
            return None  # python - <<'PY' ...: the program comes from stdin, its arguments are its own
        launch.script = word
        launch.arguments = words[i + 1:]
        return launch
    return None


class _Shell:
    """One shell script: its variables as the commands set them, and its launch commands."""

    def __init__(self, parsed: ParsedDocument, text: str | None = None) -> None:
        self.parsed = parsed
        self.text = parsed.text if text is None else text
        self.starts = line_starts(self.text)
        self.variables = Variables()
        self.heredocs: dict[str, tuple[int, int]] = {}  # variable -> its here-document body
        # variable -> the words of its double-quoted value, the string variables it names spliced in
        # as they stood then (``ARGS="$ARGS --bf16"`` appends to the words ARGS had)
        self.strings: dict[str, list[Word]] = {}
        self.options = option_variables(self.text)  # variable -> the caller's option that sets it
        # ``export NAME=...``: the variables the launched script sees -> where the export is written
        self.exported: dict[str, tuple[int, int]] = {}
        # what each branch of the open if/case block assigns (variable -> each assignment's value)
        self.branches: dict[str, list[Value | None]] = {}
        # ``ROOT="$(cd "$(dirname "$0")/.." && pwd)"``: offset of the name -> its anchored value
        self.anchored = anchored_assignments(self.text, posixpath.basename(parsed.path.replace("\\", "/")))
        # where a ``cd`` before the launch left the script: a path relative paths are read from
        # (anchored, or relative to where the caller stands), None where the caller stands
        self.cwd: Value | None = None
        self.blocks: list[int] = []  # where each code block of a README starts: a ``cd`` ends there
        # the folder each command of the last block and of this one ran in, by what it runs: a
        # block that repeats the command before it with more options runs where that one did
        self.ran_in: dict[tuple[str, ...], Value | None] = {}
        self.ran_before: dict[tuple[str, ...], Value | None] = {}
        # ``export PYTHONPATH=${PROJECT_DIR}/src:$PYTHONPATH``: ``-m s1.sft_hf`` is ``src/s1/sft_hf.py``
        self.modules_in_src = False

    def location(self, start: int, end: int) -> Location:
        return Location(self.parsed.path, Range(self._position(start), self._position(end)))

    def _position(self, offset: int) -> Position:
        line = bisect.bisect_right(self.starts, offset) - 1
        return Position(line + 1, offset - self.starts[line])

    def sourced(self, value: Value, note: str) -> Sourced[str]:
        text = value.text
        written = self.parsed.text[value.start:value.end]
        if "{" in text and "<" in written:
            # a documented placeholder, as the document writes it (its spaces too, where the
            # value is the word as written)
            plain = len(written) == len(text) and not any(c in written for c in "$\"'\\")
            text = written if plain else _PROTECTED.sub(r"<\1>", text)
        return Sourced(text, self.location(value.start, value.end), note)

    # ------------------------------------------------------------- commands

    def run(self) -> list[RunFacts]:
        out: list[RunFacts] = []
        block = 0
        for command in commands(self.text):
            if command.words and bisect.bisect_right(self.blocks, command.words[0].start) != block:
                block = bisect.bisect_right(self.blocks, command.words[0].start)
                self.cwd = None  # a new code block: where its commands run is not the last block's
                self.ran_before, self.ran_in = self.ran_in, {}
            facts = self._command(command)
            if facts is not None:
                out.append(facts)
        return out

    def _command(self, command: Command) -> RunFacts | None:
        if command.depth == 0 and self.branches:
            self._agreed_branches()
        words = list(command.words)
        if self._anchored_assignment(words, command.depth):
            return None
        if words and words[0].text in ("cd", "pushd"):
            self._change_directory(words[1:], command.depth)
            return None
        if words and words[0].text in ("export", "local", "declare", "readonly", "typeset"):
            if words[0].text == "export" or any(w.text == "-x" for w in words[1:]):
                self.exported.update((parsed[0] if (parsed := assignment(w)) is not None else w.text, (w.start, w.end))
                                     for w in words[1:] if not w.text.startswith("-"))
            words = [w for w in words[1:] if not w.text.startswith("-")]
            self._assign_all(words, command.depth)
            return None
        if words and words[0].text in ("for", "select") and len(words) > 1:
            self.variables.known[words[1].text] = None  # a loop variable: one value per pass
            return None
        if words and words[0].text in ("read", "unset") and len(words) > 1:
            for word in words[1:]:
                self.variables.known[word.text] = None
            names = [w.text for w in words[1:] if re.fullmatch(r"[A-Za-z_]\w*", w.text)]
            if words[0].text == "read" and command.heredoc is not None and names:
                # read -r -d '' CMD <<EOF ... EOF, then `deepspeed --module $CMD` (OpenRLHF's scripts)
                self.heredocs[names[-1]] = command.heredoc
            return None
        prefix = 0
        while prefix < len(words) and assignment(words[prefix]) is not None:
            prefix += 1
        if prefix == len(words):
            self._assign_all(words, command.depth)
            return None
        launch = _find_launch(self._launcher_arguments(self._spliced(words[prefix:])))
        if launch is None or launch.script is None:
            return None
        if self.blocks:
            # Online-RLHF's README: ```cd sft\ntorchrun ... -m axolotl.cli.train llama3-8b-it.yaml```, then
            # a block with the same command and `--deepspeed ../configs/deepspeed_stage3.json`
            runs = (launch.script.text, *[w.text for w in launch.arguments if not _is_option(w.text)][:1])
            if self.cwd is None and self.ran_before.get(runs) is not None:
                self.cwd = self.ran_before[runs]
            self.ran_in[runs] = self.cwd
        return self._facts(launch, words[:prefix])

    def _anchored_assignment(self, words: list[Word], depth: int) -> bool:
        """``ROOT="$(cd "$(dirname "$0")/.." && pwd)"`` (or ``export ROOT=...``): the variable holds
        a path from the script's folder; the words shlex made of the ``$(...)`` are no command."""
        for word in words[:2]:
            found = self.anchored.get(word.start)
            if found is not None:
                name, path, _ = found
                self.variables.known[name] = Value(path, word.start, word.end, anchored=True) if depth == 0 else None
                self.variables.templates.pop(name, None)
                self.strings.pop(name, None)
                return True
        return False

    def _change_directory(self, arguments: list[Word], depth: int) -> None:
        """``cd ${REPO_HOME}/src/open-r1-multimodal`` before ``torchrun src/open_r1/grpo.py``: the
        launch's relative paths are read from there. A folder relative to where the caller stands
        (``cd training``) is kept as such; an absolute folder too: it is where the author cloned
        the project (GritLM's ``cd /home/niklas/gritlm/gritlm`` before ``-m training.run``), and the
        store maps a path under it to the project's file. ``cd ..``, a home-relative or unknown
        folder, or a ``cd`` in a block leaves where relative paths are read from unknown (looked
        up as before); a launcher script's ``cd ../src`` is read from the script's own folder."""
        operands = [w for w in arguments if not w.text.startswith("-")]
        target = expand(operands[0], self.variables) if len(operands) == 1 and depth == 0 else None
        if target is None or target.text.startswith("~") or not target.text:
            self.cwd = None
        elif _names_the_clone(target.text):
            self.cwd = None  # ``cd PATH_TO_VLM2VEC_REPO``: the reader's clone, wherever it is
        elif target.text.startswith("/") and "$" not in target.text:
            self.cwd = Value(posixpath.normpath(target.text), target.start, target.end)
        elif target.text.startswith("/"):
            self.cwd = None  # a folder the caller's environment names
        elif target.anchored:
            self.cwd = target
        elif self.cwd is not None:
            self.cwd = Value(posixpath.normpath(posixpath.join(self.cwd.text, target.text)), target.start,
                             target.end, self.cwd.anchored)
        elif target.text.split("/", 1)[0] == ".." and self.blocks:
            self.cwd = None  # a README's block: where its reader stands is not known
        elif target.text.split("/", 1)[0] == "..":
            # a launcher script's ``cd ../reward_models`` (Reward-Model-Overoptimization's
            # ``scripts/train_grm_lora.sh``): run from its own folder, the only place from which a
            # folder above leads back into the project
            self.cwd = Value(posixpath.normpath(target.text), target.start, target.end)
        else:
            self.cwd = Value(posixpath.normpath(target.text), target.start, target.end)

    def _here(self, value: Value) -> Value:
        """A relative path as the launch reads it, from the folder a ``cd`` moved to. Under an
        absolute folder only a path with a folder of its own is joined: the store finds a joined
        path by its tail of at least a folder and the file, so a bare ``train.py`` (or one above)
        under ``/workspace`` is looked up as before (next to the script, above it, at the root)."""
        if self.cwd is None or value.anchored or value.text.startswith(("/", "~", "$")) or "://" in value.text:
            return value
        relative = posixpath.normpath(value.text)
        if self.cwd.text.startswith("/") and ("/" not in relative or relative.startswith("..")):
            return value
        joined = posixpath.normpath(posixpath.join(self.cwd.text, value.text))
        return Value(joined, value.start, value.end, self.cwd.anchored)

    def _launcher_arguments(self, words: list[Word]) -> list[Word]:
        """A variable that holds the launcher's own options (LMFlow's ``deepspeed_args=
        "--master_port=11000"`` then ``deepspeed ${deepspeed_args} examples/dpo_train.py``) stands
        for those options, not for the script. Only unquoted: bash splits ``$VAR`` into words but
        passes ``"$VAR"`` as one."""
        out: list[Word] = []
        for word in words:
            if _ONE_VARIABLE.fullmatch(word.raw) and not word.raw.startswith(("'", '"')):
                value = expand(word, self.variables)
                if value is not None and value.text.startswith("-") and "$" not in value.text:
                    out.extend(Word(part, part, value.start, value.end) for part in value.text.split())
                    continue
            out.append(word)
        return out

    def _spliced(self, words: list[Word]) -> list[Word]:
        """An unquoted ``$VAR`` that a here-document or a quoted assignment set stands for its
        words, and so does each variable of a command string made of variables alone
        (``srun bash -c "$LAUNCHER $CMD"``, open-r1's ``slurm/train.slurm``). A command string
        with more in it is read as the commands it runs, each such variable spliced in, and the
        one that launches stands for it: the BigScience slurm template's ``bash -c "$LAUNCHER
        --node_rank $SLURM_PROCID $CMD"``, ``srun bash -c "unset ROCR_VISIBLE_DEVICES;
        ${ACCEL_CMD}"``."""
        out: list[Word] = []
        for i, word in enumerate(words):
            names = _ONLY_VARIABLES.fullmatch(word.raw)
            command_string = i > 0 and words[i - 1].text == "-c" and word.raw.startswith('"')
            if command_string and names is None:
                launching = self._launching_command(word)
                if launching is not None:
                    out.extend(launching)
                    continue
            if names is not None and (command_string or not word.raw.startswith('"')):
                found = [n.group(1) for n in re.finditer(r"\$\{?([A-Za-z_]\w*)\}?", word.raw)]
                bodies = [self._words_of(n) for n in found]
                if all(body is not None for body in bodies) and (command_string or len(found) == 1):
                    for body in bodies:
                        assert body is not None
                        out.extend(body)
                    continue
            out.append(word)
        return out

    def _launching_command(self, string: Word) -> list[Word] | None:
        """The words of the command in a ``bash -c "..."`` string that launches a script, its
        string variables spliced in; None when none does."""
        for written in body_commands(self.text, string.start + 1, string.end - 1):
            command: list[Word] = []
            for word in written:
                body = self._words_of(word.raw.strip('"${}')) if _ONE_VARIABLE.fullmatch(word.raw) else None
                command.extend(body if body is not None else [word])
            launch = _first_launch(command)
            if launch is not None and launch.script is not None:
                return command
        return None

    def _words_of(self, name: str) -> list[Word] | None:
        """The words an unquoted ``$name`` splits into: its here-document's or its quoted value's."""
        heredoc = self.heredocs.get(name)
        if heredoc is not None:
            return body_words(self.text, *heredoc)
        return self.strings.get(name)

    def _agreed_branches(self) -> None:
        """After an if/case block: a variable every one of its (two or more) assignments gives the
        same value has it (Mantis's ``if [ $lora_enabled = true ]; then config_file=zero2.yaml;
        else config_file=zero2.yaml; fi``); one assigned once, or differently, stays unknown."""
        for name, values in self.branches.items():
            texts = {value.text if value is not None else None for value in values}
            if len(values) >= 2 and None not in texts and len(texts) == 1 and name not in self.options:
                self.variables.known[name] = values[-1]
        self.branches = {}

    def _assign_all(self, words: list[Word], depth: int) -> None:
        for word in words:
            parsed = assignment(word)
            if parsed is None:
                continue
            name, value_word = parsed
            if name == "PYTHONPATH" and _SOURCE_FOLDER.search(value_word.raw):
                self.modules_in_src = True
            if depth > 0:
                self.branches.setdefault(name, []).append(expand(value_word, self.variables))
            value = expand(value_word, self.variables) if depth == 0 else None
            if value is None and depth == 0 and _CURRENT_FOLDER.fullmatch(value_word.text):
                # ``WORK_DIR=`pwd``` then ``--deepspeed_config ${WORK_DIR}/configs/ds.json``: where the
                # caller stands, as a relative path is read
                value = Value(".", value_word.start, value_word.end)
            # (single quotes too: ``TORCHRUN_PARAMS='--nproc_per_node 8 --node_rank=$SLURM_NODEID'``
            # holds words, expanded where the variable is used)
            quoted = len(value_word.raw) > 1 and value_word.raw[0] == value_word.raw[-1] and value_word.raw[0] in "\"'"
            # split before the variable changes: ``ARGS="$ARGS --bf16"`` reads the words it had
            value_words = self._spliced(body_words(self.text, value_word.start + 1, value_word.end - 1)) \
                if quoted and depth == 0 else None
            default = self.variables.known.get(name)
            if is_append(word):
                # ``TRAIN_PARAMS+=" --bf16"`` (Chinese-Mixtral's train-pt.sh builds its command line
                # so): what the variable held, then this
                before = self.strings.get(name)
                value = Value(default.text + value.text, value.start, value.end) \
                    if default is not None and value is not None else None
                value_words = before + value_words if before is not None and value_words is not None else None
            self.variables.known[name] = value  # inside if/for/case: which value runs is unknown
            self.variables.templates.pop(name, None)
            self.strings.pop(name, None)
            if depth > 0:
                if name in self.options:  # --model) MODEL="$2": the caller's option
                    self.variables.templates[name] = "{" + self.options[name] + "}"
                    if default is not None and default.text:
                        # MODEL="Qwen/Qwen-7B" before the loop: what runs when the caller omits -m
                        self.variables.known[name] = default
                continue
            built = template(value_word, self.variables) if not is_append(word) else None
            if built is not None:
                self.variables.templates[name] = built
            if value_words is not None:
                self.strings[name] = value_words

    # ------------------------------------------------------------- facts

    def _facts(self, launch: _Launch, environment: list[Word] | None = None) -> RunFacts:
        facts = RunFacts(self.parsed.path, "shell")
        facts.anchor = self.location(launch.word.start, launch.word.end)
        assert launch.script is not None  # only a launch that names its script gets here
        script = expand(launch.script, self.variables)
        if script is not None and not launch.module:
            script = self._here(script)
        if script is not None:
            path = script.text
            note = f"{launch.launcher} runs {path}"
            if launch.module:  # found from the folder the launch runs in, like a script
                note = f"{launch.launcher} runs -m {path}"
                module_file = ("src/" if self.modules_in_src else "") + path.replace(".", "/") + ".py"
                path = self._here(Value(module_file, script.start, script.end)).text
            facts.launches = Sourced(path, self.location(launch.script.start, launch.script.end), note)
        else:
            built = template(launch.script, self.variables)
            if built is not None and not launch.module:
                facts.template_launches = Sourced(built, self.location(launch.script.start, launch.script.end),
                                                  f"{launch.launcher} runs {built}")
        self._launcher_options(launch, facts)
        self._script_arguments(launch, facts)
        self._environment(environment or [], facts)
        if launch.launcher == "python" and launch.alone:
            facts.single_process = Sourced(True, facts.anchor, "a bare `python` command runs one process")
        return facts

    def _option(self, launch: _Launch, *keys: str) -> Value | None:
        for key in keys:
            if key in launch.options:
                option, value_word = launch.options[key]
                if value_word is None:
                    text = option.text.partition("=")[2]
                    if not text:
                        return Value("true", option.start, option.end)
                    raw_start = option.start + option.raw.find("=") + 1
                    word = Word(text, option.raw[option.raw.find("=") + 1:], raw_start, option.end)
                    return expand(word, self.variables)
                return expand(value_word, self.variables)
        return None

    def _launcher_options(self, launch: _Launch, facts: RunFacts) -> None:
        count: Value | None = None
        nodes: Value | None = None
        per_node = None
        if launch.launcher == "torchrun":
            count, nodes = self._option(launch, "nproc_per_node"), self._option(launch, "nnodes")
            per_node = count
        elif launch.launcher == "deepspeed":
            count, nodes = self._option(launch, "num_gpus"), self._option(launch, "num_nodes")
            hostfile = self._option(launch, "hostfile")
            if hostfile is not None and nodes is None:
                # every machine the hostfile lists runs the job (DeepSpeed's runner): the GPU count is its
                # slots, which memlint does not read (the file is usually the cluster's, not the project's)
                facts.unread_hostfile = self.sourced(hostfile, "deepspeed --hostfile")
            include = self._option(launch, "include")
            if count is None and include is not None:
                devices = _included_devices(include.text)
                if devices is not None:
                    count = Value(str(devices), include.start, include.end)
            per_node = count
        elif launch.launcher == "accelerate":
            count = self._option(launch, "num_processes")
            machines = self._option(launch, "num_machines")
            self._accelerate(launch, facts)
            if count is not None and count.text.isdigit() and int(count.text) >= 1:
                total = int(count.text)  # accelerate counts processes over all machines
                where = self.location(count.start, count.end)
                facts.world_size = Sourced(total, where, "accelerate launch --num_processes")
                machine_count = int(machines.text) if machines is not None and machines.text.isdigit() else 1
                if machine_count >= 1 and total % machine_count == 0:
                    facts.gpus_per_node = Sourced(total // machine_count, where, "--num_processes / --num_machines")
            for key in ("config_file", "deepspeed_config_file"):
                value = self._option(launch, key)
                if value is not None:
                    facts.references.append(self.sourced(self._here(value), f"accelerate launch --{key}"))
                elif key in launch.options:
                    written = launch.options[key][1]
                    if written is not None:
                        self._templated(written, f"accelerate launch --{key}", facts.template_references)
            return
        if count is None or not count.text.isdigit() or int(count.text) < 1:
            return
        node_count = 1
        if nodes is not None:
            if not nodes.text.isdigit() or int(nodes.text) < 1:
                return  # an elastic range (--nnodes 1:4) or an unknown count
            node_count = int(nodes.text)
        where = self.location(count.start, count.end)
        flag = "--nproc_per_node" if launch.launcher == "torchrun" else "--num_gpus"
        note = f"{launch.launcher} {flag}" + (f" x --nnodes {node_count}" if node_count > 1 else "")
        facts.world_size = Sourced(int(count.text) * node_count, where, note)
        if per_node is not None:
            facts.gpus_per_node = Sourced(int(count.text), where, f"{launch.launcher} {flag}")

    def _accelerate(self, launch: _Launch, facts: RunFacts) -> None:
        """``accelerate launch`` options that state facts of their own."""
        mixed = self._option(launch, "mixed_precision")
        if mixed is not None and mixed.text in ("bf16", "fp16", "no", "fp8"):
            facts.mixed = self.sourced(mixed, "accelerate launch --mixed_precision")
        stage = self._option(launch, "zero_stage")
        if stage is not None and stage.text.isdigit():
            facts.zero_stage = Sourced(int(stage.text), self.location(stage.start, stage.end), "--zero_stage")
        accum = self._option(launch, "gradient_accumulation_steps")
        if accum is not None and accum.text.isdigit():
            facts.grad_accum = Sourced(int(accum.text), self.location(accum.start, accum.end),
                                       "accelerate launch --gradient_accumulation_steps")
        for key, name in (("offload_optimizer_device", "offload_optimizer"), ("offload_param_device", "offload_params")):
            value = self._option(launch, key)
            if value is not None and value.text in ("cpu", "nvme", "none"):
                setattr(facts, name, Sourced(value.text != "none", self.location(value.start, value.end), f"--{key}"))

    def _environment(self, prefix: list[Word], facts: RunFacts) -> None:
        """The variables the launched script reads from its environment (``os.getenv("MODEL",
        ...)``): what the script exports and what the command sets before itself
        (``MODEL=x python train.py``), as the options ``$MODEL``; one whose value this script
        cannot know (``export MODEL=$1``) is passed, value unknown, so no fallback stands for it."""
        written: dict[str, tuple[Value | None, int, int, str]] = {}
        for name, (start, end) in sorted(self.exported.items()):
            value = self.variables.known.get(name)
            written[name] = (value, value.start, value.end, f"export {name}") if value is not None \
                else (None, start, end, f"export {name}")
        for word in prefix:
            parsed = assignment(word)
            if parsed is not None:
                name, value_word = parsed
                written[name] = (expand(value_word, self.variables), word.start, word.end, f"{name}=")
        for name, (value, start, end, how) in written.items():
            if option_formulas.launcher_sets(name):
                continue
            if value is not None:
                facts.environment[f"${name}"] = self.sourced(value, how)
            else:
                facts.environment_unknown[f"${name}"] = Sourced(name, self.location(start, end), how)

    def _script_arguments(self, launch: _Launch, facts: RunFacts) -> None:
        words = launch.arguments
        i = 0
        leading = True  # the words before the first option are read by position (``#1``, ``#2``)
        while i < len(words):
            word = words[i]
            if not _is_option(word.text):
                override = _OVERRIDE.match(word.text)
                if override is not None:  # `config=examples/config.yaml`: the path is the value
                    raw_start = word.raw.find("=") + 1
                    word = Word(word.text[override.end():], word.raw[raw_start:], word.start + raw_start, word.end)
                    leading = False
                value = expand(word, self.variables)
                if value is None or not value.text.lower().endswith(_CONFIG_SUFFIXES):
                    copied = copied_from(self.text, self._position(word.start).line, word.raw)
                    if copied is not None and copied.lower().endswith(_CONFIG_SUFFIXES):
                        value = Value(copied, word.start, word.end)  # the copy holds the source's content
                if override is not None and not override.group().startswith("~"):  # ~key deletes the key
                    key = override.group().lstrip("+").rstrip("=")
                    shown = self.sourced(value, key) if value is not None else None
                    facts.overrides[key] = Sourced(shown.value, shown.origin, key) if shown is not None else \
                        Sourced(None, self.location(word.start, word.end), f"{key}={word.raw}")
                if leading:
                    key = f"#{i + 1}"  # typer's arguments, fire's parameters: the script binds them by place
                    if value is None:
                        facts.cli_unknown[key] = Sourced(word.text, self.location(word.start, word.end), key)
                    else:
                        facts.cli_args[key] = self.sourced(value, f"argument {i + 1}")
                positional = _POSITIONAL.fullmatch(word.text)
                if value is None and positional is not None and facts.positional_config is None:
                    facts.positional_config = Sourced(int(positional.group(1)), self.location(word.start, word.end),
                                                      f"the caller's argument {word.text} passed to the script")
                if value is not None and value.text.lower().endswith(_CONFIG_SUFFIXES):
                    facts.references.append(self.sourced(self._here(value), POSITIONAL_CONFIG_NOTE))
                if value is None and positional is None:
                    self._script_config(word, POSITIONAL_CONFIG_NOTE, facts)
                i += 1
                continue
            leading = False
            name, eq, inline = word.text.partition("=")
            key = option_key(name)
            if eq:
                raw_start = word.raw.find("=") + 1
                value = expand(Word(inline, word.raw[raw_start:], word.start + raw_start, word.end), self.variables)
                i += 1
            else:
                following = []
                j = i + 1
                while j < len(words) and not _is_option(words[j].text):
                    following.append(words[j])
                    j += 1
                if key in _HYDRA_NAME or key in _HYDRA_PATH:  # one value; Hydra overrides follow
                    following, j = following[:1], i + 1 + len(following[:1])
                i = j
                value = self._values(following) if following else Value("true", word.start, word.end)
            if value is None:  # a value the script cannot know ($1, $(date), an unset variable)
                written = inline if eq else " ".join(w.raw for w in following)
                facts.cli_unknown[key] = Sourced(word.text, self.location(word.start, word.end),
                                                 f"--{key} {written}" if written else f"--{key}")
                if not eq and following and ("config" in key or "deepspeed" in key or key == "cfg"):
                    self._script_config(following[0], f"--{key}", facts, own=key in _CONFIG_OPTIONS)
                continue
            facts.cli_args[key] = self.sourced(value, f"--{key}")
            if key in _SPLITS_LAYERS and value.text.isdigit() and int(value.text) >= 1:
                before = facts.model_split_degree
                degree = int(value.text) * (before.value if before else 1)
                written = f"{before.note} --{key} {value.text}" if before else f"--{key} {value.text}"
                facts.model_split_degree = Sourced(degree, self.location(value.start, value.end), written)
            if key in _MODEL_PARALLEL and value.text.isdigit() and int(value.text) > 1 and facts.unmodelled is None:
                facts.unmodelled = Sourced((f"model parallelism (`--{key} {value.text}`)", MODEL_PARALLEL_ADVICE),
                                           self.location(value.start, value.end), f"--{key}")
            elif (_splits_sequence(key, value.text) or (key in _SEQUENCE_GROUP_SIZES and value.text.isdigit()
                                                         and int(value.text) > 1)) and facts.unmodelled is None:
                facts.unmodelled = Sourced((f"sequence parallelism (`--{key} {value.text}`)", SEQUENCE_SPLIT_ADVICE),
                                           self.location(value.start, value.end), f"--{key}")
            if key in _HYDRA_NAME:
                self._hydra_config(launch, value, facts)
            elif value.text.lower().endswith(_CONFIG_SUFFIXES) and ("config" in key or "deepspeed" in key):
                note = f"--{key}" + (OTHER_MODEL_CONFIG if _OTHER_MODELS.match(key) else "")
                facts.references.append(self.sourced(self._here(value), note))

    def _hydra_config(self, launch: _Launch, name: Value, facts: RunFacts) -> None:
        """Hydra's ``--config-name X`` names a file of the config folder, not of the working
        directory: ``--config-path P`` (relative to the script's or the ``-m`` module's folder:
        simpleRL-reason's ``python3 -m verl.trainer.main_ppo --config-path=config
        --config-name='ppo_megatron_trainer.yaml'`` reads verl/trainer/config/). Without
        ``--config-path`` the folder is the one ``@hydra.main`` names: no reference is made."""
        folder = next((self._option_value(launch, k) for k in _HYDRA_PATH if self._option_value(launch, k)), None)
        if folder is None or facts.launches is None or "$" in folder:
            return
        base = posixpath.dirname(str(facts.launches.value))
        written = name.text if name.text.lower().endswith(_CONFIG_SUFFIXES) else name.text + ".yaml"
        path = posixpath.normpath(posixpath.join(base, folder, written)) if not folder.startswith("/") else \
            posixpath.join(folder, written)
        facts.references.append(Sourced(path, self.location(name.start, name.end), CONFIG_OPTIONS_NOTE))

    @staticmethod
    def _option_value(launch: _Launch, key: str) -> str | None:
        for index, word in enumerate(launch.arguments):
            name, eq, inline = word.text.partition("=")
            if _is_option(word.text) and option_key(name) == key:
                if eq:
                    return inline
                following = launch.arguments[index + 1] if index + 1 < len(launch.arguments) else None
                return following.text if following is not None and not _is_option(following.text) else None
        return None

    def _templated(self, word: Word, note: str, into: list[Sourced[str]]) -> str | None:
        built = template(word, self.variables)
        if built is None or not built.lower().endswith(_CONFIG_SUFFIXES):
            return None
        into.append(Sourced(built, self.location(word.start, word.end), note))
        return built

    def _script_config(self, word: Word, note: str, facts: RunFacts, own: bool = True) -> None:
        """A config path the launcher builds from its caller's arguments: the script's own config
        (``--config recipes/$MODEL/config_$SUFFIX.yaml``), else a config it names."""
        if own and facts.template_config is None:
            found: list[Sourced[str]] = []
            if self._templated(word, note, found):
                facts.template_config = found[0]
            return
        self._templated(word, note, facts.template_references)

    def _values(self, words: list[Word]) -> Value | None:
        """An option's value: one word, or several (``--lora_target_modules q_proj v_proj``)."""
        values = [v for w in words if (v := expand(w, self.variables)) is not None]
        if len(values) < len(words):
            return None
        if len(values) == 1:
            return values[0]
        return Value(" ".join(v.text for v in values), words[0].start, words[-1].end)


# a script's options that split the model over GPUs (tensor, pipeline, context, sequence
# parallelism), which the estimate (data parallel, ZeRO/FSDP) does not model; vLLM's own
# ``--vllm_tensor_parallel_size`` for generation is not among them
# (GPT-NeoX and DeepSpeed's pipeline examples write ``--pipe_parallel_size`` and, for the tensor
# degree, ``--model_parallel_size``)
_SPLITS_LAYERS = frozenset({
    "tensor_parallel_degree", "tensor_parallel_size", "tensor_model_parallel_size", "tp_size",
    "pipeline_parallel_degree", "pipeline_parallel_size", "pipeline_model_parallel_size", "pp_size",
    "pipe_parallel_size", "model_parallel_size", "tp_degree", "pp_degree",
})
_MODEL_PARALLEL = _SPLITS_LAYERS | {
    "context_parallel_degree", "context_parallel_size", "sequence_parallel_size", "ulysses_degree",
}
# the size of the group of ranks a ring/Ulysses attention splits each sequence over (OpenRLHF's
# ``--ring_attn_size 4``, with ``--ring_head_stride``)
_SEQUENCE_GROUP_SIZES = frozenset({"ring_attn_size", "ring_attention_size", "ulysses_size", "ulysses_sp_size",
                                   "sp_size", "ring_size", "cp_size"})
# a script's own switch between data parallelism and an attention that splits each sequence
# over the ranks (EasyContext's ``--parallel_mode zigzag_ring_attn``, ``ulysses_attn``,
# ``usp_attn``, ``dist_flash_attn``): each GPU then holds a slice of the sequence, which the
# estimate (the whole sequence on every GPU) does not model
_SEQUENCE_SPLIT_OPTION = re.compile(r"parallel|attn|attention")
_SEQUENCE_SPLIT_VALUE = re.compile(r"(?:^|[_-])(?:ring|zigzag|ulysses|usp|striped)(?:[_-]|$)|dist_flash_attn|"
                                   r"context_parallel|sequence_parallel", re.IGNORECASE)


def _splits_sequence(key: str, value: str) -> bool:
    """Does ``--key value`` choose an attention that splits each sequence over the ranks?"""
    return bool(_SEQUENCE_SPLIT_OPTION.search(key)) and bool(_SEQUENCE_SPLIT_VALUE.search(value))


# a PYTHONPATH that puts the project's ``src`` folder first in line (``src``, ``./src``,
# ``${PROJECT_DIR}/src:${PYTHONPATH}``)
_SOURCE_FOLDER = re.compile(r"(?:^|[\s\"'=:/}])src/?(?=$|[\s\"':])")
# the caller's working directory as a command prints it: ``$(pwd)``, `` `pwd` ``, ``$PWD``
_CURRENT_FOLDER = re.compile(r"\$\(\s*pwd\s*\)|`\s*pwd\s*`|\$\{?PWD\}?")
_POSITIONAL = re.compile(r"\$\{?([1-9])\}?")
# An OmegaConf/Hydra override passed to the script (`config=examples/config.yaml`,
# `+data.train_files=...`): its value is the word that names a file.
_OVERRIDE = re.compile(r"[+~]{0,2}[A-Za-z_][\w.]*=")
_ONE_VARIABLE = re.compile(r'"?\$\{?[A-Za-z_]\w*\}?"?')
_ONLY_VARIABLES = re.compile(r'"?\s*\$\{?[A-Za-z_]\w*\}?(?:\s+\$\{?[A-Za-z_]\w*\}?)*\s*"?')
# the options a script reads its own config from (``train.py --config cfg.yaml``)
_CONFIG_OPTIONS = frozenset({"config", "config_file", "config_path", "cfg", "configs", "recipe"})
_SHELLS = ("sh", "bash", "zsh", "source", ".")


@dataclass(frozen=True)
class Invocation:
    """A command that runs a shell script of the project with arguments
    (``sh scripts/finetune_with_accelerate_config.sh 8 configs/sft/olmo.yaml``, ``sbatch
    --nodes=2 slurm/train.slurm --model X --config v1``)."""

    script: Sourced[str]
    arguments: tuple[Sourced[str], ...]  # $1, $2, ... as written (None-free: unknown ones end the list)
    nodes: Sourced[int] | None = None  # ``sbatch --nodes N``: the nodes the job gets

    def options(self) -> dict[str, str]:
        """The call's arguments by the name a template gives them: ``1``, ``2``, ... for each
        positional one, ``--model`` for ``--model X`` or ``--model=X``."""
        words = [str(a.value) for a in self.arguments]
        out = {str(i): word for i, word in enumerate(words, 1)}  # ``$2`` is the second word
        i = 0
        while i < len(words):
            word = words[i]
            if _is_option(word):
                name, eq, inline = word.partition("=")
                if eq:
                    out.setdefault(name, inline)
                elif i + 1 < len(words) and not _is_option(words[i + 1]):
                    out.setdefault(name, words[i + 1])
                    i += 1
            i += 1
        return out


_SCRIPT_SUFFIXES = (".sh", ".bash", ".slurm", ".sbatch")
_SBATCH_VALUED = re.compile(r"-[A-Za-z]$|--[\w-]+$")


def invocations(parsed: ParsedDocument, text: str | None = None) -> list[Invocation]:
    """The commands of ``text`` (``parsed``'s text by default; Markdown passes its shell blocks
    with the rest blanked) that run a shell script: ``sh x.sh a b``, ``bash x.sh``, ``./x.sh``,
    also after a wrapper (``python mason.py ... -- sh x.sh a b``) or as a batch job (``sbatch
    --nodes=2 x.slurm a b``)."""
    shell = _Shell(parsed, text)
    out = []
    for command in commands(shell.text):
        words = command.words
        for i, word in enumerate(words):
            nodes = None
            if word.text == "sbatch":
                j = i + 1
                while j < len(words) and _is_option(words[j].text):
                    name, eq, inline = words[j].text.partition("=")
                    value = inline if eq else None
                    if not eq and _SBATCH_VALUED.match(name) and j + 1 < len(words) \
                            and not words[j + 1].text.endswith(_SCRIPT_SUFFIXES):
                        j += 1
                        value = words[j].text
                    if name in ("--nodes", "-N") and value is not None and value.isdigit():
                        nodes = Sourced(int(value), shell.location(words[j].start, words[j].end), f"sbatch {name}")
                    j += 1
                if j >= len(words):
                    continue
                script, rest = words[j], words[j + 1:]
            elif word.text in _SHELLS and i + 1 < len(words) and words[i + 1].text.endswith(_SCRIPT_SUFFIXES):
                script, rest = words[i + 1], words[i + 2:]
            elif word.text.endswith(".sh") and (i == 0 or words[i - 1].text == "--"):
                script, rest = word, words[i + 1:]
            else:
                continue
            arguments = []
            for argument in rest:
                if argument.text in (";", "&&", "||", "|", "&") or "$" in argument.text:
                    break
                arguments.append(shell.sourced(Value(argument.text, argument.start, argument.end), "argument"))
            out.append(Invocation(shell.sourced(Value(script.text, script.start, script.end), "script"),
                                  tuple(arguments), nodes))
            break
    return out


def _is_option(text: str) -> bool:
    if not text.startswith("-") or len(text) < 2:
        return False
    return not re.fullmatch(r"-\d+(\.\d*)?([eE][-+]?\d+)?", text)  # -1, -0.5: values, not options


def _included_devices(text: str) -> int | None:
    """``localhost:0,1,2`` / ``host1:0,1@host2:0,1`` -> the number of GPUs."""
    total = 0
    for host in text.split("@"):
        _, colon, devices = host.partition(":")
        if not colon:
            return None
        ids = [d for d in devices.split(",") if d.strip()]
        if not ids or not all(d.strip().isdigit() for d in ids):
            return None
        total += len(ids)
    return total or None


# a line of prose that starts a launch command (after an optional `$ ` prompt)
_COMMAND_START = re.compile(
    r"^[ \t]*(?:\$[ \t]+)?(?:cd[ \t]+[^\s;&|]+[ \t]*&&[ \t]*)?(?:[A-Z_][A-Z0-9_]*=\S*[ \t]+)*(?:srun[ \t]+|nohup[ \t]+)?"
    r"(?:python3?(?:\.\d+)?|torchrun|deepspeed|accelerate[ \t]+launch)(?=[ \t])", re.M)
_DOCSTRING = re.compile(r'\A(?:[ \t]*(?:#[^\n]*)?\n)*[ \t]*[rRuU]?("""|\'\'\')(?P<body>.*?)\1', re.S)


# a placeholder written in documentation (``--model_name_or_path <your_path_to_hf_converted_llama_ckpt>``,
# ``--master_port=<your_random_port>``, Video-ChatGPT's ``<path to LLaVA-7B-Lightening-v-1-1 model>``):
# one word to fill in, not two redirections and the words between. Protected as ``{...}`` (same
# length, offsets kept; the characters a shell would split on or expand made ``_``) while the
# command is split, restored in the values it sets. ``<in.txt >out.txt`` stays two redirections:
# a placeholder does not end in a space.
_PLACEHOLDER = re.compile(r"<([A-Za-z_](?:[^<>\n]*[^\s<>\\])?)>")
_PROTECTED = re.compile(r"\{([A-Za-z_][\w.\-/]*)\}")
_UNSPLIT = re.compile(r"[^\w.\-/]")


def _names_the_clone(folder: str) -> bool:
    """A placeholder for where the reader cloned the project (VLM2Vec's ``PATH_TO_VLM2VEC_REPO``,
    ``/path/to/your/repo``, ``YOUR_PROJECT_ROOT``), not for a folder the run makes
    (``path_to_saving_checkpoints``)."""
    first = folder.split("/", 1)[0] if not folder.startswith("/") else folder
    return looks_like_placeholder(first) and re.search(r"repo|project|root|clone|code", first, re.IGNORECASE) is not None


def _protect(placeholder: re.Match[str]) -> str:
    return "{" + _UNSPLIT.sub("_", placeholder.group(1)) + "}"


def command_lines(text: str, start: int = 0, end: int | None = None, assignments: bool = False) -> str:
    """``text`` with everything but the launch commands between ``start`` and ``end`` blanked
    (offsets kept, so each fact is located in the real file): a command starts at a line that
    runs a launcher and goes on over lines ending in a backslash. These are commands a document
    shows (a README's, a docstring's): their ``<placeholders>`` are words. With ``assignments``
    (a README's shell block) the block's ``NAME=value`` lines are kept too, so a command reads
    the variables set above it (DeepSeek-Coder's ``MODEL_PATH="deepseek-ai/..."`` then
    ``--model_name_or_path $MODEL_PATH``)."""
    end = len(text) if end is None else end
    return blanked(text[:start]) + command_region(text, start, end, assignments) + blanked(text[end:])


def command_region(text: str, start: int, end: int, assignments: bool = False) -> str:
    """What :func:`command_lines` keeps of ``text[start:end]`` (that slice, blanked but for its
    commands): a README of thousands of code blocks costs the length of its blocks, not the
    length of the whole document once per block."""
    kept = list(blanked(text[start:end]))

    def keep(at: int, until: int, value: str) -> None:
        kept[at - start:until - start] = value

    if assignments:
        for match in _ASSIGNMENT_LINE.finditer(text, start, end):
            keep(match.start(), match.end(), text[match.start():match.end()])
        for match in _CD_LINE.finditer(text, start, end):
            keep(match.start(), match.end(), text[match.start():match.end()])
    for match in _COMMAND_START.finditer(text, start, end):
        position = match.start()
        while position < end:
            line_end = text.find("\n", position, end)
            line_end = end if line_end < 0 else line_end
            keep(position, line_end, _PLACEHOLDER.sub(_protect, text[position:line_end]))
            if not text[position:line_end].rstrip().endswith("\\"):
                break
            position = line_end + 1
    return "".join(kept)


def blanked(text: str) -> str:
    """Every character but the line ends blanked (one C-level pass per line: the per-character
    loop took ~8 ms of each edit of transformers' 280,000-character trainer.py)."""
    return "\n".join(" " * len(line) for line in text.split("\n"))


# a shell variable set on a line of its own, with no command after it
_ASSIGNMENT_LINE = re.compile(r"^[ \t]*(?:export[ \t]+)?[A-Za-z_][A-Za-z0-9_]*=(?:\"[^\"\n]*\"|'[^'\n]*'|[^\s;&|]*)[ \t]*$",
                              re.M)
# ``cd sft`` on a line of its own: the commands after it in its block read relative paths from there
_CD_LINE = re.compile(r"^[ \t]*(?:\$[ \t]+)?(?:cd|pushd)[ \t]+[^\s;&|#]+[ \t]*$", re.M)
_STRING = re.compile(r'[rRuU]?("""|\'\'\')(?P<body>.*?)\1', re.S)


def _usage_strings(parsed: ParsedDocument) -> list[tuple[int, int]]:
    """(start, end) of the body of each module-level string statement: the module docstring,
    and a usage string written after the imports (TRL's ``ppo.py``)."""
    source = parsed.python
    if source is None:
        found = _DOCSTRING.match(parsed.text)
        return [(found.start("body"), found.end("body"))] if found else []
    line_starts = list(accumulate((len(line) + 1 for line in parsed.text.split("\n")), initial=0))[:-1]
    spans = []
    for statement in source.module.body:
        if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
                and isinstance(statement.body[0], cst.Expr)
                and isinstance(statement.body[0].value, cst.SimpleString)):
            continue
        start = source.range_of(statement.body[0].value).start
        if start.line - 1 >= len(line_starts):
            continue
        found = _STRING.match(parsed.text, line_starts[start.line - 1] + start.column)
        if found is not None:
            spans.append((found.start("body"), found.end("body")))
    return spans


def documented_launches(parsed: ParsedDocument) -> list[RunFacts]:
    """The commands a script's module-level strings give for running it (TRL's examples:
    ``python trl/scripts/kto.py --model_name_or_path ... --per_device_train_batch_size 16`` in
    the docstring, or in a usage string after the imports), each a launch of this very file,
    whatever folder the command names it in."""
    if not parsed.text:
        return []
    own = parsed.path.replace("\\", "/").rsplit("/", 1)[-1]
    out = []
    facts_found = []
    for start, end in _usage_strings(parsed):
        facts_found.extend(_Shell(parsed, command_lines(parsed.text, start, end)).run())
    for facts in facts_found:
        launched = facts.launches
        if launched is None or str(launched.value).rsplit("/", 1)[-1] != own:
            continue
        facts.launches = Sourced(own, launched.origin, f"{launched.note} (the command in its docstring)")
        out.append(facts)
    return out


def launches_in(parsed: ParsedDocument, text: str, variables: dict[str, Value | None] | None = None,
                blocks: list[int] | None = None) -> list[RunFacts]:
    """The launch commands of ``text``: ``parsed``'s text with all but its commands blanked;
    ``variables`` are set before the first command (a Makefile's ``MODEL ?= ...``). ``blocks``:
    the offsets where a README's code blocks start; a ``cd`` holds until the end of its block
    (the next block may be read from anywhere: LongLoRA's ``cd path_to_saving_checkpoints``)."""
    shell = _Shell(parsed, text)
    shell.variables.known.update(variables or {})
    shell.blocks = sorted(blocks or [])
    return shell.run()


@extractor("shell")
def extract_launchers(parsed: ParsedDocument) -> list[RunFacts]:
    if parsed.document.problem is not None or not parsed.text:
        return []
    return slurm_job(parsed)


def slurm_job(parsed: ParsedDocument, nodes: int | None = None) -> list[RunFacts]:
    """A shell script's launches as its job runs: ``$SLURM_NNODES`` and the other variables
    SLURM sets hold what the script's ``#SBATCH`` header requests (gritlm's ``--num_processes
    $(($GPUS_PER_NODE*$SLURM_NNODES))`` under ``#SBATCH --nodes=32``); ``nodes``: the node count
    a caller's ``sbatch --nodes N script`` gives the job instead."""
    from memlint.facts.infrastructure import slurm_environment

    shell = _Shell(parsed)
    for name, (value, start, end) in slurm_environment(parsed.text).items():
        if nodes is not None and name in ("SLURM_NNODES", "SLURM_JOB_NUM_NODES"):
            value = str(nodes)
        shell.variables.known[name] = Value(value, start, end)
    if nodes is not None:
        shell.variables.known.setdefault("SLURM_NNODES", Value(str(nodes), 0, 0))
        shell.variables.known.setdefault("SLURM_JOB_NUM_NODES", Value(str(nodes), 0, 0))
    return shell.run()
