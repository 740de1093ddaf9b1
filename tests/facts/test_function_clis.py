"""Function-based command lines: python-fire (alpaca-lora's ``fire.Fire(train)``), typer and click.
The exposed function's parameters are the options: a keyword default is the fact until a launch
command passes ``--<name>``; the same defaults in a function nothing exposes are no options."""

from __future__ import annotations

from pathlib import Path

from facts_testing import dedent, one, span, where, write

from memlint.facts.launch_options import facts_from_cli
from memlint.lint.engine import Linter
from memlint.project.settings import Settings

# alpaca-lora's finetune.py, trimmed to what states the run
FINETUNE = dedent('''
    import os
    import sys
    from typing import List

    import fire
    import torch
    import transformers
    from datasets import load_dataset
    from peft import LoraConfig, get_peft_model, prepare_model_for_int8_training
    from transformers import LlamaForCausalLM, LlamaTokenizer


    def train(
        # model/data params
        base_model: str = "",  # the only required argument
        data_path: str = "yahma/alpaca-cleaned",
        output_dir: str = "./lora-alpaca",
        # training hyperparams
        batch_size: int = 128,
        micro_batch_size: int = 4,
        num_epochs: int = 3,
        learning_rate: float = 3e-4,
        cutoff_len: int = 256,
        # lora hyperparams
        lora_r: int = 8,
        lora_alpha: int = 16,
        lora_dropout: float = 0.05,
        lora_target_modules: List[str] = [
            "q_proj",
            "v_proj",
        ],
    ):
        gradient_accumulation_steps = batch_size // micro_batch_size
        model = LlamaForCausalLM.from_pretrained(
            base_model,
            load_in_8bit=True,
            torch_dtype=torch.float16,
            device_map="auto",
        )
        tokenizer = LlamaTokenizer.from_pretrained(base_model)

        def tokenize(prompt):
            return tokenizer(prompt, truncation=True, max_length=cutoff_len, padding=False)

        model = prepare_model_for_int8_training(model)
        config = LoraConfig(
            r=lora_r,
            lora_alpha=lora_alpha,
            target_modules=lora_target_modules,
            lora_dropout=lora_dropout,
            bias="none",
            task_type="CAUSAL_LM",
        )
        model = get_peft_model(model, config)
        data = load_dataset(data_path)
        trainer = transformers.Trainer(
            model=model,
            train_dataset=data["train"].map(tokenize),
            args=transformers.TrainingArguments(
                per_device_train_batch_size=micro_batch_size,
                gradient_accumulation_steps=gradient_accumulation_steps,
                num_train_epochs=num_epochs,
                learning_rate=learning_rate,
                fp16=True,
                output_dir=output_dir,
            ),
        )
        trainer.train()


    if __name__ == "__main__":
        fire.Fire(train)
''')


def _applied(script_src: str, command: str, path: str = "finetune.py") -> dict:
    script = one(script_src, path)
    launcher = one(command, "run.sh")
    return {name: fact.value for name, fact in facts_from_cli(script, launcher).items()}


def test_fire_exposes_the_keyword_defaults_as_options():
    script = one(FINETUNE, "finetune.py")
    assert script.micro_batch.value == 4
    assert where(script.micro_batch) == span(FINETUNE, "micro_batch_size: int = «4»")
    assert script.lora_r.value == 8
    assert "hf:per_device_train_batch_size" in script.cli_bindings["micro_batch_size"]
    assert script.cli_bindings["base_model"] == ("model",)
    launched = _applied(FINETUNE, dedent('''
        python finetune.py \\
            --base_model 'huggyllama/llama-7b' \\
            --micro_batch_size=8 \\
            --lora_r 16
    '''))
    assert launched["model"] == "huggyllama/llama-7b"
    assert launched["micro_batch"] == 8
    assert launched["lora_r"] == 16


def test_the_same_defaults_without_fire_are_no_options():
    plain = FINETUNE.replace("import fire\n", "").replace("fire.Fire(train)", "train()")
    script = one(plain, "finetune.py")
    assert script.micro_batch.value == 4  # the default still states the run
    assert "micro_batch_size" not in script.cli_bindings and "base_model" not in script.cli_bindings


def test_a_function_fire_does_not_expose_keeps_its_call_sites():
    # fire.Fire(main) exposes main; train's parameters come from main's call
    script_src = dedent('''
        import fire
        import torch
        from torch.utils.data import DataLoader
        from transformers import AutoModelForCausalLM


        def train(model_name, batch_size=8):
            model = AutoModelForCausalLM.from_pretrained(model_name)
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
            for batch in DataLoader(dataset, batch_size=batch_size):
                model(**batch).loss.backward()
                optimizer.step()


        def main(model: str = "Qwen/Qwen2.5-0.5B", micro_batch: int = 2):
            train(model, batch_size=micro_batch)


        if __name__ == "__main__":
            fire.Fire(main)
    ''')
    script = one(script_src)
    assert script.micro_batch.value == 2
    assert script.model.value == "Qwen/Qwen2.5-0.5B"
    assert "batch_size" not in script.cli_bindings
    assert _applied(script_src, "python train.py --micro-batch 16 --model gpt2\n", "train.py") == \
        {"micro_batch": 16, "model": "gpt2"}


