// Math that GLSL lacks or defines loosely, for float and (with -DMATH64)
// double: erfc, a NaN-safe tanh, the sigmoid, pow for negative bases, the
// normal CDF and the GELU derivatives. The shared formulas live in
// math_body.glsl, instantiated once per type as overloads.
#ifndef MATH_GLSL
#define MATH_GLSL

// erfc(x) in float: the Chebyshev fit of Numerical Recipes' erfcc (fractional
// error < 1.2e-7 everywhere) for |x|, and 2 - erfc(|x|) for x < 0.
float t_erfc(float x) {
    float z = abs(x);
    float t = 1.0 / (1.0 + 0.5 * z);
    float r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
              t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
              t * (-0.82215223 + t * 0.17087277)))))))));
    return x >= 0.0 ? r : 2.0 - r;
}
float t_tanh_core(float x) { return tanh(clamp(x, -15.0, 15.0)); }

#define MT float
#define M_EXP(x) exp(x)
#define M_LOG2(x) log2(x)
#define M_EXP2(x) exp2(x)
#define M_TANH(x) t_tanh_core(x)
#define M_ERFC(x) t_erfc(x)
#include "math_body.glsl"
#undef MT
#undef M_EXP
#undef M_LOG2
#undef M_EXP2
#undef M_TANH
#undef M_ERFC

#ifdef MATH64
#include "math64.glsl"
double d_tanh_core(double x) {
    double e = d_expm1(2.0LF * abs(min(abs(x), 20.0LF)));
    double t = e / (e + 2.0LF);
    return x < 0.0LF ? -t : t;
}
#define MT double
#define M_EXP(x) d_exp(x)
#define M_LOG2(x) (d_log(x) * 1.44269504088896340736LF)
#define M_EXP2(x) d_exp((x) * 0.69314718055994530942LF)
#define M_TANH(x) d_tanh_core(x)
#define M_ERFC(x) d_erfc(x)
#include "math_body.glsl"
#endif

#endif
