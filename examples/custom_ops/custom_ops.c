/*
** Registration of the example custom ops (custom_ops.h): one td_custom_op_def
** per op, with its GLSL and CUDA sources read from files and its C kernel
** below (bias_gelu's in bias_gelu_cpu.c); backwards as a custom kernel (bias_gelu) and in ordinary ops (rmsnorm).
*/
#include "custom_ops.h"

#include <trident/backend.h> /* td_error_set */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- C kernels (CPU): contiguous host data of c->dtype ---- */

/* bias_gelu: bias_gelu_cpu.c */
td_status bias_gelu_cpu(const td_custom_call *c, const void *const *in, void *const *out);
td_status bias_gelu_cpu_backward(const td_custom_call *c, const void *const *in, void *const *out);

/* the host data of one call */
typedef struct cpu_job {
    const td_custom_call *c;
    const void *const *in;
    void *const *out;
} cpu_job;

/* rmsnorm: y[r, c] = x[r, c] * w[c] / sqrt(mean(x[r]^2) + eps), f32 and f64 */
static void rms_rows(void *user, int64_t begin, int64_t end) {
    const cpu_job *j = user;
    const td_custom_call *c = j->c;
    const int64_t cols = c->args.cols;
    for (int64_t r = begin; r < end; r++) {
        double s = 0;
        for (int64_t k = 0; k < cols; k++) {
            double x =
                c->dtype == TD_F64 ? ((const double *)j->in[0])[r * cols + k] : ((const float *)j->in[0])[r * cols + k];
            s += x * x;
        }
        double inv = 1 / sqrt(s / (double)cols + c->args.p[0]);
        for (int64_t k = 0; k < cols; k++) {
            if (c->dtype == TD_F64)
                ((double *)j->out[0])[r * cols + k] =
                    ((const double *)j->in[0])[r * cols + k] * inv * ((const double *)j->in[1])[k];
            else
                ((float *)j->out[0])[r * cols + k] =
                    (float)(((const float *)j->in[0])[r * cols + k] * inv * ((const float *)j->in[1])[k]);
        }
    }
}

static td_status rmsnorm_cpu(const td_custom_call *c, const void *const *in, void *const *out) {
    cpu_job j = {c, in, out};
    td_parallel_for(c->args.rows, 4 * (int64_t)c->args.cols, rms_rows, &j);
    return TD_OK;
}

/* top1: the first largest of each row, f32 */
static td_status top1_cpu(const td_custom_call *c, const void *const *in, void *const *out) {
    const float *x = in[0];
    for (uint32_t r = 0; r < c->args.rows; r++) {
        const float *xr = x + (size_t)r * c->args.cols;
        uint32_t best = 0;
        for (uint32_t k = 1; k < c->args.cols; k++)
            if (xr[k] > xr[best]) best = k;
        ((float *)out[0])[r] = xr[best];
        ((int32_t *)out[1])[r] = (int32_t)best;
    }
    return TD_OK;
}

/* ---- shape functions and backwards ---- */

/* bias_gelu, rmsnorm: x [..., C], b/w [C] -> x's shape */
static td_status row_vector_shape(const td_custom_call *c, td_custom_meta *out) {
    int nd = td_ndim(c->inputs[0]);
    if (nd < 1 || td_ndim(c->inputs[1]) != 1 || td_size(c->inputs[1], 0) != td_size(c->inputs[0], -1))
        return td_error_set(TD_ERR_SHAPE, "input 1 must be [%lld] (the last dim of input 0)",
                            nd ? (long long)td_size(c->inputs[0], -1) : 0LL);
    out[0].ndim = nd;
    memcpy(out[0].shape, td_shape(c->inputs[0]), sizeof(int64_t) * (size_t)nd);
    return TD_OK;
}

/* top1: x [R, C] -> val [R] (x's dtype), idx [R] int32 */
static td_status top1_shape(const td_custom_call *c, td_custom_meta *out) {
    if (td_ndim(c->inputs[0]) != 2 || td_size(c->inputs[0], 1) < 1)
        return td_error_set(TD_ERR_SHAPE, "input 0 must be [rows, cols] with cols >= 1");
    out[0].ndim = out[1].ndim = 1;
    out[0].shape[0] = out[1].shape[0] = td_size(c->inputs[0], 0);
    out[1].dtype = TD_I32;
    return TD_OK;
}

/* bias_gelu backward: du = bias_gelu_backward(x, b, dy) (a kernel); dx = du, db = sum over rows of du */
static td_status bias_gelu_bw(const td_custom_call *c, td_tensor *const *dy, td_tensor **dx) {
    const custom_ops *ops = c->user;
    td_tensor *in[3] = {c->inputs[0], c->inputs[1], dy[0]};
    td_tensor *du = td_custom_op_apply(ops->bias_gelu_backward, 3, in, 0, NULL);
    if (!du) return td_last_status();
    if (td_custom_needs_grad(c, 0)) dx[0] = du;
    if (td_custom_needs_grad(c, 1)) {
        int64_t cols = td_size(du, -1);
        dx[1] = td_reshape(td_sum(td_reshape(du, 2, (int64_t[]){-1, cols}), 1, (int[]){0}, false), 1, &cols);
        if (!dx[1]) return td_last_status();
    }
    return TD_OK;
}

