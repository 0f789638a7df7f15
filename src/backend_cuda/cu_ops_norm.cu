/*
** Layer normalization over the last dim: LAYER_NORM and ADD_LAYER_NORM (the
** residual add fused in front) (reference: src/backend_cpu/cpu_layernorm.c),
** and GROUP_NORM, the same rows over (n, group) with a per-channel affine;
** LAYER_NORM_BACKWARD, layer_norm's gradients from the saved mean and rstd
** (dx in one row pass with add_layer_norm's residual gradient added, and its
** copy rounded to dy's narrow dtype for a narrow residual, dw and
** db summed in the same pass into one partial per block; rows too long for
** registers: dw, db over row chunks in a second pass).
** x is (R, n) contiguous (R = product of the leading dims). One row group per
** row (cu_reduce.cuh): a warp for n <= 1024, else a block of 512; rows up to
** 16384 elements (8192 for f64) stay in registers, so x is read from memory
** once, with 16-byte loads and stores when rows are aligned. Math in float for
** f32/f16/bf16, in double for f64. For f32 x, LAYER_NORM's and ADD_LAYER_NORM's
** y, ADD_LAYER_NORM's residual and LAYER_NORM_BACKWARD's dy may be f16/bf16
** (autocast's: the op table's 'h'): read widened, y rounded from the f32 row,
** the same bits as a COPY before or after the f32 op.
*/
#include <atomic>
#include <stdlib.h>
#include <string.h>

#include "cu_reduce.cuh"

/* ---- operands of another dtype than x's ----
** A row's slots follow x's vectors (V = cu_vec<T>::N elements, 16 bytes); an
** operand of type Y moves the same V elements as one V sizeof(Y)-byte access
** (8 bytes for bf16 beside f32). For Y = T it is cu_vec<T>. */
template <typename Y, int V> struct alignas(V * sizeof(Y)) ln_pack { Y v[V]; };

/* v[k] = y[j] for thread t's slots, as cu_row_load (a no-op when VPT == 0) */
template <int TPR, int VPT, int V, typename Y, typename C>
__device__ __forceinline__ void ln_row_load(const Y *y, int64_t n, int t, C *v) {
    if constexpr (VPT == 0) {
        return;
    } else if constexpr (V == 1) {
        cu_row_each<TPR, VPT, 1>(n, t, [&](int k, int64_t j) { v[k] = cu_to<C>(y[j]); });
    } else {
        cu_row_vecs<TPR, VPT, V>(n, t, [&](int q, int64_t i) {
            ln_pack<Y, V> p = ((const ln_pack<Y, V> *)y)[i];
#pragma unroll
            for (int e = 0; e < V; e++) v[q * V + e] = cu_to<C>(p.v[e]);
        });
    }
}
/* y[j] = v[k] for thread t's slots, as cu_row_store (a no-op when VPT == 0) */
template <int TPR, int VPT, int V, typename Y, typename C>
__device__ __forceinline__ void ln_row_store(Y *y, int64_t n, int t, const C *v) {
    if constexpr (VPT == 0) {
        return;
    } else if constexpr (V == 1) {
        cu_row_each<TPR, VPT, 1>(n, t, [&](int k, int64_t j) { y[j] = cu_from<Y>(v[k]); });
    } else {
        cu_row_vecs<TPR, VPT, V>(n, t, [&](int q, int64_t i) {
            ln_pack<Y, V> p;
#pragma unroll
            for (int e = 0; e < V; e++) p.v[e] = cu_from<Y>(v[q * V + e]);
            ((ln_pack<Y, V> *)y)[i] = p;
        });
    }
}

/* Whether p (NULL: ignored) holds rows of n elements of esize bytes that ln_pack's V = nv vectors can read */
static inline bool ln_aligned(int64_t n, int nv, size_t esize, const void *p) {
    return !p || (n % nv == 0 && (uintptr_t)p % ((size_t)nv * esize) == 0);
}

/* CU_ROWS_LAUNCH for a kernel with more type parameters than T: KERNEL<T, more..., TPR, VPT, V>, TYPES the
** parenthesized (T, more...); V from T (x's type). */
#define LN_UNPAREN_(...) __VA_ARGS__
#define LN_ROWS_CASE_(vec, TPR, VPT, grid, KERNEL, TYPES, ...)                                                         \
    do {                                                                                                               \
        const int n_vec_ = VPT % cu_vec<T>::N == 0 ? cu_vec<T>::N : 1;                                                 \
        if ((vec) && n_vec_ > 1)                                                                                       \
            KERNEL<LN_UNPAREN_ TYPES, TPR, VPT, n_vec_><<<grid, TPR == 32 ? 256 : TPR, 0, s_>>>(__VA_ARGS__);          \
        else                                                                                                           \
            KERNEL<LN_UNPAREN_ TYPES, TPR, VPT, 1><<<grid, TPR == 32 ? 256 : TPR, 0, s_>>>(__VA_ARGS__);               \
    } while (0)
#define LN_ROWS_TIER_(vec, TPR, big, grid, KERNEL, TYPES, ...)                                                         \
    else if (n_ <= (TPR)*4) LN_ROWS_CASE_(vec, TPR, 4, grid, KERNEL, TYPES, __VA_ARGS__);                              \
    else if (n_ <= (TPR)*8) LN_ROWS_CASE_(vec, TPR, 8, grid, KERNEL, TYPES, __VA_ARGS__);                              \
    else if (n_ <= (TPR)*16) LN_ROWS_CASE_(vec, TPR, 16, grid, KERNEL, TYPES, __VA_ARGS__);                            \
    else if (n_ <= (TPR)*32 && (big)) LN_ROWS_CASE_(vec, TPR, 32, grid, KERNEL, TYPES, __VA_ARGS__);
#define LN_ROWS_LAUNCH(d, rows, n, vec, KERNEL, TYPES, ...)                                                            \
    do {                                                                                                               \
        unsigned gw_ = cu_grid((d), (rows), 8), gb_ = cu_grid((d), (rows), 1);                                         \
        cudaStream_t s_ = (d)->stream;                                                                                 \
        int64_t n_ = (n);                                                                                              \
        if (n_ <= 32)                                                                                                  \
            KERNEL<LN_UNPAREN_ TYPES, 32, 1, 1><<<gw_, 256, 0, s_>>>(__VA_ARGS__);                                     \
        else if (n_ <= 64)                                                                                             \
            LN_ROWS_CASE_(vec, 32, 2, gw_, KERNEL, TYPES, __VA_ARGS__);                                                \
        LN_ROWS_TIER_(vec, 32, true, gw_, KERNEL, TYPES, __VA_ARGS__)                                                  \
        LN_ROWS_TIER_(vec, 512, sizeof(T) < 8, gb_, KERNEL, TYPES, __VA_ARGS__)                                        \
        else KERNEL<LN_UNPAREN_ TYPES, 512, 0, 1><<<gb_, 512, 0, s_>>>(__VA_ARGS__);                                   \
    } while (0)

