"""Schema validation as rules (CFG001-CFG007, CFG016): codes, exact ranges, messages that say
what to do, fixes — on configs written the way each ecosystem writes them."""

from __future__ import annotations

import pytest

from memlint.configs import schema, validation
from memlint.documents.kinds import detect
from memlint.documents.structured import load
from memlint.lint.apply_fixes import apply_edits

from .helpers import spans
from .test_model_parallel import MEGATRON_MOE

# Hugging Face's ZeRO-3 example, with three mistakes users make.
DS_ZERO3_TYPOS = """\
{
    "fp16": {
        "enabled": "auto",
        "loss_scale": 0,
        "initial_scale_power": 16
    },
    "bf16": {"enabled": "auto"},
    "zero_optimization": {
        "stage": 3,
        "offload_optimizer": {"device": "cpu", "pin_memory": true},
        "overlap_comm": true,
        "stage3_prefetch_bucket_sizes": "auto",
        "stage3_max_live_parameters": 1e9,
        "stage3_gather_16bit_weights_on_model_save": true
    },
    "gradient_accumulation_steps": "auto",
    "gradient_clipping": "auto",
    "steps_per_print": 2000,
    "train_batch_size": "auto",
    "train_micro_batch_size_per_gpu": "auto",
    "wall_clock_breakdwon": false
}
"""

AXOLOTL_LORA = """\
base_model: meta-llama/Llama-3.1-8B
model_type: LlamaForCausalLM
tokenizer_type: AutoTokenizer

load_in_8bit: true
load_in_4bit: false

datasets:
  - path: mhenrichsen/alpaca_2k_test
    type: alpaca
dataset_prepared_path:
val_set_size: 0.05
output_dir: ./outputs/lora-out

sequence_length: 4096
sample_packing: true
pad_to_sequence_len: true

adapter: lora
lora_r: 32
lora_alpha: 16
lora_dropout: 0.05
lora_target_linear: true

gradient_accumulation_steps: 4
micro_batch_size: 2
num_epochs: 4
optimizer: adamw_bnb_8bit
lr_scheduler: cosine
learning_rate: 0.0002

bf16: auto
tf32: false
gradient_checkpointing: true
flash_attention: true
warmup_steps: 10
"""

ACCELERATE_FSDP = """\
compute_environment: LOCAL_MACHINE
debug: false
distributed_type: FSDP
downcast_bf16: 'no'
fsdp_config:
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_backward_prefetch: BACKWARD_PRE
  fsdp_cpu_ram_efficient_loading: true
  fsdp_forward_prefetch: false
  fsdp_offload_param: false
  fsdp_sharding_strategy: FULL_SHARD
  fsdp_state_dict_type: SHARDED_STATE_DICT
  fsdp_sync_module_states: true
  fsdp_use_orig_params: true
machine_rank: 0
main_training_function: main
mixed_precision: bf16
num_machines: 1
num_process: 8
rdzv_backend: static
same_network: true
use_cpu: false
"""

LLAMAFACTORY_QLORA = """\
### model
model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
quantization_bit: 4
quantization_method: bitsandbytes

### method
stage: sft
do_train: true
finetuning_type: lora
lora_rank: 16
lora_target: all

### dataset
dataset: identity,alpaca_en_demo
template: llama3
cutoff_len: 2048

### train
per_device_train_batch_size: 1
gradient_accumulation_steps: 8
learning_rate: 1e-4
num_train_epochs: 3.0
lr_scheduler_type: cosine
bf16: true
output_dir: saves/llama3-8b/lora/sft
"""

TRL_SFT = """\
# Model arguments
model_name_or_path: Qwen/Qwen2.5-1.5B
model_revision: main
torch_dtype: bfloat16
attn_implementation: flash_attention_2

# Data training arguments
dataset_name: trl-lib/Capybara
dataset_num_proc: 8

# SFT trainer config
bf16: true
do_eval: false
gradient_accumulation_steps: 4
gradient_checkpointing: true
learning_rate: 2.0e-05
lr_scheduler_type: cosine_with_min_lr
lr_scheduler_kwargs:
  min_lr_rate: 0.1
max_length: 8192
num_train_epochs: 3
output_dir: data/Qwen2.5-1.5B-SFT
per_device_batch_size: 4
report_to: none
optim: adamw_torch_fusd
"""


