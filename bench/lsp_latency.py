"""How long after an edit do a 2,000-line training script's diagnostics arrive?

Starts ``memlint lsp`` over stdio with pygls' real client, opens a realistic 2,000-line
fine-tuning script (argparse and dataclass arguments, per-task preprocessing, collators,
callbacks, a Trainer and a hand-written loop) in a project with a DeepSpeed config and a
``memlint.toml``, applies N edits one after the other (each changes the micro-batch default,
as a user tuning a run does) and measures, for each, the time from sending ``didChange`` to
receiving the ``publishDiagnostics`` for that version. Prints the median and p95.

    python bench/lsp_latency.py [--edits 50] [--pace-ms 120] [--debounce-ms 50] [--lines 2000] [--target config]

Edits come at a fast typist's pace: each is sent ``--pace-ms`` after the one before (120 ms, a
keystroke at 100 words a minute) or when the one before has been answered, whichever is later.
``--pace-ms 0`` sends each edit the moment the one before is answered: when that is sooner than
the server's debounce delay after it, the server takes the edit for the next of a burst (a
paste, a formatter) and waits the delay out before linting, as designed.
The figure includes the server's debounce (``--debounce-ms``, the server's default unless
given). The server's CPU time per edit (from ``/proc``, where there is one) is printed too: on
a busy machine it says what the work costs when the wall clock says mostly how long the server
waited for a core.
``--target config`` edits the project's TrainingArguments YAML instead (a small document
whose run is estimated on every edit): the adapter's own cost plus the estimator's.
``--target trl``, ``--target transformers`` and ``--target accelerate`` edit real modules, most
of whose lines are one class: TRL's ``grpo_trainer.py`` (1,843 lines), transformers'
``trainer.py`` (5,723) and Accelerate's ``accelerator.py`` (4,233, the ``Accelerator`` class) from
pinned releases' wheels, downloaded once into ``--cache`` with pip (as ``bench/real_speed.py``
does); each edit changes the integer nearest the middle of the file (inside the class).
``--stages`` runs the server through ``bench/lsp_server_stages.py`` and also prints where its CPU
and wall time per edit go: the engine's ``lint_path``, the rest of the lint job, the event loop.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import statistics
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient
from pygls.uris import from_fs_path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CACHE = Path.home() / ".cache" / "memlint-real-bench"

HEADER = '''\
"""Fine-tune a causal LM on a mixture of instruction datasets.

    accelerate launch --config_file accelerate.yaml train_mixture.py --micro_batch_size 8
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from datasets import concatenate_datasets, load_dataset
from torch.utils.data import DataLoader
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    Trainer,
    TrainerCallback,
    TrainingArguments,
    get_cosine_schedule_with_warmup,
)

logger = logging.getLogger(__name__)
IGNORE_INDEX = -100


@dataclass
class ModelArguments:
    model_name_or_path: str = field(default="meta-llama/Llama-3.1-8B")
    attn_implementation: str = field(default="sdpa")
    torch_dtype: str = field(default="bfloat16")
    use_liger_kernel: bool = field(default=False)


@dataclass
class DataArguments:
    max_length: int = field(default=4096)
    packing: bool = field(default=False)
    num_proc: int = field(default=8)
    mixture_seed: int = field(default=1234)

'''

TASK = '''

def preprocess_{name}(examples: dict[str, list[Any]], tokenizer, max_length: int) -> dict[str, list[Any]]:
    """{title}: prompt and answer into input ids, the prompt masked out of the loss."""
    prompts, answers = examples["{prompt}"], examples["{answer}"]
    input_ids, labels, attention = [], [], []
    for prompt, answer in zip(prompts, answers):
        if not prompt or not answer:
            continue
        prompt_ids = tokenizer(
            tokenizer.apply_chat_template([{{"role": "user", "content": prompt}}], tokenize=False),
            add_special_tokens=False,
        )["input_ids"]
        answer_ids = tokenizer(answer + tokenizer.eos_token, add_special_tokens=False)["input_ids"]
        ids = (prompt_ids + answer_ids)[:max_length]
        mask = ([IGNORE_INDEX] * len(prompt_ids) + answer_ids)[:max_length]
        if all(m == IGNORE_INDEX for m in mask):
            continue  # the answer was truncated away: nothing to learn from
        input_ids.append(ids)
        labels.append(mask)
        attention.append([1] * len(ids))
    return {{"input_ids": input_ids, "labels": labels, "attention_mask": attention}}


