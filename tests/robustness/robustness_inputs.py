"""Hypothesis strategies for what users feed memlint: training scripts composed from the
fragments people write, configs whose keys come from the committed schemas (so validation
paths run) with values of any type, and raw mutations of the real example projects.

A plain module (not conftest.py) so the property tests import it by name.
"""

from __future__ import annotations

import json
import keyword
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
SCHEMAS = REPO / "schemas"
CORPUS_DIRS = (REPO / "examples", REPO / "tests" / "real_runs")
LINTED = (".py", ".json", ".yaml", ".yml", ".sh")

# ---------------------------------------------------------------------------- Python: atoms

NAMES = (
    "model", "optimizer", "opt", "loss", "scaler", "args", "cfg", "config", "batch", "step", "i",
    "accum", "loader", "dataset", "tokenizer", "trainer", "accelerator", "engine", "lr_scheduler",
    "outputs", "logits", "x", "y", "_", "__dunder",
    # identifiers people do write, and ones Python folds (NFKC: "ｍodel" is "model")
    "módel", "λ_loss", "ｍodel", "optimiseur_état", "损失", "𝔪", "Schritt",
)
CALLABLES = (
    "print", "len", "range", "enumerate", "zip", "getattr", "helper", "build_model", "get_batch",
    "torch.tensor", "torch.zeros", "torch.randn", "F.cross_entropy", "torch.nn.functional.cross_entropy",
    "model", "model.generate", "tokenizer", "torch.cuda.amp.autocast", "torch.amp.autocast",
    "torch.cuda.amp.GradScaler", "GradScaler", "ac", "DataLoader", "partial",
)
MODEL_IDS = (
    "meta-llama/Llama-3.1-8B", "Qwen/Qwen2.5-0.5B", "gpt2", "openai-community/gpt2-medium",
    "mistralai/Mistral-7B-v0.1", "facebook/opt-125m", "google/gemma-2-9b", "EleutherAI/pythia-160m",
    "unknown-org/not-a-model", "./checkpoints/step-100", "", "meta-llama/Llama-3.1-405B",
)
DTYPES = ("torch.bfloat16", "torch.float16", "torch.float32", '"auto"', '"bfloat16"', "dtype", "None")

identifiers = st.sampled_from(NAMES)
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_éüßλΩжﬁ"  # ﬁ folds to "fi"
generated_identifiers = st.tuples(
    st.sampled_from(_LETTERS), st.text(alphabet=_LETTERS + "0123456789", max_size=10)
).map("".join).filter(lambda name: not keyword.iskeyword(name) and not keyword.issoftkeyword(name))
names = st.one_of(identifiers, generated_identifiers)


def _repr_float(value: float) -> str:
    text = repr(value)
    return f'float("{text}")' if text in ("inf", "-inf", "nan") else text


literals = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(_repr_float),
    st.sampled_from([
        "1_000", "0x1F", "0o17", "0b1011", "1e-5", "2e-4", "3.0e+2", "1j", "1.5J", "...", "None", "True", "False",
        "-1", "+-~1", "10**20", "2**64", '"auto"', "'bf16'", "r'\\d+'", "b'\\x00bytes'", '"""triple\nquoted"""',
        'f"{step!r:>{width}}"', 'f"{loss.item():.4f}"', "u'unicode'", "rb'raw'", "'\\N{GREEK SMALL LETTER LAMDA}'",
        "'\\u2028'", "float('nan')", "0.", ".5", "1_0",
    ]),
    st.text(max_size=12).map(repr),
    st.binary(max_size=6).map(repr),
)

attribute_chains = st.sampled_from([
    "args.gradient_accumulation_steps", "args.lr", "args.batch_size", "config.max_iters", "cfg.accum",
    "model.config", "model.parameters()", "torch.bfloat16", "self.model", "training_args.fp16",
    "accelerator.sync_gradients", "outputs.loss", "batch['input_ids']",
])


def _call(function: str, positional: list[str], keywords: list[tuple[str, str]]) -> str:
    return f"{function}({', '.join([*positional, *(f'{k}={v}' for k, v in keywords)])})"


