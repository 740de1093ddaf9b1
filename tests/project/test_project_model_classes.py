"""A training script whose model is loaded by a helper of the project as a project class
(FlagEmbedding's LLARA: ``get_model(model_args)`` in ``load_model.py`` calls
``PreLlamaModel.from_pretrained(model_args.model_name_or_path)``, ``class
PreLlamaModel(LlamaForCausalLM)`` living in ``modeling.py``): the class's library base makes the
call a model loader, so the README's ``--model_name_or_path`` is the run's model. The script
annotates its parsed options after unpacking them (``model_args: ModelArguments``), as
Transformers' examples do: a bare annotation binds nothing, the parser's value stands."""

from __future__ import annotations

from tests.facts.facts_testing import dedent
from tests.project.test_config_launchers import _project, _runs

RUN = dedent('''
    from transformers import HfArgumentParser, Trainer

    from arguments import ModelArguments, PretrainTrainingArguments as TrainingArguments
    from load_model import get_model


    def main():
        parser = HfArgumentParser((ModelArguments, TrainingArguments))
        model_args, training_args = parser.parse_args_into_dataclasses()
        model_args: ModelArguments
        training_args: TrainingArguments
        model = get_model(model_args, training_args.gradient_checkpointing)
        trainer = Trainer(model=model, args=training_args, train_dataset=build_dataset())
        trainer.train()


    if __name__ == "__main__":
        main()
''')

ARGUMENTS = dedent('''
    from dataclasses import dataclass, field

    from transformers import TrainingArguments


    @dataclass
    class ModelArguments:
        model_name_or_path: str = field(metadata={"help": "the checkpoint to start from"})
        use_lora: bool = field(default=False)


    @dataclass
    class PretrainTrainingArguments(TrainingArguments):
        cutoff_len: int = field(default=512, metadata={"help": "tokens kept of each passage"})
''')

LOAD_MODEL = dedent('''
    import torch

    from modeling import EmbeddingLlama


    def get_model(model_args, use_gradient_checkpointing: bool = False):
        model = EmbeddingLlama.from_pretrained(model_args.model_name_or_path, torch_dtype=torch.bfloat16)
        model.config.use_cache = False
        return model
''')

MODELING = dedent('''
    import torch
    from transformers import LlamaForCausalLM


    class EmbeddingLlama(LlamaForCausalLM):
        """The last token's hidden state as the text's embedding."""

        def forward(self, input_ids, attention_mask=None, **kwargs):
            hidden = self.model(input_ids, attention_mask=attention_mask).last_hidden_state
            return torch.nn.functional.normalize(hidden[:, -1], dim=-1)
''')

README = dedent('''
    # Embedding pre-training

    ```shell
    cd ./pretrain
    torchrun --nproc_per_node 8 \\
    run.py \\
    --output_dir ./output \\
    --model_name_or_path meta-llama/Llama-2-7b-hf \\
    --per_device_train_batch_size 4 \\
    --bf16
    ```
''')


def test_a_project_model_class_loaded_by_a_project_helper_is_the_run_model(tmp_path):
    settings = _project(tmp_path, {"pretrain/run.py": RUN, "pretrain/arguments.py": ARGUMENTS, "pretrain/load_model.py": LOAD_MODEL,
                                   "pretrain/modeling.py": MODELING, "README.md": README})
    [run] = _runs(settings, "pretrain/run.py")
    assert run.problem is None
    assert run.plan.value("model") == "meta-llama/Llama-2-7b-hf"
    assert run.plan.value("load_dtype") == "bf16"  # read in the helper, from the loader's torch_dtype


def test_options_annotated_after_unpacking_are_still_the_parsed_options(tmp_path):
    """Without the fix the annotation hid ``model_args``: the helper's ``model_args.model_name_or_path``
    was no option, and the README's model never reached the run."""
    bare = RUN.replace("    model_args: ModelArguments\n", "")
    for name, text in (("annotated", RUN), ("bare", bare)):
        settings = _project(tmp_path / name, {"pretrain/run.py": text, "pretrain/arguments.py": ARGUMENTS, "pretrain/load_model.py": LOAD_MODEL,
                                              "pretrain/modeling.py": MODELING, "README.md": README})
        [run] = _runs(settings, "pretrain/run.py")
        assert run.plan.value("model") == "meta-llama/Llama-2-7b-hf", name


def test_without_the_library_base_the_class_is_no_model_loader(tmp_path):
    plain = MODELING.replace("from transformers import LlamaForCausalLM\n", "").replace(
        "class EmbeddingLlama(LlamaForCausalLM):", "class EmbeddingLlama(torch.nn.Module):")
    settings = _project(tmp_path, {"pretrain/run.py": RUN, "pretrain/arguments.py": ARGUMENTS, "pretrain/load_model.py": LOAD_MODEL,
                                   "pretrain/modeling.py": plain, "README.md": README})
    [run] = _runs(settings, "pretrain/run.py")
    assert run.plan.value("load_dtype") is None  # its from_pretrained is the project's own


