"""trident.Tensor with torch's semantics: dtypes, devices, Python protocols (==, bool, iter, len, index, float,
format), in-place ops on the C library's version counters, DLPack, NumPy, pickle. The ops themselves (with torch's
signatures) come from _signatures.py; indexing from _index.py; printing from _format.py."""
import builtins
import contextlib

from . import _C
from ._C import TridentError

_DTYPE_NAMES = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool")
# DLPack device types (dlpack.h): kDLCPU, kDLCUDA, kDLVulkan
_KDLCPU, _KDLCUDA, _KDLVULKAN = 1, 2, 7


class dtype(int):
    """A Trident dtype (its td_dtype value); trident.float32 ... trident.bool. Equal to torch's dtype of the same
    name wherever Trident takes a dtype."""

    @property
    def name(self):
        return _DTYPE_NAMES[self]

    @property
    def is_floating_point(self):
        return self.name in ("float32", "float64", "float16", "bfloat16")

    @property
    def itemsize(self):
        return {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int32": 4, "int64": 8}.get(self.name, 1)

    def __repr__(self):
        return "trident." + self.name

    __str__ = __repr__

    def __reduce__(self):
        return (_dtype_of, (self.name,))


DTYPES = {n: dtype(getattr(_C, n)) for n in _DTYPE_NAMES}
float32, float64, float16, bfloat16 = (DTYPES[n] for n in _DTYPE_NAMES[:4])
int32, int64, uint8 = DTYPES["int32"], DTYPES["int64"], DTYPES["uint8"]
float, double, half, long, int = float32, float64, float16, int64, int32  # torch's aliases (trident.float ...)


def _dtype_of(d):
    """trident.dtype of d: a trident dtype, its name, or a torch/NumPy dtype of that name; None stays None."""
    if d is None or type(d) is dtype:
        return d
    if isinstance(d, str):
        name = d
    elif isinstance(d, type):
        name = {"float": "float32", "int": "int64", "bool": "bool"}.get(d.__name__, d.__name__)
    else:
        name = str(d)
    name = name.removeprefix("torch.")
    name = {"float": "float32", "double": "float64", "half": "float16", "long": "int64", "int": "int32",
            "bool_": "bool"}.get(name, name)
    if name not in DTYPES:
        raise TypeError(f"unknown dtype {d!r}; Trident has {', '.join(_DTYPE_NAMES)}")
    return DTYPES[name]


def device(s="auto"):
    """The canonical name of a device: device("cuda") == "cuda:0"; "auto": cuda, else vulkan, else cpu. Takes
    torch.device objects too."""
    return _C.device_parse(str(s))


def devices():
    """The devices available here, as names: ["cpu", "cuda:0", "vulkan:0", ...]."""
    out = ["cpu"]
    for kind in ("cuda", "vulkan"):
        for i in range(64):
            try:
                out.append(_C.device_parse(f"{kind}:{i}"))
            except TridentError:
                break
    return out


def _shape(args):
    """(2, 3), ((2, 3),) and ([2, 3],) -> (2, 3): torch's *size or size."""
    if len(args) == 1 and not isinstance(args[0], builtins.int):
        return tuple(args[0])
    return tuple(args)


def _is_device(a):
    if isinstance(a, str):
        return True
    return type(a).__name__ == "device"  # torch.device


def _leaf_inplace_error(t):
    raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation."
                       if t.is_leaf else
                       "in-place operation on a tensor that is part of an autograd graph: Trident records no "
                       "in-place ops; use the out-of-place op (x = x + y), or run it under trident.no_grad()")