def _expression_extensions(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """Composite expressions, each parenthesised where precedence could make it invalid:
    generated code is valid Python unless a test asks for broken code."""
    keywords = st.lists(st.tuples(names, inner), max_size=3, unique_by=lambda kv: kv[0])
    return st.one_of(
        st.builds(_call, st.sampled_from(CALLABLES), st.lists(inner, max_size=3), keywords),
        st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "//", "%", "**", "@", "<<", "and", "or", "==",
                                          "!=", "<", "is", "is not", "in", "not in"]), inner)
        .map(lambda b: f"({b[0]} {b[1]} {b[2]})"),
        st.tuples(inner, inner).map(lambda s: f"({s[0]})[{s[1]}]"),
        st.tuples(inner, names).map(lambda a: f"({a[0]}).{a[1]}"),
        st.lists(inner, max_size=3).map(lambda items: f"[{', '.join(items)}]"),
        st.lists(inner, max_size=3).map(lambda items: f"({', '.join(items)},)" if items else "()"),
        st.lists(st.tuples(inner, inner), max_size=3).map(lambda kv: "{" + ", ".join(f"{k}: {v}" for k, v in kv) + "}"),
        st.tuples(names, inner).map(lambda lam: f"(lambda {lam[0]}: {lam[1]})"),
        st.tuples(inner, names, inner).map(lambda c: f"[{c[0]} for {c[1]} in {c[2]}]"),
        st.tuples(inner, inner, inner).map(lambda t: f"({t[0]} if {t[1]} else {t[2]})"),
        inner.map(lambda e: f"(not {e})"),
        inner.map(lambda e: f"-({e})"),
        inner.map(lambda e: f"(yield {e})"),
        inner.map(lambda e: f"[*{e}]"),
        st.tuples(names, inner).map(lambda w: f"({w[0]} := {w[1]})"),
    )


expressions = st.recursive(st.one_of(literals, names, attribute_chains), _expression_extensions, max_leaves=6)


def _kwargs(keys: st.SearchStrategy[str], values: st.SearchStrategy[str] = expressions, max_size: int = 5):
    return st.lists(st.tuples(keys, values), max_size=max_size, unique_by=lambda kv: kv[0]).map(
        lambda pairs: ", ".join(f"{k}={v}" for k, v in pairs)
    )


# ---------------------------------------------------------------------------- Python: fragments

IMPORTS = (
    "import torch", "import torch as th", "import torch.nn.functional as F", "import argparse",
    "from dataclasses import dataclass, field", "from functools import partial",
    "from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments",
    "from transformers import AutoModelForCausalLM as AM, TrainingArguments as TA",
    "from transformers import HfArgumentParser", "from peft import LoraConfig, get_peft_model",
    "from torch.cuda.amp import autocast, GradScaler", "from torch.cuda.amp import autocast as ac",
    "from torch.cuda import amp", "import torch.cuda.amp as amp", "from accelerate import Accelerator",
    "import deepspeed", "from trl import SFTTrainer, SFTConfig", "from torch.utils.data import DataLoader",
    "from torch import *", "from . import data", "from .utils import helper as helper", "import torch.distributed as dist",
    "from transformers import (\n    AutoModelForCausalLM,\n    BitsAndBytesConfig,\n)", "import transformers, torch",
)
TRAINING_KEYS = (
    "per_device_train_batch_size", "gradient_accumulation_steps", "learning_rate", "bf16", "fp16",
    "gradient_checkpointing", "gradient_checkpointing_kwargs", "deepspeed", "optim", "max_steps",
    "num_train_epochs", "output_dir", "max_seq_length", "max_length", "fsdp", "fsdp_config", "torch_compile",
    "lr_scheduler_type", "report_to", "logging_steps", "save_strategy", "packing", "no_such_argument",
)
PRETRAINED_KEYS = (
    "torch_dtype", "dtype", "device_map", "load_in_4bit", "load_in_8bit", "attn_implementation",
    "quantization_config", "trust_remote_code", "low_cpu_mem_usage", "revision", "use_cache",
)
ARG_TYPES = ("int", "float", "str", "bool", "lambda s: s", "None", "json.loads")

pretrained_values = st.one_of(st.sampled_from(DTYPES), expressions)
from_pretrained_calls = st.tuples(
    st.sampled_from([
        "AutoModelForCausalLM.from_pretrained", "AM.from_pretrained", "transformers.AutoModelForCausalLM.from_pretrained",
        "AutoModelForSeq2SeqLM.from_pretrained", "PeftModel.from_pretrained", "AutoModel.from_config",
    ]),
    st.one_of(st.sampled_from(MODEL_IDS).map(json.dumps), expressions),
    _kwargs(st.sampled_from(PRETRAINED_KEYS), pretrained_values),
).map(lambda c: f"{c[0]}({c[1]}{', ' + c[2] if c[2] else ''})")

training_arguments_calls = st.tuples(
    st.sampled_from(["TrainingArguments", "TA", "SFTConfig", "transformers.TrainingArguments", "Seq2SeqTrainingArguments"]),
    _kwargs(st.sampled_from(TRAINING_KEYS), st.one_of(literals, expressions), max_size=8),
).map(lambda c: f"{c[0]}({c[1]})")

loss_expressions = st.sampled_from(["loss", "outputs.loss", "model(**batch).loss", "loss.mean()", "λ_loss", "loss[0]"])
optimizers = st.sampled_from(["optimizer", "opt", "self.optimizer", "optimizers[0]"])
accumulation_divisors = st.sampled_from(["args.gradient_accumulation_steps", "accum", "cfg.accum", "8", "config.steps"])

