"""A config run by a launcher that takes it from its caller (open-instruct's
``scripts/finetune_with_accelerate_config.sh N <config>``: ``accelerate launch ... --deepspeed_config_file
stage3.conf open_instruct/finetune.py "$2"``), the README call that names a config of the folder,
a cluster wrapper's ``-- accelerate launch ...``, and an option passed with a value only the
caller knows. The project is open-instruct's layout, trimmed."""

from __future__ import annotations

from pathlib import Path

from memlint.documents.kinds import DocumentKind
from memlint.documents.parsed import parse_document
from memlint.documents.reading import document_from_text
from memlint.lint.engine import Linter, run_context
from memlint.project.project import Project
from memlint.project.settings import Settings

from tests.facts.facts_testing import dedent, write

UTILS = dedent('''
    from transformers import HfArgumentParser


    class ArgumentParserPlus(HfArgumentParser):
        def parse_args_into_dataclasses_with_yaml(self):
            ...
''')

FINETUNE = dedent('''
    import math
    from dataclasses import dataclass, field

    import torch
    from accelerate import Accelerator
    from torch.utils.data import DataLoader
    from transformers import AutoModelForCausalLM

    from open_instruct.utils import ArgumentParserPlus


    @dataclass
    class FlatArguments:
        model_name_or_path: str | None = field(default=None, metadata={"help": "The model checkpoint."})
        max_seq_length: int | None = field(default=None)
        per_device_train_batch_size: int = field(default=8, metadata={"help": "Batch size per GPU."})
        gradient_accumulation_steps: int = field(default=1)
        gradient_checkpointing: bool = field(default=False)
        learning_rate: float = field(default=2e-5)


    def main(args: FlatArguments):
        accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps)
        model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, torch_dtype=torch.bfloat16)
        if args.gradient_checkpointing:
            model.gradient_checkpointing_enable()
        loader = DataLoader(load_dataset(args), batch_size=args.per_device_train_batch_size)
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, fused=True)
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        model.train()
        for batch in loader:
            with accelerator.accumulate(model):
                loss = model(**batch).loss
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()


    if __name__ == "__main__":
        parser = ArgumentParserPlus((FlatArguments,))
        args = parser.parse()
        main(args)
''')

STAGE3 = dedent('''
    {
        "bf16": {
            "enabled": "auto"
        },
        "zero_optimization": {
            "stage": 3,
            "overlap_comm": true,
            "contiguous_gradients": true,
            "stage3_gather_16bit_weights_on_model_save": true
        },
        "gradient_accumulation_steps": "auto",
        "train_batch_size": "auto",
        "train_micro_batch_size_per_gpu": "auto"
    }
''')

LAUNCHER = dedent('''
    #!/bin/bash

    # example usage
    # sh scripts/finetune_with_accelerate_config.sh 1 configs/train_configs/sft/default.yaml

    if [ "$#" -ne 2 ]; then
        echo "Usage: $0 <num_gpus> <config_file>"
        exit 1
    fi

    NUM_GPUS="$1"
    CONFIG_FILE="$2"

    accelerate launch \\
        --mixed_precision bf16 \\
        --num_machines 1 \\
        --num_processes $NUM_GPUS \\
        --use_deepspeed \\
        --deepspeed_config_file configs/ds_configs/stage3_no_offloading_accelerate.conf \\
        open_instruct/finetune.py \\
        "$2"
''')

README = dedent('''
    # Scripts

    `finetune_with_accelerate_config.sh`: runs `open_instruct/finetune.py` with the configs in
    `configs/train_configs/sft/`. For example:

    ```bash
    sh scripts/finetune_with_accelerate_config.sh 8 configs/train_configs/sft/olmo_17_sft.yaml
    ```
''')