# the model class behind a package whose ``__init__`` is transformers' lazy module (mPLUG-Owl's
# ``mplug_owl/__init__.py``): ``_import_structure`` maps each submodule to the names it serves,
# the model classes added under ``is_torch_available()``, and nothing is imported eagerly
LAZY_INIT = dedent('''
    from typing import TYPE_CHECKING

    from transformers.utils import OptionalDependencyNotAvailable, _LazyModule, is_torch_available


    _import_structure = {
        "configuration_embedding": ["EmbeddingConfig"],
    }

    try:
        if not is_torch_available():
            raise OptionalDependencyNotAvailable()
    except OptionalDependencyNotAvailable:
        pass
    else:
        _import_structure["modeling_embedding"] = [
            "EMBEDDING_PRETRAINED_MODEL_ARCHIVE_LIST",
            "EmbeddingLlama",
        ]

    if not TYPE_CHECKING:
        import sys

        sys.modules[__name__] = _LazyModule(__name__, globals()["__file__"], _import_structure, module_spec=__spec__)
''')


def test_a_project_model_class_behind_a_lazy_package_init_is_followed(tmp_path):
    helper = LOAD_MODEL.replace("from modeling import EmbeddingLlama", "from embedding import EmbeddingLlama")
    settings = _project(tmp_path, {"pretrain/run.py": RUN, "pretrain/arguments.py": ARGUMENTS, "pretrain/load_model.py": helper,
                                   "pretrain/embedding/__init__.py": LAZY_INIT,
                                   "pretrain/embedding/modeling_embedding.py": MODELING, "README.md": README})
    [run] = _runs(settings, "pretrain/run.py")
    assert run.plan.value("model") == "meta-llama/Llama-2-7b-hf"
    assert run.plan.value("load_dtype") == "bf16"
    # a name the mapping does not list is not taken from any submodule
    unlisted = LAZY_INIT.replace('"EmbeddingLlama",', '"EmbeddingModel",')
    settings = _project(tmp_path / "unlisted", {"pretrain/run.py": RUN, "pretrain/arguments.py": ARGUMENTS,
                                                "pretrain/load_model.py": helper, "pretrain/embedding/__init__.py": unlisted,
                                                "pretrain/embedding/modeling_embedding.py": MODELING, "README.md": README})
    [run] = _runs(settings, "pretrain/run.py")
    assert run.plan.value("load_dtype") is None


# tevatron's examples/repllama: the script builds its model with a class method of a project class,
# `RepLLaMA.build(model_args, training_args)`, which loads LLaMA and applies a LoRA of its own
REPLLAMA = dedent('''
    from peft import LoraConfig, TaskType, get_peft_model
    from torch import nn
    from transformers import LlamaModel


    class RepLLaMA(nn.Module):
        def __init__(self, lm_q, lm_p):
            super().__init__()
            self.lm_q, self.lm_p = lm_q, lm_p

        @classmethod
        def build(cls, model_args, train_args, **hf_kwargs):
            base_model = LlamaModel.from_pretrained(model_args.model_name_or_path, **hf_kwargs)
            if train_args.gradient_checkpointing:
                base_model.enable_input_require_grads()
            peft_config = LoraConfig(task_type=TaskType.FEATURE_EXTRACTION, r=32, lora_alpha=64, lora_dropout=0.1,
                                     target_modules=["q_proj", "v_proj", "o_proj", "down_proj", "up_proj", "gate_proj"])
            hf_model = get_peft_model(base_model, peft_config)
            return cls(lm_q=hf_model, lm_p=hf_model)

        @classmethod
        def load(cls, model_name_or_path, **hf_kwargs):
            base_model = LlamaModel.from_pretrained(model_name_or_path, **hf_kwargs)
            return cls(lm_q=base_model, lm_p=base_model)
''')

REPLLAMA_TRAIN = dedent('''
    import torch
    from transformers import HfArgumentParser, Trainer, TrainingArguments

    from arguments import ModelArguments
    from repllama import RepLLaMA


    def main():
        parser = HfArgumentParser((ModelArguments, TrainingArguments))
        model_args, training_args = parser.parse_args_into_dataclasses()
        model = RepLLaMA.build(model_args, training_args, torch_dtype=torch.bfloat16)
        trainer = Trainer(model=model, args=training_args, train_dataset=load_msmarco())
        trainer.train()


    if __name__ == "__main__":
        main()
''')

REPLLAMA_README = dedent('''
    ```
    deepspeed --include localhost:0,1,2,3 train.py \\
      --model_name_or_path meta-llama/Llama-2-7b-hf \\
      --bf16 \\
      --per_device_train_batch_size 8 \\
      --gradient_checkpointing \\
      --output_dir model_repllama
    ```
''')


def test_a_class_method_that_builds_the_model_is_read_as_a_helper(tmp_path):
    arguments = ARGUMENTS.replace("    use_lora: bool = field(default=False)\n", "")
    settings = _project(tmp_path, {"repllama/train.py": REPLLAMA_TRAIN, "repllama/repllama.py": REPLLAMA,
                                   "repllama/arguments.py": arguments, "repllama/README.md": REPLLAMA_README})
    [run] = _runs(settings, "repllama/train.py")
    assert run.plan.value("model") == "meta-llama/Llama-2-7b-hf"
    assert run.plan.value("lora_r") == 32  # RepLLaMA.build's own LoRA, not the `load` method's plain model
    assert "down_proj" in run.plan.value("lora_targets")
