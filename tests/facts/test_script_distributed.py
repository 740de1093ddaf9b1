"""DeepSpeed, Accelerate and Lightning as scripts configure them in code."""

from __future__ import annotations

from facts_testing import dedent, one, span, where

DEEPSPEED_INLINE = dedent('''
    import argparse

    import deepspeed
    import torch
    from deepspeed.ops.adam import DeepSpeedCPUAdam, FusedAdam
    from transformers import AutoModelForCausalLM


    def ds_config(args):
        return {
            "train_micro_batch_size_per_gpu": args.micro_batch,
            "gradient_accumulation_steps": 8,
            "bf16": {"enabled": True},
            "zero_optimization": {
                "stage": 3,
                "offload_optimizer": {"device": "cpu" if args.offload else "none"},
                "offload_param": {"device": "none"},
                "reduce_bucket_size": "auto",
                "stage3_prefetch_bucket_size": 5e7,
            },
        }


    def main():
        parser = argparse.ArgumentParser()
        parser.add_argument("--micro_batch", type=int, default=2)
        parser.add_argument("--offload", action="store_true")
        parser = deepspeed.add_config_arguments(parser)
        args = parser.parse_args()
        model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", torch_dtype=torch.bfloat16)
        optimizer_class = DeepSpeedCPUAdam if args.offload else FusedAdam
        optimizer = optimizer_class(model.parameters(), lr=1e-5)
        engine, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config(args))
        for batch in loader:
            loss = engine(**batch).loss
            engine.backward(loss)
            engine.step()


    if __name__ == "__main__":
        main()
''')


def test_deepspeed_initialize_with_a_config_built_in_code():
    facts = one(DEEPSPEED_INLINE)
    src = DEEPSPEED_INLINE
    assert facts.framework.value == "deepspeed"
    assert facts.micro_batch.value == 2
    assert where(facts.micro_batch) == span(src, '"--micro_batch", type=int, default=«2»')
    assert facts.grad_accum.value == 8
    assert facts.ds_bf16.value is True
    assert where(facts.ds_bf16) == span(src, '"enabled": «True»')
    assert facts.zero_stage.value == 3
    assert where(facts.zero_stage) == span(src, '"stage": «3»')
    assert facts.offload_optimizer.value is False
    assert facts.offload_params.value is False
    assert facts.prefetch_bucket.value == 5e7
    assert [k.value for k in facts.auto_keys] == ["zero_optimization.reduce_bucket_size"]
    assert facts.optimizer.value == "adamw-fused"
    assert facts.cli_bindings["micro_batch"] == ("micro_batch",)
    assert "if:offload_optimizer=true" in facts.cli_bindings["offload"]
    assert facts.anchor.range.start.line == span(src, "= «deepspeed.initialize»(")[0]


def test_deepspeed_initialize_with_a_config_path_and_items_set_later():
    src = dedent('''
        import deepspeed
        from utils import get_train_ds_config

        ds_config = get_train_ds_config(offload=False, stage=2)
        ds_config["train_micro_batch_size_per_gpu"] = 4
        engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds_config)
        other, *_ = deepspeed.initialize(model=model, config="configs/ds_z2.json")
    ''')
    facts = one(src)
    assert facts.micro_batch.value == 4
    assert where(facts.micro_batch) == span(src, '["train_micro_batch_size_per_gpu"] = «4»')
    assert facts.zero_stage is None  # set inside a function of another module: unknown here
    assert [r.value for r in facts.references] == ["configs/ds_z2.json"]


def test_accelerator_with_deepspeed_plugin():
    src = dedent('''
        from accelerate import Accelerator, DeepSpeedPlugin

        plugin = DeepSpeedPlugin(zero_stage=2, offload_optimizer_device="cpu", gradient_accumulation_steps=2)
        accelerator = Accelerator(mixed_precision="bf16", deepspeed_plugin=plugin)
        model, optimizer = accelerator.prepare(model, optimizer)
        accelerator.backward(loss)
    ''')
    facts = one(src)
    assert facts.framework.value == "accelerate"
    assert facts.mixed.value == "bf16"
    assert facts.zero_stage.value == 2
    assert facts.offload_optimizer.value is True
    assert where(facts.offload_optimizer) == span(src, 'offload_optimizer_device=«"cpu"»')
    assert facts.grad_accum.value == 2


