"""CKP001: gradient checkpointing enabled after get_peft_model (and the optimizer)."""

from __future__ import annotations

from memlint.model.diagnostics import Severity

SCRIPT = """\
import argparse

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer


def build(args):
    model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.bfloat16)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    config = LoraConfig(r=args.lora_r, lora_alpha=2 * args.lora_r, task_type="CAUSAL_LM")
    model = get_peft_model(model, config)
    model.print_trainable_parameters()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr)
    if args.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    return model, tokenizer, optimizer
"""


def test_both_late_enables_fire_with_the_wrap_and_the_optimizer_related(lint, where):
    diagnostics = lint("CKP001", SCRIPT)
    assert where(diagnostics) == [(16, 8, 16, 45), (17, 4, 17, 94)]
    message = diagnostics[0].message
    assert "comes after `get_peft_model` (line 12) and after the optimizer (line 14)" in message
    assert [r.range.start.line for r in diagnostics[0].related] == [12, 14]
    assert diagnostics[0].fix is None  # inside an `if`: not a statement of the wrap's block
    assert diagnostics[1].fix is not None


def test_fix_moves_the_plain_statement_before_the_wrap(fix):
    fixed = fix(
        "CKP001",
        SCRIPT.replace("    if args.gradient_checkpointing:\n        model.gradient_checkpointing_enable()\n", ""),
    )
    assert (
        '    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})\n'
        "    model = get_peft_model(model, config)\n"
    ) in fixed
    assert fixed.count("gradient_checkpointing_enable") == 1


def test_fix_renames_a_separate_peft_variable_to_the_base_model(fix):
    source = """\
    from peft import LoraConfig, get_peft_model

    base = AutoModelForCausalLM.from_pretrained("gpt2")
    peft_model = get_peft_model(base, LoraConfig(r=8))
    peft_model.gradient_checkpointing_enable()
    """
    fixed = fix("CKP001", source)
    assert "base.gradient_checkpointing_enable()\npeft_model = get_peft_model(base, LoraConfig(r=8))\n" in fixed


def test_peft_model_loaded_from_an_adapter_directory(lint, where):
    source = """\
    from peft import PeftModel

    model = PeftModel.from_pretrained(base_model, "out/checkpoint-500", is_trainable=True)
    model.activation_checkpointing_enable()
    """
    assert where(lint("CKP001", source)) == [(4, 0, 4, 39)]


def test_near_misses(lint):
    early = """\
    model = AutoModelForCausalLM.from_pretrained("gpt2")
    model.gradient_checkpointing_enable()
    model = get_peft_model(model, LoraConfig(r=8))
    optimizer = torch.optim.AdamW(model.parameters())
    """
    non_reentrant_by_name = """\
    from peft import get_peft_model

    gc_kwargs = {"use_reentrant": False}
    model = get_peft_model(model, config)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=gc_kwargs)
    """
    input_grads = """\
    from peft import get_peft_model

    model = get_peft_model(model, config)
    model.gradient_checkpointing_enable()
    model.enable_input_require_grads()
    """
    other_model = """\
    from peft import get_peft_model

    student = get_peft_model(student, config)
    teacher.gradient_checkpointing_enable()
    """
    only_without_lora = """\
    from peft import get_peft_model

    if args.train_text_encoder and args.use_lora:
        text_encoder = get_peft_model(text_encoder, config)
    if args.gradient_checkpointing:
        unet.enable_gradient_checkpointing()
        if args.train_text_encoder and not args.use_lora:
            text_encoder.gradient_checkpointing_enable()
    """
    full_only = """\
    from peft import get_peft_model

    if not args.train_text_encoder:
        text_encoder.requires_grad_(False)
    elif args.train_text_encoder and args.adapter != "full":
        text_encoder = get_peft_model(text_encoder, config)
    if args.gradient_checkpointing:
        if args.train_text_encoder and args.adapter == "full":
            text_encoder.gradient_checkpointing_enable()
    """
    sources = (
        early,
        non_reentrant_by_name,
        input_grads,
        other_model,
        only_without_lora,
        full_only,
    )
    for source in sources:
        assert lint("CKP001", source) == []


