"""The ops of trident with torch's signatures: one table row per op (name, torch's parameters with their keyword names
and defaults, the call into the generated C bindings, a one-line summary, an example). make() turns each row into a
real Python function (def source run through exec), so help() shows the signature, keywords cost what a Python call
costs, and there is no generic argument parsing on the hot path. A function whose first parameter is `input` is
also a Tensor method (x.gelu(), x.argmax(dim=1)). A TypeError from the C layer names the Python parameter."""
import builtins
import collections
import math
import re

from . import _C
from . import _random
from ._tensor import Tensor, _dtype_of, _shape, float32, float64, int64, DTYPES

_INF = math.inf

# (name, parameters, body, summary, example). A body without "return" is one expression giving a td handle, which
# the function wraps in a Tensor.
OPS = [
    # ---- elementwise ----
    ("abs", "input", "_C.abs(input)", "|input|", "trident.abs(trident.tensor([-1.0, 2.0]))"),
    ("neg", "input", "_C.neg(input)", "-input", "trident.neg(trident.ones(2))"),
    ("exp", "input", "_C.exp(input)", "e^input", "trident.exp(trident.zeros(2))"),
    ("log", "input", "_C.log(input)", "natural logarithm", "trident.log(trident.ones(2))"),
    ("sqrt", "input", "_C.sqrt(input)", "square root", "trident.sqrt(trident.tensor([4.0]))"),
    ("rsqrt", "input", "_C.rsqrt(input)", "1 / sqrt(input)", "trident.rsqrt(trident.tensor([4.0]))"),
    ("sin", "input", "_C.sin(input)", "sine", "trident.sin(trident.zeros(2))"),
    ("cos", "input", "_C.cos(input)", "cosine", "trident.cos(trident.zeros(2))"),
    ("tanh", "input", "_C.tanh(input)", "hyperbolic tangent", "trident.tanh(trident.zeros(2))"),
    ("sigmoid", "input", "_C.sigmoid(input)", "1 / (1 + e^-input)", "trident.sigmoid(trident.zeros(2))"),
    ("relu", "input, inplace=False", "_C.relu(input)", "max(input, 0)", "trident.relu(trident.tensor([-1.0, 1.0]))"),
    ("silu", "input, inplace=False", "_C.silu(input)", "input * sigmoid(input)", "trident.silu(trident.ones(2))"),
    ("gelu", "input, approximate='none'", "_C.gelu(input, _approximate(approximate))",
     "x * Phi(x) (approximate='tanh': the tanh form)", "trident.gelu(trident.ones(2), approximate='tanh')"),
    ("clamp", "input, min=None, max=None",
     "_C.clamp(input, -_INF if min is None else min, _INF if max is None else max)",
     "input limited to [min, max] (either may be None)", "trident.clamp(trident.arange(5.0), min=1)"),
    ("clip", "input, min=None, max=None", "return clamp(input, min, max)", "alias of clamp",
     "trident.clip(trident.arange(5.0), 1, 3)"),
    ("add", "input, other, *, alpha=1",
     "_C.add(input, other if alpha == 1 else other * alpha) if isinstance(other, Tensor) else "
     "_C.add_scalar(input, other * alpha)", "input + alpha * other", "trident.add(trident.ones(2), 2, alpha=3)"),
    ("sub", "input, other, *, alpha=1",
     "_C.sub(input, other if alpha == 1 else other * alpha) if isinstance(other, Tensor) else "
     "_C.sub_scalar(input, other * alpha)", "input - alpha * other", "trident.sub(trident.ones(2), trident.ones(2))"),
    ("mul", "input, other", "_C.mul(input, other) if isinstance(other, Tensor) else _C.mul_scalar(input, other)",
     "input * other", "trident.mul(trident.ones(2), 3)"),
    ("div", "input, other", "_C.div(input, other) if isinstance(other, Tensor) else _C.div_scalar(input, other)",
     "input / other", "trident.div(trident.ones(2), 4)"),
    ("pow", "input, exponent", "return _pow(input, exponent)", "input ** exponent (either may be a number)",
     "trident.pow(2, trident.arange(3.0))"),
    ("maximum", "input, other", "_C.maximum(input, other)", "elementwise max", "trident.maximum(a, b)"),
    ("minimum", "input, other", "_C.minimum(input, other)", "elementwise min", "trident.minimum(a, b)"),
    ("eq", "input, other", "_C.eq(input, _scalar(other, input))", "input == other (bool)", "trident.eq(a, 0)"),
    ("ne", "input, other", "_C.ne(input, _scalar(other, input))", "input != other (bool)", "trident.ne(a, 0)"),
    ("lt", "input, other", "_C.lt(input, _scalar(other, input))", "input < other (bool)", "trident.lt(a, 0)"),
    ("le", "input, other", "_C.le(input, _scalar(other, input))", "input <= other (bool)", "trident.le(a, 0)"),
    ("gt", "input, other", "_C.gt(input, _scalar(other, input))", "input > other (bool)", "trident.gt(a, 0)"),
    ("ge", "input, other", "_C.ge(input, _scalar(other, input))", "input >= other (bool)", "trident.ge(a, 0)"),
    ("where", "condition, input, other",
     "_C.where(condition, _scalar(input, other, condition), _scalar(other, input, condition))",
     "input where condition, else other (either may be a number)", "trident.where(x > 0, x, 0.0)"),
    ("outer", "input, vec2", "_C.mul(input.reshape(-1, 1), vec2.reshape(1, -1))", "input[i] * vec2[j]",
     "trident.outer(a, b)"),
    ("isinf", "input", "_C.eq(_C.abs(input), _scalar(float('inf'), input))", "true where input is +-inf",
     "trident.isinf(x / 0)"),
    ("allclose", "input, other, rtol=1e-05, atol=1e-08, equal_nan=False",
     "return _allclose(input, other, rtol, atol, equal_nan)", "every |input - other| <= atol + rtol |other| (bool)",
     "trident.allclose(a, b)"),
    ("square", "input", "_C.mul(input, input)", "input * input", "x.square()"),
    ("isnan", "input", "_C.ne(input, input)", "true where input is NaN", "trident.isnan(x / x)"),
    ("all", "input, dim=None, keepdim=False", "_C.eq(_C.sum(_C.eq(input, _scalar(0, input)), _dims(dim), keepdim), "
     "_scalar(0, input))", "true where every element (along dim) is nonzero", "(x > 0).all()"),
    ("any", "input, dim=None, keepdim=False", "_C.ne(_C.sum(_C.ne(input, _scalar(0, input)), _dims(dim), keepdim), "
     "_scalar(0, input))", "true where some element (along dim) is nonzero", "(x > 0).any(dim=1)"),
    ("masked_fill", "input, mask, value", "_C.masked_fill(input, mask, value)", "value where mask, else input",
     "x.masked_fill(x < 0, 0.0)"),
    ("triu", "input, diagonal=0", "_C.triu(input, diagonal)", "upper triangle", "trident.triu(trident.ones(3, 3))"),
    ("tril", "input, diagonal=0", "_C.tril(input, diagonal)", "lower triangle", "trident.tril(trident.ones(3, 3))"),
    # ---- reductions ----
    ("sum", "input, dim=None, keepdim=False, *, dtype=None", "_C.sum(_cast(input, dtype), _dims(dim), keepdim)",
     "sum over dim (an int, a tuple, or None: all)", "trident.sum(x, dim=1, keepdim=True)"),
    ("mean", "input, dim=None, keepdim=False, *, dtype=None", "_C.mean(_cast(input, dtype), _dims(dim), keepdim)",
     "mean over dim", "x.mean(0)"),
    ("amax", "input, dim=(), keepdim=False", "_C.amax(input, _dims(dim), keepdim)", "max over dim", "x.amax(1)"),
    ("amin", "input, dim=(), keepdim=False", "_C.amin(input, _dims(dim), keepdim)", "min over dim", "x.amin(1)"),
    ("logsumexp", "input, dim, keepdim=False", "_C.logsumexp(input, _dims(dim), keepdim)", "log(sum(exp)) over dim",
     "x.logsumexp(1)"),
    ("var", "input, dim=None, unbiased=True, keepdim=False, *, correction=None",
     "_C.var(input, _dims(dim), int(unbiased) if correction is None else correction, keepdim)",
     "variance over dim (correction 1: unbiased)", "trident.var(x, 1)"),
    ("std", "input, dim=None, unbiased=True, keepdim=False, *, correction=None",
     "_C.sqrt(_C.var(input, _dims(dim), int(unbiased) if correction is None else correction, keepdim))",
     "standard deviation over dim", "x.std(0)"),
    ("max", "input, dim=None, keepdim=False", "return _minmax(input, dim, keepdim, _C.amax, _C.argmax, _C.maximum)",
     "the max (dim=None), (values, indices) along dim, or the elementwise max with a tensor",
     "values, indices = x.max(dim=1)"),
    ("min", "input, dim=None, keepdim=False", "return _minmax(input, dim, keepdim, _C.amin, _C.argmin, _C.minimum)",
     "the min, (values, indices) along dim, or the elementwise min with a tensor", "x.min(dim=1).values"),
    ("argmax", "input, dim=None, keepdim=False",
     "_C.argmax(input, dim, keepdim) if dim is not None else _C.argmax(_C.reshape(input, (-1,)), 0, False)",
     "index of the max along dim (None: of the flattened tensor)", "x.argmax(dim=1)"),
    ("argmin", "input, dim=None, keepdim=False",
     "_C.argmin(input, dim, keepdim) if dim is not None else _C.argmin(_C.reshape(input, (-1,)), 0, False)",
     "index of the min along dim", "x.argmin(dim=1)"),
    # ---- linear algebra and nn ----
    ("matmul", "input, other", "_C.matmul(input, other)", "matrix product (batched, broadcast)", "a @ b"),
    ("mm", "input, mat2", "_C.matmul(input, mat2)", "matrix product", "trident.mm(a, b)"),
    ("bmm", "input, mat2", "_C.matmul(input, mat2)", "batched matrix product", "trident.bmm(a, b)"),
    ("linear", "input, weight, bias=None", "_C.linear(input, weight, bias)", "input @ weight.T + bias",
     "trident.linear(x, w, b)"),
    ("softmax", "input, dim, dtype=None", "_C.softmax(_cast(input, dtype), dim)", "softmax along dim",
     "x.softmax(dim=-1)"),
    ("log_softmax", "input, dim, dtype=None", "_C.log_softmax(_cast(input, dtype), dim)", "log of softmax along dim",
     "x.log_softmax(-1)"),
    ("layer_norm", "input, normalized_shape, weight=None, bias=None, eps=1e-05",
     "_C.layer_norm(input, _n_norm(input, normalized_shape), weight, bias, eps)",
     "normalise over the trailing normalized_shape dims", "trident.layer_norm(x, (5,), w, b)"),
    ("group_norm", "input, num_groups, weight=None, bias=None, eps=1e-05",
     "_C.group_norm(input, num_groups, weight, bias, eps)", "normalise over channel groups",
     "trident.group_norm(x, 2)"),
    ("conv2d", "input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1",
     "_C.conv2d(input, weight, bias, stride, _padding(padding, weight, dilation), dilation, groups)",
     "2-D convolution of [N, C, H, W]", "trident.conv2d(x, w, padding=1)"),
    ("conv_transpose2d", "input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1",
     "_C.conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation)",
     "2-D transposed convolution of [N, C, H, W] (weight [C, O/groups, kh, kw])",
     "trident.conv_transpose2d(x, w, stride=2)"),
    ("max_pool2d", "input, kernel_size, stride=None, padding=0",
     "_C.max_pool2d(input, kernel_size, kernel_size if stride is None else stride, padding)", "2-D max pooling",
     "trident.max_pool2d(x, 2)"),
    ("avg_pool2d", "input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True",
     "_C.avg_pool2d(input, kernel_size, kernel_size if stride is None else stride, padding, count_include_pad)",
     "2-D average pooling", "trident.avg_pool2d(x, 2)"),
    ("dropout", "input, p=0.5, training=True, inplace=False, *, generator=None",
     "return _dropout(input, p, training, generator)",
     "zero elements with probability p and scale the rest by 1/(1-p), fresh numbers each call",
     "trident.dropout(x, 0.5, training=True)"),
    ("scaled_dot_product_attention",
     "query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None",
     "_C.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, "
     "math.nan if scale is None else scale)",
     "softmax(q k^T * scale + mask) v, fused", "trident.scaled_dot_product_attention(q, k, v, is_causal=True)"),
    ("embedding", "input, weight", "_C.embedding(weight, input)", "rows of weight at the indices input",
     "trident.embedding(trident.tensor([0, 2]), w)"),
    ("one_hot", "tensor, num_classes=-1", "_C.one_hot(tensor, num_classes)", "int64 one-hot vectors",
     "trident.one_hot(trident.tensor([0, 2]), 3)"),
    # ---- indexing and joining ----
    ("index_select", "input, dim, index", "_C.index_select(input, dim, index)", "entries of input at index along dim",
     "x.index_select(0, trident.tensor([2, 0]))"),
    ("gather", "input, dim, index", "_C.gather(input, dim, index)", "out[i][j] = input[index[i][j]][j] (dim 0)",
     "x.gather(1, idx)"),
    ("scatter_add", "input, dim, index, src", "_C.scatter_add(input, dim, index, src)",
     "input with src added at index along dim", "x.scatter_add(0, idx, src)"),
    ("cat", "tensors, dim=0", "_C.cat(list(tensors), dim)", "concatenation along dim", "trident.cat([a, b], 1)"),
    ("concat", "tensors, dim=0", "_C.cat(list(tensors), dim)", "alias of cat", "trident.concat([a, b])"),
    ("stack", "tensors, dim=0", "_C.cat([_C.unsqueeze(t, dim) for t in tensors], dim)",
     "tensors of one shape along a new dim", "trident.stack([a, b])"),
    # ---- shapes ----
    ("flatten", "input, start_dim=0, end_dim=-1", "_C.flatten(input, start_dim, end_dim)",
     "dims start_dim..end_dim merged", "x.flatten(1)"),
    ("squeeze", "input, dim=None", "_squeeze(input, dim)", "size-1 dims removed (dim=None: all of them)",
     "x.squeeze()"),
    ("unsqueeze", "input, dim", "_C.unsqueeze(input, dim)", "a size-1 dim inserted at dim", "x.unsqueeze(0)"),
    ("transpose", "input, dim0, dim1", "_C.transpose(input, dim0, dim1)", "dims dim0 and dim1 swapped (a view)",
     "x.transpose(0, 1)"),
    ("swapaxes", "input, axis0, axis1", "_C.transpose(input, axis0, axis1)", "alias of transpose",
     "x.swapaxes(0, 1)"),
    ("t", "input", "return input if input.ndim < 2 else _T(_C.transpose(input, 0, 1))",
     "transpose of a matrix (a 0-d or 1-d input is itself)", "w.t()"),
    ("contiguous", "input, memory_format=None", "_C.contiguous(input)", "a contiguous tensor (self when it is)",
     "x.t().contiguous()"),
    ("clone", "input, *, memory_format=None", "_C.clone(input)", "a copy (recorded by autograd)", "x.clone()"),
    ("narrow", "input, dim, start, length", "_C.slice(input, dim, start, start + length, 1)",
     "length entries of dim from start (a view)", "x.narrow(0, 1, 2)"),
    ("chunk", "input, chunks, dim=0", "return _chunk(input, chunks, dim)", "about equal views along dim",
     "a, b = x.chunk(2, dim=1)"),
    ("split", "tensor, split_size_or_sections, dim=0", "return _split(tensor, split_size_or_sections, dim)",
     "views of the given sizes along dim", "a, b = x.split(2)"),
    ("unbind", "input, dim=0", "return tuple(_T(_C.select(input, dim, i)) for i in range(input.shape[dim]))",
     "the slices along dim", "rows = x.unbind(0)"),
    # ---- creation ----
    ("zeros", "*size, dtype=None, device=None, requires_grad=False",
     "return _new(_C.zeros(_shape(size), _dt(dtype), _dev(device)), requires_grad)", "a tensor of zeros",
     "trident.zeros(2, 3)"),
    ("ones", "*size, dtype=None, device=None, requires_grad=False",
     "return _new(_C.ones(_shape(size), _dt(dtype), _dev(device)), requires_grad)", "a tensor of ones",
     "trident.ones(2, 3, dtype=trident.float64)"),
    ("empty", "*size, dtype=None, device=None, requires_grad=False",
     "return _new(_C.empty(_shape(size), _dt(dtype), _dev(device)), requires_grad)", "an uninitialised tensor",
     "trident.empty(4)"),
    ("full", "size, fill_value, *, dtype=None, device=None, requires_grad=False",
     "return _new(_C.full(_shape((size,)), fill_value, _dt(dtype, fill_value), _dev(device)), requires_grad)",
     "a tensor filled with fill_value", "trident.full((2, 2), 7.0)"),
    ("zeros_like", "input, *, dtype=None, device=None, requires_grad=False",
     "return _like(_C.zeros, input, dtype, device, requires_grad)", "zeros shaped like input",
     "trident.zeros_like(x)"),
    ("ones_like", "input, *, dtype=None, device=None, requires_grad=False",
     "return _like(_C.ones, input, dtype, device, requires_grad)", "ones shaped like input", "trident.ones_like(x)"),
    ("empty_like", "input, *, dtype=None, device=None, requires_grad=False",
     "return _like(_C.empty, input, dtype, device, requires_grad)", "uninitialised, shaped like input",
     "trident.empty_like(x)"),
    ("full_like", "input, fill_value, *, dtype=None, device=None, requires_grad=False",
     "return _new(_C.full(input.shape, fill_value, _dt(dtype or input.dtype), _dev(device or input.device)), "
     "requires_grad)", "fill_value shaped like input", "trident.full_like(x, 2.0)"),
    ("arange", "start, end=None, step=1, *, dtype=None, device=None, requires_grad=False",
     "return _new(_arange(start, end, step, dtype, device), requires_grad)",
     "start, start+step, ... below end (int64 for int arguments, as torch)", "trident.arange(5)"),
    ("eye", "n, m=None, *, dtype=None, device=None, requires_grad=False",
     "return _new(_eye(n, n if m is None else m, dtype, device)._h, requires_grad)", "the identity matrix [n, m]",
     "trident.eye(3)"),
    ("linspace", "start, end, steps, *, dtype=None, device=None, requires_grad=False",
     "return _new(_linspace(start, end, steps, dtype, device)._h, requires_grad)",
     "steps values evenly spaced from start to end inclusive", "trident.linspace(0, 1, 5)"),
    ("randperm", "n, *, generator=None, dtype=None, device=None, requires_grad=False",
     "return _new(_randperm(n, generator, dtype, device)._h, requires_grad)",
     "a random permutation of 0..n-1 (int64)", "trident.randperm(5)"),
    ("rand", "*size, generator=None, dtype=None, device=None, requires_grad=False",
     "return _new(_random.rand(_C.rand, _shape(size), generator, _dt(dtype), _dev(device)), requires_grad)",
     "uniform [0, 1) samples from the generator (fresh each call)", "trident.rand(2, 3)"),
    ("randn", "*size, generator=None, dtype=None, device=None, requires_grad=False",
     "return _new(_random.rand(_C.randn, _shape(size), generator, _dt(dtype), _dev(device)), requires_grad)",
     "standard normal samples from the generator (fresh each call)", "trident.randn(2, 3)"),
    ("randint", "low=0, high=None, size=None, *, generator=None, dtype=None, device=None",
     "return _random.randint(low, high, size, generator, dtype, device)",
     "integers uniform in [low, high), int64", "trident.randint(0, 10, (3,))"),
    ("randn_like", "input, *, dtype=None, device=None",
     "return randn(input.shape, dtype=dtype or input.dtype, device=device or input.device)",
     "normal samples shaped like input", "trident.randn_like(x)"),
    ("rand_like", "input, *, dtype=None, device=None",
     "return rand(input.shape, dtype=dtype or input.dtype, device=device or input.device)",
     "uniform samples shaped like input", "trident.rand_like(x)"),
]

