"""A config the project's own script reads into a plain mapping is the script's format, not
TrainingArguments (memlint.configs.key_history, memlint.facts.project_arguments.project_config_reads)."""

from __future__ import annotations

import re

from tests.project.test_options_set_from_a_file import TRAIN as OPTIONS_FROM_A_FILE

# a diffusion fine-tuning script in the style of x-flux's train_flux_deepspeed.py: the YAML is
# read by OmegaConf and its keys are taken one by one
TRAIN_OMEGACONF = '''\
import argparse
import math

import torch
from accelerate import Accelerator
from omegaconf import OmegaConf

from image_datasets.dataset import loader
from src.flux.util import load_flow_model


def parse_args():
    parser = argparse.ArgumentParser(description="Fine-tune the DiT")
    parser.add_argument("--config", type=str, required=True, help="path to the YAML config")
    return parser.parse_args().config


def main():
    args = OmegaConf.load(parse_args())
    accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps,
                              mixed_precision=args.mixed_precision, log_with=args.report_to)
    dit = load_flow_model(args.model_name, device=accelerator.device)
    optimizer = torch.optim.AdamW(dit.parameters(), lr=args.learning_rate,
                                  betas=(args.adam_beta1, args.adam_beta2),
                                  weight_decay=args.adam_weight_decay, eps=args.adam_epsilon)
    train_dataloader = loader(**args.data_config)
    steps_per_epoch = math.ceil(len(train_dataloader) / args.gradient_accumulation_steps)
    total = args.max_train_steps or steps_per_epoch
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, s / args.lr_warmup_steps))
    print(args.lr_scheduler, args.output_dir, args.logging_dir, args.checkpointing_steps, total)
    dit, optimizer, train_dataloader = accelerator.prepare(dit, optimizer, train_dataloader)
    for batch in train_dataloader:
        with accelerator.accumulate(dit):
            loss = dit(**batch).mean()
            accelerator.backward(loss)
            accelerator.clip_grad_norm_(dit.parameters(), args.max_grad_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()


if __name__ == "__main__":
    main()
'''

FINETUNE_YAML = """\
model_name: "flux-dev"
data_config:
  train_batch_size: 1
  img_size: 512
report_to: wandb
output_dir: saves/
max_train_steps: 100000
learning_rate: 1e-5
lr_scheduler: constant
lr_warmup_steps: 10
adam_beta1: 0.9
adam_beta2: 0.999
adam_weight_decay: 0.01
adam_epsilon: 1e-8
max_grad_norm: 1.0
logging_dir: logs
mixed_precision: "bf16"
checkpointing_steps: 2500
gradient_accumulation_steps: 2
"""

REQUIREMENTS = "accelerate==0.30.1\ntransformers==4.43.3\nomegaconf==2.3.0\n"


def codes(diagnostics):
    return sorted((d.code, d.range.start.line) for d in diagnostics)


def test_a_yaml_the_script_reads_with_omegaconf_is_the_scripts_own(lint):
    files = {"train_flux.py": TRAIN_OMEGACONF, "train_configs/finetune.yaml": FINETUNE_YAML,
             "requirements.txt": REQUIREMENTS}
    # before: max_train_steps and lr_scheduler were "unknown TrainingArguments keys", 1e-5 "a
    # string" and logging_dir "removed in Transformers 5.15"; the script reads them all itself
    assert codes(lint(files, "train_configs/finetune.yaml")) == []


def test_under_pyyaml_a_number_without_a_dot_is_still_a_string(lint):
    script = re.sub(r"args\.(\w+)", r'args["\1"]', TRAIN_OMEGACONF.replace(
        "from omegaconf import OmegaConf\n", "import yaml\n").replace(
        "args = OmegaConf.load(parse_args())", "with open(parse_args()) as f:\n        args = yaml.safe_load(f)"))
    files = {"train_flux.py": script, "train_configs/finetune.yaml": FINETUNE_YAML, "requirements.txt": REQUIREMENTS}
    # yaml.safe_load hands the script "1e-5" and "1e-8" as strings: the keys are the script's, the
    # values' types are still wrong (AdamW compares lr with 0.0)
    diagnostics = lint(files, "train_configs/finetune.yaml")
    assert codes(diagnostics) == [("CFG002", 8), ("CFG002", 14)]


def test_a_trainer_yaml_beside_a_small_omegaconf_config_keeps_its_misspelling(lint):
    # the project also reads a data config with OmegaConf, but that reading covers none of the
    # Trainer file's keys: the misspelt key is still unknown to HfArgumentParser
    data_script = ("from omegaconf import OmegaConf\n\n\ndef build(path):\n    cfg = OmegaConf.load(path)\n"
                   "    return cfg.dataset_name, cfg.lr_scheduler, cfg.num_proc\n")
    trainer_yaml = ("output_dir: out/sft\nper_device_train_batch_size: 4\ngradient_accumulation_steps: 8\n"
                    "learning_rate: 2.0e-5\nlr_scheduler: cosine\nbf16: true\n")
    files = {"data/prepare.py": data_script, "recipes/sft.yaml": trainer_yaml, "requirements.txt": REQUIREMENTS}
    diagnostics = lint(files, "recipes/sft.yaml")
    assert codes(diagnostics) == [("CFG001", 5)]
    assert "lr_scheduler_type" in diagnostics[0].message


