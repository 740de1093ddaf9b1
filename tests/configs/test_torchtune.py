"""torchtune recipe configs: recognised as their own kind (never as TrainingArguments), the run
they define read from the model builder, the recipe's scalars and the header's ``tune run``, and
the schema's unknown keys reported only when they are misspellings of keys the recipes read."""

from __future__ import annotations

from memlint.documents import kinds
from memlint.documents.structured import load

from .test_extractors import at, facts_of


def line_of(text: str, needle: str) -> int:
    """The 1-based line of the first line containing ``needle``."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)

# as torchtune ships them (recipes/configs/llama3_1/8B_lora.yaml), trimmed
LORA_8B = """\
# Config for multi-device LoRA finetuning in lora_finetune_distributed.py
# using a Llama3.1 8B Instruct model
#
# This config assumes that you've run the following command before launching
# this run:
#   tune download meta-llama/Meta-Llama-3.1-8B-Instruct --output-dir /tmp/Meta-Llama-3.1-8B-Instruct --ignore-patterns "original/consolidated.00.pth"
#
# To launch on 2 devices, run the following command from root:
#   tune run --nproc_per_node 2 lora_finetune_distributed --config llama3_1/8B_lora

output_dir: /tmp/torchtune/llama3_1_8B/lora

tokenizer:
  _component_: torchtune.models.llama3.llama3_tokenizer
  path: /tmp/Meta-Llama-3.1-8B-Instruct/original/tokenizer.model
  max_seq_len: 4096

model:
  _component_: torchtune.models.llama3_1.lora_llama3_1_8b
  lora_attn_modules: ['q_proj', 'v_proj', 'output_proj']
  apply_lora_to_mlp: True
  apply_lora_to_output: False
  lora_rank: 16  # higher increases accuracy and memory
  lora_alpha: 32
  lora_dropout: 0.0

checkpointer:
  _component_: torchtune.training.FullModelHFCheckpointer
  checkpoint_dir: /tmp/Meta-Llama-3.1-8B-Instruct/
  checkpoint_files: [model-00001-of-00004.safetensors, model-00002-of-00004.safetensors]
  output_dir: ${output_dir}
  model_type: LLAMA3
resume_from_checkpoint: False
save_adapter_weights_only: False

dataset:
  _component_: torchtune.datasets.alpaca_cleaned_dataset
  packed: False
seed: null
shuffle: True
batch_size: 4

optimizer:
  _component_: torch.optim.AdamW
  fused: True
  weight_decay: 0.01
  lr: 3e-4
lr_scheduler:
  _component_: torchtune.training.lr_schedulers.get_cosine_schedule_with_warmup
  num_warmup_steps: 100

loss:
  _component_: torchtune.modules.loss.LinearCrossEntropyLoss

epochs: 1
max_steps_per_epoch: null
gradient_accumulation_steps: 8
clip_grad_norm: null
compile: False

metric_logger:
  _component_: torchtune.training.metric_logging.DiskLogger
  log_dir: ${output_dir}/logs
log_every_n_steps: 1
log_peak_memory_stats: True
log_level: INFO

device: cuda
dtype: bf16
enable_activation_checkpointing: True
enable_activation_offloading: False
"""

# a single-device QLoRA config, as a user writes one from torchtune's template
QLORA_SINGLE = """\
# To launch, run the following command:
#   tune run lora_finetune_single_device --config my_qlora.yaml

model:
  _component_: torchtune.models.llama3_2.qlora_llama3_2_3b
  lora_attn_modules: ['q_proj', 'k_proj', 'v_proj', 'output_proj']
  apply_lora_to_mlp: True
  lora_rank: 8
  lora_alpha: 16

tokenizer:
  _component_: torchtune.models.llama3.llama3_tokenizer
  path: /data/Llama-3.2-3B-Instruct/original/tokenizer.model
  max_seq_len: null

checkpointer:
  _component_: torchtune.training.FullModelHFCheckpointer
  checkpoint_dir: /data/Llama-3.2-3B-Instruct/
  checkpoint_files: [model-00001-of-00002.safetensors, model-00002-of-00002.safetensors]
  output_dir: /data/out
  model_type: LLAMA3_2

dataset:
  _component_: torchtune.datasets.alpaca_cleaned_dataset
  max_seq_len: 2048
batch_size: 2
optimizer:
  _component_: bitsandbytes.optim.PagedAdamW8bit
  lr: 3e-4
