"""Math blocks in Python (include/trident/math.h, docs/math.md): trident.m(src, **values) runs a block on Trident
or torch tensors and numbers; trident.math_function(src) is the block as a reusable torch.autograd.Function;
trident.value_and_grad(src, wrt, **values) is JAX's value_and_grad. Blocks are compiled once per source.

    y = trident.m("relu(x @ W' + b)", x=x, W=W, b=b)   # torch tensors that require grad: joins torch's autograd
    f = trident.math_function("relu(x @ W' + b)")      # f.inputs == ('x', 'W', 'b'); f.apply(x, W, b)
"""
from . import _C
from ._tensor import Tensor, from_dlpack, no_grad
from .autograd import Function

_blocks = {}
_functions = {}


def _compile(src, checkpoint=False):
    """(block capsule, input names, number of outputs), compiled once per (src, checkpoint)."""
    key = (src, bool(checkpoint))
    b = _blocks.get(key)
    if b is None:
        b = _blocks[key] = _C.math_compile(src, bool(checkpoint))
    return b


def _values(names, values):
    missing = [n for n in names if n not in values]
    if missing:
        raise TypeError(f"m(): the block reads {', '.join(missing)}: bind {'it' if len(missing) == 1 else 'them'} "
                        "as keyword arguments")
    return tuple(values[n] for n in names)


def _run(block, names, n_out, vals):
    outs = [Tensor(o) for o in _C.math_run(block, names, vals)]
    return outs[0] if n_out == 1 else tuple(outs)


def _torch_module(vals):
    """torch, when one of vals is a torch tensor (torch is not imported otherwise)."""
    for v in vals:
        if not isinstance(v, (Tensor, int, float)) and type(v).__module__.startswith("torch"):
            import torch

            return torch
    return None


def math_function(src, checkpoint=False):
    """The block src as a torch.autograd.Function subclass, compiled once: .apply(*values) in the order of its
    .inputs (torch tensors or numbers); its backward is the block's symbolic derivative (double backward too).
    checkpoint=True recomputes the block's internals in backward instead of saving them."""
    key = (src, bool(checkpoint))
    f = _functions.get(key)
    if f is None:
        block, names, n_out = _compile(src, checkpoint)

        class MathBlock(Function):
            @staticmethod
            def forward(ctx, *vals):
                return _run(block, names, n_out, vals)

        f = MathBlock.torch()
        f.inputs = names
        f.source = src
        _functions[key] = f
    return f


def m(src, checkpoint=False, **values):
    """Run the math block src with its names bound to values (Trident or torch tensors, numbers); returns its output
    (a tuple for `return a, b`) as tensors of the inputs' kind. Trident tensors join Trident's autograd; torch
    tensors that require grad join torch's (through math_function).

        >>> trident.m("relu(x @ W' + b)", x=x, W=W, b=b)"""
    block, names, n_out = _compile(src, checkpoint)
    vals = _values(names, values)
    torch = _torch_module(vals)
    if torch is None:
        return _run(block, names, n_out, vals)
    if torch.is_grad_enabled() and any(torch.is_tensor(v) and v.requires_grad for v in vals):
        return math_function(src, checkpoint).apply(*vals)
    with no_grad():
        out = _run(block, names, n_out, tuple(from_dlpack(v.detach()) if torch.is_tensor(v) else v for v in vals))
    if n_out == 1:
        return torch.from_dlpack(out)
    return tuple(torch.from_dlpack(o) for o in out)


def value_and_grad(src, wrt, **values):
    """JAX's value_and_grad of the block src (its first output, one element) with respect to the names in wrt (a
    name or a sequence of names), on Trident tensors: (value, grad) or (value, [grads])."""
    block, names, _ = _compile(src)
    single = isinstance(wrt, str)
    wrt = (wrt,) if single else tuple(wrt)
    value, grads = _C.math_value_and_grad(block, names, _values(names, values), wrt)
    grads = [Tensor(g) for g in grads]
    return Tensor(value), grads[0] if single else grads


__all__ = ["m", "math_function", "value_and_grad"]
