"""TRN005: training steps that run in eval mode."""

from __future__ import annotations

CLASSIFIER = """\
import torch
from torch import nn


class Trainer:
    def __init__(self, model, optimizer, loaders):
        self.model = model
        self.optimizer = optimizer
        self.train_loader, self.val_loader = loaders
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)

    @torch.no_grad()
    def validate(self):
        self.model.eval()
        return sum(nn.functional.cross_entropy(self.model(x), y).item() for x, y in self.val_loader)

    def fit(self, epochs):
        self.model.train()
        for epoch in range(epochs):
            for i, (x, y) in enumerate(self.train_loader):
                loss = nn.functional.cross_entropy(self.model(x), y)
                loss.backward()
                self.optimizer.step()
                self.optimizer.zero_grad()
            print(epoch, self.validate())
"""


def test_validation_in_the_epoch_loop_without_train_again(lint, where):
    diagnostics = lint("TRN005", CLASSIFIER)
    assert where(diagnostics) == [(25, 25, 25, 40)]
    assert "`self.model.eval()` (through `self.validate()`)" in diagnostics[0].message


def test_train_at_the_start_of_each_epoch_is_enough_for_an_end_of_epoch_eval(lint):
    fixed = CLASSIFIER.replace("            for i, (x, y)", "            self.model.train()\n            for i, (x, y)")
    assert lint("TRN005", fixed) == []


def test_direct_eval_inside_the_step_loop(lint, where):
    source = """\
    for epoch in range(epochs):
        model.train()
        for step, batch in enumerate(loader):
            loss = model(**batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            if step % 1000 == 0:
                model.eval()
                with torch.no_grad():
                    val = sum(model(**b).loss.item() for b in val_loader)
    """
    assert where(lint("TRN005", source)) == [(9, 12, 9, 24)]


def test_frozen_models_may_stay_in_eval_mode(lint):
    source = """\
    import copy

    import torch

    teacher.eval()
    ema = copy.deepcopy(model)
    model.train()
    for batch in loader:
        ema.eval()
        teacher.eval()
        with torch.no_grad():
            target = teacher(**batch).logits
        loss = kl(model(**batch).logits, target)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    """
    assert lint("TRN005", source) == []


def test_from_pretrained_without_train(lint, where):
    source = """\
    import torch
    from accelerate import Accelerator
    from transformers import AutoModelForSeq2SeqLM

    accelerator = Accelerator()
    model = AutoModelForSeq2SeqLM.from_pretrained("t5-base")
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for batch in loader:
        loss = model(**batch).loss
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
    """
    diagnostics = lint("TRN005", source)
    assert where(diagnostics) == [(6, 8, 6, 56)]
    assert "never calls `model.train()`" in diagnostics[0].message


def test_from_pretrained_with_a_trainer_or_a_train_call(lint):
    trainer = """\
    from transformers import AutoModelForCausalLM, Trainer

    model = AutoModelForCausalLM.from_pretrained("gpt2")
    Trainer(model=model, args=args, train_dataset=ds).train()
    """
    called = """\
    model = AutoModelForCausalLM.from_pretrained("gpt2")
    optimizer = torch.optim.AdamW(model.parameters())
    model.train()
    for batch in loader:
        model(**batch).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    """
    for source in (trainer, called):
        assert lint("TRN005", source) == []


