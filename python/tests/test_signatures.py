"""torch's call forms (positional, keywords, defaults, None) against torch's results, help() with real signatures
and examples, messages in Python's words, and the package's version, `python -m trident` and importing from
inside python/."""
import inspect
import os
import subprocess
import sys

import pytest

np = pytest.importorskip("numpy")
import torch

import trident

HERE = os.path.dirname(os.path.abspath(__file__))


def test_call_forms_match_torch(seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(4, 5, generator=g)
    q, k, v = (torch.randn(2, 3, 6, 8, generator=g) for _ in range(3))
    img, w = torch.randn(2, 3, 8, 8, generator=g), torch.randn(4, 3, 3, 3, generator=g)
    lw, lb = torch.randn(5, generator=g), torch.randn(5, generator=g)
    T, F = trident, torch.nn.functional
    X = T.tensor(x.numpy())
    t = lambda a: T.tensor(a.numpy())  # noqa: E731
    cases = {
        "sdpa causal": (T.scaled_dot_product_attention(t(q), t(k), t(v), is_causal=True),
                        (q @ k.transpose(-1, -2) / 8 ** 0.5).masked_fill(torch.ones(6, 6).triu(1).bool(),
                                                                           float("-inf")).softmax(-1) @ v),
        "sdpa scale=None": (T.scaled_dot_product_attention(t(q), t(k), t(v), None, 0.0, False, None),
                            (q @ k.transpose(-1, -2) / 8 ** 0.5).softmax(-1) @ v),
        "sdpa scale": (T.scaled_dot_product_attention(t(q), t(k), t(v), scale=0.5),
                       (q @ k.transpose(-1, -2) * 0.5).softmax(-1) @ v),
        "x.gelu()": (X.gelu(), F.gelu(x)),
        "gelu tanh": (T.gelu(X, approximate="tanh"), F.gelu(x, approximate="tanh")),
        "argmax(dim=1)": (X.argmax(dim=1), x.argmax(dim=1)),
        "argmax()": (X.argmax(), x.argmax()),
        "layer_norm": (T.layer_norm(X, (5,), t(lw), t(lb)), F.layer_norm(x, (5,), lw, lb)),
        "squeeze()": (X.reshape(1, 4, 1, 5).squeeze(), x.reshape(1, 4, 1, 5).squeeze()),
        "squeeze(2)": (X.reshape(1, 4, 1, 5).squeeze(2), x.reshape(1, 4, 1, 5).squeeze(2)),
        "flatten(1)": (X.reshape(2, 2, 5).flatten(1), x.reshape(2, 2, 5).flatten(1)),
        "dropout eval": (T.dropout(X, 0.5, training=False), F.dropout(x, 0.5, training=False)),
        "conv2d(x, w)": (T.conv2d(t(img), t(w)), F.conv2d(img, w)),
        "conv2d same": (T.conv2d(t(img), t(w), padding="same", stride=1), F.conv2d(img, w, padding="same")),
        "max_pool2d": (T.max_pool2d(t(img), 2), F.max_pool2d(img, 2)),
        "clamp(min=0)": (T.clamp(X, min=0), torch.clamp(x, min=0)),
        "x.clamp(max=0.1)": (X.clamp(max=0.1), x.clamp(max=0.1)),
        "var(x, 1)": (T.var(X, 1), torch.var(x, 1)),
        "var()": (X.var(), x.var()),
        "std(0, keepdim)": (X.std(0, keepdim=True), x.std(0, keepdim=True)),
        "max(dim=1).values": (X.max(dim=1).values, x.max(dim=1).values),
        "max(dim=1)[1]": (X.max(dim=1)[1], x.max(dim=1)[1]),
        "max()": (X.max(), x.max()),
        "min(1, keepdim=True)": (X.min(1, keepdim=True)[0], x.min(1, keepdim=True)[0]),
        "t()": (X.t(), x.t()),
        "float()": (T.arange(3).float(), torch.arange(3).float()),
        "stack": (T.stack([X, X], 1), torch.stack([x, x], 1)),
        "abs(x)": (T.abs(X), torch.abs(x)),
        "2 ** x": (2 ** X, 2 ** x),
        "where(c, x, 0.0)": (T.where(X > 0, X, 0.0), torch.where(x > 0, x, torch.tensor(0.0))),
        "sum(dim=(0, 1))": (X.sum(dim=(0, 1)), x.sum(dim=(0, 1))),
        "mean(1, keepdim=True)": (X.mean(1, keepdim=True), x.mean(1, keepdim=True)),
        "softmax(dim=-1)": (X.softmax(dim=-1), x.softmax(dim=-1)),
        "log_softmax(x, 1)": (T.log_softmax(X, 1), torch.log_softmax(x, 1)),
        "add alpha": (T.add(X, X, alpha=2), torch.add(x, x, alpha=2)),
        "x.sub(1.5)": (X.sub(1.5), x.sub(1.5)),
        "linear no bias": (T.linear(X, T.ones(3, 5)), F.linear(x, torch.ones(3, 5))),
        "transpose(0, 1)": (X.transpose(0, 1), x.transpose(0, 1)),
        "chunk": (X.chunk(2, dim=1)[1], x.chunk(2, dim=1)[1]),
        "split": (X.split(3)[1], x.split(3)[1]),
        "unsqueeze(-1)": (X.unsqueeze(-1), x.unsqueeze(-1)),
        "zeros dtype torch": (T.zeros(2, 3, dtype=torch.float64), torch.zeros(2, 3, dtype=torch.float64)),
        "ones((2, 3))": (T.ones((2, 3)), torch.ones((2, 3))),
        "full int": (T.full((2,), 3), torch.full((2,), 3)),
        "arange float": (T.arange(0, 1, 0.25), torch.arange(0, 1, 0.25)),
        "to(float16)": (X.to(T.float16).float(), x.to(torch.float16).float()),
        "to(torch.float64)": (X.to(torch.float64), x.to(torch.float64)),
        "to('cpu', float64)": (X.to("cpu", torch.float64), x.to("cpu", torch.float64)),
        "one_hot": (T.one_hot(T.tensor([0, 2]), 3), F.one_hot(torch.tensor([0, 2]), 3)),
    }
    for name, (got, want) in cases.items():
        assert tuple(got.shape) == tuple(want.shape), name
        assert got.dtype.name == str(want.dtype).removeprefix("torch."), name
        np.testing.assert_allclose(np.asarray(got.detach()), want.numpy(), rtol=2e-5, atol=2e-5, err_msg=name)


def test_help_shows_signatures_and_examples():
    sig = inspect.signature(trident.scaled_dot_product_attention)
    assert list(sig.parameters) == ["query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale"]
    assert sig.parameters["scale"].default is None and sig.parameters["is_causal"].default is False
    assert str(inspect.signature(trident.gelu)) == "(input, approximate='none')"
    assert str(inspect.signature(trident.Tensor.argmax)) == "(input, dim=None, keepdim=False)"
    for name in ("gelu", "conv2d", "layer_norm", "randn", "where", "max"):
        doc = getattr(trident, name).__doc__
        assert "Example" in doc and name in doc, name
    assert "Example" in trident.nn.functional.cross_entropy.__doc__
    assert "gelu" in dir(trident) and callable(trident.cat)


def test_messages_speak_python():
    with pytest.raises(TypeError, match=r"gelu\(\): argument 'input' must be a trident.Tensor, not int"):
        trident.gelu(3)
    with pytest.raises(TypeError, match=r"layer_norm\(\): argument 'weight'"):
        trident.layer_norm(trident.ones(2, 3), (3,), "w")
    with pytest.raises(ValueError, match="approximate must be 'none' or 'tanh'"):
        trident.gelu(trident.ones(2), approximate=False)
    with pytest.raises(ValueError, match="normalized_shape"):
        trident.layer_norm(trident.ones(2, 3), (4,))
    with pytest.raises(TypeError, match="unknown dtype"):
        trident.zeros(2, dtype="float128")
    if "vulkan:0" in trident.devices():
        with pytest.raises(trident.TridentError, match=r"\.to\(") as e:
            trident.ones(2).to("vulkan:0") + trident.ones(2)
        assert "td_" not in str(e.value)


def test_version_main_and_import_from_python_dir():
    assert trident.__version__ == trident._C.__version__ and trident.__version__.count(".") == 2
    env = dict(os.environ)
    out = subprocess.run([sys.executable, "-m", "trident"], capture_output=True, text=True, env=env, check=True)
    assert f"trident {trident.__version__}" in out.stdout and "devices: cpu" in out.stdout
    # from inside python/: the source package comes first on sys.path; it finds the built _C on the path
    pkg_dir = os.path.dirname(os.path.dirname(trident.__file__))
    env["PYTHONPATH"] = pkg_dir + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", "import trident; print(trident.ones(2).tolist(), trident.__file__)"],
                         cwd=os.path.join(HERE, ".."), capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert "[1.0, 1.0]" in out.stdout
