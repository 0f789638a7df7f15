"""from_torch(torch_module): the same model as trident.nn modules, for torch models built from torch.nn's standard
layers (Sequential / ModuleList trees of Linear, Conv1d/2d, ConvTranspose2d, the norms, Embedding, Dropout,
pooling, activations, RNN/LSTM/GRU, MultiheadAttention), with the torch module's weights and buffers copied in (the
state_dict keys are the same) on the same device. A torch module with a forward of its own cannot be translated
(its Python code is torch's): write it with trident.nn, or keep it in torch and put Trident parts in it with
Module.to_torch(). A module that to_torch() made comes back as the Trident module it wraps."""


def _layer(m, nn):
    """The trident.nn module of the torch layer m, freshly made (weights loaded by from_torch)."""
    name = type(m).__name__
    if hasattr(m, "module") and type(m).__name__ == "TridentModule":
        return m.module
    if name in ("Sequential", "ModuleList"):
        kids = [_layer(c, nn) for c in m]
        return nn.Sequential(*kids) if name == "Sequential" else nn.ModuleList(kids)
    if name == "Linear":
        return nn.Linear(m.in_features, m.out_features, bias=m.bias is not None)
    if name in ("Conv1d", "Conv2d"):
        return getattr(nn, name)(m.in_channels, m.out_channels, m.kernel_size, m.stride, m.padding, m.dilation,
                                 m.groups, m.bias is not None, m.padding_mode)
    if name == "ConvTranspose2d":
        return nn.ConvTranspose2d(m.in_channels, m.out_channels, m.kernel_size, m.stride, m.padding,
                                  m.output_padding, m.groups, m.bias is not None, m.dilation, m.padding_mode)
    if name in ("BatchNorm1d", "BatchNorm2d"):
        return getattr(nn, name)(m.num_features, m.eps, m.momentum, m.affine, m.track_running_stats)
    if name == "LayerNorm":
        return nn.LayerNorm(m.normalized_shape, m.eps, m.elementwise_affine, bias=getattr(m, "bias", 0) is not None)
    if name == "GroupNorm":
        return nn.GroupNorm(m.num_groups, m.num_channels, m.eps, m.affine)
    if name == "Embedding":
        if m.padding_idx is not None:
            raise TypeError("from_torch: Embedding with padding_idx is not supported")
        return nn.Embedding(m.num_embeddings, m.embedding_dim)
    if name in ("Dropout", "ReLU", "Tanh", "Sigmoid", "SiLU", "Identity"):
        return getattr(nn, name)(m.p) if name == "Dropout" else getattr(nn, name)()
    if name == "GELU":
        return nn.GELU(approximate=m.approximate)
    if name in ("Softmax", "LogSoftmax"):
        return getattr(nn, name)(m.dim)
    if name == "Flatten":
        return nn.Flatten(m.start_dim, m.end_dim)
    if name == "Unflatten":
        return nn.Unflatten(m.dim, m.unflattened_size)
    if name == "MaxPool2d":
        return nn.MaxPool2d(m.kernel_size, m.stride, m.padding)
    if name == "AvgPool2d":
        return nn.AvgPool2d(m.kernel_size, m.stride, m.padding, m.ceil_mode, m.count_include_pad)
    if name == "AdaptiveAvgPool2d":
        return nn.AdaptiveAvgPool2d(m.output_size)
    if name in ("RNN", "LSTM", "GRU"):
        if getattr(m, "proj_size", 0):
            raise TypeError("from_torch: LSTM with proj_size is not supported")
        kw = dict(num_layers=m.num_layers, bias=m.bias, batch_first=m.batch_first, dropout=m.dropout,
                  bidirectional=m.bidirectional)
        if name == "RNN":
            kw["nonlinearity"] = m.nonlinearity
        return getattr(nn, name)(m.input_size, m.hidden_size, **kw)
    if name == "MultiheadAttention":
        return nn.MultiheadAttention(m.embed_dim, m.num_heads, m.dropout, m.in_proj_bias is not None,
                                     batch_first=m.batch_first)
    raise TypeError(f"from_torch: {name} has no trident.nn counterpart here (a custom forward is torch code): write it "
                    "with trident.nn, or keep it in torch and put Trident modules in it with .to_torch()")


def from_torch(module):
    from .. import nn

    ours = _layer(module, nn)
    if type(module).__name__ == "TridentModule":
        return ours
    params = list(module.parameters()) + list(module.buffers())
    if params:
        dev = params[0].device
        ours.to(str(dev) if dev.type == "cpu" else f"{dev.type}:{dev.index or 0}")
        fp = next((p.dtype for p in params if p.is_floating_point()), None)
        if fp is not None:
            ours.to(dtype=fp)
    ours.load_state_dict(module.state_dict())
    ours.train(module.training)
    return ours
