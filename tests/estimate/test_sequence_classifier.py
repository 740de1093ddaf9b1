"""Reward and value models: a checkpoint saved as ``*ForSequenceClassification`` has a ``score``
layer (hidden -> labels) where a language model has its vocabulary head, and a training step
scores the last token instead of computing logits over the vocabulary."""

from __future__ import annotations

import json

import pytest

from memlint.catalog.models import resolve
from memlint.cli.errors import EXIT_OK
from memlint.cli.main import main
from memlint.estimate import TrainingSetup, estimate_training, from_config
from memlint.estimate.config_json import classifier_labels

# Qwen2.5-0.5B's sizes, as a fine-tuner's RewardTrainer saves them (trl: num_labels=1)
QWEN_RM = {
    "architectures": ["Qwen2ForSequenceClassification"],
    "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
    "num_key_value_heads": 2, "vocab_size": 151936, "max_position_embeddings": 32768, "rms_norm_eps": 1e-06,
    "model_type": "qwen2", "tie_word_embeddings": True, "rope_theta": 1000000.0,
    "id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}, "pad_token_id": 151643,
}


def _causal(config: dict) -> dict:
    lm = {k: v for k, v in config.items() if k not in ("id2label", "label2id")}
    return {**lm, "architectures": ["Qwen2ForCausalLM"]}


def test_the_score_layer_replaces_the_vocabulary_head():
    rm, lm = from_config(QWEN_RM), from_config(_causal(QWEN_RM))
    assert rm.lm_head.name == "score" and (rm.lm_head.in_features, rm.lm_head.out_features) == (896, 1)
    assert not rm.lm_head.bias and not rm.tie_word_embeddings and not rm.is_causal_lm
    # Qwen2.5-0.5B ties its head to the embedding: the reward model keeps the embedding and adds 896
    assert rm.n_params == lm.n_params + 896


@pytest.mark.parametrize(("extra", "labels"), [
    ({"id2label": {"0": "negative", "1": "neutral", "2": "positive"}}, 3),
    ({"id2label": None, "num_labels": 5}, 5),
    ({"id2label": None}, 2),  # PretrainedConfig's default
])
def test_the_label_count_is_read_as_transformers_reads_it(extra, labels):
    config = {k: v for k, v in {**QWEN_RM, **extra}.items() if v is not None}
    assert classifier_labels(config) == labels
    assert from_config(config).lm_head.out_features == labels


def test_a_causal_lm_and_an_encoder_classifier_are_unchanged():
    assert classifier_labels(_causal(QWEN_RM)) == 0
    bert = resolve("google-bert/bert-base-uncased").arch
    with_head = from_config({**bert.config, "architectures": ["BertForSequenceClassification"]})
    assert with_head.n_params == bert.n_params and with_head.classifier_labels == 0


def test_a_reward_model_step_has_no_vocabulary_logits():
    setup = TrainingSetup(micro_batch=8, seq_len=2048)
    rm = estimate_training(resolve("weqweasdas/RM-Mistral-7B").arch, setup)
    lm = estimate_training(resolve("mistralai/Mistral-7B-v0.1").arch, setup)
    assert not [c for c in rm.components if "logits" in c.key]
    assert [c for c in lm.components if "logits" in c.key]
    assert rm.peak_bytes < lm.peak_bytes


@pytest.mark.parametrize(("model", "params"), [
    ("weqweasdas/RM-Mistral-7B", 7_110_668_288),
    ("cleanrl/EleutherAI_pythia-1b-deduped__reward__tldr", 908_761_088),
    ("trl-lib/pythia-1b-deduped-tldr-rm", 908_761_088),  # TRL's exact duplicate
])
def test_catalogued_reward_models_are_counted_with_their_score_layer(model, params):
    assert resolve(model).arch.n_params == params


def test_a_ppo_script_whose_value_model_is_a_reward_checkpoint_is_estimated(tmp_path, capsys):
    script = tmp_path / "ppo.py"
    script.write_text(
        "import argparse\n"
        "from transformers import AutoModelForSequenceClassification as SeqCls, AutoModelForCausalLM\n"
        "from trl.experimental.ppo import PPOConfig, PPOTrainer\n\n"
        "parser = argparse.ArgumentParser()\n"
        "parser.add_argument('--reward_model_path', default='cleanrl/EleutherAI_pythia-1b-deduped__reward__tldr')\n"
        # the trained policy (the SFT checkpoint people start PPO from; here its catalogued base)
        "parser.add_argument('--sft_model_path', default='EleutherAI/pythia-1b-deduped')\n"
        "args = parser.parse_args()\n\n"
        "value_model = SeqCls.from_pretrained(args.reward_model_path, num_labels=1)\n"
        "reward_model = SeqCls.from_pretrained(args.reward_model_path, num_labels=1)\n"
        "policy = AutoModelForCausalLM.from_pretrained(args.sft_model_path)\n"
        "config = PPOConfig(output_dir='out', per_device_train_batch_size=16, bf16=True)\n"
        "PPOTrainer(args=config, model=policy, value_model=value_model, reward_model=reward_model).train()\n"
    )
    assert main(["check", str(script), "--gpu", "h100", "--output-format", "json", "--no-cache",
                 "--exit-zero"]) == EXIT_OK
    found = json.loads(capsys.readouterr().out)
    assert not [d for d in found if d["code"] == "MEM003" and "unknown model" in d["message"]], found


