"""The launchers a config is run with when no file names the config itself.

Many projects ship a launcher that takes the config from its caller (open-instruct's
``scripts/finetune_with_accelerate_config.sh``: ``accelerate launch --deepspeed_config_file
stage3.conf open_instruct/finetune.py "$2"``) and document how to call it with a config
(``sh scripts/finetune_with_accelerate_config.sh 8 configs/train_configs/sft/olmo_17_sft.yaml``,
in a README's shell block or another script). Such a call links the config to the launch: the
DeepSpeed config, the launcher's options and the script that parses the config all apply.

A config no call names takes the launch documented for the configs of its own folder (or the
nearest folder above it that has one), when every such call uses the same launcher; the run then
rests on that assumption, and says which call it followed. Calls that disagree on the launcher
(two launchers for one folder), or a folder whose configs each say in their own comment how they
run (LLaMA-Factory's ``examples/ascend/``: ``fsdp_config.yaml`` for one, ``fsdp2_config.yaml`` for
another), give the parallelism form they all agree on (FSDP full shard, ZeRO-3: see
``launch_forms``), as a named assumption; none when they disagree on the form too. A folder whose
configs are launched directly, each by its own command (SimPO's README: ``accelerate launch
--config_file accelerate_configs/deepspeed_zero3.yaml scripts/run_simpo.py training_configs/x.yaml``
for five of its seven configs), gives its other configs the form those commands agree on, when
they all run one entry script; the assumption cites the commands (a folder below takes nothing
from them: its configs may be of another recipe). A config whose
folders have no documented launch at all takes the form every documented launch of its entry
script agrees on: the one script that launches configs of its kind and whose argument classes
hold every key it sets (open-instruct's ``configs/train_configs/tulu3/tulu3_sft.yaml`` and
``open_instruct/finetune.py``).

A cluster script may instead build the config's path from its own options (open-r1's
``slurm/train.slurm``: ``--config recipes/$MODEL/$TASK/config_$CONFIG_SUFFIX.yaml`` and
``--config_file recipes/accelerate_configs/$ACCELERATOR.yaml``, called as ``sbatch --nodes=1
slurm/train.slurm --model OlympicCoder-7B --task sft --config v00.00 --accelerator zero3``). Each
call fills the templates in: the config it names joins that launch (its accelerate or DeepSpeed
config, and the GPUs of ``--nodes`` times the script's ``#SBATCH`` request). A config that matches
the template but no call takes the values every real call of that launcher agrees on, as an
assumption; where they disagree it takes none.

A job submitter may take the config with a job spec whose command is the launch (open-instruct's
``python scripts/submit_finetune_job.py --default_beaker_config configs/beaker_configs/x.yaml
--config configs/train_configs/olmo2/olmo2_1124_7b_sft.yaml``: the Beaker spec's ``arguments``
run ``accelerate launch --num_processes 32 --deepspeed_config_file stage3.conf
open_instruct/finetune.py ...``, and the submitter writes the config's fields over that
command's options). The config joins the spec's launch; its fields beat the command's options.

A YAML config may also say itself how it is run, in a comment (LLaMA-Factory's
``examples/ascend/*.yaml``: ``# accelerate launch --config_file examples/accelerate/fsdp_config.yaml
src/train.py examples/ascend/qwen3moe_full_sft_fsdp.yaml``): a command there that names the
config is its launch, as a script's docstring command is the script's. A framework's config
(LLaMA-Factory's) stays the run's entry and takes the command's other configs (the Accelerate or
DeepSpeed config) and process count; a plain arguments file is bound to the launched script.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from memlint.documents import reads
from memlint.documents.kinds import DocumentKind
from memlint.facts.plan import FACT_NAMES
from memlint.model.provenance import Location, Sourced

if TYPE_CHECKING:
    from memlint.facts.launchers import Invocation
    from memlint.facts.plan import RunFacts
    from memlint.project.documents import DocumentStore
    from memlint.project.links import LinkIndex

_SCANNED = (".sh", ".bash", ".slurm", ".sbatch", ".md", ".markdown")
_CALLS = re.compile(r"\.sh\b|\.bash\b|\.slurm\b|\.sbatch\b|\bsbatch\b")
_COMMENT = re.compile(r"^[ \t]*#+[ \t]?")
# a model size in a config's name (``olmo2_1124_32b_dpo``, ``qwen-1.5b``): siblings differing only there
_SIZE = re.compile(r"(?<![A-Za-z0-9.])\d+(?:\.\d+)?[bBmM](?![A-Za-z0-9])")
_PLACEHOLDER_VALUE = re.compile(r"[{<\[].*[}>\]]|\.\.\.|^YOUR_|^your[_-]")  # {model_name}, <config>
# a launch a config may be judged under: (the launch's facts, where it is written, the config it
# runs, the document and digest that write it when that is not the config itself)
_Candidate = tuple["RunFacts", Sourced[str], Path, "tuple[Path, str] | None"]


@dataclass(frozen=True)
class ConfigLaunch:
    """A launcher's launch with a config bound to the argument it takes from its caller."""

    launch: RunFacts  # the launcher's launch facts, the config bound (``bound_config``)
    call: Sourced[str]  # the documented call it follows (located at the launcher's name)
    named: bool  # the call names this very config (else: one of its folder, or its template)
    how: str | None = None  # for a config no call names: what it was taken to run with, and why
    assumed: str | None = None  # that assumption in a few words (the run's ``Assumed("launch")`` value)


