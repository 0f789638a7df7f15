/*
** Front-ends of fused scaled-dot-product attention: td_scaled_dot_product_attention
** (the ATTENTION op) and td__attention_backward (ATTENTION_BACKWARD, called by
** autograd). Dimension letters: batch dims "..." flattened to N0 x N1 (N1 the
** last batch dim, N0 the others), L queries, S keys, E the q/k features, Ev the
** v features.
**
** The kernels see q [N0,N1,L,E], k [N0,N1,S,E], v [N0,N1,S,Ev] and out
** [N0,N1,L,Ev], lse [N0,N1,L] contiguous (f32, f64 for f64 inputs) and the mask
** as a [N0,N1,L,S] view with any strides (0 where it broadcasts), so a key
** padding mask [N,1,1,S] or a [L,S] mask is never materialized per head.
** q, k, v (dout, out in the backward) are first offered as the caller's views,
** and out (dq, dk, dv) in the memory order of q's strides (k's, v's): heads split
** from a [N,T,3C] projection are read in place and out comes back [N,T,H,D] in
** memory, so the permute back to [N,T,C] is free. Where q, k and v are the three
** slices of one projection, dq, dk and dv are views of one buffer laid out the
** same way, which the split's backward returns with no concatenation. Where the
** backend's supports() declines them (td_attn_dense), every operand is made
** contiguous as before (then the split concatenates).
*/
#include <math.h>
#include <string.h>

#include "internal.h"
#include "trident/autograd.h"

static const char *NAME = "scaled_dot_product_attention";

/* x expanded to batch (nb dims) + its own last two dims, then viewed as [N0,N1,r,c]
** (a copy only where the batch dims cannot merge). */
static td_tensor *canon(td_tensor *x, int nb, const int64_t *batch, int64_t n0, int64_t n1, bool contig) {
    int64_t full[TD_MAX_DIMS], c4[4] = {n0, n1, x->shape[x->ndim - 2], x->shape[x->ndim - 1]};
    for (int i = 0; i < nb; i++) full[i] = batch[i];
    full[nb] = c4[2], full[nb + 1] = c4[3];
    td_tensor *e = td_expand(x, nb + 2, full);
    td_tensor *r = td_reshape(e, 4, c4);
    return contig ? td_contiguous(r) : r;
}

/* An uninitialized tensor of shape[4] whose memory runs in the order of like's strides (largest first, ties in dim
** order, the last dim last), seen in like's dim order; owned by the caller, as td__alloc's. */
static td_tensor *alloc_like(const td_tensor *like, const int64_t shape[4], td_dtype dt, td_device dev) {
    int order[4] = {0, 1, 2, 3}, inv[4];
    for (int i = 1; i < 3; i++)
        for (int j = i; j > 0 && like->strides[order[j - 1]] < like->strides[order[j]]; j--) {
            int t = order[j];
            order[j] = order[j - 1], order[j - 1] = t;
        }
    int64_t mem[4];
    for (int i = 0; i < 4; i++) mem[i] = shape[order[i]], inv[order[i]] = i;
    td_tensor *b = td__alloc(4, mem, dt, dev);
    td_tensor *v = b ? td_keep(td_permute(b, inv)) : NULL;
    td_release(b);
    return v;
}

