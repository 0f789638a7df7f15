#version 450
#extension GL_GOOGLE_include_directive : require
// MATMUL for f16 on tensor cores through GL_NV_cooperative_matrix, or with
// -DCOOPMAT_KHR=1 through GL_KHR_cooperative_matrix (glslang >= 13; same kernel):
// out[z] = a[z] @ b[z], a [.., M, K], b [.., K, N], out [.., M, N] contiguous,
// same strides and push block as matmul.comp (C mirror vk_pc_matmul).
// A workgroup owns a 128 x 128 block of out; its S subgroups (constant 0 =
// S x subgroup size invocations) a 2 x S/2 grid of 64 x WN blocks (WN = 256 / S,
// constant 4), each held as (64/LM) x (WN/LN) cooperative matrices of the
// device's LM x LN x LK shape (constants 1..3, listed by
// vkGetPhysicalDeviceCooperativeMatrixProperties{NV,KHR}), f32 accumulators.
// K goes in steps of BK = 32: every invocation loads its 512 / WG runs of 8
// halfs of the next A (128 x 32) and of the next B (32 x 128) tile into
// registers while the subgroups multiply the current tiles from shared memory
// (two stages, one barrier per step). Runs are one 16-byte load where the
// operand is row-major with 8-aligned rows, offset and length, else 8 strided
// loads with bounds checks (zeros outside). Shared memory holds uvec4 runs
// (16-byte aligned, so fragments load as whole rows); every fragment loop
// unrolls, so fragment arrays stay in registers. The accumulators are rounded
// to f16 into shared memory (the stage buffers) and stored with bounds checks.
// Shared memory: 2 stages x (128 x 40 + 32 x 136) halfs = 37 KiB <= 48 KiB.
// Used only after a self-test against a host reference (vk_ops_matmul.c).
#ifdef COOPMAT_KHR
#extension GL_KHR_cooperative_matrix : require
#else
#extension GL_NV_cooperative_matrix : require
#endif
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require
#include "types.glsl"

layout(constant_id = 0) const uint WG = 256; // 128 x 128 / (64 x WN) subgroups
layout(constant_id = 1) const uint LM = 16;
layout(constant_id = 2) const uint LN = 16;
layout(constant_id = 3) const uint LK = 16;
layout(constant_id = 4) const uint WN = 32; // subgroup block width
layout(local_size_x_id = 0) in;

layout(push_constant) uniform PC {
    uint M, N, K, zbase;
    uint a_off, b_off, o_off, bdim;
    uint a_rs, a_cs, b_rs, b_cs;
    uint bshape[3], a_bs[3], b_bs[3];
} pc;

layout(binding = 0) readonly buffer BA { float16_t a[]; };
layout(binding = 0) readonly buffer BA4 { uvec4 a4[]; };
layout(binding = 1) readonly buffer BB { float16_t b[]; };
layout(binding = 1) readonly buffer BB4 { uvec4 b4[]; };
layout(binding = 2) writeonly buffer BO { float16_t o[]; };
layout(binding = 2) writeonly buffer BO4 { uvec4 o4[]; };

#define BM 128u
#define BN 128u
#define BK 32u
#define LDA 40u  // BK + 8 halfs: 80-byte rows, conflict-free 16-byte row reads
#define LDB 136u // BN + 8
#define LDC 136u
#define A_SZ (BM * LDA)
#define STAGE (A_SZ + BK * LDB)
const uint FM = 64u / LM, FN = WN / LN;
// offsets below count halfs (multiples of 8); stage s: A at s * STAGE, B after it; C at 0 in the end
shared uvec4 sm[2u * STAGE / 8u];

#ifdef COOPMAT_KHR
#define HALF coopmat<float16_t, gl_ScopeSubgroup, LM, LK, gl_MatrixUseA>
#define HALFB coopmat<float16_t, gl_ScopeSubgroup, LK, LN, gl_MatrixUseB>
#define ACCM coopmat<float, gl_ScopeSubgroup, LM, LN, gl_MatrixUseAccumulator>
#define OUTM coopmat<float16_t, gl_ScopeSubgroup, LM, LN, gl_MatrixUseAccumulator>
#define CM_LOAD(m, at, stride) coopMatLoad(m, sm, at, stride, gl_CooperativeMatrixLayoutRowMajor)
#define CM_STORE(m, at, stride) coopMatStore(m, sm, at, stride, gl_CooperativeMatrixLayoutRowMajor)
#define CM_MULADD coopMatMulAdd
#else
#define HALF fcoopmatNV<16, gl_ScopeSubgroup, LM, LK>
#define HALFB fcoopmatNV<16, gl_ScopeSubgroup, LK, LN>
#define ACCM fcoopmatNV<32, gl_ScopeSubgroup, LM, LN>
#define OUTM fcoopmatNV<16, gl_ScopeSubgroup, LM, LN>
#define CM_LOAD(m, at, stride) coopMatLoadNV(m, sm, at, stride, false)
#define CM_STORE(m, at, stride) coopMatStoreNV(m, sm, at, stride, false)
#define CM_MULADD coopMatMulAddNV
#endif

const uint RUNS = BM * BK / 8u / WG; // 16-byte runs of A (and of B) per invocation
uvec4 ra[RUNS], rb[RUNS];

uint pack2(float16_t x, float16_t y) { return packFloat2x16(f16vec2(x, y)); }

