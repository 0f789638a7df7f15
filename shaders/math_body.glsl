// Formulas shared by float and double: included by math.glsl with MT (the
// type) and M_EXP, M_LOG2, M_EXP2, M_TANH, M_ERFC defined. Constants are
// written as double literals: MT(c) folds them at compile time. No include guard: it
// is instantiated once per type (overloads).

MT t_tanh(MT x) { return isnan(x) ? x : M_TANH(x); }
MT t_sigmoid(MT x) { return MT(1) / (MT(1) + M_EXP(-x)); }
MT t_phi_cdf(MT x) { return MT(0.5LF) * M_ERFC(-x * MT(0.70710678118654752440LF)); } // no cancellation for x << 0

// a^b with C pow semantics for a <= 0 and exact small integer powers.
MT t_pow(MT a, MT b) {
    if (b == MT(0)) return MT(1);
    if (isnan(a) || isnan(b)) return a + b;
    bool b_int = b == floor(b);
    if (b_int && abs(b) <= MT(64)) {
        MT r = MT(1), p = a;
        uint e = uint(abs(b));
        while (e != 0u) {
            if ((e & 1u) != 0u) r *= p;
            p *= p;
            e >>= 1;
        }
        return b < MT(0) ? MT(1) / r : r;
    }
    if (a < MT(0)) {
        if (!b_int) return MT(0) / MT(0);
        MT r = M_EXP2(b * M_LOG2(-a));
        return b - MT(2) * floor(b * MT(0.5LF)) == MT(1) ? -r : r;
    }
    if (a == MT(0)) return b > MT(0) ? MT(0) : MT(1) / MT(0);
    return M_EXP2(b * M_LOG2(a));
}

// 0.5 x (1 + tanh(s (x + c x^3))), s = sqrt(2/pi), c = 0.044715
MT gelu_tanh(MT x) {
    MT u = MT(0.79788456080286535588LF) * (x + MT(0.044715LF) * x * x * x);
    return MT(0.5LF) * x * (MT(1) + t_tanh(u));
}

// d/dx [x Phi(x)] = Phi(x) + x phi(x)
MT gelu_grad_erf(MT x) { return t_phi_cdf(x) + x * MT(0.39894228040143267794LF) * M_EXP(MT(-0.5) * x * x); }

// d/dx [0.5 x (1 + tanh(u))], u = s (x + c x^3): 0.5 (1 + t) + 0.5 x (1 - t^2) s (1 + 3 c x^2),
// as p + 2 x p q s (1 + 3 c x^2) with p = (1 + t) / 2 = sigmoid(2u), q = 1 - p = sigmoid(-2u): 1 + t cancels
// where t is near -1 (x below about -2), the sigmoids keep their relative precision
MT gelu_grad_tanh(MT x) {
    MT u2 = MT(1.5957691216057307118LF) * (x + MT(0.044715LF) * x * x * x);
    MT p = MT(1) / (MT(1) + M_EXP(-u2)), q = MT(1) / (MT(1) + M_EXP(u2));
    return p + MT(2) * x * p * q * MT(0.79788456080286535588LF) * (MT(1) + MT(0.134145LF) * x * x);
}
