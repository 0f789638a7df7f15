/*
** Creation and copy ops on CUDA, mirroring src/backend_cpu/cpu_fill.c and
** cpu_copy.c:
**   FILL    out = value (any dtype; out may be strided), the value converted
**           once by the CPU's store rule (cu_cast_store, cu_ew.cuh);
**   ARANGE  out[i] = start + i*step, computed in double (no FMA, as on the
**           CPU) and stored by the same rule; out contiguous [n];
**   COPY    out = cast(in): in any strides (stride 0 to broadcast), out any
**           strides too, never overlapping itself or in; the conversion is
**           cu_cast (the CPU's rule: through double, saturating float ->
**           integer casts, NaN -> 0); cu_copy_view (cu.h) also copies CAT's
**           slices (cu_ops_index.cu).
** COPY paths: one dtype and both contiguous: cudaMemcpyAsync; one dtype with
** the last two dims transposed between in and out (contiguous() of a
** transpose): 32x32 tiles through shared memory, both sides coalesced;
** otherwise cu_ew_run (cu_ew.cuh), on raw elements when the dtypes match.
*/
#include <string.h>

#include "cu_ew.cuh"

/* ---- FILL: out = bits of the value, moved as raw elements U ---- */

namespace { /* file-local types and kernels */

template <typename U> struct cu_fill_f {
    U v;
    __device__ U operator()() const { return v; }
};

} // namespace

template <typename U> static td_status fill_raw(cu_dev *d, const td_operand *out, uint64_t bits) {
    const td_operand *views[1] = {out};
    cu_fill_f<U> f;
    memcpy(&f.v, &bits, sizeof(U));
    return cu_ew_run(d, "fill", f, views, (U *)cu_data(out));
}

extern "C" td_status cu_op_FILL(cu_dev *d, const td_op *op) {
    const td_operand *out = &op->out[0];
    uint64_t bits = 0;
    CU_SWITCH_ALL(out->dtype, {
        T v = cu_cast_store<T>(op->p.fill.value);
        memcpy(&bits, &v, sizeof v);
    })
    switch (td_dtype_size(out->dtype)) {
    case 1: return fill_raw<uint8_t>(d, out, bits);
    case 2: return fill_raw<uint16_t>(d, out, bits);
    case 4: return fill_raw<uint32_t>(d, out, bits);
    case 8: return fill_raw<uint64_t>(d, out, bits);
    default: return td_error_set(TD_ERR_UNSUPPORTED, "cuda fill: no kernel for %s", td_dtype_name(out->dtype));
    }
}

/* ---- ARANGE ---- */

namespace { /* file-local types and kernels */

/* out [n] contiguous: out[i] = start + i*step, rounded once per operation as the CPU's double arithmetic is */
template <typename T>
__global__ void __launch_bounds__(CU_BLOCK) cu_arange(int64_t n, double start, double step, T *out) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = cu_cast_store<T>(__dadd_rn(start, __dmul_rn((double)i, step)));
}

} // namespace

CU_SUPPORTS(ARANGE) { return td_operand_is_contiguous(&op->out[0]); }

extern "C" td_status cu_op_ARANGE(cu_dev *d, const td_op *op) {
    const td_operand *out = &op->out[0];
    int64_t n = td_operand_numel(out);
    if (n == 0) return TD_OK;
    unsigned grid = cu_grid(d, n, CU_BLOCK);
    CU_SWITCH_NUM(out->dtype, cu_arange<T>
                  <<<grid, CU_BLOCK, 0, d->stream>>>(n, op->p.arange.start, op->p.arange.step, (T *)cu_data(out)))
    return CU_LAUNCHED("arange");
}

/* ---- COPY ---- */

