#version 450
#define TD_NO_ARGS
#include <trident.glsl>
// Step t of one LSTM layer direction (rnn_lstm_seq.c), storage scalar_t (float or double), math in float as
// lstm_cell.comp. T steps, B batch, H hidden, n = B * H; one invocation per (b, j) of [B, H].
//   gx [T, B, 4H] (x W_ih^T + b, every step), gh [B, 4H] (h_prev W_hh^T, this step), c0 [B, H]
//   y, cs [T, B, H] (h and c of every step), acts [T, B, 4H] (the activated gates, for the backward)
//   i, f, o = sigmoid(gx_t + gh), g = tanh(gx_t + gh);  c_t = f c_prev + i g;  h_t = o tanh(c_t)
//   c_prev = cs[tp], or c0 when tp is 0xFFFFFFFF (the first step)
layout(local_size_x = TD_BLOCK) in;
// C mirror: seq_args of rnn_lstm_seq.c
layout(push_constant) uniform seq_args {
    uint n;  // B * H
    uint H;
    uint t;  // this step
    uint tp; // the previous step, 0xFFFFFFFF: none
    uint tn; // (the fused backward only)
} pc;
layout(std430, binding = 0) readonly buffer GX { scalar_t gx[]; };
layout(std430, binding = 1) readonly buffer GH { scalar_t gh[]; };
layout(std430, binding = 2) readonly buffer C0 { scalar_t c0[]; };
layout(std430, binding = 3) writeonly buffer Y { scalar_t y[]; };
layout(std430, binding = 4) buffer CS { scalar_t cs[]; }; // reads step tp, writes step t
layout(std430, binding = 5) writeonly buffer ACTS { scalar_t acts[]; };

float sig(float x) { return 1.0 / (1.0 + exp(-x)); }
float th(float x) { return tanh(clamp(x, -10.0, 10.0)); } // tanh(10) is 1 in f32; unclamped tanh may overflow exp

void main() {
    uint e = td_global_id();
    if (e >= pc.n) return;
    uint H = pc.H, k = (e / H) * 4u * H + e % H, a = pc.t * 4u * pc.n + k, s = pc.t * pc.n + e;
    float i = sig(float(gx[a] + gh[k])), f = sig(float(gx[a + H] + gh[k + H]));
    float g = th(float(gx[a + 2u * H] + gh[k + 2u * H])), o = sig(float(gx[a + 3u * H] + gh[k + 3u * H]));
    float cp = pc.tp == 0xFFFFFFFFu ? float(c0[e]) : float(cs[pc.tp * pc.n + e]);
    float cc = f * cp + i * g;
    cs[s] = scalar_t(cc);
    y[s] = scalar_t(o * th(cc));
    acts[a] = scalar_t(i);
    acts[a + H] = scalar_t(f);
    acts[a + 2u * H] = scalar_t(g);
    acts[a + 3u * H] = scalar_t(o);
}
