/*
** Front-ends of matrix products: td_matmul (torch.matmul semantics),
** td_linear (x @ w^T + b, one LINEAR op) and the fused td_linear_gelu (one LINEAR_GELU op,
** gelu(x @ w^T + b), which keeps the pre-activation for backward; composed
** from td_linear and td_gelu where the backend lacks it).
**
** MATMUL's layout contract (TD_LAYOUT_MATRIX): both input views have the
** output's batch dims (stride 0 where broadcast) followed by one matrix that is
** row-major (strides[-1] == 1, strides[-2] >= max(1, cols)) or column-major
** (strides[-2] == 1, strides[-1] >= max(1, rows)). A size-1 dim's stride is
** free, so it is rewritten to fit; any other matrix is copied contiguous.
*/
#include <string.h>

#include "internal.h"
#include "linear_dgelu.h"

/* Make the matrix of v (its last two dims) row- or column-major by choosing
** the strides of size-1 dims; false if its strides allow neither. */
static bool matrix_layout(td_operand *v) {
    int nd = v->ndim;
    int64_t R = v->shape[nd - 2], C = v->shape[nd - 1];
    int64_t sr = v->strides[nd - 2], sc = v->strides[nd - 1];
    int64_t row_sr = R == 1 ? (C > 1 ? C : 1) : sr, row_sc = C == 1 ? 1 : sc;
    if (row_sc == 1 && row_sr >= (C > 1 ? C : 1)) {
        v->strides[nd - 2] = row_sr, v->strides[nd - 1] = row_sc;
        return true;
    }
    int64_t col_sr = R == 1 ? 1 : sr, col_sc = C == 1 ? (R > 1 ? R : 1) : sc;
    if (col_sr == 1 && col_sc >= (R > 1 ? R : 1)) {
        v->strides[nd - 2] = col_sr, v->strides[nd - 1] = col_sc;
        return true;
    }
    return false;
}

/* The view of t as a batch of matrices [batch..., R, C]: a 1-D t becomes
** [1, K] (as_row) or [K, 1]; batch dims are broadcast to bshape. */
static td_operand matrix_view(const td_tensor *t, bool as_row, int nb, const int64_t *bshape) {
    td_operand v = td__view_of(t);
    int64_t R, C, sr, sc;
    if (t->ndim == 1) {
        R = as_row ? 1 : t->shape[0], C = as_row ? t->shape[0] : 1;
        sr = as_row ? 0 : t->strides[0], sc = as_row ? t->strides[0] : 0;
    } else {
        R = t->shape[t->ndim - 2], C = t->shape[t->ndim - 1];
        sr = t->strides[t->ndim - 2], sc = t->strides[t->ndim - 1];
    }
    int tb = t->ndim > 2 ? t->ndim - 2 : 0; /* t's own batch dims */
    v.ndim = nb + 2;
    for (int i = nb - 1, j = tb - 1; i >= 0; i--, j--) {
        v.shape[i] = bshape[i];
        v.strides[i] = (j >= 0 && t->shape[j] == bshape[i]) ? t->strides[j] : 0;
    }
    v.shape[nb] = R, v.shape[nb + 1] = C;
    v.strides[nb] = sr, v.strides[nb + 1] = sc;
    return v;
}

/* Fold the batch dims of a into its rows when a's rows are evenly spaced
** across batches and b has no batch dims: one GEMM [B*M, K] @ [K, N] instead
** of B small ones. The output, [B..., M, N] contiguous, is the same memory. */
static void fold_batches(td_operand *a, td_operand *b) {
    int nd = a->ndim;
    if (nd <= 2 || a->strides[nd - 1] != 1) return; /* a must be row-major */
    for (int d = 0; d < nd - 2; d++)
        if (b->strides[d] != 0 || a->strides[d] != a->strides[d + 1] * a->shape[d + 1]) return;
    a->shape[0] = td__numel(nd - 1, a->shape), a->shape[1] = a->shape[nd - 1];
    a->strides[0] = a->strides[nd - 2], a->strides[1] = 1;
    b->shape[0] = b->shape[nd - 2], b->shape[1] = b->shape[nd - 1];
    b->strides[0] = b->strides[nd - 2], b->strides[1] = b->strides[nd - 1];
    a->ndim = b->ndim = 2;
}

