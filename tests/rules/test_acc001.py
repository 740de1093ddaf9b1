"""ACC001: accumulation loops whose backward() gets the undivided loss."""

from __future__ import annotations

HF_NO_TRAINER = """\
import argparse
import math

import torch
from torch.utils.data import DataLoader
from tqdm.auto import tqdm
from transformers import AutoModelForCausalLM, get_scheduler


def parse_args():
    parser = argparse.ArgumentParser(description="Finetune a causal LM")
    parser.add_argument("--gradient_accumulation_steps", type=int, default=4)
    parser.add_argument("--num_train_epochs", type=int, default=3)
    return parser.parse_args()


def main():
    args = parse_args()
    model = AutoModelForCausalLM.from_pretrained("gpt2").cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)
    train_dataloader = DataLoader(train_dataset, batch_size=8, shuffle=True)
    num_update_steps_per_epoch = math.ceil(len(train_dataloader) / args.gradient_accumulation_steps)
    lr_scheduler = get_scheduler("linear", optimizer, 0, args.num_train_epochs * num_update_steps_per_epoch)
    running_loss = 0.0
    for epoch in range(args.num_train_epochs):
        model.train()
        for step, batch in enumerate(tqdm(train_dataloader)):
            outputs = model(**batch)
            loss = outputs.loss
            running_loss += loss.item() / args.gradient_accumulation_steps
            loss.backward()
            if step % args.gradient_accumulation_steps == 0 or step == len(train_dataloader) - 1:
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()


if __name__ == "__main__":
    main()
"""


def test_hf_style_loop_fires_on_the_backward_with_the_step_as_related(lint, where):
    diagnostics = lint("ACC001", HF_NO_TRAINER)
    assert where(diagnostics) == [(31, 12, 31, 27)]
    (diagnostic,) = diagnostics
    assert "`loss.backward()` gets the undivided loss" in diagnostic.message
    assert "every `args.gradient_accumulation_steps` micro-batches (line 33)" in diagnostic.message
    assert diagnostic.related[0].range.start.line == 33
    assert diagnostic.fix is not None and diagnostic.fix.applicability == "safe"


def test_fix_divides_by_the_modulo_divisor_and_rechecks_clean(fix):
    fixed = fix("ACC001", HF_NO_TRAINER)
    assert "            (loss / args.gradient_accumulation_steps).backward()\n" in fixed
    # the logging division is left alone
    assert "running_loss += loss.item() / args.gradient_accumulation_steps" in fixed


CONTINUE_SHAPE = """\
from dataclasses import dataclass

import torch
from torch.cuda.amp import GradScaler


@dataclass
class Config:
    accum_steps: int = 16
    max_grad_norm: float = 1.0


def train_epoch(model, loader, optimizer, cfg: Config):
    scaler = GradScaler()
    for i, (x, y) in enumerate(loader):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        if (i + 1) % cfg.accum_steps != 0:
            continue
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
"""


def test_continue_shape_with_a_scaler_fires_and_fixes_inside_scale(lint, where, fix):
    assert where(lint("ACC001", CONTINUE_SHAPE)) == [(18, 8, 18, 37)]
    fixed = fix("ACC001", CONTINUE_SHAPE)
    assert "        scaler.scale(loss / cfg.accum_steps).backward()\n" in fixed


def test_a_flag_computed_from_the_modulo_counts_as_the_guard(lint, where):
    source = """\
    import torch

    ACCUM = 8

    def fit(model, loader, optimizer, epochs):
        for epoch in range(epochs):
            for step, batch in enumerate(loader):
                is_update_step = (step + 1) % ACCUM == 0
                loss = model(**batch).loss + 0.01 * model.aux_loss
                loss.backward()
                if is_update_step:
                    optimizer.step()
                    optimizer.zero_grad()
    """
    assert where(lint("ACC001", source)) == [(10, 12, 10, 27)]


def test_division_after_backward_for_logging_does_not_count(lint, where):
    source = """\
    import wandb

    def train(model, loader, opt, grad_accum):
        for step, batch in enumerate(loader):
            loss = model(**batch).loss
            loss.backward()
            loss = loss / grad_accum
            wandb.log({"loss": loss.item()})
            if (step + 1) % grad_accum == 0:
                opt.step()
                opt.zero_grad()
    """
    assert where(lint("ACC001", source)) == [(6, 8, 6, 23)]


def test_backward_in_a_helper_is_reported_in_the_helper_without_a_fix(lint, where):
    source = """\
    import torch


    def training_step(model, batch):
        logits = model(batch["input_ids"])
        loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), batch["labels"].view(-1))
        loss.backward()
        return loss.detach()


    def train(model, loader, optimizer, accumulation_steps=4):
        for step, batch in enumerate(loader):
            training_step(model, batch)
            if (step + 1) % accumulation_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
    """
    diagnostics = lint("ACC001", source)
    assert where(diagnostics) == [(7, 4, 7, 19)]
    assert diagnostics[0].fix is None  # the divisor is a name of another function