def test_deepspeed_typos_and_deprecations(lint):
    diagnostics = lint({"ds_config.json": DS_ZERO3_TYPOS}, "ds_config.json")
    assert spans(diagnostics) == [
        ("CFG001", 12, 8, 12, 38),
        ("CFG001", 21, 4, 21, 26),
    ]
    prefetch, breakdown = diagnostics
    assert prefetch.message == (
        "unknown DeepSpeed key `stage3_prefetch_bucket_sizes` in `zero_optimization`; did you mean "
        "`stage3_prefetch_bucket_size`? (DeepSpeed refuses the config)"
    )
    assert "DeepSpeed ignores unknown top-level keys silently" in breakdown.message
    assert breakdown.fix.applicability == "unsafe"
    fixed = apply_edits(DS_ZERO3_TYPOS, list(breakdown.fix.edits))
    assert '"wall_clock_breakdown": false' in fixed


def test_a_zero_section_key_written_at_the_top_level_names_its_section(lint):
    # rllm's scripts/sft/config/ds_stage3.json: the offload blocks sit beside `zero_optimization`
    config = (
        '{\n  "train_micro_batch_size_per_gpu": 1,\n  "bf16": {"enabled": true},\n'
        '  "offload_optimizer": {"device": "cpu", "pin_memory": true},\n'
        '  "zero_optimization": {"stage": 3, "overlap_comm": true}\n}\n'
    )
    [unknown] = [d for d in lint({"ds_stage3.json": config}, "ds_stage3.json") if d.code == "CFG001"]
    assert unknown.message == ("unknown DeepSpeed key `offload_optimizer`; it belongs inside `zero_optimization` "
                               "(DeepSpeed ignores unknown top-level keys silently)")


def test_axolotl_sequence_length_and_deprecated_flash_attention(lint):
    diagnostics = lint({"examples/llama-3/lora-8b.yml": AXOLOTL_LORA}, "examples/llama-3/lora-8b.yml")
    assert spans(diagnostics) == [
        ("CFG001", 15, 0, 15, 15),
        ("CFG003", 35, 0, 35, 15),
    ]
    unknown, deprecated = diagnostics
    assert unknown.message == ("unknown Axolotl key `sequence_length`; did you mean `sequence_len`? "
                               "(Axolotl ignores unknown keys silently)")
    assert deprecated.message == ("`flash_attention` is deprecated in Axolotl 0.21.0: Use "
                                  "`attn_implementation: flash_attention_2`")
    assert deprecated.fix is None  # not a mechanical rename


def test_accelerate_unknown_keys_with_exact_suggestions(lint):
    diagnostics = lint({"accelerate_configs/fsdp.yaml": ACCELERATE_FSDP}, "accelerate_configs/fsdp.yaml")
    assert spans(diagnostics) == [
        ("CFG001", 10, 2, 10, 20),
        ("CFG001", 19, 0, 19, 11),
    ]
    assert "did you mean `fsdp_offload_params`?" in diagnostics[0].message
    # a key inside a section is copied onto launch's arguments and never read; a top-level one is refused
    # (HALOs' `fsdp_backward_prefetch_policy`, Accelerate's name for it before `fsdp_backward_prefetch`)
    assert "(`accelerate launch` ignores it silently)" in diagnostics[0].message
    assert "did you mean `num_processes`? (`accelerate launch` refuses the file)" in diagnostics[1].message


def test_llamafactory_values(lint):
    # LLaMA-Factory 0.9.3 read its YAML with yaml.safe_load: `1e-4` arrives as a string
    files = {"examples/train_qlora/llama3.yaml": LLAMAFACTORY_QLORA, "requirements.txt": "llamafactory==0.9.3\n"}
    diagnostics = lint(files, "examples/train_qlora/llama3.yaml")
    assert spans(diagnostics) == [
        ("CFG002", 4, 21, 4, 33),
        ("CFG002", 21, 15, 21, 19),
    ]
    method, rate = diagnostics
    assert method.message.startswith('`quantization_method` must be one of 9 values ("bnb", "gptq", "awq"')
    assert rate.message == ('`learning_rate` must be a number (got "1e-4"); YAML 1.1 reads `1e-4` as a string: '
                            "write `1.0e-4`")


def test_llamafactory_reads_its_yaml_through_omegaconf_since_0_9_4(lint):
    # OmegaConf's loader resolves `1e-4` as a float (read_args: OmegaConf.load): no finding on the
    # learning rate without a pin (the newest release) or under a pin that admits 0.9.4+; the
    # invalid enum value is still one
    for requirements in (None, "llamafactory>=0.9.3\n", "llamafactory==0.9.4\n"):
        files = {"examples/train_qlora/llama3.yaml": LLAMAFACTORY_QLORA}
        if requirements:
            files["requirements.txt"] = requirements
        diagnostics = lint(files, "examples/train_qlora/llama3.yaml")
        assert spans(diagnostics) == [("CFG002", 4, 21, 4, 33)], requirements


