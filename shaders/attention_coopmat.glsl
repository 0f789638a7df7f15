// The cooperative-matrix attention shaders' common part (attention_coopmat.comp, the forward;
// attention_coopmat_bwd.comp, the backward): the extensions, push block (shaders/attention.comp's; C mirror
// vk_pc_attn in src/backend_vulkan/vk_ops_attention.c), the fragment types of NV or, with -DCOOPMAT_KHR=1, KHR
// cooperative matrices, and the storage type HT of q, k, v, out and their gradients with A_DT = 2 (f16) or 3 (bf16).
// bf16 reaches the f16 tensor cores scaled by one power of two per operand and head (bf16 has f32's exponent
// range, f16 tops out at 65504), results accumulated in f32 and rounded once to bf16 (FROM_F):
//   before the kernels, shaders/attention_bf16_amax.comp writes each head's largest finite magnitude of q, k, v
//   (and dout for the backward) as bf16 bits, the head's key, to word 4 n + 0 (q) .. 3 (dout) of a small buffer
//   (the forward's binding 3, the front of the backward's lse binding); a kernel takes the shift
//   sh = head_shift(key) = 141 - E (E the max's f32 biased exponent, clamped to [15, 254]), which puts the head's
//   max into [2^14, 2^15), and STAGE_SHIFT stages every tile of that operand as the f16 of x 2^sh in one pass.
//   bf16's 8-bit significand fits f16's 11, so an x within 2^28 of its head's max is staged exactly (one exact f32
//   multiply, one exact f32 -> f16 conversion); one further below lands on f16's subnormal grid: |dx| <= 2^-24
//   2^-sh < 2^-38 max (only where a head's values span more than 2^28). A product of two staged
//   operands (f16 products are exact in f32, summed in f32) is the product of the values times 2^(sh_a + sh_b),
//   constant over the head: the kernels accumulate in staged units and undo the shifts once, with unshift (two
//   exact power-of-two steps of one sign), on the scores, dP and the outputs. So in range the scores, dP and the
//   outputs are those of an f32 computation of the same bf16 values (up to the order of the f32 sums), at any
//   magnitude f32 holds. What stays rounded to f16 is what was before: P in [0, 1] and, in the backward, dS,
//   whose range no key bounds well, so it adapts: each step's 16 x 32 dS block of a subgroup is staged with the
//   power of two that puts its own largest |dS| into [2^14, 2^15) (a subgroup max of values kept in registers)
//   and that step's products unshifted as they are added (CM_ADD_SHIFTED). An inf or NaN input does not count
//   toward its head's key and stays inf or NaN when staged. So every result is exact to its head's largest; a
//   row of values 2^28 or more below its head's largest keeps only f16's subnormal precision (tests/
//   test_attention_vk.c's wide case: such rows of out 2e-2 off, of dq up to 0.3 where the row cancels, relative
//   to their own size).
// -DBF16_BITS=1 with A_DT = 3 (the native bf16 kernels: vk_ops_attention.c retypes their words with
// src/backend_vulkan/vk_spirv_bf16.c, every 16-bit float becoming bf16, for devices with VK_KHR_shader_bfloat16's
// cooperative matrices): no keys, no shifts. The tiles are staged as the bf16 bits they are into the 16-bit float
// arrays (bf16 after the retyping), P and dS are rounded from f32 to bf16 bits with integer arithmetic (TO_H:
// f32_to_bf16, nearest even) and stored as the 16-bit values they are, the fragments are bf16 A and B matrices
// with f32 accumulators (no bf16 accumulator matrix, which Vulkan would allow only where the driver lists bf16 x
// bf16 -> bf16), and a stored bf16 is read back as bits (H2F: packFloat2x16, bf16_to_f32): so the module does no
// arithmetic or comparison on 16-bit floats (bf16 allows none). Results: products of the bf16 values summed in
// f32, P and dS rounded to bf16 (8 bits, f16's 11 in the scaled kernels) at any magnitude f32 holds, no subnormal
// floor. With COOPMAT_EMU (the _emu_native variants, TRIDENT_VK_ATTN=emulated with TRIDENT_VK_BF16=native, so that
// lavapipe runs the same kernels unretyped) the f16 arrays hold the same bits, and H2F reads them as bf16.
// -DCOOPMAT_EMU=1 (the _emu variants, run by TRIDENT_VK_ATTN=emulated on any device with f16 arithmetic, e.g.
// lavapipe, so that the tests check the kernels' tiling, masking and indexing): the same kernels with 16 x 16 x 16
// fragments spread over virtual 32-invocation subgroups (CM_* emulate the cooperative operations element by
// element: products of f16 values summed in f32, as on tensor cores).
#ifndef ATTENTION_COOPMAT_GLSL
#define ATTENTION_COOPMAT_GLSL
#if defined(COOPMAT_EMU)
#elif defined(COOPMAT_KHR)
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#else
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#endif
#extension GL_KHR_shader_subgroup_basic : require
#if !defined(COOPMAT_EMU)
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require
#include "types.glsl"

