/*
** Derivatives of the linear-algebra and nn ops: matmul, linear, linear_gelu, linear_residual, softmax,
** log_softmax, layer_norm, group_norm, cross_entropy, conv2d, the pools, dropout and
** attention, and of the fused backward ops their formulas call (recorded only
** under create_graph; their formulas give the second derivatives). Dimension
** letters: B batch dims, M/K/N matrix sizes, D the normalized (last) dim,
** N/C/H/W images, O output channels.
*/
#include <math.h>

#include "autograd/norm_fused.h"
#include "autograd_internal.h"
#include "core/linear_wgrad.h"
#include "core/norm_backward.h"

#define NEED(i) td__needs(n, i)
#define IN(i)   td__saved_input(n, i)
#define OUT(j)  td__saved_output(n, j)

/* The [R, C] matrix of t[B..., R, C] with B... folded in: [B*R, C] (a view
** when t allows it). */
static td_tensor *fold_rows(td_tensor *t) {
    int64_t s[2] = {-1, t ? td_size(t, -1) : 0};
    return td_reshape(t, 2, s);
}

/* The [R, B*C] matrix of t[B..., R, C]: the batch dims moved after the rows
** (a copy). */
static td_tensor *fold_cols(td_tensor *t) {
    if (!t) return NULL;
    int nd = td_ndim(t), perm[TD_MAX_DIMS];
    perm[0] = nd - 2;
    for (int i = 0; i < nd - 2; i++) perm[i + 1] = i;
    perm[nd - 1] = nd - 1;
    int64_t s[2] = {td_size(t, -2), -1};
    return td_reshape(td_permute(t, perm), 2, s);
}

/* y[B,M,N] = a[B,M,K] @ b[B,K,N]: da = dy @ b^T, db = a^T @ dy
** (batch dims that a or b broadcast are summed down by the engine).
** torch.matmul's 1-D operands are matrices with a dim that y drops: a [K] is
** [1, K] (y loses its dim -2), b [K] is [K, 1] (y loses its last dim); the
** formula runs on those views and drops the dim again from da / db.
** A 2-D b shared by every batch (Linear on [B, T, in]) folds the batch into
** one GEMM, as the sum over B of a_B^T dy_B is:
**   db[K,N] = a'^T dy'   with a' = a as [B*M, K], dy' = dy as [B*M, N]
** and a 2-D a:
**   da[M,K] = dy'' b''^T with dy'' = dy as [M, B*N], b'' = b as [K, B*N]
** so no [B, K, N] partials are made and summed. */
td_status td__bw_matmul(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    int na = n->in_meta[0].ndim, nb = n->in_meta[1].ndim;
    td_tensor *a = NEED(1) ? IN(0) : NULL, *b = NEED(0) ? IN(1) : NULL, *dy = gy[0];
    if (na == 1 && nb == 1) {
        int64_t one[2] = {1, 1};
        dy = td_reshape(dy, 2, one);
    } else if (na == 1) {
        dy = td_unsqueeze(dy, -2);
    } else if (nb == 1) {
        dy = td_unsqueeze(dy, -1);
    }
    if (na == 1) {
        a = a ? td_unsqueeze(a, 0) : NULL;
        na = 2;
    }
    if (nb == 1) {
        b = b ? td_unsqueeze(b, 1) : NULL;
        nb = 2;
    }
    if (NEED(0) && na == 2 && nb >= 3)
        gx[0] = td_matmul(fold_cols(dy), td_transpose(fold_cols(b), 0, 1));
    else if (NEED(0))
        gx[0] = td_matmul(dy, td_transpose(b, -1, -2));
    if (NEED(1) && nb == 2 && na >= 3)
        gx[1] = td_matmul(td_transpose(fold_rows(a), 0, 1), fold_rows(dy));
    else if (NEED(1))
        gx[1] = td_matmul(td_transpose(a, -1, -2), dy);
    if (gx[0] && n->in_meta[0].ndim == 1) gx[0] = td_squeeze(gx[0], -2);
    if (gx[1] && n->in_meta[1].ndim == 1) gx[1] = td_squeeze(gx[1], -1);
    return td__done(n, gx);
}

