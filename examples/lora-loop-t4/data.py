"""The instruction-tuning data: Alpaca-style prompts, tokenized and padded."""

from datasets import load_dataset

PROMPT = "### Instruction:\n{instruction}\n\n### Response:\n{output}"


def build_splits(tokenizer, max_length):
    tokenizer.pad_token = tokenizer.eos_token
    raw = load_dataset("yahma/alpaca-cleaned", split="train").train_test_split(test_size=0.02, seed=0)

    def encode(rows):
        texts = [PROMPT.format(instruction=i, output=o) for i, o in zip(rows["instruction"], rows["output"])]
        out = tokenizer(texts, truncation=True, max_length=max_length, padding="max_length")
        out["labels"] = out["input_ids"].copy()
        return out

    columns = raw["train"].column_names
    train = raw["train"].map(encode, batched=True, remove_columns=columns).with_format("torch")
    test = raw["test"].map(encode, batched=True, remove_columns=columns).with_format("torch")
    return train, test