simple_statements = st.one_of(
    st.tuples(names, expressions).map(lambda a: f"{a[0]} = {a[1]}"),
    st.tuples(names, st.sampled_from(["int", "float", "str", "torch.Tensor", "'Model'"]), expressions)
    .map(lambda a: f"{a[0]}: {a[1]} = {a[2]}"),
    st.tuples(names, expressions).map(lambda a: f"{a[0]} += {a[1]}"),
    expressions,
    from_pretrained_calls.map(lambda call: f"model = {call}"),
    from_pretrained_calls.map(lambda call: f"model = {call}.cuda()"),
    training_arguments_calls.map(lambda call: f"training_args = {call}"),
    st.tuples(st.from_regex(r"\A[a-z_][a-z_\-]{0,20}\Z"), st.sampled_from(ARG_TYPES), expressions)
    .map(lambda a: f'parser.add_argument("--{a[0]}", type={a[1]}, default={a[2]})'),
    st.just("parser = argparse.ArgumentParser()"),
    st.just("args = parser.parse_args()"),
    st.just("args, = HfArgumentParser((TrainingArguments,)).parse_args_into_dataclasses()"),
    loss_expressions.map(lambda loss: f"{loss}.backward()"),
    st.tuples(loss_expressions, accumulation_divisors).map(lambda a: f"({a[0]} / {a[1]}).backward()"),
    loss_expressions.map(lambda loss: f"scaler.scale({loss}).backward()"),
    loss_expressions.map(lambda loss: f"accelerator.backward({loss})"),
    st.tuples(loss_expressions, accumulation_divisors).map(lambda a: f"loss = {a[0]} / {a[1]}"),
    optimizers.map(lambda o: f"{o}.step()"),
    st.tuples(optimizers, st.sampled_from(["", "set_to_none=True", "False"])).map(lambda a: f"{a[0]}.zero_grad({a[1]})"),
    optimizers.map(lambda o: f"scaler.step({o})"),
    optimizers.map(lambda o: f"scaler.unscale_({o})"),
    st.sampled_from([
        "scaler.update()", "lr_scheduler.step()", "model.train()", "model.eval()", "torch.cuda.empty_cache()",
        "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)", "model.gradient_checkpointing_enable()",
        'model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})',
        "model = get_peft_model(model, LoraConfig(r=16, target_modules=['q_proj', 'v_proj']))",
        "optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)", "scaler = torch.cuda.amp.GradScaler()",
        "scaler = GradScaler(2.0**14)", "accelerator = Accelerator(gradient_accumulation_steps=4)",
        "model, optimizer, loader = accelerator.prepare(model, optimizer, loader)",
        "model_engine, optimizer, _, _ = deepspeed.initialize(model=model, config='ds_config.json')",
        "trainer = Trainer(model=model, args=training_args, train_dataset=dataset)", "trainer.train()",
        "loss = torch.utils.checkpoint.checkpoint(layer, x)", "pass", "break", "continue", "return",
        "return loss", "global step", "nonlocal model", "raise", "del model", "assert step, 'message'",
        "import torch", "from torch.cuda.amp import autocast as ac, GradScaler", "model.enable_input_require_grads()",
        "print(f'{step=} {loss.item()=:.4f}')", "x = y = z = 0", "a, *b = c", "step += 1",
    ]),
)

CONDITIONS = st.one_of(
    st.sampled_from([
        "(step + 1) % args.gradient_accumulation_steps == 0", "step % accum != 0", "(i + 1) % 8 == 0",
        "accelerator.sync_gradients", "__name__ == '__main__'", "args.fp16", "step > 0 and loss.item() > 1e3", "True",
    ]),
    expressions,
)
HEADERS = st.one_of(
    st.tuples(names, names, expressions).map(lambda h: f"for {h[0]}, {h[1]} in enumerate({h[2]}):"),
    st.tuples(names, accumulation_divisors).map(lambda h: f"for {h[0]} in range({h[1]}):"),
    st.sampled_from(["for batch in loader:", "for step, batch in enumerate(tqdm(loader)):", "while True:",
                     "for epoch in range(args.epochs):", "async for batch in stream:"]),
    CONDITIONS.map(lambda c: f"if {c}:"),
    st.sampled_from([
        'with torch.autocast("cuda", dtype=torch.bfloat16):', "with torch.cuda.amp.autocast():", "with ac(True):",
        "with autocast(dtype=torch.float16):", "with accelerator.accumulate(model):", "with torch.no_grad():",
        "with open(path) as handle, torch.enable_grad():", "async with lock:",
        "with (\n    torch.autocast('cuda'),\n    accelerator.accumulate(model),\n):",
    ]),
    st.tuples(names, st.lists(names, max_size=3, unique=True)).map(lambda d: f"def {d[0]}({', '.join(d[1])}):"),
    st.tuples(names, st.lists(names, max_size=2, unique=True)).map(
        lambda d: f"async def {d[0]}(*{', '.join(d[1]) or 'a'}):" if len(d[1]) <= 1 else f"async def {d[0]}({d[1][0]}, *, {d[1][1]}):"),
    names.map(lambda n: f"class {n}:"),
    names.map(lambda n: f"@dataclass\nclass {n}:"),
    names.map(lambda n: f"@torch.no_grad()\ndef {n}(self, batch, *, scaler=None, **kw) -> 'Tensor':"),
)
PATTERNS = ("case 0 | 1:", "case {'lr': lr, **rest}:", "case [first, *others]:", "case Config(lr=0.1):",
            "case str() as text:", "case (1, _) if step > 3:")


