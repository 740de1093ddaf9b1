"""LLaMA-Factory's inference (`llamafactory-cli chat`), export, prediction and evaluation configs,
and files of model defaults, name a model but train nothing (LLaMA-Factory trains only under
``do_train``): no memory finding, and no "memory not checked" for a model path that a training
run of the project writes (``saves/qwen3-4b/full/sft``)."""

from __future__ import annotations

from pathlib import Path

from facts_testing import dedent, one, write

from memlint.lint.engine import Linter
from memlint.project.settings import Settings

# examples/inference/qwen3_full_sft.yaml and examples/merge_lora/qwen3_full_sft.yaml
INFERENCE = dedent('''
    model_name_or_path: saves/qwen3-4b/full/sft
    template: qwen3_nothink
    infer_backend: huggingface  # choices: [huggingface, vllm, sglang, ktransformers]
    trust_remote_code: true
''')

EXPORT = dedent('''
    ### model
    model_name_or_path: saves/qwen3-4b/full/sft
    template: qwen3_nothink
    trust_remote_code: true

    ### export
    export_dir: saves/qwen3_sft_merged
    export_size: 5
    export_device: cpu  # choices: [cpu, auto]
    export_legacy_format: false
''')

# examples/extras/nlg_eval/llama3_lora_predict.yaml, trimmed
PREDICT = dedent('''
    ### model
    model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
    adapter_name_or_path: saves/llama3-8b/lora/sft
    trust_remote_code: true

    ### method
    stage: sft
    do_predict: true
    finetuning_type: lora

    ### dataset
    eval_dataset: identity,alpaca_en_demo
    template: llama3
    cutoff_len: 2048

    ### output
    output_dir: saves/llama3-8b/lora/predict
    predict_with_generate: true

    ### eval
    per_device_eval_batch_size: 1
''')

# the training run that writes saves/qwen3-4b/full/sft (examples/train_full/qwen3_full_sft.yaml, trimmed)
TRAIN = dedent('''
    ### model
    model_name_or_path: Qwen/Qwen3-4B-Instruct-2507
    trust_remote_code: true

    ### method
    stage: sft
    do_train: true
    finetuning_type: full

    ### dataset
    dataset: identity,alpaca_en_demo
    template: qwen3_nothink
    cutoff_len: 2048

    ### output
    output_dir: saves/qwen3-4b/full/sft

    ### train
    per_device_train_batch_size: 1
    gradient_accumulation_steps: 2
    bf16: true
''')


# ShellyLeee/llm-finetune-rag's configs/models/qwen2.5-7b-instruct.yaml: a model's defaults that the
# training configs of configs/train/ repeat; alone, a full-parameter 7B run that would not fit
MODEL_DEFAULTS = dedent('''
    # Reusable model-level defaults.
    model_name_or_path: Qwen/Qwen2.5-7B-Instruct
    template: qwen
    trust_remote_code: true
    cutoff_len: 4096  # Suggestion for SFT; increase only after checking VRAM and RoPE settings.
    max_length: 4096
''')

# examples/train_lora/llama3_lora_eval.yaml (MMLU few-shot evaluation)
EVALUATION = dedent('''
    model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
    adapter_name_or_path: saves/llama3-8b/lora/sft
    finetuning_type: lora
    task: mmlu_test
    template: fewshot
    n_shot: 5
    save_dir: saves/llama3-8b/lora/eval
    batch_size: 4
''')


def test_inference_export_and_predict_configs_train_nothing():
    for text, key in ((INFERENCE, "infer_backend"), (EXPORT, "export_dir"), (PREDICT, "do_predict")):
        facts = one(text, "examples/x/qwen3.yaml")
        assert facts.trains.value is False and key in facts.trains.note
    # the training config, with the same model key, trains
    assert one(TRAIN, "examples/train_full/qwen3_full_sft.yaml").trains is None
    # `do_train` written out decides, whatever else the file has
    assert one(INFERENCE + "do_train: true\n", "examples/x/qwen3.yaml").trains is None
    assert one(TRAIN.replace("do_train: true", "do_train: false"), "examples/x/qwen3.yaml").trains.value is False


def test_model_defaults_and_evaluation_configs_train_nothing(tmp_path: Path):
    for text in (MODEL_DEFAULTS, EVALUATION):
        facts = one(text, "configs/models/qwen2.5-7b-instruct.yaml")
        assert facts.trains.value is False and "do_train" in facts.trains.note
    write(tmp_path, {"configs/models/qwen2.5-7b-instruct.yaml": MODEL_DEFAULTS,
                     "configs/train/sft_full_qwen2.5_7b.yaml": TRAIN.replace(
                         "Qwen/Qwen3-4B-Instruct-2507", "Qwen/Qwen2.5-7B-Instruct").replace("cutoff_len: 2048",
                                                                                           "cutoff_len: 4096")})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False, offline=True)
    assert not [d for d in Linter(settings).lint_path(tmp_path / "configs/models/qwen2.5-7b-instruct.yaml")
                if d.code.startswith("MEM")]
    # the training config of the same model and length is judged (a full 7B run in DDP does not fit)
    assert [d.code for d in Linter(settings).lint_path(tmp_path / "configs/train/sft_full_qwen2.5_7b.yaml")
            if d.code.startswith("MEM")] == ["MEM001"]


def test_no_memory_note_for_a_model_a_training_run_writes(tmp_path: Path):
    write(tmp_path, {"examples/inference/qwen3_full_sft.yaml": INFERENCE,
                     "examples/merge_lora/qwen3_full_sft.yaml": EXPORT})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", cache=False)
    for name in ("examples/inference/qwen3_full_sft.yaml", "examples/merge_lora/qwen3_full_sft.yaml"):
        assert not [d for d in Linter(settings).lint_path(tmp_path / name) if d.code.startswith("MEM")]


def test_near_miss_a_trainer_file_of_another_project_is_not_taken_for_a_model_defaults_file():
    # Firefly's train_args/dpo/full/minicpm3-4b-dpo-full.json, trimmed: read by its own train.py,
    # which trains without `do_train`; nothing in it is LLaMA-Factory's own
    firefly = dedent('''
        {
            "output_dir": "output/firefly-minicpm-2b-dpo-full",
            "model_name_or_path": "openbmb/MiniCPM3-4B",
            "train_file": "./data/dummy_dpo.jsonl",
            "template_name": "minicpm3",
            "train_mode": "full",
            "per_device_train_batch_size": 1,
            "gradient_accumulation_steps": 16,
            "max_seq_length": 1024,
            "lora_rank": 64,
            "gradient_checkpointing": true,
            "fp16": true
        }
    ''')
    facts = one(firefly, "train_args/dpo/full/minicpm3-4b-dpo-full.json")
    assert facts.kind == "llamafactory" and facts.trains is None
