"""A README's shell block runs where its ``cd`` moved (Online-RLHF: ```cd sft`` then ``torchrun
... -m axolotl.cli.train llama3-8b-it.yaml``), and a framework's module run on a config of the
project (``-m axolotl.cli.train CONFIG``, through torchrun, ``accelerate launch`` or ``python``)
launches that config. A ``cd`` ends with its block, unless the next block repeats its command."""

from __future__ import annotations

from pathlib import Path

from facts_testing import dedent, facts_of, write

from memlint.lint.engine import run_context
from memlint.project.project import Project
from memlint.project.settings import Settings

# Online-RLHF README.md, "Step 1 Supervised Fine-tuning" (abridged)
README = dedent('''
    ### Step 1 Supervised Fine-tuning

    ```sh
    cd sft
    torchrun --nproc_per_node 8 --master_port 20001 -m axolotl.cli.train llama3-8b-it.yaml
    ```

    If you encounter out-of-memory issue, run it with deepspeed stage 3:

    ```sh
    torchrun --nproc_per_node 8 --master_port 20001 -m axolotl.cli.train llama3-8b-it.yaml --deepspeed ../configs/deepspeed_stage3.json
    ```

    ### Step 3 Data Generation

    ```sh
    python ./generation/gen_hf2.py --model_name_or_path RLHFlow/LLaMA3-SFT --output_dir ./data/gen_data
    ```
''')

AXOLOTL = dedent('''
    base_model: meta-llama/Meta-Llama-3-8B
    model_type: AutoModelForCausalLM
    tokenizer_type: AutoTokenizer
    datasets:
      - path: RLHFlow/RLHFlow-SFT-Dataset-ver2
        type: sharegpt
    sequence_len: 8192
    sample_packing: true
    pad_to_sequence_len: true
    gradient_checkpointing: true
    gradient_accumulation_steps: 16
    micro_batch_size: 1
    num_epochs: 3
    optimizer: adamw_torch
    learning_rate: 2.0e-5
    bf16: auto
    flash_attention: true
    output_dir: ./out
    deepspeed: #deepspeed/zero1.json # multi-gpu only
    fsdp:
    fsdp_config:
''')

STAGE3 = '{"zero_optimization": {"stage": 3}, "bf16": {"enabled": "auto"}, ' \
         '"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto"}\n'


def test_a_cd_moves_the_commands_of_its_block_and_a_repeated_command_of_the_next():
    first, second, generation = facts_of(README, "README.md")
    assert [r.value for r in first.references] == ["sft/llama3-8b-it.yaml"]
    assert [r.value for r in second.references] == ["sft/llama3-8b-it.yaml", "configs/deepspeed_stage3.json"]
    assert generation.launches.value == "./generation/gen_hf2.py"  # another block, another command: from the root


def test_a_cd_ends_with_its_block():
    readme = dedent('''
        ```
        cd path_to_saving_checkpoints && python zero_to_fp32.py . pytorch_model.bin
        ```

        ```
        torchrun --nproc_per_node=8 supervised-fine-tune.py --model_name_or_path meta-llama/Llama-2-7b-hf
        ```
    ''')
    first, second = facts_of(readme, "README.md")
    assert first.launches.value == "path_to_saving_checkpoints/zero_to_fp32.py"
    assert second.launches.value == "supervised-fine-tune.py"


def _project(tmp_path: Path, readme: str = README) -> Settings:
    write(tmp_path, {"README.md": readme, "sft/llama3-8b-it.yaml": AXOLOTL, "configs/deepspeed_stage3.json": STAGE3,
                     "generation/gen_hf2.py": "import vllm\n"})
    (tmp_path / ".git").mkdir(exist_ok=True)
    return Settings(root=tmp_path).with_overrides(gpu="h100", cache=False)


def test_an_axolotl_module_run_on_the_config_launches_it(tmp_path: Path):
    settings = _project(tmp_path)
    runs = Project(settings).runs_for(tmp_path / "sft/llama3-8b-it.yaml", run_context(settings))
    assert [r.plan.value("world_size") for r in runs] == [8, 8]
    assert [r.plan.value("zero_stage") for r in runs] == [None, 3]


def test_every_launcher_form_of_the_axolotl_module(tmp_path: Path):
    for number, launch in enumerate(("accelerate launch --num_processes 8 -m axolotl.cli.train sft/llama3-8b-it.yaml",
                   "python -m axolotl.cli.train sft/llama3-8b-it.yaml",
                   "python3 -m torch.distributed.run --nproc_per_node 8 -m axolotl.cli.train sft/llama3-8b-it.yaml")):
        root = tmp_path / str(number)
        settings = _project(root, f"```bash\n{launch}\n```\n")
        [run] = Project(settings).runs_for(root / "sft/llama3-8b-it.yaml", run_context(settings))
        assert Path(run.plan.entry).name == "README.md", launch


def test_a_module_run_on_a_missing_config_is_no_launch(tmp_path: Path):
    settings = _project(tmp_path, "```bash\ncd sft\ntorchrun --nproc_per_node 8 -m axolotl.cli.train other.yaml\n```\n")
    runs = Project(settings).runs_for(tmp_path / "sft/llama3-8b-it.yaml", run_context(settings))
    assert all(Path(r.plan.entry).name != "README.md" for r in runs)


def test_two_documented_forms_of_one_config_are_judged_as_launched(tmp_path: Path):
    from memlint.lint.engine import Linter
    from memlint.model.diagnostics import Severity

    settings = _project(tmp_path)
    settings = settings.with_overrides(gpus=8)
    [finding] = [d for d in Linter(settings).lint_path(tmp_path / "sft/llama3-8b-it.yaml") if d.code.startswith("MEM")]
    assert finding.code == "MEM001" and finding.severity == Severity.WARNING
    assert "under plain data parallelism, as the launch at README.md:5 runs it" in finding.message
    assert "the launch at README.md:11 (ZeRO-3) fits" in finding.message
    assert "which no file states" not in finding.message


def test_one_documented_form_names_no_other_launch(tmp_path: Path):
    from memlint.lint.engine import Linter

    readme = README.split("If you encounter")[0]
    settings = _project(tmp_path, readme).with_overrides(gpus=8)
    [finding] = [d for d in Linter(settings).lint_path(tmp_path / "sft/llama3-8b-it.yaml") if d.code.startswith("MEM")]
    assert "fits (" not in finding.message.split(";")[0] and "the launch at" not in finding.message
