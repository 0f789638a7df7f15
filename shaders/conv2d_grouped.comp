// variants: float
#version 450
#extension GL_GOOGLE_include_directive : require
// CONV2D and its two backward passes for few channels per group (depthwise:
// G = C), direct: each output from its KH x KW window. Letters as in
// conv2d.comp: N batch, C in, O out channels, G groups (Cg = C/G, Og = O/G),
// H x W in, Ho x Wo out, KH x KW kernel, stride s, padding p, dilation d.
//   MODE 0 forward      y[n,o,i,j] = b[o] + sum_{c<Cg,kh,kw} w[o,c,kh,kw] x[n, g Cg + c, i s0 - p0 + kh d0, j s1 - p1 + kw d1]
//   MODE 1 grad input   dx[n,c,h,v] = sum_{o<Og,kh,kw} w[g Og + o, c - g Cg, kh, kw] dy[n, g Og + o, i, j]
//        over the taps where i = (h + p0 - kh d0) / s0 is integral and in [0, Ho) (same for j)
//   MODE 2 grad weight  part[q, o, c, kh, kw] = sum over slab q of (n, i, j) of
//        dy[n,o,i,j] x[n, g Cg + c, i s0 - p0 + kh d0, j s1 - p1 + kw d1]; the host sums over q
// Modes 0, 1: a workgroup computes a TH x 32 tile of one output plane (TH = 8 R rows, each
// invocation R rows 8 apart); the input rows and columns the tile reads (x for MODE 0, dy for
// MODE 1) go to shared memory, one input channel at a time, IH x IW with zeros outside.
// Grid (tiles_w tiles_h, N x out channels). MODE 2: a workgroup sums slab x of one channel
// o = y for TAPS of the Cg KK taps (chunk z); each invocation keeps its taps' sums in
// registers, then a shared-memory tree adds them in a fixed order (deterministic).
// Bindings: 0 x (modes 0, 2) or dy (mode 1), 1 w (modes 0, 1) or dy (mode 2), 2 bias, 3 out.
// C mirror: vk_pc_convg (vk_ops_conv.c).
#extension GL_EXT_control_flow_attributes : require
#include "types.glsl"

layout(constant_id = 0) const uint MODE = 0;
layout(local_size_x = 256) in;
const uint WG = 256u, TW = 32u, SH = 4096u, TAPS = 16u;

layout(push_constant) uniform PC {
    uint N, C, H, W;
    uint O, Ho, Wo, G;
    uint KH, KW, s0, s1;
    int p0, p1, d0, d1;
    uint x_off, y_off, bias_off, o_off;
    uint has_b, R, IH, IW;   // modes 0, 1: rows per invocation, shared tile rows and columns
    uint tiles_w, slab;      // tiles along the output width; MODE 2: pixels per slab
} pc;

layout(binding = 0) readonly buffer BX { ST(A_DT) x[]; };
layout(binding = 1) readonly buffer BY { ST(A_DT) y[]; };
layout(binding = 2) readonly buffer BC { ST(A_DT) bias[]; };
layout(binding = 3) writeonly buffer BO { ST(A_DT) o[]; };

#define ACC VT(A_DT)
shared ACC tile[SH];

