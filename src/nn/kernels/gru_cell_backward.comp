#version 450
#include <trident.glsl>
// Backward of the fused GRU cell (gru_cell.comp), float32. B batch, H hidden (td.cols).
//   inputs h [B, H], gx, gh [B, 3H], dh' (dhn) [B, H]; outputs dh [B, H] (the direct path), dgx, dgh [B, 3H]
//   d_n = dh' (1 - z) (1 - n^2) -> dgx_n = d_n, dgh_n = d_n * r
//   d_r = d_n * gh_n * r (1 - r),  d_z = dh' (h - n) z (1 - z) -> dgx_r = dgh_r = d_r, dgx_z = dgh_z = d_z
//   dh = dh' * z
layout(local_size_x = TD_BLOCK) in;
layout(std430, binding = 0) readonly buffer Hb { float h[]; };
layout(std430, binding = 1) readonly buffer GX { float gx[]; };
layout(std430, binding = 2) readonly buffer GH { float gh[]; };
layout(std430, binding = 3) readonly buffer DHN { float dhn[]; };
layout(std430, binding = 4) writeonly buffer DH { float dh[]; };
layout(std430, binding = 5) writeonly buffer DGX { float dgx[]; };
layout(std430, binding = 6) writeonly buffer DGH { float dgh[]; };

float sig(float x) { return 1.0 / (1.0 + exp(-x)); }
float th(float x) { return tanh(clamp(x, -10.0, 10.0)); }

void main() {
    uint t = td_global_id();
    if (t >= td.n) return;
    uint H = td.cols, b = t / H, j = t % H, k = b * 3u * H + j;
    float r = sig(gx[k] + gh[k]), z = sig(gx[k + H] + gh[k + H]);
    float n = th(gx[k + 2u * H] + r * gh[k + 2u * H]);
    float dn = dhn[t] * (1.0 - z) * (1.0 - n * n);
    float dr = dn * gh[k + 2u * H] * r * (1.0 - r);
    float dz = dhn[t] * (h[t] - n) * z * (1.0 - z);
    dgx[k] = dr;
    dgh[k] = dr;
    dgx[k + H] = dz;
    dgh[k + H] = dz;
    dgx[k + 2u * H] = dn;
    dgh[k + 2u * H] = dn * r;
    dh[t] = dhn[t] * z;
}