def test_nanogpt_micro_step_loop_without_division(lint, where, fix):
    source = """\
    import torch

    gradient_accumulation_steps = 5 * 8
    for iter_num in range(max_iters):
        for micro_step in range(gradient_accumulation_steps):
            with ctx:
                logits, loss = model(X, Y)
            X, Y = get_batch("train")
            loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    """
    assert where(lint("ACC001", source)) == [(9, 8, 9, 23)]
    assert "(loss / gradient_accumulation_steps).backward()" in fix("ACC001", source)


# ---------------------------------------------------------------------- near misses


def test_divided_before_backward_in_its_many_spellings(lint):
    spellings = [
        "loss = loss / args.accum\n            loss.backward()",
        "loss /= args.accum\n            loss.backward()",
        "loss = loss.div(args.accum)\n            loss.backward()",
        "loss.div_(args.accum)\n            loss.backward()",
        "(loss / args.accum).backward()",
        "loss = loss * (1.0 / args.accum)\n            loss.backward()",
        "scaler.scale(loss / args.accum).backward()",
        "if args.accum > 1:\n                loss = loss / args.accum\n            loss.backward()",
    ]
    for spelling in spellings:
        source = f"""\
    def train(model, loader, optimizer, scaler, args):
        for step, batch in enumerate(loader):
            loss = model(**batch).loss
            {spelling}
            if (step + 1) % args.accum == 0:
                optimizer.step()
                optimizer.zero_grad()
    """
        assert lint("ACC001", source) == [], spelling


def test_a_helper_that_returns_the_divided_loss(lint):
    source = """\
    import torch.nn.functional as F

    def compute_loss(model, batch, accum):
        logits = model(batch["x"])
        return F.cross_entropy(logits, batch["y"]) / accum

    def train(model, loader, optimizer, accum):
        for step, batch in enumerate(loader):
            loss = compute_loss(model, batch, accum)
            loss.backward()
            if (step + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
    """
    assert lint("ACC001", source) == []


def test_a_loss_normalised_by_the_tokens_of_the_accumulation_window(lint):
    source = """\
    def train(model, loader, optimizer, accum):
        for step, (batch, tokens_in_window) in enumerate(loader):
            loss_sum = model(**batch).loss_sum
            loss = loss_sum / tokens_in_window
            loss.backward()
            if (step + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
    """
    assert lint("ACC001", source) == []


def test_a_loss_helper_handed_the_accumulation_group_normalises_over_it(lint, where):
    """open-instruct's OLMo-core GRPO module: a masked token sum divided, inside another module's
    helper, by the token count of the whole accumulation group. The same helper called without
    anything worked out from the accumulation steps still leaves the loss undivided."""
    source = """\
    from open_instruct.model_utils import masked_mean


    class GRPOTrainModule:
        def train_batch(self, batches, accumulation_steps, accumulation_token_counts, dp_world_size):
            local_step = 0
            for sample_idx, batch in enumerate(batches):
                pg_loss, kl = self.losses(batch)
                batch_start = (sample_idx // accumulation_steps) * accumulation_steps
                loss_denominator = accumulation_token_counts[batch_start]
                loss = masked_mean(pg_loss + self.beta * kl, batch["response_mask"], None, {denominator})
                loss = loss * dp_world_size
                loss.backward()
                local_step += 1
                if local_step % accumulation_steps == 0:
                    self.optim.step()
                    self.optim.zero_grad(set_to_none=True)
    """
    assert lint("ACC001", source.format(denominator="loss_denominator")) == []
    found = lint("ACC001", source.format(denominator="batch['num_tokens']"))
    assert where(found) == [(13, 12, 13, 27)]  # loss.backward()


def test_a_loss_function_built_with_the_accumulation_steps_divides_by_them(lint, where):
    """dzorlu/distributed-training's ``train.py`` (torchtitan's pattern): ``loss_fn =
    rescale_accumulated_loss(base, steps)`` wraps the loss so that each one comes back divided,
    and the inner ``training_step`` that runs backward reads ``loss_fn`` from its enclosing
    ``main`` (a closure). The same step with the plain loss function is reported."""
    source = """\
    import torch.nn.functional as F
    from torchtitan.components.loss import rescale_accumulated_loss


    def main(model, optimizer, dataloader, model_args):
        def _base_loss_fn(logits, y):
            return F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))

        loss_fn = {loss_fn}

        def training_step(x, y):
            logits = model(x)
            _loss = loss_fn(logits, y)
            _loss.backward()
            return _loss

        for i, batch in enumerate(dataloader, 1):
            loss = training_step(batch["input_ids"], batch["labels"])
            if i % model_args.gradient_accumulation_steps == 0:
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
    """
    wrapped = "rescale_accumulated_loss(_base_loss_fn, model_args.gradient_accumulation_steps)"
    assert lint("ACC001", source.format(loss_fn=wrapped)) == []
    found = lint("ACC001", source.format(loss_fn="_base_loss_fn"))
    assert where(found) == [(14, 8, 14, 24)]  # _loss.backward()


