"""bench/precision.py: the manifest read from docs/precision.md's tables, restoring checkouts
from snapshots, running them from the manifest, and comparing two runs finding by finding.
Nothing here needs the network: snapshots are bare repositories made in a temporary folder."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_SPEC = importlib.util.spec_from_file_location("precision", REPO / "bench" / "precision.py")
precision = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = precision
_SPEC.loader.exec_module(precision)
manifest = precision.precision_manifest
compare = precision.precision_compare

DOC = textwrap.dedent("""\
    # Precision on public training repositories

    ## Third measurement: held out, at first contact (issue 15, round 3)

    | repository | commit | findings (all codes) | mission codes |
    |---|---|---:|---:|
    | karpathy/nanoGPT | 3adf61e154c3 | 5 | 0 |
    | meta-llama/llama-recipes (llama-cookbook) | faae2fd87799 | 3 | 0 |

    | repository | finding | verdict |
    |---|---|---|
    | nanoGPT | AMP001 `train.py:300` | right |

    | pattern (repository) | findings before | mechanism |
    |---|---|---|
    | a launcher in `hiyouga/LLaMA-Factory` | ff6d4d12eeb0 | read |

    Regenerate:

        python bench/precision.py check nanoGPT=/tmp/rw/nanoGPT --json hold.json

    ## Second measurement: six repositories (issue 15, round 2)

    | repository | commit | findings (all codes) |
    |---|---|---|
    | karpathy/nanoGPT | 3adf61e154c3fe3fca428ad6bc3818b27a3b8291 | 7 |
    | allenai/open-instruct | e6c3044aa6201c8bfa4573c1b03142af599e730d | 209 |

    ## First measurement: twelve repositories

    Every finding of the mission codes, judged by hand.

    ## Repositories and commits

    | repository | commit | seen while fixing issue 15 |
    |---|---|---|
    | karpathy/minGPT | 37baab71b9abea1b76ab957409a1cc2fbfba8a26 | no |
    | openai/examples | 1111111aaaaaaa | no |

    ## Seventh measurement: fourteen at first contact (issue 15, round 7)

    | repository | commit | at first contact | verdict |
    |---|---|---|---|
    | karpathy/nanochat, pytorch/examples, karpathy/minGPT | 92d63d4e8bb4, 77f55b912142, 0123456789ab | none | |

    (PKU-Alignment/safe-rlhf was asked for too; no snapshot of
    it can be had here.)
    """)


def test_manifest_reads_every_commit_table_in_the_order_measurements_ran():
    checkouts = manifest.checkouts_in_doc(DOC)
    assert [(c.name, c.repository, c.commit, c.rounds) for c in checkouts] == [
        # the first measurement's table sits under "Repositories and commits", still round 1
        ("minGPT@37baab7", "karpathy/minGPT", "37baab71b9abea1b76ab957409a1cc2fbfba8a26", (1,)),
        ("openai-examples", "openai/examples", "1111111aaaaaaa", (1,)),
        # the full commit of round 2 and the abbreviated one of round 3 are one checkout
        ("nanoGPT", "karpathy/nanoGPT", "3adf61e154c3fe3fca428ad6bc3818b27a3b8291", (2, 3)),
        ("open-instruct", "allenai/open-instruct", "e6c3044aa6201c8bfa4573c1b03142af599e730d", (2,)),
        ("llama-recipes", "meta-llama/llama-recipes", "faae2fd87799", (3,)),
        # a cell of several repositories pairs them with its commits in order; two owners
        # with one name are told apart by the owner, one repository at two commits by the commit
        ("nanochat", "karpathy/nanochat", "92d63d4e8bb4", (7,)),
        ("pytorch-examples", "pytorch/examples", "77f55b912142", (7,)),
        ("minGPT@0123456", "karpathy/minGPT", "0123456789ab", (7,)),
    ]
    assert manifest.unavailable_in_doc(DOC) == ["PKU-Alignment/safe-rlhf"]


def test_a_cell_whose_repositories_and_commits_do_not_pair_is_refused():
    broken = DOC.replace("92d63d4e8bb4, 77f55b912142, 0123456789ab", "92d63d4e8bb4, 77f55b912142")
    with pytest.raises(manifest.ManifestError, match="cannot pair"):
        manifest.checkouts_in_doc(broken)


def test_selection_by_name_and_by_measurement():
    checkouts = manifest.checkouts_in_doc(DOC)
    assert [c.name for c in manifest.select(checkouts, None, "3")] == ["nanoGPT", "llama-recipes"]
    assert [c.name for c in manifest.select(checkouts, ["nanochat,nanoGPT"], "2-3")] == ["nanoGPT"]
    assert len(manifest.select(checkouts, None, "1,7")) == 5
    with pytest.raises(manifest.ManifestError, match="not in the manifest: nanogpt"):
        manifest.select(checkouts, ["nanogpt"], None)
    with pytest.raises(manifest.ManifestError, match="range"):
        manifest.rounds_named("ninth")


def test_rendered_manifest_reads_back_and_a_wrong_header_is_refused(tmp_path):
    path = tmp_path / "repos.tsv"
    path.write_text(manifest.render(DOC))
    assert manifest.read(path) == manifest.checkouts_in_doc(DOC)
    assert "# not had (the document says no snapshot could be had): PKU-Alignment/safe-rlhf" in path.read_text()
    path.write_text("repo\tsha\nnanoGPT\t3adf61e\n")
    with pytest.raises(manifest.ManifestError, match="header"):
        manifest.read(path)


def test_committed_manifest_is_the_one_docs_precision_md_gives():
    """A new measurement's table must reach bench/precision_repos.tsv (`precision.py manifest`)."""
    assert manifest.MANIFEST.read_text() == manifest.render(manifest.DOC.read_text())
    checkouts = manifest.read(manifest.MANIFEST)
    assert len({c.name for c in checkouts}) == len(checkouts)
    assert {c.rounds[0] for c in checkouts} >= set(range(1, 12)) - {6}  # the sixth re-ran the fifth's
    # the 88 checkouts the second to eleventh measurements ran (the first's twelve came before)
    assert len(manifest.select(checkouts, None, "2-11")) == 88