gradient_accumulation_steps: 4
dtype: bf16
device: cuda
seed: 42
enable_activation_checkpointing: False
"""


def test_torchtune_configs_are_their_own_kind_not_training_arguments():
    for text in (LORA_8B, QLORA_SINGLE):
        data = load(text, "yaml")
        assert kinds.detect("recipes/configs/8B_lora.yaml", "yaml", data.value) == "torchtune"
    # a Hydra config naming its own `_target_` classes is not torchtune
    hydra = {"model": {"_target_": "mylib.Model"}, "batch_size": 4, "output_dir": "out", "optim": "adamw"}
    assert kinds.detect("conf/train.yaml", "yaml", hydra) != "torchtune"


def test_torchtune_lora_run_from_builder_header_and_scalars():
    facts = facts_of("configs/8B_lora.yaml", LORA_8B)
    # the Hub checkpoint the header downloads, located at the builder that names its size
    line = line_of(LORA_8B, "lora_llama3_1_8b")
    assert at(facts, "model") == ("meta-llama/Meta-Llama-3.1-8B-Instruct", line, 15, line, 57)
    assert at(facts, "lora_r")[:2] == (16, line_of(LORA_8B, "lora_rank"))
    assert facts.lora_targets.value == ("q_proj", "v_proj", "o_proj", "gate_proj", "down_proj", "up_proj")
    assert at(facts, "micro_batch")[:2] == (4, line_of(LORA_8B, "batch_size:"))
    assert at(facts, "seq_len")[:2] == (4096, line_of(LORA_8B, "max_seq_len"))
    assert at(facts, "grad_accum")[:2] == (8, line_of(LORA_8B, "gradient_accumulation_steps"))
    assert at(facts, "load_dtype")[:2] == ("bf16", line_of(LORA_8B, "dtype:"))
    assert at(facts, "grad_ckpt")[:2] == (1, line_of(LORA_8B, "enable_activation_checkpointing"))
    assert facts.optimizer.value == "adamw-fused"
    assert facts.fused_loss.value is True
    assert facts.grad_clip is None  # clip_grad_norm: null
    # the GPU count from the header's tune run, at the number
    line = line_of(LORA_8B, "tune run")
    assert at(facts, "world_size") == (2, line, 30, line, 31)
    # FSDP is what the distributed recipe does, not a key of the file: an assumption
    assert at(facts, "fsdp") == ("full", None)
    assert facts.quantization is None


def test_torchtune_qlora_single_device():
    facts = facts_of("my_qlora.yaml", QLORA_SINGLE)
    # no tune download: the checkpoint folder's name, whose size agrees with the builder's
    assert facts.model.value == "Llama-3.2-3B-Instruct"
    assert facts.quantization.value == "nf4"
    assert facts.lora_targets.value == ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "down_proj", "up_proj")
    assert at(facts, "seq_len")[:2] == (2048, line_of(QLORA_SINGLE, "max_seq_len: 2048"))  # the tokenizer's is null: the dataset's
    assert facts.optimizer.value == "paged-adamw-8bit"
    assert facts.grad_ckpt.value == 0
    assert at(facts, "world_size")[:2] == (1, line_of(QLORA_SINGLE, "tune run"))  # a single-device recipe
    assert facts.fsdp is None


def test_torchtune_header_and_checkpoint_of_another_size_do_not_name_the_model():
    # a 70B config copied from the 8B one: the header still downloads the 8B checkpoint
    text = LORA_8B.replace("lora_llama3_1_8b", "lora_llama3_1_70b")
    facts = facts_of("70B_lora.yaml", text)
    assert facts.model.value == "lora_llama3_1_70b"


def test_torchtune_evaluation_and_generation_configs_define_no_run():
    text = """\
# tune run eleuther_eval --config llama3_1/evaluation
model:
  _component_: torchtune.models.llama3_1.llama3_1_8b
checkpointer:
  _component_: torchtune.training.FullModelHFCheckpointer
  checkpoint_dir: /tmp/Meta-Llama-3.1-8B-Instruct/
