#version 450
#extension GL_GOOGLE_include_directive : require
// MATMUL for f16 on tensor cores through GL_NV_cooperative_matrix, or with
// -DCOOPMAT_KHR=1 through GL_KHR_cooperative_matrix (glslang >= 13; same kernel):
// out[z] = a[z] @ b[z], a [.., M, K], b [.., K, N], out [.., M, N] contiguous,
// same strides and push block as matmul.comp (C mirror vk_pc_matmul).
// A workgroup owns a BM x BN block of out; its S subgroups (constant 0 = S x
// subgroup size invocations) a BM/WM x BN/WN grid of WM x WN blocks (WN: constant
// 4), each held as (WM/LM) x (WN/LN) cooperative matrices of the device's LM x LN
// x LK shape (constants 1..3, listed by vkGetPhysicalDeviceCooperativeMatrix-
// Properties{NV,KHR}), f32 accumulators. BM, BN, BK, WM, EPI, STAGES, PIPE and the staging
// layouts come packed in constant 6 (TILE, written by vk_ops_matmul.c's coop_launch_of), the
// shared memory's size in 16-byte units in constant 7 (SMV).
// K goes in steps of BK (matmul_coopmat_kloop.glsl): every invocation loads its runs of 8 halfs of coming A
// (BM x BK) and B (BK x BN) tiles into registers (the next one, or with PIPE P the P next ones, in P register
// slots) while the subgroups multiply the current tiles from shared memory (two stages and one barrier per
// step, or with STAGES 1 one stage and a second barrier before it is overwritten). A run lies
// along the operand's unit stride: A row-major (A_T 0) is staged as BM rows of BK
// (+8 pad), A column-major (A_T 1, a_rs 1: a weight gradient's dy^T) as BK rows of
// BM and its fragments load column-major; B row-major (B_T 0) as BK rows of BN, B
// column-major (B_T 1, b_rs 1: Linear's W^T) as BN rows of BK, loaded column-major.
// A run is one 16-byte load where its stride is 1 and the other stride, offset and
// run dimension are multiples of 8, else 8 strided loads with bounds checks (zeros
// outside). Shared memory holds uvec4 runs (16-byte aligned, so fragments load as
// whole rows or columns; the 8-half pad keeps 16-byte row reads conflict-free);
// every fragment loop unrolls, so fragment arrays stay in registers. The
// accumulators are rounded to f16 into shared memory (the stage buffers), EPI rows
// at a time (a multiple of LM), and stored with bounds checks; with F32_OUT (constant 5: a split K's
// slices, vk_ops_matmul.c) stored as the f32 they are, EPI x (BN + 8) floats at a time, into an f32 out.
// Shared memory: STAGES x (A + B tile) halfs, or EPI x (BN + 8) halfs (F32_OUT, BF16_BITS: floats) for the
// result, whichever is more (128 x 128 x 32, row-major, 2 stages: 37 KiB).
// -DBF16_BITS=1: the variant that src/backend_vulkan/vk_spirv_bf16.c retypes to bf16 (its 16-bit floats become
// bf16: a, b and out bf16, the same tensor-core products summed in f32). Its result always goes through shared
// memory as f32, as with F32_OUT, and unless F32_OUT is rounded per element to bf16 bits (f32_to_bf16: nearest
// even, NaN kept quiet, as the tiled kernel rounds) and stored as the 16-bit values they are: so the module
// declares no 16-bit accumulator matrix (Vulkan allows a bf16 one only where the driver lists bf16 x bf16 ->
// bf16) and, like the f16 kernel, does no arithmetic on 16-bit values (bf16 allows none).
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

