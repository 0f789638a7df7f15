"""trident.nn.Module, Parameter, Sequential and ModuleList as torch's: parameters and buffers registered by
attribute assignment, named_parameters()/state_dict() with torch's dotted key names, load_state_dict, to(device or
dtype) keeping each parameter object (so an optimizer built before still holds them), train()/eval(), zero_grad,
forward hooks."""
import collections

from .. import _C
from .._tensor import Tensor, _dtype_of, _is_device, no_grad


class Parameter(Tensor):
    """A tensor that a Module registers as a parameter (requires_grad by default), as torch.nn.Parameter."""

    __slots__ = ()

    def __init__(self, data=None, requires_grad=True):
        from .._tensor import tensor

        data = tensor([]) if data is None else data
        self._h = _C.detach(data._h)
        if requires_grad:
            _C.set_requires_grad(self._h, True)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


class Module:
    """Base class of layers: assign Parameters, Modules and (register_buffer) buffers as attributes in __init__,
    write forward(), call the module."""

    def __init__(self):
        object.__setattr__(self, "_parameters", collections.OrderedDict())
        object.__setattr__(self, "_buffers", collections.OrderedDict())
        object.__setattr__(self, "_modules", collections.OrderedDict())
        object.__setattr__(self, "_forward_hooks", [])
        object.__setattr__(self, "_forward_pre_hooks", [])
        object.__setattr__(self, "training", True)

    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign before Module.__init__() call")
        for d in (self._parameters, self._buffers, self._modules):
            d.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        elif name in self.__dict__.get("_buffer_names", ()) and (value is None or isinstance(value, Tensor)):
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)
            return
        self.__dict__.pop(name, None)

    def __getattr__(self, name):
        d = self.__dict__
        for k in ("_parameters", "_buffers", "_modules"):
            if k in d and name in d[k]:
                return d[k][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for d in (self._parameters, self._buffers, self._modules):
            if name in d:
                del d[name]
                return
        object.__delattr__(self, name)

    def register_buffer(self, name, tensor, persistent=True):
        self.__dict__.setdefault("_buffer_names", set()).add(name)
        if not persistent:
            self.__dict__.setdefault("_non_persistent", set()).add(name)
        self._buffers[name] = tensor

    def register_parameter(self, name, param):
        self._parameters[name] = param

    def add_module(self, name, module):
        self._modules[name] = module

    register_module = add_module

    # ---- calling ----
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward()")

    def __call__(self, *args, **kwargs):
        for hook in self._forward_pre_hooks:
            r = hook(self, args)
            if r is not None:
                args = r if isinstance(r, tuple) else (r,)
        out = self.forward(*args, **kwargs)
        for hook in self._forward_hooks:
            r = hook(self, args, out)
            if r is not None:
                out = r
        return out

    def register_forward_hook(self, hook):
        self._forward_hooks.append(hook)
        return _Handle(self._forward_hooks, hook)

    def register_forward_pre_hook(self, hook):
        self._forward_pre_hooks.append(hook)
        return _Handle(self._forward_pre_hooks, hook)

    # ---- traversal ----
    def named_modules(self, memo=None, prefix=""):
        memo = set() if memo is None else memo
        if id(self) in memo:
            return
        memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(memo, f"{prefix}.{name}" if prefix else name)

    def modules(self):
        return (m for _, m in self.named_modules())

    def named_children(self):
        return ((n, m) for n, m in self._modules.items() if m is not None)

    def children(self):
        return (m for _, m in self.named_children())

    def named_parameters(self, prefix="", recurse=True):
        seen = set()
        mods = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for mp, m in mods:
            for n, p in m._parameters.items():
                if p is not None and id(p) not in seen:
                    seen.add(id(p))
                    yield (f"{mp}.{n}" if mp else n), p

    def parameters(self, recurse=True):
        return (p for _, p in self.named_parameters(recurse=recurse))

    def named_buffers(self, prefix="", recurse=True):
        mods = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for mp, m in mods:
            for n, b in m._buffers.items():
                if b is not None:
                    yield (f"{mp}.{n}" if mp else n), b

    def buffers(self, recurse=True):
        return (b for _, b in self.named_buffers(recurse=recurse))

    # ---- state ----
    def state_dict(self, destination=None, prefix="", keep_vars=False):
        """torch's keys ("0.weight", "bn.running_mean", ...), in registration order; detached tensors sharing
        memory with the module's (keep_vars=True: the parameters themselves)."""
        out = collections.OrderedDict() if destination is None else destination
        for mp, m in self.named_modules(prefix=prefix.rstrip(".")):
            skip = m.__dict__.get("_non_persistent", set())
            for n, t in list(m._parameters.items()) + [(k, v) for k, v in m._buffers.items() if k not in skip]:
                if t is not None:
                    out[f"{mp}.{n}" if mp else n] = t if keep_vars else t.detach()
        return out

    def load_state_dict(self, state_dict, strict=True):
        """Copies each entry into the module's tensor of that key (any object with __dlpack__, or a NumPy array,
        is accepted, so a torch state_dict loads); returns (missing_keys, unexpected_keys)."""
        own = self.state_dict(keep_vars=True)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        if strict and (missing or unexpected):
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}: missing keys {missing}, "
                               f"unexpected keys {unexpected}")
        with no_grad():
            for k, t in own.items():
                if k in state_dict:
                    src = _as_tensor(state_dict[k])
                    if tuple(src.shape) != tuple(t.shape):
                        raise RuntimeError(f"size mismatch for {k}: copying a param with shape {list(src.shape)}, "
                                           f"the shape in current model is {list(t.shape)}")
                    _C.copy_(t._h, src._h)
        return collections.namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])(missing, unexpected)

    def _move(self, device, dtype):
        """Move this module's own parameters and buffers (not its children's) to device and floating ones to dtype,
        keeping each tensor object (so optimizers keep them); trident.nn's C views move their C module instead."""
        for d in (self._parameters, self._buffers):
            for t in d.values():
                if t is None:
                    continue
                new = t.to(device, dtype if t.dtype.is_floating_point else None)
                if new is not t:
                    rg = t.requires_grad
                    t._h = _C.detach(new._h)
                    if rg:
                        _C.set_requires_grad(t._h, True)

    def to(self, *args, device=None, dtype=None, non_blocking=False):
        """module.to('vulkan:0'), .to(trident.float64), .to(torch.float64), .to(device, dtype): in place."""
        for a in args:
            if _is_device(a):
                device = a
            else:
                dtype = a
        dtype = _dtype_of(dtype)
        for m in self.modules():
            m._move(device, dtype)
        return self

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=0):
        return self.to(device if isinstance(device, str) else f"cuda:{device}")

    def float(self):
        return self.to(dtype="float32")

    def double(self):
        return self.to(dtype="float64")

    def half(self):
        return self.to(dtype="float16")

    def train(self, mode=True):
        for m in self.modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            _C.zero_grad(p._h)

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ---- printing ----
    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = [f"({n}): " + repr(m).replace("\n", "\n  ") for n, m in self._modules.items()]
        extra = self.extra_repr()
        if not lines:
            return f"{type(self).__name__}({extra})"
        return f"{type(self).__name__}(" + (f"{extra}" if extra else "") + "\n  " + "\n  ".join(lines) + "\n)"

    def __dir__(self):
        return list(super().__dir__()) + list(self._parameters) + list(self._modules) + list(self._buffers)


