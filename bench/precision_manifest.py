"""The checkouts of the precision measurement, read from the tables of ``docs/precision.md``.

Each measurement there names its repositories in a table whose first two columns are
``repository`` and ``commit``; a cell may list several repositories and, in the same order,
their commits (the seventh measurement's samples). ``bench/precision_repos.tsv`` is this
module's rendering of those tables, one row per checkout, so that ``bench/precision.py
restore`` and ``check --manifest`` can rebuild and rerun them all without anyone copying
names by hand; a test keeps the file and the document in step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "precision.md"
MANIFEST = ROOT / "bench" / "precision_repos.tsv"
COLUMNS = ("name", "repository", "commit", "rounds")

_ORDINALS = {
    word: number
    for number, word in enumerate(
        "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth "
        "fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth twentieth twenty-first twenty-second "
        "twenty-third twenty-fourth twenty-fifth twenty-sixth twenty-seventh twenty-eighth twenty-ninth "
        "thirtieth thirty-first thirty-second thirty-third thirty-fourth thirty-fifth thirty-sixth thirty-seventh "
        "thirty-eighth thirty-ninth fortieth forty-first forty-second forty-third forty-fourth forty-fifth "
        "forty-sixth forty-seventh forty-eighth forty-ninth fiftieth fifty-first fifty-second fifty-third "
        "fifty-fourth fifty-fifth fifty-sixth fifty-seventh fifty-eighth fifty-ninth sixtieth sixty-first "
        "sixty-second sixty-third sixty-fourth sixty-fifth sixty-sixth sixty-seventh sixty-eighth sixty-ninth "
        "seventieth seventy-first seventy-second seventy-third seventy-fourth seventy-fifth seventy-sixth "
        "seventy-seventh seventy-eighth seventy-ninth eightieth eighty-first eighty-second eighty-third "
        "eighty-fourth eighty-fifth eighty-sixth eighty-seventh eighty-eighth eighty-ninth ninetieth ninety-first "
        "ninety-second ninety-third ninety-fourth ninety-fifth ninety-sixth ninety-seventh ninety-eighth "
        "ninety-ninth hundredth".split(),
        start=1,
    )
}
_MEASUREMENT = re.compile(r"^##\s+(\w+(?:-\w+)?)\s+measurement\b", re.IGNORECASE)
_REPOSITORY = re.compile(r"(?<![\w./-])([A-Za-z0-9][\w.-]*)/([A-Za-z0-9][\w.-]*)")
_COMMIT = re.compile(r"^[0-9a-f]{7,40}$")
_UNAVAILABLE = re.compile(
    r"([A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*)\s+was asked for too;\s*no snapshot", re.IGNORECASE
)


class ManifestError(ValueError):
    """A table of the document (or a manifest line) that cannot be read as checkouts."""


@dataclass(frozen=True)
class Checkout:
    """One repository at one commit, as a measurement names it."""

    name: str  # the folder it is restored into and the ``repository`` of its findings
    repository: str  # owner/name on GitHub
    commit: str  # as the document writes it: abbreviated or full
    rounds: tuple[int, ...]  # the measurements whose tables list it, the one that added it first

    @property
    def snapshot(self) -> str:
        """The folder ``fetch`` writes the repository's snapshot to, under the mirrors."""
        return self.repository.replace("/", "+")


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def named_in_doc(text: str) -> list[tuple[str, str, int]]:
    """Every (repository, commit, round) a ``| repository | commit |`` table lists, in order."""
    found: list[tuple[str, str, int]] = []
    measurement = 0
    header: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        heading = _MEASUREMENT.match(line)
        if heading and heading.group(1).lower() in _ORDINALS:
            measurement = _ORDINALS[heading.group(1).lower()]
        if not line.startswith("|"):
            header = []
            continue
        cells = _cells(line)
        if not header:
            header = [cell.lower() for cell in cells]
            continue
        if len(header) < 2 or not header[0].startswith("repository") or header[1] != "commit":
            continue
        if set(cells[0]) <= set("-: "):  # the separator row
            continue
        repositories = ["/".join(match) for match in _REPOSITORY.findall(cells[0])]
        commits = [commit.strip() for commit in cells[1].split(",")]
        if not repositories or len(repositories) != len(commits) or not all(map(_COMMIT.match, commits)):
            raise ManifestError(f"line {number}: cannot pair repositories with commits: {line.strip()}")
        if not measurement:
            raise ManifestError(f"line {number}: a commit table before any measurement heading")
        found.extend((repository, commit, measurement) for repository, commit in zip(repositories, commits))
    return found