layout(push_constant) uniform PC {
    uint N, n1, L, S, E, Ev;
    uint q_off, k_off, v_off, m_off, o_off, l_off, do_off, g_off;
    uint ms0, ms1, ms2, ms3;
    float scale_f, zs_f;
    uint threshold, flags; // flags: 1 causal (2 dropout and 4 mask never come here)
    uint seed_lo, seed_hi, off_lo, off_hi;
    uint scale_lo, scale_hi, zs_lo, zs_hi;
} pc;

#if A_DT == DT_BF16 && !defined(BF16_BITS)
#define BF16_SCALED 1 // bf16 staged into f16 with the heads' powers of two
#endif

// UNPACK2(w), UNPACK2F(w): the f16 or float pair of a word of two stored elements (uvec4 views read 8 at a time);
// TO_H(v): float v as a staged 16-bit element (f16: converted; bf16 native: its bf16 bits); H2F(h): back to float
#if defined(BF16_BITS)
#define UNPACK2(w) unpackFloat2x16(w) // the bits as they are
#define TO_H(v)    unpackFloat2x16(f32_to_bf16(v)).x
#define H2F(h)     bf16_to_f32(packFloat2x16(f16vec2(h, float16_t(0.0))))
#else
#define TO_H(v)    float16_t(v)
#define H2F(h)     float(h)
#endif
#if A_DT == DT_BF16
#define UNPACK2F(w) vec2(uintBitsToFloat((w) << 16), uintBitsToFloat((w) & 0xFFFF0000u))
#ifndef BF16_BITS
#define UNPACK2(w)  f16vec2(float16_t(uintBitsToFloat((w) << 16)), float16_t(uintBitsToFloat((w) & 0xFFFF0000u)))
#endif
#define HT          uint16_t
#define FROM_F(v)   uint16_t(f32_to_bf16(v))
#else
#define UNPACK2(w)  unpackFloat2x16(w)
#define UNPACK2F(w) unpackHalf2x16(w)
#define HT          float16_t
#define FROM_F(v)   float16_t(v)
#endif

#if defined(COOPMAT_EMU)
// 16 x 16 fragments over a virtual subgroup of 32 invocations: lane l holds of an A fragment row l/2 (16), of a B
// fragment columns 8 (l%2) .. +8 (16 x 8), of an accumulator row l/2, columns 8 (l%2) .. +8; the length of x
// tells which (a compile-time constant).
struct CMA { float x[16]; };
struct CMB { float x[128]; };
struct CMC { float x[8]; };
#define HALF  CMA
#define HALFB CMB
#define ACCM  CMC
uint emu_r(uint len, uint i) { return len == 128u ? i / 8u : (gl_LocalInvocationID.x % 32u) / 2u; }
uint emu_c(uint len, uint i) {
    return len == 16u ? i : (gl_LocalInvocationID.x % 2u) * 8u + (len == 128u ? i % 8u : i);
}
#define EMU_N(m) uint(m.x.length())
#define CM_ZERO emu_zero()
#define CM_LOAD(m, buf, at, stride)                                                                    \
    for (uint i_ = 0u; i_ < EMU_N(m); i_++)                                                            \
    m.x[i_] = emu_val(buf[(at) + emu_r(EMU_N(m), i_) * (stride) + emu_c(EMU_N(m), i_)])
#define CM_LOAD_T(m, buf, at, stride)                                                                  \
    for (uint i_ = 0u; i_ < EMU_N(m); i_++)                                                            \
    m.x[i_] = emu_val(buf[(at) + emu_c(EMU_N(m), i_) * (stride) + emu_r(EMU_N(m), i_)])
#define CM_STORE(m, buf, at, stride)                                                                   \
    for (uint i_ = 0u; i_ < EMU_N(m); i_++)                                                            \
    buf[(at) + emu_r(EMU_N(m), i_) * (stride) + emu_c(EMU_N(m), i_)] = m.x[i_]
