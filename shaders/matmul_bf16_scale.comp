#version 450
#extension GL_GOOGLE_include_directive : require
// The scaled f16 copy of a bf16 operand of matmul_coopmat_bf16.comp, written ahead of the kernel (which then
// runs with PRESCALED = 1 and stages these f16 as they are): element (r, l) of x[z], at x_off + batch offset
// + r rs + l es (rows r < R of a, or columns of b; l < L along K; batch dims as in matmul.comp), becomes
// to_f16 of it with row r's scale 2^(141 - E), E from keys[k_off + z k_zs + r] (matmul_bf16_keys.comp):
// the bits the kernel's in-loop conversion stages (bf16_scale.glsl). Out: per batch entry z a contiguous
// block at o_off + z o_zs, [R, L] (o[r L + l]) where inner is 0, [L, R] (o[l R + r]) where inner is 1 (x
// of unit stride along r: a column-major a, a row-major b, so the copy keeps x's orientation and the
// kernel its staging). Each invocation converts runs of 8 along the block's rows (16-byte loads where x's
// runs are aligned, 16-byte stores where the block's are), grid-stride over the entry's runs; the runs
// start at multiples of 8 as the kernel's do, so to_f16 sees the same groups (one slow path or none).
// Grid (x workgroups, batch entries).
#extension GL_EXT_control_flow_attributes : require
#include "types.glsl"

layout(constant_id = 0) const uint WG = 256;
layout(local_size_x_id = 0) in;
layout(push_constant) uniform PC {
    uint R, L, rs, es;
    uint x_off, k_off, k_zs, zbase;
    uint bdim, bshape[3], x_bs[3];
    uint o_off, o_zs, inner;
} pc;
layout(binding = 0) readonly buffer BX { uint16_t x[]; };
layout(binding = 0) readonly buffer BX4 { uvec4 x4[]; };
layout(binding = 1) readonly buffer BKEYS { uint keys[]; };
layout(binding = 2) writeonly buffer BO { uint16_t o[]; };
layout(binding = 2) writeonly buffer BO4 { uvec4 o4[]; };
#include "bf16_scale.glsl"

void main() {
    uint z = gl_WorkGroupID.y + pc.zbase, kz = pc.k_off + z * pc.k_zs, ob = pc.o_off + z * pc.o_zs;
    uint xo = pc.x_off;
    for (int d = int(pc.bdim) - 1; d >= 0; d--) {
        xo += (z % pc.bshape[d]) * pc.x_bs[d];
        z /= pc.bshape[d];
    }
    bool inner = pc.inner != 0u;
    uint P = inner ? pc.L : pc.R, Q = inner ? pc.R : pc.L; // the block's rows, their length
    uint s_in = inner ? pc.rs : pc.es, s_out = inner ? pc.es : pc.rs, runs = (Q + 7u) / 8u;
    bool xvec = s_in == 1u && s_out % 8u == 0u && xo % 8u == 0u && Q % 8u == 0u;
    bool ovec = Q % 8u == 0u && ob % 8u == 0u;
    for (uint u = gl_GlobalInvocationID.x; u < P * runs; u += gl_NumWorkGroups.x * WG) {
        uint p = u / runs, q0 = 8u * (u % runs), xb = xo + p * s_out + q0 * s_in;
        uvec4 w;
        if (xvec) {
            w = x4[xb / 8u];
        } else {
            uint v[8];
            [[unroll]] for (uint j = 0u; j < 8u; j++) v[j] = q0 + j < Q ? uint(x[xb + j * s_in]) : 0u;
            w = uvec4(v[0] | (v[1] << 16), v[2] | (v[3] << 16), v[4] | (v[5] << 16), v[6] | (v[7] << 16));
        }
        vec4 lo, hi;
        uvec4 lw;
        if (inner) {
            lane_scales(kz, q0, pc.R, lo, hi, lw);
        } else {
            float sc;
            uint l1;
            run_scale(kz, p, pc.R, sc, l1);
            lo = hi = vec4(sc);
            lw = uvec4(l1);
        }
        uvec4 h = to_f16(w, lo, hi, lw);
        uint at = ob + p * Q + q0;
        if (ovec) {
            o4[at / 8u] = h;
        } else {
            [[unroll]] for (uint j = 0u; j < 8u; j++)
                if (q0 + j < Q) o[at + j] = uint16_t((h[j / 2u] >> (16u * (j & 1u))) & 0xFFFFu);
        }
    }
}
