"""PyTorch's own tensor parallelism in a script: ``parallelize_module(model, mesh["tp"], plan)``
splits each named layer over the mesh's GPUs, which the estimate (a whole model per GPU, or
ZeRO/FSDP shards) does not model. LambdaLabsML/distributed-training-guide's
``06-tensor-parallel``: its README trains Llama-3.1-8B at 16 x 1,024 tokens over a mesh of 8
H100s, which memlint called a 170.8 GiB MEM001 error as if every GPU held the whole model."""

from __future__ import annotations

from pathlib import Path

from facts_testing import checked_project, dedent, one

from memlint.lint.engine import Linter

TRAIN_LLM = dedent('''
    import argparse
    import os

    import datasets
    import torch
    import torch.distributed as dist
    import torch.distributed.tensor.parallel as tp
    from torch.distributed.tensor import Shard
    from torch.utils.data import DataLoader
    from transformers import AutoConfig, AutoModelForCausalLM, default_data_collator


    def main():
        parser = argparse.ArgumentParser()
        parser.add_argument("-m", "--model-name", default=None, required=True)
        parser.add_argument("-b", "--batch-size", default=1, type=int)
        parser.add_argument("-s", "--seq-length", default=1024, type=int)
        args = parser.parse_args()

        dist.init_process_group()
        gpus_on_node = torch.cuda.device_count()
        num_nodes = dist.get_world_size() // gpus_on_node
        mesh = dist.device_mesh.init_device_mesh("cuda", (num_nodes, gpus_on_node), mesh_dim_names=("dp", "tp"))

        config = AutoConfig.from_pretrained(args.model_name, use_cache=False)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
        for layer in model.model.layers:
            tp.parallelize_module(
                layer,
                mesh["tp"],
                {
                    "self_attn.q_proj": tp.ColwiseParallel(),
                    "self_attn.o_proj": tp.RowwiseParallel(output_layouts=Shard(1)),
                    "mlp.down_proj": tp.RowwiseParallel(output_layouts=Shard(1)),
                },
            )
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-5, fused=True)
        train_data = datasets.load_dataset("tatsu-lab/alpaca", split="train")
        dataloader = DataLoader(train_data, batch_size=args.batch_size, collate_fn=default_data_collator)
        for batch in dataloader:
            loss = model(**batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)


    if __name__ == "__main__":
        main()
''')

README = dedent('''
    # Tensor parallelism

    ```bash
    torchrun --standalone --nproc-per-node gpu train_llm.py --model-name meta-llama/Llama-3.1-8B --batch-size 16 --seq-length 1024
    ```
''')


def test_parallelize_module_is_named_as_unmodelled():
    facts = one(TRAIN_LLM)
    assert facts.unmodelled is not None
    what, advice = facts.unmodelled.value
    assert what == "PyTorch tensor parallelism (`parallelize_module(...)`)"
    assert "slice of every parallelized layer" in advice


def test_the_documented_command_gets_a_note_in_the_script_not_a_verdict(tmp_path: Path):
    settings = checked_project(tmp_path, {"06-tensor-parallel/train_llm.py": TRAIN_LLM,
                                          "06-tensor-parallel/README.md": README})
    linter = Linter(settings)
    script = [(d.code, d.range.start.line) for d in linter.lint_path(tmp_path / "06-tensor-parallel/train_llm.py")
              if d.code.startswith("MEM")]
    readme = [d.code for d in linter.lint_path(tmp_path / "06-tensor-parallel/README.md") if d.code.startswith("MEM")]
    line = TRAIN_LLM.splitlines().index("        tp.parallelize_module(") + 1
    assert script == [("MEM003", line)] and readme == []


def test_near_miss_the_same_script_without_tensor_parallelism_is_estimated(tmp_path: Path):
    start = TRAIN_LLM.index("    for layer in model.model.layers:")
    end = TRAIN_LLM.index("    optimizer = ")
    plain = TRAIN_LLM[:start] + TRAIN_LLM[end:]
    assert "parallelize_module" not in plain
    settings = checked_project(tmp_path, {"06-tensor-parallel/train_llm.py": plain,
                                          "06-tensor-parallel/README.md": README})
    readme = [d.code for d in Linter(settings).lint_path(tmp_path / "06-tensor-parallel/README.md")
              if d.code.startswith("MEM")]
    # every GPU holds the whole 8B model, its gradients and AdamW states, and 16 x 1,024 tokens
    assert readme == ["MEM001"]


def test_near_miss_a_readme_command_memlint_cannot_estimate_is_no_news_in_the_readme(tmp_path: Path):
    # the problem is the README's own (a model memlint cannot find), not the script's: neither
    # the README nor the script gets a note, as before
    unknown = README.replace("meta-llama/Llama-3.1-8B", "acme-labs/secret-model-13b")
    start = TRAIN_LLM.index("    for layer in model.model.layers:")
    plain = TRAIN_LLM[:start] + TRAIN_LLM[TRAIN_LLM.index("    optimizer = "):]
    settings = checked_project(tmp_path, {"06-tensor-parallel/train_llm.py": plain,
                                          "06-tensor-parallel/README.md": unknown})
    linter = Linter(settings)
    for name in ("06-tensor-parallel/README.md", "06-tensor-parallel/train_llm.py"):
        assert [d.code for d in linter.lint_path(tmp_path / name) if d.code.startswith("MEM")] == [], name
