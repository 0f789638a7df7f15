// variants: float
#version 450
#extension GL_GOOGLE_include_directive : require
// CONV2D and its two backward passes as implicit GEMMs (no im2col buffer):
// the tiled product of shaders/matmul.comp with operand elements computed
// from the NCHW tensors. Letters as in conv2d.comp: N batch, C in, O out
// channels, G groups (Cg = C/G, Og = O/G), H x W in, Ho x Wo out, KH x KW
// kernel (KK = KH KW), stride s, padding p, dilation d; group g = z % G.
//   MODE 0 forward      out[Og, N Ho Wo] = w_g[Og, Cg KK] @ col(x)[Cg KK, N Ho Wo] (+ bias)
//        col(x)[(c,kh,kw), (n,i,j)] = x[n, g Cg + c, i s0 - p0 + kh d0, j s1 - p1 + kw d1] (0 outside)
//   MODE 1 grad input   dx[Cg, N H W] = w_g^T[Cg, Og KK] @ row(dy)[Og KK, N H W]
//        row(dy)[(o,kh,kw), (n,h,v)] = dy[n, g Og + o, i, j] where i = (h + p0 - kh d0) / s0 is
//        integral and in [0, Ho) (same for j), else 0
//   MODE 3 grad input by stride phases (dilation 1): output rows h = ph + s0 hh (columns v = pv + s1 vv)
//        take only the taps kh = r0 + t s0, r0 = (ph + p0) mod s0, from dy row i = hh + q0 - t,
//        q0 = (ph + p0 - r0) / s0 (same for v): per phase (ph, pv) = z / G
//        dx_p[Cg, N Hp Wp] = w_p^T[Cg, Og nkh nkw] @ row_p(dy)[Og nkh nkw, N Hp Wp], Hp = ceil((H - ph) / s0),
//        a GEMM without MODE 1's zero taps (a 2x2 stride-2 transposed conv: K = Og, not 4 Og)
//   MODE 2 grad weight  dw[Og, Cg KK] = dy_g[Og, N Ho Wo] @ col(x)^T[N Ho Wo, Cg KK]; K is split
//        into z / G chunks of kchunk, chunk q writing out + q O Cg KK (the host sums the chunks)
// Bindings: 0 x (modes 0, 2) or dy (modes 1, 3), 1 w (modes 0, 1) or dy (mode 2), 2 bias, 3 out.
// Tiling (constants 1..5: BK, BM, BN, TM, TN) as in matmul.comp: k-major
// shared tiles read as 4-vectors, the next step's elements loaded into
// registers during the current step's products. A's elements go along k
// (consecutive invocations read consecutive k: contiguous in w and in dy),
// B's along n in modes 0 and 1 (along output pixels) and along k in mode 2.
// Grid: (ceil(N'/BN), ceil(M'/BM), G x chunks); MODE 3: G x s0 s1 phases, N' phase 0's. C mirror: vk_pc_convmm (vk_ops_conv.c).
#extension GL_EXT_control_flow_attributes : require
#include "types.glsl"

layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint BK = 16;
layout(constant_id = 2) const uint BM = 64;
layout(constant_id = 3) const uint BN = 64;
layout(constant_id = 4) const uint TM = 4;
layout(constant_id = 5) const uint TN = 4;
layout(constant_id = 6) const uint MODE = 0;
layout(constant_id = 7) const uint KS = 0; // a square kernel's side fixed by the host (3 for 3 x 3; 0: pc.KH, pc.KW),
                                            // so that the tap decompositions divide by constants
layout(local_size_x_id = 0) in;
const uint TX = BN / TN, TY = BM / TM;
const uint RA = BM * BK / WG, RB = BK * BN / WG; // elements per invocation
const uint LDS_A = BM / 4u + 1u, LDS_B = BN / 4u + 1u; // vec4 per k row, padded

