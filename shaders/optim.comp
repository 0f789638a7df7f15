// variants: float
#version 450
#extension GL_GOOGLE_include_directive : require
// Fused optimizer steps, in place, one element per invocation (grid-stride),
// with the CPU backend's formulas and operation order (torch.optim,
// foreach=False; see src/backend_cpu/cpu_optim.{h,c}):
//   OP 0 Adam/AdamW: g = maximize ? -grad : grad; g += wd p (L2); p *= 1 - lr wd (decoupled)
//        m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g g;  vmax = max(vmax, v) (amsgrad)
//        p += -(lr / (1-b1^t)) * (m / (sqrt(v) / sqrt(1-b2^t) + eps))
//   OP 1 SGD: g += wd p; buf = first ? g : momentum buf + (1-dampening) g;
//        g = nesterov ? g + momentum buf : buf;  p += -lr g
//   OP 2 RMSprop: sq = alpha sq + (1-alpha) g g; centered: gavg = alpha gavg + (1-alpha) g,
//        avg = sqrt(sq - gavg^2) + eps, else sqrt(sq) + eps;
//        momentum: buf = momentum buf + g / avg, p += -lr buf; else p += -lr g / avg
//   OP 3 Adam's device step: step += 1 (one invocation, dispatched after OP 0)
// Bindings: 0 grad, 1 param, 2..4 state (Adam m, v, vmax; SGD buf; RMSprop
// sq, buf, gavg); absent state is bound to a dummy and flagged off; 5 the
// device lr (flag 4: replaces the host's; f64 in the f64 variant, else f32),
// 6 Adam's device step count (flag 5: f32, the steps done, t = step + 1).
// With either, Adam's 1 - lr wd, -lr / (1-b1^t) and sqrt(1-b2^t) are computed
// here (omp() below) from K(5) = the host's lr, K(6), K(7) = log b1, log b2
// and pc.t = the host's t, where those are not on the device. Binding 7 is
// Adam's low copy of an f32 param (flag 6; bf16 bits, f16 with flag 7): the
// updated p rounded to nearest even, autocast's shadow (src/core/shadow.c).
// k[] holds the constants, rounded once on the host to the compute type:
// floats as 32-bit words, doubles (f64 variant) as word pairs.
// C mirror: vk_pc_optim (vk_ops_optim.c). Variants optim_<float dt>.
#include "types.glsl"

layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint OP = 0;
layout(local_size_x_id = 0) in;

layout(push_constant) uniform PC {
    uint n, flags;
    uint off[8];
    uint t;
    uint k[18];
} pc;

layout(binding = 0) readonly buffer BG { ST(A_DT) gr[]; };
layout(binding = 1) buffer BP { ST(A_DT) pr[]; };
layout(binding = 2) buffer B1 { ST(A_DT) s1[]; };
layout(binding = 3) buffer B2 { ST(A_DT) s2[]; };
layout(binding = 4) buffer B3 { ST(A_DT) s3[]; };
#if A_DT == DT_F64
layout(binding = 5) readonly buffer BL { double lrb[]; };
#else
layout(binding = 5) readonly buffer BL { float lrb[]; };
#endif
layout(binding = 6) buffer BS { float stepb[]; };
layout(binding = 7) writeonly buffer BO { uint16_t lo[]; };

#define T VT(A_DT)
#if A_DT == DT_F64
T K(uint i) { return packDouble2x32(uvec2(pc.k[2u * i], pc.k[2u * i + 1u])); }
#else
T K(uint i) { return uintBitsToFloat(pc.k[i]); }
#endif
bool F(uint bit) { return (pc.flags & (1u << bit)) != 0u; }

