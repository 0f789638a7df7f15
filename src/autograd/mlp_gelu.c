/*
** td_mlp_gelu: a transformer's GELU MLP, y = gelu(x W1^T + b1) W2^T + b2 + r,
** as one autograd node, so that its backward can take the input gradient
** through fc2 and the GELU as one op (LINEAR_DGELU: on CUDA one GEMM with
** gelu' in cuBLASLt's epilogue) where separate linear and linear_gelu nodes
** would run dy W2, then a GELU_BACKWARD pass.
**
** Dimension letters: M rows (x's leading dims), K = in, H = hidden, N = out.
** Forward (x [..., K], W1 [H, K], b1 [H]?, W2 [N, H], b2 [N]?, r [..., N]?):
**   h = x W1^T + b1, a = gelu(h)   (one LINEAR_GELU, which keeps h)
**   y = a W2^T + b2 + r            (one LINEAR_RESIDUAL, b2 and r added in the
**                                   GEMM; without r one LINEAR)
** Backward (dy [..., N]):
**   dr = dy
**   dW2 = dy^T a, db2 = sum_M dy   (one LINEAR_WGRAD; f32 for f32 parameters
**                                   under autocast: wgrad_dtype)
**   dh = (dy W2) gelu'(h),         (one LINEAR_DGELU; db1 its optional output:
**   db1 = sum_M dh                  on CUDA summed in the pass that writes dh)
**   dW1 = dh^T x                   (one LINEAR_WGRAD, no db)
**   dx = dh W1                     (one MATMUL)
** Under create_graph, h and a are recomputed from x, W1 and b1 with ops, and
** the gradients are composed from differentiable ops (each helper's rule), so
** second derivatives see every dependence.
*/
#include "autograd_internal.h"
#include "core/linear_dgelu.h"
#include "core/linear_wgrad.h"
#include "trident/nn.h"

