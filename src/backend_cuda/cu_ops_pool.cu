/*
** MAX_POOL2D, AVG_POOL2D and their backward ops on CUDA (PyTorch's semantics,
** no dilation, floor mode), as src/backend_cpu/cpu_pool.c defines them:
**   x is (N, C, H, W), y and indices are (N, C, Ho, Wo), all contiguous; a plane is one (n, c);
**   window (oh, ow) covers rows [oh*sh - ph, oh*sh - ph + kh) and columns likewise, clipped to x.
**   max: y = max over the window (padding counts as -inf, NaN wins: the last NaN scanned);
**        indices = h*W + w of the max inside its plane (int64).
**   avg: y = sum over the window (row-major order) / divisor, where the divisor counts the window
**        clipped to the padded input (count_include_pad) or to the input itself.
** Forward kernels take one output element per thread; f16/bf16 compute in float, f64 in double.
** Backward passes:
**   max: the core passes no geometry (p.pool is zero): dx[plane, idx] += dy, a scatter. A plane
**        that fits in shared memory is summed there by one block (shared atomics), then written
**        whole, zeros included; larger planes add with global atomics into dx (f32/f64) or an
**        fp32 scratch (f16/bf16) that is then rounded into dx. Indices outside the plane are
**        skipped (the CPU reports TD_ERR_INDEX; the device cannot without a host sync).
**   avg: a gather, one dx element per thread: the sum of dy/divisor over the windows that
**        contain it, in (oh, ow) order as the CPU adds them. Deterministic.
*/
#include <math.h>

#include "cu_nn.cuh"

#define POOL_SHARED_BYTES (48 << 10) /* plane sums in shared memory up to this size */

typedef struct pool_geom {
    int64_t planes, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw;
    bool count_include_pad;
} pool_geom;

/* x and y are the (N,C,H,W) and (N,C,Ho,Wo) shapes. */
static pool_geom pool_geom_of(const td_op *op, const int64_t *x, const int64_t *y) {
    pool_geom q;
    q.planes = x[0] * x[1], q.H = x[2], q.W = x[3], q.Ho = y[2], q.Wo = y[3];
    q.kh = op->p.pool.kernel[0], q.kw = op->p.pool.kernel[1], q.sh = op->p.pool.stride[0], q.sw = op->p.pool.stride[1];
    q.ph = op->p.pool.padding[0], q.pw = op->p.pool.padding[1], q.count_include_pad = op->p.pool.count_include_pad;
    return q;
}

/* Window (oh, ow) clipped to the input, [h0, h1) x [w0, w1), and its avg divisor. */
typedef struct pool_window {
    int64_t h0, h1, w0, w1, divisor;
} pool_window;

__device__ __forceinline__ pool_window pool_window_at(const pool_geom &q, int64_t oh, int64_t ow) {
    int64_t h0 = oh * q.sh - q.ph, w0 = ow * q.sw - q.pw, h1 = h0 + q.kh, w1 = w0 + q.kw;
    /* the padded window, clipped to the padded input */
    int64_t hp = (h1 < q.H + q.ph ? h1 : q.H + q.ph) - h0, wp = (w1 < q.W + q.pw ? w1 : q.W + q.pw) - w0;
    pool_window win = {h0 < 0 ? 0 : h0, h1 < q.H ? h1 : q.H, w0 < 0 ? 0 : w0, w1 < q.W ? w1 : q.W, 0};
    win.divisor = q.count_include_pad ? hp * wp : (win.h1 - win.h0) * (win.w1 - win.w0);
    return win;
}

/* ---- kernels ---- */

/* x (planes, H, W) -> y, idx (planes, Ho, Wo): y = the window's max (NaN wins), idx = h*W + w of it;
** an all -inf window keeps its first element's index, as the CPU scan does. */
template <typename T> __global__ void pool_max(const T *x, T *y, int64_t *idx, pool_geom q) {
    typedef typename cu_compute<T>::type AC;
    NN_LOOP(i, q.planes * q.Ho * q.Wo) {
        int64_t ow = i % q.Wo, t = i / q.Wo, oh = t % q.Ho, pl = t / q.Ho;
        pool_window win = pool_window_at(q, oh, ow);
        const T *xp = x + pl * q.H * q.W;
        AC best = (AC)-INFINITY;
        int64_t bi = win.h0 * q.W + win.w0;
        for (int64_t h = win.h0; h < win.h1; h++)
            for (int64_t w = win.w0; w < win.w1; w++) {
                AC v = cu_to<AC>(xp[h * q.W + w]);
                if (v > best || v != v) best = v, bi = h * q.W + w; /* NaN wins, as in PyTorch */
            }
        y[i] = cu_from<T>(best), idx[i] = bi;
    }
}

