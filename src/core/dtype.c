/*
** dtype facts and promotion.
*/
#include "internal.h"

typedef struct dtype_info {
    const char *name;
    size_t size;
    bool is_float, is_signed;
} dtype_info;

static const dtype_info dtypes[TD_DTYPE_COUNT] = {
#define TD_DTYPE_INFO_(N, s, b, f, sg) [TD_##N] = {s, b, f, sg},
    TD_DTYPE_LIST(TD_DTYPE_INFO_)
#undef TD_DTYPE_INFO_
};

static bool valid(td_dtype dt) { return (unsigned)dt < TD_DTYPE_COUNT; }

const char *td_dtype_name(td_dtype dt) { return valid(dt) ? dtypes[dt].name : "?"; }
size_t td_dtype_size(td_dtype dt) { return valid(dt) ? dtypes[dt].size : 0; }
bool td_dtype_is_float(td_dtype dt) { return valid(dt) && dtypes[dt].is_float; }

/* category: 0 bool, 1 integer, 2 float */
static int category(td_dtype dt) { return dt == TD_BOOL ? 0 : dtypes[dt].is_float ? 2 : 1; }

td_dtype td_dtype_promote(td_dtype a, td_dtype b) {
    if (a == b) return a;
    int ca = category(a), cb = category(b);
    if (ca != cb) return ca > cb ? a : b;
    if (ca == 2) {
        if ((a == TD_F16 && b == TD_BF16) || (a == TD_BF16 && b == TD_F16)) return TD_F32;
        return dtypes[a].size >= dtypes[b].size ? a : b;
    }
    /* integers: u8 with a signed type gives the signed type (i8 does not exist) */
    if (a == TD_U8) return b;
    if (b == TD_U8) return a;
    return dtypes[a].size >= dtypes[b].size ? a : b;
}
