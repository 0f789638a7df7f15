/*
** CONV2D and its two backward products, by im2col + GEMM (OpenBLAS).
**   x is (N, C, H, W), w is (O, C/G, kh, kw), b is (O) or absent, y is (N, O, Ho, Wo),
**   all contiguous; G groups, Cg = C/G, Og = O/G, K = Cg*kh*kw, P = Ho*Wo.
**   y[n, g*Og+o, oh, ow] = b[g*Og+o] + sum_{c,ki,kj} w[g*Og+o, c, ki, kj]
**                          * x[n, g*Cg+c, oh*sh - ph + ki*dh, ow*sw - pw + kj*dw]   (0 outside x)
** Threads: OpenMP threads take whole images (dynamically, so a thread slowed
** by other load takes fewer), each with its own im2col scratch (one image,
** about K*P elements: L2-sized for the usual shapes) and single-threaded GEMMs
** (cpu_gemm.c; cpu_backend.c keeps OpenBLAS on one thread), so one thread pool owns the
** cores. Every image's output is computed the same way on any thread.
**   forward:         y[n]_g = w_g @ im2col(x[n]_g), written in place
**   backward input:  dcol = w_g^T @ dy[n]_g and dx[n] = col2im(dcol)
**   backward weight: per slot of images, dw_s = sum of dy_g @ col_g^T, several images per GEMM;
**                    then dw = dw_0 + dw_1 + ... in slot order; the slots depend on the shapes
**                    only, so the result is the same bits on any number of threads
** A 1x1 window with stride 1 and no padding reads the planes in place.
** Depthwise convolutions (G == C == O) skip im2col and the GEMMs: direct loops per plane (dw_*).
** f64 runs in double (the reference); f16/bf16 are widened to f32.
*/
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "cpu_gemm.h"
#include "cpu_nn.h"

typedef struct conv_geom {
    int64_t N, C, H, W, O, kh, kw, Ho, Wo, G, Cg, Og, K, P;
    int64_t sh, sw, ph, pw, dh, dw;
} conv_geom;

static conv_geom conv_geom_of(const td_op *op, const int64_t *x, const int64_t *w, const int64_t *y) {
    conv_geom q = {.N = x[0],
                   .C = x[1],
                   .H = x[2],
                   .W = x[3],
                   .O = w[0],
                   .kh = w[2],
                   .kw = w[3],
                   .Ho = y[2],
                   .Wo = y[3],
                   .G = op->p.conv.groups};
    q.Cg = q.C / q.G, q.Og = q.O / q.G, q.K = q.Cg * q.kh * q.kw, q.P = q.Ho * q.Wo;
    q.sh = op->p.conv.stride[0], q.sw = op->p.conv.stride[1];
    q.ph = op->p.conv.padding[0], q.pw = op->p.conv.padding[1];
    q.dh = op->p.conv.dilation[0], q.dw = op->p.conv.dilation[1];
    return q;
}

/* An im2col window: ch planes of hi x wi read through a kh x kw kernel (stride s,
** padding p, which may be negative, dilation d) into rows of ho x wo. */
typedef struct conv_win {
    int64_t ch, hi, wi, ho, wo, kh, kw, sh, sw, ph, pw, dh, dw;
} conv_win;

/* The forward window: x[n]_g (Cg, H, W) -> (K, Ho*Wo). */
static conv_win conv_forward_win(const conv_geom *q) {
    return (conv_win){q->Cg, q->H, q->W, q->Ho, q->Wo, q->kh, q->kw, q->sh, q->sw, q->ph, q->pw, q->dh, q->dw};
}

/* A window that reads every plane in place (im2col would copy it unchanged). */
static bool conv_win_is_identity(const conv_win *v) {
    return v->kh == 1 && v->kw == 1 && v->sh == 1 && v->sw == 1 && v->ph == 0 && v->pw == 0 && v->ho == v->hi &&
           v->wo == v->wi;
}

/* Threads: as many as the work is worth, at most one per image. */
static int conv_threads(const conv_geom *q) {
    int nt = cpu_threads_for(q->N, 2 * q->O * q->K * q->P);
    return nt > q->N ? (int)q->N : nt;
}

