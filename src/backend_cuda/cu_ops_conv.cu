/*
** CONV2D and its two backward products on CUDA, by im2col + cuBLAS GEMM.
**   x is (N, C, H, W), w is (O, C/G, kh, kw), b is (O) or absent, y is (N, O, Ho, Wo),
**   all contiguous; G groups, Cg = C/G, Og = O/G, K = Cg*kh*kw, P = Ho*Wo.
**   y[n, g*Og+o, oh, ow] = b[g*Og+o] + sum_{c,ki,kj} w[g*Og+o, c, ki, kj]
**                          * x[n, g*Cg+c, oh*sh - ph + ki*dh, ow*sw - pw + kj*dw]   (0 outside x)
** Reference: src/backend_cpu/cpu_conv.c (same formulas, one image at a time).
**
** Why im2col + GEMM and not an implicit GEMM of our own: cuBLAS's strict-fp32
** SGEMM (and its f16/bf16 tensor-core GEMMs with fp32 accumulation) is faster
** than a hand-written implicit GEMM of this size, and the im2col pass is a
** cheap memory-bound copy next to it. The batch is cut into chunks of nb images
** so that the column scratch stays under CONV_SCRATCH bytes.
**
** One column layout serves all three products: for a chunk of nb images,
**   col[(c*kh + ki)*kw + kj, n*P + oh*Wo + ow] = x[n0+n, c, oh*sh - ph + ki*dh, ow*sw - pw + kj*dw]
** a row-major (C*kh*kw, L) matrix with L = nb*P; group g's rows are [g*K, (g+1)*K).
** cuBLAS is column-major, so a row-major (r, c) matrix is its (c, r) transpose:
**   forward:         y[n]_g^T (P, Og) = col_n,g^T (P, K) @ w_g^T (K, Og), one strided-batched GEMM per
**                    group over the nb images (col_n starts at column n*P: lda L, stride P); y is first
**                    filled with the bias and the GEMM adds to it (beta 1), or overwrites it (beta 0).
**   backward input:  dcol_n,g^T (P, K) = dy[n]_g^T (P, Og) @ w_g (Og, K), then dx = col2im(dcol), a
**                    gather (each dx element sums the dcol entries that read it: no atomics).
**   backward weight: dw_g^T (K, Og) = col_g (K, L) @ dY_g^T (L, Og), where dY (O, L) is dy of the
**                    chunk with its images side by side; the long L is split in S slices by a
**                    strided-batched GEMM (split-K, so that the few output tiles still fill the
**                    device), and the S partial products are summed in a fixed order (deterministic).
** A 1x1 window with stride 1 and no padding needs no im2col: the planes are read (forward) or
** written (backward input) in place, the whole batch in one GEMM call.
** f16/bf16 run cublasGemmStridedBatchedEx with fp32 compute; the backward passes keep their
** dcol and partial sums in fp32 and round once. f32 uses cuBLAS's default (strict fp32, no TF32).
** cuDNN first: each entry point offers the call to cu_dnn_conv (cu_conv_cudnn.c; TRIDENT_CUDA_CONV=own|cudnn) and
** runs the im2col path only where cuDNN does not take it; CONV2D's bias is then added here (conv_add_bias).
*/
#include <limits.h>

#include "cu_cudnn.h"
#include "cu_nn.cuh"

#define CONV_SCRATCH  ((int64_t)256 << 20) /* bytes of column scratch per chunk */
#define CONV_SLICE    256                  /* least columns per split-K slice of the weight gradient */
#define CONV_WARP_SUM 8                    /* more slices than this are summed by a warp per element */

typedef struct conv_geom {
    int64_t N, C, H, W, O, kh, kw, Ho, Wo, G, Cg, Og, K, P;
    int64_t sh, sw, ph, pw, dh, dw;
} conv_geom;

