#version 450
#extension GL_GOOGLE_include_directive : require
// COPY: out = cast(in), both views any strides (in may broadcast).
// in (binding 0) dtype A_DT, out (binding 1) dtype O_DT. Variants copy_<a>_<o>.
// Conversions follow the CPU backend: float -> integer truncates toward zero
// and saturates (NaN -> 0); integer narrowing saturates; -> bool is v != 0.
#include "types.glsl"
#include "elem.glsl"

layout(binding = 0) readonly buffer BA { ST(A_DT) a[]; };
layout(binding = 1) writeonly buffer BO { ST(O_DT) o[]; };

#define AV VT(A_DT)
#define OV VT(O_DT)

OV convert(AV v) {
#if O_DT == DT_BOOL
    return v != AV(0) ? 1u : 0u;
#elif (O_DT <= DT_BF16) || A_DT == DT_BOOL || A_DT == DT_U8 || (A_DT == DT_I32 && O_DT == DT_I64)
    return OV(v); // exact, or rounding to a float type
#else
    // saturate into the integer range of O_DT (NaN fails every comparison -> 0)
#if O_DT == DT_I32
    const AV lo = AV(-2147483648.0), hi = AV(2147483647.0);
    const OV lo_o = OV(-2147483647 - 1), hi_o = OV(2147483647);
#elif O_DT == DT_I64
    const AV lo = AV(-9223372036854775808.0), hi = AV(9223372036854774784.0);
    const OV lo_o = OV(-9223372036854775807l - 1l), hi_o = OV(9223372036854774784l);
#else
    const AV lo = AV(0), hi = AV(255);
    const OV lo_o = OV(0), hi_o = OV(255);
#endif
#if (A_DT <= DT_BF16)
    if (isnan(v)) return OV(0);
#endif
    if (v <= lo) return lo_o;
    if (v >= hi) return hi_o;
    return OV(v);
#endif
}

void main() {
    FOR_EACH_ELEMENT(i) {
        uvec4 off = elem_offsets(i);
        o[off.y] = SV(O_DT, convert(LD(A_DT, a[off.x])));
    }
}
