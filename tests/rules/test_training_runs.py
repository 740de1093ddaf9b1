"""What a training run is, for the memory rules: a document that launches or defines no
training gets no memory verdict and no "memory not checked" note."""

from __future__ import annotations

UPLOAD = """\
rm -rf dist
python3 -m build
python3 -m twine upload dist/*
"""

PREPARE = """\
export BASE=clean_conv_20230809_1.5M_pii
python3 filter_bad_conv.py --in $BASE.json --sample 1000000
python3 final_post_processing.py --in $BASE.s1.json
"""

FILTER = """\
import argparse
import json

parser = argparse.ArgumentParser()
parser.add_argument("--in", dest="in_file", required=True)
parser.add_argument("--sample", type=int)
args = parser.parse_args()
rows = json.load(open(args.in_file))
json.dump(rows[: args.sample], open(args.in_file.replace(".json", ".s1.json"), "w"))
"""

PREDICT = """\
python qlora.py \\
    --model_name_or_path EleutherAI/pythia-12b \\
    --output_dir ./output \\
    --do_train False \\
    --do_eval False \\
    --do_predict True \\
    --predict_with_generate \\
    --per_device_eval_batch_size 4
"""

GRADIENT_CHECK = """\
import torch
from transformers import AutoModelForCausalLM


def test_gradients_match():
    model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", torch_dtype=torch.float16).cuda()
    batch = {"input_ids": torch.randint(0, 1000, (2, 4096), device="cuda")}
    loss = model(**batch, labels=batch["input_ids"]).loss
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())
"""

TRAIN_STEP = """\
import torch
from transformers import AutoModelForCausalLM

from myproject.optim import build_optimizer

model = AutoModelForCausalLM.from_pretrained("acme-labs/secret-model-13b").cuda()
optimizer = build_optimizer(model)


def train_step(batch):
    loss = model(**batch).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
"""

SETTINGS = {"gpu": "h100", "gpus": 8}


def test_a_launcher_that_uploads_a_package_is_no_run(lint):
    assert lint("MEM003", UPLOAD, path="scripts/upload_pypi.sh", settings=SETTINGS) == []


def test_a_launcher_of_data_preparation_in_the_project_is_no_run(lint):
    files = {"filter_bad_conv.py": FILTER}
    assert lint("MEM003", PREPARE, path="process_all.sh", files=files, settings=SETTINGS) == []


def test_a_prediction_run_gets_no_memory_verdict(lint):
    for code in ("MEM001", "MEM002", "MEM003"):
        assert lint(code, PREDICT, path="scripts/generate.sh", settings=SETTINGS) == []


def test_the_same_launcher_training_is_estimated(lint):
    source = PREDICT.replace("--do_train False", "--do_train True").replace(
        "--per_device_eval_batch_size 4", "--per_device_train_batch_size 64")
    assert lint("MEM001", source, path="scripts/finetune.sh", settings=SETTINGS)


def test_a_gradient_check_is_no_training_run(lint):
    assert lint("MEM001", GRADIENT_CHECK, path="tests/test_grads.py", settings=SETTINGS) == []


def test_a_backward_with_an_optimizer_step_is_a_run(lint):
    diagnostics = lint("MEM003", TRAIN_STEP, path="train_step.py", settings=SETTINGS)
    assert len(diagnostics) == 1 and "unknown model 'acme-labs/secret-model-13b'" in diagnostics[0].message


def test_the_same_backward_without_a_step_is_no_run(lint):
    source = TRAIN_STEP.replace("    optimizer.step()\n", "")
    assert lint("MEM003", source, path="train_step.py", settings=SETTINGS) == []


PIPELINE_TRAIN = """\
import argparse

import torch
from transformers import AutoModelForCausalLM

parser = argparse.ArgumentParser()
parser.add_argument("--model-name", dest="model_name", required=True)
parser.add_argument("--rank", type=int, default=0)
parser.add_argument("--cuda-id", dest="cuda_id", type=int, default=0)
args = parser.parse_args()

model = AutoModelForCausalLM.from_pretrained(args.model_name).to(f"cuda:{args.cuda_id}")
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
for batch in loader:
    model(**batch).loss.backward()
    optimizer.step()
    optimizer.zero_grad()
"""

PER_RANK = """\
ARGS="--model-name acme-labs/secret-model-13b"
(trap 'kill 0' SIGINT; \\
python dist_train.py $(echo ${ARGS}) --cuda-id 0 --rank 0 \\
    & \\
python dist_train.py $(echo ${ARGS}) --cuda-id 1 --rank 1 \\
    & \\
python dist_train.py $(echo ${ARGS}) --cuda-id 2 --rank 2 \\
    & \\
wait)
"""


def test_one_note_for_a_script_started_once_per_rank(lint):
    # OpenChatKit's pipeline launchers start the same script once per GPU: one unchecked run to
    # the reader, one note that names the other launches
    diagnostics = lint("MEM003", PER_RANK, path="training/finetune.sh", files={"training/dist_train.py": PIPELINE_TRAIN},
                       settings=SETTINGS)
    assert len(diagnostics) == 1, [d.message for d in diagnostics]
    assert "(the same for the launches on lines" in diagnostics[0].message
