"""A config no command names, in a folder whose other configs a README (or shell script) launches
directly (princeton-nlp/SimPO: ``accelerate launch --config_file accelerate_configs/deepspeed_zero3.yaml
scripts/run_simpo.py training_configs/x.yaml`` for five of its seven ``training_configs/``): judged
under the form those launches agree on, as a named assumption; none when they disagree on the form
or run different entry scripts."""

from __future__ import annotations

from tests.facts.facts_testing import dedent
from tests.project.test_config_launchers import _memory, _project, _runs

# scripts/run_simpo.py, trimmed: a Trainer run parsing model/data/training arguments from the
# YAML file its command line names
RUN_SIMPO = dedent('''
    import sys
    from dataclasses import dataclass, field

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, HfArgumentParser, Trainer, TrainingArguments


    @dataclass
    class ModelArguments:
        model_name_or_path: str = field(default=None, metadata={"help": "The model checkpoint."})
        torch_dtype: str = field(default=None)
        attn_implementation: str = field(default=None)


    @dataclass
    class DataArguments:
        dataset_mixer: dict = field(default=None)
        dataset_splits: list = field(default_factory=lambda: ["train", "test"])
        preprocessing_num_workers: int = field(default=None)


    @dataclass
    class SimPOConfig(TrainingArguments):
        beta: float = 2.0
        gamma_beta_ratio: float = 0.25
        max_length: int = 512
        max_prompt_length: int = 128


    def main():
        parser = HfArgumentParser((ModelArguments, DataArguments, SimPOConfig))
        model_args, data_args, training_args = parser.parse_yaml_file(sys.argv[1])
        model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path, torch_dtype=torch.bfloat16)
        tokenizer = AutoTokenizer.from_pretrained(model_args.model_name_or_path)
        trainer = Trainer(model=model, args=training_args, tokenizer=tokenizer, train_dataset=load(data_args))
        trainer.train()


    if __name__ == "__main__":
        main()
''')

# accelerate_configs/deepspeed_zero3.yaml as SimPO ships it (4 processes)
ZERO3 = dedent('''
    compute_environment: LOCAL_MACHINE
    debug: false
    deepspeed_config:
      deepspeed_multinode_launcher: standard
      offload_optimizer_device: none
      offload_param_device: none
      zero3_init_flag: true
      zero3_save_16bit_model: true
      zero_stage: 3
    distributed_type: DEEPSPEED
    downcast_bf16: 'no'
    machine_rank: 0
    main_training_function: main
    mixed_precision: bf16
    num_machines: 1
    num_processes: 4
    rdzv_backend: static
    same_network: true
    use_cpu: false
''')

MULTI_GPU = dedent('''
    compute_environment: LOCAL_MACHINE
    debug: false
    distributed_type: MULTI_GPU
    downcast_bf16: 'no'
    gpu_ids: all
    machine_rank: 0
    main_training_function: main
    mixed_precision: bf16
    num_machines: 1
    num_processes: 8
    use_cpu: false
''')


def _config(model: str, micro_batch: int) -> str:
    # training_configs/*-simpo.yaml, trimmed: a full fine-tune of a 7-9B model at 2048 tokens
    return dedent(f'''
        # Model arguments
        model_name_or_path: {model}
        torch_dtype: null
        attn_implementation: eager

        # Data training arguments
        dataset_mixer:
          princeton-nlp/gemma2-ultrafeedback-armorm: 1.0
        dataset_splits:
        - train
        - test
        preprocessing_num_workers: 12

        # SimPOTrainer arguments
        bf16: true
        beta: 10
        gamma_beta_ratio: 0.5
        gradient_accumulation_steps: 16
        gradient_checkpointing: true
        gradient_checkpointing_kwargs:
          use_reentrant: False
        learning_rate: 8.0e-7
        max_length: 2048
        max_prompt_length: 1800
        num_train_epochs: 1
        optim: adamw_torch
        output_dir: outputs/run
        per_device_train_batch_size: {micro_batch}
        save_strategy: "steps"
        seed: 42
    ''')


def _launch(config: str, accelerate: str = "deepspeed_zero3.yaml", script: str = "scripts/run_simpo.py") -> str:
    return dedent(f'''
        ```shell
        ACCELERATE_LOG_LEVEL=info accelerate launch --config_file accelerate_configs/{accelerate} {script} training_configs/{config}
        ```
    ''')


def _readme(*launches: str) -> str:
    return ("# SimPO\n\n## Training Scripts\n\nThe training config is set for 4xH100 GPUs.\n\n"
            + "".join(f"* {name}:\n{launch}" for name, launch in zip(("Mistral-Base", "Mistral-Instruct"), launches)))