def _config(model: str) -> str:
    # configs/train_configs/sft/tulu3_8b_preview_mix_v3.1.yaml, trimmed: an 8B full fine-tune
    return dedent(f'''
        model_name_or_path: {model}
        model_revision: main
        use_flash_attn: true
        max_seq_length: 4096
        per_device_train_batch_size: 1 # note, this is set up for 8 GPUs
        gradient_accumulation_steps: 16
        learning_rate: 5.0e-06
        num_train_epochs: 2
        output_dir: /output/
        with_tracking: true
        report_to:
          - wandb
        checkpointing_steps: epoch
    ''')


FILES = {
    "open_instruct/__init__.py": "",
    "open_instruct/utils.py": UTILS,
    "open_instruct/finetune.py": FINETUNE,
    "configs/ds_configs/stage3_no_offloading_accelerate.conf": STAGE3,
    "scripts/finetune_with_accelerate_config.sh": LAUNCHER,
    "scripts/README.md": README,
    "configs/train_configs/sft/olmo_17_sft.yaml": _config("allenai/OLMo-1B-hf"),
    "configs/train_configs/sft/tulu3_8b_preview_mix_v3.1.yaml": _config("meta-llama/Llama-3.1-8B"),
}


def _project(root: Path, files: dict[str, str]) -> Settings:
    write(root, files)
    (root / ".git").mkdir(exist_ok=True)
    return Settings(root=root).with_overrides(gpu="h100", gpus=8, cache=False)


def _runs(settings: Settings, name: str):
    return Project(settings).runs_for(settings.root / name, run_context(settings))


def _memory(settings: Settings, name: str):
    return [d for d in Linter(settings).lint_path(settings.root / name) if d.code in ("MEM001", "MEM002")]


def test_a_config_of_the_documented_folder_runs_through_its_launcher(tmp_path):
    settings = _project(tmp_path, FILES)
    [run] = _runs(settings, "configs/train_configs/sft/tulu3_8b_preview_mix_v3.1.yaml")
    assert run.plan.value("zero_stage") == 3  # from the .conf the launcher names
    assert run.plan.value("micro_batch") == 1  # the config's field beats the script's default of 8
    assert run.plan.value("model") == "meta-llama/Llama-3.1-8B"
    assert any("scripts/README.md:7" in note and "olmo_17_sft.yaml" in note for note in run.assumptions)
    # (the config's max_seq_length is a truncation limit too: `seq_len_limit`)
    assert [a.fact for a in run.assumed if a.fact != "seq_len_limit"] == ["launch"]
    # under ZeRO-3 on 8 GPUs an 8B full fine-tune at micro-batch 1 fits; judged as plain DDP it did not
    assert _memory(settings, "configs/train_configs/sft/tulu3_8b_preview_mix_v3.1.yaml") == []


def test_the_config_a_call_names_is_linked_without_assumption(tmp_path):
    settings = _project(tmp_path, FILES)
    [run] = _runs(settings, "configs/train_configs/sft/olmo_17_sft.yaml")
    assert run.plan.value("zero_stage") == 3
    assert not any("launch assumed" in note for note in run.assumptions)


def test_launchers_that_disagree_give_no_launch(tmp_path):
    plain = LAUNCHER.replace("    --use_deepspeed \\\n", "").replace(
        "    --deepspeed_config_file configs/ds_configs/stage3_no_offloading_accelerate.conf \\\n", "")
    readme = README + "\n```bash\nbash scripts/finetune_plain_config.sh 8 configs/train_configs/sft/mini.yaml\n```\n"
    files = {**FILES, "scripts/finetune_plain_config.sh": plain, "scripts/README.md": readme}
    settings = _project(tmp_path, files)
    runs = _runs(settings, "configs/train_configs/sft/tulu3_8b_preview_mix_v3.1.yaml")
    assert all(run.plan.value("zero_stage") is None for run in runs)
    [finding] = _memory(settings, "configs/train_configs/sft/tulu3_8b_preview_mix_v3.1.yaml")
    assert "plain data parallelism" in finding.message  # the assumption is named, as before


