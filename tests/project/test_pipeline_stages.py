"""A stage that trains the checkpoint an earlier stage of the same launcher writes (SFT then DPO,
progressive context extension: EasyContext's ``--output-dir ./output/7B_32K_...`` then ``--model
output/7B_32K_...``). The later stage's model path is no Hub id and no folder of the project: it
is the earlier launch's ``--output_dir``, so it has the earlier stage's architecture."""

from __future__ import annotations

from pathlib import Path

from memlint.catalog.models import resolve as resolve_model
from memlint.lint.engine import Linter, run_context
from memlint.project.project import Project
from memlint.project.settings import Settings

from tests.facts.facts_testing import dedent, write
from tests.project.test_adapter_switch import TRAIN_PY

# the SFT stage: an HfArgumentParser script whose `--lora_enable` switch wraps the model in a LoRA adapter
SFT_PY = TRAIN_PY

DPO_PY = dedent('''
    from dataclasses import dataclass, field

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, HfArgumentParser
    from trl import DPOConfig, DPOTrainer
    from datasets import load_dataset


    @dataclass
    class ScriptArguments:
        model_name_or_path: str = field(default=None, metadata={"help": "the SFT checkpoint"})
        dataset_name: str = "trl-lib/ultrafeedback_binarized"


    def main():
        parser = HfArgumentParser((ScriptArguments, DPOConfig))
        script_args, training_args = parser.parse_args_into_dataclasses()
        model = AutoModelForCausalLM.from_pretrained(script_args.model_name_or_path, torch_dtype=torch.bfloat16)
        tokenizer = AutoTokenizer.from_pretrained(script_args.model_name_or_path)
        dataset = load_dataset(script_args.dataset_name, split="train")
        trainer = DPOTrainer(model=model, args=training_args, train_dataset=dataset, processing_class=tokenizer)
        trainer.train()


    if __name__ == "__main__":
        main()
''')

PIPELINE_SH = dedent('''
    #!/bin/bash
    set -e
    # stage 1: supervised fine-tuning
    torchrun --nproc_per_node 8 sft.py \\
        --model_name_or_path Qwen/Qwen2.5-1.5B \\
        --bf16 True \\
        --per_device_train_batch_size 4 \\
        --gradient_checkpointing True \\
        --output_dir output/sft{sft_extra}

    # stage 2: preference tuning of the SFT checkpoint
    accelerate launch --num_processes 8 dpo.py \\
        --model_name_or_path {dpo_model} \\
        --bf16 True \\
        --per_device_train_batch_size 2 \\
        --gradient_checkpointing True \\
        --output_dir output/dpo
''')


def _project(tmp_path: Path, launcher: str) -> tuple[Settings, Path]:
    write(tmp_path, {"sft.py": SFT_PY, "dpo.py": DPO_PY, "scripts/run_pipeline.sh": launcher})
    (tmp_path / ".git").mkdir()
    return Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False, offline=True), \
        tmp_path / "scripts/run_pipeline.sh"


def _stage_runs(tmp_path: Path, launcher: str) -> list:
    settings, path = _project(tmp_path, launcher)
    return Project(settings).runs_for(path, run_context(settings))


def _dpo(runs: list):
    [dpo] = [r for r in runs if any(str(d).endswith("dpo.py") for d in r.plan.documents)]
    return dpo


QWEN = "Qwen/Qwen2.5-1.5B"


def test_the_dpo_stage_trains_the_architecture_the_sft_stage_wrote(tmp_path: Path):
    runs = _stage_runs(tmp_path, PIPELINE_SH.format(sft_extra="", dpo_model="output/sft"))
    dpo = _dpo(runs)
    assert dpo.problem is None and dpo.arch is not None
    assert dpo.arch.n_params == resolve_model(QWEN).arch.n_params
    # where the model came from: the line of the SFT stage's --output_dir, and its base model
    assert dpo.model_note == (f"`output/sft` is the checkpoint `scripts/run_pipeline.sh:9` writes, "
                              f"fine-tuned from {QWEN}")
    # the model fact still points at the DPO launch's own --model_name_or_path
    model = dpo.plan.get("model")
    assert model.value == QWEN and model.origin.range.start.line == 13


def test_the_finding_says_where_the_model_came_from(tmp_path: Path):
    settings, path = _project(tmp_path, PIPELINE_SH.format(sft_extra="", dpo_model="./output/sft/").replace(
        "--per_device_train_batch_size 2", "--per_device_train_batch_size 64 --max_length 4096"))
    found = [d for d in Linter(settings).lint_path(path) if d.code.startswith("MEM")]
    assert not any("unknown model" in d.message for d in found)
    [dpo] = [d for d in found if d.range.start.line > 10]
    assert dpo.code == "MEM001"
    assert "`./output/sft/` is the checkpoint `scripts/run_pipeline.sh:9` writes, fine-tuned from Qwen/Qwen2.5-1.5B" \
        in dpo.message