def test_enabled_after_the_optimizer_is_an_info_on_the_ordering(lint, where):
    from memlint.model.diagnostics import Severity

    source = """\
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained("gpt2").cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)
    model.gradient_checkpointing_enable()
    """
    [diagnostic] = lint("CKP001", source)
    assert diagnostic.range.start.line == 6
    assert diagnostic.severity == Severity.INFO
    assert "comes after the optimizer (line 5)" in diagnostic.message and "only the order differs" in diagnostic.message


def test_enabled_after_accelerator_prepare_is_an_info(lint):
    from memlint.model.diagnostics import Severity

    source = """\
    from accelerate import Accelerator

    accelerator = Accelerator(gradient_accumulation_steps=4, mixed_precision="bf16")
    model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path)
    model, optimizer, train_dataloader = accelerator.prepare(model, optimizer, train_dataloader)
    if args.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    """
    [diagnostic] = lint("CKP001", source)
    assert diagnostic.severity == Severity.INFO and "`accelerator.prepare` (line 5)" in diagnostic.message


def test_the_peft_case_after_the_optimizer_stays_one_warning(lint):
    from memlint.model.diagnostics import Severity

    diagnostics = lint("CKP001", SCRIPT)
    assert [d.severity for d in diagnostics] == [Severity.WARNING, Severity.WARNING]


def test_a_trainer_is_never_reported(lint):
    source = """\
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

    model = AutoModelForCausalLM.from_pretrained("gpt2")
    trainer = Trainer(model=model, args=TrainingArguments(output_dir="out"), train_dataset=ds)
    model.gradient_checkpointing_enable()
    trainer.train()
    """
    assert lint("CKP001", source) == []


def test_a_project_that_pins_transformers_5_loses_no_gradient(lint):
    """MedicalGPT pins `transformers>=5.6.0`: transformers 5 checkpoints non-reentrantly and makes
    the embedding output require grad, so the late plain enable is an ordering info; the one that
    asks for reentrant checkpointing in so many words still loses the gradients."""
    pinned = lint("CKP001", SCRIPT, files={"requirements.txt": "peft>=0.19.1\ntorch\ntransformers>=5.6.0\n"})
    assert [(d.range.start.line, d.severity.name) for d in pinned] == [(16, "INFO"), (17, "WARNING")]
    assert "your pin `transformers>=5.6.0` (requirements.txt:3) runs transformers 5" in pinned[0].message
    older = lint("CKP001", SCRIPT, files={"requirements.txt": "transformers>=4.46,<6\n"})
    assert [d.severity.name for d in older] == ["WARNING", "WARNING"]
    legacy = lint("CKP001", SCRIPT, files={"requirements.txt": "transformers<4\n"})
    assert [d.severity.name for d in legacy] == ["WARNING", "WARNING"]


# peft's examples/boft_controlnet/train_controlnet.py, trimmed: the text encoder is wrapped only
# with BOFT and checkpointed only without any adapter; the two guards never hold together
CONTROLNET = """\
import argparse

from peft import BOFTConfig, get_peft_model as wrap
from transformers import CLIPTextModel

parser = argparse.ArgumentParser()
parser.add_argument("--train_text_encoder", action="store_true")
parser.add_argument("--use_boft", action="store_true")
parser.add_argument("--use_lora", action="store_true")
parser.add_argument("--gradient_checkpointing", action="store_true")
args = parser.parse_args()

text_encoder = CLIPTextModel.from_pretrained("stabilityai/stable-diffusion-2-1", subfolder="text_encoder")
if args.train_text_encoder and args.use_boft:
    text_encoder = wrap(text_encoder, BOFTConfig(boft_block_size=8, target_modules=["q_proj", "v_proj"]))
if args.gradient_checkpointing:
    if args.train_text_encoder and not (args.use_lora or args.use_boft):
        text_encoder.gradient_checkpointing_enable()
"""


def test_guards_that_never_hold_together_are_not_an_order(lint):
    assert lint("CKP001", CONTROLNET) == []
    # the enable that does run after the wrap is still reported
    late = CONTROLNET.replace("not (args.use_lora or args.use_boft)", "not args.use_lora")
    assert [d.range.start.line for d in lint("CKP001", late)] == [18]


# peft's tests/test_lora_variants.py: the PeftModel's own preparation makes the inputs require grad
PREPARED = """\
from peft import LoraConfig, TaskType, get_peft_model
from transformers import AutoModelForCausalLM


def build(model_id):
    base_model = AutoModelForCausalLM.from_pretrained(model_id)
    cfg = LoraConfig(task_type=TaskType.CAUSAL_LM, target_modules="all-linear")
    lora_model = get_peft_model(base_model, cfg)
    lora_model.train()
    lora_model.prepare_model_for_gradient_checkpointing(lora_model)
    lora_model.gradient_checkpointing_enable()
    return lora_model
"""


