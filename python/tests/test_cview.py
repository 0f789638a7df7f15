"""trident.nn's layers are views of the C library's modules (td_linear_new, ...): the Python parameters are the C
module's tensors (the same memory, moved together by .to()), forward is td_module_forward and matches torch's layer
given the same weights, train()/eval() reach the C module, and a replaced parameter falls back to the functional
form."""
import pytest
import torch

import trident
import trident.nn as tnn


def _load(ours, ref):
    ours.load_state_dict(ref.state_dict())


CASES = [
    (lambda: tnn.Linear(5, 3), lambda: torch.nn.Linear(5, 3), (4, 5)),
    (lambda: tnn.Linear(5, 3, bias=False), lambda: torch.nn.Linear(5, 3, bias=False), (2, 4, 5)),
    (lambda: tnn.Conv2d(2, 4, 3, padding=1, stride=2), lambda: torch.nn.Conv2d(2, 4, 3, padding=1, stride=2),
     (2, 2, 7, 7)),
    (lambda: tnn.BatchNorm2d(3), lambda: torch.nn.BatchNorm2d(3), (4, 3, 5, 5)),
    (lambda: tnn.BatchNorm1d(3), lambda: torch.nn.BatchNorm1d(3), (6, 3)),
    (lambda: tnn.LayerNorm(6), lambda: torch.nn.LayerNorm(6), (3, 6)),
    (lambda: tnn.GroupNorm(2, 4), lambda: torch.nn.GroupNorm(2, 4), (2, 4, 3, 3)),
    (lambda: tnn.Conv1d(3, 4, 3, stride=2, padding=1), lambda: torch.nn.Conv1d(3, 4, 3, stride=2, padding=1),
     (2, 3, 9)),
    (lambda: tnn.AdaptiveAvgPool2d((2, 3)), lambda: torch.nn.AdaptiveAvgPool2d((2, 3)), (2, 3, 5, 7)),
    (lambda: tnn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2),
     lambda: torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2), (2, 4, 5, 4)),
]


DEVICES = ["cpu"] + (["cuda:0"] if torch.cuda.is_available() and "cuda:0" in trident.devices() else [])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("k", range(len(CASES)))
def test_view_matches_torch(k, device, seed):
    make, make_ref, shape = CASES[k]
    torch.manual_seed(seed)
    ours, ref = make().to(device), make_ref().to(device)
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(0.1 * torch.randn_like(p))  # not the default ones / zeros
    _load(ours, ref)
    assert ours._c_live() and list(ours.state_dict()) == list(ref.state_dict())
    for mode in ("train", "eval", "train"):
        getattr(ours, mode)(), getattr(ref, mode)()
        x = torch.randn(*shape, device=device)
        y = ref(x)
        got = ours(trident.from_dlpack(x))
        assert torch.allclose(torch.from_dlpack(got), y.detach(), atol=1e-5), mode
    if not list(ref.parameters()):
        return
    (y * y).sum().backward()
    (got * got).sum().backward()
    for (n, p), q in zip(ours.named_parameters(), ref.parameters()):
        assert torch.allclose(torch.from_dlpack(p.grad), q.grad, atol=1e-4), n
    for (n, b), rb in zip(ours.named_buffers(), ref.buffers()):
        assert torch.allclose(torch.from_dlpack(b).to(rb.dtype), rb, atol=1e-5), n


def test_parameters_are_the_c_modules_tensors():
    lin = tnn.Linear(4, 2)
    w = lin.weight
    with trident.no_grad():
        w.fill_(0.5)
        lin.bias.zero_()
    y = lin(trident.ones(1, 4))  # td_module_forward reads the C module's weight: the one just filled
    assert y.tolist() == [[2.0, 2.0]]
    lin.to(trident.float64)
    assert lin.weight is w and w.dtype == trident.float64 and lin(trident.ones(1, 4, dtype="float64")).tolist() == [
        [2.0, 2.0]]


def test_replaced_parameter_detaches_the_view():
    emb = tnn.Embedding(10, 4)
    head = tnn.Linear(4, 10, bias=False)
    head.weight = emb.weight  # weight tying
    assert not head._c_live() and emb._c_live()
    h = emb(trident.tensor([1, 2]))
    out = head(h)
    ref = trident.from_dlpack(torch.from_dlpack(h).detach() @ torch.from_dlpack(emb.weight).detach().T)
    assert torch.allclose(torch.from_dlpack(out.detach()), torch.from_dlpack(ref))
    out.sum().backward()
    assert emb.weight.grad is not None and list(head.state_dict()) == ["weight"]


def test_dropout_view_train_eval():
    d = tnn.Dropout(0.5)
    x = trident.ones(1000)
    y = d(x)
    zeros = int((y == 0).sum())
    assert 350 < zeros < 650 and set(y.tolist()) <= {0.0, 2.0}
    d.eval()
    assert d(x).tolist() == x.tolist()
    d.train()
    d.p = 0.0  # changed after construction: the functional form with the new p
    assert d(x).tolist() == x.tolist()


