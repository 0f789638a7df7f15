// variants: float
#version 450
#extension GL_GOOGLE_include_directive : require
// MATMUL: out[z] = a[z] @ b[z] for each batch entry z.
// a [.., M, K], b [.., K, N]: any row/column strides (transposed operands come
// in as strides), batch dims with any strides (0 = broadcast); out [.., M, N]
// contiguous. Bindings: a 0, b 1, out 2; dtype A_DT, accumulation in float
// (double for f64).
// Tiling (specialization constants 1..6: BK, BM, BN, TM, TN, KU; TM, TN
// multiples of 4, KU divides BK): a workgroup of (BM/TM) x (BN/TN) threads (= constant 0) owns a BM x BN
// block of out and walks K in steps of BK. Each step stages an A tile (BM x BK)
// and a B tile (BK x BN) in shared memory, k-major, so that each thread reads
// its TM rows and TN columns as 4-vectors: rows 4 ty + 4 TY c + (0..3) and
// columns 4 tx + 4 TX c + (0..3) (neighbouring threads store adjacent runs).
// Tiles move in runs of 4 elements along the operand's contiguous dimension
// (one 16-byte load for f32 where the run is aligned and whole, else 4 loads
// with bounds checks); the next step's runs are loaded into registers while
// the current tiles are multiplied. Each step's BK-long inner product runs
// KU k's per loop iteration, unrolled (KU = BK: all of it in one block): a
// TM x TN block is TM * TN fmas per k, and NVIDIA's compiler took ~30 s over the
// 8 x 8 tiles' 16 k's unrolled (1024 fmas in one block), so those take KU 4.
// Shared memory: (BM + BN) * BK * sizeof(ACC); the host keeps it within the
// device's limit (48 KiB on NVIDIA Vulkan, 32 KiB on lavapipe).
// Grid: (ceil(N/BN), ceil(M/BM), batches). C mirror: vk_pc_matmul (vk_ops_matmul.c).
#extension GL_EXT_control_flow_attributes : require
#include "types.glsl"

layout(constant_id = 0) const uint WG = 256; // (BM / TM) * (BN / TN)
layout(constant_id = 1) const uint BK = 16;
layout(constant_id = 2) const uint BM = 64;
layout(constant_id = 3) const uint BN = 64;
layout(constant_id = 4) const uint TM = 4;
layout(constant_id = 5) const uint TN = 4;
layout(constant_id = 6) const uint KU = 16; // k's per iteration of the inner product's loop
layout(local_size_x_id = 0) in;
const uint TX = BN / TN, TY = BM / TM;
const uint RA = BM * BK / 4u / WG, RB = BK * BN / 4u / WG; // runs per thread

layout(push_constant) uniform PC {
    uint M, N, K, zbase;
    uint a_off, b_off, o_off, bdim;
    uint a_rs, a_cs, b_rs, b_cs;
    uint bshape[3], a_bs[3], b_bs[3];
} pc;

layout(binding = 0) readonly buffer BA { ST(A_DT) a[]; };
layout(binding = 1) readonly buffer BB { ST(A_DT) b[]; };
layout(binding = 2) writeonly buffer BO { ST(A_DT) o[]; };
#if A_DT == DT_F32
layout(binding = 0) readonly buffer BA4 { vec4 a4[]; };
layout(binding = 1) readonly buffer BB4 { vec4 b4[]; };
#endif

#define ACC VT(A_DT)
#if A_DT == DT_F64
#define ACC4 dvec4
#else
#define ACC4 vec4
#endif
shared ACC4 As[BK * BM / 4u]; // As[k][m], 4 m per entry
shared ACC4 Bs[BK * BN / 4u]; // Bs[k][n], 4 n per entry

ACC4 ra[RA], rb[RB];

// A run e: 4 elements along m (a column-major) or along k, at tile row r, column c.
void a_run(uint e, bool along_m, out uint r, out uint c) {
    r = along_m ? 4u * (e % (BM / 4u)) : e / (BK / 4u);
    c = along_m ? e / (BM / 4u) : 4u * (e % (BK / 4u));
}
// B run e: 4 elements along n (b row-major) or along k, at tile row r (k), column c (n).
void b_run(uint e, bool along_n, out uint r, out uint c) {
    r = along_n ? e / (BN / 4u) : 4u * (e % (BK / 4u));
    c = along_n ? 4u * (e % (BN / 4u)) : e / (BK / 4u);
}

ACC ld_a(uint ao, uint gm, uint gk) {
    return gm < pc.M && gk < pc.K ? ACC(LD(A_DT, a[ao + gm * pc.a_rs + gk * pc.a_cs])) : ACC(0);
}
ACC ld_b(uint bo, uint gk, uint gn) {
    return gk < pc.K && gn < pc.N ? ACC(LD(A_DT, b[bo + gk * pc.b_rs + gn * pc.b_cs])) : ACC(0);
}