#define CM_MULADD emu_mad
// an element loaded into a fragment: a staged 16-bit one (H2F) or an accumulator's float
float emu_val(float16_t h) { return H2F(h); }
float emu_val(float x) { return x; }
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
#define SUBGROUP_ID (gl_LocalInvocationID.x / 32u)
#elif defined(COOPMAT_KHR)
#define HALF  coopmat<float16_t, gl_ScopeSubgroup, LM, LK, gl_MatrixUseA>
#define HALFB coopmat<float16_t, gl_ScopeSubgroup, LK, LN, gl_MatrixUseB>
#define ACCM  coopmat<float, gl_ScopeSubgroup, LM, LN, gl_MatrixUseAccumulator>
#define CM_LOAD(m, buf, at, stride)   coopMatLoad(m, buf, at, stride, gl_CooperativeMatrixLayoutRowMajor)
#define CM_LOAD_T(m, buf, at, stride) coopMatLoad(m, buf, at, stride, gl_CooperativeMatrixLayoutColumnMajor)
#define CM_STORE(m, buf, at, stride)  coopMatStore(m, buf, at, stride, gl_CooperativeMatrixLayoutRowMajor)
#define CM_MULADD coopMatMulAdd
#define CM_ZERO ACCM(0.0)
#define SUBGROUP_ID gl_SubgroupID
#else
#define HALF  fcoopmatNV<16, gl_ScopeSubgroup, LM, LK>
#define HALFB fcoopmatNV<16, gl_ScopeSubgroup, LK, LN>
#define ACCM  fcoopmatNV<32, gl_ScopeSubgroup, LM, LN>
#define CM_LOAD(m, buf, at, stride)   coopMatLoadNV(m, buf, at, stride, false)
#define CM_LOAD_T(m, buf, at, stride) coopMatLoadNV(m, buf, at, stride, true)
#define CM_STORE(m, buf, at, stride)  coopMatStoreNV(m, buf, at, stride, false)
#define CM_MULADD coopMatMulAddNV
#define CM_ZERO ACCM(0.0)
#define SUBGROUP_ID gl_SubgroupID
#endif

float neg_inf() { return uintBitsToFloat(0xFF800000u); }

// rows r0 .. r0 + nr of the uvec4 view src4 (rows of D elements from element base, a multiple of 8; zeros from row
// `rows` on) into the f16 array dst from element at, rows LDH apart: 8 elements per load
#define STAGE8(dst, at, src4, base, r0, rows, nr)                                                      \
    for (uint e_ = gl_LocalInvocationID.x; e_ < (nr) * (D / 8u); e_ += WG) {                           \
        uint r_ = e_ / (D / 8u), c_ = (e_ % (D / 8u)) * 8u;                                            \
        uvec4 w_ = (r0) + r_ < (rows) ? src4[((base) + ((r0) + r_) * D + c_) / 8u] : uvec4(0u);        \
        [[unroll]] for (uint h_ = 0u; h_ < 4u; h_++) {                                                 \
            f16vec2 p_ = UNPACK2(w_[h_]);                                                              \
            dst[(at) + r_ * LDH + c_ + 2u * h_] = p_.x;                                                \
            dst[(at) + r_ * LDH + c_ + 2u * h_ + 1u] = p_.y;                                           \
        }                                                                                              \
    }

#ifdef BF16_SCALED
// 2^e for -126 <= e <= 127
float exp2i(int e) { return uintBitsToFloat(uint(e + 127) << 23); }
// the shift that puts values whose largest magnitude has f32 biased exponent e into [2^14, 2^15): -113 .. 126
int exp_shift(int e) { return 141 - clamp(e, 15, 254); }
// the shift of a head whose largest finite magnitude has bf16 bits key (0: none; the shift is then 126)
int head_shift(uint key) { return exp_shift(int(key >> 7)); }
// x 2^-t, x a sum of products of staged values whose shifts add to t (|t| <= 252)
float unshift(float x, int t) { return x * exp2i(-(t / 2)) * exp2i(t / 2 - t); }
// c + a 2^-t on every element of the accumulators (two exact power-of-two steps of one sign, as unshift)
#if defined(COOPMAT_EMU)
CMC emu_add_shifted(CMC c, CMC a, int t) {
    for (uint i = 0u; i < 8u; i++) c.x[i] += unshift(a.x[i], t);
    return c;
}
#define CM_ADD_SHIFTED emu_add_shifted
#else
#define CM_ADD_SHIFTED(c, a, t) ((c) + ((a) * exp2i(-((t) / 2))) * exp2i((t) / 2 - (t)))
#endif
// rows r0 .. r0 + nr of the uvec4 view src4 (as STAGE8) into dst, each bf16 x as the f16 of x f (f = 2^sh)
#define STAGE_SHIFT(dst, at, src4, base, r0, rows, nr, f)                                              \
    for (uint e_ = gl_LocalInvocationID.x; e_ < (nr) * (D / 8u); e_ += WG) {                           \
        uint r_ = e_ / (D / 8u), c_ = (e_ % (D / 8u)) * 8u;                                            \
        uvec4 w_ = (r0) + r_ < (rows) ? src4[((base) + ((r0) + r_) * D + c_) / 8u] : uvec4(0u);        \
        [[unroll]] for (uint h_ = 0u; h_ < 4u; h_++) {                                                 \
            vec2 p_ = UNPACK2F(w_[h_]) * (f);                                                          \
            dst[(at) + r_ * LDH + c_ + 2u * h_] = float16_t(p_.x);                                     \
            dst[(at) + r_ * LDH + c_ + 2u * h_ + 1u] = float16_t(p_.y);                                \
        }                                                                                              \
    }
#endif
#endif