/* The statistics of a row of n (xr in memory, or v in registers when VPT > 0),
** two passes: *mu = sum_j x[j] / n, *rs = 1 / sqrt(sum_j (x[j] - mu)^2 / n + eps). */
template <int TPR, int VPT, int V, typename T, typename C>
__device__ __forceinline__ void norm_row_stats(const T *xr, const C *v, int64_t n, int t, C *scratch, double eps, C *mu,
                                               C *rs) {
    C s = 0, q = 0;
    /* pass 1: mean */
    cu_row_each<TPR, VPT, V>(n, t, [&](int k, int64_t j) { s += VPT > 0 ? v[k] : cu_to<C>(xr[j]); });
    C m = cu_row_sum<TPR>(s, scratch) / (C)n;
    /* pass 2: variance */
    cu_row_each<TPR, VPT, V>(n, t, [&](int k, int64_t j) {
        C dx = (VPT > 0 ? v[k] : cu_to<C>(xr[j])) - m;
        q += dx * dx;
    });
    *rs = (C)1 / sqrt(cu_row_sum<TPR>(q, scratch) / (C)n + (C)eps);
    *mu = m;
}

/* Pass 3 of a row: y[j] = (x[j] - mu) * rs * w[c] + b[c] (w, b NULL: 1, 0), c = chan(j), stored to yr (of
** x's type or, for f32 x, f16/bf16: rounded from the float e). */
template <int TPR, int VPT, int V, typename T, typename Y, typename C, typename F>
__device__ __forceinline__ void norm_row_out(const T *xr, C *v, Y *yr, int64_t n, int t, C mu, C rs, const T *w,
                                             const T *b, F chan) {
    cu_row_each<TPR, VPT, V>(n, t, [&](int k, int64_t j) {
        C e = ((VPT > 0 ? v[k] : cu_to<C>(xr[j])) - mu) * rs;
        int64_t c = chan(j);
        if (w) e *= cu_to<C>(w[c]);
        if (b) e += cu_to<C>(b[c]);
        if (VPT > 0)
            v[k] = e;
        else
            yr[j] = cu_from<Y>(e);
    });
    ln_row_store<TPR, VPT, V>(yr, n, t, v);
}

/* layer_norm: x, y (R, n); w, b (n) or NULL; mean, rstd (R); res, sum (R, n)
** or NULL (ADD_LAYER_NORM: x is replaced by sum = x + res, rounded to T as
** ADD does, written out and normalized); x, w, b, sum, mean, rstd of type T,
** res of Q and y of Y (T, or f16/bf16 for f32 T: widened, rounded):
**   mean = sum_j x[j] / n
**   rstd = 1 / sqrt(sum_j (x[j] - mean)^2 / n + eps)   (biased variance, as a
**          second pass over x - mean: E[x^2] - mean^2 cancels when |mean| >> std)
**   y[j] = (x[j] - mean) * rstd * w[j] + b[j]
** Reference: torch.nn.functional.layer_norm. */
template <typename T, typename Q, typename Y, int TPR, int VPT, int V>
__global__ void CU_ROWS_BOUNDS(TPR) layer_norm_kernel(const T *x, const Q *res, T *sum, const T *w, const T *b, Y *y,
                                                      T *mean, T *rstd, int64_t R, int64_t n, double eps) {
    CU_ROW_SETUP(T, TPR);
    for (int64_t r = cu_row_first<TPR>(); r < R; r += cu_row_stride<TPR>()) {
        const T *xr = x + r * n;
        Y *yr = y + r * n;
        C v[VPT > 0 ? VPT : 1];
        cu_row_load<TPR, VPT, V>(xr, n, t, v);
        if (res) { /* pass 0: sum = x + res; each thread rereads only the elements it wrote */
            const Q *rr = res + r * n;
            T *sr = sum + r * n;
            cu_row_each<TPR, VPT, V>(n, t, [&](int k, int64_t j) {
                T e = cu_from<T>((VPT > 0 ? v[k] : cu_to<C>(xr[j])) + cu_to<C>(rr[j]));
                sr[j] = e;
                if (VPT > 0) v[k] = cu_to<C>(e);
            });
            xr = sr;
        }
        C mu, rs;
        norm_row_stats<TPR, VPT, V>(xr, v, n, t, scratch, eps, &mu, &rs);
        norm_row_out<TPR, VPT, V>(xr, v, yr, n, t, mu, rs, w, b, [](int64_t j) { return j; });
        if (t == 0) mean[r] = cu_from<T>(mu), rstd[r] = cu_from<T>(rs);
    }
}

/* LAYER_NORM: in = (x, w?, b?), out = (y, mean, rstd); ADD_LAYER_NORM (ADD):
** in = (x, r, w?, b?), out = (y, s, mean, rstd). R = the elements of mean. x of
** T, r of Q, y of Y. */
template <typename T, typename Q, typename Y> static td_status layer_norm_launch(cu_dev *d, const td_op *op, bool add) {
    const td_operand *x = &op->in[0], *w = &op->in[1 + add], *b = &op->in[2 + add], *y = &op->out[0];
    const td_operand *mean = &op->out[1 + add], *rstd = &op->out[2 + add];
    int64_t numel = td_operand_numel(x), R = td_operand_numel(mean);
    if (numel == 0) return TD_OK;
    int64_t n = numel / R;
    const int NV = cu_vec<T>::N;
    const T *px = (const T *)cu_data(x);
    const Q *pq = add ? (const Q *)cu_data(&op->in[1]) : nullptr;
    T *ps = add ? (T *)cu_data(&op->out[1]) : nullptr;
    Y *py = (Y *)cu_data(y);
    bool vec = cu_rows_aligned(n, sizeof(T), px, ps) && ln_aligned(n, NV, sizeof(Y), py);
    LN_ROWS_LAUNCH(d, R, n, vec, layer_norm_kernel, (T, Q, Y), px, pq, ps, (const T *)cu_data(w), (const T *)cu_data(b),
                   py, (T *)cu_data(mean), (T *)cu_data(rstd), R, n, op->p.norm.eps);
    return CU_LAUNCHED(add ? "add_layer_norm" : "layer_norm");
}

