#version 450
#extension GL_GOOGLE_include_directive : require
// MATMUL for f16 on tensor cores through GL_NV_cooperative_matrix:
// same operands, strides and push block as matmul.comp (C mirror vk_pc_matmul).
// A workgroup of 4 subgroups (constant 0 = 4 x subgroup size) owns a 64 x 64
// block of out. Per BK = 32 step it stages A (64 x 32) and B (32 x 64) as
// float16 in shared memory (zero-padded at the edges), and each subgroup
// multiplies a 32 x 32 quadrant as 2 x 2 16x16x16 cooperative matrices with
// f32 accumulators. The result goes through shared memory to be rounded to
// f16 and stored with bounds checks.
// Shared memory: (64 * 40 + 32 * 72) halfs + 64 * 68 floats = 26 KiB.
// Used only where the device lists 16x16x16 f16 x f16 -> f32 at subgroup
// scope, and only after a self-test against matmul.comp (vk_ops_matmul.c).
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#include "types.glsl"

layout(constant_id = 0) const uint WG = 128;
layout(local_size_x_id = 0) in;

layout(push_constant) uniform PC {
    uint M, N, K, zbase;
    uint a_off, b_off, o_off, bdim;
    uint a_rs, a_cs, b_rs, b_cs;
    uint bshape[3], a_bs[3], b_bs[3];
} pc;

layout(binding = 0) readonly buffer BA { float16_t a[]; };
layout(binding = 1) readonly buffer BB { float16_t b[]; };
layout(binding = 2) writeonly buffer BO { uint16_t o[]; };

#define BM 64u
#define BN 64u
#define BK 32u
#define LDA 40u // BK + 8: rows start 16-byte aligned
#define LDB 72u // BN + 8
#define LDC 68u // BN + 4
shared float16_t As[BM * LDA];
shared float16_t Bs[BK * LDB];
shared float Cs[BM * LDC];

#define HALF fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define ACCM fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>

void main() {
    uint t = gl_LocalInvocationID.x;
    uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
    uint z = gl_WorkGroupID.z + pc.zbase;
    uint ao = pc.a_off, bo = pc.b_off, oo = pc.o_off + z * pc.M * pc.N;
    for (int d = int(pc.bdim) - 1; d >= 0; d--) {
        uint c = z % pc.bshape[d];
        z /= pc.bshape[d];
        ao += c * pc.a_bs[d];
        bo += c * pc.b_bs[d];
    }
    uint sg = gl_SubgroupID, wm = (sg / 2u) * 32u, wn = (sg % 2u) * 32u;
    ACCM c00 = ACCM(0.0), c01 = ACCM(0.0), c10 = ACCM(0.0), c11 = ACCM(0.0);
    bool a_rowmajor = pc.a_cs == 1u, b_rowmajor = pc.b_cs == 1u;
    for (uint k0 = 0u; k0 < pc.K; k0 += BK) {
        for (uint e = t; e < BM * BK; e += WG) {
            uint r = a_rowmajor ? e / BK : e % BM, c = a_rowmajor ? e % BK : e / BM;
            uint gm = m0 + r, gk = k0 + c;
            As[r * LDA + c] = gm < pc.M && gk < pc.K ? a[ao + gm * pc.a_rs + gk * pc.a_cs]
                                                   : float16_t(0.0);
        }
        for (uint e = t; e < BK * BN; e += WG) {
            uint r = b_rowmajor ? e / BN : e % BK, c = b_rowmajor ? e % BN : e / BK;
            uint gk = k0 + r, gn = n0 + c;
            Bs[r * LDB + c] = gk < pc.K && gn < pc.N ? b[bo + gk * pc.b_rs + gn * pc.b_cs]
                                                   : float16_t(0.0);
        }
        barrier();
        for (uint kk = 0u; kk < BK; kk += 16u) {
            HALF a0, a1, b0, b1;
            coopMatLoadNV(a0, As, wm * LDA + kk, LDA, false);
            coopMatLoadNV(a1, As, (wm + 16u) * LDA + kk, LDA, false);
            coopMatLoadNV(b0, Bs, kk * LDB + wn, LDB, false);
            coopMatLoadNV(b1, Bs, kk * LDB + wn + 16u, LDB, false);
            c00 = coopMatMulAddNV(a0, b0, c00);
            c01 = coopMatMulAddNV(a0, b1, c01);
            c10 = coopMatMulAddNV(a1, b0, c10);
            c11 = coopMatMulAddNV(a1, b1, c11);
        }
        barrier();
    }
    coopMatStoreNV(c00, Cs, wm * LDC + wn, LDC, false);
    coopMatStoreNV(c01, Cs, wm * LDC + wn + 16u, LDC, false);
    coopMatStoreNV(c10, Cs, (wm + 16u) * LDC + wn, LDC, false);
    coopMatStoreNV(c11, Cs, (wm + 16u) * LDC + wn + 16u, LDC, false);
    barrier();
    for (uint e = t; e < BM * BN; e += WG) {
        uint r = e / BN, c = e % BN, gm = m0 + r, gn = n0 + c;
        if (gm < pc.M && gn < pc.N) o[oo + gm * pc.N + gn] = uint16_t(f32_to_f16(Cs[r * LDC + c]));
    }
}