tasks: ["truthfulqa_mc2"]
limit: null
max_seq_length: 4096
batch_size: 8
dtype: bf16
"""
    from memlint.documents.parsed import parse_document
    from memlint.documents.reading import document_from_text
    from memlint.facts.extract import extract

    parsed = parse_document(document_from_text("evaluation.yaml", text))
    assert parsed.kind == "torchtune"
    assert extract(parsed) == []


def test_torchtune_keys_are_never_hf_training_argument_findings(lint):
    # torchtune's own spellings (`log_level: INFO`, `seed: null`, `resume_from_checkpoint: False`)
    assert lint({"8B_lora.yaml": LORA_8B}, "8B_lora.yaml") == []


def test_torchtune_misspelt_key_is_reported_with_the_key_recipes_read(lint):
    text = LORA_8B.replace("enable_activation_checkpointing: True", "enable_activation_checkpoint: True")
    [finding] = lint({"8B_lora.yaml": text}, "8B_lora.yaml")
    assert finding.code == "CFG001"
    assert "`enable_activation_checkpointing`" in finding.message
    assert "torchtune's recipes never read it" in finding.message
    assert finding.range.start.line == line_of(text, "enable_activation_checkpoint:")


def test_torchtune_keys_of_newer_or_copied_recipes_are_not_reported(lint):
    # keys torchtune's main branch reads (validation) and a copied recipe's own key
    text = LORA_8B + "run_val_every_n_steps: 100\nbatch_size_val: 4\nmy_recipe_warmup: 3\n"
    assert lint({"8B_lora.yaml": text}, "8B_lora.yaml") == []


def test_torchtune_bad_dtype_is_reported(lint):
    text = LORA_8B.replace("dtype: bf16", "dtype: bfloat16")
    [finding] = lint({"8B_lora.yaml": text}, "8B_lora.yaml")
    assert finding.code == "CFG002"
    assert "bf16" in finding.message


def test_torchtune_run_is_estimated(lint):
    diagnostics = lint({"8B_lora.yaml": LORA_8B}, "8B_lora.yaml", select=("MEM",), gpu="h100")
    assert [d.code for d in diagnostics if d.code == "MEM003"] == []


# SWE-Gym's scripts/training/openhands/configs/policy/*.yaml, trimmed: torchtune's qwen2_5/7B_full
# copied for Qwen2.5-Coder-32B, its header (the template's 2-GPU launch of the 7B) kept, and the
# run launched on 8 GPUs by the project's own Modal script (`N_GPUS=8 modal run ...`)
FULL_32B_COPIED = """\
# Config for multi-device full finetuning in full_finetune_distributed.py
# using a Qwen2.5 7B model
#
# This config assumes that you've run the following command before launching
# this run:
#   tune download Qwen/Qwen2.5-7B-Instruct --output-dir /tmp/Qwen2_5-7B-Instruct
#
# To launch on 2 devices, run the following command from root:
#   tune run --nnodes 1 --nproc_per_node 2 full_finetune_distributed --config qwen2_5/7B_full

exp_name: sonnet-4o-491i-32k-qwen2p5-coder-32b-full-lr1e-4
output_dir: /llm-weights/outputs/${exp_name}
model:
  _component_: torchtune.models.qwen2_5.qwen2_5_32b_instruct

tokenizer:
  _component_: torchtune.models.qwen2_5.qwen2_5_tokenizer
  path: /llm-weights/Qwen/Qwen2.5-Coder-32B-Instruct/vocab.json
  merges_file: /llm-weights/Qwen/Qwen2.5-Coder-32B-Instruct/merges.txt
  max_seq_len: 32768

checkpointer:
  _component_: torchtune.training.FullModelHFCheckpointer
  checkpoint_dir: /llm-weights/Qwen/Qwen2.5-Coder-32B-Instruct
  checkpoint_files: [model-00001-of-00014.safetensors, model-00002-of-00014.safetensors]
  output_dir: ${output_dir}
  model_type: QWEN2

dataset:
  _component_: torchtune.datasets.chat_dataset
  source: json
  data_files: /dataset/openhands-sft-trajectories.jsonl
  conversation_column: messages
  conversation_style: openai
  packed: True
seed: 42
shuffle: True
batch_size: 1

optimizer:
  _component_: torch.optim.AdamW
  fused: True
  weight_decay: 0.01
  lr: 1e-4
optimizer_in_bwd: True
loss:
  _component_: torchtune.modules.loss.CEWithChunkedOutputLoss

epochs: 5
gradient_accumulation_steps: 1
compile: True

