"""PyTorch twin of bench/bench_attention.c: torch.nn.functional.scaled_dot_product_attention forward and
forward+backward, median ms over --iters calls after 3 warm-up calls, synchronized around each call.
    python3 bench/torch_attention.py [--device cuda] [--dtype bf16|f16|f32] [--batch 8] [--heads 12] [--seq 1024]
                                     [--head-dim 64] [--causal 1] [--iters 20]
Prints one JSON line with the same keys as bench_attention."""
import argparse
import json
import time

import torch
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--device", default="cuda")
p.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "f32"])
for k, v in (("batch", 8), ("heads", 12), ("seq", 1024), ("head-dim", 64), ("causal", 1), ("iters", 20)):
    p.add_argument("--" + k, type=int, default=v)
a = p.parse_args()
dt = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[a.dtype]
shape = (a.batch, a.heads, a.seq, a.head_dim)
g = torch.Generator(device=a.device).manual_seed(1234)
x = [torch.randn(shape, device=a.device, generator=g).to(dt).requires_grad_() for _ in range(3)]
dy = torch.randn(shape, device=a.device, generator=g).to(dt)


def sync():
    if a.device.startswith("cuda"):
        torch.cuda.synchronize()


def step(backward):
    y = F.scaled_dot_product_attention(x[0], x[1], x[2], is_causal=bool(a.causal))
    if backward:
        torch.autograd.grad(y, x, dy)
    sync()


def run(backward):
    ms = []
    for i in range(a.iters + 3):
        t0 = time.perf_counter()
        step(backward)
        if i >= 3:
            ms.append((time.perf_counter() - t0) * 1e3)
    return sorted(ms)[len(ms) // 2]


fwd, both = run(False), run(True)
fl = 4.0 * a.batch * a.heads * a.seq * a.seq * a.head_dim * (0.5 if a.causal else 1)
print(json.dumps({"impl": "torch-sdpa " + torch.__version__, "device": a.device, "dtype": a.dtype,
                  "shape": list(shape), "causal": bool(a.causal), "fwd_ms": round(fwd, 4), "fwd_bwd_ms": round(both, 4),
                  "fwd_tflops": round(fl / fwd * 1e-9, 2), "fwd_bwd_tflops": round(3.5 * fl / both * 1e-9, 2)}))