def test_the_hover_sheet_says_where_the_model_came_from(tmp_path: Path):
    from memlint.lint.context import RuleContext
    from memlint.lint.engine import capacity_of
    from memlint.lsp.hover import budget_markdown
    from memlint.lsp.session import RunEstimate

    settings, path = _project(tmp_path, PIPELINE_SH.format(sft_extra="", dpo_model="output/sft"))
    project = Project(settings)
    runs = project.runs_for(path, run_context(settings))
    context = RuleContext(parsed=project.parsed(path), settings=settings, capacity=capacity_of(settings), runs=runs,
                          project=project)
    sheet = budget_markdown([RunEstimate(_dpo(runs), context)])
    assert sheet is not None and "Qwen2.5-1.5B" in sheet
    assert f"`output/sft` is the checkpoint `scripts/run_pipeline.sh:9` writes, fine-tuned from {QWEN}" in sheet


def test_a_path_built_from_variables_is_the_same_directory(tmp_path: Path):
    launcher = dedent('''
        #!/bin/bash
        BASE=meta-llama/Llama-2-7b-hf
        RUN=llama2-7b-sft-$(date +%m%d)
        RUN=llama2-7b-sft
        OUT=ckpt/$RUN

        deepspeed --num_gpus 8 sft.py \\
            --model_name_or_path $BASE \\
            --bf16 True \\
            --output_dir "$OUT"

        deepspeed --num_gpus 8 dpo.py \\
            --model_name_or_path ${OUT}/ \\
            --bf16 True \\
            --output_dir ckpt/${RUN}-dpo
    ''')
    dpo = _dpo(_stage_runs(tmp_path, launcher))
    assert dpo.problem is None and dpo.arch is not None
    assert dpo.arch.n_params == resolve_model("meta-llama/Llama-2-7b-hf").arch.n_params
    assert "`ckpt/llama2-7b-sft/` is the checkpoint `scripts/run_pipeline.sh:7` writes" in dpo.model_note


def test_a_different_directory_is_not_the_earlier_stage(tmp_path: Path):
    dpo = _dpo(_stage_runs(tmp_path, PIPELINE_SH.format(sft_extra="", dpo_model="output/sft-merged")))
    assert dpo.arch is None and "unknown model 'output/sft-merged'" in dpo.problem


def test_a_checkpoint_already_saved_in_the_project_is_read_as_it_is(tmp_path: Path):
    """A stage re-run after the first finished: output/sft/config.json is there, and says what it is."""
    import json

    config = dict(json.loads((Path(__file__).parents[2] / "memlint/catalog/models/Qwen--Qwen2.5-1.5B.json")
                             .read_text())["config"], num_hidden_layers=4)
    write(tmp_path, {"sft.py": SFT_PY, "dpo.py": DPO_PY,
                     "run_pipeline.sh": PIPELINE_SH.format(sft_extra="", dpo_model="output/sft")})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False, offline=True)
    path = tmp_path / "run_pipeline.sh"
    (tmp_path / "output/sft").mkdir(parents=True)
    (tmp_path / "output/sft/config.json").write_text(json.dumps(config))
    dpo = _dpo(Project(settings).runs_for(path, run_context(settings)))
    assert dpo.arch is not None and dpo.arch.num_layers == 4, dpo.problem
    assert dpo.plan.get("model").value == "output/sft" and dpo.plan.get("model_lineage") is None


def test_a_stage_loads_only_what_an_earlier_launch_wrote(tmp_path: Path):
    """The DPO stage comes first in the file: the SFT stage's directory does not exist yet when it runs."""
    sft, dpo = PIPELINE_SH.format(sft_extra="", dpo_model="output/sft").split("\n\n")
    swapped = "#!/bin/bash\n" + dpo.split("\n", 1)[1] + "\n\n" + sft.replace("#!/bin/bash\nset -e\n", "")
    dpo_run = _dpo(_stage_runs(tmp_path, swapped))
    assert dpo_run.arch is None and "unknown model 'output/sft'" in dpo_run.problem


def test_a_checkpoint_inside_the_output_directory(tmp_path: Path):
    dpo = _dpo(_stage_runs(tmp_path, PIPELINE_SH.format(sft_extra="", dpo_model="output/sft/checkpoint-1000")))
    assert dpo.arch is not None and dpo.arch.n_params == resolve_model(QWEN).arch.n_params
    assert dpo.model_note.startswith("`output/sft/checkpoint-1000` is a checkpoint inside `output/sft` "
                                     "`scripts/run_pipeline.sh:9` writes")