def test_peft_prepare_model_for_gradient_checkpointing_prepares_the_inputs(lint):
    assert lint("CKP001", PREPARED) == []
    unprepared = PREPARED.replace("    lora_model.prepare_model_for_gradient_checkpointing(lora_model)\n", "")
    assert [d.severity for d in lint("CKP001", unprepared)] == [Severity.WARNING]


# VILA llava/eval/vision_niah_vila/eval_vision_niah.py (abridged): the model is prepared for an
# evaluation, no optimizer is built and nothing steps
NIAH_EVAL = """\
import argparse

import torch
from accelerate import Accelerator
from transformers import AutoModelForCausalLM


def inference(args):
    accelerator = Accelerator(mixed_precision="bf16")
    model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.bfloat16)
    accelerator.print("Starting Evaluation...")
    model = accelerator.prepare(model)
    model.gradient_checkpointing_enable()
    for num_frames in range(args.min_frame_num, args.max_frame_num + 1, args.frame_interval):
        with torch.inference_mode():
            logits = model(inputs_embeds=embeddings).logits
        accuracies.append(compute_accuracy(logits, answer_ids))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="lmms-lab/LongVA-7B")
    inference(parser.parse_args())
"""


def test_a_model_prepared_for_evaluation_is_not_late(lint):
    assert lint("CKP001", NIAH_EVAL) == []


def test_a_model_prepared_alone_in_a_file_that_trains_is_late(lint):
    from memlint.model.diagnostics import Severity

    source = NIAH_EVAL.replace(
        "        with torch.inference_mode():\n            logits = model(inputs_embeds=embeddings).logits\n"
        "        accuracies.append(compute_accuracy(logits, answer_ids))\n",
        "        loss = model(inputs_embeds=embeddings, labels=answer_ids).loss\n"
        "        accelerator.backward(loss)\n        optimizer.step()\n        optimizer.zero_grad()\n")
    [diagnostic] = lint("CKP001", source)
    assert diagnostic.severity == Severity.INFO and "`accelerator.prepare` (line 12)" in diagnostic.message


def test_a_deepspeed_engine_for_inference_is_not_late(lint):
    source = """\
    import deepspeed
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path)
    engine, *_ = deepspeed.initialize(model=model, config=ds_config)
    model.gradient_checkpointing_enable()
    with torch.no_grad():
        outputs = engine(**batch)
    """
    assert lint("CKP001", source) == []
    with_optimizer = source.replace("config=ds_config)", "optimizer=optimizer, config=ds_config)")
    assert len(lint("CKP001", with_optimizer)) == 1


# A vision-language model in the shape of MiniGPT-4 and LLaVA's LoRA recipes: the vision tower is
# frozen, the projector is the model's own and trains, LoRA wraps the language model, and the
# language model is called with image features projected and concatenated with token embeddings
VLM = """\
import torch
import torch.nn as nn
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, CLIPVisionModel


class VisionLanguageModel(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.vision_tower = CLIPVisionModel.from_pretrained(args.vision_tower)
        for param in self.vision_tower.parameters():
            param.requires_grad = False
        self.vision_tower.eval()
        self.llm = AutoModelForCausalLM.from_pretrained(args.llm, torch_dtype=torch.bfloat16)
        lora = LoraConfig(r=args.lora_r, lora_alpha=16, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
        self.llm = get_peft_model(self.llm, lora)
        if args.gradient_checkpointing:
            self.llm.gradient_checkpointing_enable()
        hidden = self.llm.config.hidden_size
        self.projector = nn.Sequential(nn.Linear(1024, hidden), nn.GELU(), nn.Linear(hidden, hidden))

    def encode_images(self, pixel_values):
        with torch.no_grad():
            features = self.vision_tower(pixel_values).last_hidden_state[:, 1:]
        return self.projector(features), features.shape[1]

    def wrap_prompt(self, image_embeds, input_ids):
        embeds = []
        for image, ids in zip(image_embeds, input_ids):
            text = self.llm.get_input_embeddings()(ids)
            embeds.append(torch.cat([text[:1], image, text[1:]], dim=0))
        return torch.stack(embeds)

    def forward(self, pixel_values, input_ids, attention_mask, labels):
        image_embeds, n_image = self.encode_images(pixel_values)
        inputs_embeds = self.wrap_prompt(image_embeds, input_ids)
        image_mask = torch.ones(input_ids.shape[0], n_image, dtype=attention_mask.dtype, device=input_ids.device)
        ignore = torch.full((input_ids.shape[0], n_image), -100, dtype=labels.dtype, device=labels.device)
        return self.llm(
            inputs_embeds=inputs_embeds,
            attention_mask=torch.cat([image_mask, attention_mask], dim=1),
            labels=torch.cat([ignore, labels], dim=1),
        )
"""