# Latte's train.py: the loaded mapping is handed to main(args); the model's own keys (learn_sigma,
# attention_bias) are read by the models package it is handed on to, learning_rate by nothing
TRAIN_HANDED = '''\
import argparse

import torch
from omegaconf import OmegaConf

from models import get_models


def main(args):
    model = get_models(args)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0)
    for step in range(args.max_train_steps):
        loss = model(torch.randn(args.local_batch_size, args.num_frames, 4, args.image_size // 8, args.image_size // 8)).mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_max_norm)
        opt.step()
        opt.zero_grad()
        if step % args.log_every == 0:
            print(step, args.results_dir, args.gradient_accumulation_steps, args.dataset, args.use_compile)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", type=str, default="./configs/ffs/ffs_train.yaml")
    args = parser.parse_args()
    main(OmegaConf.load(args.config))
'''

LATTE_YAML = """\
dataset: "ffs"
results_dir: "./results"
model: Latte-XL/2
num_frames: 16
image_size: 256
learn_sigma: True
attention_bias: True
learning_rate: 1e-4
clip_max_norm: 0.1
local_batch_size: 5
max_train_steps: 1000000
log_every: 100
gradient_accumulation_steps: 1
use_compile: False
gradient_checkpointing: False
"""


def test_a_mapping_handed_to_the_scripts_main_is_the_scripts_own(lint):
    files = {"train.py": TRAIN_HANDED, "configs/ffs/ffs_train.yaml": LATTE_YAML}
    assert codes(lint(files, "configs/ffs/ffs_train.yaml")) == []


# open_lm's eval/eval_openlm_ckpt.py, trimmed: the YAML comes from a CLI option, is loaded by
# OmegaConf imported as `om`, and is handed to the function that reads it key by key and passes
# some of its values to Composer's Trainer
EVAL_OM_ALIAS = '''\
import argparse

import torch
from composer.trainer import Trainer
from composer.utils import dist, get_device, reproducibility
from llmfoundry.utils.builders import build_icl_evaluators
from omegaconf import OmegaConf as om

from open_lm.model import create_params
from open_lm.utils.llm_foundry_wrapper import SimpleComposerOpenLMCausalLM


@torch.no_grad()
def evaluate(model, tokenizer, cfg):
    cfg.dist_timeout = cfg.get("dist_timeout", 600.0)
    reproducibility.seed_all(cfg.seed)
    dist.initialize_dist(get_device(None), timeout=cfg.dist_timeout)
    evaluators, logger_keys = build_icl_evaluators(cfg.icl_tasks, tokenizer, cfg.max_seq_len,
                                                   cfg.device_eval_batch_size)
    fsdp_config = cfg.get("fsdp_config", None)
    fsdp_config = om.to_container(fsdp_config, resolve=True) if fsdp_config is not None else None
    trainer = Trainer(model=SimpleComposerOpenLMCausalLM(model, tokenizer), precision=cfg.precision,
                      fsdp_config=fsdp_config, load_path=cfg.get("load_path", None), load_weights_only=True)
    trainer.eval(eval_dataloader=evaluators)


def run(model, tokenizer, eval_cfg):
    evaluate(model, tokenizer, eval_cfg)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint")
    parser.add_argument("--eval-yaml")
    args = parser.parse_args()
    with open(args.eval_yaml) as f:
        eval_cfg = om.load(f)
    model = create_params(args)
    run(model, None, eval_cfg)


if __name__ == "__main__":
    main()
'''
# open_lm's eval/in_memory_hf_eval.yaml (abridged): an llm-foundry eval YAML's shape, with the
# first three keys left over from a template nothing reads
IN_MEMORY_EVAL_YAML = """\
epoch: 1.25T
dataset: bigdata
num_params: 1B
max_seq_len: 2048
seed: 1
precision: fp32

tokenizer:
  pretrained_model_name_or_path:
  kwargs:
    model_max_length: 2048

model:
  name: open_lm
  init_device: cpu
  pretrained: true

load_path: # Add your (optional) Composer checkpoint path here!

device_eval_batch_size: 8

fsdp_config:
  sharding_strategy: FULL_SHARD
  mixed_precision: FULL

icl_tasks:
-
  label: mmlu
  dataset_uri: local_data/mmlu.jsonl
  num_fewshot: [0]
  icl_task_type: multiple_choice
"""
OPEN_LM_FILES = {"eval/eval_openlm_ckpt.py": EVAL_OM_ALIAS, "eval/in_memory_hf_eval.yaml": IN_MEMORY_EVAL_YAML,
                 "requirements.txt": "torch\nmosaicml\ntransformers\n",
                 "requirements_test.txt": "pytest==7.0.1\nllm-foundry==0.9.0\n"}


