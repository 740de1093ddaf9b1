"""A switch of the project's arguments class that only its model code reads: LMFlow's
``--use_qlora 1`` is tested in ``src/lmflow/models/hf_model_mixin.py`` (``if
model_args.use_qlora:``, then 8-bit or 4-bit by ``quant_bit``), three modules below the script
that parses it. The launch that passes it trains a QLoRA adapter on 4-bit weights, not the
full model."""

from __future__ import annotations

from pathlib import Path

from memlint.facts.model_switches import switches
from memlint.lint.engine import run_context
from memlint.project.project import Project
from memlint.project.settings import Settings

from tests.facts.facts_testing import dedent, write

ARGS = dedent('''
    from dataclasses import dataclass, field
    from typing import Optional


    @dataclass
    class ModelArguments:
        model_name_or_path: Optional[str] = field(default=None, metadata={"help": "The model checkpoint."})
        use_lora: bool = field(default=False, metadata={"help": "Whether to lora."})
        lora_r: int = field(default=8, metadata={"help": "the rank of the lora parameters."})
        use_qlora: bool = field(default=False, metadata={"help": "Whether to use qlora."})
        quant_bit: int = field(default=4, metadata={"help": "The number of bits for quantization.",
                                                    "choices": [4, 8]})
        quant_type: str = field(default="nf4")
        double_quant: bool = field(default=True)


    @dataclass
    class DatasetArguments:
        dataset_path: Optional[str] = field(default=None)
        block_size: Optional[int] = field(default=None)
''')

MIXIN = dedent('''
    import logging

    import torch
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    from lmflow.args import ModelArguments

    logger = logging.getLogger(__name__)


    class HFModelMixin:
        def __init__(self, model_args: ModelArguments, do_train: bool):
            self.do_train = do_train
            self.quant_config = self.__prepare_quant_config(model_args)
            self.backend_model = AutoModelForCausalLM.from_pretrained(
                model_args.model_name_or_path, quantization_config=self.quant_config)

        def __prepare_quant_config(self, model_args: ModelArguments):
            quant_config = None
            if self.do_train:
                if model_args.use_qlora:
                    if model_args.quant_bit == 8:
                        quant_config_kwargs = {"load_in_8bit": True}
                    elif model_args.quant_bit == 4:
                        quant_config_kwargs = {
                            "load_in_4bit": True,
                            "bnb_4bit_compute_dtype": torch.bfloat16,
                            "bnb_4bit_use_double_quant": model_args.double_quant,
                            "bnb_4bit_quant_type": model_args.quant_type,
                        }
                    else:
                        raise ValueError("Qlora only supports 4-bit and 8-bit.")
                    quant_config = BitsAndBytesConfig(**quant_config_kwargs)
            return quant_config
''')

DECODER = dedent('''
    from lmflow.models.hf_model_mixin import HFModelMixin


    class HFDecoderModel(HFModelMixin):
        def __init__(self, model_args, do_train=True):
            HFModelMixin.__init__(self, model_args, do_train)
''')

AUTO_MODEL = dedent('''
    from lmflow.models.hf_decoder_model import HFDecoderModel


    class AutoModel:
        @classmethod
        def get_model(cls, model_args, *args, **kwargs):
            return HFDecoderModel(model_args, *args, **kwargs)
''')

FINETUNE = dedent('''
    import sys

    from transformers import HfArgumentParser, TrainingArguments

    from lmflow.args import DatasetArguments, ModelArguments
    from lmflow.models.auto_model import AutoModel


    def main():
        parser = HfArgumentParser((ModelArguments, DatasetArguments, TrainingArguments))
        model_args, data_args, training_args = parser.parse_args_into_dataclasses()
        model = AutoModel.get_model(model_args)
        model.train(data_args, training_args)


    if __name__ == "__main__":
        main()
''')

LAUNCH = dedent('''
    #!/bin/bash
    model_name_or_path=meta-llama/Llama-2-13b-hf
    deepspeed_args="--master_port=11000"

    deepspeed ${deepspeed_args} \\
      examples/finetune.py \\
        --model_name_or_path ${model_name_or_path} \\
        --dataset_path data/alpaca/train_conversation \\
        --output_dir output_models/finetune --overwrite_output_dir \\
        --block_size 512 \\
        --per_device_train_batch_size 1 \\
        {switch}
        --deepspeed configs/ds_config_zero2.json \\
        --fp16 \\
        --do_train
''')

ZERO2 = '{"zero_optimization": {"stage": 2}, "fp16": {"enabled": "auto"}, "train_micro_batch_size_per_gpu": "auto"}\n'


