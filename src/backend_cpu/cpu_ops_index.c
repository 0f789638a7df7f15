/*
** The CPU backend's index ops: INDEX_SELECT, GATHER, SCATTER_ADD, ONE_HOT, EMBEDDING (and backward), CAT.
*/
#include <stdio.h>
#include <stdlib.h>

#include "cpu.h"
#include "cpu_index.h"

/*
** Indexing kernels along one dim: INDEX_SELECT, GATHER, SCATTER_ADD, and
** ONE_HOT, plus the shared index range check.
**
** Every operand is contiguous (TD_LAYOUT_CONTIG). idx is int32 or int64 and is
** range-checked before anything is written, so a bad index never reads or
** writes out of bounds and the output is left untouched.
** Letters: x [outer, S, inner] around dim (S = x.size(dim)); K = idx size.
*/

td_status cpu_index_check(const td_operand *idx, int64_t limit, const char *op) {
    const void *p = cpu_ptr(idx);
    int64_t n = td_operand_numel(idx), bad = n;
    int nt = cpu_threads_for(n, 1);
#pragma omp parallel for num_threads(nt) reduction(min : bad)
    for (int64_t i = 0; i < n; i++) {
        int64_t v = cpu_index_at(p, idx->dtype, i);
        if ((v < 0 || v >= limit) && i < bad) bad = i;
    }
    if (bad == n) return TD_OK;
    int64_t pos[TD_MAX_DIMS], rem = bad;
    for (int d = idx->ndim - 1; d >= 0; d--) {
        pos[d] = idx->shape[d] ? rem % idx->shape[d] : 0;
        rem = idx->shape[d] ? rem / idx->shape[d] : 0;
    }
    char at[TD_MAX_DIMS * 21 + 3] = "[";
    for (int d = 0; d < idx->ndim; d++)
        snprintf(at + strlen(at), sizeof at - strlen(at), "%s%lld", d ? "," : "", (long long)pos[d]);
    strcat(at, "]");
    return td_error_set(TD_ERR_INDEX, "%s: index %lld at position %s is out of range [0, %lld)", op,
                        (long long)cpu_index_at(p, idx->dtype, bad), at, (long long)limit);
}

/* x [outer, S, inner], idx [K] -> out [outer, K, inner]:
** out[o, k, :] = x[o, idx[k], :] (rows copied as bytes, so any dtype). */
td_status cpu_op_INDEX_SELECT(const td_op *op) {
    const td_operand *x = &op->in[0], *idx = &op->in[1], *out = &op->out[0];
    int dim = op->p.axis.dim;
    td_status st = cpu_index_check(idx, x->shape[dim], "index_select");
    if (st != TD_OK) return st;
    int64_t outer = 1, inner = 1, S = x->shape[dim], K = td_operand_numel(idx);
    for (int d = 0; d < dim; d++) outer *= x->shape[d];
    for (int d = dim + 1; d < x->ndim; d++) inner *= x->shape[d];
    size_t es = td_dtype_size(x->dtype), row = (size_t)inner * es;
    const char *src = cpu_ptr(x);
    char *dst = cpu_ptr(out);
    const void *ip = cpu_ptr(idx);
    int nt = cpu_threads_for(outer * K, inner);
#pragma omp parallel for num_threads(nt)
    for (int64_t ok = 0; ok < outer * K; ok++) {
        int64_t o = ok / K, k = ok % K;
        memcpy(dst + (size_t)ok * row, src + (size_t)(o * S + cpu_index_at(ip, idx->dtype, k)) * row, row);
    }
    return TD_OK;
}

/* Strides (elements) of a contiguous operand. */
static void contig_strides(const td_operand *v, int64_t *st) { cpu_contiguous_strides(v->ndim, v->shape, st); }

/* Offset into the operand with strides st of the idx position whose
** row-major number is lin, with dim's coordinate left out (0). */
static int64_t offset_except(const td_operand *idx, int dim, int64_t lin, const int64_t *st) {
    int64_t off = 0;
    for (int d = idx->ndim - 1; d >= 0; d--) {
        int64_t c = lin % idx->shape[d];
        lin /= idx->shape[d];
        if (d != dim) off += c * st[d];
    }
    return off;
}

