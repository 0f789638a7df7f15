/*
** Indexing ops on CUDA: EMBEDDING, EMBEDDING_BACKWARD, INDEX_SELECT, GATHER,
** SCATTER_ADD, CAT and ONE_HOT, as src/backend_cpu/cpu_index.c,
** cpu_embedding.c and cpu_cat.c define them. Every operand is contiguous
** (but CAT's); idx is int32 or int64.
** CAT: in[k] [..., S_k, ...] -> out [..., sum S_k, ...] along dim: input k is
** copied (cu_copy_view, as COPY) into the slice [P_k, P_k + S_k) of out's
** dim, P_k = S_0 + ... + S_{k-1}; inputs and out any strides.
** Letters: x [outer, S, inner] around the op's dim (S = x.size(dim)); K = numel(idx);
** V rows of an embedding table, D its width.
**
** Out-of-range indices: the CPU backend checks every index on the host before it
** writes anything and fails with TD_ERR_INDEX. The device cannot report without a
** host sync, so here a bad index never reads or writes out of bounds: a selection
** (embedding, index_select, gather) yields zeros, a sum (embedding_backward,
** scatter_add) skips the term, and one_hot leaves the row all zeros.
**
** Moving ops (embedding, index_select, gather) copy raw elements of any dtype; rows
** move in the widest unit (16, 8, 4, 2 or 1 bytes) that divides the row and both
** addresses, so an f32 row of D % 4 == 0 moves as float4s.
** Summing ops:
**   embedding_backward: dweight is zeroed, then every (n, d) adds dy[n, d] into row idx[n]
**     with atomics (float4 atomics on sm_90 when D % 4 == 0); f16/bf16 sum in an fp32
**     scratch that is rounded into dweight once. Not bit-reproducible run to run in f32.
**   scatter_add: out = self, then a lane (one idx position without dim) adds its J = idx.size(dim)
**     terms in order, as the CPU does (deterministic, the CPU's rounding), when there are enough
**     lanes to fill the device or J is short; otherwise every term adds with an atomic (f16/bf16
**     round after each add, as the CPU does; u8 by a compare-and-swap on its 32-bit word).
*/
#include <stdint.h>

#include "cu_nn.cuh"

#define SCATTER_LANES  16384 /* lanes enough to run scatter_add lane by lane */
#define SCATTER_SERIAL 16    /* or terms few enough per lane */

/* Run the block with `typedef <index type> I;` for the index dtype dt (int32 or int64). */
#define IX_SWITCH(dt, ...)                                                                                             \
    if ((dt) == TD_I64) {                                                                                              \
        typedef int64_t I;                                                                                             \
        __VA_ARGS__;                                                                                                   \
    } else {                                                                                                           \
        typedef int32_t I;                                                                                             \
        __VA_ARGS__;                                                                                                   \
    }

/* Run the block with `typedef <unsigned type of es bytes> U;` (es = 1, 2, 4, 8 or 16). */
#define UNIT_CASE_(es, U_, ...)                                                                                        \
    case es: {                                                                                                         \
        typedef U_ U;                                                                                                  \
        __VA_ARGS__;                                                                                                   \
    } break;
#define UNIT_SWITCH(es, ...)                                                                                           \
    switch (es) {                                                                                                      \
        UNIT_CASE_(16, uint4, __VA_ARGS__)                                                                             \
        UNIT_CASE_(8, uint64_t, __VA_ARGS__)                                                                           \
        UNIT_CASE_(4, uint32_t, __VA_ARGS__)                                                                           \
        UNIT_CASE_(2, uint16_t, __VA_ARGS__)                                                                           \
    default: {                                                                                                         \
        typedef uint8_t U;                                                                                             \
        __VA_ARGS__;                                                                                                   \
    } break;                                                                                                           \
    }

/* ---- selection ---- */

