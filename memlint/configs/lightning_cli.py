"""LightningCLI configs (``python main.py fit --config config.yaml``): the run they define.

``LightningCLI(MyModel, MyDataModule)`` reads a YAML of ``trainer:`` / ``model:`` / ``data:``
sections (lightning/pytorch/cli.py). The ``trainer`` section is the ``Trainer``'s arguments:
``precision: bf16-mixed``, ``devices`` (times ``num_nodes``), ``strategy: deepspeed_stage_2`` /
``fsdp`` (or a ``{class_path, init_args}`` block), ``accumulate_grad_batches``. ``model`` and
``data`` hold the user's own classes' arguments, flat or under ``init_args``; the usual names of
a checkpoint (``model_name_or_path``), a batch size (``batch_size``) and a length
(``max_seq_length``, ``max_length``) are read there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memlint.configs.deepspeed import positive_int
from memlint.configs.reading import ConfigReader, loaded_mapping, new_facts
from memlint.facts.extract import extractor
from memlint.facts.plan import RunFacts
from memlint.model.provenance import Sourced
from memlint.model.vocabulary import LIGHTNING_DEEPSPEED, OPTIMIZER_CLASSES

if TYPE_CHECKING:
    from memlint.documents.parsed import ParsedDocument

TOOL = "LightningCLI"
# keys of the Trainer section no other tool's config has at its top (lightning.pytorch.Trainer)
TRAINER_KEYS = {"accelerator", "strategy", "devices", "num_nodes", "precision", "max_epochs", "max_steps",
                "accumulate_grad_batches", "gradient_clip_val", "log_every_n_steps", "check_val_every_n_epoch",
                "val_check_interval", "enable_checkpointing", "callbacks", "logger", "default_root_dir"}
TOP_KEYS = {"seed_everything", "trainer", "model", "data", "optimizer", "lr_scheduler", "ckpt_path"}
# the user's own argument names the estimate reads in ``model`` and ``data``
MODEL_ARGS = ("model_name_or_path", "pretrained_model_name_or_path", "model_name", "model_id", "checkpoint")
BATCH_ARGS = ("batch_size", "train_batch_size", "micro_batch_size", "per_device_train_batch_size")
LENGTH_ARGS = ("max_seq_length", "max_length", "max_seq_len", "block_size", "seq_len")


def is_lightning_cli(value: Any) -> bool:
    """A ``trainer`` mapping of the Trainer's own arguments beside ``model`` or ``data``, and no
    top-level key LightningCLI does not read (a Hydra config has ``defaults`` or ``_target_``)."""
    if not isinstance(value, dict) or not isinstance(value.get("trainer"), dict):
        return False
    keys = {k for k in value if isinstance(k, str)}
    trainer = {k for k in value["trainer"] if isinstance(k, str)}
    if "_target_" in trainer or not keys <= TOP_KEYS | {"fit", "validate", "test", "predict"}:
        return False
    return bool(keys & {"model", "data"}) and len(trainer & TRAINER_KEYS) >= 2


def _init_args(reader: ConfigReader, section: str) -> ConfigReader | None:
    """A ``model:`` / ``data:`` section's arguments: under ``init_args`` when it names a class."""
    if not isinstance(reader.value(section), dict):
        return None
    inside = reader.inside(section)
    return inside.inside("init_args") if isinstance(inside.value("init_args"), dict) else inside


@extractor("lightning-cli")
def extract_lightning_cli(parsed: ParsedDocument) -> list[RunFacts]:
    data = loaded_mapping(parsed)
    if data is None:
        return []
    facts = new_facts(parsed.path, "lightning-cli", data)
    facts.framework = Sourced("lightning", None, "LightningCLI config")
    root = ConfigReader(parsed.path, data, facts, "lightning-cli")
    trainer = root.inside("trainer")
    precision = trainer.value("precision")
    if isinstance(precision, (str, int)) and not isinstance(precision, bool):
        trainer.set("lightning_precision", str(precision), trainer.location("precision"), "trainer.precision")
    accumulate = positive_int(trainer.value("accumulate_grad_batches"))
    if accumulate:
        trainer.set("grad_accum", accumulate, trainer.location("accumulate_grad_batches"),
                    "trainer.accumulate_grad_batches")
    _devices(trainer)
    _strategy(trainer)
    _optimizer(root)
    for section, names, fact in (("model", MODEL_ARGS, "model"), ("data", BATCH_ARGS, "micro_batch"),
                                 ("model", BATCH_ARGS, "micro_batch"), ("data", LENGTH_ARGS, "seq_len"),
                                 ("model", LENGTH_ARGS, "seq_len")):
        arguments = _init_args(root, section)
        if arguments is None:
            continue
        for name in names:
            value = arguments.value(name)
            converted = (str(value) if isinstance(value, str) and value else None) if fact == "model" \
                else positive_int(value)
            if converted is not None:
                arguments.set(fact, converted, arguments.location(name), f"{section} {name}")
                break
    return [facts]