def test_autograd_backward_of_a_list_of_one_divided_loss(lint, where):
    """Alpamayo-R1-Distillation's ``src/train/stage2.py``: ``torch.autograd.backward([scaled_loss])``
    with ``scaled_loss = loss / accumulation``; the same list of the undivided loss is reported."""
    source = """\
    import torch


    def run_stage2_training(model, optimizer, loader, config, compute_stage2_loss):
        optimizer.zero_grad(set_to_none=True)
        for step_idx, batch in enumerate(loader):
            outputs = model(**batch)
            loss: torch.Tensor = compute_stage2_loss(batch, outputs).total
            scaled_loss: torch.Tensor = {scaled}
            torch.autograd.backward([scaled_loss])
            if (step_idx + 1) % config.training.gradient_accumulation_steps == 0:
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
    """
    assert lint("ACC001", source.format(scaled="loss / config.training.gradient_accumulation_steps")) == []
    found = lint("ACC001", source.format(scaled="loss"))
    assert where(found) == [(10, 8, 10, 46)]  # torch.autograd.backward([scaled_loss])


def test_losses_collected_per_example_then_combined(lint, where):
    """fsdp-llm-posttrain's ``train_dpo.py``: each example's DPO loss is divided by the
    accumulation steps, appended to a list, and the micro-batch's backward gets
    ``torch.stack(losses).mean()``; the same with ``sum(...)`` and ``torch.cat``. Without the
    division the combined loss is reported."""
    source = """\
    import argparse

    import torch
    from torch.nn import functional as F


    def dpo_loss(pi_chosen, pi_rejected, ref_chosen, ref_rejected, beta):
        return -F.logsigmoid(beta * ((pi_chosen - ref_chosen) - (pi_rejected - ref_rejected)))


    def train(args: argparse.Namespace, policy, loader, optimizer, score):
        optimizer.zero_grad(set_to_none=True)
        for step, batch in enumerate(loader):
            losses = []
            for example in batch:
                loss = dpo_loss(*score(policy, example), beta=args.beta).mean()
                loss = {scaled}
                losses.append(loss)
            loss_mb = {combined}
            loss_mb.backward()
            if (step + 1) % args.grad_accum_steps == 0:
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
    """
    for combined in ("torch.stack(losses).mean()", "sum(losses)", "torch.cat(losses).sum()"):
        assert lint("ACC001", source.format(scaled="loss / args.grad_accum_steps", combined=combined)) == [], combined
        found = lint("ACC001", source.format(scaled="loss", combined=combined))
        assert where(found) == [(20, 8, 20, 26)], combined  # loss_mb.backward()


def test_frameworks_that_divide_themselves(lint):
    accelerate = """\
    from accelerate import Accelerator

    accelerator = Accelerator(gradient_accumulation_steps=8)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for step, batch in enumerate(loader):
        loss = model(**batch).loss
        accelerator.backward(loss)
        if (step + 1) % 8 == 0:
            optimizer.step()
            optimizer.zero_grad()
    """
    deepspeed_engine = """\
    import deepspeed

    model_engine, optimizer, _, _ = deepspeed.initialize(args=args, model=model, model_parameters=model.parameters())
    for step, batch in enumerate(loader):
        loss = model_engine(batch)
        model_engine.backward(loss)
        model_engine.step()
    """
    trainer = """\
    from transformers import Trainer, TrainingArguments

    args = TrainingArguments(output_dir="out", gradient_accumulation_steps=8, per_device_train_batch_size=2)
    Trainer(model=model, args=args, train_dataset=dataset).train()
    """
    for source in (accelerate, deepspeed_engine, trainer):
        assert lint("ACC001", source) == []


def test_no_accumulation_or_a_modulo_that_only_logs(lint):
    source = """\
    for step, batch in enumerate(loader):
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if step % 100 == 0:
            print(f"step {step}: {loss.item():.4f}")
    """
    assert lint("ACC001", source) == []


def test_gan_with_a_generator_step_every_n_critic_iterations(lint):
    source = """\
    for i, (real, _) in enumerate(loader):
        d_loss = -torch.mean(critic(real)) + torch.mean(critic(generator(z).detach()))
        d_loss.backward()
        opt_d.step()
        opt_d.zero_grad()
        if i % n_critic == 0:
            g_loss = -torch.mean(critic(generator(z)))
            g_loss.backward()
            opt_g.step()
            opt_g.zero_grad()
    """
    assert lint("ACC001", source) == []


