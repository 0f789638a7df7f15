"""Trident ops inside PyTorch models: trident.autograd.Function is a torch.autograd.Function whose forward (and,
optionally, backward) runs Trident ops on the torch tensors' memory, shared through DLPack.

    class Scale(trident.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):            # Trident tensors in, Trident tensors out
            return (x * w).tanh()

    y = Scale.apply(x_torch, w_torch)     # torch tensors in and out; y.backward() reaches x_torch.grad

Without a backward, the gradients are Trident's own autograd of forward (td_grad): backward may run again
(retain_graph=True), double backward reaches Trident's second derivative (create_graph=True), and
torch.autograd.gradcheck / gradgradcheck pass in float64. With one, backward(ctx, *grad_outputs) gets Trident
tensors and returns one gradient (or None) per input (once differentiable); forward then runs under no_grad and may
keep things on ctx. Non-tensor arguments pass through unchanged. Function.torch() is the torch.autograd.Function.
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


class _Graph:
    """A piece of Trident's graph as torch sees it: Trident outputs outs of Trident inputs ins (one per torch tensor
    argument, None where it does not require grad)."""

    def __init__(self, outs, ins):
        self.outs, self.ins = outs, ins


def _backward(graph, torch_args, gys, torch):
    """The gradients (torch tensors or None, one per torch_args) of graph's outputs weighted by gys. Trident's graph
    is kept (retain_graph: torch may call backward again); under torch's create_graph the gradients are themselves
    the outputs of a _Node over (torch_args, gys), so that double backward reaches Trident's second derivative."""
    create = torch.is_grad_enabled()
    idx = [i for i, t in enumerate(graph.ins) if t is not None]
    pairs = [(o, g) for o, g in zip(graph.outs, gys) if g is not None and o.requires_grad]
    if not idx or not pairs:
        return (None,) * len(graph.ins)
    tgs = [from_dlpack(g.detach().contiguous()) for _, g in pairs]
    if create:
        tgs = [t.detach().requires_grad_(True) if t.dtype.is_floating_point else t for t in tgs]
    got = grad([o for o, _ in pairs], [graph.ins[i] for i in idx], tgs, retain_graph=True, create_graph=create)
    gs = [None] * len(graph.ins)
    if not create:
        for i, g in zip(idx, got):
            gs[i] = None if g is None else _torch_of(g, torch)
        return tuple(gs)
    live = [(i, g) for i, g in zip(idx, got) if g is not None]
    if not live:
        return tuple(gs)
    node = _Graph([g for _, g in live], list(graph.ins) + [t if t.requires_grad else None for t in tgs])
    res = _node(torch).apply(node, *torch_args, *[g for _, g in pairs])
    res = (res,) if torch.is_tensor(res) else res
    for (i, _), r in zip(live, res):
        gs[i] = r
    return tuple(gs)


_node_class = []


def _node(torch):
    """torch.autograd.Function over a _Graph (made once: torch is imported only when the bridge is used)."""
    if not _node_class:

        class _Node(torch.autograd.Function):
            @staticmethod
            def forward(ctx, graph, *args):
                ctx.td_graph = graph
                ctx.save_for_backward(*args)
                res = tuple(_torch_of(o.detach(), torch) for o in graph.outs)
                return res[0] if len(res) == 1 else res

            @staticmethod
            def backward(ctx, *gys):
                return (None,) + _backward(ctx.td_graph, ctx.saved_tensors, gys, torch)

        _node_class.append(_Node)
    return _node_class[0]


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
                pos = [i for i, a in enumerate(args) if torch.is_tensor(a)]
                ctx.td_pos = pos
                ctx.td_graph = _Graph(outs, [tins[i] if tins[i].requires_grad else None for i in pos])
                ctx.save_for_backward(*[args[i] for i in pos])
            ctx.td_n_args = len(args)
            res = tuple(_torch_of(o.detach(), torch) for o in outs)
            return res[0] if single else res

        @staticmethod
        def backward(ctx, *gys):
            if user_backward:
                return _user_backward(ctx, *gys)
            gs = [None] * ctx.td_n_args
            for i, g in zip(ctx.td_pos, _backward(ctx.td_graph, ctx.saved_tensors, gys, torch)):
                gs[i] = g
            return tuple(gs)

    @torch.autograd.function.once_differentiable
    def _user_backward(ctx, *gys):
        tg = [from_dlpack(g.contiguous()) if g is not None else None for g in gys]
        gs = cls.backward(ctx, *tg)
        gs = (gs,) if isinstance(gs, Tensor) or gs is None else tuple(gs)
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
    def torch(cls):
        """The torch.autograd.Function subclass that runs this one (made once)."""
        b = _bridges.get(cls)
        if b is None:
            b = _bridges[cls] = _bridge(cls)
        return b

    @classmethod
    def apply(cls, *args):
        return cls.torch().apply(*args)



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
