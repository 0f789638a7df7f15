"""DLPack between Trident and PyTorch / NumPy on the CPU: zero copy both ways, writes seen on both sides, the
exporter's memory freed exactly once after both sides release, strided and broadcast views, every dtype, 0-d and
size 0, and bad input refused with a clear error (never a crash)."""
import gc
import sys

import pytest

np = pytest.importorskip("numpy")
import torch

import trident
from trident import _C

TORCH2 = int(torch.__version__.split(".")[0]) >= 2  # PyTorch 1.x reads and writes no DLPack bool
DTYPES = [(torch.float32, trident.float32), (torch.float64, trident.float64), (torch.float16, trident.float16),
          (torch.bfloat16, trident.bfloat16), (torch.int32, trident.int32), (torch.int64, trident.int64),
          (torch.uint8, trident.uint8), (torch.bool, trident.bool)]


def live():
    gc.collect()
    return _C.debug_live_tensors()


def test_torch_to_trident_zero_copy(seed):
    torch.manual_seed(seed)
    x = torch.randn(4, 5)
    t = trident.from_dlpack(x)
    assert _C.tensor_device_address(t._h) == x.data_ptr()
    assert t.shape == (4, 5) and t.stride() == (5, 1) and t.dtype == trident.float32
    x[1, 2] = 7.0  # torch writes, Trident reads
    assert t[1, 2].item() == 7.0
    t[2].copy_(trident.full([5], -3.0))  # Trident writes, torch reads
    assert torch.equal(x[2], torch.full((5,), -3.0))
    np.testing.assert_array_equal(t.numpy(), x.numpy())


def test_trident_to_torch_zero_copy_and_lifetime():
    before = live()
    t = trident.arange(12, dtype=trident.float64).reshape(3, 4)
    y = torch.from_dlpack(t)
    assert y.data_ptr() == _C.tensor_device_address(t._h)
    assert y.dtype == torch.float64 and y.shape == (3, 4)
    y[0, 0] = 100.0
    assert t[0, 0].item() == 100.0
    del t  # torch keeps the storage alive
    assert live() == before + 1  # the export's own view
    assert y.sum().item() == sum(range(12)) + 100.0
    del y  # the consumer's deleter: the storage goes
    assert live() == before


def test_numpy_producer_deleter_runs_once():
    a = np.arange(10, dtype=np.float32)
    base = sys.getrefcount(a)
    t = trident.from_dlpack(a)
    v = t[2:5]
    assert sys.getrefcount(a) == base + 1  # NumPy's DLPack tensor holds the array
    del t
    gc.collect()
    assert sys.getrefcount(a) == base + 1  # the view keeps it
    assert v.tolist() == [2.0, 3.0, 4.0]
    del v
    gc.collect()
    assert sys.getrefcount(a) == base  # released once, not twice (that would go below)


def test_numpy_shares_memory():
    t = trident.zeros(3, 2)
    a = t.numpy()
    a[1, 1] = 5
    assert t[1, 1].item() == 5.0
    b = np.ones((2, 3), dtype=np.int64)
    u = trident.from_numpy(b)
    b[0, 0] = 9
    assert u[0, 0].item() == 9


@pytest.mark.parametrize("tdt,ddt", DTYPES, ids=[str(d[1]) for d in DTYPES])
def test_every_dtype(tdt, ddt, seed):
    if tdt == torch.bool and not TORCH2:
        pytest.skip(f"torch {torch.__version__} has no DLPack bool (tests/test_dlpack.c covers it)")
    g = torch.Generator().manual_seed(seed)
    x = (torch.rand(3, 4, generator=g) * 50).to(tdt)
    t = trident.from_dlpack(x)
    assert t.dtype == ddt
    assert _C.tensor_device_address(t._h) == x.data_ptr()
    back = torch.from_dlpack(t)
    assert back.dtype == tdt and back.data_ptr() == x.data_ptr() and torch.equal(back, x)
    w = torch.from_dlpack(trident.from_dlpack(x).contiguous().clone())  # a tensor Trident made
    assert torch.equal(w, x)