/* x, w and y are the (N,C,H,W), (O,C/G,kh,kw) and (N,O,Ho,Wo) shapes of the op's operands. */
static conv_geom conv_geom_of(const td_op *op, const int64_t *x, const int64_t *w, const int64_t *y) {
    conv_geom q;
    q.N = x[0], q.C = x[1], q.H = x[2], q.W = x[3];
    q.O = w[0], q.kh = w[2], q.kw = w[3], q.Ho = y[2], q.Wo = y[3], q.G = op->p.conv.groups;
    q.Cg = q.C / q.G, q.Og = q.O / q.G, q.K = q.Cg * q.kh * q.kw, q.P = q.Ho * q.Wo;
    q.sh = op->p.conv.stride[0], q.sw = op->p.conv.stride[1];
    q.ph = op->p.conv.padding[0], q.pw = op->p.conv.padding[1];
    q.dh = op->p.conv.dilation[0], q.dw = op->p.conv.dilation[1];
    return q;
}

/* The window reads every plane in place (im2col would copy it unchanged). */
static bool conv_is_identity(const conv_geom *q) {
    return q->kh == 1 && q->kw == 1 && q->sh == 1 && q->sw == 1 && q->ph == 0 && q->pw == 0 && q->Ho == q->H &&
           q->Wo == q->W;
}

/* Images per chunk when one image needs per_image bytes of scratch. */
static int64_t conv_chunk(const conv_geom *q, int64_t per_image) {
    int64_t nb = per_image > 0 ? CONV_SCRATCH / per_image : q->N;
    return nb < 1 ? 1 : nb > q->N ? q->N : nb;
}

/* ---- kernels ---- */

/* x (N, C, H, W) -> col (C*kh*kw, L), L = nb*P, for images n0 .. n0+nb:
** col[(c*kh + ki)*kw + kj, n*P + oh*Wo + ow] = x[n0+n, c, oh*sh - ph + ki*dh, ow*sw - pw + kj*dw], 0 outside x.
** One thread per (c, n, oh, ow) writes its kh*kw entries (coalesced along ow). */
template <typename T> __global__ void conv_im2col(const T *x, T *col, conv_geom q, int64_t n0, int64_t nb) {
    const int64_t L = nb * q.P, HW = q.H * q.W;
    const T zero = cu_from<T>(0.0f);
    NN_LOOP(i, q.C * L) {
        int64_t p = i % q.P, t = i / q.P, n = t % nb, c = t / nb, oh = p / q.Wo, ow = p - oh * q.Wo;
        const T *plane = x + ((n0 + n) * q.C + c) * HW;
        T *dst = col + c * q.kh * q.kw * L + n * q.P + p;
        for (int64_t ki = 0; ki < q.kh; ki++) {
            int64_t ih = oh * q.sh - q.ph + ki * q.dh;
            bool row_in = ih >= 0 && ih < q.H;
            for (int64_t kj = 0; kj < q.kw; kj++) {
                int64_t iw = ow * q.sw - q.pw + kj * q.dw;
                dst[(ki * q.kw + kj) * L] = row_in && iw >= 0 && iw < q.W ? plane[ih * q.W + iw] : zero;
            }
        }
    }
}

/* dcol (C*kh*kw, L) -> dx (N, C, H, W) for images n0 .. n0+nb, the adjoint of conv_im2col:
** dx[n0+n, c, h, w] = sum over (ki, kj, oh, ow) with oh*sh - ph + ki*dh == h and ow*sw - pw + kj*dw == w
**                     of dcol[(c*kh + ki)*kw + kj, n*P + oh*Wo + ow]   (in (ki, kj) order, as the CPU adds)
** One thread per dx element gathers its terms (no atomics); AC is the accumulator type. */
template <typename T, typename AC>
__global__ void conv_col2im(const AC *dcol, T *dx, conv_geom q, int64_t n0, int64_t nb) {
    const int64_t L = nb * q.P, HW = q.H * q.W;
    NN_LOOP(i, nb * q.C * HW) {
        int64_t w = i % q.W, t = i / q.W, h = t % q.H;
        t /= q.H;
        int64_t c = t % q.C, n = t / q.C;
        const AC *src = dcol + c * q.kh * q.kw * L + n * q.P;
        AC s = 0;
        for (int64_t ki = 0; ki < q.kh; ki++) {
            int64_t th = h + q.ph - ki * q.dh; /* = oh*sh */
            if (th < 0 || th % q.sh) continue;
            int64_t oh = th / q.sh;
            if (oh >= q.Ho) continue;
            for (int64_t kj = 0; kj < q.kw; kj++) {
                int64_t tw = w + q.pw - kj * q.dw; /* = ow*sw */
                if (tw < 0 || tw % q.sw) continue;
                int64_t ow = tw / q.sw;
                if (ow < q.Wo) s += src[(ki * q.kw + kj) * L + oh * q.Wo + ow];
            }
        }
        dx[n0 * q.C * HW + i] = cu_from<T>(s);
    }
}

