#!/usr/bin/env python
"""Op-level probe on a GPU: which attention kernels run, what each op returns, what it allocates inside.

Why: ``bench/gpu_truth.py`` showed calibration rows whose real peak differs from the estimate
(T5 bf16, Falcon-7B LoRA with checkpointing, Falcon-H1). PyTorch's tracker sees op results only;
this probe logs, for one forward+backward in train mode of each setup with fewer layers, every
large op's result and the bytes it allocated beyond its result (``max_memory_allocated`` during
the op), which is what the tracker cannot see (a kernel's workspace).

    python bench/gpu_op_probe.py      # with a GPU: writes $OUT (or /tmp)/probe_cuda.json

Its run on an H200 (torch 2.11, transformers 5.17) is ``tests/calibration/gpu_op_probe.json``.
Without a GPU it runs the T5 and Falcon-H1 setups on the CPU, smaller (slow: minutes)."""
import json, os, sys, time, collections
import torch
from torch.utils._python_dispatch import TorchDispatchMode
import transformers

DEV = "cuda" if torch.cuda.is_available() else "cpu"
SMALL = DEV == "cpu"
MODELS = json.load(open("tests/calibration/cases.json"))["models"]
MiB = 2**20


def nbytes(x):
    outs = x if isinstance(x, (tuple, list)) else (x,)
    return sum(o.numel() * o.element_size() for o in outs if isinstance(o, torch.Tensor))


class Log(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []
        self.counts = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func)
        if DEV == "cuda":
            torch.cuda.synchronize()
            before = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        out = func(*args, **(kwargs or {}))
        ob = nbytes(out)
        inner = 0
        if DEV == "cuda":
            torch.cuda.synchronize()
            inner = torch.cuda.max_memory_allocated() - before - ob
        self.counts[name] += 1
        if inner > 32 * MiB or ob > 32 * MiB or "attention" in name or "dropout" in name:
            shapes = [tuple(a.shape) + (str(a.dtype),) for a in args if isinstance(a, torch.Tensor)][:4]
            self.ops.append({"op": name, "out_MiB": round(ob / MiB, 1), "inner_MiB": round(inner / MiB, 1), "in": str(shapes)[:200]})
        return out


def run(tag, model_key, overrides, B, T, lora=None, gc=False, seq2seq=False):
    cfg = dict(MODELS[model_key])
    cfg.update(overrides)
    mt = cfg.pop("model_type")
    config = transformers.AutoConfig.for_model(mt, **{k: v for k, v in cfg.items() if k not in ("architectures", "auto_map")})
    cls = transformers.AutoModelForSeq2SeqLM if seq2seq else transformers.AutoModelForCausalLM
    model = cls.from_config(config, attn_implementation="sdpa").to(DEV, torch.bfloat16)
    model.train()
    if gc:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if lora:
        import peft
        if gc:
            model.enable_input_require_grads()
        model = peft.get_peft_model(model, peft.LoraConfig(task_type="SEQ_2_SEQ_LM" if seq2seq else "CAUSAL_LM", **lora))
    ids = torch.randint(0, 1000, (B, T), device=DEV)
    log = Log()
    t0 = time.time()
    if DEV == "cuda":
        torch.cuda.reset_peak_memory_stats()
    with log:
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
    res = {"tag": tag, "B": B, "T": T, "wall_s": round(time.time() - t0, 2), "n_ops": sum(log.counts.values()),
           "sdpa_ops": {k: v for k, v in log.counts.items() if "attention" in k or "sdp" in k},
           "ops": log.ops[:400]}
    if DEV == "cuda":
        res["sdp_flags"] = {"flash": torch.backends.cuda.flash_sdp_enabled(), "mem_eff": torch.backends.cuda.mem_efficient_sdp_enabled(),
                            "math": torch.backends.cuda.math_sdp_enabled(), "cudnn": torch.backends.cuda.cudnn_sdp_enabled()}
    del model, out
    if DEV == "cuda":
        torch.cuda.empty_cache()
    return res


results = []
jobs = [
    ("t5-base-bf16", "google-t5/t5-base", {"num_layers": 1, "num_decoder_layers": 1}, (2, 128) if SMALL else (8, 512), {}, True),
    ("falcon7b-lora-gc", "tiiuae/falcon-7b", {"num_hidden_layers": 1}, (1, 256) if SMALL else (4, 2048),
     {"lora": {"r": 16, "lora_alpha": 32, "lora_dropout": 0.05, "target_modules": ["query_key_value"]}, "gc": True}, False),
    ("falcon7b-full", "tiiuae/falcon-7b", {"num_hidden_layers": 1}, (1, 256) if SMALL else (4, 2048), {}, False),
    ("falcon-h1-bf16", "tiiuae/Falcon-H1-0.5B (layer sizes)", {"num_hidden_layers": 1}, (1, 256) if SMALL else (2, 1024), {}, False),
]
for tag, key, ov, (B, T), kw, s2s in jobs:
    if SMALL and tag.startswith("falcon7b"):
        continue
    try:
        results.append(run(tag, key, ov, B, T, seq2seq=s2s, **kw))
        r = results[-1]
        print(tag, "ok", r["sdpa_ops"], r["wall_s"], flush=True)
        for o in r["ops"]:
            if o["inner_MiB"] > 32 or "attention" in o["op"]:
                print("   ", o["op"], o["out_MiB"], o["inner_MiB"], o["in"][:120], flush=True)
    except Exception as e:  # noqa: BLE001
        results.append({"tag": tag, "error": f"{type(e).__name__}: {e}"[:500]})
        print(tag, "error", e, flush=True)
    out = os.environ.get("OUT", "/tmp")
    json.dump({"device": DEV, "torch": torch.__version__, "transformers": transformers.__version__, "results": results},
              open(os.path.join(out, f"probe_{DEV}.json"), "w"), indent=1)