/* The dtype of linear's dw and db for dy: td__grad_dtype's where every one of them needed agrees (the f32
** parameters behind autocast's weight casts: LINEAR_WGRAD writes f32, and the casts' backward has nothing to do),
** else dy's. */
static td_dtype wgrad_dtype(td_node *n, const td_tensor *dy) {
    td_dtype dt = td_tensor_dtype(dy), w = td__grad_dtype(n, NEED(1) ? 1 : 2);
    bool half = dt == TD_F16 || dt == TD_BF16;
    return half && w == TD_F32 && (!NEED(2) || td__grad_dtype(n, 2) == w) ? w : dt;
}

/* y = linear(x, w, b) = x w^T + b; x [M, K], w [N, K], b [N]:
**   dx = dy w;  dw = dy^T x;  db = sum_M dy  (dw and db: one LINEAR_WGRAD, on
** CUDA the bias gradient in the weight-gradient GEMM's epilogue; in f32 for the
** f32 parameters of autocast's bf16 casts, wgrad_dtype) */
td_status td__bw_linear(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    td_tensor *dw = NULL, *db = NULL;
    if (NEED(0)) gx[0] = td_matmul(gy[0], IN(1));
    if ((NEED(1) || NEED(2)) && td__linear_wgrad_to(gy[0], IN(0), NEED(2), wgrad_dtype(n, gy[0]), &dw, &db) == TD_OK)
        gx[1] = NEED(1) ? dw : NULL, gx[2] = db;
    return td__done(n, gx);
}

/* (y, h) = linear_gelu(x, w, b): h = x w^T + b, y = gelu(h); x [M, K], w [N, K], b [N]:
**   dh = dy gelu'(h) (GELU_BACKWARD);  dx = dh w;  dw = dh^T x;  db = sum_M dh
** h is the saved output; under create_graph it is recomputed from x, w, b with
** ops, so the second derivative sees its dependence on them. */
td_status td__bw_linear_gelu(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    td_tensor *b = n->in_meta[2].present ? IN(2) : NULL;
    td_tensor *h = td_grad_enabled() ? td_linear(IN(0), IN(1), b) : OUT(1);
    td_tensor *dh = td__gelu_backward(gy[0], h, n->p.gelu.approximate == TD_GELU_TANH), *dw = NULL, *db = NULL;
    if (NEED(0)) gx[0] = td_matmul(dh, IN(1));
    if ((NEED(1) || NEED(2)) && /* dw = dh^T x, db = sum dh */
        td__linear_wgrad_to(dh, IN(0), NEED(2), wgrad_dtype(n, dh), &dw, &db) == TD_OK)
        gx[1] = NEED(1) ? dw : NULL, gx[2] = db;
    return td__done(n, gx);
}

/* y = linear_residual(x, w, b, r) = x w^T + b + r; x [M, K], w [N, K], b [N], r [M, N], y in r's dtype:
**   dr = dy;  dx = dy w;  dw = dy^T x;  db = sum_M dy  (dw and db: one LINEAR_WGRAD)
** with dy cast to x's dtype for the GEMMs (autocast's f32 residual stream, bf16 x and w) */
td_status td__bw_linear_residual(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    td_tensor *dy = gy[0], *dw = NULL, *db = NULL;
    if (NEED(3)) gx[3] = dy;
    if (NEED(0) || NEED(1) || NEED(2)) dy = td__grad_cast(dy, n->in_meta[0].dtype); /* maybe ln1's twin */
    if (NEED(0)) gx[0] = td_matmul(dy, IN(1));
    if ((NEED(1) || NEED(2)) && td__linear_wgrad(dy, IN(0), NEED(2), &dw, &db) == TD_OK)
        gx[1] = NEED(1) ? dw : NULL, gx[2] = db;
    return td__done(n, gx);
}

/* y = softmax(x) over the last dim: dx = y (dy - sum_last(dy y)), one
** SOFTMAX_BACKWARD op */
td_status td__bw_softmax(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    gx[0] = td__softmax_backward(gy[0], OUT(0));
    return td__done(n, gx);
}

/* y = log_softmax(x) over the last dim: dx = dy - e^y sum_last(dy), one
** LOG_SOFTMAX_BACKWARD op */
td_status td__bw_log_softmax(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    gx[0] = td__log_softmax_backward(gy[0], OUT(0));
    return td__done(n, gx);
}

