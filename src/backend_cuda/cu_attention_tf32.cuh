/*
** Shared by the f32 mma.sync attention kernels (cu_ops_attention_tf32.cu forward, cu_ops_attention_tf32_bwd.cu
** backward), head dim D = E = Ev in {64, 128}: the 3xTF32 product on mma.sync.m16n8k8 and the staging of tiles.
**   mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32, one 32-bit element a register, lane = 4 g + t
**   (g = lane / 4, t = lane % 4), (row, column):
**     A 16x8 row-major: a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4)
**     B 8x8 (k x n):    b0 (k t, n g), b1 (k t + 4, n g)
**     C 16x8 f32:       c0 (g, 2t), c1 (g, 2t + 1), c2 (g + 8, 2t), c3 (g + 8, 2t + 1)
**   A C tile is not an A fragment (C's lane t holds columns 2t, 2t + 1; A's holds t, t + 4). The P V products take
**   it as one with the k order permuted: A's k = t is column 2t and k = t + 4 is column 2t + 1, so
**     a = (c0, c2, c1, c3) and B's b0 is row 2t, b1 row 2t + 1 of the 8 rows (tf32_b_kn).
**   3xTF32: x = hi + lo, hi = cvt.rna.tf32(x), lo = x - hi (exact in f32; the tensor core reads lo's top 19 bits);
**   a b ~ a_hi b_hi + a_hi b_lo + a_lo b_hi (a_lo b_lo ~ 2^-22 a b is dropped), fp32 accumulation: f32's accuracy
**   at 3 TF32 products.
** Tiles: rows of D floats in shared memory padded to TF32_LD(D) = D + 4 floats (row stride = 4 banks mod 32), so
** every fragment read is conflict-free: A and B-from-[n][k] read (g, t) at g LD + t (banks 4g + t), B-from-[k][n]
** reads (2t, g) and (2t + 1, g) at 2t LD + g (banks 8t + g). Staged with cp.async (16 bytes, rows past the end 0)
** from global rows at any stride that is a multiple of 4 floats (cu_attn_lay's .r).
** Configurations (TRIDENT_CUDA_ATTN_F32_CFG=0..7, default TF32_CFG_DEFAULT; =wmma leaves f32 to the
** WMMA kernels of cu_ops_attention_mma*.cu): W warps a block own 16 W rows (queries, or keys in the dk/dv pass);
** a loop tile has T rows (keys, or queries in the dk/dv pass), halved at D = 128 (registers and shared memory);
** "pre": K and V tiles presplit (tf32_split_tile: one more plane a tile, lo; no split in the fragment reads):
**     cfg 0: W 4, T 64   cfg 1: W 4, T 32   cfg 2: W 8, T 64   cfg 3: W 2, T 64
**     cfg 4: W 4, T 32 pre   cfg 5: W 8, T 32 pre   cfg 6: W 4, T 16 pre (16 at D 128 too)
**     cfg 7: W 4, T 32 pre, and the warp's Q A fragments split once into registers ("qreg", D = 64; cfg 4 at 128)
** (the forward's; the backward has its own list, TRIDENT_CUDA_ATTN_F32_BWD, below).
** defines: TF32_CFGS, TF32_CFG_DEFAULT, tf32_warps, tf32_tile, tf32_pre, tf32_qreg, tf32_ld, tf32_frag_a,
**          tf32_frag_b, tf32_split, tf32_exp2, tf32_mma3, tf32_a_ld, tf32_a_regs, tf32_a_split_rows, tf32_a_pre,
**          tf32_a_from_c, tf32_b_at, tf32_b_nk, tf32_b_kn, tf32_load, tf32_commit, tf32_wait, tf32_split_tile,
**          tf32_order,
**          cu_attn_tf32_cfg, TF32_BWD_CFGS, tf32_bwd_fused, tf32_bwd_pre, tf32_bwd_preq, tf32_bwd_warps,
**          tf32_bwd_tile, cu_attn_tf32_bwd_cfg,
**          tf32_takes, tf32_on_cfg, tf32_dispatch, cu_attn_tf32_fwd, cu_attn_tf32_bwd.
*/
#ifndef TRIDENT_CU_ATTENTION_TF32_CUH
#define TRIDENT_CU_ATTENTION_TF32_CUH

#include <stddef.h>
#include <stdint.h>

#include <utility>

#include "cu_attention.cuh"

/* The forward and backward (cu_ops_attention_tf32*.cu): launch and return true when they take the op (f32,
** E == Ev in {64, 128}, sm_80+, 16-byte aligned rows, the configuration not "wmma"); false leaves it to the
** next path. The backward sets *st to its launches' status. */
extern "C" bool cu_attn_tf32_fwd(cu_dev *d, const td_op *op, const cu_attn_args *a);
extern "C" bool cu_attn_tf32_bwd(cu_dev *d, const td_op *op, const cu_attn_args *a, td_status *st);