static td_tensor *matmul(td_tensor *a, td_tensor *b) {
    TD_CHECK_ARG(a, "matmul");
    TD_CHECK_ARG(b, "matmul");
    char sa[96], sb[96];
    td__shape_str(a->ndim, a->shape, sa, sizeof sa);
    td__shape_str(b->ndim, b->shape, sb, sizeof sb);
    if (a->ndim == 0 || b->ndim == 0)
        TD_FAIL_NULL(TD_ERR_SHAPE, "matmul: both arguments need at least 1 dim, got %s and %s", sa, sb);
    if (a->dtype != b->dtype || !td_dtype_is_float(a->dtype))
        TD_FAIL_NULL(TD_ERR_DTYPE, "matmul: expected two tensors of one floating-point dtype, got %s and %s",
                     td_dtype_name(a->dtype), td_dtype_name(b->dtype));
    int64_t K = a->shape[a->ndim - 1], Kb = b->ndim == 1 ? b->shape[0] : b->shape[b->ndim - 2];
    if (K != Kb)
        TD_FAIL_NULL(TD_ERR_SHAPE, "matmul: shapes %s and %s do not align (%lld != %lld)", sa, sb, (long long)K,
                     (long long)Kb);
    int nb;
    int64_t bshape[TD_MAX_DIMS];
    if (td_broadcast_shapes(a->ndim > 2 ? a->ndim - 2 : 0, a->shape, b->ndim > 2 ? b->ndim - 2 : 0, b->shape, &nb,
                            bshape) != TD_OK)
        TD_FAIL_NULL(TD_ERR_SHAPE, "matmul: batch dims of %s and %s do not broadcast", sa, sb);
    if (nb + 2 > TD_MAX_DIMS) TD_FAIL_NULL(TD_ERR_SHAPE, "matmul: %s @ %s has too many dims", sa, sb);
    /* output: batch dims, then M unless a is 1-D, then N unless b is 1-D */
    int64_t oshape[TD_MAX_DIMS];
    int on = nb;
    memcpy(oshape, bshape, sizeof(int64_t) * (size_t)nb);
    if (a->ndim > 1) oshape[on++] = a->shape[a->ndim - 2];
    if (b->ndim > 1) oshape[on++] = b->shape[b->ndim - 1];

    /* make each matrix BLAS-shaped, copying it contiguous only when needed */
    td_tensor *ins[2] = {a, b}, *tmp[2] = {NULL, NULL};
    td_operand views[2];
    for (int k = 0; k < 2; k++) {
        views[k] = matrix_view(ins[k], k == 0, nb, bshape);
        if (matrix_layout(&views[k])) continue;
        tmp[k] = td_keep(td_contiguous(ins[k]));
        if (!tmp[k]) {
            td_release(tmp[0]);
            return NULL;
        }
        ins[k] = tmp[k];
        views[k] = matrix_view(ins[k], k == 0, nb, bshape);
        matrix_layout(&views[k]);
    }
    fold_batches(&views[0], &views[1]);
    td_tensor *out = td__alloc(on, oshape, a->dtype, a->storage->device);
    td_status st = out ? td__dispatch(TD_OP_MATMUL, 2, ins, views, 1, &out, NULL) : td_last_status();
    td_release(tmp[0]);
    td_release(tmp[1]);
    return td__finish(st, out);
}

td_tensor *td_matmul(td_tensor *a, td_tensor *b) {
    td_tensor *in[2] = {a, b}, *held[2];
    td_tensor *out = td__autocast(TD_OP_MATMUL, 2, in, held) ? matmul(in[0], in[1]) : NULL;
    td__autocast_release(2, held);
    return out;
}