layout(push_constant) uniform PC {
    uint M, N, K, G;
    uint Nb, C, H, W;
    uint O, Ho, Wo, KH;
    uint KW, s0, s1, kchunk;
    int p0, p1, d0, d1;
    uint x_off, y_off, bias_off, o_off;
    uint has_b;
} pc;

layout(binding = 0) readonly buffer BX { ST(A_DT) x[]; };
layout(binding = 1) readonly buffer BY { ST(A_DT) y[]; };
layout(binding = 2) readonly buffer BC { ST(A_DT) bias[]; };
layout(binding = 3) writeonly buffer BO { ST(A_DT) o[]; };

#define ACC VT(A_DT)
#if A_DT == DT_F64
#define ACC4 dvec4
#else
#define ACC4 vec4
#endif
shared ACC4 As[BK * LDS_A]; // As[k][m]
shared ACC4 Bs[BK * LDS_B]; // Bs[k][n]
ACC ra[RA], rb[RB];

uint g, Cg, Og, KK, KWr;
uint KM, NM; // this workgroup's K and N (MODE 3: its phase's)
uint ph, pv, r0, r1, nkh, nkw, q0, q1, Hp, Wp; // MODE 3
// MODE 0: every B element an invocation loads has the same pixel n = n0 + t % BN (WG is a multiple of
// BN), decomposed once: x offset of (n's image, channel g Cg), its window's top row and left column
const bool SAME_N = WG % BN == 0u;
uint xb;
int xh, xv;
bool xok;

ACC x_tap0(uint k) {
    uint c = k / KK, kk = k % KK;
    int h = xh + int(kk / KWr) * pc.d0, v = xv + int(kk % KWr) * pc.d1;
    if (!xok || h < 0 || v < 0 || h >= int(pc.H) || v >= int(pc.W)) return ACC(0);
    return ACC(LD(A_DT, x[xb + (c * pc.H + uint(h)) * pc.W + uint(v)]));
}

// x[n, g Cg + c, i s0 - p0 + kh d0, j s1 - p1 + kw d1] for tap r = (c, kh, kw) of output pixel (n, i, j)
ACC x_tap(uint r, uint n, uint i, uint j) {
    uint c = r / KK, kk = r % KK;
    int h = int(i * pc.s0) - pc.p0 + int(kk / KWr) * pc.d0, v = int(j * pc.s1) - pc.p1 + int(kk % KWr) * pc.d1;
    if (h < 0 || v < 0 || h >= int(pc.H) || v >= int(pc.W)) return ACC(0);
    return ACC(LD(A_DT, x[pc.x_off + ((n * pc.C + g * Cg + c) * pc.H + uint(h)) * pc.W + uint(v)]));
}

ACC load_a(uint m, uint k) {
    if (m >= pc.M || k >= KM) return ACC(0);
    if (MODE == 3u) {
        uint o = k / (nkh * nkw), t = (k / nkw) % nkh, u = k % nkw;
        return ACC(LD(A_DT, y[pc.y_off + ((g * Og + o) * Cg + m) * KK + (r0 + t * pc.s0) * KWr + r1 + u * pc.s1]));
    }
    if (MODE == 0u) return ACC(LD(A_DT, y[pc.y_off + (g * Og + m) * Cg * KK + k]));
    if (MODE == 1u) return ACC(LD(A_DT, y[pc.y_off + ((g * Og + k / KK) * Cg + m) * KK + k % KK]));
    uint hw = pc.Ho * pc.Wo, n = k / hw; // MODE 2: dy[n, g Og + m, pixel]
    return ACC(LD(A_DT, y[pc.y_off + (n * pc.O + g * Og + m) * hw + k % hw]));
}