# trident.nn.functional's losses (torch.nn.functional's signatures)
LOSSES = [
    ("cross_entropy",
     "input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction='mean', "
     "label_smoothing=0.0",
     "_C.cross_entropy_loss(input, target, weight, ignore_index, label_smoothing, _reduction(reduction))",
     "cross-entropy of logits [N, C] and class ids [N] (or probabilities)", "F.cross_entropy(logits, y)"),
    ("nll_loss", "input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction='mean'",
     "_C.nll_loss(input, target, weight, ignore_index, _reduction(reduction))", "negative log-likelihood",
     "F.nll_loss(x.log_softmax(1), y)"),
    ("mse_loss", "input, target, size_average=None, reduce=None, reduction='mean'",
     "_C.mse_loss(input, target, _reduction(reduction))", "(input - target)^2", "F.mse_loss(y_hat, y)"),
    ("l1_loss", "input, target, size_average=None, reduce=None, reduction='mean'",
     "_C.l1_loss(input, target, _reduction(reduction))", "|input - target|", "F.l1_loss(y_hat, y)"),
    ("binary_cross_entropy", "input, target, weight=None, size_average=None, reduce=None, reduction='mean'",
     "_C.bce_loss(input, target, weight, _reduction(reduction))", "BCE of probabilities",
     "F.binary_cross_entropy(p, y)"),
    ("binary_cross_entropy_with_logits",
     "input, target, weight=None, size_average=None, reduce=None, reduction='mean', pos_weight=None",
     "_C.bce_with_logits_loss(input, target, weight, pos_weight, _reduction(reduction))", "BCE of logits (stable)",
     "F.binary_cross_entropy_with_logits(z, y)"),
    ("smooth_l1_loss", "input, target, size_average=None, reduce=None, reduction='mean', beta=1.0",
     "_C.smooth_l1_loss(input, target, _reduction(reduction), beta)", "0.5 d^2 / beta if d < beta else d - beta/2",
     "F.smooth_l1_loss(y_hat, y)"),
    ("huber_loss", "input, target, reduction='mean', delta=1.0",
     "_C.huber_loss(input, target, _reduction(reduction), delta)", "0.5 d^2 if d < delta else delta (d - delta/2)",
     "F.huber_loss(y_hat, y)"),
    ("kl_div", "input, target, size_average=None, reduce=None, reduction='mean', log_target=False",
     "_C.kl_div_loss(input, target, 3 if reduction == 'batchmean' else _reduction(reduction), log_target)",
     "KL divergence of log-probabilities input from target", "F.kl_div(q.log_softmax(1), p, reduction='batchmean')"),
]