/* rmsnorm backward in ordinary ops:
**   y = xhat * w,  xhat = x * r,  r = 1 / sqrt(mean(x^2) + eps)
**   dw = sum over rows of dy * xhat
**   dx = r * (g - xhat * mean(g * xhat)),  g = dy * w */
static td_status rmsnorm_bw(const td_custom_call *c, td_tensor *const *dy, td_tensor **dx) {
    td_tensor *x = c->inputs[0], *w = c->inputs[1];
    int last = td_ndim(x) - 1;
    td_tensor *r = td_rsqrt(td_add_scalar(td_mean(td_mul(x, x), 1, &last, true), c->args.p[0]));
    td_tensor *xhat = td_mul(x, r);
    if (td_custom_needs_grad(c, 0)) {
        td_tensor *g = td_mul(dy[0], w);
        dx[0] = td_mul(r, td_sub(g, td_mul(xhat, td_mean(td_mul(g, xhat), 1, &last, true))));
        if (!dx[0]) return td_last_status();
    }
    if (td_custom_needs_grad(c, 1)) {
        td_tensor *p = td_mul(dy[0], xhat);
        dx[1] = td_reshape(td_sum(td_reshape(p, 2, (int64_t[]){-1, td_size(x, -1)}), 1, (int[]){0}, false), 1,
                           (int64_t[]){td_size(x, -1)});
        if (!dx[1]) return td_last_status();
    }
    return TD_OK;
}

/* ---- registration ---- */

static char *read_file(const char *dir, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return td_error_set(TD_ERR_IO, "cannot open %s", path), NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) free(s), s = NULL;
    fclose(f);
    if (!s) return td_error_set(TD_ERR_IO, "cannot read %s", path), NULL;
    s[n] = 0;
    return s;
}

td_status custom_ops_register(custom_ops *ops, const char *dir) {
    memset(ops, 0, sizeof *ops);
    static const char *const files[] = {
        "bias_gelu.comp", "bias_gelu_backward.comp", "bias_gelu.cu", "rmsnorm.comp", "rmsnorm.cu", "top1.comp",
        "top1.cu"};
    for (int i = 0; i < 7; i++)
        if (!(ops->sources[i] = read_file(dir, files[i]))) return custom_ops_free(ops), td_last_status();
    char **s = ops->sources;
    const uint32_t f32_f64 = 1u << TD_F32 | 1u << TD_F64;
    td_custom_op_def gelu_bw = {
        .name = "bias_gelu_backward",
        .n_in = 3,
        .n_out = 1,
        .shape = row_vector_shape,
        .user = ops,
        .cpu = {.cpu = bias_gelu_cpu_backward, .dtypes = f32_f64},
        .cuda = {.source = s[2], .entry = "bias_gelu_backward", .dtypes = f32_f64},
        .vulkan = {.source = s[1]},
    };
    td_custom_op_def gelu = {
        .name = "bias_gelu",
        .n_in = 2,
        .n_out = 1,
        .shape = row_vector_shape,
        .backward = bias_gelu_bw,
        .user = ops,
        .cpu = {.cpu = bias_gelu_cpu, .dtypes = f32_f64},
        .cuda = {.source = s[2], .entry = "bias_gelu", .dtypes = f32_f64},
        .vulkan = {.source = s[0]},
    };
    td_custom_op_def rms = {
        .name = "rmsnorm",
        .n_in = 2,
        .n_out = 1,
        .shape = row_vector_shape,
        .backward = rmsnorm_bw,
        .user = ops,
        .cpu = {.cpu = rmsnorm_cpu, .dtypes = f32_f64, .grid = TD_GRID_ROWS},
        .cuda = {.source = s[4], .entry = "rmsnorm", .grid = TD_GRID_ROWS},
        .vulkan = {.source = s[3], .grid = TD_GRID_ROWS},
    };
    td_custom_op_def top = {
        .name = "top1",
        .n_in = 1,
        .n_out = 2,
        .shape = top1_shape,
        .user = ops,
        .cpu = {.cpu = top1_cpu, .grid = TD_GRID_ROWS},
        .cuda = {.source = s[6], .entry = "top1", .grid = TD_GRID_ROWS},
        .vulkan = {.source = s[5], .grid = TD_GRID_ROWS},
    };
    td_status st = td_custom_op_register(&gelu_bw, &ops->bias_gelu_backward);
    if (st == TD_OK) st = td_custom_op_register(&gelu, &ops->bias_gelu);
    if (st == TD_OK) st = td_custom_op_register(&rms, &ops->rmsnorm);
    if (st == TD_OK) st = td_custom_op_register(&top, &ops->top1);
    if (st != TD_OK) custom_ops_free(ops);
    return st;
}

