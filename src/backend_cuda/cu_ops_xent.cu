/*
** CROSS_ENTROPY and its fused backward, the softmax family's cross-entropy in
** a file of its own (reference: src/backend_cpu/cpu_xent.c;
** PyTorch's F.cross_entropy with class-index targets, weight, ignore_index
** and label_smoothing).
**   x (logits) is (N, C) contiguous, or (C) with N = 1; target (N) int64;
**   w (C) or absent (all 1); eps = label_smoothing; W = sum_c w[c];
**   t = target[i]; lse = m + log sum_c exp(x[c] - m), m = max_c x[c];
**   logp[c] = x[c] - lse.
** Forward, per row (0 when t == ignore_index):
**   loss[i] = (1-eps) w[t] (lse - x[t]) + eps/C sum_c w[c] (lse - x[c])
**   reduction none: out = loss (N); sum: sum_i loss[i];
**   mean: sum_i loss[i] / sum_i w[t_i] over the non-ignored rows.
** Backward, p = softmax(x[i]), g = dloss[i] (none), dloss (sum) or
** dloss / sum_i w[t_i] (mean):
**   dx[i,c] = g (p[c] ((1-eps) w[t] + eps/C W) - eps/C w[c]) - g (1-eps) w[t] [c == t]
** A target outside [0, C) that is not ignore_index makes its row (and a
** reduced loss) NaN: the device cannot raise the CPU's TD_ERR_INDEX without a
** host wait. One row group per row (cu_reduce.cuh), the row in registers up
** to 16384 classes (8192 for f64; 16-byte loads when rows are aligned); longer rows get m
** and the sum of exponentials in one read (online softmax). The reductions
** over rows run in one block, in a fixed order. Math in float for
** f32/f16/bf16, in double for f64. With f16/bf16 logits the loss and dloss
** may be f32 (autocast's loss: the logits are not copied to f32 first). The
** forward writes each row's lse when asked (out[1], float; double for f64);
** given it (in[4]), the backward computes p = exp(x - lse) in one read.
*/
#include "cu_reduce.cuh"

/* The loss's dtype: T, or float (f32) for f16/bf16 logits. */
template <typename T> __device__ void xent_store(void *loss, bool f32, int64_t i, typename cu_compute<T>::type v) {
    if (f32)
        ((float *)loss)[i] = (float)v;
    else
        ((T *)loss)[i] = cu_from<T>(v);
}

/* loss rows: x (N, C), target (N), w (C) or NULL. part == NULL: loss[i] = the
** row's loss (float when loss_f32, else T); else part[2i] = loss, part[2i+1] =
** w[t] (0 ignored, NaN bad). */
template <typename T, int TPR, int VPT, int V>
__global__ void CU_ROWS_BOUNDS(TPR)
    xent_kernel(const T *x, const int64_t *target, const T *w, void *loss, bool loss_f32,
                typename cu_compute<T>::type *part, typename cu_compute<T>::type *lse_out, int64_t N, int64_t C,
                int64_t ignore_index, double eps) {
    typedef typename cu_compute<T>::type A;
    __shared__ A scratch[32];
    int t = cu_row_lane<TPR>();
    A ceps = (A)eps, smooth = (A)(eps / (double)C);
    for (int64_t r = cu_row_first<TPR>(); r < N; r += cu_row_stride<TPR>()) {
        const T *xr = x + r * C;
        int64_t tg = target[r];
        A l = 0, wt = 0, lse = 0;
        if (tg != ignore_index && (tg < 0 || tg >= C)) {
            l = wt = (A)NAN;
        } else if (tg != ignore_index) {
            A v[VPT > 0 ? VPT : 1], m = cu_lowest<A>(), s = 0, sm = 0;
            if (VPT > 0) {
                cu_row_load<TPR, VPT, V>(xr, C, t, v);
                cu_row_each<TPR, VPT, V>(C, t, [&](int k, int64_t) { m = cu_max_nan(m, v[k]); });
                m = cu_row_max<TPR>(m, scratch);
                cu_row_each<TPR, VPT, V>(C, t, [&](int k, int64_t) { s += exp(v[k] - m); });
                s = cu_row_sum<TPR>(s, scratch);
            } else {
                cu_row_max_sumexp<TPR>(xr, C, t, scratch, &m, &s);
            }
            lse = m + log(s);
            if (eps != 0) { /* the smoothing term: sum_c w[c] (lse - x[c]) */
                cu_row_each<TPR, VPT, V>(C, t, [&](int k, int64_t j) {
                    sm += (w ? cu_to<A>(w[j]) : (A)1) * (lse - (VPT > 0 ? v[k] : cu_to<A>(xr[j])));
                });
                sm = cu_row_sum<TPR>(sm, scratch);
            }
            wt = w ? cu_to<A>(w[tg]) : (A)1;
            l = ((A)1 - ceps) * wt * (lse - cu_to<A>(xr[tg])) + smooth * sm;
        }
        if (t != 0) continue;
        if (lse_out) lse_out[r] = lse;
        if (part)
            part[2 * r] = l, part[2 * r + 1] = wt;
        else
            xent_store<T>(loss, loss_f32, r, l);
    }
}

