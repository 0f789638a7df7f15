/*
** nn.AdaptiveMaxPool2d on x [N, C, H, W] (or unbatched [C, H, W]).
** Cell (i, j) spans rows [floor(i H / oh), ceil((i + 1) H / oh)) and the
** columns likewise (torch's start_index/end_index); y = its max.
** When oh divides H and ow divides W that is max_pool2d with kernel = stride
** = (H/oh, W/ow) (the fused op, whose gradient goes to the first maximum, as
** torch's). Otherwise the max over a rectangle is the max over its rows of
** the max over its columns: amax over each row cell, then each column cell
** (the gradient reaches the maximum; on exact ties amax shares it between
** the tied elements where torch gives it to one). return_indices is not
** offered.
*/
#include <stdlib.h>

#include "nn_internal.h"

typedef struct amax_ctx {
    int64_t out[2];
} amax_ctx;

/* Max over the adaptive cells of dim (2 or 3 of a 4-d x). */
static td_tensor *cells_max(td_tensor *x, int dim, int64_t out) {
    int64_t in = td_size(x, dim);
    td_tensor **parts = malloc((size_t)out * sizeof *parts);
    if (!parts) TD_FAIL_NULL(TD_ERR_OOM, "AdaptiveMaxPool2d: out of host memory");
    for (int64_t i = 0; i < out; i++) {
        int64_t start = i * in / out, end = ((i + 1) * in + out - 1) / out;
        parts[i] = td_amax(td_slice(x, dim, start, end, 1), 1, &dim, true);
    }
    td_tensor *y = td_cat((int)out, parts, dim);
    free(parts);
    return y;
}

static td_tensor *amax_forward(td_module *m, td_tensor *x) {
    amax_ctx *c = m->ctx;
    if (!td__check_ndim(x, 1u << 3 | 1u << 4, "AdaptiveMaxPool2d", "[N, C, H, W] or [C, H, W]")) return NULL;
    bool unbatched = td_ndim(x) == 3;
    if (unbatched) x = td_unsqueeze(x, 0);
    int64_t h = td_size(x, 2), w = td_size(x, 3);
    if (h % c->out[0] == 0 && w % c->out[1] == 0) {
        int k[2] = {(int)(h / c->out[0]), (int)(w / c->out[1])}, p[2] = {0, 0};
        x = td_max_pool2d(x, k, k, p, NULL);
    } else {
        x = cells_max(cells_max(x, 2, c->out[0]), 3, c->out[1]);
    }
    return unbatched ? td_squeeze(x, 0) : x;
}

static const td_module_i amax_iface = {.type = "AdaptiveMaxPool2d", .forward = amax_forward, .free_ctx = NULL};

td_module *td_adaptive_max_pool2d_new(int64_t out_h, int64_t out_w) {
    if (out_h <= 0 || out_w <= 0 || out_h > 1 << 20 || out_w > 1 << 20)
        TD_FAIL_NULL(TD_ERR_MISUSE, "AdaptiveMaxPool2d: output size %lldx%lld must be positive (at most 2^20)",
                     (long long)out_h, (long long)out_w);
    td_module *m = td__module_alloc(&amax_iface, sizeof(amax_ctx));
    if (!m) return NULL;
    amax_ctx *c = m->ctx;
    c->out[0] = out_h;
    c->out[1] = out_w;
    return m;
}
