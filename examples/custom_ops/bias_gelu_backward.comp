#version 450
#include <trident.glsl>
// Fused bias + GELU (tanh form), backward: du = dy * gelu'(u), u = x + b.
//   x, dy, du are [rows, cols], b is [cols]. (dx = du; db = du summed over rows, by td_sum.)
//   forward: y = 0.5 * u * (1 + t),  t = tanh(k * (u + 0.044715 * u^3))
//   gelu'(u) = 0.5 * (1 + t) + 0.5 * u * (1 - t^2) * k * (1 + 3 * 0.044715 * u^2)
layout(local_size_x = TD_BLOCK) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) readonly buffer DY { float dy[]; };
layout(std430, binding = 3) writeonly buffer DU { float du[]; };

void main() {
    uint i = td_global_id();
    if (i >= td.n) return;
    float u = x[i] + b[i % td.cols];
    float k = 0.7978845608;
    float t = tanh(clamp(k * (u + 0.044715 * u * u * u), -10.0, 10.0));
    du[i] = dy[i] * (0.5 * (1.0 + t) + 0.5 * u * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * u * u));
}