namespace { /* file-local types and kernels */

template <typename TO, typename TI> struct cu_cast_f {
    __device__ TO operator()(TI x) const { return cu_cast<TO>(x); }
};

#define CU_TILE 32

/* Transposing copy over the geometry g of (out, in) with R = g.shape[nd-2], C =
** g.shape[nd-1]: in's dim nd-2 and out's dim nd-1 have stride 1. A block
** moves one 32x32 tile of one batch (the dims before nd-2): it reads the tile
** down in's unit-stride dim, and writes it along out's. Block (32, 8). */
template <typename U> __global__ void __launch_bounds__(CU_TILE * 8) cu_copy_tile(cu_geom g, U *out, const U *in) {
    __shared__ U tile[CU_TILE][CU_TILE + 1];
    int nd = g.ndim;
    int64_t R = g.shape[nd - 2], C = g.shape[nd - 1], batches = g.numel / (R * C);
    int64_t so_r = g.strides[0][nd - 2], si_c = g.strides[1][nd - 1];
    int64_t r0 = (int64_t)blockIdx.y * CU_TILE, c0 = (int64_t)blockIdx.x * CU_TILE;
    int tx = threadIdx.x, ty = threadIdx.y;
    for (int64_t b = blockIdx.z; b < batches; b += gridDim.z) {
        int64_t oo = 0, oi = 0, q = b;
        for (int k = nd - 3; k >= 0; k--) {
            int64_t i = q % g.shape[k];
            q /= g.shape[k];
            oo += i * g.strides[0][k];
            oi += i * g.strides[1][k];
        }
        /* read: tile[c][r] = in[r0 + tx, c0 + j], consecutive tx consecutive in memory */
        for (int j = ty; j < CU_TILE; j += 8)
            if (r0 + tx < R && c0 + j < C) tile[j][tx] = in[oi + (r0 + tx) + (c0 + j) * si_c];
        __syncthreads();
        /* write: out[r0 + j, c0 + tx] = tile[tx][j], consecutive tx consecutive in memory */
        for (int j = ty; j < CU_TILE; j += 8)
            if (r0 + j < R && c0 + tx < C) out[oo + (r0 + j) * so_r + (c0 + tx)] = tile[tx][j];
        __syncthreads();
    }
}

} // namespace

/* in and out of one dtype (raw elements U) */
template <typename U>
static td_status copy_raw(cu_dev *d, const td_operand *const *views, U *out, const U *in, int64_t n) {
    if (td_operand_is_contiguous(views[0]) && td_operand_is_contiguous(views[1])) {
        CU_TRY(cudaMemcpyAsync(out, in, (size_t)n * sizeof(U), cudaMemcpyDeviceToDevice, d->stream));
        return TD_OK;
    }
    cu_geom g;
    cu_geom_make(2, views, &g);
    int nd = g.ndim;
    if (nd >= 2 && g.strides[0][nd - 1] == 1 && g.strides[1][nd - 2] == 1 && g.strides[1][nd - 1] != 1) {
        int64_t R = g.shape[nd - 2], C = g.shape[nd - 1], batches = g.numel / (R * C);
        int64_t gy = (R + CU_TILE - 1) / CU_TILE, gx = (C + CU_TILE - 1) / CU_TILE;
        if (gy <= 65535 && gx <= INT32_MAX) {
            dim3 grid((unsigned)gx, (unsigned)gy, (unsigned)(batches < 65535 ? batches : 65535));
            cu_copy_tile<U><<<grid, dim3(CU_TILE, 8), 0, d->stream>>>(g, out, in);
            return CU_LAUNCHED("copy");
        }
    }
    return cu_ew_run(d, "copy", cu_cast_f<U, U>(), views, out, in);
}

template <typename TO> static td_status copy_to(cu_dev *d, const td_operand *const *views, TO *out) {
    td_status st = TD_OK;
    const void *in = cu_data(views[1]);
    CU_SWITCH_ALL(views[1]->dtype, {
        if constexpr (!std::is_same<TO, T>::value) /* one dtype went to copy_raw */
            st = cu_ew_run(d, "copy", cu_cast_f<TO, T>(), views, out, (const T *)in);
    })
    return st;
}

/* out = cast(in), both of out's shape, any strides */
td_status cu_copy_view(cu_dev *d, const td_operand *in, const td_operand *out) {
    const td_operand *views[2] = {out, in};
    int64_t n = td_operand_numel(out);
    if (n == 0) return TD_OK;
    void *o = cu_data(out);
    const void *i = cu_data(in);
    if (in->dtype == out->dtype) switch (td_dtype_size(out->dtype)) {
        case 1: return copy_raw(d, views, (uint8_t *)o, (const uint8_t *)i, n);
        case 2: return copy_raw(d, views, (uint16_t *)o, (const uint16_t *)i, n);
        case 4: return copy_raw(d, views, (uint32_t *)o, (const uint32_t *)i, n);
        case 8: return copy_raw(d, views, (uint64_t *)o, (const uint64_t *)i, n);
        default: break;
        }
    td_status st = TD_ERR_UNSUPPORTED;
    CU_SWITCH_ALL(out->dtype, st = copy_to(d, views, (T *)o))
    if (st == TD_ERR_UNSUPPORTED)
        td_error_set(st, "cuda copy: no kernel for %s -> %s", td_dtype_name(in->dtype), td_dtype_name(out->dtype));
    return st;
}

static bool same_shape(const td_operand *a, const td_operand *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

CU_SUPPORTS(COPY) { return same_shape(&op->in[0], &op->out[0]); }

extern "C" td_status cu_op_COPY(cu_dev *d, const td_op *op) { return cu_copy_view(d, &op->in[0], &op->out[0]); }
