/*
** The op cases every op test shares, made from the op table's facts
** (include/trident/op_list.h, TD_OP_FACTS): for each op and dtype, a small
** valid invocation (the sig's probe shapes, int64 indices, f32 flags, absent
** optional operands, the probe's params). `trident devices --ops` asks each
** backend's supports() about it; the tests run it (test_vulkan_ops against
** the CPU, test_conformance checks the table against every case it sweeps).
** Header-only: tools/devices.c and the tests include it.
*/
#ifndef TRIDENT_TESTS_OP_CASES_H
#define TRIDENT_TESTS_OP_CASES_H

#include <stdbool.h>
#include <string.h>

#include "trident/backend.h"

enum { OP_CASE_MAX = 8 }; /* operands of each side */

typedef struct op_case {
    td_op op;
    td_operand in[OP_CASE_MAX], out[OP_CASE_MAX];
} op_case;

/* The dtype a sig code gives an operand of the case with op dtype dt. */
static inline td_dtype op_case_dtype(char code, td_dtype dt) {
    switch (code) {
    case 'b': return TD_BOOL;
    case 'l':
    case 'i': return TD_I64;
    case 'f': return TD_F32;
    case 's': return td_dtype_is_float(dt) ? dt : TD_I64;
    case 'w': return dt == TD_F64 ? TD_F64 : TD_F32;
    default: return dt;
    }
}

/* Whether dt is one of op k's dtypes: its dtype class, and for an op whose
** dtype operand is an index (ONE_HOT), an index dtype. */
static inline bool op_case_has_dtype(td_op_kind k, td_dtype dt) {
    const td_op_meta *m = td_op_info(k);
    bool cls = m->dtypes == TD_DTS_ALL || (m->dtypes == TD_DTS_NUM && dt != TD_BOOL) ||
               (m->dtypes == TD_DTS_FLOAT && td_dtype_is_float(dt));
    const char *s = m->sig;
    td_sig_arg a;
    bool index_op = !strchr(m->sig, 'x') && td_sig_next(&s, &a) && a.code == 'i';
    return cls && (!index_op || dt == TD_I32 || dt == TD_I64);
}

/* Case k at dtype dt into *c; operands are contiguous views of buf (NULL:
** geometry only, every present operand gets a dummy non-NULL buffer). */
static inline void op_case_make(td_op_kind k, td_dtype dt, op_case *c, td_buffer *buf) {
    static char dummy;
    const td_op_meta *m = td_op_info(k);
    memset(c, 0, sizeof *c);
    c->op = (td_op){.kind = k, .in = c->in, .out = c->out, .p = *m->probe};
    bool has_x = strchr(m->sig, 'x') != NULL;
    const char *s = m->sig;
    td_sig_arg a;
    for (int side = 0; side < 2; side++) {
        int n = 0;
        while (td_sig_next(&s, &a)) {
            for (int rep = 0; rep < (a.repeat ? 2 : 1) && n < OP_CASE_MAX; rep++, n++) {
                td_operand *v = side ? &c->out[n] : &c->in[n];
                if (a.ndim < 0) continue;
                v->buf = buf ? buf : (td_buffer *)&dummy;
                v->dtype = !has_x && !side && !n ? dt : op_case_dtype(a.code, dt);
                v->ndim = a.ndim;
                int64_t stride = 1;
                for (int d = a.ndim - 1; d >= 0; d--) {
                    v->shape[d] = a.shape[d];
                    v->strides[d] = stride;
                    stride *= a.shape[d];
                }
            }
        }
        *(side ? &c->op.n_out : &c->op.n_in) = n;
    }
}

#endif /* TRIDENT_TESTS_OP_CASES_H */