def test_an_llm_foundry_shaped_yaml_the_projects_script_reads_is_the_scripts_own(lint):
    # before: three "unknown llm-foundry key" warnings (epoch, dataset, num_params), although
    # llm-foundry's train.py, whose "Unused parameters" check they describe, never reads the file
    assert kinds_of(OPEN_LM_FILES, "eval/in_memory_hf_eval.yaml") == "composer"
    assert codes(lint(OPEN_LM_FILES, "eval/in_memory_hf_eval.yaml")) == []


def test_the_reading_follows_an_aliased_loader_through_the_calls_it_is_handed_on(tmp_path):
    from memlint.facts.project_arguments import project_config_reads

    from .helpers import write_files

    write_files(tmp_path, {"eval/eval_openlm_ckpt.py": EVAL_OM_ALIAS})
    [(loader, read)] = project_config_reads(tmp_path)
    assert loader == "OmegaConf"
    assert read == {"dist_timeout", "seed", "icl_tasks", "max_seq_len", "device_eval_batch_size", "fsdp_config",
                    "precision", "load_path"}


# mosaicml/examples' benchmarks/bert/main.py, trimmed: the YAML merged with the command line's
# overrides (``om.merge``), cast for the type checker, then handed to ``main``
BERT_MAIN = """\
import os
import sys
from typing import Optional, cast

from composer import Trainer
from composer.utils import dist, reproducibility
from omegaconf import DictConfig
from omegaconf import OmegaConf as om

import src.hf_bert as hf_bert_module


def build_model(cfg: DictConfig):
    return hf_bert_module.create_hf_bert_mlm(pretrained_model_name=cfg.pretrained_model_name,
                                             tokenizer_name=cfg.get('tokenizer_name', None))


def main(cfg: DictConfig, return_trainer: bool = False) -> Optional[Trainer]:
    reproducibility.seed_all(cfg.seed)
    model = build_model(cfg.model)
    train_loader = build_dataloader(cfg.train_loader, cfg.tokenizer_name,
                                    cfg.global_train_batch_size // dist.get_world_size(),
                                    mlm_probability=cfg.mlm_probability, local=cfg.data_local,
                                    remote=cfg.get('data_remote'), max_seq_len=cfg.max_seq_len)
    trainer = Trainer(run_name=cfg.run_name, model=model, train_dataloader=train_loader,
                      optimizers=build_optimizer(cfg.optimizer, model), max_duration=cfg.max_duration,
                      precision=cfg.precision, device_train_microbatch_size=cfg.device_train_microbatch_size)
    trainer.fit()


if __name__ == '__main__':
    yaml_path, args_list = sys.argv[1], sys.argv[2:]
    with open(yaml_path) as f:
        yaml_cfg = om.load(f)
    cli_cfg = om.from_cli(args_list)
    cfg = om.merge(yaml_cfg, cli_cfg)
    cfg = cast(DictConfig, cfg)  # for type checking
    main(cfg)
"""

BERT_YAML = """\
data_local: ./my-copy-c4
data_remote: null
max_seq_len: 128
tokenizer_name: bert-base-uncased
mlm_probability: 0.15
run_name: hf-bert-base-uncased
model:
  name: hf_bert
  use_pretrained: false
  pretrained_model_name: ${tokenizer_name}
  tokenizer_name: ${tokenizer_name}
train_loader:
  name: text
  dataset:
    local: ${data_local}
    split: train
optimizer:
  name: decoupled_adamw
  lr: 5.0e-4
max_duration: 286720000sp
global_train_batch_size: 4096
device_train_microbatch_size: 128
precision: amp_bf16
"""


def test_a_yaml_merged_with_the_command_line_and_handed_on_is_the_scripts_own(lint):
    files = {"examples/benchmarks/bert/main.py": BERT_MAIN,
             "examples/benchmarks/bert/yamls/main/hf-bert-base-uncased.yaml": BERT_YAML}
    assert kinds_of(files, "examples/benchmarks/bert/yamls/main/hf-bert-base-uncased.yaml") == "composer"
    # before: CFG001 "unknown llm-foundry key" on data_local, tokenizer_name and mlm_probability
    assert codes(lint(files, "examples/benchmarks/bert/yamls/main/hf-bert-base-uncased.yaml")) == []