# verl's trainer/fsdp_sft_trainer.py, trimmed: one helper computes the loss for both steps and runs
# backward only when asked; validation calls it under torch.no_grad(), where no backward can run
SHARED_LOSS_HELPER = """\
import torch
from torch.utils.data import DataLoader
from transformers import AutoModelForCausalLM as CausalLM


class FSDPSFTTrainer:
    def __init__(self, config, train_dataset, val_dataset):
        self.config = config
        self.fsdp_model = CausalLM.from_pretrained(config.model.partial_pretrain)
        self.optimizer = torch.optim.AdamW(self.fsdp_model.parameters(), lr=config.optim.lr)
        self.train_dataloader = DataLoader(train_dataset, batch_size=config.data.train_batch_size)
        self.val_dataloader = DataLoader(val_dataset, batch_size=config.data.micro_batch_size_per_gpu)

    def _compute_loss_and_backward(self, batch, do_backward=True):
        loss = self.fsdp_model(**batch).loss
        if do_backward:
            loss.backward()
        return loss

    def training_step(self, batch):
        self.fsdp_model.train()
        self.optimizer.zero_grad()
        loss = self._compute_loss_and_backward(batch)
        self.optimizer.step()
        return {"train/loss": loss.detach().item()}

    def validation_step(self, batch):
        self.fsdp_model.eval()
        with torch.no_grad():
            return self._compute_loss_and_backward(batch, do_backward=False)

    def fit(self):
        for epoch in range(self.config.trainer.total_epochs):
            for data in self.train_dataloader:
                self.training_step(data)
            val_losses = []
            for data in self.val_dataloader:
                val_losses.append(self.validation_step(data))
"""


def test_a_loss_helper_called_under_no_grad_is_evaluation_not_training(lint):
    assert lint("TRN005", SHARED_LOSS_HELPER) == []
    # without no_grad the helper could run backward there: the evaluation loop trains in eval mode
    graded = SHARED_LOSS_HELPER.replace(
        "        with torch.no_grad():\n            return self._compute_loss_and_backward(batch, do_backward=False)",
        "        return self._compute_loss_and_backward(batch)")
    assert [d.range.start.line for d in lint("TRN005", graded)] == [37]


RL_BASE = """\
import abc

import torch


class RLTrainer(abc.ABC):
    def __init__(self, args, policy, accelerator, optimizer):
        self.args = args
        self.policy = policy
        self.accelerator = accelerator
        self.optimizer = optimizer

{rollout}

    def step_with_rollouts(self, rollouts):
        for batch in rollouts:
            loss = self.policy(**batch).loss
            self.accelerator.backward(loss)
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)

    @torch.inference_mode()
    def evaluate(self, step_idx):
        self.policy.eval()
        return [self.policy.generate(**b) for b in self.eval_batches]

    def train(self, loader):
        for step_idx, batch in enumerate(loader):
            if step_idx % self.args.eval_steps == 0:
                self.evaluate(step_idx)
            rollouts = self.rollout(batch)
            self.step_with_rollouts(rollouts)
"""

_ABSTRACT = """\
    @abc.abstractmethod
    def rollout(self, queries):
        \"\"\"Generate responses and score them; written by each algorithm.\"\"\"
        raise NotImplementedError"""

_CONCRETE = """\
    def rollout(self, queries):
        return [self.policy.generate(**queries)]"""


def test_a_step_written_by_subclasses_may_set_the_mode_itself(lint):
    # alpaca_farm's RLTrainer: PPO's rollout (another module) calls policy.eval() every step on
    # purpose; this module cannot say that nothing in the loop calls train()
    assert lint("TRN005", RL_BASE.format(rollout=_ABSTRACT)) == []


def test_the_same_loop_with_its_rollout_written_here_fires(lint):
    diagnostics = lint("TRN005", RL_BASE.format(rollout=_CONCRETE))
    assert [d.range.start.line for d in diagnostics] == [31]  # the evaluate() call in the loop
    assert "`self.policy.eval()` (through `self.evaluate(step_idx)`)" in diagnostics[0].message


