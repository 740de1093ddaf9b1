"""The prefilter of ``memlint check`` (memlint/python/prefilter.py) sets aside the Python modules
no rule and no extractor needs, and changes no finding: the rules' own examples, the
``examples/`` projects and realistic modules of both sorts (``bench/prefilter_check.py`` does
the same on real repositories)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from memlint.documents.kinds import DocumentKind
from memlint.lint.engine import Linter, expand
from memlint.lint.needs import python_needs
from memlint.project.project import Project
from memlint.project.settings import Settings, parse
from memlint.rules import all_rules

REPO = Path(__file__).resolve().parents[1]

# what a model library module looks like: torch, a docstring and comments full of training words,
# an ``optimizer`` passed around -- but no backward, no optimizer built, no trainer
MODEL_MODULE = '''\
"""LLaMA attention. Use with an optimizer such as AdamW; enable gradient_checkpointing to save memory."""
import math

import torch
from torch import nn
from torch.nn import functional as F

from .configuration_llama import LlamaConfig


class LlamaAttention(nn.Module):
    def __init__(self, config: LlamaConfig, layer_idx: int):
        super().__init__()
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.q_proj = nn.Linear(config.hidden_size, config.hidden_size, bias=False)
        self.o_proj = nn.Linear(config.hidden_size, config.hidden_size, bias=False)
        self.dropout = config.attention_dropout  # the trainer turns this off in eval mode

    def forward(self, hidden_states, attention_mask=None):
        query = self.q_proj(hidden_states)
        scores = torch.matmul(query, query.transpose(2, 3)) / math.sqrt(self.head_dim)
        if attention_mask is not None:
            scores = scores + attention_mask
        weights = F.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
        weights = F.dropout(weights, p=self.dropout, training=self.training)
        return self.o_proj(torch.matmul(weights, query))


def log_lr(optimizer, step):
    """Called by the training loop: the optimizer's learning rate at ``step``."""
    return {"step": step, "lr": optimizer.param_groups[0]["lr"]}
'''


def _wanted(settings: Settings, code: str) -> bool:
    needs = python_needs(settings)
    return needs is None or needs.wanted(ast.parse(code))


def test_a_model_module_is_set_aside():
    assert not _wanted(Settings(root=REPO), MODEL_MODULE)


@pytest.mark.parametrize("code", [
    # an alias hides nothing: the import names what it imports
    "import torch\nfrom torch.utils.checkpoint import checkpoint as ckpt\n\ndef f(block, x):\n    return ckpt(block, x)\n",
    # an optimizer class under another name
    "from torch.optim import AdamW as Optimizer\n\ndef build(model, lr):\n    return Optimizer(model.parameters(), lr=lr)\n",
    "import bitsandbytes as bnb\nopt = bnb.optim.PagedAdamW8bit(model.parameters(), lr=2e-4)\n",
    # a trainer subclass, a TRL config
    "from trl import SFTConfig\nconfig = SFTConfig(output_dir='out')\n",
    "import torch\nfrom accelerate import Accelerator as Acc\nacc = Acc()\nacc.backward(model(batch).loss)\n",
    "import torch\nfor batch in loader:\n    model(**batch).loss.backward()\n    torch.cuda.empty_cache()\n",
    "import deepspeed\nengine, *_ = deepspeed.initialize(model=model, config='ds.json')\n",
])
def test_what_a_rule_or_extractor_reads_is_kept(code):
    assert _wanted(Settings(root=REPO), code)


# DeepSpeed's engine timers: names that hold "backward" but no backward() call
_TIMERS = '''import torch
from deepspeed.utils.timer import SynchronizedWallClockTimer


class EngineTimers:
    def __init__(self, enable_micro_timers, enable_global_timers):
        self.backward_timers = []
        self.backward_inner_timers = []
        if enable_micro_timers:
            self.backward_timers += ["bwd_microstep"]
            self.backward_inner_timers += ["bwd_inner_microstep"]
        self.active = enable_micro_timers or enable_global_timers
'''

# a helper that frees memory between evaluations: no training loop around the emptying
_FREE_MEMORY = '''import gc

import torch


