/*
** The elementwise engine of the CUDA backend (included by cu_ops_elem.cu,
** cu_ops_unary.cu, cu_ops_fill.cu and cu_ops_rand.cu).
**
** cu_ew_run(d, name, f, views, out, in...) computes
**     out[i] = f(in_0[i], ..., in_{n-1}[i])      for every index i of views[0]
** where views[0] is the output and views[1..] the inputs, all of the output's
** shape (broadcast inputs have stride-0 dims), with f a functor from the
** inputs' storage types to the output's. It picks one of two kernels:
**   - cu_ew_contig: the output and every input contiguous, or an input a
**     broadcast scalar (stride 0 everywhere: x + 1, where(m, dy, 0)), each
**     pointer aligned: V = 16 / (largest element size) elements per thread
**     and step, loaded and stored as one 16-byte (or narrower) vector;
**   - cu_ew_strided: anything else, through the merged geometry cu_geom
**     (cu.h), with 32-bit index arithmetic when numel < 2^31.
** Both are grid-stride loops of CU_BLOCK threads.
**
** Also here: cu_cast<TO>(x), the CPU backend's conversion rule (COPY, FILL,
** ARANGE), float/double overloads of the libm functions, and GELU's
** derivative (GELU_BACKWARD, and LINEAR_DGELU's pass in cu_ops_matmul.cu).
** defines: cu_ew_vec, cu_ew_offsets, cu_ew_strided, cu_ew_contig, cu_ew_run,
** cu_ew_is_scalar, cu_cast, cu_ew_fabs/exp/log/sqrt/sin/cos/tanh/erfc/pow,
** CU_GELU_K/C, CU_INV_SQRT2, CU_INV_SQRT_2PI, cu_gelu_grad.
*/
#ifndef TRIDENT_CU_EW_CUH
#define TRIDENT_CU_EW_CUH

#include <type_traits>
#include <utility>

#include "cu_kernels.cuh"

/* ---- libm in the compute type's precision (float for f32/f16/bf16) ---- */
#define CU_EW_MATH_(name)                                                                                              \
    __device__ __forceinline__ float cu_ew_##name(float x) { return name##f(x); }                                      \
    __device__ __forceinline__ double cu_ew_##name(double x) { return name(x); }