/* one block: out[0] = sum_i part[2i] (sum), divided by sum_i part[2i+1] (mean) */
template <typename T>
__global__ void __launch_bounds__(1024)
    xent_finish_kernel(const typename cu_compute<T>::type *part, void *out, bool out_f32, int64_t N, bool mean) {
    typedef typename cu_compute<T>::type A;
    __shared__ A scratch[32];
    A l = 0, wsum = 0;
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) l += part[2 * i], wsum += part[2 * i + 1];
    l = cu_block_sum(l, scratch);
    wsum = cu_block_sum(wsum, scratch);
    if (threadIdx.x == 0) xent_store<T>(out, out_f32, 0, mean ? l / wsum : l);
}

/* one block, for the backward: sc[0] = sum_i w[t_i] over non-ignored rows (NaN
** for a bad target), sc[1] = W = sum_c w[c] */
template <typename T>
__global__ void __launch_bounds__(1024)
    xent_sums_kernel(const int64_t *target, const T *w, typename cu_compute<T>::type *sc, int64_t N, int64_t C,
                     int64_t ignore_index) {
    typedef typename cu_compute<T>::type A;
    __shared__ A scratch[32];
    A den = 0, W = 0;
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
        int64_t tg = target[i];
        if (tg != ignore_index) den += tg < 0 || tg >= C ? (A)NAN : w ? cu_to<A>(w[tg]) : (A)1;
    }
    if (w)
        for (int64_t c = threadIdx.x; c < C; c += blockDim.x) W += cu_to<A>(w[c]);
    den = cu_block_sum(den, scratch);
    W = cu_block_sum(W, scratch);
    if (threadIdx.x == 0) sc[0] = den, sc[1] = w ? W : (A)C;
}

