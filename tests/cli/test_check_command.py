"""``memlint check`` as pre-commit and CI run it: which files it reads, which settings win,
how findings are silenced, and what it exits with."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from cli_project import DS_CONFIG, FILES, LOOP
from cli_testing import memlint, write


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write(tmp_path, FILES)


def codes(result) -> list[tuple[str, str]]:
    return sorted((Path(f["filename"]).as_posix(), f["code"]) for f in result.json())


# ------------------------------------------------------------------ exit codes


def test_exit_codes_clean_findings_and_usage_errors(project):
    assert memlint(project, "check", "train.py", "launch.sh", "ds_config.json").code == 0
    assert memlint(project, "check").code == 1
    assert memlint(project, "check", "--exit-zero").code == 0
    assert memlint(project, "check", "--fail-on", "error").code == 0  # ACC001 and AMP001 are warnings
    unknown_gpu = memlint(project, "check", "--gpu", "a100-81gb")
    assert unknown_gpu.code == 2 and "a100-81gb" in unknown_gpu.err
    missing = memlint(project, "check", "no_such_script.py")
    assert missing.code == 2 and "no_such_script.py" in missing.err


def test_an_empty_file_list_exits_zero(tmp_path):
    write(tmp_path, {"README.md": "# notes\n", "docs/index.md": "nothing to lint\n"})
    result = memlint(tmp_path, "check", "--output-format", "json")
    assert result.code == 0 and result.json() == []


def test_a_broken_settings_file_is_a_usage_error(project):
    (project / "memlint.toml").write_text('gpu = "a100-80gb"\nselect = "MEM001"\nseq-len = -4\n')
    result = memlint(project, "check")
    assert result.code == 2 and "memlint.toml" in result.err



_CONFLICTED_DEPENDENCIES = (
    '[project]\nname = "course"\ndependencies = [\n    "torch>=2.4",\n<<<<<<< HEAD\n    "numpy>=2.0",\n'
    '=======\n    "pandas>=2.2",\n>>>>>>> 5164b7f\n]\n'
)


def test_a_packaging_file_memlint_cannot_read_is_not_its_settings(project):
    """A merge conflict left in a pyproject.toml that has no [tool.memlint] stops nothing: memlint
    warns, reads it as having no settings, and lints with the defaults."""
    (project / "memlint.toml").unlink()
    (project / "pyproject.toml").write_text(_CONFLICTED_DEPENDENCIES)
    result = memlint(project, "check", "--output-format", "json")
    assert result.code == 1 and {f["code"] for f in result.json()} >= {"ACC001"}
    assert "pyproject.toml: invalid TOML" in result.err and "no [tool.memlint]" in result.err


def test_a_broken_pyproject_with_memlint_settings_is_a_usage_error(project):
    (project / "memlint.toml").unlink()
    (project / "pyproject.toml").write_text(_CONFLICTED_DEPENDENCIES + '\n[tool.memlint]\ngpu = "a100-80gb"\n')
    result = memlint(project, "check")
    assert result.code == 2 and "pyproject.toml: invalid TOML" in result.err

# ------------------------------------------------------------------ settings


def test_select_and_ignore_from_pyproject_and_the_command_line(project):
    (project / "memlint.toml").unlink()
    (project / "pyproject.toml").write_text(
        '[project]\nname = "finetune"\n\n[tool.memlint]\ngpu = "a100-80gb"\nignore = ["AMP"]\n'
    )
    assert codes(memlint(project, "check", "--output-format", "json")) == [("loop.py", "ACC001")]
    # the command line wins over the file
    assert codes(memlint(project, "check", "--output-format", "json", "--select", "AMP001")) == [
        ("loop.py", "AMP001")]
    assert codes(memlint(project, "check", "--output-format", "json", "--ignore", "ACC")) == []


def test_per_file_ignores_silence_json_which_has_no_comments(project):
    write(project, {"ds_config.json": DS_CONFIG.replace('"bf16"', '"gradient_clipp1ng": 1.0,\n      "bf16"')})
    found = codes(memlint(project, "check", "--output-format", "json", "ds_config.json"))
    assert found == [("ds_config.json", "CFG001")]
    (project / "memlint.toml").write_text(
        'gpu = "a100-80gb"\n\n[per-file-ignores]\n"ds_*.json" = ["CFG001"]\n'
    )
    assert codes(memlint(project, "check", "--output-format", "json", "ds_config.json")) == []


def test_severity_overrides_change_the_exit_code(project):
    (project / "memlint.toml").write_text(
        'gpu = "a100-80gb"\nfail-on = "error"\n\n[severity]\nACC001 = "error"\n'
    )
    result = memlint(project, "check", "--output-format", "json")
    assert result.code == 1
    assert {f["code"]: f["severity"] for f in result.json()} == {"ACC001": "error", "AMP001": "warning"}


def test_suppression_comments_in_python_and_yaml(project):
    write(project, {"loop.py": LOOP.replace("loss.backward()", "loss.backward()  # memlint: ignore[AMP001]")})
    write(project, {"axolotl.yml": '''
        base_model: mistralai/Mistral-7B-v0.1
        sequence_len: 4096
        micro_batch_size: 1
        learning_rate: 0.0002
        adapter: qlora
        load_in_4bit: true
        gradient_checkpointing: true
        sequence_length: 4096  # memlint: ignore[CFG001]
        datasets:
          - path: tatsu-lab/alpaca
            type: alpaca
    '''})
    found = codes(memlint(project, "check", "--output-format", "json", "loop.py", "axolotl.yml"))
    assert found == [("loop.py", "ACC001")]


# ------------------------------------------------------------------ which files


def test_gitignored_and_excluded_files_are_not_linted(project):
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    write(project, {".gitignore": "outputs/\n", "outputs/checkpoint-500/loop.py": LOOP, "vendor/loop.py": LOOP})
    found = {path for path, _ in codes(memlint(project, "check", "--output-format", "json"))}
    assert found == {"loop.py", "vendor/loop.py"}
    (project / "memlint.toml").write_text('gpu = "a100-80gb"\nextend-exclude = ["vendor/"]\n')
    found = {path for path, _ in codes(memlint(project, "check", "--output-format", "json"))}
    assert found == {"loop.py"}
    # pre-commit names files explicitly; --force-exclude still applies the excludes to them
    named = memlint(project, "check", "--output-format", "json", "--force-exclude", "vendor/loop.py", "loop.py")
    assert {path for path, _ in codes(named)} == {"loop.py"}


def test_a_project_template_is_not_linted_as_python(project):
    """A cookiecutter template (transformers' ``templates/adding_a_new_example_script/
    {{cookiecutter.directory_name}}/run_{{cookiecutter.example_shortcut}}.py``) holds Jinja that
    renders to Python; before, each such file was a SYN001 error."""
    template = "{% if cookiecutter.with_trainer == \"True\" %}\nimport torch\n{% endif %}\n" + LOOP
    write(project, {"templates/new_example/{{cookiecutter.directory_name}}/run_{{cookiecutter.example_shortcut}}.py":
                    template, "templates/new_model/modeling_{{cookiecutter.lowercase_modelname}}.py": template})
    found = {path for path, _ in codes(memlint(project, "check", "--output-format", "json"))}
    assert found == {"loop.py"}


def test_jupyters_and_unsloths_generated_copies_are_not_linted(project):
    """Jupyter keeps a copy of each file its editor opened in ``.ipynb_checkpoints/``
    (liangwq/Chatglm_lora_multi-gpu commits ``results/.ipynb_checkpoints/train-checkpoint.sh``):
    a stale duplicate that gave the same findings a second time, as ruff's defaults know. Unsloth
    writes its rewritten TRL trainers to ``unsloth_compiled_cache/`` (FineTune-LLM-OnlineRL
    commits it): three "memory not checked" notes on code nobody wrote."""
    write(project, {"scripts/.ipynb_checkpoints/loop-checkpoint.py": LOOP,
                    "unsloth_compiled_cache/UnslothSFTTrainer.py": LOOP})
    found = {path for path, _ in codes(memlint(project, "check", "--output-format", "json"))}
    assert found == {"loop.py"}


def test_what_a_run_wrote_is_not_linted_as_a_config(project):
    """ms-swift dumps every argument of a run into ``<output>/v0-20260425-024237/args.json`` and a
    Trainer writes ``checkpoint-500/`` (fyh2001/megatron-sft-recipes commits its experiments'
    outputs): records of what ran, with whatever keys that release wrote. Before, each dump gave
    eight CFG findings on keys no one chose."""
    dump = json.dumps({"output_dir": "out", "per_device_train_batch_size": 1, "router_aux_loss_coef": 0.001,
                       "model_kwargs": {}, "evaluation_strategy": "no", "logging_dir": "runs", "debug": None})
    write(project, {"experiments/p0/v0-20260425-024237/args.json": dump,
                    "experiments/p0/v0-20260425-024237/logging.jsonl": "{}\n",
                    "out/checkpoint-500/config.json": json.dumps({"model_type": "llama", "hidden_size": 4096})})
    found = {path for path, _ in codes(memlint(project, "check", "--output-format", "json"))}
    assert found == {"loop.py"}
    # the same file where someone keeps their launch arguments is a config memlint judges
    write(project, {"configs/args.json": dump})
    found = {path for path, _ in codes(memlint(project, "check", "--output-format", "json"))}
    assert found == {"loop.py", "configs/args.json"}


def test_what_save_pretrained_wrote_and_the_records_beside_it_are_not_configs(project):
    """veen-systems/llm-distillery commits its trained adapter folder (``adapter_config.json``,
    the tokenizer's files) with the ``lora_config.json`` its training script saves beside them:
    read as an Axolotl config, that record had three findings on keys nobody chose."""
    record = json.dumps({"base_model": "Qwen/Qwen2.5-0.5B", "lora_rank": 16, "lora_alpha": 32, "max_length": 512})
    adapter = json.dumps({"peft_type": "LORA", "r": 16, "lora_alpha": 32, "target_modules": ["q_proj", "v_proj"]})
    write(project, {"models/qwen-lora/lora_config.json": record, "models/qwen-lora/adapter_config.json": adapter,
                    "tokenizer/tokenizer_config.json": "{}", "tokenizer/special_tokens_map.json": "{}",
                    "tokenizer/axolotl.yml": "base_model: Qwen/Qwen2.5-0.5B\nlora_alpha: 32\n"})
    found = {path for path, _ in codes(memlint(project, "check", "--output-format", "json"))}
    assert found == {"loop.py"}
    # the same record in a folder of the project's configs is judged
    write(project, {"configs/lora_config.json": record})
    found = {path for path, _ in codes(memlint(project, "check", "--output-format", "json"))}
    assert found == {"loop.py", "configs/lora_config.json"}


def test_a_config_edited_alone_rechecks_the_run_that_uses_it(project):
    """Pre-commit passes only the changed file: ZeRO-0 in ds_config.json makes the launched run
    of train.py (8 GPUs, micro-batch 4) run out of memory, and the finding names the JSON."""
    write(project, {"ds_config.json": DS_CONFIG.replace('"stage": 2', '"stage": 0')})
    result = memlint(project, "check", "--output-format", "json", "ds_config.json")
    assert result.code == 1
    (finding,) = result.json()
    assert finding["code"] == "MEM001" and finding["filename"] == "ds_config.json"
    assert "ZeRO stage 2" in finding["message"]


# ------------------------------------------------------------------ statistics


def test_statistics_say_what_was_parsed_set_aside_and_reused(project):
    """``--statistics``: one line on stderr, the report on stdout unchanged. A module that
    imports no ML library is read and set aside; a second run takes every result from the cache."""
    write(project, {"utils/strings.py": "def slug(text: str) -> str:\n    return text.lower().replace(' ', '-')\n"})
    # files changed within two seconds of a run are read again (memlint.check.cache.RACY_NS): date them
    # back, or a fast second run re-parses what it could take from the cache
    an_hour_ago = time.time() - 3600
    for path in project.rglob("*"):
        if path.is_file():
            os.utime(path, (an_hour_ago, an_hour_ago))
    plain = memlint(project, "check", "--output-format", "json", "--no-cache")
    first = memlint(project, "check", "--output-format", "json", "--statistics", "--jobs", "1")
    assert first.json() == plain.json() and plain.err == ""
    (line,) = first.err.splitlines()
    assert "5 files: 4 parsed, 1 Python set aside by the prefilter, 0 known from the cache" in line
    assert "5 linted, 0 results reused; 1 worker;" in line and "analyse " in line and "total " in line
    again = memlint(project, "check", "--output-format", "json", "--statistics")
    assert "0 parsed, 0 Python set aside by the prefilter, 5 known from the cache; 0 linted, 5 results reused" in again.err
