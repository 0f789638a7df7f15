/*
** CONV2D and its two backward products, by im2col + GEMM (OpenBLAS).
**   x is (N, C, H, W), w is (O, C/G, kh, kw), b is (O) or absent, y is (N, O, Ho, Wo),
**   all contiguous; G groups, Cg = C/G, Og = O/G, K = Cg*kh*kw, P = Ho*Wo.
**   y[n, g*Og+o, oh, ow] = b[g*Og+o] + sum_{c,ki,kj} w[g*Og+o, c, ki, kj]
**                          * x[n, g*Cg+c, oh*sh - ph + ki*dh, ow*sw - pw + kj*dw]   (0 outside x)
** Images are processed in chunks of nb: im2col lays out a chunk as
** col (K, nb*P), so each group is one large GEMM (Og, K) @ (K, nb*P) that
** OpenBLAS threads well; the rearrangements around it use OpenMP.
**   forward:         Y = w_g @ col                      (Og, nb*P), scattered into y
**   backward input:  dcol = w_g^T @ dY, dx = col2im(dcol) (summed over overlapping windows)
**   backward weight: dw_g = sum over chunks of dY @ col^T
** f64 runs in double (the reference); f16/bf16 are widened to f32.
*/
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "../core/internal.h"
#include "cpu_nn.h"

typedef struct conv_geom {
    int64_t N, C, H, W, O, kh, kw, Ho, Wo, G, Cg, Og, K, P;
    int64_t sh, sw, ph, pw, dh, dw;
} conv_geom;

static conv_geom conv_geom_of(const td_op *op, const int64_t *x, const int64_t *w, const int64_t *y) {
    conv_geom q = {.N = x[0], .C = x[1], .H = x[2], .W = x[3], .O = w[0], .kh = w[2], .kw = w[3], .Ho = y[2], .Wo = y[3],
                   .G = op->p.conv.groups};
    q.Cg = q.C / q.G, q.Og = q.O / q.G, q.K = q.Cg * q.kh * q.kw, q.P = q.Ho * q.Wo;
    q.sh = op->p.conv.stride[0], q.sw = op->p.conv.stride[1];
    q.ph = op->p.conv.padding[0], q.pw = op->p.conv.padding[1];
    q.dh = op->p.conv.dilation[0], q.dw = op->p.conv.dilation[1];
    return q;
}

/* Images per chunk: the col buffer stays near 8M elements, at least one image. */
static int64_t conv_chunk(const conv_geom *q) {
    int64_t per_image = q->K * q->P, nb = ((int64_t)1 << 23) / (per_image ? per_image : 1);
    return nb < 1 ? 1 : nb > q->N ? (q->N ? q->N : 1) : nb;
}

/* Output positions o in [0, count) whose input position o*s + off lies in
** [0, n): the range [*lo, *hi), so inner loops run without bounds checks. */
static void conv_valid_range(int64_t off, int64_t s, int64_t n, int64_t count, int64_t *lo, int64_t *hi) {
    int64_t a = off >= 0 ? 0 : (-off + s - 1) / s, b = n - off <= 0 ? 0 : (n - off + s - 1) / s;
    *lo = a < count ? a : count;
    *hi = b < *lo ? *lo : b > count ? count : b;
}

#define CONV_T float
#define CONV_GEMM cblas_sgemm
#define CONV_FN(name) name##_f32
#include "cpu_conv_impl.h"
#undef CONV_T
#undef CONV_GEMM
#undef CONV_FN
#define CONV_T double
#define CONV_GEMM cblas_dgemm
#define CONV_FN(name) name##_f64
#include "cpu_conv_impl.h"
#undef CONV_T
#undef CONV_GEMM
#undef CONV_FN

