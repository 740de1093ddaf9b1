"""LLaMA-Factory's memory savers, as its example YAMLs use them: OFT adapters, GaLore and APOLLO's
projected optimizer states, BAdam's one block at a time, LLaMA Pro's expanded blocks and KTransformers'
experts on the CPU. Each is priced from what the config states, and the sheet says what was assumed."""

from __future__ import annotations

import json

import pytest

from memlint.catalog.models import resolve
from memlint.cli.errors import EXIT_OK
from memlint.cli.main import main
from memlint.estimate import Lora, Projection, TrainingSetup, estimate_training
from memlint.estimate.policy import Optimizer, Precision
from memlint.estimate.states import count_parameters
from memlint.rules.zro001_zero3_on_small_model import KT_SFT

# examples/extras/oft/llama3_oft_sft.yaml (LLaMA-Factory ff6d4d1)
OFT = """\
### model
model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
trust_remote_code: true

### method
stage: sft
do_train: true
finetuning_type: oft
oft_block_size: 32
oft_target: all

### dataset
dataset: identity,alpaca_en_demo
template: llama3
cutoff_len: 2048
max_samples: 1000

### output
output_dir: saves/llama3-8b/oft/sft
logging_steps: 10

### train
per_device_train_batch_size: 1
gradient_accumulation_steps: 8
learning_rate: 1.0e-4
num_train_epochs: 3.0
lr_scheduler_type: cosine
warmup_ratio: 0.1
bf16: true
ddp_timeout: 180000000
"""

# examples/extras/galore/llama3_full_sft.yaml
GALORE = """\
model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
trust_remote_code: true

stage: sft
do_train: true
finetuning_type: full
use_galore: true
galore_layerwise: true  # choices: [true, false], use false for DDP training
galore_target: all
galore_rank: 128
galore_scale: 2.0

dataset: identity,alpaca_en_demo
template: llama3
cutoff_len: 2048
output_dir: saves/llama3-8b/full/sft

per_device_train_batch_size: 1
gradient_accumulation_steps: 1  # use 1 for layerwise galore
learning_rate: 1.0e-5
pure_bf16: true
"""

# examples/extras/badam/llama3_full_sft.yaml
BADAM = """\
model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
trust_remote_code: true

stage: sft
do_train: true
finetuning_type: full
use_badam: true
badam_mode: layer
badam_switch_mode: ascending
badam_switch_interval: 50
badam_verbose: 2

dataset: identity,alpaca_en_demo
template: llama3
cutoff_len: 2048
output_dir: saves/llama3-8b/full/sft

per_device_train_batch_size: 1
gradient_accumulation_steps: 8
learning_rate: 1.0e-5
"""

# examples/extras/llama_pro/llama3_freeze_sft.yaml, after expand.sh wrote models/llama3-8b-pro
LLAMA_PRO = """\
model_name_or_path: models/llama3-8b-pro
trust_remote_code: true

stage: sft
do_train: true
finetuning_type: freeze
freeze_trainable_layers: 8
freeze_trainable_modules: all
use_llama_pro: true

dataset: identity,alpaca_en_demo
template: llama3
cutoff_len: 2048
output_dir: saves/llama3-8b-pro/freeze/sft

per_device_train_batch_size: 1
gradient_accumulation_steps: 8
learning_rate: 1.0e-4
bf16: true
"""

# examples/ktransformers/train_lora/deepseek_v2_lora_sft_kt.yaml: ZRO001's KTransformers example on DeepSeek-V2-Lite
KT = KT_SFT.replace("Qwen/Qwen3-30B-A3B-Instruct-2507", "deepseek-ai/DeepSeek-V2-Lite").replace(
    "template: qwen3_nothink", "template: deepseek")


def _sheet(tmp_path, monkeypatch, capsys, text: str, name: str = "run.yaml", gpu: str = "h100") -> tuple[dict, str]:
    (tmp_path / ".git").mkdir(exist_ok=True)
    (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["estimate", name, "--gpu", gpu, "--format", "json"]) == EXIT_OK
    captured = capsys.readouterr()
    return json.loads(captured.out), captured.err