def test_a_config_of_another_folder_inherits_nothing(tmp_path):
    files = {**FILES, "configs/train_configs/olmo2/olmo2_7b_sft.yaml": _config("meta-llama/Llama-3.1-8B")}
    settings = _project(tmp_path, files)
    runs = _runs(settings, "configs/train_configs/olmo2/olmo2_7b_sft.yaml")
    assert all(run.plan.value("zero_stage") is None for run in runs)


WRAPPED = dedent('''
    #!/bin/bash
    uv run python mason.py \\
        --cluster ai2/jupiter \\
        --workspace ai2/tulu-3-dev \\
        --priority high \\
        --image nathanl/open_instruct_auto --pure_docker_mode \\
        --preemptible \\
        --num_nodes 1 \\
        --budget ai2/oe-adapt \\
        --gpus 8 -- accelerate launch \\
        --mixed_precision bf16 \\
        --num_processes 8 \\
        --use_deepspeed \\
        --deepspeed_config_file configs/ds_configs/stage3_no_offloading_accelerate.conf \\
        --deepspeed_multinode_launcher standard \\
        open_instruct/finetune.py \\
        --model_name_or_path meta-llama/Llama-3.1-8B \\
        --max_seq_length 4096 \\
        --per_device_train_batch_size $PER_DEVICE_BATCH \\
        --gradient_accumulation_steps 2 \\
        --gradient_checkpointing
''')

MASON = dedent('''
    import argparse
    import subprocess

    parser = argparse.ArgumentParser()
    parser.add_argument("--cluster", nargs="+")
    parser.add_argument("--gpus", type=int, default=0)
    args, command = parser.parse_known_args()
    subprocess.run(["beaker", "experiment", "create", *command])
''')


def test_the_command_after_a_wrappers_double_dash_is_the_launch(tmp_path):
    settings = _project(tmp_path, {**FILES, "mason.py": MASON, "scripts/train/tulu3/finetune_8b.sh": WRAPPED})
    [run] = _runs(settings, "scripts/train/tulu3/finetune_8b.sh")
    assert run.plan.value("launches") is None  # a plan holds facts, not the launch itself
    assert Path(run.plan.documents[1]).name == "finetune.py"
    assert run.plan.value("zero_stage") == 3
    assert run.plan.value("model") == "meta-llama/Llama-3.1-8B"  # FlatArguments fields are options
    assert run.plan.value("world_size") == 8
    # `--per_device_train_batch_size $PER_DEVICE_BATCH`: the script's default of 8 is not what runs
    assert run.plan.get("micro_batch") is None
    assert any("micro-batch" in note for note in run.assumptions)


def test_a_conf_file_that_holds_json_is_read_as_a_config():
    conf = parse_document(document_from_text("configs/ds_configs/stage3_offloading_accelerate.conf", STAGE3))
    assert conf.kind == DocumentKind.DEEPSPEED
    other = parse_document(document_from_text("nginx.conf", "server {\n  listen 80;\n}\n"))
    assert other.kind == DocumentKind.OTHER


def test_a_verdict_of_a_config_run_is_reported_in_the_config(tmp_path):
    """A 70B full fine-tune does not fit 8 H100s even under the launcher's ZeRO-3: the verdict
    belongs to the config (not the launcher's shared .conf, which no walk lints), and it does not
    rest on the inherited launch (the config alone, as plain DDP, fits even less)."""
    name = "configs/train_configs/sft/tulu2_70b.yaml"
    settings = _project(tmp_path, {**FILES, name: _config("meta-llama/Llama-2-70b-hf")})
    [finding] = _memory(settings, name)
    assert (finding.code, finding.severity.name) == ("MEM001", "ERROR")
    assert finding.range.start.line == 1  # the model the config names: the largest part is its states
    assert "rests on an assumption" not in finding.message


