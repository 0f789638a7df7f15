/*
** The mma.sync forward of ATTENTION for f16/bf16 with E == Ev in {32, 64, 128} (masks, causal, dropout),
** FlashAttention-2's loop (Dao 2023) with every accumulator in registers (cu_attention_fa.cuh has the fragments):
**   a block of 4 warps owns 64 query rows (16 per warp, Q_w kept as A fragments); per tile of 64 keys (K, V
**   staged by cp.async into one of two buffers while the other is used):
**     S_w = Q_w K^T (16 x 64 fp32)                                                          (tensor cores)
**     s = S scale log2e + mask log2e (only on tiles that need it: a mask, the causal diagonal, the last keys)
**     m_new = max(m, rowmax s) (quad shuffles), alpha = 2^(m - m_new), P = 2^(s - m_new),
**     l = l alpha + rowsum P (per lane, summed over the quad at the end), O_w = O_w alpha
**     O_w += (P z) V, P z rounded to the input dtype as the A operand                        (tensor cores)
**   out = O / l, lse = (m + log2 l) ln 2; a row without keys: out 0, lse -inf (as the generic kernel).
**   Causal: a block stops after the key tile holding its last query; blocks start heaviest first.
** Shapes: q [N,L,E], k [N,S,E], v [N,S,E], out [N,L,E], each through its strides (a.q, a.k, a.v, a.o: head
** offset cu_attn_at, row stride .r, a multiple of 8), lse [N,L] float contiguous; see cu_ops_attention.cu.
*/
#include "cu_attention_fa.cuh"

namespace {

constexpr int B = FA_ROWS;

/* dynamic shared memory: Q [64][ld], K and V [2][64][ld] */
template <typename T, int D> constexpr size_t smem_bytes() { return 5 * B * fa_ld<D>() * sizeof(T); }

template <typename T, int D>
__global__ void __launch_bounds__(FA_THREADS)
    attn_fwd_fa(cu_attn_args a, const T *q, const T *k, const T *v, T *out, float *lse) {
    extern __shared__ __align__(16) unsigned char smem[];
    constexpr int LD = fa_ld<D>(), NT = B / 8, KT = D / 16;
    T *Qs = (T *)smem, *Ks = Qs + B * LD, *Vs = Ks + 2 * B * LD;
    int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    int64_t n, i0;
    fa_order(a, (a.L + B - 1) / B, true, &n, &i0);
    int64_t iw = i0 + w * 16, iend = i0 + B < a.L ? i0 + B : a.L, jend = a.causal && iend < a.S ? iend : a.S;
    int nkt = (int)((jend + B - 1) / B);
    const T *kn = k + cu_attn_at(a, a.k, n), *vn = v + cu_attn_at(a, a.v, n);
    fa_load<T, D>(Qs, q + cu_attn_at(a, a.q, n), i0, a.L, a.q.r);
    if (nkt > 0) fa_load<T, D>(Ks, kn, 0, a.S, a.k.r), fa_load<T, D>(Vs, vn, 0, a.S, a.v.r);
    fa_commit();
    const float sl2 = a.scale_f * FA_LOG2E;
    float o[D / 8][4] = {}, m[2] = {-INFINITY, -INFINITY}, l[2] = {0, 0};
    uint32_t qf[KT][4];
    for (int jt = 0; jt < nkt; jt++) {
        int64_t j0 = (int64_t)jt * B;
        if (jt + 1 < nkt) { /* the next tile into the other buffer, freed by the last iteration's barrier */
            fa_load<T, D>(Ks + ((jt + 1) % 2) * B * LD, kn, j0 + B, a.S, a.k.r);
            fa_load<T, D>(Vs + ((jt + 1) % 2) * B * LD, vn, j0 + B, a.S, a.v.r);
        }
        fa_commit();
        fa_wait<1>();
        __syncthreads();
        const T *Kt = Ks + (jt % 2) * B * LD, *Vt = Vs + (jt % 2) * B * LD;
        if (jt == 0)
#pragma unroll
            for (int kk = 0; kk < KT; kk++) fa_lda(qf[kk], Qs + w * 16 * LD + kk * 16, LD);
        /* S_w = Q_w K^T: B = K^T, K [key][e] row-major */
        float s[NT][4] = {};
#pragma unroll
        for (int kk = 0; kk < KT; kk++)
#pragma unroll
            for (int np = 0; np < NT / 2; np++) {
                fa_mma_nk<T>(s + 2 * np, qf[kk], Kt + np * 16 * LD + kk * 16, LD);
            }
        /* scores in the log2 domain; row r of this lane: iw + g + 8 r */
        bool edge = a.mask || j0 + B > a.S || (a.causal && j0 + B - 1 > iw);
        float mx[2] = {m[0], m[1]};
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                float x = s[nt][c] * sl2;
                if (edge) {
                    int64_t i = iw + g + (c / 2) * 8, j = j0 + nt * 8 + 2 * t + c % 2;
                    x = j >= a.S ? -INFINITY : i < a.L ? x + cu_attn_mask<T, float>(a, n, i, j) * FA_LOG2E : x;
                }
                s[nt][c] = x;
                mx[c / 2] = fmaxf(mx[c / 2], x);
            }
        float base[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
            base[r] = mx[r] == -INFINITY ? 0.0f : mx[r]; /* a row with no key yet: every p is 0 */
            float alpha = exp2f(m[r] - base[r]);
            m[r] = mx[r];
            l[r] *= alpha;
#pragma unroll
            for (int et = 0; et < D / 8; et++) o[et][2 * r] *= alpha, o[et][2 * r + 1] *= alpha;
        }
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                float p = exp2f(s[nt][c] - base[c / 2]);
                l[c / 2] += p;
                if (a.dropout) p *= cu_attn_drop<float>(a, n, iw + g + (c / 2) * 8, j0 + nt * 8 + 2 * t + c % 2);
                s[nt][c] = p;
            }
            /* O_w += (P z) V: B = V [key][e] row-major */
#pragma unroll
        for (int kk = 0; kk < B / 16; kk++) {
            uint32_t pa[4];
            fa_a_from_c<T>(pa, s, kk);
#pragma unroll
            for (int ep = 0; ep < D / 16; ep++) {
                fa_mma_kn<T>(o + 2 * ep, pa, Vt + kk * 16 * LD + ep * 16, LD);
            }
        }
        __syncthreads(); /* every warp is done with this buffer */
    }
    /* out = O / l through this warp's rows of Qs (16-byte stores), lse */
    fa_wait<0>();
    __syncthreads(); /* Q landed (without key tiles no barrier saw it), in any thread's copies */
    T *Os = Qs + w * 16 * LD;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        float inv = l[r] > 0 ? 1.0f / l[r] : 0.0f;
