/*
** Shared helpers of the CPU nn kernels: widening f16/bf16 operands to f32,
** narrowing results back, and a reusable scratch buffer (see cpu_nn.h).
*/
#include <stdlib.h>

#include "cpu_nn.h"

td_status cpu_nn_oom(const char *op, size_t nbytes) {
    return td_error_set(TD_ERR_OOM, "%s: out of memory for a %zu-byte work buffer", op, nbytes);
}

void *cpu_nn_workspace(size_t nbytes) {
    static _Thread_local void *buf;
    static _Thread_local size_t size;
    if (nbytes <= size) return buf;
    size_t rounded = (nbytes + 63) / 64 * 64;
    void *p = aligned_alloc(64, rounded);
    if (!p) {
        cpu_nn_oom("cpu", nbytes);
        return NULL;
    }
    free(buf);
    buf = p, size = rounded;
    return buf;
}

float *cpu_nn_to_f32(const td_operand *v) {
    if (!v->buf) return NULL;
    int64_t n = td_operand_numel(v);
    float *dst = malloc((size_t)(n ? n : 1) * sizeof(float));
    if (!dst) {
        cpu_nn_oom("cpu", (size_t)n * sizeof(float));
        return NULL;
    }
    if (n == 0) return dst;
    const td_operand *views[1] = {v};
    cpu_iter it;
    cpu_iter_init(&it, 1, views);
    const void *src = cpu_ptr(v);
    int nt = cpu_threads_for(n, 2);
    /* cpu_iter keeps row-major order, so row r covers dst[r*inner, (r+1)*inner) */
#pragma omp parallel for num_threads(nt)
    for (int64_t r = 0; r < it.rows; r++) {
        int64_t off;
        cpu_iter_row_offsets(&it, r, &off);
        for (int64_t i = 0; i < it.inner; i++)
            dst[r * it.inner + i] = (float)cpu_load(src, off + i * it.inner_strides[0], v->dtype);
    }
    return dst;
}

void cpu_nn_from_f32(const td_operand *out, const float *src) {
    int64_t n = td_operand_numel(out);
    void *dst = cpu_ptr(out);
    int nt = cpu_threads_for(n, 2);
#pragma omp parallel for num_threads(nt)
    for (int64_t i = 0; i < n; i++) cpu_store(dst, i, out->dtype, src[i]);
}