/* Whether q, k and v are the slices 0, 1, 2 of one dense tensor: one storage, dtype, shape and strides, offsets
** evenly spaced by some delta != 0, and the dims with that delta as one more stride (size 3) a permutation of a
** contiguous layout (no gap, no overlap), as the heads split from one [N,T,3C] projection are. Then *delta is it. */
static bool packed_slices(const td_tensor *q, const td_tensor *k, const td_tensor *v, int64_t *delta) {
    if (k->storage != q->storage || v->storage != q->storage || k->dtype != q->dtype || v->dtype != q->dtype)
        return false;
    *delta = k->offset - q->offset;
    if (*delta == 0 || v->offset - k->offset != *delta || td__numel(q->ndim, q->shape) == 0) return false;
    int64_t st[TD_MAX_DIMS + 1], sz[TD_MAX_DIMS + 1];
    int n = 0;
    for (int i = 0; i < q->ndim; i++) {
        if (k->shape[i] != q->shape[i] || v->shape[i] != q->shape[i] || k->strides[i] != q->strides[i] ||
            v->strides[i] != q->strides[i])
            return false;
        if (q->shape[i] != 1) st[n] = q->strides[i], sz[n++] = q->shape[i];
    }
    st[n] = *delta > 0 ? *delta : -*delta, sz[n++] = 3;
    for (int i = 1; i < n; i++) /* ascending strides */
        for (int j = i; j > 0 && st[j - 1] > st[j]; j--) {
            int64_t a = st[j], b = sz[j];
            st[j] = st[j - 1], sz[j] = sz[j - 1], st[j - 1] = a, sz[j - 1] = b;
        }
    int64_t want = 1;
    for (int i = 0; i < n; i++) {
        if (st[i] != want) return false;
        want *= sz[i];
    }
    return true;
}

/* dq, dk, dv as views of one new buffer laid out as q, k, v lie in theirs (packed_slices): the split that made q,
** k and v then gets adjacent gradients and returns their buffer, no concatenation (formulas_view.c). */
static bool alloc_packed(td_tensor *q, td_tensor *k, td_tensor *v, td_device dev, td_tensor *res[3]) {
    int64_t delta, n = 3 * td__numel(q->ndim, q->shape);
    if (!packed_slices(q, k, v, &delta)) return false;
    td_tensor *buf = td__alloc(1, &n, q->dtype, dev), *x[3] = {q, k, v};
    int64_t first = delta > 0 ? q->offset : v->offset;
    for (int i = 0; i < 3; i++)
        res[i] = buf ? td_keep(td__make_view(buf, q->ndim, q->shape, q->strides, x[i]->offset - first)) : NULL;
    td_release(buf);
    return res[0] && res[1] && res[2];
}

static bool all_contiguous(int n, td_tensor *const *x) {
    for (int i = 0; i < n; i++)
        if (x[i] && !td_is_contiguous(x[i])) return false;
    return true;
}

static bool check_qkv(td_tensor *q, td_tensor *k, td_tensor *v) {
    char a[96], b[96], c[96];
    if (q->ndim < 2 || k->ndim < 2 || v->ndim < 2)
        return TD_ERR(TD_ERR_SHAPE, "%s: q %s, k %s and v %s need at least 2 dims ([..., L, E])", NAME,
                      td__shape_str(q->ndim, q->shape, a, sizeof a), td__shape_str(k->ndim, k->shape, b, sizeof b),
                      td__shape_str(v->ndim, v->shape, c, sizeof c)),
               false;
    if (!td_dtype_is_float(q->dtype))
        return TD_ERR(TD_ERR_DTYPE, "%s: q has dtype %s, need a floating type", NAME, td_dtype_name(q->dtype)), false;
    if (k->dtype != q->dtype || v->dtype != q->dtype)
        return TD_ERR(TD_ERR_DTYPE, "%s: q, k and v must share one dtype, got %s, %s and %s", NAME,
                      td_dtype_name(q->dtype), td_dtype_name(k->dtype), td_dtype_name(v->dtype)),
               false;
    int64_t e = q->shape[q->ndim - 1], s = k->shape[k->ndim - 2];
    if (k->shape[k->ndim - 1] != e || v->shape[v->ndim - 2] != s)
        return TD_ERR(TD_ERR_SHAPE, "%s: q %s, k %s and v %s do not fit ([..., L, E], [..., S, E], [..., S, Ev])", NAME,
                      td__shape_str(q->ndim, q->shape, a, sizeof a), td__shape_str(k->ndim, k->shape, b, sizeof b),
                      td__shape_str(v->ndim, v->shape, c, sizeof c)),
               false;
    return true;
}

