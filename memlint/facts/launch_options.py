"""A launcher's command-line options, applied to the script it runs.

A script declares which options feed which facts (``RunFacts.cli_bindings``); each binding is
one of:

- ``"micro_batch"`` (any fact name): the option's value is the fact, converted from its text
  (an argparse ``--batch_size`` read into ``DataLoader(batch_size=args.batch_size)``);
- ``"hf:<field>"``: the option is a TrainingArguments-style field, read as ``hf_args.facts_for``
  reads it (every field of an ``HfArgumentParser`` script);
- ``"if:<fact>=<value>"`` / ``"ifnot:<fact>=<value>"``: a switch -- passing the option on
  (``--use_lora``, ``--q_lora True``) or off makes the script state ``fact = value``
  (``if args.gradient_checkpointing: model.gradient_checkpointing_enable()``);
- ``"is=<text>:<fact>=<value>"`` / ``"isnot=<text>:<fact>=<value>"``: the option's value equal (or
  not) to ``<text>`` makes the script state ``fact = value`` (``if args.train_mode == 'qlora':
  BitsAndBytesConfig(bnb_4bit_quant_type="nf4")``);
- ``"when:<fact>=<value>@<test>"`` / ``"whennot:..."``: the script states ``fact = value`` while a
  comparison of its options holds (fails) (``load_in_4bit=args.bits == 4``); the launch redoes it
  with its own values and the script's defaults for the rest: holding, it states the fact; failing
  where the defaults held, it takes back the script's own statement of it (``--bits 16``);
- ``"unless:<fact>=<value>"`` / ``"unlessnot:..."``: an option on (off) by default made the script
  state ``fact = value``; a launch turning it off (on) takes that statement back
  (``--use_lora False`` over ``use_lora: bool = True``);
- ``"unlessis=<text>:<fact>=<value>"`` / ``"unlessisnot=<text>:..."``: the option's default equal
  (not equal) to ``<text>`` made the script state ``fact = value``; a launch passing another value
  (that value) takes the statement back (``if adapter_name == "lora": LoraConfig(r=lora_r)`` with
  ``adapter_name="lora"``, launched with ``--adapter_name dora``);
- ``"calc:<binding>@<formula>"``: the script works the value of ``<binding>`` (either form above)
  out from this and other options (``gradient_accumulation_steps = batch_size //
  micro_batch_size``); the launch redoes it with its own options, the script's defaults for
  those it leaves, and its process count for ``WORLD_SIZE`` (``memlint.python.option_formulas``).

``torchrun ... train.py --batch_size 4`` then overrides the script's default with the launcher's
4, located in the launcher. Value-less flags arrive as ``"true"``; a binding prefixed ``"not:"``
belongs to an argparse ``store_false`` flag (``--no_ckpt`` sets its destination to False).
"""

from __future__ import annotations

from typing import Any, Callable

from memlint.facts import hf_args
from memlint.facts.plan import RunFacts
from memlint.model.provenance import Sourced
from memlint.model.vocabulary import ATTENTION, dtype_name, spread_device_map
from memlint.python import option_formulas
from memlint.python.file_entries import is_entry as is_file_entry
from memlint.python.option_formulas import Formula


def _float(value: Any) -> float | None:
    try:
        number = float(str(value))
    except ValueError:
        return None
    return number if number >= 0 else None


def _lower_in(*allowed: str) -> Callable[[Any], str | None]:
    def convert(value: Any) -> str | None:
        text = str(value).strip().lower()
        return text if text in allowed else None

    return convert


def _device_offloaded(value: Any) -> bool | None:
    text = str(value).strip().lower()
    if text in ("cpu", "nvme"):
        return True
    if text == "none":
        return False
    return hf_args._bool(value)


def _half(value: Any) -> str | None:
    name = dtype_name(str(value))
    return name if name in ("fp16", "bf16") else None


