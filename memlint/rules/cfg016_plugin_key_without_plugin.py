"""CFG016: an Axolotl plugin's key used without the plugin."""

from __future__ import annotations

from memlint.documents.kinds import DocumentKind
from memlint.model.diagnostics import Severity
from memlint.rules._config import SchemaRule
from memlint.rules.base import Example

_BASE = (
    "base_model: meta-llama/Llama-3.1-8B-Instruct\nsequence_len: 8192\nmicro_batch_size: 1\n"
    "gradient_accumulation_steps: 8\nlearning_rate: 0.00002\nbf16: true\ngradient_checkpointing: true\n"
)


class PluginKeyWithoutPlugin(SchemaRule):
    """## What it does
    Reports Axolotl keys that belong to a plugin (``liger_fused_linear_cross_entropy``,
    ``kd_alpha``, ``lm_eval_tasks``, ...) when that plugin is not listed under ``plugins:``.

    ## Why it matters
    Axolotl only reads a plugin's keys when the plugin is loaded, and ignores them silently
    otherwise. ``liger_fused_linear_cross_entropy: true`` without the Liger plugin keeps the
    full ``batch x sequence x vocabulary`` logits tensor — tens of GiB at long sequence
    lengths — that the key was meant to remove (memlint estimates the run without it).

    ## Fix
    List the plugin, e.g. ``plugins: [axolotl.integrations.liger.LigerPlugin]``.
    """

    code = "CFG016"
    name = "plugin-key-without-plugin"
    severity = Severity.WARNING
    category = "plugin"
    kinds = frozenset({DocumentKind.AXOLOTL})

    VALID = (
        Example(
            _BASE + "plugins:\n  - axolotl.integrations.liger.LigerPlugin\nliger_rms_norm: true\n"
            "liger_glu_activation: true\nliger_fused_linear_cross_entropy: true\n",
            path="llama-8b-liger.yml",
        ),
    )
    INVALID = (
        Example(
            _BASE + "liger_rms_norm: true\nliger_fused_linear_cross_entropy: true\n",
            path="llama-8b-liger.yml",
            lines=(8, 9),
            message="axolotl.integrations.liger.LigerPlugin",
            title="Without the plugin, Axolotl never applies the Liger kernels",
        ),
    )