#pragma unroll
        for (int et = 0; et < D / 8; et++)
            *(uint32_t *)(Os + (g + 8 * r) * LD + et * 8 + 2 * t) =
                fa_pack<T>(o[et][2 * r] * inv, o[et][2 * r + 1] * inv);
        int64_t i = iw + g + 8 * r;
        if (t == 0 && i < a.L) lse[n * a.L + i] = l[r] > 0 ? m[r] * 0.6931471805599453f + logf(l[r]) : -INFINITY;
    }
    __syncwarp();
    for (int c = lane; c < 16 * (D / 8); c += 32) {
        int rr = c / (D / 8), e = (c % (D / 8)) * 8;
        if (iw + rr < a.L)
            *(uint4 *)(out + cu_attn_at(a, a.o, n) + (iw + rr) * a.o.r + e) = *(const uint4 *)(Os + rr * LD + e);
    }
}

template <typename T, int D> static void launch(cu_dev *d, const td_op *op, const cu_attn_args *a) {
    size_t sm = smem_bytes<T, D>();
    cudaFuncSetAttribute(attn_fwd_fa<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm);
    unsigned grid = (unsigned)(a->N * ((a->L + B - 1) / B));
    attn_fwd_fa<T, D><<<grid, FA_THREADS, sm, d->stream>>>(
        *a, (const T *)cu_data(&op->in[0]), (const T *)cu_data(&op->in[1]), (const T *)cu_data(&op->in[2]),
        (T *)cu_data(&op->out[0]), (float *)cu_data(&op->out[1]));
}

template <typename T> static bool launch_d(cu_dev *d, const td_op *op, const cu_attn_args *a) {
    return cu_attn_head_dim(a->E, [&](auto dim) { launch<T, decltype(dim)::value>(d, op, a); });
}

} // namespace

extern "C" bool cu_attn_fa_fwd(cu_dev *d, const td_op *op, const cu_attn_args *a) {
    td_dtype dt = op->in[0].dtype;
    if (!cu_attn_fa_takes(d, a, dt)) return false;
    for (int k = 0; k < 3; k++)
        if (!cu_attn_aligned(&op->in[k])) return false;
    if (!cu_attn_aligned(&op->out[0])) return false;
    return dt == TD_F16 ? launch_d<__half>(d, op, a) : launch_d<__nv_bfloat16>(d, op, a);
}