device: cuda
dtype: bf16
enable_activation_checkpointing: True
"""


def test_a_header_that_launches_another_config_gives_its_recipe_not_its_gpu_count():
    facts = facts_of("configs/policy/qwen25_coder_32b_full-lr1e-4.yaml", FULL_32B_COPIED)
    assert facts.world_size is None  # before: 2, the template's launch of qwen2_5/7B_full
    assert at(facts, "fsdp") == ("full", None)  # the recipe the header names is still this file's kind
    # the header that launches this very file (torchtune's own recipes/configs/qwen2_5/7B_full.yaml)
    assert facts_of("recipes/configs/qwen2_5/7B_full.yaml", FULL_32B_COPIED).world_size.value == 2


def test_the_chunked_loss_is_read_with_its_chunks_and_compilation():
    facts = facts_of("full-lr1e-4.yaml", FULL_32B_COPIED)
    assert at(facts, "loss_chunks")[:2] == (8, line_of(FULL_32B_COPIED, "CEWithChunkedOutputLoss"))
    assert facts.loss_compiled.value is True
    eager = facts_of("full-lr1e-4.yaml", FULL_32B_COPIED.replace("compile: True", "compile: False"))
    assert eager.loss_compiled is None and eager.loss_chunks.value == 8
    assert facts.fused_loss is None  # the logits exist, chunk by chunk


def test_the_copied_32b_config_fits_the_8_h100s_it_ran_on(lint):
    diagnostics = lint({"configs/policy/full-lr1e-4.yaml": FULL_32B_COPIED}, "configs/policy/full-lr1e-4.yaml",
                       select=("MEM",), gpu="h100", gpus=8)
    # before: MEM001 errors, 172.3 GiB on the header's 2 GPUs, then 103.6 GiB on 8 with the
    # logits of a whole-vocabulary cross-entropy (55.7 GiB)
    assert [d.code for d in diagnostics] == []


def test_chunked_logits_cost_less_than_whole_ones_and_compiled_less_than_eager():
    from memlint.catalog.models import resolve_model
    from memlint.estimate.activations import logits_bytes_per_token
    from memlint.estimate import Precision, TrainingSetup

    arch = resolve_model("Qwen/Qwen2.5-0.5B")
    whole = TrainingSetup(micro_batch=1, seq_len=4096, precision=Precision.BF16)
    eager = whole.but(loss_chunks=8)
    compiled = whole.but(loss_chunks=8, loss_compiled=True)
    v = arch.vocab_size
    assert logits_bytes_per_token(arch, whole) == (10 * v, 6 * v, 12 * v)
    # bf16 logits of every chunk, the fp32 log-probs log_softmax saves, one chunk's upcast
    assert logits_bytes_per_token(arch, eager) == (6.5 * v, 4 * v, (4 + 10 / 8) * v)
    # compiled: the bf16 chunks saved, one chunk's fp32 work at a time
    assert logits_bytes_per_token(arch, compiled) == ((2 + 8 / 8) * v, 2 * v, (2 + 10 / 8) * v)


def test_a_config_with_no_recipe_named_shards_with_fsdp_on_several_gpus(lint):
    headless = "\n".join(line for line in FULL_32B_COPIED.splitlines() if not line.startswith("#"))
    diagnostics = lint({"configs/verifiers/rm-full.yaml": headless}, "configs/verifiers/rm-full.yaml",
                       select=("MEM",), gpu="h100", gpus=8)
    assert [d.code for d in diagnostics] == []  # before: MEM001, 318.5 GiB as plain data parallelism


def test_a_device_mesh_with_tensor_parallelism_is_named_not_estimated(lint):
    # torchtune's llama3_3/70B_full_multinode.yaml and llama4/*_full.yaml: FSDP x TP over the nodes
    text = FULL_32B_COPIED.replace("enable_activation_checkpointing: True",
                                   "enable_activation_checkpointing: True\ntensor_parallel_dim: 8\n"
                                   "tensor_parallel_plan:\n  _component_: torchtune.models.llama3.base_llama_tp_plan")
    facts = facts_of("70B_full_multinode.yaml", text)
    what, advice = facts.unmodelled.value
    assert what == "tensor parallelism (`tensor_parallel_dim: 8`)" and "FSDP only" in advice
    diagnostics = lint({"70B_full_multinode.yaml": text}, "70B_full_multinode.yaml", select=("MEM",), gpu="h100",
                       gpus=8)
    assert [d.code for d in diagnostics] == ["MEM003"]  # before: an estimate of FSDP alone
    assert facts_of("full.yaml", text.replace("tensor_parallel_dim: 8", "tensor_parallel_dim: 1")).unmodelled is None