/* The (residual, y) dtypes beside f32 x that the kernels take: (x's, x's) for every float x; for f32 x, y and
** r each f32 or one narrow dtype (bf16 or f16). *q, *y: the residual's and y's dtypes (r absent: x's). */
static void layer_norm_dtypes(const td_op *op, bool add, td_dtype *q, td_dtype *y) {
    *q = add ? op->in[1].dtype : op->in[0].dtype;
    *y = op->out[0].dtype;
}

static td_status layer_norm_run(cu_dev *d, const td_op *op, bool add) {
    td_dtype xt = op->in[0].dtype, qt, yt;
    layer_norm_dtypes(op, add, &qt, &yt);
    if (qt == xt && yt == xt) CU_SWITCH_FLOAT(xt, { return layer_norm_launch<T, T, T>(d, op, add); });
    if (xt == TD_F32) {
#define LN_PAIR_(QD, YD, QT, YT)                                                                                       \
    if (qt == QD && yt == YD) return layer_norm_launch<float, QT, YT>(d, op, add);
        LN_PAIR_(TD_BF16, TD_BF16, __nv_bfloat16, __nv_bfloat16)
        LN_PAIR_(TD_F32, TD_BF16, float, __nv_bfloat16)
        LN_PAIR_(TD_BF16, TD_F32, __nv_bfloat16, float)
        LN_PAIR_(TD_F16, TD_F16, __half, __half)
        LN_PAIR_(TD_F32, TD_F16, float, __half)
        LN_PAIR_(TD_F16, TD_F32, __half, float)
#undef LN_PAIR_
    }
    return td_error_set(TD_ERR_UNSUPPORTED, "cuda %s: x %s, y %s%s%s", add ? "add_layer_norm" : "layer_norm",
                        td_dtype_name(xt), td_dtype_name(yt), add ? ", residual " : "", add ? td_dtype_name(qt) : "");
}

/* one row per element of mean: at least one row when x has elements (n = numel(x) / R); the dtypes of
** layer_norm_run (a residual and y of two narrow dtypes is declined: the core casts) */
static bool layer_norm_ok(const td_op *op, bool add) {
    td_dtype xt = op->in[0].dtype, qt, yt;
    layer_norm_dtypes(op, add, &qt, &yt);
    bool types = (qt == xt && yt == xt) || (xt == TD_F32 && (qt == TD_F32 || yt == TD_F32 || qt == yt));
    return types && (td_operand_numel(&op->out[1 + add]) > 0 || td_operand_numel(&op->in[0]) == 0);
}

CU_SUPPORTS(LAYER_NORM) { return layer_norm_ok(op, false); }
extern "C" td_status cu_op_LAYER_NORM(cu_dev *d, const td_op *op) { return layer_norm_run(d, op, false); }

CU_SUPPORTS(ADD_LAYER_NORM) { return layer_norm_ok(op, true); }
extern "C" td_status cu_op_ADD_LAYER_NORM(cu_dev *d, const td_op *op) { return layer_norm_run(d, op, true); }

/* layer_norm's backward rows: dy, x, ds, dx, dxn (R, n); w (n) or NULL; mean, rstd
** (R); ds NULL for LAYER_NORM (add_layer_norm: the sum's own gradient):
**   xhat = (x - mean) rstd,  g = dy w
**   pass 1: s1 = mean_n(g), s2 = mean_n(g xhat)  (the row held in registers)
**   pass 2: dx = rstd (g - s1 - xhat s2) + ds,  dxn = dx rounded to G (or NULL)
** dy and dxn of G (T, or f16/bf16 for f32 T), the rest of T.
** Reference: the composed formula (src/autograd/formulas_nn.c, norm_grads). */
template <typename T, typename G, int TPR, int VPT, int V>
__global__ void CU_ROWS_BOUNDS(TPR)
    layer_norm_backward_kernel(const G *dy, const T *x, const T *w, const T *mean, const T *rstd, const T *ds, T *dx,
                               G *dxn, int64_t R, int64_t n) {
    CU_ROW_SETUP(T, TPR);
    for (int64_t r = cu_row_first<TPR>(); r < R; r += cu_row_stride<TPR>()) {
        const G *dyr = dy + r * n;
        const T *xr = x + r * n;
        T *dxr = dx + r * n;
        C m = cu_to<C>(mean[r]), rs = cu_to<C>(rstd[r]), s1 = 0, s2 = 0;
        C vg[VPT > 0 ? VPT : 1], vx[VPT > 0 ? VPT : 1]; /* g and xhat */
        ln_row_load<TPR, VPT, V>(dyr, n, t, vg);
        cu_row_load<TPR, VPT, V>(xr, n, t, vx);
        /* pass 1 */
        cu_row_each<TPR, VPT, V>(n, t, [&](int k, int64_t j) {
            C g = (VPT > 0 ? vg[k] : cu_to<C>(dyr[j])) * (w ? cu_to<C>(w[j]) : (C)1);
            C xh = ((VPT > 0 ? vx[k] : cu_to<C>(xr[j])) - m) * rs;
            if (VPT > 0) vg[k] = g, vx[k] = xh;
            s1 += g, s2 += g * xh;
        });
        s1 = cu_row_sum<TPR>(s1, scratch) / (C)n;
        s2 = cu_row_sum<TPR>(s2, scratch) / (C)n;
        /* pass 2 */
        cu_row_each<TPR, VPT, V>(n, t, [&](int k, int64_t j) {
            C g = VPT > 0 ? vg[k] : cu_to<C>(dyr[j]) * (w ? cu_to<C>(w[j]) : (C)1);
            C xh = VPT > 0 ? vx[k] : (cu_to<C>(xr[j]) - m) * rs;
            C e = rs * (g - s1 - xh * s2) + (ds ? cu_to<C>(ds[r * n + j]) : (C)0);
            if (VPT > 0) {
                vg[k] = e;
            } else {
                dxr[j] = cu_from<T>(e);
                if (dxn) dxn[r * n + j] = cu_from<G>(e);
            }
        });
        cu_row_store<TPR, VPT, V>(dxr, n, t, vg);
        if (dxn) ln_row_store<TPR, VPT, V>(dxn + r * n, n, t, vg);
    }
}

/* Rows of partials a block of layer_norm_backward_parts_kernel reads at once */
#define LN_BWD_PARTS_Y 32