CU_EW_MATH_(fabs)
CU_EW_MATH_(exp)
CU_EW_MATH_(log)
CU_EW_MATH_(sqrt)
CU_EW_MATH_(sin)
CU_EW_MATH_(cos)
CU_EW_MATH_(tanh)
CU_EW_MATH_(erfc)
#undef CU_EW_MATH_
__device__ __forceinline__ float cu_ew_pow(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double cu_ew_pow(double x, double y) { return pow(x, y); }

/* ---- GELU: gelu(x) = x Phi(x) (erf form), or x (1 + tanh(k (x + c x^3))) / 2 (tanh form) ---- */
#define CU_GELU_K       0.7978845608028654 /* sqrt(2/pi) */
#define CU_GELU_C       0.044715
#define CU_INV_SQRT2    0.7071067811865476
#define CU_INV_SQRT_2PI 0.3989422804014327

/* gelu'(x) in the compute type C:
**   erf form:  Phi(x) + x*phi(x), phi(x) = e^(-x^2/2)/sqrt(2pi)
**   tanh form: (1+t)/2 + x/2 * (1-t^2) * k*(1 + 3c*x^2) with t = tanh(u), u = k*(x + c*x^3),
**              computed as s + 2x s s' k*(1 + 3c*x^2) with s = sigmoid(2u), s' = sigmoid(-2u)
**              (s = (1 + tanh u)/2, 1 - s = s': 1 + tanh u cancels below x ~ -2) */
template <typename C, bool TANH> __device__ __forceinline__ C cu_gelu_grad(C x) {
    const C one = 1, half = 0.5, k = (C)CU_GELU_K, c = (C)CU_GELU_C;
    if constexpr (TANH) {
        C u2 = 2 * k * (x + c * x * x * x), sp = one / (one + cu_ew_exp(-u2)), sm = one / (one + cu_ew_exp(u2));
        return sp + 2 * x * sp * sm * k * (one + 3 * c * x * x);
    } else {
        (void)one, (void)k, (void)c;
        return half * cu_ew_erfc(-x * (C)CU_INV_SQRT2) + x * (C)CU_INV_SQRT_2PI * cu_ew_exp(-half * x * x);
    }
}

/* ---- the CPU backend's conversion rule (cpu_load / cpu_store in cpu.h) ----
** Every value goes through double: integers and bool load exactly (int64 with
** one rounding), floats narrow to f32 first and then to f16/bf16 (round to
** nearest even), float -> integer truncates toward zero, saturates at the
** type's range and maps NaN to 0, and -> bool is v != 0 (NaN is true).
** Between f32, f16 and bf16 the result is the same without the double.
** cu_cast_store also runs on the host (FILL converts its value once). */
template <typename T> __device__ __forceinline__ double cu_cast_load(T x) { return (double)x; }
template <> __device__ __forceinline__ double cu_cast_load<__half>(__half x) { return (double)__half2float(x); }
template <> __device__ __forceinline__ double cu_cast_load<__nv_bfloat16>(__nv_bfloat16 x) {
    return (double)__bfloat162float(x);
}
template <> __device__ __forceinline__ double cu_cast_load<cu_bool>(cu_bool x) { return x.v != 0; }

/* v truncated toward zero and clamped to [lo, hi]; NaN -> 0 (cpu_to_i64) */
__host__ __device__ __forceinline__ int64_t cu_cast_sat(double v, double lo, double hi) {
    if (v != v) return 0;
    if (v <= lo) return (int64_t)lo;
    if (v >= hi) return (int64_t)hi;
    return (int64_t)v;
}

template <typename T> __host__ __device__ __forceinline__ T cu_cast_store(double v);
template <> __host__ __device__ __forceinline__ float cu_cast_store<float>(double v) { return (float)v; }
template <> __host__ __device__ __forceinline__ double cu_cast_store<double>(double v) { return v; }
template <> __host__ __device__ __forceinline__ __half cu_cast_store<__half>(double v) {
    return __float2half_rn((float)v);
}
template <> __host__ __device__ __forceinline__ __nv_bfloat16 cu_cast_store<__nv_bfloat16>(double v) {
    return __float2bfloat16_rn((float)v);
}
template <> __host__ __device__ __forceinline__ int32_t cu_cast_store<int32_t>(double v) {
    return (int32_t)cu_cast_sat(v, -2147483648.0, 2147483647.0);
}
template <> __host__ __device__ __forceinline__ int64_t cu_cast_store<int64_t>(double v) {
    return cu_cast_sat(v, -9223372036854775808.0, 9223372036854774784.0);
}
template <> __host__ __device__ __forceinline__ uint8_t cu_cast_store<uint8_t>(double v) {
    return (uint8_t)cu_cast_sat(v, 0, 255);
}
template <> __host__ __device__ __forceinline__ cu_bool cu_cast_store<cu_bool>(double v) {
    return cu_bool{(uint8_t)(v != 0)};
}

template <typename T> struct cu_is_halfish {
    static constexpr bool value =
        std::is_same<T, float>::value || std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value;
};

template <typename TO, typename TI> __device__ __forceinline__ TO cu_cast(TI x) {
    if constexpr (std::is_same<TO, TI>::value)
        return x;
    else if constexpr (cu_is_halfish<TO>::value && cu_is_halfish<TI>::value)
        return cu_from<TO>(cu_to<float>(x));
    else
        return cu_cast_store<TO>(cu_cast_load(x));
}

/* ---- vectors and geometry ---- */

/* V elements of T, aligned so that one access is one vector load or store */
template <typename T, int V> struct alignas(sizeof(T) * V) cu_ew_vec { T v[V]; };

template <typename T> constexpr size_t cu_ew_max_size() { return sizeof(T); }
template <typename T, typename U, typename... R> constexpr size_t cu_ew_max_size() {
    return sizeof(T) > cu_ew_max_size<U, R...>() ? sizeof(T) : cu_ew_max_size<U, R...>();
}

/* Element offsets of the N operands of g at linear index i, one division per dim for all of them. */
template <int N, typename I> __device__ __forceinline__ void cu_ew_offsets(const cu_geom &g, I i, int64_t (&off)[N]) {
#pragma unroll
    for (int k = 0; k < N; k++) off[k] = g.contiguous ? (int64_t)i : 0;
    if (g.contiguous) return;
    for (int d = g.ndim - 1; d > 0; d--) {
        I n = (I)g.shape[d], q = i / n, r = i - q * n;
#pragma unroll
        for (int k = 0; k < N; k++) off[k] += (int64_t)r * g.strides[k][d];
        i = q;
    }
#pragma unroll
    for (int k = 0; k < N; k++) off[k] += (int64_t)i * g.strides[k][0];
}

template <typename F, typename TO, size_t... K, typename... TI>
__device__ __forceinline__ void cu_ew_at(const F &f, TO *out, const int64_t *off, std::index_sequence<K...>,
                                         const TI *...in) {
    out[off[0]] = f(in[off[K + 1]]...);
}

/* out (views[0] of g) = f(in...) at every index; I is the index type (uint32_t when numel < 2^31). */
template <typename I, typename F, typename TO, typename... TI>
__global__ void __launch_bounds__(CU_BLOCK) cu_ew_strided(cu_geom g, F f, TO *out, const TI *...in) {
    constexpr int N = 1 + (int)sizeof...(TI);
    I n = (I)g.numel, step = (I)gridDim.x * blockDim.x;
    for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        int64_t off[N];
        cu_ew_offsets<N, I>(g, i, off);
        cu_ew_at(f, out, off, std::index_sequence_for<TI...>{}, in...);
    }
}