/* z = softmax_backward(dy, y) = y (dy - s), s = sum_last(dy y), with y an
** input of its own (the node create_graph records; sums over the last dim):
**   d dy = y (dz - sum(dz y))                 (softmax_backward again)
**   dy'  = dz (dy - s) - dy sum(dz y)        (the gradient of y) */
td_status td__bw_softmax_backward(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    td_tensor *dy = IN(0), *y = IN(1), *dz = gy[0];
    int last = -1;
    if (NEED(0)) gx[0] = td__softmax_backward(dz, y);
    if (NEED(1)) {
        td_tensor *s = td_sum(td_mul(dy, y), 1, &last, true), *t = td_sum(td_mul(dz, y), 1, &last, true);
        gx[1] = td_sub(td_mul(dz, td_sub(dy, s)), td_mul(dy, t));
    }
    return td__done(n, gx);
}

/* z = log_softmax_backward(dy, y) = dy - e^y S, S = sum_last(dy):
**   d dy = dz - sum(dz e^y)
**   dy'  = -dz e^y S */
td_status td__bw_log_softmax_backward(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    td_tensor *dy = IN(0), *e = td_exp(IN(1)), *dz = gy[0];
    int last = -1;
    if (NEED(0)) gx[0] = td_sub(dz, td_sum(td_mul(dz, e), 1, &last, true));
    if (NEED(1)) gx[1] = td_neg(td_mul(td_mul(dz, e), td_sum(dy, 1, &last, true)));
    return td__done(n, gx);
}

/* (y, mean, rstd) = layer_norm(x, w?, b?) over the trailing dims that w spans;
** with x viewed as [R, D] (R rows of D normalized elements):
**   xhat = (x - mean) rstd,  y = xhat w + b
**   dw = sum_R(dy xhat), db = sum_R(dy)
**   g = dy w;  dx = rstd (g - mean_D(g) - xhat mean_D(g xhat))
** group_norm is the same with rows (n, group) of D = C/G * S elements (x
** [N, C, S]) and w, b [C], each entry over S consecutive elements of a row:
** x viewed as [N, C, S], g = dy w[c], dw = sum_{N,S}(dy xhat), db = sum_{N,S}(dy).
** Under create_graph, mean and rstd are recomputed from x with ops, so the
** second derivative sees their dependence on x. */

/* t [R, D] as [A, P, S] = aps, summed over A and S: [P] (S = 1: over the rows) */
static td_tensor *sum_per_channel(td_tensor *t, const int64_t *aps) {
    int last = -1, rows = 0;
    int64_t cs[2] = {aps[0] * aps[1], aps[2]};
    if (aps[2] > 1) t = td_sum(td_reshape(t, 2, cs), 1, &last, false);
    return td_sum(td_reshape(t, 2, aps), 1, &rows, false);
}