/* gradient rows: dloss (N) when per_sample else (1), float when dl_f32 else T; x, dx (N, C); target (N);
** w (C) or NULL; sc from xent_sums_kernel, or NULL when neither the mean's
** denominator nor W over w is needed (then W = C); lse (N), the forward's
** logsumexp of each row, or NULL: with it p = exp(x - lse) straight away (m =
** lse, s = 1), so a row past the registers is read once, not twice */
template <typename T, int TPR, int VPT, int V>
__global__ void CU_ROWS_BOUNDS(TPR)
    xent_backward_kernel(const void *dloss, bool dl_f32, const T *x, const int64_t *target, const T *w,
                         const typename cu_compute<T>::type *sc, const typename cu_compute<T>::type *lse, T *dx,
                         int64_t N, int64_t C, int64_t ignore_index, double eps, bool per_sample, bool mean) {
    typedef typename cu_compute<T>::type A;
    __shared__ A scratch[32];
    int t = cu_row_lane<TPR>();
    A smooth = (A)(eps / (double)C), W = sc ? sc[1] : (A)C, scale = mean ? (A)1 / sc[0] : (A)1;
    for (int64_t r = cu_row_first<TPR>(); r < N; r += cu_row_stride<TPR>()) {
        const T *xr = x + r * C;
        T *dr = dx + r * C;
        int64_t tg = target[r];
        if (tg == ignore_index || tg < 0 || tg >= C) {
            T fill = cu_from<T>(tg == ignore_index ? (A)0 : (A)NAN);
            cu_row_each<TPR, 0, 1>(C, t, [&](int, int64_t j) { dr[j] = fill; });
            continue;
        }
        A v[VPT > 0 ? VPT : 1], m = cu_lowest<A>(), s = 0;
        if (lse) { /* e[c] = p[c] = exp(x[c] - lse) */
            m = lse[r], s = 1;
            cu_row_load<TPR, VPT, V>(xr, C, t, v);
            if (VPT > 0) cu_row_each<TPR, VPT, V>(C, t, [&](int k, int64_t) { v[k] = exp(v[k] - m); });
        } else if (VPT > 0) { /* v[c] = e[c] = exp(x[c] - m) */
            cu_row_load<TPR, VPT, V>(xr, C, t, v);
            cu_row_each<TPR, VPT, V>(C, t, [&](int k, int64_t) { m = cu_max_nan(m, v[k]); });
            m = cu_row_max<TPR>(m, scratch);
            cu_row_each<TPR, VPT, V>(C, t, [&](int k, int64_t) {
                v[k] = exp(v[k] - m);
                s += v[k];
            });
            s = cu_row_sum<TPR>(s, scratch);
        } else {
            cu_row_max_sumexp<TPR>(xr, C, t, scratch, &m, &s);
        }
        int64_t li = per_sample ? r : 0;
        A g = (dl_f32 ? (A)((const float *)dloss)[li] : cu_to<A>(((const T *)dloss)[li])) * scale;
        A wt = ((A)1 - (A)eps) * (w ? cu_to<A>(w[tg]) : (A)1), pcoef = (wt + smooth * W) / s;
        /* p[c] = e[c] / s */
        cu_row_each<TPR, VPT, V>(C, t, [&](int k, int64_t j) {
            A e = VPT > 0 ? v[k] : exp(cu_to<A>(xr[j]) - m);
            A val = g * (e * pcoef - smooth * (w ? cu_to<A>(w[j]) : (A)1));
            if (j == tg) val -= g * wt;
            if (VPT > 0)
                v[k] = val;
            else
                dr[j] = cu_from<T>(val);
        });
        cu_row_store<TPR, VPT, V>(dr, C, t, v);
    }
}

/* logits [N, C] or [C] with C >= 1; target with N elements; the loss (out[0]
** forward, dloss in[0] backward) in the logits' dtype, or f32 for f16/bf16 */
static bool xent_ok(const td_op *op, int first, const td_operand *loss) {
    const td_operand *x = &op->in[first], *t = &op->in[first + 1];
    if (loss->dtype != x->dtype && !(loss->dtype == TD_F32 && (x->dtype == TD_F16 || x->dtype == TD_BF16)))
        return false;
    if (x->ndim != 1 && x->ndim != 2) return false;
    int64_t N = td_operand_numel(t), C = x->shape[x->ndim - 1];
    return (x->ndim == 2 ? x->shape[0] == N : N == 1) && C >= 1;
}

CU_SUPPORTS(CROSS_ENTROPY) { return xent_ok(op, 0, &op->out[0]); }
CU_SUPPORTS(CROSS_ENTROPY_BACKWARD) { return xent_ok(op, 1, &op->in[0]); }