/* dw and db from P partials (the fused kernel's blocks or the column pass's row chunks),
** part[2p][j] = sum dy xhat, part[2p+1][j] = sum dy over partial p, in a fixed order:
** blockIdx.y = 0 sums dw's columns, 1 db's (twice the blocks of one grid over both);
** thread (x, y) of a block of 32 x Y sums p = y, y + Y, ... of column j (a warp reads 32
** adjacent columns of a partial; Y independent loads in flight a column); thread y = 0
** then adds the Y sums in y order:
**   dw[j] = sum_p part[2p][j],  db[j] = sum_p part[2p+1][j] */
template <typename T>
__global__ void __launch_bounds__(32 * LN_BWD_PARTS_Y)
    layer_norm_backward_parts_kernel(const typename cu_compute<T>::type *part, T *dw, T *db, int64_t n, int64_t P) {
    typedef typename cu_compute<T>::type C;
    __shared__ C sa[LN_BWD_PARTS_Y][32];
    int64_t j = (int64_t)blockIdx.x * 32 + threadIdx.x, y = blockIdx.y;
    T *out = y ? db : dw;
    if (!out) return; /* the whole block: no __syncthreads below is reached */
    C a = 0;
    if (j < n)
#pragma unroll 8
        for (int64_t p = threadIdx.y; p < P; p += LN_BWD_PARTS_Y) a += part[(2 * p + y) * n + j];
    sa[threadIdx.y][threadIdx.x] = a;
    __syncthreads();
    if (threadIdx.y != 0 || j >= n) return;
    for (int q = 1; q < LN_BWD_PARTS_Y; q++) a += sa[q][threadIdx.x];
    out[j] = cu_from<T>(a);
}

/* Sum the P partials of part into dw and db (either NULL) on d's stream. */
template <typename T>
static td_status layer_norm_backward_parts(cu_dev *d, const typename cu_compute<T>::type *part, T *dw, T *db, int64_t n,
                                           int64_t P) {
    layer_norm_backward_parts_kernel<T>
        <<<dim3((unsigned)((n + 31) / 32), 2), dim3(32, LN_BWD_PARTS_Y), 0, d->stream>>>(part, dw, db, n, P);
    return CU_LAUNCHED("layer_norm_backward (dw, db)");
}

/* Threads a block of the fused kernel when a warp takes a row: 4 warps, so
** that blocks of ~140 registers a thread still fit several to an SM. */
#define LN_BWD_WARP_BLOCK 128

/* layer_norm_backward_kernel's dx and the dw, db partials in one read of the
** rows (held in registers, VPT > 0). Thread t of a row group owns the same
** columns j (slots k) in every row it visits, so it keeps, over its
** grid-stride rows r,
**   aw[k] += dy[r][j] xhat[r][j],  ab[k] += dy[r][j]
** in registers; at the end the block's row groups add theirs in group order
** (shared memory, red) and the block writes one partial, part[2 blk][j] (dw)
** and part[2 blk + 1][j] (db): its rows' sums; layer_norm_backward_parts adds
** the blocks' partials in block order. The grid is fixed per device, so the
** sums, and their bits, are the same every run. dx as in
** layer_norm_backward_kernel:
**   pass 1: xhat = (x - mean) rstd, g = dy w, s1 = mean_n(g), s2 = mean_n(g xhat)
**   pass 2: dx = rstd (g - s1 - xhat s2) + ds  (ds loaded into dy's registers),
**           dxn = dx rounded to G (NULL: none)
** dy and dxn of G (T, or f16/bf16 for f32 T), the rest of T. */
template <typename T, typename G, int TPR, int VPT, int V>
__global__ void __launch_bounds__(TPR == 32 ? LN_BWD_WARP_BLOCK : TPR)
    layer_norm_backward_fused_kernel(const G *dy, const T *x, const T *w, const T *mean, const T *rstd, const T *ds,
                                     T *dx, G *dxn, typename cu_compute<T>::type *part, int64_t R, int64_t n) {
    CU_ROW_SETUP(T, TPR);
    C aw[VPT], ab[VPT];
#pragma unroll
    for (int k = 0; k < VPT; k++) aw[k] = 0, ab[k] = 0;
    for (int64_t r = cu_row_first<TPR>(); r < R; r += cu_row_stride<TPR>()) {
        C m = cu_to<C>(mean[r]), rs = cu_to<C>(rstd[r]), s1 = 0, s2 = 0;
        C vd[VPT], vx[VPT]; /* dy then g then ds; x then xhat then dx */
        ln_row_load<TPR, VPT, V>(dy + r * n, n, t, vd);
        cu_row_load<TPR, VPT, V>(x + r * n, n, t, vx);
        /* pass 1, with the column sums */
        cu_row_each<TPR, VPT, V>(n, t, [&](int k, int64_t j) {
            C xh = (vx[k] - m) * rs, g = vd[k] * (w ? cu_to<C>(w[j]) : (C)1);
            aw[k] += vd[k] * xh, ab[k] += vd[k];
            vd[k] = g, vx[k] = xh;
            s1 += g, s2 += g * xh;
        });
        s1 = cu_row_sum<TPR>(s1, scratch) / (C)n;
        s2 = cu_row_sum<TPR>(s2, scratch) / (C)n;
        /* pass 2 */
        cu_row_each<TPR, VPT, V>(n, t, [&](int k, int64_t) { vx[k] = rs * (vd[k] - s1 - vx[k] * s2); });
        if (ds) {
            cu_row_load<TPR, VPT, V>(ds + r * n, n, t, vd);
            cu_row_each<TPR, VPT, V>(n, t, [&](int k, int64_t) { vx[k] += vd[k]; });
        }
        cu_row_store<TPR, VPT, V>(dx + r * n, n, t, vx);
        if (dxn) ln_row_store<TPR, VPT, V>(dxn + r * n, n, t, vx);
    }
    C *pw = part + 2 * (int64_t)blockIdx.x * n, *pb = pw + n;
    if constexpr (TPR == 32) { /* the warps' sums added in warp order; n <= 32 VPT <= 1024 */
        __shared__ C red[2 * 1024];
        int g = threadIdx.x / 32;
        for (int q = 0; q < LN_BWD_WARP_BLOCK / 32; q++) {
            if (g == q)
                cu_row_each<TPR, VPT, V>(n, t, [&](int k, int64_t j) {
                    red[j] = (q ? red[j] : (C)0) + aw[k];
                    red[n + j] = (q ? red[n + j] : (C)0) + ab[k];
                });
            __syncthreads();
        }
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) pw[j] = red[j], pb[j] = red[n + j];
    } else { /* one row group: its sums are the block's */
        cu_row_each<TPR, VPT, V>(n, t, [&](int k, int64_t j) { pw[j] = aw[k], pb[j] = ab[k]; });
    }
}

