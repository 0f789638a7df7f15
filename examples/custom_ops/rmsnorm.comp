#version 450
#include <trident.glsl>
// RMSNorm over the last dim: one workgroup per row.
//   x, y are [rows, cols], w is [cols], eps = td.p[0]
//   y[r, c] = x[r, c] * w[c] / sqrt(mean_c(x[r, c]^2) + eps)
// pass 1: each invocation sums squares of a strided part of the row; subgroupAdd
// pass 2: subgroup sums meet in shared memory; pass 3: scale the row
layout(local_size_x = TD_BLOCK) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };
shared float partial[TD_BLOCK];

void main() {
    uint row = td_row_id(), base = row * td.cols, tid = gl_LocalInvocationID.x;
    float s = 0.0;
    for (uint c = tid; c < td.cols; c += TD_BLOCK) s += x[base + c] * x[base + c];
    s = subgroupAdd(s);
    if (subgroupElect()) partial[gl_SubgroupID] = s;
    barrier();
    float total = 0.0;
    for (uint k = 0; k < gl_NumSubgroups; k++) total += partial[k];
    float r = inversesqrt(total / float(td.cols) + td.p[0]);
    for (uint c = tid; c < td.cols; c += TD_BLOCK) y[base + c] = x[base + c] * r * w[c];
}
