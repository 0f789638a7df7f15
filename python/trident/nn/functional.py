"""trident.nn.functional: torch.nn.functional's names over Trident's ops (the losses with torch's signatures from
the signature table; activations, pooling, normalisation and attention are the same functions as trident.<op>)."""
from .. import _signatures
from .._signatures import FUNCTIONS as _F

globals().update(_signatures.make(_signatures.LOSSES, _signatures._NS, "trident.nn.functional"))

relu, gelu, silu, sigmoid, tanh = _F["relu"], _F["gelu"], _F["silu"], _F["sigmoid"], _F["tanh"]
softmax, log_softmax, linear, dropout, embedding = (_F["softmax"], _F["log_softmax"], _F["linear"], _F["dropout"],
                                                    _F["embedding"])
conv2d, max_pool2d, avg_pool2d, layer_norm, group_norm = (_F["conv2d"], _F["max_pool2d"], _F["avg_pool2d"],
                                                          _F["layer_norm"], _F["group_norm"])
scaled_dot_product_attention, one_hot = _F["scaled_dot_product_attention"], _F["one_hot"]
conv_transpose2d = _F["conv_transpose2d"]


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-05):
    """Normalise over every dim but the channels (dim 1): the batch's statistics in training (and running_mean/var
    moved by momentum, the variance unbiased as torch's), else the running ones."""
    from .._tensor import no_grad

    dims = (0,) + tuple(range(2, input.ndim))
    shape = (1, -1) + (1,) * (input.ndim - 2)
    if training:
        mean = input.mean(dims, keepdim=True)
        var = input.var(dims, keepdim=True, correction=0)
        if running_mean is not None:
            n = input.numel() // input.shape[1]
            with no_grad():
                running_mean.mul_(1 - momentum).add_(mean.reshape(-1) * momentum)
                running_var.mul_(1 - momentum).add_(var.reshape(-1) * (momentum * n / max(n - 1, 1)))
    else:
        mean, var = running_mean.reshape(shape), running_var.reshape(shape)
    y = (input - mean) * (var + eps).rsqrt()
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """input where input >= 0, else negative_slope * input (composed: a where over one product)."""
    return _F["where"](input >= 0, input, input * negative_slope)


def elu(input, alpha=1.0, inplace=False):
    """input where input > 0, else alpha * (exp(input) - 1) (composed from exp and where)."""
    return _F["where"](input > 0, input, (input.clamp(max=0).exp() - 1) * alpha)
