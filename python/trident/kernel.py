"""Trident kernels (GLSL on Vulkan, CUDA through NVRTC) launched on torch tensors, Trident tensors or anything
with __dlpack__.

    k = trident.kernel.compile(src, lang="cuda", entry="saxpy")   # device: cuda, or vulkan for GLSL
    k.launch([y, x], grid=(n // 256 + 1,), block=(256,), push=struct.pack("fi", 2.0, n))

Tensors on the kernel's device are shared without a copy (a torch CUDA tensor with a Trident CUDA kernel), and the
launch is ordered after the producer's stream and before torch's current stream, without a host wait. A tensor on
another device (a torch CPU tensor with a Vulkan kernel) is copied to the kernel's device and back after the
launch, so writes reach it either way.
"""
from . import _tensor as _t
from ._tensor import Tensor, from_dlpack

LANGS = {"glsl": _t._C.KERNEL_GLSL, "cuda": _t._C.KERNEL_CUDA}


class Kernel:
    """A compiled kernel of one device (compile() makes it)."""

    def __init__(self, handle, device, lang, entry):
        self._k, self.device, self.lang, self.entry = handle, device, lang, entry

    def __repr__(self):
        return f"trident.kernel.Kernel({self.entry!r}, lang={self.lang!r}, device='{self.device}')"

    def launch(self, tensors, grid, block=None, push=b"", shared_bytes=0):
        """Launch over grid (1 to 3 sizes) blocks of block threads (None: a GLSL shader's own local size; CUDA
        needs it), binding tensors in order (see include/trident/kernel.h) with push bytes (struct.pack) as the
        push constants (GLSL) or the parameters after the tensors (CUDA). Does not wait for the kernel."""
        bound, back, torch_streams = [], [], set()
        for x in tensors:
            t = x if isinstance(x, Tensor) else from_dlpack(x)
            if t.device != self.device:
                dev_t = t.to(self.device)
                back.append((t, dev_t))
                t = dev_t
            elif not isinstance(x, Tensor) and type(x).__module__.startswith("torch") and x.is_cuda:
                import torch

                torch_streams.add(torch.cuda.current_stream(x.device).cuda_stream)
            bound.append(t)
        _t._C.kernel_launch(self._k, tuple(grid), None if block is None else tuple(block), shared_bytes,
                            bound, bytes(push))
        for orig, dev_t in back:
            orig.copy_(dev_t)
        for s in torch_streams:  # torch's later work on these tensors waits for the launch
            _t._C.stream_wait(self.device, s if s else 1)


def compile(source, lang="cuda", entry=None, device=None, defines=(), arch=None):
    """Compile source (lang "cuda" or "glsl") for device (default: cuda for CUDA, vulkan for GLSL) with macros
    defines ("NAME" or "NAME=VALUE") and, for CUDA, arch ("sm_90"). A compile error raises TridentError with the
    compiler's output in its .log."""
    if lang not in LANGS:
        raise ValueError(f"kernel.compile: lang must be 'cuda' or 'glsl', not {lang!r}")
    dev = _t.device(device if device is not None else "cuda" if lang == "cuda" else "vulkan")
    k = _t._C.kernel_compile(dev, LANGS[lang], source, entry, list(defines), arch)
    return Kernel(k, dev, lang, entry or "main")


__all__ = ["compile", "Kernel"]