def test_a_task_loop_over_range_is_not_accumulation(lint):
    source = """\
    for batch in loader:
        for task_id in range(len(heads)):
            loss = criterion(heads[task_id](encoder(batch)), batch["labels"][task_id])
            loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    """
    assert lint("ACC001", source) == []


TIMM_STYLE = """\
import torch


def train_one_epoch(model, loader, optimizer, loss_fn, accum_steps, has_no_sync):
    last_batch_idx = len(loader) - 1
    for batch_idx, (input, target) in enumerate(loader):
        need_update = batch_idx == last_batch_idx or (batch_idx + 1) % accum_steps == 0

        def _forward():
            _loss = loss_fn(model(input), target)
            {divide}
            return _loss

        def _backward(_loss):
            _loss.backward()
            if need_update:
                optimizer.step()

        if has_no_sync and not need_update:
            with model.no_sync():
                loss = _forward()
                _backward(loss)
        else:
            loss = _forward()
            _backward(loss)
        if need_update:
            optimizer.zero_grad(set_to_none=True)
"""


def test_ddp_no_sync_branches_run_backward_on_every_micro_step(lint, where):
    diagnostics = lint("ACC001", TIMM_STYLE.replace("{divide}", "pass"))
    assert where(diagnostics) == [(15, 12, 15, 28)]
    assert diagnostics[0].fix is None  # the backward sits in a nested helper


def test_division_reaches_the_helper_through_its_parameter(lint):
    assert lint("ACC001", TIMM_STYLE.replace("{divide}", "_loss /= accum_steps")) == []
    source = """\
    def backward_step(loss, scaler):
        scaler.scale(loss).backward()


    def train(model, loader, optimizer, scaler, accum):
        for step, batch in enumerate(loader):
            backward_step(model(**batch).loss / accum, scaler)
            if (step + 1) % accum == 0:
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
    """
    assert lint("ACC001", source) == []
    undivided = source.replace("model(**batch).loss / accum", "model(**batch).loss")
    assert [d.range.start.line for d in lint("ACC001", undivided)] == [2]


def test_a_divided_loss_scaled_again_before_a_helper_backward(lint):
    source = TIMM_STYLE.replace("{divide}", "_loss /= accum_steps").replace(
        "            loss = _forward()\n            _backward(loss)\n",
        "            loss = _forward()\n            scaled_loss = 2.0 * loss\n"
        "            if dist_scale is not None:\n                scaled_loss *= dist_scale\n"
        "            _backward(scaled_loss)\n",
    )
    assert "_backward(scaled_loss)" in source
    assert lint("ACC001", source) == []


# A Trainer copied into a project (ChatGLM-6B's ptuning/trainer.py, from transformers 4.27):
# the loss is divided only when it accumulates without DeepSpeed, whose engine divides itself
VENDORED_TRAINER = """\
import torch


class Trainer:
    def __init__(self, model, args, optimizer, deepspeed=None):
        self.model = model
        self.args = args
        self.optimizer = optimizer
        self.deepspeed = deepspeed
        self.do_grad_scaling = False

    def train(self, loader):
        args = self.args
        for epoch in range(args.num_train_epochs):
            for step, inputs in enumerate(loader):
                tr_loss_step = self.training_step(self.model, inputs)
                if (step + 1) % args.gradient_accumulation_steps == 0:
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), args.max_grad_norm)
                    self.optimizer.step()
                    self.model.zero_grad()

    def training_step(self, model, inputs):
        model.train()
        loss = self.compute_loss(model, inputs)
        if self.args.n_gpu > 1:
            loss = loss.mean()
        if self.args.gradient_accumulation_steps > 1 and not self.deepspeed:
            # deepspeed handles loss scaling by gradient_accumulation_steps in its `backward`
            loss = loss / self.args.gradient_accumulation_steps
        if self.do_grad_scaling:
            self.scaler.scale(loss).backward()
        elif self.deepspeed:
            loss = self.deepspeed.backward(loss)
        else:
            loss.backward()
        return loss.detach()

    def compute_loss(self, model, inputs):
        return model(**inputs).loss
"""


def test_a_division_on_one_branch_reaches_the_backward_on_its_own(lint):
    """The value `loss = self.deepspeed.backward(loss)` on the `elif` never reaches the `else`
    beside it, and the DeepSpeed engine (`self.deepspeed`) divides by itself."""
    assert lint("ACC001", VENDORED_TRAINER) == []
    undivided = VENDORED_TRAINER.replace("            loss = loss / self.args.gradient_accumulation_steps\n",
                                         "            pass\n")
    assert [d.range.start.line for d in lint("ACC001", undivided)] == [31, 35]