def _run(root: Path, switch: str):
    write(root, {"src/lmflow/__init__.py": "", "src/lmflow/args.py": ARGS,
                 "src/lmflow/models/__init__.py": "", "src/lmflow/models/hf_model_mixin.py": MIXIN,
                 "src/lmflow/models/hf_decoder_model.py": DECODER, "src/lmflow/models/auto_model.py": AUTO_MODEL,
                 "examples/finetune.py": FINETUNE, "configs/ds_config_zero2.json": ZERO2,
                 "scripts/run_finetune_with_qlora.sh": LAUNCH.replace("{switch}", switch)})
    (root / ".git").mkdir(exist_ok=True)
    settings = Settings(root=root).with_overrides(gpu="h100", gpus=8, cache=False)
    [run] = Project(settings).runs_for(root / "scripts/run_finetune_with_qlora.sh", run_context(settings))
    return run


def test_the_switch_the_model_code_tests_makes_a_qlora_run(tmp_path: Path):
    run = _run(tmp_path, "--use_qlora 1 \\")
    quantization = run.plan.get("quantization")
    assert quantization.value == "nf4"
    assert quantization.origin.path.endswith("run_finetune_with_qlora.sh")  # the launch's `1`
    assert "hf_model_mixin.py" in quantization.note
    assert run.setup.lora is not None and run.setup.lora.quantization == "nf4"


def test_the_inner_test_chooses_eight_bit(tmp_path: Path):
    run = _run(tmp_path, "--use_qlora 1 --quant_bit 8 \\")
    assert run.plan.get("quantization").value == "int8"


def test_without_the_switch_the_run_is_a_full_fine_tune(tmp_path: Path):
    for switch in ("\\", "--use_qlora 0 \\"):
        run = _run(tmp_path, switch)
        assert run.plan.get("quantization") is None
        assert run.setup.lora is None


def test_a_test_of_another_option_around_the_switch_is_no_switch():
    # ``if self.do_train:`` holds the switch's test but loads nothing itself
    found = switches([("hf_model_mixin.py", MIXIN)])
    assert {s.option for s in found} == {"use_qlora"}
    assert {s.quantization for s in found} == {"int8", "nf4"}


def test_a_module_that_builds_no_bitsandbytes_config_has_no_switch():
    text = dedent('''
        def load(model_args):
            kwargs = {}
            if model_args.use_flash_attention:
                kwargs["load_in_4bit"] = True  # a flag, no quantization config is built here
            return kwargs
    ''')
    assert switches([("loader.py", text)]) == []


def test_a_neighbour_script_finds_the_same_modules_with_the_same_reads(tmp_path: Path):
    """The project modules a script imports are looked for once per folder
    (``RunFinder._module_file``): the next script of that folder reaches the same switch and
    records the same probes (what its cached result depends on) as when it is linted alone."""
    from memlint.documents import reads

    _run(tmp_path, "--use_qlora 1 \\")
    launch = LAUNCH.replace("{switch}", "--use_qlora 1 \\").replace("examples/finetune.py", "examples/finetune_qlora.py")
    write(tmp_path, {"examples/finetune_qlora.py": FINETUNE, "scripts/run_qlora.sh": launch})
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False)

    def linted(project: Project, script: str) -> tuple:
        with reads.recording() as recorded:
            [run] = project.runs_for(tmp_path / script, run_context(settings))
        return run.plan.get("quantization").value, recorded.to_json()["probes"]

    alone = linted(Project(settings), "scripts/run_qlora.sh")
    project = Project(settings)
    linted(project, "scripts/run_finetune_with_qlora.sh")
    assert linted(project, "scripts/run_qlora.sh") == alone
    assert alone[0] == "nf4" and any(path.endswith("hf_model_mixin.py") for path in alone[1])


def test_model_code_that_several_scripts_import_is_parsed_once(monkeypatch):
    """Each script's switches are read from the modules it imports; the same module text (the
    mixin every entry point reaches) is parsed once, an edited one again."""
    import ast

    from memlint.facts import model_switches

    model_switches._switches_of.cache_clear()
    parsed: list[int] = []
    real_parse = ast.parse
    monkeypatch.setattr(ast, "parse", lambda text, *args, **kwargs: parsed.append(1) or real_parse(text, *args, **kwargs))
    first = switches([("src/lmflow/args.py", ARGS), ("src/lmflow/models/hf_model_mixin.py", MIXIN)])
    again = switches([("src/lmflow/models/hf_model_mixin.py", MIXIN)])
    assert first and first == again and len(parsed) == 1  # args.py names no BitsAndBytesConfig: never parsed
    edited = MIXIN.replace("if model_args.use_qlora:", "if model_args.use_qlora and do_train:")
    switches([("src/lmflow/models/hf_model_mixin.py", edited)])
    assert len(parsed) == 2