def test_trl_recipe_is_checked_against_sft_config(lint):
    diagnostics = lint({"recipes/qwen/sft.yaml": TRL_SFT}, "recipes/qwen/sft.yaml")
    assert spans(diagnostics) == [
        ("CFG001", 23, 0, 23, 21),
        ("CFG002", 25, 7, 25, 23),
    ]
    assert diagnostics[0].message == (
        "unknown TRL SFTConfig key `per_device_batch_size`; did you mean `per_device_eval_batch_size` or "
        "`per_device_train_batch_size`? (HfArgumentParser refuses the file)"
    )
    assert diagnostics[0].fix is None  # two candidates: no rename offered
    assert diagnostics[1].message.endswith("(got \"adamw_torch_fusd\"); did you mean `adamw_torch_fused`?")


def test_case_and_dash_differences_are_safe_renames(lint):
    text = "base_model: Qwen/Qwen2.5-0.5B\nlearning_rate: 0.0001\nmicro-batch-size: 2\nSequence_Len: 1024\n"
    diagnostics = lint({"qwen.yml": text}, "qwen.yml")
    assert spans(diagnostics) == [("CFG001", 3, 0, 3, 16), ("CFG001", 4, 0, 4, 12)]
    assert all(d.fix.applicability == "safe" for d in diagnostics)
    fixed = apply_edits(text, [e for d in diagnostics for e in d.fix.edits])
    assert fixed == "base_model: Qwen/Qwen2.5-0.5B\nlearning_rate: 0.0001\nmicro_batch_size: 2\nsequence_len: 1024\n"


def test_no_suggestion_of_a_key_that_is_already_set(lint):
    text = '{"train_micro_batch_size_per_gpu": 2, "train_micro_batch_size_per_gpu_": 4}'
    [diagnostic] = lint({"ds_config.json": text}, "ds_config.json")
    assert "did you mean" not in diagnostic.message and diagnostic.fix is None


def test_best_branch_of_an_any_of(lint):
    """`zero_optimization` is a mapping or the deprecated boolean: errors come from the
    mapping branch only, one per real problem, not a wall of alternatives."""
    text = ('{\n  "train_micro_batch_size_per_gpu": "four",\n  "zero_optimization": {\n'
            '    "stage": 5,\n    "reduce_bucket_size": -1,\n    "contiguous_gradients": "maybe"\n  }\n}\n')
    diagnostics = lint({"ds_config.json": text}, "ds_config.json")
    assert spans(diagnostics) == [
        ("CFG002", 2, 36, 2, 42),
        ("CFG002", 4, 13, 4, 14),
        ("CFG002", 5, 26, 5, 28),
        ("CFG002", 6, 28, 6, 35),
    ]
    assert [d.message for d in diagnostics] == [
        '`train_micro_batch_size_per_gpu` must be an integer, null or "auto" (got "four")',
        '`zero_optimization.stage` must be 0, 1, 2, 3 or "auto" (got 5)',
        '`zero_optimization.reduce_bucket_size` must be more than 0 (got -1)',
        # "yes" would be a boolean: DeepSpeed's pydantic sections read it as true
        '`zero_optimization.contiguous_gradients` must be true or false (got "maybe")',
    ]


def test_auto_where_nothing_fills_it(lint):
    text = ('{\n  "train_micro_batch_size_per_gpu": "auto",\n'
            '  "zero_optimization": {"stage": 2, "overlap_comm": "auto"}\n}\n')
    [diagnostic] = lint({"ds_config.json": text}, "ds_config.json")
    assert spans([diagnostic]) == [("CFG002", 3, 52, 3, 58)]
    assert "neither the HF Trainer nor Accelerate fills \"auto\" in" in diagnostic.message


def test_deprecated_keys_get_safe_renames(lint):
    text = ('{\n  "bfloat16": {"enabled": true},\n  "zero_optimization": {\n    "stage": 2,\n'
            '    "cpu_offload": true\n  }\n}\n')
    diagnostics = lint({"ds_config.json": text}, "ds_config.json")
    assert spans(diagnostics) == [("CFG003", 2, 2, 2, 12), ("CFG003", 5, 4, 5, 17)]
    bfloat16, cpu_offload = diagnostics
    assert bfloat16.message == "`bfloat16` is deprecated in DeepSpeed 0.19.8: use `bf16`"
    assert bfloat16.fix.applicability == "safe"
    assert apply_edits(text, list(bfloat16.fix.edits)).startswith('{\n  "bf16": {"enabled": true},')
    # `offload_optimizer` takes a mapping, not `true`: no mechanical rename
    assert cpu_offload.fix is None
    assert cpu_offload.message.startswith("`cpu_offload` is deprecated in DeepSpeed 0.19.8: use `offload_optimizer`")


