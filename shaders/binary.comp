#version 450
#extension GL_GOOGLE_include_directive : require
// Binary elementwise ops: out = a OP b, all of out's shape (a, b broadcast
// through stride-0 dims). a (binding 0), b (binding 1) of dtype A_DT; out
// (binding 2) of dtype A_DT, or bool (-DCMP) for comparisons.
// OP (specialization constant 1):
//   0 add  1 sub  2 mul  3 div  4 pow  5 maximum  6 minimum       (NaN propagates in 5, 6)
//   7 eq   8 ne   9 lt  10 le  11 gt  12 ge                      (-DCMP variants)
//  13 gelu_backward erf: dy * (Phi(x) + x phi(x))   14 gelu_backward tanh   (a = dy, b = x)
// Variants: binary_<dt>, compare_<dt>.
#include "types.glsl"
#include "elem.glsl"
#if A_DT == DT_F64
#define MATH64
#endif
#include "math.glsl"

layout(constant_id = 1) const uint OP = 0;
#ifdef CMP
#define O_DT DT_BOOL
#else
#define O_DT A_DT
#endif

layout(binding = 0) readonly buffer BA { ST(A_DT) a[]; };
layout(binding = 1) readonly buffer BB { ST(A_DT) b[]; };
layout(binding = 2) writeonly buffer BO { ST(O_DT) o[]; };

#define V VT(A_DT)

#ifdef CMP
uint apply(V x, V y) {
    switch (OP) {
    case 7: return uint(x == y);
    case 8: return uint(x != y);
    case 9: return uint(x < y);
    case 10: return uint(x <= y);
    case 11: return uint(x > y);
    default: return uint(x >= y);
    }
}
#else
V apply(V x, V y) {
    switch (OP) {
    case 0: return x + y;
    case 1: return x - y;
    case 2: return x * y;
#if (A_DT <= DT_BF16)
    case 3: return x / y;
    case 5: return isnan(x) || isnan(y) ? x + y : max(x, y);
    case 6: return isnan(x) || isnan(y) ? x + y : min(x, y);
    case 4: return t_pow(x, y);
    case 13: return x * gelu_grad_erf(y);
    case 14: return x * gelu_grad_tanh(y);
#else
    case 5: return max(x, y);
    case 6: return min(x, y);
#endif
    default: return x;
    }
}
#endif

void main() {
    FOR_EACH_ELEMENT(i) {
        uvec4 off = elem_offsets(i);
        o[off.z] = SV(O_DT, apply(LD(A_DT, a[off.x]), LD(A_DT, b[off.y])));
    }
}