static td_tensor *attention(td_tensor *q, td_tensor *k, td_tensor *v, td_tensor *attn_mask, double dropout_p,
                            bool is_causal, double scale, uint64_t seed, uint64_t offset) {
    TD_CHECK_ARG(q, NAME);
    TD_CHECK_ARG(k, NAME);
    TD_CHECK_ARG(v, NAME);
    if (attn_mask && !td__check_arg(attn_mask, NAME, "attn_mask")) return NULL;
    if (!check_qkv(q, k, v)) return NULL;
    if (!(dropout_p >= 0 && dropout_p < 1))
        TD_FAIL_NULL(TD_ERR_MISUSE, "%s: dropout_p %g is outside [0, 1)", NAME, dropout_p);
    if (isinf(scale))
        TD_FAIL_NULL(TD_ERR_MISUSE, "%s: scale is %g; give a finite value (NAN for 1/sqrt(E))", NAME, scale);
    int64_t L = q->shape[q->ndim - 2], E = q->shape[q->ndim - 1], S = k->shape[k->ndim - 2];
    int64_t Ev = v->shape[v->ndim - 1];
    if (E == 0) TD_FAIL_NULL(TD_ERR_SHAPE, "%s: q and k have no features (E = 0)", NAME);
    /* batch dims: q's, k's and v's broadcast together */
    int nb = 0;
    int64_t batch[TD_MAX_DIMS];
    td_tensor *xs[3] = {q, k, v};
    for (int i = 0; i < 3; i++) {
        int64_t prev[TD_MAX_DIMS];
        memcpy(prev, batch, sizeof prev);
        if (td_broadcast_shapes(nb, prev, xs[i]->ndim - 2, xs[i]->shape, &nb, batch) != TD_OK) {
            char a[96], b[96], c[96];
            TD_FAIL_NULL(TD_ERR_SHAPE, "%s: the batch dims of q %s, k %s and v %s do not broadcast", NAME,
                         td__shape_str(q->ndim, q->shape, a, sizeof a), td__shape_str(k->ndim, k->shape, b, sizeof b),
                         td__shape_str(v->ndim, v->shape, c, sizeof c));
        }
    }
    int64_t n1 = nb ? batch[nb - 1] : 1, n0 = nb ? td__numel(nb - 1, batch) : 1;
    if (attn_mask) {
        if (attn_mask->dtype != TD_BOOL && attn_mask->dtype != q->dtype)
            TD_FAIL_NULL(TD_ERR_DTYPE, "%s: attn_mask is %s; it must be bool or q's dtype %s", NAME,
                         td_dtype_name(attn_mask->dtype), td_dtype_name(q->dtype));
        int64_t want[TD_MAX_DIMS], got[TD_MAX_DIMS];
        int nw = nb + 2, ng;
        for (int i = 0; i < nb; i++) want[i] = batch[i];
        want[nb] = L, want[nb + 1] = S;
        bool ok = attn_mask->ndim <= nw &&
                  td_broadcast_shapes(nw, want, attn_mask->ndim, attn_mask->shape, &ng, got) == TD_OK && ng == nw;
        for (int i = 0; ok && i < nw; i++) ok = got[i] == want[i];
        if (!ok) {
            char a[96], b[96];
            TD_FAIL_NULL(TD_ERR_SHAPE, "%s: attn_mask %s does not broadcast to %s ([..., L, S])", NAME,
                         td__shape_str(attn_mask->ndim, attn_mask->shape, a, sizeof a),
                         td__shape_str(nw, want, b, sizeof b));
        }
    }
    td_device dev = q->storage->device;
    td_scope_begin();
    td_tensor *in[4] = {canon(q, nb, batch, n0, n1, false), canon(k, nb, batch, n0, n1, false),
                        canon(v, nb, batch, n0, n1, false), NULL};
    if (attn_mask) {
        td_tensor *m = attn_mask;
        if (m->ndim < 2) { /* [S] or 0-d: give it the two matrix dims */
            int64_t s2[2] = {1, m->ndim ? m->shape[0] : 1};
            m = td_reshape(m, 2, s2);
        }
        in[3] = canon(m, nb, batch, n0, n1, false);
        if (in[3] && (in[3]->shape[2] != L || in[3]->shape[3] != S))
            in[3] = td_expand(in[3], 4, (int64_t[]){n0, n1, L, S});
    }
    int64_t so[4] = {n0, n1, L, Ev};
    td_dtype lse_dt = q->dtype == TD_F64 ? TD_F64 : TD_F32;
    td_op_params p = {.attn = {.scale = scale > 0 ? scale : 1.0 / sqrt((double)E),
                               .dropout_p = dropout_p,
                               .seed = seed,
                               .offset = offset,
                               .causal = is_causal}};
    td_status st = TD_OK;
    for (int i = 0; i < 4 && st == TD_OK; i++)
        if (!in[i] && (i < 3 || attn_mask)) st = td_last_status();
    td_tensor *out[2] = {NULL, st == TD_OK ? td__alloc(3, so, lse_dt, dev) : NULL};
    if (st == TD_OK && out[1] && !all_contiguous(3, in)) { /* strided q, k, v: does the backend read them? */
        out[0] = alloc_like(in[0], so, q->dtype, dev);
        if (out[0] && !td__supports(TD_OP_ATTENTION, 4, in, 2, out, &p)) {
            td_release(out[0]);
            out[0] = NULL;
            for (int i = 0; i < 3; i++) in[i] = td_contiguous(in[i]);
        }
    }
    if (st == TD_OK && !out[0]) out[0] = td__alloc(4, so, q->dtype, dev);
    for (int i = 0; i < 3 && st == TD_OK; i++)
        if (!in[i]) st = td_last_status();
    if (st == TD_OK && (!out[0] || !out[1])) st = td_last_status();
    if (st == TD_OK) st = td__dispatch(TD_OP_ATTENTION, 4, in, NULL, 2, out, &p);
    td_release(out[1]);
    td_tensor *y = td__finish(st, out[0]);
    if (y) {
        int64_t shape[TD_MAX_DIMS];
        for (int i = 0; i < nb; i++) shape[i] = batch[i];
        shape[nb] = L, shape[nb + 1] = Ev;
        y = td_reshape(y, nb + 2, shape);
    }
    return td__scope_end_keep(y);
}

