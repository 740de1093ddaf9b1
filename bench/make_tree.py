"""Build a large, realistic repository to benchmark linters on.

A monorepo of ML projects: for every project a training script in one of the shapes people
write (TRL SFT with HfArgumentParser, HF Trainer with argparse, a hand-written AMP loop, an
Accelerate loop), its configs (DeepSpeed JSON, Axolotl / LLaMA-Factory / Accelerate YAML), a
launcher, and — like any real repository — far more ordinary Python that has nothing to do
with training (data utilities, web handlers, CLI tools, tests). Deterministic for a seed.

    python bench/make_tree.py /tmp/bench-tree --projects 400
"""

from __future__ import annotations

import argparse
import json
import random
import textwrap
from pathlib import Path

MODELS = [
    "meta-llama/Llama-3.1-8B", "Qwen/Qwen2.5-7B", "Qwen/Qwen2.5-1.5B", "mistralai/Mistral-7B-v0.1",
    "google/gemma-2-9b", "microsoft/Phi-3.5-mini-instruct", "openai-community/gpt2-medium",
    "TinyLlama/TinyLlama-1.1B-Chat-v1.0", "Qwen/Qwen3-8B", "meta-llama/Llama-3.2-3B",
]

TRL_SCRIPT = '''\
"""SFT of {model} ({name})."""

from dataclasses import dataclass, field

from datasets import load_dataset
from peft import LoraConfig
from transformers import AutoModelForCausalLM, AutoTokenizer, HfArgumentParser
from trl import SFTConfig, SFTTrainer


@dataclass
class ScriptArguments:
    model_name_or_path: str = field(default="{model}")
    dataset_name: str = field(default="trl-lib/Capybara")
    use_lora: bool = field(default={lora})


def build_peft_config(args):
    if not args.use_lora:
        return None
    return LoraConfig(r={r}, lora_alpha={alpha}, lora_dropout=0.05, target_modules="all-linear")


def main():
    parser = HfArgumentParser((ScriptArguments, SFTConfig))
    script_args, training_args = parser.parse_args_into_dataclasses()
    tokenizer = AutoTokenizer.from_pretrained(script_args.model_name_or_path)
    model = AutoModelForCausalLM.from_pretrained(script_args.model_name_or_path, torch_dtype="bfloat16")
    trainer = SFTTrainer(
        model=model,
        args=training_args,
        train_dataset=load_dataset(script_args.dataset_name, split="train"),
        processing_class=tokenizer,
        peft_config=build_peft_config(script_args),
    )
    trainer.train()
    trainer.save_model(training_args.output_dir)


if __name__ == "__main__":
    main()
'''

TRAINER_SCRIPT = '''\
"""Full fine-tuning of {model} with the HF Trainer ({name})."""

import argparse

from datasets import load_dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

MODEL_ID = "{model}"


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch_size", type=int, default={batch})
    parser.add_argument("--max_length", type=int, default={seq})
    parser.add_argument("--epochs", type=int, default=1)
    return parser.parse_args()


def main():
    args = parse_args()
    tokenizer = AutoTokenizer.from_pretrained(MODEL_ID)
    model = AutoModelForCausalLM.from_pretrained(MODEL_ID, torch_dtype="bfloat16")

    def tokenize(batch):
        return tokenizer(batch["text"], truncation=True, max_length=args.max_length)

    data = load_dataset("wikitext", "wikitext-2-raw-v1", split="train").map(tokenize, batched=True)
    training_args = TrainingArguments(
        output_dir="checkpoints/{name}",
        per_device_train_batch_size=args.batch_size,
        gradient_accumulation_steps={accum},
        gradient_checkpointing={ckpt},
        bf16=True,
        deepspeed="ds_config.json",
        num_train_epochs=args.epochs,
    )
    Trainer(model=model, args=training_args, train_dataset=data).train()


if __name__ == "__main__":
    main()
'''

