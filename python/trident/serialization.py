"""Saving and loading: trident.save / trident.load as torch's (pickle of any object holding tensors: a state_dict,
an optimizer's state_dict, a checkpoint dict), and the safetensors format through the C library's reader and
writer (trident.serialization.save_file / load_file, as safetensors.torch's: a flat dict of name -> tensor).

    trident.save({"model": model.state_dict(), "optim": opt.state_dict()}, "ckpt.pt")
    model.load_state_dict(trident.load("ckpt.pt")["model"])
    trident.serialization.save_file(model.state_dict(), "model.safetensors")   # loads in torch, too
"""
import collections
import os
import pickle

from . import _C
from ._tensor import Tensor


def save(obj, f):
    """Pickle obj (tensors are saved by value) to f, a path or a binary file object."""
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:
            pickle.dump(obj, fh, protocol=pickle.HIGHEST_PROTOCOL)
    else:
        pickle.dump(obj, f, protocol=pickle.HIGHEST_PROTOCOL)


def load(f, map_location=None, weights_only=False):
    """The object save() wrote (map_location: a device for every tensor in it, in nested dicts/lists)."""
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            obj = pickle.load(fh)
    else:
        obj = pickle.load(f)
    return obj if map_location is None else _map(obj, str(map_location))


def _map(obj, device):
    if isinstance(obj, Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        return type(obj)((k, _map(v, device)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map(v, device) for v in obj)
    return obj


def save_file(tensors, filename):
    """Write a dict of name -> Tensor as a safetensors file (atomically; any device, any strides)."""
    names = tuple(tensors)
    _C.safetensors_save(os.fspath(filename), names, tuple(tensors[n] for n in names))


def load_file(filename, device="cpu"):
    """The safetensors file's tensors as an ordered dict of name -> Tensor on device."""
    return collections.OrderedDict((n, Tensor(h)) for n, h in _C.safetensors_load(os.fspath(filename), device))
