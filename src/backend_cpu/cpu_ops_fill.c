/*
** The CPU backend's fill ops: FILL, ARANGE and COPY (the strided copy with dtype conversion).
*/
#include "cpu.h"
#include "cpu_ew.h"

/*
** Creation kernels: FILL (out = value, any strides) and ARANGE
** (out[i] = start + i*step, contiguous).
*/

#define FILL_(T, value)                                                                                                \
    do {                                                                                                               \
        T *dst = cpu_ptr(out), v = (value);                                                                            \
        _Pragma("omp parallel for num_threads(nt)") for (int64_t r = 0; r < it.rows; r++) {                            \
            int64_t off[1];                                                                                            \
            cpu_iter_row_offsets(&it, r, off);                                                                         \
            for (int64_t i = 0; i < it.inner; i++) dst[off[0] + i * it.inner_strides[0]] = v;                          \
        }                                                                                                              \
    } while (0)

td_status cpu_op_FILL(const td_op *op) {
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

td_status cpu_op_ARANGE(const td_op *op) {
    const td_operand *out = &op->out[0];
    int64_t n = td_operand_numel(out);
    void *dst = cpu_ptr(out);
    double start = op->p.arange.start, step = op->p.arange.step;
    int nt = cpu_threads_for(n, 1);
#pragma omp parallel for num_threads(nt)
    for (int64_t i = 0; i < n; i++) cpu_store(dst, i, out->dtype, start + (double)i * step);
    return TD_OK;
}

/*
** COPY: strided copy with dtype conversion.
** in is any shape-compatible view (broadcast dims have stride 0); out may be
** strided but never overlaps itself. Runs through cpu_elementwise, so a long
** contiguous copy is split into tiles over every thread.
*/

/* Same-dtype copy of n elements of type T with strides s[0] (out), s[1] (in). */
#define COPY_SAME_(T)                                                                                                  \
    do {                                                                                                               \
        T *d = (T *)p[0];                                                                                              \
        const T *src = (const T *)p[1];                                                                                \
        for (int64_t i = 0; i < n; i++) d[i * s[0]] = src[i * s[1]];                                                   \
    } while (0)

static void copy_row(const td_op *op, int64_t n, char *const *p, const int64_t *s) {
    td_dtype sd = op->in[0].dtype, dd = op->out[0].dtype;
    size_t size = td_dtype_size(dd);
    if (sd == dd && s[0] == 1 && s[1] == 1) {
        memcpy(p[0], p[1], (size_t)n * size);
        return;
    }
    if (sd == dd) {
        switch (size) {
        case 1: COPY_SAME_(uint8_t); return;
        case 2: COPY_SAME_(uint16_t); return;
        case 4: COPY_SAME_(uint32_t); return;
        case 8: COPY_SAME_(uint64_t); return;
        }
    }
    for (int64_t i = 0; i < n; i++) cpu_store(p[0], i * s[0], dd, cpu_load(p[1], i * s[1], sd));
}

td_status cpu_op_COPY(const td_op *op) { return cpu_elementwise(op, copy_row, 1); }
