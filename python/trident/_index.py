"""Indexing as torch's, read and write. Ints, slices (a step > 0: torch refuses negative steps, and so does
Trident), None and ... make views (select, slice, unsqueeze); bool masks and integer tensors or lists (advanced
indices) gather, with NumPy's rules for where the indexed dims go: their element positions are worked out on the
host (as torch syncs for a mask) and read with index_select on the flattened tensor, so autograd flows through.
Assignment writes the view (copy_), or scatters into the positions."""
import builtins

from . import _C
from ._tensor import Tensor


def _is_advanced(i):
    return isinstance(i, (Tensor, list)) or type(i).__module__ == "numpy"


def _dims_used(i):
    if i is None or i is Ellipsis:
        return 0
    if isinstance(i, Tensor) and i.dtype.name == "bool":
        return i.ndim
    if type(i).__module__ == "numpy" and getattr(i, "dtype", None) == bool:
        return i.ndim
    return 1


def _expand(t, idx):
    """idx as a tuple with the ellipsis replaced by full slices."""
    idx = idx if isinstance(idx, tuple) else (idx,)
    used = builtins.sum(_dims_used(i) for i in idx)
    ellipses = [k for k, i in enumerate(idx) if i is Ellipsis]
    if len(ellipses) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if used > t.ndim:
        raise IndexError(f"too many indices for tensor of dimension {t.ndim}")
    if ellipses:
        k = ellipses[0]
        idx = idx[:k] + (slice(None),) * (t.ndim - used) + idx[k + 1:]
    return idx


def _basic(t, idx):
    """The view of the basic (int, slice, None) index idx."""
    dim = 0
    h = t._h
    shape = list(t.shape)
    for i in idx:
        if i is None:
            h = _C.unsqueeze(h, dim)
            shape.insert(dim, 1)
            dim += 1
        elif isinstance(i, slice):
            start, stop, step = i.indices(shape[dim]) if i.step is None or i.step > 0 else (0, 0, 0)
            if step <= 0:
                raise ValueError("step must be greater than zero")
            h = _C.slice(h, dim, start, builtins.max(stop, start), step)
            shape[dim] = len(range(start, builtins.max(stop, start), step))
            dim += 1
        else:
            k = i.__index__()
            n = shape[dim]
            if not -n <= k < n:
                raise IndexError(f"index {k} is out of bounds for dimension {dim} with size {n}")
            h = _C.select(h, dim, k)
            shape.pop(dim)
    return Tensor(h)


def _positions(t, idx):
    """NumPy array of the flat (row-major) positions of t[idx] in t."""
    import numpy as np

    conv = []
    for i in idx:
        if isinstance(i, Tensor):
            i = i.detach().to("cpu").numpy()
        elif isinstance(i, list):
            i = np.asarray(i)
        conv.append(i)
    return np.arange(t.numel(), dtype=np.int64).reshape(t.shape)[tuple(conv)]


def getitem(t, idx):
    if not isinstance(idx, tuple) and isinstance(idx, Tensor) and idx.dtype.name in ("int64", "int32"):
        if idx.ndim == 1 and t.ndim:  # x[index_tensor]: index_select on dim 0, no host sync
            zero = _C.scalar(0, idx.dtype, idx.device)
            wrapped = _C.where(_C.lt(idx._h, zero), _C.add_scalar(idx._h, t.shape[0]), idx._h)  # negatives
            return Tensor(_C.index_select(t._h, 0, wrapped))
    idx = _expand(t, idx)
    if not builtins.any(_is_advanced(i) for i in idx):
        return _basic(t, idx)
    pos = _positions(t, idx)
    flat = Tensor(_C.reshape(t._h, (-1,)))
    sel = Tensor(_C.index_select(flat._h, 0, _index_tensor(pos.reshape(-1), t.device)._h))
    return Tensor(_C.reshape(sel._h, pos.shape))


def _index_tensor(a, device):
    from ._tensor import tensor, int64

    return tensor(a, dtype=int64, device=device)


def setitem(t, idx, value):
    if t.requires_grad and _C.grad_enabled():
        from ._tensor import _leaf_inplace_error

        _leaf_inplace_error(t)
    idx = _expand(t, idx)
    if not builtins.any(_is_advanced(i) for i in idx):
        _basic(t, idx)._assign(value)
        return
    import numpy as np

    pos = _positions(t, idx)
    target = t if t.is_contiguous() else t.contiguous()
    flat = Tensor(_C.view(target._h, (-1,)))
    vals = value if isinstance(value, Tensor) else Tensor(_C.scalar(value, t.dtype, t.device))
    vals = Tensor(_C.reshape(_C.contiguous(_C.expand(_C.cast(vals._h, t.dtype), pos.shape)), (-1,)))
    p = pos.reshape(-1)
    # the last write wins for a repeated position, as on torch's CPU
    last = len(p) - 1 - np.unique(p[::-1], return_index=True)[1]
    keep = _index_tensor(last, t.device)
    p_t = _index_tensor(p[last], t.device)
    vals = Tensor(_C.index_select(vals._h, 0, keep._h))
    cur = Tensor(_C.index_select(flat._h, 0, p_t._h))
    flat._assign(Tensor(_C.scatter_add(flat._h, 0, p_t._h, (vals - cur)._h)))
    if target is not t:
        t._assign(target)