# plain fact -> converter for raw command-line text
_CONVERT: dict[str, Callable[[Any], Any]] = {
    "micro_batch": hf_args._int,
    "gradient_cache_chunk": hf_args._int,
    "seq_len": hf_args._int,
    "source_len": hf_args._int,
    "target_len": hf_args._int,
    "grad_accum": hf_args._int,
    "global_batch": hf_args._int,
    "world_size": hf_args._int,
    "gpus_per_node": hf_args._int,
    "zero_stage": hf_args._int,
    "lora_r": hf_args._int,
    "lora_dropout": _float,
    "lora_targets": hf_args.lora_target_names,
    "grad_ckpt": lambda v: None if hf_args._bool(v) is None else int(bool(hf_args._bool(v))),
    "model": lambda v: str(v) or None,
    "device_map": spread_device_map,
    "reference_model": lambda v: str(v) or None,
    "reward_model": lambda v: str(v) or None,
    "value_model": lambda v: str(v) or None,
    "teacher_model": lambda v: str(v) or None,
    "load_dtype": lambda v: dtype_name(str(v)),
    "half_model": _half,
    "autocast": _half,
    "attention": lambda v: ATTENTION.get(str(v), str(v) if str(v) in ("eager", "sdpa", "flash") else None),
    "mixed": _lower_in("bf16", "fp16", "no", "fp8"),
    "lightning_precision": lambda v: str(v).strip() or None,
    "quantization": _lower_in("nf4", "fp4", "int8"),
    "optimizer": lambda v: hf_args.FIELDS["optim"][1](v),
    "double_quant": hf_args._bool,
    "fused_loss": hf_args._bool,
    "ds_bf16": hf_args._bool,
    "ds_fp16": hf_args._bool,
    "offload_optimizer": _device_offloaded,
    "offload_params": _device_offloaded,
    "reduce_bucket": _float,
    "allgather_bucket": _float,
    "prefetch_bucket": _float,
    "max_live_parameters": _float,
}


def _switched_on(raw: str) -> bool | None:
    """Is an option passed as ``raw`` on? Flags arrive as "true"; numbers count when nonzero."""
    flag = hf_args._bool(raw)
    if flag is not None:
        return flag
    try:
        return float(raw) != 0
    except ValueError:
        return bool(raw.strip())


def _literal(text: str) -> Any:
    """The value of an ``if:`` binding as the script extractor encoded it."""
    if text in ("true", "false"):
        return text == "true"
    if text.startswith("[") and text.endswith("]"):  # a tuple of names: ``[q_proj,v_proj]``
        return tuple(text[1:-1].split(","))
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def facts_from_cli(script: RunFacts, launcher: RunFacts) -> dict[str, Sourced[Any]]:
    """The facts the launcher's options set in ``script`` (located in the launcher)."""
    out: dict[str, Sourced[Any]] = {}
    redone: set[str] = set()
    for option, raw in launcher.passed().items():
        note = raw.note if is_file_entry(option) else f"argument {option[1:]} on the command line" \
            if option.startswith("#") else f"{option[1:]} in the launch's environment" \
            if option.startswith("$") else f"--{option} on the command line"
        for binding in script.cli_bindings.get(option, ()):
            if binding.startswith("calc:"):
                redone.add(binding)
                applied, how = _calculated(binding, launcher)
                for name, value in applied.items():
                    out[name] = Sourced(value, raw.origin, f"{note}, as {how}")
                continue
            if binding.startswith(("when:", "whennot:")):
                name, value, formula, holds = _test(binding, launcher)
                if holds and name:
                    out[name] = Sourced(value, raw.origin, f"{note}, as {option_formulas.describe(formula)}")
                continue
            for name, value in _apply(binding, str(raw.value)).items():
                out[name] = Sourced(value, raw.origin, note)
    out.update({name: fact for name, fact in _by_process_count(script, launcher, redone).items() if name not in out})
    return out


def cleared_by_cli(script: RunFacts, launcher: RunFacts) -> frozenset[str]:
    """The facts ``script`` states only because an option is on by default, which the launcher
    turns off (qlora's ``load_in_4bit=args.bits == 4`` with ``bits: int = 4``, launched with
    ``--bits 16``): the script's statement is not the run's. What the launch itself states wins."""
    out: set[str] = set()
    for option, raw in launcher.passed().items():
        for binding in script.cli_bindings.get(option, ()):
            name, value = "", None
            if binding.removeprefix("not:").startswith(("unless:", "unlessnot:")):
                name, value = _taken_back(binding, str(raw.value))
            elif binding.startswith(("unlessis=", "unlessisnot=")):
                name, value = _taken_back_by_value(binding, str(raw.value))
            elif binding.startswith(("when:", "whennot:")):
                name, value, _, holds = _test(binding, launcher)
                if holds is not False or _test(binding, RunFacts(launcher.path, "shell"))[3] is not True:
                    continue
            stated = getattr(script, name, None) if name else None
            if isinstance(stated, Sourced) and stated.value == value:
                out.add(name)
    return frozenset(out - set(facts_from_cli(script, launcher)))


