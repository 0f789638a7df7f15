"""Trident ops inside PyTorch models (trident.autograd.Function): a model trains with them, and every parameter's
gradient matches the same model written in torch alone within 1e-6, with Trident's autograd (no backward given)
and with a backward written in Trident ops."""
import pytest
import torch

import trident


class TridentGelu(trident.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.gelu()  # backward: Trident's autograd of forward


class TridentLayerNorm(trident.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, b):
        return trident.layer_norm(x, (x.shape[-1],), w, b, 1e-5)


class TridentCube(trident.autograd.Function):
    """x^3 with its backward written by hand in Trident ops."""

    @staticmethod
    def forward(ctx, x):
        ctx.x = x
        return x * x * x

    @staticmethod
    def backward(ctx, gy):
        return gy * ctx.x * ctx.x * 3.0


class Net(torch.nn.Module):
    def __init__(self, trident_ops):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 16)
        self.ln_w = torch.nn.Parameter(torch.ones(16) + 0.1 * torch.randn(16))
        self.ln_b = torch.nn.Parameter(0.1 * torch.randn(16))
        self.fc2 = torch.nn.Linear(16, 3)
        self.trident_ops = trident_ops

    def forward(self, x):
        h = self.fc1(x)
        if self.trident_ops:
            h = TridentLayerNorm.apply(h, self.ln_w, self.ln_b)
            h = TridentGelu.apply(h)
            h = TridentCube.apply(h * 0.5)
        else:
            h = torch.nn.functional.layer_norm(h, (16,), self.ln_w, self.ln_b, 1e-5)
            h = torch.nn.functional.gelu(h)
            h = (h * 0.5) ** 3
        return self.fc2(h)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_trains_with_torch_grads(dtype, seed):
    torch.manual_seed(seed)
    ours = Net(True).to(dtype)
    ref = Net(False).to(dtype)
    ref.load_state_dict(ours.state_dict())
    x = torch.randn(32, 6, dtype=dtype)
    y = torch.randn(32, 3, dtype=dtype)
    tol = 1e-6 if dtype == torch.float64 else 1e-5
    opts = [torch.optim.SGD(m.parameters(), lr=0.3) for m in (ours, ref)]
    losses = []
    for step in range(30):
        for m, opt in zip((ours, ref), opts):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(m(x), y)
            loss.backward()
        losses.append(loss.item())
        for (name, p), q in zip(ours.named_parameters(), ref.parameters()):
            err = (p.grad - q.grad).abs().max().item()
            assert err <= tol * max(1.0, q.grad.abs().max().item()), f"step {step} {name}: max |dgrad| {err:.3g}"
        for opt in opts:
            opt.step()
        ref.load_state_dict(ours.state_dict())  # each step's gradients from the same weights: no drift to compound
    assert losses[-1] < 0.8 * losses[0], losses


def test_non_tensor_arguments_and_unused_inputs():
    class Scale(trident.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, s):
            return x * s  # w unused: its gradient is None

    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    w = torch.randn(4, dtype=torch.float64, requires_grad=True)
    Scale.apply(x, w, 2.5).sum().backward()
    assert torch.allclose(x.grad, torch.full((4,), 2.5, dtype=torch.float64))
    assert w.grad is None


def test_forward_error_is_an_exception():
    class Bad(trident.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x @ x  # 1-d @ 1-d of different lengths

    with pytest.raises(trident.TridentError, match="matmul"):
        Bad.apply(torch.randn(2, 3))
