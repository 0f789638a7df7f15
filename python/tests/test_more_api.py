"""The rest of torch's everyday API that trident covers, each against torch 1.13: the losses smooth_l1, huber and
kl_div (functional and modules), the schedulers MultiStepLR, ExponentialLR, LambdaLR and OneCycleLR (lr per step),
and Tensor.square / all / any / isnan."""
import pytest
import torch

import trident
import trident.nn as tnn


def _t(x):
    return trident.from_dlpack(x)


def _np(t):
    return torch.from_dlpack(t.detach())


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_losses(reduction):
    torch.manual_seed(0)
    a, b = torch.randn(4, 5) * 2, torch.randn(4, 5)
    F, TF = trident.nn.functional, torch.nn.functional
    for ours, ref in ((F.smooth_l1_loss(_t(a), _t(b), reduction=reduction, beta=0.5),
                       TF.smooth_l1_loss(a, b, reduction=reduction, beta=0.5)),
                      (F.huber_loss(_t(a), _t(b), reduction=reduction, delta=0.7),
                       TF.huber_loss(a, b, reduction=reduction, delta=0.7)),
                      (tnn.SmoothL1Loss(reduction=reduction)(_t(a), _t(b)),
                       torch.nn.SmoothL1Loss(reduction=reduction)(a, b))):
        assert torch.allclose(_np(ours), ref, atol=1e-6)
    lq, p = a.log_softmax(1), b.softmax(1)
    for red in ("batchmean", "sum"):
        assert torch.allclose(_np(F.kl_div(_t(lq), _t(p), reduction=red)), TF.kl_div(lq, p, reduction=red), atol=1e-6)
    assert torch.allclose(_np(tnn.KLDivLoss(reduction="batchmean", log_target=True)(_t(lq), _t(p.log()))),
                          torch.nn.KLDivLoss(reduction="batchmean", log_target=True)(lq, p.log()), atol=1e-6)


SCHEDULERS = [
    ("MultiStepLR", dict(milestones=[2, 5], gamma=0.3)),
    ("ExponentialLR", dict(gamma=0.8)),
    ("LambdaLR", dict(lr_lambda=lambda e: 1.0 / (1 + e))),
    ("OneCycleLR", dict(max_lr=0.5, total_steps=12, pct_start=0.25)),
    ("OneCycleLR", dict(max_lr=0.5, epochs=3, steps_per_epoch=4, anneal_strategy="linear")),
    ("CosineAnnealingLR", dict(T_max=6)),
]


@pytest.mark.parametrize("k", range(len(SCHEDULERS)))
def test_scheduler_matches_torch(k):
    name, kw = SCHEDULERS[k]
    p = trident.nn.Parameter(trident.zeros(2))
    q = torch.nn.Parameter(torch.zeros(2))
    ours = getattr(trident.optim.lr_scheduler, name)(trident.optim.SGD([p], lr=0.1), **kw)
    ref = getattr(torch.optim.lr_scheduler, name)(torch.optim.SGD([q], lr=0.1), **kw)
    for step in range(11):
        assert ours.get_last_lr() == pytest.approx(ref.get_last_lr(), rel=1e-9, abs=1e-12), f"{name} step {step}"
        ours.optimizer.step(), ref.optimizer.step()
        ours.step(), ref.step()


def test_tensor_reductions_and_square():
    x = torch.tensor([[1.0, 0.0, 2.0], [3.0, 4.0, float("nan")]])
    t = _t(x)
    assert _np(t.square()).nan_to_num().tolist() == x.square().nan_to_num().tolist()
    assert bool(t.all()) == bool(x.all()) and bool(t.any()) == bool(x.any())
    assert t.all(dim=1).tolist() == x.all(dim=1).tolist()  # (torch 1.13 takes no bool through DLPack)
    assert (t > 1).any(dim=0, keepdim=True).tolist() == (x > 1).any(dim=0, keepdim=True).tolist()
    assert trident.isnan(t).tolist() == torch.isnan(x).tolist()


def test_factories_and_helpers(seed):
    assert trident.eye(3).tolist() == torch.eye(3).tolist()
    assert trident.eye(2, 4, dtype=trident.int64).tolist() == torch.eye(2, 4, dtype=torch.int64).tolist()
    assert torch.allclose(_np(trident.linspace(-1, 2, 7)), torch.linspace(-1, 2, 7))
    trident.manual_seed(seed)
    p = trident.randperm(50)
    assert sorted(p.tolist()) == list(range(50)) and p.tolist() != list(range(50)) and p.dtype == trident.int64
    a, b = torch.randn(3), torch.randn(4)
    assert torch.allclose(_np(trident.outer(_t(a), _t(b))), torch.outer(a, b))
    x = torch.tensor([1.0, float("inf"), -float("inf"), float("nan")])
    assert trident.isinf(_t(x)).tolist() == torch.isinf(x).tolist()
    assert trident.allclose(_t(a), _t(a + 1e-9)) and not trident.allclose(_t(a), _t(a + 1e-3))
    with trident.set_grad_enabled(False):
        assert not trident.is_grad_enabled()
        assert not (trident.ones(2, requires_grad=True) * 2).requires_grad
    assert trident.is_grad_enabled()


def test_leaky_relu_elu_module_dict():
    x = torch.randn(5, 4, requires_grad=True)
    tx = _t(x.detach()).requires_grad_(True)
    for ours, ref in ((tnn.LeakyReLU(0.2), torch.nn.LeakyReLU(0.2)), (tnn.ELU(0.7), torch.nn.ELU(0.7))):
        y, ty = ref(x), ours(tx)
        assert torch.allclose(_np(ty), y, atol=1e-6)
        g, = torch.autograd.grad(y.sum(), x)
        tg, = trident.autograd.grad(ty.sum(), tx)
        assert torch.allclose(_np(tg), g, atol=1e-6)
    d = tnn.ModuleDict({"enc": tnn.Linear(4, 3), "dec": tnn.Linear(3, 4)})
    d["act"] = tnn.ReLU()
    ref = torch.nn.ModuleDict({"enc": torch.nn.Linear(4, 3), "dec": torch.nn.Linear(3, 4), "act": torch.nn.ReLU()})
    assert list(d) == ["enc", "dec", "act"] and "enc" in d and len(d) == 3
    assert list(d.state_dict()) == list(ref.state_dict())
