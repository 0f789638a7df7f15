#version 450
#define TD_NO_ARGS
#include <trident.glsl>
// Step t of one LSTM layer direction with its recurrent GEMM inside (rnn_lstm_seq.c, the fused mode): storage
// scalar_t, the GEMM in scalar_t, the gate math in float as lstm_seq_step.comp. T steps, B batch, H hidden, n = B H.
//   gx [T, B, 4H] (x W_ih^T + b), w [4H, H] (W_hh), h0, c0 [B, H]; y, cs [T, B, H]; acts [T, B, 4H]
//   pass 1  gh[b, q H + j] = sum_k h_prev[b, k] w[q H + j, k] for the workgroup's BT rows b and JT units j, all four
//           gates q: k in tiles of KT through shared memory (h_prev = y[tp], or h0 when tp is 0xFFFFFFFF); the next
//           tile is read into registers while this one is multiplied (few workgroups: latency is not hidden else)
//   pass 2  the cell of lstm_seq_step.comp on gx_t + gh: c_t, h_t into cs[t], y[t]; i, f, g, o into acts[t]
// Workgroup (JT units, BT batch rows), one invocation per (b, j); grid ceil(H / JT) x ceil(B / BT).
#define BT 16u
#define JT 8u
#define KT 64u
#define NT (BT * JT)        // invocations
#define NH (BT * KT / NT)   // h_prev tile elements per invocation
#define NW (4u * JT * KT / NT) // w tile elements per invocation
layout(local_size_x = 128) in; // NT
// C mirror: seq_args of rnn_lstm_seq.c
layout(push_constant) uniform seq_args {
    uint n;  // B * H
    uint H;
    uint t;  // this step
    uint tp; // the previous step, 0xFFFFFFFF: none (h0, c0)
    uint tn; // (backward only)
} pc;
layout(std430, binding = 0) readonly buffer GX { scalar_t gx[]; };
layout(std430, binding = 1) readonly buffer W { scalar_t w[]; };
layout(std430, binding = 2) readonly buffer H0 { scalar_t h0[]; };
layout(std430, binding = 3) readonly buffer C0 { scalar_t c0[]; };
layout(std430, binding = 4) buffer Y { scalar_t y[]; };   // reads step tp, writes step t
layout(std430, binding = 5) buffer CS { scalar_t cs[]; }; // likewise
layout(std430, binding = 6) writeonly buffer ACTS { scalar_t acts[]; };

shared scalar_t hs[BT][KT + 1u];      // +1: the rows start in different banks
shared scalar_t ws[4u * JT][KT + 1u]; // row q JT + jj is w's row q H + j0 + jj

scalar_t rh[NH], rw[NW]; // the next tiles

// tile k0 of h_prev (rows b0.., columns k0..) and of w (rows q H + j0.., columns k0..) into rh, rw
void load_tiles(uint k0, uint b0, uint j0, uint H, uint B, bool first, uint hoff) {
    uint lid = gl_LocalInvocationID.x;
    for (uint q = 0u; q < NH; q++) {
        uint e = lid + q * NT, bb = b0 + e / KT, kk = k0 + e % KT;
        rh[q] = scalar_t(0);
        if (bb < B && kk < H) rh[q] = first ? h0[bb * H + kk] : y[hoff + bb * H + kk];
    }
    for (uint q = 0u; q < NW; q++) {
        uint e = lid + q * NT, r = e / KT, kk = k0 + e % KT, jj = j0 + r % JT;
        rw[q] = jj < H && kk < H ? w[((r / JT) * H + jj) * H + kk] : scalar_t(0);
    }
}

float sig(float x) { return 1.0 / (1.0 + exp(-x)); }
float th(float x) { return tanh(clamp(x, -10.0, 10.0)); } // tanh(10) is 1 in f32; unclamped tanh may overflow exp

void main() {
    uint H = pc.H, B = pc.n / H, lid = gl_LocalInvocationID.x, lj = lid % JT, lb = lid / JT;
    uint j0 = gl_WorkGroupID.x * JT, b0 = gl_WorkGroupID.y * BT, j = j0 + lj, b = b0 + lb;
    bool first = pc.tp == 0xFFFFFFFFu;
    uint hoff = first ? 0u : pc.tp * pc.n;
    // pass 1
    scalar_t a0 = scalar_t(0), a1 = scalar_t(0), a2 = scalar_t(0), a3 = scalar_t(0);
    load_tiles(0u, b0, j0, H, B, first, hoff);
    for (uint k0 = 0u; k0 < H; k0 += KT) {
        for (uint q = 0u; q < NH; q++) hs[(lid + q * NT) / KT][(lid + q * NT) % KT] = rh[q];
        for (uint q = 0u; q < NW; q++) ws[(lid + q * NT) / KT][(lid + q * NT) % KT] = rw[q];
        barrier();
        if (k0 + KT < H) load_tiles(k0 + KT, b0, j0, H, B, first, hoff);
        for (uint c = 0u; c < KT; c++) {
            scalar_t hv = hs[lb][c];
            a0 += hv * ws[lj][c];
            a1 += hv * ws[JT + lj][c];
            a2 += hv * ws[2u * JT + lj][c];
            a3 += hv * ws[3u * JT + lj][c];
        }
        barrier();
    }
    if (b >= B || j >= H) return; // past every barrier
    // pass 2
    uint a = pc.t * 4u * pc.n + b * 4u * H + j, e = b * H + j, s = pc.t * pc.n + e;
    float i = sig(float(gx[a] + a0)), f = sig(float(gx[a + H] + a1));
    float g = th(float(gx[a + 2u * H] + a2)), o = sig(float(gx[a + 3u * H] + a3));
    float cp = first ? float(c0[e]) : float(cs[pc.tp * pc.n + e]);
    float cc = f * cp + i * g;
    cs[s] = scalar_t(cc);
    y[s] = scalar_t(o * th(cc));
    acts[a] = scalar_t(i);
    acts[a + H] = scalar_t(f);
    acts[a + 2u * H] = scalar_t(g);
    acts[a + 3u * H] = scalar_t(o);
}