UNLAUNCHED = "training_configs/gemma-2-9b-it-simpo.yaml"

FILES = {
    "scripts/run_simpo.py": RUN_SIMPO,
    "accelerate_configs/deepspeed_zero3.yaml": ZERO3,
    "accelerate_configs/multi_gpu.yaml": MULTI_GPU,
    "training_configs/mistral-7b-base-simpo.yaml": _config("mistralai/Mistral-7B-v0.1", 2),
    "training_configs/mistral-7b-instruct-simpo.yaml": _config("mistralai/Mistral-7B-Instruct-v0.2", 2),
    UNLAUNCHED: _config("google/gemma-2-9b-it", 2),
    "README.md": _readme(_launch("mistral-7b-base-simpo.yaml"), _launch("mistral-7b-instruct-simpo.yaml")),
}


def test_an_unlaunched_config_takes_the_form_its_folders_direct_launches_agree_on(tmp_path):
    settings = _project(tmp_path, FILES)
    [run] = _runs(settings, UNLAUNCHED)
    assert run.plan.value("zero_stage") == 3
    [note] = [n for n in run.assumptions if n.startswith("launch assumed")]
    assert ("ZeRO-3, as the documented launches of run_simpo.py with the other configs in training_configs/ "
            "(README.md:9,13) are launched") in note
    [assumed] = run.assumed
    assert (assumed.fact, assumed.value) == ("launch", "ZeRO-3 on 4 GPUs, as its peers are launched (README.md:9)")
    assert run.setup.world_size == 4  # the num_processes every launch agrees on, as for the configs it names
    # a 9B full fine-tune at 2 x 2048 tokens fits 4 H100s under ZeRO-3, not as plain DDP
    assert _memory(settings, UNLAUNCHED) == []
    unread = _project(tmp_path / "unread", {**FILES, "README.md": "# SimPO\n"})
    [finding] = _memory(unread, UNLAUNCHED)
    assert finding.code == "MEM001" and "plain data parallelism" in finding.message


def test_a_launch_written_in_a_shell_script_counts_too(tmp_path):
    script = "#!/bin/bash\nset -e\n" + _launch("mistral-7b-base-simpo.yaml").split("\n")[1] + "\n"
    files = {**FILES, "README.md": "# SimPO\n", "scripts/train_mistral.sh": script}
    [run] = _runs(_project(tmp_path, files), UNLAUNCHED)
    assert run.plan.value("zero_stage") == 3
    assert any("(scripts/train_mistral.sh:3)" in n for n in run.assumptions if n.startswith("launch assumed"))


def test_the_config_a_command_names_keeps_its_own_launch(tmp_path):
    files = {**FILES, "README.md": FILES["README.md"] + _launch("gemma-2-9b-it-simpo.yaml", "multi_gpu.yaml")}
    [run] = _runs(_project(tmp_path, files), UNLAUNCHED)
    assert run.plan.value("zero_stage") is None
    assert not any(n.startswith("launch assumed") for n in run.assumptions)


def test_direct_launches_that_disagree_on_the_form_give_none(tmp_path):
    readme = _readme(_launch("mistral-7b-base-simpo.yaml"), _launch("mistral-7b-instruct-simpo.yaml", "multi_gpu.yaml"))
    settings = _project(tmp_path, {**FILES, "README.md": readme})
    [run] = _runs(settings, UNLAUNCHED)
    assert run.plan.value("zero_stage") is None
    [finding] = _memory(settings, UNLAUNCHED)
    assert "plain data parallelism" in finding.message  # the assumption is named, as before


def test_direct_launches_of_different_entry_scripts_give_none(tmp_path):
    """Which script runs the unlaunched config is not known: its siblings' forms say nothing of it."""
    readme = _readme(_launch("mistral-7b-base-simpo.yaml"),
                     _launch("mistral-7b-instruct-simpo.yaml", script="scripts/run_sft.py"))
    files = {**FILES, "README.md": readme, "scripts/run_sft.py": RUN_SIMPO}
    [run] = _runs(_project(tmp_path, files), UNLAUNCHED)
    assert run.plan.value("zero_stage") is None
    assert not any(n.startswith("launch assumed") for n in run.assumptions)


def test_a_config_of_a_folder_below_takes_nothing_from_them(tmp_path):
    files = {**FILES, "training_configs/ablations/gemma-2-9b-it-simpo-beta2.yaml": FILES[UNLAUNCHED]}
    [run] = _runs(_project(tmp_path, files), "training_configs/ablations/gemma-2-9b-it-simpo-beta2.yaml")
    assert run.plan.value("zero_stage") is None
    assert not any(n.startswith("launch assumed") for n in run.assumptions)