def load_{name}(tokenizer, data_args: DataArguments, weight: float = {weight}):
    dataset = load_dataset("{hub}", split="train")
    dataset = dataset.shuffle(seed=data_args.mixture_seed)
    keep = max(1, int(len(dataset) * weight))
    dataset = dataset.select(range(keep))
    return dataset.map(
        preprocess_{name},
        batched=True,
        remove_columns=dataset.column_names,
        num_proc=data_args.num_proc,
        fn_kwargs={{"tokenizer": tokenizer, "max_length": data_args.max_length}},
        desc="tokenizing {title}",
    )
'''

FOOTER = '''

class Collator:
    """Pads a batch to its longest sequence (rounded up to a multiple of 8 for tensor cores)."""

    def __init__(self, tokenizer, multiple_of: int = 8) -> None:
        self.pad = tokenizer.pad_token_id
        self.multiple_of = multiple_of

    def __call__(self, features: list[dict[str, list[int]]]) -> dict[str, torch.Tensor]:
        longest = max(len(f["input_ids"]) for f in features)
        longest = int(math.ceil(longest / self.multiple_of) * self.multiple_of)
        batch = {"input_ids": [], "labels": [], "attention_mask": []}
        for f in features:
            gap = longest - len(f["input_ids"])
            batch["input_ids"].append(f["input_ids"] + [self.pad] * gap)
            batch["labels"].append(f["labels"] + [IGNORE_INDEX] * gap)
            batch["attention_mask"].append(f["attention_mask"] + [0] * gap)
        return {k: torch.tensor(v) for k, v in batch.items()}


class ThroughputCallback(TrainerCallback):
    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "train_runtime" not in logs:
            logs["tokens_seen"] = state.global_step * args.per_device_train_batch_size * args.world_size


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output_dir", default="out/mixture")
    parser.add_argument("--micro_batch_size", type=int, default=8)
    parser.add_argument("--gradient_accumulation_steps", type=int, default=4)
    parser.add_argument("--learning_rate", type=float, default=2e-5)
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--deepspeed", default="ds_config.json")
    parser.add_argument("--seed", type=int, default=42)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    model_args, data_args = ModelArguments(), DataArguments()
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    tokenizer = AutoTokenizer.from_pretrained(model_args.model_name_or_path)
    tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
    parts = [loader(tokenizer, data_args) for loader in LOADERS]
    train = concatenate_datasets(parts).shuffle(seed=data_args.mixture_seed)
    model = AutoModelForCausalLM.from_pretrained(
        model_args.model_name_or_path,
        torch_dtype=model_args.torch_dtype,
        attn_implementation=model_args.attn_implementation,
    )
    training_args = TrainingArguments(
        output_dir=args.output_dir,
        per_device_train_batch_size=args.micro_batch_size,
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        learning_rate=args.learning_rate,
        num_train_epochs=args.epochs,
        bf16=True,
        gradient_checkpointing=True,
        deepspeed=args.deepspeed,
        logging_steps=10,
        save_strategy="steps",
        save_steps=1000,
        report_to="wandb",
    )
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=train,
        data_collator=Collator(tokenizer),
        callbacks=[ThroughputCallback()],
    )
    trainer.train()
    trainer.save_model(os.path.join(args.output_dir, "final"))
    with open(os.path.join(args.output_dir, "mixture.json"), "w") as handle:
        json.dump({"tasks": [loader.__name__ for loader in LOADERS]}, handle)


if __name__ == "__main__":
    main()