/* Which operands a call has; the node's user pointer is one of `variants`. */
enum { MLP_TANH = 1, MLP_B1 = 2, MLP_B2 = 4, MLP_R = 8 };
static const unsigned char variants[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

/* Input index of each operand among the present ones, -1 when absent. */
typedef struct slots {
    int x, w1, b1, w2, b2, r, n;
} slots;

static slots slots_of(unsigned v) {
    slots s;
    int i = 0;
    s.x = i++, s.w1 = i++;
    s.b1 = v & MLP_B1 ? i++ : -1;
    s.w2 = i++;
    s.b2 = v & MLP_B2 ? i++ : -1;
    s.r = v & MLP_R ? i++ : -1;
    s.n = i;
    return s;
}

enum { SAVED_X, SAVED_W1, SAVED_W2, SAVED_A, SAVED_H, SAVED_B1 }; /* b1 last, when present */

static td_status mlp_forward(td_function_ctx *ctx, int n_in, td_tensor *const *in, int n_out, td_tensor **out) {
    (void)n_in, (void)n_out;
    unsigned v = *(const unsigned char *)td_ctx_user(ctx);
    slots s = slots_of(v);
    td_tensor *b1 = s.b1 >= 0 ? in[s.b1] : NULL, *b2 = s.b2 >= 0 ? in[s.b2] : NULL, *h = NULL;
    td_tensor *a = td__linear_gelu_keep(in[s.x], in[s.w1], b1, v & MLP_TANH, &h);
    td_tensor *y = s.r >= 0 ? td_linear_residual(a, in[s.w2], b2, in[s.r]) : td_linear(a, in[s.w2], b2);
    if (!y) return td_last_status();
    out[0] = y;
    td_tensor *saved[6] = {in[s.x], in[s.w1], in[s.w2], a, h, b1};
    return td_ctx_save_for_backward(ctx, b1 ? 6 : 5, saved);
}

/* The dtype of the weight and bias gradients (w, b: their input slots, b -1 when absent) computed from dy: f32
** where every needed one is bound for f32 (td__grad_dtype: autocast's casts of f32 parameters, or an f32 b2 beside
** the bf16 product), so LINEAR_WGRAD writes them in f32 and no cast follows; else dy's. */
static td_dtype wgrad_dtype(const td_function_ctx *ctx, int w, int b, const td_tensor *dy) {
    td_dtype dt = td_tensor_dtype(dy);
    bool half = dt == TD_F16 || dt == TD_BF16, nw = td_ctx_needs_input_grad(ctx, w);
    bool nb = b >= 0 && td_ctx_needs_input_grad(ctx, b);
    td_dtype want = td__ctx_grad_dtype(ctx, nw ? w : b, dt);
    return half && want == TD_F32 && (!nb || td__ctx_grad_dtype(ctx, b, dt) == want) ? want : dt;
}

static td_status mlp_backward(td_function_ctx *ctx, int n_out, td_tensor *const *gy, int n_in, td_tensor **gx) {
    (void)n_out, (void)n_in;
    unsigned v = *(const unsigned char *)td_ctx_user(ctx);
    slots s = slots_of(v);
    bool tanh_form = v & MLP_TANH;
    td_tensor *x = td_ctx_saved(ctx, SAVED_X), *w1 = td_ctx_saved(ctx, SAVED_W1), *w2 = td_ctx_saved(ctx, SAVED_W2);
    td_tensor *a = td_ctx_saved(ctx, SAVED_A), *h = td_ctx_saved(ctx, SAVED_H);
    if (!x || !w1 || !w2 || !a || !h) return td_last_status();
    if (td_grad_enabled()) { /* create_graph: h and a as functions of x, W1, b1 */
        h = td_linear(x, w1, s.b1 >= 0 ? td_ctx_saved(ctx, SAVED_B1) : NULL);
        a = td_gelu(h, tanh_form);
    }
#define NEEDS(i) ((i) >= 0 && td_ctx_needs_input_grad(ctx, i))
    td_tensor *dy = gy[0];
    if (NEEDS(s.r)) gx[s.r] = dy;
    dy = td__grad_cast(dy, td_tensor_dtype(a)); /* y kept the residual's dtype (autocast); maybe ln1's twin */
    td_tensor *dw = NULL, *db = NULL;
    if (NEEDS(s.w2) || NEEDS(s.b2)) {
        td_status st = td__linear_wgrad_to(dy, a, NEEDS(s.b2), wgrad_dtype(ctx, s.w2, s.b2, dy), &dw, &db);
        if (st != TD_OK) return st;
        gx[s.w2] = dw;
        if (NEEDS(s.b2)) gx[s.b2] = db;
    }
    if (!NEEDS(s.x) && !NEEDS(s.w1) && !NEEDS(s.b1)) return TD_OK;
    /* db1 = sum over rows of dh out of LINEAR_DGELU (on CUDA, the pass that writes dh), so LINEAR_WGRAD gives dW1
    ** alone and dh is not read again for it; dW1 and db1 in the dtype wgrad_dtype picks for both */
    td_dtype dt1 = wgrad_dtype(ctx, s.w1, s.b1, dy);
    td_tensor *dh = td__linear_dgelu(dy, w2, h, tanh_form, NEEDS(s.b1) ? &db : NULL, dt1);
    if (!dh) return td_last_status();
    if (NEEDS(s.b1)) gx[s.b1] = db;
    if (NEEDS(s.w1)) {
        td_status st = td__linear_wgrad_to(dh, x, false, dt1, &dw, NULL);
        if (st != TD_OK) return st;
        gx[s.w1] = dw;
    }
    if (NEEDS(s.x) && !(gx[s.x] = td_matmul(dh, w1))) return td_last_status();
#undef NEEDS
    return TD_OK;
}

static const td_function mlp_fn = {.name = "mlp_gelu", .forward = mlp_forward, .backward = mlp_backward};

/* a (the GELU's output, the dtype dy is cast to) has x's dtype: LINEAR_GELU's of x and W1 (autocast's) */
td_dtype td__mlp_gelu_dy_dtype(const td_node *p) {
    return p && p->kind == -1 && p->name == mlp_fn.name ? p->in_meta[0].dtype : TD_DTYPE_COUNT;
}

td_tensor *td_mlp_gelu(td_tensor *x, td_tensor *w1, td_tensor *b1, td_tensor *w2, td_tensor *b2, td_tensor *r,
                       bool tanh_approx) {
    const char *op = "mlp_gelu";
    TD_CHECK_ARG(x, op);
    TD_CHECK_ARG(w1, op);
    TD_CHECK_ARG(w2, op);
    char sa[96], sb[96];
    if (w1->ndim != 2 || w2->ndim != 2 || w2->shape[1] != w1->shape[0])
        TD_FAIL_NULL(TD_ERR_SHAPE, "%s: fc1's weight %s and fc2's weight %s are not [hidden, in] and [out, hidden]", op,
                     td__shape_str(w1->ndim, w1->shape, sa, sizeof sa),
                     td__shape_str(w2->ndim, w2->shape, sb, sizeof sb));
    if (b2 && (b2->ndim != 1 || b2->shape[0] != w2->shape[0]))
        TD_FAIL_NULL(TD_ERR_SHAPE, "%s: fc2's bias must be [%lld], got %s", op, (long long)w2->shape[0],
                     td__shape_str(b2->ndim, b2->shape, sa, sizeof sa));
    /* autocast: fc1's operands and fc2's weight as LINEAR_GELU's policy; b2 and r keep their dtype, so that with a
    ** float32 residual LINEAR_RESIDUAL keeps y float32 (as td_linear_residual's autocast does) */
    td_tensor *cast[4] = {x, w1, b1, w2}, *held[4];
    if (!td__autocast(TD_OP_LINEAR_GELU, 4, cast, held)) return NULL;
    unsigned v = (tanh_approx ? MLP_TANH : 0) | (b1 ? MLP_B1 : 0) | (b2 ? MLP_B2 : 0) | (r ? MLP_R : 0);
    slots s = slots_of(v);
    td_tensor *in[6], *y = NULL;
    in[s.x] = cast[0], in[s.w1] = cast[1], in[s.w2] = cast[3];
    if (b1) in[s.b1] = cast[2];
    if (b2) in[s.b2] = b2;
    if (r) in[s.r] = r;
    td_status st = td_function_apply(&mlp_fn, (void *)&variants[v], s.n, in, 1, &y);
    td__autocast_release(4, held);
    return st == TD_OK ? y : NULL;
}