/* under autocast, q, k, v (and a float mask) run in the low dtype: the op table's amp column */
td_tensor *td_scaled_dot_product_attention_ext(td_tensor *q, td_tensor *k, td_tensor *v, td_tensor *attn_mask,
                                               double dropout_p, bool is_causal, double scale, uint64_t seed,
                                               uint64_t offset) {
    td_tensor *in[4] = {q, k, v, attn_mask}, *held[4];
    td_tensor *y = td__autocast(TD_OP_ATTENTION, 4, in, held)
                       ? attention(in[0], in[1], in[2], in[3], dropout_p, is_causal, scale, seed, offset)
                       : NULL;
    td__autocast_release(4, held);
    return y;
}

td_tensor *td_scaled_dot_product_attention(td_tensor *q, td_tensor *k, td_tensor *v, td_tensor *attn_mask,
                                           double dropout_p, bool is_causal, double scale) {
    td_rng_state r = {0, 0};
    if (dropout_p > 0 && dropout_p < 1 && q && k && v && q->ndim >= 2 && k->ndim >= 2 && v->ndim >= 2) {
        /* one value per probability: at least the numel of the broadcast [..., L, S] (the product of the three
        ** batch sizes bounds the broadcast one) */
        uint64_t n = (uint64_t)td__numel(q->ndim - 1, q->shape) * (uint64_t)k->shape[k->ndim - 2];
        n *= (uint64_t)td__numel(k->ndim - 2, k->shape) * (uint64_t)td__numel(v->ndim - 2, v->shape);
        r = td_rng_reserve(n);
    }
    return td_scaled_dot_product_attention_ext(q, k, v, attn_mask, dropout_p, is_causal, scale, r.seed, r.offset);
}