@dataclass(frozen=True)
class Block:
    """A compound statement: its header line(s), an indented body, and the clauses that follow
    at the same depth (``else:``, ``except ...:``, ``finally:``)."""

    header: str
    body: tuple
    clauses: tuple = ()  # of (header, body)


def _blocks(inner: st.SearchStrategy) -> st.SearchStrategy:
    body = st.lists(inner, min_size=1, max_size=5).map(tuple)
    return st.one_of(
        st.builds(Block, HEADERS, body),
        st.builds(lambda c, then, orelse: Block(f"if {c}:", then, (("else:", orelse),)), CONDITIONS, body, body),
        st.builds(
            lambda tried, handler, final: Block("try:", tried, (("except Exception as error:", handler),)
                                                + ((("finally:", final),) if final else ())),
            body, body, st.one_of(st.none(), body),
        ),
        st.builds(
            lambda subject, cases: Block(f"match {subject}:", tuple(Block(p, b) for p, b in cases)),
            st.sampled_from(["step", "args.mode", "batch"]),
            st.lists(st.tuples(st.sampled_from(PATTERNS), body), min_size=1, max_size=3),
        ),
    )


statements = st.recursive(simple_statements, _blocks, max_leaves=25)


def render(items, indent: str) -> list[str]:
    """Source lines of statements (strings) and blocks, with ``indent`` per nesting level."""
    out: list[str] = []

    def emit(item, depth: int) -> None:
        prefix = indent * depth
        if isinstance(item, Block):
            for header, body in ((item.header, item.body), *item.clauses):
                out.extend(prefix + line for line in header.split("\n"))
                for child in body:
                    emit(child, depth + 1)
        else:
            out.extend(prefix + line for line in item.split("\n"))

    for item in items:
        emit(item, 0)
    return out


COMMENTS = ("# memlint: ignore", "# memlint: ignore[ACC001, MEM]", "# memlint: ignore-file[CKP]", "# memlint: ignore[]",
            "# noqa: E501", "# type: ignore", "# -*- coding: latin-1 -*-", "# é ∑ 損失", "\f", "", "#\x0cpage")
BROKEN = ("x = 1__0", "x = *y", "else:", "t = (,)", "def f(:", "print('unclosed", "    unexpected_indent = 1",
          "f(a=1, a=2)", "f(x=1, 2)", "class", "from . import", "x = [", "if True", "lambda: (yield)", ")", "\t \tmixed = 1",
          "return = 5", "def f(*, **k): pass", "x = 'a' 'b' b'c'", "async = 1", "f'{'")


@st.composite
def training_scripts(draw, broken: bool = False) -> str:
    """A training script composed from the fragments users write: valid Python, unless
    ``broken``, which adds one line of what does not parse (as a half-typed edit leaves)."""
    imports = draw(st.lists(st.sampled_from(IMPORTS), min_size=1, max_size=6))
    body = draw(st.lists(statements, min_size=1, max_size=10))
    indent = draw(st.sampled_from(["    ", "  ", "\t", "        "]))
    lines = list(imports) + [""] + render(body, indent)
    for comment in draw(st.lists(st.sampled_from(COMMENTS), max_size=3)):
        at = draw(st.integers(min_value=0, max_value=len(lines)))
        lines.insert(at, comment)
    if draw(st.booleans()):
        lines.insert(0, '"""Fine-tune a causal LM."""')
    if draw(st.booleans()):
        lines += ["", "if __name__ == '__main__':", indent + "main()"]
    if broken:
        at = draw(st.integers(min_value=0, max_value=len(lines)))
        lines.insert(at, draw(st.sampled_from(BROKEN)))
    return surface(draw, "\n".join(lines) + "\n")


def surface(draw, text: str) -> str:
    """Vary what editors vary: line endings, a final newline, trailing blanks."""
    ending = draw(st.sampled_from(["\n", "\n", "\r\n", "\r", "mixed"]))
    if ending == "mixed":
        text = "".join(
            line + draw(st.sampled_from(["\n", "\r\n"])) for line in text.split("\n")
        )
    elif ending != "\n":
        text = text.replace("\n", ending)
    if draw(st.booleans()):
        text = text.rstrip("\r\n")
    return text