ASCEND = dedent('''
    # Start FSDP2 fine-tuning
    # accelerate launch \\
    #     --config_file examples/accelerate/fsdp2_config.yaml \\
    #     src/train.py examples/ascend/qwen3_full_sft_fsdp2.yaml
    # Change `num_processes` in fsdp2_config.yaml to 16 in A3

    ### model
    model_name_or_path: Qwen/Qwen3-8B
    trust_remote_code: true
    flash_attn: fa2

    ### method
    stage: sft
    do_train: true
    finetuning_type: full

    ### dataset
    dataset: alpaca_en_demo
    template: qwen3
    cutoff_len: 2048

    ### output
    output_dir: saves/Qwen3-8B/full/sft
    report_to: none  # choices: [none, wandb, tensorboard, swanlab, mlflow]

    ### train
    per_device_train_batch_size: 8
    gradient_accumulation_steps: 1
    learning_rate: 1.0e-5
    num_train_epochs: 3.0
    bf16: true
''')

FSDP2 = dedent('''
    compute_environment: LOCAL_MACHINE
    debug: false
    distributed_type: FSDP
    downcast_bf16: 'no'
    fsdp_config:
      fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
      fsdp_cpu_ram_efficient_loading: true
      fsdp_offload_params: false
      fsdp_reshard_after_forward: true
      fsdp_state_dict_type: FULL_STATE_DICT
      fsdp_version: 2
    machine_rank: 0
    main_training_function: main
    mixed_precision: bf16  # or fp16
    num_machines: 1  # the number of nodes
    num_processes: 8  # the number of GPUs in all nodes
    rdzv_backend: static
    same_network: true
    use_cpu: false
''')

LLAMAFACTORY_TRAIN = dedent('''
    from llamafactory.train.tuner import run_exp


    def main():
        run_exp()


    if __name__ == "__main__":
        main()
''')


def test_a_launch_command_in_a_configs_own_comment_is_its_launch(tmp_path):
    """LLaMA-Factory's examples/ascend/*.yaml say in their header how they are run (accelerate
    with an FSDP config): the run is sharded as the comment says, not plain DDP."""
    name = "examples/ascend/qwen3_full_sft_fsdp2.yaml"
    files = {name: ASCEND, "examples/accelerate/fsdp2_config.yaml": FSDP2, "src/train.py": LLAMAFACTORY_TRAIN}
    settings = _project(tmp_path, files)
    [run] = _runs(settings, name)
    assert run.plan.value("fsdp") == "full"  # from the accelerate config the comment names
    assert not any("launch assumed" in note for note in run.assumptions)
    # an 8B full fine-tune at 8 x 2048 fits 8 H100s under FSDP; judged as plain DDP it did not
    assert _memory(settings, name) == []
    uncommented = ASCEND.split("### model", 1)[1]
    plain = _project(tmp_path / "plain", {**files, name: uncommented})
    [finding] = _memory(plain, name)
    assert "plain data parallelism" in finding.message


SUBMITTER = dedent('''
    import argparse
    import copy
    import subprocess

    import yaml

    from open_instruct.utils import get_beaker_whoami


    def load_yaml(file_path):
        with open(file_path) as f:
            return yaml.load(f, Loader=yaml.FullLoader)


    def main():
        parser = argparse.ArgumentParser(description="Run experiment with Beaker config")
        parser.add_argument("--default_beaker_config", default="configs/beaker_configs/default_finetune.yaml")
        parser.add_argument("--config", default=None, help="Path to an additional config file to override default settings")
        parser.add_argument("--num_nodes", type=int, default=1)
        args, unknown_args = parser.parse_known_args()
        train_config = load_yaml(args.config)
        spec = load_yaml(args.default_beaker_config)
        # the config's fields are written over the spec command's options
        spec["tasks"][0]["arguments"][0] = merge(spec["tasks"][0]["arguments"][0], train_config, unknown_args)
        subprocess.run(["beaker", "experiment", "create", "-"], input=yaml.dump(spec), text=True)


    if __name__ == "__main__":
        main()
''')

