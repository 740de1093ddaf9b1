"""Python reads a script in the encoding its PEP 263 cookie declares; memlint must too, or a
working latin-1 script would be reported as unreadable and never checked."""

from __future__ import annotations

from pathlib import Path

from memlint.check.run import lint
from memlint.documents.reading import read_document
from memlint.project.settings import Settings

LATIN1_LOOP = """\
# -*- coding: latin-1 -*-
\"\"\"Entraînement de GPT-2 en précision mixte (réglages de l'équipe).\"\"\"
import torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("openai-community/gpt2").cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-5)
model.train()
for batch in loader:
    with torch.autocast("cuda", dtype=torch.float16):
        loss = model(**batch).loss  # entraînement
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
"""


def codes(tmp_path: Path) -> dict[str, set[str]]:
    result = lint([tmp_path], Settings(root=tmp_path).with_overrides(cache=False, gpu="a100-80gb"))
    found: dict[str, set[str]] = {}
    for d in result.diagnostics:
        found.setdefault(Path(d.path).name, set()).add(d.code)
    return found


def test_a_latin1_script_with_a_coding_cookie_is_read_and_checked(tmp_path):
    (tmp_path / "entrainement.py").write_bytes(LATIN1_LOOP.encode("latin-1"))
    document = read_document(tmp_path / "entrainement.py")
    assert document.problem is None and "Entraînement" in document.text
    assert codes(tmp_path)["entrainement.py"] == {"AMP001"}  # fp16 autocast, no GradScaler


def test_latin1_without_a_cookie_is_unreadable_as_python_says(tmp_path):
    (tmp_path / "train.py").write_bytes(LATIN1_LOOP.split("\n", 1)[1].encode("latin-1"))
    document = read_document(tmp_path / "train.py")
    assert document.problem is not None and document.problem.startswith("not valid UTF-8 (byte ")
    assert codes(tmp_path)["train.py"] == {"SYN002"}


def test_an_unknown_codec_is_reported_not_raised(tmp_path):
    (tmp_path / "train.py").write_bytes(b"# -*- coding: klingon -*-\nimport torch\n")
    assert "unknown encoding: klingon" in read_document(tmp_path / "train.py").problem
    assert codes(tmp_path)["train.py"] == {"SYN002"}


def test_yaml_has_no_cookie_and_must_be_utf8(tmp_path):
    (tmp_path / "qlora.yml").write_bytes("# -*- coding: latin-1 -*-\nbase_model: café\n".encode("latin-1"))
    assert read_document(tmp_path / "qlora.yml").problem.startswith("not valid UTF-8")
