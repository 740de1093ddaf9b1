"""A script whose argparse options are filled from a YAML file the ``--config`` option names
(xRAG's ``src/language_modeling/train.py``: ``yaml_config = get_yaml_file(args.config)``, then
``for k, v in yaml_config.items(): if getattr(args, k) is None: setattr(args, k, v)``): the file's
keys are the script's command line, under the launch's own options. A switch the file turns on
(``update_projector_only: true``) then decides what trains: xRAG's pre-training trains only its
projector (``if 'projector' not in n:p.requires_grad = False``, written on one line)."""

from __future__ import annotations

from tests.facts.facts_testing import dedent
from tests.project.test_config_launchers import _memory, _project, _runs

TRAIN = dedent('''
    import argparse

    import torch
    import yaml
    from accelerate import Accelerator
    from transformers import AutoModelForCausalLM


    def get_yaml_file(path):
        with open(path) as f:
            return yaml.safe_load(f)


    def parse_args():
        parser = argparse.ArgumentParser()
        parser.add_argument("--config", type=str, help="config file to launch the training")
        parser.add_argument("--model_name_or_path", type=str)
        parser.add_argument("--per_device_train_batch_size", type=int)
        parser.add_argument("--max_seq_length", type=int)
        parser.add_argument("--learning_rate", type=float)
        parser.add_argument("--update_projector_only", type=eval)
        parser.add_argument("--max_train_steps", type=int)
        parser.add_argument("--shuffle_train_set", type=eval)
        parser.add_argument("--warmup_ratio", type=float)
        args = parser.parse_args()
        yaml_config = get_yaml_file(args.config)
        ## priority: CLI > YAML (with all default value set to None in argument parser)
        for k, v in yaml_config.items():
            assert hasattr(args, k), f"{k} not in parsed arguments"
            if getattr(args, k) is None:
                setattr(args, k, v)
        return args


    def main():
        args = parse_args()
        accelerator = Accelerator(mixed_precision="bf16")
        model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, torch_dtype=torch.bfloat16)
        model.projector = torch.nn.Linear(4096, 4096)
        if args.update_projector_only:
            for n, p in model.named_parameters():
                if 'projector' not in n:p.requires_grad = False
                else:p.requires_grad = True
            optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.learning_rate)
        else:
            optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
        loader = torch.utils.data.DataLoader(build_dataset(args), batch_size=args.per_device_train_batch_size)
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        for batch in loader:
            loss = model(**batch).loss
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()


    if __name__ == "__main__":
        main()
''')

PRETRAIN = dedent('''
    max_seq_length: 336
    model_name_or_path: mistralai/Mistral-7B-Instruct-v0.2
    learning_rate: 6.0e-3
    update_projector_only: {projector_only}
    per_device_train_batch_size: 12
''')

LAUNCH = dedent('''
    accelerate launch \\
        --mixed_precision bf16 \\
        --num_machines 1 \\
        --num_processes 8 \\
        -m \\
        src.language_modeling.train \\
        --config config/language_modeling/pretrain.yaml {extra}
''')


def _files(projector_only: str = "true", extra: str = "") -> dict[str, str]:
    return {"src/__init__.py": "", "src/language_modeling/__init__.py": "", "src/language_modeling/train.py": TRAIN,
            "config/language_modeling/pretrain.yaml": PRETRAIN.format(projector_only=projector_only),
            "scripts/pretrain.sh": LAUNCH.format(extra=extra)}


def test_the_files_keys_are_the_scripts_options(tmp_path):
    settings = _project(tmp_path, _files())
    [run] = _runs(settings, "scripts/pretrain.sh")
    assert run.plan.value("projector_only") is True  # the YAML's switch, through the script's freezing loop
    assert run.plan.value("micro_batch") == 12
    assert _memory(settings, "scripts/pretrain.sh") == []  # only the projector trains: it fits


def test_the_launchs_own_option_wins_over_the_file(tmp_path):
    settings = _project(tmp_path, _files(extra="--per_device_train_batch_size 2"))
    [run] = _runs(settings, "scripts/pretrain.sh")
    assert run.plan.value("micro_batch") == 2


def test_with_the_switch_off_the_whole_model_trains(tmp_path):
    on = _project(tmp_path / "on", _files(extra="--per_device_train_batch_size 32"))
    assert _memory(on, "scripts/pretrain.sh") == []
    off = _project(tmp_path / "off", _files(projector_only="false", extra="--per_device_train_batch_size 32"))
    [run] = _runs(off, "scripts/pretrain.sh")
    assert not run.plan.value("projector_only")
    [finding] = _memory(off, "scripts/pretrain.sh")  # a 7B full fine-tune at 32 x 336 under DDP
    assert finding.code == "MEM001"