def _components(sheet: dict, phase: int = 0) -> dict[str, int]:
    return {c["key"]: c["bytes"] for c in sheet["phases"][phase]["components"]}


def test_oft_trains_the_rotation_generators_peft_creates(tmp_path, monkeypatch, capsys):
    sheet, _ = _sheet(tmp_path, monkeypatch, capsys, OFT)
    assert sheet["setup"]["lora"] == {"r": 8, "targets": ["all-linear"], "quantization": None, "method": "oft",
                                      "block_size": 32}
    # peft OFTLayer.update_layer: (in_features / 32) blocks of 32*31/2 values on every linear but the head
    arch = resolve("meta-llama/Meta-Llama-3-8B").arch
    per_block = sum(lin.in_features * 31 // 2 for lin in arch.blocks[0].linears)
    assert sheet["trainable_parameters"] == arch.num_layers * per_block
    assert any("OFT with blocks of 32" in a for a in sheet["assumptions"])
    # far below full fine-tuning: adapters and their Adam states only
    assert sheet["peak_bytes"] < 20 * 2**30


def test_oft_parameter_count_matches_peft():
    """The count PEFT itself creates, on a small Llama built on the meta device (trace extra)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")
    config = transformers.LlamaConfig(hidden_size=256, intermediate_size=688, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=1000)
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(config)
    model = peft.get_peft_model(model, peft.OFTConfig(oft_block_size=32, target_modules="all-linear"))
    measured = sum(p.numel() for p in model.parameters() if p.requires_grad)
    from memlint.estimate import from_config

    arch = from_config(config.to_dict(), "tiny-llama")
    counts = count_parameters(arch, TrainingSetup(lora=Lora(method="oft", block_size=32, targets=("all-linear",))))
    assert counts.lora == measured  # 688 is not a multiple of 32: PEFT picks 43 for down_proj, as memlint does


def test_oft_fires_when_the_batch_outgrows_a_24_gib_card(tmp_path, monkeypatch, capsys):
    big = OFT.replace("cutoff_len: 2048", "cutoff_len: 8192").replace(
        "per_device_train_batch_size: 1", "per_device_train_batch_size: 8")
    sheet, _ = _sheet(tmp_path, monkeypatch, capsys, big, gpu="l4")
    assert sheet["peak_bytes"] > 24 * 2**30


def test_galore_keeps_rank_128_states_for_the_projected_matrices(tmp_path, monkeypatch, capsys):
    sheet, err = _sheet(tmp_path, monkeypatch, capsys, GALORE)
    assert sheet["setup"]["projection"] == {"name": "GaLore", "rank": 128, "layerwise": True}
    arch = resolve("meta-llama/Meta-Llama-3-8B").arch
    projected_state = projector = projected = 0
    for lin in arch.blocks[0].linears:
        rows, cols = lin.out_features, lin.in_features
        projected += arch.num_layers * rows * cols
        projected_state += arch.num_layers * 128 * max(rows, cols)
        projector += arch.num_layers * 128 * min(rows, cols)
    full = arch.n_params - projected  # embeddings, head, norms keep AdamW's two full states
    states = max(phase_components.get("optimizer_states", 0) for phase_components in
                 (_components(sheet, i) for i in range(3)))
    assert states == pytest.approx(2 * 2 * (full + projected_state) + 2 * projector, rel=0.001)
    full_adam = estimate_training(arch, TrainingSetup(precision=Precision.BF16, optimizer=Optimizer.ADAMW_FUSED,
                                                      grad_ckpt_every=1))
    assert sheet["peak_bytes"] < full_adam.peak_bytes - 20 * 2**30
    assert "GaLore rank 128 layer-wise" in err or any("GaLore rank 128" in a for a in sheet["assumptions"])


def test_apollo_is_priced_like_galore(tmp_path, monkeypatch, capsys):
    apollo = GALORE.replace("use_galore: true\ngalore_layerwise: true  # choices: [true, false], use false for DDP "
                            "training\ngalore_target: all\ngalore_rank: 128\ngalore_scale: 2.0\n",
                            "use_apollo: true\napollo_layerwise: true\napollo_target: all\napollo_rank: 128\n"
                            "apollo_scale: 32.0\napollo_scale_type: channel\n")
    sheet, _ = _sheet(tmp_path, monkeypatch, capsys, apollo)
    assert sheet["setup"]["projection"] == {"name": "APOLLO", "rank": 128, "layerwise": True}


def test_without_layerwise_every_gradient_is_alive_at_the_step():
    arch = resolve("meta-llama/Meta-Llama-3-8B").arch
    setups = [TrainingSetup(precision=Precision.BF16, grad_ckpt_every=1,
                            projection=Projection(rank=128, layerwise=layerwise)) for layerwise in (True, False)]
    layerwise, whole = (estimate_training(arch, s) for s in setups)
    assert whole.peak_bytes - layerwise.peak_bytes > 10 * 2**30  # ~15 GiB of bf16 gradients


def test_badam_trains_one_block_in_the_loaded_dtype(tmp_path, monkeypatch, capsys):
    sheet, err = _sheet(tmp_path, monkeypatch, capsys, BADAM)
    arch = resolve("meta-llama/Meta-Llama-3-8B").arch
    block = arch.blocks[0].params_per_block
    assert sheet["trainable_parameters"] == block
    assert sheet["setup"]["precision"] == "bf16"  # no fp32 upcast under BAdam: the checkpoint's bf16
    optimizer = max(_components(sheet, i).get("optimizer_states", 0) for i in range(3))
    assert optimizer == pytest.approx(2 * 2 * block, rel=0.01)
    assert any("1 of 32 blocks train" in a for a in sheet["assumptions"])


def test_badam_ratio_mode_is_named_not_guessed(tmp_path, monkeypatch, capsys):
    from memlint.documents.parsed import parse_document
    from memlint.documents.reading import document_from_text
    from memlint.facts.extract import extract

    text = BADAM.replace("badam_mode: layer", "badam_mode: ratio")
    [facts] = extract(parse_document(document_from_text("examples/extras/badam/llama3_full_sft.yaml", text)))
    assert facts.unmodelled.value == "BAdam's ratio mode (`badam_mode: ratio`)"


def test_llama_pro_trains_the_expanded_blocks(tmp_path, monkeypatch, capsys):
    config = dict(resolve("meta-llama/Meta-Llama-3-8B").arch.config, num_hidden_layers=40)
    (tmp_path / "models" / "llama3-8b-pro").mkdir(parents=True)
    (tmp_path / "models" / "llama3-8b-pro" / "config.json").write_text(json.dumps(config))
    sheet, _ = _sheet(tmp_path, monkeypatch, capsys, LLAMA_PRO)
    arch = resolve("meta-llama/Meta-Llama-3-8B").arch
    block = arch.blocks[0].params_per_block
    assert sheet["trainable_parameters"] == 8 * block
    # _setup_freeze_tuning: stride 40 // 8 = 5, blocks 4, 9, ..., 39 train: 4 frozen before the first
    assert sheet["setup"]["frozen"]["layers"] == 4
    assert sheet["setup"]["trained_blocks"] == 8
    weights = _components(sheet)["weights"]
    assert weights == 8 * block * 4 + (arch.n_params + 8 * block - 8 * block) * 2


def test_ktransformers_leaves_the_routed_experts_in_host_memory(tmp_path, monkeypatch, capsys):
    sheet, _ = _sheet(tmp_path, monkeypatch, capsys, KT)
    arch = resolve("deepseek-ai/DeepSeek-V2-Lite").arch
    experts = sum(g.count * lin.copies * lin.in_features * lin.out_features
                  for g in arch.blocks for lin in g.linears if lin.name.startswith("experts."))
    assert experts > arch.n_params * 0.8  # 64 routed experts of 26 blocks: most of the 15.7B
    assert sheet["host_bytes"] == experts * 2
    assert _components(sheet)["weights"] < (arch.n_params - experts) * 2 + 2 * 2**30
    assert sheet["setup"]["experts_on_host"] is True
    without = _sheet(tmp_path, monkeypatch, capsys, KT.replace("use_kt: true\n", ""), name="no_kt.yaml")[0]
    assert without["peak_bytes"] - sheet["peak_bytes"] > 20 * 2**30


EXPAND = """\
python scripts/llama_pro.py \\
    --model_name_or_path meta-llama/Meta-Llama-3-8B-Instruct \\
    --output_dir models/llama3-8b-pro \\
    --num_expand 8
"""


def _memory_notes(root, gpu: str) -> list:
    from memlint.lint.engine import Linter
    from memlint.project.settings import Settings

    settings = Settings(root=root).with_overrides(gpu=gpu, cache=False)
    config = root / "examples/extras/llama_pro/llama3_freeze_sft.yaml"
    return [d for d in Linter(settings).lint_path(config) if d.code.startswith("MEM")]


def test_llama_pro_takes_its_model_from_the_expand_script_beside_it(tmp_path, monkeypatch, capsys):
    """examples/extras/llama_pro: expand.sh writes models/llama3-8b-pro (Llama-3-8B + 8 blocks), which
    the config trains; the model folder does not exist until the script runs."""
    folder = tmp_path / "examples/extras/llama_pro"
    folder.mkdir(parents=True)
    (folder / "expand.sh").write_text(EXPAND)
    sheet, err = _sheet(tmp_path, monkeypatch, capsys, LLAMA_PRO, name="examples/extras/llama_pro/llama3_freeze_sft.yaml")
    arch = resolve("meta-llama/Meta-Llama-3-8B").arch
    assert sheet["parameters"] == arch.n_params + 8 * arch.blocks[0].params_per_block
    assert "expanded by 8 blocks to 40 (expand.sh: --num_expand)" in err
    [note] = _memory_notes(tmp_path, "l4")
    assert note.code == "MEM001" and note.path.endswith("llama3_freeze_sft.yaml")
    assert _memory_notes(tmp_path, "h100") == []


def test_an_expand_script_writing_another_folder_is_not_this_model(tmp_path):
    folder = tmp_path / "examples/extras/llama_pro"
    folder.mkdir(parents=True)
    (tmp_path / ".git").mkdir()
    (folder / "expand.sh").write_text(EXPAND.replace("models/llama3-8b-pro", "models/qwen2-7b-pro"))
    (folder / "llama3_freeze_sft.yaml").write_text(LLAMA_PRO)
    [note] = _memory_notes(tmp_path, "l4")
    assert note.code == "MEM003" and "unknown model 'models/llama3-8b-pro'" in note.message


def _kt_check(tmp_path, monkeypatch, capsys, model: str, template: str, gpu: str) -> list:
    (tmp_path / ".git").mkdir(exist_ok=True)
    (tmp_path / "kt_lora_sft.yaml").write_text(
        KT.replace("deepseek-ai/DeepSeek-V2-Lite", model).replace("template: deepseek", f"template: {template}"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["check", ".", "--gpu", gpu, "--output-format", "json", "--no-cache", "--exit-zero"]) == EXIT_OK
    return [d for d in json.loads(capsys.readouterr().out) if d["code"].startswith("MEM")]


def test_ktransformers_on_a_model_counted_on_the_meta_device_keeps_its_fused_experts_on_the_host(
        tmp_path, monkeypatch, capsys):
    """LLaMA-Factory's examples/ktransformers/train_lora/qwen3_5moe_lora_sft_kt.yaml: Qwen3.5-397B-A17B has no
    layer recipe; transformers' meta-device build stores its 512 routed experts as fused 3-D parameters
    (``mlp.experts.gate_up_proj``), which the count names, so the 387B expert weights stay off the GPU."""
    arch = resolve("Qwen/Qwen3.5-397B-A17B").arch
    experts = sum(g.count * lin.copies * lin.in_features * lin.out_features
                  for g in arch.blocks for lin in g.linears if lin.name.startswith("experts."))
    assert experts > arch.n_params * 0.9
    assert _kt_check(tmp_path, monkeypatch, capsys, "Qwen/Qwen3.5-397B-A17B", "qwen3_5", "h100") == []
    # the ~10B parameters left on the GPU in bf16 (about 19 GiB) do not fit a 24 GB L4
    [too_big] = _kt_check(tmp_path, monkeypatch, capsys, "Qwen/Qwen3.5-397B-A17B", "qwen3_5", "l4")
    assert too_big["code"] == "MEM001"
    sheet, _ = _sheet(tmp_path, monkeypatch, capsys, KT.replace("deepseek-ai/DeepSeek-V2-Lite", "Qwen/Qwen3.5-397B-A17B"))
    assert sheet["host_bytes"] == experts * 2


def test_ktransformers_on_a_dense_model_is_a_note_that_names_the_model(tmp_path, monkeypatch, capsys):
    [note] = _kt_check(tmp_path, monkeypatch, capsys, "Qwen/Qwen3-8B", "qwen3", "h100")
    assert note["code"] == "MEM003" and "`Qwen/Qwen3-8B` (qwen3) has no routed experts" in note["message"]
    # what to do: which setting to check, how to measure it, and how to silence the note once measured
    assert "model_name_or_path" in note["message"] and "torch.cuda.max_memory_allocated()" in note["message"]
    assert "ignore[MEM003]" in note["message"]


# Axolotl's examples/qwen3.5/35b-a3b-moe-qlora.yaml (trimmed): ``quantize_moe_experts`` quantizes the fused experts
AXOLOTL_MOE_QLORA = """\
base_model: Qwen/Qwen3.5-35B-A3B
plugins:
  - axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin
use_scattermoe: true
chat_template: qwen3_5
datasets:
  - path: mlabonne/FineTome-100k
    type: chat_template
output_dir: ./outputs/out
sequence_len: 2048
sample_packing: true
load_in_4bit: true
quantize_moe_experts: true
adapter: qlora
lora_r: 16
lora_alpha: 32
lora_target_modules:
  - q_proj
  - k_proj
  - v_proj
  - o_proj
gradient_accumulation_steps: 2
micro_batch_size: 4
optimizer: adamw_torch_8bit
bf16: auto
gradient_checkpointing: true
attn_implementation: flash_attention_2
"""


def test_qlora_of_a_meta_counted_moe_quantizes_its_fused_experts(tmp_path, monkeypatch, capsys):
    """The meta-device count names Qwen3.5-MoE's fused experts, so QLoRA quantizes them as it does a recipe's
    experts: about 35B parameters in 4 bits, not 35B upcast to fp32 (129 GiB and a false MEM001 before)."""
    sheet, _ = _sheet(tmp_path, monkeypatch, capsys, AXOLOTL_MOE_QLORA, name="35b-a3b-moe-qlora.yaml")
    arch = resolve("Qwen/Qwen3.5-35B-A3B").arch
    held = _components(sheet)["weights"]
    assert held < arch.n_params * 0.7  # 4-bit experts; the attention, embeddings and norms stay wider
    assert held > arch.n_params * 0.5
    assert sheet["peak_bytes"] < 40 * 2**30  # fits one 80 GB H100; not a 24 GB L4 (weights alone ~21 GiB)
    assert sheet["peak_bytes"] > 22 * 2**30


def test_fsdp_gathers_no_routed_experts_that_ktransformers_keeps_in_host_memory():
    # FSDP2 all-gathers a block's GPU parameters; KTransformers' routed experts never reach the GPU
    from memlint.estimate import Lora, Sharding, TrainingSetup, estimate_training

    arch = resolve("deepseek-ai/DeepSeek-V2-Lite").arch
    setup = TrainingSetup(micro_batch=1, seq_len=2048, lora=Lora(r=8, targets=("q_proj", "v_proj")),
                          sharding=Sharding.FSDP_FULL, world_size=4, grad_ckpt_every=1, experts_on_host=True)
    gathered = estimate_training(arch, setup).phases[0].component("all_gather")
    on_gpu = max(g.params_per_block - sum(lin.params for lin in g.linears if lin.name.startswith("experts."))
                 for g in arch.blocks)
    assert gathered is not None and on_gpu < arch.largest_block_params / 5
    assert gathered.bytes == on_gpu * 2  # bf16 all-gather of the largest block without its routed experts