ACC load_b(uint k, uint n) {
    if (k >= KM || n >= NM) return ACC(0);
    if (MODE == 3u) {
        uint o = k / (nkh * nkw), t = (k / nkw) % nkh, u = k % nkw, b = n / (Hp * Wp), q = n % (Hp * Wp);
        int i = int(q / Wp + q0) - int(t), j = int(q % Wp + q1) - int(u);
        if (i < 0 || j < 0 || i >= int(pc.Ho) || j >= int(pc.Wo)) return ACC(0);
        return ACC(LD(A_DT, x[pc.x_off + ((b * pc.O + g * Og + o) * pc.Ho + uint(i)) * pc.Wo + uint(j)]));
    }
    if (MODE == 0u) {
        uint hw = pc.Ho * pc.Wo, q = n % hw;
        return x_tap(k, n / hw, q / pc.Wo, q % pc.Wo);
    }
    if (MODE == 2u) {
        uint hw = pc.Ho * pc.Wo, q = k % hw;
        return x_tap(n, k / hw, q / pc.Wo, q % pc.Wo);
    }
    uint hw = pc.H * pc.W, b = n / hw, q = n % hw, o = k / KK, kk = k % KK; // MODE 1
    int th = int(q / pc.W) + pc.p0 - int(kk / KWr) * pc.d0, tv = int(q % pc.W) + pc.p1 - int(kk % KWr) * pc.d1;
    if (th < 0 || tv < 0 || th % int(pc.s0) != 0 || tv % int(pc.s1) != 0) return ACC(0);
    uint i = uint(th) / pc.s0, j = uint(tv) / pc.s1;
    if (i >= pc.Ho || j >= pc.Wo) return ACC(0);
    return ACC(LD(A_DT, x[pc.x_off + ((b * pc.O + g * Og + o) * pc.Ho + i) * pc.Wo + j]));
}

// element e of a tile: A (m, k) along k; B (k, n) along n (modes 0, 1) or k (mode 2)
void load_tiles(uint m0, uint n0, uint k0, uint kend) {
    uint t = gl_LocalInvocationID.x;
    [[unroll]] for (uint i = 0u; i < RA; i++) {
        uint e = t + i * WG, k = k0 + e % BK;
        ra[i] = k < kend ? load_a(m0 + e / BK, k) : ACC(0);
    }
    [[unroll]] for (uint i = 0u; i < RB; i++) {
        uint e = t + i * WG, k = k0 + (MODE == 2u ? e % BK : e / BN), n = n0 + (MODE == 2u ? e / BK : e % BN);
        if (MODE == 0u && SAME_N)
            rb[i] = k < kend ? x_tap0(k) : ACC(0);
        else
            rb[i] = k < kend ? load_b(k, n) : ACC(0);
    }
}

void store_tiles() {
    uint t = gl_LocalInvocationID.x;
    [[unroll]] for (uint i = 0u; i < RA; i++) {
        uint e = t + i * WG, m = e / BK, k = e % BK;
        As[k * LDS_A + m / 4u][m % 4u] = ra[i];
    }
    [[unroll]] for (uint i = 0u; i < RB; i++) {
        uint e = t + i * WG, k = MODE == 2u ? e % BK : e / BN, n = MODE == 2u ? e / BK : e % BN;
        Bs[k * LDS_B + n / 4u][n % 4u] = rb[i];
    }
}

