"""A config no launch names, judged under the parallelism form its peers' launches agree on
(LLaMA-Factory's examples/ascend/, open-instruct's FlatArguments configs), and a shared
Accelerate config that another config's own comment launches (ZRO001 sees that run too)."""

from __future__ import annotations

from memlint.lint.engine import Linter

from tests.facts.facts_testing import dedent
from tests.project.test_config_launchers import (ASCEND, FILES, FINETUNE, FSDP2, LAUNCHER, LLAMAFACTORY_TRAIN, README,
                                                 _config, _memory, _project, _runs)

# LLaMA-Factory's examples/accelerate/fsdp_config.yaml: FSDP1 full sharding on 2 processes
FSDP1 = dedent('''
    compute_environment: LOCAL_MACHINE
    debug: false
    distributed_type: FSDP
    downcast_bf16: 'no'
    fsdp_config:
      fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
      fsdp_backward_prefetch: BACKWARD_PRE
      fsdp_forward_prefetch: false
      fsdp_cpu_ram_efficient_loading: true
      fsdp_offload_params: false
      fsdp_sharding_strategy: FULL_SHARD
      fsdp_state_dict_type: FULL_STATE_DICT
      fsdp_sync_module_states: true
      fsdp_use_orig_params: true
    machine_rank: 0
    main_training_function: main
    mixed_precision: bf16  # or fp16
    num_machines: 1  # the number of nodes
    num_processes: 2  # the number of GPUs in all nodes
    rdzv_backend: static
    same_network: true
    use_cpu: false
''')

ZERO2 = dedent('''
    {
      "train_batch_size": "auto",
      "train_micro_batch_size_per_gpu": "auto",
      "gradient_accumulation_steps": "auto",
      "bf16": {"enabled": "auto"},
      "zero_optimization": {"stage": 2, "overlap_comm": false, "contiguous_gradients": true}
    }
''')

# examples/ascend/qwen3moe_full_sft_fsdp.yaml, trimmed: a 30B MoE full fine-tune launched (in its
# header) with the FSDP1 config
MOE = dedent('''
    # Start FSDP fine-tuning
    # accelerate launch \\
    #     --config_file examples/accelerate/fsdp_config.yaml \\
    #     src/train.py examples/ascend/qwen3moe_full_sft_fsdp.yaml
    # Change `num_processes` in fsdp_config.yaml to 16 in A3

    ### model
    model_name_or_path: Qwen/Qwen3-30B-A3B-Instruct-2507
    trust_remote_code: true
    flash_attn: fa2

    ### method
    stage: sft
    do_train: true
    finetuning_type: full
    disable_gradient_checkpointing: false

    ### dataset
    dataset: alpaca_zh
    template: qwen3
    cutoff_len: 1024

    ### output
    output_dir: saves/Qwen3-30B-A3B-Instruct-2507/full/sft
    report_to: none  # choices: [none, wandb, tensorboard, swanlab, mlflow]

    ### train
    per_device_train_batch_size: 4
    gradient_accumulation_steps: 1
    learning_rate: 1.0e-4
    bf16: true
''')

# examples/ascend/qwen3vlmoe_lora_sft_fsdp.yaml's shape: no launch in it or for it
UNLAUNCHED = dedent('''
    ### model
    model_name_or_path: Qwen/Qwen3-8B
    trust_remote_code: true

    ### method
    stage: sft
    do_train: true
    finetuning_type: full

    ### dataset
    dataset: alpaca_en_demo
    template: qwen3
    cutoff_len: 2048

    ### output
    output_dir: saves/Qwen3-8B/full/sft

    ### train
    per_device_train_batch_size: 8
    gradient_accumulation_steps: 1
    learning_rate: 1.0e-5
    bf16: true
''')

ASCEND_FILES = {
    "src/train.py": LLAMAFACTORY_TRAIN,
    "examples/accelerate/fsdp_config.yaml": FSDP1,
    "examples/accelerate/fsdp2_config.yaml": FSDP2,
    "examples/ascend/qwen3_full_sft_fsdp2.yaml": ASCEND,
    "examples/ascend/qwen3moe_full_sft_fsdp.yaml": MOE,
    "examples/ascend/qwen3_lora_sft_fsdp.yaml": UNLAUNCHED,
}