def free_memory(model, optimizer_name="adamw", peft_config=None):
    model.cpu()
    gc.collect()
    torch.cuda.empty_cache()
'''

# LLaVA's llava_trainer.py: a Trainer subclass the module defines and never uses (another file
# builds it and is the run), with a helper the module's other code calls
_LIBRARY_TRAINER = '''import torch
from torch.utils.data import Sampler
from transformers import Trainer
from transformers.trainer import get_parameter_names, has_length


def split_to_even_chunks(indices, lengths, num_chunks):
    return [indices[i::num_chunks] for i in range(num_chunks)]


class LengthGroupedSampler(Sampler):
    def __init__(self, batch_size, world_size, lengths=None):
        self.chunks = split_to_even_chunks(list(range(len(lengths))), lengths, world_size)


class LLaVATrainer(Trainer):
    def _get_train_sampler(self):
        if self.train_dataset is None or not has_length(self.train_dataset):
            return None
        return LengthGroupedSampler(self.args.train_batch_size, self.args.world_size, lengths=[])

    def create_optimizer(self):
        decay = get_parameter_names(self.model, [torch.nn.LayerNorm])
        groups = [{"params": [p for n, p in self.model.named_parameters() if n in decay]}]
        optimizer_cls, kwargs = Trainer.get_optimizer_cls_and_kwargs(self.args)
        self.optimizer = optimizer_cls(groups, **kwargs)
        return self.optimizer
'''


# Accelerate's operations: its state classes, no Accelerator, no backward()
_STATE_HELPERS = '''import torch
from accelerate.state import AcceleratorState, PartialState
from transformers import TrainerState


def gather_for_metrics(tensor):
    state = AcceleratorState()
    if state.num_processes == 1:
        return tensor
    return torch.cat([tensor] * state.num_processes)


def wait_for_everyone(trainer_state: TrainerState | None = None):
    PartialState().wait_for_everyone()
