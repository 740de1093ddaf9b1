"""Loading and tokenizing the text corpus (no training code here)."""

from datasets import load_dataset


def load_corpus(tokenizer, max_length):
    raw = load_dataset("wikitext", "wikitext-2-raw-v1", split="train")
    tokenizer.pad_token = tokenizer.eos_token

    def encode(batch):
        out = tokenizer(batch["text"], truncation=True, max_length=max_length, padding="max_length")
        out["labels"] = out["input_ids"].copy()
        return out

    return raw.map(encode, batched=True, remove_columns=["text"]).with_format("torch")