/* The normalization backward of y = norm(x_in) with x_in saved as xs (input
** ix, or an output), mean and rstd outputs om, om + 1, weight input iw (bias
** iw + 1), each weight entry over S consecutive elements (layer_norm: 1):
** dx into *dx when want_dx, dw and db into gx[iw], gx[iw + 1]. */
static void norm_grads(td_node *n, td_tensor *xs, td_tensor *dyt, int om, int iw, int64_t S, bool want_dx,
                       td_tensor **dx, td_tensor **gx) {
    const td__tmeta *mx = &n->out_meta[0], *mw = &n->in_meta[iw], *mb = &n->in_meta[iw + 1];
    const td__tmeta *ma = mw->present ? mw : mb; /* P = its elements; unused without either */
    int64_t numel = td__numel(mx->ndim, mx->shape), R = td__numel(n->out_meta[om].ndim, n->out_meta[om].shape);
    int64_t D = R ? numel / R : 0, P = td__numel(ma->ndim, ma->shape), rd[2] = {R, D}, r1[2] = {R, 1};
    int64_t aps[3] = {P * S != 0 ? numel / (P * S) : 0, P, S}, p1[2] = {P, 1}; /* x as [A, P, S], w as [P, 1] */
    int last = -1;
    td_tensor *x = td_reshape(xs, 2, rd), *dy = td_reshape(dyt, 2, rd), *mean, *rstd;
    if (td_grad_enabled()) {
        mean = td_mean(x, 1, &last, true);
        rstd = td_rsqrt(td_add_scalar(td_var(x, 1, &last, 0, true), n->p.norm.eps));
    } else {
        mean = td_reshape(OUT(om), 2, r1);
        rstd = td_reshape(OUT(om + 1), 2, r1);
        bool ln = S == 1 && want_dx && (P == D || !(mw->present || mb->present)); /* w, b over the row */
        td_tensor *w = ln && mw->present ? td_reshape(IN(iw), 1, &D) : NULL, *dw = NULL, *db = NULL;
        if (ln && td__layer_norm_grads_fused(x, dy, w, mean, rstd, NEED(iw), NEED(iw + 1), dx, &dw, &db)) {
            *dx = td_reshape(*dx, mx->ndim, mx->shape); /* layer norm's passes as one math block (norm_fused.c) */
            if (NEED(iw)) gx[iw] = td_reshape(dw, mw->ndim, mw->shape);
            if (NEED(iw + 1)) gx[iw + 1] = td_reshape(db, mb->ndim, mb->shape);
            return;
        }
    }
    td_tensor *xhat = td_mul(td_sub(x, mean), rstd);
    td_tensor *g = mw->present ? td_reshape(td_mul(td_reshape(dy, 3, aps), td_reshape(IN(iw), 2, p1)), 2, rd) : dy;
    if (want_dx) {
        td_tensor *t1 = td_mean(g, 1, &last, true);
        td_tensor *t2 = td_mul(xhat, td_mean(td_mul(g, xhat), 1, &last, true));
        *dx = td_reshape(td_mul(rstd, td_sub(td_sub(g, t1), t2)), mx->ndim, mx->shape);
    }
    if (NEED(iw)) gx[iw] = td_reshape(sum_per_channel(td_mul(dy, xhat), aps), mw->ndim, mw->shape);
    if (NEED(iw + 1)) gx[iw + 1] = td_reshape(sum_per_channel(dy, aps), mb->ndim, mb->shape);
}

/* layer_norm's gradients (norm_grads with S = 1) by one LAYER_NORM_BACKWARD op
** from the saved mean and rstd, with ds (add_layer_norm: the gradient the sum
** received itself) added to dx in the same pass; false where the op cannot
** serve (create_graph, which needs differentiable ops, or a backend without it)
** or where the math block (norm_fused.c) is switched on instead. dxn (non-NULL):
** dx in dtype nt as well, from the same op where it can (td__layer_norm_backward_to).
** taken (non-NULL, ds NULL): the gradient already summed for input 0, x, is
** taken as ds (td__take_input_grad: a residual stream's other branch), so that
** dx is x's total gradient where the engine would add it in a pass of its own;
** *taken is set even when the op then declines (false), and the caller adds it. */
static bool norm_grads_fused(td_node *n, td_tensor *xs, td_tensor *dyt, td_tensor *ds, int om, int iw, td_tensor **dx,
                             td_dtype nt, td_tensor **dxn, td_tensor **gx, td_tensor **taken) {
    if (td_grad_enabled() || td__layer_norm_block_on(xs)) return false;
    const td__tmeta *mw = &n->in_meta[iw], *mb = &n->in_meta[iw + 1], *ma = mw->present ? mw : mb;
    const td__tmeta *mx = &n->out_meta[0];
    int64_t numel = td__numel(mx->ndim, mx->shape), R = td__numel(n->out_meta[om].ndim, n->out_meta[om].shape);
    int64_t D = ma->present ? td__numel(ma->ndim, ma->shape) : R ? numel / R : 0;
    if (numel == 0 || D < 1) return false; /* empty: the composed formula's zeros */
    td_tensor *dw = NULL, *db = NULL, *spare = NULL;
    if (taken && !ds) ds = *taken = td__take_input_grad(n, 0);
    td_status st =
        td__layer_norm_backward_to(dyt, xs, mw->present ? IN(iw) : NULL, OUT(om), OUT(om + 1), ds, D, NEED(iw),
                                   NEED(iw + 1), dxn ? nt : td_tensor_dtype(xs), dx, &dw, &db, dxn ? dxn : &spare);
    if (st == TD_ERR_UNSUPPORTED) {
        td_clear_error();
        return false;
    }
    if (NEED(iw)) gx[iw] = dw;
    if (NEED(iw + 1)) gx[iw + 1] = db ? td_reshape(db, mb->ndim, mb->shape) : NULL;
    return true;
}

