// variants: float
#version 450
#extension GL_GOOGLE_include_directive : require
// 2-D pooling over [N*C planes, H, W], PyTorch's rules (no dilation, floor mode):
//   window of output (i, j): rows i s0 - p0 .. + KH, cols j s1 - p1 .. + KW, clipped to the plane
//   OP 0 max:  y = max over the window, idx = h W + v of the max (int64); NaN wins, as in
//              PyTorch's "val > max || isnan(val)" scan starting at the first valid tap
//   OP 1 max backward:  dx[h, v] = sum of dy over outputs whose idx is h W + v (the
//              outputs whose window holds (h, v); every output of the plane when
//              the geometry is not given, KH = 0)
//   OP 2 avg:  y = sum / divisor; divisor = window size with padding (clipped to
//              H + p, W + p) when count_include_pad, else the valid taps
//   OP 3 avg backward: dx[h, v] = sum over outputs whose window holds (h, v) of dy / divisor
// Backward passes gather (one invocation per dx element), so they need no atomics.
// Bindings: 0 x or dy, 1 indices int64 as uint words (written by 0, read by 1;
// dummy otherwise), 2 out. C mirror: vk_pc_pool (vk_ops_pool.c). Variants pool2d_<float dt>.
#include "types.glsl"

layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint OP = 0;
layout(local_size_x_id = 0) in;

layout(push_constant) uniform PC {
    uint NC, H, W, Ho;
    uint Wo, KH, KW, s0;
    uint s1;
    int p0, p1;
    uint include_pad;
    uint a_off, i_off, o_off;
} pc;

layout(binding = 0) readonly buffer BA { ST(A_DT) a[]; };
layout(binding = 1) buffer BI { uint idx[]; };
layout(binding = 2) writeonly buffer BO { ST(A_DT) o[]; };

#define ACC VT(A_DT)

float divisor(int hs, int ws) {
    int he = min(hs + int(pc.KH), int(pc.H) + pc.p0), we = min(ws + int(pc.KW), int(pc.W) + pc.p1);
    int size = (he - hs) * (we - ws);
    hs = max(hs, 0), ws = max(ws, 0), he = min(he, int(pc.H)), we = min(we, int(pc.W));
    return float(pc.include_pad != 0u ? size : (he - hs) * (we - ws));
}

void main() {
    bool fwd = OP == 0u || OP == 2u;
    uint total = fwd ? pc.NC * pc.Ho * pc.Wo : pc.NC * pc.H * pc.W;
    for (uint e = gl_GlobalInvocationID.x; e < total; e += gl_NumWorkGroups.x * WG) {
        if (fwd) {
            uint j = e % pc.Wo, i = (e / pc.Wo) % pc.Ho, plane = e / (pc.Wo * pc.Ho);
            int hs = int(i * pc.s0) - pc.p0, ws = int(j * pc.s1) - pc.p1;
            int h0 = max(hs, 0), w0 = max(ws, 0), h1 = min(hs + int(pc.KH), int(pc.H)), w1 = min(ws + int(pc.KW), int(pc.W));
            uint base = pc.a_off + plane * pc.H * pc.W;
            if (OP == 0u) {
                ACC m = ACC(uintBitsToFloat(0xFF800000u));
                uint mi = uint(h0) * pc.W + uint(w0);
                for (int h = h0; h < h1; h++)
                    for (int v = w0; v < w1; v++) {
                        ACC x = LD(A_DT, a[base + uint(h) * pc.W + uint(v)]);
                        if (x > m || isnan(x)) m = x, mi = uint(h) * pc.W + uint(v);
                    }
                o[pc.o_off + e] = SV(A_DT, m);
                idx[2u * (pc.i_off + e)] = mi;
                idx[2u * (pc.i_off + e) + 1u] = 0u;
            } else {
                ACC s = ACC(0);
                for (int h = h0; h < h1; h++)
                    for (int v = w0; v < w1; v++) s += LD(A_DT, a[base + uint(h) * pc.W + uint(v)]);
                o[pc.o_off + e] = SV(A_DT, s / ACC(divisor(hs, ws)));
            }
        } else {
            uint v = e % pc.W, h = (e / pc.W) % pc.H, plane = e / (pc.W * pc.H);
            // outputs i with i s0 - p0 <= h < i s0 - p0 + KH (all of them when KH = 0)
            int i0 = 0, i1 = int(pc.Ho) - 1, j0 = 0, j1 = int(pc.Wo) - 1;
            if (pc.KH != 0u) {
                int hh = int(h) + pc.p0, vv = int(v) + pc.p1;
                i0 = hh - int(pc.KH) < 0 ? 0 : (hh - int(pc.KH)) / int(pc.s0) + 1;
                j0 = vv - int(pc.KW) < 0 ? 0 : (vv - int(pc.KW)) / int(pc.s1) + 1;
                i1 = min(i1, hh / int(pc.s0));
                j1 = min(j1, vv / int(pc.s1));
            }
            ACC s = ACC(0);
            uint me = h * pc.W + v;
            for (int i = i0; i <= i1; i++)
                for (int j = j0; j <= j1; j++) {
                    uint k = (plane * pc.Ho + uint(i)) * pc.Wo + uint(j);
                    if (OP == 1u) {
                        if (idx[2u * (pc.i_off + k)] == me) s += LD(A_DT, a[pc.a_off + k]);
                    } else {
                        int hs = i * int(pc.s0) - pc.p0, ws = j * int(pc.s1) - pc.p1;
                        if (int(h) >= hs && int(h) < hs + int(pc.KH) && int(v) >= ws && int(v) < ws + int(pc.KW))
                            s += LD(A_DT, a[pc.a_off + k]) / ACC(divisor(hs, ws));
                    }
                }
            o[pc.o_off + e] = SV(A_DT, s);
        }
    }
}
