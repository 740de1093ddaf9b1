"""What a user sees in the editor on the bundled examples (issue 19): the run's verdict in
every open document of the run, MEM001's fixes that edit, no flicker while typing.

Each test opens a copy of an example as an editor would and asserts the diagnostics, code
actions and code lenses the client receives.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from lsp_helpers import (
    ROOT,
    apply_text_edits,
    capabilities_for,
    codes,
    config,
    diagnostics,
    edits_by_uri,
    initialize_params,
    open_document,
    replace_all,
    uri,
)

EXAMPLES = ROOT / "examples"


@pytest.fixture
def sft(tmp_path: Path) -> Path:
    """examples/sft-llama3-h100: run.sh launches train.py with a micro-batch of 8 (MEM001)."""
    target = tmp_path / "sft-llama3-h100"
    shutil.copytree(EXAMPLES / "sft-llama3-h100", target)
    return target


@pytest_lsp.fixture(config=config(), params=["vscode-pull", "visual-studio-code"])
async def client(lsp_client: LanguageClient, request, sft):
    await lsp_client.initialize_session(initialize_params(capabilities_for(request.param), sft))
    lsp_client.project = sft
    lsp_client.editor = request.param
    yield
    await lsp_client.shutdown_session()


def only(items, code: str) -> types.Diagnostic:
    matching = [d for d in items if d.code == code]
    assert len(matching) == 1, items
    return matching[0]


@pytest.mark.asyncio
async def test_the_runs_verdict_shows_in_the_script_the_launcher_runs(client: LanguageClient):
    project = client.project
    train_uri = open_document(client, project / "train.py")
    in_train = only(await diagnostics(client, train_uri, lambda d: "MEM001" in codes(d)), "MEM001")
    # train.py states the model (weights, gradients, optimizer states): the verdict sits on it
    train_lines = (project / "train.py").read_text().splitlines()
    assert '"meta-llama/Llama-3.1-8B"' in train_lines[in_train.range.start.line]
    assert "exceeds" in in_train.message and "run decided at run.sh:7" in in_train.message
    related = in_train.related_information or []
    assert [(r.location.uri, r.location.range.start.line) for r in related] == [(uri(project / "run.sh"), 6)]

    # the launcher has it on the micro-batch, as `memlint check` reports it
    run_uri = open_document(client, project / "run.sh")
    in_run = only(await diagnostics(client, run_uri, lambda d: "MEM001" in codes(d)), "MEM001")
    assert in_run.range.start.line == 6 and "run decided at" not in in_run.message
    # the squiggle underlines the whole setting, not the one character `8`
    run_line = (project / "run.sh").read_text().splitlines()[6]
    squiggled = run_line[in_run.range.start.character:in_run.range.end.character]
    assert squiggled == "--per_device_train_batch_size 8"

    # the hover over the trainer: the verdict first, the table after
    trainer_line = next(i for i, line in enumerate(train_lines) if "SFTTrainer(" in line)
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=train_uri),
        position=types.Position(trainer_line, train_lines[trainer_line].index("SFTTrainer") + 2)))
    sheet = hover.contents.value
    assert sheet.startswith("**✗ Does not fit on NVIDIA H100"), sheet[:200]
    assert sheet.index("GiB short") < sheet.index("| component | GiB |")

    # and the code lens with the estimate is in train.py too, on the verdict's line
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=train_uri)))
    assert [lens.range.start.line for lens in lenses] == [in_train.range.start.line]
    assert "does not fit" in lenses[0].command.title
    # the editor's session keeps its state in memory: nothing lands in the project (git status)
    assert not list(project.rglob(".memlint_cache"))


def test_the_extension_starts_for_every_kind_memlint_reads():
    import json

    manifest = json.loads((ROOT / "editors" / "vscode" / "package.json").read_text())
    assert {"onLanguage:shellscript", "onLanguage:toml"} <= set(manifest["activationEvents"])
    source = (ROOT / "editors" / "vscode" / "src" / "extension.ts").read_text()
    assert 'language: "shellscript"' in source


async def actions_for(client, document_uri: str, diagnostic: types.Diagnostic) -> list[types.CodeAction]:
    result = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=document_uri),
        range=diagnostic.range,
        context=types.CodeActionContext(diagnostics=[diagnostic]),
    ))
    return list(result or [])


@pytest.mark.asyncio
async def test_mem001_fix_edits_the_launcher_flags_and_clears_the_finding(client: LanguageClient):
    """From train.py, the fix changes run.sh's micro-batch and accumulation together."""
    project = client.project
    train_uri = open_document(client, project / "train.py")
    oom = only(await diagnostics(client, train_uri, lambda d: "MEM001" in codes(d)), "MEM001")
    offered = await actions_for(client, train_uri, oom)
    titles = [a.title for a in offered]
    assert titles[-1] == "Ignore MEM001 on this line" and not offered[-1].is_preferred, titles
    assert all("— fits" in t for t in titles[:-1]), titles  # offloading alone does not fit: not offered
    micro = next(a for a in offered if "micro-batch 2 with 8x gradient accumulation" in a.title)
    assert micro.is_preferred and micro.edit is not None
    edits, _ = edits_by_uri(micro.edit)
    run_sh = project / "run.sh"
    assert set(edits) == {uri(run_sh)}
    fixed = apply_text_edits(run_sh.read_text(), edits[uri(run_sh)])
    assert "--per_device_train_batch_size 2 \\\n    --gradient_accumulation_steps 8 \\\n" in fixed  # 8 x 2 = 2 x 8
    # the changes that need more than a value (more GPUs, LoRA) only explain themselves
    assert all(a.edit is None and a.command is not None for a in offered if "LoRA" in a.title)

    run_uri = open_document(client, run_sh)
    await diagnostics(client, run_uri, lambda d: "MEM001" in codes(d))
    replace_all(client, run_uri, fixed, version=2)
    await diagnostics(client, run_uri, lambda d: "MEM001" not in codes(d))
    await diagnostics(client, train_uri, lambda d: "MEM001" not in codes(d))


