"""Trident ops inside PyTorch models: trident.autograd.Function is a torch.autograd.Function whose forward (and,
optionally, backward) runs Trident ops on the torch tensors' memory, shared through DLPack.

    class Scale(trident.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):            # Trident tensors in, Trident tensors out
            return (x * w).tanh()

    y = Scale.apply(x_torch, w_torch)     # torch tensors in and out; y.backward() reaches x_torch.grad

Without a backward, the gradients are Trident's own autograd of forward (td_grad). With one,
backward(ctx, *grad_outputs) gets Trident tensors and returns one gradient (or None) per input; forward then runs
under no_grad and may keep things on ctx. Non-tensor arguments pass through unchanged.
"""
from . import _tensor as _t
from ._tensor import Tensor, from_dlpack, no_grad, enable_grad

_bridges = {}


def grad(outputs, inputs, grad_outputs=None, retain_graph=False, create_graph=False):
    """Gradients of outputs with respect to inputs (torch.autograd.grad; None for an input the outputs do not use)."""
    outputs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    inputs = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    if isinstance(grad_outputs, Tensor):
        grad_outputs = [grad_outputs]
    gs = _t._C.grad(outputs, grad_outputs, inputs, retain_graph, create_graph)
    return [None if g is None else Tensor(g) for g in gs]


def _torch_of(t, torch):
    return torch.from_dlpack(t)


def _bridge(cls):
    import torch

    user_backward = cls.backward is not Function.backward

    class Bridge(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            tins = [from_dlpack(a.detach()) if torch.is_tensor(a) else a for a in args]
            if user_backward:
                with no_grad():
                    outs = cls.forward(ctx, *tins)
            else:
                for a, t in zip(args, tins):
                    if torch.is_tensor(a) and a.requires_grad and t.dtype.is_floating_point:
                        t.requires_grad_(True)
                with enable_grad():
                    outs = cls.forward(ctx, *tins)
            single = isinstance(outs, Tensor)
            outs = (outs,) if single else tuple(outs)
            if not user_backward:
                ctx.td_inputs = [(i, t) for i, t in enumerate(tins) if isinstance(t, Tensor) and t.requires_grad]
                ctx.td_outputs = outs
            ctx.td_n_args = len(args)
            ctx.td_single = single
            res = tuple(_torch_of(o.detach(), torch) for o in outs)
            return res[0] if single else res

        @staticmethod
        def backward(ctx, *gys):
            tg = [from_dlpack(g.contiguous()) if g is not None else None for g in gys]
            if user_backward:
                gs = cls.backward(ctx, *tg)
                gs = (gs,) if isinstance(gs, Tensor) or gs is None else tuple(gs)
            else:
                gs = [None] * ctx.td_n_args
                if ctx.td_inputs:
                    outs = [o for o, g in zip(ctx.td_outputs, tg) if g is not None]
                    gos = [g for g in tg if g is not None]
                    got = grad(outs, [t for _, t in ctx.td_inputs], gos)
                    for (i, _), g in zip(ctx.td_inputs, got):
                        gs[i] = g
            return tuple(None if g is None else _torch_of(g, torch) for g in gs)

    Bridge.__name__ = cls.__name__
    Bridge.__qualname__ = cls.__qualname__
    return Bridge


class Function:
    """Subclass it with a static forward(ctx, *inputs) of Trident tensors (and optionally backward); call
    .apply(*torch_tensors). See the module's documentation."""

    @staticmethod
    def forward(ctx, *args):
        raise NotImplementedError("trident.autograd.Function: define forward(ctx, *inputs)")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError

    @classmethod
    def apply(cls, *args):
        b = _bridges.get(cls)
        if b is None:
            b = _bridges[cls] = _bridge(cls)
        return b.apply(*args)



def Module(function):
    """A torch.nn.Module whose forward is function.apply (a trident.autograd.Function subclass): to put a Trident
    op in torch.nn.Sequential."""
    import torch

    class TridentModule(torch.nn.Module):
        def forward(self, *args):
            return function.apply(*args)

        def extra_repr(self):
            return function.__name__

    return TridentModule()


__all__ = ["Function", "Module", "grad", "no_grad", "enable_grad"]