def test_a_gradient_cache_near_miss_still_divides():
    """open_clip's loop with the loss of micro-batch `j` alone (no cached features joined in):
    plain accumulation, reported."""
    from memlint.rules.acc001_accumulation_without_loss_division import AccumulationWithoutLossDivision

    [cache] = [e for e in AccumulationWithoutLossDivision.VALID if "open_clip" in (e.path or "")]
    plain = cache.source.replace(
        "                inputs = {}\n                for key, accumulated in accum_features.items():\n"
        "                    inputs[key] = torch.cat(accumulated[:j] + [model_out[key]] + accumulated[j + 1:])\n"
        "                total_loss = loss(**inputs)\n",
        "                total_loss = loss(**model_out)\n")
    assert plain != cache.source
    from tests.rules.conftest import _lint

    assert [d.range.start.line for d in _lint("ACC001", plain, path="src/open_clip_train/train.py")] == [25]


COLOSSAL_VAE = """\
from dataclasses import dataclass

import torch
from colossalai.booster import Booster
from colossalai.booster.plugin import GeminiPlugin

from vae_lib.losses import reconstruction_loss


@dataclass
class TrainConfig:
    grad_accum: int = 8
    lr: float = 1e-5


def train(vae, loader, cfg: TrainConfig):
    booster = Booster(plugin=GeminiPlugin(precision="bf16"))
    opt = torch.optim.AdamW(vae.parameters(), lr=cfg.lr)
    vae, opt, *_ = booster.boost(vae, opt)
    for i, video in enumerate(loader):
        recon, posterior = vae(video)
        vae_loss = reconstruction_loss(recon, video) + 1e-6 * posterior.kl().mean()
        booster.backward(vae_loss, opt)
        if (i + 1) % cfg.grad_accum == 0:
            opt.step()
            opt.zero_grad()
"""


def test_a_booster_handed_the_loss_and_the_optimizer_is_judged_on_that_loss(lint, where, fix):
    """ColossalAI's ``booster.backward(loss, optimizer)``: the loss is its first argument, not
    the booster; dividing it there is the fix, and a divided loss given by keyword is clean."""
    (diagnostic,) = lint("ACC001", COLOSSAL_VAE)
    assert "`booster.backward(vae_loss, opt)` gets the undivided loss" in diagnostic.message
    assert "booster.backward(vae_loss / cfg.grad_accum, opt)" in fix("ACC001", COLOSSAL_VAE)
    divided = COLOSSAL_VAE.replace("booster.backward(vae_loss, opt)",
                                   "booster.backward(loss=vae_loss / cfg.grad_accum, optimizer=opt)")
    assert lint("ACC001", divided) == []


ZEROED_EVERY_PASS = """\
import argparse

import torch
import torch.nn.functional as F

from classifier.data import make_loader
from classifier.model import MLP

parser = argparse.ArgumentParser()
parser.add_argument("--accumulation_steps", type=int, default=4)
args = parser.parse_args()

model = MLP(784, 10).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for batch_idx, (images, labels) in enumerate(make_loader()):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(images.cuda()), labels.cuda())
    loss.backward()
    if (batch_idx + 1) % args.accumulation_steps == 0:
        optimizer.step()
"""


def test_gradients_zeroed_on_every_pass_accumulate_nothing_to_divide(lint, where):
    """Each pass erases the gradients of the one before (TRN002's finding): the step sees one
    micro-batch's gradient, not a sum, so asking for the loss to be divided would be wrong."""
    assert lint("ACC001", ZEROED_EVERY_PASS) == []
    assert where(lint("TRN002", ZEROED_EVERY_PASS)) == [(16, 4, 16, 25)]
    zeroed_after_the_step = ZEROED_EVERY_PASS.replace("    optimizer.zero_grad()\n", "").replace(
        "        optimizer.step()\n", "        optimizer.step()\n        optimizer.zero_grad()\n")
    assert len(lint("ACC001", zeroed_after_the_step)) == 1


ENGINE_UNDER_THE_MODELS_NAME = """\
import argparse

import torch
from torch.cuda.amp import GradScaler, autocast

from trainer.config import load_config
from trainer.distributed import wrap_model_distributed
from trainer.models import build_model


def run(cfg):
    model = build_model(cfg)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    model, optimizer = wrap_model_distributed(model, optimizer, cfg)  # a DeepSpeed engine when use_deepspeed
    scaler = GradScaler(enabled=cfg.mixed_precision and not cfg.use_deepspeed)
    model.train()
    for itr, batch in enumerate(cfg.train_loader, start=1):
        with autocast(enabled=cfg.mixed_precision):
            output = model.forward(batch)
        loss = output["loss"]
{divide}
        if cfg.use_deepspeed:
            model.backward(loss)
        else:
            scaler.scale(loss).backward()
        if itr % cfg.grad_accumulation == 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.gradient_clip)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("-Y", "--yaml", required=True)
    run(load_config(parser.parse_args().yaml))
"""