def test_near_miss_a_script_that_reads_few_of_the_yamls_keys_leaves_it_to_llm_foundry(lint):
    # the script takes two of the file's twelve keys: nothing shows the file is not llm-foundry's
    few = EVAL_OM_ALIAS.replace("    evaluators, logger_keys", "    return cfg.seed\n    evaluators, logger_keys")
    few = few.split("    dist.initialize_dist")[0] + "\n\ndef main():\n    with open('x.yaml') as f:\n" \
        "        evaluate(None, None, om.load(f))\n"
    diagnostics = lint({**OPEN_LM_FILES, "eval/eval_openlm_ckpt.py": few}, "eval/in_memory_hf_eval.yaml")
    assert codes(diagnostics) == [("CFG001", 1), ("CFG001", 2), ("CFG001", 3)]
    assert all("the llm-foundry you pin, `llm-foundry==0.9.0`" in d.message for d in diagnostics)


def test_near_miss_llm_foundrys_own_yamls_stay_llm_foundrys(lint):
    # in llm-foundry's own tree (setup.py names it through a constant), a script reading the YAML
    # is llm-foundry reading its own format
    setup = ("import os\n\nfrom setuptools import setup\n\n_PACKAGE_NAME = 'llm-foundry'\n"
             "version_locals = {}\nexec(open('llmfoundry/_version.py').read(), version_locals)\n\n"
             "setup(name=_PACKAGE_NAME, version=str(version_locals['__version__']))\n")
    files = {**OPEN_LM_FILES, "setup.py": setup, "llmfoundry/_version.py": "__version__ = '0.9.0'\n",
             "llmfoundry/__init__.py": "from llmfoundry._version import __version__\n"}
    assert [c for c, _ in codes(lint(files, "eval/in_memory_hf_eval.yaml"))] == ["CFG001"] * 3


def kinds_of(files, path):
    from memlint.documents import kinds
    from memlint.documents.structured import load

    return kinds.detect(path, "yaml", load(files[path], "yaml").value)


# xRAG's src/language_modeling/train.py: argparse options, every one None by default, filled from
# the YAML --config names by the project's own reader; the command line keeps what it sets
TRAIN_ARGPARSE_MERGED = OPTIONS_FROM_A_FILE


MERGED_YAML = """\
model_name_or_path: mistralai/Mistral-7B-Instruct-v0.2
max_seq_length: 336
max_train_steps: 20000
shuffle_train_set: true
learning_rate: 6.0e-3
per_device_train_batch_size: 12
warmup_ratio: 0.03
"""


def test_a_yaml_merged_into_the_scripts_argparse_options_is_the_scripts_own(lint):
    files = {"src/train.py": TRAIN_ARGPARSE_MERGED, "config/pretrain.yaml": MERGED_YAML}
    # before: max_seq_length, max_train_steps, shuffle_train_set were "unknown TrainingArguments
    # keys" and warmup_ratio "removed in Transformers 5.15", "HfArgumentParser refuses the file"
    assert codes(lint(files, "config/pretrain.yaml")) == []


def test_a_yaml_unpacked_into_a_namespace_is_the_scripts_own(lint):
    script = TRAIN_ARGPARSE_MERGED.replace(
        '''    for k, v in yaml_config.items():
        assert hasattr(args, k), f"{k} not in parsed arguments"
        if getattr(args, k) is None:
            setattr(args, k, v)
''', '''    yaml_config.update({k: v for k, v in vars(args).items() if v is not None})
    args = types.SimpleNamespace(**yaml_config)
''').replace("import argparse\n", "import argparse\nimport types\n")
    files = {"src/train.py": script, "config/pretrain.yaml": MERGED_YAML}
    assert codes(lint(files, "config/pretrain.yaml")) == []


def test_near_miss_a_yaml_the_script_only_opens_stays_a_trainer_config(lint):
    script = TRAIN_ARGPARSE_MERGED.replace('''    for k, v in yaml_config.items():
        assert hasattr(args, k), f"{k} not in parsed arguments"
        if getattr(args, k) is None:
            setattr(args, k, v)
''', '''    print(yaml_config)
''')
    # a key that is none of the parser's options (``lr_scheduler_type``): the file is not the
    # script's options written out (a file of only its options would be), nor read by it
    files = {"src/train.py": script, "config/pretrain.yaml": MERGED_YAML + "lr_scheduler_type: cosine\n"}
    assert ("CFG001", 2) in codes(lint(files, "config/pretrain.yaml"))  # max_seq_length, as before


