"""Run an ONNX model exported by Trident in onnxruntime and compare its output
with Trident's (tests/test_onnx.c writes both).

usage: test_onnx_check.py MODEL.onnx INPUT.bin IN_DTYPE IN_SHAPE EXPECTED.bin
  IN_DTYPE float32 or int64; IN_SHAPE comma-separated; EXPECTED.bin float32.
Passes when |ort - trident| <= 1e-5 + 1e-5 |trident| everywhere (fp32).
Exit 0 pass, 1 fail, 77 skip (onnxruntime not installed: scripts/install-deps).
"""
import sys

try:
    import numpy as np
    import onnxruntime as ort
except ImportError as e:
    print(f"onnxruntime is not importable ({e}); scripts/install-deps installs it into .deps/onnxruntime")
    sys.exit(77)

model, inp, in_dtype, in_shape, expected = sys.argv[1:6]
x = np.fromfile(inp, dtype=in_dtype).reshape([int(s) for s in in_shape.split(",")])
opts = ort.SessionOptions()
opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # the graph as exported
sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
(y,) = sess.run(["output"], {"input": x})
ref = np.fromfile(expected, dtype=np.float32)
if y.dtype != np.float32 or y.size != ref.size:
    print(f"onnxruntime gave {y.dtype} {y.shape}, Trident {ref.size} float32 values")
    sys.exit(1)
ref = ref.reshape(y.shape)
err = np.abs(y - ref)
bad = err > 1e-5 + 1e-5 * np.abs(ref)
print(f"output {y.shape}: max abs diff {err.max():.3g}, {int(bad.sum())} of {y.size} outside 1e-5")
if bad.any():
    for i in np.argwhere(bad)[:5]:
        print(f"  at {tuple(i)}: onnxruntime {y[tuple(i)]!r}, trident {ref[tuple(i)]!r}")
    sys.exit(1)
