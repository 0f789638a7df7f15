// variants: num
#version 450
#extension GL_GOOGLE_include_directive : require
// Scatter-style sums, computed by gathering so they are deterministic:
//   OP 0 embedding_backward: dw[v, d] = sum over tokens t with idx[t] == v (v != padding_idx)
//        of dy[t, d]; dy [T, D], idx [T], dw [V, D]
//   OP 1 scatter_add: out[c] = self[c] + sum over i < ishape[dim] of src[c'] where
//        c' = c with c[dim] = i, taken when idx[c'] == c[dim] and c' lies inside idx's shape;
//        self/out contiguous of shape[], idx/src contiguous of ishape[]
// One invocation per output element, looping over the contributors.
// Bindings: 0 self (scatter) or dummy, 1 idx (int64/int32 as uint words), 2 src or dy, 3 out.
// C mirror: vk_pc_scatter (vk_ops_index.c). Variants scatter_<num dt>.
#include "types.glsl"

layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint OP = 0;
layout(local_size_x_id = 0) in;

layout(push_constant) uniform PC {
    uint n, ndim, dim, idx64;
    uint a_off, i_off, s_off, o_off;
    int padding_idx;
    uint T, D, pad;
    uint shape[8];
    uint ishape[8];
} pc;

layout(binding = 0) readonly buffer BA { ST(A_DT) a[]; };
layout(binding = 1) readonly buffer BI { uint iw[]; };
layout(binding = 2) readonly buffer BS { ST(A_DT) s[]; };
layout(binding = 3) writeonly buffer BO { ST(A_DT) o[]; };

int index_at(uint k) {
    k += pc.i_off;
    if (pc.idx64 == 0u) return int(iw[k]);
    return IDX_OK(iw, k) ? IDX_LO(iw, k) : -1;
}

void main() {
    for (uint e = gl_GlobalInvocationID.x; e < pc.n; e += gl_NumWorkGroups.x * WG) {
        VT(A_DT) acc = VT(A_DT)(0);
        if (OP == 0u) {
            uint v = e / pc.D, dd = e % pc.D;
            if (int(v) != pc.padding_idx)
                for (uint t = 0u; t < pc.T; t++)
                    if (index_at(t) == int(v)) acc += LD(A_DT, s[pc.s_off + t * pc.D + dd]);
        } else {
            // coordinates of e in shape[]; the contributors' flat offsets in ishape[]
            uint c[8];
            uint r = e;
            for (int d = int(pc.ndim) - 1; d >= 0; d--) c[d] = r % pc.shape[d], r /= pc.shape[d];
            bool inside = true;
            uint base = 0u, dstride = 1u, st = 1u;
            for (int d = int(pc.ndim) - 1; d >= 0; d--) {
                if (uint(d) == pc.dim) dstride = st;
                else {
                    inside = inside && c[d] < pc.ishape[d];
                    base += c[d] * st;
                }
                st *= pc.ishape[d];
            }
            acc = LD(A_DT, a[pc.a_off + e]);
            if (inside)
                for (uint i = 0u; i < pc.ishape[pc.dim]; i++) {
                    uint k = base + i * dstride;
                    if (index_at(k) == int(c[pc.dim])) acc += LD(A_DT, s[pc.s_off + k]);
                }
        }
        o[pc.o_off + e] = SV(A_DT, acc);
    }
}
