/*
** Creation kernels: FILL (out = value, any strides) and ARANGE
** (out[i] = start + i*step, contiguous).
*/
#include "cpu.h"

#define FILL_(T, value)                                                                                                \
    do {                                                                                                               \
        T *dst = cpu_ptr(out), v = (value);                                                                            \
        _Pragma("omp parallel for num_threads(nt)") for (int64_t r = 0; r < it.rows; r++) {                            \
            int64_t off[1];                                                                                            \
            cpu_iter_row_offsets(&it, r, off);                                                                         \
            for (int64_t i = 0; i < it.inner; i++) dst[off[0] + i * it.inner_strides[0]] = v;                          \
        }                                                                                                              \
    } while (0)

td_status td_cpu_FILL(const td_op *op) {
    const td_operand *out = &op->out[0];
    if (td_operand_numel(out) == 0) return TD_OK;
    const td_operand *views[1] = {out};
    cpu_iter it;
    cpu_iter_init(&it, 1, views);
    int nt = cpu_threads_for(td_operand_numel(out), 1);
    /* convert the value once through the dtype's own store rule */
    uint64_t bits = 0;
    cpu_store(&bits, 0, out->dtype, op->p.fill.value);
    switch (td_dtype_size(out->dtype)) {
    case 1: FILL_(uint8_t, (uint8_t)bits); break;
    case 2: FILL_(uint16_t, (uint16_t)bits); break;
    case 4: FILL_(uint32_t, (uint32_t)bits); break;
    case 8: FILL_(uint64_t, bits); break;
    }
    return TD_OK;
}

td_status td_cpu_ARANGE(const td_op *op) {
    const td_operand *out = &op->out[0];
    int64_t n = td_operand_numel(out);
    void *dst = cpu_ptr(out);
    double start = op->p.arange.start, step = op->p.arange.step;
    int nt = cpu_threads_for(n, 1);
#pragma omp parallel for num_threads(nt)
    for (int64_t i = 0; i < n; i++) cpu_store(dst, i, out->dtype, start + (double)i * step);
    return TD_OK;
}
