"""CFG015: a referenced config file that is missing or unreadable."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from memlint.catalog.models import looks_like_placeholder
from memlint.documents.kinds import DocumentKind
from memlint.facts.launchers import CONFIG_OPTIONS_NOTE, POSITIONAL_CONFIG_NOTE
from memlint.facts.shell_writes import writes
from memlint.lint.context import RuleContext
from memlint.model.diagnostics import Severity
from memlint.project.walk import ignored_by_git, in_absent_submodule
from memlint.rules.base import Example, Finding, Rule

_AXOLOTL = """\
base_model: Qwen/Qwen2.5-14B
sequence_len: 4096
micro_batch_size: 1
gradient_accumulation_steps: 16
learning_rate: 0.00001
bf16: true
gradient_checkpointing: true
deepspeed: deepspeed_configs/zero3_bf16.json
datasets:
  - path: tatsu-lab/alpaca
    type: alpaca
"""

_ZERO3 = """\
{
  "zero_optimization": {"stage": 3, "overlap_comm": true, "stage3_gather_16bit_weights_on_model_save": true},
  "bf16": {"enabled": true},
  "gradient_accumulation_steps": "auto",
  "train_micro_batch_size_per_gpu": "auto"
}
"""

# a script that parses TrainingArguments from its command line, for the launches of the examples
_TRAINER_SCRIPT = {"train.py": "import transformers\nparser = transformers.HfArgumentParser(transformers.TrainingArguments)\n"
                               "args, = parser.parse_args_into_dataclasses()\n"}


class MissingConfigReference(Rule):
    """## What it does
    Checks that the files a config or script points at exist and can be read: the DeepSpeed
    JSON named by ``deepspeed:`` in an Axolotl, LLaMA-Factory or TrainingArguments YAML, by
    ``TrainingArguments(deepspeed=...)``, or by ``deepspeed_config_file`` in an Accelerate
    config. A path is looked up next to the file that names it, then from each folder between
    it and the project root, then from the root: the tools open it from the working directory
    the run starts in, often a folder above the file. A path the project's ``.gitignore``
    ignores (a run makes it), one inside a git submodule the checkout has not fetched, and a
    bare name the project's own code maps to a config it ships (ms-swift's ``deepspeed: zero2``)
    are not missing files. A path written as documentation's fill-in (``/path/to/zero3.json``,
    ``<your_ds_config>``) is an info that says so: the user knows it is not there yet. So is an
    absolute path the project does not hold (``/home/train/ds_config.json``, the
    ``~/.cache/huggingface/accelerate/default_config.yaml`` that ``accelerate config`` saves):
    a file of the machine that runs the job, which no checkout shows missing or present, unless
    its folders are the project's own (``/lustre/.../LLaMA-Factory/examples/deepspeed/x.json``
    in a project holding ``LLaMA-Factory/examples/deepspeed/``: the author's clone).

    ## Why it matters
    The run fails when the Trainer opens the file — after the model was downloaded and loaded.
    And memlint cannot see the ZeRO stage, offload or precision of a file it cannot read, so
    the memory estimate leaves them out.

    ## Fix
    Correct the path, or add the file (Axolotl's examples expect its ``deepspeed_configs/``
    folder, fetched with ``axolotl fetch deepspeed_configs``).
    """

    code = "CFG015"
    name = "missing-config-reference"
    severity = Severity.WARNING
    kinds = frozenset({DocumentKind.AXOLOTL, DocumentKind.LLAMAFACTORY, DocumentKind.LLAMAFACTORY_V1, DocumentKind.HF_ARGS, DocumentKind.ACCELERATE, DocumentKind.PYTHON, DocumentKind.SHELL})
    python_needs = None  # a script's references are its facts

    VALID = (
        Example(_AXOLOTL, path="qwen-14b.yml", files={"deepspeed_configs/zero3_bf16.json": _ZERO3}),
        Example(
            _AXOLOTL.replace("deepspeed_configs/zero3_bf16.json", "tmp/ds/zero3_bf16.json"),
            path="qwen-14b.yml",
            files={".gitignore": "__pycache__\n*.pth\nwandb\ntmp\n"},
            title="A file under a folder the project's .gitignore ignores is made by an earlier step, not committed",
        ),
        Example(
            "#!/bin/bash\nMODEL=meta-llama/Meta-Llama-3-8B-Instruct\n\ncat <<EOT > dpo_config.yaml\n"
            "model_name_or_path: $MODEL\nper_device_train_batch_size: 1\ngradient_accumulation_steps: 16\n"
            "bf16: true\nEOT\n\naccelerate launch --config_file configs/zero2.yaml run_dpo.py dpo_config.yaml\n",
            path="run_loop.sh",
            files={"configs/zero2.yaml": "distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 2\n",
                   "run_dpo.py": "from trl import DPOConfig, DPOTrainer\n"},
            title="The launcher writes the config itself (a here-document) before it launches the run",
        ),
    )
    INVALID = (
        Example(
            _AXOLOTL,
            path="qwen-14b.yml",
            lines=(8,),
            message="does not exist",
            title="The DeepSpeed config was never copied into the project",
        ),
        Example(
            _AXOLOTL,
            path="qwen-14b.yml",
            files={"deepspeed_configs/zero3_bf16.json": _ZERO3.replace('"auto"\n', '"auto",\n')},
            lines=(8,),
            message="cannot be read",
            title="The referenced file is not valid JSON",
        ),
        Example(
            "#!/bin/bash\ntorchrun --nproc_per_node 8 train.py \\\n    --model_name_or_path Qwen/Qwen2.5-7B \\\n"
            "    --deepspeed /path/to/zero3.json \\\n    --output_dir out\n",
            path="scripts/finetune.sh",
            files=_TRAINER_SCRIPT,
            lines=(4,),
            message="is a placeholder to fill in",
            title="A documentation fill-in is an info, not a missing file",
        ),
        Example(
            "#!/bin/bash\naccelerate launch --config_file /home/train/.cache/huggingface/accelerate/default_config.yaml \\\n"
            "    train.py --model_name_or_path Qwen/Qwen2.5-7B --output_dir out\n",
            path="scripts/launch.sh",
            files=_TRAINER_SCRIPT,
            lines=(2,),
            message="`accelerate config` saves on the machine that runs the job",
            title="A file of the machine that runs the job is an info: no checkout holds it",
        ),
    )

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        for facts in ctx.facts():
            for reference in facts.references:
                if reference.origin is None or reference.origin.path != ctx.path:
                    continue
                written = str(reference.value)
                target = ctx.resolve_reference(written)
                if target is None:
                    if _generated(ctx, written):
                        continue  # git ignores it (a run makes it first) or a submodule brings it
                    if _preset_name(ctx, written):
                        continue  # a name the project's code maps to a config it ships
                    if _installed_modules_config(ctx, facts, reference):
                        continue  # the config folder of a module the project does not hold
                    if _handed_to_plain_python(ctx, facts, reference):
                        continue  # a data file of a script that imports no ML library
                    if ctx.kind is DocumentKind.SHELL and writes(ctx.parsed.text, reference.origin.range.start.line,
                                                                 written):
                        continue  # the launcher writes it itself before the launch (a here-document)
                    outside = _outside_the_project(written) if not ctx.names_the_clone(written) else None
                    if outside is not None:
                        yield Finding(reference.origin.range, outside, severity=Severity.INFO)
                        continue
                    if looks_like_placeholder(written):
                        yield Finding(reference.origin.range,
                                      f"`{written}` is a placeholder to fill in with the path of your config; until "
                                      "then memlint estimates without its settings", severity=Severity.INFO)
                        continue
                    yield Finding(reference.origin.range,
                                  f"`{written}` does not exist (looked next to {Path(ctx.path).name}, in the folders "
                                  "above it and in "
                                  "the project root); the run fails when it opens it, and memlint "
                                  "estimates without its settings")
                    continue
                problem = self._unreadable(ctx, target)
                if problem:
                    yield Finding(reference.origin.range, f"`{written}` cannot be read: {problem}")

    @staticmethod
    def _unreadable(ctx: RuleContext, target: Path) -> str | None:
        parsed = ctx.parsed_document(target)
        if parsed.document.problem is not None:
            return parsed.document.problem
        if parsed.structured is not None and not parsed.structured.ok:
            first = next(p for p in parsed.structured.problems if p.kind != "duplicate-key")
            return f"{first.message} (line {first.range.start.line})"
        return None


def _outside_the_project(written: str) -> str | None:
    """What to say of an absolute path (``/home/train/...``, ``~/...``) the project does not hold:
    a file of the machine that runs the job, which no checkout can show missing or present
    (cywjava/chatglm-6b-fine-tuning's ``accelerate launch --config_file
    /home/train/.cache/huggingface/accelerate/default_config.yaml``, the file ``accelerate
    config`` saves there). None for a path relative to the project, or a placeholder's; the
    caller leaves out a path into the author's clone of the project (its file is missing here)."""
    if not written.startswith(("/", "~")) or looks_like_placeholder(written):
        return None
    if "/.cache/huggingface/accelerate/" in written:
        return (f"`{written}` is the config `accelerate config` saves on the machine that runs the job, not a file "
                "of the project; memlint cannot read it and estimates without its settings")
    return (f"`{written}` is an absolute path on the machine that runs the job, outside the project; memlint "
            "cannot read it and estimates without its settings (commit the config and name it relative to the "
            "project to have it checked)")


