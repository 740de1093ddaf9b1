"""Launcher scripts: which script runs, with which options, on how many GPUs -- each value
located at the word (or the variable assignment) that wrote it."""

from __future__ import annotations

from facts_testing import dedent, facts_of, span, where

TORCHRUN = dedent('''
    #!/bin/bash
    # Llama fine-tuning on one node; BS can be overridden from the environment
    set -euo pipefail

    NGPU=8
    MODEL="meta-llama/Llama-3.1-8B"   # the base model
    OUT=runs/$(date +%s)

    torchrun --nproc_per_node $NGPU --nnodes=1 --master_port 29500 \\
        train.py \\
        --model_name_or_path "$MODEL" \\
        --per_device_train_batch_size ${BS:-4} \\
        --gradient_accumulation_steps 8 \\
        --bf16 \\
        --gradient_checkpointing True \\
        --lora_target_modules q_proj v_proj \\
        --deepspeed configs/ds_zero2.json \\
        --output_dir "$OUT" \\
        --learning_rate=2e-5 2>&1 | tee train.log
''')


def test_torchrun_with_variables_defaults_continuations_and_comments():
    (facts,) = facts_of(TORCHRUN, "run.sh")
    src = TORCHRUN
    assert facts.kind == "shell"
    assert facts.launches.value == "train.py"
    assert where(facts.launches) == span(src, "    «train.py» \\")
    assert facts.world_size.value == 8
    assert where(facts.world_size) == span(src, "NGPU=«8»")  # the value that $NGPU expands to
    assert facts.gpus_per_node.value == 8
    args = facts.cli_args
    assert args["model_name_or_path"].value == "meta-llama/Llama-3.1-8B"
    assert where(args["model_name_or_path"]) == span(src, 'MODEL=«"meta-llama/Llama-3.1-8B"»')
    assert args["per_device_train_batch_size"].value == "4"
    assert where(args["per_device_train_batch_size"]) == span(src, "${BS:-«4»}")
    assert args["gradient_accumulation_steps"].value == "8"
    assert where(args["gradient_accumulation_steps"]) == span(src, "--gradient_accumulation_steps «8»")
    assert args["bf16"].value == "true"  # a flag without a value
    assert where(args["bf16"]) == span(src, "«--bf16» \\")
    assert args["gradient_checkpointing"].value == "True"
    assert args["lora_target_modules"].value == "q_proj v_proj"
    assert where(args["lora_target_modules"]) == span(src, "--lora_target_modules «q_proj v_proj»")
    assert args["learning_rate"].value == "2e-5"
    assert where(args["learning_rate"]) == span(src, "--learning_rate=«2e-5»")
    assert "output_dir" not in args  # $(date +%s) is only known at run time
    assert [r.value for r in facts.references] == ["configs/ds_zero2.json"]
    assert where(facts.references[0]) == span(src, "--deepspeed «configs/ds_zero2.json»")
    assert facts.anchor.range.start.line == span(src, "«torchrun» --nproc")[0]


def test_python_module_launchers_and_nnodes():
    src = dedent('''
        python -m torch.distributed.run --nproc-per-node=4 --nnodes 2 \\
            -m my_project.train --batch_size 16
    ''')
    (facts,) = facts_of(src, "launch.sh")
    assert facts.launches.value == "my_project/train.py"
    assert facts.world_size.value == 8
    assert where(facts.world_size) == span(src, "--nproc-per-node=«4»")
    assert facts.gpus_per_node.value == 4
    assert facts.cli_args["batch_size"].value == "16"


def test_deepspeed_launcher_counts_included_gpus():
    src = dedent('''
        deepspeed --include localhost:0,1,2,3 --master_port=9901 fastchat/train/train_lora.py \\
            --deepspeed playground/zero2.json --q_lora True --model_max_length 2048
        deepspeed --num_gpus 2 --num_nodes 2 main.py --zero_stage 3 --offload
    ''')
    first, second = facts_of(src, "run.sh")
    assert first.launches.value == "fastchat/train/train_lora.py"
    assert first.world_size.value == 4
    assert where(first.world_size) == span(src, "--include «localhost:0,1,2,3»")
    assert [r.value for r in first.references] == ["playground/zero2.json"]
    assert first.cli_args["q_lora"].value == "True"
    assert second.launches.value == "main.py"
    assert second.world_size.value == 4
    assert second.cli_args["offload"].value == "true"


