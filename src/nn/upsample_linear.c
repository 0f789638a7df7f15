/*
** F.interpolate(mode="linear" / "bilinear") and nn.Upsample over it, for
** x [N, C, L] (linear) or [N, C, H, W] (bilinear), align_corners either way.
** Bilinear weights are a product of one weight per dim, so it runs as linear
** interpolation along H, then along W. Along one dim, in -> o elements
** (torch's area_pixel_compute_scale / compute_source_index_and_lambda, in the
** input's float type: float32 for f32 inputs, double otherwise):
**   scale  align_corners: (in - 1) / (o - 1) (0 when o == 1)
**          else         : 1 / scale_factor when given, else in / o
**   src    align_corners: scale * i
**          else         : max(scale * (i + 0.5) - 0.5, 0)
**   i0 = floor(src), i1 = i0 + (i0 < in - 1), l1 = src - i0, l0 = 1 - l1
**   y[i] = l0 x[i0] + l1 x[i1]        (o == in: y = x)
** Composed from index_select (its gradient, index_add, sums the copies back)
** and broadcast multiplies by the host-made weights: two gathers per dim.
** Its nn.Upsample module is upsample.c's.
*/
#include <math.h>
#include <stdlib.h>

#include "nn_internal.h"

/* Source index of output i (see the top) in float T. */
#define SOURCE_INDEX(T, i, scale, align)                                                                               \
    ((align) ? (T)(scale) * (T)(i) : fmax((double)((T)(scale) * ((T)(i) + (T)0.5) - (T)0.5), 0.0))

/* x with dim d linearly resampled to o elements; sf the scale_factor (<= 0: none). */
static td_tensor *linear_dim(td_tensor *x, int d, int64_t o, double sf, bool align) {
    int64_t in = td_size(x, d);
    if (o == in) return x;
    bool f32 = td_tensor_dtype(x) != TD_F64;
    double scale = align    ? (o > 1 ? (double)(in - 1) / (double)(o - 1) : 0)
                   : sf > 0 ? 1.0 / sf
                            : (double)in / (double)o;
    if (f32) scale = (float)scale;
    int64_t *idx = malloc((size_t)o * 2 * sizeof *idx);
    double *lam = malloc((size_t)o * 2 * sizeof *lam);
    if (!idx || !lam) {
        free(idx), free(lam);
        TD_FAIL_NULL(TD_ERR_OOM, "interpolate: out of host memory");
    }
    for (int64_t i = 0; i < o; i++) {
        double src = f32 ? (double)(float)SOURCE_INDEX(float, i, scale, align) : SOURCE_INDEX(double, i, scale, align);
        int64_t i0 = (int64_t)src;
        double l1 = src - (double)i0;
        if (f32) l1 = (float)l1;
        l1 = l1 < 0 ? 0 : l1 > 1 ? 1 : l1;
        idx[i] = i0;
        idx[o + i] = i0 + (i0 < in - 1);
        lam[i] = 1 - l1;
        lam[o + i] = l1;
    }
    td_device dev = td_tensor_device(x);
    td_dtype dt = td_tensor_dtype(x);
    int64_t wshape[TD_MAX_DIMS];
    int nd = td_ndim(x);
    for (int k = 0; k < nd; k++) wshape[k] = k == d ? o : 1;
    td_tensor *i0 = td_from_data(idx, 1, &o, TD_I64, dev), *i1 = td_from_data(idx + o, 1, &o, TD_I64, dev);
    td_tensor *l0 = td_reshape(td_cast(td_from_data(lam, 1, &o, TD_F64, dev), dt), nd, wshape);
    td_tensor *l1 = td_reshape(td_cast(td_from_data(lam + o, 1, &o, TD_F64, dev), dt), nd, wshape);
    free(idx), free(lam);
    return td_add(td_mul(td_index_select(x, d, i0), l0), td_mul(td_index_select(x, d, i1), l1));
}

td_tensor *td_interpolate_linear(td_tensor *x, const int64_t *size, const double *scale_factor, bool align_corners) {
    const char *fn = "interpolate";
    if (!td__check_arg(x, fn, "input")) return NULL;
    int nd = td_ndim(x), n = nd - 2;
    if (n != 1 && n != 2)
        TD_FAIL_NULL(TD_ERR_SHAPE, "%s: linear takes [N, C, L], bilinear [N, C, H, W]; got %d dims", fn, nd);
    if (!td_dtype_is_float(td_tensor_dtype(x)))
        TD_FAIL_NULL(TD_ERR_DTYPE, "%s: linear needs a floating input, got %s", fn, td_dtype_name(td_tensor_dtype(x)));
    if (!size == !scale_factor) TD_FAIL_NULL(TD_ERR_MISUSE, "%s: give exactly one of size and scale_factor", fn);
    td_tensor *y = x;
    for (int i = 0; i < n; i++) {
        int64_t in = td_size(x, 2 + i), o;
        double sf = 0;
        if (size) {
            o = size[i];
            if (o < 1 || o > ((int64_t)1 << 40))
                TD_FAIL_NULL(TD_ERR_MISUSE, "%s: size %lld must be positive", fn, (long long)o);
        } else {
            sf = scale_factor[i];
            if (!(sf > 0) || isinf(sf) || !(floor((double)in * sf) >= 1) || (double)in * sf > 0x1p40)
                TD_FAIL_NULL(TD_ERR_MISUSE, "%s: scale_factor %g gives no output of size in [1, 2^40] from %lld", fn,
                             sf, (long long)in);
            o = (int64_t)floor((double)in * sf);
        }
        y = linear_dim(y, 2 + i, o, sf, align_corners);
    }
    return y;
}
