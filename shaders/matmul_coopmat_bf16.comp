#version 450
#extension GL_GOOGLE_include_directive : require
// MATMUL for bf16 on the f16 tensor cores (NV, or with -DCOOPMAT_KHR=1 KHR cooperative
// matrices; -DCOOPMAT_EMU=1 emulated, below): out[z] = a[z] @ b[z], all bf16, f32 accumulation, out rounded once to bf16.
// The tiling, staging (layouts A_T, B_T included) and push block are matmul_coopmat.comp's
// (read it first; the result goes out EPI rows at a time as f32, EPI x (BN + 8) floats), plus
// keys: binding 3 holds, per row i of a and per column j of b, the largest finite
// |x| as bf16 magnitude bits (matmul_bf16_keys.comp; a at z ka_zs + i, b at kb_off +
// z kb_zs + j, z the batch entry, ka_zs / kb_zs 0 for an operand without batch).
//
// Scaling (exact): with E the row's normalized biased exponent of that max, clamped to
// [15, 254], every x of the row is staged as the f16 of x 2^(141 - E), so the max lands
// in [2^14, 2^15) (f16 max 65504). bf16 has an 8-bit significand, so the f16 is x's
// value exactly when the scaled x is 2^-14 or more (f16 normal), i.e. |x| within 2^28
// of the row max: then x 2^(141 - E) is one f32 multiply and one f32 -> f16 pack, both
// exact (`fast`). Otherwise (`slow`, integer only: no f32 denormals): round to nearest
// even on the f16 subnormal grid 2^-24, and a nonzero x never becomes 0 (it becomes
// +-2^-24), so that inf * x stays inf. Inf and NaN stay inf and NaN, so they propagate
// through the products as in f32. The products of two f16 are exact in f32 and the
// sums are the coopmat's f32 accumulation; the tile result c_ij is then multiplied by
// 2^(Ea_i - 141) 2^(Eb_j - 141) (two exact power-of-two steps of one sign) and
// rounded to bf16 as the tiled kernel rounds (f32_to_bf16), or with F32_OUT written as the f32 it is.
// Error bound beyond f32 accumulation: a staged value differs from x by under 2^-24 of
// the scaled grid, i.e. |dx| < 2^-38 max(max_k |a_ik|, 2^-112) (elements more than 2^28
// below their row max, or in rows whose max is below 2^-112), so
//   |out_ij - (f32 GEMM)_ij| <~ 2^-38 (max_k|a_ik| sum_k|b_kj| + max_k|b_kj| sum_k|a_ik|)
// (plus the f32 accumulation and final bf16 rounding both paths have): 2^-14 of one f32
// ulp of the largest term's scale. Rows within a 2^28 range (every real one) are exact.
// PRESCALED (TILE's bit 24): a and b are already these f16 (matmul_bf16_scale.comp wrote them with the same
// conversion, bf16_scale.glsl, in runs of 8 that start where the kernel's do), staged as loaded, so the K loop
// does no conversion; the keys then serve only the epilogue. (Where runs start elsewhere, under
// TRIDENT_VK_COOP_TRANS=0 or split-K slices not a multiple of 8 long, only a NaN's payload may differ: to_f16
// takes one path per run.)
// Used after a self-test against a host reference (vk_ops_matmul.c).
#if defined(COOPMAT_EMU)
#elif defined(COOPMAT_KHR)
#extension GL_KHR_cooperative_matrix : require
#else
#extension GL_NV_cooperative_matrix : require
#endif
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require
#include "types.glsl"

layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint LM = 16;
layout(constant_id = 2) const uint LN = 16;
layout(constant_id = 3) const uint LK = 16;
layout(constant_id = 4) const uint WN = 32;
layout(constant_id = 5) const uint F32_OUT = 0; // 1: out is f32, unrounded (split-K slices, vk_ops_matmul.c)
layout(constant_id = 6) const uint TILE = 10520840; // as matmul_coopmat.comp's (PIPE in bits 25-26), and bit 24 PRESCALED
layout(constant_id = 7) const uint SMV = 2368;   // shared memory, uvec4s
layout(local_size_x_id = 0) in;