/* x [...], idx [...] (same ndim, idx.size(d) <= x.size(d) for d != dim) -> out
** shaped like idx: out[c] = x[c with c[dim] replaced by idx[c]]. */
#define GATHER_(T)                                                                                                     \
    do {                                                                                                               \
        const T *src = cpu_ptr(x);                                                                                     \
        T *dst = cpu_ptr(out);                                                                                         \
        _Pragma("omp parallel for num_threads(nt)") for (int64_t i = 0; i < n; i++) {                                  \
            int64_t j = cpu_index_at(ip, idx->dtype, i);                                                               \
            dst[i] = src[offset_except(idx, dim, i, xs) + j * xs[dim]];                                                \
        }                                                                                                              \
    } while (0)

td_status cpu_op_GATHER(const td_op *op) {
    const td_operand *x = &op->in[0], *idx = &op->in[1], *out = &op->out[0];
    int dim = op->p.axis.dim;
    td_status st = cpu_index_check(idx, x->shape[dim], "gather");
    if (st != TD_OK) return st;
    int64_t n = td_operand_numel(idx), xs[TD_MAX_DIMS];
    if (n == 0) return TD_OK;
    contig_strides(x, xs);
    const void *ip = cpu_ptr(idx);
    int nt = cpu_threads_for(n, 4);
    switch (td_dtype_size(x->dtype)) {
    case 1: GATHER_(uint8_t); break;
    case 2: GATHER_(uint16_t); break;
    case 4: GATHER_(uint32_t); break;
    case 8: GATHER_(uint64_t); break;
    }
    return TD_OK;
}

/* self [...], idx [...], src [...] (same ndim; idx.size(d) <= src.size(d) for
** all d and <= self.size(d) for d != dim) -> out = self, then for every idx
** position c: out[c with c[dim] = idx[c]] += src[c].
** Deterministic: a lane is one position of idx without dim; lanes write
** disjoint out elements, and each lane adds in increasing c[dim] order. */
#define SCATTER_ADD_(T, LOAD, STORE)                                                                                   \
    do {                                                                                                               \
        const T *s = cpu_ptr(srcv);                                                                                    \
        T *o = cpu_ptr(out);                                                                                           \
        _Pragma("omp parallel for num_threads(nt)") for (int64_t l = 0; l < lanes; l++) {                              \
            int64_t lin = (l / after) * J * after + l % after; /* idx position of (lane, 0) */                         \
            int64_t so = offset_except(idx, dim, lin, ss), oo = offset_except(idx, dim, lin, os);                      \
            for (int64_t j = 0; j < J; j++) {                                                                          \
                int64_t k = cpu_index_at(ip, idx->dtype, lin + j * after);                                             \
                T *d = &o[oo + k * os[dim]];                                                                           \
                *d = STORE(LOAD(*d) + LOAD(s[so + j * ss[dim]]));                                                      \
            }                                                                                                          \
        }                                                                                                              \
    } while (0)
#define SAME_(v) (v)