def test_accelerate_launch():
    src = dedent('''
        accelerate launch --config_file recipes/zero3.yaml --num_processes 8 --mixed_precision bf16 \\
            src/sft.py --per_device_train_batch_size 16 --packing --max_seq_length 16384 > sft.log
    ''')
    (facts,) = facts_of(src, "sft.sh")
    assert facts.launches.value == "src/sft.py"
    assert facts.world_size.value == 8
    assert facts.mixed.value == "bf16"
    assert where(facts.mixed) == span(src, "--mixed_precision «bf16»")
    assert [r.value for r in facts.references] == ["recipes/zero3.yaml"]
    assert facts.cli_args["packing"].value == "true"
    assert facts.cli_args["max_seq_length"].value == "16384"
    assert "sft.log" not in str(facts.cli_args)


def test_plain_python_with_an_env_prefix_and_a_positional_config():
    src = dedent('''
        CUDA_VISIBLE_DEVICES=0 python3 -u train.py configs/llama3_lora.yaml --bf16
    ''')
    (facts,) = facts_of(src, "run.sh")
    assert facts.launches.value == "train.py"
    assert facts.world_size is None  # python starts one process; the script decides the rest
    assert [r.value for r in facts.references] == ["configs/llama3_lora.yaml"]
    assert facts.cli_args["bf16"].value == "true"


def test_values_set_in_branches_loops_and_positional_parameters_are_unknown():
    src = dedent('''
        OUTPUT=$1
        ZERO_STAGE=${2:-2}
        if [ "$OUTPUT" == "" ]; then
            OUTPUT=./output
        fi
        for BS in 1 2 4; do
            deepspeed --num_gpus 1 main.py --per_device_train_batch_size $BS --zero_stage $ZERO_STAGE \\
                --output_dir $OUTPUT &> $OUTPUT/training.log
        done
        cat <<EOF > notes.txt
        torchrun --nproc_per_node 64 not_a_command.py
        EOF
    ''')
    (facts,) = facts_of(src, "run.sh")
    assert "per_device_train_batch_size" not in facts.cli_args
    assert "output_dir" not in facts.cli_args
    assert facts.cli_args["zero_stage"].value == "2"
    assert where(facts.cli_args["zero_stage"]) == span(src, "${2:-«2»}")
    assert facts.launches.value == "main.py"


def test_a_value_every_branch_assigns_alike_is_known_after_the_block():
    # Mantis's pretrain scripts: both branches pick the ZeRO-2 config ("please use zero3" is a
    # comment the authors left behind); a value only one branch assigns, or branches disagree on,
    # stays unknown
    src = dedent('''
        lora_enabled=false
        if [ $lora_enabled = true ]; then
            echo "lora is enabled"
            config_file="./accelerate_configs/accelerate_config_zero2.yaml"
            data_dir=data/lora
        else
            echo "lora is disabled"
            config_file="./accelerate_configs/accelerate_config_zero2.yaml"
            data_dir=data/full
        fi
        if [ -n "$SLURM_JOB_ID" ]; then
            batch=2
        fi
        accelerate launch --config_file=$config_file train_mllava.py --data_dir $data_dir \
            --per_device_train_batch_size $batch
    ''')
    (facts,) = facts_of(src, "pretrain.sh")
    assert [r.value for r in facts.references] == ["./accelerate_configs/accelerate_config_zero2.yaml"]
    assert "data_dir" not in facts.cli_args
    assert "per_device_train_batch_size" not in facts.cli_args


def test_scripts_without_launches_and_broken_quotes():
    assert facts_of("#!/bin/sh\necho 'training done'\nrm -rf /tmp/cache\n", "clean.sh") == []
    assert facts_of("torchrun --nproc_per_node 2 train.py --name 'unterminated\n", "bad.sh") == []
    assert facts_of("", "empty.sh") == []


def test_unicode_and_quoted_words_keep_exact_columns():
    src = 'NAME="é ü"\ntorchrun --nproc_per_node=2 train.py --run_name "$NAME" --note "Größe 4" --bs 2\n'
    (facts,) = facts_of(src, "run.sh")
    assert facts.cli_args["run_name"].value == "é ü"
    assert where(facts.cli_args["run_name"]) == span(src, 'NAME=«"é ü"»')
    assert facts.cli_args["note"].value == "Größe 4"
    assert where(facts.cli_args["note"]) == span(src, '--note «"Größe 4"»')
    assert where(facts.cli_args["bs"]) == span(src, "--bs «2»")


# open-instruct's scripts/train/debug/dpo/multi_node.sh, trimmed: a cluster wrapper, then torchrun
DPO_TP = dedent('''
    MODEL_NAME=allenai/OLMo-2-1124-7B
    uv run python mason.py \\
        --cluster ai2/jupiter \\
        --num_nodes 2 \\
        --gpus 8 -- torchrun \\
        --nnodes=2 \\
        --nproc_per_node=8 \\
        open_instruct/dpo.py \\
        --model_name_or_path "$MODEL_NAME" \\
        --max_seq_length 16384 \\
        --per_device_train_batch_size 16 \\
        --packing \\
        --activation_memory_budget 0.1 \\
        --fsdp_shard_degree 4 \\
        --tensor_parallel_degree 2 \\
        --vllm_tensor_parallel_size 4
''')


