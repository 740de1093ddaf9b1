"""A script that loads a model only to run it -- a distillation teacher, a DPO reference, a
reward model -- trains another one: the trained model is the one memlint must estimate."""

from __future__ import annotations

from facts_testing import dedent, one, span, where

DISTILL = dedent('''
    import torch
    import torch.nn.functional as F
    from transformers import AutoModelForCausalLM as LM

    TEACHER = "Qwen/Qwen2.5-7B"
    STUDENT = "Qwen/Qwen2.5-0.5B"


    def main(loader):
        teacher = LM.from_pretrained(TEACHER, torch_dtype=torch.float16).cuda().eval()
        student = LM.from_pretrained(STUDENT, torch_dtype=torch.float32).cuda()
        optimizer = torch.optim.AdamW(student.parameters(), lr=5e-5)
        for batch in loader:
            with torch.no_grad():
                target = teacher(**batch).logits
            loss = F.kl_div(F.log_softmax(student(**batch).logits, -1), F.softmax(target, -1), reduction="batchmean")
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
''')


def test_an_eval_mode_teacher_is_not_the_trained_model():
    facts = one(DISTILL)
    assert facts.model.value == "Qwen/Qwen2.5-0.5B"
    assert where(facts.model) == span(DISTILL, 'STUDENT = «"Qwen/Qwen2.5-0.5B"»')
    assert facts.load_dtype.value == "fp32"


def test_a_model_frozen_with_requires_grad_false_is_not_the_trained_model():
    text = DISTILL.replace(".cuda().eval()", ".requires_grad_(False)").replace("teacher", "big")
    assert one(text).model.value == "Qwen/Qwen2.5-0.5B"


def test_a_reference_model_by_its_name():
    text = DISTILL.replace(".cuda().eval()", ".cuda()").replace("teacher", "ref_model")
    assert one(text).model.value == "Qwen/Qwen2.5-0.5B"


def test_a_single_model_put_in_eval_mode_later_is_still_the_model():
    text = dedent('''
        import torch
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B").cuda()
        optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)
        model.eval()
    ''')
    assert one(text).model.value == "Qwen/Qwen2.5-0.5B"


# a text-to-image DiT trained from its own classes, conditioned on captions a pretrained LM encodes
# (Large-DiT-T2I's ``train.py``): the LM is loaded, sharded and run under no_grad, never optimized
CAPTION_ENCODER = dedent('''
    import argparse

    import torch
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import models


    @torch.no_grad()
    def encode_captions(lm, tokenizer, captions):
        ids = tokenizer(captions, return_tensors="pt", padding=True).input_ids.cuda()
        return lm(input_ids=ids).last_hidden_state


    def main(args):
        tokenizer = AutoTokenizer.from_pretrained(args.lm)
        model_lm = AutoModelForCausalLM.from_pretrained(args.lm).get_decoder()
        model_lm = FSDP(model_lm.cuda())
        model = models.__dict__[args.model](cap_feat_dim=model_lm.config.hidden_size, qk_norm=args.qk_norm)
        model = FSDP(model.cuda())
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0)
        for images, captions in loader(args):
            cap_feats = encode_captions(model_lm, tokenizer, captions)
            loss = model(images, cap_feats).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()


    if __name__ == "__main__":
        parser = argparse.ArgumentParser()
        parser.add_argument("--lm", default="meta-llama/Llama-2-7b-hf")
        parser.add_argument("--model", default="DiT_Llama_3B_patch2")
        parser.add_argument("--qk_norm", action="store_true")
        parser.add_argument("--lr", type=float, default=1e-4)
        main(parser.parse_args())
''')


def test_a_pretrained_model_no_optimizer_takes_is_not_the_trained_model():
    # the DiT reads the LM's hidden size from its config: that hands over a number, not the LM
    assert one(CAPTION_ENCODER).model is None


def test_a_pretrained_model_wrapped_into_the_optimized_model_is_trained():
    text = CAPTION_ENCODER.replace("cap_feat_dim=model_lm.config.hidden_size", "text_encoder=model_lm")
    assert one(text).model.value == "meta-llama/Llama-2-7b-hf"


def test_a_pretrained_model_an_optimizer_helper_takes_is_unknown_and_kept():
    # ``build_optimizer(model)`` hides which parameters it takes: the loaded model stays the model
    text = CAPTION_ENCODER.replace(
        "opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0)",
        "opt = build_optimizer(model_lm, args)").replace(
        "def main(args):", "def build_optimizer(net, args):\n    return torch.optim.AdamW(net.parameters(), lr=args.lr)\n\n\ndef main(args):")
    assert one(text).model.value == "meta-llama/Llama-2-7b-hf"
