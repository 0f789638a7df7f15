#include <trident.cuh>
// RMSNorm over the last dim: one block per row.
//   x, y are [rows, cols], w is [cols], eps = a.p[0]
//   y[r, c] = x[r, c] * w[c] / sqrt(mean_c(x[r, c]^2) + eps)
// pass 1: strided sum of squares per thread; warp shuffle sum (td_warp_sum)
// pass 2: warp sums meet in shared memory; pass 3: scale the row
extern "C" __global__ void rmsnorm(const scalar_t *x, const scalar_t *w, scalar_t *y, td_args a) {
    __shared__ float partial[TD_BLOCK / 32];
    unsigned row = td_row_id(), tid = threadIdx.x;
    const scalar_t *xr = x + (size_t)row * a.cols;
    float s = 0.0f;
    for (unsigned c = tid; c < a.cols; c += TD_BLOCK) s += (float)xr[c] * (float)xr[c];
    s = td_warp_sum(s);
    if (tid % 32 == 0) partial[tid / 32] = s;
    __syncthreads();
    float total = 0.0f;
    for (int k = 0; k < TD_BLOCK / 32; k++) total += partial[k];
    float r = rsqrtf(total / (float)a.cols + a.p[0]);
    for (unsigned c = tid; c < a.cols; c += TD_BLOCK) y[(size_t)row * a.cols + c] = (scalar_t)((float)xr[c] * r * (float)w[c]);
}
