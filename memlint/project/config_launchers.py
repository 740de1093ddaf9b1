"""The launchers a config is run with when no file names the config itself.

Many projects ship a launcher that takes the config from its caller (open-instruct's
``scripts/finetune_with_accelerate_config.sh``: ``accelerate launch --deepspeed_config_file
stage3.conf open_instruct/finetune.py "$2"``) and document how to call it with a config
(``sh scripts/finetune_with_accelerate_config.sh 8 configs/train_configs/sft/olmo_17_sft.yaml``,
in a README's shell block or another script). Such a call links the config to the launch: the
DeepSpeed config, the launcher's options and the script that parses the config all apply.

A config no call names takes the launch documented for the configs of its own folder (or the
nearest folder above it that has one), when every such call uses the same launcher; the run then
rests on that assumption, and says which call it followed. Calls that disagree (two launchers for
one folder) give no launch: memlint cannot tell which one runs the config.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from memlint.documents import reads
from memlint.documents.kinds import DocumentKind
from memlint.model.provenance import Sourced

if TYPE_CHECKING:
    from memlint.facts.launchers import Invocation
    from memlint.facts.plan import RunFacts
    from memlint.project.documents import DocumentStore
    from memlint.project.links import LinkIndex

_SCANNED = (".sh", ".bash", ".md", ".markdown")


@dataclass(frozen=True)
class ConfigLaunch:
    """A launcher's launch with a config bound to the argument it takes from its caller."""

    launch: RunFacts  # the launcher's launch facts, the config bound (``bound_config``)
    call: Sourced[str]  # the documented call it follows (located at the launcher's name)
    named: bool  # the call names this very config (else: one of its folder)


class ConfigLaunchers:
    """The documented calls of the project's config-taking launchers (one text pass, kept until
    invalidated), and the launch each config inherits from them."""

    def __init__(self, documents: DocumentStore, links: LinkIndex) -> None:
        self.documents = documents
        self.links = links
        self._calls: list[tuple[Path, str, Invocation]] | None = None  # (document, digest, call)

    def invalidate(self) -> None:
        self._calls = None

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
                    if not text or ".sh" not in text:
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
        one launcher."""
        target = Path(path)
        key = self.documents.key(target)
        kind = self.documents.kind(target)
        bound: list[tuple[Path, str, Invocation, RunFacts, Path]] = []
        for document, digest, call in self.calls():
            launcher = self.documents.resolve_reference(str(call.script.value), document)
            if launcher is None:
                continue
            for facts in self.documents.facts(launcher):
                if facts.launches is None or facts.positional_config is None:
                    continue
                position = int(facts.positional_config.value)
                if position > len(call.arguments):
                    continue
                written = str(call.arguments[position - 1].value)
                config = self.documents.resolve_reference(written, document) or self.documents.root / written
                bound.append((document, digest, call, facts, config))
        named = [b for b in bound if b[4].is_file() and self.documents.key(b[4]) == key]
        chosen, own = named, True
        if not chosen:
            own = False
            folder = target.resolve().parent
            root = self.documents.root.resolve()
            while not chosen and (folder == root or root in folder.parents):
                chosen = [b for b in bound if b[4].resolve().parent == folder
                          and (not b[4].is_file() or self.documents.kind(b[4]) == kind)]
                folder = folder.parent
        launchers = {(self.documents.key(b[3].path), b[3].anchor) for b in chosen}
        if not chosen or len(launchers) != 1:
            return []
        document, digest, call, facts, _ = chosen[0]
        reads.document(self.documents.key(document), digest)
        position = int(facts.positional_config.value) if facts.positional_config is not None else 1
        named_config = Sourced(str(target), call.arguments[position - 1].origin,
                               f"{call.script.value} {' '.join(str(a.value) for a in call.arguments)}")
        launch = replace(facts, references=[*facts.references, named_config], bound_config=named_config)
        return [ConfigLaunch(launch, Sourced(str(call.script.value), call.script.origin, named_config.note), own)]