void main() {
    uint t = gl_LocalInvocationID.x, tx = t % TX, ty = t / TX;
    uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
    g = gl_WorkGroupID.z % pc.G;
    uint chunk = gl_WorkGroupID.z / pc.G;
    KWr = KS != 0u ? KS : pc.KW;
    Cg = pc.C / pc.G, Og = pc.O / pc.G, KK = KS != 0u ? KS * KS : pc.KH * pc.KW;
    KM = pc.K, NM = pc.N;
    if (MODE == 3u) {
        ph = chunk / pc.s1, pv = chunk % pc.s1, chunk = 0u;
        r0 = (ph + uint(pc.p0)) % pc.s0, r1 = (pv + uint(pc.p1)) % pc.s1;
        q0 = (ph + uint(pc.p0) - r0) / pc.s0, q1 = (pv + uint(pc.p1) - r1) / pc.s1;
        nkh = r0 < pc.KH ? (pc.KH - r0 + pc.s0 - 1u) / pc.s0 : 0u, nkw = r1 < pc.KW ? (pc.KW - r1 + pc.s1 - 1u) / pc.s1 : 0u;
        Hp = ph < pc.H ? (pc.H - ph + pc.s0 - 1u) / pc.s0 : 0u, Wp = pv < pc.W ? (pc.W - pv + pc.s1 - 1u) / pc.s1 : 0u;
        KM = Og * nkh * nkw, NM = pc.Nb * Hp * Wp;
        if (n0 >= NM) return; // the whole workgroup: this phase has fewer pixels than phase 0
    }
    if (MODE == 0u && SAME_N) {
        uint n = n0 + t % BN, hw = pc.Ho * pc.Wo, q = n % hw;
        xok = n < pc.N, xb = pc.x_off + ((n / hw) * pc.C + g * Cg) * pc.H * pc.W;
        xh = int((q / pc.Wo) * pc.s0) - pc.p0, xv = int((q % pc.Wo) * pc.s1) - pc.p1;
    }
    uint kbeg = chunk * pc.kchunk, kend = MODE == 3u ? KM : min(pc.K, kbeg + pc.kchunk);
    ACC acc[TM * TN];
    [[unroll]] for (uint i = 0u; i < TM * TN; i++) acc[i] = ACC(0);
    load_tiles(m0, n0, kbeg, kend);
    for (uint k0 = kbeg; k0 < kend; k0 += BK) {
        store_tiles();
        barrier();
        if (k0 + BK < kend) load_tiles(m0, n0, k0 + BK, kend);
        [[unroll]] for (uint k = 0u; k < BK; k++) {
            ACC ar[TM], br[TN];
            [[unroll]] for (uint c = 0u; c < TM / 4u; c++) {
                ACC4 v = As[k * LDS_A + c * TY + ty];
                [[unroll]] for (uint j = 0u; j < 4u; j++) ar[4u * c + j] = v[j];
            }
            [[unroll]] for (uint c = 0u; c < TN / 4u; c++) {
                ACC4 v = Bs[k * LDS_B + c * TX + tx];
                [[unroll]] for (uint j = 0u; j < 4u; j++) br[4u * c + j] = v[j];
            }
            [[unroll]] for (uint i = 0u; i < TM; i++)
                [[unroll]] for (uint j = 0u; j < TN; j++) acc[i * TN + j] = fma(ar[i], br[j], acc[i * TN + j]);
        }
        barrier();
    }
    [[unroll]] for (uint i = 0u; i < TM; i++) {
        uint m = m0 + 4u * ty + 4u * TY * (i / 4u) + i % 4u;
        if (m >= pc.M) continue;
        [[unroll]] for (uint j = 0u; j < TN; j++) {
            uint n = n0 + 4u * tx + 4u * TX * (j / 4u) + j % 4u;
            if (n >= NM) continue;
            ACC v = acc[i * TN + j];
            uint dst;
            if (MODE == 0u) {
                uint hw = pc.Ho * pc.Wo;
                dst = ((n / hw) * pc.O + g * Og + m) * hw + n % hw;
                if (pc.has_b != 0u) v += ACC(LD(A_DT, bias[pc.bias_off + g * Og + m]));
            } else if (MODE == 1u) {
                uint hw = pc.H * pc.W;
                dst = ((n / hw) * pc.C + g * Cg + m) * hw + n % hw;
            } else if (MODE == 3u) {
                uint q = n % (Hp * Wp), h = ph + pc.s0 * (q / Wp), v = pv + pc.s1 * (q % Wp);
                dst = ((n / (Hp * Wp) * pc.C + g * Cg + m) * pc.H + h) * pc.W + v;
            } else {
                dst = chunk * pc.O * Cg * KK + (g * Og + m) * Cg * KK + n;
            }
            o[pc.o_off + dst] = SV(A_DT, v);
        }
    }
}
