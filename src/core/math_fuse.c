/*
** TRIDENT_MATH_FUSE, read once, and the compile-once blocks of the call sites
** that replace elementwise chains of table ops (math_fuse.h), run through
** the hook src/math/math_once.c installs.
*/
#include "core/math_fuse.h"

#include <stdlib.h>
#include <string.h>

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static int env_value = -1; /* -1 unset, 0 off, 1 on */

static void env_read(void) {
    const char *e = getenv("TRIDENT_MATH_FUSE");
    if (e && *e) env_value = strcmp(e, "0") != 0;
}

bool td__math_fuse(bool dflt) {
    pthread_once(&env_once, env_read);
    return env_value < 0 ? dflt : env_value == 1;
}

td__math_once_fn td__math_once_hook;

td_status td__math_once_run(td__math_once *o, const td_math_binding *bindings, int n, td_tensor **outputs) {
    if (!td__math_once_hook) return td_error_set(TD_ERR_UNSUPPORTED, "math fuse: no math blocks in this library");
    pthread_mutex_lock(&o->lock);
    td_status st = td__math_once_hook(o, bindings, n, outputs);
    pthread_mutex_unlock(&o->lock);
    return st;
}
