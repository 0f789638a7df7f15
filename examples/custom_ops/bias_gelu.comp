#version 450
#include <trident.glsl>
// Fused bias + GELU (tanh form), forward.
//   x, y are [rows, cols], b is [cols]:  u = x[r, c] + b[c]
//   y = 0.5 * u * (1 + tanh(k * (u + 0.044715 * u^3))),  k = sqrt(2 / pi)
layout(local_size_x = TD_BLOCK) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };

void main() {
    uint i = td_global_id();
    if (i >= td.n) return;
    float u = x[i] + b[i % td.cols];
    float t = tanh(clamp(0.7978845608 * (u + 0.044715 * u * u * u), -10.0, 10.0)); // tanh(10) is 1 in f32
    y[i] = 0.5 * u * (1.0 + t);
}
