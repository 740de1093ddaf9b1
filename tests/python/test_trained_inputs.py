"""Which trained module of a model class the ``inputs_embeds`` of its language model come from.

The class is MiniGPT4-video's ``MiniGPT4_Video`` abridged: the projected image features go
through a tuple-returning method, a per-sample loop over ``zip``, an in-place fill of a padded
tensor and a concatenation helper before they reach the LoRA-wrapped language model; the prompt
tokens are embedded by the language model's frozen table alone.
"""

from __future__ import annotations

import textwrap

import pytest

from memlint.python.index import index_for
from memlint.python.source import parse
from memlint.python.trained_inputs import trained_module_feeding

MINIGPT = textwrap.dedent("""\
    import torch
    import torch.nn as nn
    from peft import LoraConfig, get_peft_model

    from minigpt4.models.blip2 import Blip2Base
    from minigpt4.models.modeling_llama import LlamaForCausalLM


    class MiniGPT4Video(Blip2Base):
        def __init__(self, cfg):
            super().__init__()
            self.visual_encoder, self.ln_vision = self.init_vision_encoder(cfg.vit_model, cfg.img_size)
            for name, param in self.visual_encoder.named_parameters():
                param.requires_grad = False
            self.llama_model = LlamaForCausalLM.from_pretrained(cfg.llama_model, torch_dtype=torch.float16)
            self.llama_model = get_peft_model(self.llama_model, LoraConfig(r=cfg.lora_r, task_type="CAUSAL_LM"))
            self.llama_model.gradient_checkpointing_enable()
            self.llama_proj = nn.Linear(1408 * 4, self.llama_model.config.hidden_size)

        def encode_img(self, image):
            image_embeds = self.ln_vision(self.visual_encoder(image))[:, 1:, :]
            bs, pn, hs = image_embeds.shape
            inputs_llama = self.llama_proj(image_embeds.view(bs, pn // 4, hs * 4))
            return inputs_llama, torch.ones(inputs_llama.size()[:-1], dtype=torch.long)

        def embed_tokens(self, token_ids):
            return self.llama_model.base_model.model.model.embed_tokens(token_ids)

        def prompt_wrap(self, img_embeds, prompts):
            emb_lists = []
            for each_img_embed, each_prompt in zip(img_embeds, prompts):
                p_before, p_after = each_prompt.split("<ImageHere>")
                before = self.embed_tokens(self.llama_tokenizer(p_before, return_tensors="pt").input_ids)
                after = self.embed_tokens(self.llama_tokenizer(p_after, return_tensors="pt").input_ids)
                emb_lists.append(torch.cat([before, each_img_embed[None], after], dim=1))
            pad = self.embed_tokens(torch.tensor(self.llama_tokenizer.pad_token_id))
            wrapped = pad.expand(len(emb_lists), self.max_context_len, -1).clone()
            for i, emb in enumerate(emb_lists):
                wrapped[i, : emb.shape[1]] = emb[0, : self.max_context_len]
            return wrapped

        def concat_input_output(self, input_embs, output_embs):
            return torch.stack([torch.cat([i, o]) for i, o in zip(input_embs, output_embs)])

        def forward(self, samples):
            img_embeds, _ = self.encode_img(samples["image"])
            cond_embeds = self.prompt_wrap(img_embeds, samples["instruction_input"])
            regress_ids = self.llama_tokenizer(samples["answer"], return_tensors="pt").input_ids
            inputs_embeds = self.concat_input_output(cond_embeds, self.embed_tokens(regress_ids))
            return self.llama_model(inputs_embeds=inputs_embeds, labels=samples["labels"]).loss
""")


def _source(text: str, packages: frozenset[str] = frozenset({"minigpt4", "models"})) -> str | None:
    py = parse(text)  # the index reaches its source through a weak reference: keep it alive
    index = index_for(py)
    assert index is not None
    enable = next(c for c in index.calls if index.py.code_of(c.func).endswith("gradient_checkpointing_enable"))
    return trained_module_feeding(index, "self.llama_model", enable, packages)