/* 1: the fastest on an H100 at W3's and W5's shapes (bench/RESULTS.md, fourth session) */
constexpr int TF32_CFGS = 8, TF32_CFG_DEFAULT = 1;
__host__ __device__ constexpr int tf32_warps(int cfg) { return cfg == 2 || cfg == 5 ? 8 : cfg == 3 ? 2 : 4; }
__host__ __device__ constexpr int tf32_tile(int cfg, int D) {
    return cfg == 6 ? 16 : (cfg == 1 || cfg == 4 || cfg == 5 || cfg == 7 ? 32 : 64) / (D == 128 ? 2 : 1);
}
__host__ __device__ constexpr bool tf32_pre(int cfg) { return cfg >= 4; }
__host__ __device__ constexpr bool tf32_qreg(int cfg) { return cfg == 7; }
template <int D> __host__ __device__ constexpr int tf32_ld() { return D + 4; }

/* The backward's variants (TRIDENT_CUDA_ATTN_F32_BWD=0..TF32_BWD_CFGS-1, default TF32_BWD_DEFAULT; the forward's
** configuration above does not change them): W warps a block, T rows a loop tile (halved at D = 128, 16 at least),
** and where dq is made (cu_ops_attention_tf32_bwd.cu): "split" a second pass recomputing S and dP per query block
** (one writer an element: the same bits run to run), "fused" inside the dk/dv pass (dS through shared memory, f32
** atomics: no recomputation, dq's sums in any order, as FlashAttention-2's):
**     0: split W 4, T 32 (cfg 1's pair)   1: split W 4, T 64 (cfg 0's)   2: split W 8, T 32   3: split W 4, T 16
**     4: fused W 4, T 32                  5: fused W 8, T 32             6: fused W 4, T 64   7: fused W 4, T 16
**     8: fused pre W 4, T 16              9: fused pre W 4, T 16, Q and dout split at each read   10: as 8, W 8
** "pre" (D = 64; at D = 128 the variant without it): the block's K presplit (tf32_split_tile), scale dS^T stored
** split, V's A fragments split once into registers, and (not in 9) each tile's Q and dout presplit.
** 7 is the default: the fastest on an H100 at [8,12,1024,64], [64,6,256,64] and [16,12,1024,64] (bench/RESULTS.md,
** fifth session); 3 the fastest of the run-to-run exact ones. */
constexpr int TF32_BWD_CFGS = 11, TF32_BWD_DEFAULT = 7;
__host__ __device__ constexpr bool tf32_bwd_fused(int b) { return b >= 4; }
__host__ __device__ constexpr bool tf32_bwd_pre(int b) { return b >= 8; }
__host__ __device__ constexpr bool tf32_bwd_preq(int b) { return b == 8 || b == 10; }
__host__ __device__ constexpr int tf32_bwd_warps(int b) { return b == 2 || b == 5 || b == 10 ? 8 : 4; }
__host__ __device__ constexpr int tf32_bwd_tile(int b, int D) {
    return b == 3 || b >= 7 ? 16 : (b == 1 || b == 6 ? 64 : 32) / (D == 128 ? 2 : 1);
}

/* The configuration TRIDENT_CUDA_ATTN_F32_CFG picks (read at every call, so a test or bench may change it):
** 0..TF32_CFGS-1, or -1 for "wmma" (these kernels decline) or TRIDENT_CUDA_ATTN_MMA=0 / TRIDENT_CUDA_ATTN_TF32=0
** (every tensor-core path off). Anything else: a one-line warning once, and TF32_CFG_DEFAULT. */
int cu_attn_tf32_cfg(void);
/* The backward variant TRIDENT_CUDA_ATTN_F32_BWD picks (read at every call): 0..TF32_BWD_CFGS-1; unset or empty:
** TF32_BWD_DEFAULT; anything else: a one-line warning once, and TF32_BWD_DEFAULT. */
int cu_attn_tf32_bwd_cfg(void);

/* Whether these kernels take the op (dtype dt): f32, E == Ev in {64, 128}, sm_80 or newer, a grid of N ceil(rows /
** 16) blocks within limits and a configuration picked (*cfg). The launchers also ask for 16-byte aligned rows
** (cu_attn_aligned). */
static inline bool tf32_takes(const cu_dev *d, const cu_attn_args *a, td_dtype dt, int *cfg) {
    int64_t rows = a->L > a->S ? a->L : a->S;
    if (dt != TD_F32 || d->cc_major < 8 || a->E != a->Ev || (a->E != 64 && a->E != 128)) return false;
    if (a->N * ((rows + 15) / 16) > INT32_MAX) return false;
    *cfg = cu_attn_tf32_cfg();
    return *cfg >= 0;
}

