#version 450
#include <trident.glsl>
// Fused LSTM cell (custom op rnn.lstm_cell, src/nn/rnn_cells.c), float32. B batch, H hidden (td.cols).
//   c, c' (cn), h' (hn) are [B, H]; gx, gh are [B, 4H] with torch's chunks i, f, g, o
//   i, f, o = sigmoid(gx + gh), g = tanh(gx + gh);  c' = f * c + i * g;  h' = o * tanh(c')
layout(local_size_x = TD_BLOCK) in;
layout(std430, binding = 0) readonly buffer C { float c[]; };
layout(std430, binding = 1) readonly buffer GX { float gx[]; };
layout(std430, binding = 2) readonly buffer GH { float gh[]; };
layout(std430, binding = 3) writeonly buffer HN { float hn[]; };
layout(std430, binding = 4) writeonly buffer CN { float cn[]; };

float sig(float x) { return 1.0 / (1.0 + exp(-x)); }
float th(float x) { return tanh(clamp(x, -10.0, 10.0)); } // tanh(10) is 1 in f32; unclamped tanh may overflow exp

void main() {
    uint t = td_global_id();
    if (t >= td.n) return;
    uint H = td.cols, b = t / H, j = t % H, k = b * 4u * H + j;
    float i = sig(gx[k] + gh[k]), f = sig(gx[k + H] + gh[k + H]);
    float g = th(gx[k + 2u * H] + gh[k + 2u * H]), o = sig(gx[k + 3u * H] + gh[k + 3u * H]);
    float cc = f * c[t] + i * g;
    cn[t] = cc;
    hn[t] = o * th(cc);
}