td_status cpu_op_SCATTER_ADD(const td_op *op) {
    const td_operand *self = &op->in[0], *idx = &op->in[1], *srcv = &op->in[2], *out = &op->out[0];
    int dim = op->p.axis.dim;
    td_status st = cpu_index_check(idx, self->shape[dim], "scatter_add");
    if (st != TD_OK) return st;
    memcpy(cpu_ptr(out), cpu_ptr(self), (size_t)td_operand_numel(out) * td_dtype_size(out->dtype));
    int64_t n = td_operand_numel(idx), J = idx->shape[dim], after = 1, ss[TD_MAX_DIMS], os[TD_MAX_DIMS];
    if (n == 0) return TD_OK;
    for (int d = dim + 1; d < idx->ndim; d++) after *= idx->shape[d];
    int64_t lanes = n / J;
    contig_strides(srcv, ss);
    contig_strides(out, os);
    const void *ip = cpu_ptr(idx);
    int nt = cpu_threads_for(lanes, J * 2);
    switch (out->dtype) {
    case TD_F32: SCATTER_ADD_(float, SAME_, SAME_); break;
    case TD_F64: SCATTER_ADD_(double, SAME_, SAME_); break;
    case TD_F16: SCATTER_ADD_(uint16_t, cpu_f16_to_f32, cpu_f32_to_f16); break;
    case TD_BF16: SCATTER_ADD_(uint16_t, cpu_bf16_to_f32, cpu_f32_to_bf16); break;
    case TD_I32: SCATTER_ADD_(uint32_t, SAME_, SAME_); break; /* unsigned: wraps like PyTorch, no UB */
    case TD_I64: SCATTER_ADD_(uint64_t, SAME_, SAME_); break;
    case TD_U8: SCATTER_ADD_(uint8_t, SAME_, (uint8_t)); break;
    default: return td_error_set(TD_ERR_UNSUPPORTED, "scatter_add: dtype %s", td_dtype_name(out->dtype));
    }
    return TD_OK;
}

/* idx [N...] in [0, C) -> out int64 [N..., C]: out[n, c] = (c == idx[n]). */
td_status cpu_op_ONE_HOT(const td_op *op) {
    const td_operand *idx = &op->in[0], *out = &op->out[0];
    int64_t C = op->p.one_hot.num_classes, n = td_operand_numel(idx);
    td_status st = cpu_index_check(idx, C, "one_hot");
    if (st != TD_OK) return st;
    int64_t *dst = cpu_ptr(out);
    const void *ip = cpu_ptr(idx);
    int nt = cpu_threads_for(n, C);
#pragma omp parallel for num_threads(nt)
    for (int64_t i = 0; i < n; i++) {
        memset(dst + i * C, 0, (size_t)C * sizeof *dst);
        dst[i * C + cpu_index_at(ip, idx->dtype, i)] = 1;
    }
    return TD_OK;
}

/*
** EMBEDDING and EMBEDDING_BACKWARD (torch.nn.functional.embedding).
** Letters: V rows of the table, D its width, N = numel(idx) lookups.
** All operands contiguous; idx int32 or int64.
*/

/* weight [V, D], idx [N...] -> out [N..., D]: out[n, :] = weight[idx[n], :]. */
td_status cpu_op_EMBEDDING(const td_op *op) {
    const td_operand *w = &op->in[0], *idx = &op->in[1], *out = &op->out[0];
    int64_t V = w->shape[0], D = w->shape[1], N = td_operand_numel(idx);
    td_status st = cpu_index_check(idx, V, "embedding");
    if (st != TD_OK) return st;
    size_t row = (size_t)D * td_dtype_size(w->dtype);
    const char *src = cpu_ptr(w);
    char *dst = cpu_ptr(out);
    const void *ip = cpu_ptr(idx);
    int nt = cpu_threads_for(N, D);
#pragma omp parallel for num_threads(nt)
    for (int64_t n = 0; n < N; n++)
        memcpy(dst + (size_t)n * row, src + (size_t)cpu_index_at(ip, idx->dtype, n) * row, row);
    return TD_OK;
}

/* Sum the rows dy[rows[0..count), d0 .. d0+len) into dw[d0 .. d0+len), in
** list order, accumulating in ACC (float for f32/f16/bf16, double for f64). */
#define ROW_SUM_(T, ACC, LOAD, STORE)                                                                                  \
    do {                                                                                                               \
        const T *g = cpu_ptr(dy);                                                                                      \
        T *o = (T *)cpu_ptr(out) + v * D;                                                                              \
        for (int64_t d0 = 0; d0 < D; d0 += CHUNK) {                                                                    \
            int64_t len = D - d0 < CHUNK ? D - d0 : CHUNK;                                                             \
            ACC acc[CHUNK] = {0};                                                                                      \
            for (int64_t k = begin; k < end; k++) {                                                                    \
                const T *r = g + order[k] * D + d0;                                                                    \
                for (int64_t d = 0; d < len; d++) acc[d] += LOAD(r[d]);                                                \
            }                                                                                                          \
            for (int64_t d = 0; d < len; d++) o[d0 + d] = STORE(acc[d]);                                               \
        }                                                                                                              \
    } while (0)
