"""A causal LM trained on a prompt and a response tokenized to lengths of their own.

A chat fine-tune's ``Dataset`` pads the prompt to ``max_source_length`` and the response to
``max_target_length`` (``self.tokenizer(prompt, max_length=self.max_source_length,
padding="max_length")``) and concatenates them, the prompt's labels masked with -100
(wangdayaya/finetune-qwen: 62 + 151 tokens). The lengths reach the dataset through its
constructor, called for the training and the validation split with the same values; the
sequence a decoder-only model trains on is their sum, not the 2048 tokens memlint assumes
when it reads no length, nor the longer of the two. An encoder-decoder still runs its encoder
over the one and its decoder over the other."""

from __future__ import annotations

from pathlib import Path

from facts_testing import dedent, one, write

from memlint.lint.engine import Linter, run_context
from memlint.project.project import Project
from memlint.project.settings import Settings

CHAT_SFT = dedent('''
    import json

    import torch
    from torch.utils.data import DataLoader, Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer


    class ChatDataset(Dataset):
        def __init__(self, path, tokenizer, max_source_length, max_target_length):
            super().__init__()
            self.tokenizer = tokenizer
            self.max_source_length = max_source_length
            self.max_target_length = max_target_length
            with open(path, encoding="utf-8") as f:
                self.rows = json.load(f)

        def encode(self, question, answer):
            prompt = self.tokenizer.apply_chat_template([{"role": "user", "content": question}],
                                                        tokenize=False, add_generation_prompt=True)
            source = self.tokenizer(prompt, add_special_tokens=False, max_length=self.max_source_length,
                                    padding="max_length", truncation=True)
            target = self.tokenizer(answer, add_special_tokens=False, max_length=self.max_target_length,
                                    padding="max_length", truncation=True)
            input_ids = source["input_ids"] + target["input_ids"]
            labels = [-100] * len(source["input_ids"]) + target["input_ids"]
            return input_ids, labels

        def __getitem__(self, i):
            input_ids, labels = self.encode(self.rows[i]["q"], self.rows[i]["a"])
            return {"input_ids": torch.tensor(input_ids), "labels": torch.tensor(labels)}

        def __len__(self):
            return len(self.rows)


    def main():
        model_name = "Qwen/Qwen2.5-1.5B-Instruct"
        max_source_length = 96
        max_target_length = 384
        tokenizer = AutoTokenizer.from_pretrained(model_name)
        model = AutoModelForCausalLM.from_pretrained(model_name, torch_dtype=torch.bfloat16).cuda()
        train = DataLoader(ChatDataset("train.json", tokenizer, max_source_length, max_target_length),
                           batch_size=16, shuffle=True)
        val = DataLoader(ChatDataset("val.json", tokenizer, max_source_length, max_target_length), batch_size=16)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
        for batch in train:
            loss = model(**{k: v.cuda() for k, v in batch.items()}).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()


    if __name__ == "__main__":
        main()
''')


def test_the_datasets_padded_lengths_are_read_through_its_constructor():
    facts = one(CHAT_SFT)
    assert facts.source_len.value == 96 and facts.target_len.value == 384
    assert facts.micro_batch.value == 16


def test_constructors_that_disagree_state_no_length():
    src = CHAT_SFT.replace('ChatDataset("val.json", tokenizer, max_source_length, max_target_length)',
                           'ChatDataset("val.json", tokenizer, 128, max_target_length)')
    facts = one(src)
    assert facts.source_len is None and facts.seq_len.value == 384  # the one length it can read


def _run(tmp_path: Path, source: str):
    write(tmp_path, {"sft.py": source})
    (tmp_path / ".git").mkdir(exist_ok=True)
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", cache=False, offline=True)
    [run] = Project(settings).runs_for(tmp_path / "sft.py", run_context(settings))
    return run


def test_a_causal_lm_trains_on_the_prompt_and_the_response_together(tmp_path: Path):
    run = _run(tmp_path, CHAT_SFT)
    assert run.setup.seq_len == 96 + 384 and run.setup.decoder_len == 0
    assert "seq_len" not in {a.fact for a in run.assumed}
    assert "concatenated" in run.provenance["seq_len"].note


def test_an_encoder_decoder_keeps_its_two_lengths(tmp_path: Path):
    run = _run(tmp_path, CHAT_SFT.replace("Qwen/Qwen2.5-1.5B-Instruct", "google-t5/t5-large")
               .replace("AutoModelForCausalLM", "AutoModelForSeq2SeqLM"))
    assert (run.setup.seq_len, run.setup.decoder_len) == (96, 384)