td_dtype td__grad_cast_dtype(const td_node *p, int nr) {
    if (!p || nr != 0) return TD_DTYPE_COUNT;
    if (p->backward == td__bw_linear_residual) return p->in_meta[0].dtype;
    return td__mlp_gelu_dy_dtype(p);
}

/* twin: x's producer casts x's gradient to a narrower dtype before its products (td__grad_cast_dtype: the
** previous block's MLP under autocast) and dy reaches the op in that dtype, so the op writes dx in it too (its
** dxn, as add_layer_norm's residual gradient), handed to that node (td__grad_twin_put) in place of its cast. */
td_status td__bw_layer_norm(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    if (!gy[0]) return TD_OK; /* only mean/rstd received gradients: they are not differentiable */
    /* taken: x's gradient so far, taken into dx (the residual stream's other branch) */
    td_tensor *dx = NULL, *taken = NULL, *dxn = NULL;
    td_dtype nt = NEED(0) ? td__grad_cast_dtype(n->edges[0].node, n->edges[0].nr) : TD_DTYPE_COUNT;
    bool twin = nt != TD_DTYPE_COUNT && td_dtype_size(nt) < td_dtype_size(n->in_meta[0].dtype) && gy[0]->dtype == nt &&
                td__norm_narrow_ok(IN(0), nt);
    if (norm_grads_fused(n, IN(0), gy[0], NULL, 1, 1, &dx, nt, twin ? &dxn : NULL, gx, NEED(0) ? &taken : NULL)) {
        gx[0] = NEED(0) ? dx : NULL;
        if (gx[0] && dxn) td__grad_twin_put(dx, dxn);
    } else {
        norm_grads(n, IN(0), gy[0], 1, 1, 1, NEED(0), &gx[0], gx);
        if (taken && gx[0]) gx[0] = td_add(gx[0], taken); /* the op declined after the take: added here instead */
    }
    return td__done(n, gx);
}

/* (y, mean, rstd) = group_norm(x[N, C, *], w?[C], b?[C]): norm_grads with S = prod(*) */
td_status td__bw_group_norm(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    if (!gy[0]) return TD_OK; /* only mean/rstd received gradients: they are not differentiable */
    const td__tmeta *mx = &n->in_meta[0];
    norm_grads(n, IN(0), gy[0], 1, 1, td__numel(mx->ndim - 2, mx->shape + 2), NEED(0), &gx[0], gx);
    return td__done(n, gx);
}

/* (y, s) = (layer_norm(s), s = x + r): ds = layer_norm's dx of dy, plus the
** gradient s received itself (one LAYER_NORM_BACKWARD pass); dx = dr = ds. A
** residual r narrower than s (autocast's bf16 projection beside the f32 stream)
** takes ds rounded to its dtype from the same pass, where the engine would cast
** it. Under create_graph the first gradients read s, so a second backward
** reaches this node through s alone. */
td_status td__bw_add_layer_norm(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    td_tensor *ds = NULL, *dsn = NULL;
    td_dtype rt = n->in_meta[1].dtype;
    bool narrow_r = NEED(1) && rt != n->out_meta[1].dtype && td_dtype_size(rt) < td_dtype_size(n->out_meta[1].dtype);
    bool fused = gy[0] && norm_grads_fused(n, OUT(1), gy[0], gy[1], 2, 2, &ds, rt, narrow_r ? &dsn : NULL, gx,
                                           NULL); /* LN'(dy) + gy[1], one pass */
    if (!fused && gy[0]) norm_grads(n, OUT(1), gy[0], 2, 2, 1, NEED(0) || NEED(1), &ds, gx);
    if (!fused && gy[1]) ds = ds ? td_add(ds, gy[1]) : gy[1];
    if (NEED(0)) gx[0] = ds;
    if (NEED(1)) gx[1] = dsn ? dsn : ds;
    if (!gy[0]) return TD_OK; /* only s received a gradient (a second backward through s): w and b get none */
    return td__done(n, gx);
}