class Tensor:
    """A Trident tensor: a handle on the C library's td_tensor (`_h`, released with the object).

    Behaves as torch.Tensor for the ops, operators, indexing, in-place ops and autograd it covers, and shares
    memory with PyTorch, NumPy, CuPy and others through DLPack: `torch.from_dlpack(t)`, `trident.from_dlpack(x)`.

        >>> x = trident.tensor([[1.0, -2.0], [3.0, 4.0]])
        >>> x.relu().sum(dim=1)
        tensor([1., 7.])"""

    __slots__ = ("_h", "__weakref__")

    def __init__(self, handle):
        self._h = handle

    # ---- properties ----
    @property
    def shape(self):
        return _C.info(self._h)[0]

    def size(self, dim=None):
        s = _C.info(self._h)[0]
        return s if dim is None else s[dim]

    def stride(self, dim=None):
        s = _C.info(self._h)[1]
        return s if dim is None else s[dim]

    @property
    def dtype(self):
        return dtype(_C.info(self._h)[2])

    @property
    def device(self):
        return _C.info(self._h)[3]

    @property
    def is_cuda(self):
        return self.device.startswith("cuda")

    @property
    def ndim(self):
        return len(_C.info(self._h)[0])

    def dim(self):
        return self.ndim

    def numel(self):
        return _C.numel(self._h)

    nelement = numel

    def element_size(self):
        return self.dtype.itemsize

    def is_floating_point(self):
        return self.dtype.is_floating_point

    def is_contiguous(self):
        return _C.is_contiguous(self._h)

    def data_ptr(self):
        return _C.tensor_device_address(self._h)

    @property
    def data(self):
        return Tensor(_C.detach(self._h))

    # ---- Python protocols ----
    def __len__(self):
        s = self.shape
        if not s:
            raise TypeError("len() of a 0-d tensor")
        return s[0]

    def __iter__(self):
        s = self.shape
        if not s:
            raise TypeError("iteration over a 0-d tensor")
        return (Tensor(_C.select(self._h, 0, i)) for i in range(s[0]))

    def _one(self, what):
        n = _C.numel(self._h)
        if n != 1:
            raise RuntimeError(f"{what} of Tensor with {'more than one value' if n else 'no values'} is ambiguous"
                               if what == "Boolean value" else
                               f"a Tensor with {n} elements cannot be converted to {what}")
        return _C.item(self._h)

    def __bool__(self):
        return builtins.bool(self._one("Boolean value"))

    def __float__(self):
        return builtins.float(self._one("Scalar"))

    def __int__(self):
        return builtins.int(self._one("Scalar"))

    def __index__(self):
        if self.dtype.is_floating_point or self.dtype == DTYPES["bool"]:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return builtins.int(self._one("Scalar"))

    def __format__(self, spec):
        if self.ndim == 0 or (spec and _C.numel(self._h) == 1):
            return format(self.item(), spec)
        return format(repr(self), spec)

    def __repr__(self):
        from ._format import tensor_repr

        return tensor_repr(self)

    def __getitem__(self, idx):
        from ._index import getitem

        return getitem(self, idx)

    def __setitem__(self, idx, value):
        from ._index import setitem

        setitem(self, idx, value)

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __reduce_ex__(self, protocol):
        return (_rebuild, (self.detach().to("cpu", float32 if self.dtype == bfloat16 else None).numpy().copy(),
                           self.dtype.name, self.device, self.requires_grad))

    def __deepcopy__(self, memo):
        t = Tensor(_C.clone(_C.detach(self._h)))
        if self.requires_grad:
            t.requires_grad_(True)
        memo[id(self)] = t
        return t

    # ---- DLPack ----
    def __dlpack_device__(self):
        dev = self.device
        kind, _, idx = dev.partition(":")
        code = {"cpu": _KDLCPU, "cuda": _KDLCUDA, "vulkan": _KDLVULKAN}[kind]
        return (code, builtins.int(idx or 0))

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule of this tensor (the array API's protocol).

        stream: the consumer's CUDA stream (an int; None: the legacy default stream, 1; -1: no ordering); Trident's
        queued work is ordered before it with an event, without a host wait. max_version: the newest DLPack the
        consumer reads; (1, x) gives a versioned capsule, None a legacy one. dl_device: (1, 0) exports to the CPU
        (a copy when the tensor is elsewhere). copy: True always copies, False never (BufferError when needed)."""
        t, flags = self, 0
        own = self.__dlpack_device__()
        if dl_device is not None and tuple(dl_device) != own:
            if tuple(dl_device) != (_KDLCPU, 0):
                raise BufferError(f"__dlpack__: cannot export a {self.device} tensor to DLPack device {dl_device}")
            if copy is False:
                raise BufferError(f"__dlpack__: a {self.device} tensor needs a copy for the CPU, and copy=False")
            t, flags = self.to("cpu"), _C.DLPACK_COPY
        elif copy:
            flags = _C.DLPACK_COPY
        elif own[0] == _KDLVULKAN:
            raise BufferError("__dlpack__: Vulkan memory has no address PyTorch can use (kDLVulkan is refused, and "
                              "the export to CUDA through VK_KHR_external_memory_fd is not implemented); use "
                              "t.to('cpu') or __dlpack__(dl_device=(1, 0))")
        if t.__dlpack_device__()[0] == _KDLCUDA:
            stream = 1 if stream is None else stream
        else:
            stream = None
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        return _C.to_dlpack(t._h, flags, stream, versioned)

    # ---- devices and dtypes ----
    def to(self, *args, device=None, dtype=None, non_blocking=False, copy=False):
        """torch's forms: t.to('vulkan:0'), t.to(trident.float16), t.to(torch.float16), t.to('cpu', torch.float64),
        t.to(other) (other's device and dtype), t.to(device=..., dtype=...). Returns self when nothing changes
        (copy=True: always a new tensor)."""
        for a in args:
            if isinstance(a, Tensor):
                device, dtype = a.device, a.dtype
            elif _is_device(a):
                device = a
            else:
                dtype = a
        t = self
        if device is not None and _C.device_parse(str(device)) != t.device:
            t = Tensor(_C.to(t._h, str(device)))
        if dtype is not None and _dtype_of(dtype) != t.dtype:
            t = Tensor(_C.cast(t._h, _dtype_of(dtype)))
        if copy and t is self:
            t = self.clone()
        return t

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=0):
        return self.to(device if isinstance(device, str) else f"cuda:{device}")

    def vulkan(self, device=0):
        return self.to(device if isinstance(device, str) else f"vulkan:{device}")

    def type(self, dtype=None):
        return f"trident.{self.dtype.name}" if dtype is None else self.to(dtype=dtype)

    def float(self): return self.to(dtype=float32)
    def double(self): return self.to(dtype=float64)
    def half(self): return self.to(dtype=float16)
    def bfloat16(self): return self.to(dtype=bfloat16)
    def long(self): return self.to(dtype=int64)
    def int(self): return self.to(dtype=int32)
    def bool(self): return self.to(dtype=DTYPES["bool"])

    def numpy(self, force=False):
        """A writable NumPy array sharing a CPU tensor's memory, as torch's numpy() (a device tensor is copied to
        the host first). The array keeps the tensor alive."""
        import numpy as np

        if self.requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        t = self.cpu()
        if t.dtype == bfloat16:
            raise TypeError("numpy: NumPy has no bfloat16; convert first: t.to(dtype=trident.float32).numpy()")
        if not t.numel():
            return np.empty(t.shape, _TYPESTR[t.dtype.name])
        return np.asarray(_HostArray(t))

    def tolist(self):
        return self.detach().numpy().tolist()

    def item(self):
        v = _C.item(self._h)
        dt = self.dtype
        if dt == DTYPES["bool"]:
            return builtins.bool(v)
        return v if dt.is_floating_point else builtins.int(v)

    # ---- autograd ----
    @property
    def requires_grad(self):
        return _C.requires_grad(self._h)

    @requires_grad.setter
    def requires_grad(self, value):
        _C.set_requires_grad(self._h, builtins.bool(value))

    def requires_grad_(self, requires_grad=True):
        self.requires_grad = requires_grad
        return self

    @property
    def grad(self):
        g = _C.grad_of(self._h)
        return None if g is None else Tensor(g)

    @grad.setter
    def grad(self, value):
        if value is not None:
            raise TypeError("Trident keeps gradients itself: only `t.grad = None` (clearing it) is supported")
        _C.zero_grad(self._h)

    @property
    def is_leaf(self):
        return _C.is_leaf(self._h)

    def backward(self, gradient=None, retain_graph=None, create_graph=False):
        _C.backward(self._h, None if gradient is None else gradient._h, builtins.bool(retain_graph or create_graph))

    def detach(self):
        return Tensor(_C.detach(self._h))

    def zero_grad(self):
        _C.zero_grad(self._h)

    # ---- in-place ops: the result is written into this tensor's memory (td_copy_), which moves the storage's
    # version counter, so a backward that saved the old values fails instead of using the new ones ----
    def _assign(self, value):
        if self.requires_grad and _C.grad_enabled():
            _leaf_inplace_error(self)
        _C.copy_(self._h, value if isinstance(value, Tensor) else _C.scalar(value, self.dtype, self.device))
        return self

    def copy_(self, src, non_blocking=False):
        return self._assign(src if isinstance(src, Tensor) else tensor(src, dtype=self.dtype))

    def add_(self, other, alpha=1):
        return self._assign(self.add(other, alpha=alpha))

    def sub_(self, other, alpha=1):
        return self._assign(self.sub(other, alpha=alpha))

    def mul_(self, other):
        return self._assign(self * other)

    def div_(self, other):
        return self._assign(self / other)

    def pow_(self, exponent):
        return self._assign(self ** exponent)

    def clamp_(self, min=None, max=None):
        return self._assign(self.clamp(min, max))

    def zero_(self):
        return self._assign(0.0)

    def fill_(self, value):
        return self._assign(builtins.float(value))

    def neg_(self):
        return self._assign(-self)

    def __iadd__(self, o): return self.add_(o)
    def __isub__(self, o): return self.sub_(o)
    def __imul__(self, o): return self.mul_(o)
    def __itruediv__(self, o): return self.div_(o)
    def __ipow__(self, o): return self.pow_(o)

    # ---- operators ----
    def __add__(self, o):
        return Tensor(_C.add(self._h, o._h) if isinstance(o, Tensor) else _C.add_scalar(self._h, o))

    def __sub__(self, o):
        return Tensor(_C.sub(self._h, o._h) if isinstance(o, Tensor) else _C.sub_scalar(self._h, o))

    def __mul__(self, o):
        return Tensor(_C.mul(self._h, o._h) if isinstance(o, Tensor) else _C.mul_scalar(self._h, o))

    def __truediv__(self, o):
        return Tensor(_C.div(self._h, o._h) if isinstance(o, Tensor) else _C.div_scalar(self._h, o))

    def __pow__(self, o):
        return Tensor(_C.pow(self._h, o._h) if isinstance(o, Tensor) else _C.pow_scalar(self._h, o))

    def __radd__(self, o): return self + o
    def __rmul__(self, o): return self * o
    def __rsub__(self, o): return Tensor(_C.add_scalar(_C.neg(self._h), o))
    def __rtruediv__(self, o): return Tensor(_C.mul_scalar(_C.pow_scalar(self._h, -1.0), o))

    def __rpow__(self, o):  # o ** x = exp(x ln o)
        import math

        if o <= 0:
            return Tensor(_C.pow(_C.full_like(self._h, o), self._h))
        return Tensor(_C.exp(_C.mul_scalar(self._h, math.log(o))))

    def __neg__(self): return Tensor(_C.neg(self._h))
    def __pos__(self): return self
    def __abs__(self): return Tensor(_C.abs(self._h))
    def __matmul__(self, o): return Tensor(_C.matmul(self._h, o._h))
    def __rmatmul__(self, o): return Tensor(_C.matmul(o._h, self._h))

    def _other(self, o):
        return o._h if isinstance(o, Tensor) else _C.scalar(o, self.dtype, self.device)

    def __eq__(self, o): return Tensor(_C.eq(self._h, self._other(o)))
    def __ne__(self, o): return Tensor(_C.ne(self._h, self._other(o)))
    def __lt__(self, o): return Tensor(_C.lt(self._h, self._other(o)))
    def __le__(self, o): return Tensor(_C.le(self._h, self._other(o)))
    def __gt__(self, o): return Tensor(_C.gt(self._h, self._other(o)))
    def __ge__(self, o): return Tensor(_C.ge(self._h, self._other(o)))

    def __invert__(self):
        if self.dtype != DTYPES["bool"]:
            raise TypeError("~ (logical not) takes a bool tensor")
        return Tensor(_C.eq(self._h, _C.scalar(0, self.dtype, self.device)))

    def __and__(self, o): return (self.to(dtype=uint8) * o.to(dtype=uint8)).bool()
    def __or__(self, o): return (self.to(dtype=uint8) + o.to(dtype=uint8)).bool()

    __hash__ = object.__hash__  # identity, as torch's

    # ---- shapes (method forms taking *size as torch's) ----
    def reshape(self, *shape):
        return Tensor(_C.reshape(self._h, _shape(shape)))

    def view(self, *shape):
        if len(shape) == 1 and not isinstance(shape[0], (builtins.int, tuple, list)):
            return self.to(dtype=shape[0]) if shape[0] != self.dtype else self
        return Tensor(_C.view(self._h, _shape(shape)))

    def expand(self, *shape):
        shape = _shape(shape)
        own = (1,) * (len(shape) - self.ndim) + self.shape
        return Tensor(_C.expand(self._h, tuple(o if s == -1 else s for s, o in zip(shape, own))))

    def expand_as(self, other):
        return self.expand(other.shape)

    def view_as(self, other):
        return self.view(other.shape)

    def reshape_as(self, other):
        return self.reshape(other.shape)

    def permute(self, *dims):
        return Tensor(_C.permute(self._h, _shape(dims)))

    def repeat(self, *sizes):
        sizes = _shape(sizes)
        t = self.reshape((1,) * (len(sizes) - self.ndim) + self.shape)
        for d, r in enumerate(sizes):
            if r != 1:
                t = Tensor(_C.cat([t._h] * r, d))
        return t

    @property
    def T(self):
        return self.permute(*reversed(range(self.ndim)))

    @property
    def mT(self):
        return Tensor(_C.transpose(self._h, -2, -1))


def _rebuild(array, dtype_name, dev, requires_grad):
    t = tensor(array, dtype=DTYPES[dtype_name], device=dev)
    return t.requires_grad_(True) if requires_grad else t


_TYPESTR = {"float32": "<f4", "float64": "<f8", "float16": "<f2", "int32": "<i4", "int64": "<i8", "uint8": "|u1",
            "bool": "|b1"}


class _HostArray:
    """NumPy's array interface over a CPU tensor (NumPy's own from_dlpack gives read-only arrays)."""

    def __init__(self, t):
        self.t = t  # the array's base: keeps the tensor alive
        size = builtins.int(_TYPESTR[t.dtype.name][2:])
        self.__array_interface__ = {"version": 3, "shape": t.shape, "typestr": _TYPESTR[t.dtype.name],
                                    "data": (_C.tensor_device_address(t._h), False),
                                    "strides": tuple(s * size for s in t.stride())}


def is_tensor(obj):
    return isinstance(obj, Tensor)


def from_dlpack(obj, read_only=False):
    """A Trident tensor sharing the memory of obj: any object with __dlpack__ (a torch.Tensor, a NumPy array,
    another Trident tensor) or a DLPack capsule (used once). A CUDA producer orders its work before Trident's
    stream (no host wait). read_only=True accepts a read-only DLPack 1.x tensor (promising not to write it)."""
    flags = _C.DLPACK_READ_ONLY if read_only else 0
    if not hasattr(obj, "__dlpack__"):
        return Tensor(_C.from_dlpack(obj, flags))
    kind, idx = obj.__dlpack_device__()
    kwargs = {}
    if kind == _KDLCUDA:
        stream = _C.native_stream(f"cuda:{idx}")
        kwargs["stream"] = stream if stream else 1  # 0 (the legacy default stream) is spelled 1 in DLPack
    try:
        cap = obj.__dlpack__(max_version=(1, 1), **kwargs)
    except TypeError:  # a producer that predates DLPack 1.0 (PyTorch 1.x, NumPy 1.x)
        cap = obj.__dlpack__(**kwargs)
    return Tensor(_C.from_dlpack(cap, flags))


def from_numpy(a):
    """A tensor sharing a NumPy array's memory (a bool array is copied: NumPy 1.x exports no bool)."""
    import numpy as np

    if a.dtype == np.bool_:
        return from_dlpack(a.view(np.uint8)).to(dtype=DTYPES["bool"])
    return from_dlpack(a)


def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of data (nested lists, numbers, NumPy arrays, tensors).

        >>> trident.tensor([[1, 2], [3, 4]], dtype=trident.float32)"""
    import numpy as np

    if isinstance(data, Tensor):
        t = Tensor(_C.clone(_C.detach(data._h)))
    else:
        if isinstance(data, (list, tuple)) and data and any(isinstance(d, Tensor) for d in data):
            data = [d.tolist() if isinstance(d, Tensor) else d for d in data]
        a = np.array(data)
        if dtype is None and a.dtype == np.float64 and not isinstance(data, np.ndarray):
            dtype = float32  # Python floats become float32, as in PyTorch
        if a.dtype not in (np.bool_, np.float32, np.float64, np.float16, np.int32, np.int64, np.uint8):
            a = a.astype(np.int64 if a.dtype.kind in "iu" else np.float32)
        t = Tensor(_C.reshape(_C.clone(from_numpy(np.ascontiguousarray(a))._h), a.shape))  # keeps 0-d
    t = t.to(device, dtype)
    if requires_grad:
        t.requires_grad_(True)
    return t


as_tensor = tensor


def synchronize(device="cpu"):
    """Wait for the work queued on device."""
    _C.synchronize(str(device))


class _GradMode:
    """A context manager and decorator (torch.no_grad / enable_grad / inference_mode)."""

    def __init__(self, begin, end):
        self._begin, self._end = begin, end

    def __enter__(self):
        self._begin()

    def __exit__(self, *exc):
        self._end()

    def __call__(self, fn=None):
        if fn is None:
            return self
        import functools

        @functools.wraps(fn)
        def wrapped(*a, **k):
            with self:
                return fn(*a, **k)

        return wrapped


def no_grad(fn=None):
    """Ops inside are not recorded for autograd (a context manager or decorator, as torch.no_grad)."""
    return _GradMode(_C.no_grad_begin, _C.no_grad_end)(fn)


def enable_grad(fn=None):
    return _GradMode(_C.enable_grad_begin, _C.enable_grad_end)(fn)


def inference_mode(mode=True):
    return _GradMode(_C.inference_begin, _C.inference_end) if mode else contextlib.nullcontext()


def is_grad_enabled():
    return _C.grad_enabled()


class set_grad_enabled:
    """torch.set_grad_enabled(mode): sets grad mode when called; as a context manager, restores it on exit."""

    def __init__(self, mode):
        self._end = _C.enable_grad_end if mode else _C.no_grad_end
        (_C.enable_grad_begin if mode else _C.no_grad_begin)()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._end()


__all__ = ["Tensor", "TridentError", "dtype", "float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8",
           "float", "double", "half", "long", "int", "device", "devices", "from_dlpack", "from_numpy", "tensor",
           "as_tensor", "is_tensor", "synchronize", "no_grad", "enable_grad", "inference_mode", "is_grad_enabled",
           "set_grad_enabled"]
