"""The issue's five-minute test: the script a PyTorch user writes first (an MLP on random data with nn, AdamW,
a DataLoader, cross_entropy with label smoothing, a scheduler, state_dict save and load, resuming), written once
against torch's API and run twice: with `torch` and with `trident` in its place. From the same initial weights
and the same batches, trident's losses follow torch's (torch on the CPU) step by step, on every device Trident has
here, and both reach the same accuracy."""
import io

import numpy as np
import pytest
import torch

import trident


def make_data(seed):
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(4, 10)).astype(np.float32) * 2
    y = rng.integers(0, 4, size=512)
    x = (centers[y] + rng.normal(size=(512, 10))).astype(np.float32)
    return x, y.astype(np.int64)


DEVICES = [d for d in trident.devices() if d in ("cpu", "cuda:0", "vulkan:0")]


def script(torch, x_np, y_np, init_state=None, shuffle=False, epochs=6, device="cpu"):
    """Written as for PyTorch; `torch` is either library."""
    nn = torch.nn
    F = torch.nn.functional
    from_numpy = torch.from_numpy if hasattr(torch, "from_numpy") else torch.tensor
    x, y = from_numpy(x_np), from_numpy(y_np)
    ds = torch.utils.data.TensorDataset(x[:384], y[:384])
    loader = torch.utils.data.DataLoader(ds, batch_size=32, shuffle=shuffle)

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 32), nn.GELU())
            self.head = nn.Linear(32, 4)

        def forward(self, x):
            return self.head(self.body(x))

    model = MLP().to(device)
    if init_state is not None:
        model.load_state_dict(init_state)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    losses = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb, label_smoothing=0.1)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        sched.step()
    model.eval()
    with torch.no_grad():
        acc = (model(x[384:].to(device)).argmax(dim=1) == y[384:].to(device)).float().mean().item()
    return model, opt, losses, acc, sched.get_last_lr()


@pytest.fixture(scope="module", params=DEVICES)
def runs(request):
    x, y = make_data(0)
    torch.manual_seed(0)
    ref_model, _, ref_losses, ref_acc, ref_lr = script(torch, x, y)
    torch.manual_seed(0)
    init = script(torch, x, y, epochs=0)[0].state_dict()  # the initial weights both start from
    ours = script(trident, x, y, init_state=init, device=request.param)
    return (ref_losses, ref_acc, ref_lr), ours


def test_losses_follow_torch(runs):
    (ref_losses, ref_acc, ref_lr), (model, _, losses, acc, lr) = runs
    assert len(losses) == len(ref_losses) == 72
    cpu = str(next(model.parameters()).device) == "cpu"  # other devices: other summation orders, 72 steps on
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-4 if cpu else 1e-3, atol=1e-5 if cpu else 1e-4)
    assert abs(acc - ref_acc) <= 0.01 and acc > 0.85, (acc, ref_acc)
    assert lr == pytest.approx(ref_lr) and lr[0] == pytest.approx(1e-2 / 8)


def test_save_load_and_resume(runs):
    _, (model, opt, *_rest) = runs
    buf = io.BytesIO()
    trident.save({"model": model.state_dict(), "optim": opt.state_dict()}, buf)
    device = next(model.parameters()).device
    ckpt = trident.load(io.BytesIO(buf.getvalue()), map_location=device)
    x, y = make_data(1)
    xb, yb = trident.tensor(x[:32]).to(device), trident.tensor(y[:32]).to(device)

    clone = type(model)().to(device)
    clone.load_state_dict(ckpt["model"])
    clone_opt = trident.optim.AdamW(clone.parameters(), lr=1e-2, weight_decay=0.01)
    clone_opt.load_state_dict(ckpt["optim"])
    assert list(clone.state_dict()) == ["body.0.weight", "body.0.bias", "body.2.weight", "body.2.bias",
                                        "head.weight", "head.bias"]
    for m, o in ((model, opt), (clone, clone_opt)):  # one more step each: the resumed run is the same run
        o.zero_grad()
        trident.nn.functional.cross_entropy(m(xb), yb).backward()
        o.step()
    for (n, a), b in zip(model.state_dict().items(), clone.state_dict().values()):
        assert a.tolist() == b.tolist(), n


def test_shuffled_run_learns():
    x, y = make_data(2)
    trident.manual_seed(0)
    *_, losses, acc, _ = script(trident, x, y, shuffle=True)
    assert acc > 0.85 and np.mean(losses[-12:]) < 0.6 * np.mean(losses[:12]), (acc, losses[:3], losses[-3:])


def test_safetensors_round_trip(runs, tmp_path):
    _, (model, *_rest) = runs
    trident.serialization.save_file(model.state_dict(), tmp_path / "m.safetensors")
    back = trident.serialization.load_file(tmp_path / "m.safetensors")
    assert sorted(back) == sorted(model.state_dict())
    for k, v in model.state_dict().items():
        assert back[k].tolist() == v.tolist(), k