/* (loss, lse) = cross_entropy(logits[N,C], target[N], w[C]?): dlogits by the
** fused CROSS_ENTROPY_BACKWARD op (softmax minus the smoothed one-hot,
** weighted), p = exp(x - lse) from the saved lse where the forward made it
** (create_graph: without it, so the recorded op depends on the logits alone) */
td_status td__bw_cross_entropy(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    if (!gy[0]) return TD_OK; /* only lse received a gradient: it is not differentiable */
    td_tensor *lse = n->saved_out[1] && !td_grad_enabled() ? OUT(1) : NULL;
    gx[0] = td__cross_entropy_backward_lse(gy[0], IN(0), IN(1), n->saved_in[2], lse, n->p.xent.ignore_index,
                                           n->p.xent.label_smoothing, n->p.xent.reduction);
    return td__done(n, gx);
}

/* z[N,C] = cross_entropy_backward(dl, x[N,C], t[N], w[C]?) (logits [C] with a
** 0-d target are one row), with p = softmax(x), e = label_smoothing,
** W = sum_c w[c] and wt = w[t] (1 without weights; rows with t == ignore_index
** are 0):
**   z[n,c] = g[n] (p[n,c] a[n] - b[n,c]),  a[n] = (1-e) wt + e/C W,  b = (1-e) wt [c == t] + e/C w[c]
**   g[n] = dl[n] (none), dl (sum), dl / sum_n wt (mean)
** d dl = sum_c dz z / dl: the fused op with dl = 1, times dz, summed (over c for none)
** dx = g a p (dz - sum_c(dz p))   (softmax_backward(dz, p), scaled per row)
** a and the mean's divisor come from ops on t and w, as the kernels compute them. */
td_status td__bw_cross_entropy_backward(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    const td__tmeta *ml = &n->in_meta[0], *mx = &n->in_meta[1];
    td_tensor *dl = IN(0), *x = IN(1), *t = IN(2), *w = n->saved_in[3], *dz = gy[0];
    int64_t ig = n->p.xent.ignore_index, C = mx->shape[mx->ndim - 1], N = td__numel(mx->ndim, mx->shape) / C, one = 1;
    int red = n->p.xent.reduction, last = -1;
    double e = n->p.xent.label_smoothing;
    if (NEED(0)) {
        td_tensor *z1 =
            td__cross_entropy_backward(td_ones(ml->ndim, ml->shape, ml->dtype, ml->device), x, t, w, ig, e, red);
        td_tensor *prod = td_mul(dz, z1);
        gx[0] = td_reshape(red == TD_REDUCTION_NONE ? td_sum(prod, 1, &last, false) : td_sum(prod, 0, NULL, false),
                           ml->ndim, ml->shape);
    }
    if (NEED(1)) {
        int64_t nc[2] = {N, C}, n1[2] = {N, 1};
        td_tensor *valid = td_ne(t, td_scalar((double)ig, TD_I64, mx->device)), *wt, *W;
        if (w) {
            td_tensor *safe_t = td_where(valid, t, td_scalar(0, TD_I64, mx->device)); /* ignore_index may be < 0 */
            wt = td_gather(w, 0, td_reshape(safe_t, 1, &N));
            W = td_sum(w, 0, NULL, false);
        } else {
            wt = td_scalar(1, mx->dtype, mx->device);
            W = td_scalar((double)C, mx->dtype, mx->device);
        }
        wt = td_mul(td_reshape(td__mask_as(valid, x), 1, &N), wt);
        td_tensor *a = td_add(td_mul_scalar(wt, 1 - e), td_mul_scalar(W, e / (double)C));
        td_tensor *g = td_reshape(dl, 1, red == TD_REDUCTION_NONE ? &N : &one);
        if (red == TD_REDUCTION_MEAN) g = td_div(g, td_sum(wt, 0, NULL, false));
        td_tensor *p = td_softmax(td_reshape(x, 2, nc), -1);
        td_tensor *ds = td__softmax_backward(td_reshape(dz, 2, nc), p);
        gx[1] = td_reshape(td_mul(td_reshape(td_mul(g, a), 2, n1), ds), mx->ndim, mx->shape);
    }
    return td__done(n, gx);
}