layout(push_constant) uniform PC {
    uint M, N, K, zbase;
    uint a_off, b_off, o_off, bdim;
    uint a_rs, a_cs, b_rs, b_cs;
    uint bshape[3], a_bs[3], b_bs[3];
    uint ka_zs, kb_off, kb_zs;
} pc;

layout(binding = 0) readonly buffer BA { uint16_t a[]; };
layout(binding = 0) readonly buffer BA4 { uvec4 a4[]; };
layout(binding = 1) readonly buffer BB { uint16_t b[]; };
layout(binding = 1) readonly buffer BB4 { uvec4 b4[]; };
layout(binding = 2) writeonly buffer BO { uint16_t o[]; };
layout(binding = 2) writeonly buffer BO4 { uvec4 o4[]; };
layout(binding = 2) writeonly buffer BOF { float of[]; }; // F32_OUT
layout(binding = 3) readonly buffer BKEYS { uint keys[]; };
#include "bf16_scale.glsl"

const uint BM = (TILE & 31u) * 16u, BN = ((TILE >> 5) & 31u) * 16u, BK = ((TILE >> 10) & 7u) * 16u;
const uint WM = ((TILE >> 13) & 15u) * 16u, A_T = (TILE >> 17) & 1u, B_T = (TILE >> 18) & 1u;
const uint EPI = ((TILE >> 19) & 15u) * 16u, STAGES = ((TILE >> 23) & 1u) + 1u; // result rows per pass; 1 or 2
const uint PIPE = (TILE >> 25) & 3u, SLOTS = PIPE == 0u ? 1u : PIPE; // matmul_coopmat_kloop.glsl
const uint PRESCALED = (TILE >> 24) & 1u; // 1: a and b are already the staged f16 (matmul_bf16_scale.comp)
const uint AR = A_T * BK + (1u - A_T) * BM, LDA = A_T * BM + (1u - A_T) * BK + 8u;
const uint BR = B_T * BN + (1u - B_T) * BK, LDB = B_T * BK + (1u - B_T) * BN + 8u;
const uint A_SZ = AR * LDA, STAGE = A_SZ + BR * LDB, LDC = BN + 8u; // LDC in floats
const uint ARUN = (LDA - 8u) / 8u, BRUN = (LDB - 8u) / 8u;
const uint FM = WM / LM, FN = WN / LN;
shared uvec4 sm[SMV];

#if defined(COOPMAT_EMU)
// -DCOOPMAT_EMU=1 (matmul_coopmat_emu_bf16, which TRIDENT_VULKAN_COOPMAT_BF16=emulated runs on any device, e.g.
// lavapipe, so that the tests check the staging, the prescaled copies and the epilogue): 16 x 16 x 16 fragments
// over virtual 32-invocation subgroups, as attention_coopmat.glsl's: lane l holds of an A fragment row l/2 (16),
// of a B fragment columns 8 (l%2) .. +8 (16 x 8), of an accumulator row l/2, columns 8 (l%2) .. +8; products of
// the f16 values summed in f32, as on tensor cores.
struct CMA { float x[16]; };
struct CMB { float x[128]; };
struct CMC { float x[8]; };
#define HALF CMA
#define HALFB CMB
#define ACCM CMC
uint emu_r(uint len, uint i) { return len == 128u ? i / 8u : (gl_LocalInvocationID.x % 32u) / 2u; }
uint emu_c(uint len, uint i) { return len == 16u ? i : (gl_LocalInvocationID.x % 2u) * 8u + (len == 128u ? i % 8u : i); }
float emu_half(uint e) { // f16 element e of sm
    vec2 v = unpackHalf2x16(sm[e / 8u][(e % 8u) / 2u]);
    return (e & 1u) != 0u ? v.y : v.x;
}
void emu_store(uint e, float v) { sm[e / 4u][e % 4u] = floatBitsToUint(v); } // f32 element e of sm
#define EMU_N(m) uint(m.x.length())
#define CM_LOAD(m, at, stride)                                                                                    \
    for (uint i_ = 0u; i_ < EMU_N(m); i_++)                                                                        \
    m.x[i_] = emu_half((at) * 8u + emu_r(EMU_N(m), i_) * (stride) * 8u + emu_c(EMU_N(m), i_))