def _as_tensor(v):
    from .._tensor import from_dlpack, tensor

    if isinstance(v, Tensor):
        return v
    if hasattr(v, "detach") and hasattr(v, "__dlpack__"):  # a torch tensor
        return from_dlpack(v.detach().contiguous())
    return tensor(v)


class _Handle:
    def __init__(self, hooks, hook):
        self.hooks, self.hook = hooks, hook

    def remove(self):
        if self.hook in self.hooks:
            self.hooks.remove(self.hook)


class Sequential(Module):
    """Modules called in order: Sequential(Linear(4, 8), ReLU(), Linear(8, 1)); keys "0.weight", ..."""

    def __init__(self, *mods):
        super().__init__()
        if len(mods) == 1 and isinstance(mods[0], collections.OrderedDict):
            for n, m in mods[0].items():
                self.add_module(n, m)
        else:
            for i, m in enumerate(mods):
                self.add_module(str(i), m)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x

    def __getitem__(self, i):
        mods = list(self._modules.values())
        return Sequential(*mods[i]) if isinstance(i, slice) else mods[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, m):
        self.add_module(str(len(self._modules)), m)
        return self


class ModuleList(Module):
    """A list of modules whose parameters the parent registers ("0.weight", ...)."""

    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, m):
        self.add_module(str(len(self._modules)), m)
        return self

    def extend(self, mods):
        for m in mods:
            self.append(m)
        return self

    def __getitem__(self, i):
        mods = list(self._modules.values())
        return ModuleList(mods[i]) if isinstance(i, slice) else mods[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())


class ModuleDict(Module):
    """Modules by name, registered under those names ("encoder.weight", ...), in insertion order."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def update(self, modules):
        for n, m in (modules.items() if hasattr(modules, "items") else modules):
            self.add_module(n, m)

    def __getitem__(self, name):
        return self._modules[name]

    def __setitem__(self, name, module):
        self.add_module(name, module)

    def __delitem__(self, name):
        del self._modules[name]

    def __contains__(self, name):
        return name in self._modules

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()