def test_an_adapter_stage_keeps_the_base_architecture_and_says_so(tmp_path: Path):
    runs = _stage_runs(tmp_path, PIPELINE_SH.format(sft_extra=" \\\n    --lora_enable True", dpo_model="output/sft"))
    dpo = _dpo(runs)
    assert dpo.arch is not None and dpo.arch.n_params == resolve_model(QWEN).arch.n_params
    assert dpo.setup is not None and dpo.setup.lora is None  # the DPO stage itself trains every weight
    assert dpo.model_note == (f"`output/sft` is the checkpoint `scripts/run_pipeline.sh:9` writes, a LoRA adapter "
                              f"trained on {QWEN}: the base architecture is kept, and the adapter's own weights are "
                              "not counted")


def test_an_adapter_the_stage_merges_is_a_full_checkpoint(tmp_path: Path):
    merged = SFT_PY.replace("    trainer.train()\n",
                            "    trainer.train()\n"
                            "    if training_args.lora_enable:\n"
                            "        model = model.merge_and_unload()\n"
                            "    model.save_pretrained(training_args.output_dir)\n")
    assert merged != SFT_PY
    launcher = PIPELINE_SH.format(sft_extra=" \\\n    --lora_enable True", dpo_model="output/sft")
    write(tmp_path, {"sft.py": merged, "dpo.py": DPO_PY, "scripts/run_pipeline.sh": launcher})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False, offline=True)
    dpo = _dpo(Project(settings).runs_for(tmp_path / "scripts/run_pipeline.sh", run_context(settings)))
    assert dpo.model_note == f"`output/sft` is the checkpoint `scripts/run_pipeline.sh:9` writes, fine-tuned from {QWEN}"


def test_progressive_context_extension_follows_every_stage_back_to_the_first(tmp_path: Path):
    """EasyContext's train_scripts: each stage raises `--seq-length` and `--rope-theta` (config values
    that change no parameter count) and loads the checkpoint of the stage before it."""
    train = dedent('''
        import argparse

        import torch
        from accelerate import Accelerator
        from transformers import AutoModelForCausalLM


        def main(args):
            accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulate_every, mixed_precision="bf16")
            model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.bfloat16,
                                                         rope_theta=args.rope_theta,
                                                         attn_implementation="flash_attention_2")
            optim = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
            model, optim = accelerator.prepare(model, optim)
            model.gradient_checkpointing_enable()
            model.train()
            for step in range(args.max_train_steps):
                input_ids = torch.randint(0, 32000, (args.batch_size, args.seq_length))
                loss = model(input_ids=input_ids, labels=input_ids).loss
                accelerator.backward(loss)
                optim.step()
                optim.zero_grad()
            accelerator.unwrap_model(model).save_pretrained(args.output_dir)


        if __name__ == "__main__":
            parser = argparse.ArgumentParser()
            parser.add_argument("--batch-size", type=int, default=1)
            parser.add_argument("--gradient-accumulate-every", type=int, default=8)
            parser.add_argument("--output-dir", type=str, required=True)
            parser.add_argument("--max-train-steps", type=int, default=400)
            parser.add_argument("--learning-rate", type=float, default=2e-5)
            parser.add_argument("--model", type=str, default="meta-llama/Llama-2-7b-hf")
            parser.add_argument("--seq-length", type=int, default=16384)
            parser.add_argument("--rope-theta", type=float, default=100000)
            main(parser.parse_args())
    ''')
    stage = dedent('''
        accelerate launch --num_processes 8 train.py \\
        --batch-size 1 \\
        --output-dir ./output/7B_{length}K \\
        --model {model} \\
        --seq-length {tokens} \\
        --rope-theta {theta}
    ''')
    launcher = "\n".join([stage.format(length=32, model="meta-llama/Llama-2-7b-hf", tokens=32768, theta=1000000),
                          "rm output/7B_32K/model.safetensors\n",
                          stage.format(length=64, model="output/7B_32K", tokens=65536, theta=5000000),
                          stage.format(length=128, model="output/7B_64K", tokens=131072, theta=10000000)])
    write(tmp_path, {"train.py": train, "train_scripts/extend.sh": launcher})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False, offline=True)
    runs = Project(settings).runs_for(tmp_path / "train_scripts/extend.sh", run_context(settings))
    assert [r.problem for r in runs] == [None, None, None]
    llama = resolve_model("meta-llama/Llama-2-7b-hf").arch.n_params
    assert [r.arch.n_params for r in runs] == [llama] * 3
    assert [r.setup.seq_len for r in runs] == [32768, 65536, 131072]
    assert runs[1].model_note == ("`output/7B_32K` is the checkpoint `train_scripts/extend.sh:3` writes, "
                                  "fine-tuned from meta-llama/Llama-2-7b-hf")
    assert runs[2].model_note == ("`output/7B_64K` is the checkpoint `train_scripts/extend.sh:12` writes, "
                                  "fine-tuned from meta-llama/Llama-2-7b-hf through 1 stage before it")


