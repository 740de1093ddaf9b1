"""A launcher whose option loop lets the caller change a variable the script sets first (Qwen's
``finetune/finetune_ds.sh``: ``MODEL="Qwen/Qwen-7B"``, then ``-m | --model ) shift; MODEL=$1 ;;``
in ``while [[ "$1" != "" ]]; do case $1 in ...``). The README calls it as ``bash
finetune/finetune_ds.sh``, without ``-m``: the assignment before the loop is what runs, and the
caller's option stays a template a call can fill in."""

from __future__ import annotations

from memlint.documents.parsed import parse_document
from memlint.documents.reading import document_from_text
from memlint.facts.launchers import extract_launchers
from memlint.facts.shell_words import option_variables

from tests.facts.facts_testing import dedent

FINETUNE_DS = dedent('''
    #!/bin/bash
    export CUDA_DEVICE_MAX_CONNECTIONS=1
    DIR=`pwd`

    # Number of GPUs per GPU worker
    GPUS_PER_NODE=$(python -c 'import torch; print(torch.cuda.device_count())')
    NNODES=${NNODES:-1}
    NODE_RANK=${NODE_RANK:-0}
    MASTER_ADDR=${MASTER_ADDR:-localhost}
    MASTER_PORT=${MASTER_PORT:-6001}

    MODEL="Qwen/Qwen-7B" # Set the path if you do not want to load from huggingface directly
    DATA="path_to_data"
    DS_CONFIG_PATH="finetune/ds_config_zero3.json"

    function usage() {
        echo '
    Usage: bash finetune/finetune_ds.sh [-m MODEL_PATH] [-d DATA_PATH]
    '
    }

    while [[ "$1" != "" ]]; do
        case $1 in
            -m | --model )
                shift
                MODEL=$1
                ;;
            -d | --data )
                shift
                DATA=$1
                ;;
            -h | --help )
                usage
                exit 0
                ;;
            * )
                echo "Unknown argument ${1}"
                exit 1
                ;;
        esac
        shift
    done

    DISTRIBUTED_ARGS="
        --nproc_per_node $GPUS_PER_NODE \\
        --nnodes $NNODES \\
        --node_rank $NODE_RANK \\
        --master_addr $MASTER_ADDR \\
        --master_port $MASTER_PORT
    "

    torchrun $DISTRIBUTED_ARGS finetune.py \\
        --model_name_or_path $MODEL \\
        --data_path $DATA \\
        --bf16 True \\
        --output_dir output_qwen \\
        --per_device_train_batch_size 1 \\
        --gradient_accumulation_steps 16 \\
        --model_max_length 512 \\
        --gradient_checkpointing True \\
        --deepspeed ${DS_CONFIG_PATH}
''')


def test_the_shift_spelling_of_an_option_arm_is_read():
    assert option_variables(FINETUNE_DS) == {"MODEL": "--model", "DATA": "--data"}


def test_the_value_set_before_the_loop_is_what_runs_without_the_option():
    [facts] = extract_launchers(parse_document(document_from_text("finetune/finetune_ds.sh", FINETUNE_DS)))
    model = facts.cli_args["model_name_or_path"]
    assert model.value == "Qwen/Qwen-7B"
    line = next(i for i, text in enumerate(FINETUNE_DS.splitlines(), 1) if text.startswith("MODEL="))
    assert model.origin.range.start.line == line  # located where the default is written
    assert [str(r.value) for r in facts.references] == ["finetune/ds_config_zero3.json"]


def test_a_loop_variable_without_a_default_is_still_the_callers():
    script = FINETUNE_DS.replace('MODEL="Qwen/Qwen-7B" # Set the path if you do not want to load from huggingface directly\n', "")
    [facts] = extract_launchers(parse_document(document_from_text("finetune/finetune_ds.sh", script)))
    assert "model_name_or_path" not in facts.cli_args
    assert "model_name_or_path" in facts.cli_unknown
