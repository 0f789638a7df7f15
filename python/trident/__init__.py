"""Trident for Python: the tensors, ops, autograd and devices of the Trident C library, zero-copy exchange with
PyTorch, NumPy and any DLPack library, Trident kernels on torch tensors (trident.kernel) and Trident ops inside
torch models (trident.autograd.Function).

    import torch, trident
    x = trident.from_dlpack(torch.randn(3))      # shares the memory
    y = torch.from_dlpack(x.relu())               # and back
"""
from ._tensor import *  # noqa: F401,F403
from ._tensor import DTYPES, GENERATED, _C
from . import autograd, kernel  # noqa: F401

globals()["bool"] = DTYPES["bool"]  # trident.bool, as torch.bool
for _name, _fn in GENERATED.items():
    globals().setdefault(_name, _fn)
del _name, _fn
