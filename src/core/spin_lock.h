/*
** A spin lock for critical sections of a few loads and stores on hot paths
** (tensor and storage headers, the caching allocator's free lists), where an
** uncontended pthread mutex costs more than the work it guards. A waiter
** yields the CPU, so a holder that is descheduled, or that does rare longer
** work (emptying a cache), is not starved.
*/
#ifndef TRIDENT_CORE_SPIN_LOCK_H
#define TRIDENT_CORE_SPIN_LOCK_H

#include <sched.h>
#include <stdatomic.h>

typedef atomic_flag td__spin_lock; /* initialize with ATOMIC_FLAG_INIT, or td__spin_init */

static inline void td__spin_init(td__spin_lock *l) { atomic_flag_clear_explicit(l, memory_order_relaxed); }

static inline void td__spin_acquire(td__spin_lock *l) {
    while (atomic_flag_test_and_set_explicit(l, memory_order_acquire)) sched_yield();
}

static inline void td__spin_release(td__spin_lock *l) { atomic_flag_clear_explicit(l, memory_order_release); }

#endif /* TRIDENT_CORE_SPIN_LOCK_H */
