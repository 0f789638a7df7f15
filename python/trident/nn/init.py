"""trident.nn.init: torch.nn.init's in-place initialisers over the C library's (td_init_*), drawing from the
default generator (trident.manual_seed)."""
from .. import _C

_NONLINEARITY = {"linear": 0, "conv1d": 0, "conv2d": 0, "sigmoid": 1, "tanh": 2, "relu": 3, "leaky_relu": 4,
                 "selu": 5}


def _nl(name):
    try:
        return _NONLINEARITY[name]
    except KeyError:
        raise ValueError(f"unsupported nonlinearity {name!r}") from None


def calculate_gain(nonlinearity, param=None):
    return _C.init_calculate_gain(_nl(nonlinearity), 0.01 if param is None else param)


def uniform_(tensor, a=0.0, b=1.0):
    _C.init_uniform_(tensor, a, b)
    return tensor


def normal_(tensor, mean=0.0, std=1.0):
    _C.init_normal_(tensor, mean, std)
    return tensor


def constant_(tensor, val):
    _C.init_constant_(tensor, val)
    return tensor


def zeros_(tensor):
    return constant_(tensor, 0.0)


def ones_(tensor):
    return constant_(tensor, 1.0)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    _C.init_kaiming_uniform_(tensor, a, mode == "fan_out", _nl(nonlinearity))
    return tensor


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    _C.init_kaiming_normal_(tensor, a, mode == "fan_out", _nl(nonlinearity))
    return tensor


def xavier_uniform_(tensor, gain=1.0):
    _C.init_xavier_uniform_(tensor, gain)
    return tensor


def xavier_normal_(tensor, gain=1.0):
    _C.init_xavier_normal_(tensor, gain)
    return tensor