layout(constant_id = 0) const uint WG = 256; // (BM / WM) x (BN / WN) subgroups
layout(constant_id = 1) const uint LM = 16;
layout(constant_id = 2) const uint LN = 16;
layout(constant_id = 3) const uint LK = 16;
layout(constant_id = 4) const uint WN = 32;     // subgroup block width
layout(constant_id = 5) const uint F32_OUT = 0; // 1: out is f32, unrounded
layout(constant_id = 6) const uint TILE = 10520840; // BM/16 | BN/16 << 5 | BK/16 << 10 | WM/16 << 13 | A_T << 17 | B_T << 18
                                                 // | EPI/16 << 19 | (STAGES - 1) << 23 | PIPE << 25
layout(constant_id = 7) const uint SMV = 2368;   // shared memory, uvec4s
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
layout(binding = 2) writeonly buffer BOF { float of[]; }; // F32_OUT

const uint BM = (TILE & 31u) * 16u, BN = ((TILE >> 5) & 31u) * 16u, BK = ((TILE >> 10) & 7u) * 16u;
const uint WM = ((TILE >> 13) & 15u) * 16u, A_T = (TILE >> 17) & 1u, B_T = (TILE >> 18) & 1u;
const uint EPI = ((TILE >> 19) & 15u) * 16u, STAGES = ((TILE >> 23) & 1u) + 1u; // result rows per pass; 1 or 2
const uint PIPE = (TILE >> 25) & 3u, SLOTS = PIPE == 0u ? 1u : PIPE; // matmul_coopmat_kloop.glsl
// staged tiles: A as AR rows of LDA halfs (BM x BK row-major, or BK x BM), B as BR rows of LDB
const uint AR = A_T * BK + (1u - A_T) * BM, LDA = A_T * BM + (1u - A_T) * BK + 8u;
const uint BR = B_T * BN + (1u - B_T) * BK, LDB = B_T * BK + (1u - B_T) * BN + 8u;
const uint A_SZ = AR * LDA, STAGE = A_SZ + BR * LDB, LDC = BN + 8u;
const uint ARUN = (LDA - 8u) / 8u, BRUN = (LDB - 8u) / 8u; // runs per staged row
const uint FM = WM / LM, FN = WN / LN;
// offsets below count halfs (multiples of 8); stage s: A at s * STAGE, B after it; C at 0 in the end
shared uvec4 sm[SMV];

#ifdef COOPMAT_KHR
#define HALF coopmat<float16_t, gl_ScopeSubgroup, LM, LK, gl_MatrixUseA>
#define HALFB coopmat<float16_t, gl_ScopeSubgroup, LK, LN, gl_MatrixUseB>
#define ACCM coopmat<float, gl_ScopeSubgroup, LM, LN, gl_MatrixUseAccumulator>
#define OUTM coopmat<float16_t, gl_ScopeSubgroup, LM, LN, gl_MatrixUseAccumulator>
#define CM_LOAD(m, at, stride) coopMatLoad(m, sm, at, stride, gl_CooperativeMatrixLayoutRowMajor)
#define CM_LOAD_T(m, at, stride) coopMatLoad(m, sm, at, stride, gl_CooperativeMatrixLayoutColumnMajor)
#define CM_STORE(m, at, stride) coopMatStore(m, sm, at, stride, gl_CooperativeMatrixLayoutRowMajor)
#define CM_MULADD coopMatMulAdd
#else
#define HALF fcoopmatNV<16, gl_ScopeSubgroup, LM, LK>
#define HALFB fcoopmatNV<16, gl_ScopeSubgroup, LK, LN>
#define ACCM fcoopmatNV<32, gl_ScopeSubgroup, LM, LN>
#define OUTM fcoopmatNV<16, gl_ScopeSubgroup, LM, LN>
#define CM_LOAD(m, at, stride) coopMatLoadNV(m, sm, at, stride, false)
#define CM_LOAD_T(m, at, stride) coopMatLoadNV(m, sm, at, stride, true)
#define CM_STORE(m, at, stride) coopMatStoreNV(m, sm, at, stride, false)
#define CM_MULADD coopMatMulAddNV
#endif

#ifdef BF16_BITS
#define F32_STAGE true // the result staged as f32 (see the top)
#else
#define F32_STAGE (F32_OUT != 0u)
#endif

