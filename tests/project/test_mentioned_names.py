"""The referrer index's prefilter: the file names a document mentions, found from the lines
around file extensions, are those a scan of the whole text finds."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from memlint.project.documents import _FILE_NAME, _MODULE_WORD, mentioned_names

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from lsp_latency import training_script  # noqa: E402


def _whole_text_names(text: str) -> set[str]:
    return {name.rsplit("/", 1)[-1] for name in _FILE_NAME.findall(text)}


def test_a_large_training_script_mentions_its_configs() -> None:
    text = training_script(2000)
    names = set(mentioned_names("train_mixture.py", text))
    assert {"ds_config.json", "mixture.json"} <= names
    assert _whole_text_names(text) <= names


def test_launchers_and_configs_mention_what_a_whole_scan_finds() -> None:
    for path in [*ROOT.glob("examples/**/*"), *ROOT.glob("tests/real_runs/**/*")]:
        if path.suffix not in (".py", ".sh", ".json", ".yaml", ".yml") or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        found = set(mentioned_names(str(path), text))
        if path.suffix == ".py" and not found and _whole_text_names(text):
            continue  # not training code: not scanned at all
        assert _whole_text_names(text) <= found, path


PIECES = st.sampled_from(["cfg/ds_config.json", "a.py.json", "run.sh", " ", "\n", "x.yaml", ".yml", "..py",
                          "--deepspeed=zero2.json", "import torch\n", "trainer.train()\n", "a-b/c_d.py", "é.json"])


@settings(max_examples=300, deadline=None)
@given(st.lists(PIECES | st.text(max_size=8), max_size=30))
def test_any_text_mentions_what_a_whole_scan_finds(pieces: list[str]) -> None:
    text = "import torch\ntrainer.train()\n" + "".join(pieces)
    assert _whole_text_names(text) <= set(mentioned_names("launch.sh", text))


# the module flag as first written: a look-behind, tried at every character of the text
_FLAG_LOOKING_BEHIND = re.compile(r"(?<![\w-])(?:-m|--module)(?![\w-])")
FLAG_PIECES = st.sampled_from(["-m", "--module", "-", "--", "m", "x", " ", "\n", "-mo", "a.b", "é", "_", "=",
                               "deepspeed ", "python ", "train_sft"])


@settings(max_examples=300, deadline=None)
@given(st.lists(FLAG_PIECES | st.text(max_size=4), max_size=30))
def test_the_module_flag_scan_finds_what_a_look_behind_finds(pieces: list[str]) -> None:
    text = "".join(pieces)
    expected = {f"{word.rsplit('.', 1)[-1]}.py" for match in _FLAG_LOOKING_BEHIND.finditer(text)
                for word in text[match.end():match.end() + 400].replace("\\\n", " ").split("\n", 1)[0].split()[:6]
                if _MODULE_WORD.fullmatch(word)}
    found = {name for name in mentioned_names("launch.sh", text) if name.endswith(".py")}
    assert expected <= found
    assert found - expected <= _whole_text_names(text)