# TRL's reward_modeling.py, as people adapt it: the base model is a causal LM, loaded as a classifier
REWARD_SCRIPT = '''\
import argparse

from transformers import AutoModelForSequenceClassification as SeqCls, AutoTokenizer
from trl import RewardConfig, RewardTrainer

parser = argparse.ArgumentParser()
parser.add_argument("--model_name_or_path", default="Qwen/Qwen2.5-0.5B-Instruct")
parser.add_argument("--labels", type=int, default=1)
args = parser.parse_args()

tokenizer = AutoTokenizer.from_pretrained(args.model_name_or_path)
model = SeqCls.from_pretrained(args.model_name_or_path, {labels})
config = RewardConfig(output_dir="rm", per_device_train_batch_size=8, max_length=2048, bf16=True)
RewardTrainer(model=model, args=config, processing_class=tokenizer).train()
'''


def _reward_run(tmp_path, labels: str):
    from memlint.lint.engine import run_context
    from memlint.project.project import Project
    from memlint.project.settings import Settings

    (tmp_path / "reward.py").write_text(REWARD_SCRIPT.format(labels=labels))
    found = Settings(root=tmp_path).with_overrides(cache=False, offline=True)
    (run,) = Project(found).runs_for(tmp_path / "reward.py", run_context(found))
    assert run.arch is not None, run.problem
    return run


@pytest.mark.parametrize(("labels", "count"), [("num_labels=args.labels", 1), ("num_labels=3", 3), ("", 2)])
def test_a_causal_lm_loaded_as_a_sequence_classifier_gets_a_score_layer(tmp_path, labels, count):
    run = _reward_run(tmp_path, labels)
    lm = resolve("Qwen/Qwen2.5-0.5B-Instruct").arch
    assert run.arch.classifier_labels == count and run.arch.lm_head.out_features == count
    assert run.arch.n_params == lm.n_params + 896 * count  # the tied head stays the embedding
    assert any("sequence classifier" in note for note in run.assumptions)
    assert not [c for c in estimate_training(run.arch, run.setup).components if "logits" in c.key]


def test_a_classifier_loaded_after_the_trained_model_does_not_change_its_head(tmp_path):
    """A script that fine-tunes a causal LM and loads a classifier to score its samples (not named
    like a frozen model): the run's model is the first loader's, and keeps its vocabulary head."""
    (tmp_path / "sft.py").write_text(
        "from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, Trainer, TrainingArguments\n\n"
        "model = AutoModelForCausalLM.from_pretrained('Qwen/Qwen2.5-0.5B-Instruct')\n"
        "scorer = AutoModelForSequenceClassification.from_pretrained('weqweasdas/RM-Mistral-7B')\n"
        "args = TrainingArguments(output_dir='out', per_device_train_batch_size=4, bf16=True)\n"
        "Trainer(model=model, args=args).train()\n")
    from memlint.lint.engine import run_context
    from memlint.project.project import Project
    from memlint.project.settings import Settings

    found = Settings(root=tmp_path).with_overrides(cache=False, offline=True)
    (run,) = Project(found).runs_for(tmp_path / "sft.py", run_context(found))
    assert run.arch.is_causal_lm and run.arch.classifier_labels == 0
    assert run.arch.n_params == resolve("Qwen/Qwen2.5-0.5B-Instruct").arch.n_params


AXOLOTL_RM = '''\
base_model: Qwen/Qwen2.5-0.5B
# optionally might have model_type or tokenizer_type
model_type: AutoModelForSequenceClassification
num_labels: 1
tokenizer_type: AutoTokenizer

reward_model: true
chat_template: qwen_25
datasets:
  - path: argilla/distilabel-intel-orca-dpo-pairs
    type: bradley_terry.chat_template

sequence_len: 2048
micro_batch_size: 4
gradient_accumulation_steps: 4
bf16: true
gradient_checkpointing: true
output_dir: ./outputs/out
'''


@pytest.mark.parametrize(("model_type", "labels"), [
    ("AutoModelForSequenceClassification", 1),
    ("AutoModelForCausalLM", 0),  # the near miss: an SFT config of the same model
])
def test_an_axolotl_reward_model_config_is_estimated_as_a_classifier(tmp_path, model_type, labels):
    from memlint.lint.engine import run_context
    from memlint.project.project import Project
    from memlint.project.settings import Settings

    (tmp_path / "reward-model.yaml").write_text(AXOLOTL_RM.replace("AutoModelForSequenceClassification", model_type))
    found = Settings(root=tmp_path).with_overrides(cache=False, offline=True)
    (run,) = Project(found).runs_for(tmp_path / "reward-model.yaml", run_context(found))
    assert run.arch.classifier_labels == labels
    lm = resolve("Qwen/Qwen2.5-0.5B").arch
    assert run.arch.n_params == lm.n_params + 896 * labels