# ---- helpers the bodies use ----
_T = Tensor
_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}
_APPROX = {"none": False, "tanh": True}
return_types = collections.namedtuple("max", ["values", "indices"])


def _reduction(r):
    try:
        return _REDUCTIONS[r]
    except KeyError:
        raise ValueError(f"reduction must be 'none', 'mean' or 'sum', not {r!r}") from None


def _approximate(a):
    try:
        return _APPROX[a]
    except (KeyError, TypeError):
        raise ValueError(f"approximate must be 'none' or 'tanh', not {a!r}") from None


def _dims(dim):
    return () if dim is None else (dim,) if isinstance(dim, builtins.int) else tuple(dim)


def _cast(x, dtype):
    return x if dtype is None else x.to(dtype=dtype)


def _scalar(v, like, *more):
    """v's handle, or a 0-d tensor of v in like's dtype and device (like: the first tensor among like, *more)."""
    if isinstance(v, Tensor):
        return v
    for t in (like,) + more:
        if isinstance(t, Tensor):
            dt = t.dtype
            if not dt.is_floating_point and isinstance(v, builtins.float):
                dt = float32
            return _C.scalar(v, dt, t.device)
    raise TypeError("expected at least one trident.Tensor argument")


def _dt(dtype, value=None):
    if dtype is None:
        return int64 if isinstance(value, builtins.int) and not isinstance(value, builtins.bool) else \
            DTYPES["bool"] if isinstance(value, builtins.bool) else float32
    return _dtype_of(dtype)


