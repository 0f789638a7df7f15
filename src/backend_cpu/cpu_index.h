/*
** Index operands of the indexing kernels (embedding, index_select, gather,
** scatter_add, one_hot): contiguous int32 or int64 tensors.
** defines: cpu_index_at, cpu_index_check.
*/
#ifndef TRIDENT_BACKEND_CPU_INDEX_H
#define TRIDENT_BACKEND_CPU_INDEX_H

#include "cpu.h"

/* Element i of a contiguous int32/int64 index operand whose data starts at p. */
static inline int64_t cpu_index_at(const void *p, td_dtype dt, int64_t i) {
    return dt == TD_I64 ? ((const int64_t *)p)[i] : ((const int32_t *)p)[i];
}

/* Check that every value of the contiguous index operand idx lies in
** [0, limit). On the first (row-major) value outside it, returns TD_ERR_INDEX
** with a message naming op, the value, its position in idx and the limit. */
td_status cpu_index_check(const td_operand *idx, int64_t limit, const char *op);

#endif /* TRIDENT_BACKEND_CPU_INDEX_H */