def test_a_yaml_of_only_the_scripts_argparse_options_is_the_scripts_own(lint):
    """fsdp-llm-posttrain's ``configs/rm_qwen3_single_gpu.yaml``: ``base_model``, ``seq_len``,
    ``grad_accum_steps``... each an option of ``train_rm.py``'s parser (``--base-model``,
    ``--seq-len``), written as a recipe that no code here opens. It looked like an Axolotl config
    (``base_model``) and a TrainingArguments file (``bf16``, ``output_dir``): neither reads it."""
    script = TRAIN_ARGPARSE_MERGED.replace("""    for k, v in yaml_config.items():
        assert hasattr(args, k), f"{k} not in parsed arguments"
        if getattr(args, k) is None:
            setattr(args, k, v)
""", "").replace("yaml_config = get_yaml_file(args.config)", "")
    script = script.replace('parser.add_argument("--max_seq_length", type=int)',
                            'parser.add_argument("--seq-len", type=int, default=1024)\n'
                            '    parser.add_argument("--base-model", type=str)\n'
                            '    parser.add_argument("--grad-accum-steps", type=int, default=8)\n'
                            '    parser.add_argument("--bf16", action="store_true")\n'
                            '    parser.add_argument("--output-dir", dest="output_dir", default="runs/rm")')
    recipe = ("base_model: Qwen/Qwen3-0.6B\nseq_len: 1024\ngrad_accum_steps: 8\nlearning_rate: 2.0e-5\n"
              "bf16: true\noutput_dir: runs/rm_qwen3\n")
    files = {"src/train.py": script, "configs/rm.yaml": recipe}
    assert codes(lint(files, "configs/rm.yaml")) == []
    # nor does one that looks like a TrainingArguments file state a run of its own: no "memory
    # not checked: no model found" on it (``model`` is the script's option, no Trainer's key)
    sft = {"src/train.py": script.replace('parser.add_argument("--base-model", type=str)',
                                          'parser.add_argument("--model", type=str)'),
           "configs/sft.yaml": recipe.replace("base_model:", "model:")}
    assert codes(lint(sft, "configs/sft.yaml", select=("MEM", "CFG"), gpu="h100")) == []
    # one key of the file no option of the parser declares: it is judged as the tool's again
    assert codes(lint({**files, "configs/rm.yaml": recipe + "sequence_len: 1024\n"}, "configs/rm.yaml")) != []


# a QLoRA script in the style of qwen-lora-finetuning's src/train/train.py: the YAML is read by
# the script's own `load_config` helper, `main` takes the data and Trainer keys and hands the
# mapping to `build_model_and_tokenizer`, which takes the model and LoRA keys
TRAIN_THROUGH_A_HELPER = '''\
from __future__ import annotations

import argparse
from pathlib import Path

import torch
import yaml
from datasets import load_dataset
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig
from trl import SFTConfig, SFTTrainer


def load_config(path: Path) -> dict:
    with path.open() as f:
        return yaml.safe_load(f)


def build_model_and_tokenizer(cfg: dict):
    tokenizer = AutoTokenizer.from_pretrained(cfg["model_name_or_path"])
    tokenizer.model_max_length = cfg["cutoff_len"]
    kwargs = {}
    if cfg.get("load_in_4bit", True):
        kwargs["quantization_config"] = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.bfloat16)
    model = AutoModelForCausalLM.from_pretrained(cfg["model_name_or_path"], **kwargs)
    lora = LoraConfig(r=cfg["lora_rank"], lora_alpha=cfg["lora_alpha"], lora_dropout=cfg["lora_dropout"],
                      target_modules=cfg["lora_target_modules"], task_type="CAUSAL_LM")
    return get_peft_model(model, lora), tokenizer


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", type=Path, default=Path("configs/qwen_lora_sft.yaml"))
    args = parser.parse_args()
    cfg = load_config(args.config)
    dataset = load_dataset("json", data_files={"train": cfg["train_file"], "validation": cfg["valid_file"]})
    model, tokenizer = build_model_and_tokenizer(cfg)
    sft_config = SFTConfig(
        output_dir=cfg["output_dir"],
        per_device_train_batch_size=cfg["per_device_train_batch_size"],
        gradient_accumulation_steps=cfg["gradient_accumulation_steps"],
        learning_rate=cfg["learning_rate"],
        num_train_epochs=cfg["num_train_epochs"],
        lr_scheduler_type=cfg["lr_scheduler_type"],
        bf16=cfg.get("bf16", False),
        gradient_checkpointing=True,
    )
    trainer = SFTTrainer(model=model, processing_class=tokenizer, args=sft_config,
                         train_dataset=dataset["train"], eval_dataset=dataset["validation"])
    trainer.train()


if __name__ == "__main__":
    main()
'''

HELPER_YAML = """\
model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct
train_file: data/processed/train.jsonl
valid_file: data/processed/valid.jsonl
cutoff_len: 1024
output_dir: outputs/qwen-lora
per_device_train_batch_size: 1
gradient_accumulation_steps: 8
learning_rate: 2.0e-4
num_train_epochs: 3
lr_scheduler_type: cosine
bf16: true
lora_rank: 8
lora_alpha: 16
lora_dropout: 0.05
lora_target_modules:
  - q_proj
  - v_proj
load_in_4bit: true
"""


def test_a_yaml_read_through_the_scripts_own_loader_and_handed_on_is_the_scripts_own(lint):
    files = {"src/train/train.py": TRAIN_THROUGH_A_HELPER, "configs/qwen_lora_sft.yaml": HELPER_YAML}
    # before: read as a LLaMA-Factory file (model_name_or_path, cutoff_len), with train_file,
    # valid_file, lora_target_modules and load_in_4bit "unknown LLaMA-Factory keys"
    assert codes(lint(files, "configs/qwen_lora_sft.yaml")) == []


