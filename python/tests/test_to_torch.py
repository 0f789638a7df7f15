"""trident.nn.Module.to_torch(): a Trident module inside a torch model. The torch model with the Trident block has
the state_dict keys of the same model written in torch alone, its gradients (inputs and every parameter) match it,
torch.optim trains it in step with the reference (the parameters share memory), BatchNorm's running stats follow,
backward runs twice with retain_graph, and torch.autograd.gradcheck / gradgradcheck pass in float64."""
import pytest
import torch

import trident
import trident.nn as tnn


def _models(dtype=torch.float32):
    torch.manual_seed(0)
    ref = torch.nn.Sequential(
        torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.BatchNorm1d(8), torch.nn.GELU(), torch.nn.Linear(8, 6)),
        torch.nn.Tanh(), torch.nn.Linear(6, 3)).to(dtype)
    block = tnn.Sequential(tnn.Linear(5, 8), tnn.BatchNorm1d(8), tnn.GELU(), tnn.Linear(8, 6)).to(dtype)
    ours = torch.nn.Sequential(block.to_torch(), torch.nn.Tanh(), torch.nn.Linear(6, 3)).to(dtype)
    ours.load_state_dict(ref.state_dict())
    return ours, ref, block


def test_state_dict_keys_and_shared_memory():
    ours, ref, block = _models()
    assert list(ours.state_dict()) == list(ref.state_dict())
    assert torch.equal(torch.from_dlpack(block[0].weight.detach()), ref[0][0].weight.detach())
    assert ours[0].module is block


def test_trains_in_step_with_torch(seed):
    ours, ref, block = _models()
    torch.manual_seed(seed)
    x, y = torch.randn(16, 5), torch.randn(16, 3)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (ours, ref)]
    losses = []
    for step in range(20):
        for m, opt in zip((ours, ref), opts):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(m(x), y)
            loss.backward()
        losses.append(loss.item())
        for (n, p), q in zip(ours.named_parameters(), ref.parameters()):
            assert torch.allclose(p.grad, q.grad, atol=1e-5, rtol=1e-4), f"step {step} {n}"
        for opt in opts:
            opt.step()
    assert losses[-1] < 0.7 * losses[0], losses
    for (n, b), rb in zip(ours.named_buffers(), ref.buffers()):
        assert torch.allclose(b.to(rb.dtype), rb, atol=1e-5), n
    ours.eval(), ref.eval()
    assert not block.training
    assert torch.allclose(ours(x), ref(x), atol=1e-5)


def test_retain_graph_and_input_grad():
    ours, ref, _ = _models(torch.float64)
    x = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    xr = x.detach().clone().requires_grad_(True)
    out = ours(x).sum()
    out.backward(retain_graph=True)
    out.backward()
    ref(xr).sum().backward()
    assert torch.allclose(x.grad, 2 * xr.grad, atol=1e-9)


def test_gradcheck():
    block = tnn.Sequential(tnn.Linear(3, 4), tnn.Tanh(), tnn.Linear(4, 2)).to(trident.float64).to_torch()
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(block, (x,))
    assert torch.autograd.gradgradcheck(block, (x,))


def test_from_torch_and_back(seed):
    torch.manual_seed(seed)
    ref = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                              torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Dropout(0.2),
                              torch.nn.Linear(64, 10), torch.nn.LogSoftmax(1)).double()
    ours = tnn.from_torch(ref)
    assert list(ours.state_dict()) == list(ref.state_dict()) and ours[0].weight.dtype == trident.float64
    ref.eval(), ours.eval()
    x = torch.randn(5, 1, 8, 8, dtype=torch.float64)
    assert torch.allclose(torch.from_dlpack(ours(trident.from_dlpack(x))), ref(x), atol=1e-10)
    assert tnn.from_torch(ours.to_torch()) is ours
    with pytest.raises(TypeError, match="Bilinear has no trident.nn counterpart"):
        tnn.from_torch(torch.nn.Sequential(torch.nn.Bilinear(2, 2, 2)))
