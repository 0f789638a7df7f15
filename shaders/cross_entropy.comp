#version 450
#extension GL_GOOGLE_include_directive : require
// CROSS_ENTROPY and its backward, PyTorch's formula (label smoothing eps,
// class weights w, ignore_index):
//   lse_i  = log sum_c exp(x_ic)                       (max-shifted)
//   loss_i = (1-eps) w_t (lse_i - x_it) + (eps/C) sum_c w_c (lse_i - x_ic),  t = target_i
//   ignored rows give 0 and weigh 0; mean divides by sum_i w_t(i); a target
//   outside [0, C) gives NaN (the error cannot be raised from the device).
//   d loss_i / d x_ic = (1-eps) w_t (p_ic - [c == t]) + (eps/C) (W p_ic - w_c),
//   p = softmax(x_i), W = sum_c w_c.
// Bindings: 0 logits [N, C], 1 target int64 [N] (as uint words), 2 weight [C]
// (dummy when has_w is 0), 3 dloss (scalar, or [N] for reduction none),
// 4 scratch (float, 2N), 5 out. OP (specialization constant 1):
//   0 rows:     loss_i -> out[i] (reduction none) or scratch (loss_i, w_t)
//   1 finish:   one workgroup sums the scratch into out[0] (mean or sum)
//   2 denom:    one workgroup writes sum_i w_t(i) into scratch[0] (backward of mean)
//   3 backward: dx [N, C] -> out
// One workgroup per row in 0 and 3. Variants xent_<float dt> (math in float;
// double for f64, whose scratch holds doubles).
// C mirror: vk_pc_xent (vk_ops_softmax.c).
#include "types.glsl"

layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint OP = 0;
layout(local_size_x_id = 0) in;
#if A_DT == DT_F64
#include "math64.glsl"
#define ACC double
#define EXP(x) d_exp(x)
#define LOG(x) d_log(x)
#else
#define ACC float
#define EXP(x) exp(x)
#define LOG(x) log(x)
#endif
#include "reduce.glsl"
#if A_DT == DT_F64
#define EPS packDouble2x32(uvec2(pc.eps_lo, pc.eps_hi))
#else
#define EPS pc.eps
#endif

layout(push_constant) uniform PC {
    uint N, C, x_off, t_off;
    uint w_off, d_off, s_off, o_off;
    uint has_w, reduction; // reduction: 0 none, 1 mean, 2 sum
    int ignore_index;
    float eps;
    uint eps_lo, eps_hi; // eps as a double, for the f64 variant
} pc;

layout(binding = 0) readonly buffer BX { ST(A_DT) x[]; };
layout(binding = 1) readonly buffer BT { uint tg[]; };
layout(binding = 2) readonly buffer BW { ST(A_DT) wt[]; };
layout(binding = 3) readonly buffer BD { ST(A_DT) dl[]; };
layout(binding = 4) buffer BS { ACC sc[]; };
layout(binding = 5) writeonly buffer BO { ST(A_DT) o[]; };

#define NAN ACC(uintBitsToFloat(0x7FC00000u))

ACC xv(uint i, uint c) { return ACC(LD(A_DT, x[pc.x_off + i * pc.C + c])); }
ACC wv(uint c) { return pc.has_w != 0u ? ACC(LD(A_DT, wt[pc.w_off + c])) : 1.0; }

// target of row i: -1 ignored, -2 out of range, else the class
int target(uint i) {
    uint k = pc.t_off + i;
    int t = IDX_LO(tg, k);
    if (IDX_OK(tg, k) && t == pc.ignore_index) return -1;
    if (!IDX_OK(tg, k) || t < 0 || uint(t) >= pc.C) return -2;
    return t;
}

// weight of row i's target (0 when ignored, NaN when out of range)
ACC row_weight(uint i) {
    int t = target(i);
    return t == -1 ? ACC(0) : t == -2 ? NAN : wv(uint(t));
}

ACC lse_row(uint i, uint tid) {
    ACC m = uintBitsToFloat(0xFF800000u);
    for (uint c = tid; c < pc.C; c += WG) m = max(m, xv(i, c));
    m = wg_reduce(m, R_MAX);
    ACC s = 0.0;
    for (uint c = tid; c < pc.C; c += WG) s += EXP(xv(i, c) - m);
    return m + LOG(wg_reduce(s, R_ADD));
}

void main() {
    uint tid = gl_LocalInvocationID.x;
    if (OP == 1u || OP == 2u) { // single workgroup
        ACC l = 0.0, w = 0.0;
        for (uint i = tid; i < pc.N; i += WG) {
            if (OP == 1u) l += sc[pc.s_off + 2u * i], w += sc[pc.s_off + 2u * i + 1u];
            else w += row_weight(i);
        }
        l = wg_reduce(l, R_ADD);
        w = wg_reduce(w, R_ADD);
        if (tid == 0u) {
            if (OP == 1u) o[pc.o_off] = SV(A_DT, pc.reduction == 1u ? l / w : l);
            else sc[pc.s_off] = w;
        }
        return;
    }
    ACC eps = EPS, C = ACC(pc.C);
    for (uint i = gl_WorkGroupID.x; i < pc.N; i += gl_NumWorkGroups.x) {
        int t = target(i);
        ACC lse = lse_row(i, tid);
        if (OP == 0u) {
            ACC sm = 0.0; // sum_c w_c (lse - x_c)
            if (eps != 0.0)
                for (uint c = tid; c < pc.C; c += WG) sm += wv(c) * (lse - xv(i, c));
            sm = wg_reduce(sm, R_ADD);
            ACC loss = 0.0, w = 0.0;
            if (t == -2) loss = NAN, w = NAN;
            else if (t >= 0) {
                w = wv(uint(t));
                loss = (1.0 - eps) * w * (lse - xv(i, uint(t))) + eps / C * sm;
            }
            if (tid == 0u) {
                if (pc.reduction == 0u) o[pc.o_off + i] = SV(A_DT, loss);
                else sc[pc.s_off + 2u * i] = loss, sc[pc.s_off + 2u * i + 1u] = w;
            }
        } else {
            ACC W = 0.0;
            if (eps != 0.0)
                for (uint c = tid; c < pc.C; c += WG) W += wv(c);
            W = wg_reduce(W, R_ADD);
            ACC g = ACC(LD(A_DT, dl[pc.d_off + (pc.reduction == 0u ? i : 0u)]));
            if (pc.reduction == 1u) g /= sc[pc.s_off];
            ACC wt_ = t >= 0 ? wv(uint(t)) : 0.0;
            for (uint c = tid; c < pc.C; c += WG) {
                ACC p = EXP(xv(i, c) - lse);
                ACC dx = (1.0 - eps) * wt_ * (p - (int(c) == t ? 1.0 : 0.0)) + eps / C * (W * p - wv(c));
                o[pc.o_off + i * pc.C + c] = SV(A_DT, t == -1 ? 0.0 : t == -2 ? NAN : g * dx);
            }
        }
    }
}