# ---------------------------------------------------------------------------- configs


@lru_cache(maxsize=None)
def schema(name: str) -> dict:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8"))


def _resolve(root: dict, node: Any) -> dict:
    if isinstance(node, dict) and isinstance(node.get("$ref"), str) and node["$ref"].startswith("#/"):
        target: Any = root
        for part in node["$ref"][2:].split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        return target if isinstance(target, dict) else {}
    return {}


@dataclass(frozen=True)
class KeyInfo:
    """A key the schema knows: the values it names (enum, const, default) and its sub-keys."""

    name: str
    known_values: tuple
    children: tuple  # of KeyInfo


def schema_keys(name: str, max_depth: int = 3) -> tuple[KeyInfo, ...]:
    """The keys of a committed schema, with their nested keys, through $ref/allOf/if/then."""
    root = schema(name)

    def properties(node: Any, seen: frozenset) -> dict[str, list[dict]]:
        found: dict[str, list[dict]] = {}
        stack = [node]
        visited: set[int] = set()
        while stack:
            current = stack.pop()
            if not isinstance(current, dict) or id(current) in visited:
                continue
            visited.add(id(current))
            for key, sub in (current.get("properties") or {}).items():
                found.setdefault(key, []).append(sub)
            ref = _resolve(root, current)
            if ref:
                stack.append(ref)
            for combinator in ("allOf", "anyOf", "oneOf"):
                stack.extend(current.get(combinator) or [])
            stack.extend(current.get(k) for k in ("then", "else", "items") if isinstance(current.get(k), dict))
        return found

    def build(node: Any, depth: int, seen: frozenset) -> tuple[KeyInfo, ...]:
        out = []
        for key, subs in sorted(properties(node, seen).items()):
            values: list = []
            for sub in subs:
                for candidate in [sub, _resolve(root, sub), *(sub.get("anyOf") or []), *(sub.get("oneOf") or [])]:
                    if isinstance(candidate, dict):
                        values += [v for v in candidate.get("enum") or [] if _json_safe(v)]
                        for k in ("const", "default"):
                            if k in candidate and _json_safe(candidate[k]):
                                values.append(candidate[k])
            children = () if depth >= max_depth else tuple(c for sub in subs for c in build(sub, depth + 1, seen))
            out.append(KeyInfo(key, tuple(values[:20]), children))
        return tuple(out)

    return build(root, 0, frozenset())


def _json_safe(value: Any) -> bool:
    try:
        json.dumps(value)
        return True
    except (TypeError, ValueError):
        return False


json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=15),
    st.sampled_from(["auto", "none", "1e-5", "3", "true", "yes", "off", "cpu", "nvme", "bf16", "~", "", "null"]),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)


def config_values(keys: tuple[KeyInfo, ...], depth: int = 0) -> st.SearchStrategy[dict]:
    """A mapping whose keys are mostly the schema's (sometimes misspelt or unknown), whose
    values are what the schema names or anything JSON can hold."""

    def value_for(info: KeyInfo) -> st.SearchStrategy:
        options = [json_values]
        if info.known_values:
            options.append(st.sampled_from(info.known_values))
        if info.children and depth < 3:
            options.append(config_values(info.children, depth + 1))
        return st.one_of(*options)

    pair = st.sampled_from(keys).flatmap(lambda info: st.tuples(st.just(info.name), value_for(info)))
    misspelt = st.sampled_from(keys).flatmap(
        lambda info: st.tuples(st.sampled_from([info.name.replace("_", "-"), info.name.upper(), info.name + "s",
                                                info.name[:-1] or "x", "_" + info.name]), json_values)
    )
    unknown = st.tuples(st.text(max_size=10), json_values)
    return st.lists(st.one_of(pair, pair, pair, misspelt, unknown), max_size=10).map(dict)


# tool -> (schemas whose keys it uses, file names that make memlint read it as that tool's)
CONFIG_TOOLS = {  # (names with spaces, percent signs and accents are paths too)
    "deepspeed": (("deepspeed",), ("ds_config.json", "zero3.json", "deepspeed/zero2.json", "run configs/ds_config.json")),
    "accelerate": (("accelerate",), ("accelerate_config.yaml", "default_config.yaml", "accelerate/fsdp.yml")),
    "axolotl": (("axolotl",), ("qlora.yml", "axolotl/config.yaml", "100% run/qlora.yml")),
    "llamafactory": (("llamafactory",), ("llama3_lora_sft.yaml", "examples/train_full.yaml")),
    "hf-args": (("hf-training-arguments", "trl-sft-config", "trl-dpo-config", "trl-grpo-config"),
                ("args.yaml", "sft_config.json", "recipes/config.yaml", "données/args.yaml")),
}
SIGNATURES = {  # keys that make memlint detect the tool by content
    "deepspeed": {"zero_optimization": {"stage": 2}},
    "accelerate": {"compute_environment": "LOCAL_MACHINE", "distributed_type": "FSDP"},
    "axolotl": {"base_model": "Qwen/Qwen2.5-0.5B", "sequence_len": 2048},
    "llamafactory": {"model_name_or_path": "meta-llama/Meta-Llama-3-8B", "stage": "sft", "finetuning_type": "lora"},
    "hf-args": {"per_device_train_batch_size": 4, "output_dir": "out"},
}