td_status td_cpu_CONV2D(const td_op *op) {
    const td_operand *x = &op->in[0], *w = &op->in[1], *b = &op->in[2], *y = &op->out[0];
    conv_geom q = conv_geom_of(op, x->shape, w->shape, y->shape);
    if (q.N == 0) return TD_OK;
    if (x->dtype == TD_F32) return conv_forward_f32(&q, cpu_ptr(x), cpu_ptr(w), b->buf ? cpu_ptr(b) : NULL, cpu_ptr(y));
    if (x->dtype == TD_F64) return conv_forward_f64(&q, cpu_ptr(x), cpu_ptr(w), b->buf ? cpu_ptr(b) : NULL, cpu_ptr(y));
    float *fx = cpu_nn_to_f32(x), *fw = cpu_nn_to_f32(w), *fb = cpu_nn_to_f32(b);
    float *fy = malloc((size_t)td_operand_numel(y) * sizeof(float));
    td_status st = !fx || !fw || (b->buf && !fb) ? td_last_status()
                   : !fy                        ? cpu_nn_oom("conv2d", (size_t)td_operand_numel(y) * sizeof(float))
                                                : conv_forward_f32(&q, fx, fw, fb, fy);
    if (st == TD_OK) cpu_nn_from_f32(y, fy);
    free(fx), free(fw), free(fb), free(fy);
    return st;
}

td_status td_cpu_CONV2D_BACKWARD_INPUT(const td_op *op) {
    const td_operand *dy = &op->in[0], *w = &op->in[1], *dx = &op->out[0];
    conv_geom q = conv_geom_of(op, dx->shape, w->shape, dy->shape);
    if (q.N == 0) return TD_OK;
    if (dy->dtype == TD_F32) return conv_backward_input_f32(&q, cpu_ptr(dy), cpu_ptr(w), cpu_ptr(dx));
    if (dy->dtype == TD_F64) return conv_backward_input_f64(&q, cpu_ptr(dy), cpu_ptr(w), cpu_ptr(dx));
    float *fdy = cpu_nn_to_f32(dy), *fw = cpu_nn_to_f32(w), *fdx = malloc((size_t)td_operand_numel(dx) * sizeof(float));
    td_status st = !fdy || !fw ? td_last_status()
                   : !fdx      ? cpu_nn_oom("conv2d_backward_input", (size_t)td_operand_numel(dx) * sizeof(float))
                               : conv_backward_input_f32(&q, fdy, fw, fdx);
    if (st == TD_OK) cpu_nn_from_f32(dx, fdx);
    free(fdy), free(fw), free(fdx);
    return st;
}

td_status td_cpu_CONV2D_BACKWARD_WEIGHT(const td_op *op) {
    const td_operand *dy = &op->in[0], *x = &op->in[1], *dw = &op->out[0];
    conv_geom q = conv_geom_of(op, x->shape, dw->shape, dy->shape);
    if (q.N == 0) { /* no images: the gradient is 0 */
        memset(cpu_ptr(dw), 0, (size_t)td_operand_numel(dw) * td_dtype_size(dw->dtype));
        return TD_OK;
    }
    if (dy->dtype == TD_F32) return conv_backward_weight_f32(&q, cpu_ptr(dy), cpu_ptr(x), cpu_ptr(dw));
    if (dy->dtype == TD_F64) return conv_backward_weight_f64(&q, cpu_ptr(dy), cpu_ptr(x), cpu_ptr(dw));
    float *fdy = cpu_nn_to_f32(dy), *fx = cpu_nn_to_f32(x), *fdw = malloc((size_t)td_operand_numel(dw) * sizeof(float));
    td_status st = !fdy || !fx ? td_last_status()
                   : !fdw      ? cpu_nn_oom("conv2d_backward_weight", (size_t)td_operand_numel(dw) * sizeof(float))
                               : conv_backward_weight_f32(&q, fdy, fx, fdw);
    if (st == TD_OK) cpu_nn_from_f32(dw, fdw);
    free(fdy), free(fx), free(fdw);
    return st;
}
