"""CFG006: a config file the tools cannot read (bad JSON/YAML, several documents, ...)."""

from __future__ import annotations

from typing import Iterator

from memlint.documents import kinds
from memlint.documents.conflicts import conflict_message
from memlint.documents.kinds import DocumentKind
from memlint.documents.structured import FATAL_KINDS
from memlint.facts.project_arguments import project_reads_python_tags
from memlint.lint.context import RuleContext
from memlint.model.diagnostics import Range, Severity
from memlint.rules._config import VALIDATED_KINDS
from memlint.rules.base import Example, Finding, Rule


def looks_like_config(ctx: RuleContext) -> bool:
    """A config kind, or a broken file whose name or first keys say it is one (a broken
    ``package.json`` or editor settings file is none of memlint's business)."""
    if ctx.kind in VALIDATED_KINDS:
        return True
    syntax = ctx.parsed.document.syntax
    keys = ctx.structured.partial_keys if ctx.structured is not None else ()
    return kinds.detect(ctx.path, syntax, dict.fromkeys(keys) if keys else None) in VALIDATED_KINDS


# the Python tags PyYAML's FullLoader (``yaml.full_load``) constructs: plain values, no objects
_FULL_LOADER_TAGS = frozenset(f"tag:yaml.org,2002:python/{name}" for name in (
    "none", "bool", "str", "unicode", "bytes", "int", "long", "float", "complex", "list", "tuple", "dict"))


def _read_by_the_projects_loader(ctx: RuleContext, tag: str | None) -> bool:
    """A Python value tag (``!!python/tuple``) in a file no tool reads for the project (plain YAML,
    or arguments the project's own code loads), in a project whose code reads YAML only with
    ``yaml.full_load`` or a loader like it: the tag is read there (ssbuild's chatglm_finetuning)."""
    if tag not in _FULL_LOADER_TAGS or ctx.kind not in (DocumentKind.HF_ARGS, DocumentKind.YAML):
        return False
    if "python_tags_read" not in ctx.shared:  # one walk of the project per lint, however many tags
        ctx.shared["python_tags_read"] = project_reads_python_tags(ctx.settings.root)
    return bool(ctx.shared["python_tags_read"])


class UnreadableConfig(Rule):
    """## What it does
    Reports a DeepSpeed, Accelerate, Axolotl, LLaMA-Factory or TrainingArguments config that
    its tool cannot read, at the place the reading fails: invalid JSON (with the exact line and
    column, trailing commas and comments named as such), invalid YAML, a tab used to indent
    YAML, a YAML file holding several documents, a tag ``yaml.safe_load`` refuses, a file that
    expands beyond any real config (an alias bomb), or a file that is not text at all. A Python
    value tag (``!!python/tuple``) in plain YAML or a TrainingArguments-style file is not reported
    when the project's own code reads its YAML only with ``yaml.full_load`` (or
    ``yaml.load(..., Loader=yaml.FullLoader)``), which constructs it.

    ## Why it matters
    The job fails at start-up, after it waited for its GPUs. The HF Trainer and Accelerate read
    JSON with ``json.load`` (no comments, no trailing commas); Axolotl, Accelerate and
    ``HfArgumentParser`` read YAML with ``yaml.safe_load`` (one document, no Python tags).

    ## Fix
    Correct the file where the message points.
    """

    code = "CFG006"
    name = "unreadable-config"
    severity = Severity.ERROR
    kinds = VALIDATED_KINDS | {DocumentKind.JSON, DocumentKind.YAML}

    VALID = (
        Example(
            '{\n  "train_micro_batch_size_per_gpu": "auto",\n  "gradient_accumulation_steps": "auto",\n'
            '  "zero_optimization": {"stage": 2, "overlap_comm": true}\n}\n',
            path="ds_config.json",
        ),
    )
    INVALID = (
        Example(
            '{\n  "train_micro_batch_size_per_gpu": "auto",\n  "gradient_accumulation_steps": "auto",\n'
            '  "zero_optimization": {\n    "stage": 2,\n    "overlap_comm": true,\n  }\n}\n',
            path="ds_config.json",
            lines=(6,),
            message="trailing comma",
            title="A trailing comma: json.load refuses it",
        ),
        Example(
            "base_model: meta-llama/Llama-3.2-1B\nsequence_len: 2048\nmicro_batch_size: 4\n"
            "learning_rate: 0.0002\ndatasets:\n\t- path: tatsu-lab/alpaca\n\t  type: alpaca\n",
            path="axolotl.yml",
            lines=(6,),
            message="tab",
            title="YAML cannot be indented with tabs",
        ),
        Example(
            "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nnum_processes: 8\n"
            "---\ncompute_environment: LOCAL_MACHINE\ndistributed_type: NO\nnum_processes: 1\n",
            path="accelerate_config.yaml",
            lines=(4,),
            message="more than one YAML document",
            title="Two documents in one file",
        ),
        Example(
            "base_model: mistralai/Mistral-7B-v0.1\nadapter: qlora\nload_in_4bit: true\n"
            "<<<<<<< HEAD\nsequence_len: 8192\nmicro_batch_size: 1\n=======\nsequence_len: 4096\n"
            "micro_batch_size: 2\n>>>>>>> tune-batch\ngradient_checkpointing: true\n",
            path="qlora.yml",
            lines=(4,),
            message="unresolved merge conflict (`<<<<<<< HEAD`)",
            title="A merge conflict left in the config",
        ),
    )

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        document = ctx.parsed.document
        if document.problem is not None:
            if kinds.by_name(document.path.rsplit("/", 1)[-1], document.path, document.syntax) is not None:
                yield Finding(Range.file_start(), f"cannot read this config: {document.problem}")
            return
        if ctx.structured is None or not looks_like_config(ctx):
            return
        for problem in ctx.structured.problems:
            if problem.kind == "unsupported-tag" and _read_by_the_projects_loader(ctx, problem.tag):
                continue
            if problem.kind in FATAL_KINDS:
                conflict = conflict_message(document.text) if problem.kind == "syntax" else None
                if conflict is not None:
                    yield Finding(conflict[0], conflict[1])
                else:
                    yield Finding(problem.range, problem.message)
