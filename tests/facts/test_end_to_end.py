"""``memlint check`` on small projects: a training script, the launcher next to it, and the
finding on the line that makes the run too large."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from facts_testing import dedent, span, write

REPO = Path(__file__).resolve().parents[2]

TRAIN_PY = dedent('''
    from dataclasses import dataclass, field

    import torch
    from datasets import load_dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, HfArgumentParser
    from trl import SFTConfig, SFTTrainer


    @dataclass
    class ScriptArguments:
        model_id: str = field(default="meta-llama/Llama-3.1-8B")
        dataset: str = "trl-lib/Capybara"


    def main():
        script_args, training_args = HfArgumentParser((ScriptArguments, SFTConfig)).parse_args_into_dataclasses()
        model = AutoModelForCausalLM.from_pretrained(script_args.model_id, torch_dtype=torch.bfloat16)
        tokenizer = AutoTokenizer.from_pretrained(script_args.model_id)
        trainer = SFTTrainer(model=model, args=training_args, processing_class=tokenizer,
                             train_dataset=load_dataset(script_args.dataset, split="train"))
        trainer.train()


    if __name__ == "__main__":
        main()
''')

RUN_SH = dedent('''
    #!/bin/bash
    # one H100; the batch size is what the OOM is about
    torchrun --nproc_per_node 1 train.py \\
        --output_dir out/llama-sft \\
        --per_device_train_batch_size 16 \\
        --gradient_accumulation_steps 1 \\
        --max_length 4096 \\
        --bf16
''')


def _check(root: Path, *paths: str) -> tuple[int, list[dict]]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    result = subprocess.run(
        [sys.executable, "-m", "memlint", "check", "--gpu", "h100", "--format", "json", "--select", "MEM001",
         "--no-cache", *paths],
        cwd=root, env=env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode in (0, 1), result.stderr
    assert "internal error" not in result.stderr, result.stderr
    return result.returncode, json.loads(result.stdout or "[]")


def test_the_launchers_batch_size_is_the_cause(tmp_path):
    write(tmp_path, {"train.py": TRAIN_PY, "run.sh": RUN_SH})
    code, diagnostics = _check(tmp_path, ".")
    assert code == 1
    assert len(diagnostics) == 1
    (finding,) = diagnostics
    assert finding["code"] == "MEM001"
    assert Path(finding["filename"]).name == "run.sh"
    line, column, _, end_column = span(RUN_SH, "--per_device_train_batch_size «16»")
    assert finding["location"] == {"row": line, "column": column + 1}
    assert finding["end_location"]["column"] == end_column + 1
    assert "exceeds" in finding["message"]


def test_checking_only_the_script_still_reports_in_its_launcher(tmp_path):
    write(tmp_path, {"train.py": TRAIN_PY, "run.sh": RUN_SH})
    code, diagnostics = _check(tmp_path, "train.py")
    assert code == 1
    assert [Path(d["filename"]).name for d in diagnostics] == ["run.sh"]


def test_a_launch_that_fits_is_quiet(tmp_path):
    fitting = RUN_SH.replace("--per_device_train_batch_size 16", "--per_device_train_batch_size 1 --gradient_checkpointing")
    write(tmp_path, {"train.py": TRAIN_PY, "run.sh": fitting})
    code, diagnostics = _check(tmp_path, ".")
    assert (code, diagnostics) == (0, [])


def test_a_script_on_its_own_is_flagged_at_its_argparse_default(tmp_path):
    script = dedent('''
        import argparse

        import torch
        from torch.utils.data import DataLoader
        from datasets import load_dataset
        from transformers import AutoModelForCausalLM, AutoTokenizer

        MODEL = "meta-llama/Llama-3.1-8B"
        parser = argparse.ArgumentParser()
        parser.add_argument("--batch_size", type=int, default=32)
        parser.add_argument("--seq_len", type=int, default=4096)
        args = parser.parse_args()

        tokenizer = AutoTokenizer.from_pretrained(MODEL)
        model = AutoModelForCausalLM.from_pretrained(MODEL, torch_dtype=torch.bfloat16).cuda()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)

        def encode(rows):
            return tokenizer(rows["text"], max_length=args.seq_len, truncation=True, padding="max_length")

        train_set = load_dataset("imdb", split="train").map(encode, batched=True)
        loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
        for batch in loader:
            model(**batch).loss.backward()
            optimizer.step()
    ''')
    write(tmp_path, {"finetune.py": script})
    code, diagnostics = _check(tmp_path, ".")
    assert code == 1
    (finding,) = diagnostics
    line, column, _, _ = span(script, '"--batch_size", type=int, default=«32»')
    assert (finding["location"]["row"], finding["location"]["column"]) == (line, column + 1)


def test_the_plan_takes_each_fact_from_the_document_that_sets_it(tmp_path):
    from memlint.lint.engine import run_context
    from memlint.project.settings import Settings
    from memlint.project.project import Project

    write(tmp_path, {"train.py": TRAIN_PY, "scripts/run.sh": RUN_SH.replace("train.py", "../train.py")})
    settings = Settings(root=tmp_path).with_overrides(cache=False)
    (run,) = Project(settings).runs_for(tmp_path / "train.py", run_context(settings))
    facts = run.plan.facts
    origin = {
        name: (Path(fact.origin.path).name, fact.origin.range.start.line)
        for name, fact in facts.items()
        if fact.origin is not None
    }
    assert facts["model"].value == "meta-llama/Llama-3.1-8B"
    assert origin["model"] == ("train.py", span(TRAIN_PY, 'field(default=«"meta-llama/Llama-3.1-8B"»)')[0])
    assert facts["load_dtype"].value == "bf16"
    assert (facts["micro_batch"].value, facts["seq_len"].value, facts["mixed"].value) == (16, 4096, "bf16")
    assert origin["micro_batch"] == ("run.sh", span(RUN_SH, "--per_device_train_batch_size «16»")[0])
    assert facts["world_size"].value == 1 and origin["world_size"][0] == "run.sh"
    assert facts["framework"].value == "trl"
    assert run.setup is not None and run.setup.micro_batch == 16
    # Nothing states gradient checkpointing, so TRL's SFTConfig default (on) applies, sourced to no line.
    assert facts["grad_ckpt"].value == 1 and facts["grad_ckpt"].origin is None
