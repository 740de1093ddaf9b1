"""Launch commands in a project's Markdown (alignment-handbook's recipe READMEs): a command in a
shell code block that starts a training script of the project is a run, with its launcher's
config and the recipe it names. Prose, Python blocks, installs, other repositories' scripts and
patterns such as ``config_{a,b}.yaml`` are not; a README run memlint cannot estimate is no news."""

from __future__ import annotations

from pathlib import Path

from facts_testing import dedent, facts_of, span, where, write

from memlint.facts.markdown import shell_blocks
from memlint.lint.engine import Linter, run_context
from memlint.project.project import Project
from memlint.project.settings import Settings

# scripts/sft.py as alignment-handbook writes it, trimmed: the model comes from the recipe
SFT = dedent('''
    """Supervised fine-tuning script for decoder language models."""
    import sys

    from alignment import ScriptArguments, SFTConfig, get_dataset, get_model, get_tokenizer
    from trl import ModelConfig, SFTTrainer, TrlParser, get_peft_config


    def main(script_args, training_args, model_args):
        dataset = get_dataset(script_args)
        tokenizer = get_tokenizer(model_args, training_args)
        model = get_model(model_args, training_args)
        trainer = SFTTrainer(
            model=model,
            args=training_args,
            train_dataset=dataset[script_args.dataset_train_split],
            processing_class=tokenizer,
            peft_config=get_peft_config(model_args),
        )
        trainer.train()


    if __name__ == "__main__":
        parser = TrlParser((ScriptArguments, SFTConfig, ModelConfig))
        script_args, training_args, model_args = parser.parse_args_and_config()
        main(script_args, training_args, model_args)
''')

ZERO3 = dedent('''
    compute_environment: LOCAL_MACHINE
    debug: false
    deepspeed_config:
      deepspeed_multinode_launcher: standard
      offload_optimizer_device: none
      offload_param_device: none
      zero3_init_flag: true
      zero3_save_16bit_model: true
      zero_stage: 3
    distributed_type: DEEPSPEED
    downcast_bf16: 'no'
    machine_rank: 0
    main_training_function: main
    mixed_precision: bf16
    num_machines: 1
    num_processes: 8
    rdzv_backend: static
    same_network: true
    use_cpu: false
''')

# recipes/zephyr-7b-gemma/sft/config_full.yaml, trimmed: alone (one GPU, no ZeRO) it does not fit an H100
RECIPE = dedent('''
    # Model arguments
    model_name_or_path: google/gemma-7b
    model_revision: main
    torch_dtype: bfloat16
    attn_implementation: flash_attention_2

    # SFT trainer config
    bf16: true
    do_eval: true
    eval_strategy: epoch
    gradient_accumulation_steps: 4
    gradient_checkpointing: true
    gradient_checkpointing_kwargs:
      use_reentrant: false
    learning_rate: 2.0e-05
    lr_scheduler_type: cosine
    max_length: 2048
    num_train_epochs: 3
    output_dir: data/zephyr-7b-gemma-sft
    per_device_train_batch_size: 4
    save_strategy: "no"
''')

README = dedent('''
    # Instructions to Replicate Zephyr 7B Gemma

    You will require 8 GPUs (80GB of VRAM) to train the full model. Install first:

    ```bash
    python -m pip install .
    python setup.py develop
    ```

    ## Full training examples

    ```shell
    # Step 1 - SFT
    ACCELERATE_LOG_LEVEL=info accelerate launch --config_file recipes/accelerate_configs/zero3.yaml scripts/sft.py --config recipes/zephyr-7b-gemma/sft/config_full.yaml
    ```

    In Python, the trainer is `SFTTrainer`; prose that says python scripts/sft.py is not a command:

    ```python
    import subprocess
    subprocess.run(["python", "scripts/sft.py"])
    ```

    For the other recipes, pass `--config recipes/<name>/sft/config_{full,qlora}.yaml`:

    ```shell
    accelerate launch --config_file recipes/accelerate_configs/zero3.yaml scripts/sft.py --config recipes/zephyr-7b-gemma/sft/config_{full,qlora}.yaml
    ```
''')

