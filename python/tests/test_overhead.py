"""bench/python_overhead.py's per-op row runs and stays within twice the goal (1.5 us above the C dispatch, in CPU
time), and the W2 model it trains is torch's: Unflatten and the layer shapes."""
import importlib.util
import os

import pytest

import trident

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "python_overhead.py")


def load_bench():
    spec = importlib.util.spec_from_file_location("python_overhead", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_per_op_overhead():
    op = load_bench().per_op(n=5000, reps=5)
    assert op["raw"] > 0
    assert op["op"] - op["raw"] < 3.0, op
    assert op["method"] - op["raw"] < 3.0, op


def test_w2_model_shapes():
    model = load_bench().w2("cpu")
    x = trident.rand(4, 784)
    assert model(x).shape == (4, 10)
    assert sum(p.numel() for p in model.parameters()) == 421642  # WORKLOADS.md's W2: 0.42 M parameters


def test_unflatten_as_torch():
    torch = pytest.importorskip("torch")
    x = torch.randn(2, 12, 3)
    u = trident.nn.Unflatten(1, (3, 4))
    assert repr(u) == "Unflatten(dim=1, unflattened_size=(3, 4))"
    assert torch.equal(torch.from_dlpack(u(trident.from_dlpack(x))), torch.nn.Unflatten(1, (3, 4))(x))
    assert trident.nn.Unflatten(-1, (1, 3))(trident.from_dlpack(x)).shape == (2, 12, 1, 3)