def test_the_projector_reaches_the_language_model_through_the_helpers():
    assert _source(MINIGPT) == "self.llama_proj"


@pytest.mark.parametrize("change", [
    # frozen where it is built, or by a loop over its parameters
    ("        self.llama_proj = nn.Linear(1408 * 4, self.llama_model.config.hidden_size)\n",
     "        self.llama_proj = nn.Linear(1408 * 4, self.llama_model.config.hidden_size)\n"
     "        self.llama_proj.requires_grad_(False)\n"),
    ("        self.llama_proj = nn.Linear(1408 * 4, self.llama_model.config.hidden_size)\n",
     "        self.llama_proj = nn.Linear(1408 * 4, self.llama_model.config.hidden_size)\n"
     "        for p in self.llama_proj.parameters():\n            p.requires_grad = False\n"),
    # the projection runs without a graph
    ("        inputs_llama = self.llama_proj(", "        with torch.no_grad():\n"
     "            inputs_llama = self.llama_proj("),
    # the image only decides how much padding there is: the inputs are the frozen table's
    ("        cond_embeds = self.prompt_wrap(img_embeds, samples[\"instruction_input\"])\n",
     "        cond_embeds = self.embed_tokens(torch.zeros(img_embeds.shape[:2], dtype=torch.long))\n"),
])
def test_no_trained_source_reaches_it(change):
    old, new = change
    assert old in MINIGPT
    assert _source(MINIGPT.replace(old, new)) is None


def test_a_projector_from_another_library_is_not_known_to_train():
    """``build_projector`` imported from the project trains like ``nn.Linear``; the same name
    imported from a package outside the project says nothing about its gradients."""
    built = MINIGPT.replace("nn.Linear(1408 * 4, self.llama_model.config.hidden_size)", "build_projector(cfg)")
    assert _source(built.replace("import torch.nn as nn\n", "from minigpt4.models.projectors import build_projector\n")) \
        == "self.llama_proj"
    assert _source(built.replace("import torch.nn as nn\n", "from .projectors import build_projector\n")) \
        == "self.llama_proj"
    assert _source(built.replace("import torch.nn as nn\n", "from vision_kit import build_projector\n")) is None


@pytest.mark.parametrize("projector, trains", [
    ("nn.Sequential(nn.Linear(5632, 4096), nn.GELU(), nn.Linear(4096, 4096))", True),
    ("nn.ModuleList([nn.LayerNorm(5632), nn.Linear(5632, 4096)])", True),
    ("nn.Sequential(*layers)", True),
    ("nn.Identity()", False),
    ("nn.Sequential(nn.Flatten(2), nn.Dropout(0.1))", False),
    ("nn.Embedding.from_pretrained(table)", False),
    ("nn.Embedding.from_pretrained(table, freeze=False)", True),
])
def test_which_torch_modules_train(projector, trains):
    """A module without parameters passes its input on; a pretrained table is frozen by default."""
    built = MINIGPT.replace("nn.Linear(1408 * 4, self.llama_model.config.hidden_size)", projector)
    assert (_source(built) == "self.llama_proj") is trains


def test_the_source_named_is_the_one_that_feeds_the_inputs():
    """A trained head on the outputs (``itm_head``) is no source of the inputs."""
    with_head = MINIGPT.replace(
        "        self.llama_proj = nn.Linear(",
        "        self.itm_head = nn.Linear(self.llama_model.config.hidden_size, 2)\n        self.llama_proj = nn.Linear(")
    assert _source(with_head) == "self.llama_proj"
    frozen_projector = with_head.replace("    def encode_img", "    def freeze(self):\n"
                                         "        self.llama_proj.requires_grad_(False)\n\n    def encode_img")
    assert _source(frozen_projector) is None
