/*
** Math blocks in place of elementwise chains of table ops (issue 21): the
** switch TRIDENT_MATH_FUSE=0 keeps every hand-written path, =1 takes every
** fused block; unset, each call site takes its measured default. Read once
** per process. And a block compiled once per process for its call site.
*/
#ifndef TRIDENT_CORE_MATH_FUSE_H
#define TRIDENT_CORE_MATH_FUSE_H

#include <pthread.h>
#include <stdbool.h>

#include "trident/math.h"

/* GETTER. Whether a call site whose measured default is dflt takes its fused
** block: TRIDENT_MATH_FUSE if it is set (0 or 1), else dflt. Thread-safe. */
TD_API bool td__math_fuse(bool dflt);

/* A call site's block: static td__math_once o = TD_MATH_ONCE("src"); */
typedef struct td__math_once {
    const char *src;
    pthread_mutex_t lock; /* a block runs on one thread at a time */
    td_math_block *block;
    int status; /* 0: not compiled yet, 1: compiled, -1: failed */
} td__math_once;
#define TD_MATH_ONCE(s)                                                                                                \
    { .src = (s), .lock = PTHREAD_MUTEX_INITIALIZER }

/* METHOD. td_math_run of o's block (compiled at the first call) with
** bindings[0..n) into outputs (OUT, td_math_run's). Returns td_math_run's
** status, or TD_ERR_COMPILE if src does not compile. Thread-safe. */
TD_API td_status td__math_once_run(td__math_once *o, const td_math_binding *bindings, int n, td_tensor **outputs);

/* The compile-and-run of td__math_once_run, which src/math installs by a
** constructor when libtrident loads (core sits below math: it calls math
** blocks only through this hook). Called with o's lock held. */
typedef td_status (*td__math_once_fn)(td__math_once *o, const td_math_binding *bindings, int n, td_tensor **outputs);
extern td__math_once_fn td__math_once_hook;

#endif