def test_a_config_no_launch_names_takes_the_form_its_folders_launches_agree_on(tmp_path):
    """Its siblings' comments launch it with two different FSDP configs (2 and 8 processes):
    one form, full sharding; the GPU count they disagree on is the stated one."""
    settings = _project(tmp_path, ASCEND_FILES)
    [run] = _runs(settings, "examples/ascend/qwen3_lora_sft_fsdp.yaml")
    assert run.plan.value("fsdp") == "full"
    assert run.setup.world_size == 8  # --gpus 8: the launches say 2 and 8
    [note] = [n for n in run.assumptions if n.startswith("launch assumed")]
    assert "FSDP full shard, as every other config in examples/ascend/ is launched" in note
    assert [a.fact for a in run.assumed] == ["launch"]
    # an 8B full fine-tune at 8 x 2048 fits 8 H100s fully sharded; as plain DDP it does not
    assert _memory(settings, "examples/ascend/qwen3_lora_sft_fsdp.yaml") == []


def test_a_config_that_names_its_own_sharding_keeps_it(tmp_path):
    own = UNLAUNCHED.replace("### train\n", "### train\ndeepspeed: examples/deepspeed/ds_z2_config.json\n")
    files = {**ASCEND_FILES, "examples/ascend/qwen3_lora_sft_fsdp.yaml": own, "examples/deepspeed/ds_z2_config.json": ZERO2}
    [run] = _runs(_project(tmp_path, files), "examples/ascend/qwen3_lora_sft_fsdp.yaml")
    assert run.plan.value("zero_stage") == 2 and run.plan.value("fsdp") is None
    assert not any(note.startswith("launch assumed") for note in run.assumptions)


def test_launches_that_agree_on_the_gpu_count_give_it(tmp_path):
    files = {**ASCEND_FILES, "examples/accelerate/fsdp_config.yaml": FSDP1.replace("num_processes: 2", "num_processes: 8")}
    settings = _project(tmp_path, {**files, "memlint.toml": ""})
    settings = settings.with_overrides(gpus=None)
    [run] = _runs(settings, "examples/ascend/qwen3_lora_sft_fsdp.yaml")
    assert run.setup.world_size == 8 and run.plan.get("world_size").note == "num_processes"


def test_a_folder_whose_launches_disagree_on_the_form_gives_none(tmp_path):
    ds = ASCEND.replace("--config_file examples/accelerate/fsdp2_config.yaml", "--config_file examples/accelerate/ds2.yaml")
    ds2 = "distributed_type: DEEPSPEED\ndeepspeed_config:\n  deepspeed_config_file: examples/deepspeed/ds_z2_config.json\n" \
          "num_processes: 8\n"
    files = {**ASCEND_FILES, "examples/ascend/qwen3_full_sft_fsdp2.yaml": ds, "examples/accelerate/ds2.yaml": ds2,
             "examples/deepspeed/ds_z2_config.json": ZERO2}
    settings = _project(tmp_path, files)
    [run] = _runs(settings, "examples/ascend/qwen3_lora_sft_fsdp.yaml")
    assert run.plan.value("fsdp") is None and run.plan.value("zero_stage") is None
    [finding] = _memory(settings, "examples/ascend/qwen3_lora_sft_fsdp.yaml")
    assert "plain data parallelism" in finding.message  # the assumption is named, as before


def _finetune_with(fields: tuple[str, ...]) -> str:
    last = "    learning_rate: float = field(default=2e-5)\n"
    assert last in FINETUNE
    return FINETUNE.replace(last, last + "".join(f"    {line}\n" for line in fields))


# the rest of open-instruct's FlatArguments fields that the trimmed configs set
_ALL_FIELDS = (
    "model_revision: str | None = None",
    "use_flash_attn: bool = True",
    "num_train_epochs: int = 2",
    'output_dir: str = "output/"',
    "with_tracking: bool = False",
    'report_to: str | list[str] = "all"',
    "checkpointing_steps: str | None = None",
)

TULU3 = "configs/train_configs/tulu3/tulu3_sft.yaml"