// run u = t + i WG of this invocation: A row u / 4, k 8 (u % 4); B row u / 16, n 8 (u % 16)
void load_tiles(uint k0, uint ao, uint bo, bool avec, bool bvec) {
    uint t = gl_LocalInvocationID.x;
    [[unroll]] for (uint i = 0u; i < RUNS; i++) {
        uint u = t + i * WG, gm = gl_WorkGroupID.y * BM + u / 4u, gk = k0 + 8u * (u % 4u);
        if (avec) {
            ra[i] = gm < pc.M && gk < pc.K ? a4[(ao + gm * pc.a_rs + gk) / 8u] : uvec4(0u);
        } else {
            float16_t v[8];
            [[unroll]] for (uint j = 0u; j < 8u; j++)
                v[j] = gm < pc.M && gk + j < pc.K ? a[ao + gm * pc.a_rs + (gk + j) * pc.a_cs] : float16_t(0.0);
            ra[i] = uvec4(pack2(v[0], v[1]), pack2(v[2], v[3]), pack2(v[4], v[5]), pack2(v[6], v[7]));
        }
        uint kb = k0 + u / 16u, gn = gl_WorkGroupID.x * BN + 8u * (u % 16u);
        if (bvec) {
            rb[i] = kb < pc.K && gn < pc.N ? b4[(bo + kb * pc.b_rs + gn) / 8u] : uvec4(0u);
        } else {
            float16_t v[8];
            [[unroll]] for (uint j = 0u; j < 8u; j++)
                v[j] = kb < pc.K && gn + j < pc.N ? b[bo + kb * pc.b_rs + (gn + j) * pc.b_cs] : float16_t(0.0);
            rb[i] = uvec4(pack2(v[0], v[1]), pack2(v[2], v[3]), pack2(v[4], v[5]), pack2(v[6], v[7]));
        }
    }
}

void store_tiles(uint s) {
    uint t = gl_LocalInvocationID.x;
    [[unroll]] for (uint i = 0u; i < RUNS; i++) {
        uint u = t + i * WG;
        sm[(s * STAGE + (u / 4u) * LDA + 8u * (u % 4u)) / 8u] = ra[i];
        sm[(s * STAGE + A_SZ + (u / 16u) * LDB + 8u * (u % 16u)) / 8u] = rb[i];
    }
}

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
    bool avec = pc.a_cs == 1u && pc.a_rs % 8u == 0u && ao % 8u == 0u && pc.K % 8u == 0u;
    bool bvec = pc.b_cs == 1u && pc.b_rs % 8u == 0u && bo % 8u == 0u && pc.N % 8u == 0u;
    uint sg = gl_SubgroupID, wm = (sg / (BN / WN)) * 64u, wn = (sg % (BN / WN)) * WN;
    ACCM acc[FM][FN];
    [[unroll]] for (uint i = 0u; i < FM; i++)
        [[unroll]] for (uint j = 0u; j < FN; j++) acc[i][j] = ACCM(0.0);
    load_tiles(0u, ao, bo, avec, bvec);
    store_tiles(0u);
    barrier();
    uint s = 0u;
    for (uint k0 = 0u; k0 < pc.K; k0 += BK) {
        bool more = k0 + BK < pc.K;
        if (more) load_tiles(k0 + BK, ao, bo, avec, bvec);
        [[unroll]] for (uint kk = 0u; kk < BK; kk += LK) {
            HALF fa[FM];
            HALFB fb[FN];
            [[unroll]] for (uint i = 0u; i < FM; i++)
                CM_LOAD(fa[i], (s * STAGE + (wm + i * LM) * LDA + kk) / 8u, LDA / 8u);
            [[unroll]] for (uint j = 0u; j < FN; j++)
                CM_LOAD(fb[j], (s * STAGE + A_SZ + kk * LDB + wn + j * LN) / 8u, LDB / 8u);
            [[unroll]] for (uint i = 0u; i < FM; i++)
                [[unroll]] for (uint j = 0u; j < FN; j++) acc[i][j] = CM_MULADD(fa[i], fb[j], acc[i][j]);
        }
        if (more) store_tiles(s ^ 1u);
        barrier();
        s ^= 1u;
    }
    [[unroll]] for (uint i = 0u; i < FM; i++)
        [[unroll]] for (uint j = 0u; j < FN; j++) {
            OUTM h = OUTM(acc[i][j]);
            CM_STORE(h, ((wm + i * LM) * LDC + wn + j * LN) / 8u, LDC / 8u);
        }
    barrier();
    bool ovec = pc.N % 8u == 0u && oo % 8u == 0u;
    for (uint e = t; e < BM * BN / 8u; e += WG) {
        uint r = e / (BN / 8u), c = 8u * (e % (BN / 8u)), gm = m0 + r, gn = n0 + c;
        if (gm >= pc.M) continue;
        uvec4 v = sm[(r * LDC + c) / 8u];
        if (ovec) {
            if (gn < pc.N) o4[(oo + gm * pc.N + gn) / 8u] = v;
        } else {
            [[unroll]] for (uint j = 0u; j < 8u; j++) {
                f16vec2 h = unpackFloat2x16(v[j / 2u]);
                if (gn + j < pc.N) o[oo + gm * pc.N + gn + j] = j % 2u == 0u ? h.x : h.y;
            }
        }
    }
}
