/*
** Parameter shadows: autocast's 16-bit copy of a float32 parameter storage,
** kept from one step to the next (llm.c's bf16 weights beside f32 masters).
**
** Autocast casts each parameter a Linear reads once per region (autocast.c).
** With a shadow, that cast is a view of the storage's shadow instead of a pass:
** the optimizer's step writes the shadow in the same kernel that updates the
** parameter (ADAM_STEP's optional low output), so the next region finds it
** current. The shadow is current while
**   low_version == the storage's version   every write through the dispatcher
**                                          counts; one that writes the shadow too
**                                          (the step) carries it along
**   low_epoch == epoch                     captures and replays write without
**                                          the dispatcher: they advance epoch
** and a stale one is refreshed whole by one cast, the next time autocast asks.
** A storage is shadowed whole, so only parameters that are all of their
** storage, or views of a parameter arena (td_module_flatten_parameters), have
** one; memory that another framework may write (DLPack, td_from_foreign) never.
** TRIDENT_AUTOCAST_SHADOW=0 turns them off: autocast casts every region (the
** baseline, and 2 bytes a parameter less).
*/
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "trident/autograd.h"

static atomic_ulong epoch = 1; /* a shadow with low_epoch 0 is stale */
static atomic_int capturing;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* s->low's replacement against its readers */
static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static bool off; /* TRIDENT_AUTOCAST_SHADOW=0 */

static void read_env(void) {
    const char *e = getenv("TRIDENT_AUTOCAST_SHADOW");
    off = e && !strcmp(e, "0");
}

static bool current(const td_storage *s, td_dtype dt) {
    return s->low && s->low->dtype == dt && s->low_epoch == atomic_load(&epoch) &&
           s->low_version == atomic_load(&s->version);
}

static bool shadowable(const td_tensor *t, td_dtype dt) {
    const td_storage *s = t->storage;
    pthread_once(&env_once, read_env);
    if (off || t->dtype != TD_F32 || (dt != TD_F16 && dt != TD_BF16) || !t->requires_grad || t->grad_fn ||
        (s->flags & TD__STORAGE_SHARED) || atomic_load(&capturing) || !td_is_contiguous(t))
        return false;
    return (s->flags & TD__STORAGE_ARENA) || (t->offset == 0 && (size_t)td_numel(t) * sizeof(float) == s->nbytes);
}

/* s's floats cast to dt into its shadow, which is then current: a new one where there is none, or where the
** old one has another dtype or views elsewhere (a graph saved before the write keeps the values it read, as
** torch's per-region casts would) */
static td_status refresh(td_storage *s, td_dtype dt) {
    int64_t n = (int64_t)(s->nbytes / sizeof(float)), one = 1;
    if (s->low && (s->low->dtype != dt || atomic_load(&s->low->storage->refcount) > 1)) {
        td_release(s->low);
        s->low = NULL;
    }
    if (!s->low && !(s->low = td__alloc(1, &n, dt, s->device))) return td_last_status();
    atomic_fetch_add(&s->refcount, 1);
    td_tensor *all = td__tensor_over(s, 1, &n, &one, TD_F32);
    if (!all) return td_last_status();
    td_status st = td__dispatch(TD_OP_COPY, 1, &all, NULL, 1, &s->low, NULL);
    td_release(all);
    if (st != TD_OK) return st;
    s->low_version = atomic_load(&s->version);
    s->low_epoch = atomic_load(&epoch);
    return TD_OK;
}

bool td__shadow_cast(td_tensor *t, td_dtype dt, td_tensor **out) {
    if (!shadowable(t, dt)) return false;
    td_storage *s = t->storage;
    pthread_mutex_lock(&lock);
    td_status st = current(s, dt) ? TD_OK : refresh(s, dt);
    td_tensor *c = st == TD_OK ? td_keep(td__make_view(s->low, t->ndim, t->shape, t->strides, t->offset)) : NULL;
    pthread_mutex_unlock(&lock);
    if (c && td_grad_enabled() && td__record_hook && td__record_hook(TD_OP_COPY, 1, &t, 1, &c, NULL) != TD_OK) {
        td_release(c);
        c = NULL;
    }
    *out = c;
    return true;
}

td_tensor *td__shadow_view(td_tensor *param) {
    td_storage *s = param->storage;
    if (param->dtype != TD_F32 || !s->low || atomic_load(&capturing)) return NULL;
    pthread_mutex_lock(&lock);
    td_tensor *v = current(s, s->low->dtype)
                       ? td_keep(td__make_view(s->low, param->ndim, param->shape, param->strides, param->offset))
                       : NULL;
    pthread_mutex_unlock(&lock);
    return v;
}

void td__storage_written(int n, td_tensor *const *out) {
    for (int i = 0; i < n; i++) {
        if (!out[i]) continue;
        td_storage *s = out[i]->storage;
        bool carried = false; /* the shadow written by the same op, and current before it */
        for (int j = 0; s->low && j < n && !carried; j++) carried = out[j] && out[j]->storage == s->low->storage;
        carried = carried && current(s, s->low->dtype);
        unsigned long v = atomic_fetch_add(&s->version, 1) + 1;
        if (carried) s->low_version = v;
    }
}

void td__shadow_drop(const td_tensor *t) { t->storage->low_epoch = 0; }

void td__shadow_forget_all(void) { atomic_fetch_add(&epoch, 1); }

void td__shadow_capturing(bool begin) {
    int n = atomic_load(&capturing);
    while ((begin || n > 0) && !atomic_compare_exchange_weak(&capturing, &n, begin ? n + 1 : n - 1)) continue;
    td__shadow_forget_all();
}
