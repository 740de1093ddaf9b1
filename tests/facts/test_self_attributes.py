"""A training script written as a class keeps its settings on the instance: ``__init__`` stores
``self.model_name = model_name`` and ``setup_model`` loads ``from_pretrained(self.model_name)``
(Satyabanna/TinyLlama-finetuned's ``MedicalChatbotTrainerUltraOptimized``, built once as
``MedicalChatbotTrainerUltraOptimized()``). Such an attribute holds what the module's one
constructor call passes, else the parameter's default; nothing when several calls build the
class or another method sets the attribute again."""

from __future__ import annotations

from facts_testing import dedent, facts_of

SCRIPT = dedent('''
    import logging

    import torch
    from datasets import load_dataset
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

    logger = logging.getLogger(__name__)


    class MedicalChatbotTrainer:
        """Fine-tunes a small chat model on medical dialogues."""

        def __init__(self, model_name: str = "TinyLlama/TinyLlama-1.1B-Chat-v1.0", max_length: int = 512):
            self.model_name = model_name
            self.max_length = max_length
            self.tokenizer = None
            self.model = None

        def setup_model(self):
            logger.info(f"Loading model from {self.model_name}")
            self.tokenizer = AutoTokenizer.from_pretrained(self.model_name)
            self.model = AutoModelForCausalLM.from_pretrained(self.model_name, torch_dtype=torch.bfloat16)
            self.model = get_peft_model(self.model, LoraConfig(r=16, lora_alpha=32, task_type="CAUSAL_LM"))

        def train(self, dataset, output_dir="./medical_chatbot_model", batch_size=4):
            args = TrainingArguments(output_dir=output_dir, per_device_train_batch_size=batch_size, bf16=True)
            trainer = Trainer(model=self.model, args=args, train_dataset=dataset)
            trainer.train()


    def main():
        dataset = load_dataset("json", data_files="medical.jsonl")["train"]
        trainer = MedicalChatbotTrainer(CONSTRUCTED)
        trainer.setup_model()
        trainer.train(dataset)


    if __name__ == "__main__":
        main()
''')


def _model(script: str):
    [facts] = facts_of(script)
    return facts.model


def test_the_attribute_holds_the_parameters_default_when_the_call_passes_none():
    model = _model(SCRIPT.replace("CONSTRUCTED", ""))
    assert model.value == "TinyLlama/TinyLlama-1.1B-Chat-v1.0"
    assert model.origin.range.start.line == 14  # where the default is written


def test_the_attribute_holds_what_the_one_constructor_call_passes():
    model = _model(SCRIPT.replace("CONSTRUCTED", 'model_name="Qwen/Qwen2.5-0.5B-Instruct"'))
    assert model.value == "Qwen/Qwen2.5-0.5B-Instruct"


def test_an_attribute_another_method_sets_again_is_unknown():
    script = SCRIPT.replace("CONSTRUCTED", "").replace(
        "    def train(self,", "    def use_larger(self):\n        self.model_name = \"gpt2-xl\"\n\n"
                              "    def train(self,")
    assert "def use_larger" in script
    assert _model(script) is None


def test_two_constructor_calls_leave_it_unknown():
    script = SCRIPT.replace("CONSTRUCTED", "").replace(
        "    trainer.train(dataset)\n",
        "    trainer.train(dataset)\n    MedicalChatbotTrainer(\"gpt2\").setup_model()\n")
    assert 'MedicalChatbotTrainer("gpt2")' in script
    assert _model(script) is None
