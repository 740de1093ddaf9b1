"""Files that build training objects without being a run (issue 15): a library module that
only defines a ``Trainer`` subclass, a test, an inference script that builds a placeholder
``TrainingArguments`` for a data loader. Each has a near miss that is a run."""

from __future__ import annotations

from facts_testing import dedent, facts_of, one

# LLaVA-NeXT's llava/train/llava_trainer.py, trimmed: the Trainer subclass builds its own
# optimizer and Accelerator in its methods; llava/train/train.py builds the class and trains
LLAVA_TRAINER = dedent('''
    import torch
    from accelerate import Accelerator
    from transformers import Trainer
    from transformers.trainer import get_parameter_names, ALL_LAYERNORM_LAYERS


    def maybe_zero_3(param, ignore_status=False, name=None):
        from deepspeed import zero
        return param.detach().cpu().clone()


    class LLaVATrainer(Trainer):
        def create_accelerator_and_postprocess(self):
            self.accelerator = Accelerator(deepspeed_plugin=self.args.deepspeed_plugin)

        def create_optimizer(self):
            opt_model = self.model
            if self.optimizer is None:
                decay_parameters = get_parameter_names(opt_model, ALL_LAYERNORM_LAYERS)
                optimizer_grouped_parameters = [
                    {"params": [p for n, p in opt_model.named_parameters() if n in decay_parameters],
                     "weight_decay": self.args.weight_decay},
                ]
                self.optimizer = torch.optim.AdamW(optimizer_grouped_parameters, lr=self.args.learning_rate)
            return self.optimizer
''')


def test_a_module_that_only_defines_a_trainer_subclass_is_no_run():
    assert facts_of(LLAVA_TRAINER, "llava/train/llava_trainer.py") == []


def test_near_miss_a_script_that_defines_its_trainer_and_builds_it_is_a_run():
    src = LLAVA_TRAINER + dedent('''


        if __name__ == "__main__":
            from transformers import AutoModelForCausalLM, TrainingArguments
            model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-7B")
            trainer = LLaVATrainer(model=model, args=TrainingArguments(output_dir="out", bf16=True))
            trainer.train()
    ''')
    assert one(src, "train_llava.py").model.value == "Qwen/Qwen2.5-7B"


def test_near_miss_a_class_that_holds_the_loop_and_is_run_by_the_module():
    src = dedent('''
        import torch
        from torch import nn


        class Runner:
            def __init__(self, model: nn.Module):
                self.model = model
                self.optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)

            def fit(self, loader):
                for batch in loader:
                    loss = self.model(batch).mean()
                    loss.backward()
                    self.optimizer.step()
                    self.optimizer.zero_grad()


        def main():
            Runner(nn.Linear(1024, 1024)).fit(range(10))


        if __name__ == "__main__":
            main()
    ''')
    assert len(facts_of(src, "fit.py")) == 1


# trlx's tests/test_peft.py, trimmed: a test that loads a model and runs a backward and a step
PEFT_TEST = dedent('''
    import unittest

    import torch
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM


    class TestPeft(unittest.TestCase):
        def test_backward(self):
            model = AutoModelForCausalLM.from_pretrained("EleutherAI/pythia-160m", device_map="auto")
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
            loss = model(torch.tensor([[1, 2, 3]]), labels=torch.tensor([[1, 2, 3]])).loss
            loss.backward()
            optimizer.step()
''')


def test_a_test_module_is_no_run():
    assert facts_of(PEFT_TEST, "tests/test_peft.py") == []
    assert facts_of(PEFT_TEST, "trlx/tests/models/peft_check.py") == []  # a tests folder


def test_near_miss_the_same_code_in_a_training_script_is_a_run():
    src = PEFT_TEST.replace("class TestPeft(unittest.TestCase):\n    def test_backward(self):", "def main():")
    assert len(facts_of(src, "scripts/train_peft.py")) == 1