def _taken_back(binding: str, raw: str) -> tuple[str, Any]:
    """(fact, value) an ``unless:`` binding takes back for an option passed as ``raw``, else ("", None)."""
    on = _switched_on(raw)
    if binding.startswith("not:"):
        on = None if on is None else not on
        binding = binding[4:]
    prefix, _, rest = binding.partition(":")
    name, _, literal = rest.partition("=")
    if on is None or on != (prefix == "unlessnot"):
        return "", None
    return name, _literal(literal)


def _taken_back_by_value(binding: str, raw: str) -> tuple[str, Any]:
    """(fact, value) an ``unlessis=`` binding takes back for an option passed as ``raw``: a value
    other than the default's (``unlessisnot=``: the value the default avoided), else ("", None)."""
    head, _, rest = binding.partition(":")
    prefix, _, text = head.partition("=")
    name, _, literal = rest.partition("=")
    if (raw == text) == (prefix == "unlessis"):
        return "", None
    return name, _literal(literal)


def _test(binding: str, launcher: RunFacts) -> tuple[str, Any, Formula, bool | None]:
    """A ``when:`` binding's fact, its value, its test, and whether the test holds with the
    launch's options (the script's defaults for those it leaves); None when that is unknown."""
    prefix, _, rest = binding.partition(":")
    fact, _, text = rest.rpartition("@")
    name, _, literal = fact.partition("=")
    formula = option_formulas.decode(text)
    if formula is None:
        return "", None, ("number", 0), None
    holds = option_formulas.holds(formula, _passed(launcher),
                                  lambda variable, default: _environment(launcher, variable, default))
    if holds is not None and prefix == "whennot":
        holds = not holds
    return name, _literal(literal), formula, holds


def switched_references(script: RunFacts, launcher: RunFacts) -> list[Sourced[str]]:
    """The configs ``script`` names behind an option this launch switches (Chinese-Vicuna's
    ``deepspeed="sample/zero_config.json" if args.deepspeed else None``, launched with
    ``--deepspeed``): they are the run's, as if the launcher named them."""
    out = []
    given = launcher.passed()
    for options, prefix, reference in script.switched_references:
        for option in options:
            raw = given.get(option)
            on = _switched_on(str(raw.value)) if raw is not None else None
            if on is not None and on == (prefix == "if"):
                out.append(reference)
                break
    return out


def _by_process_count(script: RunFacts, launcher: RunFacts, redone: set[str]) -> dict[str, Sourced[Any]]:
    """The values a script works out from ``WORLD_SIZE`` (``args.batch_size // world_size``) that
    no passed option redid: the launch's process count fills them (a bare ``python`` launch sets
    none, so the script's fallback holds), located where the launch states it."""
    out: dict[str, Sourced[Any]] = {}
    stated = launcher.world_size or launcher.single_process
    if stated is None:
        return out
    for binding in sorted({b for bound in script.cli_bindings.values() for b in bound if b.startswith("calc:")} - redone):
        formula = option_formulas.decode(binding.partition("@")[2])
        if formula is None or "WORLD_SIZE" not in option_formulas.variables_of(formula):
            continue
        applied, how = _calculated(binding, launcher)
        for name, value in applied.items():
            out[name] = Sourced(value, stated.origin, f"{stated.note} (its WORLD_SIZE), as {how}")
    return out


def _calculated(binding: str, launcher: RunFacts) -> tuple[dict[str, Any], str]:
    """A ``calc:`` binding redone with the launch's values: the facts it sets, and the formula as
    text for their note."""
    target, _, text = binding[len("calc:"):].partition("@")
    formula = option_formulas.decode(text)
    if formula is None:
        return {}, ""
    value = option_formulas.compute(formula, _passed(launcher),
                                    lambda name, default: _environment(launcher, name, default))
    if value is None:
        return {}, ""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return _apply(target, str(value)), option_formulas.describe(formula)