/* dy (N, O, P) -> dY (O, L), L = nb*P: dY[o, n*P + p] = dy[n0+n, o, p] (the chunk's images side by side). */
template <typename T> __global__ void conv_gather_dy(const T *dy, T *dY, conv_geom q, int64_t n0, int64_t nb) {
    NN_LOOP(i, q.O * nb * q.P) {
        int64_t p = i % q.P, t = i / q.P, n = t % nb, o = t / nb;
        dY[i] = dy[((n0 + n) * q.O + o) * q.P + p];
    }
}

/* y (N, O, P): y[n, o, p] = b[o], or 0 without b. */
template <typename T> __global__ void conv_fill_bias(T *y, const T *b, int64_t O, int64_t P, int64_t total) {
    const T zero = cu_from<T>(0.0f);
    NN_LOOP(i, total) y[i] = b ? b[(i / P) % O] : zero;
}

/* y (N, O, P) += b: y[n, o, p] = y[n, o, p] + b[o], in the compute type, rounded once. */
template <typename T> __global__ void conv_add_bias(T *y, const T *b, int64_t O, int64_t P, int64_t total) {
    typedef typename cu_compute<T>::type C;
    NN_LOOP(i, total) y[i] = cu_from<T>(cu_to<C>(y[i]) + cu_to<C>(b[(i / P) % O]));
}

/* parts (S, OK) -> v (OK): v[e] = (accumulate ? acc[e] : 0) + parts[0, e] + ... + parts[S-1, e];
** stored to out (rounded to T) when out is given, else to acc. One thread per element, slices in order. */
template <typename T, typename AC>
__global__ void conv_weight_sum(const AC *parts, int64_t S, int64_t OK, AC *acc, bool accumulate, T *out) {
    NN_LOOP(e, OK) {
        AC v = accumulate ? acc[e] : (AC)0;
        for (int64_t s = 0; s < S; s++) v += parts[s * OK + e];
        if (out)
            out[e] = cu_from<T>(v);
        else
            acc[e] = v;
    }
}

/* The same sum for many slices: one warp per element, lane l adds slices l, l+32, ..., then the lanes'
** sums are added by shuffles (a fixed order for a given S). */
template <typename T, typename AC>
__global__ void conv_weight_sum_warp(const AC *parts, int64_t S, int64_t OK, AC *acc, bool accumulate, T *out) {
    const int64_t warps = (int64_t)gridDim.x * blockDim.x / 32, lane = threadIdx.x & 31;
    for (int64_t e = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32; e < OK; e += warps) {
        AC v = 0;
        for (int64_t s = lane; s < S; s += 32) v += parts[s * OK + e];
        v = cu_warp_sum(v);
        if (lane) continue;
        if (accumulate) v += acc[e];
        if (out)
            out[e] = cu_from<T>(v);
        else
            acc[e] = v;
    }
}

/* ---- cuBLAS ---- */

/* One operand of a strided-batched GEMM: column-major with leading dimension ld, batch stride stride (elements). */
typedef struct conv_mat {
    const void *p;
    int64_t ld, stride;
} conv_mat;

