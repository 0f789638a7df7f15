// variants: float
#version 450
#extension GL_GOOGLE_include_directive : require
// embedding_backward: dw[v, d] = sum over tokens t with idx[t] == v (v != padding_idx) of dy[t, d], summed in
// token order (deterministic, as scatter.comp's OP 0, whose result it reproduces bit for bit).
//   dy [T, D], idx [T], dw [V, D]
// One workgroup per (row v, block of WG columns). The tokens go by in chunks of WG: each invocation tests one
// token of the chunk and sets its bit in a shared mask (atomicOr, so the mask does not depend on the order);
// then every invocation walks the set bits in ascending order and adds those tokens' dy[t, d]. Per row that is
// T / WG chunks of 3 barriers plus the row's own tokens, instead of T index tests per element.
// Bindings: 0 idx (int64/int32 as uint words), 1 dy, 2 dw.
// C mirror: vk_pc_scatter (vk_ops_index.c; the fields scatter.comp's OP 0 reads). Variants embedding_backward_<float dt>.
#include "types.glsl"

layout(constant_id = 0) const uint WG = 256; // a multiple of 32
layout(local_size_x_id = 0) in;

layout(push_constant) uniform PC {
    uint n, ndim, dim, idx64;
    uint a_off, i_off, s_off, o_off;
    int padding_idx;
    uint T, D, pad;
    uint shape[8];
    uint ishape[8];
} pc;

layout(binding = 0) readonly buffer BI { uint iw[]; };
layout(binding = 1) readonly buffer BS { ST(A_DT) s[]; };
layout(binding = 2) writeonly buffer BO { ST(A_DT) o[]; };

shared uint mask[WG / 32u];

int index_at(uint k) {
    k += pc.i_off;
    if (pc.idx64 == 0u) return int(iw[k]);
    return IDX_OK(iw, k) ? IDX_LO(iw, k) : -1;
}

void main() {
    uint blocks = (pc.D + WG - 1u) / WG, g = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    uint V = pc.n / pc.D;
    if (g >= V * blocks) return; // whole workgroups only: the barriers below stay uniform
    uint v = g / blocks, d = (g % blocks) * WG + gl_LocalInvocationID.x, lid = gl_LocalInvocationID.x;
    VT(A_DT) acc = VT(A_DT)(0);
    if (int(v) != pc.padding_idx)
        for (uint base = 0u; base < pc.T; base += WG) {
            if (lid < WG / 32u) mask[lid] = 0u;
            barrier();
            uint t = base + lid;
            if (t < pc.T && index_at(t) == int(v)) atomicOr(mask[lid / 32u], 1u << (lid % 32u));
            barrier();
            if (d < pc.D)
                for (uint w = 0u; w < WG / 32u; w++)
                    for (uint bits = mask[w]; bits != 0u; bits &= bits - 1u) {
                        uint tt = base + w * 32u + uint(findLSB(bits));
                        acc += LD(A_DT, s[pc.s_off + tt * pc.D + d]);
                    }
            barrier(); // the mask is read before the next chunk clears it
        }
    if (d < pc.D) o[pc.o_off + v * pc.D + d] = SV(A_DT, acc);
}
