"""trident.nn, trident.nn.functional and trident.optim against torch: the layers from the same weights, the losses,
the optimizers' steps and the schedulers' rates, state_dict keys, and PyTorch's MNIST CNN tutorial shape trained on
Fashion-MNIST with only trident names, its loss curve following torch's from the same initial weights."""
import gzip
import os

import pytest

np = pytest.importorskip("numpy")
import torch

import trident
import trident.nn as tnn
import trident.nn.functional as TF

FASHION = os.environ.get("TRIDENT_FASHION_MNIST", "/usr/share/datasets/fashion-mnist")
# the tutorial on every device this build has (torch's twin on cuda:0 for cuda:0, else on the CPU)
TUTORIAL_DEVICES = [d for d in ("cpu", "vulkan:0", "cuda:0") if d in trident.devices()]


def tt(x):
    return trident.tensor(x.detach().numpy())


def close(got, want, tol=1e-5):
    np.testing.assert_allclose(np.asarray(got.detach()), want.detach().numpy(), rtol=tol, atol=tol)


def copy_into_torch(ours, ref):
    """ref (torch) takes ours' state_dict: the same key names."""
    ref.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in ours.state_dict().items()})


def test_layers_match_torch(seed):
    trident.manual_seed(seed)
    torch.manual_seed(seed)
    pairs = [(tnn.Linear(6, 4), torch.nn.Linear(6, 4), (3, 6)),
             (tnn.Conv2d(2, 3, 3, padding=1, stride=2), torch.nn.Conv2d(2, 3, 3, padding=1, stride=2), (2, 2, 7, 7)),
             (tnn.LayerNorm(6), torch.nn.LayerNorm(6), (3, 6)),
             (tnn.GroupNorm(2, 4), torch.nn.GroupNorm(2, 4), (2, 4, 3, 3)),
             (tnn.Sequential(tnn.Linear(5, 8), tnn.GELU(), tnn.Linear(8, 2), tnn.Tanh()),
              torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.GELU(), torch.nn.Linear(8, 2), torch.nn.Tanh()),
              (4, 5)),
             (tnn.Sequential(tnn.MaxPool2d(2), tnn.Flatten(), tnn.Sigmoid()),
              torch.nn.Sequential(torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Sigmoid()), (2, 3, 4, 4))]
    for ours, ref, shape in pairs:
        assert list(ours.state_dict()) == list(ref.state_dict()), type(ref)
        copy_into_torch(ours, ref)
        x = torch.randn(*shape)
        close(ours(tt(x)), ref(x))
    # torch's initialisation bounds: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    w = np.asarray(tnn.Linear(100, 50).weight.detach())
    assert abs(w).max() <= 0.1 and abs(w).max() > 0.09 and abs(w.mean()) < 0.01
    emb = tnn.Embedding(10, 3)
    assert emb(trident.tensor([1, 1, 4])).shape == (3, 3)


def test_batchnorm_train_and_eval_match_torch(seed):
    ours, ref = tnn.BatchNorm2d(3), torch.nn.BatchNorm2d(3)
    assert list(ours.state_dict()) == list(ref.state_dict())
    g = torch.Generator().manual_seed(seed)
    for _ in range(3):
        x = torch.randn(4, 3, 5, 5, generator=g) * 2 + 1
        close(ours(tt(x)), ref(x), 1e-4)
    for k, v in ref.state_dict().items():
        close(ours.state_dict()[k], v, 1e-5)
    ours.eval(), ref.eval()
    close(ours(tt(x)), ref(x), 1e-5)


def test_losses_match_torch(seed):
    g = torch.Generator().manual_seed(seed)
    logits, y = torch.randn(8, 5, generator=g), torch.randint(0, 5, (8,), generator=g)
    y[2] = -100
    p, t = torch.rand(8, generator=g), torch.rand(8, generator=g).round()
    F = torch.nn.functional
    cases = [(TF.cross_entropy(tt(logits), tt(y)), F.cross_entropy(logits, y)),
             (TF.cross_entropy(tt(logits), tt(y), label_smoothing=0.1, reduction="sum"),
              F.cross_entropy(logits, y, label_smoothing=0.1, reduction="sum")),
             (TF.cross_entropy(tt(logits), tt(y.clamp(min=0)), ignore_index=3), F.cross_entropy(logits, y.clamp(min=0),
                                                                                              ignore_index=3)),
             (TF.nll_loss(tt(logits).log_softmax(1), tt(y)), F.nll_loss(logits.log_softmax(1), y)),
             (TF.mse_loss(tt(p), tt(t), reduction="none"), F.mse_loss(p, t, reduction="none")),
             (TF.binary_cross_entropy(tt(p), tt(t)), F.binary_cross_entropy(p, t)),
             (TF.binary_cross_entropy_with_logits(tt(logits[:, 0]), tt(t)),
              F.binary_cross_entropy_with_logits(logits[:, 0], t)),
             (tnn.CrossEntropyLoss(label_smoothing=0.2)(tt(logits), tt(y)),
              torch.nn.CrossEntropyLoss(label_smoothing=0.2)(logits, y))]
    for got, want in cases:
        close(got, want)