FILES = {
    "scripts/sft.py": SFT,
    "recipes/accelerate_configs/zero3.yaml": ZERO3,
    "recipes/zephyr-7b-gemma/sft/config_full.yaml": RECIPE,
    "recipes/zephyr-7b-gemma/README.md": README,
    "setup.py": "from setuptools import find_packages, setup\n\nsetup(name='alignment-handbook', packages=find_packages('src'))\n",
}


def _project(root: Path, files: dict[str, str]) -> Settings:
    write(root, files)
    (root / ".git").mkdir(exist_ok=True)
    return Settings(root=root).with_overrides(gpu="h100", cache=False)


def _memory(settings: Settings, name: str):
    return [d for d in Linter(settings).lint_path(settings.root / name) if d.code.startswith("MEM")]


def test_commands_in_shell_blocks_are_launches_and_the_rest_is_not():
    facts = facts_of(README, "recipes/zephyr-7b-gemma/README.md")
    launched = [f.launches.value for f in facts]
    # pip (as a module) and setup.py are read as launches here; the project keeps only a script that trains
    assert launched == ["pip.py", "setup.py", "scripts/sft.py", "scripts/sft.py"]
    sft = facts[2]
    assert sft.kind == "shell"
    assert where(sft.launches) == span(README, "zero3.yaml «scripts/sft.py» --config recipes/zephyr-7b-gemma/sft/config_full")
    assert [r.value for r in sft.references] == [
        "recipes/accelerate_configs/zero3.yaml", "recipes/zephyr-7b-gemma/sft/config_full.yaml"]
    assert "a command in a code block" in sft.launches.note


def test_fences_close_on_the_same_character_and_length():
    text = "````bash\npython a.py\n```\nstill code\n````\n~~~\ntorchrun b.py\n~~~\n```yaml\nx: 1\n```\n"
    bodies = [text[s:e] for s, e in shell_blocks(text)]
    assert bodies == ["python a.py\n```\nstill code\n", "torchrun b.py\n"]
    assert shell_blocks("Use ```python train.py``` inline.\n") == []


def test_a_manual_of_thousands_of_code_blocks_is_read_once(monkeypatch):
    """A RouterOS manual scraped into one 3.4 MB Markdown file (14,549 code blocks, in
    vivek-dodia/Deepseek-R1-8B-MikroTik-Distilled) took ten minutes: each block blanked the whole
    document again. The blanking now covers each character once; the launches found are the same."""
    import memlint.facts.launchers as launchers
    import memlint.facts.markdown as markdown

    block = "```\n/ip address add address=192.168.88.1/24 interface=ether2\n```\n\nSome prose.\n\n"
    text = README + block * 2000
    blanked_chars = 0
    real = launchers.blanked

    def counting(part: str) -> str:
        nonlocal blanked_chars
        blanked_chars += len(part)
        return real(part)

    monkeypatch.setattr(markdown, "blanked", counting)
    monkeypatch.setattr(launchers, "blanked", counting)
    facts = facts_of(text, "docs/manual.md")
    assert blanked_chars <= len(text)
    assert [f.launches.value for f in facts] == [f.launches.value for f in facts_of(README, "docs/manual.md")]


def test_the_readme_launch_is_how_the_recipe_runs(tmp_path: Path):
    settings = _project(tmp_path, FILES)
    project = Project(settings)
    [run] = project.runs_for(tmp_path / "recipes/zephyr-7b-gemma/sft/config_full.yaml", run_context(settings))
    assert Path(run.plan.entry).name == "README.md"
    assert run.plan.value("world_size") == 8
    assert run.plan.value("zero_stage") == 3
    assert run.plan.value("model") == "google/gemma-7b"
    assert run.plan.value("micro_batch") == 4
    # the recipe's own run, judged alone, no longer speaks for it: eight GPUs with ZeRO-3 fit
    assert _memory(settings, "recipes/zephyr-7b-gemma/sft/config_full.yaml") == []
    assert _memory(settings, "recipes/zephyr-7b-gemma/README.md") == []


def test_without_the_readme_the_recipe_is_judged_alone(tmp_path: Path):
    files = {k: v for k, v in FILES.items() if not k.endswith("README.md")}
    settings = _project(tmp_path, files)
    [finding] = _memory(settings, "recipes/zephyr-7b-gemma/sft/config_full.yaml")
    assert finding.code == "MEM001"  # one GPU, no ZeRO: what the README's command says otherwise