def unavailable_in_doc(text: str) -> list[str]:
    """Repositories the document says were asked for but could not be had (no snapshot)."""
    return sorted(set(_UNAVAILABLE.findall(" ".join(text.split()))))


def _same_commit(one: str, other: str) -> bool:
    return one.startswith(other) or other.startswith(one)


def checkouts_in_doc(text: str) -> list[Checkout]:
    """One checkout per repository and commit, in the order the measurements first ran them.

    A commit written abbreviated in one table and in full in another is one checkout (its
    first spelling kept); a repository run at two different commits is two, named apart by
    their commits. Folder names are the repositories' names, prefixed by the owner where two
    repositories share a name.
    """
    runs: list[tuple[str, str, list[int]]] = []
    for repository, commit, measurement in sorted(named_in_doc(text), key=lambda row: row[2]):
        same = [rounds for seen, kept, rounds in runs if seen == repository and _same_commit(commit, kept)]
        if not same:
            runs.append((repository, commit, [measurement]))
        elif measurement not in same[0]:
            same[0].append(measurement)
    owners_of: dict[str, set[str]] = {}
    commits_of: dict[str, int] = {}
    for repository, _, _ in runs:
        owner, name = repository.split("/")
        owners_of.setdefault(name.lower(), set()).add(owner)
        commits_of[repository] = commits_of.get(repository, 0) + 1
    checkouts = []
    for repository, commit, rounds in runs:
        owner, name = repository.split("/")
        folder = name if len(owners_of[name.lower()]) == 1 else f"{owner}-{name}"
        if commits_of[repository] > 1:
            folder += f"@{commit[:7]}"
        checkouts.append(Checkout(folder, repository, commit, tuple(rounds)))
    return checkouts


def render(text: str) -> str:
    """The manifest file for the document ``text``."""
    lines = [
        "# The checkouts docs/precision.md measures, one a line; generated from its `| repository | commit |`",
        "# tables by `python bench/precision.py manifest` (do not edit by hand). rounds: the measurements whose",
        "# tables list the checkout, the one that added it first. Restore: `python bench/precision.py restore --into DIR`.",
        "\t".join(COLUMNS),
    ]
    lines += [
        f"{c.name}\t{c.repository}\t{c.commit}\t{','.join(map(str, c.rounds))}" for c in checkouts_in_doc(text)
    ]
    lines += [f"# not had (the document says no snapshot could be had): {repo}" for repo in unavailable_in_doc(text)]
    return "\n".join(lines) + "\n"


def read(path: Path) -> list[Checkout]:
    """The checkouts of a manifest file (``#`` lines are comments, the first other line the header)."""
    rows = [line.split("\t") for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]
    if not rows or tuple(rows[0]) != COLUMNS:
        raise ManifestError(f"{path}: the header must be {' '.join(COLUMNS)} (tab-separated)")
    checkouts = []
    for number, row in enumerate(rows[1:], start=2):
        rounds = row[3].split(",") if len(row) == len(COLUMNS) else []
        if not rounds or not _COMMIT.match(row[2]) or not all(r.isdigit() for r in rounds):
            raise ManifestError(f"{path}: row {number} is not name, owner/name, commit, rounds: {row}")
        checkouts.append(Checkout(row[0], row[1], row[2], tuple(map(int, rounds))))
    names = [c.name for c in checkouts]
    if len(set(names)) != len(names):
        raise ManifestError(f"{path}: a name is used twice")
    return checkouts


def rounds_named(spec: str) -> set[int]:
    """The measurements ``spec`` names: ``11``, ``2-8``, ``1,9`` or a mix."""
    picked: set[int] = set()
    for part in filter(None, spec.split(",")):
        first, _, last = part.partition("-")
        if not first.strip().isdigit() or (last and not last.strip().isdigit()):
            raise ManifestError(f"not a measurement or a range of them: {part!r}")
        picked.update(range(int(first), int(last or first) + 1))
    return picked


def select(checkouts: list[Checkout], names: list[str] | None, rounds: str | None) -> list[Checkout]:
    """The checkouts named (comma-separated names, repeatable) and listed by the measurements ``rounds``."""
    chosen = checkouts
    if names:
        wanted = {name for item in names for name in item.split(",") if name}
        unknown = wanted - {c.name for c in checkouts}
        if unknown:
            raise ManifestError(f"not in the manifest: {', '.join(sorted(unknown))}")
        chosen = [c for c in chosen if c.name in wanted]
    if rounds:
        measured = rounds_named(rounds)
        chosen = [c for c in chosen if measured & set(c.rounds)]
    return chosen
