"""CView: a trident.nn layer that is a view of the C library's module of that layer (td_linear_new, ...). The
Python Parameters and buffers ARE the C module's tensors (td_module_get: the same handles), so parameters(),
state_dict() keys, initialisation and numerics are the C library's, and forward is one td_module_forward. train()
and to(device / dtype) reach the C module (td_module_train, td_module_to: the tensors move under the same handles,
so an optimizer built before keeps them). A parameter replaced by assignment (weight tying, `lin.weight =
Parameter(...)`) detaches the view: forward then runs the layer's functional form on the module's attributes.
copy.deepcopy and pickle rebuild the layer from its constructor's arguments (the generator's state kept) and copy
the tensors' values, devices and dtypes in."""
from .. import _C
from .._tensor import Tensor
from .module import Module, Parameter


# what a C view's __dict__ holds of its own (remade by the constructor), not copied by deepcopy / pickle
_INTERNAL = {"_cm", "_c_tensors", "_c_out", "_c_training", "_parameters", "_buffers", "_modules", "_init"}


def _rebuild(cls, args, kwargs, attrs, values, grads, replaced):
    """The layer cls(*args, **kwargs) (not drawing from the generator) with attrs set, the tensor values copied in
    (name -> tensor, moving the layer to their device and dtype) and the replaced parameters put back."""
    from .._random import get_rng_state, set_rng_state
    from .._tensor import no_grad

    state = get_rng_state()
    new = cls(*args, **kwargs)
    set_rng_state(state)
    for k, v in attrs.items():
        object.__setattr__(new, k, v)
    for k, v in replaced.items():
        setattr(new, k, v)
    first = next(iter(values.values()), None)
    if first is not None:
        new.to(first.device)
        fp = next((v.dtype for v in values.values() if v.dtype.is_floating_point), None)
        if fp is not None:
            new.to(fp)
    own = dict(new.named_parameters())
    own.update(new.named_buffers())
    with no_grad():
        for k, v in values.items():
            if k in own:
                own[k].copy_(v)
    for k, rg in grads.items():
        if k in own and own[k].requires_grad != rg:
            own[k].requires_grad_(rg)
    return new


def _view(handle, cls):
    t = cls.__new__(cls)
    Tensor.__init__(t, handle)
    return t


class CView(Module):
    _c_tensors = None  # (name, tensor, its handle) of the C module's, once bound; None: no C module

    def __new__(cls, *args, **kwargs):
        obj = super().__new__(cls)
        obj.__dict__["_init"] = (args, kwargs)  # for deepcopy and pickle (_rebuild)
        return obj

    def __reduce_ex__(self, protocol):
        args, kwargs = self._init
        attrs = {k: v for k, v in self.__dict__.items() if k not in _INTERNAL}
        named = list(self.named_parameters()) + list(self.named_buffers())
        values = {k: t.detach() for k, t in named}
        grads = {k: t.requires_grad for k, t in self.named_parameters()}
        own = {n for n, _, _ in (self._c_tensors or ())}
        replaced = {n: p for n, p in self._parameters.items()
                    if self._c_tensors is not None and not any(p is t for _, t, _ in self._c_tensors)}
        replaced.update({n: None for n in own if n not in self._parameters and n not in self._buffers})
        return (_rebuild, (type(self), args, kwargs, attrs, values, grads, replaced))

    def _bind(self, cm, params, buffers=(), device=None, dtype=None):
        """Adopt the C module cm: its parameters and buffers of these names become this module's, in that order."""
        object.__setattr__(self, "_cm", cm)
        object.__setattr__(self, "_c_training", True)
        for n in params:
            setattr(self, n, _view(_C.module_get(cm, n), Parameter))
        for n in buffers:
            self.register_buffer(n, _view(_C.module_get(cm, n), Tensor))
        object.__setattr__(self, "_c_tensors", tuple((n, t, t._h) for n, t in
                                                     list(self._parameters.items()) + list(self._buffers.items())))
        if dtype is not None:
            from .._tensor import _dtype_of

            _C.module_to_dtype(cm, _dtype_of(dtype))
        if device is not None:
            _C.module_to(cm, str(device))

    def _c_live(self):
        """True while every parameter and buffer is still the C module's own: the same object, over the same C
        tensor (another module's .to() may have moved a tied parameter to a new one)."""
        d, ts = self.__dict__, self._c_tensors
        return ts is not None and all(d["_parameters" if isinstance(t, Parameter) else "_buffers"].get(n) is t and
                                      t._h is h for n, t, h in ts)

    def _c_forward(self, input):
        if self._c_training is not self.training:
            _C.module_train(self._cm, self.training)
            object.__setattr__(self, "_c_training", self.training)
        return Tensor(_C.module_forward(self._cm, input))

    def _move(self, device, dtype):
        if not self._c_live():
            return super()._move(device, dtype)
        if dtype is not None:
            _C.module_to_dtype(self._cm, dtype)
        if device is not None:
            _C.module_to(self._cm, str(device))
