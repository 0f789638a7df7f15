/*
** EMBEDDING and EMBEDDING_BACKWARD (torch.nn.functional.embedding).
** Letters: V rows of the table, D its width, N = numel(idx) lookups.
** All operands contiguous; idx int32 or int64.
*/
#include <stdlib.h>

#include "cpu_index.h"

/* weight [V, D], idx [N...] -> out [N..., D]: out[n, :] = weight[idx[n], :]. */
td_status td_cpu_EMBEDDING(const td_op *op) {
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
td_status td_cpu_EMBEDDING_BACKWARD(const td_op *op) {
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