def _installed_modules_config(ctx: RuleContext, facts, reference) -> bool:
    """Hydra's ``--config-path=./config --config-name=ppo_megatron_trainer`` beside ``python3 -m
    verl.trainer.main_ppo`` names a file of the module's own folder; when the project does not
    hold that module (verl installed with pip: reward-modeling-develop's ``rmood/rl/ppo/*.sh``),
    the file is the installed package's, which memlint cannot see."""
    if reference.note != CONFIG_OPTIONS_NOTE or facts.launches is None:
        return False
    return ctx.resolve_reference(str(facts.launches.value)) is None


def _handed_to_plain_python(ctx: RuleContext, facts, reference) -> bool:
    """A JSON/YAML argument of a project script that imports no ML library (Poisoning-Instruction-
    Tuned-Models' ``python poison_scripts/get_countnorm.py $1 pool.jsonl countnorm.json``, the
    file it writes): a data step's input or output, no config of a run."""
    if reference.note != POSITIONAL_CONFIG_NOTE or facts.launches is None or _an_override(ctx, reference):
        return False
    script = ctx.resolve_reference(str(facts.launches.value))
    return script is not None and ctx.kind_of(script) is DocumentKind.PYTHON_OTHER


def _an_override(ctx: RuleContext, reference) -> bool:
    """``++dataset_config.stats=path.json`` (or ``stats=path.json``, a variable the launch passes
    on): a value written under a name, which a wrapper that imports its project's pipeline
    (SLAM-LLM's ``inference_mir_batch.py``) hands to its config system; not a bare argument."""
    start = reference.origin.range.start
    lines = ctx.parsed.text.splitlines()
    if not 0 < start.line <= len(lines):
        return False
    before = lines[start.line - 1][:start.column]
    return before.endswith("=")