/* x [outer, S, row], idx [K] -> out [outer, K, row], in units U:
** out[o, k, :] = x[o, idx[k], :], or zeros when idx[k] is outside [0, S). */
template <typename U, typename I>
__global__ void index_rows(const U *x, const I *idx, U *out, int64_t outer, int64_t S, int64_t K, int64_t row) {
    NN_LOOP(i, outer * K * row) {
        int64_t u = i % row, r = i / row, k = r % K, o = r / K, j = (int64_t)idx[k];
        out[i] = j >= 0 && j < S ? x[(o * S + j) * row + u] : U();
    }
}

/* out [outer, K, inner] = x [outer, S, inner] selected along the middle dim by idx [K] (elements of es bytes). */
static td_status index_take_rows(cu_dev *d, const td_operand *x, const td_operand *idx, const td_operand *out,
                                 int64_t outer, int64_t S, int64_t inner, const char *what) {
    int64_t K = td_operand_numel(idx), rb = inner * (int64_t)td_dtype_size(x->dtype);
    if (outer * K * rb == 0) return TD_OK;
    const void *src = cu_data(x), *ip = cu_data(idx);
    void *dst = cu_data(out);
    uintptr_t align = (uintptr_t)src | (uintptr_t)dst | (uintptr_t)rb;
    size_t es = 16;
    while (es > 1 && align % es) es >>= 1;
    int64_t row = rb / (int64_t)es, n = outer * K * row;
    UNIT_SWITCH(es, IX_SWITCH(idx->dtype, index_rows<U, I><<<cu_grid(d, n, CU_BLOCK), CU_BLOCK, 0, d->stream>>>(
                                              (const U *)src, (const I *)ip, (U *)dst, outer, S, K, row)));
    return CU_LAUNCHED(what);
}

/* The shape of idx and the element strides of x (contiguous) for gather. */
typedef struct gather_geom {
    int ndim, dim;
    int64_t S; /* x.size(dim) */
    int64_t shape[TD_MAX_DIMS], xstride[TD_MAX_DIMS];
} gather_geom;

/* x [...], idx [...] (same ndim) -> out shaped like idx:
** out[c] = x[c with c[dim] replaced by idx[c]], or zero when idx[c] is outside [0, S). */
template <typename U, typename I>
__global__ void index_gather(const U *x, const I *idx, U *out, gather_geom g, int64_t n) {
    NN_LOOP(i, n) {
        int64_t rem = i, off = 0;
        for (int d = g.ndim - 1; d >= 0; d--) {
            int64_t c = rem % g.shape[d];
            rem /= g.shape[d];
            if (d != g.dim) off += c * g.xstride[d];
        }
        int64_t j = (int64_t)idx[i];
        out[i] = j >= 0 && j < g.S ? x[off + j * g.xstride[g.dim]] : U();
    }
}

/* idx [n] -> out int64 [n, C]: out[r, c] = (c == idx[r]). */
template <typename I> __global__ void index_one_hot(const I *idx, int64_t *out, int64_t C, int64_t total) {
    NN_LOOP(i, total) out[i] = (int64_t)idx[i / C] == i % C;
}

/* ---- embedding_backward ---- */

/* acc [V, D] += dy [N, D] by rows: acc[idx[n], :] += dy[n, :] for idx[n] in [0, V), idx[n] != pad.
** VEC 4: f32 only, D % 4 == 0, four columns per atomic (sm_90 float4 atomics). */
template <typename T, typename AC, int VEC, typename I>
__global__ void embedding_backward_add(const T *dy, const I *idx, AC *acc, int64_t N, int64_t D, int64_t V,
                                       int64_t pad) {
    const int64_t DV = D / VEC;
    NN_LOOP(i, N * DV) {
        int64_t n = i / DV, e = (i - n * DV) * VEC, j = (int64_t)idx[n];
        if (j < 0 || j >= V || j == pad) continue;
        if constexpr (VEC == 4) {
            float4 v = *(const float4 *)(dy + n * D + e);
            AC *p = acc + j * D + e;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
            atomicAdd((float4 *)p, v);
#else
            atomicAdd(p, v.x), atomicAdd(p + 1, v.y), atomicAdd(p + 2, v.z), atomicAdd(p + 3, v.w);
#endif
        } else
            atomicAdd(acc + j * D + e, cu_to<AC>(dy[n * D + e]));
    }
}

