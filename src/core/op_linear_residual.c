/*
** td_linear_residual: y = x w^T + b + r as one LINEAR_RESIDUAL op, a linear
** layer whose output joins a residual stream r (a transformer block's fc2 or
** projection). The backend adds b and r while the GEMM's result is still in
** its accumulator (CUDA: r is cuBLASLt's C with beta = 1 and the bias in the
** epilogue), so there is no separate pass over [M, N] and, under autocast, no
** rounding of x w^T to the low dtype: autocast casts x and w only, and y, b
** and r keep r's dtype (float32 for a float32 residual stream).
*/
#include <string.h>

#include "internal.h"
#include "math_fuse.h"

/* The product of t's dims but the last: its rows. */
static int64_t rows_of(const td_tensor *t) {
    int64_t m = 1;
    for (int i = 0; i + 1 < t->ndim; i++) m *= t->shape[i];
    return m;
}

/* LINEAR, then two ADDs (which promote and broadcast): every backend's, for one that declines the op, and the errors
** of operands the op does not take. With f16/bf16 x and an f32 r the product is rounded to x's dtype first. */
static td_tensor *composed(td_tensor *x, td_tensor *w, td_tensor *b, td_tensor *r) {
    td_tensor *y = td_linear(x, w, NULL); /* no bias: autocast leaves b as it is */
    return td_add(b ? td_add(y, b) : y, r);
}

/* For a backend that declines the op: x w^T, then b and r added in one pass (the math block y + b + r, through
** core's hook), else composed's two ADDs */
static td_tensor *declined(td_tensor *x, td_tensor *w, td_tensor *b, td_tensor *r) {
    static td__math_once block = TD_MATH_ONCE("y + b + r");
    if (!b) return composed(x, w, b, r);
    td_tensor *y = td_linear(x, w, NULL), *out = NULL;
    td_math_binding bind[3] = {{.name = "y", .tensor = y}, {.name = "b", .tensor = b}, {.name = "r", .tensor = r}};
    if (y && td__math_once_run(&block, bind, 3, &out) == TD_OK) return out;
    td_clear_error();
    return y ? td_add(td_add(y, b), r) : NULL;
}

/* x [..., K] and r [..., N] viewed as [M, K] and [M, N], one LINEAR_RESIDUAL, y reshaped to r's shape. */
static td_tensor *linear_residual(td_tensor *x, td_tensor *w, td_tensor *b, td_tensor *r) {
    const char *op = "linear_residual";
    TD_CHECK_ARG(x, op);
    TD_CHECK_ARG(w, op);
    TD_CHECK_ARG(r, op);
    char s[96];
    if (w->ndim != 2)
        TD_FAIL_NULL(TD_ERR_SHAPE, "%s: weight must be [out, in], got %s", op,
                     td__shape_str(w->ndim, w->shape, s, sizeof s));
    int64_t N = w->shape[0], K = w->shape[1];
    if (b && (b->ndim != 1 || b->shape[0] != N))
        TD_FAIL_NULL(TD_ERR_SHAPE, "%s: bias must be [%lld], got %s", op, (long long)N,
                     td__shape_str(b->ndim, b->shape, s, sizeof s));
    bool half = x->dtype == TD_F16 || x->dtype == TD_BF16;
    bool fits = x->ndim >= 1 && x->shape[x->ndim - 1] == K && r->ndim == x->ndim && r->shape[r->ndim - 1] == N &&
                !memcmp(r->shape, x->shape, sizeof(int64_t) * (size_t)(x->ndim - 1));
    bool dtypes = td_dtype_is_float(x->dtype) && w->dtype == x->dtype &&
                  (r->dtype == x->dtype || (half && r->dtype == TD_F32)) && (!b || b->dtype == r->dtype);
    if (!fits || !dtypes) return composed(x, w, b, r); /* linear's and add's errors, broadcasting and promotion */
    int64_t M = rows_of(x);
    td_tensor *x2 = td_keep(td_reshape(x, 2, (int64_t[]){M, K})), *r2 = td_keep(td_reshape(r, 2, (int64_t[]){M, N}));
    td_tensor *in[4] = {x2, w, b, r2};
    td_tensor *y = x2 && r2 ? td__alloc(2, (int64_t[]){M, N}, r->dtype, r->storage->device) : NULL;
    td_status st = y ? td__dispatch_contig(TD_OP_LINEAR_RESIDUAL, 4, in, 1, &y, NULL) : td_last_status();
    td_release(x2);
    td_release(r2);
    if (st == TD_ERR_UNSUPPORTED) { /* a backend without the op (or dtypes, or views too wide for it) */
        td_release(y);
        td_clear_error();
        return declined(x, w, b, r);
    }
    y = td__finish(st, y);
    return y ? td_reshape(y, r->ndim, r->shape) : NULL;
}

/* Autocast casts x and w (MATMUL's policy) and leaves b and r as they are. */
td_tensor *td_linear_residual(td_tensor *x, td_tensor *w, td_tensor *b, td_tensor *r) {
    td_tensor *in[2] = {x, w}, *held[2];
    td_tensor *out = td__autocast(TD_OP_LINEAR_RESIDUAL, 2, in, held) ? linear_residual(in[0], in[1], b, r) : NULL;
    td__autocast_release(2, held);
    return out;
}