extern "C" td_status cu_op_CROSS_ENTROPY(cu_dev *d, const td_op *op) {
    const td_operand *x = &op->in[0], *tg = &op->in[1], *w = &op->in[2], *out = &op->out[0];
    int64_t N = td_operand_numel(tg), C = x->shape[x->ndim - 1], ig = op->p.xent.ignore_index;
    int red = op->p.xent.reduction;
    double eps = op->p.xent.label_smoothing;
    if (N == 0 && red == TD_REDUCTION_NONE) return TD_OK;
    CU_SWITCH_FLOAT(x->dtype, {
        typedef typename cu_compute<T>::type A;
        const T *px = (const T *)cu_data(x), *pw = (const T *)cu_data(w);
        const int64_t *pt = (const int64_t *)cu_data(tg);
        bool vec = cu_rows_aligned(C, sizeof(T), px, NULL), out_f32 = out->dtype != x->dtype;
        A *plse = (A *)cu_data(&op->out[1]); /* optional */
        if (red == TD_REDUCTION_NONE) {
            CU_ROWS_LAUNCH(d, N, C, vec, xent_kernel, px, pt, pw, cu_data(out), out_f32, (A *)NULL, plse, N, C, ig,
                           eps);
            return CU_LAUNCHED("cross_entropy");
        }
        A *part;
        td_status st = cu_temp_alloc(d, (size_t)(2 * (N ? N : 1)) * sizeof(A), (void **)&part);
        if (st != TD_OK) return st;
        if (N > 0) {
            CU_ROWS_LAUNCH(d, N, C, vec, xent_kernel, px, pt, pw, (void *)NULL, false, part, plse, N, C, ig, eps);
            st = CU_LAUNCHED("cross_entropy");
        }
        if (st == TD_OK) {
            xent_finish_kernel<T><<<1, 1024, 0, d->stream>>>(part, cu_data(out), out_f32, N, red == TD_REDUCTION_MEAN);
            st = CU_LAUNCHED("cross_entropy (reduction)");
        }
        cu_temp_free(d, part);
        return st;
    });
    return td_error_set(TD_ERR_UNSUPPORTED, "cuda cross_entropy: dtype %s", td_dtype_name(x->dtype));
}

extern "C" td_status cu_op_CROSS_ENTROPY_BACKWARD(cu_dev *d, const td_op *op) {
    const td_operand *dl = &op->in[0], *x = &op->in[1], *tg = &op->in[2], *w = &op->in[3], *out = &op->out[0];
    int64_t N = td_operand_numel(tg), C = x->shape[x->ndim - 1], ig = op->p.xent.ignore_index;
    int red = op->p.xent.reduction;
    double eps = op->p.xent.label_smoothing;
    if (N == 0) return TD_OK;
    bool mean = red == TD_REDUCTION_MEAN, sums = mean || (eps != 0 && w->buf);
    CU_SWITCH_FLOAT(x->dtype, {
        typedef typename cu_compute<T>::type A;
        const T *pw = (const T *)cu_data(w);
        const int64_t *pt = (const int64_t *)cu_data(tg);
        A *sc = NULL;
        td_status st = TD_OK;
        if (sums) {
            st = cu_temp_alloc(d, 2 * sizeof(A), (void **)&sc);
            if (st != TD_OK) return st;
            xent_sums_kernel<T><<<1, 1024, 0, d->stream>>>(pt, pw, sc, N, C, ig);
            st = CU_LAUNCHED("cross_entropy_backward (sums)");
        }
        if (st == TD_OK) {
            const T *px = (const T *)cu_data(x);
            T *pdx = (T *)cu_data(out);
            CU_ROWS_LAUNCH(d, N, C, cu_rows_aligned(C, sizeof(T), px, pdx), xent_backward_kernel,
                           (const void *)cu_data(dl), dl->dtype != x->dtype, px, pt, pw, sc,
                           (const A *)cu_data(&op->in[4]), pdx, N, C, ig, eps, red == TD_REDUCTION_NONE, mean);
            st = CU_LAUNCHED("cross_entropy_backward");
        }
        if (sc) cu_temp_free(d, sc);
        return st;
    });
    return td_error_set(TD_ERR_UNSUPPORTED, "cuda cross_entropy_backward: dtype %s", td_dtype_name(x->dtype));
}