def test_backward_of_the_model_object_is_an_engines_and_takes_the_loss(lint, where):
    """``model.backward(loss)``: no torch module has a backward method, so the model object the
    loop calls ``forward`` on is an engine wrapping it (DeepSpeed's, built in a helper of another
    module). Its argument is the loss, divided here before either backward; the engine divides
    by its own accumulation too. Only the plain branch's undivided loss is reported."""
    divided = ENGINE_UNDER_THE_MODELS_NAME.format(
        divide="        if cfg.grad_accumulation != 1:\n            loss = loss / cfg.grad_accumulation")
    assert lint("ACC001", divided) == []
    undivided = ENGINE_UNDER_THE_MODELS_NAME.format(divide="")
    diagnostics = lint("ACC001", undivided)
    assert [d.message.split("`")[1] for d in diagnostics] == ["scaler.scale(loss).backward()"]


def test_a_lockstep_check_that_only_tests_run_is_no_training(lint):
    # InternEvo tests/test_solver/test_optimizer.py: a ZeRO optimizer and DDP accumulate the same
    # undivided micro-batch losses and must agree; the helper runs only under a test function
    source = """\
import multiprocessing as mp

import pytest
import torch


def exam_zero_optim_with_ddp(args):
    rank, world_size, micro_num = args
    torch_model, zero_model, torch_optimizer, zero_optimizer = build_pair(rank, world_size)
    for _ in range(3):
        zero_optimizer.zero_grad()
        torch_optimizer.zero_grad()
        for num in range(micro_num):
            input_data = torch.rand(16, 128).cuda()
            zero_optimizer.backward(zero_model(input_data).mean())
            torch_model(input_data).mean().backward()
        zero_optimizer.step()
        torch_optimizer.step()
        compare_grads(torch_model, zero_model)


@pytest.mark.parametrize("micro_num", [1, 4])
def test_zero_optim_with_ddp(micro_num):
    with mp.get_context("spawn").Pool(processes=8) as pool:
        pool.map(exam_zero_optim_with_ddp, [[rank, 8, micro_num] for rank in range(8)])
"""
    assert lint("ACC001", source, path="tests/test_solver/test_optimizer.py") == []
    # the same helper run by a script's entry point is a training loop
    script = source.split("@pytest.mark")[0] + 'if __name__ == "__main__":\n    exam_zero_optim_with_ddp([0, 1, 4])\n'
    assert {d.code for d in lint("ACC001", script, path="train_zero.py")} == {"ACC001"}


def test_a_project_backward_handed_the_accumulation_count_divides_itself(lint):
    # FastVideo's RL method: the model plugin (another module) runs
    # ``(loss / max(1, int(grad_accum_rounds))).backward()`` inside ``backward``
    source = """\
import torch


class DiffusionNFTMethod:
    def train_one_step(self, samples, advantages, grad_accum_steps):
        current_accum = 0
        for batch in samples:
            losses, backward_ctx = self._training_timestep_loss(batch, advantages)
            self.student.backward(losses["total_loss"], backward_ctx, grad_accum_rounds=grad_accum_steps)
            current_accum += 1
            if current_accum % grad_accum_steps == 0:
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
"""
    assert lint("ACC001", source, path="fastvideo/train/methods/rl/diffusion_nft.py") == []
    # the receiver runs the backward of the loss it is handed: it is no loss whose reads sync the GPU
    timesteps = source.replace("            current_accum += 1\n",
                               "            current_accum += 1\n            t = batch.float() / float(self.student.num_timesteps)\n")
    assert lint("TRN003", timesteps, path="fastvideo/train/methods/rl/diffusion_nft.py") == []
    # handed something else, the division is not the callee's to make
    other = source.replace("grad_accum_rounds=grad_accum_steps", "retain_graph=False")
    assert [d.code for d in lint("ACC001", other, path="fastvideo/train/methods/rl/diffusion_nft.py")] == ["ACC001"]