def _dev(device):
    return "cpu" if device is None else str(device)


def _new(h, requires_grad):
    t = Tensor(h)
    if requires_grad:
        _C.set_requires_grad(h, True)
    return t


def _like(cfn, input, dtype, device, requires_grad):
    return _new(cfn(input.shape, _dt(dtype or input.dtype), _dev(device or input.device)), requires_grad)


def _arange(start, end, step, dtype, device):
    if end is None:
        start, end = 0, start
    if dtype is None:
        ints = all(isinstance(v, builtins.int) for v in (start, end, step))
        dtype = int64 if ints else float32
    return _C.arange(start, end, step, _dtype_of(dtype), _dev(device))


def _eye(n, m, dtype, device):
    r = Tensor(_arange(0, n, 1, int64, device)).reshape(n, 1)
    return (r == Tensor(_arange(0, m, 1, int64, device)).reshape(1, m)).to(dtype=_dtype_of(dtype) or float32)


def _linspace(start, end, steps, dtype, device):
    dt = _dtype_of(dtype) or float32
    if steps == 1:
        return Tensor(_C.full((1,), start, dt, _dev(device)))
    i = Tensor(_arange(0, steps, 1, float64, device))
    return (i * ((end - start) / (steps - 1)) + start).to(dtype=dt)


