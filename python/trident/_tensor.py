"""trident.Tensor, devices, dtypes, DLPack exchange and the generated ops (see _C's OPS)."""
import builtins
import contextlib

from . import _C
from ._C import TridentError

_DTYPE_NAMES = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool")
# DLPack device types (dlpack.h): kDLCPU, kDLCUDA, kDLVulkan
_KDLCPU, _KDLCUDA, _KDLVULKAN = 1, 2, 7


class dtype(int):
    """A Trident dtype (its td_dtype value); trident.float32 ... trident.bool."""

    @property
    def name(self):
        return _DTYPE_NAMES[self]

    @property
    def is_floating_point(self):
        return self.name in ("float32", "float64", "float16", "bfloat16")

    def __repr__(self):
        return "trident." + self.name

    __str__ = __repr__


DTYPES = {n: dtype(getattr(_C, n)) for n in _DTYPE_NAMES}
float32, float64, float16, bfloat16 = (DTYPES[n] for n in _DTYPE_NAMES[:4])
int32, int64, uint8 = DTYPES["int32"], DTYPES["int64"], DTYPES["uint8"]


def device(s="auto"):
    """The canonical name of a device: device("cuda") == "cuda:0"; "auto": cuda, else vulkan, else cpu."""
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
    if len(args) == 1 and not isinstance(args[0], int):
        return tuple(args[0])
    return tuple(args)


