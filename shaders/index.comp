#version 450
#extension GL_GOOGLE_include_directive : require
// Indexing ops that move elements without arithmetic, by element size ES
// (1, 2, 4, 8 bytes; -DES) so every dtype shares them. Indices are int64 or
// int32 (idx64), read as uint words (no shaderInt64 needed). An index out of
// range writes zeros (errors cannot be raised from the device).
//   OP 0 index_select / embedding: out[p, k, q] = x[p, idx[k], q]
//        with p < pre, k < K, q < post, x's dim of size xdim
//   OP 1 gather: out[c] = x[c with c[dim] = idx[c]]; out, idx contiguous of
//        shape[ndim]; x strides xstride[]
//   OP 2 one_hot (ES 8): out[t, c] = idx[t] == c, int64, c < post
// Bindings: 0 x (dummy for one_hot), 1 idx, 2 out.
// C mirror: vk_pc_index (vk_ops_index.c). Variants index_<ES>.
#include "types.glsl"

layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint OP = 0;
layout(local_size_x_id = 0) in;

layout(push_constant) uniform PC {
    uint n, pre, K, post;
    uint xdim, dim, ndim, idx64;
    uint x_off, i_off, o_off, pad;
    uint shape[8];
    uint xstride[8];
} pc;

#if ES == 1
#define ET uint8_t
#define ZERO uint8_t(0)
#elif ES == 2
#define ET uint16_t
#define ZERO uint16_t(0)
#elif ES == 4
#define ET uint
#define ZERO 0u
#else
#define ET uvec2
#define ZERO uvec2(0u)
#endif

layout(binding = 0) readonly buffer BX { ET x[]; };
layout(binding = 1) readonly buffer BI { uint iw[]; };
layout(binding = 2) writeonly buffer BO { ET o[]; };

// index k (from the idx binding's first element); -1 when it does not fit in int32
int index_at(uint k) {
    k += pc.i_off;
    if (pc.idx64 == 0u) return int(iw[k]);
    return IDX_OK(iw, k) ? IDX_LO(iw, k) : -1;
}

void main() {
    for (uint e = gl_GlobalInvocationID.x; e < pc.n; e += gl_NumWorkGroups.x * WG) {
        if (OP == 0u) {
            uint q = e % pc.post, k = (e / pc.post) % pc.K, p = e / (pc.post * pc.K);
            int i = index_at(k);
            if (i < 0 || uint(i) >= pc.xdim) o[pc.o_off + e] = ZERO;
            else o[pc.o_off + e] = x[pc.x_off + (p * pc.xdim + uint(i)) * pc.post + q];
        } else if (OP == 1u) {
            uint r = e, off = pc.x_off;
            int i = index_at(e);
            bool ok = true;
            for (int d = int(pc.ndim) - 1; d >= 0; d--) {
                uint c = r % pc.shape[d];
                r /= pc.shape[d];
                if (uint(d) == pc.dim) {
                    ok = i >= 0 && uint(i) < pc.xdim;
                    c = uint(max(i, 0));
                }
                off += c * pc.xstride[d];
            }
            if (ok) o[pc.o_off + e] = x[off];
            else o[pc.o_off + e] = ZERO;
        } else {
#if ES == 8
            uint c = e % pc.post;
            o[pc.o_off + e] = uvec2(index_at(e / pc.post) == int(c) ? 1u : 0u, 0u);
#endif
        }
    }
}