const uint RUNS_A = BM * BK / 8u / WG, RUNS_B = BN * BK / 8u / WG; // 16-byte runs per invocation
uvec4 ra[SLOTS * RUNS_A], rb[SLOTS * RUNS_B]; // slot q: runs q RUNS_A .. (B: q RUNS_B ..)

uint pack2(float16_t x, float16_t y) { return packFloat2x16(f16vec2(x, y)); }

// run u = t + i WG of this invocation: staged row u / ARUN, 8 (u % ARUN) (B: BRUN) along it; element j of
// a run at (gm + j A_T, gk + j (1 - A_T)) of a, (gk + j (1 - B_T), gn + j B_T) of b
void load_tiles(uint k0, uint ao, uint bo, bool avec, bool bvec, uint q) {
    uint t = gl_LocalInvocationID.x;
    [[unroll]] for (uint i = 0u; i < RUNS_A; i++) {
        uint u = t + i * WG, r = u / ARUN, c = 8u * (u % ARUN);
        uint gm = gl_WorkGroupID.y * BM + (A_T != 0u ? c : r), gk = k0 + (A_T != 0u ? r : c);
        if (avec) {
            ra[q * RUNS_A + i] = gm < pc.M && gk < pc.K ? a4[(ao + gm * pc.a_rs + gk * pc.a_cs) / 8u] : uvec4(0u);
        } else {
            float16_t v[8];
            [[unroll]] for (uint j = 0u; j < 8u; j++) {
                uint m = gm + j * A_T, k = gk + j * (1u - A_T);
                v[j] = m < pc.M && k < pc.K ? a[ao + m * pc.a_rs + k * pc.a_cs] : float16_t(0.0);
            }
            ra[q * RUNS_A + i] = uvec4(pack2(v[0], v[1]), pack2(v[2], v[3]), pack2(v[4], v[5]), pack2(v[6], v[7]));
        }
    }
    [[unroll]] for (uint i = 0u; i < RUNS_B; i++) {
        uint u = t + i * WG, r = u / BRUN, c = 8u * (u % BRUN);
        uint gn = gl_WorkGroupID.x * BN + (B_T != 0u ? r : c), gk = k0 + (B_T != 0u ? c : r);
        if (bvec) {
            rb[q * RUNS_B + i] = gk < pc.K && gn < pc.N ? b4[(bo + gk * pc.b_rs + gn * pc.b_cs) / 8u] : uvec4(0u);
        } else {
            float16_t v[8];
            [[unroll]] for (uint j = 0u; j < 8u; j++) {
                uint k = gk + j * B_T, n = gn + j * (1u - B_T);
                v[j] = k < pc.K && n < pc.N ? b[bo + k * pc.b_rs + n * pc.b_cs] : float16_t(0.0);
            }
            rb[q * RUNS_B + i] = uvec4(pack2(v[0], v[1]), pack2(v[2], v[3]), pack2(v[4], v[5]), pack2(v[6], v[7]));
        }
    }
}

void store_tiles(uint s, uint q) {
    uint t = gl_LocalInvocationID.x;
    [[unroll]] for (uint i = 0u; i < RUNS_A; i++) {
        uint u = t + i * WG;
        sm[(s * STAGE + (u / ARUN) * LDA + 8u * (u % ARUN)) / 8u] = ra[q * RUNS_A + i];
    }
    [[unroll]] for (uint i = 0u; i < RUNS_B; i++) {
        uint u = t + i * WG;
        sm[(s * STAGE + A_SZ + (u / BRUN) * LDB + 8u * (u % BRUN)) / 8u] = rb[q * RUNS_B + i];
    }
}

