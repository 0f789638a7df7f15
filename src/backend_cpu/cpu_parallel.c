/*
** td_parallel_for (include/trident/kernel.h): the CPU backend's OpenMP threads
** for user code, such as the C kernels of custom ops.
*/
#include "cpu.h"
#include "trident/kernel.h"

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
