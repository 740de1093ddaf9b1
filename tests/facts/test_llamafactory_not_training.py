"""LLaMA-Factory's inference (`llamafactory-cli chat`), export and prediction configs name a model
but train nothing: no memory finding, and no "memory not checked" for a model path that a training
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


def test_inference_export_and_predict_configs_train_nothing():
    for text, key in ((INFERENCE, "infer_backend"), (EXPORT, "export_dir"), (PREDICT, "do_predict")):
        facts = one(text, "examples/x/qwen3.yaml")
        assert facts.trains.value is False and key in facts.trains.note
    # the training config, with the same model key, trains
    assert one(TRAIN, "examples/train_full/qwen3_full_sft.yaml").trains is None
    # `do_train` written out decides, whatever else the file has
    assert one(INFERENCE + "do_train: true\n", "examples/x/qwen3.yaml").trains is None


def test_no_memory_note_for_a_model_a_training_run_writes(tmp_path: Path):
    write(tmp_path, {"examples/inference/qwen3_full_sft.yaml": INFERENCE,
                     "examples/merge_lora/qwen3_full_sft.yaml": EXPORT})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", cache=False)
    for name in ("examples/inference/qwen3_full_sft.yaml", "examples/merge_lora/qwen3_full_sft.yaml"):
        assert not [d for d in Linter(settings).lint_path(tmp_path / name) if d.code.startswith("MEM")]