/* The fused kernel with TPR threads a row and VPT slots a thread, over as many
** blocks as fit on the device at once (never more than the rows need): each
** block's rows then cover many rows, and the partials stay few. vec: the rows
** of dy, x, ds, dx and dxn aligned for V = cu_vec<T>::N elements a vector. */
template <typename T, typename G, int TPR, int VPT>
static td_status layer_norm_backward_fused(cu_dev *d, bool vec, const G *dy, const T *x, const T *w, const T *mean,
                                           const T *rstd, const T *ds, T *dx, G *dxn, T *dw, T *db, int64_t R,
                                           int64_t n) {
    typedef typename cu_compute<T>::type C;
    const int NV = VPT % cu_vec<T>::N == 0 ? cu_vec<T>::N : 1, block = TPR == 32 ? LN_BWD_WARP_BLOCK : TPR;
    void (*kernel)(const G *, const T *, const T *, const T *, const T *, const T *, T *, G *, C *, int64_t, int64_t) =
        vec ? layer_norm_backward_fused_kernel<T, G, TPR, VPT, NV>
            : layer_norm_backward_fused_kernel<T, G, TPR, VPT, 1>;
    /* blocks an SM holds, asked once per kernel (the first device's answer: the kernels' registers decide it) */
    static std::atomic<int> per_sm[2];
    int bps = per_sm[vec].load(std::memory_order_relaxed);
    if (bps == 0) {
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, kernel, block, 0) != cudaSuccess || bps < 1) bps = 1;
        per_sm[vec].store(bps, std::memory_order_relaxed);
    }
    int64_t groups = block / TPR, need = (R + groups - 1) / groups, P = (int64_t)d->sm_count * bps;
    if (P > need) P = need;
    C *part;
    td_status st = cu_temp_alloc(d, sizeof(C) * (size_t)(2 * P * n), (void **)&part);
    if (st != TD_OK) return st;
    kernel<<<(unsigned)P, block, 0, d->stream>>>(dy, x, w, mean, rstd, ds, dx, dxn, part, R, n);
    st = CU_LAUNCHED("layer_norm_backward (fused)");
    if (st == TD_OK) st = layer_norm_backward_parts<T>(d, part, dw, db, n, P);
    cu_temp_free(d, part);
    return st;
}

/* The warp-a-row variants of the fused kernel (TRIDENT_CUDA_LN_BWD = 2..9, layer_norm_backward_variant): the
** same math and partials as layer_norm_backward_fused_kernel (thread t owns the same columns j in every row,
** 16-byte vectors, V elements each), with
**   PRE:  ds loaded with dy and x at the row's start (one memory latency a row, VPT more registers), else
**         after the row sums, as the fused kernel does;
**   SACC: the column sums aw, ab kept in the warp's slice of shared memory, acc[warp][j] and acc[warp][n + j]
**         (each lane reads and writes only its own columns: no barrier), not in 2 VPT registers;
**   CAP:  registers capped (__maxnreg__) at the row's (2 VPT, PRE 3 VPT) plus CAP, so that more warps fit
**         an SM (CAP 0: no cap). sm_90, VPT 24, f32 x, bf16 dy: 130 registers (PRE 155); SACC 108 (PRE 134);
**         SACC capped +56: 104 (PRE 128), +48: 96 (a few bytes spilled);
**   every access a 16-byte vector (w's too) walked per vector, not per element: lane t's nq vectors of a row
**         (i = q 32 + t < n / V) are known once, so no per-element bound is held across rows (the per-element
**         walk of the fused kernel costs ~40 registers at VPT 24); blockDim.x / 32 warps a block (4 or 8); the
**         grid sized by the launcher so that every warp visits the same number of rows, within one.
** The math, per row: xhat = (x - mean) rstd, g = dy w, s1 = mean_n(g), s2 = mean_n(g xhat),
**   dx = rstd (g - s1 - xhat s2) + ds,  dxn = dx rounded to G;  aw[j] += dy xhat,  ab[j] += dy.
** At the end each warp's sums sit in its slice (SACC: already there), and the block adds the slices in warp
** order into its partial, part[2 blk][j] (dw) and part[2 blk + 1][j] (db): the sums' order is fixed by the
** grid, so the bits are the same every run. */
#define LN_BWD_REGS(VPT, PRE, CAP)                                                                                     \
    ((CAP) && ((PRE) ? 3 : 2) * (VPT) + (CAP) < 255 ? ((PRE) ? 3 : 2) * (VPT) + (CAP) : 255)
