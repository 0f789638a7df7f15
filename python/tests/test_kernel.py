"""trident.kernel on torch tensors: a GLSL kernel on Vulkan (lavapipe in CI; torch's CPU tensors are copied there
and back) and a CUDA kernel on torch CUDA tensors (shared, ordered with torch's current stream). Compile errors
are exceptions carrying the compiler's log."""
import struct

import pytest
import torch

import trident

SAXPY_GLSL = """#version 450
layout(local_size_x = 64) in;
layout(binding = 0) buffer Y { float y[]; };
layout(binding = 1) readonly buffer X { float x[]; };
layout(push_constant) uniform P { float a; uint n; } p;
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < p.n) y[i] += p.a * x[i];
}
"""

SAXPY_CUDA = r"""extern "C" __global__ void saxpy(float *y, const float *x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] += a * x[i];
}
"""


def need(dev):
    if dev not in trident.devices():
        pytest.skip(f"no {dev} device here (devices: {trident.devices()})")


def test_glsl_on_torch_tensors(seed):
    need("vulkan:0")
    g = torch.Generator().manual_seed(seed)
    n = 1000
    x, y = torch.randn(n, generator=g), torch.randn(n, generator=g)
    want = y + 2.5 * x
    k = trident.kernel.compile(SAXPY_GLSL, lang="glsl")
    k.launch([y, x], grid=((n + 63) // 64,), push=struct.pack("=fI", 2.5, n))
    assert torch.allclose(y, want, rtol=1e-6, atol=1e-6)


def test_glsl_compile_error_has_log():
    need("vulkan:0")
    with pytest.raises(trident.TridentError) as e:
        trident.kernel.compile("#version 450\nlayout(local_size_x = 1) in;\nvoid main() { nope = 1; }\n", lang="glsl")
    assert "nope" in e.value.log


def test_bad_language():
    with pytest.raises(ValueError, match="lang must be"):
        trident.kernel.compile("", lang="metal")


def test_cuda_on_torch_tensors(seed):
    need("cuda:0")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    g = torch.Generator(device="cuda").manual_seed(seed)
    n = 1 << 20
    x = torch.randn(n, device="cuda", generator=g)
    y = torch.randn(n, device="cuda", generator=g)
    want = y + 3.0 * x
    k = trident.kernel.compile(SAXPY_CUDA, lang="cuda", entry="saxpy")
    k.launch([y, x], grid=((n + 255) // 256,), block=(256,), push=struct.pack("=fi", 3.0, n))
    assert torch.allclose(y, want, rtol=1e-6, atol=1e-6)  # torch's stream waited for the launch