def test_a_readme_command_for_a_missing_script_or_config_is_no_run(tmp_path: Path):
    readme = dedent('''
        ```bash
        accelerate launch --config_file recipes/accelerate_configs/zero3.yaml examples/other_repo/train.py --config recipes/zephyr-7b-gemma/sft/config_full.yaml
        accelerate launch --config_file recipes/accelerate_configs/zero3.yaml scripts/sft.py --config recipes/zephyr-7b-gemma/sft/config_qlora.yaml
        ```
    ''')
    settings = _project(tmp_path, {**FILES, "recipes/zephyr-7b-gemma/README.md": readme})
    project = Project(settings)
    assert project.runs_for(tmp_path / "recipes/zephyr-7b-gemma/README.md", run_context(settings)) == []
    assert _memory(settings, "recipes/zephyr-7b-gemma/README.md") == []


def test_readme_runs_that_cannot_be_estimated_leave_the_script_its_own_note(tmp_path: Path):
    # Accelerate's examples/README.md shows cv_example.py run eight ways; its model is built by timm
    script = dedent('''
        import argparse

        import torch
        from accelerate import Accelerator
        from timm import create_model


        def training_function(args):
            accelerator = Accelerator(cpu=args.cpu, mixed_precision=args.mixed_precision)
            model = create_model("resnet50d", pretrained=True, num_classes=37)
            optimizer = torch.optim.Adam(params=model.parameters(), lr=3e-2 / 25)
            model, optimizer = accelerator.prepare(model, optimizer)
            model.train()
            for batch in range(10):
                loss = model(torch.randn(8, 3, 224, 224)).sum()
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()


        if __name__ == "__main__":
            parser = argparse.ArgumentParser()
            parser.add_argument("--mixed_precision", type=str, default=None)
            parser.add_argument("--cpu", action="store_true")
            parser.add_argument("--data_dir", type=str)
            training_function(parser.parse_args())
    ''')
    readme = dedent('''
        - single CPU:
            ```bash
            python ./cv_example.py --data_dir path_to_data --cpu
            ```
        - multi GPUs:
            ```bash
            accelerate launch --mixed_precision fp16 ./cv_example.py --data_dir path_to_data
            torchrun --nproc_per_node 2 ./cv_example.py --data_dir path_to_data
            ```
    ''')
    settings = _project(tmp_path, {"examples/cv_example.py": script, "examples/README.md": readme})
    assert _memory(settings, "examples/README.md") == []
    [note] = _memory(settings, "examples/cv_example.py")
    assert note.code == "MEM003" and "timm image model" in note.message and "create_model" in note.message


# DeepSeek-Coder's finetune/README.md, trimmed: the block sets the variables its command reads
DEEPSEEK_README = '''\
After data preparation, you can use the sample shell script to finetune `deepseek-ai/deepseek-coder-6.7b-instruct`.

```bash
DATA_PATH="<your_data_path>"
OUTPUT_PATH="<your_output_path>"
MODEL_PATH="deepseek-ai/deepseek-coder-6.7b-instruct"

deepspeed finetune_deepseekcoder.py \\
    --model_name_or_path $MODEL_PATH \\
    --data_path $DATA_PATH \\
    --output_dir $OUTPUT_PATH \\
    --model_max_length 1024 \\
    --per_device_train_batch_size 16 \\
    --gradient_checkpointing True \\
    --deepspeed configs/ds_config_zero3.json \\
    --bf16 True
```

Set `MODEL_PATH=/path/to/your/checkpoint` to start from your own weights.
'''


def test_a_readme_command_reads_the_variables_its_block_sets():
    [facts] = facts_of(DEEPSEEK_README, "finetune/README.md")
    assert facts.cli_args["model_name_or_path"].value == "deepseek-ai/deepseek-coder-6.7b-instruct"
    assert facts.cli_args["per_device_train_batch_size"].value == "16"
    # a variable named in prose, outside the block, sets nothing
    prose = DEEPSEEK_README.replace('MODEL_PATH="deepseek-ai/deepseek-coder-6.7b-instruct"\n', "")
    [facts] = facts_of(prose, "finetune/README.md")
    assert "model_name_or_path" not in facts.cli_args