'''


@pytest.mark.parametrize("code", [_TIMERS, _FREE_MEMORY, _LIBRARY_TRAINER, _STATE_HELPERS])
def test_what_names_a_need_only_in_part_or_only_in_an_unused_class_is_set_aside(code):
    """A need is a whole name where the readers match whole names (``backward`` of a call, not
    ``backward_timers``; ``empty_cache`` only with a loop that runs backward; a PEFT wrap by its
    names, not ``peft_config``), and the extractor asks only the code outside the classes the
    module never uses: their training is another file's run (``_only_in_unused_classes``)."""
    assert not _wanted(Settings(root=REPO), code)


@pytest.mark.parametrize("addition", [
    # the module builds its own trainer: a script
    "\n\nif __name__ == '__main__':\n    LLaVATrainer(model=None).train()\n",
    # an optimizer class under another name, used outside the class
    "\n\nfrom torch.optim import AdamW as Optimizer\n\n\ndef build(model):\n    return Optimizer(model.parameters())\n",
    # another class names it (the extractor's test counts that as a use)
    "\n\nclass DebugTrainer(LLaVATrainer):\n    pass\n",
])
def test_a_library_class_used_or_imports_used_outside_it_keep_the_module(addition):
    assert _wanted(Settings(root=REPO), _LIBRARY_TRAINER + addition)


def test_a_class_that_declares_a_global_is_read_whole():
    """A method's ``global`` binds a module name the code outside the class can call."""
    code = _LIBRARY_TRAINER.replace("    def create_optimizer(self):\n",
                                    "    def create_optimizer(self):\n        global OPTIMIZER\n        OPTIMIZER = torch.optim.AdamW\n")
    code += "\n\ndef step(params):\n    return OPTIMIZER(params)\n"
    assert _wanted(Settings(root=REPO), code)


def test_the_unused_class_test_is_the_extractors(tmp_path):
    """What the prefilter sets aside as a library class, the extractor finds no run in either."""
    from memlint.documents.parsed import parse_document
    from memlint.documents.reading import document_from_text
    from memlint.facts.extract import extract

    parsed = parse_document(document_from_text(str(tmp_path / "llava_trainer.py"), _LIBRARY_TRAINER), whole=True)
    assert parsed.python is not None and extract(parsed) == []
    used = _LIBRARY_TRAINER + "\n\nif __name__ == '__main__':\n    LLaVATrainer(model=None).train()\n"
    parsed = parse_document(document_from_text(str(tmp_path / "llava_trainer.py"), used), whole=True)
    assert extract(parsed) != []


def test_bf16_choices_matter_only_on_a_gpu_without_bf16(tmp_path):
    code = "import torch\nmodel = model.to(torch.bfloat16)\n"
    assert not _wanted(parse({"gpu": "h100"}, tmp_path / "memlint.toml"), code)
    assert _wanted(parse({"gpu": "v100"}, tmp_path / "memlint.toml"), code)


def test_a_rule_that_declares_nothing_keeps_every_module():
    from memlint.rules import base

    class Plugin(base.Rule):
        """A project's own rule.

        ## What it does
        Looks at Python.

        ## Why it matters
        It says nothing about what it needs."""

        code = "XYZ901"
        name = "plugin"
        kinds = frozenset({DocumentKind.PYTHON})

    try:
        assert python_needs(Settings(root=REPO)) is None
    finally:
        base.REGISTRY.pop("XYZ901")


def _lint_snapshot(rule, example, root: Path, prefilter: bool) -> list:
    """``run_example`` as ``memlint check`` lints: a snapshot project, with or without the prefilter."""
    for name, text in {example.path: example.source, **example.files}.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text) if isinstance(text, bytes) else target.write_text(text, encoding="utf-8")
    table = {k.replace("_", "-"): v for k, v in example.settings.items()}
    settings = parse(table, root / "memlint.toml") if table else Settings(root=root)
    settings = settings.with_overrides(select=(rule.code,), cache=False)
    project = Project(settings, snapshot=True)
    needs = python_needs(settings) if prefilter else None
    project.documents.wanted = needs.wanted if needs is not None else None
    linter = Linter(settings, project)
    main = root / example.path
    out = []
    for path in expand([main], settings, project):
        out += [(d.path, d.code, d.range, d.message) for d in linter.lint_path(path)]
    return out


EXAMPLES = [(code, kind, i, example) for code, rule in all_rules().items()
            for kind, examples in (("valid", rule.VALID), ("invalid", rule.INVALID))
            for i, example in enumerate(examples)
            if any(name.endswith(".py") for name in (example.path, *example.files))]


@pytest.mark.parametrize("code, kind, i, example", EXAMPLES, ids=[f"{c}-{k}-{i}" for c, k, i, _ in EXAMPLES])
def test_the_rules_examples_find_the_same_with_the_prefilter(tmp_path, code, kind, i, example):
    rule = all_rules()[code]
    with_it = _lint_snapshot(rule, example, tmp_path / "on", prefilter=True)
    without = _lint_snapshot(rule, example, tmp_path / "off", prefilter=False)
    strip = lambda found, root: [(str(Path(p).relative_to(root)), *rest) for p, *rest in found]  # noqa: E731
    assert strip(with_it, tmp_path / "on") == strip(without, tmp_path / "off")
    if kind == "invalid":
        assert with_it


def test_the_examples_projects_find_the_same_with_the_prefilter(tmp_path):
    import os
    import subprocess
    import sys

    outputs = []
    for value in ("on", "off"):
        env = {**os.environ, "MEMLINT_PREFILTER": value, "PYTHONPATH": str(REPO)}
        done = subprocess.run([sys.executable, "-m", "memlint", "check", "examples/", "--output-format", "json",
                               "--no-cache", "--jobs", "1"], cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=300)
        assert "Traceback" not in done.stderr, done.stderr
        outputs.append(json.loads(done.stdout))
    assert outputs[0] == outputs[1]
    assert outputs[0]


def test_every_rule_that_looks_at_python_says_what_it_needs():
    """A rule that keeps the default ("": every module) turns the prefilter off for every run."""
    undeclared = [code for code, rule in all_rules().items()
                  if rule.applies_to(DocumentKind.PYTHON, True) and rule.python_needs == ""]
    assert undeclared == []


def _lint_module(root: Path, text: str, prefilter: bool) -> None:
    """Lint one module as ``memlint check``'s workers do, with or without the prefilter."""
    (root / "train.py").write_text(text, encoding="utf-8")
    settings = Settings(root=root).with_overrides(cache=False)
    project = Project(settings, snapshot=True)
    needs = python_needs(settings) if prefilter else None
    project.documents.wanted = needs.wanted if needs is not None else None
    Linter(settings, project).lint_path(root / "train.py")


def test_a_kept_module_is_read_only_by_the_readers_whose_need_it_meets(tmp_path, monkeypatch):
    """Kept for CKP002 (it checkpoints), a module that builds no optimizer and calls no backward
    is not read by TRN004 (its cache emptying is in no training loop) nor by the Python fact
    extractor; without the prefilter both read it."""
    from memlint.facts import extract

    extract.load_extractors()
    read: list[str] = []
    for code in ("CKP002", "TRN004"):
        rule = all_rules()[code]
        monkeypatch.setattr(rule, "check", lambda self, ctx, code=code: read.append(code) or iter(()))
    extractor = extract.EXTRACTORS["python"]
    monkeypatch.setitem(extract.EXTRACTORS, "python", lambda parsed: read.append("facts") or extractor(parsed))
    text = ("import torch\nfrom torch.utils.checkpoint import checkpoint\n\n\ndef forward_blocks(blocks, hidden):\n"
            "    for block in blocks:\n        hidden = checkpoint(block, hidden)\n    torch.cuda.empty_cache()\n"
            "    return hidden\n")
    for setting in ("on", "off"):
        (tmp_path / setting).mkdir()
    _lint_module(tmp_path / "on", text, prefilter=True)
    assert read == ["CKP002"]  # kept, and read by the one rule that needs it
    read.clear()
    _lint_module(tmp_path / "off", text, prefilter=False)
    assert sorted(set(read)) == ["CKP002", "TRN004", "facts"]


@pytest.mark.parametrize("extra", [0, 10, 290, 300, 301, 2_000])
def test_the_names_walk_measures_the_depth_too(extra):
    """``check`` walks CPython's tree once for the prefilter's names and the depth limit
    (``prefilter.survey``): the depth is ``source._depth``'s, and a module nested past the limit
    is reported whether or not the prefilter asks for its names."""
    from memlint.python import source as python_source
    from memlint.python.prefilter import survey

    text = MODEL_MODULE + "x = " + "-" * extra + "1\n"
    tree = ast.parse(text)
    limit = python_source.MAX_DEPTH
    depth, names = survey(tree, limit)  # both stop one level past the limit
    assert depth == python_source._depth(tree)
    if depth <= limit:
        assert names is not None and {"LlamaAttention", "dropout", "x", "F"} <= set(names.text.split("\n"))
    else:
        assert names is None
    for wanted in (None, lambda names: True):
        parsed = python_source.parse(text, whole=True, wanted=wanted)
        too_deep = isinstance(parsed, python_source.PythonSyntaxError) and parsed.kind == "too-complex"
        assert too_deep == (depth > limit)


def _reference_survey(tree: ast.AST) -> tuple[int, set[str]]:
    """Every node walked, contexts included: the depth (levels of nodes) and the names."""
    from memlint.python.prefilter import _name_of

    found: set[str] = set()
    depth, level = 0, [tree]
    while level:
        depth += 1
        for node in level:
            _name_of(node, found, found.add)
        level = [child for node in level for child in ast.iter_child_nodes(node)]
    return depth, found


_DEEP_NAMES = "x = y + [z.attr for z in w]\n"  # the deepest level: names' contexts alone


@pytest.mark.parametrize("path", [None, *sorted(Path(__file__).resolve().parents[1].glob("memlint/python/*.py")),
                                  *sorted(Path(__file__).resolve().parents[1].glob("examples/*/*.py"))],
                         ids=lambda p: "deepest-name" if p is None else p.name)
def test_the_survey_skips_contexts_and_keeps_depth_and_names(path):
    """``survey`` leaves the load/store contexts of names out of its walk and counts their level:
    the depth, the names and the stop past ``deepest`` are those of a walk of every node."""
    from memlint.python.prefilter import survey

    try:
        tree = ast.parse(_DEEP_NAMES if path is None else path.read_text(encoding="utf-8"))
    except SyntaxError:
        pytest.skip("an example of a syntax error")
    depth, names = _reference_survey(tree)
    found, listed = survey(tree)
    assert found == depth and listed is not None and set(filter(None, listed.text.split("\n"))) == names
    for deepest in (depth - 1, depth, depth + 1):
        found, listed = survey(tree, deepest)
        if depth > deepest:
            assert (found, listed) == (deepest + 1, None)
        else:
            assert found == depth and listed is not None and set(filter(None, listed.text.split("\n"))) == names


# A fused kernel's autograd Function: it defines ``backward`` and is handed a ``checkpoint``
# flag and an optimizer's name, but calls no backward(), no checkpoint and no optimizer
_AUTOGRAD_FUNCTION = '''import torch
from torch.utils.checkpoint import checkpoint


class FusedLinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, target):
        logits = hidden @ weight.t()
        ctx.save_for_backward(hidden, weight, logits, target)
        return torch.nn.functional.cross_entropy(logits, target)

    @staticmethod
    def backward(ctx, grad_output):
        hidden, weight, logits, target = ctx.saved_tensors
        grad = torch.softmax(logits, dim=-1)
        grad[torch.arange(len(target)), target] -= 1
        return grad_output * grad @ weight, grad_output * grad.t() @ hidden, None


def fused_loss(hidden, weight, target, checkpoint=False, optimizer_name="adamw"):
    """The loss of a ``Trainer`` run with ``gradient_checkpointing``: pass ``checkpoint`` through."""
    return FusedLinearCrossEntropy.apply(hidden, weight, target)
'''

# a TRL-like trainer: it wraps the model with PEFT and takes ``optimizers`` from its caller, but
# builds none (its base class does, in another module)
_PEFT_TRAINER = '''from peft import PeftConfig, get_peft_model
from transformers import Trainer


class RewardTrainer(Trainer):
    def __init__(self, model, args, peft_config: PeftConfig | None = None, optimizers=(None, None), **kwargs):
        if peft_config is not None:
            model = get_peft_model(model, peft_config)
        super().__init__(model=model, args=args, optimizers=optimizers, **kwargs)