@pytest.mark.asyncio
@pytest.mark.parametrize("example, name, fixed_lines", [
    ("axolotl-qlora-4090", "qlora-long.yml", ["micro_batch_size: 1", "gradient_accumulation_steps: 4"]),
])
async def test_mem001_fix_edits_yaml_keys(client: LanguageClient, tmp_path: Path, example, name, fixed_lines):
    folder = tmp_path / example
    shutil.copytree(EXAMPLES / example, folder)
    path = folder / name
    document_uri = open_document(client, path)
    oom = only(await diagnostics(client, document_uri, lambda d: "MEM001" in codes(d)), "MEM001")
    fix = next(a for a in await actions_for(client, document_uri, oom) if a.is_preferred)
    edits, _ = edits_by_uri(fix.edit)
    fixed = apply_text_edits(path.read_text(), edits[document_uri])
    assert all(line in fixed.splitlines() for line in fixed_lines), fixed
    replace_all(client, document_uri, fixed, version=2)
    await diagnostics(client, document_uri, lambda d: "MEM001" not in codes(d))


SFT_SCRIPT = """\
from transformers import AutoModelForCausalLM, TrainingArguments, Trainer

model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", torch_dtype="bfloat16")
args = TrainingArguments(
    output_dir="out",
    per_device_train_batch_size=16,
    gradient_checkpointing=True,
    bf16=True,
)
trainer = Trainer(model=model, args=args, train_dataset=None)
trainer.train()
"""


@pytest.mark.asyncio
async def test_mem001_fix_adds_the_accumulation_a_trainingarguments_call_leaves_unset(client: LanguageClient):
    path = client.project / "finetune.py"
    path.write_text(SFT_SCRIPT)
    document_uri = open_document(client, path)
    oom = only(await diagnostics(client, document_uri, lambda d: "MEM001" in codes(d)), "MEM001")
    offered = await actions_for(client, document_uri, oom)
    micro = next(a for a in offered if "gradient accumulation" in a.title)
    assert micro.is_preferred
    edits, _ = edits_by_uri(micro.edit)
    fixed = apply_text_edits(SFT_SCRIPT, edits[document_uri])
    batch_line = next(line for line in fixed.splitlines() if "per_device_train_batch_size" in line)
    import re

    micro_batch, accumulation = map(int, re.search(
        r"per_device_train_batch_size=(\d+), gradient_accumulation_steps=(\d+),", batch_line).groups())
    assert micro_batch * accumulation == 16  # the effective batch is unchanged
    replace_all(client, document_uri, fixed, version=2)
    await diagnostics(client, document_uri, lambda d: "MEM001" not in codes(d))


@pytest.mark.asyncio
async def test_a_transient_syntax_error_keeps_the_findings_and_the_estimate(client: LanguageClient):
    """Typing `x = (` above the run: the syntax error shows, MEM001 stays (one line lower),
    the code lens stays, marked stale, and all is fresh again once the line is finished."""
    path = client.project / "finetune.py"
    path.write_text(SFT_SCRIPT)
    document_uri = open_document(client, path)
    before = only(await diagnostics(client, document_uri, lambda d: "MEM001" in codes(d)), "MEM001")
    assert before.range.start.line == 5

    async def lens_titles():
        found = await client.text_document_code_lens_async(
            types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=document_uri)))
        return [(lens.range.start.line, lens.command.title) for lens in found]

    [(lens_line, title)] = await lens_titles()
    assert "does not fit" in title

    lines = SFT_SCRIPT.splitlines(keepends=True)
    broken = "".join(lines[:2] + ["x = (\n"] + lines[2:])
    replace_all(client, document_uri, broken, version=2)
    found = await diagnostics(client, document_uri, lambda d: "SYN001" in codes(d))
    assert codes(found) == ["MEM001", "SYN001"]
    assert only(found, "MEM001").range.start.line == 6  # moved with its line
    assert only(found, "MEM001").message == before.message
    [(stale_line, stale_title)] = await lens_titles()
    assert stale_line == lens_line + 1 and stale_title.startswith(title) and "stale" in stale_title

    finished = "".join(lines[:2] + ["x = (1)\n"] + lines[2:])
    replace_all(client, document_uri, finished, version=3)
    found = await diagnostics(client, document_uri, lambda d: "SYN001" not in codes(d))
    assert codes(found) == ["MEM001"]
    assert all("stale" not in t for _, t in await lens_titles())


