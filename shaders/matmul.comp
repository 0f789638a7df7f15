#version 450
#extension GL_GOOGLE_include_directive : require
// MATMUL: out[z] = a[z] @ b[z] for each batch entry z.
// a [.., M, K], b [.., K, N]: any row/column strides (transposed operands come
// in as strides), batch dims with any strides (0 = broadcast); out [.., M, N]
// contiguous. Bindings: a 0, b 1, out 2; dtype A_DT, accumulation in float
// (double for f64).
// Tiling (specialization constants 1..5: BK, BM, BN, TM, TN): a workgroup of
// (BM/TM) x (BN/TN) threads (= constant 0) owns a BM x BN block of out and
// walks K in steps of BK; each step stages an A tile (BM x BK) and a B tile
// (BK x BN) in shared memory, then each thread accumulates a TM x TN register
// block from rows ty + (BM/TM) i and columns tx + (BN/TN) j (so stores of
// neighbouring threads are adjacent). Tile loads follow the operand's
// contiguous dimension so global reads coalesce. The host picks 64x64 tiles
// with 4x4 per thread (BK 16) for small products and 128x128 with 8x8 (BK 8)
// for large ones.
// Shared memory: (BM + BN) * BK * sizeof(ACC) = 8 KiB (f32) in both configs,
// within NVIDIA Vulkan's 48 KiB and lavapipe's 32 KiB.
// Grid: (ceil(N/BN), ceil(M/BM), batches). C mirror: vk_pc_matmul (vk_ops_matmul.c).
#include "types.glsl"

layout(constant_id = 0) const uint WG = 256; // (BM / TM) * (BN / TN)
layout(constant_id = 1) const uint BK = 16;
layout(constant_id = 2) const uint BM = 64;
layout(constant_id = 3) const uint BN = 64;
layout(constant_id = 4) const uint TM = 4;
layout(constant_id = 5) const uint TN = 4;
layout(local_size_x_id = 0) in;
const uint TX = BN / TN, TY = BM / TM;

layout(push_constant) uniform PC {
    uint M, N, K, zbase;
    uint a_off, b_off, o_off, bdim;
    uint a_rs, a_cs, b_rs, b_cs;
    uint bshape[3], a_bs[3], b_bs[3];
} pc;

layout(binding = 0) readonly buffer BA { ST(A_DT) a[]; };
layout(binding = 1) readonly buffer BB { ST(A_DT) b[]; };
layout(binding = 2) writeonly buffer BO { ST(A_DT) o[]; };

#define ACC VT(A_DT)
shared ACC As[BK * BM]; // As[k * BM + m]
shared ACC Bs[BK * BN]; // Bs[k * BN + n]

void main() {
    uint t = gl_LocalInvocationID.x, tx = t % TX, ty = t / TX;
    uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
    uint z = gl_WorkGroupID.z + pc.zbase;
    uint ao = pc.a_off, bo = pc.b_off, oo = pc.o_off + z * pc.M * pc.N;
    for (int d = int(pc.bdim) - 1; d >= 0; d--) {
        uint c = z % pc.bshape[d];
        z /= pc.bshape[d];
        ao += c * pc.a_bs[d];
        bo += c * pc.b_bs[d];
    }
    ACC acc[TM * TN];
    for (uint i = 0u; i < TM * TN; i++) acc[i] = ACC(0);
    bool a_rowmajor = pc.a_cs == 1u, b_rowmajor = pc.b_cs == 1u;
    for (uint k0 = 0u; k0 < pc.K; k0 += BK) {
        for (uint e = t; e < BM * BK; e += WG) {
            uint r = a_rowmajor ? e / BK : e % BM, c = a_rowmajor ? e % BK : e / BM;
            uint gm = m0 + r, gk = k0 + c;
            As[c * BM + r] = gm < pc.M && gk < pc.K ? ACC(LD(A_DT, a[ao + gm * pc.a_rs + gk * pc.a_cs])) : ACC(0);
        }
        for (uint e = t; e < BK * BN; e += WG) {
            uint r = b_rowmajor ? e / BN : e % BK, c = b_rowmajor ? e % BN : e / BK;
            uint gk = k0 + r, gn = n0 + c;
            Bs[r * BN + c] = gk < pc.K && gn < pc.N ? ACC(LD(A_DT, b[bo + gk * pc.b_rs + gn * pc.b_cs])) : ACC(0);
        }
        barrier();
        for (uint k = 0u; k < BK; k++) {
            ACC ar[TM], br[TN];
            for (uint i = 0u; i < TM; i++) ar[i] = As[k * BM + ty + TY * i];
            for (uint j = 0u; j < TN; j++) br[j] = Bs[k * BN + tx + TX * j];
            for (uint i = 0u; i < TM; i++)
                for (uint j = 0u; j < TN; j++) acc[i * TN + j] = fma(ar[i], br[j], acc[i * TN + j]);
        }
        barrier();
    }
    for (uint i = 0u; i < TM; i++) {
        uint gm = m0 + ty + TY * i;
        if (gm >= pc.M) continue;
        for (uint j = 0u; j < TN; j++) {
            uint gn = n0 + tx + TX * j;
            if (gn < pc.N) o[oo + gm * pc.N + gn] = SV(A_DT, acc[i * TN + j]);
        }
    }
}