static td_status embedding_backward(cu_dev *d, const td_op *op) {
    const td_operand *dyv = &op->in[0], *idxv = &op->in[1], *out = &op->out[0];
    int64_t V = out->shape[0], D = out->shape[1], N = td_operand_numel(idxv), VD = V * D;
    int64_t pad = op->p.embedding.padding_idx;
    td_dtype dt = out->dtype;
    if (VD == 0) return TD_OK;
    bool wide = dt == TD_F16 || dt == TD_BF16; /* sum in an fp32 scratch, then round */
    size_t ws = dt == TD_F64 ? 8 : 4;
    void *acc = cu_data(out);
    const void *dy = cu_data(dyv), *ip = cu_data(idxv);
    if (wide) {
        td_status st = cu_temp_alloc(d, (size_t)VD * sizeof(float), &acc);
        if (st != TD_OK) return st;
    }
    td_status st = cu_status(cudaMemsetAsync(acc, 0, (size_t)VD * ws, d->stream), "embedding_backward: zero");
    if (st == TD_OK && N * D > 0) {
        bool vec = dt == TD_F32 && D % 4 == 0 && (uintptr_t)dy % 16 == 0 && (uintptr_t)acc % 16 == 0;
        unsigned grid = cu_grid(d, N * D / (vec ? 4 : 1), CU_BLOCK);
        if (vec) {
            IX_SWITCH(idxv->dtype, embedding_backward_add<float, float, 4, I>
                      <<<grid, CU_BLOCK, 0, d->stream>>>((const float *)dy, (const I *)ip, (float *)acc, N, D, V, pad));
        } else {
            CU_SWITCH_FLOAT(dt, {
                typedef typename cu_compute<T>::type AC;
                IX_SWITCH(idxv->dtype, embedding_backward_add<T, AC, 1, I>
                          <<<grid, CU_BLOCK, 0, d->stream>>>((const T *)dy, (const I *)ip, (AC *)acc, N, D, V, pad));
            });
        }
        st = CU_LAUNCHED("embedding_backward");
    }
    if (st == TD_OK && wide) {
        unsigned grid = cu_grid(d, VD, CU_BLOCK);
        if (dt == TD_F16)
            nn_round<__half><<<grid, CU_BLOCK, 0, d->stream>>>((const float *)acc, (__half *)cu_data(out), VD);
        else
            nn_round<__nv_bfloat16>
                <<<grid, CU_BLOCK, 0, d->stream>>>((const float *)acc, (__nv_bfloat16 *)cu_data(out), VD);
        st = CU_LAUNCHED("embedding_backward: round");
    }
    if (wide) cu_temp_free(d, acc);
    return st;
}

/* ---- scatter_add ---- */

/* idx's shape, the (contiguous) element strides of src and out, and self.size(dim). */
typedef struct scatter_geom {
    int ndim, dim;
    int64_t S, J, after; /* self.size(dim), idx.size(dim), prod idx.shape[dim+1:] */
    int64_t shape[TD_MAX_DIMS], sstride[TD_MAX_DIMS], ostride[TD_MAX_DIMS];
} scatter_geom;

/* a + b in T with the CPU's rules: f16/bf16 add in float and round; integers wrap. */
template <typename T> __device__ __forceinline__ T scatter_sum(T a, T b) {
    return cu_from<T>(cu_to<typename cu_compute<T>::type>(a) + cu_to<typename cu_compute<T>::type>(b));
}
template <> __device__ __forceinline__ int32_t scatter_sum<int32_t>(int32_t a, int32_t b) {
    return (int32_t)((uint32_t)a + (uint32_t)b);
}
template <> __device__ __forceinline__ int64_t scatter_sum<int64_t>(int64_t a, int64_t b) {
    return (int64_t)((uint64_t)a + (uint64_t)b);
}
template <> __device__ __forceinline__ uint8_t scatter_sum<uint8_t>(uint8_t a, uint8_t b) { return (uint8_t)(a + b); }

