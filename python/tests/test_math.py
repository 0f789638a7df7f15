"""Math blocks from Python (trident.m, trident.math_function, trident.value_and_grad): a torch model with a math-block
layer gives the gradients of the same layer in torch; Trident tensors in and out; gradcheck in float64; errors."""
import pytest
import torch

import trident

LAYER = "relu(x @ W' + b)"


class MathLinear(torch.nn.Module):
    """torch.nn.Linear + ReLU, its forward one math block."""

    def __init__(self, n_in, n_out):
        super().__init__()
        lin = torch.nn.Linear(n_in, n_out)
        self.W, self.b = lin.weight, lin.bias

    def forward(self, x):
        return trident.m(LAYER, x=x, W=self.W, b=self.b)


def model(math_layer, seed):
    torch.manual_seed(seed)
    first = MathLinear(6, 16) if math_layer else torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU())
    return torch.nn.Sequential(first, torch.nn.Linear(16, 3))


def test_torch_model_with_a_math_layer_matches_torch(seed):
    a, b = model(True, seed), model(False, seed)
    torch.manual_seed(seed + 1)
    x, target = torch.randn(32, 6), torch.randint(0, 3, (32,))
    for net in (a, b):
        torch.nn.functional.cross_entropy(net(x), target).backward()
    ga = [p.grad for p in a.parameters()]
    gb = [p.grad for p in b.parameters()]
    assert len(ga) == len(gb) == 4
    for u, v in zip(ga, gb):
        torch.testing.assert_close(u, v, rtol=1e-5, atol=1e-6)
    assert a[0].W.grad.abs().sum() > 0  # the block's backward reached torch's leaves


def test_math_layer_trains_like_torch(seed):
    a, b = model(True, seed), model(False, seed)
    oa, ob = torch.optim.SGD(a.parameters(), lr=0.1), torch.optim.SGD(b.parameters(), lr=0.1)
    torch.manual_seed(seed + 2)
    x, target = torch.randn(64, 6), torch.randint(0, 3, (64,))
    for _ in range(20):
        for net, opt in ((a, oa), (b, ob)):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(x), target).backward()
            opt.step()
    torch.testing.assert_close(a(x), b(x), rtol=1e-4, atol=1e-5)


def test_trident_tensors_in_and_out(seed):
    trident.manual_seed(seed)
    x, W, b = trident.randn(5, 4), trident.randn(3, 4, requires_grad=True), trident.randn(3, requires_grad=True)
    y = trident.m(LAYER, x=x, W=W, b=b)
    assert isinstance(y, trident.Tensor) and y.shape == (5, 3)
    ref = (x @ W.t() + b).relu()
    assert (y - ref).abs().max().item() < 1e-6
    y.sum().backward()
    gW, gb = W.grad.numpy().copy(), b.grad.numpy().copy()
    W.grad, b.grad = None, None
    ref.sum().backward()
    assert abs(gW - W.grad.numpy()).max() < 1e-6 and abs(gb - b.grad.numpy()).max() < 1e-6


def test_torch_without_grad_and_numbers():
    x = torch.randn(4, 3)
    y = trident.m("clamp(x * s, lo, 1)", x=x, s=2, lo=-0.5)
    assert torch.is_tensor(y) and y.dtype == torch.float32
    torch.testing.assert_close(y, (x * 2).clamp(-0.5, 1))


def test_several_outputs():
    x = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    s, mx = trident.m("return x.sum(1), x.amax(1)", x=x)
    torch.testing.assert_close(s, x.sum(1))
    torch.testing.assert_close(mx, x.amax(1))
    (s.sum() + mx.sum()).backward()
    ref = x.detach().clone().requires_grad_()
    (ref.sum(1).sum() + ref.amax(1).sum()).backward()
    torch.testing.assert_close(x.grad, ref.grad)


def test_math_function_is_a_reusable_torch_function(seed):
    f = trident.math_function("tanh(x @ W' + b) * s")
    assert issubclass(f, torch.autograd.Function) and f.inputs == ("x", "W", "b", "s")
    assert trident.math_function("tanh(x @ W' + b) * s") is f  # compiled once
    torch.manual_seed(seed)
    args = (torch.randn(4, 3, dtype=torch.float64, requires_grad=True),
            torch.randn(2, 3, dtype=torch.float64, requires_grad=True),
            torch.randn(2, dtype=torch.float64, requires_grad=True), 1.5)
    assert torch.autograd.gradcheck(f.apply, args)


def test_math_function_double_backward(seed):
    f = trident.math_function("tanh(x) * w + x^3")
    torch.manual_seed(seed)
    args = (torch.randn(5, dtype=torch.float64, requires_grad=True),
            torch.randn(5, dtype=torch.float64, requires_grad=True))
    assert torch.autograd.gradgradcheck(f.apply, args)


def test_value_and_grad(seed):
    trident.manual_seed(seed)
    x, w = trident.randn(6, dtype=trident.float64), trident.randn(6, dtype=trident.float64)
    v, (gx, gw) = trident.value_and_grad("((x * w - 1)^2).mean()", ["x", "w"], x=x, w=w)
    xn, wn = x.numpy(), w.numpy()
    assert abs(v.item() - ((xn * wn - 1) ** 2).mean()) < 1e-12
    assert abs(gx.numpy() - 2 * (xn * wn - 1) * wn / 6).max() < 1e-12
    assert abs(gw.numpy() - 2 * (xn * wn - 1) * xn / 6).max() < 1e-12


def test_errors():
    with pytest.raises(TypeError, match="reads W"):
        trident.m(LAYER, x=torch.randn(2, 3), b=torch.randn(2))
    with pytest.raises(trident.TridentError, match="column"):
        trident.m("relu(x @@ W)", x=trident.randn(2))
    with pytest.raises(trident.TridentError, match="broadcast"):
        trident.m("x + b", x=trident.randn(4, 3), b=trident.randn(5))
    with pytest.raises(TypeError, match="argument 'x' must be a tensor or a number"):
        trident.m("x + 1", x="text")
