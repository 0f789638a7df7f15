/*
** COPY: strided copy with dtype conversion.
** in is any shape-compatible view (broadcast dims have stride 0); out may be
** strided but never overlaps itself. Runs through cpu_elementwise, so a long
** contiguous copy is split into tiles over every thread.
*/
#include "cpu_ew.h"

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

td_status td_cpu_COPY(const td_op *op) { return cpu_elementwise(op, copy_row, 1); }
