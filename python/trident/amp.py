"""trident.amp: torch.amp's autocast and GradScaler over the C library's (include/trident/amp.h).

    with trident.amp.autocast("cpu", dtype=trident.bfloat16):   # ops cast per the op table's autocast policy
        loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward(); scaler.step(opt); scaler.update()

autocast is a context manager and a decorator, per thread. GradScaler keeps torch's defaults and rules (scale 2^16,
x2 after 2000 clean steps, x0.5 and the step skipped after a step with an inf or NaN gradient); unscale_ is one
batched AMP_UNSCALE over the optimizer's gradients."""
import functools

from . import _C
from ._signatures import FUNCTIONS as _F
from ._tensor import Tensor, _dtype_of, float16

_DEVICE_TYPES = {"cpu": 0, "cuda": 1, "vulkan": 2}


class autocast:
    def __init__(self, device_type="cuda", dtype=None, enabled=True, cache_enabled=True):
        kind = str(device_type).split(":")[0]
        if kind not in _DEVICE_TYPES:
            raise ValueError(f"autocast: device_type must be one of {', '.join(_DEVICE_TYPES)}, not {device_type!r}")
        self.device_type, self.enabled = kind, enabled
        self.fast_dtype = _dtype_of(dtype) if dtype is not None else float16
        del cache_enabled  # the C library always caches casts of parameters within the outermost scope

    def __enter__(self):
        if self.enabled:
            _C.autocast_begin(_DEVICE_TYPES[self.device_type], self.fast_dtype)
        return self

    def __exit__(self, *exc):
        if self.enabled:
            _C.autocast_end()

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with autocast(self.device_type, self.fast_dtype, self.enabled):
                return fn(*args, **kwargs)

        return wrapped


class GradScaler:
    def __init__(self, device="cuda", init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                 enabled=True):
        self._enabled = enabled
        self._scale, self._growth_factor, self._backoff_factor = float(init_scale), growth_factor, backoff_factor
        self._growth_interval, self._growth_tracker = growth_interval, 0
        self._per_optimizer = {}  # id(optimizer) -> found_inf tensor (after unscale_)

    def is_enabled(self):
        return self._enabled

    def get_scale(self):
        return self._scale if self._enabled else 1.0

    def scale(self, outputs):
        """outputs (a tensor, or nested lists/tuples of them) times the scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            return outputs * self._scale
        return type(outputs)(self.scale(o) for o in outputs)

    def _grads(self, optimizer):
        return [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]

    def unscale_(self, optimizer):
        """Divide optimizer's gradients by the scale in place, noting whether any is inf or NaN."""
        if not self._enabled:
            return
        if id(optimizer) in self._per_optimizer:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        grads = self._grads(optimizer)
        found = _F["zeros"](1, device=grads[0].device if grads else "cpu")
        by_dtype = {}
        for g in grads:
            by_dtype.setdefault(g.dtype, []).append(g)
        for gs in by_dtype.values():
            _C.amp_unscale_(gs, found, 1.0 / self._scale)
        self._per_optimizer[id(optimizer)] = found

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step() unless a gradient was inf or NaN (unscaling first if unscale_ was not called)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if id(optimizer) not in self._per_optimizer:
            self.unscale_(optimizer)
        if self._per_optimizer[id(optimizer)].item() == 0:
            return optimizer.step(*args, **kwargs)
        return None

    def update(self, new_scale=None):
        """Back off after a skipped step, grow after growth_interval clean ones (or set new_scale)."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale)
        elif any(f.item() != 0 for f in self._per_optimizer.values()):
            self._scale *= self._backoff_factor
            self._growth_tracker = 0
        else:
            self._growth_tracker += 1
            if self._growth_tracker == self._growth_interval:
                self._scale *= self._growth_factor
                self._growth_tracker = 0
        self._per_optimizer.clear()

    def state_dict(self):
        return {"scale": self._scale, "growth_factor": self._growth_factor, "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval, "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict):
        self._scale, self._growth_factor = state_dict["scale"], state_dict["growth_factor"]
        self._backoff_factor, self._growth_interval = state_dict["backoff_factor"], state_dict["growth_interval"]
        self._growth_tracker = state_dict["_growth_tracker"]


__all__ = ["autocast", "GradScaler"]