def _optimizer(root: ConfigReader) -> None:
    """``optimizer: {class_path: torch.optim.AdamW, init_args: {fused: true}}`` or ``optimizer: AdamW``
    (jsonargparse finds a bare name in ``torch.optim``)."""
    written = root.value("optimizer")
    path = written.get("class_path") if isinstance(written, dict) else written
    if not isinstance(path, str) or not path:
        return
    qualified = path if "." in path else f"torch.optim.{path}"
    name = OPTIMIZER_CLASSES.get(qualified)
    if name is None:
        return
    arguments = written.get("init_args") if isinstance(written, dict) else None
    if name == "adamw" and isinstance(arguments, dict) and arguments.get("fused") is True:
        name = "adamw-fused"
    keys = ("optimizer", "class_path") if isinstance(written, dict) else ("optimizer",)
    root.set("optimizer", name, root.location(*keys), f"optimizer: {path}")


def _devices(trainer: ConfigReader) -> None:
    """``devices: 4`` (a count, a list of ids, or "0,1,2") times ``num_nodes``; "auto" says nothing."""
    devices = trainer.value("devices")
    count = None
    if isinstance(devices, int) and not isinstance(devices, bool) and devices > 0:
        count = devices
    elif isinstance(devices, list) and devices:
        count = len(devices)
    elif isinstance(devices, str) and "," in devices and all(p.strip().isdigit() for p in devices.split(",") if p):
        count = len([p for p in devices.split(",") if p.strip()])
    elif isinstance(devices, str) and devices.strip().isdigit() and int(devices) > 0:
        count = int(devices)
    nodes = positive_int(trainer.value("num_nodes")) or 1
    if count is None:
        return
    where = trainer.location("devices")
    trainer.set("world_size", count * nodes, where, "trainer.devices" + (f" x num_nodes {nodes}" if nodes > 1 else ""))
    trainer.set("gpus_per_node", count, where, "trainer.devices")


def _strategy(trainer: ConfigReader) -> None:
    """``strategy: deepspeed_stage_2`` / ``fsdp``, or ``{class_path: lightning.pytorch.strategies.FSDPStrategy}``."""
    strategy = trainer.value("strategy")
    where = trainer.location("strategy")
    name = strategy if isinstance(strategy, str) else None
    if isinstance(strategy, dict) and isinstance(strategy.get("class_path"), str):
        name = strategy["class_path"].rsplit(".", 1)[-1]
        given = strategy.get("init_args")
        arguments: dict = given if isinstance(given, dict) else {}
        if name == "DeepSpeedStrategy":
            stage = arguments.get("stage", 2)
            if stage in (0, 1, 2, 3):
                trainer.set("zero_stage", stage, where, "trainer.strategy DeepSpeedStrategy")
            return
        if name == "FSDPStrategy":
            name = "fsdp"
    if name is None:
        return
    key = name.strip().lower()
    if key in LIGHTNING_DEEPSPEED:
        stage, optimizer, params = LIGHTNING_DEEPSPEED[key]
        trainer.set("zero_stage", stage, where, f"trainer.strategy: {name}")
        trainer.set("offload_optimizer", optimizer, where, f"trainer.strategy: {name}")
        trainer.set("offload_params", params, where, f"trainer.strategy: {name}")
    elif key in ("fsdp", "fsdp_full_shard"):
        trainer.set("fsdp", "full", where, f"trainer.strategy: {name}")

