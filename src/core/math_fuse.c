/*
** TRIDENT_MATH_FUSE, read once, and the compile-once blocks of the call sites
** that replace elementwise chains of table ops (math_fuse.h).
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

td_status td__math_once_run(td__math_once *o, const td_math_binding *bindings, int n, td_tensor **outputs) {
    pthread_mutex_lock(&o->lock);
    if (o->status == 0) o->status = td_math_compile(o->src, NULL, &o->block) == TD_OK ? 1 : -1;
    td_status st = o->status == 1 ? td_math_run(o->block, bindings, n, outputs)
                                  : td_error_set(TD_ERR_COMPILE, "math fuse: the block `%s` does not compile", o->src);
    pthread_mutex_unlock(&o->lock);
    return st;
}
