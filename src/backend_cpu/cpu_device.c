/*
** The CPU backend's device: its facts (device_info: the CPU model, OpenBLAS,
** the OpenMP threads) and the thread counts the kernels and td_parallel_for
** (include/trident/kernel.h) use.
*/
#include <stdio.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <cblas.h>

#include "cpu.h"
#include "cpu_gemm.h"
#include "trident/kernel.h"

/* Whether libtrident-ompenv chose the passive OpenMP wait policy (src/omp_env/omp_env.c). */
#ifdef TRIDENT_OMPENV
bool td__omp_env_passive(void);
static bool omp_passive_by_library(void) { return td__omp_env_passive(); }
#else
static bool omp_passive_by_library(void) { return false; }
#endif

/* below ~32k ops a thread (or a piece of work) costs more than it gives */
#define CPU_OPS_PER_PIECE (1 << 15)

int64_t cpu_splits_for(int64_t n, int64_t cost_per_unit, int64_t most) {
    int64_t t = n * cost_per_unit / CPU_OPS_PER_PIECE;
    return t < 1 ? 1 : t > most ? most : t;
}

int cpu_threads_for(int64_t n, int64_t cost_per_unit) {
#ifdef _OPENMP
    return (int)cpu_splits_for(n, cost_per_unit, omp_get_max_threads());
#else
    (void)n, (void)cost_per_unit;
    return 1;
#endif
}

void td_parallel_for(int64_t n, int64_t cost_per_item, void (*fn)(void *user, int64_t begin, int64_t end), void *user) {
    if (n <= 0 || !fn) return;
    int nt = cpu_threads_for(n, cost_per_item > 0 ? cost_per_item : 1);
    if (nt <= 1) {
        fn(user, 0, n);
        return;
    }
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int t = 0; t < nt; t++) fn(user, n * t / nt, n * (t + 1) / nt);
}

int cpu_device_count(void) { return 1; }

td_status cpu_device_info(int dev, td_device_info *out) {
    (void)dev;
    memset(out, 0, sizeof *out);
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    snprintf(out->name, sizeof out->name, "cpu");
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!strncmp(line, "model name", 10) && colon) {
            snprintf(out->name, sizeof out->name, "%s", colon + 2);
            out->name[strcspn(out->name, "\n")] = 0;
            break;
        }
    }
    if (f) fclose(f);
    /* "OpenBLAS 0.3.26" (its config string's second word is the version) and the kernels it chose */
    char version[24] = "";
    sscanf(openblas_get_config(), "%*s %23s", version);
    snprintf(out->driver, sizeof out->driver, "OpenBLAS %s, %s kernels", version, openblas_get_corename());
#ifdef _OPENMP
    out->compute_units = omp_get_max_threads();
#else
    out->compute_units = 1;
#endif
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    out->subgroup_size = avx2 ? 8 : 1;
    out->fp16 = out->bf16 = false;
    out->unified_memory = true;
    out->timestamps = true;
    snprintf(out->features, sizeof out->features, "%s openmp=%d%s openblas; %s", avx2 ? "avx2 fma" : "scalar",
             out->compute_units, omp_passive_by_library() ? " omp_wait=passive" : "", cpu_gemm_note());
    return TD_OK;
}
