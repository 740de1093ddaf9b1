"""An RL loop of the script's own trains on the completions it generates (simple_GRPO's
``grpo_vllm_one.py``: vLLM's ``SamplingParams(n=8, max_tokens=700)``, a DeepSpeed engine stepping on
prompt plus answer). The completion limit is the one length such a script states: memlint takes
it, where nothing else states a sequence length, as a lower bound of the training length, instead
of its usual 2,048 tokens."""

from __future__ import annotations

from tests.facts.facts_testing import dedent
from tests.project.test_config_launchers import _memory, _project, _runs

GRPO_ONE = dedent('''
    import deepspeed
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_path = "Qwen/Qwen2.5-7B"
    num_pre_Q = 8
    train_batch_size = {batch}

    ds_config = {{
        "train_micro_batch_size_per_gpu": train_batch_size,
        "gradient_accumulation_steps": 4,
        "optimizer": {{"type": "AdamW", "params": {{"lr": 1e-6}}}},
        "bf16": {{"enabled": True}},
        "zero_optimization": {{"stage": 2, "offload_optimizer": {{"device": "cpu"}}}},
    }}


    def gen_worker(queue):
        from vllm import LLM, SamplingParams
        llm = LLM(model=model_path, gpu_memory_utilization=0.5)
        sampling_params = SamplingParams(n=num_pre_Q, temperature=0.9, max_tokens={limit})
        for prompts in queue:
            yield llm.generate(prompts, sampling_params)


    def grpo_step(engine, batch):
        logits = engine(batch["inputs"]).logits
        return -(logits.log_softmax(-1).mean() * batch["rewards"]).mean()


    if __name__ == "__main__":
        tokenizer = AutoTokenizer.from_pretrained(model_path)
        model = AutoModelForCausalLM.from_pretrained(model_path, torch_dtype=torch.bfloat16)
        engine, optimizer, _, _ = deepspeed.initialize(config=ds_config, model=model,
                                                       model_parameters=model.parameters())
        for batch in rollouts():
            loss = grpo_step(engine, batch)
            engine.backward(loss)
            engine.step()
''')

README = dedent('''
    # simple GRPO

    ```bash
    CUDA_VISIBLE_DEVICES=2,3,4,5,6 deepspeed grpo_vllm_one.py
    ```
''')


def _files(batch: int = 8, limit: int = 700) -> dict[str, str]:
    return {"grpo_vllm_one.py": GRPO_ONE.format(batch=batch, limit=limit), "README.md": README}


def test_the_generation_limit_is_a_lower_bound_of_the_training_length(tmp_path):
    settings = _project(tmp_path, _files())
    [run] = _runs(settings, "grpo_vllm_one.py")
    assert run.plan.value("generation_len") == 700
    assert run.setup.seq_len == 700
    assert "completions' limit alone (SamplingParams(max_tokens=700))" in (run.lower_bound or "")
    assert not any(a.name == "seq_len" for a in run.assumed)  # no 2,048 assumed
    assert _memory(settings, "grpo_vllm_one.py") == []  # 8 x 700 tokens fit; before: 140.5 GiB at 2,048


def test_a_run_that_exceeds_even_at_the_limit_says_at_least(tmp_path):
    settings = _project(tmp_path, _files(batch=64, limit=4096))
    [finding] = _memory(settings, "grpo_vllm_one.py")
    assert finding.code == "MEM001" and "at least" in finding.message and "completions' limit alone" in finding.message


def test_a_length_the_script_states_wins_over_the_generation_limit(tmp_path):
    stated = GRPO_ONE.replace("tokenizer = AutoTokenizer.from_pretrained(model_path)",
                              "tokenizer = AutoTokenizer.from_pretrained(model_path, model_max_length=1024)")
    settings = _project(tmp_path, {"grpo_vllm_one.py": stated.format(batch=8, limit=700), "README.md": README})
    [run] = _runs(settings, "grpo_vllm_one.py")
    assert run.setup.seq_len == 1024
    assert run.lower_bound is None