class ConfigLaunchers:
    """The documented calls of the project's config-taking launchers (one text pass, kept until
    invalidated), and the launch each config inherits from them."""

    def __init__(self, documents: DocumentStore, links: LinkIndex) -> None:
        self.documents = documents
        self.links = links
        self._calls: list[tuple[Path, str, Invocation]] | None = None  # (document, digest, call)
        self._argument_scripts: list[tuple[Path, str]] | None = None  # (script, digest)
        self._fields: dict[str, frozenset[str]] = {}  # script -> its argument classes' fields
        # (config, its digest) -> the launches its comments give: asked again for every config of
        # its folder that no call names, and by every shared config those launches use
        self._comment_launches: dict[tuple[str, str], list[ConfigLaunch]] = {}

    def invalidate(self) -> None:
        self._calls = None
        self._argument_scripts = None
        self._fields.clear()
        self._comment_launches.clear()

    def argument_file_launches(self, target: Path) -> list[ConfigLaunch]:
        """The launch of a config that a script of the project parses as all its arguments
        (``parse_json_file(json_file=args.train_args_file)``): a command that passes it with that
        option (``python train.py --train_args_file train_args/sft/full/x.json`` in a README), or
        the option's default naming it; else, as an assumption, the launch of such a file of its
        own folder. The file's keys are then the script's command line, not a framework's config."""
        from memlint.facts.plan import RunFacts

        key = self.documents.key(target)
        folder = target.resolve().parent
        beside: list[ConfigLaunch] = []
        positional_beside: list[ConfigLaunch] = []
        for script, digest in self._argument_file_scripts():
            for facts in self.documents.facts(script):
                option = facts.arguments_file
                if option is None or facts.launches is not None:
                    continue
                positional = option.value == "1"  # ``parse_json_file(sys.argv[1])``: the launch's first config
                launches: list[tuple[RunFacts, Path, Sourced[str]]] = []  # (launch, the file it passes, where)
                for referrer in self.links.referrers(script):
                    for call in self.documents.facts(referrer):
                        launched = self.documents.resolve_reference(str(call.launches.value), referrer) if call.launches else None
                        if launched is None or self.documents.key(launched) != self.documents.key(script):
                            continue
                        written = self._positional_file(call, referrer) if positional else call.cli_args.get(str(option.value))
                        if written is None:
                            continue
                        passed = self.documents.resolve_reference(str(written.value), referrer)
                        if passed is not None:
                            launches.append((call, passed, written))
                default = facts.arguments_default
                passed = self.documents.resolve_reference(str(default.value), script) if default is not None else None
                if default is not None and passed is not None:
                    own = RunFacts(str(script), "shell", anchor=default.origin,
                                   launches=Sourced(str(script), default.origin, f"{script.name} run as it is"))
                    launches.append((own, passed, Sourced(str(default.value), default.origin, default.note)))
                reads.document(self.documents.key(script), digest)
                for launch, passed, written in launches:
                    same = self.documents.key(passed) == key
                    if not same and passed.resolve().parent != folder:
                        continue
                    passed_as = written.value if positional else f"--{option.value} {written.value}"
                    note = f"{launch.launches.value if launch.launches else script.name} {passed_as}"
                    if positional:  # the file the launch passes is a reference of it: this one in its place
                        launch = replace(launch, references=[Sourced(str(target), r.origin, r.note) if r is written else r
                                                             for r in launch.references])
                    else:
                        launch = replace(launch, bound_config=Sourced(str(target), written.origin, note), cli_args={
                            **launch.cli_args, str(option.value): Sourced(str(target), written.origin)})
                    found = ConfigLaunch(launch, Sourced(str(script), written.origin, note), same,
                                         None if same else f"{script.name} parses the files of its folder as its "
                                         f"arguments (`{note}`)")
                    if same:
                        return [found]
                    (positional_beside if positional else beside).append(found)
        # several commands that pass this folder's files to scripts (SimPO's README, one per config):
        # the form they agree on decides (``launches_for``), not the first of them
        return (beside + (positional_beside if len(positional_beside) == 1 else []))[:1]

    def _positional_file(self, call: "RunFacts", referrer: Path) -> Sourced[str] | None:
        """The arguments file a launch passes to a script that parses its first argument
        (llm2vec's README: ``python experiments/run_word_task.py train_configs/word-task/x.json``):
        the first file it names that is a JSON or YAML file of the project and no DeepSpeed or
        Accelerate config."""
        for reference in call.references:
            if not str(reference.value).lower().endswith((".json", ".yaml", ".yml")):
                continue
            path = self.documents.resolve_reference(str(reference.value), referrer)
            if path is not None and self.documents.kind(path) not in (DocumentKind.DEEPSPEED, DocumentKind.ACCELERATE):
                return reference
        return None

    def _argument_file_scripts(self) -> list[tuple[Path, str]]:
        """The project's Python files that parse a file as their arguments (a text prefilter)."""
        if self._argument_scripts is None:
            found = []
            with reads.paused():
                for candidate in self.links.candidates():
                    if not str(candidate).endswith(".py"):
                        continue
                    text = self.documents.text_for_scan(candidate)
                    if text and ("parse_json_file" in text or "parse_yaml_file" in text):
                        found.append((candidate, reads.digest(text, None)))
            self._argument_scripts = found
        return self._argument_scripts

    def calls(self) -> list[tuple[Path, str, Invocation]]:
        from memlint.documents.parsed import parse_document
        from memlint.documents.reading import document_from_text
        from memlint.facts.launchers import invocations
        from memlint.facts.markdown import shell_invocations

        if self._calls is None:
            found: list[tuple[Path, str, Invocation]] = []
            with reads.paused():
                for candidate in self.links.candidates():
                    if not str(candidate).lower().endswith(_SCANNED):
                        continue
                    text = self.documents.text_for_scan(candidate)
                    if not text or not _CALLS.search(text):
                        continue
                    parsed = parse_document(document_from_text(str(candidate), text))
                    markdown = parsed.kind == DocumentKind.MARKDOWN
                    calls = shell_invocations(parsed) if markdown else invocations(parsed)
                    digest = reads.digest(text, None)
                    found.extend((candidate, digest, call) for call in calls)
            self._calls = found
        return self._calls

    def launches_for(self, path: str | Path) -> list[ConfigLaunch]:
        """The launches documented for the config ``path``: the calls that name it, else those
        that name a config of its folder (or of the nearest folder above with any), all through
        one launcher, else the launch of a template it matches."""
        target = Path(path)
        key = self.documents.key(target)
        kind = self.documents.kind(target)
        commented = self._commented_launches(target)
        if commented:
            return commented
        bound: list[tuple[Path, str, Invocation, RunFacts, Path, Sourced[str]]] = []
        templated: list[tuple[Invocation, RunFacts, Path]] = []  # (call, launcher facts, launcher)
        documents_read: dict[int, tuple[Path, str]] = {}  # id(call) -> the document that writes it
        for document, digest, call in self.calls():
            launcher = self.documents.resolve_reference(str(call.script.value), document)
            if launcher is None:
                continue
            for facts in self.documents.facts(launcher):
                if facts.launches is not None and facts.positional_config is not None:
                    position = int(facts.positional_config.value)
                    if position > len(call.arguments):
                        continue
                    argument = call.arguments[position - 1]
                elif facts.template_config is not None and (facts.launches or facts.template_launches):
                    if not _placeholder_call(call):
                        templated.append((call, facts, launcher))
                        documents_read[id(call)] = (document, digest)
                    filled = self._filled(facts, call.options(), call, launcher)
                    if filled is None:
                        continue
                    facts, argument = filled
                else:
                    continue
                written = str(argument.value)
                config = self.documents.resolve_reference(written, document) or self.documents.root / written
                bound.append((document, digest, call, facts, config, argument))
        named = [b for b in bound if b[4].is_file() and self.documents.key(b[4]) == key]
        chosen, own = named, True
        if not chosen:
            template_launch = self._from_template(target, templated)
            if template_launch is not None:
                for call, _, _ in templated:  # the calls it agrees with decide it
                    document, digest = documents_read[id(call)]
                    reads.document(self.documents.key(document), digest)
                return [template_launch]
            own = False
            folder = target.resolve().parent
            root = self.documents.root.resolve()
            beside: list[tuple[ConfigLaunch, Path]] = []  # the launches its folder's configs' comments give
            direct: list[_Candidate] = []  # the commands that launch its folder's configs directly
            while not chosen and not beside and not direct and (folder == root or root in folder.parents):
                chosen = [b for b in bound if b[4].resolve().parent == folder and b[3].template_config is None
                          and (not b[4].is_file() or self.documents.kind(b[4]) == kind)]
                beside = [] if chosen else self._folder_comment_launches(folder, target, kind)
                if not chosen and not beside and folder == target.resolve().parent:  # its own folder's only
                    direct = self._folder_direct_launches(folder, target, kind)
                if not chosen and not beside and not direct:
                    folder = folder.parent
            if direct:
                found = self._direct_form_launch(target, folder, direct)
                return [found] if found is not None else []
            if len({(self.documents.key(b[3].path), b[3].anchor) for b in chosen}) != 1:
                # launches that disagree on the file, or only the folder's configs' own comments
                # saying how each runs: the parallelism form they all agree on, if any; with no
                # launch for the folder, the form every launch of the config's entry script agrees on
                candidates: list[_Candidate] = [(b[3], b[2].script, b[4], (b[0], b[1])) for b in chosen]
                candidates += [(c.launch, c.call, config, None) for c, config in beside]
                found = (self._form_launch(target, candidates, f"every other config in {self._shown(folder)}/ is")
                         if candidates else self._entry_script_launch(target, bound, kind))
                return [found] if found is not None else []
        launchers = {(self.documents.key(b[3].path), b[3].anchor) for b in chosen}
        if not chosen or len(launchers) != 1:
            return []
        document, digest, call, facts, _, argument = chosen[0]
        reads.document(self.documents.key(document), digest)
        named_config = Sourced(str(target), argument.origin,
                               f"{call.script.value} {' '.join(str(a.value) for a in call.arguments)}")
        launch = replace(facts, references=[*facts.references, named_config], bound_config=named_config)
        return [ConfigLaunch(launch, Sourced(str(call.script.value), call.script.origin, named_config.note), own)]

    def comment_launches_using(self, shared: Path) -> list[ConfigLaunch]:
        """The launches the project's configs give in their own comments that run with the
        DeepSpeed or Accelerate config ``shared`` (LLaMA-Factory's ``examples/ascend/
        qwen3moe_full_sft_fsdp.yaml``: ``# accelerate launch --config_file
        examples/accelerate/fsdp_config.yaml src/train.py ...``): runs of the shared config as
        much as a launcher's, found through the file names the project's text mentions."""
        key = self.documents.key(shared)
        out: list[ConfigLaunch] = []
        for candidate in self.links.mentions().get(shared.name, ()):
            if not str(candidate).lower().endswith((".yaml", ".yml")) or self.documents.key(candidate) == key:
                continue
            for launch in self._commented_launches(candidate):
                found = (self.documents.resolve_reference(str(r.value), launch.launch.path) for r in launch.launch.references)
                if any(f is not None and self.documents.key(f) == key for f in found):
                    reads.document(self.documents.key(candidate), self.documents.digest(candidate))
                    out.append(launch)
        return out

    def _folder_comment_launches(self, folder: Path, target: Path, kind: str) -> list[tuple[ConfigLaunch, Path]]:
        """The launches the other configs of ``folder`` (of the target's kind) give in their own
        comments (LLaMA-Factory's ``examples/ascend/*.yaml``), with the config each runs."""
        try:
            siblings = sorted(p for p in folder.iterdir() if p.suffix.lower() in (".yaml", ".yml") and p.is_file())
        except OSError:
            return []
        key = self.documents.key(target)
        return [(launch, sibling) for sibling in siblings
                if self.documents.key(sibling) != key and self.documents.kind(sibling) == kind
                for launch in self._commented_launches(sibling)]

    def _folder_direct_launches(self, folder: Path, target: Path, kind: str) -> list[_Candidate]:
        """The documented commands that launch a project script with another config of ``folder``
        (of the target's kind) as its argument (SimPO's README: ``accelerate launch --config_file
        accelerate_configs/deepspeed_zero3.yaml scripts/run_simpo.py training_configs/x.yaml``),
        each with the config it runs and the document that writes it."""
        try:
            siblings = sorted(p for p in folder.iterdir() if p.suffix.lower() in (".yaml", ".yml", ".json")
                              and p.is_file())
        except OSError:
            return []
        key = self.documents.key(target)
        found: list[_Candidate] = []
        for sibling in siblings:
            sibling_key = self.documents.key(sibling)
            if sibling_key == key or self.documents.kind(sibling) != kind:
                continue
            for referrer in self.links.referrers(sibling):
                for facts in self.documents.facts(referrer):
                    if facts.launches is None or facts.bound_config is not None \
                            or self.documents.resolve_reference(str(facts.launches.value), facts.path) is None:
                        continue  # a launch of a project script only
                    passed = [r for r in facts.references
                              if (config := self.documents.resolve_reference(str(r.value), facts.path)) is not None
                              and self.documents.key(config) == sibling_key]
                    if passed:
                        found.append((facts, Sourced(str(facts.launches.value), passed[0].origin,
                                                     passed[0].note), sibling,
                                      (referrer, self.documents.digest(referrer))))
        return found

    def _direct_form_launch(self, target: Path, folder: Path, direct: list[_Candidate]) -> ConfigLaunch | None:
        """A config no command names, judged under the parallelism form every documented direct
        launch of its folder's other configs agrees on, when they all run one entry script
        (none when they run several: which one runs this config is not known)."""
        scripts = {self.documents.key(resolved) for launch, _, _, _ in direct if launch.launches is not None
                   and (resolved := self.documents.resolve_reference(str(launch.launches.value), launch.path))}
        if len(scripts) != 1:
            return None
        direct = sorted(direct, key=lambda c: (c[1].origin.path, c[1].origin.range.start.line) if c[1].origin else ("", 0))
        places: dict[str, list[str]] = {}  # document -> the lines of its launches
        for _, call, _, _ in direct:
            if call.origin is not None:
                places.setdefault(self._shown(Path(call.origin.path)), []).append(str(call.origin.range.start.line))
        followed = ", ".join(f"{document}:{','.join(dict.fromkeys(lines))}" for document, lines in places.items())
        script = next(iter(scripts))
        count = len(direct)
        described = (f"{'the' if count > 1 else 'the one'} documented launch{'es' if count > 1 else ''} of "
                     f"{Path(script).name} with the other configs in {self._shown(folder)}/ ({followed}) "
                     f"{'are' if count > 1 else 'is'}")
        return self._form_launch(target, direct, described)

    def _form_launch(self, target: Path, candidates: list[_Candidate], described: str) -> ConfigLaunch | None:
        """A config no launch names, judged under the parallelism form every one of ``candidates``
        (the launches of its folder's configs, or of its entry script's) agrees on, as an
        assumption the run names; None when they disagree or the config states its own sharding.
        A framework's config stays the run's entry with that form's facts; an arguments file
        is bound to the first candidate's launcher."""
        from memlint.project.launch_forms import agreed_form, form_of

        form = agreed_form(self.documents, [c[0] for c in candidates])
        own = self.documents.facts(target)
        if form is None or any(form_of(self.documents, f) is not None for f in own):
            return None  # no agreed form, or the config names its own (``deepspeed: ds_z2_config.json``)
        for _, _, config, read in candidates:  # what the assumption depends on
            if read is not None:
                reads.document(self.documents.key(read[0]), read[1])
            elif config.is_file():
                reads.document(self.documents.key(config), self.documents.digest(config))
        how = f"{form.name}, as {described} launched"
        count = f" on {form.world_size.value} GPUs" if form.world_size is not None else ""
        launch, call, config, _ = candidates[0]
        framework = [f for f in own if f.framework is not None]
        if framework:
            launch = replace(framework[0], world_size=form.world_size or framework[0].world_size)
            for name, fact in form.facts.items():  # the form's facts, located where a peer's config states them
                setattr(launch, name, Sourced(fact.value, fact.origin, f"{fact.note} ({how})"))
        elif launch.launches is not None:
            config_key = self.documents.key(config)
            kept = [r for r in launch.references
                    if (found := self.documents.resolve_reference(str(r.value), launch.path)) is None
                    or self.documents.key(found) != config_key]
            named = Sourced(str(target), call.origin, how)
            launch = replace(launch, references=[*kept, named], bound_config=named, world_size=form.world_size)
        else:
            return None
        return ConfigLaunch(launch, Sourced(str(call.value), call.origin, how), False, how, f"{form.name}{count}")

    def _entry_script_launch(self, target: Path, bound: list, kind: str) -> ConfigLaunch | None:
        """A config whose folder has no documented launch, judged under the form every
        documented launch of its entry script agrees on: the one project script that launches
        configs of its kind and whose argument classes hold every key it sets (open-instruct's
        ``tulu3_sft.yaml`` and ``open_instruct/finetune.py``'s ``FlatArguments``)."""
        keys = self._top_level_keys(target)
        if not keys:
            return None
        target_key = self.documents.key(target)
        by_script: dict[str, tuple[Path, list[_Candidate]]] = {}
        for document, digest, call, facts, config, _ in bound:
            if facts.launches is None or not config.is_file() or self.documents.key(config) == target_key \
                    or self.documents.kind(config) != kind:
                continue
            script = self.documents.resolve_reference(str(facts.launches.value), facts.path)
            if script is None or not str(script).endswith(".py"):
                continue
            by_script.setdefault(self.documents.key(script), (script, []))[1].append(
                (facts, call.script, config, (document, digest)))
        fitting = [(script, candidates) for script, candidates in by_script.values()
                   if (fields := self._script_fields(script)) and keys <= fields]
        if len(fitting) != 1:
            return None
        script, candidates = fitting[0]
        reads.document(self.documents.key(script), self.documents.digest(script))
        return self._form_launch(target, candidates, f"every documented launch of {self._shown(script)} "
                                 "(whose argument classes hold all its keys) is")

    def _script_fields(self, script: Path) -> frozenset[str]:
        from memlint.facts.project_arguments import script_argument_fields

        key = self.documents.key(script)
        if key not in self._fields:
            self._fields[key] = script_argument_fields(self.documents.root, script)
        return self._fields[key]

    def _shown(self, path: Path) -> str:
        """``path`` as the project names it (relative to its root)."""
        try:
            return path.resolve().relative_to(self.documents.root.resolve()).as_posix()
        except ValueError:
            return str(path)

    def sibling_submitted(self, target: Path) -> list[ConfigLaunch]:
        """A config no call names runs, as an assumption, as its folder's configs of the same
        recipe at another model size are submitted (open-instruct's ``olmo2_1124_32b_dpo.yaml``
        beside ``olmo2_1124_{7b,13b}_dpo.yaml``, which ``submit_dpo_job.py`` sends with the DPO job
        spec); none when those siblings are submitted with different specs."""
        pattern = _SIZE.sub("#", target.stem)
        if pattern == target.stem:
            return []
        try:
            siblings = sorted(p for p in target.parent.iterdir() if p.suffix == target.suffix and p.name != target.name
                              and _SIZE.sub("#", p.stem) == pattern)
        except OSError:
            return []
        found = [(sibling, launch) for sibling in siblings for launch in self.submitted_launches(target, sibling)]
        if not found or len({launch.launch.path for _, launch in found}) != 1:
            return []
        sibling, launch = found[0]
        return [replace(launch, named=False,
                        how=f"submitted as {sibling.name}, the same recipe at another size, is (`{launch.call.note}`)")]

    def submitted_launches(self, target: Path, named_by: Path | None = None) -> list[ConfigLaunch]:
        """The launch of a job spec that a submitter's call passes beside the config (before
        the submitter's own run: the spec's command is what runs); ``named_by``: the calls that
        name that other config instead, bound to this one."""
        key = self.documents.key(named_by or target)
        fields = self._top_level_keys(target)  # the config's own fields override the spec command's options
        out: list[ConfigLaunch] = []
        for referrer in self.links.referrers(named_by or target):
            for facts in self.documents.facts(referrer):
                if facts.launches is None:
                    continue
                resolved = [(r, self.documents.resolve_reference(str(r.value), facts.path)) for r in facts.references]
                mine = [r for r, found in resolved if found is not None and self.documents.key(found) == key]
                if not mine:
                    continue
                for reference, spec in resolved:
                    if spec is None or self.documents.key(spec) == key:
                        continue
                    for launch in self._spec_launches(spec):
                        note = f"{facts.launches.value} with {reference.value} (a job spec)"
                        bound = Sourced(str(target), mine[0].origin, note)
                        launch = replace(launch, bound_config=bound, references=[*launch.references, bound],
                                         cli_args={k: v for k, v in launch.cli_args.items() if k not in fields},
                                         cli_unknown={k: v for k, v in launch.cli_unknown.items() if k not in fields})
                        out.append(ConfigLaunch(launch, Sourced(str(facts.launches.value), facts.launches.origin,
                                                                note), True))
                if out:
                    return out[:1]
        return out

    def _spec_launches(self, spec: Path) -> list[RunFacts]:
        """The launch commands in a YAML job spec's strings (Beaker's ``arguments``, a
        Kubernetes ``command``), each located at its string."""
        from memlint.documents.parsed import parse_document
        from memlint.documents.reading import document_from_text
        from memlint.facts.launchers import launches_in

        if not str(spec).lower().endswith((".yaml", ".yml")):
            return []
        structured = self.documents.parsed(spec).structured
        if structured is None or not structured.ok:
            return []
        out: list[RunFacts] = []
        for path, value in _strings(structured.value, ()):
            if not _LAUNCHER.search(value):
                continue
            command = " ".join(value.split())
            parsed = parse_document(document_from_text(str(spec), command))
            for facts in launches_in(parsed, command):
                if facts.launches is None:
                    continue
                where = Location(str(spec), structured.range_of(path))
                out.append(_located(facts, where))
        return out

    def _top_level_keys(self, config: Path) -> frozenset[str]:
        structured = self.documents.parsed(config).structured
        if structured is None or not isinstance(structured.value, dict):
            return frozenset()
        return frozenset(str(k) for k in structured.value)

    def _commented_launches(self, target: Path) -> list[ConfigLaunch]:
        """The launch commands a YAML config's comments give that name the config itself."""
        if not str(target).lower().endswith((".yaml", ".yml")):
            return []
        memo = (self.documents.key(target), self.documents.digest(target))
        if memo not in self._comment_launches:
            # kept for every later asker, so what it reads is no one lint's dependency: the
            # callers record the configs the result rests on
            with reads.paused():
                self._comment_launches[memo] = self._read_commented_launches(target)
        return self._comment_launches[memo]

    def _read_commented_launches(self, target: Path) -> list[ConfigLaunch]:
        from memlint.documents.parsed import parse_document
        from memlint.documents.reading import document_from_text
        from memlint.facts.launchers import command_lines, launches_in

        text = self.documents.text_for_scan(target)
        if not text or "#" not in text:
            return []
        uncommented = "\n".join(_COMMENT.sub(lambda m: " " * len(m.group(0)), line) if _COMMENT.match(line)
                                else " " * len(line) for line in text.split("\n"))
        commands = command_lines(uncommented)
        if not commands.strip():
            return []
        key = self.documents.key(target)
        parsed = parse_document(document_from_text(str(target), uncommented))
        out = []
        for facts in launches_in(parsed, commands):
            if facts.launches is None:
                continue
            named = [r for r in facts.references
                     if (found := self.documents.resolve_reference(str(r.value), target)) is not None
                     and self.documents.key(found) == key]
            if not named:
                continue
            note = f"{facts.launches.value} (the command in its comment)"
            others = [r for r in facts.references if r not in named]
            own = [f for f in self.documents.facts(target) if f.framework is not None]
            if own:
                launch = replace(own[0], references=[*own[0].references, *others],
                                 world_size=facts.world_size or own[0].world_size,
                                 gpus_per_node=facts.gpus_per_node or own[0].gpus_per_node)
            else:
                launch = replace(facts, bound_config=Sourced(str(target), named[0].origin, note))
            out.append(ConfigLaunch(launch, Sourced(str(facts.launches.value), facts.launches.origin, note), True))
        return out

    def _filled(self, facts: RunFacts, values: dict[str, str], call: Invocation | None,
                launcher: Path) -> tuple[RunFacts, Sourced[str]] | None:
        """A template launcher's facts with a call's arguments filled in (the script, the configs
        it names, the GPUs of ``sbatch --nodes``), and the config path it passes its script."""
        from memlint.facts.shell_words import instantiate

        assert facts.template_config is not None
        config = instantiate(str(facts.template_config.value), values)
        if config is None:
            return None
        launches = facts.launches
        if launches is None and facts.template_launches is not None:
            script = instantiate(str(facts.template_launches.value), values)
            if script is None:
                return None
            launches = Sourced(script, facts.template_launches.origin, facts.template_launches.note)
        references = list(facts.references)
        for reference in facts.template_references:
            written = instantiate(str(reference.value), values)
            if written is None:
                return None
            references.append(Sourced(written, reference.origin, reference.note))
        filled = replace(facts, launches=launches, references=references)
        if call is not None and call.nodes is not None and filled.world_size is not None:
            filled = self._on_nodes(filled, launcher, call.nodes)
        elif call is not None and call.nodes is not None:
            per_node = self._gpus_per_node(launcher)
            if per_node is not None:
                filled = replace(filled, world_size=Sourced(
                    call.nodes.value * per_node, call.nodes.origin,
                    f"{call.nodes.note} {call.nodes.value} x {per_node} GPUs per node (#SBATCH)"),
                    gpus_per_node=Sourced(per_node, call.nodes.origin, "#SBATCH GPUs per node"))
        origin = call.script.origin if call is not None else facts.template_config.origin
        return filled, Sourced(config, origin, facts.template_config.note)

    def _on_nodes(self, filled: RunFacts, launcher: Path, nodes: Sourced[int]) -> RunFacts:
        """A batch script whose launch counts its processes from the job's nodes (``--nnodes
        $SLURM_NNODES``, read as its ``#SBATCH --nodes`` header says) called with ``sbatch --nodes
        N``: the launch redone on the caller's N nodes, located at the caller's option. A count
        that does not change with the nodes stays the script's."""
        from memlint.facts.launchers import slurm_job

        assert filled.world_size is not None
        parsed = self.documents.parsed(launcher)
        redone = next((r for r in slurm_job(parsed, nodes.value) if r.anchor == filled.anchor), None)
        if redone is None or redone.world_size is None or redone.world_size.value == filled.world_size.value:
            return filled
        note = f"{nodes.note} {nodes.value}: {redone.world_size.note}"
        per_node = redone.gpus_per_node
        return replace(filled, world_size=Sourced(redone.world_size.value, nodes.origin, note),
                       gpus_per_node=per_node if per_node is not None else filled.gpus_per_node)

    def _gpus_per_node(self, launcher: Path) -> int | None:
        """The GPUs per node a batch script requests (``#SBATCH --gres=gpu:8``)."""
        from memlint.facts.infrastructure import slurm_gpus_per_node

        text = self.documents.text_for_scan(launcher)
        return slurm_gpus_per_node(text) if text else None

    def _from_template(self, target: Path, templated: list[tuple[Invocation, RunFacts, Path]]) -> ConfigLaunch | None:
        """The launch of a config no call names but a launcher's path template matches: the
        template's placeholders read from the config's path, the rest agreed by every real call
        of that launcher (none where they disagree, or where two launchers match)."""
        from memlint.facts.shell_words import match_template, placeholders

        root = self.documents.root.resolve()
        try:
            relative = target.resolve().relative_to(root).as_posix()
        except ValueError:
            return None
        by_launcher: dict[tuple[str, object], list[tuple[Invocation, RunFacts, Path]]] = {}
        for call, facts, launcher in templated:
            by_launcher.setdefault((self.documents.key(facts.path), facts.anchor), []).append((call, facts, launcher))
        found: list[ConfigLaunch] = []
        for calls in by_launcher.values():
            _, facts, launcher = calls[0]
            assert facts.template_config is not None
            values = match_template(str(facts.template_config.value), relative)
            if values is None:
                continue
            needed = [p for t in [facts.template_launches, *facts.template_references] if t is not None
                      for p in placeholders(str(t.value)) if p not in values]
            agreed: dict[str, str] = {}
            for name in needed:
                seen = {call.options().get(name) for call, _, _ in calls}
                if len(seen) != 1 or None in seen:
                    return None  # the calls disagree (zero2 for one, zero3 for another): no launch
                agreed[name] = str(next(iter(seen)))
            node_counts = {call.nodes.value if call.nodes is not None else None for call, _, _ in calls}
            model_call = calls[0][0] if len(node_counts) == 1 else None
            filled = self._filled(facts, {**values, **agreed}, model_call, launcher)
            if filled is None:
                continue
            launch, argument = filled
            named_config = Sourced(str(target), facts.template_config.origin, f"{launcher.name} (template)")
            launch = replace(launch, references=[*launch.references, named_config], bound_config=named_config)
            shown = " ".join(f"{name} {value}" for name, value in agreed.items())
            how = (f"run by `{self.documents.key(launcher)}`, whose path template "
                   f"`{facts.template_config.value}` names it" +
                   (f", with `{shown}` as every documented call of it passes" if shown else ""))
            call = calls[0][0]
            found.append(ConfigLaunch(launch, Sourced(str(call.script.value), call.script.origin, how), False, how))
        return found[0] if len(found) == 1 else None


