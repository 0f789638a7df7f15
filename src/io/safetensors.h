/*
** safetensors internals shared by the reader and the writer.
** defines: st_dtype (the format's dtype names), st_dtype_by_name, st_dtype_of.
*/
#ifndef TRIDENT_IO_SAFETENSORS_H
#define TRIDENT_IO_SAFETENSORS_H

#include <string.h>

#include "core/internal.h"

#define ST_MAX_HEADER 100000000ull /* the reference reader's cap on N */

/* Every dtype the format names, in the reference's enum order: increasing
** alignment, which the writer sorts by (descending). dtype is TD_DTYPE_COUNT
** where Trident has no equivalent. */
typedef struct st_dtype {
    const char *name;
    int rank;  /* position in the reference's Dtype enum */
    int bytes; /* element size */
    td_dtype dtype;
} st_dtype;

static const st_dtype st_dtypes[] = {
    {"BOOL", 0, 1, TD_BOOL},
    {"U8", 1, 1, TD_U8},
    {"I8", 2, 1, TD_DTYPE_COUNT},
    {"F8_E5M2", 3, 1, TD_DTYPE_COUNT},
    {"F8_E4M3", 4, 1, TD_DTYPE_COUNT},
    {"I16", 5, 2, TD_DTYPE_COUNT},
    {"U16", 6, 2, TD_DTYPE_COUNT},
    {"F16", 7, 2, TD_F16},
    {"BF16", 8, 2, TD_BF16},
    {"I32", 9, 4, TD_I32},
    {"U32", 10, 4, TD_DTYPE_COUNT},
    {"F32", 11, 4, TD_F32},
    {"F64", 12, 8, TD_F64},
    {"I64", 13, 8, TD_I64},
    {"U64", 14, 8, TD_DTYPE_COUNT},
};
#define ST_NDTYPES ((int)(sizeof st_dtypes / sizeof st_dtypes[0]))

static inline const st_dtype *st_dtype_by_name(const char *name) {
    for (int i = 0; i < ST_NDTYPES; i++)
        if (!strcmp(st_dtypes[i].name, name)) return &st_dtypes[i];
    return NULL;
}

static inline const st_dtype *st_dtype_of(td_dtype dt) {
    for (int i = 0; i < ST_NDTYPES; i++)
        if (st_dtypes[i].dtype == dt) return &st_dtypes[i];
    return NULL;
}

#endif /* TRIDENT_IO_SAFETENSORS_H */