// 1 - b^t for an integer t >= 1 and lb = log b, without cancellation:
// x = t lb; x <= -1/2: 1 - b^t with b^t by squaring (b^t <= 0.61);
// else -expm1(x) by its Taylor series (|x| < 1/2: 20 terms reach double precision)
T omp(T b, T lb, uint t) {
    T x = T(t) * lb;
    if (x <= T(-0.5)) {
        T r = T(1);
        for (; t != 0u; t >>= 1u, b *= b)
            if ((t & 1u) != 0u) r *= b;
        return T(1) - r;
    }
    T term = x, s = x;
    for (uint k = 2u; k <= 20u; k++) {
        term *= x / T(k);
        s += term;
    }
    return -s;
}

void main() {
    if (OP == 3u) {
        if (gl_GlobalInvocationID.x == 0u) stepb[pc.off[6]] += 1.0;
        return;
    }
    T neg_lr = F(4u) ? -T(lrb[pc.off[5]]) : K(0u); // SGD's and RMSprop's -lr
    T decay = K(5u), neg_step = K(6u), bc2_sqrt = K(7u);
    if (OP == 0u && (F(4u) || F(5u))) {
        T lr = F(4u) ? T(lrb[pc.off[5]]) : K(5u);
        uint t = F(5u) ? uint(stepb[pc.off[6]]) + 1u : pc.t;
        decay = T(1) - lr * K(4u);
        neg_step = -lr / omp(K(0u), K(6u), t);
        bc2_sqrt = sqrt(omp(K(2u), K(7u), t));
    }
    for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += gl_NumWorkGroups.x * WG) {
        T p = LD(A_DT, pr[pc.off[1] + i]), g = LD(A_DT, gr[pc.off[0] + i]);
        if (OP == 0u) {
            if (F(3u)) g = -g;
            if (F(0u)) g += K(4u) * p;
            if (F(1u)) p *= decay;
            T m = LD(A_DT, s1[pc.off[2] + i]) * K(0u) + K(1u) * g;
            T v = LD(A_DT, s2[pc.off[3] + i]) * K(2u) + K(3u) * g * g;
            T vv = v;
            if (F(2u)) {
                T vmax = LD(A_DT, s3[pc.off[4] + i]);
                vv = isnan(vmax) || vmax > v ? vmax : v;
                s3[pc.off[4] + i] = SV(A_DT, vv);
            }
            p = p + neg_step * (m / (sqrt(vv) / bc2_sqrt + K(8u)));
            s1[pc.off[2] + i] = SV(A_DT, m);
            s2[pc.off[3] + i] = SV(A_DT, v);
            if (F(6u)) lo[pc.off[7] + i] = uint16_t(F(7u) ? f32_to_f16(float(p)) : f32_to_bf16(float(p)));
        } else if (OP == 1u) {
            if (F(2u)) g = -g;
            if (K(3u) != T(0)) g += K(3u) * p;
            if (F(3u)) {
                T buf = F(1u) ? g : LD(A_DT, s1[pc.off[2] + i]) * K(1u) + K(2u) * g;
                s1[pc.off[2] + i] = SV(A_DT, buf);
                g = F(0u) ? g + K(1u) * buf : buf;
            }
            p = p + neg_lr * g;
        } else {
            if (F(0u)) g = -g;
            if (K(4u) != T(0)) g += K(4u) * p;
            T sq = LD(A_DT, s1[pc.off[2] + i]) * K(1u) + K(2u) * g * g;
            s1[pc.off[2] + i] = SV(A_DT, sq);
            T avg;
            if (F(2u)) {
                T ga = LD(A_DT, s3[pc.off[4] + i]) * K(1u) + K(2u) * g;
                s3[pc.off[4] + i] = SV(A_DT, ga);
                avg = sqrt(sq - ga * ga) + K(3u);
            } else {
                avg = sqrt(sq) + K(3u);
            }
            if (F(1u)) {
                T buf = LD(A_DT, s2[pc.off[3] + i]) * K(5u) + g / avg;
                s2[pc.off[3] + i] = SV(A_DT, buf);
                p = p + neg_lr * buf;
            } else {
                p = p + neg_lr * (g / avg);
            }
        }
        pr[pc.off[1] + i] = SV(A_DT, p);
    }
}
