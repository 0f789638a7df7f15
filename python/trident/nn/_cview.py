"""CView: a trident.nn layer that is a view of the C library's module of that layer (td_linear_new, ...). The
Python Parameters and buffers ARE the C module's tensors (td_module_get: the same handles), so parameters(),
state_dict() keys, initialisation and numerics are the C library's, and forward is one td_module_forward. train()
and to(device / dtype) reach the C module (td_module_train, td_module_to: the tensors move under the same handles,
so an optimizer built before keeps them). A parameter replaced by assignment (weight tying, `lin.weight =
Parameter(...)`) detaches the view: forward then runs the layer's functional form on the module's attributes."""
from .. import _C
from .._tensor import Tensor
from .module import Module, Parameter


def _view(handle, cls):
    t = cls.__new__(cls)
    Tensor.__init__(t, handle)
    return t


class CView(Module):
    _c_tensors = None  # (name, tensor) of the C module's, once bound; None: no C module (the functional form)

    def _bind(self, cm, params, buffers=(), device=None, dtype=None):
        """Adopt the C module cm: its parameters and buffers of these names become this module's, in that order."""
        object.__setattr__(self, "_cm", cm)
        object.__setattr__(self, "_c_training", True)
        for n in params:
            setattr(self, n, _view(_C.module_get(cm, n), Parameter))
        for n in buffers:
            self.register_buffer(n, _view(_C.module_get(cm, n), Tensor))
        object.__setattr__(self, "_c_tensors", tuple(self._parameters.items()) + tuple(self._buffers.items()))
        if dtype is not None:
            from .._tensor import _dtype_of

            _C.module_to_dtype(cm, _dtype_of(dtype))
        if device is not None:
            _C.module_to(cm, str(device))

    def _c_live(self):
        """True while every parameter and buffer is still the C module's own."""
        d, ts = self.__dict__, self._c_tensors
        return ts is not None and all(d["_parameters" if isinstance(t, Parameter) else "_buffers"].get(n) is t
                   for n, t in ts)

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