#define CM_LOAD_T(m, at, stride)                                                                                  \
    for (uint i_ = 0u; i_ < EMU_N(m); i_++)                                                                        \
    m.x[i_] = emu_half((at) * 8u + emu_c(EMU_N(m), i_) * (stride) * 8u + emu_r(EMU_N(m), i_))
#define CM_STORE(m, at, stride)                                                                                   \
    for (uint i_ = 0u; i_ < EMU_N(m); i_++)                                                                        \
    emu_store((at) * 4u + emu_r(EMU_N(m), i_) * (stride) * 4u + emu_c(EMU_N(m), i_), m.x[i_])
#define CM_MULADD emu_mad
#define CM_ZERO emu_zero()
#define SUBGROUP_ID (gl_LocalInvocationID.x / 32u)
CMC emu_zero() {
    CMC m;
    for (uint i = 0u; i < 8u; i++) m.x[i] = 0.0;
    return m;
}
// c + a b on this lane's 8 elements
CMC emu_mad(CMA a, CMB b, CMC c) {
    for (uint j = 0u; j < 8u; j++) {
        float s = c.x[j];
        for (uint k = 0u; k < 16u; k++) s += a.x[k] * b.x[k * 8u + j];
        c.x[j] = s;
    }
    return c;
}
#elif defined(COOPMAT_KHR)
#define HALF coopmat<float16_t, gl_ScopeSubgroup, LM, LK, gl_MatrixUseA>
#define HALFB coopmat<float16_t, gl_ScopeSubgroup, LK, LN, gl_MatrixUseB>
#define ACCM coopmat<float, gl_ScopeSubgroup, LM, LN, gl_MatrixUseAccumulator>
#define CM_LOAD(m, at, stride) coopMatLoad(m, sm, at, stride, gl_CooperativeMatrixLayoutRowMajor)
#define CM_LOAD_T(m, at, stride) coopMatLoad(m, sm, at, stride, gl_CooperativeMatrixLayoutColumnMajor)
#define CM_STORE(m, at, stride) coopMatStore(m, sm, at, stride, gl_CooperativeMatrixLayoutRowMajor)
#define CM_MULADD coopMatMulAdd
#define CM_ZERO ACCM(0.0)
#define SUBGROUP_ID gl_SubgroupID
#else
#define HALF fcoopmatNV<16, gl_ScopeSubgroup, LM, LK>
#define HALFB fcoopmatNV<16, gl_ScopeSubgroup, LK, LN>
#define ACCM fcoopmatNV<32, gl_ScopeSubgroup, LM, LN>
#define CM_LOAD(m, at, stride) coopMatLoadNV(m, sm, at, stride, false)
#define CM_LOAD_T(m, at, stride) coopMatLoadNV(m, sm, at, stride, true)
#define CM_STORE(m, at, stride) coopMatStoreNV(m, sm, at, stride, false)
#define CM_MULADD coopMatMulAddNV
#define CM_ZERO ACCM(0.0)
#define SUBGROUP_ID gl_SubgroupID
#endif

const uint RUNS_A = BM * BK / 8u / WG, RUNS_B = BN * BK / 8u / WG;
uvec4 ra[SLOTS * RUNS_A], rb[SLOTS * RUNS_B]; // slot q: runs q RUNS_A .. (B: q RUNS_B ..)
// the scales of this invocation's elements, kept for the whole K loop: scale 2^(141 - E) and
// (2^7 max(E - 28, 1)) - 1, the magnitude below which a nonzero element takes the slow path (in both
// halves). A run along K (A_T 0; B_T 1) has one row of a (column of b) per run: sa, la (sb, lbr); a run
// along M (A_T 1; B_T 0) holds rows m0 + 8 (t % ARUN) + 0..7 (columns n0 + 8 (t % BRUN) + 0..7), the same in
// every run since WG is a multiple of ARUN (BRUN): lanes 2q and 2q + 1 in sa_lo[q], sa_hi[q], words la4[q]
float sa[RUNS_A], sb[RUNS_B];
uint la[RUNS_A], lbr[RUNS_B];
vec4 sa_lo, sa_hi, sb_lo, sb_hi;
uvec4 la4, lb4;

