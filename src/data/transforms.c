/*
** Image transforms on [C,H,W] or [B,C,H,W] tensors, computed on the host:
** normalize, random crop with zero padding, random horizontal flip.
** Dimension letters: B samples, C channels, H rows, W columns.
** Random choices for sample b come from Philox(seed, offset + b) (data.h).
*/
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "trident/data.h"

/* The B, C, H, W of an image or a batch; false with TD_ERR_SHAPE otherwise. */
static bool image_dims(td_tensor *x, const char *op, int64_t d[4]) {
    int nd = td_ndim(x);
    if (nd != 3 && nd != 4) {
        char s[128];
        TD_ERR(TD_ERR_SHAPE, "%s: x must be [C,H,W] or [B,C,H,W], got %s", op,
               td__shape_str(nd, td_shape(x), s, sizeof s));
        return false;
    }
    d[0] = nd == 4 ? td_size(x, 0) : 1;
    for (int i = 1; i < 4; i++) d[i] = td_size(x, nd - 4 + i);
    return true;
}

/* x's elements as row-major host bytes of its own dtype (malloc'd). */
static unsigned char *host_copy(td_tensor *x, size_t *nbytes) {
    *nbytes = (size_t)td_numel(x) * td_dtype_size(td_tensor_dtype(x));
    unsigned char *b = malloc(*nbytes ? *nbytes : 1);
    if (!b) return TD_ERR(TD_ERR_OOM, "transform: out of host memory"), NULL;
    if (td_copy_to_host(x, b, *nbytes, td_tensor_dtype(x)) != TD_OK) return free(b), NULL;
    return b;
}

td_tensor *td_transform_normalize(td_tensor *x, int n_channels, const double *mean, const double *std) {
    TD_CHECK_ARG(x, "normalize");
    int64_t d[4];
    if (!image_dims(x, "normalize", d)) return NULL;
    td_dtype dt = td_tensor_dtype(x);
    if (!td_dtype_is_float(dt)) TD_FAIL_NULL(TD_ERR_DTYPE, "normalize: x must be floating, got %s", td_dtype_name(dt));
    if (n_channels != d[1])
        TD_FAIL_NULL(TD_ERR_SHAPE, "normalize: %d %s for %lld channel%s", n_channels,
                     n_channels == 1 ? "mean/std" : "means/stds", (long long)d[1], d[1] == 1 ? "" : "s");
    if (!mean || !std) TD_FAIL_NULL(TD_ERR_MISUSE, "normalize: mean or std is NULL");
    for (int c = 0; c < n_channels; c++)
        if (std[c] == 0) TD_FAIL_NULL(TD_ERR_MISUSE, "normalize: std[%d] is 0", c);
    int64_t n = td_numel(x), plane = d[2] * d[3];
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!v) TD_FAIL_NULL(TD_ERR_OOM, "normalize: out of host memory");
    if (td_copy_to_host(x, v, sizeof(double) * (size_t)n, TD_F64) != TD_OK) return free(v), NULL;
    /* v[b,c,h,w] = (v[b,c,h,w] - mean[c]) / std[c] */
    for (int64_t i = 0; i < n; i++) {
        int64_t c = (i / plane) % d[1];
        v[i] = (v[i] - mean[c]) / std[c];
    }
    td_tensor *t = td_keep(td_from_data(v, td_ndim(x), td_shape(x), TD_F64, td_tensor_device(x)));
    free(v);
    td_tensor *out = td_cast(t, dt);
    td_release(t);
    return out;
}

