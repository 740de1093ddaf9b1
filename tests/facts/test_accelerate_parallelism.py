"""accelerate's parallelism written in a script: a ``FullyShardedDataParallelPlugin`` handed to
the ``Accelerator`` shards fully unless it says otherwise, and a ``ParallelismConfig`` with
``cp_size`` or ``tp_size`` above 1 splits sequences or layers, which the estimate does not model
(fyh2001/megatron-sft-recipes' ``scripts/gemma4_opt/train_fsdp2_cp.py``: four MEM001 errors of
288 GiB on a run that FSDP2 shards over eight GPUs and context parallelism splits in two)."""

from __future__ import annotations

from pathlib import Path

from facts_testing import checked_project, dedent, one

from memlint.lint.engine import Linter

# train_fsdp2_cp.py, trimmed
FSDP2_CP = dedent('''
    import argparse

    import torch
    from accelerate import Accelerator
    from accelerate.parallelism_config import ParallelismConfig
    from accelerate.utils import FullyShardedDataParallelPlugin
    from transformers import AutoModelForCausalLM


    def parse_args():
        p = argparse.ArgumentParser()
        p.add_argument("--model-path", default="Qwen/Qwen2.5-7B-Instruct")
        p.add_argument("--dp-shard-size", type=int, default=4)
        p.add_argument("--cp-size", type=int, default=2)
        p.add_argument("--seq-len", type=int, default=16384)
        return p.parse_args()


    def main():
        args = parse_args()
        parallelism_config = ParallelismConfig(dp_shard_size=args.dp_shard_size, cp_size=args.cp_size)
        fsdp2_plugin = None
        if parallelism_config.dp_shard_enabled or parallelism_config.cp_enabled:
            fsdp2_plugin = FullyShardedDataParallelPlugin(
                fsdp_version=2,
                auto_wrap_policy="transformer_based_wrap",
                transformer_cls_names_to_wrap=["Qwen2DecoderLayer"],
                activation_checkpointing=True,
            )
        accelerator = Accelerator(mixed_precision="bf16", parallelism_config=parallelism_config,
                                  fsdp_plugin=fsdp2_plugin)
        model = AutoModelForCausalLM.from_pretrained(args.model_path, torch_dtype=torch.bfloat16)
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
        model, optimizer = accelerator.prepare(model, optimizer)
        for step in range(40):
            input_ids = torch.randint(0, 1000, (1, args.seq_len), device=accelerator.device)
            loss = model(input_ids=input_ids, labels=input_ids).loss
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()


    if __name__ == "__main__":
        main()
''')


def test_a_plugin_without_a_strategy_shards_fully():
    without_cp = FSDP2_CP.replace("cp_size=args.cp_size", "cp_size=1")
    facts = one(without_cp)
    assert facts.fsdp is not None and facts.fsdp.value == "full"
    assert facts.unmodelled is None
    # a plugin that keeps the parameters after the forward shards gradients and states only
    grad_op = without_cp.replace("fsdp_version=2,", "fsdp_version=2, reshard_after_forward=False,")
    assert one(grad_op).fsdp.value == "grad-op"


def test_context_parallelism_is_named_as_unmodelled(tmp_path: Path):
    facts = one(FSDP2_CP)
    assert facts.unmodelled is not None
    what, advice = facts.unmodelled.value
    assert what == "context parallelism (`ParallelismConfig(cp_size=2)`)" and "1/N of the activations" in advice
    settings = checked_project(tmp_path, {"train_fsdp2_cp.py": FSDP2_CP})
    codes = [d.code for d in Linter(settings).lint_path(tmp_path / "train_fsdp2_cp.py") if d.code.startswith("MEM")]
    assert codes == ["MEM003"]


def test_a_launch_that_passes_the_context_parallel_size_names_it():
    from memlint.facts.extract import extract
    from memlint.documents.parsed import parse_document
    from memlint.documents.reading import document_from_text

    launch = "accelerate launch --num-processes 8 train_fsdp2_cp.py --cp-size 4 --dp-shard-size 2\n"
    [facts] = extract(parse_document(document_from_text("run.sh", launch)))
    assert facts.unmodelled is not None and "`--cp_size 4`" in facts.unmodelled.value[0]


