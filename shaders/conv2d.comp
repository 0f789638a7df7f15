// variants: float
#version 450
#extension GL_GOOGLE_include_directive : require
// CONV2D and its two backward passes, direct (no im2col buffer).
// Letters: N batch, C in channels, O out channels, G groups (Cg = C/G, Og = O/G),
// H x W input, Ho x Wo output, KH x KW kernel, stride s, padding p, dilation d.
//   OP 0 forward      x [N,C,H,W], w [O,Cg,KH,KW], b [O]? -> y [N,O,Ho,Wo]
//        y[n,o,i,j] = b[o] + sum_{c<Cg,kh,kw} x[n, g Cg + c, i s0 - p0 + kh d0, j s1 - p1 + kw d1] w[o,c,kh,kw]
//        (out-of-range taps read 0; g = o / Og); one invocation per output.
//   OP 1 grad input   dy [N,O,Ho,Wo], w -> dx [N,C,H,W]
//        dx[n,c,h,v] = sum over (o in c's group, kh, kw) with i = (h + p0 - kh d0) / s0 integral
//        and in [0, Ho) (same for j) of dy[n,o,i,j] w[o, c - g Cg, kh, kw]; one invocation per dx element.
//   OP 2 grad weight  dy, x -> dw [O,Cg,KH,KW]
//        dw[o,c,kh,kw] = sum_{n,i,j} dy[n,o,i,j] x[n, g Cg + c, i s0 - p0 + kh d0, j s1 - p1 + kw d1];
//        one workgroup per dw element, reduced with subgroup arithmetic.
// Bindings: 0 x or dy, 1 w or x, 2 bias (dummy unless has_b), 3 out.
// C mirror: vk_pc_conv (vk_ops_conv.c). Variants conv2d_<float dt> (math in
// float; double for f64).
#include "types.glsl"

layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint OP = 0;
layout(local_size_x_id = 0) in;
#define ACC VT(A_DT)
#include "reduce.glsl"

layout(push_constant) uniform PC {
    uint N, C, H, W;
    uint O, Ho, Wo, G;
    uint KH, KW, s0, s1;
    int p0, p1, d0, d1;
    uint a_off, b_off, bias_off, o_off;
    uint has_b;
} pc;

layout(binding = 0) readonly buffer BA { ST(A_DT) a[]; };
layout(binding = 1) readonly buffer BB { ST(A_DT) b[]; };
layout(binding = 2) readonly buffer BC { ST(A_DT) bias[]; };
layout(binding = 3) writeonly buffer BO { ST(A_DT) o[]; };

ACC A(uint i) { return ACC(LD(A_DT, a[pc.a_off + i])); }
ACC B(uint i) { return ACC(LD(A_DT, b[pc.b_off + i])); }

void main() {
    uint Cg = pc.C / pc.G, Og = pc.O / pc.G;
    if (OP == 0u) {
        uint total = pc.N * pc.O * pc.Ho * pc.Wo;
        for (uint e = gl_GlobalInvocationID.x; e < total; e += gl_NumWorkGroups.x * WG) {
            uint j = e % pc.Wo, i = (e / pc.Wo) % pc.Ho, oc = (e / (pc.Wo * pc.Ho)) % pc.O, n = e / (pc.Wo * pc.Ho * pc.O);
            uint g = oc / Og;
            ACC acc = pc.has_b != 0u ? ACC(LD(A_DT, bias[pc.bias_off + oc])) : ACC(0);
            for (uint c = 0u; c < Cg; c++) {
                uint xb = (n * pc.C + g * Cg + c) * pc.H * pc.W, wb = (oc * Cg + c) * pc.KH * pc.KW;
                for (uint kh = 0u; kh < pc.KH; kh++) {
                    int h = int(i * pc.s0) - pc.p0 + int(kh) * pc.d0;
                    if (h < 0 || h >= int(pc.H)) continue;
                    for (uint kw = 0u; kw < pc.KW; kw++) {
                        int v = int(j * pc.s1) - pc.p1 + int(kw) * pc.d1;
                        if (v < 0 || v >= int(pc.W)) continue;
                        acc += A(xb + uint(h) * pc.W + uint(v)) * B(wb + kh * pc.KW + kw);
                    }
                }
            }
            o[pc.o_off + e] = SV(A_DT, acc);
        }
    } else if (OP == 1u) {
        uint total = pc.N * pc.C * pc.H * pc.W;
        for (uint e = gl_GlobalInvocationID.x; e < total; e += gl_NumWorkGroups.x * WG) {
            uint v = e % pc.W, h = (e / pc.W) % pc.H, c = (e / (pc.W * pc.H)) % pc.C, n = e / (pc.W * pc.H * pc.C);
            uint g = c / Cg, cl = c % Cg;
            ACC acc = ACC(0);
            for (uint kh = 0u; kh < pc.KH; kh++) {
                int hh = int(h) + pc.p0 - int(kh) * pc.d0;
                if (hh < 0 || hh % int(pc.s0) != 0 || hh / int(pc.s0) >= int(pc.Ho)) continue;
                uint i = uint(hh) / pc.s0;
                for (uint kw = 0u; kw < pc.KW; kw++) {
                    int vv = int(v) + pc.p1 - int(kw) * pc.d1;
                    if (vv < 0 || vv % int(pc.s1) != 0 || vv / int(pc.s1) >= int(pc.Wo)) continue;
                    uint j = uint(vv) / pc.s1;
                    for (uint ol = 0u; ol < Og; ol++) {
                        uint oc = g * Og + ol;
                        acc += A(((n * pc.O + oc) * pc.Ho + i) * pc.Wo + j) * B(((oc * Cg + cl) * pc.KH + kh) * pc.KW + kw);
                    }
                }
            }
            o[pc.o_off + e] = SV(A_DT, acc);
        }
    } else {
        uint total = pc.O * Cg * pc.KH * pc.KW, t = gl_LocalInvocationID.x, per = pc.Ho * pc.Wo;
        for (uint e = gl_WorkGroupID.x; e < total; e += gl_NumWorkGroups.x) {
            uint kw = e % pc.KW, kh = (e / pc.KW) % pc.KH, c = (e / (pc.KW * pc.KH)) % Cg, oc = e / (pc.KW * pc.KH * Cg);
            uint g = oc / Og;
            ACC acc = ACC(0);
            for (uint r = t; r < pc.N * per; r += WG) {
                uint n = r / per, i = (r % per) / pc.Wo, j = r % pc.Wo;
                int h = int(i * pc.s0) - pc.p0 + int(kh) * pc.d0, v = int(j * pc.s1) - pc.p1 + int(kw) * pc.d1;
                if (h < 0 || h >= int(pc.H) || v < 0 || v >= int(pc.W)) continue;
                acc += A(((n * pc.O + oc) * pc.Ho + i) * pc.Wo + j) *
                       B(((n * pc.C + g * Cg + c) * pc.H + uint(h)) * pc.W + uint(v));
            }
            acc = wg_reduce(acc, R_ADD);
            if (t == 0u) o[pc.o_off + e] = SV(A_DT, acc);
        }
    }
}
