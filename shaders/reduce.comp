#version 450
#extension GL_GOOGLE_include_directive : require
// Reductions over a set of dims: out[r] = R(in[kept(r) + red(j)] for j < n_red).
// in (binding 0) any strides, dtype A_DT; out (binding 1) contiguous over the
// kept dims (the reduced ones have size 1). The host splits in's dims into
// kept dims (<= 4, outer ones become separate dispatches) and reduced dims
// (<= 8), each merged where strides allow; j enumerates the reduced dims in
// row-major order, so argmax over several dims gives the flat index.
// OP (specialization constant 1):
//   0 sum  1 mean  2 max  3 min  4 var (sum (x - mean)^2 / max(0, n - correction))
//   5 logsumexp (max-shifted)  6 argmax  7 argmin (first extreme; NaN counts as extreme)
// One workgroup per output row; max/min/logsumexp/arg* propagate NaN.
// Variants: reduce_<float dt> (0-7), reduce_<int dt> (2, 3, 6, 7),
// reduce_sum_<int dt> (0 into int64, -DSUM_I64). Arg variants write int64
// as pairs of uint words (-DARG via OP >= 6 at run time needs no Int64).
// C mirror: vk_pc_reduce in src/backend_vulkan/vk_ops_reduce.c.
#include "types.glsl"

layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint OP = 0;
layout(local_size_x_id = 0) in;

layout(push_constant) uniform PC {
    uint n_out, n_red, in_off, out_off;
    uint kdim, rdim;
    int correction;
    uint n_mean; // reduce_tile.comp only
    uint kshape[4], kstride[4];
    uint rshape[8], rstride[8];
} pc;

#ifdef SUM_I64
#define O_DT DT_I64
#define ACC int64_t
#define ACC_NO_SUBGROUP
#else
#define O_DT A_DT
#define ACC VT(A_DT)
#if A_DT == DT_I64
#define ACC_NO_SUBGROUP
#endif
#endif
#include "reduce.glsl"
#if A_DT == DT_F64
#include "math64.glsl"
#define EXP(x) d_exp(x)
#define LOG(x) d_log(x)
#else
#define EXP(x) ACC(exp(float(x)))
#define LOG(x) ACC(log(float(x)))
#endif

layout(binding = 0) readonly buffer BA { ST(A_DT) a[]; };
#if A_DT == DT_F32
layout(binding = 0) readonly buffer BA4 { vec4 a4[]; }; // contiguous f32 sums: 16-byte loads
#endif
layout(binding = 1) writeonly buffer BO { ST(O_DT) o[]; };
layout(binding = 1) writeonly buffer BOI { uint oi[]; }; // arg variants: int64 as words

#define IS_FLOAT (A_DT <= DT_BF16)

uint kept_offset(uint r) {
    uint off = pc.in_off;
    for (int d = int(pc.kdim) - 1; d >= 0; d--) {
        off += (r % pc.kshape[d]) * pc.kstride[d];
        r /= pc.kshape[d];
    }
    return off;
}

uint red_offset(uint j) {
    if (pc.rdim == 1u) return j * pc.rstride[0];
    uint off = 0u;
    for (int d = int(pc.rdim) - 1; d >= 0; d--) {
        off += (j % pc.rshape[d]) * pc.rstride[d];
        j /= pc.rshape[d];
    }
    return off;
}

ACC load(uint base, uint j) { return ACC(LD(A_DT, a[base + red_offset(j)])); }

#if IS_FLOAT
ACC lowest() { return ACC(uintBitsToFloat(0xFF800000u)); } // -inf
ACC highest() { return ACC(uintBitsToFloat(0x7F800000u)); }
#elif A_DT == DT_U8
ACC lowest() { return 0u; }
ACC highest() { return 255u; }
#elif A_DT == DT_I32
ACC lowest() { return -2147483647 - 1; }
ACC highest() { return 2147483647; }
#else
ACC lowest() { return -9223372036854775807l - 1l; }
ACC highest() { return 9223372036854775807l; }
#endif

void store(uint r, ACC v) {
#ifndef SUM_I64
    if (OP >= 6u) return;
#endif
    o[pc.out_off + r] = SV(O_DT, v);
}

