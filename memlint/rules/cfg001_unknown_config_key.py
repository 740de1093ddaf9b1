"""CFG001: a config key the tool does not know (usually a misspelling)."""

from __future__ import annotations

from typing import Iterator

from memlint.configs.composer import REFUSES_UNUSED_FROM, interpolated
from memlint.configs.key_history import project_fields, versioned_issues
from memlint.facts.pinned_versions import Pin, pins
from memlint.lint.context import RuleContext
from memlint.model.diagnostics import Applicability, Severity
from memlint.rules._config import SchemaRule
from memlint.rules.base import Example, Finding

# config kinds a project's own argument classes can extend (parsed by HfArgumentParser / TrlParser)
_PARSED_BY_THE_PROJECT = ("hf-args", "llamafactory")  # both are read by HfArgumentParser


class UnknownConfigKey(SchemaRule):
    """## What it does
    Checks every key of a DeepSpeed, Accelerate, Axolotl, LLaMA-Factory or TrainingArguments /
    TRL config against the schema generated from the tool's own source, and reports keys the
    tool does not read, with the key that was probably meant ("did you mean ...?").

    ## Why it matters
    Several tools drop unknown keys without a word. DeepSpeed ignores a misspelt top-level key
    (``"gradient_clipingg": 1.0`` trains without clipping), and Axolotl ignores
    ``sequence_length`` because it reads ``sequence_len``: the run silently trains with the
    default of 512 tokens, or runs out of memory with a setting the user believes is applied.
    Accelerate, LLaMA-Factory and ``HfArgumentParser`` refuse the file instead — after the job
    waited in the queue.

    A TrainingArguments / TRL config may hold the fields of the project's own argument classes:
    when the project's code passes a dataclass to ``HfArgumentParser`` or ``TrlParser`` (such
    as alignment-handbook's ``SFTConfig`` subclass with ``chat_template``), that class's fields
    and those of its bases in the project are known keys. So are those of a class the project
    builds from a mapping it reads from a file (``args = TrainArgs(**json.load(f))``): such a
    file is the project's config, even when many of its keys look like the Trainer's. And a
    file whose unknown keys (and at least half of all its keys) a script takes one by one from
    a mapping it loads itself (``args = OmegaConf.load(path)``, then ``args.max_train_steps``)
    is that script's own format: HfArgumentParser never reads it, so none of its keys is
    judged against the Trainer's (nor, under OmegaConf, which reads ``1e-5`` as a number,
    their values). So is a file every key of which is a field of one class the project defines
    (open-r1-code-verifier's frozen ``SFTTrainingConfig``, which a loader of its own fills field by
    field; a dataclass's ``from_yaml`` whose YAML, with ``base_model`` beside Trainer names,
    looks like Axolotl's), unless the project is the tool itself; and a node of a Hydra tree that
    reads its parent's values (``config_name: ${..model_path}``). A project whose own argument
    classes declare LLaMA-Factory's ``stage``, ``finetuning_type``, ``cutoff_len`` and
    ``template`` carries a copy of LLaMA-Factory under its own name (LLaVA-Pool's
    ``llavapool/hparams``): its LLaMA-Factory YAMLs are judged by those classes.

    An llm-foundry (Composer) YAML is judged by the llm-foundry the project pins: from 0.10
    ``train.py`` refuses a top-level key its ``TrainConfig`` does not define (put variables under
    ``variables``); earlier releases warned and went on, so under such a pin the finding is a
    warning, and a key the file itself uses as an OmegaConf variable (``data_local: ...`` read as
    ``${data_local}``) is none.

    ## Fix
    Rename the key to the one the tool reads. When the names differ only in case or in ``-``
    versus ``_`` the fix is safe; a "did you mean" rename is offered as an unsafe fix.
    """

    code = "CFG001"
    name = "unknown-config-key"
    severity = Severity.ERROR
    category = "unknown"
    fix_applicability = Applicability.UNSAFE

    VALID = (
        Example(
            "base_model: NousResearch/Llama-3.2-1B\n"
            "load_in_4bit: true\n"
            "adapter: qlora\n"
            "lora_r: 32\n"
            "lora_alpha: 16\n"
            "lora_target_linear: true\n"
            "sequence_len: 2048\n"
            "micro_batch_size: 2\n"
            "gradient_accumulation_steps: 4\n"
            "learning_rate: 0.0002\n"
            "datasets:\n"
            "  - path: teknium/GPT4-LLM-Cleaned\n"
            "    type: alpaca\n",
            path="examples/llama-3/qlora-1b.yml",
            title="An Axolotl QLoRA config whose keys Axolotl reads",
        ),
        Example(
            '{\n  "train_micro_batch_size_per_gpu": "auto",\n  "gradient_accumulation_steps": "auto",\n'
            '  "gradient_clipping": "auto",\n  "bf16": {"enabled": "auto"},\n'
            '  "zero_optimization": {\n    "stage": 3,\n    "stage3_prefetch_bucket_size": "auto",\n'
            '    "stage3_gather_16bit_weights_on_model_save": true\n  }\n}\n',
            path="ds_config_zero3.json",
            title="A Hugging Face style ZeRO-3 config",
        ),
    )
    INVALID = (
        Example(
            "base_model: meta-llama/Llama-3.1-8B\n"
            "sequence_length: 8192\n"
            "micro_batch_size: 1\n"
            "gradient_accumulation_steps: 8\n"
            "learning_rate: 0.00002\n"
            "datasets:\n"
            "  - path: tatsu-lab/alpaca\n"
            "    type: alpaca\n",
            path="axolotl/llama-8b-full.yml",
            lines=(2,),
            message="did you mean `sequence_len`?",
            fixed="base_model: meta-llama/Llama-3.1-8B\n"
            "sequence_len: 8192\n"
            "micro_batch_size: 1\n"
            "gradient_accumulation_steps: 8\n"
            "learning_rate: 0.00002\n"
            "datasets:\n"
            "  - path: tatsu-lab/alpaca\n"
            "    type: alpaca\n",
            title="Axolotl reads `sequence_len`: this run would silently train on 512-token sequences",
        ),
        Example(
            '{\n  "train_batch_size": 64,\n  "train_micro_batch_size_per_gpu": 4,\n'
            '  "gradient_clipingg": 1.0,\n  "zero_optimization": {"stage": 2, "overlap_com": true}\n}\n',
            path="ds_config.json",
            lines=(4, 5),
            message="unknown DeepSpeed key",
            title="A misspelt top-level key is ignored silently; inside `zero_optimization` DeepSpeed refuses it",
        ),
    )

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        for issue in versioned_issues(ctx):
            if issue.category != self.category:
                continue
            if ctx.kind in _PARSED_BY_THE_PROJECT and len(issue.path) == 1:
                if issue.path[0] in project_fields(ctx):
                    continue  # a field of the project's own argument class
            if ctx.kind == "composer" and len(issue.path) == 1:
                older = _older_foundry(ctx)
                if older is not None:
                    if interpolated(ctx.parsed.text, str(issue.path[0])):
                        continue  # a variable the file itself uses, which that release accepts
                    yield Finding(issue.range, _warned_by(issue.message, older), fix=issue.fix,
                                  severity=Severity.WARNING)
                    continue
            yield Finding(issue.range, issue.message, fix=issue.fix, severity=getattr(issue, "severity", None))


def _older_foundry(ctx: RuleContext) -> Pin | None:
    """The project's llm-foundry pin when every release it admits predates the refusal of unused keys."""
    pin = pins(ctx.settings.root, ctx.path).get("llm-foundry")
    return pin if pin is not None and pin.only_before(REFUSES_UNUSED_FROM) else None


def _warned_by(message: str, pin: Pin) -> str:
    said = message.split(" (llm-foundry's train.py refuses", 1)[0]
    return (f"{said} (the llm-foundry you pin, `llm-foundry{pin.specifier}` ({pin.where}), only warns "
            f"\"Unused parameter\" and ignores it; {REFUSES_UNUSED_FROM} and later refuse the file)")