void load_tiles(uint m0, uint n0, uint k0, uint ao, uint bo, bool a_m, bool b_n, bool avec, bool bvec) {
    uint t = gl_LocalInvocationID.x;
    [[unroll]] for (uint i = 0u; i < RA; i++) {
        uint r, c;
        a_run(t + i * WG, a_m, r, c);
        uint gm = m0 + r, gk = k0 + c;
#if A_DT == DT_F32
        if (avec) {
            bool in_ = gm < pc.M && gk < pc.K;
            ra[i] = in_ ? a4[(ao + gm * pc.a_rs + gk * pc.a_cs) / 4u] : vec4(0.0);
            continue;
        }
#endif
        uint dm = a_m ? 1u : 0u, dk = 1u - dm;
        ra[i] = ACC4(ld_a(ao, gm, gk), ld_a(ao, gm + dm, gk + dk), ld_a(ao, gm + 2u * dm, gk + 2u * dk),
                     ld_a(ao, gm + 3u * dm, gk + 3u * dk));
    }
    [[unroll]] for (uint i = 0u; i < RB; i++) {
        uint r, c;
        b_run(t + i * WG, b_n, r, c);
        uint gk = k0 + r, gn = n0 + c;
#if A_DT == DT_F32
        if (bvec) {
            bool in_ = gk < pc.K && gn < pc.N;
            rb[i] = in_ ? b4[(bo + gk * pc.b_rs + gn * pc.b_cs) / 4u] : vec4(0.0);
            continue;
        }
#endif
        uint dn = b_n ? 1u : 0u, dk = 1u - dn;
        rb[i] = ACC4(ld_b(bo, gk, gn), ld_b(bo, gk + dk, gn + dn), ld_b(bo, gk + 2u * dk, gn + 2u * dn),
                     ld_b(bo, gk + 3u * dk, gn + 3u * dn));
    }
}

void store_tiles(bool a_m, bool b_n) {
    uint t = gl_LocalInvocationID.x;
    [[unroll]] for (uint i = 0u; i < RA; i++) {
        uint r, c;
        a_run(t + i * WG, a_m, r, c);
        if (a_m) {
            As[(c * BM + r) / 4u] = ra[i];
        } else {
            [[unroll]] for (uint j = 0u; j < 4u; j++) As[((c + j) * BM + r) / 4u][r % 4u] = ra[i][j];
        }
    }
    [[unroll]] for (uint i = 0u; i < RB; i++) {
        uint r, c;
        b_run(t + i * WG, b_n, r, c);
        if (b_n) {
            Bs[(r * BN + c) / 4u] = rb[i];
        } else {
            [[unroll]] for (uint j = 0u; j < 4u; j++) Bs[((r + j) * BN + c) / 4u][c % 4u] = rb[i][j];
        }
    }
}

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
    // runs follow the contiguous dimension; 16-byte loads need aligned, whole runs
    bool a_m = pc.a_rs == 1u && pc.a_cs != 1u, b_n = pc.b_cs == 1u;
    bool avec = a_m ? pc.a_cs % 4u == 0u && pc.M % 4u == 0u : pc.a_cs == 1u && pc.a_rs % 4u == 0u && pc.K % 4u == 0u;
    bool bvec = b_n ? pc.b_rs % 4u == 0u && pc.N % 4u == 0u : pc.b_rs == 1u && pc.b_cs % 4u == 0u && pc.K % 4u == 0u;
    avec = avec && ao % 4u == 0u;
    bvec = bvec && bo % 4u == 0u;
    ACC acc[TM * TN];
    [[unroll]] for (uint i = 0u; i < TM * TN; i++) acc[i] = ACC(0);
    load_tiles(m0, n0, 0u, ao, bo, a_m, b_n, avec, bvec);
    for (uint k0 = 0u; k0 < pc.K; k0 += BK) {
        store_tiles(a_m, b_n);
        barrier();
        if (k0 + BK < pc.K) load_tiles(m0, n0, k0 + BK, ao, bo, a_m, b_n, avec, bvec);
        [[dont_unroll]] for (uint k1 = 0u; k1 < BK; k1 += KU) {
            [[unroll]] for (uint k2 = 0u; k2 < KU; k2++) {
                uint k = k1 + k2;
                ACC ar[TM], br[TN];
                [[unroll]] for (uint c = 0u; c < TM / 4u; c++) {
                    ACC4 v = As[k * (BM / 4u) + c * TY + ty];
                    [[unroll]] for (uint j = 0u; j < 4u; j++) ar[4u * c + j] = v[j];
                }
                [[unroll]] for (uint c = 0u; c < TN / 4u; c++) {
                    ACC4 v = Bs[k * (BN / 4u) + c * TX + tx];
                    [[unroll]] for (uint j = 0u; j < 4u; j++) br[4u * c + j] = v[j];
                }
                [[unroll]] for (uint i = 0u; i < TM; i++)
                    [[unroll]] for (uint j = 0u; j < TN; j++) acc[i * TN + j] = fma(ar[i], br[j], acc[i * TN + j]);
            }
        }
        barrier();
    }
    [[unroll]] for (uint i = 0u; i < TM; i++) {
        uint gm = m0 + 4u * ty + 4u * TY * (i / 4u) + i % 4u;
        if (gm >= pc.M) continue;
        [[unroll]] for (uint j = 0u; j < TN; j++) {
            uint gn = n0 + 4u * tx + 4u * TX * (j / 4u) + j % 4u;
            if (gn < pc.N) o[oo + gm * pc.N + gn] = SV(A_DT, acc[i * TN + j]);
        }
    }
}
