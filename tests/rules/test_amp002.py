"""AMP002: bfloat16 on a target GPU without bfloat16 support."""

from __future__ import annotations

QLORA = """\
import torch
from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training
from transformers import AutoModelForCausalLM, BitsAndBytesConfig

bnb = BitsAndBytesConfig(
    load_in_4bit=True,
    bnb_4bit_quant_type="nf4",
    bnb_4bit_compute_dtype=torch.bfloat16,
)
model = AutoModelForCausalLM.from_pretrained(
    "mistralai/Mistral-7B-v0.1",
    quantization_config=bnb,
    torch_dtype=torch.bfloat16,
)
model = prepare_model_for_kbit_training(model)
model = get_peft_model(model, LoraConfig(r=16, task_type="CAUSAL_LM"))
optimizer = torch.optim.AdamW(model.parameters(), lr=2e-4)
"""


def test_qlora_in_bf16_on_a_t4(lint, where):
    diagnostics = lint("AMP002", QLORA, settings={"gpu": "t4"})
    assert where(diagnostics) == [(5, 6, 9, 1), (10, 8, 14, 1)]
    assert all("Tesla T4 (compute capability 7.5) has no bfloat16 support" in d.message for d in diagnostics)
    assert "`bnb_4bit_compute_dtype`" in diagnostics[0].message


def test_same_script_on_ampere_or_without_a_gpu_is_quiet(lint):
    assert lint("AMP002", QLORA, settings={"gpu": "a10g"}) == []
    assert lint("AMP002", QLORA) == []


def test_string_dtype_chosen_by_is_bf16_supported(lint, where):
    source = """\
    import torch

    dtype = "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"
    ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    ctx = torch.amp.autocast(device_type="cuda", dtype=ptdtype)
    """
    diagnostics = lint("AMP002", source, settings={"gpu": "v100-32gb"})
    assert where(diagnostics) == [(3, 8, 3, 97)]
    assert "`torch.cuda.is_bf16_supported()` (line 3) counts emulation" in diagnostics[0].message


def test_model_and_accelerate_spellings(lint, where):
    source = """\
    import torch
    from accelerate import Accelerator

    accelerator = Accelerator(mixed_precision="bf16", gradient_accumulation_steps=4)
    model = build_model().cuda().bfloat16()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batch = batch.to(torch.bfloat16)
    """
    diagnostics = lint("AMP002", source, settings={"gpu": "v100"})
    assert where(diagnostics) == [(4, 14, 4, 80), (5, 8, 5, 39)]


def test_conditions_that_do_not_count_emulation_or_user_choices(lint):
    source = """\
    import torch

    major, _ = torch.cuda.get_device_capability()
    amp_dtype = torch.bfloat16 if major >= 8 else torch.float16
    exact = torch.bfloat16 if torch.cuda.is_bf16_supported(including_emulation=False) else torch.float16
    chosen = torch.bfloat16 if args.bf16 else torch.float32

    with torch.autocast("cuda", dtype=amp_dtype):
        pass
    with torch.autocast("cuda", dtype=exact):
        pass
    with torch.autocast("cuda", dtype=chosen):
        pass
    with torch.autocast("cpu", dtype=torch.bfloat16):
        pass
    """
    assert lint("AMP002", source, settings={"gpu": "t4"}) == []


def test_a_branch_the_user_selects_is_not_reported_but_the_emulation_check_is(lint, where):
    source = """\
    import torch
    from transformers import AutoModelForCausalLM

    if args.dtype == "bfloat16":
        model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.bfloat16)
    if torch.cuda.is_bf16_supported():
        model = model.to(torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters())
    """
    assert where(lint("AMP002", source, settings={"gpu": "v100"})) == [(7, 12, 7, 36)]