/* The composed twin of LINEAR (MATMUL, then ADD): for a backend without the
** op, views too wide for it, or operands of mixed dtypes (ADD promotes). */
static td_tensor *linear_composed(td_tensor *x, td_tensor *w, td_tensor *b) {
    td_tensor *wt = td_keep(td_transpose(w, 0, 1)); /* a view: BLAS reads it transposed, no copy */
    td_tensor *y = td_keep(td_matmul(x, wt));
    td_release(wt);
    if (!y || !b) return y ? td__scope_add(y) : NULL;
    td_tensor *z = td_add(y, b);
    td_release(y);
    return z;
}

/* x [..., K] viewed as [M, K], one LINEAR op (one autograd node, whose
** backward is dx = dy w and LINEAR_WGRAD's dw and db), y reshaped to [..., N]. */
static td_tensor *linear(td_tensor *x, td_tensor *w, td_tensor *b) {
    TD_CHECK_ARG(x, "linear");
    TD_CHECK_ARG(w, "linear");
    char s[96];
    if (w->ndim != 2)
        TD_FAIL_NULL(TD_ERR_SHAPE, "linear: weight must be [out, in], got %s",
                     td__shape_str(w->ndim, w->shape, s, sizeof s));
    int64_t N = w->shape[0], K = w->shape[1];
    if (b && (b->ndim != 1 || b->shape[0] != N))
        TD_FAIL_NULL(TD_ERR_SHAPE, "linear: bias must be [%lld], got %s", (long long)N,
                     td__shape_str(b->ndim, b->shape, s, sizeof s));
    if (x->ndim < 1 || x->shape[x->ndim - 1] != K || !td_dtype_is_float(x->dtype) || w->dtype != x->dtype ||
        (b && b->dtype != x->dtype))
        return linear_composed(x, w, b); /* matmul's and add's errors, and their dtype promotion */
    int64_t M = td__numel(x->ndim - 1, x->shape), mk[2] = {M, K}, mn[2] = {M, N}, oshape[TD_MAX_DIMS];
    memcpy(oshape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    oshape[x->ndim - 1] = N;
    td_tensor *x2 = td_keep(td_reshape(x, 2, mk));
    if (!x2) return NULL;
    td_tensor *in[3] = {x2, w, b}, *y = td__alloc(2, mn, x->dtype, x->storage->device);
    td_status st = y ? td__dispatch_contig(TD_OP_LINEAR, 3, in, 1, &y, NULL) : td_last_status();
    td_release(x2);
    if (st == TD_ERR_UNSUPPORTED) {
        td_release(y);
        td_clear_error();
        return linear_composed(x, w, b);
    }
    y = td__finish(st, y);
    return y ? td_reshape(y, x->ndim, oshape) : NULL;
}

/* Autocast casts the bias with x and w (MATMUL's policy), so that y + b stays low. */
td_tensor *td_linear(td_tensor *x, td_tensor *w, td_tensor *b) {
    td_tensor *in[3] = {x, w, b}, *held[3];
    td_tensor *out = td__autocast(TD_OP_MATMUL, 3, in, held) ? linear(in[0], in[1], in[2]) : NULL;
    td__autocast_release(3, held);
    return out;
}

/* The composed twin of LINEAR_GELU, for a backend without the fused op; h_out (optional) receives h. */
static td_tensor *linear_gelu_composed(td_tensor *x, td_tensor *w, td_tensor *b, bool tanh_approx, td_tensor **h_out) {
    td_tensor *h = td_keep(td_linear(x, w, b));
    td_tensor *y = h ? td_gelu(h, tanh_approx) : NULL;
    if (h_out) *h_out = y ? td__scope_add(td_retain(h)) : NULL;
    td_release(h);
    return y;
}

/* x [..., K] viewed as [M, K], one LINEAR_GELU (y and the pre-activation h, [M, N]), y reshaped to [..., N];
** h_out (optional) receives h, reshaped alike. */
static td_tensor *linear_gelu(td_tensor *x, td_tensor *w, td_tensor *b, bool tanh_approx, td_tensor **h_out) {
    const char *op = "linear_gelu";
    TD_CHECK_ARG(x, op);
    TD_CHECK_ARG(w, op);
    char s[96], t[96];
    if (w->ndim != 2)
        TD_FAIL_NULL(TD_ERR_SHAPE, "%s: weight must be [out, in], got %s", op,
                     td__shape_str(w->ndim, w->shape, s, sizeof s));
    int64_t N = w->shape[0], K = w->shape[1];
    if (x->ndim < 1 || x->shape[x->ndim - 1] != K)
        TD_FAIL_NULL(TD_ERR_SHAPE, "%s: input %s does not end in the weight's in_features (%s)", op,
                     td__shape_str(x->ndim, x->shape, s, sizeof s), td__shape_str(w->ndim, w->shape, t, sizeof t));
    if (b && (b->ndim != 1 || b->shape[0] != N))
        TD_FAIL_NULL(TD_ERR_SHAPE, "%s: bias must be [%lld], got %s", op, (long long)N,
                     td__shape_str(b->ndim, b->shape, s, sizeof s));
    if (!td_dtype_is_float(x->dtype) || w->dtype != x->dtype || (b && b->dtype != x->dtype))
        TD_FAIL_NULL(TD_ERR_DTYPE, "%s: expected x, weight and bias of one floating-point dtype, got %s, %s and %s", op,
                     td_dtype_name(x->dtype), td_dtype_name(w->dtype), b ? td_dtype_name(b->dtype) : "none");
    int64_t M = td__numel(x->ndim - 1, x->shape), mk[2] = {M, K}, mn[2] = {M, N}, oshape[TD_MAX_DIMS];
    memcpy(oshape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    oshape[x->ndim - 1] = N;
    td_device dev = x->storage->device;
    td_tensor *x2 = td_keep(td_reshape(x, 2, mk)), *y = NULL;
    if (!x2) return NULL;
    td_tensor *in[3] = {x2, w, b}, *out[2] = {td__alloc(2, mn, x->dtype, dev), td__alloc(2, mn, x->dtype, dev)};
    td_op_params p = {.gelu = {tanh_approx ? TD_GELU_TANH : TD_GELU_ERF}};
    td_status st = out[0] && out[1] ? td__dispatch_contig(TD_OP_LINEAR_GELU, 3, in, 2, out, &p) : td_last_status();
    td_release(x2);
    if (st == TD_ERR_UNSUPPORTED) { /* a backend without the fusion (or with views too wide for it) */
        td_release(out[0]);
        td_release(out[1]);
        td_clear_error();
        return linear_gelu_composed(x, w, b, tanh_approx, h_out);
    }
    td_tensor *h = h_out ? td__finish(st, out[1]) : NULL;
    if (!h_out) td_release(out[1]);
    y = td__finish(st, out[0]);
    if (h_out) *h_out = y && h ? td_reshape(h, x->ndim, oshape) : NULL;
    return y ? td_reshape(y, x->ndim, oshape) : NULL;
}

td_tensor *td__linear_gelu_keep(td_tensor *x, td_tensor *w, td_tensor *b, bool tanh_approx, td_tensor **h) {
    *h = NULL;
    return linear_gelu(x, w, b, tanh_approx, h);
}

td_tensor *td_linear_gelu(td_tensor *x, td_tensor *w, td_tensor *b, bool tanh_approx) {
    td_tensor *in[3] = {x, w, b}, *held[3];
    td_tensor *out =
        td__autocast(TD_OP_LINEAR_GELU, 3, in, held) ? linear_gelu(in[0], in[1], in[2], tanh_approx, NULL) : NULL;
    td__autocast_release(3, held);
    return out;
}
