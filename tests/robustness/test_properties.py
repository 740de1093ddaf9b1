"""Property-based robustness: whatever scripts, configs and launchers a project holds —
generated from the fragments users write, or the real examples mangled line by line and byte
by byte — ``memlint check`` ends normally within its time limit, reports no internal error,
and prints valid output in every format with every range inside its document.

The hand-written hostile corpus is ``test_hostile_files.py``; this module explores around it.
Run more examples with ``MEMLINT_HYPOTHESIS_PROFILE=thorough`` (profiles: tests/conftest.py).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from robustness_checks import assert_sound, check_tree, write_tree
from robustness_inputs import (
    config_documents,
    corpus_projects,
    json_texts,
    launch_scripts,
    mutations,
    project_files,
    training_scripts,
    yaml_texts,
)


def examples(share: float) -> int:
    """A share of the active profile's example budget (tests differ in cost)."""
    return max(5, int(settings.default.max_examples * share))


gpus = st.sampled_from(["a10g", "h100", "a100-40gb", "v100-16gb", "rtx-4090", "mi300x", "t4"])
settings_files = st.one_of(
    gpus.map(lambda gpu: f'gpu = "{gpu}"\n'),
    st.sampled_from(["", 'gpu = "a100-80gb"\ngpus = 8\nseq-len = 8192\n', 'gpu = "h100"\nmicro-batch = 64\n',
                     'gpu = "l4"\nmodel = "Qwen/Qwen2.5-7B"\n']),
)
command_flags = st.sampled_from([
    (), (), ("--gpu", "h100"), ("--gpus", "8"), ("--seq-len", "32768"), ("--select", "MEM,ACC"),
    ("--ignore", "CFG001"), ("--fail-on", "info"), ("--gpu", "t4", "--gpus", "1", "--seq-len", "1"),
])
formats = st.sampled_from(["json", "text", "sarif", "github", "concise"])
# a quarter of the scripts carry one line that does not parse (a half-typed edit)
scripts = st.sampled_from([False, False, False, True]).flatmap(lambda broken: training_scripts(broken=broken))


def check_files(files: dict[str, str | bytes], flags=(), output_format: str = "json") -> None:
    with tempfile.TemporaryDirectory(prefix="memlint-props-") as directory:
        tree = Path(directory)
        write_tree(tree, files)
        linted = sum(1 for name in files if name != "memlint.toml")
        assert_sound(check_tree(tree, *flags, files=linted, output_format=output_format))


@settings(max_examples=examples(1.0))
@given(scripts, settings_files, command_flags, formats)
def test_generated_training_scripts(script, settings_text, flags, output_format):
    check_files({"memlint.toml": settings_text, "train.py": script}, flags, output_format)


@st.composite
def mutated_projects(draw) -> dict[str, bytes]:
    """A real example project (its scripts, configs and launchers, as they link each other)
    with one to three of its files mangled."""
    project = draw(st.sampled_from(corpus_projects()))
    files = {p.relative_to(project).as_posix(): p.read_bytes() for p in project_files(project)}
    settings_file = project / "memlint.toml"
    files["memlint.toml"] = settings_file.read_bytes() if settings_file.is_file() else b'gpu = "a100-80gb"\n'
    names = sorted(n for n in files if n != "memlint.toml")
    for name in draw(st.lists(st.sampled_from(names), min_size=1, max_size=3)):
        for mutation in draw(st.lists(mutations, min_size=1, max_size=4)):
            files[name] = mutation.apply(files[name])
    return files


@settings(max_examples=examples(1.0))
@given(mutated_projects(), formats)
def test_mutated_example_projects(files, output_format):
    check_files(files, output_format=output_format)


@st.composite
def config_files(draw) -> tuple[str, str]:
    path, value = draw(config_documents())
    if path.endswith(".json"):
        return path, draw(json_texts(value))
    return path, draw(yaml_texts(value))


@settings(max_examples=examples(1.5))
@given(config_files(), settings_files, formats)
def test_generated_configs(config, settings_text, output_format):
    path, text = config
    check_files({"memlint.toml": settings_text, path: text}, output_format=output_format)


@st.composite
def generated_projects(draw) -> dict[str, str]:
    """Configs of several tools, a launcher that names them, and a script that reads them:
    the cross-file paths (a launcher's --deepspeed, TrainingArguments(deepspeed=...))."""
    files: dict[str, str] = {"memlint.toml": draw(settings_files)}
    for path, text in draw(st.lists(config_files(), min_size=1, max_size=3)):
        files[path] = text
    files["run.sh"] = draw(launch_scripts)
    script = draw(scripts)
    files["train.py"] = (
        'from transformers import TrainingArguments\n'
        'args = TrainingArguments(output_dir="out", deepspeed="ds_config.json", per_device_train_batch_size=8)\n'
        + script
    )
    return files


@settings(max_examples=examples(0.5))
@given(generated_projects(), command_flags)
def test_generated_projects(files, flags):
    check_files(files, flags)
