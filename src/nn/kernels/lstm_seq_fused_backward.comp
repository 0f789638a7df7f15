#version 450
#define TD_NO_ARGS
#include <trident.glsl>
// Backward of step t with the recurrent GEMM of the step after it inside (lstm_seq_fused.comp; rnn_lstm_seq.c):
// storage scalar_t, the GEMM in scalar_t, the gate math in float as lstm_seq_step_backward.comp. n = B H.
//   acts [T, B, 4H], cs [T, B, H], c0 [B, H], dy, dcs [T, B, H], w [4H, H]
//   dc [B, H]: in, the gradient reaching c_t from the step after; out, the one reaching c_prev
//   dg [T, B, 4H]: reads dG of step tn (the step after t, done before it), writes dG_t
//   pass 1  dh[b, j] = sum_r dG_tn[b, r] w[r, j] over r < 4H (0 when tn is 0xFFFFFFFF: t is the last step), split
//           over KS slices of the workgroup as in lstm_seq_fused.comp (K tiles s, s + KS, ... per slice, each
//           through its own shared memory, the next read into registers while one is multiplied)
//   pass 2  slice 0 sums the slices in slice order, then the cell backward of lstm_seq_step_backward.comp with dh
// Grid ceil(H / JT) x ceil(B / BT).
#define BT 16u
#define JT 8u
#define KT 32u
#define NT (BT * JT)      // invocations per slice
#define NG (BT * KT / NT) // dG tile elements per invocation
#define NW (KT * JT / NT) // w tile elements per invocation
#ifdef TD_F64
#define KS 2u                  // the shared arrays within 32 KiB
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
    uint tp; // the previous step (c_prev = cs[tp]), 0xFFFFFFFF: c0
    uint tn; // the next step (its dG feeds dh), 0xFFFFFFFF: none
} pc;
layout(std430, binding = 0) readonly buffer ACTS { scalar_t acts[]; };
layout(std430, binding = 1) readonly buffer CS { scalar_t cs[]; };
layout(std430, binding = 2) readonly buffer C0 { scalar_t c0[]; };
layout(std430, binding = 3) readonly buffer DY { scalar_t dy[]; };
layout(std430, binding = 4) readonly buffer DCS { scalar_t dcs[]; };
layout(std430, binding = 5) readonly buffer W { scalar_t w[]; };
layout(std430, binding = 6) buffer DC { scalar_t dc[]; }; // each invocation reads then writes its own element
layout(std430, binding = 7) buffer DG { scalar_t dg[]; }; // reads step tn, writes step t

shared scalar_t gs[KS][BT][KT + 1u];
shared scalar_t ws[KS][KT][JT + 1u];
shared scalar_t part[KS][NT];

scalar_t rg[NG], rw[NW]; // the next tiles

// tile k0 of dG_tn (rows b0.., columns k0..) and of w (rows k0.., columns j0..) into rg, rw
void load_tiles(uint l, uint k0, uint b0, uint j0, uint H, uint B, uint goff) {
    uint G = 4u * H;
    for (uint q = 0u; q < NG; q++) {
        uint e = l + q * NT, bb = b0 + e / KT, kk = k0 + e % KT;
        rg[q] = bb < B && kk < G ? dg[goff + bb * G + kk] : scalar_t(0);
    }
    for (uint q = 0u; q < NW; q++) {
        uint e = l + q * NT, kk = k0 + e / JT, jj = j0 + e % JT;
        rw[q] = jj < H && kk < G ? w[kk * H + jj] : scalar_t(0);
    }
}

float th(float x) { return tanh(clamp(x, -10.0, 10.0)); } // as the forward

void main() {
    uint H = pc.H, B = pc.n / H, G = 4u * H, sl = gl_LocalInvocationID.x / NT, l = gl_LocalInvocationID.x % NT;
    uint lj = l % JT, lb = l / JT, j0 = gl_WorkGroupID.x * JT, b0 = gl_WorkGroupID.y * BT, j = j0 + lj, b = b0 + lb;
    // pass 1
    scalar_t acc = scalar_t(0);
    if (pc.tn != 0xFFFFFFFFu) { // uniform
        uint goff = pc.tn * 4u * pc.n, tiles = (G + KS * KT - 1u) / (KS * KT);
        load_tiles(l, sl * KT, b0, j0, H, B, goff);
        for (uint it = 0u; it < tiles; it++) { // the same count in every slice: the barriers stay uniform
            for (uint q = 0u; q < NG; q++) gs[sl][(l + q * NT) / KT][(l + q * NT) % KT] = rg[q];
            for (uint q = 0u; q < NW; q++) ws[sl][(l + q * NT) / JT][(l + q * NT) % JT] = rw[q];
            barrier();
            if (it + 1u < tiles) load_tiles(l, ((it + 1u) * KS + sl) * KT, b0, j0, H, B, goff);
            for (uint c = 0u; c < KT; c++) acc += gs[sl][lb][c] * ws[sl][c][lj];
            barrier();
        }
    }
    part[sl][l] = acc;
    barrier();
    if (sl != 0u || b >= B || j >= H) return; // past every barrier
    for (uint k = 1u; k < KS; k++) acc += part[k][l];
    // pass 2
    uint a = pc.t * 4u * pc.n + b * G + j, e = b * H + j, s = pc.t * pc.n + e;
    float i = float(acts[a]), f = float(acts[a + H]), g = float(acts[a + 2u * H]), o = float(acts[a + 3u * H]);
    float cp = pc.tp == 0xFFFFFFFFu ? float(c0[e]) : float(cs[pc.tp * pc.n + e]);
    float tc = th(float(cs[s]));
    float dhs = float(dy[s] + acc);
    float dct = float(dcs[s] + dc[e]) + dhs * o * (1.0 - tc * tc);
    dg[a] = scalar_t(dct * g * i * (1.0 - i));
    dg[a + H] = scalar_t(dct * cp * f * (1.0 - f));
    dg[a + 2u * H] = scalar_t(dct * i * (1.0 - g * g));
    dg[a + 3u * H] = scalar_t(dhs * tc * o * (1.0 - o));
    dc[e] = scalar_t(dct * f);
}