td_tensor *td_transform_random_crop(td_tensor *x, int64_t out_h, int64_t out_w, int64_t pad, uint64_t seed,
                                    uint64_t offset) {
    TD_CHECK_ARG(x, "random_crop");
    int64_t d[4];
    if (!image_dims(x, "random_crop", d)) return NULL;
    int64_t B = d[0], C = d[1], H = d[2], W = d[3];
    if (pad < 0 || out_h < 1 || out_w < 1 || out_h > H + 2 * pad || out_w > W + 2 * pad)
        TD_FAIL_NULL(TD_ERR_SHAPE, "random_crop: crop %lldx%lld with padding %lld does not fit a %lldx%lld image",
                     (long long)out_h, (long long)out_w, (long long)pad, (long long)H, (long long)W);
    size_t nbytes, es = td_dtype_size(td_tensor_dtype(x));
    unsigned char *src = host_copy(x, &nbytes);
    if (!src) return NULL;
    size_t out_bytes = (size_t)(B * C * out_h * out_w) * es;
    unsigned char *dst = calloc(out_bytes ? out_bytes : 1, 1); /* zero bytes: the padding value */
    if (!dst) return free(src), TD_ERR(TD_ERR_OOM, "random_crop: out of host memory"), NULL;
    /* out[b,c,r,q] = padded[b,c,top+r,left+q], padded[.., i, j] = x[.., i-pad, j-pad] or 0 */
    for (int64_t b = 0; b < B; b++) {
        uint32_t w[4];
        td_philox4x32(seed, offset + (uint64_t)b, w);
        int64_t top = (int64_t)(w[0] % (uint64_t)(H + 2 * pad - out_h + 1));
        int64_t left = (int64_t)(w[1] % (uint64_t)(W + 2 * pad - out_w + 1));
        int64_t q0 = pad - left > 0 ? pad - left : 0;                 /* first output column inside x */
        int64_t q1 = W + pad - left < out_w ? W + pad - left : out_w; /* one past the last */
        for (int64_t c = 0; c < C; c++)
            for (int64_t r = 0; r < out_h; r++) {
                int64_t i = top + r - pad;
                if (i < 0 || i >= H || q1 <= q0) continue;
                const unsigned char *s = src + (size_t)((((b * C + c) * H + i) * W) + q0 + left - pad) * es;
                unsigned char *o = dst + (size_t)((((b * C + c) * out_h + r) * out_w) + q0) * es;
                memcpy(o, s, (size_t)(q1 - q0) * es);
            }
    }
    int64_t shape[4];
    memcpy(shape, td_shape(x), sizeof(int64_t) * (size_t)td_ndim(x));
    shape[td_ndim(x) - 2] = out_h;
    shape[td_ndim(x) - 1] = out_w;
    td_tensor *out = td_from_data(dst, td_ndim(x), shape, td_tensor_dtype(x), td_tensor_device(x));
    free(src);
    free(dst);
    return out;
}

td_tensor *td_transform_hflip(td_tensor *x, double p, uint64_t seed, uint64_t offset) {
    TD_CHECK_ARG(x, "hflip");
    int64_t d[4];
    if (!image_dims(x, "hflip", d)) return NULL;
    if (!(p >= 0 && p <= 1)) TD_FAIL_NULL(TD_ERR_MISUSE, "hflip: p = %g outside [0, 1]", p);
    size_t nbytes, es = td_dtype_size(td_tensor_dtype(x));
    unsigned char *v = host_copy(x, &nbytes);
    if (!v) return NULL;
    int64_t rows = d[1] * d[2], W = d[3];
    /* flipped sample: x[b,c,h,w] <- x[b,c,h,W-1-w] */
    for (int64_t b = 0; b < d[0]; b++) {
        uint32_t w[4];
        td_philox4x32(seed, offset + (uint64_t)b, w);
        if (!(td_philox_uniform(w[2]) < p)) continue;
        for (int64_t r = 0; r < rows; r++) {
            unsigned char *row = v + (size_t)((b * rows + r) * W) * es, tmp[8];
            for (int64_t j = 0; j < W / 2; j++) {
                memcpy(tmp, row + (size_t)j * es, es);
                memcpy(row + (size_t)j * es, row + (size_t)(W - 1 - j) * es, es);
                memcpy(row + (size_t)(W - 1 - j) * es, tmp, es);
            }
        }
    }
    td_tensor *out = td_from_data(v, td_ndim(x), td_shape(x), td_tensor_dtype(x), td_tensor_device(x));
    free(v);
    return out;
}