# MeZO's trainer.py: a copy of the HF Trainer's train() loop in a subclass; the zeroth-order path
# runs forward passes in eval mode on purpose, the first-order path calls the inherited
# training_step, whose first line (transformers' Trainer) is model.train()
_INHERITED_STEP = """\
import torch
from .linearhead_trainer import LinearHeadTrainer


class Trainer(LinearHeadTrainer):
    def zo_forward(self, model, inputs):
        model.eval()
        with torch.inference_mode():
            return self.compute_loss(model, inputs).detach()

    def initialize_c(self, model, inputs):
        # gradient norms by backpropagation, to scale the zeroth-order estimates
        model.eval()
        loss = self.compute_loss(model, inputs)
        loss.backward()
        self.cs = dict((name, p.grad.norm().item()) for name, p in model.named_parameters())
        model.zero_grad()

    def train(self, model, train_dataloader):
        optimizer = torch.optim.AdamW(model.parameters(), lr=self.args.learning_rate)
        for step, inputs in enumerate(train_dataloader):
            if step == 0 and self.args.zo_variant is not None:
                self.initialize_c(model, inputs)
            if self.args.zero_order_optim:
                loss1 = self.zo_forward(model, inputs)
                self.zo_update(model, loss1)
            else:
                loss = self.training_step(model, inputs){own}
            optimizer.step()
            model.zero_grad()
"""


def test_a_step_an_inherited_training_step_runs_may_set_the_mode_itself(lint):
    assert lint("TRN005", _INHERITED_STEP.format(own="")) == []


def test_the_loop_that_runs_its_own_backward_after_eval_still_fires(lint):
    # the same loop computing its loss here, with no training_step: nothing switches back
    source = _INHERITED_STEP.format(own="").replace(
        "loss = self.training_step(model, inputs)", "loss = model(**inputs).loss\n                loss.backward()")
    assert [d.code for d in lint("TRN005", source)] == ["TRN005", "TRN005"]  # initialize_c, zo_forward


# FlagScale's flagscale/train/train_pi0.py and the policy class it imports: `PI0Policy` extends
# transformers' PreTrainedModel but defines its own `from_pretrained`, which builds `PI0Policy(...)`
# directly; a new module is in train mode, so the loop trains with dropout on
PI0_TRAIN = """\
import argparse

import torch

from flagscale.models.pi0.modeling_pi0 import PI0Policy, PI0PolicyConfig


def main(config):
    model_config = PI0PolicyConfig.from_pretrained(config.checkpoint_dir)
    policy = PI0Policy.from_pretrained(config.checkpoint_dir, config.tokenizer_dir, config.stat_path, model_config)
    policy = policy.to("cuda")
    optimizer = torch.optim.AdamW(policy.parameters(), lr=2.5e-5)
    for batch in build_loader(config):
        loss = policy.forward(batch)["loss"]
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
"""

PI0_MODEL = """\
import json

from transformers import PretrainedConfig, PreTrainedModel


class PI0PolicyConfig(PretrainedConfig):
    model_type = "pi0"


class PI0Policy(PreTrainedModel):
    config_class = PI0PolicyConfig

    def __init__(self, model_path, tokenizer_path, stat, config):
        super().__init__(config)
        self.stat = stat

    @classmethod
    def from_pretrained(cls, model_path, tokenizer_path, stat_path, config):
        with open(stat_path) as f:
            stat = json.load(f)
        policy = PI0Policy(model_path, tokenizer_path, stat, config)
        return policy
"""


def test_a_project_class_whose_own_loader_builds_the_module_stays_in_train_mode(lint):
    files = {"flagscale/models/pi0/modeling_pi0.py": PI0_MODEL}
    assert lint("TRN005", PI0_TRAIN, path="flagscale/train/train_pi0.py", files=files) == []


def test_near_miss_an_own_loader_that_hands_over_to_transformers_is_in_eval_mode(lint):
    handed = PI0_MODEL.replace("        policy = PI0Policy(model_path, tokenizer_path, stat, config)\n",
                               "        policy = super().from_pretrained(model_path, config=config)\n")
    files = {"flagscale/models/pi0/modeling_pi0.py": handed}
    [finding] = lint("TRN005", PI0_TRAIN, path="flagscale/train/train_pi0.py", files=files)
    assert "returns the model in eval mode" in finding.message


