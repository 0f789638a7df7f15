/*
** Reductions over a set of dims: SUM, MEAN, MAX, MIN, ARGMAX, ARGMIN, VAR,
** LOGSUMEXP (reference: src/backend_cpu/cpu_reduce.c).
**   in is any strided view of shape S; p.reduce.dims has bit d set for each
**   reduced dim; out is contiguous with S's ndim and size 1 on reduced dims.
**   M = number of outputs, K = reduced elements per output; output o reads
**   in[kept(o) + red(j)] for j < K, j row-major over the reduced dims.
** The host merges dims (size-1 dims dropped, adjacent dims folded where the
** strides allow) into kept dims (output order) and reduced dims, then picks:
**   rows    the innermost reduced dim has the smaller stride (e.g. the last
**           dim): one warp (K <= 1024) or one block per output walks j, so a
**           warp's loads are adjacent; contiguous rows load 16 bytes at a time;
**   columns the innermost kept dim has the smaller stride (e.g. dim 0 of a
**           matrix): each thread owns one output and walks j, adjacent threads
**           own adjacent outputs, so loads coalesce; blockDim.y threads split j;
**   split   too few outputs to fill the GPU: K is cut into chunks over
**           gridDim.y, each chunk's partial goes to scratch (cu_temp_alloc),
**           and a second kernel merges each output's partials.
** Every op is an accumulator (below) with init / add(x, j) / merge / finish,
** so one set of kernels serves them all. Compute types: float for
** f32/f16/bf16, double for f64, int64 for integers (cu_compute):
**   SUM     s = sum x (integer sums wrap in int64; the output is int64)
**   MEAN    s / K                             (K = 0 gives NaN)
**   MAX/MIN the extreme; NaN wins
**   ARG*    the smallest j holding the extreme; NaN counts as the extreme
**   VAR     Welford's (n, mean, M2) per thread, partials merged with Chan's
**           formula (exact 0 for constant rows); M2 / max(0, K - correction)
**   LOGSUMEXP online (m, s = sum e^(x-m)): a larger x rescales s by e^(m-x);
**           result m + log s; m itself when m is +-inf or NaN (K = 0: -inf)
** Float sums use a tree order, not the CPU's serial double sum; the
** difference is within the conformance limits (TOL_ACCUM).
*/
#include <type_traits>

#include "cu_reduce.cuh"

/* ---- geometry ---- */

typedef struct red_geom {
    int nk, nr; /* >= 1 each: a missing set becomes one dim of size 1 */
    int64_t ks[TD_MAX_DIMS], kst[TD_MAX_DIMS], rs[TD_MAX_DIMS], rst[TD_MAX_DIMS];
    int64_t n_out, K;
    int correction;
} red_geom;

/* Element offset of item i of the folded dims (shape, stride, n), the last dim fastest. */
__device__ __forceinline__ int64_t red_unravel(const int64_t *shape, const int64_t *stride, int n, int64_t i) {
    if (n == 1) return i * stride[0];
    int64_t off = 0;
    for (int d = n - 1; d >= 0; d--) {
        int64_t q = i / shape[d];
        off += (i - q * shape[d]) * stride[d];
        i = q;
    }
    return off;
}
/* Element offset of output o's first input element, and of reduced element j. */
__device__ __forceinline__ int64_t red_kept(const red_geom &g, int64_t o) { return red_unravel(g.ks, g.kst, g.nk, o); }
__device__ __forceinline__ int64_t red_offset(const red_geom &g, int64_t j) {
    return red_unravel(g.rs, g.rst, g.nr, j);
}

/* ---- accumulators: acc (plain data), init, add(x, j) with j increasing per
** thread, merge (any order), down (warp shuffle), finish -> res ---- */

template <typename C> __device__ __forceinline__ C red_add(C a, C b) { return a + b; }
template <> __device__ __forceinline__ int64_t red_add<int64_t>(int64_t a, int64_t b) {
    return (int64_t)((uint64_t)a + (uint64_t)b); /* integer sums wrap */
}

template <typename C> struct r_sum {
    struct acc {
        C s;
    };
    typedef C res;
    static __device__ acc init() { return {(C)0}; }
    static __device__ void add(acc &a, C x, int64_t) { a.s = red_add(a.s, x); }
    static __device__ void merge(acc &a, const acc &b) { a.s = red_add(a.s, b.s); }
    static __device__ acc down(const acc &a, int o) { return {__shfl_down_sync(0xffffffffu, a.s, o)}; }
    static __device__ res finish(const acc &a, int64_t, int) { return a.s; }
};

