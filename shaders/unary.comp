// variants: num
#version 450
#extension GL_GOOGLE_include_directive : require
// Unary elementwise ops: out = f(x); x (binding 0) any strides, out (binding 1)
// of x's shape and dtype A_DT. OP (specialization constant 1):
//   0 neg  1 abs  2 exp  3 log  4 sqrt  5 rsqrt  6 sin  7 cos  8 tanh  9 sigmoid
//  10 relu  11 gelu (erf: x Phi(x))  12 gelu (tanh form)  13 silu  14 clamp(x, lo=sc0, hi=sc1)
// Integer variants have 0, 1, 10, 14; f64 computes exp, log, sin, cos with
// math64.glsl. NaN passes through relu and clamp, as in PyTorch.
// Variants unary_<dt>.
#include "types.glsl"
#include "elem.glsl"
#if A_DT == DT_F64
#define MATH64
#endif
#include "math.glsl"

layout(constant_id = 1) const uint OP = 0;
layout(binding = 0) readonly buffer BA { ST(A_DT) a[]; };
layout(binding = 1) writeonly buffer BO { ST(A_DT) o[]; };

#define V VT(A_DT)

V apply(V x) {
    switch (OP) {
#if A_DT == DT_U8
    case 0: return V(0) - x; // wraps, as uint8 negation does
    case 1: return x;
#else
    case 0: return -x;
    case 1: return abs(x);
#endif
#if (A_DT <= DT_BF16)
    case 4: return sqrt(x);
    case 5: return V(1) / sqrt(x);
    case 10: return x > V(0) || isnan(x) ? x : V(0);
    case 14: return isnan(x) ? x : min(max(x, SCALAR(A_DT, 0u)), SCALAR(A_DT, 1u));
#if A_DT == DT_F64
    case 2: return d_exp(x);
    case 3: return d_log(x);
    case 6: return d_sincos(x).x;
    case 7: return d_sincos(x).y;
#else
    case 2: return exp(x);
    case 3: return log(x);
    case 6: return sin(x);
    case 7: return cos(x);
#endif
    case 8: return t_tanh(x);
    case 9: return t_sigmoid(x);
    case 11: return x * t_phi_cdf(x);
    case 12: return gelu_tanh(x);
    case 13: return x * t_sigmoid(x);
#else
    case 10: return max(x, V(0));
    case 14: return min(max(x, SCALAR(A_DT, 0u)), SCALAR(A_DT, 1u));
#endif
    default: return x;
    }
}

void main() {
    FOR_EACH_ELEMENT(i) {
        uvec4 off = elem_offsets(i);
        o[off.y] = SV(A_DT, apply(LD(A_DT, a[off.x])));
    }
}