def test_a_config_reader_imported_from_the_projects_utils_reads_the_file_too(lint):
    script = TRAIN_THROUGH_A_HELPER.replace('''def load_config(path: Path) -> dict:
    with path.open() as f:
        return yaml.safe_load(f)


''', "").replace("import yaml\n", "").replace(
        "from trl import SFTConfig, SFTTrainer\n", "from trl import SFTConfig, SFTTrainer\n\nfrom utils.io import load_config\n")
    files = {"src/train/train.py": script, "configs/qwen_lora_sft.yaml": HELPER_YAML}
    assert codes(lint(files, "configs/qwen_lora_sft.yaml")) == []


def test_near_miss_a_llamafactory_yaml_whose_typo_no_script_reads_keeps_it(lint):
    # the script reads its own file; LLaMA-Factory's file beside it, with a misspelt key no code
    # reads, is still LLaMA-Factory's to refuse
    llamafactory = ("model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct\nstage: sft\ndo_train: true\n"
                    "finetuning_type: lora\nlora_target: all\ndataset: alpaca_en_demo\ntemplate: qwen\n"
                    "cutoff_len: 1024\noutput_dir: saves/qwen\nper_device_train_batch_size: 1\n"
                    "gradient_accumulation_steps: 8\nlearning_rate: 1.0e-4\nnum_train_epochs: 3.0\n"
                    "lora_rnak: 8\n")
    files = {"src/train/train.py": TRAIN_THROUGH_A_HELPER, "configs/qwen_lora_sft.yaml": HELPER_YAML,
             "configs/llamafactory_sft.yaml": llamafactory}
    assert ("CFG001", 14) in codes(lint(files, "configs/llamafactory_sft.yaml"))


# open-r1-code-verifier's src/code_verifier/training/sft.py, trimmed: a frozen dataclass whose
# fields are exactly its YAML's keys, filled field by field by a loader of its own
SFT_TRAINING_CONFIG = '''\
from dataclasses import dataclass
from pathlib import Path

from code_verifier.config import load_yaml_mapping, require_keys


@dataclass(frozen=True)
class SFTTrainingConfig:
    """Resolved exact-schema LoRA SFT settings."""

    run_name: str
    model_id: str
    dataset_path: Path
    max_seq_length: int
    per_device_train_batch_size: int
    gradient_accumulation_steps: int
    learning_rate: float
    warmup_ratio: float
    bf16: bool
    gradient_checkpointing: bool
    lora_r: int
    min_cuda_memory_gb: float


def sft_training_config_from_mapping(mapping: dict) -> SFTTrainingConfig:
    require_keys(mapping, SFTTrainingConfig)
    return SFTTrainingConfig(
        run_name=str(mapping["run_name"]),
        model_id=str(mapping["model_id"]),
        dataset_path=Path(mapping["dataset_path"]),
        max_seq_length=int(mapping["max_seq_length"]),
        per_device_train_batch_size=int(mapping["per_device_train_batch_size"]),
        gradient_accumulation_steps=int(mapping["gradient_accumulation_steps"]),
        learning_rate=float(mapping["learning_rate"]),
        warmup_ratio=float(mapping["warmup_ratio"]),
        bf16=bool(mapping["bf16"]),
        gradient_checkpointing=bool(mapping["gradient_checkpointing"]),
        lora_r=int(mapping["lora_r"]),
        min_cuda_memory_gb=float(mapping["min_cuda_memory_gb"]),
    )


def load_sft_training_config(path: Path) -> SFTTrainingConfig:
    return sft_training_config_from_mapping(load_yaml_mapping(path))
'''

SFT_MAIN_YAML = """\
run_name: main
model_id: Qwen/Qwen2.5-Coder-1.5B-Instruct
dataset_path: data/processed/training/sft.jsonl
max_seq_length: 1536
per_device_train_batch_size: 1
gradient_accumulation_steps: 16
learning_rate: 0.0002
warmup_ratio: 0.05
bf16: true
gradient_checkpointing: true
lora_r: 16
min_cuda_memory_gb: 20.0
"""


def test_a_yaml_whose_every_key_is_a_field_of_a_project_class_is_that_classs(lint):
    files = {"src/code_verifier/training/sft.py": SFT_TRAINING_CONFIG, "configs/sft/main.yaml": SFT_MAIN_YAML}
    # before: `max_seq_length` an unknown TrainingArguments key and `warmup_ratio` "removed in
    # Transformers 5.15"; the project's SFTTrainingConfig declares both, and HfArgumentParser never reads it
    assert [d.code for d in lint(files, "configs/sft/main.yaml") if d.code.startswith("CFG")] == []


