"""CUDA DLPack with PyTorch (the GPU machine; skipped elsewhere): zero copy both ways on torch's current stream,
ordered by events with no host wait (checked with a long kernel queued before), every dtype, and a Trident CUDA
kernel inside a torch model whose gradients match torch's."""
import struct

import pytest
import torch

import trident
from trident import _C

pytestmark = pytest.mark.skipif(
    not (torch.cuda.is_available() and "cuda:0" in trident.devices()),
    reason="no CUDA device for both torch and Trident here")


def long_work(n=4096, reps=60):
    """Queue about 150 ms of matmuls on torch's current stream; returns the result."""
    a = torch.randn(n, n, device="cuda") / n ** 0.5
    for _ in range(reps):
        a = a @ a
        a = a / (a.norm() + 1)
    return a


# Each exchange runs twice: first briefly, then behind a long kernel. The first run loads every kernel the second
# uses: CUDA loads modules lazily (PyTorch's default), and loading one may synchronize the context, which would
# look like a host wait of the exchange. Trident's own start-up (driver context, plugin) happens there too.

def torch_to_trident(reps):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        a = long_work(reps=reps)
        b = a.sum(0)  # pending on s
        waits = _C.host_sync_count()
        t = trident.from_dlpack(b)  # Trident's stream waits for s (event), the host does not
        assert _C.tensor_device_address(t._h) == b.data_ptr()
        u = t * 2.0
        r = torch.from_dlpack(u)  # s waits for Trident's stream
        done = s.query()
        assert _C.host_sync_count() == waits
        ref = b * 2.0
    torch.cuda.synchronize()
    assert torch.allclose(r, ref, rtol=1e-6, atol=1e-6)
    return done


def test_torch_to_trident_no_host_wait(seed):
    torch.manual_seed(seed)
    torch_to_trident(reps=1)
    assert not torch_to_trident(reps=60), "the host waited: the long kernel was done before the exchange returned"


def trident_to_torch(reps, seed):
    t = trident.randn(4096, 4096, generator=trident.Generator().manual_seed(seed), device="cuda") / 64.0
    for _ in range(reps):
        t = t @ t  # Trident's stream is busy for tens of ms
    waits = _C.host_sync_count()
    r = torch.from_dlpack(t)  # torch 2.x asks for a versioned capsule on its current stream
    assert r.data_ptr() == _C.tensor_device_address(t._h)
    early = r.sum()  # queued on torch's stream: it must wait for Trident's matmuls (the event)
    done = torch.cuda.current_stream().query()
    assert _C.host_sync_count() == waits
    torch.cuda.synchronize()
    trident.synchronize("cuda")
    assert torch.equal(early, r.sum())  # read after the matmuls, not during
    return done


def test_trident_to_torch_no_host_wait(seed):
    trident_to_torch(1, seed)
    assert not trident_to_torch(10, seed), "the host waited for Trident's stream"


def test_versioned_capsules():
    x = torch.arange(6.0, device="cuda")
    cap = x.__dlpack__(max_version=(1, 1))
    assert "dltensor_versioned" in repr(cap)
    t = trident.from_dlpack(cap)
    assert torch.from_dlpack(t).cpu().tolist() == list(range(6))
    y = torch.from_dlpack(t)
    y[0] = 42
    assert x[0].item() == 42


@pytest.mark.parametrize("dt", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32,
                                torch.int64, torch.uint8, torch.bool])
def test_every_dtype_and_views(dt):
    x = (torch.arange(24, device="cuda") % 5).to(dt).reshape(4, 6)
    for v in (x, x.t(), x[1:, ::2], x[0].expand(3, 6)):
        t = trident.from_dlpack(v)
        assert _C.tensor_device_address(t._h) == v.data_ptr()
        back = torch.from_dlpack(t)
        assert back.data_ptr() == v.data_ptr() and back.stride() == v.stride() and torch.equal(back, v)


SILU = r"""extern "C" __global__ void silu(float *y, const float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] / (1.0f + expf(-x[i]));
}
"""


class KernelSilu(trident.autograd.Function):
    """silu(x) = x * sigmoid(x) by a Trident CUDA kernel; backward in Trident ops:
    dx = dy * (s + x * s * (1 - s)), s = sigmoid(x)."""
    kernel = None

    @staticmethod
    def forward(ctx, x):
        if KernelSilu.kernel is None:
            KernelSilu.kernel = trident.kernel.compile(SILU, lang="cuda", entry="silu")
        x = x.contiguous()
        y = trident.empty(*x.shape, dtype=x.dtype, device=x.device)
        n = x.numel()
        KernelSilu.kernel.launch([y, x], grid=((n + 255) // 256,), block=(256,), push=struct.pack("=i", n))
        ctx.x = x
        return y

    @staticmethod
    def backward(ctx, dy):
        s = ctx.x.sigmoid()
        return dy * (s + ctx.x * s * (1.0 - s))


def test_trident_cuda_kernel_in_torch_model(seed):
    torch.manual_seed(seed)
    nets = []
    for act in (lambda h: KernelSilu.apply(h), torch.nn.functional.silu):
        torch.manual_seed(seed)
        fc1, fc2 = torch.nn.Linear(32, 64).cuda(), torch.nn.Linear(64, 4).cuda()
        nets.append((fc1, fc2, act))
    x, y = torch.randn(128, 32, device="cuda"), torch.randn(128, 4, device="cuda")
    losses = []
    opts = [torch.optim.SGD(list(a.parameters()) + list(b.parameters()), lr=0.1) for a, b, _ in nets]
    for step in range(30):
        grads = []
        for (fc1, fc2, act), opt in zip(nets, opts):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(fc2(act(fc1(x))), y)
            loss.backward()
            grads.append([p.grad.clone() for p in list(fc1.parameters()) + list(fc2.parameters())])
            opt.step()
        losses.append(loss.item())
        for g, h in zip(*grads):
            assert (g - h).abs().max().item() <= 1e-5 * max(1.0, h.abs().max().item()), f"step {step}"
    assert losses[-1] < 0.9 * losses[0], losses
