"""to_torch(module): a trident.nn.Module as a torch.nn.Module, to sit inside a torch model.

The torch module's parameters and buffers are torch tensors over the Trident module's memory (DLPack, no copy),
under the same names (state_dict keys "0.weight", "bn.running_mean", ... as torch's), so a torch optimizer's
in-place step is what the Trident module computes with, and a BatchNorm's running stats update on both sides.
forward runs the Trident module through the torch bridge (trident.autograd): torch's backward reaches the inputs
and the parameters through Trident's autograd, retain_graph and double backward included.

    tm = trident.nn.Sequential(trident.nn.Linear(4, 8), trident.nn.GELU()).to_torch()
    model = torch.nn.Sequential(tm, torch.nn.Linear(8, 1))    # one model, trained by torch.optim

Place the Trident module on its device and dtype before wrapping (the torch tensors view its memory then);
.module is the Trident module."""
from .._tensor import Tensor, enable_grad, from_dlpack, no_grad
from .. import autograd as _ag

_run_class = []


def _run(torch):
    """The torch.autograd.Function running a Trident module (made once)."""
    if not _run_class:

        class TridentModuleFunction(torch.autograd.Function):
            @staticmethod
            def forward(ctx, module, n_in, *args):
                ins = []
                for a in args[:n_in]:
                    t = from_dlpack(a.detach().contiguous()) if torch.is_tensor(a) else a
                    if torch.is_tensor(a) and a.requires_grad and t.dtype.is_floating_point:
                        t.requires_grad_(True)
                    ins.append(t)
                with enable_grad():
                    outs = module(*ins)
                single = isinstance(outs, Tensor)
                outs = (outs,) if single else tuple(outs)
                params = list(module.parameters())
                graph_ins = [t if isinstance(t, Tensor) and t.requires_grad else None for t in ins]
                graph_ins += [p if a.requires_grad else None for p, a in zip(params, args[n_in:])]
                ctx.td_graph = _ag._Graph(outs, graph_ins)
                ctx.save_for_backward(*[a if torch.is_tensor(a) else None for a in args])
                res = tuple(torch.from_dlpack(o.detach()) for o in outs)
                return res[0] if single else res

            @staticmethod
            def backward(ctx, *gys):
                # graph.ins holds one entry per argument (None for a non-tensor input, which gets no gradient)
                return (None, None) + tuple(_ag._backward(ctx.td_graph, ctx.saved_tensors, gys, torch))

        _run_class.append(TridentModuleFunction)
    return _run_class[0]


def to_torch(module):
    import torch

    views = {}  # id(Trident parameter) -> its torch Parameter: a shared (tied) parameter stays one

    def holder(m):
        """A torch.nn.Module with m's parameters and buffers (torch views of them) and its children's holders."""
        h = torch.nn.Module()
        for n, p in m._parameters.items():
            if p is not None:
                if id(p) not in views:
                    views[id(p)] = torch.nn.Parameter(torch.from_dlpack(p.detach()), p.requires_grad)
                h.register_parameter(n, views[id(p)])
        for n, b in m._buffers.items():
            if b is not None:
                h.register_buffer(n, torch.from_dlpack(b.detach()))
        for n, c in m._modules.items():
            if c is not None:
                h.add_module(n, holder(c))
        return h

    class TridentModule(torch.nn.Module):
        def __init__(self):
            super().__init__()
            object.__setattr__(self, "module", module)
            self.inner = holder(module)

        def forward(self, *args):
            params = [p for _, p in self.inner.named_parameters()]
            if not torch.is_grad_enabled():
                with no_grad():
                    ins = [from_dlpack(a.detach().contiguous()) if torch.is_tensor(a) else a for a in args]
                    out = module(*ins)
                return (torch.from_dlpack(out) if isinstance(out, Tensor)
                        else tuple(torch.from_dlpack(o) for o in out))
            return _run(torch).apply(module, len(args), *args, *params)

        def train(self, mode=True):
            module.train(mode)
            return super().train(mode)

        def extra_repr(self):
            return "\n".join("trident: " + line for line in repr(module).splitlines())

    m = TridentModule()
    # state_dict keys as the Trident module's (no "inner." prefix): the holder's tree is the module's tree
    m._register_state_dict_hook(lambda mod, sd, prefix, local: _rename(sd, prefix + "inner.", prefix))
    m._register_load_state_dict_pre_hook(lambda sd, prefix, *rest: _rename(sd, prefix, prefix + "inner."))
    return m


def _rename(sd, old, new):
    """Keys old + rest become new + rest, in place (the other keys and the order of the renamed ones kept)."""
    for k in [k for k in sd if k.startswith(old) and not k.startswith(new if len(new) > len(old) else "\0")]:
        sd[new + k[len(old):]] = sd.pop(k)
    return sd