def test_rms_norm():
    m = tnn.RMSNorm(6, eps=1e-6)
    with trident.no_grad():
        m.weight.copy_(trident.arange(6, dtype=trident.float32) * 0.5)
    x = torch.randn(3, 6)
    w = torch.arange(6, dtype=torch.float32) * 0.5
    ref = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    assert m._c_live() and list(m.state_dict()) == ["weight"]
    assert torch.allclose(torch.from_dlpack(m(trident.from_dlpack(x)).detach()), ref, atol=1e-5)


def test_multihead_attention_view_grads(seed):
    """need_weights=False runs the C module's forward (td_multihead_attention_forward_ext): its parameters'
    gradients match torch's."""
    torch.manual_seed(seed)
    ref, ours = torch.nn.MultiheadAttention(8, 2, batch_first=True), tnn.MultiheadAttention(8, 2, batch_first=True)
    ours.load_state_dict(ref.state_dict())
    assert ours._c_live() and list(ours.state_dict()) == list(ref.state_dict())
    x = torch.randn(3, 5, 8)
    y = ref(x, x, x, need_weights=False)[0]
    got = ours(trident.from_dlpack(x), trident.from_dlpack(x), trident.from_dlpack(x), need_weights=False)[0]
    assert torch.allclose(torch.from_dlpack(got.detach()), y.detach(), atol=1e-5)
    (y * y).sum().backward()
    (got * got).sum().backward()
    for (n, p), q in zip(ours.named_parameters(), ref.parameters()):
        assert torch.allclose(torch.from_dlpack(p.grad), q.grad, atol=1e-4), n


def test_deepcopy_and_pickle():
    """copy.deepcopy and pickle of a model of C views: the same values, devices, dtypes, modes and state_dict keys,
    independent memory, a replaced (tied) parameter kept, and the default generator not advanced."""
    import copy
    import pickle

    model = tnn.Sequential(tnn.Linear(3, 4), tnn.BatchNorm1d(4), tnn.Dropout(0.3), tnn.Linear(4, 2)).to(
        trident.float64)
    model(trident.randn(5, 3, dtype=trident.float64))  # running stats move
    model[3].weight.requires_grad_(False)
    model.eval()
    before = trident.get_rng_state()
    for clone in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        assert trident.get_rng_state() == before
        assert list(clone.state_dict()) == list(model.state_dict()) and not clone.training
        for (k, a), b in zip(model.state_dict().items(), clone.state_dict().values()):
            assert a.tolist() == b.tolist() and a.dtype == b.dtype, k
        assert clone[0]._c_live() and not clone[3].weight.requires_grad and clone[2].p == 0.3
        with trident.no_grad():
            clone[0].weight.fill_(0.0)
        assert model[0].weight.abs().sum().item() > 0
    tied = tnn.Sequential(tnn.Embedding(5, 3), tnn.Linear(3, 5, bias=False))
    tied[1].weight = tnn.Parameter(trident.ones(5, 3))
    c = copy.deepcopy(tied)
    assert not c[1]._c_live() and c[1].weight.tolist() == [[1.0] * 3] * 5


def test_tied_parameter_moved_by_another_module():
    """A tied parameter that the other module's .to() moves to a new tensor detaches the C view, which then runs
    the functional form on the moved parameter (never the C module's stale copy)."""
    a, b = tnn.Linear(3, 3), tnn.Linear(3, 3)
    b.weight = a.weight
    model = tnn.Sequential(b, a).to(trident.float64)  # b (not a view now) moves the shared weight first
    x = trident.randn(2, 3, dtype=trident.float64)
    assert a.weight.dtype == trident.float64 and not a._c_live()
    ref = x @ a.weight.t() + a.bias
    assert torch.allclose(torch.from_dlpack(a(x).detach()), torch.from_dlpack(ref.detach()))
    assert model(x).dtype == trident.float64


def test_conv_transpose_functional_form():
    """ConvTranspose2d with its weight replaced runs F.conv_transpose2d: the same as torch's."""
    torch.manual_seed(0)
    ref = torch.nn.ConvTranspose2d(3, 2, 3, stride=2)
    ours = tnn.ConvTranspose2d(3, 2, 3, stride=2)
    ours.weight = tnn.Parameter(trident.from_dlpack(ref.weight.detach().clone()))
    with trident.no_grad():
        ours.bias.copy_(trident.from_dlpack(ref.bias.detach()))
    x = torch.randn(1, 3, 4, 4)
    assert not ours._c_live()
    assert torch.allclose(torch.from_dlpack(ours(trident.from_dlpack(x)).detach()), ref(x).detach(), atol=1e-5)
