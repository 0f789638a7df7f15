/*
** Autocast (include/trident/amp.h): a per-thread stack of scopes, the one
** function that applies an op's policy (the amp column of TD_OP_LIST) to its
** inputs, and the cache of parameters cast to the low dtype.
**
** Front-ends call td__autocast(kind, n, in, held) before they look at dtypes;
** it returns at once when no scope is open, which is the common case.
*/
#include <stdlib.h>

#include "internal.h"
#include "trident/amp.h"
#include "trident/autograd.h"

#define AUTOCAST_DEPTH_MAX 64

typedef struct cache_entry {
    td_tensor *src;        /* retained: the parameter */
    unsigned long version; /* its storage version when cast */
    td_tensor *cast;       /* +1: src cast to dt, recorded by autograd */
    td_dtype dt;
} cache_entry;

static _Thread_local struct {
    int depth, suspended;
    struct {
        int type;
        td_dtype dt;
    } scope[AUTOCAST_DEPTH_MAX];
    cache_entry *cache;
    int n_cache, cap_cache;
} ac;

static void cache_clear(void) {
    for (int i = 0; i < ac.n_cache; i++) {
        td_release(ac.cache[i].cast);
        td_release(ac.cache[i].src);
    }
    free(ac.cache);
    ac.cache = NULL;
    ac.n_cache = ac.cap_cache = 0;
}

td_status td_autocast_begin(int device_type, td_dtype dtype) {
    if (device_type < 0 || device_type >= TD_DEVICE_TYPE_COUNT)
        return TD_ERR(TD_ERR_MISUSE, "autocast_begin: unknown device type %d", device_type);
    if (dtype != TD_F16 && dtype != TD_BF16)
        return TD_ERR(TD_ERR_MISUSE, "autocast_begin: dtype %s is not a low-precision float (use TD_F16 or TD_BF16)",
                      td_dtype_name(dtype));
    if (ac.depth == AUTOCAST_DEPTH_MAX)
        return TD_ERR(TD_ERR_MISUSE, "autocast_begin: scopes nested deeper than %d", AUTOCAST_DEPTH_MAX);
    ac.scope[ac.depth].type = device_type;
    ac.scope[ac.depth].dt = dtype;
    ac.depth++;
    return TD_OK;
}

td_status td_autocast_end(void) {
    if (ac.depth == 0) return TD_ERR(TD_ERR_MISUSE, "autocast_end: no autocast scope is open");
    if (--ac.depth == 0) cache_clear();
    return TD_OK;
}

bool td_autocast_enabled(int device_type, td_dtype *dtype) {
    for (int i = ac.depth - 1; i >= 0 && !ac.suspended; i--)
        if (ac.scope[i].type == device_type) {
            if (dtype) *dtype = ac.scope[i].dt;
            return true;
        }
    return false;
}

void td__autocast_suspend(bool on) { ac.suspended += on ? 1 : -1; }

int td__autocast_cache_size(void) { return ac.n_cache; }

/* t cast to dt as a +1 reference; a parameter's low cast comes from the cache. */
static td_tensor *cast_to(td_tensor *t, td_dtype dt, bool low) {
    bool cacheable = low && t->requires_grad && !t->grad_fn && td_grad_enabled();
    unsigned long version = atomic_load(&t->storage->version);
    if (cacheable)
        for (int i = 0; i < ac.n_cache; i++) {
            cache_entry *e = &ac.cache[i];
            if (e->src == t && e->dt == dt && e->version == version) return td_retain(e->cast);
        }
    td_tensor *c;
    if (!td__shadow_cast(t, dt, &c)) c = td_keep(td_cast(t, dt));
    if (!c || !cacheable) return c;
    if (ac.n_cache == ac.cap_cache) {
        int cap = ac.cap_cache ? 2 * ac.cap_cache : 64;
        cache_entry *grown = realloc(ac.cache, sizeof *grown * (size_t)cap);
        if (!grown) return c; /* no cache entry: only the reuse is lost */
        ac.cache = grown, ac.cap_cache = cap;
    }
    ac.cache[ac.n_cache++] = (cache_entry){td_retain(t), version, td_retain(c), dt};
    return c;
}

bool td__autocast(td_op_kind kind, int n, td_tensor **in, td_tensor **held) {
    for (int k = 0; k < n; k++) held[k] = NULL;
    if (!ac.depth || ac.suspended) return true;
    int policy = td_op_info(kind)->amp;
    const td_tensor *first = NULL;
    for (int k = 0; k < n && !first; k++) first = in[k];
    td_dtype low;
    if (policy == TD_AMP_KEEP || !first || !td_autocast_enabled(first->storage->device.type, &low)) return true;
    td_dtype widest = TD_F16;
    bool any = false;
    for (int k = 0; k < n; k++)
        if (in[k] && td_dtype_is_float(in[k]->dtype))
            widest = any ? td_dtype_promote(widest, in[k]->dtype) : in[k]->dtype, any = true;
    for (int k = 0; k < n; k++) {
        td_tensor *t = in[k];
        if (!t || !td_dtype_is_float(t->dtype)) continue;
        td_dtype dt = policy == TD_AMP_LOW   ? (t->dtype == TD_F64 ? TD_F64 : low)
                      : policy == TD_AMP_F32 ? (t->dtype == TD_F64 ? TD_F64 : TD_F32)
                                             : widest;
        if (dt == t->dtype) continue;
        if (!(held[k] = cast_to(t, dt, policy == TD_AMP_LOW))) {
            td__autocast_release(n, held);
            return false;
        }
        in[k] = held[k];
    }
    return true;
}

void td__autocast_release(int n, td_tensor **held) {
    for (int k = 0; k < n; k++) {
        td_release(held[k]);
        held[k] = NULL;
    }
}