/* f(dim, std::integral_constant<int, C>()) for the C in C... that equals cfg, else for C = 0 */
template <typename F, typename Dim, int... C>
static void tf32_on_cfg(int cfg, F &f, Dim dim, std::integer_sequence<int, C...>) {
    if (!((cfg == C ? (f(dim, std::integral_constant<int, C>()), true) : false) || ...))
        f(dim, std::integral_constant<int, 0>());
}

/* Calls f(std::integral_constant<int, D>(), std::integral_constant<int, CFG>()) for head dim E = D in {64, 128}
** and configuration cfg in [0, NCFG) (anything else: 0); false (no call) for any other E. */
template <int NCFG = TF32_CFGS, typename F> static bool tf32_dispatch(int64_t E, int cfg, F &&f) {
    if (E != 64 && E != 128) return false;
    if (E == 64)
        tf32_on_cfg(cfg, f, std::integral_constant<int, 64>(), std::make_integer_sequence<int, NCFG>());
    else
        tf32_on_cfg(cfg, f, std::integral_constant<int, 128>(), std::make_integer_sequence<int, NCFG>());
    return true;
}

struct tf32_frag_a {
    uint32_t h[4], l[4];
};
struct tf32_frag_b {
    uint32_t h[2], l[2];
};

/* x = hi + lo, hi rounded to TF32 (nearest, ties away: half a TF32 ulp, bit 12, added to the magnitude's bits, the
** low 13 bits cleared; a carry into the exponent is the rounding up), lo = x - hi. cvt.rna.tf32.f32's bits for every
** finite x in two integer operations (sm_90's cvt is five: it also keeps inf and NaN apart, which lo = x - hi
** carries here: NaN or inf in x make lo NaN, as they did through cvt). */
__device__ __forceinline__ void tf32_split(float x, uint32_t &hi, uint32_t &lo) {
    hi = (__float_as_uint(x) + 0x1000u) & 0xffffe000u;
    lo = __float_as_uint(x - __uint_as_float(hi));
}

/* 2^x on MUFU.EX2 (ex2.approx.ftz): exp2f's instruction without its fix-up for results below 2^-126 (a scale before
** and a square after), which are 0 here: a probability under 1e-38 of the row's largest (1) adds nothing */
__device__ __forceinline__ float tf32_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ void tf32_mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* c += A B in 3xTF32, the small terms first */
__device__ __forceinline__ void tf32_mma3(float (&c)[4], const tf32_frag_a &a, const tf32_frag_b &b) {
    tf32_mma(c, a.l, b.h[0], b.h[1]);
    tf32_mma(c, a.h, b.l[0], b.l[1]);
    tf32_mma(c, a.h, b.h[0], b.h[1]);
}

/* A fragment of the four floats (a0, a1, a2, a3) */
__device__ __forceinline__ tf32_frag_a tf32_a_regs(float a0, float a1, float a2, float a3) {
    tf32_frag_a f;
    tf32_split(a0, f.h[0], f.l[0]);
    tf32_split(a1, f.h[1], f.l[1]);
    tf32_split(a2, f.h[2], f.l[2]);
    tf32_split(a3, f.h[3], f.l[3]);
    return f;
}

/* the A fragment (rows 0..15, columns 0..7) of a row-major tile p with leading dim ld (shared or global), split */
__device__ __forceinline__ tf32_frag_a tf32_a_ld(const float *p, int64_t ld) {
    int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    return tf32_a_regs(p[g * ld + t], p[(g + 8) * ld + t], p[g * ld + t + 4], p[(g + 8) * ld + t + 4]);
}

/* f[kk] = the A fragment of k-step kk (columns 8 kk .. 8 kk + 7) of the 16 rows at p, split once into registers
** (the "qreg" forward's Q, the "pre" backward's V) */
template <int KT> __device__ __forceinline__ void tf32_a_split_rows(tf32_frag_a (&f)[KT], const float *p, int64_t ld) {
#pragma unroll
    for (int kk = 0; kk < KT; kk++) f[kk] = tf32_a_ld(p + kk * 8, ld);
}

/* Presplit tiles ("pre" variants): hi = tf32(x) in place of x and lo = x - hi at p + lo (the same layout), split
** once a tile by tf32_split_tile instead of once a fragment by every warp that reads it: a fragment read is two
** plain loads an element, no arithmetic. The A fragment (rows 0..15, columns 0..7) of such a tile: */
__device__ __forceinline__ tf32_frag_a tf32_a_pre(const float *p, int ld, ptrdiff_t lo) {
    int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4,
        o[4] = {g * ld + t, (g + 8) * ld + t, g * ld + t + 4, (g + 8) * ld + t + 4};
    tf32_frag_a f;
#pragma unroll
    for (int r = 0; r < 4; r++) f.h[r] = __float_as_uint(p[o[r]]), f.l[r] = __float_as_uint(p[lo + o[r]]);
    return f;
}