class Tensor:
    """A Trident tensor: a handle on the C library's td_tensor (`_h`, released with the object).

    Shares memory with PyTorch, NumPy, CuPy and others through DLPack: `torch.from_dlpack(t)`,
    `trident.from_dlpack(x)`. The ops of ops.h are methods and `trident.<op>` functions."""

    __slots__ = ("_h", "__weakref__")

    def __init__(self, handle):
        self._h = handle

    # ---- properties ----
    @property
    def shape(self):
        return _C.info(self._h)[0]

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

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
    def ndim(self):
        return len(self.shape)

    def dim(self):
        return self.ndim

    def numel(self):
        return _C.numel(self._h)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __repr__(self):
        body = ""
        if self.device == "cpu" and self.numel() <= 16 and self.dtype != bfloat16:
            try:
                body = f"{self.tolist()}, "
            except ImportError:  # no NumPy
                pass
        return f"trident.Tensor({body}shape={list(self.shape)}, dtype={self.dtype!r}, device='{self.device}')"

    # ---- DLPack ----
    def __dlpack_device__(self):
        dev = self.device
        kind, _, idx = dev.partition(":")
        code = {"cpu": _KDLCPU, "cuda": _KDLCUDA, "vulkan": _KDLVULKAN}[kind]
        return (code, int(idx or 0))

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

    # ---- data ----
    def to(self, device=None, dtype=None):
        """A tensor on device with dtype (either may be None); self when nothing changes."""
        t = self
        if device is not None and _C.device_parse(str(device)) != t.device:
            t = Tensor(_C.to(t._h, str(device)))
        if dtype is not None and dtype != t.dtype:
            t = Tensor(_C.cast(t._h, dtype))
        return t

    def cpu(self):
        return self.to("cpu")

    def numpy(self):
        """A writable NumPy array sharing a CPU tensor's memory, as torch's numpy() (a device tensor is copied to
        the host first). The array keeps the tensor alive."""
        import numpy as np

        t = self.cpu()
        if t.dtype == bfloat16:
            raise TypeError("numpy: NumPy has no bfloat16; convert first: t.to(dtype=trident.float32).numpy()")
        return np.asarray(_HostArray(t))

    def tolist(self):
        return self.numpy().tolist()

    def item(self):
        return _C.item(self._h)

    def copy_(self, src):
        _C.copy_(self._h, src._h)
        return self

    # ---- autograd ----
    @property
    def requires_grad(self):
        return _C.requires_grad(self._h)

    @requires_grad.setter
    def requires_grad(self, value):
        _C.set_requires_grad(self._h, builtins.bool(value))

    def requires_grad_(self, value=True):
        self.requires_grad = value
        return self

    @property
    def grad(self):
        g = _C.grad_of(self._h)
        return None if g is None else Tensor(g)

    @property
    def is_leaf(self):
        return _C.is_leaf(self._h)

    def backward(self, gradient=None, retain_graph=False):
        _C.backward(self._h, None if gradient is None else gradient._h, retain_graph)

    def detach(self):
        return Tensor(_C.detach(self._h))

    def zero_grad(self):
        _C.zero_grad(self._h)

    # ---- shapes ----
    def reshape(self, *shape):
        return Tensor(_C.reshape(self._h, _shape(shape)))

    def view(self, *shape):
        return Tensor(_C.view(self._h, _shape(shape)))

    def expand(self, *shape):
        return Tensor(_C.expand(self._h, _shape(shape)))

    def permute(self, *dims):
        return Tensor(_C.permute(self._h, _shape(dims)))

    @property
    def T(self):
        return self.permute(*reversed(range(self.ndim)))

    def __getitem__(self, idx):
        idx = idx if isinstance(idx, tuple) else (idx,)
        t, dim = self, 0
        for i in idx:
            if isinstance(i, int):
                t = Tensor(_C.select(t._h, dim, i))
            elif isinstance(i, slice):
                n = t.shape[dim]
                start, stop, step = i.indices(n)
                t = Tensor(_C.slice(t._h, dim, start, max(stop, start), step))
                dim += 1
            else:
                raise TypeError(f"Tensor indices must be ints or slices, not {type(i).__name__}")
        return t

    # ---- operators ----
    def _binary(self, other, op, op_scalar):
        if isinstance(other, Tensor):
            return Tensor(getattr(_C, op)(self._h, other._h))
        return Tensor(getattr(_C, op_scalar)(self._h, other))

    def _compare(self, other, op):
        if not isinstance(other, Tensor):
            other = Tensor(_C.full_like(self._h, other))
        return Tensor(getattr(_C, op)(self._h, other._h))

    def __add__(self, o): return self._binary(o, "add", "add_scalar")
    def __sub__(self, o): return self._binary(o, "sub", "sub_scalar")
    def __mul__(self, o): return self._binary(o, "mul", "mul_scalar")
    def __truediv__(self, o): return self._binary(o, "div", "div_scalar")
    def __pow__(self, o): return self._binary(o, "pow", "pow_scalar")
    def __radd__(self, o): return self + o
    def __rmul__(self, o): return self * o
    def __rsub__(self, o): return Tensor(_C.add_scalar(_C.neg(self._h), o))
    def __rtruediv__(self, o): return Tensor(_C.mul_scalar(_C.pow_scalar(self._h, -1.0), o))
    def __neg__(self): return Tensor(_C.neg(self._h))
    def __matmul__(self, o): return Tensor(_C.matmul(self._h, o._h))
    def __lt__(self, o): return self._compare(o, "lt")
    def __le__(self, o): return self._compare(o, "le")
    def __gt__(self, o): return self._compare(o, "gt")
    def __ge__(self, o): return self._compare(o, "ge")
    __hash__ = object.__hash__


_TYPESTR = {"float32": "<f4", "float64": "<f8", "float16": "<f2", "int32": "<i4", "int64": "<i8", "uint8": "|u1",
            "bool": "|b1"}


class _HostArray:
    """NumPy's array interface over a CPU tensor (NumPy's own from_dlpack gives read-only arrays)."""

    def __init__(self, t):
        self.t = t  # the array's base: keeps the tensor alive
        size = int(_TYPESTR[t.dtype.name][2:])
        self.__array_interface__ = {"version": 3, "shape": t.shape, "typestr": _TYPESTR[t.dtype.name],
                                    "data": (_C.tensor_device_address(t._h) if t.numel() else 0, False),
                                    "strides": tuple(s * size for s in t.stride())}


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


