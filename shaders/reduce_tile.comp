// variants: num
#version 450
#extension GL_GOOGLE_include_directive : require
// Reductions with many outputs: out[r] = R(in[kept(r) + red(j)] for j < n_red)
// for R = sum (OP 0), mean (1), max (2), min (3); the push constants and the
// dims are those of reduce.comp (C mirror: vk_pc_reduce, vk_ops_reduce.c).
// A workgroup of WG = TX * TY invocations owns a tile of TX consecutive
// outputs: invocation (x, y) folds the reduced elements j = y, y + TY, ...
// of output r0 + x, so the TX invocations of a row read TX neighbouring
// outputs (one coalesced access when the innermost kept dim has stride 1, as in
// [8, 64, 256] summed over dim 0 or a bias gradient over [B*T, out]); then the
// TY partials of each output are combined through shared memory, in a fixed
// order. No subgroup operations, so it is the same on every subgroup size.
// max/min: NaN wins.
// Column sums split over rows (vk_ops_reduce.c, rows_split_of) run it twice: pass 1 into a scratch
// [C, n_out] of partial sums over C chunks of rows, pass 2 over that scratch. For f16/bf16 the scratch
// is f32 (F32_IO: bit 0, in is f32; bit 1, out is f32), and mean divides by pc.n_mean where nonzero
// (the rows of all chunks) rather than by n_red.
#include "types.glsl"

layout(constant_id = 0) const uint WG = 256;
layout(constant_id = 1) const uint OP = 0;
layout(constant_id = 2) const uint TX = 32;
layout(constant_id = 3) const uint F32_IO = 0;
layout(local_size_x_id = 0) in;

layout(push_constant) uniform PC {
    uint n_out, n_red, in_off, out_off;
    uint kdim, rdim;
    int correction;
    uint n_mean;
    uint kshape[4], kstride[4];
    uint rshape[8], rstride[8];
} pc;

#define ACC VT(A_DT)
#define IS_FLOAT (A_DT <= DT_BF16)

layout(binding = 0) readonly buffer BA { ST(A_DT) a[]; };
layout(binding = 1) writeonly buffer BO { ST(A_DT) o[]; };
layout(binding = 0) readonly buffer BAF { float af[]; }; // F32_IO bit 0
layout(binding = 1) writeonly buffer BOF { float of[]; }; // F32_IO bit 1

shared ACC part[WG];
shared bool part_nan[WG];

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

ACC start() {
    if (OP <= 1u) return ACC(0);
#if IS_FLOAT
    return ACC(uintBitsToFloat(OP == 2u ? 0xFF800000u : 0x7F800000u)); // -inf for max, +inf for min
#elif A_DT == DT_U8
    return OP == 2u ? ACC(0) : ACC(255);
#elif A_DT == DT_I32
    return OP == 2u ? ACC(-2147483647 - 1) : ACC(2147483647);
#else
    return OP == 2u ? ACC(-9223372036854775807l - 1l) : ACC(9223372036854775807l);
#endif
}

ACC fold(ACC s, ACC x) { return OP <= 1u ? s + x : OP == 2u ? max(s, x) : min(s, x); }

void main() {
    uint t = gl_LocalInvocationID.x, x = t % TX, y = t / TX, TY = WG / TX;
    for (uint r0 = gl_WorkGroupID.x * TX; r0 < pc.n_out; r0 += gl_NumWorkGroups.x * TX) {
        uint r = r0 + x;
        ACC s = start();
        bool nan = false;
        if (r < pc.n_out) {
            uint base = kept_offset(r);
            for (uint j = y; j < pc.n_red; j += TY) {
                uint at = base + red_offset(j);
                ACC v = (F32_IO & 1u) != 0u ? ACC(af[at]) : ACC(LD(A_DT, a[at]));
#if IS_FLOAT
                if (isnan(v)) nan = true;
#endif
                s = fold(s, v);
            }
        }
        part[t] = s;
        part_nan[t] = nan;
        barrier();
        if (y == 0u && r < pc.n_out) {
            for (uint k = 1u; k < TY; k++) {
                s = fold(s, part[k * TX + x]);
                nan = nan || part_nan[k * TX + x];
            }
#if IS_FLOAT
            if (OP == 1u) s /= ACC(pc.n_mean != 0u ? pc.n_mean : pc.n_red);
            if (nan && OP >= 2u) s = ACC(0.0 / 0.0);
#endif
            if ((F32_IO & 2u) != 0u)
                of[pc.out_off + r] = float(s);
            else
                o[pc.out_off + r] = SV(A_DT, s);
        }
        barrier();
    }
}
