// Float helpers GLSL lacks or defines loosely: erf, a NaN-safe tanh, pow for
// negative bases, the normal CDF and the GELU derivatives.
#ifndef MATH_GLSL
#define MATH_GLSL

// erf(x): Taylor series near 0 (no cancellation), else 1 - erfc(|x|) with the
// Chebyshev fit of Numerical Recipes' erfcc (fractional error < 1.2e-7).
float t_erf(float x) {
    float z = abs(x);
    if (z < 0.5) {
        float x2 = x * x;
        return 1.1283791670955126 * x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (0.1 + x2 * (-1.0 / 42.0 +
               x2 * (1.0 / 216.0 + x2 * (-1.0 / 1320.0))))));
    }
    float t = 1.0 / (1.0 + 0.5 * z);
    float r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
              t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
              t * (-0.82215223 + t * 0.17087277)))))))));
    return x >= 0.0 ? 1.0 - r : r - 1.0;
}

float t_tanh(float x) { return isnan(x) ? x : tanh(clamp(x, -15.0, 15.0)); }
float t_sigmoid(float x) { return 1.0 / (1.0 + exp(-x)); }
float t_phi_cdf(float x) { return 0.5 * (1.0 + t_erf(x * 0.70710678118654752)); }

// a^b with C pow semantics for a <= 0 and exact small integer powers.
float t_pow(float a, float b) {
    if (b == 0.0) return 1.0;
    if (isnan(a) || isnan(b)) return a + b;
    bool b_int = b == floor(b);
    if (b_int && abs(b) <= 64.0) {
        float r = 1.0, p = a;
        uint e = uint(abs(b));
        while (e != 0u) {
            if ((e & 1u) != 0u) r *= p;
            p *= p;
            e >>= 1;
        }
        return b < 0.0 ? 1.0 / r : r;
    }
    if (a < 0.0) {
        if (!b_int) return uintBitsToFloat(0x7FC00000u);
        float r = exp2(b * log2(-a));
        return mod(b, 2.0) == 1.0 ? -r : r;
    }
    if (a == 0.0) return b > 0.0 ? 0.0 : uintBitsToFloat(0x7F800000u);
    return exp2(b * log2(a));
}

const float SQRT_2_OVER_PI = 0.79788456080286536;

float gelu_tanh(float x) {
    float u = SQRT_2_OVER_PI * (x + 0.044715 * x * x * x);
    return 0.5 * x * (1.0 + t_tanh(u));
}

// d/dx [x Phi(x)] = Phi(x) + x phi(x)
float gelu_grad_erf(float x) { return t_phi_cdf(x) + x * 0.39894228040143268 * exp(-0.5 * x * x); }

// d/dx [0.5 x (1 + tanh(u))], u = s (x + c x^3): 0.5 (1 + t) + 0.5 x (1 - t^2) s (1 + 3 c x^2)
float gelu_grad_tanh(float x) {
    float u = SQRT_2_OVER_PI * (x + 0.044715 * x * x * x);
    float t = t_tanh(u);
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * SQRT_2_OVER_PI * (1.0 + 3.0 * 0.044715 * x * x);
}

#endif