void main() {
    uint t = gl_LocalInvocationID.x;
    for (uint r = gl_WorkGroupID.x; r < pc.n_out; r += gl_NumWorkGroups.x) {
        uint base = kept_offset(r);
        if (OP == 0u || OP == 1u) {
            ACC s = ACC(0);
            uint j0 = 0u;
#if A_DT == DT_F32
            if (pc.rdim == 1u && pc.rstride[0] == 1u && base % 4u == 0u) {
                // two independent 16-byte loads in flight per step, then the tail
                uint n4 = pc.n_red / 4u, b4 = base / 4u, j = t;
                vec4 s0 = vec4(0.0), s1 = vec4(0.0);
                for (; j + WG < n4; j += 2u * WG) {
                    s0 += a4[b4 + j];
                    s1 += a4[b4 + j + WG];
                }
                if (j < n4) s0 += a4[b4 + j];
                s0 += s1;
                s = (s0.x + s0.y) + (s0.z + s0.w);
                j0 = 4u * n4;
            }
#endif
            for (uint j = j0 + t; j < pc.n_red; j += WG) s += load(base, j);
            s = wg_reduce(s, R_ADD);
#if IS_FLOAT
            if (OP == 1u) s /= ACC(pc.n_red);
#endif
            if (t == 0u) store(r, s);
            continue;
        }
        // max/min family: the extreme, and whether a NaN was seen
        bool is_max = OP == 2u || OP == 5u || OP == 6u;
        ACC m = is_max ? lowest() : highest();
        uint best = 0xFFFFFFFFu, first_nan = 0xFFFFFFFFu;
        if (OP != 4u) {
            for (uint j = t; j < pc.n_red; j += WG) {
                ACC x = load(base, j);
#if IS_FLOAT
                if (isnan(x)) {
                    first_nan = min(first_nan, j);
                    continue;
                }
#endif
                if (is_max ? x > m : x < m) m = x, best = j;
                else if (x == m && best == 0xFFFFFFFFu) best = j;
            }
        }
#if IS_FLOAT
        first_nan = wg_min_u(first_nan);
        bool nan = first_nan != 0xFFFFFFFFu;
#else
        bool nan = false;
#endif
        if (OP == 2u || OP == 3u) {
            m = wg_reduce(m, is_max ? R_MAX : R_MIN);
            if (t == 0u) store(r, nan ? ACC(0.0 / 0.0) : m);
        } else if (OP == 6u || OP == 7u) {
            ACC e = wg_reduce(m, is_max ? R_MAX : R_MIN);
            uint idx = wg_min_u(best != 0xFFFFFFFFu && m == e ? best : 0xFFFFFFFFu);
            if (nan) idx = first_nan;
            if (idx == 0xFFFFFFFFu) idx = 0u;
            if (t == 0u) {
                oi[2u * (pc.out_off + r)] = idx;
                oi[2u * (pc.out_off + r) + 1u] = 0u;
            }
#if IS_FLOAT
        } else if (OP == 5u) { // logsumexp = m + log(sum exp(x - m))
            m = wg_reduce(m, R_MAX);
            ACC s = ACC(0);
            if (!isinf(m))
                for (uint j = t; j < pc.n_red; j += WG) s += EXP(load(base, j) - m);
            s = wg_reduce(s, R_ADD);
            if (t == 0u) store(r, nan ? ACC(0.0 / 0.0) : isinf(m) ? m : m + LOG(s));
        } else if (OP == 4u) { // two passes over data shifted by its first element k:
            // mean of (x - k), then squared deviations; exact 0 for constant rows
            ACC k = pc.n_red > 0u ? load(base, 0u) : ACC(0);
            ACC s = ACC(0);
            for (uint j = t; j < pc.n_red; j += WG) s += load(base, j) - k;
            ACC mean = wg_reduce(s, R_ADD) / ACC(pc.n_red);
            ACC q = ACC(0);
            for (uint j = t; j < pc.n_red; j += WG) {
                ACC dx = load(base, j) - k - mean;
                q += dx * dx;
            }
            q = wg_reduce(q, R_ADD);
            if (t == 0u) store(r, q / ACC(max(0, int(pc.n_red) - pc.correction)));
#endif
        }
    }
}
