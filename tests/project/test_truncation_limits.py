"""A length that is a truncation limit (LLaVA-NeXT's ``--model_max_length 32768``, TRL's
``max_length``) is what every batch holds only when the run packs or pads to it; LLaVA's
``DataCollatorForSupervisedDataset`` pads each batch with ``pad_sequence`` to its longest
sample. The estimate at the limit then assumes a sample that long in every batch, and an
out-of-memory verdict that rests on it is a warning that says so."""

from __future__ import annotations

import re
from pathlib import Path

from memlint.estimate import estimate_training
from memlint.lint.engine import Linter, capacity_of, run_context
from memlint.project.project import Project
from memlint.project.settings import Settings

from tests.facts.facts_testing import dedent, write

TRAIN_PY = dedent('''
    from dataclasses import dataclass, field
    from typing import Dict, Optional, Sequence

    import torch
    import transformers


    @dataclass
    class ModelArguments:
        model_name_or_path: Optional[str] = field(default="Qwen/Qwen2-7B-Instruct")
        mm_tunable_parts: Optional[str] = field(default=None, metadata={"help": "mm_vision_tower,mm_mlp_adapter,mm_language_model"})


    @dataclass
    class TrainingArguments(transformers.TrainingArguments):
        model_max_length: int = field(default=4096, metadata={"help": "Maximum sequence length."})


    def preprocess(sources, tokenizer):
        return tokenizer(sources, truncation=True, max_length=tokenizer.model_max_length{padding})


    @dataclass
    class DataCollatorForSupervisedDataset(object):
        tokenizer: transformers.PreTrainedTokenizer

        def __call__(self, instances: Sequence[Dict]) -> Dict[str, torch.Tensor]:
            input_ids = [instance["input_ids"] for instance in instances]
            input_ids = torch.nn.utils.rnn.pad_sequence(input_ids, batch_first=True,
                                                        padding_value=self.tokenizer.pad_token_id)
            return dict(input_ids=input_ids, attention_mask=input_ids.ne(self.tokenizer.pad_token_id))


    def train():
        parser = transformers.HfArgumentParser((ModelArguments, TrainingArguments))
        model_args, training_args = parser.parse_args_into_dataclasses()
        model = transformers.AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path,
                                                                  torch_dtype=torch.bfloat16)
        tokenizer = transformers.AutoTokenizer.from_pretrained(model_args.model_name_or_path,
                                                               model_max_length=training_args.model_max_length)
        trainer = transformers.Trainer(model=model, args=training_args,
                                       data_collator=DataCollatorForSupervisedDataset(tokenizer=tokenizer))
        trainer.train()


    if __name__ == "__main__":
        train()
''')

LAUNCH = dedent('''
    #!/bin/bash
    ACCELERATE_CPU_AFFINITY=1 torchrun --nproc_per_node=8 \\
        train.py \\
        --deepspeed zero3.json \\
        --model_name_or_path Qwen/Qwen2-7B-Instruct \\
        --bf16 True \\
        --per_device_train_batch_size 16 \\
        --model_max_length 8192 \\
        --gradient_checkpointing True
''')

ZERO3 = '{"zero_optimization": {"stage": 3}, "bf16": {"enabled": "auto"}, "train_micro_batch_size_per_gpu": "auto"}\n'


def _settings(root: Path, padding: str = "") -> Settings:
    write(root, {"train.py": TRAIN_PY.replace("{padding}", padding), "run.sh": LAUNCH, "zero3.json": ZERO3})
    (root / ".git").mkdir(exist_ok=True)
    return Settings(root=root).with_overrides(gpu="h100", gpus=8, cache=False)


def _memory(settings: Settings) -> list:
    linter = Linter(settings)
    return [d for name in ("run.sh", "train.py", "zero3.json") for d in linter.lint_path(settings.root / name)
            if d.code in ("MEM001", "MEM002")]


