/*
** The math side of core's compile-once call-site blocks (core/math_fuse.h):
** a constructor installs the hook through which core runs them, so core
** never calls up into src/math.
*/
#include "core/math_fuse.h"

/* compile o's block at its first call (status 1 compiled, -1 failed), then run it; o's lock is held */
static td_status once_run(td__math_once *o, const td_math_binding *bindings, int n, td_tensor **outputs) {
    if (o->status == 0) o->status = td_math_compile(o->src, NULL, &o->block) == TD_OK ? 1 : -1;
    return o->status == 1 ? td_math_run(o->block, bindings, n, outputs)
                          : td_error_set(TD_ERR_COMPILE, "math fuse: the block `%s` does not compile", o->src);
}

__attribute__((constructor)) static void install_hook(void) { td__math_once_hook = once_run; }
