"""CFG014: a DeepSpeed value that disagrees with the HF Trainer's value for it."""

from __future__ import annotations

from typing import Any, Iterator

from memlint.configs.deepspeed import enabled, number, positive_int
from memlint.documents.kinds import DocumentKind
from memlint.facts.resolve import ResolvedRun
from memlint.lint.context import RuleContext
from memlint.model.diagnostics import Applicability, Related, Severity
from memlint.rules._config import (
    HF_TRAINER_FAMILY,
    replace_with,
    runs_through,
    shown_location,
    trainer_default,
    world_size,
)
from memlint.rules.base import Example, Finding, Rule

_SFT = """\
from datasets import load_dataset
from trl import SFTConfig, SFTTrainer

dataset = load_dataset("trl-lib/Capybara", split="train")
args = SFTConfig(
    output_dir="out/qwen-sft",
    per_device_train_batch_size={batch},
    gradient_accumulation_steps=4,
    max_length=2048,
    bf16=True,
    deepspeed="configs/ds_zero3.json",
)
trainer = SFTTrainer(model="Qwen/Qwen2.5-1.5B", args=args, train_dataset=dataset)
trainer.train()
"""

_LF = """\
### model
model_name_or_path: Qwen/Qwen2.5-7B-Instruct

### method
stage: sft
do_train: true
finetuning_type: full
deepspeed: examples/deepspeed/ds_z3_config.json

### dataset
dataset: alpaca_en_demo
template: qwen
cutoff_len: 2048

### train
per_device_train_batch_size: 2
gradient_accumulation_steps: 8
learning_rate: 1.0e-5
num_train_epochs: 3.0
{precision}
output_dir: saves/qwen2.5-7b/full/sft
"""

_DS_Z3 = """\
{{
  "train_batch_size": "auto",
  "train_micro_batch_size_per_gpu": "auto",
  "gradient_accumulation_steps": {accum},
  "gradient_clipping": "auto",
  "bf16": {{"enabled": {bf16}}},
  "zero_optimization": {{
    "stage": 3,
    "overlap_comm": false,
    "contiguous_gradients": true,
    "stage3_gather_16bit_weights_on_model_save": true
  }}
}}
"""

# (DeepSpeed key, memlint fact, TrainingArguments field(s) it is checked against)
CHECKS: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("train_micro_batch_size_per_gpu",), "micro_batch", "per_device_train_batch_size"),
    (("gradient_accumulation_steps",), "grad_accum", "gradient_accumulation_steps"),
    (("gradient_clipping",), "grad_clip", "max_grad_norm"),
    (("fp16", "enabled"), "fp16", "fp16"),
    (("bf16", "enabled"), "bf16", "bf16"),
)
# The field names Axolotl and LLaMA-Factory use for the same TrainingArguments values.
SPELLING = {"axolotl": {"per_device_train_batch_size": "micro_batch_size"}}


def _text(value: Any) -> str:
    return "true" if value is True else "false" if value is False else str(value)