def test_a_truncation_limit_with_dynamic_padding_is_an_assumption(tmp_path: Path):
    settings = _settings(tmp_path)
    [run] = Project(settings).runs_for(tmp_path / "run.sh", run_context(settings))
    assert run.setup.seq_len == 8192
    [assumed] = [a for a in run.assumed if a.fact == "seq_len_limit"]
    assert "8192" in assumed.value and "model_max_length" in assumed.value
    [finding] = _memory(settings)
    # the data decides; over an epoch an instruction set's longest samples reach the limit, so a
    # warning that says up to which sample length a batch fits
    assert finding.code == "MEM001" and finding.severity.name == "WARNING"
    assert "every batch padded to 8192 tokens" in finding.message
    assert "if a batch holds a sample of 8192 tokens" in finding.message
    [longest] = re.findall(r"at most ~(\d+) tokens fits", finding.message)
    assert 512 <= int(longest) < 8192 and int(longest) % 64 == 0
    capacity = capacity_of(settings)
    assert estimate_training(run.arch, run.setup.but(seq_len=int(longest)), capacity).fits
    assert not estimate_training(run.arch, run.setup.but(seq_len=int(longest) + 64), capacity).fits


def test_a_projector_alone_on_captions_is_an_info(tmp_path: Path):
    # LLaVA-NeXT's pretrain_clip.sh: the alignment stage trains the projector on BLIP-558k captions
    # (~600 tokens with the image), which never reach model_max_length 8192
    settings = _settings(tmp_path)
    launch = LAUNCH.replace("--gradient_checkpointing True", '--mm_tunable_parts="mm_mlp_adapter" \\\n'
                                                             "    --gradient_checkpointing True")
    (tmp_path / "run.sh").write_text(launch)
    [run] = Project(settings).runs_for(tmp_path / "run.sh", run_context(settings))
    assert run.plan.get("projector_only").value is True
    [finding] = _memory(settings)
    assert finding.code == "MEM001" and finding.severity.name == "INFO"
    assert "only the projector trains, on image-caption pairs" in finding.message


def test_tuning_the_language_model_too_stays_a_warning(tmp_path: Path):
    settings = _settings(tmp_path)
    parts = '--mm_tunable_parts="mm_vision_tower,mm_mlp_adapter,mm_language_model" \\\n'
    (tmp_path / "run.sh").write_text(LAUNCH.replace("--gradient_checkpointing True",
                                                    parts + "    --gradient_checkpointing True"))
    [finding] = _memory(settings)
    assert finding.code == "MEM001" and finding.severity.name == "WARNING"


def test_a_run_that_short_batches_would_not_save_stays_an_error(tmp_path: Path):
    # Qwen2.5-32B fully fine-tuned under ZeRO-3 on 8 GPUs: its optimizer states alone are ~61 GiB a
    # GPU, so no data makes it fit and the truncation limit is no assumption the verdict rests on
    settings = _settings(tmp_path)
    (tmp_path / "run.sh").write_text(LAUNCH.replace("Qwen/Qwen2-7B-Instruct", "Qwen/Qwen2.5-32B"))
    [finding] = _memory(settings)
    assert finding.code == "MEM001" and finding.severity.name == "ERROR"
    assert "every batch padded" not in finding.message and "if a batch holds" not in finding.message


def test_padding_to_max_length_makes_every_batch_full(tmp_path: Path):
    settings = _settings(tmp_path, padding=', padding="max_length"')
    [run] = Project(settings).runs_for(tmp_path / "run.sh", run_context(settings))
    assert not [a for a in run.assumed if a.fact == "seq_len_limit"]
    [finding] = _memory(settings)
    assert finding.code == "MEM001" and finding.severity.name == "ERROR"


def test_packing_makes_every_batch_full(tmp_path: Path):
    write(tmp_path, {"sft.yaml": dedent('''
        model_name_or_path: Qwen/Qwen2.5-7B
        per_device_train_batch_size: 8
        max_length: 8192
        packing: true
        gradient_checkpointing: true
        bf16: true
        output_dir: out
    ''')})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False)
    [run] = Project(settings).runs_for(tmp_path / "sft.yaml", run_context(settings))
    assert run.plan.get("full_length").value == "packing"
    assert not [a for a in run.assumed if a.fact == "seq_len_limit"]


