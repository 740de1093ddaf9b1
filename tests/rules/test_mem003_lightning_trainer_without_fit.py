"""MEM003 and a Lightning ``Trainer`` that a script builds but never fits (a serving script)."""

from __future__ import annotations

# A reward-model server (NeMo-Aligner's serve_reward_model.py has this shape): the Trainer is
# built for the model's strategy and precision, the model answers requests, nothing is fitted
SERVER = '''\
"""Serve a trained reward model over HTTP."""
import argparse

import torch
from pytorch_lightning import Trainer

from rm.modules import RewardModel
from rm.server import RewardServer


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--port", type=int, default=5555)
    parser.add_argument("--precision", default="bf16-mixed")
    args = parser.parse_args()

    trainer = Trainer(devices=1, precision=args.precision, logger=False)
    model = RewardModel.load_from_checkpoint(args.checkpoint, map_location="cuda")
    model.eval()
    server = RewardServer(model=model, trainer=trainer, port=args.port)
    with torch.inference_mode():
        server.run()


if __name__ == "__main__":
    main()
'''

# the training script of the same project fits the same kind of module
TRAINER = SERVER.replace('"""Serve a trained reward model over HTTP."""', '"""Train the reward model."""').replace(
    '''    model.eval()
    server = RewardServer(model=model, trainer=trainer, port=args.port)
    with torch.inference_mode():
        server.run()
''', '''    trainer.fit(model, datamodule=PreferenceDataModule(args.data))
''')

SETTINGS = {"gpu": "h100", "gpus": 8}


def test_a_trainer_the_script_never_fits_is_no_training_run(lint):
    assert lint("MEM003", SERVER, path="scripts/serve_reward_model.py", settings=SETTINGS) == []


def test_a_trainer_the_script_fits_is_a_training_run(lint):
    diagnostics = lint("MEM003", TRAINER, path="scripts/train_reward_model.py", settings=SETTINGS)
    assert [d.range.start.line for d in diagnostics] == [18]
    assert "no model found" in diagnostics[0].message