def _randperm(n, generator, dtype, device):
    from ._tensor import tensor

    keys = Tensor(_random.rand(_C.rand, (n,), generator, float32, "cpu")).tolist() if n else []
    return tensor(sorted(range(n), key=keys.__getitem__), dtype=dtype or int64, device=device)


def _allclose(a, b, rtol, atol, equal_nan):
    b = b if isinstance(b, Tensor) else Tensor(_C.full((), b, a.dtype, str(a.device)))
    ok = (a - b).abs() <= (b.abs() * rtol + atol)
    if equal_nan:
        ok = ok | ((a != a) & (b != b))
    return builtins.bool(ok.all())


def _pow(a, b):
    if isinstance(a, Tensor):
        return a ** b
    return b.__rpow__(a)


def _minmax(input, dim, keepdim, reduce, arg, elementwise):
    if dim is None:
        return Tensor(reduce(input, (), False))
    if isinstance(dim, Tensor):
        return Tensor(elementwise(input, dim))
    return return_types(Tensor(reduce(input, (dim,), keepdim)), Tensor(arg(input, dim, keepdim)))


def _n_norm(input, normalized_shape):
    ns = (normalized_shape,) if isinstance(normalized_shape, builtins.int) else tuple(normalized_shape)
    if tuple(input.shape[len(input.shape) - len(ns):]) != ns:
        raise ValueError(f"layer_norm(): normalized_shape {list(ns)} is not the trailing shape of input "
                         f"{list(input.shape)}")
    return len(ns)


