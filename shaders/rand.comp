// variants: float
#version 450
#extension GL_GOOGLE_include_directive : require
// RAND, RANDN and DROPOUT from Philox4x32-10, matching the CPU backend
// (src/backend_cpu/cpu_random.c documents the stream): element i uses word
// i % 4 of philox(seed, offset + i / 4), u_i = (w >> 8) * 2^-24.
//   OP 0 RAND:    out[i] = u_i (f16/bf16: rounded, kept below 1.0)
//   OP 1 RANDN:   pairs (2j, 2j+1): r = sqrt(-2 ln(1 - u_2j)), angle 2 pi u_2j+1,
//                 out = (r cos, r sin); float math with an accurate sin/cos
//                 (double math from the same u for f64, as the CPU does)
//   OP 2 DROPOUT: out[i] = (w_i >> 8) >= threshold ? x[i] * scale : 0
// x (binding 0; bound to out for RAND/RANDN) and out (binding 1) are
// contiguous. One invocation per counter (4 elements). Variants rand_<float dt>.
// C mirror: vk_pc_rand (vk_ops_random.c).
#include "types.glsl"
#include "philox.glsl"
#if A_DT == DT_F64
#include "math64.glsl"
#endif

layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint OP = 0;
layout(local_size_x_id = 0) in;

layout(push_constant) uniform PC {
    uint n, x_off, out_off, threshold;
    uint seed_lo, seed_hi, off_lo, off_hi;
    float scale_f;
    uint scale_lo, scale_hi, pad;
} pc;

layout(binding = 0) readonly buffer BX { ST(A_DT) x[]; };
layout(binding = 1) writeonly buffer BO { ST(A_DT) o[]; };

// sin and cos of a in [-pi, pi]: Cody-Waite reduction by pi/2, Taylor
// polynomials on [-pi/4, pi/4] (about 1 ulp; GLSL's sin/cos may be 2^-11 off).
vec2 t_sincos(float a) {
    float q = roundEven(a * 0.63661977236758134);
    float r = fma(q, -1.5707963705062866, a);
    r = fma(q, 4.37113900018624283e-8, r);
    float r2 = r * r;
    float s = r + r * r2 * (-1.6666667e-1 + r2 * (8.3333333e-3 + r2 * (-1.98412698e-4 + r2 * 2.7557319e-6)));
    float c = 1.0 - 0.5 * r2 + r2 * r2 * (4.16666667e-2 + r2 * (-1.38888889e-3 + r2 * 2.48015873e-5));
    int qi = int(q) & 3;
    return qi == 0 ? vec2(s, c) : qi == 1 ? vec2(c, -s) : qi == 2 ? vec2(-s, -c) : vec2(-c, s);
}

void put(uint i, VT(A_DT) v) {
    if (i >= pc.n) return;
#if A_DT == DT_F16
    if (OP == 0u) { o[pc.out_off + i] = uint16_t(min(f32_to_f16(float(v)), 0x3BFFu)); return; }
#elif A_DT == DT_BF16
    if (OP == 0u) { o[pc.out_off + i] = uint16_t(min(f32_to_bf16(float(v)), 0x3F7Fu)); return; }
#endif
    o[pc.out_off + i] = SV(A_DT, v);
}

void main() {
    uint nc = (pc.n + 3u) / 4u;
    for (uint c = gl_GlobalInvocationID.x; c < nc; c += gl_NumWorkGroups.x * WG) {
        uvec4 w = philox4x32(uvec2(pc.seed_lo, pc.seed_hi), counter_add(uvec2(pc.off_lo, pc.off_hi), c));
        uint i0 = 4u * c;
        if (OP == 0u) {
            for (int k = 0; k < 4; k++) put(i0 + uint(k), VT(A_DT)(philox_uniform(w[k])));
        } else if (OP == 1u) {
            for (int k = 0; k < 4; k += 2) {
                float u1 = 1.0 - philox_uniform(w[k]), u2 = philox_uniform(w[k + 1]);
#if A_DT == DT_F64
                double rd = sqrt(-2.0LF * d_log(double(u1)));
                dvec2 scd = d_sincos(6.28318530717958647692LF * double(u2));
                put(i0 + uint(k), rd * scd.y);
                put(i0 + uint(k) + 1u, rd * scd.x);
                continue;
#endif
                float r = sqrt(-2.0 * log(u1));
                // 2 pi u2 in [0, 2 pi): take the equal angle 2 pi (u2 - 1) in [-pi, 0) past one half
                vec2 sc = t_sincos(6.28318530717958647692 * (u2 >= 0.5 ? u2 - 1.0 : u2));
                put(i0 + uint(k), VT(A_DT)(r * sc.y));
                put(i0 + uint(k) + 1u, VT(A_DT)(r * sc.x));
            }
        } else {
            for (int k = 0; k < 4; k++) {
                uint i = i0 + uint(k);
                if (i >= pc.n) break;
                bool keep = (w[k] >> 8) >= pc.threshold;
#if A_DT == DT_F64
                double scale = packDouble2x32(uvec2(pc.scale_lo, pc.scale_hi));
                o[pc.out_off + i] = keep ? x[pc.x_off + i] * scale : 0.0lf;
#else
                put(i, keep ? LD(A_DT, x[pc.x_off + i]) * pc.scale_f : 0.0);
#endif
            }
        }
    }
}
