"""trident.amp: autocast (context manager, decorator, nesting, bad arguments) and GradScaler (a clean step equals the
unscaled optimizer's, an inf gradient skips the step and backs off the scale, growth after growth_interval steps,
state_dict) against torch's rules."""
import math

import pytest

import trident
import trident.nn as nn


def test_autocast_casts_matmul_and_restores():
    a, b = trident.randn(4, 3), trident.randn(3, 2)
    with trident.amp.autocast("cpu", dtype=trident.bfloat16):
        assert (a @ b).dtype == trident.bfloat16
        with trident.amp.autocast("cpu", enabled=False):
            pass
        assert (a @ b).dtype == trident.bfloat16
    assert (a @ b).dtype == trident.float32

    @trident.amp.autocast("cpu", dtype="bfloat16")
    def f(x, y):
        return x @ y

    assert f(a, b).dtype == trident.bfloat16
    assert (a @ b).dtype == trident.float32
    with pytest.raises(ValueError, match="device_type"):
        trident.amp.autocast("tpu")


def run(scaler, poison=False, steps=3, seed=0):
    trident.manual_seed(seed)
    model = nn.Linear(4, 2)
    opt = trident.optim.SGD(model.parameters(), lr=0.1)
    x, y = trident.randn(8, 4), trident.randn(8, 2)
    for _ in range(steps):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        if poison:
            loss = loss * math.inf
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    return model


def test_grad_scaler_clean_steps_match_unscaled():
    plain = run(trident.amp.GradScaler(enabled=False))
    scaled = run(trident.amp.GradScaler("cpu"))
    assert (plain.weight - scaled.weight).abs().max().item() < 1e-6
    assert (plain.bias - scaled.bias).abs().max().item() < 1e-6


def test_grad_scaler_skips_inf_and_backs_off():
    scaler = trident.amp.GradScaler("cpu", init_scale=1024.0)
    trident.manual_seed(0)
    w0 = nn.Linear(4, 2).weight.detach().numpy().copy()
    model = run(scaler, poison=True, steps=3)
    assert abs(model.weight.detach().numpy() - w0).max() == 0  # every step skipped
    assert scaler.get_scale() == 1024.0 * 0.5**3


def test_grad_scaler_growth_and_state_dict():
    scaler = trident.amp.GradScaler("cpu", init_scale=8.0, growth_interval=2)
    run(scaler, steps=4)
    assert scaler.get_scale() == 32.0
    other = trident.amp.GradScaler("cpu")
    other.load_state_dict(scaler.state_dict())
    assert other.get_scale() == 32.0 and other.state_dict() == scaler.state_dict()


def test_unscale_twice_is_an_error():
    scaler = trident.amp.GradScaler("cpu")
    model = nn.Linear(2, 1)
    opt = trident.optim.SGD(model.parameters(), lr=0.1)
    scaler.scale(model(trident.ones(1, 2)).sum()).backward()
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="already"):
        scaler.unscale_(opt)
