"""Distil Qwen2.5-7B into Qwen2.5-0.5B on one GPU: KL divergence to the teacher's logits."""

import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM

from corpus import packed_loader

TEACHER = "Qwen/Qwen2.5-7B"
STUDENT = "Qwen/Qwen2.5-0.5B"
TEMPERATURE = 2.0


def distillation_loss(student_logits, teacher_logits):
    t = TEMPERATURE
    return F.kl_div(
        F.log_softmax(student_logits / t, dim=-1), F.softmax(teacher_logits / t, dim=-1), reduction="batchmean"
    ) * t * t


def main():
    teacher = AutoModelForCausalLM.from_pretrained(TEACHER, torch_dtype=torch.float16).cuda().eval()
    student = AutoModelForCausalLM.from_pretrained(STUDENT).cuda()
    optimizer = torch.optim.AdamW(student.parameters(), lr=5e-5)
    student.train()
    optimizer.zero_grad()
    for batch in packed_loader(STUDENT, seq_len=512, batch_size=4):
        batch = {k: v.cuda() for k, v in batch.items()}
        with torch.no_grad():
            teacher_logits = teacher(input_ids=batch["input_ids"]).logits
        student_logits = student(input_ids=batch["input_ids"]).logits
        loss = distillation_loss(student_logits.float(), teacher_logits.float())
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