def test_near_miss_a_key_the_class_lacks_leaves_the_file_to_the_trainer(lint):
    files = {"src/code_verifier/training/sft.py": SFT_TRAINING_CONFIG,
             "configs/sft/main.yaml": SFT_MAIN_YAML + "num_train_epochs: 2.0\n"}
    found = [(d.code, d.range.start.line) for d in lint(files, "configs/sft/main.yaml") if d.code == "CFG001"]
    assert found == [("CFG001", 4)]  # max_seq_length


# pseshadri9/whisper-finetune's config/whisper-finetune/trainer/training_args/whisper.yaml, trimmed:
# a Hydra node that main.py builds with hydra.utils.instantiate(config.trainer.training_args)
HYDRA_TRAINING_ARGS = """\
_target_: transformers.Seq2SeqTrainingArguments
output_dir: ${hydra:runtime.output_dir}

per_device_train_batch_size: 72
gradient_accumulation_steps: 1
learning_rate: 1e-5
warmup_steps: 500
max_steps: 5000
fp16: True
predict_with_generate: True
"""


def test_a_hydra_node_is_read_through_omegaconf(lint):
    path = "config/whisper-finetune/trainer/training_args/whisper.yaml"
    # OmegaConf's loader reads 1e-5 as a float: no "YAML 1.1 reads `1e-5` as a string" here
    assert [d.code for d in lint({path: HYDRA_TRAINING_ARGS}, path) if d.code == "CFG002"] == []
    plain = HYDRA_TRAINING_ARGS.replace("_target_: transformers.Seq2SeqTrainingArguments\n", "")
    found = [(d.code, d.range.start.line) for d in lint({path: plain}, path) if d.code == "CFG002"]
    assert found == [("CFG002", 5)]  # learning_rate, under PyYAML


# overwindows/LLM-Pretrain-FineTune's sft/sft_train.py, trimmed: the YAML is its SFTConfig's,
# with `base_model` beside Trainer names, which made it look like an Axolotl config
MAIPROFILE_SFT = '''\
from dataclasses import dataclass

import yaml


@dataclass
class SFTConfig:
    step_key: str
    base_model: str
    train_jsonl: str
    val_jsonl: str
    output_dir: str
    max_seq_len: int = 5120
    per_device_train_batch_size: int = 4
    gradient_accumulation_steps: int = 1
    num_train_epochs: float = 3.0
    learning_rate: float = 5e-6
    warmup_ratio: float = 0.03
    lr_scheduler_type: str = "cosine"
    gradient_checkpointing: bool = True
    weight_decay: float = 0.0
    seed: int = 42
    logging_steps: int = 5
    wandb_project: str | None = None
    wandb_run_name: str | None = None

    @classmethod
    def from_yaml(cls, path: str) -> "SFTConfig":
        with open(path) as f:
            data = yaml.safe_load(f)
        known = set(cls.__dataclass_fields__.keys())
        return cls(**{k: v for k, v in data.items() if k in known})
'''

MAIPROFILE_YAML = """\
step_key: layer1_delta
base_model: /home/aiscuser/Models/Qwen3-4B-Instruct-2507
train_jsonl: /home/aiscuser/MAIProfileSFT/data/splits/layer1_delta/train.jsonl
val_jsonl: /home/aiscuser/MAIProfileSFT/data/splits/layer1_delta/val.jsonl
output_dir: /home/aiscuser/MAIProfileSFT_runs/layer1_delta-qwen3-4b-instruct-v1
max_seq_len: 8192
per_device_train_batch_size: 2
gradient_accumulation_steps: 2
num_train_epochs: 3
learning_rate: 5.0e-6
warmup_ratio: 0.03
lr_scheduler_type: cosine
gradient_checkpointing: true
weight_decay: 0.0
seed: 42
logging_steps: 5
wandb_project: maiprofile-sft
wandb_run_name: layer1_delta-qwen3-4b-instruct-v1
"""


def test_an_axolotl_looking_yaml_that_is_a_project_classs_shape_is_the_classs(lint):
    path = "sft/configs/sft/layer1_delta.yaml"
    # without the class, Axolotl's schema judges it: `step_key`, `train_jsonl`, ... are unknown
    alone = [d.code for d in lint({path: MAIPROFILE_YAML}, path) if d.code == "CFG001"]
    assert len(alone) >= 4
    files = {"sft/sft_train.py": MAIPROFILE_SFT, path: MAIPROFILE_YAML}
    assert [d.code for d in lint(files, path) if d.code.startswith("CFG")] == []


# PipelineRL's conf/finetune/base.yaml (in qed-nano), trimmed: a node of the Hydra tree that
# launch.py composes (@hydra.main(config_path="../conf/")), reading its parent's values
PIPELINERL_FINETUNE = """\
model_class: causal-language-modeling
config_name: ${..model_path}
model_revision: ${..model_revision}
optim: adamw_torch
train_batch_size: 4
weight_decay: 0.01
learning_rate: 1e-6
lr_scheduler_type: cosine
gradient_accumulation_passes: 64
gradient_checkpointing: true
max_train_steps: 1000
"""