def test_a_loss_every_subclass_divides_in_its_own_method(lint):
    # TencentPretrain's trainer.py: the base loop calls self.forward_propagation, which the base
    # only declares; each trainer subclass returns loss / self.accumulation_steps
    source = """\
import torch


class Trainer:
    def __init__(self, args):
        self.accumulation_steps = args.accumulation_steps
        self.current_step = 1

    def forward_propagation(self, batch, model):
        raise NotImplementedError

    def train(self, args, loader, model, optimizer, scheduler):
        model.train()
        for batch in loader:
            loss = self.forward_propagation(batch, model)
            loss.backward()
            if self.current_step % self.accumulation_steps == 0:
                optimizer.step()
                scheduler.step()
                model.zero_grad()
            self.current_step += 1


class LmTrainer(Trainer):
    def forward_propagation(self, batch, model):
        src, tgt, seg = batch
        loss = model(src, tgt, seg)
        return loss / self.accumulation_steps


class ClsTrainer(Trainer):
    def forward_propagation(self, batch, model):
        src, tgt = batch
        loss = model(src, tgt)
        loss = loss / self.accumulation_steps
        return loss


class VitTrainer(ClsTrainer):
    pass
"""
    assert lint("ACC001", source, path="tencentpretrain/trainer.py") == []
    # one trainer that forgets the division is enough for the loop to sum its micro-batches
    forgets = source.replace("        return loss / self.accumulation_steps", "        return loss")
    assert [d.code for d in lint("ACC001", forgets, path="tencentpretrain/trainer.py")] == ["ACC001"]


# YOLOv7's train.py and utils/loss.py, trimmed: the loss class scales its loss by the batch size
# ("loss scaled by batch_size") and the loop accumulates to a nominal batch of 64 on purpose
YOLO_TRAIN = """\
import argparse

import torch
from torch.cuda import amp

from models.yolo import Model
from utils.datasets import create_dataloader
from utils.loss import ComputeLoss


def train(hyp, opt, device):
    nbs = 64  # nominal batch size
    total_batch_size = opt.total_batch_size
    accumulate = max(round(nbs / total_batch_size), 1)  # accumulate loss before optimizing
    hyp["weight_decay"] *= total_batch_size * accumulate / nbs  # scale weight_decay
    model = Model(opt.cfg).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=hyp["lr0"], momentum=hyp["momentum"], nesterov=True)
    scaler = amp.GradScaler(enabled=True)
    compute_loss = ComputeLoss(model)  # init loss class
    dataloader = create_dataloader(opt.train_path, opt.img_size, opt.batch_size)
    for epoch in range(opt.epochs):
        optimizer.zero_grad()
        for i, (imgs, targets) in enumerate(dataloader):
            ni = i + len(dataloader) * epoch
            with amp.autocast(enabled=True):
                pred = model(imgs.to(device))
                loss, loss_items = compute_loss(pred, targets.to(device))  # loss scaled by batch_size
            scaler.scale(loss).backward()
            if ni % accumulate == 0:
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
"""

YOLO_LOSS = """\
import torch
import torch.nn as nn


class ComputeLoss:
    def __init__(self, model):
        self.BCEcls = nn.BCEWithLogitsLoss()
        self.BCEobj = nn.BCEWithLogitsLoss()

    def __call__(self, p, targets):
        lcls, lbox, lobj = torch.zeros(1), torch.zeros(1), torch.zeros(1)
        for pi in p:
            lobj += self.BCEobj(pi[..., 4], torch.zeros_like(pi[..., 4]))
        bs = p[0].shape[0]  # batch size
        loss = lbox + lobj + lcls
        return loss * bs, torch.cat((lbox, lobj, lcls, loss)).detach()
"""


def test_a_loss_scaled_by_the_batch_size_accumulates_a_sum_on_purpose(lint):
    assert lint("ACC001", YOLO_TRAIN, files={"utils/loss.py": YOLO_LOSS}) == []


def test_near_miss_a_mean_loss_from_the_same_class_is_reported(lint, where):
    mean = YOLO_LOSS.replace("return loss * bs,", "return loss,")
    [finding] = lint("ACC001", YOLO_TRAIN, files={"utils/loss.py": mean})
    assert "divide the loss by `accumulate`" in finding.message


def test_a_criterion_that_sums_accumulates_a_sum(lint):
    summed = YOLO_TRAIN.replace("compute_loss = ComputeLoss(model)  # init loss class",
                                "compute_loss = torch.nn.CrossEntropyLoss(reduction=\"sum\")").replace(
        "loss, loss_items = compute_loss(pred, targets.to(device))  # loss scaled by batch_size",
        "loss = compute_loss(pred, targets.to(device))")
    assert lint("ACC001", summed) == []
    assert len(lint("ACC001", summed.replace('reduction="sum"', 'reduction="mean"'))) == 1