def test_typer_and_click_options():
    typer_src = dedent('''
        import torch
        import typer
        from torch.utils.data import DataLoader
        from transformers import AutoModelForCausalLM

        app = typer.Typer()


        @app.command()
        def main(model_id: str = "Qwen/Qwen2.5-0.5B", batch_size: int = typer.Option(4, help="per GPU")):
            model = AutoModelForCausalLM.from_pretrained(model_id)
            optimizer = torch.optim.AdamW(model.parameters())
            for batch in DataLoader(dataset, batch_size=batch_size):
                model(**batch).loss.backward()
                optimizer.step()


        if __name__ == "__main__":
            app()
    ''')
    script = one(typer_src)
    assert script.micro_batch.value == 4 and script.model.value == "Qwen/Qwen2.5-0.5B"
    assert _applied(typer_src, "python train.py --batch-size 32\n", "train.py") == {"micro_batch": 32}

    click_src = dedent('''
        import click
        import torch
        from torch.utils.data import DataLoader
        from transformers import AutoModelForCausalLM


        @click.command()
        @click.option("--model", "model_id", default="Qwen/Qwen2.5-0.5B")
        @click.option("-b", "--batch-size", default=4, type=int)
        def main(model_id, batch_size):
            model = AutoModelForCausalLM.from_pretrained(model_id)
            optimizer = torch.optim.AdamW(model.parameters())
            for batch in DataLoader(dataset, batch_size=batch_size):
                model(**batch).loss.backward()
                optimizer.step()


        if __name__ == "__main__":
            main()
    ''')
    script = one(click_src)
    assert script.micro_batch.value == 4 and script.model.value == "Qwen/Qwen2.5-0.5B"
    assert _applied(click_src, "python train.py -b 32 --model gpt2\n", "train.py") == \
        {"micro_batch": 32, "model": "gpt2"}


def test_the_readme_command_of_a_fire_script_is_judged(tmp_path: Path):
    readme = dedent('''
        # Alpaca-LoRA

        ## Training (`finetune.py`)

        ```bash
        python finetune.py \\
            --base_model 'huggyllama/llama-7b' \\
            --data_path 'yahma/alpaca-cleaned' \\
            --output_dir './lora-alpaca' \\
            --micro_batch_size 64 \\
            --cutoff_len 512
        ```
    ''')
    write(tmp_path, {"finetune.py": FINETUNE, "README.md": readme})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="t4", cache=False)
    found = [d for d in Linter(settings).lint_path(tmp_path / "README.md") if d.code.startswith("MEM")]
    [finding] = found
    assert finding.code == "MEM001"
    # 8-bit LLaMA-7B, checkpointed by prepare_model_for_int8_training: micro-batch 64 is what breaks a T4
    assert (finding.range.start.line, finding.range.start.column) == span(readme, "--micro_batch_size «64»")[:2]


# ChatGLM3's finetune_demo/finetune_hf.py, trimmed: typer arguments read by position
TYPER_ARGUMENTS = dedent('''
    from typing import Annotated

    import typer
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, Seq2SeqTrainer, Seq2SeqTrainingArguments

    app = typer.Typer(pretty_exceptions_show_locals=False)


    def load_tokenizer_and_model(model_dir: str, peft_config=None):
        model = AutoModelForCausalLM.from_pretrained(model_dir, trust_remote_code=True)
        if peft_config is not None:
            model = get_peft_model(model, peft_config)
        return model


    @app.command()
    def main(
            data_dir: Annotated[str, typer.Argument(help='')],
            model_dir: Annotated[str, typer.Argument(help='a Hub id or a local folder')],
            config_file: Annotated[str, typer.Argument(help='')],
            auto_resume_from_checkpoint: str = typer.Argument(default=''),
            per_device_batch: int = typer.Option(4),
    ):
        model = load_tokenizer_and_model(model_dir, peft_config=LoraConfig(r=8))
        trainer = Seq2SeqTrainer(model=model, args=Seq2SeqTrainingArguments(
            output_dir="out", per_device_train_batch_size=per_device_batch))
        trainer.train()


    if __name__ == '__main__':
        app()
''')


def test_typer_arguments_are_bound_by_their_place_on_the_command_line():
    script = one(TYPER_ARGUMENTS, "finetune_hf.py")
    assert "#2" in script.cli_bindings and script.cli_bindings["#2"] == script.cli_bindings["model_dir"]
    assert "#5" not in script.cli_bindings  # a typer.Option is read by name only
    command = "python finetune_hf.py data/AdvertiseGen/ THUDM/chatglm3-6b configs/lora.yaml yes --per-device-batch 2\n"
    assert _applied(TYPER_ARGUMENTS, command, "finetune_hf.py") == {"model": "THUDM/chatglm3-6b", "micro_batch": 2}


