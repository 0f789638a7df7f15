#!/usr/bin/env python3
"""Mixed-precision training parity (issue 10): the GPT model trained from one seed on real text in fp32, with
`--amp bf16`, with `--param-dtype bf16` (bf16 parameters and gradients, float32 master weights) and with
`--amp fp16` (GradScaler), each run's per-step losses compared with fp32's.

  bf16, bf16-params: the loss curve follows fp32's within --tol (relative, default 2%) at every step, the curves
        smoothed over a --window of steps (default 10) so that one step's rounding does not decide;
  fp16: every loss is finite and the last window's mean is below the first's by at least 1 nat (it learns,
        it does not diverge); its distance from fp32 is printed.

usage: amp_parity.py TRIDENT DEVICE STEPS [trident train options...]
The text is the machine's licence texts and the repository's docs (real text, no download).
"""
import csv
import glob
import math
import os
import subprocess
import sys
import tempfile


MODES = {"fp32": [], "bf16": ["--amp", "bf16"], "bf16-params": ["--param-dtype", "bf16"], "fp16": ["--amp", "fp16"]}


def train(trident, device, steps, extra, mode, text, tmp):
    log = os.path.join(tmp, f"steps-{mode}.csv")
    cmd = [trident, "train", "--model", "gpt", "--device", device, "--text", text, "--epochs", "1",
           "--steps", str(steps), "--seed", "1", "--log-steps", log,
           "--checkpoint", os.path.join(tmp, f"ckpt-{mode}.safetensors")] + extra + MODES[mode]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {r.returncode}:\n{r.stdout[-2000:]}")
    with open(log) as f:
        return [float(row["loss"]) for row in csv.DictReader(f)]


def smooth(xs, w):
    return [sum(xs[max(0, i - w + 1):i + 1]) / (i + 1 - max(0, i - w + 1)) for i in range(len(xs))]


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    trident, device, steps, extra = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    tol, window = float(os.environ.get("TD_AMP_TOL", "0.02")), int(os.environ.get("TD_AMP_WINDOW", "10"))
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    with tempfile.TemporaryDirectory() as tmp:
        text = os.path.join(tmp, "text.txt")
        with open(text, "wb") as out:
            for p in sorted(glob.glob("/usr/share/common-licenses/*")) + [os.path.join(root, "README.md")] + \
                    sorted(glob.glob(os.path.join(root, "docs", "*.md"))):
                if os.path.isfile(p):
                    with open(p, "rb") as f:
                        out.write(f.read())
        curves = {mode: train(trident, device, steps, extra, mode, text, tmp) for mode in MODES}
    ref = smooth(curves["fp32"], window)
    failed = False
    for mode in ("bf16", "bf16-params", "fp16"):
        xs = curves[mode]
        if len(xs) != len(ref):
            print(f"FAIL {mode}: {len(xs)} steps logged, fp32 logged {len(ref)}")
            failed = True
            continue
        s = smooth(xs, window)
        rel = [abs(a - b) / abs(b) for a, b in zip(s, ref)]
        worst = max(range(len(rel)), key=rel.__getitem__)
        print(f"{device} {mode}: fp32 loss {ref[0]:.4f} -> {ref[-1]:.4f}, {mode} {s[0]:.4f} -> {s[-1]:.4f}; "
              f"largest gap {100 * rel[worst]:.2f}% at step {worst + 1} (window {window})")
        if mode != "fp16" and rel[worst] > tol:
            print(f"FAIL {mode}: the curve leaves fp32's by more than {100 * tol:g}%")
            failed = True
        if mode == "fp16" and (not all(math.isfinite(x) for x in xs) or s[-1] > s[window - 1] - 1.0):
            print("FAIL fp16: a loss is not finite, or the loss did not fall by 1 nat (diverged or stalled)")
            failed = True
    print("FAIL" if failed else "ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
