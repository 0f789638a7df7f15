#version 450
#extension GL_GOOGLE_include_directive : require
// MATMUL: out[z] = a[z] @ b[z] for each batch entry z.
// a [.., M, K], b [.., K, N]: any row/column strides (transposed operands come
// in as strides), batch dims with any strides (0 = broadcast); out [.., M, N]
// contiguous. Bindings: a 0, b 1, out 2; dtype A_DT, accumulation in float
// (double for f64).
// Tiling: a workgroup of 16x16 threads owns a BM x BN = 64 x 64 block of out
// and walks K in steps of BK (specialization constant 1); each step stages an
// A tile (BM x BK) and a B tile (BK x BN) in shared memory, then each thread
// accumulates a TM x TN = 4 x 4 register block from rows ty + 16i and columns
// tx + 16j (so stores of neighbouring threads are adjacent). Tile loads follow
// the operand's contiguous dimension so global reads coalesce.
// Shared memory: 2 * BK * 64 * sizeof(ACC) = 8 KiB at BK 16 (f32), within
// NVIDIA Vulkan's 48 KiB and lavapipe's 32 KiB.
// Grid: (ceil(N/BN), ceil(M/BM), batches). C mirror: vk_pc_matmul (vk_ops_matmul.c).
#include "types.glsl"

layout(constant_id = 0) const uint WG = 256; // must be 256 (16 x 16 threads)
layout(constant_id = 1) const uint BK = 16;
layout(local_size_x_id = 0) in;

#define BM 64u
#define BN 64u
#define TM 4
#define TN 4

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
    uint t = gl_LocalInvocationID.x, tx = t % 16u, ty = t / 16u;
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
    for (int i = 0; i < TM * TN; i++) acc[i] = ACC(0);
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
            for (int i = 0; i < TM; i++) ar[i] = As[k * BM + ty + 16u * uint(i)];
            for (int j = 0; j < TN; j++) br[j] = Bs[k * BN + tx + 16u * uint(j)];
            for (int i = 0; i < TM; i++)
                for (int j = 0; j < TN; j++) acc[i * TN + j] = fma(ar[i], br[j], acc[i * TN + j]);
        }
        barrier();
    }
    for (int i = 0; i < TM; i++) {
        uint gm = m0 + ty + 16u * uint(i);
        if (gm >= pc.M) continue;
        for (int j = 0; j < TN; j++) {
            uint gn = n0 + tx + 16u * uint(j);
            if (gn < pc.N) o[oo + gm * pc.N + gn] = SV(A_DT, acc[i * TN + j]);
        }
    }
}
