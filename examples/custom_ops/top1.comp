#version 450
#include <trident.glsl>
// Row-wise top-1: the largest value of each row and its index (the first on ties).
//   x is [rows, cols]; val is [rows] (float), idx is [rows] (int32)
// pass 1: each invocation scans a strided part of the row
// pass 2: a butterfly of subgroupShuffleXor over the subgroup (any subgroup size)
// pass 3: subgroup winners meet in shared memory; invocation 0 picks the best
layout(local_size_x = TD_BLOCK) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer V { float val[]; };
layout(std430, binding = 2) writeonly buffer I { int idx[]; };
shared float best_v[TD_BLOCK];
shared uint best_i[TD_BLOCK];

bool better(float v, uint i, float bv, uint bi) { return v > bv || (v == bv && i < bi); }

void main() {
    uint row = td_row_id(), base = row * td.cols, tid = gl_LocalInvocationID.x;
    float v = -1.0 / 0.0;
    uint vi = 0xFFFFFFFFu;
    for (uint c = tid; c < td.cols; c += TD_BLOCK)
        if (better(x[base + c], c, v, vi)) v = x[base + c], vi = c;
    for (uint o = gl_SubgroupSize / 2; o > 0; o /= 2) {
        float ov = subgroupShuffleXor(v, o);
        uint oi = subgroupShuffleXor(vi, o);
        if (better(ov, oi, v, vi)) v = ov, vi = oi;
    }
    if (subgroupElect()) best_v[gl_SubgroupID] = v, best_i[gl_SubgroupID] = vi;
    barrier();
    if (tid == 0) {
        for (uint k = 1; k < gl_NumSubgroups; k++)
            if (better(best_v[k], best_i[k], v, vi)) v = best_v[k], vi = best_i[k];
        val[row] = v;
        idx[row] = int(vi);
    }
}