# transformers' examples/research_projects/pplm/run_pplm_discrim_train.py, trimmed: a classifier
# head over a frozen GPT-2, whose own train_custom() puts the head back in train mode each epoch
PPLM_DISCRIMINATOR = """\
import argparse

import torch
import torch.nn.functional as F
from torch import nn, optim
from transformers import GPT2LMHeadModel


class ClassificationHead(nn.Module):
    def __init__(self, class_size, embed_size):
        super().__init__()
        self.mlp = nn.Linear(embed_size, class_size)

    def forward(self, hidden_state):
        return self.mlp(hidden_state)


class Discriminator(nn.Module):
    def __init__(self, class_size, pretrained_model="gpt2-medium", device="cpu"):
        super().__init__()
        self.encoder = GPT2LMHeadModel.from_pretrained(pretrained_model)
        self.embed_size = self.encoder.transformer.config.hidden_size
        self.classifier_head = ClassificationHead(class_size=class_size, embed_size=self.embed_size)
        self.device = device

    def train_custom(self):
        for param in self.encoder.parameters():
            param.requires_grad = False
        self.classifier_head.train()

    def forward(self, x):
        hidden = self.encoder.transformer(x)["last_hidden_state"]
        return F.log_softmax(self.classifier_head(hidden.mean(dim=1)), dim=-1)


def train_epoch(data_loader, discriminator, optimizer, device="cpu"):
    discriminator.train_custom()
    for input_t, target_t in data_loader:
        optimizer.zero_grad()
        loss = F.nll_loss(discriminator(input_t.to(device)), target_t.to(device))
        loss.backward(retain_graph=True)
        optimizer.step()


def evaluate_performance(data_loader, discriminator, device="cpu"):
    discriminator.eval()
    with torch.no_grad():
        return sum(F.nll_loss(discriminator(x.to(device)), y.to(device)).item() for x, y in data_loader)


def train_discriminator(train_loader, test_loader, epochs=10, device="cuda"):
    discriminator = Discriminator(class_size=5, device=device).to(device)
    optimizer = optim.Adam(discriminator.parameters(), lr=0.0001)
    for epoch in range(epochs):
        train_epoch(data_loader=train_loader, discriminator=discriminator, optimizer=optimizer, device=device)
        evaluate_performance(data_loader=test_loader, discriminator=discriminator, device=device)
"""


def test_the_models_own_method_that_switches_back_to_train_mode_counts(lint):
    assert lint("TRN005", PPLM_DISCRIMINATOR) == []  # before: `discriminator.eval()` ... nothing calls train()


def test_near_miss_an_own_method_that_does_not_switch_the_mode_is_no_train_call(lint):
    frozen_only = PPLM_DISCRIMINATOR.replace("        self.classifier_head.train()\n", "        pass\n")
    [finding] = lint("TRN005", frozen_only)
    assert "`discriminator.eval()` (through `evaluate_performance(" in finding.message


# harrisliangsu/llm-finetune-study's lessons/09-rlhf-reward/run.py, trimmed: a reference LM loaded
# (and set to eval on purpose) to score responses; the optimizers train a linear reward head and
# a tensor of logits, both bound to names of other functions
REWARD_LESSON = """\
import argparse

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def load_reference_model(model_name):
    tokenizer = AutoTokenizer.from_pretrained(model_name)
    model = AutoModelForCausalLM.from_pretrained(model_name, low_cpu_mem_usage=True)
    model.eval()
    return tokenizer, model


def train_reward_head(features, labels, epochs, lr):
    model = torch.nn.Linear(features.shape[1], 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    for _ in range(epochs):
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model(features).squeeze(-1), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model


def run_ppo(ref_log_probs, rewards, steps, lr):
    policy_logits = torch.nn.Parameter(ref_log_probs.detach().clone())
    optimizer = torch.optim.AdamW([policy_logits], lr=lr)
    for _ in range(steps):
        loss = -(torch.log_softmax(policy_logits, dim=-1) * rewards).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return policy_logits.detach()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-name", default="sshleifer/tiny-gpt2")
    args = parser.parse_args()
    tokenizer, reference_model = load_reference_model(args.model_name)
    with torch.no_grad():
        ref_log_probs = torch.log_softmax(reference_model(**tokenizer("hi", return_tensors="pt")).logits, dim=-1)
    head = train_reward_head(torch.randn(8, 4), torch.rand(8), epochs=10, lr=1e-2)
    run_ppo(ref_log_probs[0], torch.randn_like(ref_log_probs[0]), steps=20, lr=0.1)


if __name__ == "__main__":
    main()
"""


