#version 450
#include <trident.glsl>
// Fused GRU cell (custom op rnn.gru_cell, src/nn/rnn_cells.c), float32. B batch, H hidden (td.cols).
//   h, h' (hn) are [B, H]; gx = x W_ih^T + b_ih and gh = h W_hh^T + b_hh are [B, 3H] with torch's chunks r, z, n
//   r, z = sigmoid(gx + gh);  n = tanh(gx_n + r * gh_n)  (b_hn inside r * (...), as torch);  h' = (1 - z) * n + z * h
layout(local_size_x = TD_BLOCK) in;
layout(std430, binding = 0) readonly buffer Hb { float h[]; };
layout(std430, binding = 1) readonly buffer GX { float gx[]; };
layout(std430, binding = 2) readonly buffer GH { float gh[]; };
layout(std430, binding = 3) writeonly buffer HN { float hn[]; };

float sig(float x) { return 1.0 / (1.0 + exp(-x)); }
float th(float x) { return tanh(clamp(x, -10.0, 10.0)); } // tanh(10) is 1 in f32; unclamped tanh may overflow exp

void main() {
    uint t = td_global_id();
    if (t >= td.n) return;
    uint H = td.cols, b = t / H, j = t % H, k = b * 3u * H + j;
    float r = sig(gx[k] + gh[k]), z = sig(gx[k + H] + gh[k + H]);
    float n = th(gx[k + 2u * H] + r * gh[k + 2u * H]);
    hn[t] = (1.0 - z) * n + z * h[t];
}