/* x (planes, H, W) -> y (planes, Ho, Wo): y = sum over the window / divisor. */
template <typename T> __global__ void pool_avg(const T *x, T *y, pool_geom q) {
    typedef typename cu_compute<T>::type AC;
    NN_LOOP(i, q.planes * q.Ho * q.Wo) {
        int64_t ow = i % q.Wo, t = i / q.Wo, oh = t % q.Ho, pl = t / q.Ho;
        pool_window win = pool_window_at(q, oh, ow);
        const T *xp = x + pl * q.H * q.W;
        AC s = 0;
        for (int64_t h = win.h0; h < win.h1; h++)
            for (int64_t w = win.w0; w < win.w1; w++) s += cu_to<AC>(xp[h * q.W + w]);
        y[i] = cu_from<T>(s / (AC)win.divisor);
    }
}

/* dy (planes, Ho, Wo) -> dx (planes, H, W), the derivative of pool_avg:
** dx[h, w] = sum over the windows (oh, ow) that contain (h, w) of dy[oh, ow] / divisor(oh, ow).
** Window oh contains row h when oh*sh - ph <= h < oh*sh - ph + kh. */
template <typename T> __global__ void pool_avg_backward(const T *dy, T *dx, pool_geom q) {
    typedef typename cu_compute<T>::type AC;
    NN_LOOP(i, q.planes * q.H * q.W) {
        int64_t w = i % q.W, t = i / q.W, h = t % q.H, pl = t / q.H;
        int64_t ah = h + q.ph - q.kh + 1, aw = w + q.pw - q.kw + 1; /* the first window has oh*sh >= ah */
        int64_t oh0 = ah <= 0 ? 0 : (ah + q.sh - 1) / q.sh, oh1 = (h + q.ph) / q.sh + 1;
        int64_t ow0 = aw <= 0 ? 0 : (aw + q.sw - 1) / q.sw, ow1 = (w + q.pw) / q.sw + 1;
        if (oh1 > q.Ho) oh1 = q.Ho;
        if (ow1 > q.Wo) ow1 = q.Wo;
        const T *dp = dy + pl * q.Ho * q.Wo;
        AC s = 0;
        for (int64_t oh = oh0; oh < oh1; oh++)
            for (int64_t ow = ow0; ow < ow1; ow++)
                s += cu_to<AC>(dp[oh * q.Wo + ow]) / (AC)pool_window_at(q, oh, ow).divisor;
        dx[i] = cu_from<T>(s);
    }
}

/* dy, idx (planes, HoWo) -> dx (planes, HW): dx[pl, idx[pl, o]] += dy[pl, o], one block per plane with
** the plane's sums in shared memory (HW values of AC), written whole; indices outside [0, HW) are skipped. */
template <typename T>
__global__ void pool_max_backward_plane(const T *dy, const int64_t *idx, T *dx, int64_t planes, int64_t HW,
                                        int64_t HoWo) {
    typedef typename cu_compute<T>::type AC;
    extern __shared__ __align__(16) unsigned char pool_shared[];
    AC *acc = (AC *)pool_shared;
    for (int64_t pl = blockIdx.x; pl < planes; pl += gridDim.x) {
        for (int64_t j = threadIdx.x; j < HW; j += blockDim.x) acc[j] = 0;
        __syncthreads();
        for (int64_t o = threadIdx.x; o < HoWo; o += blockDim.x) {
            int64_t k = idx[pl * HoWo + o];
            if (k >= 0 && k < HW) atomicAdd(&acc[k], cu_to<AC>(dy[pl * HoWo + o]));
        }
        __syncthreads();
        for (int64_t j = threadIdx.x; j < HW; j += blockDim.x) dx[pl * HW + j] = cu_from<T>(acc[j]);
        __syncthreads(); /* acc is cleared for the next plane */
    }
}

/* The same scatter for planes too large for shared memory: acc[pl, idx[pl, o]] += dy[pl, o] with global
** atomics; acc (planes, HW) is zero on entry. */
template <typename T, typename AC>
__global__ void pool_max_backward_atomic(const T *dy, const int64_t *idx, AC *acc, int64_t HW, int64_t HoWo,
                                         int64_t total) {
    NN_LOOP(i, total) {
        int64_t k = idx[i];
        if (k >= 0 && k < HW) atomicAdd(&acc[i / HoWo * HW + k], cu_to<AC>(dy[i]));
    }
}

/* ---- launchers ---- */

