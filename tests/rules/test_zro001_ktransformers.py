"""ZRO001 proposes only the lighter forms the run's framework offers. KTransformers (LLaMA-Factory's
``use_kt: true``: routed experts in host memory, computed on the CPU) runs as one process or under
FSDP2, whose settings its Accelerate file carries ("Accelerate YAML contains FSDP2 settings only";
``KTransformers is incompatible with DeepSpeed ZeRO-3``): plain DDP is no form of it, so the lighter
form of its full sharding is FSDP2 without resharding after forward (SHARD_GRAD_OP). The rule's own
example holds the project (a LLaMA-Factory checkout with its KTransformers LoRA example)."""

from __future__ import annotations

from pathlib import Path

from memlint.lint.engine import Linter
from memlint.project.settings import Settings
from memlint.rules.zro001_zero3_on_small_model import KT_FILES, KT_SFT, ZeroThreeOnSmallModel

from tests.facts.facts_testing import write


def _zro001(root: Path, kt_config: str) -> list:
    [example] = [e for e in ZeroThreeOnSmallModel.INVALID if e.files is KT_FILES]
    write(root, {**KT_FILES, "examples/qwen3moe_lora_sft_kt.yaml": kt_config, example.path: str(example.source)})
    (root / ".git").mkdir(exist_ok=True)
    settings = Settings(root=root).with_overrides(gpu="h100", gpus=8, cache=False, offline=True)
    return [d for d in Linter(settings).lint_path(root / example.path) if d.code == "ZRO001"]


def test_ktransformers_is_offered_fsdp2_without_resharding_not_ddp(tmp_path: Path):
    [finding] = _zro001(tmp_path, KT_SFT)
    assert "with FSDP SHARD_GRAD_OP" in finding.message and "DDP" not in finding.message


def test_without_ktransformers_plain_data_parallelism_is_the_lightest(tmp_path: Path):
    [finding] = _zro001(tmp_path, KT_SFT.replace("use_kt: true\n", ""))
    assert "plain data parallelism (DDP / ZeRO-0)" in finding.message