# megatron-sft-recipes' scripts/fsdp/train.py, trimmed: its README's command tokenizes one sample
# to check the loss mask and returns before anything trains
DEBUG_MODE = dedent('''
    import argparse

    import torch
    from accelerate import Accelerator
    from transformers import AutoModelForCausalLM, AutoTokenizer


    def parse_args():
        p = argparse.ArgumentParser()
        p.add_argument("--model_name_or_path", type=str, required=True)
        p.add_argument("--max_length", type=int, default=4096)
        p.add_argument("--per_device_train_batch_size", type=int, default=2)
        p.add_argument("--debug_tokenization", action="store_true")
        return p.parse_args()


    def debug_tokenization(args):
        tokenizer = AutoTokenizer.from_pretrained(args.model_name_or_path)
        print(tokenizer("hello")["input_ids"])


    def main():
        args = parse_args()

        if args.debug_tokenization:
            debug_tokenization(args)
            return

        accelerator = Accelerator(mixed_precision="bf16")
        model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, torch_dtype=torch.bfloat16)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
        model, optimizer = accelerator.prepare(model, optimizer)
        model.train()
        for step in range(100):
            batch = torch.randint(0, 1000, (args.per_device_train_batch_size, args.max_length))
            loss = model(input_ids=batch, labels=batch).loss
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()


    if __name__ == "__main__":
        main()
''')

README = dedent('''
    # SFT recipes

    ### Debug tokenization

    ```bash
    python scripts/fsdp/train.py \\
        --model_name_or_path Qwen/Qwen2.5-7B-Instruct \\
        --output_dir /tmp/debug \\
        --debug_tokenization
    ```
''')


def test_a_launch_that_picks_the_early_exit_trains_nothing(tmp_path: Path):
    assert one(DEBUG_MODE).cli_bindings["debug_tokenization"] == ("if:trains=false",)
    settings = checked_project(tmp_path, {"scripts/fsdp/train.py": DEBUG_MODE, "README.md": README})
    findings = Linter(settings).lint_path(tmp_path / "scripts/fsdp/train.py")
    assert not [d for d in findings if d.code in ("MEM001", "MEM002")]
    # the same command without the flag trains a 7B model in pure bf16 on one GPU: it does not fit
    settings = checked_project(tmp_path, {"README.md": README.replace(" \\\n    --debug_tokenization", "")})
    assert "--debug_tokenization" not in (tmp_path / "README.md").read_text()
    findings = Linter(settings).lint_path(tmp_path / "scripts/fsdp/train.py")
    assert [d.code for d in findings if d.code in ("MEM001", "MEM002")] == ["MEM001"]


def test_a_plugin_built_only_when_a_size_above_one_is_asked_for():
    # accelerate's examples/torch_native_parallelism/nd_parallel.py: every size defaults to 1, so
    # no FSDP plugin is built unless the launch asks for shards (before: "fsdp-full" and a ZRO001)
    defaults = FSDP2_CP.replace('"--dp-shard-size", type=int, default=4', '"--dp-shard-size", type=int, default=1') \
        .replace('"--cp-size", type=int, default=2', '"--cp-size", type=int, default=1')
    facts = one(defaults)
    assert facts.fsdp is None and facts.unmodelled is None
    assert one(FSDP2_CP.replace("default=2)", "default=1)")).fsdp.value == "full"  # four shards by default


def test_the_launch_that_asks_for_shards_builds_the_plugin(tmp_path: Path):
    from memlint.lint.engine import run_context
    from memlint.project.project import Project

    defaults = FSDP2_CP.replace('"--dp-shard-size", type=int, default=4', '"--dp-shard-size", type=int, default=1') \
        .replace('"--cp-size", type=int, default=2', '"--cp-size", type=int, default=1')
    launch = "accelerate launch --num-processes 8 train.py --dp-shard-size 8\n"
    settings = checked_project(tmp_path, {"train.py": defaults, "run.sh": launch})
    [run] = Project(settings).runs_for(tmp_path / "run.sh", run_context(settings))
    assert run.plan.value("fsdp") == "full"