template <typename T, typename G, int VPT, int V, bool PRE, bool SACC, int CAP>
__global__ void __launch_bounds__(256) __maxnreg__(LN_BWD_REGS(VPT, PRE, CAP))
    layer_norm_backward_warp_kernel(const G *dy, const T *x, const T *w, const T *mean, const T *rstd, const T *ds,
                                    T *dx, G *dxn, typename cu_compute<T>::type *part, int64_t R, int64_t n) {
    typedef typename cu_compute<T>::type C;
    typedef ln_pack<C, V> CP;
    typedef ln_pack<T, V> TP;
    typedef ln_pack<G, V> GP;
    const int NQ = VPT / V; /* vectors a lane */
    extern __shared__ __align__(32) unsigned char ln_bwd_smem[];
    C *acc = (C *)ln_bwd_smem + (threadIdx.x / 32) * 2 * n; /* this warp's slice: dw's n sums, then db's */
    int t = threadIdx.x % 32, nv = (int)(n / V), nq = 0;    /* nq: this lane's vectors in the row (the first nq) */
    while (nq < NQ && nq * 32 + t < nv) nq++;
    C aw[SACC ? 1 : VPT], ab[SACC ? 1 : VPT];
#pragma unroll
    for (int q = 0; q < NQ; q++) {
        if (q >= nq) break;
        if constexpr (SACC) {
            CP z;
#pragma unroll
            for (int e = 0; e < V; e++) z.v[e] = 0;
            ((CP *)acc)[q * 32 + t] = z, ((CP *)(acc + n))[q * 32 + t] = z;
        } else {
#pragma unroll
            for (int e = 0; e < V; e++) aw[q * V + e] = 0, ab[q * V + e] = 0;
        }
    }
    for (int64_t r = cu_row_first<32>(); r < R; r += cu_row_stride<32>()) {
        const GP *dyr = (const GP *)(dy + r * n) + t;
        const TP *xr = (const TP *)(x + r * n) + t, *dsr = ds ? (const TP *)(ds + r * n) + t : nullptr;
        C vd[VPT], vx[VPT], vs[VPT]; /* dy then g; x then xhat then dx; ds */
#pragma unroll
        for (int q = 0; q < NQ; q++) {
            if (q >= nq) break;
            GP a = dyr[q * 32];
            TP b = xr[q * 32];
#pragma unroll
            for (int e = 0; e < V; e++) vd[q * V + e] = cu_to<C>(a.v[e]), vx[q * V + e] = cu_to<C>(b.v[e]);
            if (PRE && dsr) {
                TP c = dsr[q * 32];
#pragma unroll
                for (int e = 0; e < V; e++) vs[q * V + e] = cu_to<C>(c.v[e]);
            }
        }
        C m = cu_to<C>(mean[r]), rs = cu_to<C>(rstd[r]), s1 = 0, s2 = 0;
        /* pass 1, with the column sums */
#pragma unroll
        for (int q = 0; q < NQ; q++) {
            if (q >= nq) break;
            int i = q * 32 + t;
            TP pw;
            if (w) pw = ((const TP *)w)[i];
            CP cw, cb;
            if constexpr (SACC) cw = ((CP *)acc)[i], cb = ((CP *)(acc + n))[i];
#pragma unroll
            for (int e = 0; e < V; e++) {
                int k = q * V + e;
                C xh = (vx[k] - m) * rs, g = vd[k] * (w ? cu_to<C>(pw.v[e]) : (C)1);
                if constexpr (SACC)
                    cw.v[e] += vd[k] * xh, cb.v[e] += vd[k];
                else
                    aw[k] += vd[k] * xh, ab[k] += vd[k];
                vd[k] = g, vx[k] = xh;
                s1 += g, s2 += g * xh;
            }
            if constexpr (SACC) ((CP *)acc)[i] = cw, ((CP *)(acc + n))[i] = cb;
        }
        s1 = cu_warp_sum(s1) / (C)n;
        s2 = cu_warp_sum(s2) / (C)n;
        /* pass 2 */
        TP *dxr = (TP *)(dx + r * n) + t;
        GP *dxnr = dxn ? (GP *)(dxn + r * n) + t : nullptr;
#pragma unroll
        for (int q = 0; q < NQ; q++) {
            if (q >= nq) break;
            TP c;
            if (!PRE && dsr) c = dsr[q * 32];
            TP o;
            GP on;
#pragma unroll
            for (int e = 0; e < V; e++) {
                int k = q * V + e;
                C v = rs * (vd[k] - s1 - vx[k] * s2);
                if (dsr) v += PRE ? vs[k] : cu_to<C>(c.v[e]);
                o.v[e] = cu_from<T>(v), on.v[e] = cu_from<G>(v);
            }
            dxr[q * 32] = o;
            if (dxnr) dxnr[q * 32] = on;
        }
    }
    if constexpr (!SACC) {
#pragma unroll
        for (int q = 0; q < NQ; q++) {
            if (q >= nq) break;
#pragma unroll
            for (int e = 0; e < V; e++)
                acc[(q * 32 + t) * V + e] = aw[q * V + e], acc[n + (q * 32 + t) * V + e] = ab[q * V + e];
        }
    }
    __syncthreads();
    const C *all = (const C *)ln_bwd_smem;
    C *pb = part + 2 * (int64_t)blockIdx.x * n;
    int warps = blockDim.x / 32;
    for (int64_t j = threadIdx.x; j < 2 * n; j += blockDim.x) {
        C a = all[j];
        for (int q = 1; q < warps; q++) a += all[q * 2 * n + j];
        pb[j] = a;
    }
}

/* The warp kernel's variants: (PRE, SACC, CAP, warps a block) of TRIDENT_CUDA_LN_BWD = 2 + index */
// clang-format off
#define LN_BWD_WARP_VARIANTS(X) \
    X(false, false, 0, 4)   /* 2 */ \
    X(true, false, 0, 4)    /* 3 */ \
    X(false, true, 0, 4)    /* 4 */ \
    X(true, true, 0, 4)     /* 5 */ \
    X(true, true, 56, 4)    /* 6 */ \
    X(true, true, 56, 8)    /* 7 */ \
    X(false, true, 48, 4)   /* 8 */ \
    X(false, true, 0, 8)    /* 9 */
// clang-format on

/* layer_norm_backward_warp_kernel<PRE, SACC, CAP> with W warps a block: blocks of as many warps as fit on the device
** at once would give some warps one row more than others (16384 rows over 1584 warps: 11 and 10), so the grid
** holds ceil(R / ceil(R / resident warps)) warps: each visits ceil(R / resident) rows or one fewer. Every row
** 16-byte aligned for V = cu_vec<T>::N (vec), VPT % V == 0. */
template <typename T, typename G, int VPT, bool PRE, bool SACC, int CAP>
static td_status layer_norm_backward_warp(cu_dev *d, int W, const G *dy, const T *x, const T *w, const T *mean,
                                          const T *rstd, const T *ds, T *dx, G *dxn, T *dw, T *db, int64_t R,
                                          int64_t n) {
    typedef typename cu_compute<T>::type C;
    void (*kernel)(const G *, const T *, const T *, const T *, const T *, const T *, T *, G *, C *, int64_t, int64_t) =
        layer_norm_backward_warp_kernel<T, G, VPT, cu_vec<T>::N, PRE, SACC, CAP>;
    /* blocks an SM holds at the tier's longest row, asked once per kernel and W (the first device's answer) */
    static std::atomic<int> per_sm[2];
    int wi = W == 8, bps = per_sm[wi].load(std::memory_order_relaxed);
    size_t most = (size_t)W * 2 * 32 * VPT * sizeof(C), smem = (size_t)W * 2 * (size_t)n * sizeof(C);
    /* past the 48 KiB a block may use unasked: asked on this device (the attribute is the device's) */
    if (most > 48 * 1024 &&
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)most) != cudaSuccess)
        return CU_LAUNCHED("layer_norm_backward (warp: shared memory)");
    if (bps == 0) {
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, kernel, 32 * W, most) != cudaSuccess || bps < 1)
            bps = 1;
        per_sm[wi].store(bps, std::memory_order_relaxed);
    }
    int64_t resident = (int64_t)d->sm_count * bps * W, rows = (R + resident - 1) / resident;
    int64_t warps = (R + rows - 1) / rows, P = (warps + W - 1) / W;
    C *part;
    td_status st = cu_temp_alloc(d, sizeof(C) * (size_t)(2 * P * n), (void **)&part);
    if (st != TD_OK) return st;
    kernel<<<(unsigned)P, 32 * W, smem, d->stream>>>(dy, x, w, mean, rstd, ds, dx, dxn, part, R, n);
    st = CU_LAUNCHED("layer_norm_backward (warp)");
    if (st == TD_OK) st = layer_norm_backward_parts<T>(d, part, dw, db, n, P);
    cu_temp_free(d, part);
    return st;
}

