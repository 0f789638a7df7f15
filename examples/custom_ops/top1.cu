#include <trident.cuh>
// Row-wise top-1: the largest value of each row and its index (the first on ties).
//   x is [rows, cols]; val is [rows] (scalar_t), idx is [rows] (int32)
// pass 1: each thread scans a strided part of the row
// pass 2: a butterfly of __shfl_xor_sync over the warp
// pass 3: warp winners meet in shared memory; thread 0 picks the best
__device__ inline bool better(float v, unsigned i, float bv, unsigned bi) { return v > bv || (v == bv && i < bi); }

extern "C" __global__ void top1(const scalar_t *x, scalar_t *val, int *idx, td_args a) {
    __shared__ float best_v[TD_BLOCK / 32];
    __shared__ unsigned best_i[TD_BLOCK / 32];
    unsigned row = td_row_id(), tid = threadIdx.x;
    const scalar_t *xr = x + (size_t)row * a.cols;
    float v = __int_as_float(0xFF800000); // -inf
    unsigned vi = 0xFFFFFFFFu;
    for (unsigned c = tid; c < a.cols; c += TD_BLOCK)
        if (better((float)xr[c], c, v, vi)) v = (float)xr[c], vi = c;
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xFFFFFFFFu, v, o);
        unsigned oi = __shfl_xor_sync(0xFFFFFFFFu, vi, o);
        if (better(ov, oi, v, vi)) v = ov, vi = oi;
    }
    if (tid % 32 == 0) best_v[tid / 32] = v, best_i[tid / 32] = vi;
    __syncthreads();
    if (tid == 0) {
        for (int k = 1; k < TD_BLOCK / 32; k++)
            if (better(best_v[k], best_i[k], v, vi)) v = best_v[k], vi = best_i[k];
        val[row] = (scalar_t)v;
        idx[row] = (int)vi;
    }
}