/* C_i (m, n) = op(A_i) @ op(B_i) + beta * C_i for i < batch, column-major. A and B hold dt; C holds dt, or
** the fp32 compute type when c_wide (f16/bf16 only). what names the op for errors. */
static td_status conv_gemm(cu_dev *d, td_dtype dt, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n,
                           int64_t k, conv_mat A, conv_mat B, double beta, void *C, int64_t ldc, int64_t sc,
                           int64_t batch, bool c_wide, const char *what) {
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX || A.ld > INT_MAX || B.ld > INT_MAX || ldc > INT_MAX ||
        batch > INT_MAX)
        return td_error_set(TD_ERR_UNSUPPORTED, "%s: a GEMM of %lldx%lldx%lld (batch %lld) passes cuBLAS's int limits",
                            what, (long long)m, (long long)n, (long long)k, (long long)batch);
    cublasStatus_t s;
    if (dt == TD_F64) {
        const double one = 1, b = beta;
        s = cublasDgemmStridedBatched(d->blas, ta, tb, (int)m, (int)n, (int)k, &one, (const double *)A.p, (int)A.ld,
                                      A.stride, (const double *)B.p, (int)B.ld, B.stride, &b, (double *)C, (int)ldc, sc,
                                      (int)batch);
    } else if (dt == TD_F32) {
        const float one = 1, b = (float)beta;
        s = cublasSgemmStridedBatched(d->blas, ta, tb, (int)m, (int)n, (int)k, &one, (const float *)A.p, (int)A.ld,
                                      A.stride, (const float *)B.p, (int)B.ld, B.stride, &b, (float *)C, (int)ldc, sc,
                                      (int)batch);
    } else {
        const float one = 1, b = (float)beta;
        cudaDataType_t t = dt == TD_F16 ? CUDA_R_16F : CUDA_R_16BF, tc = c_wide ? CUDA_R_32F : t;
        s = cublasGemmStridedBatchedEx(d->blas, ta, tb, (int)m, (int)n, (int)k, &one, A.p, t, (int)A.ld, A.stride, B.p,
                                       t, (int)B.ld, B.stride, &b, C, tc, (int)ldc, sc, (int)batch, CUBLAS_COMPUTE_32F,
                                       CUBLAS_GEMM_DEFAULT);
    }
    return cu_blas_status(s, what);
}

/* Element off of an array of es-byte elements at p. */
static inline char *conv_at(const void *p, int64_t off, size_t es) { return (char *)p + off * (int64_t)es; }

/* n bytes rounded up to 16 */
static inline size_t conv_align(size_t n) { return (n + 15) & ~(size_t)15; }

/* The accumulator size of dt: f64 8, everything else fp32. */
static inline size_t conv_wide_size(td_dtype dt) { return dt == TD_F64 ? 8 : 4; }

/* ---- forward ---- */

static td_status conv_forward(cu_dev *d, const td_op *op) {
    const td_operand *xv = &op->in[0], *wv = &op->in[1], *bv = &op->in[2], *yv = &op->out[0];
    conv_geom q = conv_geom_of(op, xv->shape, wv->shape, yv->shape);
    td_dtype dt = xv->dtype;
    size_t es = td_dtype_size(dt);
    const void *x = cu_data(xv), *w = cu_data(wv), *b = cu_data(bv);
    void *y = cu_data(yv);
    int64_t total = td_operand_numel(yv);
    if (total == 0) return TD_OK;
    unsigned grid = cu_grid(d, total, CU_BLOCK);
    if (b || q.K == 0) { /* y = bias (or 0); the GEMMs add to it */
        CU_SWITCH_FLOAT(dt, conv_fill_bias<T><<<grid, CU_BLOCK, 0, d->stream>>>((T *)y, (const T *)b, q.O, q.P, total));
        td_status st = CU_LAUNCHED("conv2d: bias");
        if (st != TD_OK || q.K == 0) return st;
    }
    double beta = b ? 1 : 0;
    if (conv_is_identity(&q)) { /* col_n,g is x[n, g*Cg : (g+1)*Cg] itself: (P, K) column-major */
        for (int64_t g = 0; g < q.G; g++) {
            conv_mat A = {conv_at(x, g * q.Cg * q.P, es), q.P, q.C * q.P}, B = {conv_at(w, g * q.Og * q.K, es), q.K, 0};
            td_status st = conv_gemm(d, dt, CUBLAS_OP_N, CUBLAS_OP_N, q.P, q.Og, q.K, A, B, beta,
                                     conv_at(y, g * q.Og * q.P, es), q.P, q.O * q.P, q.N, false, "conv2d: GEMM");
            if (st != TD_OK) return st;
        }
        return TD_OK;
    }
    int64_t rows = q.C * q.kh * q.kw, nb = conv_chunk(&q, rows * q.P * (int64_t)es);
    void *col;
    td_status st = cu_temp_alloc(d, (size_t)(rows * nb * q.P) * es, &col);
    if (st != TD_OK) return st;
    for (int64_t n0 = 0; n0 < q.N && st == TD_OK; n0 += nb) {
        int64_t m = q.N - n0 < nb ? q.N - n0 : nb, L = m * q.P;
        CU_SWITCH_FLOAT(dt, conv_im2col<T>
                        <<<cu_grid(d, q.C * L, CU_BLOCK), CU_BLOCK, 0, d->stream>>>((const T *)x, (T *)col, q, n0, m));
        st = CU_LAUNCHED("conv2d: im2col");
        for (int64_t g = 0; g < q.G && st == TD_OK; g++) {
            conv_mat A = {conv_at(col, g * q.K * L, es), L, q.P}, B = {conv_at(w, g * q.Og * q.K, es), q.K, 0};
            st = conv_gemm(d, dt, CUBLAS_OP_N, CUBLAS_OP_N, q.P, q.Og, q.K, A, B, beta,
                           conv_at(y, (n0 * q.O + g * q.Og) * q.P, es), q.P, q.O * q.P, m, false, "conv2d: GEMM");
        }
    }
    cu_temp_free(d, col);
    return st;
}