def test_a_block_size_is_no_truncation_limit(tmp_path: Path):
    write(tmp_path, {"clm.yaml": "model_name_or_path: Qwen/Qwen2.5-7B\nper_device_train_batch_size: 8\n"
                                 "block_size: 4096\nbf16: true\noutput_dir: out\n"})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False)
    [run] = Project(settings).runs_for(tmp_path / "clm.yaml", run_context(settings))
    assert run.setup.seq_len == 4096
    assert not [a for a in run.assumed if a.fact == "seq_len_limit"]


LLAMAFACTORY_SFT = dedent('''
    ### model
    model_name_or_path: Qwen/Qwen2.5-7B-Instruct

    ### method
    stage: {stage}
    do_train: true
    finetuning_type: full
    deepspeed: examples/deepspeed/ds_z3_config.json

    ### dataset
    dataset: alpaca_en_demo
    template: qwen
    cutoff_len: 16384
    {packing}

    ### train
    per_device_train_batch_size: 2
    gradient_accumulation_steps: 8
    learning_rate: 1.0e-5
    num_train_epochs: 3.0
    bf16: true
    output_dir: saves/qwen2.5-7b/full/sft
''')


def _llamafactory_run(root: Path, stage: str = "sft", packing: str = ""):
    write(root, {"examples/train_full/qwen_full_sft.yaml": LLAMAFACTORY_SFT.format(stage=stage, packing=packing),
                 "examples/deepspeed/ds_z3_config.json": ZERO3,
                 "run.sh": "FORCE_TORCHRUN=1 NPROC_PER_NODE=8 llamafactory-cli train "
                           "examples/train_full/qwen_full_sft.yaml\n"})
    (root / ".git").mkdir(exist_ok=True)
    settings = Settings(root=root).with_overrides(gpu="h100", gpus=8, cache=False)
    [run] = Project(settings).runs_for(root / "examples/train_full/qwen_full_sft.yaml", run_context(settings))
    return settings, run


def test_llamafactory_cutoff_len_is_a_truncation_limit_in_sft(tmp_path: Path):
    # LLaMA-Factory's SFT collator (a DataCollatorForSeq2Seq) pads a batch to its longest sample;
    # cutoff_len only cuts the longer ones
    settings, run = _llamafactory_run(tmp_path)
    assert run.setup.seq_len == 16384
    [assumed] = [a for a in run.assumed if a.fact == "seq_len_limit"]
    assert "cutoff_len" in assumed.value
    findings = [d for d in Linter(settings).lint_path(tmp_path / "examples/train_full/qwen_full_sft.yaml")
                if d.code == "MEM001"]
    [finding] = findings
    assert finding.severity.name == "WARNING" and "if a batch holds a sample of 16384 tokens" in finding.message


def test_llamafactory_preference_stages_pad_to_the_longest_too(tmp_path: Path):
    _, run = _llamafactory_run(tmp_path, stage="dpo")
    assert [a for a in run.assumed if a.fact == "seq_len_limit"]


def test_llamafactory_pretraining_and_packing_fill_every_block(tmp_path: Path):
    # stage pt concatenates texts into blocks of cutoff_len (packing defaults to true there), and an
    # SFT run with packing (or neat_packing, which turns it on) fills each row too
    _, pretraining = _llamafactory_run(tmp_path / "pt", stage="pt")
    assert not [a for a in pretraining.assumed if a.fact == "seq_len_limit"]
    for key in ("packing", "neat_packing"):
        _, packed = _llamafactory_run(tmp_path / key, packing=f"{key}: true")
        assert packed.plan.get("full_length").value == key
        assert not [a for a in packed.assumed if a.fact == "seq_len_limit"]