@pytest.mark.asyncio
async def test_cancellations_and_superseded_versions_are_not_warnings(client: LanguageClient, capfd):
    """Ordinary typing: late cancels and pulls the next keystroke supersedes leave no warning
    and no traceback in the log (the server logs at WARNING by default)."""
    import asyncio

    from pygls.exceptions import JsonRpcException

    path = client.project / "finetune.py"
    path.write_text(SFT_SCRIPT)
    document_uri = open_document(client, path)
    await diagnostics(client, document_uri, lambda d: "MEM001" in codes(d))
    client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=987654))  # answered long ago
    superseded = 0
    for version in range(2, 8):
        pull = asyncio.ensure_future(client.text_document_diagnostic_async(
            types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=document_uri))))
        await asyncio.sleep(0)
        replace_all(client, document_uri, SFT_SCRIPT + f"# edit {version}\n", version=version)
        try:
            await pull
        except JsonRpcException as error:  # what VS Code asks again for
            assert error.code == types.LSPErrorCodes.ServerCancelled
            superseded += 1
        except AttributeError:  # a push client: no pulls
            break
    await diagnostics(client, document_uri, lambda d: "MEM001" in codes(d))
    await asyncio.sleep(0.3)  # the server's stderr is forwarded asynchronously
    log = capfd.readouterr().err
    assert "Cancel notification" not in log and "Traceback" not in log, log


@pytest.mark.asyncio
async def test_a_latin1_yaml_gets_the_finding_the_cli_gives(client: LanguageClient):
    """VS Code opens a Latin-1 file as UTF-8 (U+FFFD for each bad byte); the server lints the
    file as `memlint check` reads it and reports the same SYN002."""
    path = client.project / "args.yaml"
    data = "# Entra\u00eenement\nmodel_name_or_path: meta-llama/Llama-3.1-8B\nper_device_train_batch_size: 4\n"
    path.write_bytes(data.encode("latin-1"))
    document_uri = open_document(client, path, text=path.read_bytes().decode("utf-8", errors="replace"))
    found = await diagnostics(client, document_uri, lambda d: "SYN002" in codes(d))
    assert "not valid UTF-8" in only(found, "SYN002").message

    import subprocess
    import sys

    cli = subprocess.run([sys.executable, "-m", "memlint", "check", "--no-cache", str(path)],
                         capture_output=True, text=True, cwd=client.project)
    assert f"SYN002 [warning] {only(found, 'SYN002').message}" in cli.stdout, cli.stdout


@pytest.mark.asyncio
async def test_the_budget_view_shows_the_run_and_applies_a_change(client: LanguageClient):
    """The page the VS Code webview shows (memlint.budgetView): the verdict, the phases, the
    changes that fit with an Apply button each that has an edit; applying one clears MEM001."""
    import re

    project = client.project
    train_uri = open_document(client, project / "train.py")
    await diagnostics(client, train_uri, lambda d: "MEM001" in codes(d))
    view = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="memlint.budgetView", arguments=[train_uri]))
    page = view["html"]
    assert "✗ Does not fit on NVIDIA H100" in page and 'data-phase="optimizer_step"' in page
    buttons = [int(i) for i in re.findall(r'data-apply="(\d+)"', page)]
    assert buttons and all(view["edits"][i] for i in buttons)
    assert all(view["edits"][i] is None for i in range(len(view["edits"])) if i not in buttons)
    micro = next(i for i in buttons if re.search(rf'micro-batch 2 with 8x[^<]*<span[^>]*>[^\n]*data-apply="{i}"', page))
    run_sh = project / "run.sh"
    (target_uri, text_edits), = view["edits"][micro].items()
    assert target_uri == uri(run_sh)
    edits = [types.TextEdit(range=types.Range(types.Position(**e["range"]["start"]), types.Position(**e["range"]["end"])),
                            new_text=e["newText"]) for e in text_edits]
    run_uri = open_document(client, run_sh)
    await diagnostics(client, run_uri, lambda d: "MEM001" in codes(d))
    replace_all(client, run_uri, apply_text_edits(run_sh.read_text(), edits), version=2)
    await diagnostics(client, run_uri, lambda d: "MEM001" not in codes(d))  # an editor pulls the changed one
    await diagnostics(client, train_uri, lambda d: "MEM001" not in codes(d))
    after = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="memlint.budgetView", arguments=[train_uri]))
    assert "✓ Fits on NVIDIA H100" in after["html"] or "! Fits on NVIDIA H100" in after["html"]
