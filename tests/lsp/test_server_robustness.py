"""Bad input never takes the server down: documents that do not parse, a 50,000-line file, a
burst of 500 edits, form feeds among the lines, requests for documents never opened, malformed
messages. The server answers or ignores, logs, and goes on serving."""

from __future__ import annotations

import asyncio
import json

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient, client_capabilities

from lsp_helpers import (
    SERVER,
    codes,
    config,
    diagnostics,
    initialize_params,
    logged,
    open_document,
    pulled,
    replace_all,
    until,
    uri,
)

BIG_SCRIPT_LINES = 50_000


@pytest_lsp.fixture(config=config())
async def client(lsp_client: LanguageClient, project):
    await lsp_client.initialize_session(initialize_params(client_capabilities("visual-studio-code"), project))
    lsp_client.project = project
    yield
    await lsp_client.shutdown_session()


SLOW_DEBOUNCE_SECONDS = 3.0
SERVER_WITH_SLOW_DEBOUNCE = [*SERVER[:-1], str(int(SLOW_DEBOUNCE_SECONDS * 1000))]


@pytest_lsp.fixture(config=config(SERVER_WITH_SLOW_DEBOUNCE))
async def slow_debounce_client(lsp_client: LanguageClient, project):
    await lsp_client.initialize_session(initialize_params(client_capabilities("visual-studio-code"), project))
    lsp_client.project = project
    yield
    await lsp_client.shutdown_session()


def big_script(lines: int) -> str:
    """A long generated training module: many small functions, as code generators write them."""
    chunk = (
        "def step_{i}(model, batch, optimizer, scaler):\n"
        "    loss = model(**batch).loss / 4  # accumulate over 4 micro-batches\n"
        "    scaler.scale(loss).backward()\n"
        "    if {i} % 4 == 3:\n"
        "        scaler.step(optimizer)\n"
        "        optimizer.zero_grad(set_to_none=True)\n"
        "    return loss.detach()\n"
        "\n"
    )
    out = ["import torch\n\n"]
    for i in range(lines // 8):
        out.append(chunk.format(i=i))
    return "".join(out)


async def hover_rule(client, document_uri: str, line: int, character: int):
    return await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=document_uri), position=types.Position(line, character)))


@pytest.mark.asyncio
async def test_documents_that_do_not_parse(client: LanguageClient):
    project = client.project
    broken_py = project / "broken_train.py"
    broken_py.write_text("from transformers import TrainingArguments\nargs = TrainingArguments(output_dir='out',\n")
    py_uri = open_document(client, broken_py)
    await until(lambda: py_uri in client.diagnostics, "diagnostics for a script that does not parse")

    yaml_path = project / "args.yaml"
    yaml_uri = open_document(client, yaml_path)
    await diagnostics(client, yaml_uri, lambda d: "MEM001" in codes(d))
    # a tab where YAML wants spaces, mid-edit: the file does not load; the server goes on
    broken = yaml_path.read_text().replace("per_device_train_batch_size: 4", "\tper_device_train_batch_size: 4")
    replace_all(client, yaml_uri, broken, version=2)
    await diagnostics(client, yaml_uri, lambda d: "MEM001" not in codes(d))
    replace_all(client, yaml_uri, yaml_path.read_text(), version=3)
    await diagnostics(client, yaml_uri, lambda d: "MEM001" in codes(d))
    # JSON cut off while typing
    json_uri = open_document(client, project / "ds_config.json", text='{"zero_optimization": {"stage": ')
    await until(lambda: json_uri in client.diagnostics, "diagnostics for JSON that does not parse")