template <typename C> struct r_mean : r_sum<C> {
    typedef typename r_sum<C>::acc acc;
    static __device__ C finish(const acc &a, int64_t K, int) { return a.s / (C)K; }
};

/* MAX (IS_MAX) or MIN of the values; NaN wins */
template <typename C, bool IS_MAX> struct r_extreme {
    struct acc {
        C m;
    };
    typedef C res;
    static __device__ acc init() { return {IS_MAX ? cu_lowest<C>() : cu_highest<C>()}; }
    static __device__ void add(acc &a, C x, int64_t) {
        if ((IS_MAX ? x > a.m : x < a.m) || x != x) a.m = x;
    }
    static __device__ void merge(acc &a, const acc &b) { add(a, b.m, 0); }
    static __device__ acc down(const acc &a, int o) { return {__shfl_down_sync(0xffffffffu, a.m, o)}; }
    static __device__ res finish(const acc &a, int64_t, int) { return a.m; }
};
template <typename C> using r_max = r_extreme<C, true>;
template <typename C> using r_min = r_extreme<C, false>;

/* ARGMAX (IS_MAX) / ARGMIN: the first index of the extreme; i == INT64_MAX: no element yet */
template <typename C, bool IS_MAX> struct r_arg {
    struct acc {
        C m;
        int64_t i;
    };
    typedef int64_t res;
    static __device__ bool better(C x, C m) { return (IS_MAX ? x > m : x < m) || (x != x && m == m); }
    static __device__ acc init() { return {(C)0, INT64_MAX}; }
    static __device__ void add(acc &a, C x, int64_t j) {
        if (a.i == INT64_MAX || better(x, a.m)) a.m = x, a.i = j;
    }
    static __device__ void merge(acc &a, const acc &b) {
        if (b.i == INT64_MAX) return;
        bool same = b.m == a.m || (b.m != b.m && a.m != a.m);
        if (a.i == INT64_MAX || better(b.m, a.m) || (same && b.i < a.i)) a = b;
    }
    static __device__ acc down(const acc &a, int o) {
        return {__shfl_down_sync(0xffffffffu, a.m, o), __shfl_down_sync(0xffffffffu, a.i, o)};
    }
    static __device__ res finish(const acc &a, int64_t, int) { return a.i == INT64_MAX ? 0 : a.i; }
};
template <typename C> using r_argmax = r_arg<C, true>;
template <typename C> using r_argmin = r_arg<C, false>;

/* VAR: Welford per thread, Chan et al. to merge two disjoint parts */
template <typename C> struct r_var {
    struct acc {
        int64_t n;
        C mean, m2;
    };
    typedef C res;
    static __device__ acc init() { return {0, (C)0, (C)0}; }
    static __device__ void add(acc &a, C x, int64_t) {
        a.n++;
        C d = x - a.mean;
        a.mean += d / (C)a.n;
        a.m2 += d * (x - a.mean);
    }
    static __device__ void merge(acc &a, const acc &b) {
        if (b.n == 0) return;
        if (a.n == 0) {
            a = b;
            return;
        }
        C na = (C)a.n, nb = (C)b.n, n = na + nb, d = b.mean - a.mean;
        a.mean += d * (nb / n);
        a.m2 += b.m2 + d * d * (na * nb / n);
        a.n += b.n;
    }
    static __device__ acc down(const acc &a, int o) {
        return {__shfl_down_sync(0xffffffffu, a.n, o), __shfl_down_sync(0xffffffffu, a.mean, o),
                __shfl_down_sync(0xffffffffu, a.m2, o)};
    }
    static __device__ res finish(const acc &a, int64_t K, int correction) {
        C dof = (C)K - (C)correction;
        return a.n == 0 ? (C)NAN : a.m2 / (dof > 0 ? dof : (C)0);
    }
};

/* LOGSUMEXP: s = sum e^(x - m) over the elements seen, kept 0 while m is not finite */
template <typename C> struct r_lse {
    struct acc {
        C m, s;
    };
    typedef C res;
    static __device__ acc init() { return {cu_lowest<C>(), (C)0}; }
    static __device__ void add(acc &a, C x, int64_t) {
        if (x > a.m) {
            a.s = isfinite(a.m) ? a.s * exp(a.m - x) + (C)1 : (C)1;
            a.m = x;
        } else if (x != x) {
            a.m = x;
        } else if (isfinite(a.m)) {
            a.s += exp(x - a.m);
        }
    }
    static __device__ void merge(acc &a, const acc &b) {
        if (a.m != a.m || b.m != b.m) {
            a.m = (C)NAN;
            return;
        }
        C m = b.m > a.m ? b.m : a.m;
        if (isfinite(m))
            a.s = (isfinite(a.m) ? a.s * exp(a.m - m) : (C)0) + (isfinite(b.m) ? b.s * exp(b.m - m) : (C)0);
        a.m = m;
    }
    static __device__ acc down(const acc &a, int o) {
        return {__shfl_down_sync(0xffffffffu, a.m, o), __shfl_down_sync(0xffffffffu, a.s, o)};
    }
    static __device__ res finish(const acc &a, int64_t, int) { return isfinite(a.m) ? a.m + log(a.s) : a.m; }
};