'''


def _gates_met(code: str) -> list[str]:
    from memlint.lint.needs import rule_gates
    from memlint.python.prefilter import survey

    names = survey(ast.parse(code))[1]
    return sorted(rule for rule, gate in rule_gates(Settings(root=REPO)).items() if gate.wanted(names))


def test_a_reader_of_calls_is_not_given_a_module_that_only_names_what_it_calls():
    """The loop rules read backward() calls, CKP002 checkpoint calls, TRN006 an optimizer called
    and a wrap: a module that defines ``backward``, takes a ``checkpoint`` keyword or an
    ``optimizers`` argument and calls none of them meets none of their needs."""
    assert _gates_met(_AUTOGRAD_FUNCTION) == []
    assert _gates_met(_PEFT_TRAINER) == []
    # nor the extractor's: an autograd Function's ``def backward`` runs no training step
    assert not _wanted(Settings(root=REPO), _AUTOGRAD_FUNCTION)
    # the same modules calling them, under other names too
    calls = _AUTOGRAD_FUNCTION + "\n\ndef step(model, batch, opt):\n    model(batch).backward()\n    opt.step()\n"
    assert {"ACC001", "TRN001", "TRN003"} <= set(_gates_met(calls))
    calls = _AUTOGRAD_FUNCTION.replace("return FusedLinearCrossEntropy.apply(hidden, weight, target)",
                                       "return checkpoint(FusedLinearCrossEntropy.apply, hidden, weight, target)")
    assert "CKP002" in _gates_met(calls)
    calls = "import torch\n" + _PEFT_TRAINER + "\n\ndef build(model, cfg):\n" \
        "    opt = torch.optim.AdamW(model.parameters())\n    return get_peft_model(model, cfg), opt\n"
    assert "TRN006" in _gates_met(calls)


@pytest.mark.parametrize("code, rule", [
    ("from torch.autograd import backward as run_backward\n\nfor batch in loader:\n    run_backward(model(batch))\n",
     "ACC001"),
    ("import torch\n\nfor batch in loader:\n    scaler.scale(model(batch).loss).backward()\n    torch.cuda.empty_cache()\n",
     "TRN004"),
    ("import torch.utils.checkpoint as ckpt_utils\n\ndef f(block, x):\n    return ckpt_utils.checkpoint(block, x)\n",
     "CKP002"),
    ("from torch.utils import checkpoint as C\n\ndef f(blocks, x):\n    return C.checkpoint_sequential(blocks, 2, x)\n",
     "CKP002"),
    ("from torch.optim import AdamW as Opt\nfrom torch.distributed.fsdp import FullyShardedDataParallel as Wrap\n\n"
     "opt = Opt(model.parameters())\nmodel = Wrap(model)\n", "TRN006"),
    ("import peft\nimport bitsandbytes as bnb\n\nopt = bnb.optim.PagedAdamW8bit(model.parameters())\n"
     "model = peft.PeftModel.from_pretrained(model, 'adapter')\n", "TRN006"),
    ("from torch.optim import *\nfrom peft import *\n\nopt = AdamW(model.parameters())\nmodel = get_peft_model(model, cfg)\n",
     "TRN006"),
    ("from peft import get_peft_model as wrap\n\ndef load(model, cfg):\n    model = wrap(model, cfg)\n"
     "    model.gradient_checkpointing_enable()\n", "CKP001"),
    ("import deepspeed\n\nengine, *_ = deepspeed.initialize(model=model)\nmodel.gradient_checkpointing_enable()\n",
     "CKP001"),
])
def test_a_call_under_any_name_meets_its_readers_need(code, rule):
    assert rule in _gates_met(code)


_CALLS = '''import torch
import torch.utils.checkpoint as cp
from torch.optim import *
from . import optim as local_optim
from .optimizers import AdamW as A
from accelerate import Accelerator as Acc


