/*
** F.interpolate(mode="nearest") and nn.Upsample over it, for x [N, C, L]
** (1 spatial dim) or [N, C, H, W] (2), composed from index_select (whose
** gradient, index_add, sums the copies back):
**   out size   o = size, or floor(in * scale_factor)
**   scale      s = 1 / scale_factor when given, else in / o  (float32, as torch's
**              compute_scales_value)
**   source     src(i) = min(floor(i * s), in - 1)   (float32 product, torch's
**              nearest_idx; "nearest-exact" would add 0.5 to i, not done here)
** One index_select per spatial dim, the indices made on the host once per call.
** nn.Upsample here is either mode: nearest, or linear / bilinear (upsample_linear.c).
*/
#include <math.h>
#include <stdlib.h>

#include "nn_internal.h"

typedef struct upsample_ctx {
    int n;           /* spatial dims: 1 or 2 */
    bool linear;     /* linear / bilinear, else nearest */
    bool align;      /* align_corners (linear) */
    int64_t size[2]; /* > 0: the output size */
    double scale[2]; /* when size[0] is 0 */
} upsample_ctx;

/* x with dim d resampled from in to o elements with scale s (see the top). */
static td_tensor *nearest_dim(td_tensor *x, int d, int64_t o, float s) {
    int64_t in = td_size(x, d);
    int64_t *idx = malloc((size_t)o * sizeof *idx);
    if (!idx) TD_FAIL_NULL(TD_ERR_OOM, "interpolate: out of host memory");
    for (int64_t i = 0; i < o; i++) {
        int64_t src = (int64_t)floorf((float)i * s);
        idx[i] = src < in - 1 ? src : in - 1;
    }
    td_tensor *t = td_from_data(idx, 1, &o, TD_I64, td_tensor_device(x));
    free(idx);
    return td_index_select(x, d, t);
}

td_tensor *td_interpolate_nearest(td_tensor *x, const int64_t *size, const double *scale_factor) {
    const char *fn = "interpolate";
    if (!td__check_arg(x, fn, "input")) return NULL;
    int nd = td_ndim(x), n = nd - 2;
    if (n != 1 && n != 2)
        TD_FAIL_NULL(TD_ERR_SHAPE, "%s: nearest takes [N, C, L] or [N, C, H, W], got %d dims", fn, nd);
    if (!size == !scale_factor) TD_FAIL_NULL(TD_ERR_MISUSE, "%s: give exactly one of size and scale_factor", fn);
    td_tensor *y = x;
    for (int i = 0; i < n; i++) {
        int64_t in = td_size(x, 2 + i), o;
        float s;
        if (size) {
            o = size[i];
            if (o < 1 || o > ((int64_t)1 << 40))
                TD_FAIL_NULL(TD_ERR_MISUSE, "%s: size %lld must be positive", fn, (long long)o);
            s = (float)in / (float)o;
        } else {
            double f = scale_factor[i];
            if (!(f > 0) || isinf(f) || !(floor((double)in * f) >= 1) || (double)in * f > 0x1p40)
                TD_FAIL_NULL(TD_ERR_MISUSE, "%s: scale_factor %g gives no output of size in [1, 2^40] from %lld", fn, f,
                             (long long)in);
            o = (int64_t)floor((double)in * f);
            s = (float)(1.0 / f);
        }
        y = nearest_dim(y, 2 + i, o, s);
    }
    return y;
}

static td_tensor *upsample_forward(td_module *m, td_tensor *x) {
    upsample_ctx *c = m->ctx;
    if (td_ndim(x) >= 0 && td_ndim(x) != c->n + 2)
        TD_FAIL_NULL(TD_ERR_SHAPE, "Upsample: built for %d spatial dim%s, got input of %d dims", c->n,
                     c->n == 1 ? "" : "s", td_ndim(x));
    const int64_t *size = c->size[0] ? c->size : NULL;
    const double *scale = c->size[0] ? NULL : c->scale;
    return c->linear ? td_interpolate_linear(x, size, scale, c->align) : td_interpolate_nearest(x, size, scale);
}

static const td_module_i upsample_iface = {.type = "Upsample", .forward = upsample_forward, .free_ctx = NULL};

static td_module *upsample_new(int n, const int64_t *size, const double *scale_factor, bool linear, bool align) {
    if (n != 1 && n != 2)
        TD_FAIL_NULL(TD_ERR_MISUSE, "Upsample: %d spatial dims (%s)", n, linear ? "1: linear, 2: bilinear" : "1 or 2");
    if (!size == !scale_factor) TD_FAIL_NULL(TD_ERR_MISUSE, "Upsample: give exactly one of size and scale_factor");
    for (int i = 0; i < n; i++)
        if (size ? size[i] < 1 : !(scale_factor[i] > 0) || isinf(scale_factor[i]))
            TD_FAIL_NULL(TD_ERR_MISUSE, "Upsample: size or scale_factor %d must be positive", i);
    td_module *m = td__module_alloc(&upsample_iface, sizeof(upsample_ctx));
    if (!m) return NULL;
    upsample_ctx *c = m->ctx;
    c->n = n;
    c->linear = linear;
    c->align = align;
    for (int i = 0; i < n; i++) {
        if (size)
            c->size[i] = size[i];
        else
            c->scale[i] = scale_factor[i];
    }
    return m;
}

td_module *td_upsample_nearest_new(int n, const int64_t *size, const double *scale_factor) {
    return upsample_new(n, size, scale_factor, false, false);
}

td_module *td_upsample_linear_new(int n, const int64_t *size, const double *scale_factor, bool align_corners) {
    return upsample_new(n, size, scale_factor, true, align_corners);
}
