"""An editor buffer stands in for its file: hashed once per version, though a lint asks for the
document about ten times (the rules, the runs' linking, the language server's last-good and
dependents' checks), and a new version, even one with the same text, is compared by content."""

from __future__ import annotations

from pathlib import Path

from memlint.documents import reads
from memlint.lsp.session import Session

SCRIPT = '''\
"""Full fine-tune of a causal LM with the HF Trainer."""

import argparse

from transformers import AutoModelForCausalLM as LM, Trainer, TrainingArguments


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--output_dir", default="checkpoints")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    model = LM.from_pretrained("meta-llama/Llama-3.1-8B")
    training_args = TrainingArguments(
        output_dir=args.output_dir,
        per_device_train_batch_size=args.batch_size,
        bf16=True,
    )
    Trainer(model=model, args=training_args).train()


if __name__ == "__main__":
    main()
'''
SMALL_MODEL = SCRIPT.replace("meta-llama/Llama-3.1-8B", "HuggingFaceTB/SmolLM2-135M-Instruct")


def _codes(outcome) -> list[str]:
    return [d.code for d in outcome.diagnostics]


def test_a_buffer_is_hashed_once_per_version_and_each_version_linted_by_its_content(tmp_path: Path, monkeypatch):
    (tmp_path / "memlint.toml").write_text('gpu = "a10g"\nseq-len = 512\n')
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    hashed: list[str] = []
    digest = reads.digest

    def counted(text: str, problem: str | None) -> str:
        hashed.append(text)
        return digest(text, problem)

    monkeypatch.setattr(reads, "digest", counted)
    session = Session([tmp_path])
    session.set_text(script, SCRIPT)
    assert "MEM001" in _codes(session.lint(script)), "an 8B full fine-tune fits a 24 GB card"

    session.set_text(script, SMALL_MODEL)  # the user picked a smaller model
    hashed.clear()
    assert "MEM001" not in _codes(session.lint(script))
    assert sum(text is SMALL_MODEL for text in hashed) == 1, "the buffer was hashed more than once for one version"
    project = session.scope_for(script).linter.project
    parsed = project.parsed(script)

    hashed.clear()
    again = "".join(list(SMALL_MODEL))  # the same text in a new version (an edit undone)
    assert again is not SMALL_MODEL
    session.set_text(script, again)
    assert "MEM001" not in _codes(session.lint(script))
    assert len([text for text in hashed if text is again]) == 1, "a new version was not compared by its content"
    assert project.parsed(script) is parsed, "the same text was parsed again"

    session.set_text(script, None)  # closed: the file on disk counts again
    assert "MEM001" in _codes(session.lint(script))
