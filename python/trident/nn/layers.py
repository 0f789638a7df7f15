"""The layers of trident.nn with torch's constructors, parameter names and initialisation (the same
distributions, drawn from Trident's default generator): Linear, Conv2d, BatchNorm2d, LayerNorm, GroupNorm,
Embedding, Dropout, MaxPool2d, AvgPool2d, Flatten and the activations. Each forward is one op of the C library
(the batch norm a few), so a model runs at the ops' speed."""
import math

from .. import _C
from .._signatures import FUNCTIONS as _F
from .._tensor import float32, int64
from . import functional as F
from .module import Module, Parameter


def _empty(*shape, dtype=None, device=None):
    return _F["empty"](*shape, dtype=dtype or float32, device=device)


def _uniform(t, bound):
    _C.init_uniform_(t, -bound, bound)
    return t


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


class Linear(Module):
    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        bound = 1 / math.sqrt(in_features) if in_features else 0  # kaiming_uniform(a=sqrt(5)), as torch
        self.weight = Parameter(_uniform(_empty(out_features, in_features, dtype=dtype, device=device), bound))
        self.bias = Parameter(_uniform(_empty(out_features, dtype=dtype, device=device), bound)) if bias else None

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Conv2d(Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if padding_mode != "zeros":
            raise ValueError("Conv2d: only padding_mode='zeros'")
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, _pair(kernel_size)
        self.stride, self.padding, self.dilation, self.groups = _pair(stride), padding if isinstance(
            padding, str) else _pair(padding), _pair(dilation), groups
        fan_in = in_channels // groups * self.kernel_size[0] * self.kernel_size[1]
        bound = 1 / math.sqrt(fan_in)
        self.weight = Parameter(_uniform(_empty(out_channels, in_channels // groups, *self.kernel_size, dtype=dtype,
                                                device=device), bound))
        self.bias = Parameter(_uniform(_empty(out_channels, dtype=dtype, device=device), bound)) if bias else None

    def forward(self, input):
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
                + (f", padding={self.padding}" if self.padding not in ((0, 0), 0) else ""))


class BatchNorm2d(Module):
    def __init__(self, num_features, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None):
        super().__init__()
        self.num_features, self.eps, self.momentum, self.affine = num_features, eps, momentum, affine
        self.track_running_stats = track_running_stats
        ones, zeros = _F["ones"], _F["zeros"]
        kw = {"dtype": dtype, "device": device}
        self.weight = Parameter(ones(num_features, **kw)) if affine else None
        self.bias = Parameter(zeros(num_features, **kw)) if affine else None
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, **kw))
            self.register_buffer("running_var", ones(num_features, **kw))
            self.register_buffer("num_batches_tracked", zeros((), dtype=int64, device=device))

    def forward(self, input):
        use_batch = self.training or not self.track_running_stats
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
        return F.batch_norm(input, self.running_mean if self.track_running_stats else None,
                            self.running_var if self.track_running_stats else None, self.weight, self.bias,
                            use_batch, self.momentum, self.eps)

    def extra_repr(self):
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}"


BatchNorm1d = BatchNorm2d


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps=1e-05, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.eps = eps
        kw = {"dtype": dtype, "device": device}
        self.weight = Parameter(_F["ones"](self.normalized_shape, **kw)) if elementwise_affine else None
        self.bias = Parameter(_F["zeros"](self.normalized_shape, **kw)) if elementwise_affine and bias else None

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}"


class GroupNorm(Module):
    def __init__(self, num_groups, num_channels, eps=1e-05, affine=True, device=None, dtype=None):
        super().__init__()
        self.num_groups, self.num_channels, self.eps = num_groups, num_channels, eps
        kw = {"dtype": dtype, "device": device}
        self.weight = Parameter(_F["ones"](num_channels, **kw)) if affine else None
        self.bias = Parameter(_F["zeros"](num_channels, **kw)) if affine else None

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)


class Embedding(Module):
    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, device=None, dtype=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.weight = Parameter(_F["randn"](num_embeddings, embedding_dim, dtype=dtype, device=device))

    def forward(self, input):
        return F.embedding(input, self.weight)

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}"


class Dropout(Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        self.p = p

    def forward(self, input):
        return F.dropout(input, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}"


class MaxPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride or kernel_size, padding

    def forward(self, input):
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride or kernel_size, padding
        self.count_include_pad = count_include_pad

    def forward(self, input):
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, False, self.count_include_pad)


class Flatten(Module):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)


class Unflatten(Module):
    def __init__(self, dim, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, input):
        d = self.dim % input.dim()
        return input.reshape(*input.shape[:d], *self.unflattened_size, *input.shape[d + 1:])

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class Identity(Module):
    def forward(self, input):
        return input


def _activation(name, fn, doc):
    def forward(self, input):
        return fn(input)

    return type(name, (Module,), {"forward": forward, "__doc__": doc})


ReLU = _activation("ReLU", F.relu, "max(x, 0)")
Tanh = _activation("Tanh", F.tanh, "tanh(x)")
Sigmoid = _activation("Sigmoid", F.sigmoid, "1 / (1 + e^-x)")
SiLU = _activation("SiLU", F.silu, "x * sigmoid(x)")


class GELU(Module):
    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, input):
        return F.softmax(input, self.dim)


class LogSoftmax(Softmax):
    def forward(self, input):
        return F.log_softmax(input, self.dim)


def _loss(name, fn, **defaults):
    def __init__(self, **kwargs):
        Module.__init__(self)
        self.kwargs = {**defaults, **kwargs}  # the functional's keywords: reduction, weight, label_smoothing, ...

    def forward(self, input, target):
        return fn(input, target, **self.kwargs)

    return type(name, (Module,), {"__init__": __init__, "forward": forward})


CrossEntropyLoss = _loss("CrossEntropyLoss", F.cross_entropy)
NLLLoss = _loss("NLLLoss", F.nll_loss)
MSELoss = _loss("MSELoss", F.mse_loss)
L1Loss = _loss("L1Loss", F.l1_loss)
BCELoss = _loss("BCELoss", F.binary_cross_entropy)
BCEWithLogitsLoss = _loss("BCEWithLogitsLoss", F.binary_cross_entropy_with_logits)