/* y[N,O,Ho,Wo] = conv2d(x[N,C,H,W], w[O,C/g,kh,kw], b[O]?):
** dx and dw by the fused backward ops, db = sum over N, Ho, Wo of dy */
td_status td__bw_conv2d(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    const int *s = n->p.conv.stride, *pad = n->p.conv.padding, *dil = n->p.conv.dilation;
    if (NEED(0)) gx[0] = td__conv2d_backward_input(gy[0], IN(1), n->in_meta[0].shape, s, pad, dil, n->p.conv.groups);
    if (NEED(1)) gx[1] = td__conv2d_backward_weight(gy[0], IN(0), n->in_meta[1].shape, s, pad, dil, n->p.conv.groups);
    if (NEED(2)) {
        int dims[3] = {0, 2, 3};
        gx[2] = td_sum(gy[0], 3, dims, false);
    }
    return td__done(n, gx);
}

/* The conv backward ops are bilinear, adjoints of conv2d (same stride,
** padding, dilation, groups) in one argument:
**   dx = conv2d_backward_input(dy, w):   <dz, dx> = <conv2d(dz, w), dy>
**     d dy = conv2d(dz, w),  dw = conv2d_backward_weight(dy, dz)
**   dw = conv2d_backward_weight(dy, x):  <dz, dw> = <conv2d(x, dz), dy>
**     d dy = conv2d(x, dz),  dx = conv2d_backward_input(dy, dz) */
td_status td__bw_conv2d_backward_input(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    const int *s = n->p.conv.stride, *pad = n->p.conv.padding, *dil = n->p.conv.dilation;
    int groups = n->p.conv.groups;
    if (NEED(0)) gx[0] = td_conv2d(gy[0], IN(1), NULL, s, pad, dil, groups);
    if (NEED(1)) gx[1] = td__conv2d_backward_weight(IN(0), gy[0], n->in_meta[1].shape, s, pad, dil, groups);
    return td__done(n, gx);
}

td_status td__bw_conv2d_backward_weight(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    const int *s = n->p.conv.stride, *pad = n->p.conv.padding, *dil = n->p.conv.dilation;
    int groups = n->p.conv.groups;
    if (NEED(0)) gx[0] = td_conv2d(IN(1), gy[0], NULL, s, pad, dil, groups);
    if (NEED(1)) gx[1] = td__conv2d_backward_input(IN(0), gy[0], n->in_meta[1].shape, s, pad, dil, groups);
    return td__done(n, gx);
}

/* (y, idx) = max_pool2d(x): dx[idx] += dy (fused MAX_POOL2D_BACKWARD) */
td_status td__bw_max_pool2d(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    if (!gy[0]) return TD_OK;
    gx[0] = td__max_pool2d_backward(gy[0], OUT(1), n->in_meta[0].shape);
    return td__done(n, gx);
}

/* y = avg_pool2d(x): dx spreads each dy over its window (fused AVG_POOL2D_BACKWARD) */
td_status td__bw_avg_pool2d(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    const int *k = n->p.pool.kernel, *s = n->p.pool.stride, *pad = n->p.pool.padding;
    gx[0] = td__avg_pool2d_backward(gy[0], n->in_meta[0].shape, k, s, pad, n->p.pool.count_include_pad);
    return td__done(n, gx);
}

/* dx[N,C,H,W] = max_pool2d_backward(dy[N,C,Ho,Wo], idx), a scatter-add of dy
** into the planes at idx (argmax in H*W): d dy = dz gathered at idx */
td_status td__bw_max_pool2d_backward(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    const int64_t *xs = n->out_meta[0].shape, *ys = n->in_meta[0].shape;
    int64_t planes[3] = {xs[0], xs[1], xs[2] * xs[3]}, at[3] = {ys[0], ys[1], ys[2] * ys[3]};
    td_tensor *g = td_gather(td_reshape(gy[0], 3, planes), 2, td_reshape(IN(1), 3, at));
    gx[0] = td_reshape(g, 4, ys);
    return td__done(n, gx);
}

/* dx = avg_pool2d_backward(dy) = A^T dy, where avg_pool2d is y = A x: d dy = A dz
** = avg_pool2d(dz) with the same parameters */
td_status td__bw_avg_pool2d_backward(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    gx[0] = td_avg_pool2d(gy[0], n->p.pool.kernel, n->p.pool.stride, n->p.pool.padding, n->p.pool.count_include_pad);
    return td__done(n, gx);
}