# LIMO's train/scripts/vllm_infer.py, trimmed: LLaMA-Factory's get_dataset asks for training
# arguments, so the inference script builds a placeholder
VLLM_INFER = dedent('''
    import fire
    from transformers import Seq2SeqTrainingArguments

    from llamafactory.data import get_dataset, get_template_and_fix_tokenizer
    from llamafactory.hparams import get_infer_args
    from llamafactory.model import load_tokenizer
    from vllm import LLM, SamplingParams


    def vllm_infer(model_name_or_path: str, dataset: str = "alpaca_en_demo", cutoff_len: int = 2048):
        model_args, data_args, _, generating_args = get_infer_args(
            dict(model_name_or_path=model_name_or_path, dataset=dataset, cutoff_len=cutoff_len))
        training_args = Seq2SeqTrainingArguments(output_dir="dummy_dir")
        tokenizer_module = load_tokenizer(model_args)
        template_obj = get_template_and_fix_tokenizer(tokenizer_module["tokenizer"], data_args)
        dataset_module = get_dataset(template_obj, model_args, data_args, training_args, "ppo", **tokenizer_module)
        llm = LLM(model=model_args.model_name_or_path, tensor_parallel_size=1)
        return llm.generate([s["input_ids"] for s in dataset_module["train_dataset"]], SamplingParams())


    if __name__ == "__main__":
        fire.Fire(vllm_infer)
''')


def test_a_placeholder_training_arguments_in_an_inference_script_is_no_run():
    assert facts_of(VLLM_INFER, "scripts/vllm_infer.py") == []


def test_near_miss_training_arguments_that_state_training_are_a_run():
    src = VLLM_INFER.replace('Seq2SeqTrainingArguments(output_dir="dummy_dir")',
                             'Seq2SeqTrainingArguments(output_dir="out", per_device_train_batch_size=4, bf16=True)')
    assert len(facts_of(src, "scripts/vllm_infer.py")) == 1


# NJUxlj/Travel-Agent-based-on-Qwen2-RLHF's legacy/fine_tune_gemma_2b.py, trimmed: a notebook
# turned script that loads the model, generates, builds TrainingArguments and never uses them (its
# SFTTrainer sits in a string)
NOTEBOOK_LEFTOVER = dedent('''
    import torch
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig, TrainingArguments

    DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
    print("Is GPU available? ", torch.cuda.is_available())

    lora_config = LoraConfig(r=8, target_modules=["q_proj", "o_proj", "k_proj", "v_proj"], task_type="CAUSAL_LM")
    bnb_config = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16)
    tokenizer = AutoTokenizer.from_pretrained("model_weights/gemma-2b")
    model = AutoModelForCausalLM.from_pretrained("model_weights/gemma-2b", quantization_config=bnb_config,
                                                 device_map={"": 0})
    inputs = tokenizer("Quote: Imagination is more", return_tensors="pt").to(DEVICE)
    outputs = model.generate(**inputs, max_new_tokens=20)
    print(tokenizer.decode(outputs[0], skip_special_tokens=True))

    training_args = TrainingArguments(output_dir="training_args_output", eval_strategy="epoch")

    \'\'\'
    trainer = SFTTrainer(model=model, args=training_args, peft_config=lora_config)
    trainer.train()
    \'\'\'
''')


def test_training_arguments_nothing_reads_train_nothing():
    assert facts_of(NOTEBOOK_LEFTOVER, "legacy/fine_tune_gemma_2b.py") == []  # before: a QLoRA run, MEM001


def test_near_miss_training_arguments_a_trainer_gets_make_a_run():
    src = NOTEBOOK_LEFTOVER.replace("\'\'\'\n", "")
    [facts] = facts_of(src, "legacy/fine_tune_gemma_2b.py")
    assert facts.framework.value in ("hf-trainer", "trl") and (facts.trains is None or facts.trains.value)

def test_near_miss_a_class_handed_to_ray_is_used_by_the_module():
    """open-instruct's grpo_fast.py: the learner is a Ray actor class whose methods build the
    optimizer and step it; ``ray.remote(PolicyTrainerRayProcess)`` builds it."""
    src = dedent('''
        import ray
        import torch
        from transformers import AutoModelForCausalLM


        class PolicyTrainerRayProcess:
            def from_pretrained(self, model_name_or_path: str):
                self.policy = AutoModelForCausalLM.from_pretrained(model_name_or_path)
                self.optimizer = torch.optim.AdamW(self.policy.parameters(), lr=1e-6)

            def train(self, batch):
                loss = self.policy(**batch).loss
                loss.backward()
                self.optimizer.step()


        def main(model_name_or_path: str = "allenai/Llama-3.1-Tulu-3-8B-DPO"):
            actor = ray.remote(num_gpus=1)(PolicyTrainerRayProcess).remote()
            ray.get(actor.from_pretrained.remote(model_name_or_path))


        if __name__ == "__main__":
            main()
    ''')
    assert len(facts_of(src, "open_instruct/grpo_fast.py")) == 1