def _padding(padding, weight, dilation):
    if isinstance(padding, str):
        if padding == "valid":
            return 0
        if padding == "same":
            d = (dilation, dilation) if isinstance(dilation, builtins.int) else dilation
            k = weight.shape[2:]
            if any((di * (ki - 1)) % 2 for di, ki in zip(d, k)):
                raise ValueError("conv2d(): padding='same' needs an odd effective kernel size here")
            return tuple(di * (ki - 1) // 2 for di, ki in zip(d, k))
        raise ValueError(f"conv2d(): padding must be an int, a pair, 'same' or 'valid', not {padding!r}")
    return padding


def _dropout(input, p, training, generator):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout(): p must be in [0, 1], not {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    seed, offset = _random.reserve(generator, input.numel())
    return Tensor(_C.dropout(input, p, seed, offset))


def _squeeze(input, dim):
    if dim is None:
        return _C.reshape(input, tuple(s for s in input.shape if s != 1))
    for d in sorted((dim if isinstance(dim, (tuple, list)) else (dim,)), key=lambda d: -(d % max(input.ndim, 1))):
        input = Tensor(_C.squeeze(input, d))
    return input._h


def _chunk(input, chunks, dim):
    n = input.shape[dim]
    size = -(-n // chunks)
    return _split(input, size, dim)


def _split(t, sizes, dim):
    n = t.shape[dim]
    if isinstance(sizes, builtins.int):
        sizes = [min(sizes, n - s) for s in range(0, n, sizes)] if sizes > 0 else [n]
    out, start = [], 0
    for s in sizes:
        out.append(Tensor(_C.slice(t, dim, start, start + s, 1)))
        start += s
    if start != n:
        raise ValueError(f"split(): sizes {list(sizes)} sum to {start}, not to the size {n} of dim {dim}")
    return tuple(out)


_C_PARAMS = {name: params for name, params, _ in _C.OPS}


def _renames(name, params, body):
    """{C function or parameter as C's message names it: Python's} for the C calls of body: each argument
    expression's first parameter name stands for the C parameter it is passed as."""
    names = set(re.findall(r"\w+", params))
    out = {}
    for m in re.finditer(r"_C\.(\w+)\(((?:[^()]|\([^()]*\))*)\)", body):
        out[f"{m.group(1)}(): "] = f"{name}(): "
        for c, arg in zip(_C_PARAMS.get(m.group(1), ()), re.split(r",(?![^()]*\))", m.group(2))):
            py = next((w for w in re.findall(r"[A-Za-z]\w*", arg) if w in names), None)
            if py and c != py:
                out[f"argument '{c}'"] = f"argument '{py}'"
    return out


def _python_words(e, renames):
    msg = str(e)
    for c, py in renames.items():
        msg = msg.replace(c, py)
    return type(e)(msg)


def make(rows, namespace, qualifier="trident"):
    """Define each row as a function in namespace (a module's globals); returns {name: function}."""
    out = {}
    for name, params, body, summary, example in rows:
        code = body if body.startswith("return") else f"return _T({body})"
        renames = _renames(name, params, body)
        src = (f"def {name}({params}):\n    try:\n        {code}\n"
               f"    except TypeError as e:\n        raise _python_words(e, {renames!r}) from None\n")
        exec(compile(src, f"<trident.{name}>", "exec"), namespace)
        f = namespace[name]
        f.__doc__ = f"{qualifier}.{name}({params})\n\n{summary}.\n\nExample::\n\n    {example}\n"
        f.__module__ = qualifier
        out[name] = f
    return out


_NS = dict(globals())
FUNCTIONS = make(OPS, _NS)
for _name, _f in FUNCTIONS.items():
    if _f.__code__.co_varnames[:1] in (("input",), ("tensor",)) and not hasattr(Tensor, _name):
        setattr(Tensor, _name, _f)
del _name, _f
