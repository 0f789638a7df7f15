/*
** nn.MaxPool2d, nn.AvgPool2d and nn.AdaptiveAvgPool2d on x [N, C, H, W]
** (or unbatched [C, H, W]).
** Adaptive cell i spans [floor(i*H/oh), ceil((i+1)*H/oh)) (torch's
** start_index/end_index). When oh divides H (and ow divides W) that is a plain
** average pool with kernel = stride = H/oh; otherwise rows are averaged first,
** then columns, since the mean over a rectangle is the mean of its row means.
*/
#include <stdlib.h>

#include "nn_internal.h"

typedef struct pool_ctx {
    int kernel[2], stride[2], padding[2];
    bool count_include_pad;
    int64_t out[2]; /* adaptive */
} pool_ctx;

static const char *const layout4 = "[N, C, H, W] or [C, H, W]";

static td_tensor *max_forward(td_module *m, td_tensor *x) {
    pool_ctx *c = m->ctx;
    if (!td__check_ndim(x, 1u << 3 | 1u << 4, "MaxPool2d", layout4)) return NULL;
    bool unbatched = td_ndim(x) == 3;
    td_tensor *y = td_max_pool2d(unbatched ? td_unsqueeze(x, 0) : x, c->kernel, c->stride, c->padding, NULL);
    return unbatched ? td_squeeze(y, 0) : y;
}

static td_tensor *avg_forward(td_module *m, td_tensor *x) {
    pool_ctx *c = m->ctx;
    if (!td__check_ndim(x, 1u << 3 | 1u << 4, "AvgPool2d", layout4)) return NULL;
    bool unbatched = td_ndim(x) == 3;
    td_tensor *y =
        td_avg_pool2d(unbatched ? td_unsqueeze(x, 0) : x, c->kernel, c->stride, c->padding, c->count_include_pad);
    return unbatched ? td_squeeze(y, 0) : y;
}

/* Mean over the adaptive cells of dim (2 or 3 of a 4-d x). */
static td_tensor *adaptive_dim(td_tensor *x, int dim, int64_t out) {
    int64_t in = td_size(x, dim);
    td_tensor *cells[64];
    td_tensor **parts = out <= 64 ? cells : malloc((size_t)out * sizeof *parts);
    if (!parts) TD_FAIL_NULL(TD_ERR_OOM, "AdaptiveAvgPool2d: out of host memory");
    for (int64_t i = 0; i < out; i++) {
        int64_t start = i * in / out, end = ((i + 1) * in + out - 1) / out;
        parts[i] = td_mean(td_slice(x, dim, start, end, 1), 1, &dim, true);
    }
    td_tensor *y = td_cat((int)out, parts, dim);
    if (parts != cells) free(parts);
    return y;
}

static td_tensor *adaptive_forward(td_module *m, td_tensor *x) {
    pool_ctx *c = m->ctx;
    if (!td__check_ndim(x, 1u << 3 | 1u << 4, "AdaptiveAvgPool2d", layout4)) return NULL;
    bool unbatched = td_ndim(x) == 3;
    if (unbatched) x = td_unsqueeze(x, 0);
    int64_t h = td_size(x, 2), w = td_size(x, 3);
    if (h % c->out[0] == 0 && w % c->out[1] == 0) {
        int k[2] = {(int)(h / c->out[0]), (int)(w / c->out[1])}, p[2] = {0, 0};
        x = td_avg_pool2d(x, k, k, p, true);
    } else {
        x = adaptive_dim(adaptive_dim(x, 2, c->out[0]), 3, c->out[1]);
    }
    return unbatched ? td_squeeze(x, 0) : x;
}

static const td_module_i max_iface = {.type = "MaxPool2d", .forward = max_forward, .free_ctx = NULL};
static const td_module_i avg_iface = {.type = "AvgPool2d", .forward = avg_forward, .free_ctx = NULL};
static const td_module_i adaptive_iface = {.type = "AdaptiveAvgPool2d", .forward = adaptive_forward, .free_ctx = NULL};

static td_module *pool_new(const td_module_i *iface, const int kernel[2], const int stride[2], const int padding[2],
                           bool count_include_pad) {
    if (!kernel) TD_FAIL_NULL(TD_ERR_MISUSE, "%s: kernel is NULL", iface->type);
    for (int i = 0; i < 2; i++) {
        int s = stride ? stride[i] : kernel[i], p = padding ? padding[i] : 0;
        if (kernel[i] <= 0 || s <= 0 || p < 0 || 2 * p > kernel[i])
            TD_FAIL_NULL(TD_ERR_MISUSE, "%s: kernel %d and stride %d must be positive, padding %d in [0, kernel/2]",
                         iface->type, kernel[i], s, p);
    }
    td_module *m = td__module_alloc(iface, sizeof(pool_ctx));
    if (!m) return NULL;
    pool_ctx *c = m->ctx;
    for (int i = 0; i < 2; i++) {
        c->kernel[i] = kernel[i];
        c->stride[i] = stride ? stride[i] : kernel[i];
        c->padding[i] = padding ? padding[i] : 0;
    }
    c->count_include_pad = count_include_pad;
    return m;
}

td_module *td_max_pool2d_new(const int kernel[2], const int stride[2], const int padding[2]) {
    return pool_new(&max_iface, kernel, stride, padding, false);
}

td_module *td_avg_pool2d_new(const int kernel[2], const int stride[2], const int padding[2], bool count_include_pad) {
    return pool_new(&avg_iface, kernel, stride, padding, count_include_pad);
}

td_module *td_adaptive_avg_pool2d_new(int64_t out_h, int64_t out_w) {
    if (out_h <= 0 || out_w <= 0 || out_h > 1 << 20 || out_w > 1 << 20)
        TD_FAIL_NULL(TD_ERR_MISUSE, "AdaptiveAvgPool2d: output size %lldx%lld must be positive", (long long)out_h,
                     (long long)out_w);
    td_module *m = td__module_alloc(&adaptive_iface, sizeof(pool_ctx));
    if (!m) return NULL;
    pool_ctx *c = m->ctx;
    c->out[0] = out_h;
    c->out[1] = out_w;
    return m;
}
