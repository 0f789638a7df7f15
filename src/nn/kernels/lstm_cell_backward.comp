#version 450
#include <trident.glsl>
// Backward of the fused LSTM cell (lstm_cell.comp), float32. B batch, H hidden (td.cols).
//   inputs c [B, H], gx, gh [B, 4H], dh' (dhn), dc' (dcn) [B, H]; outputs dc [B, H], dgates [B, 4H] (d of gx + gh)
//   dc_total = dc' + dh' * o * (1 - tanh(c')^2)
//   d_i = dc_total * g * i (1 - i),  d_f = dc_total * c * f (1 - f),  d_g = dc_total * i * (1 - g^2),
//   d_o = dh' * tanh(c') * o (1 - o),  dc = dc_total * f
layout(local_size_x = TD_BLOCK) in;
layout(std430, binding = 0) readonly buffer C { float c[]; };
layout(std430, binding = 1) readonly buffer GX { float gx[]; };
layout(std430, binding = 2) readonly buffer GH { float gh[]; };
layout(std430, binding = 3) readonly buffer DHN { float dhn[]; };
layout(std430, binding = 4) readonly buffer DCN { float dcn[]; };
layout(std430, binding = 5) writeonly buffer DC { float dc[]; };
layout(std430, binding = 6) writeonly buffer DG { float dgates[]; };

float sig(float x) { return 1.0 / (1.0 + exp(-x)); }
float th(float x) { return tanh(clamp(x, -10.0, 10.0)); }

void main() {
    uint t = td_global_id();
    if (t >= td.n) return;
    uint H = td.cols, b = t / H, j = t % H, k = b * 4u * H + j;
    float i = sig(gx[k] + gh[k]), f = sig(gx[k + H] + gh[k + H]);
    float g = th(gx[k + 2u * H] + gh[k + 2u * H]), o = sig(gx[k + 3u * H] + gh[k + 3u * H]);
    float tc = th(f * c[t] + i * g);
    float dct = dcn[t] + dhn[t] * o * (1.0 - tc * tc);
    dgates[k] = dct * g * i * (1.0 - i);
    dgates[k + H] = dct * c[t] * f * (1.0 - f);
    dgates[k + 2u * H] = dct * i * (1.0 - g * g);
    dgates[k + 3u * H] = dhn[t] * tc * o * (1.0 - o);
    dc[t] = dct * f;
}