static td_status pool_max_backward(cu_dev *d, const td_op *op) {
    const td_operand *dyv = &op->in[0], *idxv = &op->in[1], *dxv = &op->out[0];
    int64_t planes = dxv->shape[0] * dxv->shape[1], HW = dxv->shape[2] * dxv->shape[3],
            HoWo = dyv->shape[2] * dyv->shape[3], n = td_operand_numel(dxv);
    td_dtype dt = dxv->dtype;
    const int64_t *idx = (const int64_t *)cu_data(idxv);
    const void *dy = cu_data(dyv);
    void *dx = cu_data(dxv);
    if (n == 0) return TD_OK;
    size_t ws = dt == TD_F64 ? 8 : 4;
    if ((size_t)HW * ws <= POOL_SHARED_BYTES) {
        unsigned grid = (unsigned)(planes < (int64_t)d->sm_count * 32 ? planes : (int64_t)d->sm_count * 32);
        CU_SWITCH_FLOAT(dt, pool_max_backward_plane<T><<<grid, CU_BLOCK, (size_t)HW * ws, d->stream>>>(
                                (const T *)dy, idx, (T *)dx, planes, HW, HoWo));
        return CU_LAUNCHED("max_pool2d_backward");
    }
    bool wide = dt == TD_F16 || dt == TD_BF16; /* sum in an fp32 scratch, then round */
    void *acc = dx;
    if (wide) {
        td_status st = cu_temp_alloc(d, (size_t)n * sizeof(float), &acc);
        if (st != TD_OK) return st;
    }
    td_status st = cu_status(cudaMemsetAsync(acc, 0, (size_t)n * ws, d->stream), "max_pool2d_backward: zero");
    int64_t total = td_operand_numel(dyv);
    if (st == TD_OK && total > 0) {
        CU_SWITCH_FLOAT(dt, {
            typedef typename cu_compute<T>::type AC;
            pool_max_backward_atomic<T, AC><<<cu_grid(d, total, CU_BLOCK), CU_BLOCK, 0, d->stream>>>(
                (const T *)dy, idx, (AC *)acc, HW, HoWo, total);
        });
        st = CU_LAUNCHED("max_pool2d_backward");
    }
    if (st == TD_OK && wide) {
        if (dt == TD_F16)
            nn_round<__half><<<cu_grid(d, n, CU_BLOCK), CU_BLOCK, 0, d->stream>>>((const float *)acc, (__half *)dx, n);
        else
            nn_round<__nv_bfloat16>
                <<<cu_grid(d, n, CU_BLOCK), CU_BLOCK, 0, d->stream>>>((const float *)acc, (__nv_bfloat16 *)dx, n);
        st = CU_LAUNCHED("max_pool2d_backward: round");
    }
    if (wide) cu_temp_free(d, acc);
    return st;
}

/* stride and kernel >= 1 (the core checks them; the launchers divide by the strides) */
static bool pool_geometry_ok(const td_op *op) {
    return op->p.pool.stride[0] >= 1 && op->p.pool.stride[1] >= 1 && op->p.pool.kernel[0] >= 1 &&
           op->p.pool.kernel[1] >= 1;
}

/* in[0] and out[0] 4-d */
static bool pool_ok(const td_op *op) { return op->in[0].ndim == 4 && op->out[0].ndim == 4; }

/* in = x; out = (y, indices) */
CU_SUPPORTS(MAX_POOL2D) { return pool_ok(op) && pool_geometry_ok(op); }
extern "C" td_status cu_op_MAX_POOL2D(cu_dev *d, const td_op *op) {
    const td_operand *x = &op->in[0], *y = &op->out[0];
    pool_geom q = pool_geom_of(op, x->shape, y->shape);
    int64_t n = td_operand_numel(y);
    if (n == 0) return TD_OK;
    CU_SWITCH_FLOAT(x->dtype, pool_max<T><<<cu_grid(d, n, CU_BLOCK), CU_BLOCK, 0, d->stream>>>(
                                  (const T *)cu_data(x), (T *)cu_data(y), (int64_t *)cu_data(&op->out[1]), q));
    return CU_LAUNCHED("max_pool2d");
}

/* in = (dy, indices); out = dx; no geometry (the indices locate each gradient) */
CU_SUPPORTS(MAX_POOL2D_BACKWARD) { return pool_ok(op) && op->in[1].ndim == 4; }
extern "C" td_status cu_op_MAX_POOL2D_BACKWARD(cu_dev *d, const td_op *op) { return pool_max_backward(d, op); }

/* AVG_POOL2D: in = x, out = y; backward: in = dy, out = dx (the geometry from x and y either way) */
static td_status pool_avg_run(cu_dev *d, const td_op *op, bool backward) {
    const td_operand *in = &op->in[0], *out = &op->out[0];
    pool_geom q = backward ? pool_geom_of(op, out->shape, in->shape) : pool_geom_of(op, in->shape, out->shape);
    int64_t n = td_operand_numel(out);
    if (n == 0) return TD_OK;
    unsigned grid = cu_grid(d, n, CU_BLOCK);
    if (backward) {
        CU_SWITCH_FLOAT(in->dtype, pool_avg_backward<T>
                        <<<grid, CU_BLOCK, 0, d->stream>>>((const T *)cu_data(in), (T *)cu_data(out), q));
    } else {
        CU_SWITCH_FLOAT(in->dtype,
                        pool_avg<T><<<grid, CU_BLOCK, 0, d->stream>>>((const T *)cu_data(in), (T *)cu_data(out), q));
    }
    return CU_LAUNCHED(backward ? "avg_pool2d_backward" : "avg_pool2d");
}

CU_SUPPORTS(AVG_POOL2D) { return pool_ok(op) && pool_geometry_ok(op); }
extern "C" td_status cu_op_AVG_POOL2D(cu_dev *d, const td_op *op) { return pool_avg_run(d, op, false); }
CU_SUPPORTS(AVG_POOL2D_BACKWARD) { return pool_ok(op) && pool_geometry_ok(op); }
extern "C" td_status cu_op_AVG_POOL2D_BACKWARD(cu_dev *d, const td_op *op) { return pool_avg_run(d, op, true); }