@st.composite
def config_documents(draw) -> tuple[str, dict]:
    """(relative path, value) of a config of some tool."""
    tool = draw(st.sampled_from(sorted(CONFIG_TOOLS)))
    schema_names, paths = CONFIG_TOOLS[tool]
    keys = schema_keys(draw(st.sampled_from(schema_names)))
    value = draw(config_values(keys))
    if draw(st.booleans()):
        value = {**SIGNATURES[tool], **value}
    path = draw(st.sampled_from(paths))
    return path, value


@st.composite
def yaml_texts(draw, value: Any) -> str:
    """YAML for ``value``: block or flow style, anchors and aliases for repeated parts (PyYAML
    writes them for shared objects), and sometimes tags, several documents, comments."""
    if isinstance(value, dict) and value and draw(st.booleans()):
        shared = next(iter(value.values()))
        if isinstance(shared, (dict, list)):
            value = {**value, "reused": shared}  # the same object twice: &id001 / *id001
    text = yaml.safe_dump(value, default_flow_style=draw(st.sampled_from([False, True, None])),
                          allow_unicode=draw(st.booleans()), sort_keys=draw(st.booleans()),
                          width=draw(st.sampled_from([20, 80, 10**6])))
    lines = text.split("\n")
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        at = draw(st.integers(min_value=0, max_value=len(lines) - 1))
        trick = draw(st.sampled_from([
            "tag", "multi", "comment", "merge", "anchor", "tab", "ignore", "directive",
        ]))
        line = lines[at]
        if trick == "tag" and ": " in line:
            key, _, rest = line.partition(": ")
            tag = draw(st.sampled_from(["!!str", "!!int", "!!float", "!!binary", "!custom", "!!python/object:os.system",
                                        "!!set", "!!omap", "!<tag:example.com,2000:x>", "!!timestamp"]))
            lines[at] = f"{key}: {tag} {rest}"
        elif trick == "multi":
            lines.insert(at, draw(st.sampled_from(["---", "...", "--- !!map", "--- |"])))
        elif trick == "comment":
            lines.insert(at, draw(st.sampled_from(["# memlint: ignore", "# memlint: ignore-file[CFG001]", "#", "# é ∑"])))
        elif trick == "merge":
            lines[at:at] = ["base: &base", "  learning_rate: 2.0e-5", "  bf16: true", "merged:", "  <<: *base",
                            "  <<: [*base, *base]", "  bf16: false"]
        elif trick == "anchor" and ": " in line:
            key, _, rest = line.partition(": ")
            lines[at] = f"{key}: &{draw(st.sampled_from(['a', 'b', 'x1']))} {rest}"
            lines.insert(at + 1, f"again_{draw(st.integers(0, 9))}: *{draw(st.sampled_from(['a', 'b', 'missing']))}")
        elif trick == "tab":
            lines[at] = "\t" + line
        elif trick == "ignore":
            lines[at] = line + "  # memlint: ignore[CFG]"
        elif trick == "directive":
            lines[0:0] = [draw(st.sampled_from(["%YAML 1.1", "%YAML 1.2", "%TAG ! tag:example.com,2000:"])), "---"]
    return "\n".join(lines)


@st.composite
def json_texts(draw, value: Any) -> str:
    """JSON for ``value``: any indentation, sometimes duplicate keys, comments or trailing commas
    (which people put in DeepSpeed configs and the tools refuse)."""
    text = json.dumps(value, indent=draw(st.sampled_from([None, 2, 4, "\t"])), ensure_ascii=draw(st.booleans()))
    trick = draw(st.sampled_from(["none", "none", "duplicate", "comment", "trailing-comma", "nan"]))
    if trick == "duplicate" and text.startswith("{") and len(text) > 2:
        text = '{"train_batch_size": 1, "train_batch_size": "auto", ' + text[1:]
    elif trick == "comment":
        text = "// DeepSpeed ZeRO-2\n" + text
    elif trick == "trailing-comma" and text.endswith("}") and len(text) > 2:
        text = text[:-1].rstrip() + ",}"
    elif trick == "nan":
        text = text.replace("null", "NaN", 1)
    return text


# ---------------------------------------------------------------------------- launchers

