"""TRN006: the optimizer is created before PEFT or FSDP replaces the parameters."""

from __future__ import annotations


def test_optimizer_from_filtered_parameters_before_get_peft_model(lint, where):
    source = """\
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM


    def main(args):
        model = AutoModelForCausalLM.from_pretrained(args.model_name)
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)
        model = get_peft_model(model, LoraConfig(r=args.rank, task_type="CAUSAL_LM"))
        return model, optimizer
    """
    diagnostics = lint("TRN006", source)
    assert where(diagnostics) == [(9, 16, 9, 71)]
    assert "before `get_peft_model(...)` (line 10)" in diagnostics[0].message
    assert "nothing trains" in diagnostics[0].message


def test_fsdp2_fully_shard_after_the_optimizer(lint, where):
    source = """\
    import torch
    from torch.distributed.fsdp import fully_shard

    model = Transformer(model_args)
    optim = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for layer in model.layers:
        fully_shard(layer)
    fully_shard(model)
    for batch in loader:
        model(batch).sum().backward()
        optim.step()
        optim.zero_grad()
    """
    diagnostics = lint("TRN006", source)
    assert where(diagnostics) == [(5, 8, 5, 54)]
    assert "sharded ones" in diagnostics[0].message


def test_near_misses(lint):
    recreated = """\
    optimizer = torch.optim.AdamW(model.parameters())
    model = get_peft_model(model, config)
    optimizer = torch.optim.AdamW(model.parameters())
    """
    ddp_and_compile = """\
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    optimizer = torch.optim.AdamW(model.parameters())
    model = DDP(model, device_ids=[rank])
    model = torch.compile(model)
    """
    other_model = """\
    from peft import get_peft_model

    d_opt = torch.optim.Adam(discriminator.parameters())
    generator = get_peft_model(generator, config)
    """
    trained_then_reloaded = """\
    from peft import PeftModel

    def main(model, loader):
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        for batch in loader:
            model(**batch).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        model.save_pretrained("out")
        model = PeftModel.from_pretrained(model, "out")
        return model.generate(**inputs)
    """
    exclusive_branches = """\
    from peft import get_peft_model

    if args.full_finetune:
        optimizer = torch.optim.AdamW(model.parameters())
    if not args.full_finetune:
        model = get_peft_model(model, config)
        optimizer = torch.optim.AdamW(model.parameters())
    train(model, optimizer)
    """
    for source in (recreated, ddp_and_compile, other_model, trained_then_reloaded, exclusive_branches):
        assert lint("TRN006", source) == []


# PrasannS/rlhf-length-biases' rlhfutils/rl_utils.py, trimmed: one loader for several stages; the
# PPO policy's optimizer, then (when the reward model trains too) another model under the same name
# wrapped with LoRA
STAGE_LOADER = """\
import torch
from peft import LoraConfig, TaskType, get_peft_model
from transformers import Adafactor, AutoModelForSequenceClassification
from trl import AutoModelForCausalLMWithValueHead


def load_models(script_args, loadms="ppo", dev=0):
    model = optimizer = None
    if "ppo" in loadms:
        lora_config = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, task_type="CAUSAL_LM")
        model = AutoModelForCausalLMWithValueHead.from_pretrained(
            script_args.model_name, device_map={"": dev}, peft_config=lora_config, torch_dtype=torch.bfloat16)
        if script_args.adafactor:
            optimizer = Adafactor(filter(lambda p: p.requires_grad, model.parameters()),
                                  scale_parameter=False, relative_step=False, lr=script_args.learning_rate)
    if "train" in loadms:
        peft_config = LoraConfig(task_type=TaskType.SEQ_CLS, inference_mode=False, r=8, lora_alpha=32)
        model = AutoModelForSequenceClassification.from_pretrained(
            script_args.reward_model_name, num_labels=1, torch_dtype=torch.bfloat16, device_map=dev)
        model = get_peft_model(model, peft_config)
        return model
    return model, optimizer
"""


def test_a_wrap_of_another_model_under_the_same_name_is_not_the_optimizers(lint):
    assert lint("TRN006", STAGE_LOADER) == []  # before: "nothing trains", an error


def test_near_miss_the_same_loader_wrapping_the_policy_it_built_the_optimizer_for(lint, where):
    same_model = STAGE_LOADER.replace(
        "        model = AutoModelForSequenceClassification.from_pretrained(\n"
        "            script_args.reward_model_name, num_labels=1, torch_dtype=torch.bfloat16, device_map=dev)\n", "")
    [finding] = lint("TRN006", same_model)
    assert "get_peft_model" in finding.message


def test_near_miss_a_model_unpacked_again_from_its_fixture_is_the_same_model(lint):
    # mlfoundations/open_lm's tests/test_grad_accum.py: the optimizer is built from the fixture's
    # model, and the model comes back from the same fixture before FSDP wraps it
    source = """\
    import torch
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP


    def helper(accs):
        fixtures = []
        for _ in accs:
            args, model, data = create_train_fixtures()
            optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=args.lr)
            fixtures.append((args, model, data, optimizer))
        for fixture in fixtures:
            args, model, data, optimizer = fixture
            model = FSDP(model)
            train_one_epoch(model=model, data=data, optimizer=optimizer)
    """
    [finding] = lint("TRN006", source)
    assert "FSDP" in finding.message