def tensor(data, dtype=None, device="cpu", requires_grad=False):
    """A new tensor holding a copy of data (nested lists, numbers, NumPy arrays)."""
    import numpy as np

    a = np.array(data)
    if dtype is None and a.dtype == np.float64 and not isinstance(data, np.ndarray):
        dtype = float32  # Python floats become float32, as in PyTorch
    if a.dtype not in (np.bool_, np.float32, np.float64, np.float16, np.int32, np.int64, np.uint8):
        a = a.astype(np.int64 if a.dtype.kind in "iu" else np.float32)
    t = Tensor(_C.clone(from_numpy(np.ascontiguousarray(a))._h))
    t = t.to(device, dtype)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _factory(name):
    cfn = getattr(_C, name)

    def f(*shape, dtype=float32, device="cpu", requires_grad=False):
        t = Tensor(cfn(_shape(shape), dtype, str(device)))
        return t.requires_grad_(True) if requires_grad else t

    f.__name__ = name
    f.__doc__ = f"trident.{name}(*shape, dtype=float32, device='cpu', requires_grad=False)"
    return f


empty, zeros, ones = _factory("empty"), _factory("zeros"), _factory("ones")


def full(shape, value, dtype=float32, device="cpu"):
    return Tensor(_C.full(tuple(shape), value, dtype, str(device)))


def arange(start, end=None, step=1, dtype=float32, device="cpu"):
    if end is None:
        start, end = 0, start
    return Tensor(_C.arange(start, end, step, dtype, str(device)))


def rand(*shape, seed=0, offset=0, dtype=float32, device="cpu"):
    return Tensor(_C.rand(_shape(shape), seed, offset, dtype, str(device)))


def randn(*shape, seed=0, offset=0, dtype=float32, device="cpu"):
    return Tensor(_C.randn(_shape(shape), seed, offset, dtype, str(device)))


def _reduction(name):
    cfn = getattr(_C, name)

    def f(x, dim=None, keepdim=False):
        dims = () if dim is None else (dim,) if isinstance(dim, int) else tuple(dim)
        return Tensor(cfn(x._h, dims, keepdim))

    f.__name__ = name
    f.__doc__ = f"trident.{name}(x, dim=None, keepdim=False): over dim (an int or a tuple; None: every dim)"
    return f


sum, mean, amax, amin, logsumexp = (_reduction(n) for n in ("sum", "mean", "amax", "amin", "logsumexp"))


def cat(tensors, dim=0):
    return Tensor(_C.cat(list(tensors), dim))


def synchronize(device="cpu"):
    """Wait for the work queued on device."""
    _C.synchronize(str(device))


@contextlib.contextmanager
def no_grad():
    """Ops inside are not recorded for autograd (a context manager, as torch.no_grad)."""
    _C.no_grad_begin()
    try:
        yield
    finally:
        _C.no_grad_end()


@contextlib.contextmanager
def enable_grad():
    _C.enable_grad_begin()
    try:
        yield
    finally:
        _C.enable_grad_end()


def _generated(name, params, returns_tensor):
    cfn = getattr(_C, name)

    def f(*args, **kwargs):
        if kwargs:
            bound = dict(zip(params, args))
            bound.update(kwargs)
            try:
                args = [bound[p] for p in params]
            except KeyError as e:
                raise TypeError(f"{name}() missing argument {e}") from None
        args = [a._h if isinstance(a, Tensor) else a for a in args]
        r = cfn(*args)
        return Tensor(r) if returns_tensor and r is not None else r

    f.__name__ = name
    f.__doc__ = f"trident.{name}({', '.join(params)}): td_{name} of the C API (generated from its header)"
    return f


# Every generated function that the definitions above do not already give: as trident.<name>, and as a method
# when its first parameter is the tensor (td_relu(x) -> x.relu()).
GENERATED = {}
for _name, _params, _rt in _C.OPS:
    GENERATED[_name] = _generated(_name, _params, _rt)
    if _params and _params[0] in ("a", "x", "t", "self") and not hasattr(Tensor, _name):
        setattr(Tensor, _name, GENERATED[_name])
for _name in ("sum", "mean", "amax", "amin", "logsumexp"):
    setattr(Tensor, _name, globals()[_name])
del _name, _params, _rt

__all__ = ["Tensor", "TridentError", "dtype", "float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8",
           "device", "devices", "from_dlpack", "from_numpy", "tensor", "empty",
           "zeros", "ones", "full", "arange", "rand", "randn", "cat", "sum", "mean", "amax", "amin", "logsumexp", "synchronize", "no_grad", "enable_grad"]