def _passed(launcher: RunFacts) -> Callable[[tuple[str, ...]], Any]:
    """An option's number as the launch passes it, for a formula (None: not passed, so the
    script's default; NaN: passed with a value memlint cannot know, so is the result)."""

    given, unknown = launcher.passed(), launcher.passed_unknown()

    def passed(names: tuple[str, ...]) -> Any:
        for name in names:
            if name in unknown:
                return float("nan")
            raw = given.get(name)
            if raw is not None:
                number = option_formulas.number_in(str(raw.value))
                return float("nan") if number is None else number
        return None

    return passed


def _environment(launcher: RunFacts, name: str, default: Any) -> Any:
    """A variable the launcher sets (``WORLD_SIZE`` is its process count); under a bare ``python``
    launch none is set and the script's fallback holds."""
    stated = getattr(launcher, option_formulas.ENVIRONMENT[name], None)
    if stated is not None:
        return stated.value
    single = launcher.single_process
    return default if single is not None and single.value else None


def hidden_by_cli(script: RunFacts, launcher: RunFacts) -> frozenset[str]:
    """The facts of ``script`` that the launcher sets with a value it cannot know
    (``--per_device_train_batch_size $PER_DEVICE_TRAIN_BATCH_SIZE``): the script's default for
    them is not what runs, so it must not be judged as if it were."""
    out: set[str] = set()
    for option in launcher.passed_unknown():
        for binding in script.cli_bindings.get(option, ()):
            name = binding[4:] if binding.startswith("not:") else binding
            if name.startswith("calc:"):  # worked out from this option: unknown too
                name = name[len("calc:"):].partition("@")[0]
            if name.startswith("hf:"):
                target = hf_args.FIELDS.get(name[3:])
                if target is not None:
                    out.add(target[0])
            elif name.startswith(("if:", "ifnot:", "is=", "isnot=", "when:", "whennot:", "unless:", "unlessnot:",
                                  "unlessis=", "unlessisnot=")):
                out.add(name.partition(":")[2].partition("=")[0])
            else:
                out.add(name)
    return frozenset(out)


def unknown_micro_batch(launcher: RunFacts, hidden: frozenset[str]) -> Sourced[str] | None:
    """The option that passes the micro-batch with a value memlint cannot evaluate (VILA's
    ``--per_device_train_batch_size $PER_DEVICE_TRAIN_BATCH_SIZE``, computed by a sourced
    ``scripts/setups/train.sh`` as ``$((GLOBAL_TRAIN_BATCH_SIZE / NNODES / GPUS_PER_NODE /
    GRADIENT_ACCUMULATION_STEPS))`` with ``NNODES=${SLURM_JOB_NUM_NODES:-1}``): the run's
    micro-batch is unknown, neither the script's nor the library's default.

    Shell arithmetic over variables the environment fills (``${SLURM_JOB_NUM_NODES:-1}``) is
    not evaluated: its fallbacks are a developer's one node (2048 / 1 / 8 / 1 = 256 sequences a
    GPU), not what the cluster job that runs it computes."""
    for option, written in launcher.passed_unknown().items():
        field = hf_args.FIELDS.get(option)
        if (field is not None and field[0] == "micro_batch") or ("micro_batch" in hidden and "batch" in option
                                                                  and "eval" not in option):
            return Sourced(str(written.value), written.origin, written.note or f"--{option}")
    return None


def _apply(binding: str, raw: str) -> dict[str, Any]:
    if binding.startswith("not:"):
        on = _switched_on(raw)
        return {} if on is None else _apply(binding[4:], "false" if on else "true")
    if binding.startswith("hf:"):
        found = hf_args.facts_for(binding[3:], raw)
        found.pop("__reference__", None)  # --deepspeed ds.json: the launcher's own reference
        return found
    if binding.startswith(("is=", "isnot=")):
        head, _, rest = binding.partition(":")
        name, _, literal = rest.partition("=")
        if (raw == head.partition("=")[2]) != head.startswith("is="):
            return {}
        return {name: _literal(literal)}
    if binding.startswith(("if:", "ifnot:")):
        prefix, _, rest = binding.partition(":")
        name, _, literal = rest.partition("=")
        on = _switched_on(raw)
        if on is None or on != (prefix == "if"):
            return {}
        return {name: _literal(literal)}
    convert = _CONVERT.get(binding)
    if convert is None:
        return {}
    try:
        value = convert(raw)
    except (TypeError, ValueError):
        return {}
    return {} if value is None else {binding: value}