launch_scripts = st.tuples(
    st.sampled_from([
        "accelerate launch --config_file {accelerate} --num_processes {n}",
        "torchrun --nproc_per_node={n} --nnodes 1", "deepspeed --num_gpus {n}", "python -m torch.distributed.run --nproc-per-node {n}",
        "llamafactory-cli train", "axolotl train", "python", "CUDA_VISIBLE_DEVICES=0,1 python",
    ]),
    st.sampled_from(["train.py", "src/train.py", "scripts/missing.py", "$SCRIPT", "{config}"]),
    st.lists(st.sampled_from([
        "--deepspeed {ds}", "--per_device_train_batch_size {n}", "--gradient_accumulation_steps {n}", "--bf16",
        "--fp16 True", "--model_name_or_path meta-llama/Llama-3.1-8B", "--max_seq_length 4096", "--gradient_checkpointing",
        "\\\n    --learning_rate 2e-5", "--config {config}", "\"$@\"", "--seq_len=${SEQ:-2048}", "| tee log.txt", "&& echo done",
    ]), max_size=6),
    st.one_of(st.integers(min_value=-1, max_value=1024).map(str), st.sampled_from(["$NGPUS", "${N:-8}", "eight", ""])),
).map(lambda l: "#!/bin/bash\nset -euo pipefail\nNGPUS=8\n" + _fill(" ".join([l[0], l[1], *l[2]]), l[3]) + "\n")


def _fill(command: str, gpus: str) -> str:
    for hole, value in (("{n}", gpus), ("{accelerate}", "accelerate_config.yaml"), ("{ds}", "ds_config.json"),
                        ("{config}", "args.yaml")):
        command = command.replace(hole, value)
    return command


# ---------------------------------------------------------------------------- mutations of real files


@lru_cache(maxsize=None)
def corpus_projects() -> tuple[Path, ...]:
    """The example projects and real runs: each a directory of scripts, configs, launchers."""
    return tuple(sorted(p for d in CORPUS_DIRS for p in d.iterdir() if p.is_dir()))


def project_files(project: Path) -> list[Path]:
    return sorted(
        p for p in project.rglob("*")
        if p.is_file() and p.suffix in LINTED and p.name != "case.json"
    )


@dataclass(frozen=True)
class Mutation:
    kind: str
    at: float  # where, as a fraction of the file
    other: float = 0.0
    data: bytes = b""

    def apply(self, content: bytes) -> bytes:
        lines = content.splitlines(keepends=True)
        if not lines:
            return content + self.data
        i = min(int(self.at * len(lines)), len(lines) - 1)
        j = min(int(self.other * len(lines)), len(lines) - 1)
        offset = min(int(self.at * len(content)), len(content))
        if self.kind == "delete":
            del lines[i]
        elif self.kind == "duplicate":
            lines.insert(i, lines[i])
        elif self.kind == "swap":
            lines[i], lines[j] = lines[j], lines[i]
        elif self.kind == "indent":
            lines[i] = b"    " + lines[i]
        elif self.kind == "dedent":
            lines[i] = lines[i].lstrip(b" \t")
        elif self.kind == "truncate":
            return content[:offset]
        elif self.kind == "insert":
            return content[:offset] + self.data + content[offset:]
        elif self.kind == "overwrite":
            return content[:offset] + self.data + content[offset + len(self.data):]
        elif self.kind == "crlf":
            return content.replace(b"\n", b"\r\n")
        elif self.kind == "bom":
            return b"\xef\xbb\xbf" + content
        return b"".join(lines)


interesting_bytes = st.one_of(
    st.binary(min_size=1, max_size=8),
    st.sampled_from([
        b"\x00", b"\xff\xfe", b"\xef\xbb\xbf", b"\r", b"\t", b"\f", b"\x0b", "\u2028".encode(), "\x85".encode(),
        "\ufeff".encode(), b"(((((", b"]]]]", b"{", b'"', b"'''", b"\\", b"#", b": ", b"- ", b"&a ", b"*a", b"!!",
        b"---\n", b"\n    ", b"\nif True:\n", b"lambda: (", "é".encode(), "𝔪".encode(), b"\xc3", b"\xed\xa0\x80",
    ]),
)
mutations = st.builds(
    Mutation,
    st.sampled_from(["delete", "duplicate", "swap", "indent", "dedent", "truncate", "insert", "overwrite", "crlf", "bom"]),
    st.floats(min_value=0, max_value=1),
    st.floats(min_value=0, max_value=1),
    interesting_bytes,
)


# ---------------------------------------------------------------------------- loops that --fix rewrites