def test_a_frozen_reference_model_of_the_same_name_as_the_trained_head_is_not_trained(lint):
    # `model` in load_reference_model is not the `model` train_reward_head optimizes, and the
    # logits run_ppo trains are a detached copy of the reference's outputs
    assert lint("TRN005", REWARD_LESSON) == []


def test_near_miss_the_returned_model_that_the_caller_trains_is_in_eval_mode(lint, where):
    trained = REWARD_LESSON.replace(
        "    head = train_reward_head(", "    optimizer = torch.optim.AdamW(reference_model.parameters(), lr=1e-5)\n"
        "    for batch in [tokenizer('hi', return_tensors='pt')]:\n"
        "        reference_model(**batch, labels=batch['input_ids']).loss.backward()\n"
        "        optimizer.step()\n"
        "    head = train_reward_head(")
    diagnostics = lint("TRN005", trained)
    assert [d.message.split(" returns")[0] for d in diagnostics] == ["`AutoModelForCausalLM.from_pretrained`"]


_CLEANRL_PPO = """\
import os
from dataclasses import dataclass

import torch
import torch.nn as nn
import tyro


@dataclass
class Args:
    total_timesteps: int = 1_000_000
    save_every: int = 100_000


class Agent(nn.Module):
    def __init__(self, envs):
        super().__init__()
        self.actor = nn.Sequential(nn.Linear(17, 64), nn.Tanh(), nn.Dropout(0.1), nn.Linear(64, 6))

    def get_action_and_value(self, obs):
        return self.actor(obs)


def evaluate(model_path, make_env, Model, agent_in_training, device="cpu"):
    envs = make_env()
    {built}
    agent.load_state_dict(torch.load(model_path, map_location=device))
    agent.eval()
    return [agent.get_action_and_value(torch.zeros(17)) for _ in range(3)]


if __name__ == "__main__":
    args = tyro.cli(Args)
    envs = make_env()
    agent = Agent(envs)
    optimizer = torch.optim.Adam(agent.parameters(), lr=3e-4)
    for global_step in range(0, args.total_timesteps, 2048):
        loss = agent.get_action_and_value(torch.zeros(17)).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if global_step % args.save_every == 0:
            path = os.path.join("runs", f"agent-{{global_step}}.pt")
            torch.save(agent.state_dict(), path)
            evaluate(path, make_env, Agent, agent)
"""


def test_a_helper_that_evaluates_a_model_it_builds_leaves_the_trained_one_alone(lint, where):
    """CleanRL's ``evaluate(model_path, make_env, ..., Model=Agent)`` (Walker2d-v4-PPO-Training):
    the helper builds its own ``agent`` from the saved checkpoint and switches that one to eval
    mode; the trained ``agent`` of the same name keeps training with dropout. A helper that wraps
    the model it is handed (``DDP(agent_in_training)``) switches the trained one."""
    for built in ("agent = Model(envs).to(device)", "agent = copy.deepcopy(agent_in_training)"):
        assert lint("TRN005", _CLEANRL_PPO.format(built=built)) == [], built
    found = lint("TRN005", _CLEANRL_PPO.format(built="agent = Wrapper(agent_in_training)"))
    assert where(found) == [(45, 12, 45, 50)]  # evaluate(path, make_env, Agent, agent)