def _generated(ctx: RuleContext, written: str) -> bool:
    """Is the path, from the document's folder or the project root, one the project's .gitignore
    ignores (picotron's ``train.py --config tmp/fast_benchmark/x.json``, written by its
    ``create_config.py --out_dir tmp``), or one in a submodule this checkout has not fetched?"""
    root = ctx.settings.root
    here = Path(ctx.path).parent
    return any(ignored_by_git(base / written, root) or in_absent_submodule(base / written, root)
               for base in (here, root))


_PRESET_SUFFIXES = (".json", ".yaml", ".yml")


def _preset_name(ctx: RuleContext, written: str) -> bool:
    """Is ``written`` a bare name (no folder, no suffix) of a config the project ships and its
    own code names? ms-swift's ``deepspeed: zero2`` is looked up by ``SftArguments`` in a list
    of names (``['zero0', 'zero1', 'zero2', ...]``) and mapped to its ``swift/config/zero2.json``;
    plain TrainingArguments would open a file called ``zero2``, so both must be there."""
    if not written or "/" in written or "\\" in written or Path(written).suffix:
        return False
    files = ctx.project_files()
    if not any(f.stem == written and f.suffix in _PRESET_SUFFIXES for f in files):
        return False
    literals = (f"'{written}'", f'"{written}"')
    for path in files:
        if path.suffix == ".py":
            text = ctx.text_of(path)
            if any(literal in text for literal in literals):
                return True
    return False
