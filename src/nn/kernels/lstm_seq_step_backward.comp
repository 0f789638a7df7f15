#version 450
#define TD_NO_ARGS
#include <trident.glsl>
// Backward of step t of one LSTM layer direction (lstm_seq_step.comp; rnn_lstm_seq.c), storage scalar_t, math in
// float. T steps, B batch, H hidden, n = B * H; one invocation per (b, j) of [B, H].
//   acts [T, B, 4H] (i, f, g, o of every step), cs [T, B, H], c0 [B, H]
//   dy, dcs [T, B, H]: the gradients of the layer's outputs y and cs
//   dh [B, H]: dG_{t+1} W_hh, the gradient reaching h_t through the next step (zeros at the last step)
//   dc [B, H]: in, the gradient reaching c_t through the next step; out, the one reaching c_prev
//   dg [T, B, 4H]: out, step t's gate gradients (of gx_t and of gh)
//   dh_t = dy_t + dh;  dc_total = dcs_t + dc + dh_t o (1 - tanh(c_t)^2)
//   d_i = dc_total g i (1 - i),  d_f = dc_total c_prev f (1 - f),  d_g = dc_total i (1 - g^2),
//   d_o = dh_t tanh(c_t) o (1 - o);  dc_prev = dc_total f
layout(local_size_x = TD_BLOCK) in;
// C mirror: seq_args of rnn_lstm_seq.c
layout(push_constant) uniform seq_args {
    uint n;  // B * H
    uint H;
    uint t;  // this step
    uint tp; // the previous step (c_prev = cs[tp]), 0xFFFFFFFF: c0
    uint tn; // (the fused backward only)
} pc;
layout(std430, binding = 0) readonly buffer ACTS { scalar_t acts[]; };
layout(std430, binding = 1) readonly buffer CS { scalar_t cs[]; };
layout(std430, binding = 2) readonly buffer C0 { scalar_t c0[]; };
layout(std430, binding = 3) readonly buffer DY { scalar_t dy[]; };
layout(std430, binding = 4) readonly buffer DCS { scalar_t dcs[]; };
layout(std430, binding = 5) readonly buffer DH { scalar_t dh[]; };
layout(std430, binding = 6) buffer DC { scalar_t dc[]; }; // each invocation reads then writes its own element
layout(std430, binding = 7) writeonly buffer DG { scalar_t dg[]; };

float th(float x) { return tanh(clamp(x, -10.0, 10.0)); } // as the forward

void main() {
    uint e = td_global_id();
    if (e >= pc.n) return;
    uint H = pc.H, a = pc.t * 4u * pc.n + (e / H) * 4u * H + e % H, s = pc.t * pc.n + e;
    float i = float(acts[a]), f = float(acts[a + H]), g = float(acts[a + 2u * H]), o = float(acts[a + 3u * H]);
    float cp = pc.tp == 0xFFFFFFFFu ? float(c0[e]) : float(cs[pc.tp * pc.n + e]);
    float tc = th(float(cs[s]));
    float dhs = float(dy[s] + dh[e]);
    float dct = float(dcs[s] + dc[e]) + dhs * o * (1.0 - tc * tc);
    dg[a] = scalar_t(dct * g * i * (1.0 - i));
    dg[a + H] = scalar_t(dct * cp * f * (1.0 - f));
    dg[a + 2u * H] = scalar_t(dct * i * (1.0 - g * g));
    dg[a + 3u * H] = scalar_t(dhs * tc * o * (1.0 - o));
    dc[e] = scalar_t(dct * f);
}