def test_inputs_embeds_from_a_trained_projector_require_grad(lint):
    """MiniGPT4-video: the checkpointed layers' inputs come from the projector the model trains,
    so reentrant checkpointing gives the LoRA weights their gradients however late it is enabled."""
    assert lint("CKP001", VLM, path="vlm/modeling_vlm.py") == []


def test_a_frozen_projector_or_token_embeddings_alone_keep_the_warning(lint):
    frozen = VLM.replace(
        "        self.projector = nn.Sequential(nn.Linear(1024, hidden), nn.GELU(), nn.Linear(hidden, hidden))\n",
        "        self.projector = nn.Sequential(nn.Linear(1024, hidden), nn.GELU(), nn.Linear(hidden, hidden))\n"
        "        if args.freeze_projector:\n"
        "            self.projector.requires_grad_(False)\n")
    detached = VLM.replace("return self.projector(features), features.shape[1]",
                           "return self.projector(features).detach(), features.shape[1]")
    text_only = VLM.replace("inputs_embeds = self.wrap_prompt(image_embeds, input_ids)",
                            "inputs_embeds = self.llm.get_input_embeddings()(input_ids)")
    # the image embeddings only choose where the text goes: a shape is no gradient
    shapes_only = VLM.replace("embeds.append(torch.cat([text[:1], image, text[1:]], dim=0))",
                              "embeds.append(text[: image.shape[0]])")
    for source in (frozen, detached, text_only, shapes_only):
        assert [d.range.start.line for d in lint("CKP001", source, path="vlm/modeling_vlm.py")] == [18]


# the script builds the LoRA language model and hands it to a model class of the same file that
# keeps it and trains a projector (a class of its own) in front of it
VLM_SCRIPT = """\
import argparse

import torch
from torch import nn
from peft import LoraConfig, get_peft_model as add_lora
from transformers import AutoModelForCausalLM, SiglipVisionModel


class MLPProjector(nn.Module):
    def __init__(self, vision_dim, hidden):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(vision_dim, hidden), nn.Linear(hidden, hidden)

    def forward(self, x):
        return self.fc2(nn.functional.gelu(self.fc1(x)))


class Captioner(nn.Module):
    def __init__(self, vision, language_model, vision_dim):
        super().__init__()
        self.vision, self.language_model = vision.requires_grad_(False), language_model
        self.connector = MLPProjector(vision_dim, language_model.config.hidden_size)

    def forward(self, pixel_values, input_ids, labels):
        patches = self.connector(self.vision(pixel_values).last_hidden_state)
        tokens = self.language_model.get_input_embeddings()(input_ids)
        return self.language_model(inputs_embeds=torch.cat([patches, tokens], dim=1), labels=labels)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--llm", default="Qwen/Qwen2.5-0.5B")
    parser.add_argument("--lr", type=float, default=1e-4)
    args = parser.parse_args()
    vision = SiglipVisionModel.from_pretrained("google/siglip-base-patch16-224")
    llm = AutoModelForCausalLM.from_pretrained(args.llm, torch_dtype=torch.bfloat16)
    llm = add_lora(llm, LoraConfig(r=8, target_modules="all-linear", task_type="CAUSAL_LM"))
    llm.gradient_checkpointing_enable()
    model = Captioner(vision, llm, vision.config.hidden_size).cuda()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr)
    for batch in loader:
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
"""


