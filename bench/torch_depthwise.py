#!/usr/bin/python3
"""PyTorch CPU twin of bench/bench_depthwise.c: depthwise conv2d (groups = C) forward and forward+backward,
float32, the same shapes; one JSON line per shape (median and min ms over --iters after 2 warm-ups).
Threads: torch.set_num_threads(OMP_NUM_THREADS or 1).
    /usr/bin/python3 bench/torch_depthwise.py [--iters 20] [--shape i]
"""
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

SHAPES = [(8, 32, 112, 112, 3, 1), (8, 64, 112, 112, 3, 2), (8, 128, 56, 56, 3, 1),
          (8, 256, 28, 28, 3, 1), (8, 512, 14, 14, 3, 1), (8, 96, 56, 56, 5, 1)]


def run(s, backward):
    n, c, h, w, k, st = s
    x = torch.randn(n, c, h, w, requires_grad=backward)
    wt = torch.randn(c, 1, k, k, requires_grad=backward)
    b = torch.zeros(c, requires_grad=backward)
    t0 = time.perf_counter()
    with torch.set_grad_enabled(backward):
        y = F.conv2d(x, wt, b, stride=st, padding=k // 2, groups=c)
        if backward:
            y.sum().backward()
    return (time.perf_counter() - t0) * 1e3


def main():
    iters = int(sys.argv[sys.argv.index("--iters") + 1]) if "--iters" in sys.argv else 20
    only = int(sys.argv[sys.argv.index("--shape") + 1]) if "--shape" in sys.argv else -1
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    for i, s in enumerate(SHAPES):
        if only >= 0 and i != only:
            continue
        for bw in (False, True):
            for _ in range(2):
                run(s, bw)
            t = [run(s, bw) for _ in range(iters)]
            print(json.dumps({"impl": "torch " + torch.__version__, "shape": list(s[:4]), "k": s[4], "stride": s[5],
                              "pass": "fwd+bwd" if bw else "fwd", "median_ms": round(statistics.median(t), 3),
                              "min_ms": round(min(t), 3), "threads": torch.get_num_threads()}), flush=True)


if __name__ == "__main__":
    main()