@pytest.mark.parametrize("name,kwargs", [("SGD", dict(lr=0.1)), ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.01)),
                                         ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
                                         ("Adam", dict(lr=0.01)), ("AdamW", dict(lr=0.01, weight_decay=0.1)),
                                         ("RMSprop", dict(lr=0.01)),
                                         ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True, weight_decay=0.01))])
def test_optimizers_match_torch(name, kwargs, seed):
    torch.manual_seed(seed)
    ref = torch.nn.Linear(4, 3)
    ours = tnn.Linear(4, 3)
    ours.load_state_dict(ref.state_dict())
    x, y = torch.randn(16, 4), torch.randn(16, 3)
    # two param groups: the bias at half the learning rate
    groups = lambda m: [{"params": [m.weight]}, {"params": [m.bias], "lr": kwargs["lr"] / 2}]  # noqa: E731
    opt_t = getattr(torch.optim, name)(groups(ref), **kwargs)
    opt_o = getattr(trident.optim, name)(groups(ours), **kwargs)
    sched_t = torch.optim.lr_scheduler.StepLR(opt_t, 2, 0.5)
    sched_o = trident.optim.lr_scheduler.StepLR(opt_o, 2, 0.5)
    for _ in range(5):
        for m, opt, X, Y in ((ref, opt_t, x, y), (ours, opt_o, tt(x), tt(y))):
            opt.zero_grad()
            F = torch.nn.functional if m is ref else TF
            F.mse_loss(m(X), Y).backward()
            opt.step()
        sched_t.step(), sched_o.step()
        assert sched_o.get_last_lr() == pytest.approx(sched_t.get_last_lr())
    close(ours.weight, ref.weight, 1e-5)
    close(ours.bias, ref.bias, 1e-5)
    sd = opt_o.state_dict()
    assert [g["params"] for g in sd["param_groups"]] == [[0], [1]]
    assert set(sd["state"]) <= {0, 1}


@pytest.mark.filterwarnings("ignore:Detected call")  # torch's: no optimizer step here
def test_schedulers_match_torch():
    for ours_cls, ref_cls, kw in ((trident.optim.lr_scheduler.CosineAnnealingLR,
                                   torch.optim.lr_scheduler.CosineAnnealingLR, dict(T_max=10, eta_min=0.01)),
                                  (trident.optim.lr_scheduler.LinearLR, torch.optim.lr_scheduler.LinearLR,
                                   dict(start_factor=0.1, total_iters=4))):
        p = torch.nn.Parameter(torch.zeros(1))
        so = ours_cls(trident.optim.SGD([trident.nn.Parameter(trident.zeros(1))], lr=0.5), **kw)
        st = ref_cls(torch.optim.SGD([p], lr=0.5), **kw)
        for _ in range(8):
            assert so.get_last_lr() == pytest.approx(st.get_last_lr())
            so.step(), st.step()


def test_module_api():
    m = tnn.Sequential(tnn.Linear(3, 4), tnn.BatchNorm2d(4), tnn.Dropout(0.5))
    m.head = tnn.ModuleList([tnn.Linear(4, 2)])
    assert [n for n, _ in m.named_parameters()] == ["0.weight", "0.bias", "1.weight", "1.bias", "head.0.weight",
                                                     "head.0.bias"]
    assert "1.running_mean" in m.state_dict() and "1.num_batches_tracked" in m.state_dict()
    assert m.training and not m.eval()[2].training
    w = m[0].weight
    m.to(trident.float64)
    assert m[0].weight is w and w.dtype == trident.float64 and w.requires_grad and w.is_leaf
    m.to(torch.float32)
    assert w.dtype == trident.float32
    calls = []
    h = m[0].register_forward_hook(lambda mod, args, out: calls.append(out.shape))
    m[0](trident.ones(2, 3))
    h.remove()
    m[0](trident.ones(2, 3))
    assert calls == [(2, 4)]
    with pytest.raises(RuntimeError, match="missing keys"):
        m.load_state_dict({})
    for d in trident.devices()[1:]:
        lin = tnn.Linear(3, 2).to(d)
        assert lin.weight.device == d and lin(trident.ones(1, 3, device=d)).device == d


