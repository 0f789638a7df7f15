// Double-precision exp, expm1, log, sin, cos and erfc, which GLSL lacks: range
// reduction and nested Taylor polynomials, within a few ulp over the ranges
// training uses (sin/cos reduce by pi/2 in three parts: good to |x| ~ 1e9).
// Needs shaderFloat64.
#ifndef MATH64_GLSL
#define MATH64_GLSL

const double D_LN2_HI = 6.93147180369123816490e-01LF, D_LN2_LO = 1.90821492927058770002e-10LF;
const double D_INF = 1.0LF / 0.0LF;

// e^r = 1 + r (1 + r/2 (1 + r/3 (...))), |r| <= ln2/2: 13 terms reach 1e-18
double d_exp_small(double r) {
    double p = 1.0LF;
    for (int i = 13; i >= 1; i--) p = 1.0LF + p * r / double(i);
    return p;
}

double d_exp(double x) {
    if (isnan(x)) return x;
    if (x > 709.8LF) return D_INF;
    if (x < -745.2LF) return 0.0LF;
    double k = floor(x * 1.4426950408889634LF + 0.5LF); // round(x / ln2)
    precise double r = (x - k * D_LN2_HI) - k * D_LN2_LO; // precise: never reassociated into x - k ln2
    return ldexp(d_exp_small(r), int(k));
}

// e^x - 1 without cancellation near 0
double d_expm1(double x) {
    if (abs(x) >= 0.5LF) return d_exp(x) - 1.0LF;
    double p = 1.0LF;
    for (int i = 18; i >= 2; i--) p = 1.0LF + p * x / double(i);
    return x * p;
}

// log m = 2 atanh(s), s = (m-1)/(m+1), m in [sqrt(1/2), sqrt(2)): |s| <= 0.172
double d_log(double x) {
    if (isnan(x) || x == D_INF) return x;
    if (x <= 0.0LF) return x == 0.0LF ? -D_INF : 0.0LF / 0.0LF;
    int e;
    double m = frexp(x, e);
    if (m < 0.70710678118654752LF) m *= 2.0LF, e -= 1;
    double s = (m - 1.0LF) / (m + 1.0LF), t = s * s, p = 0.0LF;
    for (int k = 12; k >= 0; k--) p = p * t + 1.0LF / double(2 * k + 1);
    precise double lo = 2.0LF * s * p + double(e) * D_LN2_LO;
    return double(e) * D_LN2_HI + lo;
}

// (sin x, cos x)
dvec2 d_sincos(double x) {
    double q = floor(x * 0.63661977236758134308LF + 0.5LF); // round(x / (pi/2))
    // precise: the three-part reduction must not be reassociated (NVIDIA's compiler does)
    precise double r = ((x - q * 1.57079632673412561417LF) - q * 6.07710050630396597660e-11LF) -
                       q * 2.02226624871116645580e-21LF;
    double t = r * r, s = 1.0LF, c = 1.0LF;
    for (int k = 11; k >= 1; k--) {
        s = 1.0LF - s * t / double((2 * k) * (2 * k + 1));
        c = 1.0LF - c * t / double((2 * k - 1) * (2 * k));
    }
    s *= r;
    int qi = int(q - 4.0LF * floor(q * 0.25LF));
    return qi == 0 ? dvec2(s, c) : qi == 1 ? dvec2(c, -s) : qi == 2 ? dvec2(-s, -c) : dvec2(-c, s);
}

// erfc(|x|): 1 - erf with erf = 2x/sqrt(pi) e^-x^2 sum (2x^2)^n / (1*3*...*(2n+1)) (all
// terms positive) below 3, else the continued fraction e^-x^2 / (sqrt(pi) (x + 1/2/(x + 1/(x +
// 3/2/(x + ...))))); erfc(x) = 2 - erfc(|x|) for x < 0.
double d_erfc(double x) {
    double z = abs(x);
    if (isnan(x)) return x;
    double r;
    if (z < 3.0LF) {
        double t = 2.0LF * z * z, term = 1.0LF, sum = 1.0LF;
        for (int n = 1; n < 80 && term > 1e-17LF * sum; n++) {
            term *= t / double(2 * n + 1);
            sum += term;
        }
        r = 1.0LF - 1.12837916709551257390LF * z * d_exp(-z * z) * sum;
    } else {
        double k = z;
        for (int n = 60; n >= 1; n--) k = z + (double(n) * 0.5LF) / k;
        r = d_exp(-z * z) / (1.77245385090551602730LF * k);
    }
    return x < 0.0LF ? 2.0LF - r : r;
}

#endif
