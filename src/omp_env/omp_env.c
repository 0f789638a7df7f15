/*
** libtrident-ompenv: idle OpenMP threads sleep by default in every program
** that links libtrident, not only in the trident tool.
**
** libgomp reads OMP_WAIT_POLICY and GOMP_SPINCOUNT once, in its constructor.
** By default its idle threads spin 300,000 times at every barrier before
** sleeping; a training step runs hundreds of small parallel regions, and on a
** machine whose cores are shared (other jobs, ctest -j, data loader threads) a
** spinning thread steals the core a working one needs: a W1 epoch took 5.7-6.8 s
** with spinning and 1.6 s with the passive policy on the 2 busy cores of the
** development machine (GOMP_SPINCOUNT=10000: 2.9-3.8 s).
**
** This library's constructor sets OMP_WAIT_POLICY=passive unless the program's
** environment chose a policy or a spin count, and it must run before libgomp's.
** libtrident therefore lists it after libgomp among its dependencies: the
** dynamic loader initializes independent dependencies in reverse order
** (glibc; tests/test_tensor.c's omp_wait_policy checks it). A program that
** links libgomp itself ahead of libtrident initializes libgomp first and
** keeps its own setting.
*/
#include <stdbool.h>
#include <stdlib.h>

static bool passive_set;

__attribute__((constructor)) static void omp_env_init(void) {
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    passive_set = setenv("OMP_WAIT_POLICY", "passive", 0) == 0;
}

/* Whether this library chose the passive policy (libtrident calls it, which
** also keeps the linker from dropping the dependency). */
__attribute__((visibility("default"))) bool td__omp_env_passive(void) { return passive_set; }