@st.composite
def fixable_scripts(draw) -> str:
    """A training script with at least one finding that has a safe fix — accumulation without
    dividing the loss (ACC001), checkpointing enabled after PEFT (CKP001), checkpoint without
    use_reentrant (CKP002), the deprecated torch.cuda.amp (AMP004) — several at once in the
    same loop, written with the variations people use."""
    rules = draw(st.lists(st.sampled_from(["ACC001", "CKP001", "CKP002", "AMP004"]), min_size=1, max_size=4,
                          unique=True))
    indent = draw(st.sampled_from(["    ", "  ", "\t"]))
    accumulate = draw(st.sampled_from(["argparse", "dataclass", "constant"]))
    accum = {"argparse": "args.gradient_accumulation_steps", "dataclass": "cfg.accum_steps", "constant": "ACCUM"}[accumulate]
    lines = ['"""Fine-tune a causal LM."""', "import argparse", "from dataclasses import dataclass", "",
             "import torch", "from transformers import AutoModelForCausalLM"]
    if "CKP001" in rules:
        lines.append("from peft import LoraConfig, get_peft_model")
    amp = draw(st.sampled_from(["attribute", "from-import", "aliased"])) if "AMP004" in rules else "none"
    if amp == "from-import":
        lines.append("from torch.cuda.amp import autocast, GradScaler")
    elif amp == "aliased":
        lines.append("from torch.cuda.amp import autocast as amp_autocast, GradScaler as Scaler")
    if "CKP002" in rules:
        lines.append(draw(st.sampled_from(["from torch.utils.checkpoint import checkpoint",
                                           "from torch.utils.checkpoint import checkpoint as ckpt", "import torch.utils.checkpoint"])))
    lines.append("")
    if accumulate == "argparse":
        lines += ["parser = argparse.ArgumentParser()",
                  f'parser.add_argument("--gradient_accumulation_steps", type=int, default={draw(st.integers(2, 64))})',
                  'parser.add_argument("--lr", type=float, default=2e-5)', "args = parser.parse_args()"]
    elif accumulate == "dataclass":
        lines += ["@dataclass", "class Config:", f"{indent}accum_steps: int = {draw(st.integers(2, 64))}",
                  f"{indent}lr: float = 2e-5", "", "", "cfg = Config()"]
    else:
        lines += [f"ACCUM = {draw(st.integers(2, 64))}"]
    lines += ["", f'model = AutoModelForCausalLM.from_pretrained("{draw(st.sampled_from(MODEL_IDS[:8]))}").cuda()']
    if "CKP001" in rules:
        lines.append('model = get_peft_model(model, LoraConfig(r=16, target_modules=["q_proj", "v_proj"], '
                     'task_type="CAUSAL_LM"))')
    lines.append("optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)")
    if "CKP001" in rules:
        lines.append("model.gradient_checkpointing_enable()")
    scaler = {"attribute": "torch.cuda.amp.GradScaler()", "from-import": "GradScaler()", "aliased": "Scaler(2.0**14)",
              "none": None}[amp]
    if scaler:
        lines.append(f"scaler = {scaler}")
    if "CKP002" in rules:
        call = {"from torch.utils.checkpoint import checkpoint": "checkpoint(block, hidden)",
                "from torch.utils.checkpoint import checkpoint as ckpt": "ckpt(block, hidden)",
                "import torch.utils.checkpoint": "torch.utils.checkpoint.checkpoint(block, hidden)"}
        chosen = next(line for line in lines if "checkpoint" in line and line.startswith(("from", "import")))
        lines += ["", "", "def run_blocks(blocks, hidden):", f"{indent}for block in blocks:",
                  f"{indent * 2}hidden = {call[chosen]}", f"{indent}return hidden"]
    autocast = {"attribute": "torch.cuda.amp.autocast(dtype=torch.float16)", "from-import": "autocast()",
                "aliased": "amp_autocast(True, torch.float16)", "none": None}[amp]
    in_function = draw(st.booleans())
    pad = indent if in_function else ""
    body: list[str] = ["batch = {k: v.cuda() for k, v in batch.items()}"]
    forward = draw(st.sampled_from(["loss = model(**batch).loss", "outputs = model(**batch)\nloss = outputs.loss"]))
    if autocast:
        body.append(f"with {autocast}:")
        body += [indent + line for line in forward.split("\n")]
    else:
        body += forward.split("\n")
    divided = "ACC001" not in rules
    loss = f"loss / {accum}" if divided else "loss"
    body.append(f"scaler.scale({loss}).backward()" if scaler else f"({loss}).backward()" if divided else "loss.backward()")
    step = ["scaler.step(optimizer)", "scaler.update()"] if scaler else ["optimizer.step()"]
    step.append(draw(st.sampled_from(["optimizer.zero_grad()", "optimizer.zero_grad(set_to_none=True)"])))
    body.append(f"if (step + 1) % {accum} == 0:")
    body += [indent + line for line in step]
    if draw(st.booleans()):
        body.append('print(f"step {step}: {loss.item():.4f}")')
    loop = ["model.train()", "for step, batch in enumerate(loader):"] + [indent + line for line in body]
    if in_function:
        lines += ["", "", "def train(model, optimizer, loader):"] + [pad + line for line in loop]
        lines += ["", "", "train(model, optimizer, loader)"]
    else:
        lines += [""] + loop
    return surface(draw, "\n".join(lines) + "\n")
