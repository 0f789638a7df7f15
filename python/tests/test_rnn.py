"""trident.nn's RNN, LSTM, GRU and their cells (views of the C library's recurrent modules) against torch's: the
same parameter names and shapes, and, with torch's weights loaded, the same outputs, final states and gradients,
for batch_first, bidirectional, two layers, given and zero initial states."""
import pytest
import torch

import trident
import trident.nn as tnn


def _t(x):
    return trident.from_dlpack(x)


def _np(t):
    return torch.from_dlpack(t.detach())


DEVICES = ["cpu"] + (["cuda:0"] if torch.cuda.is_available() and "cuda:0" in trident.devices() else [])


@pytest.fixture(autouse=True)
def _no_tf32():
    """torch's cuDNN RNN runs in TF32 by default (cudnn.allow_tf32): off, so the reference is fp32 as ours is"""
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def _close(a, b, what):
    assert torch.allclose(_np(a), b.detach(), atol=1e-5), what


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("batch_first,bidirectional,layers,with_h0",
                         [(False, False, 1, False), (True, True, 2, True), (False, True, 1, True)])
def test_layer_matches_torch(kind, batch_first, bidirectional, layers, with_h0, device, seed):
    torch.manual_seed(seed)
    kw = dict(num_layers=layers, batch_first=batch_first, bidirectional=bidirectional)
    ref, ours = getattr(torch.nn, kind)(4, 5, **kw).to(device), getattr(tnn, kind)(4, 5, **kw).to(device)
    assert [(n, tuple(p.shape)) for n, p in ours.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in ref.named_parameters()]
    ours.load_state_dict(ref.state_dict())
    x = (torch.randn(3, 6, 4) if batch_first else torch.randn(6, 3, 4)).to(device)
    d = layers * (2 if bidirectional else 1)
    h0 = torch.randn(d, 3, 5, device=device) if with_h0 else None
    if kind == "LSTM":
        hx = (h0, torch.randn(d, 3, 5, device=device)) if with_h0 else None
        y, (h, c) = ref(x, hx)
        oy, (oh, oc) = ours(_t(x), None if hx is None else (_t(hx[0]), _t(hx[1])))
        _close(oc, c, "c_n")
    else:
        y, h = ref(x, h0)
        oy, oh = ours(_t(x), None if h0 is None else _t(h0))
    _close(oy, y, "output")
    _close(oh, h, "h_n")
    (y.square().sum() + h.sum()).backward()
    ((oy * oy).sum() + oh.sum()).backward()
    for (n, p), q in zip(ours.named_parameters(), ref.parameters()):
        assert torch.allclose(_np(p.grad), q.grad, atol=1e-4), n


@pytest.mark.parametrize("kind", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cell_matches_torch(kind, seed):
    torch.manual_seed(seed)
    ref, ours = getattr(torch.nn, kind)(4, 5), getattr(tnn, kind)(4, 5)
    ours.load_state_dict(ref.state_dict())
    assert list(ours.state_dict()) == list(ref.state_dict())
    x, h = torch.randn(3, 4), torch.randn(3, 5)
    if kind == "LSTMCell":
        c = torch.randn(3, 5)
        rh, rc = ref(x, (h, c))
        oh, oc = ours(_t(x), (_t(h), _t(c)))
        _close(oc, rc, "c'")
    else:
        rh, oh = ref(x, h), ours(_t(x), _t(h))
    _close(oh, rh, "h'")


def test_lstm_trains():
    trident.manual_seed(0)
    lstm, head = tnn.LSTM(3, 16, batch_first=True), tnn.Linear(16, 1)
    opt = trident.optim.Adam(list(lstm.parameters()) + list(head.parameters()), lr=3e-2)
    x = trident.randn(32, 8, 3)
    y = x.mean(1)[:, :1]  # the mean of the first feature over time
    losses = []
    for _ in range(100):
        out, _ = lstm(x)
        loss = trident.nn.functional.mse_loss(head(out[:, -1]), y)
        opt.zero_grad(), loss.backward(), opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.2 * losses[0], losses[::10]