def _git(*args: str, cwd: Path | None = None) -> str:
    env = {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b", "GIT_COMMITTER_NAME": "a",
           "GIT_COMMITTER_EMAIL": "a@b", "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


def _snapshot(mirrors: Path, repository: str) -> list[str]:
    """A bare snapshot of a small training repository with two commits; their hashes."""
    work = mirrors.parent / "work" / repository.replace("/", "+")
    (work / "configs").mkdir(parents=True)
    (work / "train.py").write_text("import torch\nmodel = torch.nn.Linear(8, 8)\n")
    (work / "configs" / "ds_zero2.json").write_text('{"zero_optimization": {"stage": 2}}\n')
    _git("init", "-q", str(work))
    _git("add", ".", cwd=work)
    _git("commit", "-qm", "first", cwd=work)
    first = _git("rev-parse", "HEAD", cwd=work)
    (work / "train.py").write_text("import torch\nmodel = torch.nn.Linear(16, 16)\n")
    _git("commit", "-qam", "second", cwd=work)
    _git("clone", "-q", "--bare", str(work), str(mirrors / repository.replace("/", "+") / "repo"))
    return [first, _git("rev-parse", "HEAD", cwd=work)]


def test_restore_writes_each_checkout_at_its_commit_and_lists_what_it_cannot(tmp_path, capsys):
    mirrors = tmp_path / "mirror"
    first, _ = _snapshot(mirrors, "karpathy/nanoGPT")
    checkouts = [
        manifest.Checkout("nanoGPT", "karpathy/nanoGPT", first[:12], (2,)),
        manifest.Checkout("minGPT", "karpathy/minGPT", "37baab71b9ab", (1,)),
        manifest.Checkout("nanoGPT@deadbee", "karpathy/nanoGPT", "deadbeefdead", (7,)),
    ]
    into = tmp_path / "co"
    missing = precision.restore(checkouts, mirrors, into)
    assert [(c.name, "no snapshot" in why, "lacks commit" in why) for c, why in missing] == [
        ("minGPT", True, False), ("nanoGPT@deadbee", False, True)]
    assert (into / "nanoGPT" / "train.py").read_text().endswith("Linear(8, 8)\n")  # the first commit, not HEAD
    assert (into / "nanoGPT" / "configs" / "ds_zero2.json").exists()
    assert (into / "nanoGPT" / ".git").is_dir()  # the checkout is its own project root
    assert sorted(p.name for p in into.iterdir()) == ["nanoGPT"]  # no partial folder left behind
    (into / "nanoGPT" / "train.py").write_text("kept\n")
    precision.restore(checkouts[:1], mirrors, into)
    assert (into / "nanoGPT" / "train.py").read_text() == "kept\n"
    assert "present, kept" in capsys.readouterr().out


def _finding(repository: str, code: str, filename: str, row: int, severity: str, message: str) -> dict:
    return {"repository": repository, "code": code, "filename": filename, "severity": severity,
            "message": message, "location": {"row": row, "column": 1}, "end_location": {"row": row, "column": 9}}


def test_check_runs_the_restored_checkouts_of_the_manifest(tmp_path, capsys):
    root = tmp_path / "co"
    (root / "nanoGPT").mkdir(parents=True)
    listed = tmp_path / "repos.tsv"
    listed.write_text("name\trepository\tcommit\trounds\nnanoGPT\tkarpathy/nanoGPT\t3adf61e154c3\t2,3\n"
                      "minGPT\tkarpathy/minGPT\t37baab71b9ab\t1\n")
    fake = tmp_path / "memlint"  # stands for memlint: prints one finding with an absolute file name
    fake.write_text("#!/bin/sh\nprintf '[{\"code\": \"AMP001\", \"filename\": \"%s/train.py\", \"severity\": "
                    "\"warning\", \"message\": \"float16 without a GradScaler\", \"location\": {\"row\": 300, "
                    "\"column\": 5}}]' \"$PWD\"\nexit 1\n")
    fake.chmod(0o755)
    out = tmp_path / "run.json"
    args = precision.argparse.Namespace(checkouts=[], manifest=listed, root=root, only=None, round=None,
                                        memlint=str(fake), online=False, sample=3, json=out)
    assert precision.run_checks(args) == 0
    printed = capsys.readouterr().out
    assert "not restored under" in printed and "minGPT" in printed
    assert "* AMP001 warning train.py:300: float16 without a GradScaler" in printed
    assert json.loads(out.read_text())[0]["repository"] == "nanoGPT"
    assert json.loads(out.read_text())[0]["filename"] == "train.py"


def test_compare_pairs_findings_by_place_and_lists_the_mission_codes_that_moved():
    unchanged = [
        _finding("nanoGPT", "AMP001", "train.py", 300, "warning", "float16 autocast without a GradScaler"),
        _finding("open-instruct", "MEM001", "configs/sft/tulu2_70b.yaml", 3, "error", "peak 295.0 GiB"),
    ]
    before = unchanged + [
        _finding("open-instruct", "MEM001", "configs/sft/tulu2_70b.yaml", 3, "error", "peak 178.2 GiB"),
        _finding("SimPO", "ZRO001", "accelerate_configs/deepspeed_zero3.yaml", 9, "warning", "fits with ZeRO-1"),
        _finding("peft", "MEM001", "examples/sft/run.sh", 3, "error", "peak 76.7 GiB"),
        _finding("peft", "MEM003", "examples/boft/train.py", 12, "info", "unknown model"),
    ]
    after = list(reversed(unchanged)) + [  # the order of a run does not matter
        _finding("open-instruct", "MEM001", "configs/sft/tulu2_70b.yaml", 3, "warning", "peak 178.2 GiB, assumed"),
        _finding("SimPO", "ZRO001", "accelerate_configs/deepspeed_zero3.yaml", 9, "warning", "fits with ZeRO-1 at 66.3"),
        _finding("LongLoRA", "MEM001", "supervised-fine-tune.py", 95, "warning", "peak 175.0 GiB"),
        _finding("peft", "MEM003", "examples/boft/train.py", 12, "info", "a PEFT method memlint does not model"),
        _finding("peft", "MEM003", "examples/boft/train.py", 40, "info", "unknown model"),
    ]
    moved = compare.changes(before, after)
    assert [(c.kind, c.key[0], c.key[1], c.key[3]) for c in moved] == [
        ("new", "LongLoRA", "MEM001", 95),
        ("changed", "SimPO", "ZRO001", 9),
        ("changed", "open-instruct", "MEM001", 3),  # the 295 GiB one matched unchanged; the other re-said
        ("gone", "peft", "MEM001", 3),
        ("changed", "peft", "MEM003", 12),
        ("new", "peft", "MEM003", 40),
    ]
    text = compare.report(before, after, precision.MISSION)
    assert "new     LongLoRA MEM001 supervised-fine-tune.py:95" in text
    assert "   was  error   peak 178.2 GiB\n   now  warning peak 178.2 GiB, assumed" in text
    assert "peft MEM003" not in text  # other codes are only counted
    assert "mission codes: 1 new, 1 gone, 2 changed (5 -> 5 findings)" in text
    assert "  MEM003 1 -> 2 (+1)" in text and "* MEM001 3 -> 3\n" in text
    assert text.endswith("  all 6 -> 7")


def test_compare_of_a_run_with_itself_moves_nothing(tmp_path):
    findings = [_finding("LIMO", "MEM001", "train/examples/deepspeed/ds_z3_config.json", 19, "error", "109.6 GiB")]
    path = tmp_path / "run.json"
    path.write_text(json.dumps(findings))
    assert compare.changes(compare.load(path), compare.load(path)) == []