/* y = x keep / (1 - p): dx = dy keep / (1 - p), the same mask from the same
** Philox (seed, offset) */
td_status td__bw_dropout(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    gx[0] = td_dropout(gy[0], n->p.rng.p, n->p.rng.seed, n->p.rng.offset);
    return td__done(n, gx);
}

/* (out, lse) = attention(q, k, v, mask?) over rows i (queries) and j (keys), P = softmax(q k^T s + m) with the
** dropout keep mask Z (scaled by 1/(1-p)), out = (P Z) v: dq, dk and dv by ATTENTION_BACKWARD, which recomputes P
** from lse (no [L, S] buffer saved). The mask takes no gradient.
** Under create_graph the same gradients are composed from differentiable ops, so that their own derivatives exist:
**   P = softmax(s q k^T + m)  (m: the float mask, or -inf where a bool mask is false or causal j > i)
**   dv = (P Z)^T dout,  dP = softmax_backward((dout v^T) Z, P),  dq = s dP k,  dk = s dP^T q
** with Z td_dropout's mask of the same Philox stream (element (n L + i) S + j, as the kernels draw it). A row whose
** keys are all masked has no probabilities: its softmax is NaN there, where the fused op gives 0. */
static td_status attention_composed(td_node *n, td_tensor *dout, td_tensor **gx) {
    td_tensor *q = IN(0), *k = IN(1), *v = IN(2), *m = n->saved_in[3];
    const td__tmeta *mq = &n->in_meta[0];
    double scale = n->p.attn.scale, pd = n->p.attn.dropout_p;
    int64_t L = mq->shape[2], S = n->in_meta[1].shape[2], l1[2] = {L, 1}, s1[2] = {1, S};
    td_tensor *s = td_mul_scalar(td_matmul(q, td_transpose(k, -1, -2)), scale);
    if (m) s = m->dtype == TD_BOOL ? td_where(m, s, td_scalar(-INFINITY, mq->dtype, mq->device)) : td_add(s, m);
    if (n->p.attn.causal) {
        td_tensor *i = td_reshape(td_arange(0, (double)L, 1, TD_I64, mq->device), 2, l1);
        td_tensor *j = td_reshape(td_arange(0, (double)S, 1, TD_I64, mq->device), 2, s1);
        s = td_masked_fill(s, td_gt(j, i), -INFINITY);
    }
    td_tensor *p = td_contiguous(td_softmax(s, -1));
    if (td_tensor_dtype(dout) != mq->dtype) dout = td_cast(dout, mq->dtype);
    td_tensor *pz = pd > 0 ? td_dropout(p, pd, n->p.attn.seed, n->p.attn.offset) : p;
    td_tensor *dpz = td_contiguous(td_matmul(dout, td_transpose(v, -1, -2)));
    td_tensor *ds = td__softmax_backward(pd > 0 ? td_dropout(dpz, pd, n->p.attn.seed, n->p.attn.offset) : dpz, p);
    if (NEED(0)) gx[0] = td_mul_scalar(td_matmul(ds, k), scale);
    if (NEED(1)) gx[1] = td_mul_scalar(td_matmul(td_transpose(ds, -1, -2), q), scale);
    if (NEED(2)) gx[2] = td_matmul(td_transpose(pz, -1, -2), dout);
    return td__done(n, gx);
}

td_status td__bw_attention(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    if (!gy[0]) return TD_OK; /* only lse received a gradient: it is not differentiable */
    if (NEED(3))
        return TD_ERR(TD_ERR_UNSUPPORTED, "scaled_dot_product_attention: attn_mask requires grad; the fused op gives "
                                          "no mask gradient (detach it, or compose the attention from ops)");
    if (td_grad_enabled()) return attention_composed(n, gy[0], gx); /* create_graph */
    td_tensor *dq = NULL, *dk = NULL, *dv = NULL;
    td_status st = td__attention_backward(gy[0], IN(0), IN(1), IN(2), n->saved_in[3], OUT(0), OUT(1), &n->p,
                                          NEED(0) ? &dq : NULL, NEED(1) ? &dk : NULL, NEED(2) ? &dv : NULL);
    if (st != TD_OK) return st;
    gx[0] = dq, gx[1] = dk, gx[2] = dv;
    return td__done(n, gx);
}