/* Vector j of p, or V copies of p[0] when p is a broadcast scalar (S). */
template <int V, bool S, typename T> __device__ __forceinline__ cu_ew_vec<T, V> cu_ew_load(const T *p, int64_t j) {
    if constexpr (S) {
        cu_ew_vec<T, V> r;
        T x = p[0];
#pragma unroll
        for (int e = 0; e < V; e++) r.v[e] = x;
        return r;
    } else {
        return reinterpret_cast<const cu_ew_vec<T, V> *>(p)[j];
    }
}

template <int V, typename F, typename TO, typename... TI>
__device__ __forceinline__ void cu_ew_apply(const F &f, TO *out, int64_t j, const cu_ew_vec<TI, V> &...x) {
    cu_ew_vec<TO, V> o;
#pragma unroll
    for (int e = 0; e < V; e++) o.v[e] = f(x.v[e]...);
    reinterpret_cast<cu_ew_vec<TO, V> *>(out)[j] = o;
}

template <int V, unsigned SC, typename F, typename TO, size_t... K, typename... TI>
__device__ __forceinline__ void cu_ew_step(const F &f, TO *out, int64_t j, std::index_sequence<K...>, const TI *...in) {
    cu_ew_apply<V>(f, out, j, cu_ew_load<V, ((SC >> (K + 1)) & 1u) != 0>(in, j)...);
}

template <unsigned SC, typename F, typename TO, size_t... K, typename... TI>
__device__ __forceinline__ void cu_ew_tail(const F &f, TO *out, int64_t i, std::index_sequence<K...>, const TI *...in) {
    out[i] = f(in[((SC >> (K + 1)) & 1u) ? 0 : i]...);
}