/* This thread's index in the team, which picks its scratch. */
static int conv_thread(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* n elements rounded up to 64 bytes of floats, so per-thread scratch stays aligned. */
static int64_t conv_round(int64_t n) { return (n + 15) / 16 * 16; }

/* Backward-weight slots: CONV_SLOTS_PER_PIECE per piece of work (one when the work is one piece),
** at most one per image. The pieces are counted as conv_threads counts threads, but without the
** thread count (cpu.h's CPU_SPLIT_MAX), so that the sum of the slots' partials is the same bits
** on any number of threads. */
#define CONV_SLOTS_PER_PIECE 4
static int64_t conv_weight_slots(const conv_geom *q) {
    int64_t pieces = cpu_splits_for(q->N, 2 * q->O * q->K * q->P, CPU_SPLIT_MAX);
    int64_t S = pieces == 1 ? 1 : pieces * CONV_SLOTS_PER_PIECE;
    return S > q->N ? q->N : S;
}

/* Images per backward-weight GEMM: their columns fill about CONV_WEIGHT_COLS bytes. */
#define CONV_WEIGHT_COLS ((int64_t)256 << 10)
static int64_t conv_weight_chunk(const conv_geom *q, int64_t S, size_t elem) {
    int64_t per_image = q->K * q->P * (int64_t)elem, nb = CONV_WEIGHT_COLS / (per_image ? per_image : 1);
    int64_t most = (q->N + S - 1) / S;
    return nb < 1 ? 1 : nb > most ? most : nb;
}

/* Output positions o in [0, count) whose input position o*s + off lies in
** [0, n): the range [*lo, *hi), so inner loops run without bounds checks. */
static void conv_valid_range(int64_t off, int64_t s, int64_t n, int64_t count, int64_t *lo, int64_t *hi) {
    int64_t a = off >= 0 ? 0 : (-off + s - 1) / s, b = n - off <= 0 ? 0 : (n - off + s - 1) / s;
    *lo = a < count ? a : count;
    *hi = b < *lo ? *lo : b > count ? count : b;
}

/* Depthwise: one input and one output channel per group. */
static bool conv_is_depthwise(const conv_geom *q) { return q->G > 1 && q->Cg == 1 && q->Og == 1; }

/* Where row ih of the plane (or of its split, when sw > 1) starts when read through column offset off:
** element ow of the returned index is input column ow*sw + off. */
static int64_t dw_row_at(const conv_geom *q, int64_t ih, int64_t off) {
    if (q->sw == 1) return ih * q->W + off;
    int64_t Wp = (q->W + q->sw - 1) / q->sw, fd = off >= 0 ? off / q->sw : -((-off + q->sw - 1) / q->sw);
    return ((off - fd * q->sw) * q->H + ih) * Wp + fd;
}

#define CONV_T        float
#define CONV_GEMM     cpu_gemm_f32
#define CONV_FN(name) name##_f32
#include "cpu_conv_impl.h"
#undef CONV_T
#undef CONV_GEMM
#undef CONV_FN
#define CONV_T        double
#define CONV_GEMM     cpu_gemm_f64
#define CONV_FN(name) name##_f64
#include "cpu_conv_impl.h"
#undef CONV_T
#undef CONV_GEMM
#undef CONV_FN

td_status cpu_op_CONV2D(const td_op *op) {
    const td_operand *x = &op->in[0], *w = &op->in[1], *b = &op->in[2], *y = &op->out[0];
    conv_geom q = conv_geom_of(op, x->shape, w->shape, y->shape);
    if (q.N == 0) return TD_OK;
    if (x->dtype == TD_F32) return conv_forward_f32(&q, cpu_ptr(x), cpu_ptr(w), b->buf ? cpu_ptr(b) : NULL, cpu_ptr(y));
    if (x->dtype == TD_F64) return conv_forward_f64(&q, cpu_ptr(x), cpu_ptr(w), b->buf ? cpu_ptr(b) : NULL, cpu_ptr(y));
    float *fx = cpu_nn_to_f32(x), *fw = cpu_nn_to_f32(w), *fb = cpu_nn_to_f32(b);
    float *fy = malloc((size_t)td_operand_numel(y) * sizeof(float));
    td_status st = !fx || !fw || (b->buf && !fb) ? td_last_status()
                   : !fy                         ? cpu_nn_oom("conv2d", (size_t)td_operand_numel(y) * sizeof(float))
                                                 : conv_forward_f32(&q, fx, fw, fb, fy);
    if (st == TD_OK) cpu_nn_from_f32(y, fy);
    free(fx), free(fw), free(fb), free(fy);
    return st;
}

td_status cpu_op_CONV2D_BACKWARD_INPUT(const td_op *op) {
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

td_status cpu_op_CONV2D_BACKWARD_WEIGHT(const td_op *op) {
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