LOOP_SCRIPT = '''\
"""A hand-written training loop for {model} ({name})."""

import torch
from torch.utils.data import DataLoader
from transformers import AutoModelForCausalLM

from .data import build_dataset

BATCH_SIZE = {batch}
SEQ_LEN = {seq}
ACCUM = {accum}


def train_epoch(model, loader, optimizer, scaler):
    model.train()
    for step, batch in enumerate(loader):
        batch = {{k: v.cuda(non_blocking=True) for k, v in batch.items()}}
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(**batch).loss / ACCUM
        scaler.scale(loss).backward()
        if (step + 1) % ACCUM == 0:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)


def main():
    model = AutoModelForCausalLM.from_pretrained("{model}").cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
    scaler = torch.amp.GradScaler("cuda")
    loader = DataLoader(build_dataset(SEQ_LEN), batch_size=BATCH_SIZE, shuffle=True)
    for _ in range(3):
        train_epoch(model, loader, optimizer, scaler)


if __name__ == "__main__":
    main()
'''

UTILITY_TEMPLATES = [
    '''\
"""Helpers for {topic}."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)


@dataclass
class {cls}Record:
    key: str
    value: float
    tags: tuple[str, ...] = ()


def load_{fn}(path: Path) -> list[{cls}Record]:
    records = []
    with path.open() as handle:
        for line in handle:
            item = json.loads(line)
            records.append({cls}Record(item["key"], float(item["value"]), tuple(item.get("tags", ()))))
    log.info("loaded %d records from %s", len(records), path)
    return records


def summarize_{fn}(records: list[{cls}Record]) -> dict[str, float]:
    totals: dict[str, float] = {{}}
    for record in records:
        for tag in record.tags or ("untagged",):
            totals[tag] = totals.get(tag, 0.0) + record.value
    return dict(sorted(totals.items()))
''',
    '''\
"""HTTP handlers for the {topic} service."""

import http.server
import urllib.parse


class {cls}Handler(http.server.BaseHTTPRequestHandler):
    routes = {{}}

    def do_GET(self):
        parsed = urllib.parse.urlparse(self.path)
        handler = self.routes.get(parsed.path)
        if handler is None:
            self.send_error(404, "no such route")
            return
        body = handler(urllib.parse.parse_qs(parsed.query)).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def route(path):
    def register(function):
        {cls}Handler.routes[path] = function
        return function
    return register


@route("/health")
def health(query):
    return "ok"


@route("/{fn}")
def {fn}(query):
    name = query.get("name", ["world"])[0]
    return f"hello {{name}}"
''',
    '''\
"""Tests for {topic}."""

import pytest


def normalize_{fn}(text: str) -> str:
    return " ".join(text.strip().lower().split())


@pytest.mark.parametrize("raw, expected", [
    ("  Hello   World ", "hello world"),
    ("A\\tB", "a b"),
    ("", ""),
])
def test_normalize_{fn}(raw, expected):
    assert normalize_{fn}(raw) == expected


class Test{cls}:
    def test_idempotent(self):
        once = normalize_{fn}("  X  y ")
        assert normalize_{fn}(once) == once
''',
]