def test_deprecated_key_when_the_new_one_is_set_too(lint):
    text = "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nfp16: true\nmixed_precision: fp16\n"
    [diagnostic] = lint({"default_config.yaml": text}, "default_config.yaml")
    assert spans([diagnostic]) == [("CFG003", 3, 0, 3, 4)]
    assert diagnostic.message.endswith("`mixed_precision` is set too, so remove `fp16`")


def test_deprecated_boolean_zero_optimization(lint):
    [diagnostic] = lint({"ds_config.json": '{"train_batch_size": 32, "zero_optimization": true}'}, "ds_config.json")
    assert spans([diagnostic]) == [("CFG003", 1, 46, 1, 50)]
    assert "Pre-dict ZeRO format" in diagnostic.message


def test_removed_deepspeed_section(lint):
    text = '{\n  "train_batch_size": 32,\n  "elasticity": {"enabled": true, "max_train_batch_size": 2000}\n}\n'
    [diagnostic] = lint({"ds_config.json": text}, "ds_config.json")
    assert spans([diagnostic]) == [("CFG004", 3, 2, 3, 14)]
    assert diagnostic.message.startswith(
        "`elasticity` was removed in DeepSpeed 0.19.8: Elastic training has been removed")


# smollm's vision/smolvlm2/scripts/zero3_mics_mini_fixed.json, trimmed: MiCS sharding, which
# DeepSpeed 0.19.8 refuses with a message of its own
MICS_ZERO3 = """\
{
    "bf16": {"enabled": "auto"},
    "train_micro_batch_size_per_gpu": "auto",
    "gradient_accumulation_steps": "auto",
    "zero_optimization": {
        "stage": 3,
        "overlap_comm": true,
        "stage3_gather_16bit_weights_on_model_save": true,
        "mics_shard_size": 64,
        "mics_hierarchical_params_gather": false
    }
}
"""


def test_removed_zero_keys_say_why(lint):
    diagnostics = lint({"zero3_mics.json": MICS_ZERO3}, "zero3_mics.json")
    assert [(d.code, d.range.start.line) for d in diagnostics] == [("CFG004", 9), ("CFG004", 10)]
    assert diagnostics[0].message.startswith(
        "`zero_optimization.mics_shard_size` was removed in DeepSpeed 0.19.7: MiCS ZeRO-3 sharding has been removed")
    kept = MICS_ZERO3.replace(',\n        "mics_shard_size": 64,\n        "mics_hierarchical_params_gather": false', "")
    assert lint({"zero3.json": kept}, "zero3.json") == []


def test_null_launch_settings_are_left_to_the_launcher(lint):
    """A template with `num_processes: null` (smollm's vloom/common/accelerate_config.yaml):
    `accelerate launch` sets one machine and a process per GPU when they are None."""
    text = ("compute_environment: LOCAL_MACHINE\ndeepspeed_config: {}\ndistributed_type: MULTI_GPU\n"
            "fsdp_config: {}\nmachine_rank: 0\nmain_process_ip: null\nmain_process_port: null\n"
            "main_training_function: main\nmixed_precision: 'no'\nnum_machines: null\nnum_processes: null\n"
            "use_cpu: false\n")
    assert lint({"common/accelerate_config.yaml": text}, "common/accelerate_config.yaml") == []
    [wrong] = lint({"common/accelerate_config.yaml": text.replace("num_machines: null", "num_machines: two")},
                   "common/accelerate_config.yaml")
    assert wrong.code == "CFG002"


def test_missing_required_keys(lint):
    text = "compute_environment: LOCAL_MACHINE\nmixed_precision: bf16\nnum_processes: 2\nuse_cpu: false\n"
    [diagnostic] = lint({"accelerate_configs/two.yaml": text}, "accelerate_configs/two.yaml")
    assert spans([diagnostic]) == [("CFG005", 1, 0, 1, 19)]
    assert diagnostic.message == "Accelerate requires `distributed_type`; add it"


def test_missing_key_of_a_nested_section(lint):
    text = ("base_model: Qwen/Qwen2.5-0.5B\nlearning_rate: 0.0001\nlr_groups:\n  - name: embeddings\n"
            "    modules: [embed_tokens]\n")
    [diagnostic] = lint({"qwen.yml": text}, "qwen.yml")
    assert spans([diagnostic]) == [("CFG005", 4, 4, 4, 8)]
    assert diagnostic.message == "Axolotl requires `lr`; add it to `lr_groups[0]`"


