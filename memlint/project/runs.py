"""The training runs a project's documents define: an entry document (a training script, an
Axolotl or LLaMA-Factory YAML, a launcher) with the documents it links (``deepspeed="ds.json"``,
``--deepspeed zero3.json``, ``--config_file accelerate.yaml``) merged into one plan, resolved
for the estimator, and judged on the GPU the settings or the project's infrastructure files name.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from memlint.documents import reads
from memlint.documents.kinds import ENTRY_KINDS, STANDALONE_KINDS, DocumentKind
from memlint.facts.launchers import OTHER_MODEL_CONFIG
from memlint.project.config_launchers import ConfigLaunchers
from memlint.model.provenance import Location, Sourced
from memlint.model.vocabulary import names_parallelism_config
from memlint.project.documents import DocumentStore
from memlint.project.script_config_files import as_option_text, entries_read
from memlint.project.links import LinkIndex
from memlint.project.stage_chains import StageChains

if TYPE_CHECKING:
    from memlint.facts.plan import RunFacts, TrainingPlan
    from memlint.facts.resolve import ResolvedRun, RunContext

MAX_LINK_DEPTH = 3
# configs a launcher may take from its caller (``finetune.py "$2"``)
_CONFIG_KINDS = frozenset({DocumentKind.HF_ARGS, DocumentKind.AXOLOTL, DocumentKind.LLAMAFACTORY,
                           DocumentKind.LLAMAFACTORY_V1, DocumentKind.TORCHTUNE, DocumentKind.COMPOSER,
                           DocumentKind.LIGHTNING_CLI})
# the keys that sign a DeepSpeed or Accelerate config (a text prefilter before parsing)
_STANDALONE_SIGNS = ("zero_optimization", "train_micro_batch_size_per_gpu", "train_batch_size", "distributed_type")
# ``from pkg.mod import train`` / ``from pkg.mod import (train, main as run)``: the module and the names
_IMPORTED = re.compile(r"^[ \t]*from[ \t]+([A-Za-z_][\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)", re.MULTILINE)
# ``from pkg.mod import x`` / ``from .mod import x``: the module, relative ones included
_ANY_FROM_IMPORT = re.compile(r"^[ \t]*from[ \t]+(\.*[A-Za-z_][\w.]*)[ \t]+import\b", re.MULTILINE)
# how far the modules that may test a quantization switch are followed from the script
MAX_SWITCH_HOPS = 4
MAX_SWITCH_MODULES = 200
# documents whose lines are commands: a value from one of them is passed by a launch
_LAUNCHING_KINDS = frozenset({DocumentKind.SHELL, DocumentKind.MARKDOWN, DocumentKind.MAKEFILE, DocumentKind.PYTHON,
                              DocumentKind.PYTHON_OTHER})
# what a module that trains writes: a backward pass, an optimizer, a Trainer or a train module
_TRAINS = re.compile(r"\.backward\(|\boptim\b|Optimizer|AdamW|\bTrainer\b|TrainModule|\.train\(|\.fit\(")
# a package's ``__init__.py`` that hands its names on from its modules (``from .angle import *``)
_REEXPORTS = re.compile(r"^[ \t]*from[ \t]+\.(\w+)[ \t]+import[ \t]+", re.MULTILINE)
_ENTRY_NAMES = re.compile(r"^(?:train\w*|main|run\w*|finetune\w*|fine_tune\w*|\w*_main|\w*Arguments|\w*Config)$")


class RunFinder:
    """Finds the runs a document takes part in, as an entry or linked from one, and the
    infrastructure GPU each is judged on (kept until invalidated)."""

    def __init__(self, documents: DocumentStore, links: LinkIndex) -> None:
        self.documents = documents
        self.links = links
        self._infrastructure: list | None = None  # the GPUs the project's infrastructure files request
        self.config_launchers = ConfigLaunchers(documents, links)
        self._unused: list[Path] | None = None  # DeepSpeed/Accelerate configs no document uses
        # a script's key -> what the project functions and classes it calls establish (and the
        # modules read for them), worked out once per run
        self._imported: dict[str, tuple[list, list[Path]]] = {}
        # a script's key -> the quantization switches of the project modules it reaches (and those modules)
        self._switches: dict[str, tuple[list, list[Path]]] = {}
        # a script's key -> the library arguments classes its parser gets through project subclasses
        # (and the modules read for them)
        self._library_arguments: dict[str, tuple[dict[str, str], list[Path]]] = {}
        # (module as imported, the importing file's folder, the folders above it) -> its file, and the
        # candidates probed for it: the imports of a package's files repeat, each resolved once per run
        self._module_files: dict[tuple, tuple[Path | None, list[tuple[str, bool]]]] = {}
        self._folders: dict[Path, list[Path]] = {}  # a file -> its folder and those above it, below the root
        # a later stage's model path -> the model of the earlier launch that writes it
        self.stage_chains = StageChains(documents.root, documents.facts, self.plan_for, documents.text_for_scan,
                                        documents.is_file)

    def invalidate(self) -> None:
        self._infrastructure = None
        self._unused = None
        self._imported.clear()
        self._switches.clear()
        self._library_arguments.clear()
        self._module_files.clear()
        self._folders.clear()
        self.stage_chains.invalidate()
        self.config_launchers.invalidate()

    def linked(self, facts: RunFacts, seen: set[str], depth: int = 0) -> list[RunFacts]:
        """Facts of every document ``facts`` references, transitively."""
        out: list[RunFacts] = []
        if depth >= MAX_LINK_DEPTH:
            return out
        for reference in facts.references:
            if (reference.note or "").endswith(OTHER_MODEL_CONFIG):
                continue  # a reward model's own DeepSpeed plugin: not the trained model's settings
            target = self.documents.resolve_reference(str(reference.value), facts.path)
            if target is None:
                if names_parallelism_config(reference.note or ""):
                    from memlint.facts.plan import RunFacts

                    # ``--deepspeed configs/ds_config_zero2.json``, a file moved away: a DeepSpeed
                    # run all the same, of a stage no file memlint can read states
                    out.append(RunFacts(facts.path, "missing", unread_parallelism=reference))
                continue
            key = self.documents.key(target)
            if key in seen or self._read_into_a_project_class(target):
                continue
            seen.add(key)
            for child in self.documents.facts(target):
                out.append(child)
                out.extend(self.linked(child, seen, depth + 1))
        return out

    def _entries_through(self, referrer: Path) -> list[RunFacts]:
        """The entries of the runs a referencing document takes part in: its own, or — for a
        script that a launcher starts (``torchrun train.py`` naming ``ds_config.json`` in its
        argparse defaults) — the launcher's, whose options and GPU count apply to the config too."""
        own = [f for f in self.documents.facts(referrer) if f.launches is not None or self.documents.kind(referrer) in ENTRY_KINDS]
        if self.documents.kind(referrer) == DocumentKind.MARKDOWN:
            own = [f for f in own if self._launches_project_script(f)]
        if own and all(f.launches is None for f in own):
            launchers = [
                f for launcher in self.links.referrers(referrer) if self.documents.key(launcher) != self.documents.key(referrer)
                for f in self.documents.facts(launcher)
                if f.launches is not None and self._same(self.documents.resolve_reference(str(f.launches.value), launcher),
                                                         self.documents.key(referrer))
            ]
            if launchers:
                return launchers
        if own and all(f.launches is None for f in own) and self.documents.kind(referrer) in _CONFIG_KINDS:
            handed = self._handed_to_project_trainer(referrer)
            if handed:
                return handed
        return own

    def _handed_to_project_trainer(self, config: Path) -> list[RunFacts]:
        """The launches that pass ``config`` to a script whose engine a class of its own project
        builds (LOMO's ``deepspeed src/train_lomo.py config/args_lomo.yaml``, ``LOMOTrainer``
        calling ``deepspeed.initialize``): the config's options are that engine's, so the configs
        it names run there, not under the Trainer its TrainingArguments-style fields suggest."""
        from memlint.facts.plan import RunFacts

        key = self.documents.key(config)
        out: list[RunFacts] = []
        for launcher in self.links.referrers(config):
            for facts in self.documents.facts(launcher):
                named = ([facts.bound_config] if facts.bound_config is not None else []) + list(facts.references)
                if facts.launches is None or not any(
                        self._same(self.documents.resolve_reference(str(n.value), launcher), key) for n in named):
                    continue
                script = self.documents.resolve_reference(str(facts.launches.value), launcher)
                if script is None:
                    continue
                _, overrides = self._imported_facts(RunFacts(str(script), "python"), facts, {})
                if "framework" in overrides:
                    out.append(facts)
        return out

    def _launches_training(self, facts: RunFacts) -> bool:
        """Does a launch start a script that trains (not a job submitter or a data step)?"""
        if facts.launches is None:
            return False
        script = self.documents.resolve_reference(str(facts.launches.value), facts.path)
        return script is None or any(f.launches is None for f in self.documents.facts(script))

    def _launches_project_script(self, facts: RunFacts) -> bool:
        """A command in Markdown is a launch only of a script of this project that trains, itself or
        through the project's own modules: READMEs also show installs, preprocessing steps and
        other repositories' commands. Every config it names must exist too: a README's
        ``config_{grok,anthropic}.yaml`` or ``<your_config>.yaml`` is a pattern, not a run."""
        script = self.documents.resolve_reference(str(facts.launches.value), facts.path) if facts.launches else None
        named = [self.documents.resolve_reference(str(r.value), facts.path) for r in facts.references]
        if script is None and facts.launches is not None and " -m " in (facts.launches.note or "") and named:
            # a framework's module run on a config of the project (Online-RLHF's README: `torchrun
            # --nproc_per_node 8 -m axolotl.cli.train llama3-8b-it.yaml`): the config is the run
            return all(n is not None for n in named) and any(
                n is not None and DocumentKind(self.documents.kind(n)) in _CONFIG_KINDS for n in named)
        if script is None or not (self.documents.facts(script) or self._delegates_to_project_module(script)):
            return False
        return all(n is not None for n in named)

    def _same(self, path: Path | None, key: str) -> bool:
        return path is not None and self.documents.key(path) == key

    def plan_for(self, facts: RunFacts) -> TrainingPlan:
        """The plan of a run whose entry is ``facts``; a launcher's script joins with its options."""
        from memlint.facts.plan import merge

        seen = {self.documents.key(facts.path)}
        overrides: dict = {}
        hidden: frozenset[str] = frozenset()
        entry = facts
        linked: list[RunFacts] = []
        script: Path | None = None  # the script a launcher runs
        if facts.launches is not None:
            script = self.documents.resolve_reference(str(facts.launches.value), facts.path)
            script_facts_found = self.documents.facts(script) if script is not None else []
            if script is not None:
                seen.add(self.documents.key(script))
                for script_facts in script_facts_found:
                    if script_facts.launches is not None:
                        continue  # a command in the script's docstring: another run of it
                    overrides, hidden = self._join_launched(script_facts, facts, seen, linked)
            if not script_facts_found and script is not None:
                # FastChat's train_mem.py: ``from fastchat.train.train import train; train()`` --
                # the imported module's facts and option definitions are the script's
                for module_facts in self._delegated_facts(script):
                    seen.add(self.documents.key(module_facts.path))
                    overrides, hidden = self._join_launched(module_facts, facts, seen, linked)
                    script_facts_found = [module_facts]
            if not script_facts_found and script is not None:
                # LOMO's train_lomo.py: the script only parses its options and hands them to a
                # trainer class of its own project (``LOMOTrainer``), which builds the engine
                from memlint.facts.plan import RunFacts

                helpers, found = self._imported_facts(RunFacts(str(script), "python"), facts, overrides)
                # a helper that only loads a model (DeepSpeed-Chat's ``create_hf_model`` in
                # ``prompt_eval.py``) trains nothing: the script is no run of its own
                if "framework" in found or any(h.framework is not None for h in helpers):
                    # what the script itself states (its model, its parser's options) joins too:
                    # Qwen2-VL-Finetune loads the model in ``train_sft.py`` and hands it to
                    # ``QwenSFTTrainer``, a Trainer subclass of its own ``src/trainer``
                    handed = self._handed_facts(script) if _trainer_subclass(helpers) else []
                    if handed:
                        # the launch's options first, read as a training config: the script's parser
                        # may be a project subclass whose options no binding names (SPPO's
                        # H4ArgumentParser reads `--beta`, `--optim` over its YAML)
                        from memlint.configs.command_line import options_as_config

                        options = options_as_config(facts)
                        if options is not None:
                            linked.append(options)
                        overrides, hidden = self._join_launched(handed[0], facts, seen, linked)
                        script_facts_found = handed
                    else:
                        linked.extend(helpers)
                        overrides = found
                else:
                    # a class that only shards the run (open-instruct's GRPO learners build OLMo-core's
                    # data-parallel config): its form is the run's, the options still state the rest
                    linked.extend(h for h in helpers if h.parallel_library is not None)
            if not script_facts_found and (script is None or (
                    self._delegates_to_project_module(script) and not self._parses_its_own_options(script, facts))):
                # a framework's entry point outside the project (installed with the framework, run
                # as a module), or a script in the project that trains through an import of the
                # project's own code (FastChat's train_mem.py calls fastchat.train.train.train()):
                # its options still state the run when they read as a training config. A script
                # that trains nothing and calls none of the project's code (a tokenization step)
                # states no run, whatever its options are named.
                from memlint.configs.command_line import options_as_config

                # (a script under an absolute path of the author's machine, ``${BASE_PATH}/train.py``
                # with BASE_PATH=/home/MiniLLM, is the author's own code: its options are its own)
                authors = script is None and facts.launches is not None and str(facts.launches.value).startswith("/")
                options = options_as_config(facts, unseen_script=authors)
                if options is not None:
                    linked.append(options)
                    if script is not None:
                        linked.extend(self._project_argument_defaults(script, facts, options))
            hydra = self._hydra_overrides(facts, script) if facts.overrides else None
            if hydra is not None:  # ``actor_rollout_ref.model.path=...``: the run's own values
                from memlint.facts.plan import RunFacts

                stated = hydra.stated()
                linked.append(RunFacts(hydra.path, "shell", anchor=hydra.anchor, framework=stated.pop("framework")))
                overrides = {**overrides, **stated}
        elif facts.kind == "python":
            # a script run as it is, reading its arguments file from the option's default, and
            # the entries of its own config files (``script_config_files``)
            from memlint.facts.plan import RunFacts

            arguments = self.arguments_file(facts, None)
            passed: frozenset[str] = frozenset()
            entries = entries_read(self.documents, facts, None)
            if arguments is not None or entries:
                file_args = self.config_as_options(arguments) if arguments is not None else {}
                overrides = apply_cli(facts, RunFacts(facts.path, "shell", cli_args={**file_args, **entries}))
                passed = frozenset(file_args)
            if arguments is not None:
                linked.append(self._arguments_document(arguments, file_args))
                linked.extend(self.linked(linked[-1], seen))
            linked.extend(self._imported_defaults(self._with_library_arguments(facts), passed))
            helpers, overrides = self._imported_facts(facts, None, overrides)
            linked.extend(helpers)
        linked.extend(self.linked(facts, seen))
        plan = merge(entry, linked, overrides, hidden - set(overrides))
        if plan.get("quantization") is None:
            switched = self._switched_quantization(facts)
            if switched is not None:
                plan = merge(entry, linked, {**overrides, "quantization": switched}, hidden - set(overrides))
        self._add_pinned_defaults(plan, script)
        self._add_trained_parameters(plan)
        if facts.launches is not None and plan.get("micro_batch") is None:
            from memlint.facts.launch_options import unknown_micro_batch

            unknown = unknown_micro_batch(facts, hidden)
            if unknown is not None:  # passed, but not known: no default stands in for it
                plan.facts["micro_batch_unknown"] = unknown
        return plan

    def _add_pinned_defaults(self, plan: TrainingPlan, launched: Path | None) -> None:
        """The attention and load dtype the project's pinned transformers (or torch) release
        decides where no file of the run names them (``memlint.facts.pinned_defaults``): eager
        attention unless a script of the run patches it (the launched script may only patch it and
        hand over to the module that trains: FastChat's train_mem.py), fp32 weights unless the
        framework chooses the dtype itself (TRL, Axolotl, LLaMA-Factory)."""
        from memlint.facts.pinned_defaults import (
            patches_attention,
            pinned_auto_bf16,
            pinned_eager_attention,
            pinned_fp32_load,
            pinned_trl_predates,
            pinned_without_fsdp_upcast,
        )

        if not plan.entry:
            return
        unfilled = plan.get("ds_bf16_unfilled")
        if unfilled is not None and plan.get("ds_bf16") is None:
            why = pinned_auto_bf16(self.documents.root, plan.entry)
            if why is not None:  # LLM-Blender's zero_2_bf16.json under deepspeed==0.9.2
                plan.facts["ds_bf16"] = Sourced(True, unfilled.origin, f"{unfilled.note}: {why}")
        if not _transformers_model(plan):
            return
        if plan.get("attention") is None:
            pinned = pinned_eager_attention(self.documents.root, plan.entry)
            scripts = [Path(d) for d in plan.documents if str(d).endswith(".py")] + ([launched] if launched else [])
            if pinned is not None and not patches_attention(self.documents.text_for_scan(s) for s in scripts):
                plan.facts["pinned_attention"] = pinned
        if all(plan.get(name) is None for name in ("load_dtype", "load_dtype_written", "half_model", "quantization")) \
                and plan.value("framework") not in ("trl", "axolotl", "llamafactory"):
            fp32 = pinned_fp32_load(self.documents.root, plan.entry)
            if fp32 is not None:
                plan.facts["pinned_load_dtype"] = fp32
        if plan.value("framework") == "trl":
            predated = pinned_trl_predates(self.documents.root, plan.entry)
            if predated is not None:
                plan.facts["pinned_trl_predates"] = predated
                for name in predated.value:  # a TRL config file's extractor filled TRL's default in
                    filled = plan.get(name)
                    if filled is not None and filled.origin is None and (filled.note or "").startswith("TRL default"):
                        del plan.facts[name]
        if plan.get("fsdp") is not None:
            kept = pinned_without_fsdp_upcast(self.documents.root, plan.entry)
            if kept is not None:
                plan.facts["pinned_no_fsdp_upcast"] = kept

    def _add_trained_parameters(self, plan: TrainingPlan) -> None:
        """The ``unfrozen_parameters`` of a Spectrum file the run passes its script
        (``spectrum_config_path``, Spectrum's own key, in a recipe or on the command line), as the
        selection that trains, whether or not memlint saw the script's unfreezing (an unfreeze
        under ``if args.spectrum_config_path:`` is bound to an option a recipe's key does not
        reach). The path is read as the run's working directory would: from the entry's folder,
        the folders above it, the project root."""
        from memlint.configs.axolotl import regex_list

        path = plan.get("trained_parameters_file")
        if path is None or plan.get("trained_parameters") is not None or not plan.entry:
            return
        target = self.documents.resolve_reference(str(path.value), plan.entry)
        structured = self.documents.parsed(target).structured if target is not None else None
        if target is None or structured is None or not structured.ok:
            return
        reads.document(self.documents.key(target), self.documents.digest(target))
        data = structured.value
        patterns = regex_list(data.get("unfrozen_parameters")) if isinstance(data, dict) else None
        if patterns is not None:
            plan.facts["trained_parameters"] = Sourced(patterns, path.origin, f"unfrozen_parameters of {path.value}")

    def _hydra_overrides(self, launcher: RunFacts, script: Path | None) -> RunFacts | None:
        """The facts a launch's Hydra/OmegaConf overrides state (``memlint.configs.hydra_overrides``)
        when the script it runs parses them, over the values of the config the script composes
        (``@hydra.main(config_path=..., config_name=...)``) or the launch names (``config=x.yaml``)."""
        from memlint.configs import hydra_overrides
        from memlint.facts.launchers import CONFIG_OPTIONS_NOTE

        text: str | None = None
        if script is not None:
            try:
                text = self.documents.document(script).text
            except (OSError, ValueError):
                return None
        assert launcher.launches is not None
        if not hydra_overrides.is_entry(text, str(launcher.launches.value)):
            return None
        named = launcher.overrides.get("config")
        # ``--config-path P --config-name X`` (the launcher resolved it), or ``--config-name X`` alone
        folder_and_name = next((r for r in launcher.references if r.note == CONFIG_OPTIONS_NOTE), None)
        name = launcher.cli_args.get("config_name") or launcher.cli_args.get("cn")
        config: Path | None = None
        if named is not None and named.value is not None and str(named.value).endswith((".yaml", ".yml")):
            config = self.documents.resolve_reference(str(named.value), launcher.path)
        elif folder_and_name is not None:
            config = self.documents.resolve_reference(str(folder_and_name.value), launcher.path)
        elif script is not None and text is not None:
            relative = hydra_overrides.config_named(text, str(name.value) if name is not None else None)
            candidate = script.parent / relative if relative is not None else None
            config = candidate if candidate is not None and candidate.is_file() else None
        defaults = {}
        if config is not None:
            structured = self.documents.parsed(config).structured
            if structured is not None and structured.ok:
                reads.document(self.documents.key(config), self.documents.digest(config))
                defaults = hydra_overrides.config_values(
                    structured.value, lambda path: Location(str(config), structured.range_of(path)), config.name)
        return hydra_overrides.hydra_facts(launcher, defaults)

    def _switched_quantization(self, facts: RunFacts) -> Sourced[str] | None:
        """The quantization a switch of the project's arguments classes turns on in its model code
        (LMFlow's ``--use_qlora 1``, tested in ``hf_model_mixin.py``; ``memlint.facts.model_switches``),
        for the option values of this run: the launch's, else the classes' defaults."""
        from memlint.facts.imported_arguments import imported_defaults
        from memlint.facts.model_switches import quantization

        script: Path | None = Path(facts.path) if facts.kind == "python" else None
        if facts.launches is not None:
            script = self.documents.resolve_reference(str(facts.launches.value), facts.path)
        if script is None or self.documents.kind(script) != "python":
            return None
        found, _ = self._model_switches(script)
        if not found:
            return None
        try:
            text = self.documents.document(script).text
        except (OSError, ValueError):
            return None
        values: dict[str, Sourced[str]] = dict(imported_defaults(text, self._module_source(script)))
        if facts.launches is not None:
            values.update(facts.cli_args)
        chosen = quantization(found, {option: str(value.value) for option, value in values.items()})
        if chosen is None:
            return None
        switch, loaded = chosen
        said = values[switch.option]
        where = f"{Path(switch.where.path).name}:{switch.where.range.start.line}"
        return Sourced(loaded, said.origin, f"--{switch.option} {said.value}: {where} loads the model "
                                            f"with BitsAndBytesConfig ({loaded}) when it is set")

    def _model_switches(self, script: Path) -> tuple[list, list[Path]]:
        """The quantization switches of the project modules ``script`` imports, and of those they
        import (up to ``MAX_SWITCH_HOPS`` hops: LMFlow's ``examples/finetune.py`` reaches
        ``hf_model_mixin.py`` through ``auto_model.py`` and ``hf_decoder_model.py``)."""
        from memlint.facts.model_switches import switches

        key = self.documents.key(script)
        if key not in self._switches:
            modules: list[tuple[str, str]] = []
            read: list[Path] = []
            seen = {key}
            frontier = [script]
            for _ in range(MAX_SWITCH_HOPS):
                following: list[Path] = []
                for path in frontier:
                    try:
                        text = self.documents.document(path).text
                    except (OSError, ValueError):
                        continue
                    for module in _ANY_FROM_IMPORT.findall(text):
                        target = self._module_file(module, path)
                        if target is None or self.documents.key(target) in seen or len(seen) > MAX_SWITCH_MODULES:
                            continue
                        seen.add(self.documents.key(target))
                        try:
                            modules.append((str(target), self.documents.document(target).text))
                        except (OSError, ValueError):
                            continue
                        read.append(target)
                        following.append(target)
                frontier = following
            self._switches[key] = (switches(modules), read)
        found, read = self._switches[key]
        for target in read:
            reads.document(self.documents.key(target), self.documents.digest(target))
        return found, read

    def _trains_through_project_trainer(self, module: Path) -> list[RunFacts]:
        """The facts of a module that trains only through a trainer class of its own project (a
        ``Trainer`` subclass it imports), none for any other."""
        from memlint.facts.plan import RunFacts

        helpers, _ = self._imported_facts(RunFacts(str(module), "python"), None, {})
        return self._handed_facts(module) if _trainer_subclass(helpers) else []

    def _handed_facts(self, script: Path) -> list[RunFacts]:
        """The facts of a script that trains only through a trainer class of its own project
        (``memlint.facts.script.handed_to_project_trainer``); none for one that is not Python."""
        from memlint.facts.script import handed_to_project_trainer

        if self.documents.kind(script) != "python":
            return []
        try:
            return handed_to_project_trainer(self.documents.module(script))
        except (OSError, ValueError):
            return []

    def _join_launched(self, script: RunFacts, launcher: RunFacts, seen: set[str],
                       linked: list[RunFacts]) -> tuple[dict, frozenset[str]]:
        """Add a launched script's facts (or those of the module it delegates to) to ``linked``;
        returns what the launcher states over them (its options, the config it binds) and the
        script defaults its options hide."""
        arguments = self.arguments_file(script, launcher)
        if arguments is not None:  # the file the launch names (or the script's default) is its command line
            option = str(script.arguments_file.value) if script.arguments_file is not None else ""
            kept = {k: v for k, v in launcher.cli_args.items() if k != option}
            file_args = self.config_as_options(arguments)
            merged = {**file_args, **kept} if script.arguments_under_cli else {**kept, **file_args}
            launcher = replace(launcher, cli_args=merged, bound_config=None)
            linked.append(self._arguments_document(arguments, file_args))
            linked.extend(self.linked(linked[-1], seen))
        entries = entries_read(self.documents, script, launcher)
        if entries:  # what the script reads from its own config files, as options the launch passes
            launcher = replace(launcher, cli_args={**launcher.cli_args, **entries})
        script = self._with_library_arguments(script)
        overrides = {**self._bound_config_facts(launcher), **apply_cli(script, launcher)}
        hidden = hidden_cli(script, launcher)
        linked.append(without_cleared(script, launcher))
        # the options the launch passes (or its arguments file sets) replace the dataclasses' defaults
        linked.extend(self._imported_defaults(script, frozenset(launcher.cli_args) | frozenset(launcher.cli_unknown)))
        helpers, overrides = self._imported_facts(script, launcher, overrides)
        linked.extend(helpers)
        for helper in helpers:
            hidden |= hidden_cli(helper, launcher)
        linked.extend(self.linked(script, seen))
        from memlint.facts.launch_options import switched_references

        switched = switched_references(script, launcher)
        if switched:
            linked.extend(self.linked(replace(script, references=switched), seen))
        return overrides, hidden

    def arguments_file(self, script: RunFacts, launcher: RunFacts | None) -> Path | None:
        """The file a script parses as all its arguments (``parse_json_file(json_file=
        args.train_args_file)``): the one the launcher passes with that option, else the option's
        default; None when the script reads no such file or it is not there."""
        option = script.arguments_file
        if option is None or option.value == "1":  # sys.argv[1]: a launch's positional config links it
            return None
        written: Sourced[str] | None = None
        from_path = script.path
        if launcher is not None:
            written = launcher.cli_args.get(str(option.value))
            if written is None and str(option.value) in launcher.cli_unknown:
                return None  # a file the launcher cannot know
            from_path = launcher.path
        if written is None:
            written, from_path = script.arguments_default, script.path
        return self.documents.resolve_reference(str(written.value), from_path) if written is not None else None

    @staticmethod
    def _arguments_document(arguments: Path, options: dict[str, Sourced[str]]) -> RunFacts:
        """The arguments file as a document of the run: the DeepSpeed or FSDP config it names
        (``"deepspeed": "./train_args/ds_z3_config.json"``) is linked from it."""
        from memlint.facts.plan import RunFacts

        references = [v for k, v in options.items() if k in ("deepspeed", "fsdp_config")
                      and str(v.value).lower().endswith((".json", ".yaml", ".yml"))]
        return RunFacts(str(arguments), "hf-args", references=references)

    def config_as_options(self, config: Path) -> dict[str, Sourced[str]]:
        """A JSON/YAML file's top-level scalar keys as command-line text, located at each value."""
        structured = self.documents.parsed(config).structured
        if structured is None or not structured.ok or not isinstance(structured.value, dict):
            return {}
        reads.document(self.documents.key(config), self.documents.digest(config))
        out: dict[str, Sourced[str]] = {}
        for key, value in structured.value.items():
            text = as_option_text(value)
            if text is None:
                continue
            out[str(key)] = Sourced(text, Location(str(config), structured.range_of((key,))),
                                    f"{key} in {config.name}")
        return out

    def _bound_config_facts(self, facts: RunFacts) -> dict:
        """The facts of the config a caller bound to the launcher's positional argument: the
        script parses it, so its fields replace the script's defaults."""
        if facts.bound_config is None:
            return {}
        config = self.documents.resolve_reference(str(facts.bound_config.value), facts.path)
        stated: dict = {}
        for config_facts in self.documents.facts(config) if config is not None else []:
            for name, fact in config_facts.stated().items():
                if name not in ("framework", "trains"):  # the script decides how it trains
                    stated.setdefault(name, fact)
        return stated

    def _with_library_arguments(self, script: RunFacts) -> RunFacts:
        """``script`` with the options bound that a project subclass of a library arguments class,
        imported by its parser, takes (``memlint.facts.imported_arguments.bind_library_arguments``)."""
        from memlint.facts.imported_arguments import bind_library_arguments, library_argument_bases

        key = self.documents.key(script.path)
        if key not in self._library_arguments:
            source = self._module_source(Path(script.path))
            read: list[Path] = []

            def recorded(module: str) -> tuple[str, str] | None:
                found = source(module)
                if found is not None:
                    read.append(Path(found[0]))
                return found

            try:
                text = self.documents.document(script.path).text
            except (OSError, ValueError):
                text = ""
            self._library_arguments[key] = (library_argument_bases(text, recorded), read)
        bases, read = self._library_arguments[key]
        for target in read:
            reads.document(self.documents.key(target), self.documents.digest(target))
        return bind_library_arguments(script, bases)

    def _imported_defaults(self, script: RunFacts, passed: frozenset[str] = frozenset()) -> list[RunFacts]:
        """What the argument dataclasses a script imports from the project give its options by
        default (``from myproj.arguments import DataArguments`` with ``max_seq_length: int = 4096``),
        read through the script's bindings as facts of the module that writes them; below
        anything the script, a launcher or a config states."""
        from memlint.facts.hf_args import ADAPTER_PARAMETERS, has_adapter_switch
        from memlint.facts.imported_arguments import imported_constants, imported_defaults
        from memlint.facts.launch_options import facts_from_cli
        from memlint.facts.plan import RunFacts

        if not script.cli_bindings:
            return []
        try:
            text = self.documents.document(script.path).text
        except (OSError, ValueError):
            return []

        source = self._module_source(Path(script.path))
        defaults = imported_defaults(text, source)
        for option, fact in imported_constants(script.option_constants, source).items():
            defaults.setdefault(option, fact)
        # beside a boolean adapter switch (``use_lora: bool = False``), a default rank is a parameter
        # of an adapter the project's code may build, not the choice of one
        skipped = ADAPTER_PARAMETERS if has_adapter_switch({o: str(f.value) for o, f in defaults.items()}) else ()
        defaults = {option: fact for option, fact in defaults.items() if option not in passed and option not in skipped}
        if not defaults:
            return []
        command = RunFacts(script.path, "shell")
        command.cli_args = defaults
        notes = {d.origin: d.note for d in defaults.values() if d.origin is not None}
        stated = script.stated()
        by_module: dict[str, RunFacts] = {}
        for name, fact in facts_from_cli(script, command).items():
            if name in stated or fact.origin is None:
                continue
            holder = by_module.setdefault(fact.origin.path, RunFacts(fact.origin.path, "python"))
            setattr(holder, name, Sourced(fact.value, fact.origin, notes.get(fact.origin, fact.note)))
        return list(by_module.values())

    def _module_source(self, script: Path) -> Callable[[str], tuple[str, str] | None]:
        """A module name as ``script`` imports it -> (its path, its text), or None when it is not a
        file of the project; each module read is recorded for the cache."""

        def source(module: str) -> tuple[str, str] | None:
            target = self._module_file(module, script)
            if target is None:
                return None
            try:
                document = self.documents.document(target)
            except (OSError, ValueError):
                return None
            reads.document(self.documents.key(target), self.documents.digest(target))
            return str(target), document.text

        return source

    def _project_argument_defaults(self, script: Path, launcher: RunFacts, options: RunFacts) -> list[RunFacts]:
        """A project script whose arguments classes live in the project's modules (LMFlow's
        ``examples/dpo_train.py`` parses ``lmflow.args`` classes, one chosen from a dict of
        classes): their defaults are the command line it gets by default, read as a config below
        the launch's options. A class memlint cannot read leaves the TrainingArguments defaults
        assumptions (``options.unread_arguments``)."""
        from memlint.configs.command_line import options_as_config
        from memlint.facts.hf_args import MODEL_CODE_FIELDS
        from memlint.facts.imported_arguments import imported_defaults, unread_parser_classes
        from memlint.facts.plan import RunFacts

        try:
            text = self.documents.document(script).text
        except (OSError, ValueError):
            return []

        source = self._module_source(script)
        unread = unread_parser_classes(text, source)
        if unread:
            options.unread_arguments = Sourced(", ".join(unread), launcher.anchor,
                                               f"the arguments classes of {Path(script).name}")
        passed = set(launcher.cli_args) | set(launcher.cli_unknown)
        by_module: dict[str, dict[str, Sourced[str]]] = {}
        for option, fact in imported_defaults(text, source).items():
            # what only the project's model code reads (an adapter's rank, a 4-bit switch) is
            # decided there, not by a default
            if option not in passed and option not in MODEL_CODE_FIELDS and fact.origin is not None:
                by_module.setdefault(fact.origin.path, {})[option] = fact
        out = []
        for path, defaults in by_module.items():
            found = options_as_config(RunFacts(path, "shell", anchor=launcher.anchor, cli_args=defaults,
                                               launches=launcher.launches))
            if found is not None:
                found.framework = None  # the launch's options say which framework runs
                out.append(found)
        return out

    def _imported_facts(self, script: RunFacts, launcher: RunFacts | None,
                        overrides: dict) -> tuple[list[RunFacts], dict]:
        """What the project functions and classes a script imports and calls establish
        (``memlint.facts.imported_facts``): their facts, below the script's own; the script's
        defaults for the options they read, and the launcher's options, applied to them."""
        from memlint.facts.imported_facts import imported_facts
        from memlint.facts.launch_options import facts_from_cli
        from memlint.facts.plan import RunFacts

        key = self.documents.key(script.path)
        if key not in self._imported:
            read: list[Path] = []

            def parse(module: str):
                target = self._module_file(module, Path(script.path))
                if target is None or self.documents.key(target) == key:
                    return None
                read.append(target)
                try:
                    return self.documents.module(target)
                except (OSError, ValueError):
                    return None

            try:
                found = imported_facts(self.documents.module(script.path), parse)
            except (OSError, ValueError):
                found = []
            self._imported[key] = (found, read)
        found, read = self._imported[key]
        for target in read:
            reads.document(self.documents.key(target), self.documents.digest(target))
        passed = frozenset(launcher.cli_args) | frozenset(launcher.cli_unknown) if launcher is not None else frozenset()
        linked: list[RunFacts] = []
        combined = dict(overrides)
        for imported in found:
            defaults = {option: fact for option, fact in imported.defaults.items() if option not in passed}
            if defaults:  # what the script's defaults make the helper do, located in the script
                holder = RunFacts(script.path, "python")
                for name, fact in facts_from_cli(imported.facts, RunFacts(script.path, "shell",
                                                                          cli_args=defaults)).items():
                    setattr(holder, name, Sourced(fact.value, fact.origin, f"{fact.note} (read in "
                                                  f"{Path(imported.facts.path).name})"))
                linked.append(holder)
            linked.append(without_cleared(imported.facts, launcher) if launcher is not None else imported.facts)
            if launcher is not None:
                combined = {**apply_cli(imported.facts, launcher), **combined}
            entries = entries_read(self.documents, imported.facts, launcher)
            if entries:  # what the script hands the helper from its own config file (``load_in_4bit=cfg[...]``)
                combined = {**apply_cli(imported.facts, RunFacts(script.path, "shell", cli_args=entries)), **combined}
            combined = {**imported.overrides, **combined}
        return linked, combined

    def _launched_through_delegate(self, module: Path) -> list[RunFacts]:
        """The launches of a sibling script that only prepares the process and hands over to this
        module (FastChat's ``train_mem.py`` patches the attention, then calls ``train.train()``;
        LLaVA's and ToolBench's copies, ``train_xformers.py``): the module runs as they launch it,
        not alone with its defaults. Siblings named after the module (``train_*.py``) only."""
        try:
            siblings = sorted(p for p in module.parent.glob(f"{module.stem}_*.py") if p.is_file())
        except OSError:
            return []
        found: list[RunFacts] = []
        for sibling in siblings:
            if self.documents.facts(sibling):
                continue  # a script with a run of its own
            delegated = self._delegated_facts(sibling)
            if not delegated or self.documents.key(delegated[0].path) != self.documents.key(module):
                continue
            found.extend(
                f for launcher in self.links.referrers(sibling) for f in self.documents.facts(launcher)
                if f.launches is not None
                and self._same(self.documents.resolve_reference(str(f.launches.value), launcher), self.documents.key(sibling)))
        return found

    def _delegated_facts(self, script: Path, depth: int = 0) -> list[RunFacts]:
        """The run a script starts by calling an entry point it imports from the project
        (``from fastchat.train.train import train`` then ``train()``; ``from pkg.cli import main``):
        the facts of that module's run, followed through modules that only delegate again."""
        if depth >= MAX_LINK_DEPTH:
            return []
        try:
            text = self.documents.document(script).text
        except (OSError, ValueError):
            return []
        for module, names in _IMPORTED.findall(text):
            called = [n for n in _imported_names(names) if _ENTRY_NAMES.match(n[0])
                      and _calls(text, n[1])]
            if not called:
                continue
            target = self._module_file(module, script)
            if target is None or self.documents.key(target) == self.documents.key(script):
                continue
            found = [f for f in self.documents.facts(target) if f.launches is None and is_entry(f)]
            if found:
                return found[:1]
            handed = self._trains_through_project_trainer(target)
            if handed:  # NExT-GPT's train_mem.py calls train.train(), which hands NextGPTTrainer its model
                return handed[:1]
            deeper = self._delegated_facts(target, depth + 1)
            if deeper:
                return deeper
        return []

    def _module_file(self, module: str, script: Path) -> Path | None:
        """``pkg.mod`` -> ``pkg/mod.py`` (or ``pkg/mod/__init__.py``) under the project root, a
        ``src/`` folder, the script's own folder (``from train import main`` beside it), or a
        folder between it and the root. Found once per folder; each later file that asks records
        the same probes (``reads``: what its cached result depends on)."""
        key = (module, Path(script).parent, tuple(self._folders_between(script)))
        known = self._module_files.get(key)
        if known is None:
            with reads.paused():
                probed: list[tuple[str, bool]] = []
                known = self._module_files[key] = (self._find_module_file(module, script, probed), probed)
        for path, exists in known[1]:
            reads.probe(path, exists)
        return known[0]

    def _find_module_file(self, module: str, script: Path, probed: list[tuple[str, bool]]) -> Path | None:
        if module.startswith("."):  # ``from .consts import X``: beside the script, ``..`` one up
            dots = len(module) - len(module.lstrip("."))
            relative = Path(script).parents[dots - 1] if dots <= len(Path(script).parents) else None
            parts = [p for p in module.lstrip(".").split(".") if p]
            bases: tuple[Path, ...] = (relative,) if relative is not None and parts else ()
        else:  # a folder between the script and the root may be a ``src/`` layout's (VLM-R1's
            # ``src/open-r1-multimodal/src/open_r1/grpo_jsonl.py`` imports ``open_r1.trainer``)
            parts = module.split(".")
            bases = (self.documents.root, self.documents.root / "src", Path(script).parent,
                     *self._folders_between(script)[1:])
        for base in bases:
            for candidate in (base.joinpath(*parts).with_suffix(".py"), base.joinpath(*parts, "__init__.py")):
                exists = self.documents.is_file(candidate)
                probed.append((os.path.abspath(candidate), exists))
                if exists:
                    return candidate
        return None

    def _parses_its_own_options(self, script: Path, launcher: RunFacts) -> bool:
        """Does ``script`` parse every option the launch passes into argument classes of its own
        that extend no ``TrainingArguments`` (``memlint.facts.project_arguments.script_own_options``),
        or declare each on an argparse parser of its own, and train nothing? Then the options are
        its settings, whatever their names: Reward-Model-Overoptimization's ``eval_grm.py`` takes
        ``--per_device_eval_batch_size`` and ``--max_length`` into a plain dataclass and only
        evaluates, through helpers of its own folder; sapbert's ``eval.py`` declares
        ``--model_dir`` and ``--max_length`` with ``add_argument`` and encodes a dictionary."""
        from memlint.facts.project_arguments import script_argparse_options, script_own_options

        passed = {key.replace("-", "_") for key in (*launcher.cli_args, *launcher.cli_unknown)}
        if not passed:
            return False
        try:
            text = self.documents.document(script).text
        except (OSError, ValueError):
            return False
        if not passed <= script_own_options(self.documents.root, Path(script)) | script_argparse_options(text):
            return False
        return not self._hands_on_to_training(script)

    def _hands_on_to_training(self, script: Path) -> bool:
        """Does ``script``, or a project module it imports and uses (``from pkg.mod import f``, or
        ``from pkg import mod``), train: a ``backward()``, an optimizer, a Trainer or a train module
        (open-instruct's ``dpo.py`` and the learners its scripts hand their config to)? A model
        loader and a forward helper (``load_model_withhead``) do not; a ``fit()`` does (AnglE's
        ``angle_trainer.py``: ``model = AnglE(...)`` then ``model.fit(...)``)."""
        found = self._used_imports(script)
        if found is None:
            return False
        text, folders, imports = found
        if _TRAINS.search(text):
            return True  # the script trains itself (open-instruct's dpo.py builds OLMo-core's train module)
        for parts, used in imports:
            modules = [parts] + [parts + [name] for name in used if name != "*"]  # ``from pkg import mod``
            for folder, module in ((f, m) for f in folders for m in modules):
                for candidate in (folder.joinpath(*module).with_suffix(".py"), folder.joinpath(*module, "__init__.py")):
                    if self._module_trains(candidate):
                        return True
        return False

    def _module_trains(self, module: Path) -> bool:
        """Does a project module train, or, for a package's ``__init__.py``, one of the modules it
        takes its names from (AnglE's ``angle_emb/__init__.py``: ``from .angle import *``, the
        class whose ``fit()`` ``angle_trainer.py`` calls)?"""
        try:
            if not module.is_file():
                return False
            text = self.documents.document(module).text
        except (OSError, ValueError):
            return False
        if _TRAINS.search(text):
            return True
        if module.name != "__init__.py":
            return False
        return any(self._module_trains(module.parent / f"{name}.py") for name in _REEXPORTS.findall(text))

    def _delegates_to_project_module(self, script: Path) -> bool:
        """Whether ``script`` imports from a package or module of this project (``from pkg.mod
        import train`` with ``pkg/`` or ``pkg.py`` under the project root, its ``src/``, or a folder
        between the script and the root: VLM-R1's ``src/open-r1-multimodal/src/open_r1/grpo_jsonl.py``
        imports ``open_r1.trainer``, its own package in a ``src/`` layout) and uses what it imports.
        An import the script never uses hands nothing on: DeepSpeedExamples' ``analyze_data.py``
        imports ``AnnealingLR`` from the project's ``learning_rates.py``, never calls it, and only
        runs DeepSpeed's data analyzer, whatever its ``--per_device_train_batch_size`` is named."""
        found = self._used_imports(script)
        if found is None:
            return False
        _text, folders, imports = found
        return any(parts[0] and any((folder / parts[0]).is_dir() or (folder / f"{parts[0]}.py").is_file()
                                    for folder in folders)
                   for parts, _used in imports)

    def _used_imports(self, script: Path) -> tuple[str, list[Path], list[tuple[list[str], list[str]]]] | None:
        """The script's text, the folders its imports are looked up in (the project root, its
        ``src/``, the folders between the script and the root), and each ``from m import ...`` whose
        names it uses: (``m``'s dotted parts, the names used); None when it cannot be read."""
        try:
            text = self.documents.document(script).text
        except (OSError, ValueError):
            return None
        folders = [self.documents.root, self.documents.root / "src", *self._folders_between(script)]
        body = _IMPORTED.sub("", text)
        imports = []
        for match in _IMPORTED.finditer(text):
            used = [name for name, local in _imported_names(match.group(2)) if _uses(body, local)]
            if used:
                imports.append((match.group(1).split("."), used))
        return text, folders, imports

    def _folders_between(self, script: Path) -> list[Path]:
        """The script's folder and those above it, up to (not including) the project root."""
        known = self._folders.get(Path(script))
        if known is not None:
            return known
        root = self.documents.root.resolve()
        try:
            folder = Path(script).resolve().parent
        except OSError:
            return []
        out = []
        while folder != root and root in folder.parents:
            out.append(folder)
            folder = folder.parent
        self._folders[Path(script)] = out
        return out

    def runs_for(self, path: str | Path, context: RunContext) -> list[ResolvedRun]:
        """Every run ``path`` takes part in: as an entry, or linked from an entry."""
        key = self.documents.key(path)
        entries: list[RunFacts] = []
        launched_by = []
        for referrer in self.links.referrers(path):
            launched_by.extend(self._entries_through(referrer))
        own = [f for f in self.documents.facts(path) if self.documents.kind(path) in ENTRY_KINDS and is_entry(f)]
        if self.documents.kind(path) == DocumentKind.MARKDOWN:
            own = [f for f in own if self._launches_project_script(f)]
        if own and self._options_written_out(Path(path)):
            own = []  # a script's options as a recipe: the script the options belong to is the run
        documented = [f for f in own if f.kind == "shell" and f.path == own[0].path]
        if documented and len(documented) < len(own):
            own = documented  # the script runs as its docstring says: those options apply
        launchers = [f for f in launched_by if f.launches is not None]
        if own and not launchers and self.documents.kind(path) == DocumentKind.PYTHON:
            launchers = self._launched_through_delegate(Path(path))
        if launchers and own:
            entries = launchers  # the script runs through its launcher(s): their options apply
        else:
            entries = own + [f for f in launched_by if is_entry(f)]
        if self.documents.kind(path) in _CONFIG_KINDS and launchers:
            submitted = self.config_launchers.submitted_launches(Path(path))
            if submitted:
                return self._config_runs(submitted, key, context)
        if self.documents.kind(path) in _CONFIG_KINDS and not any(self._launches_training(f) for f in entries):
            config_launches = (self.config_launchers.argument_file_launches(Path(path))
                               or self.config_launchers.sibling_submitted(Path(path))
                               or self.config_launchers.launches_for(path))
            if config_launches:
                return self._config_runs(config_launches, key, context)
        runs = self._runs(entries, key, context)
        if any(self.documents.kind(f.path) == DocumentKind.MARKDOWN for f in entries):
            # a README's command is judged when memlint can estimate it; one it cannot estimate
            # (a model from a variable, a placeholder) is no news there, and the document's own
            # run says so once instead of once per command
            kept = [r for r in runs if r.problem is None or self.documents.kind(r.plan.entry) != DocumentKind.MARKDOWN]
            if not kept and own and entries is launchers and not (
                    self.documents.kind(path) in _CONFIG_KINDS and any(self._scripts_own_problem(r) for r in runs)):
                # (a config whose command cannot be estimated for a reason of the script's own, a
                # model it freezes, is no run alone: the script says why, once)
                kept = self._runs(own, key, context)
                passed = next((r for r in runs if self._passes_model(r)), None)
                if passed is not None:
                    # the documented command passes a model memlint cannot estimate (a placeholder,
                    # LongLoRA's `--model_name_or_path path_to_Llama2_chat_models`): that command is
                    # the run, and the script's own defaults are not what it runs
                    kept = [self._documented_problem(passed, path, script=True)]
                elif self._model_passed_unread(launchers, kept):
                    pass  # the note says which command passes the model memlint cannot read
                elif runs and runs[0].plan.get("model") is not None and all(r.plan.get("model") is None for r in kept):
                    # the script alone names no model, its documented command does (through the
                    # config it passes): say what that command runs, not "no model found"
                    kept = [self._documented_problem(runs[0], path, script=True)]
            if not kept and runs and self.documents.kind(path) in _CONFIG_KINDS | STANDALONE_KINDS \
                    and not self._scripts_own_problem(runs[0]):
                kept = [self._documented_problem(runs[0], path)]
            if not kept and runs and self.documents.kind(path) != DocumentKind.MARKDOWN \
                    and self._problem_of(runs[0], path):
                # the documented command cannot be estimated for a reason written in this script
                # (the tensor parallelism it applies): the script says so, once
                kept = [self._documented_problem(runs[0], path)]
            runs = kept
        if not runs and not launched_by and self.documents.kind(path) in STANDALONE_KINDS:
            runs = self._standalone_runs(path, context)
        elif not runs and self.documents.kind(path) in STANDALONE_KINDS:
            runs = self._switched_off_runs(path)
        return runs

    def commented_runs(self, path: str | Path, context: RunContext) -> list[ResolvedRun]:
        """The runs of a DeepSpeed or Accelerate config that other configs' own comments launch
        with it (``# accelerate launch --config_file examples/accelerate/fsdp_config.yaml
        src/train.py examples/ascend/qwen3moe_full_sft_fsdp.yaml``): each is that config's run,
        judged there, but it uses this one too (ZRO001 asks whether any run needs stage 3)."""
        if self.documents.kind(path) not in STANDALONE_KINDS:
            return []
        commented = self.config_launchers.comment_launches_using(Path(path))
        return self._config_runs(commented, self.documents.key(path), context) if commented else []

    def _expanded_model(self, plan: TrainingPlan) -> TrainingPlan:
        """LLaMA Pro trains the model LLaMA-Factory's ``scripts/llama_pro.py`` wrote: a launcher beside
        the config (``examples/extras/llama_pro/expand.sh``: ``--model_name_or_path <base> --output_dir
        models/llama3-8b-pro --num_expand 8``) names the base model and how many blocks it added."""
        model = plan.get("model")
        if plan.value("block_layout") != "interleaved" or model is None or plan.get("expanded_blocks") is not None:
            return plan
        written = str(model.value).rstrip("/")
        folder = Path(plan.entry).parent
        if (folder / written).exists() or (self.documents.root / written).exists():
            return plan  # the expanded model is there: its config.json counts its blocks
        for launcher in sorted(folder.glob("*.sh")):
            for command in self.documents.facts(launcher):
                if command.launches is None or not str(command.launches.value).endswith("llama_pro.py"):
                    continue
                output, base, added = (command.cli_args.get(k) for k in ("output_dir", "model_name_or_path", "num_expand"))
                if output is None or base is None or added is None or not str(added.value).isdigit():
                    continue
                if str(output.value).rstrip("/") != written:
                    continue
                facts = dict(plan.facts)
                facts["model"] = base.with_value(str(base.value), f"{launcher.name} expands it into {written}")
                facts["expanded_blocks"] = Sourced(int(str(added.value)), added.origin, f"{launcher.name}: --num_expand")
                # the verdict stays in the config (the model fact now points into the launcher)
                return replace(plan, facts=facts, documents=plan.documents + (str(launcher),), home=plan.home or plan.entry)
        return plan

    def _model_passed_unread(self, launchers: list[RunFacts], kept: list[ResolvedRun]) -> bool:
        """A script's own run without a model whose documented command passes the model option
        with a value memlint cannot read (Mixtral-Train's README: ``--model-path
        $MIXTRAL_HUGGINGFACE_PATH``): its note says that command passes it, not that none does."""
        if len(kept) != 1 or kept[0].plan.get("model") is not None or kept[0].problem is None:
            return False
        run = kept[0]
        for launcher in launchers:
            for option in run.plan.model_options:
                written = launcher.cli_unknown.get(option)
                if written is None or written.origin is None:
                    continue
                shown = self.documents.shown(written.origin.path)
                run.problem = (f"no model found: the command at {shown}:{written.origin.range.start.line} "
                               f"passes `{written.value}` a value memlint cannot read (a variable or a shell "
                               "expression; set `model` in [tool.memlint] or pass --model)")
                run.problem_fact = None
                return True
        return False

    def _passes_model(self, run: ResolvedRun) -> bool:
        """Is the run's problem the model its README command passes on the command line?"""
        model = run.plan.get("model")
        return (run.problem is not None and model is not None and run.problem_fact is model
                and model.origin is not None and self.documents.kind(model.origin.path) == DocumentKind.MARKDOWN)

    def _options_written_out(self, path: Path) -> bool:
        """Is this Trainer- or Axolotl-looking config the options of one of the project's argparse
        scripts written as a recipe (``ProjectClasses.options_written_out``)? Then no Trainer or
        Axolotl reads it and it states no run by itself: fsdp-llm-posttrain's
        ``configs/dpo_qwen3_single_gpu.yaml`` holds the ``--model``, ``--seq-len``... of its
        ``train_dpo.py``. (A file of an argument class's fields is still the run its parser reads:
        open-instruct's recipes of ``FlatArguments``.)"""
        kind = self.documents.kind(path)
        if kind not in (DocumentKind.HF_ARGS, DocumentKind.AXOLOTL):
            return False
        structured = self.documents.parsed(path).structured
        if structured is None or not structured.ok or not isinstance(structured.value, dict):
            return False
        from memlint.configs.key_history import may_be_a_project_format
        from memlint.facts.project_arguments import ProjectClasses

        keys = {k for k in structured.value if isinstance(k, str)}
        return (may_be_a_project_format(self.documents.root, path, str(kind), keys)
                and ProjectClasses(self.documents.root).options_written_out(keys))

    def _read_into_a_project_class(self, path: Path) -> bool:
        """Is this LLaMA-Factory-looking config, which a script names, the shape of one class of
        the project (every key a field of it)? Then the script fills that class from it
        (finance-sft-qwen's ``SFTConfig(**yaml.safe_load(...))`` with ``dataset_dir`` beside
        ``lora_rank``) and trains by its own code: no LLaMA-Factory default, nor its ``do_train``,
        is the run's; the values the script takes from the file are read as its entries."""
        if self.documents.kind(path) != DocumentKind.LLAMAFACTORY:
            return False
        structured = self.documents.parsed(path).structured
        if structured is None or not structured.ok or not isinstance(structured.value, dict):
            return False
        from memlint.configs.key_history import project_class_shaped
        from memlint.facts.project_arguments import ProjectClasses

        return project_class_shaped(self.documents.root, path, str(DocumentKind.LLAMAFACTORY), structured.value,
                                    lambda: ProjectClasses(self.documents.root))

    def _scripts_own_problem(self, run: ResolvedRun) -> bool:
        """Is the run's problem a fact of the script it runs (it freezes its model, ...)? The
        script's own run reports it there, whatever command runs it."""
        fact = run.problem_fact
        return fact is not None and fact.origin is not None and \
            self.documents.kind(fact.origin.path) == DocumentKind.PYTHON

    def _problem_of(self, run: ResolvedRun, path: str | Path) -> bool:
        """Is the run's problem a fact written in ``path`` (the tensor parallelism a README's
        command runs is the script's to report)?"""
        fact = run.problem_fact
        return fact is not None and fact.origin is not None and Path(fact.origin.path) == Path(path)

    def _documented_problem(self, run: ResolvedRun, path: str | Path, script: bool = False) -> ResolvedRun:
        """A config only a README command uses has no other run to carry the note: it says once,
        in the config, why that command cannot be estimated (its model is a placeholder, ...) and
        which line of the README the value comes from."""
        fact = run.problem_fact
        if fact is not None and fact.origin is not None and fact.origin.path != str(path):
            where = f"{self.documents.shown(fact.origin.path)}:{fact.origin.range.start.line}"
            if script:
                said = f"the model of the script's documented command, from {where}"
            elif self.documents.kind(fact.origin.path) in _LAUNCHING_KINDS:
                said = f"the command at {where} that uses this config passes it as {fact.note or 'its model'}"
            else:  # a key of the arguments file the launch hands the script (``--config recipe.yaml``)
                said = f"the run that uses this config takes it from {where}"
            run.problem = f"{run.problem} ({said})"
            run.problem_fact = None
        own = self.documents.facts(path)
        anchor = next((f.anchor for f in own if f.anchor is not None), None)
        run.plan = replace(run.plan, home=str(path), anchor=anchor or run.plan.anchor)
        return run

    def _config_runs(self, documented: list, key: str, context: RunContext) -> list[ResolvedRun]:
        """The runs of a config through the launcher its project documents for it; one that
        follows a call naming another config of its folder says so and rests on it."""
        from memlint.facts.resolve import Assumed

        runs = self._runs([d.launch for d in documented], key, context)
        own = self.documents.facts(documented[0].launch.bound_config.value) if documented[0].launch.bound_config else []
        anchor = next((f.anchor for f in own if f.anchor is not None), None)
        for run, launch in zip(runs, documented):
            home = str(launch.launch.bound_config.value) if launch.launch.bound_config is not None else None
            run.plan = replace(run.plan, home=home, anchor=anchor or run.plan.anchor)
            if launch.named:
                continue
            origin = launch.call.origin
            where = "the project"
            if origin is not None:
                where = f"{self.documents.shown(origin.path)}:{origin.range.start.line}"
            if launch.how is not None:  # a launcher's path template names it, or a form its peers agree on
                run.assumptions.append(f"launch assumed: {launch.how} ({where}), since no command names this config")
                value = (f"{launch.assumed}, as its peers are launched ({where})" if launch.assumed is not None
                         else f"the launch of the template that names it ({where})")
                run.assumed.append(Assumed("launch", value, "a launcher or README command that names this config"))
                continue
            run.assumptions.append(
                f"launch assumed: run as the configs of its folder are ({where}: `sh {launch.call.note}`), "
                "since no command names this config")
            run.assumed.append(Assumed("launch", f"the launch documented for its folder ({where})",
                                       "a launcher or README command that names this config"))
        return runs

    def _standalone_runs(self, path: str | Path, context: RunContext) -> list[ResolvedRun]:
        """A DeepSpeed or Accelerate config that no launcher, script or recipe of the project uses
        (a template folder) is estimated with the settings' ``model`` when they name one; without
        one, the first such config of the project carries one note for all of them."""
        from memlint.facts.resolve import ResolvedRun, resolve

        facts = self.documents.facts(path)
        if not facts:
            return []
        plan = replace(self.plan_for(facts[0]), trains=True)  # as a run of it would train
        if context.model or (context.model_config is not None and context.model_config(str(path))):
            run = resolve(plan, context, Path(plan.entry).parent)
            run.assumptions.append(f"no launcher or script of the project uses {Path(path).name}: "
                                   "estimated with the settings' model")
            return [run]
        # no model to estimate with: the first such config of the project says so once for all
        # of them, instead of each staying silent (or each saying so)
        unused = self.unused_configs()
        if not unused or self.documents.key(unused[0]) != self.documents.key(path):
            return []
        others = len(unused) - 1
        which = (f"this config and {others} other DeepSpeed/Accelerate config{'s' if others != 1 else ''} of the "
                 "project are" if others else "this config is")
        run = ResolvedRun(plan=plan, arch=None, setup=None)
        run.problem = (f"{which} used by no launcher, script or recipe, so no model is known: name it in a launch "
                       "command (`--deepspeed`, `accelerate launch --config_file`), or set `model` in "
                       "[tool.memlint] to estimate each with that model")
        return [run]

    def _switched_off_runs(self, path: str | Path) -> list[ResolvedRun]:
        """A DeepSpeed config that a script names only behind its own flag (``deepspeed="ds.json"
        if args.deepspeed else None``), which no launch of the project switches on: no run uses
        it, and the one note says which script would, with which option."""
        from memlint.facts.resolve import ResolvedRun

        target = self.documents.key(path)
        own = self.documents.facts(path)
        for referrer in self.links.referrers(path) if own else ():
            for facts in self.documents.facts(referrer):
                for options, prefix, reference in facts.switched_references:
                    resolved = self.documents.resolve_reference(str(reference.value), facts.path)
                    if resolved is None or self.documents.key(resolved) != target:
                        continue
                    script, option = Path(referrer).name, f"`--{options[0]}`"
                    where = f"{script}:{reference.origin.range.start.line}" if reference.origin is not None else script
                    run = ResolvedRun(plan=replace(self.plan_for(own[0]), trains=True), arch=None, setup=None)
                    run.problem = (f"{where} uses this config only when {option} is passed, and no launch of the "
                                   f"project passes it, so no run of it is known: pass {option} in a launch of {script}"
                                   if prefix == "if" else
                                   f"{where} uses this config only when {option} is off, and every launch of the "
                                   "project turns it on, so no run of it is known")
                    return [run]
        return []

    def unused_configs(self) -> list[Path]:
        """The project's DeepSpeed and Accelerate configs that no document references, in path
        order (a text prefilter on their signature keys first: data JSON is not parsed); kept
        until invalidated. What a result depends on is each listed config (recorded here)."""
        if self._unused is None:
            found = []
            with reads.paused():
                for candidate in self.links.candidates():
                    if candidate.suffix.lower() not in (".json", ".yaml", ".yml"):
                        continue
                    text = self.documents.text_for_scan(candidate)
                    if not text or not any(sign in text for sign in _STANDALONE_SIGNS):
                        continue
                    if self.documents.kind(candidate) in STANDALONE_KINDS and not self.links.referrers(candidate):
                        found.append(candidate)
            self._unused = sorted(found, key=self.documents.key)
        for config in self._unused:
            reads.document(self.documents.key(config), self.documents.digest(config))
        return self._unused

    def _runs(self, entries: list[RunFacts], key: str, context: RunContext) -> list[ResolvedRun]:
        """The resolved runs of ``entries`` that the document ``key`` takes part in."""
        from memlint.facts.resolve import resolve

        runs = []
        seen_plans = set()
        for facts in entries:
            plan = self.stage_chains.traced(self._expanded_model(self.plan_for(facts)), facts)
            marker = (plan.entry, plan.documents, plan.anchor)
            if marker in seen_plans:
                continue
            seen_plans.add(marker)
            if key not in {self.documents.key(d) for d in plan.documents}:
                continue
            infra = self._gpu_for(plan) if context.gpu is None else None
            run_context = context
            if infra is not None and context.world_size is None and plan.get("world_size") is None and infra.count:
                run_context = replace(context, world_size=infra.count)
            run = resolve(plan, run_context, Path(plan.entry).parent)
            if infra is not None:
                run.gpu = infra
                stated = f", {infra.count} GPUs" if run_context is not context else ""
                run.assumptions.append(f"target GPU: {infra.gpu.name}{stated}, requested by {infra.describe(str(self.documents.root))}")
            runs.append(run)
        return runs

    def infrastructure(self) -> list:
        """The GPUs the project's infrastructure files request (slurm scripts, SkyPilot tasks,
        Kubernetes manifests, Modal apps, dstack configurations, Ray jobs, RunPod pods): one text
        pass over the project, kept until invalidated."""
        from memlint.facts.infrastructure import read

        if self._infrastructure is None:
            found = []
            with reads.paused():
                for candidate in self.links.candidates():
                    text = self.documents.text_for_scan(candidate)
                    if text and ("#SBATCH" in text or "accelerators" in text or "nvidia.com/gpu" in text
                                 or ("modal" in text and "gpu" in text) or "accelerator_type" in text
                                 or "gpu_type_id" in text or "runpodctl" in text or "available_node_types" in text
                                 or ("resources" in text and "gpu" in text and "type" in text)):
                        infra = read(str(candidate), text)
                        if infra is not None:
                            found.append((infra, reads.digest(text, None)))
            self._infrastructure = found
        return self._infrastructure

    def _gpu_for(self, plan: TrainingPlan):
        """The infrastructure GPU a run is judged against: the one its own documents request (a
        slurm script that launches it), else one whose file names the run's entry script, else the
        project's when all its infrastructure files request the same GPU."""
        found = self.infrastructure()
        if not found:
            return None
        documents = {self.documents.key(d) for d in plan.documents}
        entry_name = Path(plan.entry).name
        own = [(i, d) for i, d in found if self.documents.key(i.origin.path) in documents]
        naming = [(i, d) for i, d in found if entry_name in self.documents.mentions_of(i.origin.path)]
        for group in (own, naming, found):
            if group and len({i.gpu.id for i, _ in group}) == 1:
                infra, digest = group[0]
                reads.document(self.documents.key(infra.origin.path), digest)
                return infra
        return None


