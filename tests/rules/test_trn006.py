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