def test_a_model_handed_to_a_class_that_projects_into_it(lint):
    assert lint("CKP001", VLM_SCRIPT) == []
    frozen = VLM_SCRIPT.replace("    model = Captioner(vision, llm, vision.config.hidden_size).cuda()\n",
                                "    model = Captioner(vision, llm, vision.config.hidden_size).cuda()\n"
                                "    for p in model.connector.parameters():\n"
                                "        p.requires_grad = False\n")
    assert [d.range.start.line for d in lint("CKP001", frozen)] == [38]


def test_a_learned_prompt_parameter_in_front_of_the_tokens(lint):
    """A soft prompt (``nn.Parameter``) concatenated before the token embeddings requires grad;
    one created with ``requires_grad=False`` is a constant."""
    source = """\
    import torch
    from torch import nn
    from peft import LoraConfig, get_peft_model


    class PromptedLM(nn.Module):
        def __init__(self, lm, n_prompt, use_reentrant=True):
            super().__init__()
            self.lm = get_peft_model(lm, LoraConfig(r=8, target_modules=["q_proj", "v_proj"]))
            self.lm.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": use_reentrant})
            self.prompt = nn.Parameter(torch.randn(n_prompt, lm.config.hidden_size) * 0.02)

        def forward(self, input_ids, labels=None):
            tokens = self.lm.get_input_embeddings()(input_ids)
            prompt = self.prompt.unsqueeze(0).expand(tokens.size(0), -1, -1)
            return self.lm(inputs_embeds=torch.cat([prompt, tokens], dim=1), labels=labels)
    """
    assert lint("CKP001", source) == []
    constant = source.replace("* 0.02)", "* 0.02, requires_grad=False)")
    assert [d.range.start.line for d in lint("CKP001", constant)] == [10]


# FineTune-LLM-OnlineRL's archived online GRPO agent (abridged): the script wraps the model with
# PEFT at module level and hands it to a trainer class whose __init__ builds the optimizer and
# then enables checkpointing. Judged as an ordering alone, it was an info that said nothing is lost;
# under the transformers 4.57 its lock file pins, the LoRA layers get no gradient (the project's
# later version adds `enable_input_require_grads()`).
HANDED_TO_A_TRAINER = """\
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM


class OnlineTrainer:
    def __init__(self, model, tokenizer, lr=1e-5, beta=0.1):
        self.model = model
        self.tokenizer = tokenizer
        self.optimizer = torch.optim.AdamW((p for p in model.parameters() if p.requires_grad), lr=lr)
        if hasattr(model, "gradient_checkpointing_enable"):
            model.gradient_checkpointing_enable()

    def train_step(self, batch):
        loss = self.model(**batch).loss
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad()


def load(name):
    return AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.float16)


model = load("Qwen/Qwen2.5-0.5B-Instruct")
model = get_peft_model(model, LoraConfig(r=16, task_type="CAUSAL_LM"))
trainer = OnlineTrainer(model=model, tokenizer=None)
"""


def test_a_wrapped_model_handed_to_a_class_that_enables_checkpointing(lint, where):
    [diagnostic] = lint("CKP001", HANDED_TO_A_TRAINER)
    assert diagnostic.severity == Severity.WARNING
    assert where([diagnostic]) == [(12, 12, 12, 49)]
    assert ("comes after `get_peft_model` (line 26; the wrapped model reaches it through `OnlineTrainer(...)` "
            "at line 27) and after the optimizer (line 10)") in diagnostic.message
    assert [r.range.start.line for r in diagnostic.related] == [26, 27, 10]
    assert diagnostic.fix is None  # the enable and the wrap are in different functions


def test_a_handed_model_that_is_not_wrapped_first_is_only_an_ordering(lint):
    # the wrap after the hand-over, or a function that wraps the model itself
    for source in (
        HANDED_TO_A_TRAINER.replace(
            'model = get_peft_model(model, LoraConfig(r=16, task_type="CAUSAL_LM"))\n'
            'trainer = OnlineTrainer(model=model, tokenizer=None)\n',
            'trainer = OnlineTrainer(model=model, tokenizer=None)\n'
            'model = get_peft_model(model, LoraConfig(r=16, task_type="CAUSAL_LM"))\n'),
        HANDED_TO_A_TRAINER.replace("model.gradient_checkpointing_enable()",
                                    'model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})'),
        HANDED_TO_A_TRAINER.replace("        self.model = model\n",
                                    "        model.enable_input_require_grads()\n        self.model = model\n"),
    ):
        assert [d.severity for d in lint("CKP001", source)] == [Severity.INFO]