def test_a_config_of_a_folder_no_launch_names_takes_its_entry_scripts_agreed_form(tmp_path):
    """open-instruct's tulu3_sft.yaml: nothing runs it or its folder, but every documented
    launch of the script whose argument classes hold all its keys (finetune.py) is ZeRO-3."""
    files = {**FILES, "open_instruct/finetune.py": _finetune_with(_ALL_FIELDS), TULU3: _config("meta-llama/Llama-3.1-8B")}
    settings = _project(tmp_path, files)
    [run] = _runs(settings, TULU3)
    assert run.plan.value("zero_stage") == 3
    [note] = [n for n in run.assumptions if n.startswith("launch assumed")]
    assert "ZeRO-3, as every documented launch of open_instruct/finetune.py" in note
    assert "scripts/README.md:7" in note
    assert _memory(settings, TULU3) == []
    # keys the script's classes do not hold (the trimmed FlatArguments): not its config, nothing taken
    bare = _project(tmp_path / "bare", {**FILES, TULU3: _config("meta-llama/Llama-3.1-8B")})
    assert all(r.plan.value("zero_stage") is None for r in _runs(bare, TULU3))


def test_entry_script_launches_that_disagree_give_none(tmp_path):
    plain = LAUNCHER.replace("    --use_deepspeed \\\n", "").replace(
        "    --deepspeed_config_file configs/ds_configs/stage3_no_offloading_accelerate.conf \\\n", "")
    readme = README + "\n```bash\nbash scripts/finetune_plain_config.sh 8 configs/train_configs/dev/mini.yaml\n```\n"
    files = {**FILES, "open_instruct/finetune.py": _finetune_with(_ALL_FIELDS), TULU3: _config("meta-llama/Llama-3.1-8B"),
             "scripts/finetune_plain_config.sh": plain, "scripts/README.md": readme,
             "configs/train_configs/dev/mini.yaml": _config("allenai/OLMo-1B-hf")}
    settings = _project(tmp_path, files)
    assert all(r.plan.value("zero_stage") is None for r in _runs(settings, TULU3))
    [finding] = _memory(settings, TULU3)
    assert "plain data parallelism" in finding.message


QLORA_TRAIN = dedent('''
    #!/bin/bash
    # DO NOT use GPTQ/AWQ model in FSDP+QLoRA

    CUDA_VISIBLE_DEVICES=0,1 accelerate launch \\
        --config_file examples/accelerate/fsdp_config.yaml \\
        src/train.py examples/extras/fsdp_qlora/llama3_lora_sft.yaml
''')

QLORA = dedent('''
    ### model
    model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
    quantization_bit: 4
    trust_remote_code: true

    ### method
    stage: sft
    do_train: true
    finetuning_type: lora
    lora_rank: 8
    lora_target: all

    ### dataset
    dataset: identity,alpaca_en_demo
    template: llama3
    cutoff_len: 2048

    ### output
    output_dir: saves/llama3-8b/lora/sft

    ### train
    per_device_train_batch_size: 1
    gradient_accumulation_steps: 8
    learning_rate: 1.0e-4
    bf16: true
''')


def test_a_shared_config_that_a_comment_launch_needs_is_not_reported_as_needless(tmp_path):
    """fsdp_config.yaml runs the FSDP+QLoRA demo of an 8B model (which fits without sharding)
    and, by qwen3moe_full_sft_fsdp.yaml's own comment, a 30B MoE full fine-tune that needs it."""
    files = {"src/train.py": LLAMAFACTORY_TRAIN, "examples/accelerate/fsdp_config.yaml": FSDP1,
             "examples/extras/fsdp_qlora/train.sh": QLORA_TRAIN,
             "examples/extras/fsdp_qlora/llama3_lora_sft.yaml": QLORA}

    def zro001(settings):
        found = Linter(settings).lint_path(settings.root / "examples/accelerate/fsdp_config.yaml")
        return [d for d in found if d.code == "ZRO001"]

    [alone] = zro001(_project(tmp_path / "demo", files))
    assert "8.0B model" in alone.message
    shared = _project(tmp_path / "shared", {**files, "examples/ascend/qwen3moe_full_sft_fsdp.yaml": MOE})
    assert zro001(shared) == []