td_status td__attention_backward(td_tensor *dout, td_tensor *q, td_tensor *k, td_tensor *v, td_tensor *mask,
                                 td_tensor *out, td_tensor *lse, const td_op_params *p, td_tensor **dq, td_tensor **dk,
                                 td_tensor **dv) {
    TD_CHECK_ARG_ST(dout, "attention_backward");
    TD_CHECK_ARG_ST(q, "attention_backward");
    TD_CHECK_ARG_ST(k, "attention_backward");
    TD_CHECK_ARG_ST(v, "attention_backward");
    TD_CHECK_ARG_ST(out, "attention_backward");
    TD_CHECK_ARG_ST(lse, "attention_backward");
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4 || out->ndim != 4 || lse->ndim != 3)
        return TD_ERR(TD_ERR_SHAPE, "attention_backward: q, k, v and out must be 4-d and lse 3-d, as the forward made");
    td_device dev = q->storage->device;
    td_scope_begin();
    /* dout may come in any layout (a view of a gradient); out, q, k, v and lse are the forward's, out, q, k and v
    ** strided where the forward's backend read them so: offered as they are, the gradients in their layouts */
    td_tensor *in[7] = {dout->dtype == q->dtype ? dout : td_cast(dout, q->dtype), q, k, v, mask, out, lse};
    td_tensor *res[3] = {NULL, NULL, NULL};
    const int dense[5] = {0, 1, 2, 3, 5}; /* the operands a dense backend wants contiguous */
    td_tensor *ops[5] = {in[0], q, k, v, out};
    if (in[0] && !all_contiguous(5, ops)) {
        /* first one packed buffer (packed q, k, v), then one buffer each in q's, k's, v's order, then contiguous */
        bool ok = alloc_packed(q, k, v, dev, res) && td__supports(TD_OP_ATTENTION_BACKWARD, 7, in, 3, res, p);
        for (int i = 0; i < 3 && !ok; i++) {
            td_release(res[i]);
            res[i] = alloc_like(in[i + 1], in[i + 1]->shape, in[i + 1]->dtype, dev);
        }
        if (!ok && (!res[0] || !res[1] || !res[2] || !td__supports(TD_OP_ATTENTION_BACKWARD, 7, in, 3, res, p))) {
            for (int i = 0; i < 3; i++) td_release(res[i]), res[i] = NULL;
            for (int i = 0; i < 5; i++) in[dense[i]] = td_contiguous(in[dense[i]]);
        }
    }
    for (int i = 0; i < 3 && in[0]; i++)
        if (!res[i]) res[i] = td__alloc(4, in[i + 1]->shape, in[i + 1]->dtype, dev);
    td_status st = in[0] && in[1] && in[2] && in[3] && in[5] && res[0] && res[1] && res[2] ? TD_OK : td_last_status();
    int64_t L = q->shape[2], S = k->shape[2], Ev = v->shape[3];
    if (st == TD_OK && (td_numel(q) == 0 || S == 0 || Ev == 0 || L == 0)) { /* no probability: every gradient is 0 */
        for (int i = 0; i < 3 && st == TD_OK; i++) {
            td_tensor *z = td_zeros(4, res[i]->shape, res[i]->dtype, dev);
            td_release(res[i]);
            res[i] = z ? td_keep(z) : NULL;
            st = z ? TD_OK : td_last_status();
        }
    } else if (st == TD_OK)
        st = td__dispatch(TD_OP_ATTENTION_BACKWARD, 7, in, NULL, 3, res, p);
    td_tensor **dst[3] = {dq, dk, dv};
    for (int i = 0; i < 3; i++) {
        td_tensor *r = td__finish(st, res[i]);
        if (dst[i]) *dst[i] = r ? td_keep(r) : NULL;
    }
    td_scope_end();
    for (int i = 0; i < 3; i++)
        if (dst[i] && *dst[i]) td__scope_add(*dst[i]);
    return st;
}
