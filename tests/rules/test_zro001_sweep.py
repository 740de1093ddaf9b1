"""ZRO001 on a launcher that sweeps the ZeRO stages on purpose (DeepSpeedExamples'
``training/autotuning/hf/bert-base/test_tune.sh``: one ``deepspeed ... run_glue.py --deepspeed
../dsconfigs/ds_config_z{0,1,2,3}.json`` per branch of ``if [ ${TEST} == "z0" ]``): stage 3 is
one point of the comparison, so the finding is an info that says so; a launcher that runs only
stage 3 keeps the warning."""

from __future__ import annotations

from memlint.lint.engine import Linter
from memlint.model.diagnostics import Severity
from memlint.project.settings import Settings

from tests.facts.facts_testing import dedent, write


def _launch(stage: str) -> str:
    return (f"    deepspeed --num_gpus=8 run_glue.py --deepspeed ../dsconfigs/ds_config_{stage}.json \\\n"
            "    --model_name_or_path $MODEL_NAME \\\n"
            "    --task_name $TASK_NAME \\\n"
            "    --do_train \\\n"
            "    --max_seq_length 128 \\\n"
            "    --per_device_train_batch_size $PER_DEVICE_TRAIN_BATCH_SIZE \\\n"
            "    --output_dir ${OUTPUT_DIR}_" + stage + "\n")


SWEEP = ('TASK_NAME=mnli\nMODEL_NAME=bert-base-cased\nPER_DEVICE_TRAIN_BATCH_SIZE=64\n'
         'OUTPUT_DIR=./${TASK_NAME}/output\n\nTEST=$1\n\n'
         'if [ ${TEST} == "z0" ]\nthen\n' + _launch("z0") +
         'elif [ ${TEST} == "z1" ]\nthen\n' + _launch("z1") +
         'elif [ ${TEST} == "z2" ]\nthen\n' + _launch("z2") +
         'elif [ ${TEST} == "z3" ]\nthen\n' + _launch("z3") + 'fi\n')

ONLY_STAGE3 = ('TASK_NAME=mnli\nMODEL_NAME=bert-base-cased\nPER_DEVICE_TRAIN_BATCH_SIZE=64\n'
               'OUTPUT_DIR=./${TASK_NAME}/output\n\n' + _launch("z3"))

RUN_GLUE = dedent('''
    from transformers import AutoModelForSequenceClassification, HfArgumentParser, Trainer, TrainingArguments


    def main():
        parser = HfArgumentParser((TrainingArguments,))
        (training_args,) = parser.parse_args_into_dataclasses()
        model = AutoModelForSequenceClassification.from_pretrained("bert-base-cased")
        Trainer(model=model, args=training_args, train_dataset=load()).train()


    if __name__ == "__main__":
        main()
''')


def _config(stage: int) -> str:
    return dedent(f'''
        {{
          "train_micro_batch_size_per_gpu": "auto",
          "zero_optimization": {{
            "stage": {stage}
          }},
          "fp16": {{
            "enabled": true
          }}
        }}
    ''')


def _zro001(tmp_path, launcher: str):
    files = {f"hf/dsconfigs/ds_config_z{s}.json": _config(s) for s in range(4)}
    files.update({"hf/bert-base/test_tune.sh": launcher, "hf/bert-base/run_glue.py": RUN_GLUE})
    write(tmp_path, files)
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False)
    return [d for d in Linter(settings).lint_path(tmp_path / "hf/dsconfigs/ds_config_z3.json") if d.code == "ZRO001"]


def test_a_sweep_over_the_stages_is_an_info_that_says_so(tmp_path):
    [finding] = _zro001(tmp_path, SWEEP)
    assert finding.severity == Severity.INFO
    assert "`test_tune.sh` also runs this script with ZeRO stages 0, 1, 2" in finding.message


def test_a_launcher_that_runs_only_stage_3_keeps_the_warning(tmp_path):
    [finding] = _zro001(tmp_path, ONLY_STAGE3)
    assert finding.severity == Severity.WARNING
    assert "sweep" not in finding.message


TWO_MODELS = ('TASK_NAME=mnli\nPER_DEVICE_TRAIN_BATCH_SIZE=64\nOUTPUT_DIR=./${TASK_NAME}/output\n\n'
              + _launch("z3").replace("$MODEL_NAME", "bert-base-cased") + "\n"
              + _launch("z3").replace("$MODEL_NAME", "FacebookAI/roberta-base").replace("_z3\n", "_z3_large\n"))


def test_one_finding_for_a_shared_config_that_every_run_could_lighten(tmp_path):
    # two launches use one ZeRO-3 config and each run fits a lighter stage: one finding on the
    # config's line, spoken for by the run with the larger peak, not one per run
    [finding] = _zro001(tmp_path, TWO_MODELS)
    assert "the run that needs the most of the 2 runs that use this config; every one fits it" in finding.message
    assert finding.severity == Severity.WARNING


SMALL_AND_LARGE = ('TASK_NAME=mnli\nOUTPUT_DIR=./${TASK_NAME}/output\n\n'
                   + _launch("z3").replace("$MODEL_NAME", "Qwen/Qwen2.5-0.5B")
                   .replace("$PER_DEVICE_TRAIN_BATCH_SIZE", "288") + "\n"
                   + _launch("z3").replace("$MODEL_NAME", "Qwen/Qwen2.5-7B")
                   .replace("$PER_DEVICE_TRAIN_BATCH_SIZE", "1").replace("_z3\n", "_z3_large\n"))


def test_a_shared_config_is_lightened_as_far_as_its_heaviest_run_allows(tmp_path):
    # the 0.5B run at micro-batch 288 would fit plain data parallelism with the larger peak (56.4
    # GiB); the 7B one needs its optimizer states sharded (ZeRO-1, 38.1 GiB): the config's lighter
    # stage is the one every run fits (VideoLLaMA2's zero3.json: a projector-only stage beside
    # full fine-tunes)
    [finding] = _zro001(tmp_path, SMALL_AND_LARGE)
    assert "with ZeRO-1" in finding.message or "with ZeRO-2" in finding.message, finding.message
    assert "plain data parallelism" not in finding.message
