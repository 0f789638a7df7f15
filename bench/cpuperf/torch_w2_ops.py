#!/usr/bin/python3
"""PyTorch CPU twin of w2_profile.c and cpu_kernels.c: the W2 ops one by one (conv2d forward and its two
backward products, max_pool2d 2x2 and its backward, relu, Adam over W2's parameters), a whole W2 training
step, and softmax/log_softmax/layer_norm rows of 4096. Medians of REPS runs after WARMUP.
Prints "TORCH name ms" lines. Usage: torch_w2_ops.py [threads]"""
import statistics
import sys
import time

import torch
import torch.nn.functional as F

WARMUP, REPS = 3, 11


def median_ms(fn, clock=time.perf_counter):
    for _ in range(WARMUP):
        fn()
    t = []
    for _ in range(REPS):
        t0 = clock()
        fn()
        t.append(clock() - t0)
    return 1e3 * statistics.median(t)


def main():
    if len(sys.argv) > 1:
        torch.set_num_threads(int(sys.argv[1]))
    print(f"TORCH version {torch.__version__} threads {torch.get_num_threads()}")
    torch.manual_seed(0)
    B = 128
    x1 = torch.rand(B, 1, 28, 28)
    w1, b1 = torch.randn(32, 1, 3, 3) * 0.3, torch.randn(32) * 0.3
    x2 = torch.rand(B, 32, 14, 14)
    w2, b2 = torch.randn(64, 32, 3, 3) * 0.05, torch.randn(64) * 0.05
    dy1, dy2 = torch.randn(B, 32, 28, 28), torch.randn(B, 64, 14, 14)
    conv_bw = torch.ops.aten.convolution_backward
    res = {}
    res["conv1_fwd"] = median_ms(lambda: F.conv2d(x1, w1, b1, padding=1))
    res["conv2_fwd"] = median_ms(lambda: F.conv2d(x2, w2, b2, padding=1))
    res["conv1_bw_weight"] = median_ms(
        lambda: conv_bw(dy1, x1, w1, [32], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [False, True, True]))
    res["conv2_bw_weight"] = median_ms(
        lambda: conv_bw(dy2, x2, w2, [64], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [False, True, True]))
    res["conv2_bw_input"] = median_ms(
        lambda: conv_bw(dy2, x2, w2, [64], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, False, False]))
    r1, r2 = torch.relu(torch.randn(B, 32, 28, 28)), torch.relu(torch.randn(B, 64, 14, 14))
    res["pool1_fwd"] = median_ms(lambda: F.max_pool2d_with_indices(r1, 2, 2))
    res["pool2_fwd"] = median_ms(lambda: F.max_pool2d_with_indices(r2, 2, 2))
    p1, i1 = F.max_pool2d_with_indices(r1, 2, 2)
    p2, i2 = F.max_pool2d_with_indices(r2, 2, 2)
    res["pool1_bw"] = median_ms(lambda: torch.ops.aten.max_pool2d_with_indices_backward(
        torch.randn_like(p1), r1, [2, 2], [2, 2], [0, 0], [1, 1], False, i1))
    res["pool2_bw"] = median_ms(lambda: torch.ops.aten.max_pool2d_with_indices_backward(
        torch.randn_like(p2), r2, [2, 2], [2, 2], [0, 0], [1, 1], False, i2))
    c1 = torch.randn(B, 32, 28, 28)
    res["relu1_fwd"] = median_ms(lambda: torch.relu(c1))
    res["relu1_bw"] = median_ms(lambda: torch.ops.aten.threshold_backward(dy1, r1, 0))
    rows = torch.randn(4096, 4096)
    res["softmax_4096x4096"] = median_ms(lambda: torch.softmax(rows, -1))
    res["log_softmax_4096x4096"] = median_ms(lambda: torch.log_softmax(rows, -1))
    lw, lb = torch.randn(4096), torch.randn(4096)
    res["layer_norm_4096x4096"] = median_ms(lambda: F.layer_norm(rows, (4096,), lw, lb))
    logits, tgt = torch.randn(B, 10, requires_grad=True), torch.randint(0, 10, (B,))
    res["xent_fwd_bw_128x10"] = median_ms(lambda: F.cross_entropy(logits, tgt).backward())
    big_logits, big_tgt = torch.randn(4096, 4096, requires_grad=True), torch.randint(0, 4096, (4096,))
    res["xent_fwd_bw_4096x4096"] = median_ms(lambda: F.cross_entropy(big_logits, big_tgt).backward())

    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(3136, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    y = torch.randint(0, 10, (B,))

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x1), y).backward()
        opt.step()

    res["w2_step"] = median_ms(step)  # leaves gradients in place for the Adam-only timing
    res["w2_step_cpu"] = median_ms(step, time.process_time)  # process CPU time, as w2_profile's step_cpu
    res["adam_w2_params"] = median_ms(opt.step)
    for k, v in res.items():
        print(f"TORCH {k} {v:.3f}")


if __name__ == "__main__":
    main()
