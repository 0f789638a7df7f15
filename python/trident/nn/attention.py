"""trident.nn.MultiheadAttention with torch's constructor, parameter names (in_proj_weight, in_proj_bias,
out_proj.weight, out_proj.bias), initialisation and forward: (attn_output, attn_weights or None). It is a view of
the C library's module (td_multihead_attention_new_ext: the parameters are its tensors); without need_weights (and
with a 2-D attn_mask or none) forward is the C module's (td_multihead_attention_forward_ext: one fused attention);
with need_weights, the weights are formed explicitly (softmax(q k^T / sqrt(d) + mask)) so they can be returned,
averaged over heads as torch does by default."""
import math

from .. import _C
from .._signatures import FUNCTIONS as _F
from .._tensor import DTYPES, Tensor
from . import functional as F
from ._cview import CView, _view
from .module import Module, Parameter


class _OutProj(Module):
    """MultiheadAttention's out_proj: a Linear over the C module's out_proj.weight and out_proj.bias."""

    def __init__(self, cm, embed_dim, bias):
        super().__init__()
        self.in_features = self.out_features = embed_dim
        self.weight = _view(_C.module_get(cm, "out_proj.weight"), Parameter)
        self.bias = _view(_C.module_get(cm, "out_proj.bias"), Parameter) if bias else None

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class MultiheadAttention(CView):
    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
        if add_bias_kv or add_zero_attn or (kdim or embed_dim) != embed_dim or (vdim or embed_dim) != embed_dim:
            raise ValueError("MultiheadAttention: add_bias_kv, add_zero_attn and kdim/vdim != embed_dim are not "
                             "supported")
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.dropout, self.batch_first = dropout, batch_first
        # in_proj_weight xavier_uniform, in_proj_bias zeros, out_proj Linear's init with a zero bias, as torch
        cm = _C.multihead_attention_new_ext(embed_dim, num_heads, bias, False, dropout)
        self._bind(cm, ("in_proj_weight", "in_proj_bias") if bias else ("in_proj_weight",), device=device,
                   dtype=dtype)
        if not bias:
            self.in_proj_bias = None
        self.out_proj = _OutProj(cm, embed_dim, bias)
        object.__setattr__(self, "_c_out", (self.out_proj, self.out_proj.weight, self.out_proj.bias))

    def _c_live(self):
        o = self._modules.get("out_proj")
        return super()._c_live() and o is self._c_out[0] and (o.weight, o.bias) == self._c_out[1:]

    def _heads(self, x, w, b):
        n, length = x.shape[0], x.shape[1]
        return F.linear(x, w, b).reshape(n, length, self.num_heads, self.head_dim).transpose(1, 2)

    def _mask(self, attn_mask, key_padding_mask, is_causal, n, length, s, like):
        """One additive float mask broadcastable to [N, H, L, S], or None."""
        mask = None
        if attn_mask is None and is_causal:
            attn_mask = _F["ones"](length, s, device=like.device).triu(1) > 0
        if attn_mask is not None:
            m = attn_mask
            if m.dtype == DTYPES["bool"]:
                m = _F["zeros"](*m.shape, dtype=like.dtype, device=like.device).masked_fill(m, -math.inf)
            mask = m.reshape(n, self.num_heads, length, s) if m.dim() == 3 else m
        if key_padding_mask is not None:
            k = key_padding_mask
            if k.dtype == DTYPES["bool"]:
                k = _F["zeros"](*k.shape, dtype=like.dtype, device=like.device).masked_fill(k, -math.inf)
            k = k.reshape(n, 1, 1, s)
            mask = k if mask is None else mask + k
        return mask

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        if not need_weights and (attn_mask is None or attn_mask.dim() == 2) and self._c_live():
            if self._c_training is not self.training:
                _C.module_train(self._cm, self.training)
                object.__setattr__(self, "_c_training", self.training)
            if not self.batch_first:
                query, key, value = (t.transpose(0, 1) for t in (query, key, value))
            out = Tensor(_C.multihead_attention_forward_ext(self._cm, query, key, value, attn_mask, key_padding_mask,
                                                            is_causal))
            return (out if self.batch_first else out.transpose(0, 1)), None
        if not self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        n, length, s, e = query.shape[0], query.shape[1], key.shape[1], self.embed_dim
        w, b = self.in_proj_weight, self.in_proj_bias
        bq, bk, bv = (None, None, None) if b is None else (b[:e], b[e:2 * e], b[2 * e:])
        q, k, v = self._heads(query, w[:e], bq), self._heads(key, w[e:2 * e], bk), self._heads(value, w[2 * e:], bv)
        mask = self._mask(attn_mask, key_padding_mask, is_causal, n, length, s, q)
        p = self.dropout if self.training else 0.0
        weights = None
        if need_weights:
            scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
            weights = (scores if mask is None else scores + mask).softmax(-1)
            if p > 0:
                weights = F.dropout(weights, p, True)
            out = weights @ v
            if average_attn_weights:
                weights = weights.mean(1)
        else:
            out = _F["scaled_dot_product_attention"](q, k, v, mask, p, False)
        out = self.out_proj(out.transpose(1, 2).reshape(n, length, e))
        return (out if self.batch_first else out.transpose(0, 1)), weights

    def extra_repr(self):
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, batch_first={self.batch_first}"
