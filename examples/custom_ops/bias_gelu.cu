#include <trident.cuh>
// Fused bias + GELU (tanh form), forward and backward; scalar_t is float or double.
//   x, y, dy, du are [rows, cols], b is [cols]:  u = x[r, c] + b[c]
//   forward:  y = 0.5 * u * (1 + t),  t = tanh(k * (u + 0.044715 * u^3)),  k = sqrt(2 / pi)
//   backward: du = dy * (0.5 * (1 + t) + 0.5 * u * (1 - t^2) * k * (1 + 3 * 0.044715 * u^2))

extern "C" __global__ void bias_gelu(const scalar_t *x, const scalar_t *b, scalar_t *y, td_args a) {
    unsigned i = td_global_id();
    if (i >= a.n) return;
    scalar_t u = x[i] + b[i % a.cols];
    scalar_t t = tanh((scalar_t)0.7978845608028654 * (u + (scalar_t)0.044715 * u * u * u));
    y[i] = (scalar_t)0.5 * u * (1 + t);
}

extern "C" __global__ void bias_gelu_backward(const scalar_t *x, const scalar_t *b, const scalar_t *dy, scalar_t *du,
                                              td_args a) {
    unsigned i = td_global_id();
    if (i >= a.n) return;
    const scalar_t k = (scalar_t)0.7978845608028654, c = (scalar_t)0.044715;
    scalar_t u = x[i] + b[i % a.cols];
    scalar_t t = tanh(k * (u + c * u * u * u));
    du[i] = dy[i] * ((scalar_t)0.5 * (1 + t) + (scalar_t)0.5 * u * (1 - t * t) * k * (1 + 3 * c * u * u));
}