/* ---- group merges ---- */

/* Warp tree: lane 0 ends with the merge of all 32 lanes. */
template <class R> __device__ __forceinline__ void red_warp(typename R::acc &a) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        typename R::acc b = R::down(a, o);
        R::merge(a, b);
    }
}

/* Merge over a row group of TPR threads (cu_reduce.cuh); its thread 0 ends with the result. */
template <class R, int TPR> __device__ __forceinline__ void red_group(typename R::acc &a, typename R::acc *scratch) {
    red_warp<R>(a);
    if (TPR == 32) return;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads(); /* scratch may still be read for the previous row */
    if (lane == 0) scratch[warp] = a;
    __syncthreads();
    if (warp == 0) {
        a = lane < (int)(blockDim.x >> 5) ? scratch[lane] : R::init();
        red_warp<R>(a);
    }
}

/* Accumulate elements [j0, j1) of one output (p: its first input element),
** thread t of a group of TPR. Contiguous rows: scalar head up to a 16-byte
** boundary, 16-byte vectors (4 in flight), scalar tail; j increases per thread. */
template <class R, typename T, int TPR>
__device__ __forceinline__ void red_span(typename R::acc &a, const T *p, const red_geom &g, int64_t j0, int64_t j1,
                                         int t) {
    typedef typename cu_compute<T>::type C;
    if (g.nr == 1 && g.rst[0] == 1) {
        const int V = cu_vec<T>::N;
        int64_t head = (int64_t)((16 - (uintptr_t)(p + j0) % 16) % 16 / sizeof(T));
        if (head > j1 - j0) head = j1 - j0;
        for (int64_t j = j0 + t; j < j0 + head; j += TPR) R::add(a, cu_to<C>(p[j]), j);
        int64_t b0 = j0 + head, nv = (j1 - b0) / V;
        const cu_vec<T> *pv = (const cu_vec<T> *)(p + b0);
        int64_t v = t;
        for (; v + 3 * TPR < nv; v += 4 * TPR) {
            cu_vec<T> x[4];
#pragma unroll
            for (int u = 0; u < 4; u++) x[u] = pv[v + u * TPR];
#pragma unroll
            for (int u = 0; u < 4; u++)
#pragma unroll
                for (int e = 0; e < V; e++) R::add(a, cu_to<C>(x[u].v[e]), b0 + (v + u * TPR) * V + e);
        }
        for (; v < nv; v += TPR) {
            cu_vec<T> x = pv[v];
#pragma unroll
            for (int e = 0; e < V; e++) R::add(a, cu_to<C>(x.v[e]), b0 + v * V + e);
        }
        for (int64_t j = b0 + nv * V + t; j < j1; j += TPR) R::add(a, cu_to<C>(p[j]), j);
    } else if (g.nr == 1) {
        int64_t st = g.rst[0];
        for (int64_t j = j0 + t; j < j1; j += TPR) R::add(a, cu_to<C>(p[j * st]), j);
    } else {
        for (int64_t j = j0 + t; j < j1; j += TPR) R::add(a, cu_to<C>(p[red_offset(g, j)]), j);
    }
}

/* ---- kernels ---- */

/* rows: in (any strides, see red_geom), out [M]; a group of TPR threads per
** output, chunk s = blockIdx.y of gridDim.y covering j in [s*chunk, (s+1)*chunk).
** part == NULL: out[o] = finish; else part[o, s] = the chunk's accumulator. */
template <class R, typename T, typename O, int TPR>
__global__ void __launch_bounds__(256)
    red_rows_kernel(const T *in, O *out, typename R::acc *part, red_geom g, int64_t chunk) {
    __shared__ typename R::acc scratch[32];
    int t = cu_row_lane<TPR>();
    int64_t s = blockIdx.y, j0 = s * chunk, j1 = j0 + chunk < g.K ? j0 + chunk : g.K;
    for (int64_t o = cu_row_first<TPR>(); o < g.n_out; o += cu_row_stride<TPR>()) {
        typename R::acc a = R::init();
        red_span<R, T, TPR>(a, in + red_kept(g, o), g, j0, j1, t);
        red_group<R, TPR>(a, scratch);
        if (t != 0) continue;
        if (part)
            part[o * gridDim.y + s] = a;
        else
            out[o] = cu_from<O>(R::finish(a, g.K, g.correction));
    }
}

