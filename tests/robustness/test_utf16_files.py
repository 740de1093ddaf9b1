"""Files saved as UTF-16 (Windows PowerShell's `echo ... > README.md` and `Out-File` write them with
a byte-order mark): text, not binary. luvu4ever/ollama-finetune's README was reported as "a binary
file (contains NUL bytes)"."""

from __future__ import annotations

from memlint.documents.reading import decode

README = "# ollama-finetune\r\n\r\n```bash\r\npython run_training.py --model Qwen/Qwen2.5-0.5B\r\n```\r\n"


def test_a_utf16_readme_is_read_as_text():
    for encoded in (README.encode("utf-16"), README.encode("utf-16-be").join([b"\xfe\xff", b""])):
        text, problem = decode(encoded, "README.md")
        assert problem is None
        assert "python run_training.py --model Qwen/Qwen2.5-0.5B" in text


def test_a_utf16_script_or_config_is_named_as_utf16_not_binary():
    for path, body in (("train.sh", "#!/bin/bash\npython train.py\n"),
                       ("ds_config.json", '{"zero_optimization": {"stage": 2}}\n'),
                       ("train.py", "import torch\n")):
        text, problem = decode(body.encode("utf-16"), path)
        assert text == ""
        assert problem is not None and problem.startswith("UTF-16 text") and "save it as UTF-8" in problem, path


def test_nul_bytes_without_a_byte_order_mark_are_still_binary():
    assert decode(b'{"zero_optimization": {"stage": 2}}\x00\x00', "nul.json") == ("", "binary file (contains NUL bytes)")
