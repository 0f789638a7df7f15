"""The Python package's cost above the C library (issue 24's speed goals), printed as two rows:

  per-op overhead: a + b on 1-element tensors through trident.Tensor, minus the same op through the raw C binding
                   (trident._C.add, i.e. the C dispatch plus CPython's cheapest call), in this process's CPU time
                   (time.process_time: a loaded machine's scheduling noise, tens of us, would hide a 1 us
                   difference in wall time), the minimum of repeated runs; goal <= 1.5 us
  W2 step:         the W2 CNN (WORKLOADS.md: batch 128, Adam) trained from Python with trident.nn / trident.optim,
                   against `trident bench --only W2-cnn`'s C step on the same device; goal <= 1.10x

Usage: python3 bench/python_overhead.py [--device cpu] [--steps N] [--trident build/bin/trident]
(PYTHONPATH=build/python for a build tree.) The best of repeated timings is reported."""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

import trident
import trident.nn as nn


def per_op(n=20000, reps=9):
    """{"raw", "op", "method"}: microseconds per call of _C.add, a + b and a.add(b)."""
    a, b = trident.ones(1), trident.ones(1)
    ha, hb, cadd = a._h, b._h, trident._C.add

    def raw():
        for _ in range(n):
            cadd(ha, hb)

    def wrapped():
        for _ in range(n):
            a + b

    def method():
        for _ in range(n):
            a.add(b)

    out = {}
    for name, f in (("raw", raw), ("op", wrapped), ("method", method)):
        ts = []
        for _ in range(reps):
            t0 = time.process_time()
            f()
            ts.append((time.process_time() - t0) / n * 1e6)
        out[name] = min(ts)
    return out


def w2(device):
    return nn.Sequential(nn.Unflatten(1, (1, 28, 28)), nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10)).to(device)


def python_step_ms(device, steps):
    trident.manual_seed(0)
    model = w2(device)
    opt = trident.optim.Adam(model.parameters(), lr=1e-3)
    xs = [trident.rand(128, 784, device=device) for _ in range(4)]
    ys = [trident.randint(0, 10, (128,), device=device) for _ in range(4)]

    def step(i):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(xs[i % 4]), ys[i % 4])
        loss.backward()
        opt.step()
        return loss

    for i in range(3):
        step(i)
    trident.synchronize(device)
    ts = []
    for i in range(steps):
        t0 = time.perf_counter()
        step(i)
        trident.synchronize(device)
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def c_step_ms(exe, device, steps):
    out = subprocess.run([exe, "bench", "--only", "W2-cnn", "--backends", device, "--reps", str(steps)],
                         capture_output=True, text=True, check=True).stdout
    m = re.search(r"W2-cnn on \S+: ([0-9.]+) ms/step", out)
    if not m:
        sys.exit(f"python_overhead: no W2-cnn row in `trident bench`'s output:\n{out}")
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--trident", default=os.path.join(os.path.dirname(__file__), "..", "build", "bin", "trident"))
    ap.add_argument("--skip-w2", action="store_true", help="only the per-op row")
    args = ap.parse_args()
    op = per_op()
    over = op["op"] - op["raw"]
    print(f"per-op overhead: a + b {op['op']:.3f} us, a.add(b) {op['method']:.3f} us, raw C binding "
          f"{op['raw']:.3f} us -> {over:.3f} us above the C dispatch (goal <= 1.5 us) "
          f"{'ok' if over <= 1.5 else 'MISS'}")
    if args.skip_w2:
        return
    # interleave C and Python timings so that a change in the machine's load hits both
    py, c = [], []
    for _ in range(2):
        c.append(c_step_ms(args.trident, args.device, args.steps))
        py.append(python_step_ms(args.device, args.steps))
    pm, cm = min(py), min(c)
    print(f"W2 step on {args.device}: Python {pm:.3f} ms, C (trident bench) {cm:.3f} ms -> {pm / cm:.3f}x "
          f"(goal <= 1.10x) {'ok' if pm <= 1.10 * cm else 'MISS'}")


if __name__ == "__main__":
    main()
