# transformers examples/language-modeling/run_clm.py (v4.3.x, March 2021), reduced to the parts that decide GPU memory.
from dataclasses import dataclass, field
from typing import Optional

from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
    HfArgumentParser,
    Trainer,
    TrainingArguments,
    default_data_collator,
)


@dataclass
class ModelArguments:
    model_name_or_path: Optional[str] = field(default=None)
    config_name: Optional[str] = field(default=None)
    tokenizer_name: Optional[str] = field(default=None)
    cache_dir: Optional[str] = field(default=None)


@dataclass
class DataTrainingArguments:
    dataset_name: Optional[str] = field(default=None)
    dataset_config_name: Optional[str] = field(default=None)
    block_size: Optional[int] = field(
        default=None,
        metadata={"help": "Optional input sequence length after tokenization. Default to the model max input length."},
    )


def main():
    parser = HfArgumentParser((ModelArguments, DataTrainingArguments, TrainingArguments))
    model_args, data_args, training_args = parser.parse_args_into_dataclasses()

    config = AutoConfig.from_pretrained(model_args.model_name_or_path, cache_dir=model_args.cache_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_args.model_name_or_path, cache_dir=model_args.cache_dir)
    model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path, config=config,
                                                 cache_dir=model_args.cache_dir)
    model.resize_token_embeddings(len(tokenizer))

    if data_args.block_size is None:
        block_size = tokenizer.model_max_length
        if block_size > 1024:
            block_size = 1024
    else:
        block_size = min(data_args.block_size, tokenizer.model_max_length)

    # wikitext is tokenized, concatenated and cut into blocks of exactly block_size tokens
    lm_datasets = None  # datasets pipeline omitted

    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=lm_datasets["train"] if training_args.do_train else None,
        eval_dataset=lm_datasets["validation"] if training_args.do_eval else None,
        tokenizer=tokenizer,
        data_collator=default_data_collator,
    )
    if training_args.do_train:
        trainer.train()


if __name__ == "__main__":
    main()