def _idx(name, n):
    with gzip.open(os.path.join(FASHION, name)) as f:
        data = f.read()
    if "labels" in name:
        return np.frombuffer(data, np.uint8, offset=8)[:n].astype(np.int64)
    return np.frombuffer(data, np.uint8, offset=16)[: n * 784].reshape(n, 1, 28, 28).astype(np.float32) / 255.0


@pytest.mark.parametrize("device", TUTORIAL_DEVICES)
def test_fashion_mnist_cnn_tutorial_trains_like_torch(seed, device):
    """The MNIST CNN tutorial's shape (conv-relu-pool x2, flatten, linear) with only `torch.`-style names."""
    if not os.path.exists(os.path.join(FASHION, "train-images-idx3-ubyte.gz")):
        pytest.skip(f"no Fashion-MNIST in {FASHION} (Debian's dataset-fashion-mnist package)")
    # 60 steps on Vulkan: lavapipe (CI's Vulkan) takes 1-2 s a step of this CNN
    steps, batch = (60, 32) if device.startswith("vulkan") else (200, 32)
    head, tail = (10, 20) if steps < 200 else (20, 50)
    images, labels = _idx("train-images-idx3-ubyte.gz", steps * batch), _idx("train-labels-idx1-ubyte.gz",
                                                                             steps * batch)

    def run(torch_like, nn, F, copy_from, dev):
        torch_like.manual_seed(seed)
        model = nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 16, 3), nn.ReLU(),
                              nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 5 * 5, 10))
        model.load_state_dict(copy_from)
        model.to(dev)
        opt = torch_like.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        losses = []
        for s in range(steps):
            x = torch_like.tensor(images[s * batch:(s + 1) * batch]).to(dev)
            y = torch_like.tensor(labels[s * batch:(s + 1) * batch]).to(dev)
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return model, losses

    trident.manual_seed(seed)
    init = tnn.Sequential(tnn.Conv2d(1, 8, 3), tnn.ReLU(), tnn.MaxPool2d(2), tnn.Conv2d(8, 16, 3), tnn.ReLU(),
                          tnn.MaxPool2d(2), tnn.Flatten(), tnn.Linear(16 * 5 * 5, 10)).state_dict()
    _, ours = run(trident, tnn, TF, {k: v.clone() for k, v in init.items()}, device)
    _, ref = run(torch, torch.nn, torch.nn.functional, {k: torch.from_numpy(np.array(v)) for k, v in init.items()},
                 device if device.startswith("cuda") and torch.cuda.is_available() else "cpu")
    assert ours[0] == pytest.approx(ref[0], rel=1e-4)  # the same initial weights and data
    first, last = np.mean(ours[:head]), np.mean(ours[-tail:])
    assert last < 0.5 * first, (first, last)
    assert abs(last - np.mean(ref[-tail:])) < 0.1 * np.mean(ref[-tail:]), (last, np.mean(ref[-tail:]))


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("need_weights", [True, False])
def test_multihead_attention_matches_torch(batch_first, need_weights, seed):
    torch.manual_seed(seed)
    ref = torch.nn.MultiheadAttention(8, 2, batch_first=batch_first)
    ours = tnn.MultiheadAttention(8, 2, batch_first=batch_first)
    assert [k for k, _ in ours.named_parameters()] == [k for k, _ in ref.named_parameters()]
    ours.load_state_dict(ref.state_dict())
    shape = (3, 5, 8) if batch_first else (5, 3, 8)
    q, kv = torch.randn(*shape, requires_grad=True), torch.randn(*shape)
    pad = torch.tensor([[False] * 4 + [True], [False] * 5, [False] * 3 + [True] * 2])
    causal = torch.ones(5, 5, dtype=torch.bool).triu(1)
    for kwargs in ({}, {"key_padding_mask": pad}, {"attn_mask": causal}):
        out_t, w_t = ref(q, kv, kv, need_weights=need_weights, **kwargs)
        tk = {k: tt(v) for k, v in kwargs.items()}
        out_o, w_o = ours(tt(q.detach()), tt(kv), tt(kv), need_weights=need_weights, **tk)
        close(out_o, out_t, 1e-5)
        assert (w_o is None) == (w_t is None)
        if w_t is not None:
            close(w_o, w_t, 1e-5)
    x = trident.randn(*shape, requires_grad=True)
    ours(x, x, x, need_weights=need_weights)[0].sum().backward()
    assert x.grad.shape == shape and ours.in_proj_weight.grad is not None