BEAKER_SPEC = dedent('''
    version: v2
    description: open-instruct-finetune-multinode
    tasks:
      - name: open-instruct-finetune-multinode
        replicas: 4
        image:
          beaker: nathanl/open_instruct_auto
        command: [
          '/bin/sh', '-c'
        ]
        arguments: ['
            unset CUDA_LAUNCH_BLOCKING && accelerate launch
            --mixed_precision bf16
            --num_machines 4
            --num_processes 32
            --machine_rank $BEAKER_REPLICA_RANK
            --main_process_ip $BEAKER_LEADER_REPLICA_HOSTNAME
            --use_deepspeed
            --deepspeed_config_file configs/ds_configs/stage3_no_offloading_accelerate.conf
            --deepspeed_multinode_launcher standard
            open_instruct/finetune.py
            --model_name_or_path meta-llama/Meta-Llama-3-8B
            --max_seq_length 4096
            --per_device_train_batch_size 8
            --gradient_accumulation_steps 4
            --learning_rate 5e-6
            --output_dir /output/
        ']
        resources:
          gpuCount: 8
''')

SWEEP = dedent('''
    #!/bin/bash
    for seed in 3 4; do
    python scripts/submit_finetune_job.py \\
        --cluster ai2/jupiter \\
        --num_nodes 4 \\
        --default_beaker_config configs/beaker_configs/default_finetune_multinode.yaml \\
        --config configs/train_configs/olmo2/olmo2_7b_sft.yaml \\
        --seed $seed
    done
''')


def test_a_job_submitter_runs_the_config_with_its_job_specs_launch(tmp_path):
    """open-instruct's docs/archived_dev_scripts/olmo2_1124.sh: `submit_finetune_job.py
    --default_beaker_config <spec> --config <yaml>`; the spec's command is the launch (ZeRO-3 from
    its .conf) and the config's fields beat the command's options."""
    name = "configs/train_configs/olmo2/olmo2_7b_sft.yaml"
    files = {**FILES, "scripts/submit_finetune_job.py": SUBMITTER,
             "configs/beaker_configs/default_finetune_multinode.yaml": BEAKER_SPEC,
             "docs/archived_dev_scripts/olmo2.sh": SWEEP, name: _config("meta-llama/Llama-3.1-8B")}
    settings = _project(tmp_path, files)
    [run] = _runs(settings, name)
    assert run.plan.value("zero_stage") == 3
    assert run.plan.value("model") == "meta-llama/Llama-3.1-8B"  # the config's, not the spec command's
    assert run.plan.value("micro_batch") == 1  # the config's 1 beats the command's 8
    assert Path(run.plan.documents[1]).name == "finetune.py"
    assert _memory(settings, name) == []  # judged as plain DDP it did not fit


def test_a_config_no_call_names_runs_as_its_other_size_siblings_are_submitted(tmp_path):
    """open-instruct's olmo2 folder: the 7B recipe is submitted with the multinode spec, the 70B
    one of the same recipe is not named anywhere; it takes the sibling's launch, as a named
    assumption. A config of another recipe (``_dpo``) in the folder takes nothing from it."""
    name = "configs/train_configs/olmo2/olmo2_70b_sft.yaml"
    other = "configs/train_configs/olmo2/olmo2_70b_dpo.yaml"
    files = {**FILES, "scripts/submit_finetune_job.py": SUBMITTER,
             "configs/beaker_configs/default_finetune_multinode.yaml": BEAKER_SPEC,
             "docs/archived_dev_scripts/olmo2.sh": SWEEP,
             "configs/train_configs/olmo2/olmo2_7b_sft.yaml": _config("meta-llama/Llama-3.1-8B"),
             name: _config("meta-llama/Llama-3.1-70B"), other: _config("meta-llama/Llama-3.1-70B")}
    settings = _project(tmp_path, files)
    [run] = _runs(settings, name)
    assert run.plan.value("zero_stage") == 3
    assert run.plan.value("world_size") == 32  # the spec's --num_processes
    assert run.plan.value("model") == "meta-llama/Llama-3.1-70B"
    assert any("submitted as olmo2_7b_sft.yaml, the same recipe at another size" in a for a in run.assumptions)
    assert all(r.plan.value("zero_stage") is None for r in _runs(settings, other))