/* ---- backward to the input ---- */

static td_status conv_backward_input(cu_dev *d, const td_op *op) {
    const td_operand *dyv = &op->in[0], *wv = &op->in[1], *dxv = &op->out[0];
    conv_geom q = conv_geom_of(op, dxv->shape, wv->shape, dyv->shape);
    td_dtype dt = dyv->dtype;
    size_t es = td_dtype_size(dt), ws = conv_wide_size(dt);
    const void *dy = cu_data(dyv), *w = cu_data(wv);
    void *dx = cu_data(dxv);
    if (td_operand_numel(dxv) == 0) return TD_OK;
    if (conv_is_identity(&q)) { /* dx[n, g*Cg : (g+1)*Cg] is dcol_n,g: (P, K) column-major */
        for (int64_t g = 0; g < q.G; g++) {
            conv_mat A = {conv_at(dy, g * q.Og * q.P, es), q.P, q.O * q.P},
                     B = {conv_at(w, g * q.Og * q.K, es), q.K, 0};
            td_status st =
                conv_gemm(d, dt, CUBLAS_OP_N, CUBLAS_OP_T, q.P, q.K, q.Og, A, B, 0, conv_at(dx, g * q.Cg * q.P, es),
                          q.P, q.C * q.P, q.N, false, "conv2d_backward_input: GEMM");
            if (st != TD_OK) return st;
        }
        return TD_OK;
    }
    int64_t rows = q.C * q.kh * q.kw, nb = conv_chunk(&q, rows * q.P * (int64_t)ws);
    void *dcol;
    td_status st = cu_temp_alloc(d, (size_t)(rows * nb * q.P) * ws, &dcol);
    if (st != TD_OK) return st;
    for (int64_t n0 = 0; n0 < q.N && st == TD_OK; n0 += nb) {
        int64_t m = q.N - n0 < nb ? q.N - n0 : nb, L = m * q.P;
        for (int64_t g = 0; g < q.G && st == TD_OK; g++) {
            conv_mat A = {conv_at(dy, (n0 * q.O + g * q.Og) * q.P, es), q.P, q.O * q.P},
                     B = {conv_at(w, g * q.Og * q.K, es), q.K, 0};
            st = conv_gemm(d, dt, CUBLAS_OP_N, CUBLAS_OP_T, q.P, q.K, q.Og, A, B, 0, conv_at(dcol, g * q.K * L, ws), L,
                           q.P, m, ws != es, "conv2d_backward_input: GEMM");
        }
        if (st != TD_OK) break;
        unsigned grid = cu_grid(d, m * q.C * q.H * q.W, CU_BLOCK);
        CU_SWITCH_FLOAT(dt, conv_col2im<T, typename cu_compute<T>::type><<<grid, CU_BLOCK, 0, d->stream>>>(
                                (const typename cu_compute<T>::type *)dcol, (T *)dx, q, n0, m));
        st = CU_LAUNCHED("conv2d_backward_input: col2im");
    }
    cu_temp_free(d, dcol);
    return st;
}

/* ---- backward to the weight ---- */