#define SAME_(v) (v)
#define CHUNK    64

/* dy [N..., D], idx [N...] -> dweight [V, D]:
** dweight[v, :] = sum over n with idx[n] == v (v != padding_idx) of dy[n, :].
** Deterministic without atomics: a counting sort groups the lookups by row
** (keeping n order), then each row v is summed by one thread. */
td_status cpu_op_EMBEDDING_BACKWARD(const td_op *op) {
    const td_operand *dy = &op->in[0], *idx = &op->in[1], *out = &op->out[0];
    int64_t V = out->shape[0], D = out->shape[1], N = td_operand_numel(idx), pad = op->p.embedding.padding_idx;
    td_status st = cpu_index_check(idx, V, "embedding_backward");
    if (st != TD_OK) return st;
    int64_t *start = calloc((size_t)V + 1, sizeof *start), *order = malloc((size_t)(N ? N : 1) * sizeof *order);
    if (!start || !order) {
        free(start), free(order);
        return td_error_set(TD_ERR_OOM, "embedding_backward: no memory to sort %lld indices", (long long)N);
    }
    /* pass 1: counting sort of n by idx[n] -> rows of row v are order[start[v] .. start[v+1]) */
    const void *ip = cpu_ptr(idx);
    for (int64_t n = 0; n < N; n++) start[cpu_index_at(ip, idx->dtype, n) + 1]++;
    for (int64_t v = 0; v < V; v++) start[v + 1] += start[v];
    int64_t *fill = malloc((size_t)(V ? V : 1) * sizeof *fill);
    if (!fill) {
        free(start), free(order);
        return td_error_set(TD_ERR_OOM, "embedding_backward: no memory for %lld rows", (long long)V);
    }
    memcpy(fill, start, (size_t)V * sizeof *fill);
    for (int64_t n = 0; n < N; n++) order[fill[cpu_index_at(ip, idx->dtype, n)]++] = n;
    free(fill);
    /* pass 2: one row per iteration; the padding row stays zero */
    int nt = cpu_threads_for(V, D + (V ? N / V : 0) * D);
#pragma omp parallel for num_threads(nt) schedule(dynamic, 16)
    for (int64_t v = 0; v < V; v++) {
        int64_t begin = start[v], end = v == pad ? start[v] : start[v + 1];
        switch (out->dtype) {
        case TD_F32: ROW_SUM_(float, float, SAME_, SAME_); break;
        case TD_F64: ROW_SUM_(double, double, SAME_, SAME_); break;
        case TD_F16: ROW_SUM_(uint16_t, float, cpu_f16_to_f32, cpu_f32_to_f16); break;
        case TD_BF16: ROW_SUM_(uint16_t, float, cpu_bf16_to_f32, cpu_f32_to_bf16); break;
        default: break;
        }
    }
    free(start), free(order);
    return TD_OK;
}

/*
** CAT: concatenate n inputs along dim into a contiguous output.
** in[k] [..., S_k, ...] (any strides, the output's dtype) -> out [..., sum S_k, ...]:
** input k lands in the slice [P_k, P_k + S_k) of dim, P_k = S_0 + ... + S_{k-1}.
** Each slice is written by the COPY kernel through a strided view of out.
*/

td_status cpu_op_CAT(const td_op *op) {
    const td_operand *out = &op->out[0];
    int dim = op->p.axis.dim;
    int64_t at = 0;
    for (int k = 0; k < op->n_in; k++) {
        td_operand slice = *out;
        slice.shape[dim] = op->in[k].shape[dim];
        slice.offset += at * out->strides[dim];
        at += op->in[k].shape[dim];
        td_op copy = {.kind = TD_OP_COPY, .n_in = 1, .n_out = 1, .in = &op->in[k], .out = &slice};
        td_status st = cpu_op_COPY(&copy);
        if (st != TD_OK) return st;
    }
    return TD_OK;
}
