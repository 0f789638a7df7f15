"""The layers of trident.nn with torch's constructors, parameter names and initialisation (the same
distributions, drawn from Trident's default generator): Linear, Conv2d, BatchNorm1d/2d, LayerNorm, GroupNorm,
Embedding, Dropout, MaxPool2d, AvgPool2d, Flatten and the activations. The layers with parameters, and Dropout,
are views of the C library's modules (CView: td_linear_new, ...): their tensors are the C module's and forward
is one td_module_forward; the rest are one op each. A model runs at the C library's speed."""
import math

from .. import _C
from .._signatures import FUNCTIONS as _F
from .._tensor import float32
from . import functional as F
from ._cview import CView
from .module import Module, Parameter


def _empty(*shape, dtype=None, device=None):
    return _F["empty"](*shape, dtype=dtype or float32, device=device)


def _uniform(t, bound):
    _C.init_uniform_(t, -bound, bound)
    return t


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


class Linear(CView):
    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        # weight and bias: kaiming_uniform(a=sqrt(5)) and U(-1/sqrt(in), 1/sqrt(in)), as torch
        self._bind(_C.linear_new(in_features, out_features, bias), ("weight", "bias") if bias else ("weight",),
                   device=device, dtype=dtype)
        if not bias:
            self.bias = None

    def forward(self, input):
        if self._c_live():
            return self._c_forward(input)
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Conv2d(CView):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if padding_mode != "zeros":
            raise ValueError("Conv2d: only padding_mode='zeros'")
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, _pair(kernel_size)
        self.stride, self.padding, self.dilation, self.groups = _pair(stride), padding if isinstance(
            padding, str) else _pair(padding), _pair(dilation), groups
        if isinstance(self.padding, str):  # 'same' / 'valid': the functional form (the C layer takes numbers)
            fan_in = in_channels // groups * self.kernel_size[0] * self.kernel_size[1]
            bound = 1 / math.sqrt(fan_in)
            self.weight = Parameter(_uniform(_empty(out_channels, in_channels // groups, *self.kernel_size,
                                                    dtype=dtype, device=device), bound))
            self.bias = Parameter(_uniform(_empty(out_channels, dtype=dtype, device=device), bound)) if bias else None
            return
        cm = _C.conv2d_new(in_channels, out_channels, self.kernel_size, self.stride, self.padding, self.dilation,
                           groups, bias)
        self._bind(cm, ("weight", "bias") if bias else ("weight",), device=device, dtype=dtype)
        if not bias:
            self.bias = None

    def forward(self, input):
        if self._c_live():
            return self._c_forward(input)
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
                + (f", padding={self.padding}" if self.padding not in ((0, 0), 0) else ""))


class BatchNorm2d(CView):
    _c_new = staticmethod(_C.batch_norm2d_new)

    def __init__(self, num_features, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None):
        super().__init__()
        self.num_features, self.eps, self.momentum, self.affine = num_features, eps, momentum, affine
        self.track_running_stats = track_running_stats
        cm = self._c_new(num_features, eps, momentum, affine, track_running_stats)
        self._bind(cm, ("weight", "bias") if affine else (),
                   ("running_mean", "running_var", "num_batches_tracked") if track_running_stats else (),
                   device=device, dtype=dtype)
        if not affine:
            self.weight = self.bias = None

    def forward(self, input):
        if self._c_live():
            return self._c_forward(input)
        use_batch = self.training or not self.track_running_stats
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
        return F.batch_norm(input, self.running_mean if self.track_running_stats else None,
                            self.running_var if self.track_running_stats else None, self.weight, self.bias,
                            use_batch, self.momentum, self.eps)

    def extra_repr(self):
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}"


class BatchNorm1d(BatchNorm2d):
    _c_new = staticmethod(_C.batch_norm1d_new)


class LayerNorm(CView):
    def __init__(self, normalized_shape, eps=1e-05, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.eps = eps
        cm = _C.layer_norm_new(self.normalized_shape, eps, elementwise_affine)
        self._bind(cm, ("weight", "bias") if elementwise_affine else (), device=device, dtype=dtype)
        if not elementwise_affine:
            self.weight = self.bias = None
        elif not bias:  # torch's LayerNorm(bias=False): the C layer always has one, so the view detaches
            self.bias = None

    def forward(self, input):
        if self._c_live():
            return self._c_forward(input)
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}"


class GroupNorm(CView):
    def __init__(self, num_groups, num_channels, eps=1e-05, affine=True, device=None, dtype=None):
        super().__init__()
        self.num_groups, self.num_channels, self.eps = num_groups, num_channels, eps
        cm = _C.group_norm_new(num_groups, num_channels, eps, affine)
        self._bind(cm, ("weight", "bias") if affine else (), device=device, dtype=dtype)
        if not affine:
            self.weight = self.bias = None

    def forward(self, input):
        if self._c_live():
            return self._c_forward(input)
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)