def deepspeed_config(stage: int, rng: random.Random) -> str:
    config = {
        "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": "auto",
        "gradient_clipping": "auto",
        "bf16": {"enabled": "auto"},
        "zero_optimization": {"stage": stage, "overlap_comm": True, "contiguous_gradients": True},
    }
    if stage == 3:
        config["zero_optimization"].update({
            "stage3_prefetch_bucket_size": "auto",
            "stage3_param_persistence_threshold": "auto",
            "stage3_gather_16bit_weights_on_model_save": True,
        })
    if rng.random() < 0.3:
        config["zero_optimization"]["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    return json.dumps(config, indent=2) + "\n"


def axolotl_yaml(model: str, rng: random.Random) -> str:
    return textwrap.dedent(f"""\
        base_model: {model}
        load_in_4bit: {str(rng.random() < 0.5).lower()}
        adapter: {"qlora" if rng.random() < 0.5 else "lora"}
        lora_r: {rng.choice([8, 16, 32, 64])}
        lora_alpha: 16
        lora_dropout: 0.05
        lora_target_linear: true
        datasets:
          - path: mhenrichsen/alpaca_2k_test
            type: alpaca
        output_dir: ./outputs/out
        sequence_len: {rng.choice([1024, 2048, 4096, 8192])}
        sample_packing: true
        micro_batch_size: {rng.choice([1, 2, 4, 8])}
        gradient_accumulation_steps: 4
        num_epochs: 1
        optimizer: adamw_bnb_8bit
        learning_rate: 0.0002
        bf16: auto
        gradient_checkpointing: true
        flash_attention: true
        """)


def make_project(root: Path, index: int, rng: random.Random) -> int:
    name = f"project_{index:04d}"
    folder = root / "projects" / name
    folder.mkdir(parents=True, exist_ok=True)
    model = rng.choice(MODELS)
    shape = rng.choice(["trl", "trainer", "loop", "axolotl"])
    written = 0
    if shape == "trl":
        (folder / "train.py").write_text(TRL_SCRIPT.format(model=model, name=name, lora=rng.random() < 0.5,
                                                         r=rng.choice([8, 16, 64]), alpha=32))
        (folder / "run.sh").write_text(
            "#!/usr/bin/env bash\naccelerate launch --num_processes 8 train.py \\\n"
            f"    --output_dir out --per_device_train_batch_size {rng.choice([1, 2, 4, 8])} \\\n"
            f"    --max_length {rng.choice([1024, 2048, 4096])} --gradient_checkpointing True --bf16\n")
        written = 2
    elif shape == "trainer":
        (folder / "train.py").write_text(TRAINER_SCRIPT.format(
            model=model, name=name, batch=rng.choice([1, 2, 4, 8]), seq=rng.choice([512, 1024, 2048]),
            accum=rng.choice([1, 4, 8]), ckpt=rng.random() < 0.6))
        (folder / "ds_config.json").write_text(deepspeed_config(rng.choice([2, 3]), rng))
        (folder / "launch.sh").write_text("#!/usr/bin/env bash\ntorchrun --nproc_per_node 8 train.py\n")
        written = 3
    elif shape == "loop":
        (folder / "train.py").write_text(LOOP_SCRIPT.format(
            model=model, name=name, batch=rng.choice([1, 2, 4]), seq=rng.choice([512, 1024]), accum=4))
        (folder / "data.py").write_text(
            '"""Dataset building."""\n\nfrom datasets import load_dataset\n\n\n'
            "def build_dataset(seq_len):\n    return load_dataset('wikitext', 'wikitext-2-raw-v1', split='train')\n")
        written = 2
    else:
        (folder / "config.yml").write_text(axolotl_yaml(model, rng))
        written = 1
    return written


def make_utility(root: Path, index: int, rng: random.Random) -> None:
    topic = rng.choice(["billing", "search", "metrics", "auth", "ingest", "reports", "geo", "cache"])
    folder = root / "services" / topic / f"pkg_{index // 25:03d}"
    folder.mkdir(parents=True, exist_ok=True)
    template = rng.choice(UTILITY_TEMPLATES)
    cls = topic.capitalize() + str(index)
    text = template.format(topic=topic, cls=cls, fn=f"{topic}_{index}")
    # make files of realistic length: several related functions per module
    extra = "".join(
        f"\n\ndef helper_{index}_{k}(values):\n    total = 0\n    for v in values:\n        total += v * {k}\n"
        f"    return total / max(len(values), 1)\n"
        for k in range(rng.randint(5, 40))
    )
    (folder / f"module_{index:05d}.py").write_text(text + extra)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root", type=Path)
    parser.add_argument("--projects", type=int, default=400, help="training projects")
    parser.add_argument("--other", type=int, default=3000, help="ordinary Python modules")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    args.root.mkdir(parents=True, exist_ok=True)
    training_files = sum(make_project(args.root, i, rng) for i in range(args.projects))
    for i in range(args.other):
        make_utility(args.root, i, rng)
    (args.root / "pyproject.toml").write_text('[tool.memlint]\ngpu = "h100"\n[tool.ruff]\n')
    files = sum(1 for _ in args.root.rglob("*") if _.is_file())
    print(f"{args.root}: {files} files ({training_files} training scripts/configs/launchers, "
          f"{args.other} ordinary Python modules)")


if __name__ == "__main__":
    main()
