/*
** COPY: strided copy with dtype conversion.
** in is any shape-compatible view (broadcast dims have stride 0); out may be
** strided but never overlaps itself.
*/
#include "../core/internal.h"
#include "cpu.h"

/* Same-dtype element copy for element sizes 1, 2, 4 and 8 bytes. */
#define COPY_SAME_(T)                                                                                                  \
    do {                                                                                                               \
        const T *src = cpu_ptr(in);                                                                                    \
        T *dst = cpu_ptr(out);                                                                                         \
        _Pragma("omp parallel for num_threads(nt)") for (int64_t r = 0; r < it.rows; r++) {                            \
            int64_t off[2];                                                                                            \
            cpu_iter_row_offsets(&it, r, off);                                                                         \
            const T *s = src + off[1];                                                                                 \
            T *d = dst + off[0];                                                                                       \
            int64_t ds = it.inner_strides[0], ss = it.inner_strides[1];                                                \
            if (ds == 1 && ss == 1)                                                                                    \
                memcpy(d, s, (size_t)it.inner * sizeof(T));                                                            \
            else                                                                                                       \
                for (int64_t i = 0; i < it.inner; i++) d[i * ds] = s[i * ss];                                          \
        }                                                                                                              \
    } while (0)

td_status td_cpu_COPY(const td_op *op) {
    const td_operand *in = &op->in[0], *out = &op->out[0];
    if (td_operand_numel(out) == 0) return TD_OK;
    const td_operand *views[2] = {out, in};
    cpu_iter it;
    cpu_iter_init(&it, 2, views);
    int nt = cpu_threads_for(td_operand_numel(out), 1);
    if (in->dtype == out->dtype) {
        switch (td_dtype_size(in->dtype)) {
        case 1: COPY_SAME_(uint8_t); return TD_OK;
        case 2: COPY_SAME_(uint16_t); return TD_OK;
        case 4: COPY_SAME_(uint32_t); return TD_OK;
        case 8: COPY_SAME_(uint64_t); return TD_OK;
        }
    }
    const void *src = cpu_ptr(in);
    void *dst = cpu_ptr(out);
    td_dtype sd = in->dtype, dd = out->dtype;
#pragma omp parallel for num_threads(nt)
    for (int64_t r = 0; r < it.rows; r++) {
        int64_t off[2];
        cpu_iter_row_offsets(&it, r, off);
        for (int64_t i = 0; i < it.inner; i++)
            cpu_store(dst, off[0] + i * it.inner_strides[0], dd, cpu_load(src, off[1] + i * it.inner_strides[1], sd));
    }
    return TD_OK;
}
