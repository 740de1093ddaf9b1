"""A stage that trains the checkpoint an earlier stage of the same launcher wrote.

Pipelines launch one stage after another from one script or README: SFT then DPO, progressive
context extension (EasyContext's ``--output-dir ./output/7B_32K_...`` then ``--model
output/7B_32K_...``), pre-training then fine-tuning. The later stage's model path names no Hub
model and no file of the project -- it names the directory the earlier launch writes with
``--output_dir``. That checkpoint has the earlier stage's architecture (a stage that only changes
``rope_theta`` or the sequence length changes no parameter count), so the later stage is
estimated with the model the earlier one loads, and says where it came from.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from memlint.model.provenance import Sourced

if TYPE_CHECKING:
    from memlint.facts.plan import RunFacts, TrainingPlan

# the options a launch names its output (checkpoint) directory with, as ``option_key`` spells them
OUTPUT_OPTIONS = ("output_dir", "output_path", "save_dir", "save_path", "checkpoint_dir", "ckpt_dir",
                  "save_model_dir", "output")
# how many stages back a chain is followed (a progressive-extension script has seven)
MAX_STAGES = 12
# what a script calls to fold its LoRA adapter into the base weights before saving
_MERGES_ADAPTER = "merge_and_unload("


def normalised(path: str) -> str:
    """A path as a launch writes it, compared: quotes, ``./`` and a trailing slash do not count."""
    text = path.strip().strip("\"'").rstrip("/")
    return posixpath.normpath(text) if text else ""


@dataclass(frozen=True)
class Stage:
    """The earlier launch whose output directory a later launch loads its model from."""

    launch: RunFacts
    output: Sourced[str]  # its ``--output_dir`` value, located in the launcher
    below: bool  # the model path is a folder inside it (``output/sft/checkpoint-1000``)


def writing_stage(model_path: str, launch: RunFacts, launches: list[RunFacts]) -> Stage | None:
    """The latest launch before ``launch`` in the same document whose output directory is
    ``model_path`` (or holds it), or None."""
    wanted = normalised(model_path)
    if not wanted or "$" in wanted or wanted in (".", ".."):
        return None
    line = _line(launch)
    if line is None:
        return None
    found: Stage | None = None
    for earlier in launches:
        earlier_line = _line(earlier)
        if earlier is launch or earlier.launches is None or earlier_line is None or earlier_line >= line:
            continue
        for key in OUTPUT_OPTIONS:
            output = earlier.cli_args.get(key)
            if output is None:
                continue
            written = normalised(str(output.value))
            if not written or written in (".", ".."):
                continue
            if wanted == written or wanted.startswith(written + "/"):
                if found is None or (_line(found.launch) or 0) < earlier_line:
                    found = Stage(earlier, output, wanted != written)
                break
    return found


def _line(facts: RunFacts) -> int | None:
    return facts.anchor.range.start.line if facts.anchor is not None else None


class StageChains:
    """Replaces a run's model path by the model of the earlier stage that writes it."""

    def __init__(self, root: Path, facts_of: Callable[[str], list], plan_for: Callable[[RunFacts], TrainingPlan],
                 text_of: Callable[[Path], str | None], is_file: Callable[[Path], bool]) -> None:
        self.root = root
        self.facts_of = facts_of
        self.plan_for = plan_for
        self.text_of = text_of
        self.is_file = is_file  # records the probe: a checkpoint saved later changes the answer
        # a launch (its document, line, column) -> its traced plan and every document that took
        # part in it, back to the first stage: each stage of a long chain is planned once per run
        self._stages: dict[tuple, tuple[TrainingPlan, tuple[str, ...]]] = {}

    def invalidate(self) -> None:
        self._stages.clear()

    def traced(self, plan: TrainingPlan, launch: RunFacts, depth: int = 0) -> TrainingPlan:
        """``plan`` with its model the one the earlier stage that writes its model path loads, and
        a ``model_lineage`` fact saying so; ``plan`` itself when no earlier stage writes it."""
        return self._traced(plan, launch, depth)[0]

    def _traced(self, plan: TrainingPlan, launch: RunFacts, depth: int) -> tuple[TrainingPlan, tuple[str, ...]]:
        model = plan.get("model")
        if model is None or launch.launches is None or depth >= MAX_STAGES:
            return plan, plan.documents
        written = str(model.value)
        folder = Path(launch.path).parent
        if self.is_file(folder / written / "config.json"):
            return plan, plan.documents  # the checkpoint is there: its config.json says what it is
        stage = writing_stage(written, launch, self.facts_of(launch.path))
        if stage is None:
            return plan, plan.documents
        earlier, read = self._stage_plan(stage.launch, depth + 1)
        base = earlier.get("model")
        if base is None:
            return plan, plan.documents
        stages = earlier.value("model_stages", 0) + 1
        lineage = self._lineage(written, stage, earlier, stages)
        facts = dict(plan.facts)
        facts["model"] = model.with_value(str(base.value))
        facts["model_lineage"] = Sourced(lineage, stage.output.origin, "the earlier stage's output directory")
        facts["model_stages"] = Sourced(stages, stage.output.origin, "earlier stages the checkpoint went through")
        return replace(plan, facts=facts), tuple(dict.fromkeys(plan.documents + read))

    def _stage_plan(self, launch: RunFacts, depth: int) -> tuple[TrainingPlan, tuple[str, ...]]:
        """The traced plan of an earlier stage, planned once; a later use reads its documents
        again, so the result cache records that the stage depends on them."""
        key = (launch.path, launch.anchor.range.start.line if launch.anchor else None,
               launch.anchor.range.start.column if launch.anchor else None)
        known = self._stages.get(key)
        if known is None:
            known = self._stages[key] = self._traced(self.plan_for(launch), launch, depth)
        else:
            for document in known[1]:
                self.facts_of(document)
        return known

    def _lineage(self, written: str, stage: Stage, earlier: TrainingPlan, stages: int) -> str:
        """```output/sft` is the checkpoint `train.sh:12` writes, fine-tuned from meta-llama/Llama-2-7b-hf``."""
        origin = stage.output.origin
        if origin is None or (_line(stage.launch) or 0) > origin.range.start.line:
            origin = stage.launch.anchor  # a variable's assignment: the launch is the line that writes
        where = Path(stage.launch.path).name
        if origin is not None:
            shown = Path(origin.path)
            root = self.root.resolve()
            if shown.is_absolute() and root in shown.resolve().parents:
                shown = shown.resolve().relative_to(root)
            where = f"{shown.as_posix()}:{origin.range.start.line}"
        base = earlier.get("model")
        assert base is not None
        from_base = str(base.value)
        if stages > 1:
            from_base = f"{from_base} through {stages - 1} stage{'s' if stages > 2 else ''} before it"
        what = f"`{written}` is " + (f"a checkpoint inside `{stage.output.value}`" if stage.below else "the checkpoint")
        if earlier.get("lora_r") is not None and not self._merges(earlier):
            return (f"{what} `{where}` writes, a LoRA adapter trained on {from_base}: the base architecture "
                    "is kept, and the adapter's own weights are not counted")
        verb = "fine-tuned from" if earlier.trains else "made from"
        return f"{what} `{where}` writes, {verb} {from_base}"

    def _merges(self, plan: TrainingPlan) -> bool:
        """Does a script of the stage fold its adapter into the base weights before saving?"""
        for document in plan.documents:
            if str(document).endswith(".py"):
                text = self.text_of(Path(document))
                if text and _MERGES_ADAPTER in text:
                    return True
        return False