int floordiv(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// tile[r][u] = src plane at (r0 + r, u0 + u) for r < IH, u < IW, 0 outside the plane's rows x cols
void load_tile(uint base, int r0, int u0, uint rows, uint cols) {
    for (uint e = gl_LocalInvocationID.x; e < pc.IH * pc.IW; e += WG) {
        int r = r0 + int(e / pc.IW), u = u0 + int(e % pc.IW);
        bool in_ = r >= 0 && u >= 0 && r < int(rows) && u < int(cols);
        tile[e] = in_ ? ACC(LD(A_DT, x[pc.x_off + base + uint(r) * cols + uint(u)])) : ACC(0);
    }
}

void conv_tile() {
    uint Cg = pc.C / pc.G, Og = pc.O / pc.G, KK = pc.KH * pc.KW;
    uint t = gl_LocalInvocationID.x, tx = t % TW, ty = t / TW, TH = 8u * pc.R;
    uint plane = gl_WorkGroupID.y, tile_i = gl_WorkGroupID.x / pc.tiles_w, tile_j = gl_WorkGroupID.x % pc.tiles_w;
    uint oc = MODE == 0u ? plane % pc.O : plane % pc.C, n = MODE == 0u ? plane / pc.O : plane / pc.C;
    uint orows = MODE == 0u ? pc.Ho : pc.H, ocols = MODE == 0u ? pc.Wo : pc.W;
    uint i0 = tile_i * TH, j0 = tile_j * TW, j = j0 + tx;
    ACC acc[4] = {ACC(0), ACC(0), ACC(0), ACC(0)};
    if (MODE == 0u) {
        uint g = oc / Og;
        int r0 = int(i0 * pc.s0) - pc.p0, u0 = int(j0 * pc.s1) - pc.p1;
        for (uint c = 0u; c < Cg; c++) {
            load_tile((n * pc.C + g * Cg + c) * pc.H * pc.W, r0, u0, pc.H, pc.W);
            barrier();
            for (uint kh = 0u; kh < pc.KH; kh++)
                for (uint kw = 0u; kw < pc.KW; kw++) {
                    ACC wv = ACC(LD(A_DT, y[pc.y_off + (oc * Cg + c) * KK + kh * pc.KW + kw]));
                    uint col = tx * pc.s1 + kw * uint(pc.d1);
                    [[unroll]] for (uint r = 0u; r < 4u; r++) {
                        if (r >= pc.R) break;
                        uint row = (ty + 8u * r) * pc.s0 + kh * uint(pc.d0);
                        acc[r] = fma(wv, tile[row * pc.IW + col], acc[r]);
                    }
                }
            barrier();
        }
        if (pc.has_b != 0u) {
            ACC bv = ACC(LD(A_DT, bias[pc.bias_off + oc]));
            [[unroll]] for (uint r = 0u; r < 4u; r++) acc[r] += bv;
        }
    } else {
        uint g = oc / Cg, cl = oc % Cg;
        bool unit = pc.s0 == 1u && pc.s1 == 1u;
        // dy rows ibase .. ibase + IH - 1 cover every i = (h + p0 - kh d0) / s0 of the tile's rows h (same for j)
        int ibase = floordiv(int(i0) + pc.p0 - int(pc.KH - 1u) * pc.d0, int(pc.s0));
        int jbase = floordiv(int(j0) + pc.p1 - int(pc.KW - 1u) * pc.d1, int(pc.s1));
        for (uint ol = 0u; ol < Og; ol++) {
            uint od = g * Og + ol;
            load_tile((n * pc.O + od) * pc.Ho * pc.Wo, ibase, jbase, pc.Ho, pc.Wo);
            barrier();
            for (uint kh = 0u; kh < pc.KH; kh++)
                for (uint kw = 0u; kw < pc.KW; kw++) {
                    ACC wv = ACC(LD(A_DT, y[pc.y_off + (od * Cg + cl) * KK + kh * pc.KW + kw]));
                    int tv = int(j) + pc.p1 - int(kw) * pc.d1;
                    if (unit) { // stride 1: every tap lands on a dy pixel (the tile's zeros outside)
                        uint col = uint(tv - jbase), row = uint(int(i0 + ty) + pc.p0 - int(kh) * pc.d0 - ibase);
                        [[unroll]] for (uint r = 0u; r < 4u; r++) {
                            if (r >= pc.R) break;
                            acc[r] = fma(wv, tile[(row + 8u * r) * pc.IW + col], acc[r]);
                        }
                        continue;
                    }
                    if (tv < 0 || tv % int(pc.s1) != 0) continue;
                    uint col = uint(tv / int(pc.s1) - jbase);
                    [[unroll]] for (uint r = 0u; r < 4u; r++) {
                        if (r >= pc.R) break;
                        int th = int(i0 + ty + 8u * r) + pc.p0 - int(kh) * pc.d0;
                        if (th < 0 || th % int(pc.s0) != 0) continue;
                        uint row = uint(th / int(pc.s0) - ibase);
                        acc[r] = fma(wv, tile[row * pc.IW + col], acc[r]);
                    }
                }
            barrier();
        }
    }
    if (j >= ocols) return;
    [[unroll]] for (uint r = 0u; r < 4u; r++) {
        uint i = i0 + ty + 8u * r;
        if (r < pc.R && i < orows) o[pc.o_off + (plane * orows + i) * ocols + j] = SV(A_DT, acc[r]);
    }
}

void weight_grad() {
    uint Cg = pc.C / pc.G, Og = pc.O / pc.G, KK = pc.KH * pc.KW, taps = Cg * KK;
    uint t = gl_LocalInvocationID.x, oc = gl_WorkGroupID.y, g = oc / Og, tap0 = gl_WorkGroupID.z * TAPS;
    uint hw = pc.Ho * pc.Wo, total = pc.N * hw, beg = gl_WorkGroupID.x * pc.slab, end = min(total, beg + pc.slab);
    ACC acc[TAPS];
    int dh[TAPS], dv[TAPS]; // tap k: x row i s0 + dh[k], column j s1 + dv[k], channel g Cg + ch[k]
    uint ch[TAPS];
    [[unroll]] for (uint k = 0u; k < TAPS; k++) {
        uint tap = min(tap0 + k, taps - 1u), kk = tap % KK;
        acc[k] = ACC(0), ch[k] = g * Cg + tap / KK;
        dh[k] = int(kk / pc.KW) * pc.d0 - pc.p0, dv[k] = int(kk % pc.KW) * pc.d1 - pc.p1;
    }
    uint ntap = min(TAPS, taps - tap0);
    for (uint e = beg + t; e < end; e += WG) {
        uint n = e / hw, q = e % hw, i = q / pc.Wo, j = q % pc.Wo;
        ACC dy = ACC(LD(A_DT, y[pc.y_off + (n * pc.O + oc) * hw + q]));
        [[unroll]] for (uint k = 0u; k < TAPS; k++) {
            if (k >= ntap) break;
            int h = int(i * pc.s0) + dh[k], v = int(j * pc.s1) + dv[k];
            if (h >= 0 && v >= 0 && h < int(pc.H) && v < int(pc.W))
                acc[k] = fma(dy, ACC(LD(A_DT, x[pc.x_off + ((n * pc.C + ch[k]) * pc.H + uint(h)) * pc.W + uint(v)])),
                             acc[k]);
        }
    }
    // TAPS trees over the WG invocations at once: tile[k WG + t]
    [[unroll]] for (uint k = 0u; k < TAPS; k++) tile[k * WG + t] = acc[k];
    barrier();
    for (uint h = WG / 2u; h > 0u; h /= 2u) {
        if (t < h) [[unroll]] for (uint k = 0u; k < TAPS; k++) tile[k * WG + t] += tile[k * WG + t + h];
        barrier();
    }
    if (t < TAPS && tap0 + t < taps) o[pc.o_off + (gl_WorkGroupID.x * pc.O + oc) * taps + tap0 + t] = SV(A_DT, tile[t * WG]);
}

void main() {
    if (MODE == 2u)
        weight_grad();
    else
        conv_tile();
}