/* Split-K of the weight gradient's GEMMs over L columns: slices of kc columns, *full of them and a
** last one of *rem columns (0: none), enough for about two output tiles per SM. Returns the bound S
** on the slice count (full + (rem > 0) <= S), which never falls as L grows. */
static int64_t conv_weight_split(const cu_dev *d, const conv_geom *q, int64_t L, int64_t *kc, int64_t *full,
                                 int64_t *rem) {
    int64_t tiles = ((q->K + 63) / 64) * ((q->Og + 63) / 64) * q->G, S = 2 * (int64_t)d->sm_count / tiles;
    int64_t most = L / CONV_SLICE;
    if (S > most) S = most;
    if (S < 1) S = 1;
    *kc = (L + S - 1) / S, *full = L / *kc, *rem = L - *full * *kc;
    return S;
}

static td_status conv_backward_weight(cu_dev *d, const td_op *op) {
    const td_operand *dyv = &op->in[0], *xv = &op->in[1], *dwv = &op->out[0];
    conv_geom q = conv_geom_of(op, xv->shape, dwv->shape, dyv->shape);
    td_dtype dt = dyv->dtype;
    size_t es = td_dtype_size(dt), ws = conv_wide_size(dt);
    const void *dy = cu_data(dyv), *x = cu_data(xv);
    void *dw = cu_data(dwv);
    int64_t OK = q.O * q.K;
    if (OK == 0) return TD_OK;
    if (q.N == 0) return cu_status(cudaMemsetAsync(dw, 0, (size_t)OK * es, d->stream), "conv2d_backward_weight");
    int64_t rows = q.C * q.kh * q.kw, nb = conv_chunk(&q, (rows + q.O) * q.P * (int64_t)es);
    int64_t kc, full, rem, chunks = (q.N + nb - 1) / nb;
    /* the first chunk is the longest: it bounds every chunk's slice count */
    int64_t slices = conv_weight_split(d, &q, nb * q.P, &kc, &full, &rem), ncol = rows * nb * q.P,
            ndy = nb > 1 ? q.O * nb * q.P : 0;
    /* scratch: col | dY | parts | acc, each starting 16-byte aligned */
    size_t dy_at = conv_align((size_t)ncol * es), parts_at = conv_align(dy_at + (size_t)ndy * es),
           bytes_parts = conv_align((size_t)(slices * OK) * ws), bytes_acc = chunks > 1 ? (size_t)OK * ws : 0;
    char *scratch;
    td_status st = cu_temp_alloc(d, parts_at + bytes_parts + bytes_acc, (void **)&scratch);
    if (st != TD_OK) return st;
    void *col = scratch, *dY = scratch + dy_at, *parts = scratch + parts_at;
    void *acc = bytes_acc ? scratch + parts_at + bytes_parts : NULL;
    for (int64_t c = 0; c < chunks && st == TD_OK; c++) {
        int64_t n0 = c * nb, m = q.N - n0 < nb ? q.N - n0 : nb, L = m * q.P;
        conv_weight_split(d, &q, L, &kc, &full, &rem);
        CU_SWITCH_FLOAT(dt, conv_im2col<T>
                        <<<cu_grid(d, q.C * L, CU_BLOCK), CU_BLOCK, 0, d->stream>>>((const T *)x, (T *)col, q, n0, m));
        st = CU_LAUNCHED("conv2d_backward_weight: im2col");
        const void *dYc = conv_at(dy, n0 * q.O * q.P, es); /* one image: dy[n0] is already (O, P) */
        if (st == TD_OK && m > 1) {
            CU_SWITCH_FLOAT(dt, conv_gather_dy<T><<<cu_grid(d, q.O * L, CU_BLOCK), CU_BLOCK, 0, d->stream>>>(
                                    (const T *)dy, (T *)dY, q, n0, m));
            st = CU_LAUNCHED("conv2d_backward_weight: gather dy");
            dYc = dY;
        }
        /* parts[s, g*Og*K ...] (K, Og) column-major = col_g[:, slice s] @ dY_g[:, slice s]^T */
        for (int64_t g = 0; g < q.G && st == TD_OK; g++) {
            const char *a = conv_at(col, g * q.K * L, es), *b = conv_at(dYc, g * q.Og * L, es);
            char *p = conv_at(parts, g * q.Og * q.K, ws);
            st = conv_gemm(d, dt, CUBLAS_OP_T, CUBLAS_OP_N, q.K, q.Og, kc, conv_mat{a, L, kc}, conv_mat{b, L, kc}, 0, p,
                           q.K, OK, full, es != ws, "conv2d_backward_weight: GEMM");
            if (st == TD_OK && rem)
                st = conv_gemm(d, dt, CUBLAS_OP_T, CUBLAS_OP_N, q.K, q.Og, rem,
                               conv_mat{conv_at(a, full * kc, es), L, 0}, conv_mat{conv_at(b, full * kc, es), L, 0}, 0,
                               conv_at(p, full * OK, ws), q.K, 0, 1, es != ws, "conv2d_backward_weight: GEMM");
        }
        if (st != TD_OK) break;
        int64_t S = full + (rem > 0);
        bool last = c == chunks - 1, warp = S > CONV_WARP_SUM;
        unsigned grid = cu_grid(d, warp ? OK * 32 : OK, CU_BLOCK);
        CU_SWITCH_FLOAT(dt, {
            typedef typename cu_compute<T>::type AC;
            if (warp)
                conv_weight_sum_warp<T, AC><<<grid, CU_BLOCK, 0, d->stream>>>((const AC *)parts, S, OK, (AC *)acc,
                                                                              c > 0, last ? (T *)dw : NULL);
            else
                conv_weight_sum<T, AC><<<grid, CU_BLOCK, 0, d->stream>>>((const AC *)parts, S, OK, (AC *)acc, c > 0,
                                                                         last ? (T *)dw : NULL);
        });
        st = CU_LAUNCHED("conv2d_backward_weight: sum");
    }
    cu_temp_free(d, scratch);
    return st;
}

