"""ZRO001 proposes only the lighter forms the run's framework offers. KTransformers (LLaMA-Factory's
``use_kt: true``: routed experts in host memory, computed on the CPU) runs as one process or under
FSDP2, whose settings its Accelerate file carries ("Accelerate YAML contains FSDP2 settings only";
``KTransformers is incompatible with DeepSpeed ZeRO-3``): plain DDP is no form of it, so the lighter
form of its full sharding is FSDP2 without resharding after forward (SHARD_GRAD_OP)."""

from __future__ import annotations

from pathlib import Path

from memlint.lint.engine import Linter
from memlint.project.settings import Settings

from tests.facts.facts_testing import dedent, write

# a LLaMA-Factory checkout's own KTransformers example: a LoRA fine-tune of a 30B MoE
KT_SFT = dedent('''
    ### model
    model_name_or_path: Qwen/Qwen3-30B-A3B-Instruct-2507
    trust_remote_code: true

    ### method
    stage: sft
    do_train: true
    finetuning_type: lora
    lora_rank: 8
    lora_target: all

    ### dataset
    dataset: identity, alpaca_en_demo
    template: qwen3_nothink
    cutoff_len: 2048

    ### output
    output_dir: saves/qwen3moe_kt

    ### train
    per_device_train_batch_size: 1
    gradient_accumulation_steps: 8
    learning_rate: 1.0e-4
    bf16: true

    ### ktransformers
    use_kt: true
''')

FSDP2 = dedent('''
    compute_environment: LOCAL_MACHINE
    distributed_type: FSDP
    fsdp_config:
      fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
      fsdp_cpu_ram_efficient_loading: true
      fsdp_offload_params: false
      fsdp_reshard_after_forward: true
      fsdp_state_dict_type: FULL_STATE_DICT
      fsdp_version: 2
    mixed_precision: bf16
    num_machines: 1
    num_processes: 4 # Adjust based on your GPU count
    rdzv_backend: static
    same_network: true
    use_cpu: false
''')

DOC = dedent('''
    # KTransformers LoRA SFT

    Launch the standard training entry point through Accelerate:

    ```bash
    CUDA_VISIBLE_DEVICES=0,1,2,3 accelerate launch \\
      --config_file examples/ktransformers/accelerate/fsdp2_kt_bf16.yaml \\
      src/train.py examples/ktransformers/train_lora/qwen3moe_lora_sft_kt.yaml
    ```
''')

TRAIN = dedent('''
    from llamafactory.train.tuner import run_exp


    def main():
        run_exp()


    if __name__ == "__main__":
        main()
''')


def _zro001(root: Path, kt: bool) -> list:
    files = {
        "src/llamafactory/__init__.py": "",
        "src/train.py": TRAIN,
        "docs/ktransformers.md": DOC,
        "examples/ktransformers/accelerate/fsdp2_kt_bf16.yaml": FSDP2,
        "examples/ktransformers/train_lora/qwen3moe_lora_sft_kt.yaml":
            KT_SFT if kt else KT_SFT.replace("use_kt: true\n", ""),
    }
    write(root, files)
    (root / ".git").mkdir(exist_ok=True)
    settings = Settings(root=root).with_overrides(gpu="h100", gpus=8, cache=False, offline=True)
    return [d for d in Linter(settings).lint_path(root / "examples/ktransformers/accelerate/fsdp2_kt_bf16.yaml")
            if d.code == "ZRO001"]


def test_ktransformers_is_offered_fsdp2_without_resharding_not_ddp(tmp_path: Path):
    [finding] = _zro001(tmp_path, kt=True)
    assert "with FSDP SHARD_GRAD_OP" in finding.message
    assert "DDP" not in finding.message


def test_without_ktransformers_plain_data_parallelism_is_the_lightest(tmp_path: Path):
    [finding] = _zro001(tmp_path, kt=False)
    assert "plain data parallelism (DDP / ZeRO-0)" in finding.message