// Whether an operand's runs are single 16-byte loads: unit stride along the run (st1), the other stride
// (st2), the offset and the run dimension's length multiples of 8
bool vec_ok(uint st1, uint st2, uint off, uint len) { return st1 == 1u && st2 % 8u == 0u && off % 8u == 0u && len % 8u == 0u; }

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
    bool avec = A_T != 0u ? vec_ok(pc.a_rs, pc.a_cs, ao, pc.M) : vec_ok(pc.a_cs, pc.a_rs, ao, pc.K);
    bool bvec = B_T != 0u ? vec_ok(pc.b_rs, pc.b_cs, bo, pc.K) : vec_ok(pc.b_cs, pc.b_rs, bo, pc.N);
    uint sg = gl_SubgroupID, wm = (sg / (BN / WN)) * WM, wn = (sg % (BN / WN)) * WN;
    ACCM acc[FM][FN];
    [[unroll]] for (uint i = 0u; i < FM; i++)
        [[unroll]] for (uint j = 0u; j < FN; j++) acc[i][j] = ACCM(0.0);
#include "matmul_coopmat_kloop.glsl"
    // the result EPI rows at a time (the subgroups holding them store, then all write out)
    bool ovec = pc.N % 8u == 0u && oo % 8u == 0u;
    [[unroll]] for (uint h = 0u; h < BM / EPI; h++) {
        [[unroll]] for (uint i = 0u; i < FM; i++)
            if ((wm + i * LM) / EPI == h)
                [[unroll]] for (uint j = 0u; j < FN; j++) {
                    if (F32_STAGE) { // rows of LDC floats
                        CM_STORE(acc[i][j], ((wm + i * LM - h * EPI) * LDC + wn + j * LN) / 4u, LDC / 4u);
                    } else {
#ifndef BF16_BITS
                        OUTM o16 = OUTM(acc[i][j]);
                        CM_STORE(o16, ((wm + i * LM - h * EPI) * LDC + wn + j * LN) / 8u, LDC / 8u);
#endif
                    }
                }
        barrier();
        for (uint e = t; e < EPI * BN / 8u; e += WG) {
            uint r = e / (BN / 8u), c = 8u * (e % (BN / 8u)), gm = m0 + h * EPI + r, gn = n0 + c;
            if (gm >= pc.M) continue;
            if (F32_OUT != 0u) {
                uvec4 v0 = sm[(r * LDC + c) / 4u], v1 = sm[(r * LDC + c) / 4u + 1u];
                [[unroll]] for (uint j = 0u; j < 8u; j++)
                    if (gn + j < pc.N) of[oo + gm * pc.N + gn + j] = uintBitsToFloat(j < 4u ? v0[j] : v1[j - 4u]);
                continue;
            }
#ifdef BF16_BITS
            { // the f32 sums rounded to bf16 bits, 8 at a time
                uvec4 v0 = sm[(r * LDC + c) / 4u], v1 = sm[(r * LDC + c) / 4u + 1u];
                uint w[8];
                [[unroll]] for (uint j = 0u; j < 8u; j++)
                    w[j] = f32_to_bf16(uintBitsToFloat(j < 4u ? v0[j] : v1[j - 4u]));
                if (ovec) {
                    if (gn < pc.N)
                        o4[(oo + gm * pc.N + gn) / 8u] =
                            uvec4(w[0] | (w[1] << 16), w[2] | (w[3] << 16), w[4] | (w[5] << 16), w[6] | (w[7] << 16));
                } else {
                    [[unroll]] for (uint j = 0u; j < 8u; j++)
                        if (gn + j < pc.N) o[oo + gm * pc.N + gn + j] = unpackFloat2x16(w[j]).x; // the bits as they are
                }
                continue;
            }
#endif
            uvec4 v = sm[(r * LDC + c) / 8u];
            if (ovec) {
                if (gn < pc.N) o4[(oo + gm * pc.N + gn) / 8u] = v;
            } else {
                [[unroll]] for (uint j = 0u; j < 8u; j++) {
                    f16vec2 hv = unpackFloat2x16(v[j / 2u]);
                    if (gn + j < pc.N) o[oo + gm * pc.N + gn + j] = j % 2u == 0u ? hv.x : hv.y;
                }
            }
        }
        barrier();
    }
}