def test_strided_and_broadcast_views(seed):
    torch.manual_seed(seed)
    x = torch.randn(6, 8)
    views = {"transposed": x.t(), "step": x[1:, ::3], "broadcast": x[2].expand(5, 8),
             "offset": x[3:5, 2:7], "unsqueezed_stride0": x[:, :1].expand(6, 4)}
    for name, v in views.items():
        t = trident.from_dlpack(v)
        assert t.stride() == v.stride(), name
        assert _C.tensor_device_address(t._h) == v.data_ptr(), name
        assert torch.equal(torch.from_dlpack(t.contiguous()), v.contiguous()), name
        # and back: torch sees Trident's view with its strides (no copy)
        r = torch.from_dlpack(t)
        assert r.stride() == v.stride() and r.data_ptr() == v.data_ptr(), name
    tt = trident.arange(24).reshape(2, 3, 4).permute(2, 0, 1)[1:, :, 1:]
    r = torch.from_dlpack(tt)
    ref = torch.arange(24.0).reshape(2, 3, 4).permute(2, 0, 1)[1:, :, 1:]
    assert r.stride() == ref.stride() and torch.equal(r, ref)
    e = trident.ones(1, 4).expand(3, 4)
    r = torch.from_dlpack(e)
    assert r.stride() == (0, 1) and torch.equal(r, torch.ones(3, 4))


def test_zero_dim_and_empty():
    s = trident.from_dlpack(torch.tensor(2.5, dtype=torch.float64))
    assert s.shape == () and s.item() == 2.5
    assert torch.from_dlpack(trident.full([], 4.0)).item() == 4.0
    for shape in [(0,), (3, 0), (0, 5, 2)]:
        e = trident.from_dlpack(torch.empty(shape))
        assert e.shape == shape and e.numel() == 0
        back = torch.from_dlpack(trident.zeros(*shape))
        assert back.shape == shape


def test_dlpack_arguments():
    t = trident.arange(4)
    legacy = t.__dlpack__()
    assert "dltensor" in repr(legacy) and "versioned" not in repr(legacy)
    versioned = t.__dlpack__(max_version=(1, 0))
    assert "dltensor_versioned" in repr(versioned)
    u = trident.from_dlpack(versioned)  # Trident reads its own 1.x capsule
    assert _C.tensor_device_address(u._h) == _C.tensor_device_address(t._h)
    c = trident.from_dlpack(t.__dlpack__(max_version=(1, 1), copy=True))
    assert _C.tensor_device_address(c._h) != _C.tensor_device_address(t._h) and c.tolist() == t.tolist()
    assert t.__dlpack_device__() == (1, 0)
    h = t.__dlpack__(dl_device=(1, 0), copy=False)  # already there: shared
    assert trident.from_dlpack(h).tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(BufferError, match="cannot export"):
        t.__dlpack__(dl_device=(2, 0))
    del legacy  # an unconsumed capsule deletes its tensor (no leak: see below)


def test_bad_input():
    before = live()
    with pytest.raises(trident.TridentError, match="dtype int16 .* is not supported"):
        trident.from_dlpack(torch.zeros(3, dtype=torch.int16))
    with pytest.raises(trident.TridentError, match="complex64"):
        trident.from_dlpack(torch.zeros(3, dtype=torch.complex64))
    with pytest.raises(trident.TridentError, match="dim 0 has stride -1: Trident tensors take strides >= 0"):
        trident.from_dlpack(np.arange(5.0)[::-1])
    cap = torch.utils.dlpack.to_dlpack(torch.ones(3))
    trident.from_dlpack(cap)
    with pytest.raises(ValueError, match="already consumed"):
        trident.from_dlpack(cap)
    with pytest.raises(TypeError, match="DLPack capsule"):
        trident.from_dlpack(object())
    with pytest.raises(TypeError, match="add\\(\\): argument 'other' must be a number, not str"):
        trident.add(trident.ones(2), "x")
    with pytest.raises(trident.TridentError, match="do not align") as e:
        trident.ones(2, 3) @ trident.ones(2, 3)
    assert e.value.status == "shape mismatch"
    del e  # its traceback holds the operands
    if "vulkan:0" in trident.devices():
        v = trident.ones(3, device="vulkan")
        with pytest.raises(BufferError, match="Vulkan memory has no address"):
            torch.from_dlpack(v)
        copied = torch.from_dlpack(v.__dlpack__(dl_device=(1, 0)))  # a host copy on request
        assert torch.equal(copied, torch.ones(3))
        del v, copied
    gc.collect()
    assert live() == before  # nothing leaked by the failures