uint pack2(uint x, uint y) { return x | (y << 16); }

// as matmul_coopmat.comp's load_tiles, on bf16 bits
void load_tiles(uint k0, uint ao, uint bo, bool avec, bool bvec, uint q) {
    uint t = gl_LocalInvocationID.x;
    [[unroll]] for (uint i = 0u; i < RUNS_A; i++) {
        uint u = t + i * WG, r = u / ARUN, c = 8u * (u % ARUN);
        uint gm = gl_WorkGroupID.y * BM + (A_T != 0u ? c : r), gk = k0 + (A_T != 0u ? r : c);
        if (avec) {
            ra[q * RUNS_A + i] = gm < pc.M && gk < pc.K ? a4[(ao + gm * pc.a_rs + gk * pc.a_cs) / 8u] : uvec4(0u);
        } else {
            uint v[8];
            [[unroll]] for (uint j = 0u; j < 8u; j++) {
                uint m = gm + j * A_T, k = gk + j * (1u - A_T);
                v[j] = m < pc.M && k < pc.K ? uint(a[ao + m * pc.a_rs + k * pc.a_cs]) : 0u;
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
            uint v[8];
            [[unroll]] for (uint j = 0u; j < 8u; j++) {
                uint k = gk + j * B_T, n = gn + j * (1u - B_T);
                v[j] = k < pc.K && n < pc.N ? uint(b[bo + k * pc.b_rs + n * pc.b_cs]) : 0u;
            }
            rb[q * RUNS_B + i] = uvec4(pack2(v[0], v[1]), pack2(v[2], v[3]), pack2(v[4], v[5]), pack2(v[6], v[7]));
        }
    }
}

// slot q's runs into stage s, converted to f16 here, a step (PIPE P: P steps) after their loads, so that
// the loads stay in flight meanwhile (PRESCALED: stored as loaded)
void store_tiles(uint s, uint q) {
    uint t = gl_LocalInvocationID.x;
    [[unroll]] for (uint i = 0u; i < RUNS_A; i++) {
        uint u = t + i * WG;
        sm[(s * STAGE + (u / ARUN) * LDA + 8u * (u % ARUN)) / 8u] =
            PRESCALED != 0u ? ra[q * RUNS_A + i]
            : A_T != 0u     ? to_f16(ra[q * RUNS_A + i], sa_lo, sa_hi, la4)
                            : to_f16(ra[q * RUNS_A + i], vec4(sa[i]), vec4(sa[i]), uvec4(la[i]));
    }
    [[unroll]] for (uint i = 0u; i < RUNS_B; i++) {
        uint u = t + i * WG;
        sm[(s * STAGE + A_SZ + (u / BRUN) * LDB + 8u * (u % BRUN)) / 8u] =
            PRESCALED != 0u ? rb[q * RUNS_B + i]
            : B_T != 0u     ? to_f16(rb[q * RUNS_B + i], vec4(sb[i]), vec4(sb[i]), uvec4(lbr[i]))
                            : to_f16(rb[q * RUNS_B + i], sb_lo, sb_hi, lb4);
    }
}

bool vec_ok(uint st1, uint st2, uint off, uint len) { return st1 == 1u && st2 % 8u == 0u && off % 8u == 0u && len % 8u == 0u; }

// c 2^(pa + pb), pa, pb in [-126, 113]: as two factors of one sign, each a normal f32
float rescale(float c, int pa, int pb) {
    int n = pa + pb, n1 = clamp(n, -126, 127);
    return c * uintBitsToFloat(uint(n1 + 127) << 23) * uintBitsToFloat(uint(n - n1 + 127) << 23);
}

void main() {
    uint t = gl_LocalInvocationID.x;
    uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
    uint z = gl_WorkGroupID.z + pc.zbase;
    uint ka = z * pc.ka_zs, kb = pc.kb_off + z * pc.kb_zs;
    uint ao = pc.a_off, bo = pc.b_off, oo = pc.o_off + z * pc.M * pc.N;
    for (int d = int(pc.bdim) - 1; d >= 0; d--) {
        uint c = z % pc.bshape[d];
        z /= pc.bshape[d];
        ao += c * pc.a_bs[d];
        bo += c * pc.b_bs[d];
    }
    if (PRESCALED == 0u) { // the lane scales of the conversion
        if (A_T != 0u) {
            lane_scales(ka, m0 + 8u * (t % ARUN), pc.M, sa_lo, sa_hi, la4);
        } else {
            [[unroll]] for (uint i = 0u; i < RUNS_A; i++) run_scale(ka, m0 + (t + i * WG) / ARUN, pc.M, sa[i], la[i]);
        }
        if (B_T != 0u) {
            [[unroll]] for (uint i = 0u; i < RUNS_B; i++) run_scale(kb, n0 + (t + i * WG) / BRUN, pc.N, sb[i], lbr[i]);
        } else {
            lane_scales(kb, n0 + 8u * (t % BRUN), pc.N, sb_lo, sb_hi, lb4);
        }
    }
    bool avec = A_T != 0u ? vec_ok(pc.a_rs, pc.a_cs, ao, pc.M) : vec_ok(pc.a_cs, pc.a_rs, ao, pc.K);
    bool bvec = B_T != 0u ? vec_ok(pc.b_rs, pc.b_cs, bo, pc.K) : vec_ok(pc.b_cs, pc.b_rs, bo, pc.N);
    uint sg = SUBGROUP_ID, wm = (sg / (BN / WN)) * WM, wn = (sg % (BN / WN)) * WN;
    ACCM acc[FM][FN];
    [[unroll]] for (uint i = 0u; i < FM; i++)
        [[unroll]] for (uint j = 0u; j < FN; j++) acc[i][j] = CM_ZERO;
#include "matmul_coopmat_kloop.glsl"
    // the f32 result, EPI rows at a time (sm as floats, rows of LDC), scaled and rounded to bf16
    bool ovec = pc.N % 8u == 0u && oo % 8u == 0u;
    [[unroll]] for (uint h = 0u; h < BM / EPI; h++) {
        [[unroll]] for (uint i = 0u; i < FM; i++)
            if ((wm + i * LM) / EPI == h)
                [[unroll]] for (uint j = 0u; j < FN; j++)
                    CM_STORE(acc[i][j], ((wm + i * LM - h * EPI) * LDC + wn + j * LN) / 4u, LDC / 4u);
        barrier();
        for (uint e = t; e < EPI * BN / 8u; e += WG) {
            uint r = e / (BN / 8u), c = 8u * (e % (BN / 8u)), gm = m0 + h * EPI + r, gn = n0 + c;
            if (gm >= pc.M) continue;
            int pa = exp_of(keys[ka + gm]) - 141;
            uvec4 v0 = sm[(r * LDC + c) / 4u], v1 = sm[(r * LDC + c) / 4u + 1u];
            int pb[8];
            [[unroll]] for (uint j = 0u; j < 8u; j++) pb[j] = exp_at(kb, gn + j, pc.N) - 141;
            uint w[8];
            if (F32_OUT != 0u) {
                [[unroll]] for (uint j = 0u; j < 8u; j++)
                    if (gn + j < pc.N)
                        of[oo + gm * pc.N + gn + j] = rescale(uintBitsToFloat(j < 4u ? v0[j] : v1[j - 4u]), pa, pb[j]);
                continue;
            }
            [[unroll]] for (uint j = 0u; j < 8u; j++)
                w[j] = f32_to_bf16(rescale(uintBitsToFloat(j < 4u ? v0[j] : v1[j - 4u]), pa, pb[j]));
            if (ovec) {
                if (gn < pc.N)
                    o4[(oo + gm * pc.N + gn) / 8u] =
                        uvec4(w[0] | (w[1] << 16), w[2] | (w[3] << 16), w[4] | (w[5] << 16), w[6] | (w[7] << 16));
            } else {
                [[unroll]] for (uint j = 0u; j < 8u; j++)
                    if (gn + j < pc.N) o[oo + gm * pc.N + gn + j] = uint16_t(w[j]);
            }
        }
        barrier();
    }
}