# jasonppy/VoiceCraft's steps/trainer.py and models/voicecraft.py, trimmed: the model's forward
# returns a loss summed over its tokens (per-codebook means times their token counts), which the
# trainer accumulates as a sum for ScaledAdam
VOICECRAFT_TRAINER = """\
import torch

from models import voicecraft


class Trainer:
    def __init__(self, args, rank):
        self.args = args
        self.model = voicecraft.VoiceCraft(args).to(rank)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=args.lr)
        self.scaler = torch.cuda.amp.GradScaler()

    def train(self, loader):
        for batch in loader:
            for j in range(self.args.gradient_accumulation_steps):
                cur_batch = {key: value[j::self.args.gradient_accumulation_steps] for key, value in batch.items()}
                with torch.cuda.amp.autocast(dtype=torch.float16):
                    out = self.model(cur_batch)
                self.scaler.scale(out["loss"]).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
            self.optimizer.zero_grad()
"""

VOICECRAFT_MODEL = """\
import torch
import torch.nn.functional as F
from torch import nn


class VoiceCraft(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.decoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(args.d_model, args.nhead), args.num_layers)
        self.predict_layer = nn.ModuleList([nn.Linear(args.d_model, args.audio_vocab_size)
                                            for _ in range(args.n_codebooks)])

    def forward(self, batch):
        hidden = self.decoder(batch["x"])
        loss = []
        ntokens = []
        for k, layer in enumerate(self.predict_layer):
            logit = layer(hidden)
            loss.append(F.cross_entropy(logit.flatten(0, 1), batch["y"][k].flatten(), reduction="mean"))
            ntokens.append(logit.shape[0] * logit.shape[1])
        loss = sum([l * nt for l, nt in zip(loss, ntokens)])
        return {"loss": loss, "effective_ntoken": torch.tensor(sum(ntokens))}
"""


def test_a_loss_the_models_forward_sums_over_its_tokens_accumulates_a_sum(lint):
    assert lint("ACC001", VOICECRAFT_TRAINER, path="steps/trainer.py",
                files={"models/voicecraft.py": VOICECRAFT_MODEL}) == []  # before: "divide the loss by ..."


def test_near_miss_a_forward_that_returns_the_mean_is_reported(lint):
    mean = VOICECRAFT_MODEL.replace("loss = sum([l * nt for l, nt in zip(loss, ntokens)])",
                                    "loss = sum(loss) / len(loss)")
    [finding] = lint("ACC001", VOICECRAFT_TRAINER, path="steps/trainer.py", files={"models/voicecraft.py": mean})
    assert "gradient_accumulation_steps" in finding.message


# microsoft/LMOps' learning_law/src/base_trainer.py and transformer_model.py, trimmed: full-batch
# training whose per-sample weights gamma (by default 1/N over the whole set) are sliced by the
# micro-step and handed to the model's own compute_loss, which sums the weighted losses
LEARNING_LAW_TRAINER = """\
import torch
import torch.distributed as dist
from torch.optim import SGD


class BaseTrainer:
    def __init__(self, args, model):
        self.args = args
        self.model = model
        self.optimizer = SGD(self.model.parameters(), lr=args.lr)

    def train(self, gamma=None):
        gl_bs = self.args.batch_size * dist.get_world_size()
        flat_gamma = torch.ones(self.train_data[0].size(0)) / self.train_data[0].size(0)
        grad_acc_steps = self.train_data[0].size(0) // gl_bs
        for e in range(self.args.epochs):
            self.optimizer.zero_grad()
            gamma_e = gamma[e] if gamma is not None else flat_gamma
            for i in range(grad_acc_steps):
                inputs = self.train_data[0][i * gl_bs:(i + 1) * gl_bs]
                labels = self.train_data[1][i * gl_bs:(i + 1) * gl_bs]
                loss, losses = self.model.compute_loss(inputs, labels, gamma=gamma_e[i * gl_bs:(i + 1) * gl_bs])
                loss.backward()
            self.optimizer.step()
"""

LEARNING_LAW_MODEL = """\
import torch
from torch import nn


class TransformerModel(nn.Module):
    def compute_loss(self, input_ids, labels, gamma=None):
        losses = nn.functional.cross_entropy(self(input_ids), labels, reduction="none")
        if gamma is None:
            loss = torch.mean(losses)
        else:
            loss = torch.sum(gamma * losses)
        return loss, losses
"""


def test_a_loss_weighted_by_the_callers_weights_is_normalised_by_them(lint):
    assert lint("ACC001", LEARNING_LAW_TRAINER, path="src/base_trainer.py",
                files={"src/transformer_model.py": LEARNING_LAW_MODEL}) == []  # before: "divide the loss by ..."


def test_near_miss_the_same_method_called_without_weights_is_reported(lint):
    unweighted = LEARNING_LAW_TRAINER.replace(", gamma=gamma_e[i * gl_bs:(i + 1) * gl_bs])", ")")
    [finding] = lint("ACC001", unweighted, path="src/base_trainer.py",
                     files={"src/transformer_model.py": LEARNING_LAW_MODEL})
    assert "grad_acc_steps" in finding.message