def test_a_hydra_node_that_interpolates_its_parent_is_the_projects(lint):
    path = "conf/finetune/base.yaml"
    # before: `gradient_accumulation_passes` and `max_train_steps` unknown TRL keys, 1e-6 a string
    assert [d.code for d in lint({path: PIPELINERL_FINETUNE}, path) if d.code.startswith("CFG")] == []
    plain = PIPELINERL_FINETUNE.replace("${..model_path}", "Qwen/Qwen3-4B").replace("${..model_revision}", "main")
    assert "CFG001" in [d.code for d in lint({path: plain}, path)]


# NguyenAnh2003/llama-finetuning (abridged): `load_params` in helpers/utils.py reads the YAML, the
# script takes `base_model` itself and hands the mapping to setup functions of another module
# (`from setup.setup import *`), which take the Trainer's, the quantization's and LoRA's keys. The
# file looked like Axolotl's: 14 unknown keys, each an error, in a project that never runs Axolotl.
LOAD_PARAMS = '''\
import yaml


def load_params(path: str):
    params = yaml.safe_load(open(path, "r", encoding="utf8"))
    return params
'''

SETUP_FUNCTIONS = '''\
import torch
from peft import LoraConfig
from transformers import BitsAndBytesConfig, TrainingArguments


def setup_4_bit_quant_config(params):
    return BitsAndBytesConfig(load_in_4bit=params["load_in_4bit"], bnb_4bit_quant_type=params["bnb_4bit_quant_type"],
                              bnb_4bit_compute_dtype=torch.float16)


def setup_peft_config(params):
    return LoraConfig(lora_alpha=params["alpha"], lora_dropout=params["lora_dropout"], r=params["peft_r"],
                      bias=params["peft_bias"], task_type=params["task_type"])


def setup_training_params(params):
    return TrainingArguments(output_dir=params["output_dir"], num_train_epochs=params["epochs"],
                             per_device_train_batch_size=params["per_device_train_batch_size"],
                             gradient_accumulation_steps=params["gradient_accumulation_steps"],
                             optim=params["optim"], learning_rate=float(params["learning_rate"]),
                             max_grad_norm=params["max_grad_norm"], warmup_ratio=params["warmup_ratio"],
                             lr_scheduler_type=params["lr_scheduler_type"], fp16=params["fp16"], bf16=params["bf16"],
                             save_steps=params["save_steps"], logging_steps=params["logging_steps"],
                             max_steps=params["max_steps"], group_by_length=params["group_by_length"])
'''

FINETUNING = '''\
from setup.setup import *
from helpers.utils import load_params


def index():
    params = load_params("../config/config.yml")
    quant_config = setup_4_bit_quant_config(params)
    model = load_model(params["base_model"], quant_config)
    peft_config = setup_peft_config(params)
    return model, peft_config, setup_training_params(params=params)
'''

PARAMS_YAML = """\
output_dir: '../saved_models'
epochs: 100
per_device_train_batch_size: 1
gradient_accumulation_steps: 4
optim: "adamw_bnb_8bit"
learning_rate: 2.0e-4
max_grad_norm: 0.3
warmup_ratio: 0.03
lr_scheduler_type: "constant"
fp16: True
bf16: False
save_steps: 10
logging_steps: 10
max_steps: 100
group_by_length: True
base_model: "NousResearch/Llama-2-7b-chat-hf"
load_in_4bit: True
bnb_4bit_quant_type: 'nf4'
alpha: 16
lora_dropout: 0.1
peft_r: 64
peft_bias: 'none'
task_type: 'CAUSAL_LM'
"""


def test_a_mapping_handed_to_another_modules_functions_is_read_there(lint):
    files = {"helpers/utils.py": LOAD_PARAMS, "setup/setup.py": SETUP_FUNCTIONS,
             "finetuning_qlora/finetuning.py": FINETUNING, "config/config.yml": PARAMS_YAML}
    assert [d.code for d in lint(files, "config/config.yml") if d.code.startswith("CFG")] == []
    # without the setup functions only `base_model` is read, and the file stays Axolotl's
    files["setup/setup.py"] = "# moved to the notebooks\n"
    assert "CFG001" in [d.code for d in lint(files, "config/config.yml")]


def test_a_mapping_handed_to_a_relatively_imported_function(lint):
    # `from .setup import setup_training_params` beside the script: one module, one function
    script = FINETUNING.replace("from setup.setup import *\n", "from .setup import setup_training_params, "
                                "setup_4_bit_quant_config, setup_peft_config\n")
    files = {"helpers/utils.py": LOAD_PARAMS, "finetuning_qlora/setup.py": SETUP_FUNCTIONS,
             "finetuning_qlora/finetuning.py": script, "config/config.yml": PARAMS_YAML}
    assert [d.code for d in lint(files, "config/config.yml") if d.code.startswith("CFG")] == []
