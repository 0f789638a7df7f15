/*
** DistributedSampler: torch.utils.data.DistributedSampler's rules over the
** DataLoader's permutation (dist.h).
**   total = world * ceil(n / world), or world * floor(n / world) with drop_last
**   order = perm(seed, epoch) (or 0..n-1), padded by repeating itself from its
**           head up to total, or cut to total
**   rank r: order[r], order[r + world], ..., order[r + (len - 1) * world]
*/
#include <stdlib.h>

#include "dist/dist_internal.h"

int64_t td_dist_sampler_len(int64_t n, int world, bool drop_last) {
    if (n < 0 || world < 1) return -1;
    return drop_last ? n / world : (n + world - 1) / world;
}

td_status td_dist_sampler_indices(int64_t n, int world, int rank, bool shuffle, uint64_t seed, int64_t epoch,
                                  bool drop_last, int64_t *idx) {
    if (n < 0 || world < 1 || rank < 0 || rank >= world || epoch < 0 || (!idx && n))
        return TD_ERR(TD_ERR_MISUSE, "dist_sampler_indices: n %lld, world %d, rank %d, epoch %lld%s", (long long)n,
                      world, rank, (long long)epoch, idx ? "" : ", idx NULL");
    int64_t len = td_dist_sampler_len(n, world, drop_last);
    if (!len) return TD_OK;
    int64_t *perm = malloc(sizeof *perm * (size_t)n);
    if (!perm) return TD_ERR(TD_ERR_OOM, "dist_sampler_indices: out of host memory for %lld indices", (long long)n);
    td__data_perm(perm, n, shuffle, seed, epoch);
    for (int64_t k = 0; k < len; k++) idx[k] = perm[(rank + k * world) % n]; /* past n: the padding from the head */
    free(perm);
    return TD_OK;
}