@pytest.mark.asyncio
async def test_a_50000_line_file_and_a_burst_of_500_edits(client: LanguageClient):
    project = client.project
    big = project / "generated_steps.py"
    big.write_text(big_script(BIG_SCRIPT_LINES))
    big_uri = open_document(client, big)
    # the event loop is not the lint thread: a request that needs no lint is answered while
    # the big file is parsed, and the big file's result arrives too
    script_uri = open_document(client, project / "train.py")
    lines = (project / "train.py").read_text().splitlines()
    (number,) = [i for i, line in enumerate(lines) if "ignore[MEM001]" in line]
    assert await hover_rule(client, script_uri, number, lines[number].index("MEM001")) is not None
    await until(lambda: big_uri in client.diagnostics, "diagnostics for the 50,000-line file", timeout=120)
    # typing in it does not re-parse it on every keystroke (the server says so once)
    replace_all(client, big_uri, big.read_text() + "# edited\n", version=2)
    await logged(client, "linted on open and save only")

    args = project / "args.yaml"
    text = args.read_text()
    args_uri = open_document(client, args)
    await diagnostics(client, args_uri, lambda d: "MEM001" in codes(d))
    first = len(client.published)
    version = 1
    for round_ in range(500):  # a burst: every keystroke of a long paste, as incremental edits
        version += 1
        digit = str(round_ % 9 + 1)
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=args_uri, version=version),
            content_changes=[types.TextDocumentContentChangePartial(
                range=types.Range(types.Position(3, 29), types.Position(3, 30)), text=digit)],
        ))
    small = text.replace("meta-llama/Llama-3.1-8B", "HuggingFaceTB/SmolLM2-135M-Instruct")
    version += 1
    replace_all(client, args_uri, small, version=version)
    await diagnostics(client, args_uri, lambda d: "MEM001" not in codes(d))
    burst = [p for p in client.published[first:] if p.uri == args_uri]
    assert burst[-1].version == version, "the last result published is the last version's"
    assert [p.version for p in burst] == sorted(p.version for p in burst), "a stale result was published"
    assert len(burst) < 100, f"{len(burst)} lints for 501 edits: the debounce does not coalesce"


GNU_STYLE_SCRIPT = '''\
"""Full fine-tune, GNU style: sections apart by form feeds."""

import torch
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

\x0c
# ---- model

MODEL_NAME = "meta-llama/Llama-3.1-8B"

\x0c
# ---- training


def main() -> None:
    model = AutoModelForCausalLM.from_pretrained(MODEL_NAME, torch_dtype=torch.bfloat16)
    args = TrainingArguments(output_dir="out", per_device_train_batch_size=4, bf16=True)
    Trainer(model=model, args=args).train()


if __name__ == "__main__":
    main()
'''


@pytest.mark.asyncio
async def test_an_edit_below_a_form_feed_lands_where_the_user_typed_it(client: LanguageClient):
    """pygls' own buffers split lines at form feeds too (str.splitlines): the edit landed a line
    too high and the server linted a text the user did not have (memlint.lsp.text_sync)."""
    path = client.project / "train_gnu.py"
    path.write_text(GNU_STYLE_SCRIPT)
    document_uri = open_document(client, path)
    await diagnostics(client, document_uri, lambda d: "MEM001" in codes(d))  # an 8B full fine-tune on an A10G

    # the user picks a small model: one incremental edit of the name, as the editor counts lines
    line = GNU_STYLE_SCRIPT.split("\n").index('MODEL_NAME = "meta-llama/Llama-3.1-8B"')
    start = len('MODEL_NAME = "')
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=document_uri, version=2),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(types.Position(line, start), types.Position(line, start + len("meta-llama/Llama-3.1-8B"))),
            text="HuggingFaceTB/SmolLM2-135M-Instruct")],
    ))
    found = await diagnostics(client, document_uri, lambda d: "MEM001" not in codes(d) or "SYN001" in codes(d))
    assert codes(found) == [], "the edit was applied to another line than the one the user edited"