def test_two_spellings_of_one_deepspeed_setting(lint):
    text = ('{\n  "zero_optimization": {\n    "stage": 3,\n    "stage3_max_live_parameters": 1e9,\n'
            '    "max_live_parameters": 5e8\n  }\n}\n')
    [diagnostic] = lint({"ds_config.json": text}, "ds_config.json")
    assert spans([diagnostic]) == [("CFG002", 5, 4, 5, 25)]
    assert diagnostic.message == ("`stage3_max_live_parameters` and `max_live_parameters` are two spellings of one "
                                  "DeepSpeed setting; keep one")


def test_trl_recipe_keys_of_the_scripts_own_dataclasses_are_not_unknown(lint):
    """TrlParser reads ModelConfig and ScriptArguments from the same file; a key no schema
    knows and nothing resembles (a custom dataclass field) is left alone."""
    text = "model_name_or_path: Qwen/Qwen2.5-0.5B\ndataset_name: trl-lib/Capybara\nmy_custom_flag: 3\n" \
           "output_dir: out\nmax_length: 1024\nper_device_train_batch_size: 2\n"
    assert lint({"sft.yaml": text}, "sft.yaml") == []


def test_plugin_keys_without_their_plugin(lint):
    text = ("base_model: meta-llama/Llama-3.1-8B\nlearning_rate: 0.00002\nsequence_len: 16384\n"
            "liger_fused_linear_cross_entropy: true\n")
    [diagnostic] = lint({"long.yml": text}, "long.yml")
    assert spans([diagnostic]) == [("CFG016", 4, 0, 4, 32)]
    listed = text + "plugins:\n  - axolotl.integrations.liger.LigerPlugin\n"
    assert lint({"long.yml": listed}, "long.yml") == []


def test_syntax_errors_of_configs(lint):
    text = '{\n  "train_batch_size": 32\n  "zero_optimization": {"stage": 2}\n}\n'
    [diagnostic] = lint({"ds_config.json": text}, "ds_config.json")
    assert spans([diagnostic]) == [("CFG006", 3, 2, 3, 3)]
    assert diagnostic.message == "invalid JSON: Expecting ',' delimiter"


def test_syntax_errors_of_files_that_are_not_configs_are_not_reported(lint):
    vscode = '{\n  // editor settings\n  "editor.tabSize": 4\n}\n'
    assert lint({".vscode/settings.json": vscode}, ".vscode/settings.json") == []
    workflow = "on: [push]\njobs:\n\ttest: {}\n"
    assert lint({".github/workflows/ci.yml": workflow}, ".github/workflows/ci.yml") == []


def test_broken_config_recognised_by_its_first_keys(lint):
    text = "base_model: Qwen/Qwen2.5-0.5B\nsequence_len: 2048\nlora_target_modules: [q_proj, v_proj\n"
    [diagnostic] = lint({"run.yml": text}, "run.yml")
    assert diagnostic.code == "CFG006" and diagnostic.range.start.line == 4


def test_binary_file_named_like_a_config(lint, tmp_path):
    (tmp_path / "ds_config.json").write_bytes(b'{"a": \x00\x01\x02}')
    [diagnostic] = lint({}, "ds_config.json")
    assert diagnostic.code == "CFG006" and "binary" in diagnostic.message


def test_duplicate_keys(lint):
    text = "base_model: Qwen/Qwen2.5-0.5B\nlearning_rate: 0.0001\nmicro_batch_size: 1\nmicro_batch_size: 8\n"
    [diagnostic] = lint({"qwen.yml": text}, "qwen.yml")
    assert spans([diagnostic]) == [("CFG007", 4, 0, 4, 16)]


def test_schema_issues_are_computed_once_per_document():
    data = load(DS_ZERO3_TYPOS, "json")
    first = validation.issues("ds_config.json", "deepspeed", data)
    assert validation.issues("ds_config.json", "deepspeed", data) is first


def test_hf_variant_follows_the_keys():
    assert schema.schema_name_for("hf-args", {"output_dir": "o", "learning_rate": 1e-5}) == "hf-training-arguments"
    assert schema.schema_name_for("hf-args", {"output_dir": "o", "max_length": 1024}) == "trl-sft-config"
    dpo = {"output_dir": "o", "beta": 0.1, "loss_type": "sigmoid"}
    assert schema.schema_name_for("hf-args", dpo) == "trl-dpo-config"
    grpo = {"output_dir": "o", "beta": 0.001, "num_generations": 12, "max_completion_length": 1024}
    assert schema.schema_name_for("hf-args", grpo) == "trl-grpo-config"


