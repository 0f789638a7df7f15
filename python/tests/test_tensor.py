"""The trident package itself: creation, devices, to(device), numpy(), the generated ops against torch, backward
and no_grad, and errors as exceptions (never a crash of the interpreter)."""
import pytest

np = pytest.importorskip("numpy")
import torch

import trident


def tt(x):
    return trident.from_dlpack(x)


def test_ops_match_torch(seed):
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(3, 4, generator=g, dtype=torch.float64), torch.randn(3, 4, generator=g, dtype=torch.float64)
    w = torch.randn(4, 5, generator=g, dtype=torch.float64)
    cases = {
        "add": (tt(a) + tt(b), a + b), "rsub": (1.5 - tt(a), 1.5 - a), "mul_scalar": (tt(a) * 3, a * 3),
        "div": (tt(a) / tt(b), a / b), "relu": (tt(a).relu(), a.relu()), "exp": (trident.exp(tt(a)), a.exp()),
        "gelu": (tt(a).gelu(), torch.nn.functional.gelu(a)), "tanh": (tt(a).tanh(), a.tanh()),
        "matmul": (tt(a) @ tt(w), a @ w), "softmax": (tt(a).softmax(1), a.softmax(1)),
        "sum_dim": (trident.sum(tt(a), 1, keepdim=True), a.sum(1, keepdim=True)), "mean": (tt(a).mean(), a.mean()),
        "transpose": (tt(a).transpose(0, 1).contiguous(), a.t()), "clamp": (tt(a).clamp(-0.5, 0.5), a.clamp(-0.5, 0.5)),
        "cat": (trident.cat([tt(a), tt(b)], 1), torch.cat([a, b], 1)),
        "keyword_args": (trident.clamp(tt(a), max=0.1, min=-0.1), a.clamp(-0.1, 0.1)),
    }
    for name, (got, want) in cases.items():
        assert got.shape == tuple(want.shape), name
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12, err_msg=name)


def test_creation_and_dtypes():
    assert trident.zeros(2, 3).tolist() == [[0.0] * 3] * 2
    assert trident.ones((2,), dtype=trident.int64).dtype == trident.int64
    assert trident.arange(5).tolist() == [0, 1, 2, 3, 4] and trident.arange(5).dtype == trident.int64
    t = trident.tensor([[1, 2], [3, 4]])
    assert t.dtype == trident.int64 and t.shape == (2, 2)
    assert trident.tensor([True, False]).tolist() == [True, False]
    assert trident.tensor([1.5]).dtype == trident.float32
    assert repr(trident.bool) == "trident.bool"


def test_backward_and_no_grad(seed):
    g = torch.Generator().manual_seed(seed)
    xa, wa = torch.randn(5, 3, generator=g, dtype=torch.float64), torch.randn(3, 2, generator=g, dtype=torch.float64)
    x = trident.tensor(xa.numpy(), dtype=trident.float64)
    w = trident.tensor(wa.numpy(), dtype=trident.float64, requires_grad=True)
    loss = trident.mean((x @ w).tanh() * 2.0)
    loss.backward()
    wt = wa.clone().requires_grad_(True)
    ((xa @ wt).tanh() * 2.0).mean().backward()
    np.testing.assert_allclose(w.grad.numpy(), wt.grad.numpy(), rtol=1e-12, atol=1e-14)
    with trident.no_grad():
        y = x @ w
    assert not y.requires_grad
    assert (x @ w).requires_grad
    w.zero_grad()
    assert w.grad is None
    (gx,) = trident.autograd.grad(trident.sum(x * w.sum()), [w])
    np.testing.assert_allclose(gx.numpy(), np.full((3, 2), xa.sum().item()), rtol=1e-12)


def test_devices_and_to():
    devs = trident.devices()
    assert devs[0] == "cpu"
    assert trident.device("cpu") == "cpu"
    t = trident.arange(6, dtype=trident.float32).reshape(2, 3)
    for d in devs:
        u = t.to(d)
        assert u.device == d
        assert (u * 2).to("cpu").tolist() == [[0, 2, 4], [6, 8, 10]]
    assert t.to(dtype=trident.float16).dtype == trident.float16


def test_errors_are_exceptions():
    with pytest.raises(trident.TridentError, match="'cuda:99'|cuda"):
        trident.zeros(2, device="cuda:99")
    with pytest.raises(trident.TridentError, match="unknown|tpu"):
        trident.device("tpu")
    with pytest.raises(trident.TridentError, match="add"):
        trident.ones(2) + trident.ones(3)
    with pytest.raises(TypeError, match="must be a number"):
        trident.ones(2) * "a"
    with pytest.raises(ValueError, match="at most 8"):
        trident.zeros(*([1] * 9))
    with pytest.raises(TypeError, match="bfloat16"):
        trident.ones(2, dtype=trident.bfloat16).numpy()
    with pytest.raises(trident.TridentError):
        trident.ones(2).item()
    assert trident.ones(1).item() == 1.0  # the library still works after the errors
