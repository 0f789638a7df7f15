/*
** Fault injection, for the reliability tests (tests/test_faults.c):
**   TRIDENT_FAULT_ALLOC=N  the Nth buffer allocation through the core
**                          (tensor.c's storage_new) fails with TD_ERR_OOM;
**   TRIDENT_FAULT_WRITE=N  the Nth file write of the atomic writer
**                          (src/io/safetensors_write.c) fails as ENOSPC would.
** Counted from the first allocation (write) of the process; td__fault_*_set(n)
** restarts a count from the next one (0: off) and returns what was left of the
** last (0 once it fired). Each switch fires once.
*/
#include <pthread.h>
#include <stdlib.h>

#include "internal.h"

static atomic_llong alloc_left, write_left; /* countdowns; <= 0: off */
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static long long env_count(const char *name) {
    const char *s = getenv(name);
    char *end;
    long long n = s ? strtoll(s, &end, 10) : 0;
    return s && *s && !*end && n > 0 ? n : 0;
}

static void read_env(void) {
    atomic_store(&alloc_left, env_count("TRIDENT_FAULT_ALLOC"));
    atomic_store(&write_left, env_count("TRIDENT_FAULT_WRITE"));
}

long long td__fault_alloc_set(long long n) {
    pthread_once(&env_once, read_env);
    return atomic_exchange(&alloc_left, n > 0 ? n : 0);
}

long long td__fault_write_set(long long n) {
    pthread_once(&env_once, read_env);
    return atomic_exchange(&write_left, n > 0 ? n : 0);
}

/* Count one event against *left: true when it is the one to fail. */
static bool hit(atomic_llong *left) {
    pthread_once(&env_once, read_env);
    if (atomic_load_explicit(left, memory_order_relaxed) <= 0) return false;
    return atomic_fetch_sub(left, 1) == 1;
}

bool td__fault_alloc_hit(void) { return hit(&alloc_left); }
bool td__fault_write_hit(void) { return hit(&write_left); }