GRPO_RECIPE = """\
################################
# ModelConfig
################################
model_name_or_path: Qwen/Qwen2.5-3B-Instruct
use_peft: true
lora_r: 16
lora_alpha: 32
lora_target_modules: ["q_proj", "k_proj", "v_proj", "o_proj"]

################################
# GRPOConfig
################################
learning_rate: 2.0e-5
lr_scheduler_type: cosine
max_steps: 1000
num_generations: 12
max_completion_length: 1024
generation_batch_size: 12
use_vllm: false
beta: 0.003
gradient_accumulation_steps: 4
per_device_train_batch_size: 1
bf16: true
output_dir: output/sudoku_grpo
report_to: ["tensorboard"]
"""


def test_a_grpo_field_is_no_near_miss_for_another_trainers_recipe(lint):
    """Step-DPO's DPO recipe (``max_prompt_length``, under its ``trl==0.8.5``) and
    universal-llm-trainer's SFT recipes (``generation_max_time``, its own loader's key) got
    "did you mean `max_completion_length`?" / "`generation_batch_size`?" once GRPOConfig's fields
    joined the keys a misspelling is matched against; a GRPO recipe's own typo still is one."""
    sft = "model_name_or_path: meta-llama/Llama-3.1-8B\nmax_seq_length: 2048\npacking: true\n" \
          "generation_max_time: 300\noutput_dir: out\n"
    assert [d for d in lint({"sft.yaml": sft}, "sft.yaml") if d.code == "CFG001"] == []
    typo = GRPO_RECIPE.replace("num_generations: 12", "num_generation: 12")
    [found] = [d for d in lint({"grpo.yaml": typo}, "grpo.yaml") if d.code == "CFG001"]
    assert "did you mean `num_generations`?" in found.message


def test_a_grpo_recipe_is_judged_as_trls_grpo_config(lint):
    """sudoku-grpo-training's ``configs/grpo_config.yaml`` (a TrlParser recipe): its
    ``beta`` made it the closest to DPOConfig, whose ``max_completion_length`` TRL 0.29 dropped,
    so a key GRPOConfig reads in every release since 0.14 was reported removed. A DPO recipe with
    the key still is (``schemas/history/trl.json``)."""
    assert not [d for d in lint({"configs/grpo_config.yaml": GRPO_RECIPE}, "configs/grpo_config.yaml")
                if d.code in ("CFG001", "CFG004")]
    dpo = "model_name_or_path: Qwen/Qwen2.5-3B-Instruct\nbeta: 0.1\nloss_type: sigmoid\n" \
          "max_completion_length: 256\nmax_length: 1024\noutput_dir: out\n"
    found = [d for d in lint({"dpo.yaml": dpo}, "dpo.yaml") if d.code == "CFG004"]
    assert [d.message.split(" was removed")[0] for d in found] == ["`max_completion_length`"]


def test_schemas_are_found_next_to_the_package():
    assert (schema.schemas_dir() / "axolotl.schema.json").is_file()


def test_defaults_come_from_the_schemas():
    assert schema.default("axolotl", "sequence_len") == 512
    assert schema.default("llamafactory", "lora_target") == "all"
    assert schema.default("deepspeed", "zero_optimization", "stage") == 0
    assert schema.default("accelerate", "fsdp_config", "fsdp_sharding_strategy") == "FULL_SHARD"
    assert schema.default("deepspeed", "no_such_key") is schema.MISSING


@pytest.mark.parametrize("kind", ["json", "yaml", "python"])
def test_no_issues_for_other_documents(kind):
    assert validation.issues("x", kind, load("{}", "json")) == []


def test_axolotl_plugin_keys_of_plugins_the_schema_lacks_are_not_unknown(lint):
    """The committed Axolotl schema has no keys for the Cut Cross-Entropy plugin (its
    generator could not import them); a listed plugin's own keys must not be reported."""
    text = ("base_model: meta-llama/Llama-3.1-8B\nlearning_rate: 0.00002\n"
            "plugins:\n  - axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin\ncut_cross_entropy: true\n")
    assert lint({"cce.yml": text}, "cce.yml") == []
    assert [d.code for d in lint({"cce.yml": text.replace("plugins:\n  - axolotl.integrations.cut_cross_entropy."
                                                            "CutCrossEntropyPlugin\n", "")}, "cce.yml")] == ["CFG001"]


def test_kind_detection_matches_the_rules():
    assert detect("lora-8b.yml", "yaml", load(AXOLOTL_LORA, "yaml").value) == "axolotl"