/* *p = scatter_sum(*p, v), atomically. */
__device__ __forceinline__ void scatter_atomic(float *p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void scatter_atomic(double *p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void scatter_atomic(__half *p, __half v) { atomicAdd(p, v); }
__device__ __forceinline__ void scatter_atomic(__nv_bfloat16 *p, __nv_bfloat16 v) { atomicAdd(p, v); }
__device__ __forceinline__ void scatter_atomic(int32_t *p, int32_t v) { atomicAdd((int *)p, (int)v); }
__device__ __forceinline__ void scatter_atomic(int64_t *p, int64_t v) {
    atomicAdd((unsigned long long *)p, (unsigned long long)v);
}
__device__ __forceinline__ void scatter_atomic(uint8_t *p, uint8_t v) { /* CAS on the aligned word holding *p */
    unsigned *w = (unsigned *)((uintptr_t)p & ~(uintptr_t)3), shift = (unsigned)((uintptr_t)p & 3) * 8;
    unsigned old = *w, seen;
    do {
        seen = old;
        unsigned byte = ((seen >> shift) + v) & 0xffu;
        old = atomicCAS(w, seen, (seen & ~(0xffu << shift)) | (byte << shift));
    } while (old != seen);
}

/* Offset, by strides st, of the idx position numbered lin (row-major), leaving dim out. */
__device__ __forceinline__ int64_t scatter_offset(const scatter_geom &g, int64_t lin, const int64_t *st) {
    int64_t off = 0;
    for (int d = g.ndim - 1; d >= 0; d--) {
        int64_t c = lin % g.shape[d];
        lin /= g.shape[d];
        if (d != g.dim) off += c * st[d];
    }
    return off;
}

/* self, idx, src -> out (out already holds self): for every idx position c,
** out[c with c[dim] = idx[c]] += src[c]. One thread per lane (an idx position with c[dim] = 0), which adds
** its J terms in increasing c[dim] order; lanes write disjoint elements. */
template <typename T, typename I>
__global__ void scatter_add_lanes(const T *src, const I *idx, T *out, scatter_geom g, int64_t lanes) {
    NN_LOOP(l, lanes) {
        int64_t lin = (l / g.after) * g.J * g.after + l % g.after; /* idx position of (lane, 0) */
        int64_t so = scatter_offset(g, lin, g.sstride), oo = scatter_offset(g, lin, g.ostride);
        for (int64_t j = 0; j < g.J; j++) {
            int64_t k = (int64_t)idx[lin + j * g.after];
            if (k < 0 || k >= g.S) continue;
            T *p = out + oo + k * g.ostride[g.dim];
            *p = scatter_sum(*p, src[so + j * g.sstride[g.dim]]);
        }
    }
}

/* The same sum, one thread per term, added with atomics. */
template <typename T, typename I>
__global__ void scatter_add_terms(const T *src, const I *idx, T *out, scatter_geom g, int64_t n) {
    NN_LOOP(i, n) {
        int64_t k = (int64_t)idx[i], j = i / g.after % g.J; /* c[dim] of position i */
        if (k < 0 || k >= g.S) continue;
        int64_t so = scatter_offset(g, i, g.sstride) + j * g.sstride[g.dim];
        scatter_atomic(out + scatter_offset(g, i, g.ostride) + k * g.ostride[g.dim], src[so]);
    }
}

/* Contiguous element strides of v. */
static void index_strides(const td_operand *v, int64_t *st) {
    int64_t s = 1;
    for (int d = v->ndim - 1; d >= 0; d--) st[d] = s, s *= v->shape[d];
}

static td_status scatter_add(cu_dev *d, const td_op *op) {
    const td_operand *self = &op->in[0], *idxv = &op->in[1], *srcv = &op->in[2], *out = &op->out[0];
    int64_t total = td_operand_numel(out), n = td_operand_numel(idxv);
    if (total == 0) return TD_OK;
    td_status st = cu_status(cudaMemcpyAsync(cu_data(out), cu_data(self), (size_t)total * td_dtype_size(out->dtype),
                                             cudaMemcpyDeviceToDevice, d->stream),
                             "scatter_add: copy self");
    if (st != TD_OK || n == 0) return st;
    scatter_geom g = {};
    g.ndim = idxv->ndim, g.dim = op->p.axis.dim, g.S = self->shape[g.dim], g.J = idxv->shape[g.dim], g.after = 1;
    for (int k = 0; k < g.ndim; k++) g.shape[k] = idxv->shape[k];
    for (int k = g.dim + 1; k < g.ndim; k++) g.after *= idxv->shape[k];
    index_strides(srcv, g.sstride);
    index_strides(out, g.ostride);
    int64_t lanes = n / g.J;
    const void *src = cu_data(srcv), *ip = cu_data(idxv);
    void *dst = cu_data(out);
    if (lanes >= SCATTER_LANES || g.J <= SCATTER_SERIAL) {
        CU_SWITCH_NUM(out->dtype, IX_SWITCH(idxv->dtype, scatter_add_lanes<T, I>
                                            <<<cu_grid(d, lanes, CU_BLOCK), CU_BLOCK, 0, d->stream>>>(
                                                (const T *)src, (const I *)ip, (T *)dst, g, lanes)));
    } else {
        CU_SWITCH_NUM(out->dtype, IX_SWITCH(idxv->dtype, scatter_add_terms<T, I>
                                            <<<cu_grid(d, n, CU_BLOCK), CU_BLOCK, 0, d->stream>>>(
                                                (const T *)src, (const I *)ip, (T *)dst, g, n)));
    }
    return CU_LAUNCHED("scatter_add");
}

/* ---- entry points ---- */

/* in = (weight [V, D], idx [...]) -> out [..., D] */
CU_SUPPORTS(EMBEDDING) { return op->in[0].ndim == 2; }
extern "C" td_status cu_op_EMBEDDING(cu_dev *d, const td_op *op) {
    const td_operand *w = &op->in[0];
    return index_take_rows(d, w, &op->in[1], &op->out[0], 1, w->shape[0], w->shape[1], "embedding");
}

/* in = (dy [..., D], idx [...]) -> dweight [V, D]; row p.embedding.padding_idx stays 0 */
CU_SUPPORTS(EMBEDDING_BACKWARD) { return op->out[0].ndim == 2; }
extern "C" td_status cu_op_EMBEDDING_BACKWARD(cu_dev *d, const td_op *op) { return embedding_backward(d, op); }

/* in = (x, idx [K]) along p.axis.dim */
CU_SUPPORTS(INDEX_SELECT) { return op->p.axis.dim >= 0 && op->p.axis.dim < op->in[0].ndim; }
extern "C" td_status cu_op_INDEX_SELECT(cu_dev *d, const td_op *op) {
    const td_operand *x = &op->in[0];
    int dim = op->p.axis.dim;
    int64_t outer = 1, inner = 1;
    for (int k = 0; k < dim; k++) outer *= x->shape[k];
    for (int k = dim + 1; k < x->ndim; k++) inner *= x->shape[k];
    return index_take_rows(d, x, &op->in[1], &op->out[0], outer, x->shape[dim], inner, "index_select");
}

/* in = (x, idx) with idx of out's shape and x's ndim */
CU_SUPPORTS(GATHER) {
    int dim = op->p.axis.dim;
    return op->in[1].ndim == op->in[0].ndim && op->in[0].ndim >= 1 && dim >= 0 && dim < op->in[0].ndim;
}
extern "C" td_status cu_op_GATHER(cu_dev *d, const td_op *op) {
    const td_operand *x = &op->in[0], *idx = &op->in[1], *out = &op->out[0];
    int64_t n = td_operand_numel(idx);
    if (n == 0) return TD_OK;
    gather_geom g = {};
    g.ndim = idx->ndim, g.dim = op->p.axis.dim, g.S = x->shape[g.dim];
    for (int k = 0; k < g.ndim; k++) g.shape[k] = idx->shape[k];
    index_strides(x, g.xstride);
    const void *src = cu_data(x), *ip = cu_data(idx);
    void *dst = cu_data(out);
    UNIT_SWITCH(td_dtype_size(x->dtype),
                IX_SWITCH(idx->dtype, index_gather<U, I><<<cu_grid(d, n, CU_BLOCK), CU_BLOCK, 0, d->stream>>>(
                                          (const U *)src, (const I *)ip, (U *)dst, g, n)));
    return CU_LAUNCHED("gather");
}

/* in = (self, idx, src) along p.axis.dim, idx no larger than src (and than self outside dim) */
CU_SUPPORTS(SCATTER_ADD) {
    const td_operand *self = &op->in[0], *idx = &op->in[1], *src = &op->in[2];
    int dim = op->p.axis.dim;
    if (idx->ndim != self->ndim || src->ndim != self->ndim || self->ndim < 1 || dim < 0 || dim >= self->ndim)
        return false;
    for (int k = 0; k < idx->ndim; k++)
        if (idx->shape[k] > src->shape[k] || (k != dim && idx->shape[k] > self->shape[k])) return false;
    return true;
}
extern "C" td_status cu_op_SCATTER_ADD(cu_dev *d, const td_op *op) { return scatter_add(d, op); }

/* in = (x_0, ..., x_{n-1}) -> out along p.axis.dim */
/* every input of out's rank and of out's size outside dim */
CU_SUPPORTS(CAT) {
    const td_operand *out = &op->out[0];
    int dim = op->p.axis.dim;
    if (dim < 0 || dim >= (out->ndim > 0 ? out->ndim : 1)) return false;
    for (int k = 0; k < op->n_in; k++) {
        const td_operand *in = &op->in[k];
        if (in->ndim != out->ndim) return false;
        for (int i = 0; i < in->ndim; i++)
            if (i != dim && in->shape[i] != out->shape[i]) return false;
    }
    return true;
}

extern "C" td_status cu_op_CAT(cu_dev *d, const td_op *op) {
    int dim = op->p.axis.dim;
    int64_t at = 0;
    for (int k = 0; k < op->n_in; k++) {
        const td_operand *in = &op->in[k];
        int64_t len = in->ndim ? in->shape[dim] : 1;
        td_operand slice = op->out[0];
        if (slice.ndim) slice.shape[dim] = len;
        slice.offset += at * (slice.ndim ? slice.strides[dim] : 0);
        at += len;
        td_status st = cu_copy_view(d, in, &slice);
        if (st != TD_OK) return st;
    }
    return TD_OK;
}

/* in = idx [...] -> int64 [..., num_classes] */
CU_SUPPORTS(ONE_HOT) { return op->out[0].ndim >= 1; }
extern "C" td_status cu_op_ONE_HOT(cu_dev *d, const td_op *op) {
    const td_operand *idx = &op->in[0], *out = &op->out[0];
    int64_t total = td_operand_numel(out), C = out->shape[out->ndim - 1];
    if (total == 0) return TD_OK;
    IX_SWITCH(idx->dtype, index_one_hot<I><<<cu_grid(d, total, CU_BLOCK), CU_BLOCK, 0, d->stream>>>(
                              (const I *)cu_data(idx), (int64_t *)cu_data(out), C, total));
    return CU_LAUNCHED("one_hot");
}