/* columns: blockDim = (bx, by), bx * by == 256; thread (x, y) owns output
** o = o0 + x and walks j = j0 + y, j0 + y + by, ...; the by partials of an
** output merge in shared memory. Chunks and part as in red_rows_kernel. */
template <class R, typename T, typename O>
__global__ void __launch_bounds__(256)
    red_cols_kernel(const T *in, O *out, typename R::acc *part, red_geom g, int64_t chunk) {
    typedef typename cu_compute<T>::type C;
    __shared__ typename R::acc tile[256];
    int bx = blockDim.x, by = blockDim.y, x = threadIdx.x, y = threadIdx.y;
    int64_t s = blockIdx.y, j0 = s * chunk, j1 = j0 + chunk < g.K ? j0 + chunk : g.K;
    for (int64_t o0 = (int64_t)blockIdx.x * bx; o0 < g.n_out; o0 += (int64_t)gridDim.x * bx) {
        int64_t o = o0 + x;
        typename R::acc a = R::init();
        if (o < g.n_out) {
            const T *p = in + red_kept(g, o);
            if (g.nr == 1)
                for (int64_t j = j0 + y; j < j1; j += by) R::add(a, cu_to<C>(p[j * g.rst[0]]), j);
            else
                for (int64_t j = j0 + y; j < j1; j += by) R::add(a, cu_to<C>(p[red_offset(g, j)]), j);
        }
        __syncthreads(); /* the tile may still be read for the previous outputs */
        tile[y * bx + x] = a;
        __syncthreads();
        if (y != 0 || o >= g.n_out) continue;
        for (int k = 1; k < by; k++) R::merge(a, tile[k * bx + x]);
        if (part)
            part[o * gridDim.y + s] = a;
        else
            out[o] = cu_from<O>(R::finish(a, g.K, g.correction));
    }
}

/* second pass of a split: part [M, split] -> out [M], one warp per output */
template <class R, typename O>
__global__ void __launch_bounds__(256) red_merge_kernel(const typename R::acc *part, O *out, red_geom g, int split) {
    int lane = threadIdx.x & 31;
    for (int64_t o = cu_row_first<32>(); o < g.n_out; o += cu_row_stride<32>()) {
        typename R::acc a = R::init();
        for (int s = lane; s < split; s += 32) R::merge(a, part[o * split + s]);
        red_warp<R>(a);
        if (lane == 0) out[o] = cu_from<O>(R::finish(a, g.K, g.correction));
    }
}

/* ---- host ---- */

static red_geom red_plan(const td_op *op) {
    const td_operand *in = &op->in[0];
    red_geom g = {};
    g.n_out = g.K = 1;
    g.correction = op->p.reduce.correction;
    for (int d = 0; d < in->ndim; d++) {
        if (op->p.reduce.dims >> d & 1) {
            td_dim_fold(g.rs, g.rst, &g.nr, in->shape[d], in->strides[d]);
            g.K *= in->shape[d];
        } else {
            td_dim_fold(g.ks, g.kst, &g.nk, in->shape[d], in->strides[d]);
            g.n_out *= in->shape[d];
        }
    }
    if (g.nk == 0) g.ks[0] = 1, g.kst[0] = 0, g.nk = 1;
    if (g.nr == 0) g.rs[0] = g.K, g.rst[0] = 0, g.nr = 1; /* K is 1 here */
    return g;
}

static int64_t red_abs(int64_t x) { return x < 0 ? -x : x; }
static int64_t red_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Chunks of K for outputs spread over `blocks` blocks: enough to give the GPU
** about 4 blocks per SM, each chunk at least min_chunk elements. */
static int64_t red_split(const cu_dev *d, int64_t blocks, int64_t K, int64_t min_chunk) {
    int64_t want = 4 * (int64_t)d->sm_count;
    if (blocks >= want / 2 || K < 2 * min_chunk) return 1;
    int64_t split = red_cdiv(want, blocks), most = K / min_chunk;
    return split < most ? split : most;
}