def test_near_miss_words_after_an_option_and_fire_parameters_by_place():
    # after the first option the words are that option's values, not positional arguments
    command = "python finetune_hf.py --per-device-batch 2 data/AdvertiseGen/ THUDM/chatglm3-6b configs/lora.yaml\n"
    assert "model" not in _applied(TYPER_ARGUMENTS, command, "finetune_hf.py")
    # fire reads every parameter by place too: alpaca-lora's train(base_model, data_path, ...)
    assert _applied(FINETUNE, "python finetune.py huggyllama/llama-7b yahma/alpaca-cleaned\n") == \
        {"model": "huggyllama/llama-7b"}


def test_a_readme_block_labelled_with_another_language_still_launches(tmp_path: Path):
    readme = dedent('''
        ## 多卡微调

        ```angular2html
        OMP_NUM_THREADS=1 torchrun --standalone --nnodes=1 --nproc_per_node=8  finetune_hf.py  data/AdvertiseGen/  THUDM/chatglm3-6b  configs/lora.yaml
        ```

        ```python
        python finetune_hf.py data/AdvertiseGen/ gpt2 configs/lora.yaml
        ```
    ''')
    lora_yaml = dedent('''
        data_config:
          train_file: train.json
          num_proc: 16
        max_input_length: 256
        max_output_length: 512
        training_args:
          output_dir: ./output
          max_steps: 3000
          learning_rate: 5e-5
          per_device_train_batch_size: 4
        peft_config:
          peft_type: LORA
          task_type: CAUSAL_LM
          r: 8
    ''')
    write(tmp_path, {"finetune_hf.py": TYPER_ARGUMENTS, "README.md": readme, "configs/lora.yaml": lora_yaml})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", cache=False, offline=True)
    [note] = [d for d in Linter(settings).lint_path(tmp_path / "finetune_hf.py") if d.code == "MEM003"]
    assert "unknown model 'THUDM/chatglm3-6b'" in note.message and "README.md:4" in note.message


# openvla's vla-scripts/finetune.py, trimmed: draccus parses the command line into the config
# dataclass the wrapped function takes
DRACCUS = dedent('''
    from dataclasses import dataclass
    from pathlib import Path

    import draccus
    import torch
    from peft import LoraConfig, get_peft_model
    from torch.optim import AdamW
    from transformers import AutoModelForVision2Seq


    @dataclass
    class FinetuneConfig:
        vla_path: str = "Qwen/Qwen2.5-7B-Instruct"
        run_root_dir: Path = Path("runs")
        batch_size: int = 16
        learning_rate: float = 5e-4
        use_lora: bool = True
        lora_rank: int = 32


    @draccus.wrap()
    def finetune(cfg: FinetuneConfig) -> None:
        vla = AutoModelForVision2Seq.from_pretrained(cfg.vla_path, torch_dtype=torch.bfloat16)
        if cfg.use_lora:
            vla = get_peft_model(vla, LoraConfig(r=cfg.lora_rank, target_modules="all-linear"))
        optimizer = AdamW([p for p in vla.parameters() if p.requires_grad], lr=cfg.learning_rate)
        for batch in make_loader(cfg.batch_size):
            loss = vla(**batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()


    if __name__ == "__main__":
        finetune()
''')


def test_a_draccus_config_dataclass_is_the_command_line():
    script = one(DRACCUS, "finetune.py")
    assert script.model.value == "Qwen/Qwen2.5-7B-Instruct"
    assert where(script.model) == span(DRACCUS, 'vla_path: str = «"Qwen/Qwen2.5-7B-Instruct"»')
    assert script.lora_r.value == 32
    launched = _applied(DRACCUS, "torchrun --nproc-per-node 8 finetune.py --vla_path Qwen/Qwen2.5-3B --lora_rank 16\n")
    assert launched["model"] == "Qwen/Qwen2.5-3B" and launched["lora_r"] == 16


def test_tyro_and_pyrallis_build_the_config_from_the_command_line():
    tyro = DRACCUS.replace("import draccus", "import tyro").replace("@draccus.wrap()\n", "").replace(
        "    finetune()", "    finetune(tyro.cli(FinetuneConfig))")
    assert one(tyro, "finetune.py").model.value == "Qwen/Qwen2.5-7B-Instruct"
    assert _applied(tyro, "python finetune.py --vla_path Qwen/Qwen2.5-3B\n")["model"] == "Qwen/Qwen2.5-3B"
    pyrallis = DRACCUS.replace("import draccus", "import pyrallis").replace("@draccus.wrap()", "@pyrallis.wrap()")
    assert _applied(pyrallis, "python finetune.py --vla_path Qwen/Qwen2.5-3B\n")["model"] == "Qwen/Qwen2.5-3B"


def test_a_config_dataclass_nothing_parses_is_no_command_line():
    plain = DRACCUS.replace("@draccus.wrap()\n", "").replace("    finetune()", "    finetune(FinetuneConfig())")
    assert "vla_path" not in one(plain, "finetune.py").cli_bindings