LIGHTNING = dedent('''
    import lightning as L
    import torch
    from torch.utils.data import DataLoader
    from transformers import AutoModelForCausalLM

    NUM_NODES = 2


    class LitLM(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-1.5B")
            self.model.gradient_checkpointing_enable()

        def training_step(self, batch, batch_idx):
            outputs = self.model(**batch)
            return outputs.loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=3e-5)

        def train_dataloader(self):
            return DataLoader(self.train_set, batch_size=4, shuffle=True)


    trainer = L.Trainer(
        precision="bf16-mixed",
        accumulate_grad_batches=8,
        devices=8,
        num_nodes=NUM_NODES,
        strategy="deepspeed_stage_3_offload",
    )
    trainer.fit(LitLM())
''')


def test_lightning_trainer():
    facts = one(LIGHTNING)
    src = LIGHTNING
    assert facts.framework.value == "lightning"
    assert facts.lightning_precision.value == "bf16-mixed"
    assert where(facts.lightning_precision) == span(src, 'precision=«"bf16-mixed"»')
    assert facts.grad_accum.value == 8
    assert facts.world_size.value == 16
    assert where(facts.world_size) == span(src, "devices=«8»")
    assert facts.gpus_per_node.value == 8
    assert (facts.zero_stage.value, facts.offload_optimizer.value, facts.offload_params.value) == (3, True, True)
    assert facts.micro_batch.value == 4
    assert facts.grad_ckpt.value == 1
    assert facts.optimizer.value == "adamw"
    assert facts.keep_logits is None  # Lightning calls backward after training_step returns
    assert facts.model.value == "Qwen/Qwen2.5-1.5B"


def test_lightning_strategy_object_and_integer_precision():
    src = dedent('''
        import pytorch_lightning as pl
        from pytorch_lightning.strategies import DeepSpeedStrategy

        trainer = pl.Trainer(precision=16, devices=[0, 1, 2, 3], strategy=DeepSpeedStrategy(stage=2, offload_optimizer=True))
        trainer.fit(module)
    ''')
    facts = one(src)
    assert facts.lightning_precision.value == "16"
    assert facts.world_size.value == 4
    assert facts.zero_stage.value == 2
    assert facts.offload_optimizer.value is True


def test_config_items_set_under_an_option_that_is_off_are_left_out():
    src = dedent('''
        import argparse
        import deepspeed

        parser = argparse.ArgumentParser()
        parser.add_argument("--bf16", action="store_true")
        args = parser.parse_args()
        config = {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}}
        if args.bf16:
            config["bf16"] = {"enabled": True}
        else:
            config["fp16"] = {"enabled": True}
        engine, *_ = deepspeed.initialize(model=model, config=config)
    ''')
    facts = one(src)
    assert facts.ds_bf16 is None
    assert facts.ds_fp16.value is True
    assert facts.zero_stage.value == 2


def test_the_same_names_called_with_other_arguments_in_another_script():
    """What a call's qualified names make it (an engine, a plugin, an optimizer) is kept per set
    of names across calls and documents; what the call says comes from the call: two scripts
    that build the same aliased plugin and optimizer with other arguments get their own facts."""
    def script(stage: int, offload: str, fused: str) -> str:
        return dedent(f'''
            import argparse

            from accelerate import Accelerator as Acc
            from accelerate.utils import DeepSpeedPlugin as Plugin
            from torch.optim import AdamW as Opt
            from transformers import AutoModelForCausalLM


            def build(args):
                plugin = Plugin(zero_stage={stage}, offload_optimizer_device="{offload}")
                return Acc(mixed_precision="bf16", deepspeed_plugin=plugin)


            def main():
                parser = argparse.ArgumentParser()
                parser.add_argument("--lr", type=float, default=2e-5)
                args = parser.parse_args()
                accelerator = build(args)
                model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B")
                optimizer = Opt(model.parameters(), lr=args.lr, fused={fused})
                model, optimizer = accelerator.prepare(model, optimizer)
                for batch in []:
                    accelerator.backward(model(**batch).loss)
                    optimizer.step()
        ''')

    first = one(script(2, "cpu", "True"))
    second = one(script(3, "none", "False"))
    assert (first.zero_stage.value, first.offload_optimizer.value) == (2, True)
    assert (second.zero_stage.value, second.offload_optimizer.value) == (3, False)
    assert first.framework.value == second.framework.value == "accelerate"
    assert (first.optimizer.value, second.optimizer.value) == ("adamw-fused", "adamw")