template <template <typename> class RT, typename T, typename O>
static td_status red_run(cu_dev *d, const td_op *op, const red_geom &g) {
    typedef RT<typename cu_compute<T>::type> R;
    typedef typename R::acc A;
    const T *in = (const T *)cu_data(&op->in[0]);
    O *out = (O *)cu_data(&op->out[0]);
    int64_t sk = g.ks[g.nk - 1] == 1 ? INT64_MAX : red_abs(g.kst[g.nk - 1]), sr = red_abs(g.rst[g.nr - 1]);
    bool rows = g.n_out == 1 || (sr < sk && g.K >= 16);
    int64_t split, chunk;
    dim3 grid, block;
    if (rows) {
        bool wide = g.K > 1024; /* a block per output, else a warp */
        split = wide ? red_split(d, g.n_out, g.K, 4096) : 1;
        grid = dim3(cu_grid(d, g.n_out, wide ? 1 : 8), (unsigned)split);
        block = dim3(256);
    } else {
        int by = g.K >= 8 ? 8 : g.K >= 4 ? 4 : g.K >= 2 ? 2 : 1;
        int64_t groups = red_cdiv(g.n_out, 256 / by);
        split = red_split(d, groups, g.K, 256);
        grid = dim3(cu_grid(d, groups, 1), (unsigned)split);
        block = dim3(256 / by, by);
    }
    if (split > 1) { /* equal chunks, a multiple of 16 elements: vector loads stay aligned as in the row */
        chunk = red_cdiv(red_cdiv(g.K, split), 16) * 16;
        split = red_cdiv(g.K, chunk);
        grid.y = (unsigned)split;
    } else {
        chunk = g.K;
    }
    A *part = NULL;
    if (split > 1) {
        td_status st = cu_temp_alloc(d, (size_t)(g.n_out * split) * sizeof(A), (void **)&part);
        if (st != TD_OK) return st;
    }
    if (!rows)
        red_cols_kernel<R, T, O><<<grid, block, 0, d->stream>>>(in, out, part, g, chunk);
    else if (g.K > 1024)
        red_rows_kernel<R, T, O, 256><<<grid, block, 0, d->stream>>>(in, out, part, g, chunk);
    else
        red_rows_kernel<R, T, O, 32><<<grid, block, 0, d->stream>>>(in, out, part, g, chunk);
    td_status st = CU_LAUNCHED(td_op_name(op->kind));
    if (st == TD_OK && part) {
        red_merge_kernel<R, O><<<cu_grid(d, g.n_out, 8), 256, 0, d->stream>>>(part, out, g, (int)split);
        st = CU_LAUNCHED(td_op_name(op->kind));
    }
    if (part) cu_temp_free(d, part);
    return st;
}

/* out dtype of SUM: int64 for integer and bool data, else the input's */
template <typename T> struct red_sum_out {
    typedef
        typename std::conditional<std::is_same<typename cu_compute<T>::type, int64_t>::value, int64_t, T>::type type;
};

/* in and out share ndim; out has size 1 on the reduced dims and in's size elsewhere */
static bool red_shape_ok(const td_op *op) {
    const td_operand *in = &op->in[0], *out = &op->out[0];
    if (in->ndim != out->ndim) return false;
    for (int d = 0; d < in->ndim; d++)
        if (out->shape[d] != (op->p.reduce.dims >> d & 1 ? 1 : in->shape[d])) return false;
    return true;
}

static td_status red_dtype_error(const td_op *op) {
    return td_error_set(TD_ERR_UNSUPPORTED, "cuda %s: input dtype %s", td_op_name(op->kind),
                        td_dtype_name(op->in[0].dtype));
}

/* Launch RT over dtype class SWITCH (CU_SWITCH_*), out type OUT (a type using T). */
#define RED_OP_(NAME, RT, SWITCH, OUT)                                                                                 \
    CU_SUPPORTS(NAME) { return red_shape_ok(op); }                                                                     \
    extern "C" td_status cu_op_##NAME(cu_dev *d, const td_op *op) {                                                    \
        red_geom g = red_plan(op);                                                                                     \
        if (g.n_out == 0) return TD_OK;                                                                                \
        SWITCH(op->in[0].dtype, return red_run<RT, T, OUT>(d, op, g));                                                 \
        return red_dtype_error(op);                                                                                    \
    }

RED_OP_(SUM, r_sum, CU_SWITCH_ALL, typename red_sum_out<T>::type)
RED_OP_(MEAN, r_mean, CU_SWITCH_FLOAT, T)
RED_OP_(MAX, r_max, CU_SWITCH_NUM, T)
RED_OP_(MIN, r_min, CU_SWITCH_NUM, T)
RED_OP_(ARGMAX, r_argmax, CU_SWITCH_NUM, int64_t)
RED_OP_(ARGMIN, r_argmin, CU_SWITCH_NUM, int64_t)
RED_OP_(VAR, r_var, CU_SWITCH_FLOAT, T)
RED_OP_(LOGSUMEXP, r_lse, CU_SWITCH_FLOAT, T)
