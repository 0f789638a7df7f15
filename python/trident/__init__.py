"""Trident for Python: torch's API over the Trident C library (CPU, CUDA, Vulkan). `import trident as torch` covers
tensors, ops with torch's signatures, autograd, trident.nn, trident.optim, trident.amp, trident.utils.data; plus
zero-copy exchange with PyTorch, NumPy and any DLPack library, Trident kernels on torch tensors (trident.kernel),
Trident ops inside torch models (trident.autograd.Function) and math blocks (trident.m, trident.math_function).

    import trident
    x = trident.randn(4, 3, requires_grad=True)
    loss = trident.nn.functional.mse_loss(x @ trident.ones(3, 2), trident.zeros(4, 2))
    loss.backward()                               # x.grad
    y = trident.from_dlpack(torch_tensor)         # shares the memory
"""
try:
    from . import _C
except ImportError:
    # imported from the source tree (python/ on sys.path, e.g. as the working directory): the built _C is in
    # another trident package on the path (the installed one, or a build tree's); its modules are the same
    import os as _os
    import sys as _sys

    _here = _os.path.dirname(_os.path.abspath(__file__))
    for _p in _sys.path:
        _d = _os.path.join(_os.path.abspath(_p or "."), "trident")
        if _d != _here and _os.path.isdir(_d) and any(f.startswith("_C.") for f in _os.listdir(_d)):
            __path__.append(_d)
            break
    from . import _C

from ._tensor import *  # noqa: F401,F403
from ._tensor import DTYPES
from ._random import Generator, default_generator, manual_seed, seed, initial_seed, get_rng_state, set_rng_state
from ._signatures import FUNCTIONS as _FUNCTIONS
from . import amp, autograd, kernel, nn, optim, utils  # noqa: F401
from ._math import m, math_function, value_and_grad  # noqa: F401
from . import serialization  # noqa: F401
from .serialization import load, save  # noqa: F401

__version__ = _C.__version__
globals()["bool"] = DTYPES["bool"]  # trident.bool, as torch.bool
globals().update(_FUNCTIONS)