def _trainer_subclass(helpers: list[RunFacts]) -> bool:
    """Does one of the project classes a script imports extend a library ``Trainer`` (the
    framework its base names)? A class that builds its own engine (LOMO's ``LOMOTrainer`` calls
    ``deepspeed.initialize``) runs what it builds, not the script's Trainer-style facts."""
    return any(h.framework is not None and h.framework.value in ("hf-trainer", "trl") for h in helpers)


def _transformers_model(plan: TrainingPlan) -> bool:
    """Whether the run's model is built by transformers (its attention is the library's): a
    Trainer or a framework that loads through it, or a ``from_pretrained``/``from_config`` loader;
    torchtune, litgpt, Megatron and a script's own modules bring their own attention."""
    if plan.value("framework") in ("hf-trainer", "trl", "axolotl", "llamafactory"):
        return True
    model = plan.get("model")
    return model is not None and ("from_pretrained" in model.note or "from_config" in model.note)


def _calls(text: str, name: str) -> bool:
    """Does the script call ``name`` (``train()``), or hand it to a function CLI (``fire.Fire(main)``)?"""
    escaped = re.escape(name)
    return re.search(rf"(?<![\w.])(?<!def ){escaped}\s*\(|\b(?:Fire|run)\(\s*{escaped}\s*[,)]", text) is not None