/* TRIDENT_CUDA_LN_BWD (read at each call, so that one process can compare them): 0 the two-pass path (the rows
** kernel, then the column passes reading dy and x again), 1 the fused kernel, 2..9 the warp kernel's variants
** (LN_BWD_WARP_VARIANTS); unset or anything else: LN_BWD_DEFAULT. */
#define LN_BWD_DEFAULT 1
static int layer_norm_backward_variant(void) {
    const char *e = getenv("TRIDENT_CUDA_LN_BWD");
    int v = e && e[0] >= '0' && e[0] <= '9' && !e[1] ? e[0] - '0' : LN_BWD_DEFAULT;
    return v;
}

/* The fused kernel's tiers, as CU_ROWS_LAUNCH's (plus 24 slots, n = 768 of
** GPT-2 small without 8 idle registers: 168 registers a thread for f32 on
** sm_90): a warp a row up to n = 1024, a block of 512 up to 8192; f64 (4 VPT
** doubles a thread, spilled past VPT 16 on sm_90) a warp a row up to 512, a
** block of 512 up to 4096. Variants 2..9 take the warp tiers of f32, f16 and
** bf16 x with aligned rows (w too) and VPT a multiple of V; the rest of those
** calls run the fused kernel. Longer rows, or variant 0, answer false: the
** rows kernel and the column passes run instead. */
template <typename T, typename G>
static bool layer_norm_backward_fused_tier(cu_dev *d, bool vec, const G *dy, const T *x, const T *w, const T *mean,
                                           const T *rstd, const T *ds, T *dx, G *dxn, T *dw, T *db, int64_t R,
                                           int64_t n, td_status *st) {
    int variant = layer_norm_backward_variant();
    if (variant == 0) return false;
    bool warp_ok = variant >= 2 && vec && sizeof(T) <= 4 && cu_rows_aligned(n, sizeof(T), w, NULL);
#define LN_BWD_WARP_(PRE, SACC, CAP, W)                                                                                \
    if (variant == v_++) {                                                                                             \
        *st = layer_norm_backward_warp<T, G, VPT_, PRE, SACC, CAP>(d, W, dy, x, w, mean, rstd, ds, dx, dxn, dw, db, R, \
                                                                   n);                                                 \
        return true;                                                                                                   \
    }
#define LN_BWD_TIER_(TPR, VPT)                                                                                         \
    if (n <= (TPR) * (VPT)) {                                                                                          \
        if constexpr ((TPR) == 32 && sizeof(T) <= 4 && (VPT) % cu_vec<T>::N == 0) {                                    \
            if (warp_ok) {                                                                                             \
                const int VPT_ = (VPT);                                                                                \
                int v_ = 2;                                                                                            \
                LN_BWD_WARP_VARIANTS(LN_BWD_WARP_)                                                                     \
            }                                                                                                          \
        }                                                                                                              \
        *st = layer_norm_backward_fused<T, G, TPR, VPT>(d, vec, dy, x, w, mean, rstd, ds, dx, dxn, dw, db, R, n);      \
        return true;                                                                                                   \
    }
    LN_BWD_TIER_(32, 4)
    LN_BWD_TIER_(32, 8)
    LN_BWD_TIER_(32, 16)
    if constexpr (sizeof(T) < 8) {
        LN_BWD_TIER_(32, 24)
        LN_BWD_TIER_(32, 32)
    }
    LN_BWD_TIER_(512, 4)
    LN_BWD_TIER_(512, 8)
    if constexpr (sizeof(T) < 8) LN_BWD_TIER_(512, 16)
#undef LN_BWD_TIER_
#undef LN_BWD_WARP_
    return false;
}

/* dw and db, pass 1: column j (x) of row chunk p (y), rows [p chunk, p chunk + chunk):
** part[2p][j] = sum dy xhat, part[2p+1][j] = sum dy (coalesced: a warp reads 32 adjacent columns of a row) */
template <typename T, typename G>
__global__ void __launch_bounds__(CU_BLOCK)
    layer_norm_backward_cols_kernel(const G *dy, const T *x, const T *mean, const T *rstd,
                                    typename cu_compute<T>::type *part, int64_t R, int64_t n, int64_t chunk) {
    typedef typename cu_compute<T>::type C;
    int64_t j = (int64_t)blockIdx.x * CU_BLOCK + threadIdx.x, p = blockIdx.y, r1 = (p + 1) * chunk;
    if (j >= n) return;
    C aw = 0, ab = 0;
    for (int64_t r = p * chunk; r < (r1 < R ? r1 : R); r++) {
        C g = cu_to<C>(dy[r * n + j]);
        aw += g * (cu_to<C>(x[r * n + j]) - cu_to<C>(mean[r])) * cu_to<C>(rstd[r]);
        ab += g;
    }
    part[2 * p * n + j] = aw;
    part[(2 * p + 1) * n + j] = ab;
}

