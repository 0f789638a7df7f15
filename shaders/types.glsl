// Storage and value types per Trident dtype.
//
// A shader names the dtype of each operand with -D<L>_DT=<code> (codes mirror
// td_dtype: 0 f32, 1 f64, 2 f16, 3 bf16, 4 i32, 5 i64, 6 u8, 7 bool) and uses:
//   ST(dt)      the type in the buffer            (f16/bf16 are raw uint16_t bits)
//   VT(dt)      the type arithmetic runs in       (float for f32/f16/bf16, double,
//                                                  int, int64_t, uint for u8/bool)
//   LD(dt, x)   buffer element -> value
//   SV(dt, v)   value -> buffer element
//   (dt <= DT_BF16)  true for the floating dtypes (usable in #if)
// Half conversions round to nearest even, bit for bit like the CPU backend
// (src/backend_cpu/cpu.h), instead of the implementation-defined GLSL casts.
#ifndef TYPES_GLSL
#define TYPES_GLSL

#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

#define DT_F32 0
#define DT_F64 1
#define DT_F16 2
#define DT_BF16 3
#define DT_I32 4
#define DT_I64 5
#define DT_U8 6
#define DT_BOOL 7

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

float f16_to_f32(uint h) {
    uint s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 0x1Fu) return uintBitsToFloat(s | 0x7F800000u | (m << 13));
    if (e != 0u) return uintBitsToFloat(s | ((e + 112u) << 23) | (m << 13));
    float f = float(m) * 5.9604644775390625e-8; // subnormal: m * 2^-24, exact
    return s != 0u ? -f : f;
}

uint f32_to_f16(float f) {
    uint x = floatBitsToUint(f);
    uint sign = (x >> 16) & 0x8000u, ax = x & 0x7FFFFFFFu;
    if (ax >= 0x7F800000u) return sign | 0x7C00u | (ax > 0x7F800000u ? 0x200u : 0u); // inf, nan
    if (ax >= 0x477FF000u) return sign | 0x7C00u;                                     // overflow
    if (ax < 0x38800000u) return sign | uint(roundEven(uintBitsToFloat(ax) * 16777216.0)); // to the 2^-24 grid
    uint r = ax + 0xFFFu + ((ax >> 13) & 1u); // round to nearest even on bit 13
    return sign | ((r - 0x38000000u) >> 13);
}

float bf16_to_f32(uint h) { return uintBitsToFloat(h << 16); }

uint f32_to_bf16(float f) {
    uint x = floatBitsToUint(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (x >> 16) | 0x40u; // quiet nan
    return (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16;
}

#define ST_0 float
#define ST_1 double
#define ST_2 uint16_t
#define ST_3 uint16_t
#define ST_4 int
#define ST_5 int64_t
#define ST_6 uint8_t
#define ST_7 uint8_t

#define VT_0 float
#define VT_1 double
#define VT_2 float
#define VT_3 float
#define VT_4 int
#define VT_5 int64_t
#define VT_6 uint
#define VT_7 uint

#define LD_0(x) (x)
#define LD_1(x) (x)
#define LD_2(x) f16_to_f32(uint(x))
#define LD_3(x) bf16_to_f32(uint(x))
#define LD_4(x) (x)
#define LD_5(x) (x)
#define LD_6(x) uint(x)
#define LD_7(x) (uint(x) != 0u ? 1u : 0u)

#define SV_0(v) float(v)
#define SV_1(v) double(v)
#define SV_2(v) uint16_t(f32_to_f16(float(v)))
#define SV_3(v) uint16_t(f32_to_bf16(float(v)))
#define SV_4(v) int(v)
#define SV_5(v) int64_t(v)
#define SV_6(v) uint8_t(v)
#define SV_7(v) uint8_t(v)

#define ST(dt) CAT(ST_, dt)
#define VT(dt) CAT(VT_, dt)
#define LD(dt, x) CAT(LD_, dt)(x)
#define SV(dt, v) CAT(SV_, dt)(v)

// A 64-bit integer index stored in a buffer of uint words (no shaderInt64
// needed): element k is words 2k (low) and 2k+1 (high). Values in
// [-2^31, 2^31) read exactly as int; idx64_ok() tells whether that holds.
#define IDX_LO(buf, k) int(buf[2u * (k)])
#define IDX_OK(buf, k) (buf[2u * (k) + 1u] == (int(buf[2u * (k)]) < 0 ? 0xFFFFFFFFu : 0u))

#endif
