"""The torch bridge (trident.autograd.Function without a backward): a second backward after retain_graph=True,
double backward through Trident's second derivative, torch.autograd.gradcheck and gradgradcheck in float64; a
Function with a hand-written backward is once differentiable (torch says so)."""
import pytest
import torch

import trident


class Layer(trident.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, b):
        return (x @ w.t() + b).tanh() * x.sum()


class TwoOut(trident.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        return x.exp() * scale, (x * x).sum()


class Cube(trident.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.x = x
        return x * x * x

    @staticmethod
    def backward(ctx, gy):
        return gy * ctx.x * ctx.x * 3.0


def inputs(seed, *shapes):
    torch.manual_seed(seed)
    return tuple(torch.randn(*s, dtype=torch.float64, requires_grad=True) for s in shapes)


def test_retain_graph_second_backward(seed):
    x, w, b = inputs(seed, (4, 3), (2, 3), (2,))
    y = Layer.apply(x, w, b).sum()
    y.backward(retain_graph=True)
    first = [t.grad.clone() for t in (x, w, b)]
    y.backward()  # the second backward reuses Trident's graph
    for t, g in zip((x, w, b), first):
        torch.testing.assert_close(t.grad, 2 * g)


def test_gradcheck(seed):
    assert torch.autograd.gradcheck(Layer.apply, inputs(seed, (4, 3), (2, 3), (2,)))
    (x,) = inputs(seed + 1, (3, 2))
    assert torch.autograd.gradcheck(lambda t: TwoOut.apply(t, 0.5), (x,))


def test_double_backward(seed):
    x, w, b = inputs(seed, (4, 3), (2, 3), (2,))
    assert torch.autograd.gradgradcheck(Layer.apply, (x, w, b))
    # the gradient penalty form: d/dw of |dy/dx|^2, against torch's own
    y = Layer.apply(x, w, b).sum()
    (gx,) = torch.autograd.grad(y, x, create_graph=True)
    (gx.pow(2).sum()).backward()
    xr, wr, br = (t.detach().clone().requires_grad_() for t in (x, w, b))
    yr = ((xr @ wr.t() + br).tanh() * xr.sum()).sum()
    (gxr,) = torch.autograd.grad(yr, xr, create_graph=True)
    (gxr.pow(2).sum()).backward()
    torch.testing.assert_close(w.grad, wr.grad)
    torch.testing.assert_close(x.grad, xr.grad)


def test_hand_written_backward_is_once_differentiable(seed):
    (x,) = inputs(seed, (5,))
    assert torch.autograd.gradcheck(Cube.apply, (x,))
    (g,) = torch.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError):  # no second derivative: torch refuses (no grad_fn or once_differentiable)
        g.sum().backward()