'''

DATASETS = [
    ("alpaca", "tatsu-lab/alpaca", "instruction", "output"), ("dolly", "databricks/databricks-dolly-15k", "instruction", "response"),
    ("gsm8k", "openai/gsm8k", "question", "answer"), ("oasst", "OpenAssistant/oasst1", "text", "text"),
    ("codealpaca", "sahil2801/CodeAlpaca-20k", "instruction", "output"), ("metamath", "meta-math/MetaMathQA", "query", "response"),
    ("slimorca", "Open-Orca/SlimOrca", "question", "response"), ("ultrachat", "HuggingFaceH4/ultrachat_200k", "prompt", "completion"),
]


def training_script(lines: int) -> str:
    out = [HEADER]
    names = []
    index = 0
    while sum(part.count("\n") for part in out) + FOOTER.count("\n") < lines - 50:
        base, hub, prompt, answer = DATASETS[index % len(DATASETS)]
        name = f"{base}_{index // len(DATASETS)}"
        out.append(TASK.format(name=name, title=f"{base} (shard {index // len(DATASETS)})", hub=hub,
                               prompt=prompt, answer=answer, weight=round(0.05 + (index % 7) * 0.1, 2)))
        names.append(name)
        index += 1
    out.append("\n\nLOADERS = [\n" + "".join(f"    load_{n},\n" for n in names) + "]\n")
    out.append(FOOTER)
    return "".join(out)


def write_project(root: Path, lines: int) -> Path:
    (root / "memlint.toml").write_text('gpu = "h100"\ngpus = 8\nseq-len = 4096\n')
    (root / "ds_config.json").write_text(
        '{\n  "train_micro_batch_size_per_gpu": "auto",\n  "bf16": {"enabled": true},\n'
        '  "zero_optimization": {"stage": 2, "overlap_comm": true}\n}\n')
    (root / "args.yaml").write_text(
        "model_name_or_path: meta-llama/Llama-3.1-8B\noutput_dir: out\nper_device_train_batch_size: 8\n"
        "max_length: 4096\nbf16: true\ndeepspeed: ds_config.json\n")
    script = root / "train_mixture.py"
    script.write_text(training_script(lines))
    return script


# real trainer modules: (distribution, pinned release, the module in its wheel)
REAL = {
    "trl": ("trl", "0.24.0", "trl/trainer/grpo_trainer.py"),
    "transformers": ("transformers", "4.57.1", "transformers/trainer.py"),
    "accelerate": ("accelerate", "1.11.0", "accelerate/accelerator.py"),
}
_NUMBER = re.compile(r"(?<![\w.])\d+(?![\w.])")


def real_module(target: str, cache: Path) -> str:
    """The text of a real trainer module (``REAL``), from its wheel (downloaded once)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from real_speed import download  # the same pinned download as the speed benchmark

    name, pinned, member = REAL[target]
    wheel = download(name, pinned, cache / "downloads")
    if wheel is None or wheel.suffix != ".whl":
        raise SystemExit(f"{name}=={pinned}: no wheel")
    with zipfile.ZipFile(wheel) as archive:
        return archive.read(member).decode("utf-8")


def middle_number(text: str) -> tuple[int, int]:
    """The line and column of the integer nearest the middle line of ``text``."""
    lines = text.splitlines()
    middle = len(lines) // 2
    for line in sorted(range(len(lines)), key=lambda i: abs(i - middle)):
        match = _NUMBER.search(lines[line])
        if match:
            return line, match.start()
    raise SystemExit("no integer to edit")


def cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) a process has used so far; None where /proc is not there."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(edits: int, debounce_ms: int | None, lines: int, target: str,
                  pace_ms: float = 120, cache: Path | None = None,
                  stages: Path | None = None) -> tuple[list[float], float | None]:
    with tempfile.TemporaryDirectory(prefix="memlint-bench-") as tmp:
        root = Path(tmp)
        script = write_project(root, lines)
        if target == "config":
            script = root / "args.yaml"
        elif target in REAL:
            script = root / Path(REAL[target][2]).name
            script.write_text(real_module(target, cache or DEFAULT_CACHE), encoding="utf-8")
        text = script.read_text()
        print(f"{script.name}: {text.count(chr(10))} lines, {len(text):,} characters", file=sys.stderr)
        arrived: dict[int, float] = {}
        published = asyncio.Event()

        client = LanguageClient("memlint-bench", "1")

        @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_publish(params: types.PublishDiagnosticsParams) -> None:
            if params.version is not None:
                arrived.setdefault(params.version, time.perf_counter())
                published.set()

        @client.feature(types.WINDOW_LOG_MESSAGE)
        def on_log(params: types.LogMessageParams) -> None:
            if params.type == types.MessageType.Error:
                print(f"server: {params.message}", file=sys.stderr)

        @client.feature(types.WORKSPACE_CONFIGURATION)
        def on_configuration(params: types.ConfigurationParams):
            return [None for _ in params.items]

        command = [sys.executable, "-m", "memlint", "lsp"]
        if stages is not None:  # the same server, its stages timed (bench/lsp_server_stages.py)
            command = [sys.executable, str(ROOT / "bench" / "lsp_server_stages.py"), str(stages)]
        if debounce_ms is not None:
            command += ["--debounce-ms", str(debounce_ms)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        await client.start_io(*command, env=env, cwd=str(ROOT))  # `-m` puts the cwd first on sys.path
        capabilities = types.ClientCapabilities(  # a push client, as VS Code 1.65 and Neovim 0.9
            text_document=types.TextDocumentClientCapabilities(
                publish_diagnostics=types.PublishDiagnosticsClientCapabilities(version_support=True)),
            workspace=types.WorkspaceClientCapabilities(configuration=True),
        )
        await client.initialize_async(types.InitializeParams(
            capabilities=capabilities, root_uri=from_fs_path(str(root)),
            workspace_folders=[types.WorkspaceFolder(uri=from_fs_path(str(root)), name="bench")]))
        client.initialized(types.InitializedParams())
        uri = from_fs_path(str(script))
        client.text_document_did_open(types.DidOpenTextDocumentParams(
            types.TextDocumentItem(uri=uri, language_id="yaml" if target == "config" else "python", version=1,
                                   text=text)))
        await asyncio.wait_for(published.wait(), 120)

        if target in REAL:
            line, column = middle_number(text)
        else:
            marker = "per_device_train_batch_size: " if target == "config" else '"--micro_batch_size", type=int, default='
            line = next(i for i, l in enumerate(text.splitlines()) if marker in l)
            column = text.splitlines()[line].index(marker) + len(marker)
        latencies = []
        version = 1
        pid = client._server.pid if client._server is not None else None
        cpu_before = None
        for n in range(edits + 3):  # the first 3 warm the caches up and are not counted
            if n == 3 and pid is not None:
                cpu_before = cpu_seconds(pid)
            version += 1
            value = str(n % 8 + 1)
            if n:  # a keystroke comes no sooner than the pace after the one before
                await asyncio.sleep(max(0.0, sent + pace_ms / 1000 - time.perf_counter()))
            published.clear()
            sent = time.perf_counter()
            client.text_document_did_change(types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangePartial(
                    range=types.Range(types.Position(line, column), types.Position(line, column + 1)), text=value)],
            ))
            while version not in arrived:
                await asyncio.wait_for(published.wait(), 120)
                published.clear()
            if n >= 3:
                latencies.append((arrived[version] - sent) * 1000)
        cpu_after = cpu_seconds(pid) if pid is not None else None
        cpu_per_edit = (cpu_after - cpu_before) * 1000 / edits if cpu_before is not None and cpu_after is not None else None
        await client.shutdown_async(None)
        client.exit(None)
        await client.stop()
        return latencies, cpu_per_edit


def print_stages(accounts: str, first_counted: int) -> None:
    """The server's own account of the counted edits (``--stages``), mean ms per edit."""
    rows = [json.loads(line) for line in accounts.splitlines()]
    rows = [row for row in rows if row["version"] >= first_counted]
    if not rows:
        return

    def mean(key: str) -> float:
        return statistics.fmean(row[key] for row in rows if row[key] is not None)

    process, loop, job, engine = mean("process_cpu"), mean("loop_cpu"), mean("job_cpu"), mean("engine_cpu")
    print(f"server CPU per edit {process:.1f} ms: lint job {job:.1f} (engine's lint_path {engine:.1f}, "
          f"the job's rest {job - engine:.1f}), event loop {loop:.1f} (JSON-RPC, text sync, publish), "
          f"other threads {process - job - loop:.1f}")
    print(f"wall per edit: didChange read -> lint job {mean('read_to_job'):.1f} ms (debounce, hand-over), "
          f"lint job {mean('job_wall'):.1f} ms, job -> published {mean('job_to_published'):.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--edits", type=int, default=50)
    parser.add_argument("--pace-ms", type=float, default=120,
                        help="least time between two edits' sending (0: each as soon as the last is answered)")
    parser.add_argument("--debounce-ms", type=int, default=None, help="passed to the server (default: its own)")
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--target", choices=("script", "config", *REAL), default="script",
                        help="edit the training script (default), the TrainingArguments YAML or a real trainer module")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where the real modules' wheels are kept")
    parser.add_argument("--stages", action="store_true",
                        help="also print where the server's CPU and wall time per edit go (bench/lsp_server_stages.py)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="memlint-stages-") as tmp:
        stages = Path(tmp) / "stages.jsonl" if args.stages else None
        latencies, cpu_per_edit = asyncio.run(measure(args.edits, args.debounce_ms, args.lines, args.target,
                                                      args.pace_ms, args.cache, stages))
        accounts = stages.read_text() if stages is not None and stages.exists() else None
    ordered = sorted(latencies)
    p95 = ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]
    debounce = "server default" if args.debounce_ms is None else f"{args.debounce_ms} ms"
    what = {"script": f"a {args.lines}-line script", "config": "the TrainingArguments YAML"}.get(
        args.target) or "{}=={}'s {}".format(*REAL.get(args.target, ("", "", "")))
    pace = f"{args.pace_ms:g} ms apart or more" if args.pace_ms else "each when the last is answered"
    print(f"didChange -> publishDiagnostics over {len(latencies)} edits of {what} "
          f"({pace}; debounce: {debounce}): median {statistics.median(latencies):.1f} ms, p95 {p95:.1f} ms, "
          f"min {ordered[0]:.1f} ms, max {ordered[-1]:.1f} ms"
          + (f"; server CPU {cpu_per_edit:.1f} ms per edit" if cpu_per_edit is not None else ""))
    if accounts is not None:
        print_stages(accounts, first_counted=5)  # version 1 is the open, 2-4 the uncounted edits


if __name__ == "__main__":
    main()