/* ---- entry points ---- */

/* every operand 4-d (the bias 1-d), with a valid geometry */
static bool conv_ok(const td_op *op) {
    for (int i = 0; i < op->n_in; i++)
        if (op->in[i].buf && op->in[i].ndim != (i == 2 ? 1 : 4)) return false;
    const int *s = op->p.conv.stride, *dl = op->p.conv.dilation;
    return op->out[0].ndim == 4 && op->p.conv.groups >= 1 && s[0] >= 1 && s[1] >= 1 && dl[0] >= 1 && dl[1] >= 1;
}

/* every operand holds an element (the im2col path alone handles empty ones) */
static bool conv_nonempty(const td_op *op) {
    for (int i = 0; i < 2; i++)
        if (td_operand_numel(&op->in[i]) == 0) return false;
    return td_operand_numel(&op->out[0]) > 0;
}

/* in = (x, w, b?), out = y */
CU_SUPPORTS(CONV2D) { return conv_ok(op); }
extern "C" td_status cu_op_CONV2D(cu_dev *d, const td_op *op) {
    td_status st;
    if (!conv_nonempty(op) || !cu_dnn_conv(d, op, &st)) return conv_forward(d, op);
    const td_operand *yv = &op->out[0], *bv = &op->in[2];
    if (st != TD_OK || !bv->buf) return st;
    int64_t total = td_operand_numel(yv), O = yv->shape[1], P = yv->shape[2] * yv->shape[3];
    void *y = cu_data(yv);
    const void *b = cu_data(bv);
    CU_SWITCH_FLOAT(yv->dtype, conv_add_bias<T>
                    <<<cu_grid(d, total, CU_BLOCK), CU_BLOCK, 0, d->stream>>>((T *)y, (const T *)b, O, P, total));
    return CU_LAUNCHED("conv2d: bias");
}

/* in = (dy, w), out = dx */
CU_SUPPORTS(CONV2D_BACKWARD_INPUT) { return conv_ok(op); }
extern "C" td_status cu_op_CONV2D_BACKWARD_INPUT(cu_dev *d, const td_op *op) {
    td_status st;
    return conv_nonempty(op) && cu_dnn_conv(d, op, &st) ? st : conv_backward_input(d, op);
}

/* in = (dy, x), out = dw */
CU_SUPPORTS(CONV2D_BACKWARD_WEIGHT) { return conv_ok(op); }
extern "C" td_status cu_op_CONV2D_BACKWARD_WEIGHT(cu_dev *d, const td_op *op) {
    td_status st;
    return conv_nonempty(op) && cu_dnn_conv(d, op, &st) ? st : conv_backward_weight(d, op);
}