def test_the_launch_after_a_wrappers_double_dash_and_its_model_parallelism():
    [facts] = facts_of(DPO_TP, "scripts/train/debug/dpo/multi_node.sh")
    assert facts.launches.value == "open_instruct/dpo.py"
    assert facts.world_size.value == 16  # torchrun's, not mason.py's --gpus
    assert facts.unmodelled.value[0] == "model parallelism (`--tensor_parallel_degree 2`)"
    assert "theoretical_memory_usage.py" in facts.unmodelled.value[1]
    assert where(facts.unmodelled) == span(DPO_TP, "--tensor_parallel_degree «2»")


def test_tensor_parallelism_of_one_or_of_vllm_is_not_model_parallel_training():
    text = DPO_TP.replace("--tensor_parallel_degree 2", "--tensor_parallel_degree 1")
    [facts] = facts_of(text, "scripts/train/debug/dpo/multi_node.sh")
    assert facts.unmodelled is None


PIPELINE = dedent('''
    #!/bin/bash
    set -eux
    name=$1
    export WORK_DIR=`pwd`
    OUTPUT=${WORK_DIR}/output/${name}
    deepspeed --include localhost:$2 --master_port 23857 ${WORK_DIR}/train.py \\
        --output_dir ${OUTPUT} \\
        --pipe_parallel_size 4 \\
        --model_parallel_size 2 \\
        --deepspeed_config ${WORK_DIR}/configs/ds_config_zero1.json
''')


def test_paths_built_on_the_callers_folder_and_the_gpus_each_model_copy_spans():
    [facts] = facts_of(PIPELINE, "finetune/train_llama_deepspeed.sh")
    # `pwd` is where the caller stands: the paths read as relative ones (before: unknown)
    assert facts.launches.value == "./train.py"
    assert [r.value for r in facts.references] == ["./configs/ds_config_zero1.json"]
    # 4 pipeline stages of 2 tensor-parallel GPUs: 8 GPUs hold one copy of the model
    assert facts.model_split_degree.value == 8
    assert facts.model_split_degree.note == "--pipe_parallel_size 4 --model_parallel_size 2"
    assert facts.unmodelled.value[0] == "model parallelism (`--pipe_parallel_size 4`)"


# simpleRL-reason's tests/e2e/run_deepseek_megatron.sh, trimmed: Hydra's config folder and name
HYDRA = dedent('''
    set -x
    MODEL=deepseek-ai/deepseek-coder-1.3b-instruct
    python3 -m verl.trainer.main_ppo --config-path=config \\
        --config-name='ppo_megatron_trainer.yaml' \\
        data.train_files=$HOME/data/gsm8k/train.parquet \\
        actor_rollout_ref.model.path=$MODEL
''')


def test_a_hydra_config_name_is_a_file_of_its_config_path_beside_the_module():
    [facts] = facts_of(HYDRA, "tests/e2e/run_deepseek_megatron.sh")
    assert [r.value for r in facts.references] == ["verl/trainer/config/ppo_megatron_trainer.yaml"]
    assert where(facts.references[0]) == span(HYDRA, "--config-name=«'ppo_megatron_trainer.yaml'»")
    # a name without --config-path is a file of the folder @hydra.main names: not read here
    [bare] = facts_of(HYDRA.replace(" --config-path=config", ""), "tests/e2e/run_deepseek_megatron.sh")
    assert bare.references == []
    # -cp / -cn, a name without its suffix, a script rather than a module
    short = HYDRA.replace("-m verl.trainer.main_ppo --config-path=config", "scripts/train.py -cp ../conf").replace(
        "--config-name='ppo_megatron_trainer.yaml'", "-cn ppo")
    [script] = facts_of(short, "tests/e2e/run_deepseek_megatron.sh")
    assert [r.value for r in script.references] == ["conf/ppo.yaml"]


def test_a_tensor_parallel_degree_by_its_short_name():
    # llm-training-experiments' torchtune trainer: `--tp-degree 4` over 16 GPUs (FSDP2 x TP)
    text = PIPELINE.replace("--pipe_parallel_size 4 \\\n    --model_parallel_size 2", "--tp-degree 4")
    [facts] = facts_of(text, "scripts/s1/run_sft_s1k.sh")
    assert facts.model_split_degree.value == 4 and facts.model_split_degree.note == "--tp_degree 4"
    assert facts.unmodelled.value[0] == "model parallelism (`--tp_degree 4`)"