/* The A fragment of k-step kk (columns 8 kk .. 8 kk + 7) of a 16-row C product c[n-tile][4], k order permuted */
__device__ __forceinline__ tf32_frag_a tf32_a_from_c(const float (*c)[4], int kk) {
    return tf32_a_regs(c[kk][0], c[kk][2], c[kk][1], c[kk][3]);
}

/* the B fragment of elements p[o0], p[o1]: split here, or (PRE) read from a presplit tile (lo planes at p + lo) */
template <bool PRE> __device__ __forceinline__ tf32_frag_b tf32_b_at(const float *p, int o0, int o1, ptrdiff_t lo) {
    tf32_frag_b f;
    if constexpr (PRE) {
        f.h[0] = __float_as_uint(p[o0]), f.l[0] = __float_as_uint(p[lo + o0]);
        f.h[1] = __float_as_uint(p[o1]), f.l[1] = __float_as_uint(p[lo + o1]);
    } else {
        tf32_split(p[o0], f.h[0], f.l[0]);
        tf32_split(p[o1], f.h[1], f.l[1]);
    }
    return f;
}
/* B fragment (k 8, n 8) when B^T = p [n][k] is row-major: b0 = p[g][t], b1 = p[g][t + 4] */
template <bool PRE = false> __device__ __forceinline__ tf32_frag_b tf32_b_nk(const float *p, int ld, ptrdiff_t lo = 0) {
    int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    return tf32_b_at<PRE>(p, g * ld + t, g * ld + t + 4, lo);
}
/* B fragment when B = p [k][n] is row-major, in tf32_a_from_c's k order: b0 = p[2t][g], b1 = p[2t + 1][g] */
template <bool PRE = false> __device__ __forceinline__ tf32_frag_b tf32_b_kn(const float *p, int ld, ptrdiff_t lo = 0) {
    int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    return tf32_b_at<PRE>(p, 2 * t * ld + g, (2 * t + 1) * ld + g, lo);
}

__device__ __forceinline__ void tf32_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void tf32_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

/* sm [R][tf32_ld] = rows [r0, r0 + R) of x [rows][D] (row stride ld, a multiple of 4), zeros past rows
** (asynchronous: tf32_commit, tf32_wait); NTH threads share the copy */
template <int D, int R, int NTH>
__device__ __forceinline__ void tf32_load(float *sm, const float *x, int64_t r0, int64_t rows, int64_t ld) {
    constexpr int C = D / 4; /* 16-byte chunks a row */
    for (int c = threadIdx.x; c < R * C; c += NTH) {
        int r = c / C, e = (c % C) * 4;
        bool ok = r0 + r < rows;
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(
                         (uint32_t)__cvta_generic_to_shared(sm + r * tf32_ld<D>() + e)),
                     "l"(x + (ok ? (r0 + r) * ld + e : 0)), "r"(ok ? 16 : 0));
    }
}

/* The presplit of a tile staged by tf32_load<D, R, NTH>(sm, ...): each thread splits the chunks it staged itself
** (so only its own tf32_wait comes before, no barrier), x -> hi in place, lo into the plane lo (same layout). */
template <int D, int R, int NTH> __device__ __forceinline__ void tf32_split_tile(float *sm, float *lo) {
    constexpr int C = D / 4;
    for (int c = threadIdx.x; c < R * C; c += NTH) {
        int o = (c / C) * tf32_ld<D>() + (c % C) * 4;
        float4 v = *(float4 *)(sm + o);
        uint32_t h[4], l[4];
        tf32_split(v.x, h[0], l[0]), tf32_split(v.y, h[1], l[1]), tf32_split(v.z, h[2], l[2]);
        tf32_split(v.w, h[3], l[3]);
        *(float4 *)(sm + o) =
            make_float4(__uint_as_float(h[0]), __uint_as_float(h[1]), __uint_as_float(h[2]), __uint_as_float(h[3]));
        *(float4 *)(lo + o) =
            make_float4(__uint_as_float(l[0]), __uint_as_float(l[1]), __uint_as_float(l[2]), __uint_as_float(l[3]));
    }
}

/* block -> (n, first row of its tile of R rows): n fastest; reverse: the last tiles first (causal: the heaviest) */
__device__ __forceinline__ void tf32_order(const cu_attn_args &a, int64_t rows, int R, bool reverse, int64_t *n,
                                           int64_t *r0) {
    int64_t tiles = (rows + R - 1) / R, tile = blockIdx.x / a.N;
    *n = blockIdx.x % a.N;
    *r0 = (reverse ? tiles - 1 - tile : tile) * R;
}

#endif /* TRIDENT_CU_ATTENTION_TF32_CUH */