/* out[0..n) = f(in...) with every operand contiguous; bit k+1 of SC marks input
** k as a broadcast scalar. Vectors of V elements, then the last n % V one by one. */
template <int V, unsigned SC, typename F, typename TO, typename... TI>
__global__ void __launch_bounds__(CU_BLOCK) cu_ew_contig(int64_t n, F f, TO *out, const TI *...in) {
    int64_t nv = n / V, t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t j = t; j < nv; j += step) cu_ew_step<V, SC>(f, out, j, std::index_sequence_for<TI...>{}, in...);
    for (int64_t i = nv * V + t; i < n; i += step) cu_ew_tail<SC>(f, out, i, std::index_sequence_for<TI...>{}, in...);
}

/* ---- host side ---- */

/* Every element of v is element 0 (stride 0 on every dim longer than 1). */
static inline bool cu_ew_is_scalar(const td_operand *v) {
    for (int i = 0; i < v->ndim; i++)
        if (v->shape[i] != 1 && v->strides[i] != 0) return false;
    return true;
}

static inline bool cu_ew_aligned(const void *p, size_t bytes) { return ((uintptr_t)p & (bytes - 1)) == 0; }

/* Launch cu_ew_contig with SC = sc when sc is 0 or names one input (the instantiated cases). */
template <int V, typename F, typename TO, size_t... K, typename... TI>
static bool cu_ew_launch_contig(cu_dev *d, unsigned sc, int64_t n, F f, std::index_sequence<K...>, TO *out,
                                const TI *...in) {
    unsigned grid = cu_grid(d, n / V > 0 ? n / V : n, CU_BLOCK);
    if (sc == 0) {
        cu_ew_contig<V, 0u><<<grid, CU_BLOCK, 0, d->stream>>>(n, f, out, in...);
        return true;
    }
    return ((sc == (2u << K) ? (cu_ew_contig<V, (2u << K)><<<grid, CU_BLOCK, 0, d->stream>>>(n, f, out, in...), true)
                             : false) ||
            ...);
}

/* out = f(in...) over views[0]'s shape; views[k + 1] describes in[k]. Returns
** TD_OK without launching when there are no elements. */
template <typename F, typename TO, typename... TI>
static td_status cu_ew_run(cu_dev *d, const char *name, F f, const td_operand *const *views, TO *out, const TI *...in) {
    constexpr int N = 1 + (int)sizeof...(TI);
    constexpr int V = (int)(16 / cu_ew_max_size<TO, TI...>());
    int64_t n = td_operand_numel(views[0]);
    if (n == 0) return TD_OK;
    const void *ptrs[N] = {out, in...};
    const size_t sizes[N] = {sizeof(TO), sizeof(TI)...};
    bool vec = td_operand_is_contiguous(views[0]) && cu_ew_aligned(out, V * sizeof(TO));
    unsigned sc = 0;
    for (int k = 1; k < N && vec; k++) {
        if (td_operand_is_contiguous(views[k]) && cu_ew_aligned(ptrs[k], V * sizes[k])) continue;
        if (cu_ew_is_scalar(views[k]))
            sc |= 1u << k;
        else
            vec = false;
    }
    if (vec && cu_ew_launch_contig<V>(d, sc, n, f, std::index_sequence_for<TI...>{}, out, in...))
        return CU_LAUNCHED(name);
    cu_geom g;
    cu_geom_make(N, views, &g);
    unsigned grid = cu_grid(d, n, CU_BLOCK);
    if (n < ((int64_t)1 << 31))
        cu_ew_strided<uint32_t><<<grid, CU_BLOCK, 0, d->stream>>>(g, f, out, in...);
    else
        cu_ew_strided<uint64_t><<<grid, CU_BLOCK, 0, d->stream>>>(g, f, out, in...);
    return CU_LAUNCHED(name);
}

#endif /* TRIDENT_CU_EW_CUH */