def test_a_stage_that_splits_its_sequences_over_the_ranks_is_not_sized_as_data_parallel(tmp_path: Path):
    """EasyContext's 256K stages pass ``--parallel_mode zigzag_ring_attn``: each of the 8 GPUs holds
    a slice of the sequence, which the estimate (the whole sequence on every GPU) does not model."""
    train = dedent('''
        import argparse

        import torch
        from accelerate import Accelerator
        from transformers import AutoModelForCausalLM
        from easy_context import apply_seq_parallel_monkey_patch, prepare_seq_parallel_inputs


        def main(args):
            accelerator = Accelerator(mixed_precision="bf16")
            apply_seq_parallel_monkey_patch(args.parallel_mode, "llama")
            model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.bfloat16)
            optim = torch.optim.AdamW(model.parameters(), lr=2e-5)
            model, optim = accelerator.prepare(model, optim)
            for step in range(10):
                input_ids = torch.randint(0, 32000, (1, args.seq_length))
                local = prepare_seq_parallel_inputs(args.parallel_mode, input_ids, accelerator.process_index,
                                                    accelerator.num_processes)
                loss = model(input_ids=local, labels=local).loss
                accelerator.backward(loss)
                optim.step()


        if __name__ == "__main__":
            parser = argparse.ArgumentParser()
            parser.add_argument("--model", type=str, default="meta-llama/Llama-2-7b-hf")
            parser.add_argument("--output-dir", type=str)
            parser.add_argument("--seq-length", type=int, default=16384)
            parser.add_argument("--parallel_mode", type=str,
                                choices=["zigzag_ring_attn", "dist_flash_attn", "ulysses_attn", "data_parallel"])
            main(parser.parse_args())
    ''')
    launcher = dedent('''
        accelerate launch --num_processes 8 train.py --output-dir output/64K --seq-length 65536 \\
            --parallel_mode data_parallel
        accelerate launch --num_processes 8 train.py --model output/64K --output-dir output/256K \\
            --seq-length 256000 --parallel_mode zigzag_ring_attn
    ''')
    write(tmp_path, {"train.py": train, "extend.sh": launcher})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False, offline=True)
    first, second = Project(settings).runs_for(tmp_path / "extend.sh", run_context(settings))
    assert first.problem is None and first.setup.seq_len == 65536
    assert second.arch is None
    assert second.problem.startswith("the run uses sequence parallelism (`--parallel_mode zigzag_ring_attn`), "
                                     "which memlint's estimate does not model")
    assert second.problem_fact.origin.range.start.line == 4


def test_the_result_cache_sees_an_edit_of_the_earlier_stage_script(tmp_path: Path, capsys, monkeypatch):
    """The DPO stage's verdict depends on the SFT stage's script (does it merge its adapter?):
    an edit there is seen by a warm `memlint check`, as by a cold one."""
    from memlint.cli.main import main

    launcher = PIPELINE_SH.format(sft_extra=" \\\n    --lora_enable True", dpo_model="output/sft").replace(
        "--per_device_train_batch_size 2", "--per_device_train_batch_size 64 --max_length 4096")
    write(tmp_path, {"sft.py": SFT_PY, "dpo.py": DPO_PY, "scripts/run_pipeline.sh": launcher,
                     "memlint.toml": 'gpu = "h100"\ngpus = 8\noffline = true\n'})
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMLINT_CACHE_DIR", str(tmp_path / "cache"))

    def check(*args: str) -> str:
        capsys.readouterr()
        main(["check", "--output-format", "concise", "--color", "never", "--jobs", "1", *args, "."])
        return capsys.readouterr().out

    before = check()
    assert "a LoRA adapter trained on Qwen/Qwen2.5-1.5B" in before
    assert check() == before  # warm
    (tmp_path / "sft.py").write_text(SFT_PY.replace("    trainer.train()\n", "    trainer.train()\n"
                                                    "    model = model.merge_and_unload()\n"))
    after = check()
    assert after == check("--no-cache")
    assert "a LoRA adapter" not in after and "fine-tuned from Qwen/Qwen2.5-1.5B" in after