/* LAYER_NORM_BACKWARD: in = (dy, x [R, n], w? [n], mean, rstd [R], ds? [R, n]),
** out = (dx [R, n], dw? [n], db? [n], dxn? [R, n]); dy and dxn of G, the rest of T. dw or db wanted:
** the fused kernel (one read of the rows) where the row fits its registers, else
** the rows kernel and the column partials over chunks of rows (a second read);
** then the partials' sum: deterministic, no atomics. Neither wanted: the rows
** kernel alone. */
template <typename T, typename G> static td_status layer_norm_backward_run(cu_dev *d, const td_op *op) {
    typedef typename cu_compute<T>::type A;
    const td_operand *x = &op->in[1];
    int64_t R = td_operand_numel(&op->in[3]), numel = td_operand_numel(x);
    if (R == 0 || numel == 0) return TD_OK; /* the core sends no empty rows */
    int64_t n = numel / R;
    const G *pdy = (const G *)cu_data(&op->in[0]);
    const T *px = (const T *)cu_data(x), *pw = (const T *)cu_data(&op->in[2]);
    const T *pm = (const T *)cu_data(&op->in[3]), *pr = (const T *)cu_data(&op->in[4]);
    const T *pds = (const T *)cu_data(&op->in[5]);
    T *pdx = (T *)cu_data(&op->out[0]), *pdw = (T *)cu_data(&op->out[1]), *pdb = (T *)cu_data(&op->out[2]);
    G *pdxn = (G *)cu_data(&op->out[3]);
    bool vec = cu_rows_aligned(n, sizeof(T), px, pdx) && ln_aligned(n, cu_vec<T>::N, sizeof(G), pdy) &&
               ln_aligned(n, cu_vec<T>::N, sizeof(G), pdxn);
    td_status st;
    if ((pdw || pdb) && layer_norm_backward_fused_tier<T, G>(d, vec && cu_rows_aligned(n, sizeof(T), pds, NULL), pdy,
                                                             px, pw, pm, pr, pds, pdx, pdxn, pdw, pdb, R, n, &st))
        return st;
    LN_ROWS_LAUNCH(d, R, n, vec, layer_norm_backward_kernel, (T, G), pdy, px, pw, pm, pr, pds, pdx, pdxn, R, n);
    st = CU_LAUNCHED("layer_norm_backward");
    if (st != TD_OK || (!pdw && !pdb)) return st;
    /* about 8 blocks an SM over (column blocks) x (row chunks of >= 16 rows) */
    int64_t bx = (n + CU_BLOCK - 1) / CU_BLOCK, want = (int64_t)d->sm_count * 8 / bx;
    int64_t P = want < 1 ? 1 : want > 1024 ? 1024 : want, max_p = (R + 15) / 16;
    if (P > max_p) P = max_p;
    int64_t chunk = (R + P - 1) / P;
    P = (R + chunk - 1) / chunk;
    A *part;
    if ((st = cu_temp_alloc(d, sizeof(A) * (size_t)(2 * P * n), (void **)&part)) != TD_OK) return st;
    layer_norm_backward_cols_kernel<T, G>
        <<<dim3((unsigned)bx, (unsigned)P), CU_BLOCK, 0, d->stream>>>(pdy, px, pm, pr, part, R, n, chunk);
    st = CU_LAUNCHED("layer_norm_backward (dw, db partials)");
    if (st == TD_OK) st = layer_norm_backward_parts<T>(d, part, pdw, pdb, n, P);
    cu_temp_free(d, part);
    return st;
}

/* dy of x's dtype, or (the op table's 'h') f16/bf16 for f32 x; dxn (if any) of dy's */
extern "C" td_status cu_op_LAYER_NORM_BACKWARD(cu_dev *d, const td_op *op) {
    td_dtype g = op->in[0].dtype, xt = op->in[1].dtype;
    if (op->out[3].buf && op->out[3].dtype != g)
        return td_error_set(TD_ERR_UNSUPPORTED, "cuda layer_norm_backward: dxn %s beside dy %s",
                            td_dtype_name(op->out[3].dtype), td_dtype_name(g));
    if (g == xt) CU_SWITCH_FLOAT(xt, { return layer_norm_backward_run<T, T>(d, op); });
    if (xt == TD_F32 && g == TD_BF16) return layer_norm_backward_run<float, __nv_bfloat16>(d, op);
    if (xt == TD_F32 && g == TD_F16) return layer_norm_backward_run<float, __half>(d, op);
    return td_error_set(TD_ERR_UNSUPPORTED, "cuda layer_norm_backward: x %s, dy %s", td_dtype_name(xt),
                        td_dtype_name(g));
}

/* group_norm: x, y [N, C, S] contiguous as R = N G rows of n = Cg S elements
** (row r = (n, g): channels g Cg .. g Cg + Cg - 1); w, b [C] or NULL; mean,
** rstd (R). The statistics of a row as layer_norm's (two passes, math in float
** for f32/f16/bf16, double for f64); element j of row r is channel
** (r % G) Cg + j / S:  y = (x - mean) * rstd * w[c] + b[c].
** Reference: torch.nn.functional.group_norm. */
template <typename T, int TPR, int VPT, int V>
__global__ void CU_ROWS_BOUNDS(TPR)
    group_norm_kernel(const T *x, const T *w, const T *b, T *y, T *mean, T *rstd, int64_t R, int64_t n, int64_t G,
                      int64_t Cg, int64_t S, double eps) {
    CU_ROW_SETUP(T, TPR);
    for (int64_t r = cu_row_first<TPR>(); r < R; r += cu_row_stride<TPR>()) {
        const T *xr = x + r * n;
        T *yr = y + r * n;
        int64_t c0 = (r % G) * Cg;
        C v[VPT > 0 ? VPT : 1];
        cu_row_load<TPR, VPT, V>(xr, n, t, v);
        C mu, rs;
        norm_row_stats<TPR, VPT, V>(xr, v, n, t, scratch, eps, &mu, &rs);
        norm_row_out<TPR, VPT, V>(xr, v, yr, n, t, mu, rs, w, b, [&](int64_t j) { return c0 + j / S; });
        if (t == 0) mean[r] = cu_from<T>(mu), rstd[r] = cu_from<T>(rs);
    }
}

/* GROUP_NORM: in = (x [N, C, *], w?, b?), out = (y, mean [N, G], rstd [N, G]) */
extern "C" td_status cu_op_GROUP_NORM(cu_dev *d, const td_op *op) {
    const td_operand *x = &op->in[0], *y = &op->out[0], *mean = &op->out[1], *rstd = &op->out[2];
    int64_t numel = td_operand_numel(x), R = td_operand_numel(mean);
    if (numel == 0) return TD_OK;
    int64_t N = x->shape[0], C = x->shape[1], G = R / N, n = numel / R, S = numel / (N * C);
    CU_SWITCH_FLOAT(x->dtype, {
        const T *px = (const T *)cu_data(x);
        T *py = (T *)cu_data(y);
        CU_ROWS_LAUNCH(d, R, n, cu_rows_aligned(n, sizeof(T), px, py), group_norm_kernel, px,
                       (const T *)cu_data(&op->in[1]), (const T *)cu_data(&op->in[2]), py, (T *)cu_data(mean),
                       (T *)cu_data(rstd), R, n, G, C / G, S, op->p.norm.eps);
        return CU_LAUNCHED("group_norm");
    });
    return td_error_set(TD_ERR_UNSUPPORTED, "cuda group_norm: dtype %s", td_dtype_name(x->dtype));
}