def _uses(text: str, name: str) -> bool:
    """Does ``text`` (a module without its ``from ... import`` statements) name ``name``?"""
    return name == "*" or re.search(rf"(?<![\w.]){re.escape(name)}\b", text) is not None


def _imported_names(written: str) -> list[tuple[str, str]]:
    """``(train, main as run)`` -> [("train", "train"), ("main", "run")]: (name, local name)."""
    out = []
    for part in written.strip().strip("()").split(","):
        words = part.split("#")[0].split()
        if len(words) == 1:
            out.append((words[0], words[0]))
        elif len(words) == 3 and words[1] == "as":
            out.append((words[0], words[2]))
    return out


def is_entry(facts: RunFacts) -> bool:
    """Does a document define a run of its own (a model, a trainer, or a launched script)?"""
    return facts.model is not None or facts.framework is not None or facts.launches is not None


def hidden_cli(script: RunFacts, launcher: RunFacts) -> frozenset[str]:
    """The script's facts the launcher sets to values it cannot know."""
    from memlint.facts.launch_options import hidden_by_cli

    return hidden_by_cli(script, launcher)


def without_cleared(script: RunFacts, launcher: RunFacts) -> RunFacts:
    """``script`` without the facts it states only because of an option default the launcher
    switches off (``--bits 16`` over ``load_in_4bit=args.bits == 4``)."""
    from memlint.facts.launch_options import cleared_by_cli

    cleared = cleared_by_cli(script, launcher)
    if not cleared:
        return script
    kept = replace(script)
    for name in cleared:
        setattr(kept, name, None)
    return kept


def apply_cli(script: RunFacts, launcher: RunFacts) -> dict:
    """The facts a launcher's options set through the script's command-line bindings."""
    from memlint.facts.launch_options import facts_from_cli

    return facts_from_cli(script, launcher)
