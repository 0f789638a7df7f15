"""repr() of a tensor as torch prints it: the values (four decimals, or integers as "1."), summarised with "..."
beyond 1000 elements, then the dtype when it is not the default, the device when not the CPU, and the grad."""
import numpy as np

_DEFAULT_DTYPES = ("float32", "int64", "bool")


def _values(t):
    """The tensor's values as a NumPy array (bfloat16 as float32; a device tensor copied to the host)."""
    t = t.detach().to("cpu")
    if t.dtype.name == "bfloat16":
        t = t.float()
    return t.numpy()


def tensor_repr(t):
    a = _values(t)
    opts = {"separator": ", ", "prefix": "tensor(", "threshold": 1000, "edgeitems": 3, "max_line_width": 80}
    if a.dtype.kind == "f":
        finite = a[np.isfinite(a)]
        integral = finite.size == 0 or bool(np.all(finite == np.round(finite)))
        big = finite.size and np.abs(finite).max() >= 1e8
        opts.update(precision=4, floatmode="maxprec" if integral and not big else "fixed",
                    suppress_small=False)
    body = np.array2string(a, **opts) if a.ndim else (repr(a.item()) if a.dtype.kind != "f" else
                                                      np.array2string(a, **opts))
    extras = []
    if t.device != "cpu":
        extras.append(f"device='{t.device}'")
    if t.dtype.name not in _DEFAULT_DTYPES or a.size == 0 and t.dtype.name != "float32":
        extras.append(f"dtype={t.dtype!r}")
    if t.requires_grad:
        extras.append("requires_grad=True" if t.is_leaf else "grad_fn=<Trident>")
    return "tensor(" + body + "".join(", " + e for e in extras) + ")"
