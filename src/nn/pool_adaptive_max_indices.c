/*
** F.adaptive_max_pool2d(x, (oh, ow), return_indices=True) on x [N, C, H, W]
** (or unbatched [C, H, W]). Cell (i, j) spans rows [floor(i H / oh),
** ceil((i + 1) H / oh)) and the columns likewise (torch's start_index /
** end_index); its index is the flat position h * W + w in the input plane of
** its first maximum in row-major order (torch's CPU scan), and
**   y = x.flatten(2).gather(2, indices.flatten(2))
** so the gradient reaches exactly that element, as torch's.
** Per cell: argmax over the cell's flattened window gives k, and a host-made
** map of the cell's flat positions turns k into h * W + w (index_select);
** oh * ow small ops, no host round trip.
*/
#include <stdlib.h>

#include "nn_internal.h"

/* The [N, C, 1] flat input positions of cell (i, j)'s first maximum. */
static td_tensor *cell_index(td_tensor *x, int64_t i, int64_t j, int64_t oh, int64_t ow) {
    int64_t N = td_size(x, 0), C = td_size(x, 1), H = td_size(x, 2), W = td_size(x, 3);
    int64_t hs = i * H / oh, he = ((i + 1) * H + oh - 1) / oh, ws = j * W / ow, we = ((j + 1) * W + ow - 1) / ow;
    int64_t ch = he - hs, cw = we - ws, n = ch * cw;
    int64_t *map = malloc((size_t)n * sizeof *map);
    if (!map) TD_FAIL_NULL(TD_ERR_OOM, "adaptive_max_pool2d: out of host memory");
    for (int64_t k = 0; k < n; k++) map[k] = (hs + k / cw) * W + ws + k % cw;
    td_tensor *m = td_from_data(map, 1, &n, TD_I64, td_tensor_device(x));
    free(map);
    td_tensor *cell = td_flatten(td_slice(td_slice(x, 2, hs, he, 1), 3, ws, we, 1), 2, 3);
    int64_t NC = N * C;
    td_tensor *k = td_reshape(td_argmax(cell, -1, false), 1, &NC);
    return td_reshape(td_index_select(m, 0, k), 3, (int64_t[]){N, C, 1});
}

td_tensor *td_adaptive_max_pool2d_with_indices(td_tensor *x, int64_t out_h, int64_t out_w, td_tensor **indices) {
    const char *fn = "adaptive_max_pool2d";
    if (indices) *indices = NULL;
    if (!indices) TD_FAIL_NULL(TD_ERR_MISUSE, "%s: indices (OUT) is NULL", fn);
    if (!td__check_arg(x, fn, "input")) return NULL;
    if (out_h <= 0 || out_w <= 0 || out_h > 1 << 20 || out_w > 1 << 20)
        TD_FAIL_NULL(TD_ERR_MISUSE, "%s: output size %lldx%lld must be positive (at most 2^20)", fn, (long long)out_h,
                     (long long)out_w);
    if (!td__check_ndim(x, 1u << 3 | 1u << 4, "adaptive_max_pool2d", "[N, C, H, W] or [C, H, W]")) return NULL;
    bool unbatched = td_ndim(x) == 3;
    if (unbatched) x = td_unsqueeze(x, 0);
    int64_t N = td_size(x, 0), C = td_size(x, 1), cells = out_h * out_w;
    if (td_size(x, 2) == 0 || td_size(x, 3) == 0) TD_FAIL_NULL(TD_ERR_SHAPE, "%s: the input plane is empty", fn);
    td_tensor **parts = malloc((size_t)cells * sizeof *parts);
    if (!parts) TD_FAIL_NULL(TD_ERR_OOM, "%s: out of host memory", fn);
    for (int64_t i = 0; i < out_h; i++)
        for (int64_t j = 0; j < out_w; j++) parts[i * out_w + j] = cell_index(x, i, j, out_h, out_w);
    td_tensor *flat_idx = td_cat((int)cells, parts, 2); /* [N, C, oh*ow] */
    free(parts);
    td_tensor *y = td_gather(td_flatten(x, 2, 3), 2, flat_idx);
    int64_t shape[4] = {N, C, out_h, out_w};
    y = td_reshape(y, 4, shape);
    td_tensor *idx = td_reshape(flat_idx, 4, shape);
    if (!y || !idx) return NULL;
    if (unbatched) y = td_squeeze(y, 0), idx = td_squeeze(idx, 0);
    *indices = idx;
    return y;
}
