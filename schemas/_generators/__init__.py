"""Per-tool schema generators; ``TARGETS`` lists them in the order ``generate.py`` runs them.

Each generator module imports its tool lazily (inside ``build``), so that listing the targets
never needs the tools installed.
"""

from __future__ import annotations

from .common import Target


def _lazy(module: str):
    def build():
        from importlib import import_module

        return import_module(f"{__name__}.{module}").build()

    return build


TARGETS: tuple[Target, ...] = (
    Target(
        name="deepspeed",
        package="deepspeed",
        outputs=("deepspeed.schema.json",),
        modules=("deepspeed", "transformers", "accelerate"),
        build=_lazy("deepspeed_config"),
    ),
    Target(
        name="transformers",
        package="transformers",
        outputs=("hf-training-arguments.schema.json",),
        modules=("transformers",),
        build=_lazy("hf_training_args"),
        aliases=("hf-training-arguments", "hf"),
    ),
    Target(
        name="trl",
        package="trl",
        outputs=("trl-sft-config.schema.json", "trl-dpo-config.schema.json", "trl-grpo-config.schema.json"),
        modules=("trl",),
        build=_lazy("trl_configs"),
    ),
    Target(
        name="llamafactory",
        package="llamafactory",
        outputs=("llamafactory.schema.json",),
        modules=("llamafactory",),
        build=_lazy("llamafactory_args"),
    ),
    Target(
        name="accelerate",
        package="accelerate",
        outputs=("accelerate.schema.json",),
        modules=("accelerate",),
        build=_lazy("accelerate_config"),
    ),
    Target(
        name="axolotl",
        package="axolotl",
        outputs=("axolotl.schema.json",),
        modules=("axolotl",),
        build=_lazy("axolotl_config"),
    ),
    Target(
        name="torchtune",
        package="torchtune",
        outputs=("torchtune.schema.json",),
        modules=("torchtune", "recipes"),
        build=_lazy("torchtune_config"),
    ),
    Target(
        name="composer",
        package="llm-foundry",
        outputs=("composer.schema.json",),
        modules=("llmfoundry",),
        build=_lazy("composer_train_config"),
        aliases=("llm-foundry", "llmfoundry"),
    ),
    Target(
        name="lightning",
        package="lightning",
        outputs=("lightning-cli.schema.json",),
        modules=("lightning",),
        build=_lazy("lightning_cli"),
        aliases=("lightning-cli",),
    ),
)