def test_trl_recipe_with_model_config_fields(lint):
    """`lora_target_modules`, `use_peft`, `load_in_4bit` belong to TRL's ModelConfig, which
    TrlParser reads from the same file: not unknown, and not `optim_target_modules` misspelt."""
    text = ("model_name_or_path: meta-llama/Llama-3.1-8B\ntorch_dtype: bfloat16\nuse_peft: true\nlora_r: 32\n"
            "lora_target_modules: all-linear\nload_in_4bit: true\nbnb_4bit_quant_type: nf4\n"
            "dataset_name: trl-lib/Capybara\noutput_dir: out\nmax_length: 2048\nlearning_rate: 2.0e-4\n"
            "per_device_train_batch_size: 4\ngradient_accumulation_steps: 4\nnum_train_epochs: 1\n")
    assert lint({"sft_qlora.yaml": text}, "sft_qlora.yaml") == []
    renamed = text.replace("max_length: 2048", "max_seq_length: 2048")
    [diagnostic] = lint({"sft_qlora.yaml": renamed}, "sft_qlora.yaml")
    assert spans([diagnostic]) == [("CFG001", 10, 0, 10, 14)]
    assert "did you mean `max_length`?" in diagnostic.message


def test_yaml_suppression_comment_and_json_per_file_ignores(lint):
    """A key kept on purpose (read by a fork or a plugin memlint does not know)."""
    text = ("base_model: Qwen/Qwen2.5-0.5B\nlearning_rate: 0.0001\n"
            "my_fork_flag: true  # memlint: ignore[CFG001]\nsequence_length: 2048\n")
    assert [d.range.start.line for d in lint({"run.yml": text}, "run.yml")] == [4]
    ds = '{"train_batch_size": 8, "_notes": "x", "gradient_clipingg": 1.0}'
    assert lint({"ds_config.json": ds}, "ds_config.json", per_file_ignores={"ds_*.json": ["CFG001"]}) == []


# Accelerate's examples/config_yaml_templates/fp8.yaml: the values `accelerate config` itself writes
ACCELERATE_FP8 = """\
distributed_type: "NO"
mixed_precision: "fp8"
fp8_config:
  backend: TE # Can be TE | MS-AMP
  amax_history_len: 1024
  fp8_format: E4M3
  interval: 1
  margin: 0
  override_linear_precision: [false, false, false]
  use_autocast_during_eval: false
"""


def test_accelerate_fp8_values_as_accelerate_config_writes_them(lint):
    assert lint({"fp8.yaml": ACCELERATE_FP8}, "fp8.yaml") == []
    wrong = ACCELERATE_FP8.replace("backend: TE", "backend: TransformerEngine").replace(
        "[false, false, false]", "[false, \"off\", 0.5]")
    messages = [d.message for d in lint({"fp8.yaml": wrong}, "fp8.yaml")]
    assert len(messages) == 3
    assert "`fp8_config.backend` must be one of" in messages[0] and "TransformerEngine" in messages[0]
    assert messages[1] == '`fp8_config.override_linear_precision[1]` must be true or false (got "off")'
    assert messages[2] == "`fp8_config.override_linear_precision[2]` must be true or false (got 0.5)"


def test_a_null_where_the_tools_default_is_none_is_valid(lint):
    """trlx's examples/summarize_rlhf/configs/default_accelerate_config.yaml: `accelerate config`
    writes `commands: null` (ClusterConfig's default is None); a null elsewhere is still wrong."""
    text = ("command_file: null\ncommands: null\ncompute_environment: LOCAL_MACHINE\ndeepspeed_config:\n"
            "  deepspeed_config_file: configs/ds_config.json\n  zero3_init_flag: false\ndistributed_type: DEEPSPEED\n"
            "downcast_bf16: 'no'\ndynamo_config: {}\nfsdp_config: {}\ngpu_ids: null\nmachine_rank: 0\n"
            "main_process_ip: null\nmain_process_port: null\nmain_training_function: main\nmegatron_lm_config: {}\n"
            "num_machines: 1\nnum_processes: 1\nrdzv_backend: static\nsame_network: true\ntpu_name: null\n"
            "tpu_zone: null\nuse_cpu: false\n")
    assert [d.code for d in lint({"configs/default_accelerate_config.yaml": text, "configs/ds_config.json": "{}"},
                                 "configs/default_accelerate_config.yaml")] == []
    [wrong] = lint({"configs/default_accelerate_config.yaml": text.replace("commands: null", "commands: ls")},
                   "configs/default_accelerate_config.yaml")
    assert (wrong.code, wrong.range.start.line) == ("CFG002", 2)
    [null] = lint({"configs/default_accelerate_config.yaml": text.replace("use_cpu: false", "use_cpu: null")},
                  "configs/default_accelerate_config.yaml")  # use_cpu defaults to False
    assert null.code == "CFG002"


# align-anything's configs/deepspeed/ds_z2_config.json: the script works out the accumulation from
# its own settings; DeepSpeed reads null as absent (get_scalar_param is dict.get, default None) and
# _set_batch_related_parameters() derives it from the other two batch sizes
DS_NULL_ACCUMULATION = """\
{
  "train_batch_size": 128,
  "train_micro_batch_size_per_gpu": 16,
  "gradient_accumulation_steps": null,
  "zero_optimization": {"stage": 2, "overlap_comm": true, "contiguous_gradients": true},
  "bf16": {"enabled": true}
}
"""