_LAUNCHER = re.compile(r"\baccelerate\s+launch\b|\btorchrun\b|\bdeepspeed\s+\S+\.py\b")


def _strings(value: object, path: tuple) -> list[tuple[tuple, str]]:
    """Every string of a parsed YAML value, with its path."""
    if isinstance(value, str):
        return [(path, value)]
    if isinstance(value, dict):
        return [found for k, v in value.items() for found in _strings(v, (*path, k))]
    if isinstance(value, list):
        return [found for i, v in enumerate(value) for found in _strings(v, (*path, i))]
    return []


def _located(facts: RunFacts, where: Location) -> RunFacts:
    """A launch read from a string of a job spec, every value located at that string."""
    def at(value: Sourced | None) -> Sourced | None:
        return None if value is None else Sourced(value.value, where, value.note)

    located = replace(
        facts, anchor=where, launches=at(facts.launches),
        references=[Sourced(r.value, where, r.note) for r in facts.references],
        cli_args={k: Sourced(v.value, where, v.note) for k, v in facts.cli_args.items()},
        cli_unknown={k: Sourced(v.value, where, v.note) for k, v in facts.cli_unknown.items()})
    for name in FACT_NAMES:
        if isinstance(getattr(located, name), Sourced):
            setattr(located, name, at(getattr(located, name)))
    return located


def _placeholder_call(call: Invocation) -> bool:
    """A call written as a pattern (``--model {model_name} --config <suffix>``), not a run."""
    return any(_PLACEHOLDER_VALUE.search(str(a.value)) for a in call.arguments)
