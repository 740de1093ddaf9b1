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