class Embedding(CView):
    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, device=None, dtype=None):
        super().__init__()
        if padding_idx is not None:
            raise ValueError("Embedding: padding_idx is not supported")
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self._bind(_C.embedding_new(num_embeddings, embedding_dim), ("weight",), device=device, dtype=dtype)

    def forward(self, input):
        if self._c_live():
            return self._c_forward(input)
        return F.embedding(input, self.weight)

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}"


class Dropout(CView):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0 <= p <= 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        if p < 1:  # the C layer's range (torch also takes p = 1: the functional form)
            self._bind(_C.dropout_new(p), ())
        object.__setattr__(self, "_c_p", p if 0 <= p < 1 else None)

    def forward(self, input):
        if self.p == self._c_p:
            return self._c_forward(input)
        return F.dropout(input, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}"


class Conv1d(CView):
    """nn.Conv1d: x [N, C, L] -> [N, O, Lo] (the C layer runs it as a Conv2d over H = 1)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if padding_mode != "zeros" or isinstance(padding, str):
            raise ValueError("Conv1d: only numeric padding with padding_mode='zeros'")
        one = lambda v: v[0] if isinstance(v, (tuple, list)) else v  # noqa: E731
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, (one(kernel_size),)
        self.stride, self.padding, self.dilation = (one(stride),), (one(padding),), (one(dilation),)
        self.groups = groups
        cm = _C.conv1d_new(in_channels, out_channels, one(kernel_size), one(stride), one(padding), one(dilation),
                           groups, bias)
        self._bind(cm, ("weight", "bias") if bias else ("weight",), device=device, dtype=dtype)
        if not bias:
            self.bias = None

    def forward(self, input):
        if self._c_live():
            return self._c_forward(input)
        w, b = self.weight.unsqueeze(2), self.bias
        y = F.conv2d(input.unsqueeze(2), w, b, (1, self.stride[0]), (0, self.padding[0]), (1, self.dilation[0]),
                     self.groups)
        return y.squeeze(2)

    def extra_repr(self):
        return f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"


class ConvTranspose2d(CView):
    """nn.ConvTranspose2d: weight [in, out/groups, kh, kw], bias [out]; forward(input) (no output_size)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if padding_mode != "zeros":
            raise ValueError("ConvTranspose2d: only padding_mode='zeros'")
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, _pair(kernel_size)
        self.stride, self.padding, self.output_padding = _pair(stride), _pair(padding), _pair(output_padding)
        self.dilation, self.groups = _pair(dilation), groups
        cm = _C.conv_transpose2d_new(in_channels, out_channels, self.kernel_size, self.stride, self.padding,
                                     self.output_padding, groups, bias, self.dilation)
        self._bind(cm, ("weight", "bias") if bias else ("weight",), device=device, dtype=dtype)
        if not bias:
            self.bias = None

    def forward(self, input, output_size=None):
        if output_size is not None:
            raise ValueError("ConvTranspose2d: output_size is not supported; give output_padding")
        if self._c_live():
            return self._c_forward(input)
        return _F["conv_transpose2d"](input, self.weight, self.bias, self.stride, self.padding, self.output_padding,
                                      self.groups, self.dilation)

    def extra_repr(self):
        return f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"


class RMSNorm(CView):
    """nn.RMSNorm: x / sqrt(mean(x^2 over the normalized dims) + eps) * weight; eps=None is finfo(dtype).eps."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.eps = eps
        cm = _C.rms_norm_new(self.normalized_shape, -1.0 if eps is None else eps, elementwise_affine)
        self._bind(cm, ("weight",) if elementwise_affine else (), device=device, dtype=dtype)
        if not elementwise_affine:
            self.weight = None

    def forward(self, input):
        if self._c_live():
            return self._c_forward(input)
        dims = tuple(range(-len(self.normalized_shape), 0))
        eps = self.eps if self.eps is not None else {"float64": 2.220446049250313e-16, "float16": 9.765625e-4,
                                                     "bfloat16": 7.8125e-3}.get(str(input.dtype).split(".")[-1],
                                                                                 1.1920928955078125e-07)
        y = input * ((input * input).mean(dims, keepdim=True) + eps).rsqrt()
        return y if self.weight is None else y * self.weight

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}"


class AdaptiveAvgPool2d(CView):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = _pair(output_size)
        if None in self.output_size:
            raise ValueError("AdaptiveAvgPool2d: output_size with None is not supported")
        self._bind(_C.adaptive_avg_pool2d_new(*self.output_size), ())

    def forward(self, input):
        return self._c_forward(input)

    def extra_repr(self):
        return f"output_size={self.output_size}"


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


class LeakyReLU(Module):
    """x where x >= 0, else negative_slope * x."""

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}"


class ELU(Module):
    """x where x > 0, else alpha * (exp(x) - 1)."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha

    def forward(self, input):
        return F.elu(input, self.alpha)

    def extra_repr(self):
        return f"alpha={self.alpha}"


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
SmoothL1Loss = _loss("SmoothL1Loss", F.smooth_l1_loss)
HuberLoss = _loss("HuberLoss", F.huber_loss)
KLDivLoss = _loss("KLDivLoss", F.kl_div)
