#!/usr/bin/python3
"""The workloads of bench_cpu.c through PyTorch on the CPU (Debian's python3-torch):
sgemm 512/1024/2048, add 2^24, softmax of [4096,4096] over rows, sum 2^24, float32.
Median of REPS timed runs after WARMUP, on as many threads as Trident uses. Prints "RESULT op torch value unit" lines."""
import os
import statistics
import sys
import time

import torch

WARMUP, REPS = 2, 9


def median_s(fn, reps):
    for _ in range(WARMUP):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    quick = "--quick" in sys.argv
    reps = 3 if quick else REPS
    torch.manual_seed(0)
    # the same thread count as Trident's OpenMP default (all logical CPUs, or OMP_NUM_THREADS)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", os.cpu_count())))
    print(f"RESULT torch_version {torch.__version__}")
    print(f"RESULT torch_threads {torch.get_num_threads()}")
    for n in (512, 1024, 2048)[: 2 if quick else 3]:
        a, b = torch.rand(n, n), torch.rand(n, n)
        t = median_s(lambda: torch.matmul(a, b), reps)
        print(f"RESULT sgemm_{n} torch {2 * n ** 3 / t * 1e-9:.2f} GFLOP/s")
    n = 1 << 24
    a, b = torch.rand(n), torch.rand(n)
    x = torch.rand(4096, n // 4096)
    for name, fn, bytes_per_elem in (("add", lambda: torch.add(a, b), 12),
                                     ("softmax", lambda: torch.softmax(x, -1), 8),
                                     ("sum", lambda: torch.sum(a), 4)):
        t = median_s(fn, reps)
        print(f"RESULT {name} torch {bytes_per_elem * n / t * 1e-9:.2f} GB/s")


if __name__ == "__main__":
    main()