class TrainerDeepSpeedMismatch(Rule):
    """## What it does
    For runs where the HF Trainer drives DeepSpeed (a script with ``TrainingArguments`` or
    TRL's configs, an Axolotl or LLaMA-Factory YAML), compares the values both sides set —
    micro-batch, gradient accumulation, global batch, gradient clipping, fp16 and bf16 — the
    way ``transformers/integrations/deepspeed.py`` does at start-up. A Trainer value the
    script does not set is the Trainer's default (``per_device_train_batch_size`` 8,
    ``max_grad_norm`` 1.0, ``bf16`` off — on in TRL). The finding sits on the DeepSpeed value.

    ## Why it matters
    The Trainer fills DeepSpeed's ``"auto"`` values with its own, and refuses to start when a
    concrete DeepSpeed value differs ("Please correct the following DeepSpeed config values
    that mismatch TrainingArguments values"): a ``"bf16": {"enabled": true}`` with a script
    that never set ``bf16=True`` fails after the model was loaded on every GPU.

    ## Fix
    Set the DeepSpeed value to ``"auto"`` (the Trainer then fills its own value in), or make
    the two agree.
    """

    code = "CFG014"
    name = "trainer-deepspeed-mismatch"
    severity = Severity.ERROR
    kinds = frozenset({DocumentKind.DEEPSPEED})
    python_needs = None  # judges runs from their facts
    judges_runs = True
    fix_applicability = Applicability.UNSAFE

    VALID = (
        Example(
            _DS_Z3.format(accum='"auto"', bf16='"auto"'),
            path="examples/deepspeed/ds_z3_config.json",
            files={"examples/train_full/qwen2.5_full_sft.yaml": _LF.format(precision="bf16: true")},
            title='"auto" everywhere the Trainer fills it',
        ),
        Example(
            _DS_Z3.format(accum=8, bf16="true"),
            path="examples/deepspeed/ds_z3_config.json",
            files={"examples/train_full/qwen2.5_full_sft.yaml": _LF.format(precision="bf16: true")},
            title="Concrete values that agree with the LLaMA-Factory YAML",
        ),
    )
    INVALID = (
        Example(
            _DS_Z3.format(accum=4, bf16="true"),
            path="examples/deepspeed/ds_z3_config.json",
            files={"examples/train_full/qwen2.5_full_sft.yaml": _LF.format(precision="fp16: true")},
            lines=(4, 6),
            message="the HF Trainer refuses to start",
            title="Accumulation 4 against 8, and DeepSpeed bf16 against a fp16 run",
        ),
    )

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        if ctx.kind != "deepspeed" or ctx.structured is None or not isinstance(ctx.structured.value, dict):
            return
        reported: set[tuple] = set()
        for run in runs_through(ctx):
            framework = run.plan.value("framework")
            if framework not in HF_TRAINER_FAMILY:
                continue
            for finding in self._compare(ctx, run, str(framework)):
                marker = (finding.range, finding.message)
                if marker not in reported:
                    reported.add(marker)
                    yield finding

    def _compare(self, ctx: RuleContext, run: ResolvedRun, framework: str) -> Iterator[Finding]:
        data = ctx.structured
        assert data is not None  # check() looks only at parsed DeepSpeed configs
        trainer_values: dict[str, Any] = {}
        for ds_path, fact, field in CHECKS:
            ds_value = data.get(*ds_path)
            hf_value, origin = self._trainer_value(ctx, run, framework, fact, field)
            trainer_values[fact] = hf_value
            if ds_value is None or ds_value == "auto" or hf_value is None:
                continue
            if fact in ("fp16", "bf16"):
                ds_value = enabled(data.get(ds_path[0]))
            elif fact == "grad_clip":
                ds_value, hf_value = number(ds_value), number(hf_value)
            else:
                ds_value = positive_int(ds_value)
            if ds_value is None or ds_value == hf_value:
                continue
            yield self._finding(ctx, ds_path, ds_value, SPELLING.get(framework, {}).get(field, field),
                                hf_value, origin)
        total = data.get("train_batch_size")
        micro, accum = trainer_values.get("micro_batch"), trainer_values.get("grad_accum")
        world, _ = world_size(ctx, run)
        if positive_int(total) and micro and accum and world:
            expected = micro * accum * world
            if positive_int(total) != expected:
                yield self._finding(ctx, ("train_batch_size",), total,
                                    f"per_device_train_batch_size × gradient_accumulation_steps × {world} GPUs",
                                    expected, None, source=f" ({micro} × {accum} × {world})")

    def _trainer_value(self, ctx: RuleContext, run: ResolvedRun, framework: str, fact: str, field: str):
        """The Trainer's value for ``field`` in this run, and the fact that set it (if any)."""
        name = "mixed" if fact in ("fp16", "bf16") else fact
        candidates = [run.plan.get(name)] + [f for n, a, b in run.plan.conflicts if n == name for f in (a, b)]
        ours = [f for f in candidates if f is not None and (f.origin is None or ctx.kind_of(f.origin.path)
                                                             not in (DocumentKind.DEEPSPEED, DocumentKind.ACCELERATE))]
        chosen = next((f for f in ours if f.origin is not None), ours[0] if ours else None)
        if name == "mixed":
            if chosen is not None:
                return chosen.value == fact, chosen
            default = trainer_default(framework, fact)
            if default is None and framework == "trl" and fact == "bf16":  # TRL: bf16 unless fp16
                return True, None
            return bool(default), None
        if chosen is not None:
            return chosen.value, chosen
        return trainer_default(framework, field), None

    def _finding(self, ctx: RuleContext, ds_path: tuple[str, ...], ds_value: Any, field: str,
                 hf_value: Any, origin, source: str | None = None) -> Finding:
        assert ctx.structured is not None  # check() looks only at parsed DeepSpeed configs
        where = ctx.structured.range_of(ds_path)
        ds_text, hf_text = _text(ds_value), _text(hf_value)
        if source is not None:
            pass
        elif origin is None:
            source = " (the Trainer's default)"
        elif origin.origin is None:
            source = f" ({origin.note})"
        else:
            source = f" (`{origin.note}` at {shown_location(ctx, origin.origin)})"
        message = (f"DeepSpeed `{'.'.join(ds_path)}` is {ds_text} but the Trainer's {field} is {hf_text}{source}: "
                   "the HF Trainer refuses to start on a mismatch; set it to \"auto\" so the Trainer fills it in")
        related: tuple[Related, ...] = ()
        if origin is not None and origin.origin is not None:
            related = (Related(origin.origin.path, origin.origin.range, f"the Trainer's {field}"),)
        fix = replace_with(ctx.path, where, '"auto"', f'set {".".join(ds_path)} to "auto"')
        return Finding(where, message, fix=fix, related=related)