void custom_ops_free(custom_ops *ops) {
    td_custom_op_free(ops->bias_gelu);
    td_custom_op_free(ops->bias_gelu_backward);
    td_custom_op_free(ops->rmsnorm);
    td_custom_op_free(ops->top1);
    for (int i = 0; i < 8; i++) free(ops->sources[i]);
    memset(ops, 0, sizeof *ops);
}

td_tensor *bias_gelu(const custom_ops *ops, td_tensor *x, td_tensor *b) {
    return td_custom_op_apply(ops->bias_gelu, 2, (td_tensor *[]){x, b}, 0, NULL);
}

td_tensor *rmsnorm(const custom_ops *ops, td_tensor *x, td_tensor *w, float eps) {
    return td_custom_op_apply(ops->rmsnorm, 2, (td_tensor *[]){x, w}, 1, &eps);
}

td_tensor *bias_gelu_fn(void *ops, int n, td_tensor *const *in) {
    (void)n;
    return bias_gelu(ops, in[0], in[1]);
}

td_tensor *rmsnorm_fn(void *ops, int n, td_tensor *const *in) {
    (void)n;
    return rmsnorm(ops, in[0], in[1], 1e-5f);
}

td_status top1(const custom_ops *ops, td_tensor *x, td_tensor **val, td_tensor **idx) {
    td_tensor *out[2];
    td_status st = td_custom_op_call(ops->top1, 1, &x, 0, NULL, 2, out);
    *val = out[0], *idx = out[1];
    return st;
}

td_tensor *bias_gelu_ref(td_tensor *x, td_tensor *b) { return td_gelu(td_add(x, b), true); }

td_tensor *rmsnorm_ref(td_tensor *x, td_tensor *w, float eps) {
    int last = td_ndim(x) - 1;
    return td_mul(td_mul(x, td_rsqrt(td_add_scalar(td_mean(td_mul(x, x), 1, &last, true), eps))), w);
}

/* ---- the W1 MLP with GELU: Linear 784-256, GELU, Linear 256-256, GELU, Linear 256-10 ---- */

/* one hidden layer: gelu(x @ w^T + b), fused or composed */
static td_tensor *hidden(const custom_ops *ops, td_tensor *x, td_tensor *w, td_tensor *b) {
    if (ops) return bias_gelu(ops, td_matmul(x, td_transpose(w, 0, 1)), b);
    return td_gelu(td_linear(x, w, b), true);
}

td_status mlp_train(const custom_ops *ops, td_device dev, int steps, uint64_t seed, double *losses) {
    static const int64_t dims[4] = {784, 256, 256, 10};
    enum { BATCH = 16 };
    td_tensor *params[6] = {0};
    td_status st = TD_OK;
    td_scope_begin();
    for (int l = 0; l < 3; l++) { /* U(-1/sqrt(in), 1/sqrt(in)) as nn.Linear, from Philox */
        double bound = 1 / sqrt((double)dims[l]);
        td_tensor *w = td_rand(2, (int64_t[]){dims[l + 1], dims[l]}, seed, (uint64_t)l * 1000000, TD_F32, dev);
        td_tensor *b = td_rand(1, (int64_t[]){dims[l + 1]}, seed + 1, (uint64_t)l * 1000, TD_F32, dev);
        params[2 * l] = td_keep(td_add_scalar(td_mul_scalar(w, 2 * bound), -bound));
        params[2 * l + 1] = td_keep(td_add_scalar(td_mul_scalar(b, 2 * bound), -bound));
    }
    td_scope_end();
    for (int i = 0; i < 6; i++)
        if (!params[i] || td_set_requires_grad(params[i], true) != TD_OK) st = td_last_status();
    td_optim_options opt = td_adam_defaults(1e-3);
    td_optimizer *o = st == TD_OK ? td_adam_new(6, params, &opt) : NULL;
    if (!o && st == TD_OK) st = td_last_status();
    for (int step = 0; step < steps && st == TD_OK; step++) {
        td_scope_begin();
        td_tensor *x = td_rand(2, (int64_t[]){BATCH, 784}, seed + 2, 0, TD_F32, dev); /* one batch */
        td_tensor *y =
            td_argmax(td_slice(x, 1, 0, 10, 1), 1, false); /* a learnable label: the brightest of 10 pixels */
        td_tensor *h = hidden(ops, hidden(ops, x, params[0], params[1]), params[2], params[3]);
        td_tensor *loss = td_cross_entropy_loss(td_linear(h, params[4], params[5]), y, NULL, -100, 0, TD_REDUCE_MEAN);
        td_optimizer_zero_grad(o);
        st = loss ? td_backward(loss, NULL, false) : td_last_status();
        if (st == TD_OK) st = td_optimizer_step(o);
        if (st == TD_OK) losses[step] = td_item(loss);
        td_scope_end();
    }
    td_optimizer_free(o);
    for (int i = 0; i < 6; i++) td_release(params[i]);
    return st;
}