def test_deepspeed_batch_sizes_left_null_are_derived_not_invalid(lint):
    assert lint({"configs/deepspeed/ds_z2_config.json": DS_NULL_ACCUMULATION},
                "configs/deepspeed/ds_z2_config.json") == []
    # a string there is still no batch size DeepSpeed can use
    wrong = DS_NULL_ACCUMULATION.replace('"gradient_accumulation_steps": null', '"gradient_accumulation_steps": "8"')
    assert [d.code for d in lint({"ds_config.json": wrong}, "ds_config.json")] == ["CFG002"]


def test_llamafactory_megatron_keys_are_mcore_adapters(lint):
    # before: 14 "unknown LLaMA-Factory key" errors on mcore_adapter's own arguments
    # (LLaMA-Factory 0.9.4's examples/megatron/qwen3_moe_full.yaml, run with USE_MCA=1)
    assert lint({"examples/megatron/qwen3_moe_full.yaml": MEGATRON_MOE},
                "examples/megatron/qwen3_moe_full.yaml", select=("CFG001",)) == []
    # a misspelt one is still unknown, and so are Megatron keys in a config without a parallel size
    typo = MEGATRON_MOE.replace("moe_grouped_gemm", "moe_grouped_gemms")
    [unknown] = lint({"examples/megatron/qwen3_moe_full.yaml": typo}, "examples/megatron/qwen3_moe_full.yaml",
                     select=("CFG001",))
    assert "`moe_grouped_gemms`" in unknown.message
    plain = "\n".join(line for line in MEGATRON_MOE.splitlines() if "model_parallel_size" not in line)
    found = lint({"examples/train_full/qwen3.yaml": plain + "\n"}, "examples/train_full/qwen3.yaml", select=("CFG001",))
    assert "`use_distributed_optimizer`" in " ".join(d.message for d in found)


# ssbuild's chatglm_finetuning (abridged): the train config is read by the project's own
# `yaml.full_load`, which builds `!!python/tuple` into a tuple; HfArgumentParser gets the mapping
TRAIN_CONFIG_WITH_A_TUPLE = (
    "output_dir: ./outputs_pl\nnum_train_epochs: 20\nper_device_train_batch_size: 2\nlearning_rate: 2.0e-05\n"
    "optimizer_betas: !!python/tuple\n- 0.9\n- 0.999\n")
FULL_LOADING_MAIN = '''\
import os

import yaml


def load_config():
    with open(os.environ["train_config"], mode="r", encoding="utf-8") as f:
        return yaml.full_load(f)
'''


def test_a_python_value_tag_the_projects_own_full_loader_reads(lint):
    files = {"scripts/config/train_pl.yaml": TRAIN_CONFIG_WITH_A_TUPLE, "config/main.py": FULL_LOADING_MAIN}
    assert lint(files, "scripts/config/train_pl.yaml") == []
    for loader in ("yaml.load(f, Loader=yaml.FullLoader)", "yaml.unsafe_load(f)"):
        files["config/main.py"] = FULL_LOADING_MAIN.replace("yaml.full_load(f)", loader)
        assert lint(files, "scripts/config/train_pl.yaml") == [], loader


def test_a_python_tag_is_still_reported_where_a_safe_loader_or_a_tool_reads_it(lint):
    for loader in ("yaml.safe_load(f)", "yaml.load(f, Loader=yaml.SafeLoader)"):
        files = {"scripts/config/train_pl.yaml": TRAIN_CONFIG_WITH_A_TUPLE,
                 "config/main.py": FULL_LOADING_MAIN.replace("yaml.full_load(f)", loader)}
        assert [d.code for d in lint(files, "scripts/config/train_pl.yaml")] == ["CFG006"], loader
    # an object tag, which FullLoader refuses too
    files = {"scripts/config/train_pl.yaml": TRAIN_CONFIG_WITH_A_TUPLE.replace("python/tuple", "python/object/apply:os.system"),
             "config/main.py": FULL_LOADING_MAIN}
    assert [d.code for d in lint(files, "scripts/config/train_pl.yaml")] == ["CFG006"]
    # an Accelerate config is read by `accelerate launch`, whatever the project's code does
    accelerate = "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nnum_processes: !!python/tuple [8]\n"
    files = {"accelerate.yaml": accelerate, "config/main.py": FULL_LOADING_MAIN}
    assert "CFG006" in [d.code for d in lint(files, "accelerate.yaml")]
