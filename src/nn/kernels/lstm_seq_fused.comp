#version 450
#define TD_NO_ARGS
#include <trident.glsl>
// Step t of one LSTM layer direction with its recurrent GEMM inside (rnn_lstm_seq.c, the fused mode): storage
// scalar_t, the GEMM in scalar_t, the gate math in float as lstm_seq_step.comp. T steps, B batch, H hidden, n = B H.
//   gx [T, B, 4H] (x W_ih^T + b), w [4H, H] (W_hh), h0, c0 [B, H]; y, cs [T, B, H]; acts [T, B, 4H]
//   pass 1  gh[b, q H + j] = sum_k h_prev[b, k] w[q H + j, k] for the workgroup's BT rows b and JT units j, all four
//           gates q (h_prev = y[tp], or h0 when tp is 0xFFFFFFFF). The workgroup is KS slices of BT JT invocations;
//           slice s takes the K tiles s, s + KS, ... (KT wide, through its own shared memory, the next tile read
//           into registers while one is multiplied): KS times the invocations, to hide memory latency at the few
//           workgroups a step has
//   pass 2  slice 0 sums the slices' partial sums in slice order, then the cell of lstm_seq_step.comp on gx_t + gh:
//           c_t, h_t into cs[t], y[t]; i, f, g, o into acts[t]
// Grid ceil(H / JT) x ceil(B / BT).
#define BT 16u
#define JT 8u
#define KT 16u
#define NT (BT * JT)           // invocations per slice
#define NH (BT * KT / NT)      // h_prev tile elements per invocation
#define NW (4u * JT * KT / NT) // w tile elements per invocation
#ifdef TD_F64
#define KS 2u                  // the shared arrays within 32 KiB (21 KiB)
layout(local_size_x = 256) in; // NT * KS
#else
#define KS 4u
layout(local_size_x = 512) in;
#endif
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

shared scalar_t hs[KS][BT][KT + 1u];      // +1: the rows start in different banks
shared scalar_t ws[KS][4u * JT][KT + 1u]; // row q JT + jj is w's row q H + j0 + jj
shared scalar_t part[KS][4u][NT];         // the slices' partial sums

scalar_t rh[NH], rw[NW]; // the next tiles

// tile k0 of h_prev (rows b0.., columns k0..) and of w (rows q H + j0.., columns k0..) into rh, rw
void load_tiles(uint l, uint k0, uint b0, uint j0, uint H, uint B, bool first, uint hoff) {
    for (uint q = 0u; q < NH; q++) {
        uint e = l + q * NT, bb = b0 + e / KT, kk = k0 + e % KT;
        rh[q] = scalar_t(0);
        if (bb < B && kk < H) rh[q] = first ? h0[bb * H + kk] : y[hoff + bb * H + kk];
    }
    for (uint q = 0u; q < NW; q++) {
        uint e = l + q * NT, r = e / KT, kk = k0 + e % KT, jj = j0 + r % JT;
        rw[q] = jj < H && kk < H ? w[((r / JT) * H + jj) * H + kk] : scalar_t(0);
    }
}

float sig(float x) { return 1.0 / (1.0 + exp(-x)); }
float th(float x) { return tanh(clamp(x, -10.0, 10.0)); } // tanh(10) is 1 in f32; unclamped tanh may overflow exp

void main() {
    uint H = pc.H, B = pc.n / H, sl = gl_LocalInvocationID.x / NT, l = gl_LocalInvocationID.x % NT;
    uint lj = l % JT, lb = l / JT, j0 = gl_WorkGroupID.x * JT, b0 = gl_WorkGroupID.y * BT, j = j0 + lj, b = b0 + lb;
    bool first = pc.tp == 0xFFFFFFFFu;
    uint hoff = first ? 0u : pc.tp * pc.n, tiles = (H + KS * KT - 1u) / (KS * KT);
    // pass 1
    scalar_t a0 = scalar_t(0), a1 = scalar_t(0), a2 = scalar_t(0), a3 = scalar_t(0);
    load_tiles(l, sl * KT, b0, j0, H, B, first, hoff);
    for (uint it = 0u; it < tiles; it++) { // the same count in every slice: the barriers stay uniform
        for (uint q = 0u; q < NH; q++) hs[sl][(l + q * NT) / KT][(l + q * NT) % KT] = rh[q];
        for (uint q = 0u; q < NW; q++) ws[sl][(l + q * NT) / KT][(l + q * NT) % KT] = rw[q];
        barrier();
        if (it + 1u < tiles) load_tiles(l, ((it + 1u) * KS + sl) * KT, b0, j0, H, B, first, hoff);
        for (uint c = 0u; c < KT; c++) {
            scalar_t hv = hs[sl][lb][c];
            a0 += hv * ws[sl][lj][c];
            a1 += hv * ws[sl][JT + lj][c];
            a2 += hv * ws[sl][2u * JT + lj][c];
            a3 += hv * ws[sl][3u * JT + lj][c];
        }
        barrier();
    }
    part[sl][0][l] = a0, part[sl][1][l] = a1, part[sl][2][l] = a2, part[sl][3][l] = a3;
    barrier();
    if (sl != 0u || b >= B || j >= H) return; // past every barrier
    for (uint k = 1u; k < KS; k++) a0 += part[k][0][l], a1 += part[k][1][l], a2 += part[k][2][l], a3 += part[k][3][l];
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