@pytest.mark.asyncio
async def test_requests_for_documents_never_opened_and_malformed_messages(client: LanguageClient):
    project = client.project
    stray = uri(project / "trainer_state_args.json")  # on disk, never opened
    identifier = types.TextDocumentIdentifier(uri=stray)
    assert await hover_rule(client, stray, 0, 5) is None
    whole = types.Range(types.Position(0, 0), types.Position(0, 10))
    assert not await client.text_document_code_action_async(types.CodeActionParams(
        text_document=identifier, range=whole, context=types.CodeActionContext(diagnostics=[])))
    assert not await client.text_document_inlay_hint_async(types.InlayHintParams(text_document=identifier, range=whole))
    # a pull for it lints the file on disk
    assert "MEM001" in codes(await pulled(client, stray))
    assert not await pulled(client, uri(project / "does_not_exist.yaml"))

    # documents that are not files are left alone
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri="untitled:Untitled-1", language_id="python", version=1, text="import torch\n")))
    assert await hover_rule(client, "untitled:Untitled-1", 0, 3) is None

    # bytes that are not JSON: logged, ignored
    garbage = b"{this is not json"
    client.protocol.writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(garbage), garbage))
    # a request whose params do not fit the method (a hover without a position): an error
    # answer, not a hang (written raw: the client library would refuse to send it)
    answer = asyncio.get_running_loop().create_future()
    client.protocol._request_futures["malformed-hover"] = answer
    body = json.dumps({"jsonrpc": "2.0", "id": "malformed-hover", "method": "textDocument/hover",
                       "params": {"textDocument": {"uri": stray}}}).encode()
    client.protocol.writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    with pytest.raises(JsonRpcException):
        await asyncio.wait_for(answer, timeout=30)
    # a method nobody implements
    with pytest.raises(JsonRpcException):
        await client.protocol.send_request_async("memlint/doesNotExist", {})
    await logged(client, "JSONDecodeError")

    # still serving
    args_uri = open_document(client, project / "args.yaml")
    await diagnostics(client, args_uri, lambda d: "MEM001" in codes(d))
    client.text_document_did_close(types.DidCloseTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=args_uri)))
    await until(lambda: not client.diagnostics.get(args_uri, ["not yet"]), "diagnostics cleared on close")


@pytest_lsp.fixture(config=config())
async def pull_client(lsp_client: LanguageClient, project):
    from lsp_helpers import pull_client_with_refresh

    await lsp_client.initialize_session(initialize_params(pull_client_with_refresh(), project))
    lsp_client.project = project
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio
async def test_a_pull_for_a_version_typed_past_is_asked_again(pull_client: LanguageClient):
    """The buffer changes while its pull is being linted: the server answers ServerCancelled
    with retriggerRequest (LSP 3.17), not stale diagnostics, and the next pull is current."""
    client = pull_client
    path = client.project / "generated_steps.py"
    path.write_text(big_script(8_000))  # long enough that its lint is still running
    document_uri = open_document(client, path)
    request = asyncio.ensure_future(client.text_document_diagnostic_async(
        types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=document_uri))))
    await asyncio.sleep(0.05)
    replace_all(client, document_uri, path.read_text() + "# typed while linting\n", version=2)
    with pytest.raises(JsonRpcException) as cancelled:
        await asyncio.wait_for(request, timeout=120)
    assert cancelled.value.code == types.LSPErrorCodes.ServerCancelled
    assert cancelled.value.data == {"retriggerRequest": True}
    assert await pulled(client, document_uri) == []  # current now, and nothing to report
    assert not [m for m in client.log_messages if m.type == types.MessageType.Error]


@pytest.mark.asyncio
async def test_an_edit_after_a_pause_is_linted_at_once_and_a_burst_once_after_its_end(
        slow_debounce_client: LanguageClient):
    """A behaviour test, not a speed one: with a 3 s debounce, an edit typed after a pause is
    answered without waiting for the timer (a small YAML lints in milliseconds), and a burst
    right after it is linted once, for its last version, after the timer."""
    client = slow_debounce_client
    args = client.project / "args.yaml"
    text = args.read_text()
    args_uri = open_document(client, args)
    await diagnostics(client, args_uri, lambda d: "MEM001" in codes(d))
    await asyncio.sleep(SLOW_DEBOUNCE_SECONDS + 0.2)  # a pause: the next edit is an isolated one
    small = text.replace("meta-llama/Llama-3.1-8B", "HuggingFaceTB/SmolLM2-135M-Instruct")
    sent = asyncio.get_running_loop().time()
    replace_all(client, args_uri, small, version=2)
    await until(lambda: any(p.uri == args_uri and p.version == 2 for p in client.published),
                "the isolated edit's diagnostics", timeout=SLOW_DEBOUNCE_SECONDS - 0.5)
    assert asyncio.get_running_loop().time() - sent < SLOW_DEBOUNCE_SECONDS - 0.5
    assert "MEM001" not in codes(client.diagnostics[args_uri])
    first = len(client.published)
    replace_all(client, args_uri, text, version=3)  # a burst: two edits in a row
    replace_all(client, args_uri, small, version=4)
    await until(lambda: any(p.uri == args_uri and p.version == 4 for p in client.published),
                "the burst's diagnostics", timeout=SLOW_DEBOUNCE_SECONDS * 4)
    assert [p.version for p in client.published[first:] if p.uri == args_uri] == [4], \
        "a burst's intermediate version was linted and published"