@torch.no_grad()
def run(model, blocks, loader, optimizers):
    acc = Acc()
    opt = A(model.parameters()) if optimizers[0] is None else optimizers[0]
    sched = local_optim.build(opt).with_warmup(10)
    for batch in loader:
        hidden = cp.checkpoint(blocks[0], batch)
        loss = torch.nn.functional.mse_loss(hidden, batch)
        acc.backward(loss)
        optimizers[1].step()
        torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, s / 10)).step()
        print(f"{loss.item():.3f} {torch.cuda.memory_allocated() / 2**30:.1f} GiB")
        SGD(model.parameters())
    return sched
'''


@pytest.mark.parametrize("path", [None, *sorted(REPO.glob("examples/*/*.py")), *sorted(REPO.glob("memlint/rules/*.py"))],
                         ids=lambda p: "calls" if p is None else p.name)
def test_the_called_names_hold_every_name_a_call_is_known_by(path):
    """What a :class:`Called` need is asked of (``UsedNames.called``) holds each call's method
    name and every part of the qualified names libcst gives it through an import: all that
    ``method_name`` and ``calls_named`` recognise a call by."""
    import libcst as cst
    from libcst.metadata import QualifiedNameSource

    from memlint.python import source as python_source
    from memlint.python.prefilter import survey
    from memlint.python.syntax import method_name

    text = _CALLS if path is None else path.read_text(encoding="utf-8")
    try:
        tree = ast.parse(text)
    except SyntaxError:
        pytest.skip("an example of a syntax error")
    names = survey(tree)[1]
    assert names is not None
    called = set(names.called.split("\n"))
    assert called <= set(names.text.split("\n"))
    py = python_source.parse(text, whole=True)
    assert isinstance(py, python_source.PythonSource)
    calls = py.nodes_of(cst.Call)
    assert calls
    for call in calls:
        known = {method_name(call)} - {None}
        scope = py.scopes.get(call.func)
        if scope is not None:
            for qualified in scope.get_qualified_names_for(call.func):
                if qualified.source is QualifiedNameSource.IMPORT:
                    known.update(part for part in qualified.name.split(".") if part)
        assert known <= called, py.code_of(call)


def _optimizer_calls() -> list[str]:
    """Modules that build an optimizer each way ``is_optimizer_constructor`` knows one."""
    from memlint.python.library import OPTIMIZER_CLASS_NAMES, OPTIMIZER_MODULES

    codes = [f"from optimizers_pkg import *\n\nopt = {name}(model.parameters(), lr=1e-4)\n"
             for name in sorted(OPTIMIZER_CLASS_NAMES)]
    codes += [f"def main(model):\n    return trainer.{name}(model)\n"
              for name in ("create_optimizer", "build_optimizers", "setupOptimiser", "get_optimizer_grouped")]
    for module in OPTIMIZER_MODULES:
        called = module + "Shampoo" if module.endswith(".") else module
        package, _, rest = called.partition(".")
        codes.append(f"import {package} as pkg\n\nopt = pkg.{rest}(model.parameters(), lr=1e-4)\n")
        head, _, last = called.rpartition(".")
        codes.append(f"from {head} import {last} as Opt\n\nopt = Opt(model.parameters(), lr=1e-4)\n")
    return codes


@pytest.mark.parametrize("code", _optimizer_calls())
def test_every_optimizer_the_rules_recognise_meets_their_need(code):
    """TRN006's and CKP001's need (``CALLS_AN_OPTIMIZER``) is built from what
    ``is_optimizer_constructor`` recognises: whatever it takes for an optimizer meets it."""
    import libcst as cst

    from memlint.python import source as python_source
    from memlint.python.index import index_for
    from memlint.python.prefilter import Needs, survey
    from memlint.python.training import CALLS_AN_OPTIMIZER, is_optimizer_constructor

    py = python_source.parse(code, whole=True)
    assert isinstance(py, python_source.PythonSource)
    index = index_for(py)
    assert index is not None
    assert any(is_optimizer_constructor(index, call) for call in py.nodes_of(cst.Call))
    need = Needs.of([CALLS_AN_OPTIMIZER])
    assert need is not None and need.wanted(survey(ast.parse(code))[1])


def test_checkpointing_enabled_with_nothing_to_be_late_for_is_set_aside():
    """transformers' ``modeling_utils.py``: ``gradient_checkpointing_enable`` is called (by the
    model's own methods), but no PEFT wrap, optimizer, ``deepspeed.initialize`` or
    ``accelerator.prepare`` is: CKP001 has no order to judge there."""
    code = ('from torch.utils.checkpoint import checkpoint\n\n\nclass PreTrainedModel:\n'
            '    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs=None):\n'
            '        self._gradient_checkpointing_func = checkpoint\n\n'
            '    def enable_for_training(self, optimum_config=None):\n'
            '        if is_optimum_available() and optimum_config is not None:\n'
            '            self.gradient_checkpointing_enable()\n')
    assert "CKP001" not in _gates_met(code)
    handed_over = code + "\n\ndef train(model):\n    model = get_peft_model(model, LoraConfig())\n" \
                         "    model.gradient_checkpointing_enable()\n"
    assert "CKP001" in _gates_met(handed_over)


def test_a_backward_called_only_in_an_unused_class_is_not_the_extractors():
    """The extractor's ``backward()`` need is asked of the code outside the classes the module
    never uses, as its other names are: a library engine whose backward() runs in its own class
    (another file builds the engine) is no run here."""
    from memlint.facts.extract import NEEDS, load_extractors
    from memlint.python.prefilter import Needs, survey

    load_extractors()
    extractor = Needs.of([], outside=NEEDS["python"])
    engine = ('import torch\n\n\nclass Engine:\n    def __init__(self, model, optimizer):\n'
              '        self.model, self.optimizer = model, optimizer\n\n'
              '    def train_batch(self, batch):\n        loss = self.model(batch).loss\n'
              '        loss.backward()\n        self.optimizer.step()\n        return loss\n')
    assert extractor is not None
    assert not extractor.wanted(survey(ast.parse(engine))[1])
    script = engine + "\n\nif __name__ == '__main__':\n    Engine(model, opt).train_batch(batch)\n"
    assert extractor.wanted(survey(ast.parse(script))[1])
