/*
** w2_profile: one W2 training step (WORKLOADS.md: conv 1->32, relu, pool, conv
** 32->64, relu, pool, linear 3136->128, relu, linear 128->10, cross-entropy,
** Adam) run op by op through the CPU backend, with the wall time of each op
** kind summed over STEPS steps after WARMUP ones. The backward calls are the
** ones autograd's formulas make (relu: where(y > 0, dy, 0); conv bias: sum
** over N, H, W; linear: two matmuls and a sum).
** Prints one "PROF kind ms_per_step cpu_ms_per_step" line per op kind, "PROF step total" (wall
** time) and "PROF step_cpu" (the process's CPU time per step, all threads: on
** one thread it is the figure a loaded machine disturbs least).
**
** Usage: build/bench/w2_profile [steps]
*/
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../bench_clock.h"
#include "core/internal.h"
#include "trident/trident.h"

enum { WARMUP = 3, MAX_KINDS = 32 };

static const char *kind_name[MAX_KINDS];
static double kind_s[MAX_KINDS], kind_cpu_s[MAX_KINDS];
static int n_kinds;

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void charge(const char *name, double s, double cpu) {
    int k = 0;
    while (k < n_kinds && kind_name[k] != name) k++;
    if (k == n_kinds) kind_name[n_kinds++] = name;
    kind_s[k] += s, kind_cpu_s[k] += cpu;
}

/* Evaluate expr, charge its time to name, and fail loudly on NULL. */
#define TIMED(name, expr)                                                                                              \
    ({                                                                                                                 \
        double t0_ = bench_now_s(), c0_ = cpu_s();                                                                     \
        __typeof__(expr) r_ = (expr);                                                                                  \
        charge(name, bench_now_s() - t0_, cpu_s() - c0_);                                                              \
        if (!r_) {                                                                                                     \
            fprintf(stderr, "%s failed: %s\n", name, td_last_error());                                                 \
            exit(1);                                                                                                   \
        }                                                                                                              \
        r_;                                                                                                            \
    })
#define TIMED_ST(name, expr)                                                                                           \
    do {                                                                                                               \
        double t0_ = bench_now_s(), c0_ = cpu_s();                                                                     \
        td_status s_ = (expr);                                                                                         \
        charge(name, bench_now_s() - t0_, cpu_s() - c0_);                                                              \
        if (s_ != TD_OK) {                                                                                             \
            fprintf(stderr, "%s failed: %s\n", name, td_last_error());                                                 \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

typedef struct param {
    td_tensor *p, *m, *v;
} param;

static param param_new(int ndim, const int64_t *shape, uint64_t seed, double scale) {
    param q;
    q.p = td_keep(td_mul_scalar(td_sub_scalar(td_rand(ndim, shape, seed, 0, TD_F32, TD_CPU), 0.5), scale));
    q.m = td_keep(td_zeros(ndim, shape, TD_F32, TD_CPU));
    q.v = td_keep(td_zeros(ndim, shape, TD_F32, TD_CPU));
    return q;
}

static td_tensor *relu_backward(td_tensor *y, td_tensor *dy, td_tensor *zero) {
    td_tensor *mask = TIMED("relu_bw_gt", td_gt(y, zero));
    return TIMED("relu_bw_where", td_where(mask, dy, zero));
}

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 10;
    const int64_t B = 128;
    const int s1[2] = {1, 1}, pad1[2] = {1, 1}, k2[2] = {2, 2};
    param w1 = param_new(4, (int64_t[]){32, 1, 3, 3}, 1, 0.6), b1 = param_new(1, (int64_t[]){32}, 2, 0.6);
    param w2 = param_new(4, (int64_t[]){64, 32, 3, 3}, 3, 0.1), b2 = param_new(1, (int64_t[]){64}, 4, 0.1);
    param w3 = param_new(2, (int64_t[]){128, 3136}, 5, 0.03), b3 = param_new(1, (int64_t[]){128}, 6, 0.03);
    param w4 = param_new(2, (int64_t[]){10, 128}, 7, 0.17), b4 = param_new(1, (int64_t[]){10}, 8, 0.17);
    param *ps[8] = {&w1, &b1, &w2, &b2, &w3, &b3, &w4, &b4};
    td_tensor *x = td_keep(td_rand(4, (int64_t[]){B, 1, 28, 28}, 9, 0, TD_F32, TD_CPU));
    int64_t tgt[128];
    for (int i = 0; i < B; i++) tgt[i] = (i * 7) % 10;
    td_tensor *target = td_keep(td_from_data(tgt, 1, (int64_t[]){B}, TD_I64, TD_CPU));
    td_tensor *zero = td_keep(td_scalar(0, TD_F32, TD_CPU));
    double total = 0, total_cpu = 0;
    for (int it = 0; it < WARMUP + steps; it++) {
        if (it == WARMUP) {
            for (int k = 0; k < n_kinds; k++) kind_s[k] = kind_cpu_s[k] = 0;
        }
        double t0 = bench_now_s(), c0 = cpu_s();
        td_scope_begin();
        /* forward */
        td_tensor *c1 = TIMED("conv_fwd", td_conv2d(x, w1.p, b1.p, s1, pad1, s1, 1));
        td_tensor *r1 = TIMED("relu", td_relu(c1)), *i1, *i2;
        td_tensor *p1 = TIMED("pool_fwd", td_max_pool2d(r1, k2, k2, (int[]){0, 0}, &i1));
        td_tensor *c2 = TIMED("conv_fwd", td_conv2d(p1, w2.p, b2.p, s1, pad1, s1, 1));
        td_tensor *r2 = TIMED("relu", td_relu(c2));
        td_tensor *p2 = TIMED("pool_fwd", td_max_pool2d(r2, k2, k2, (int[]){0, 0}, &i2));
        td_tensor *f = TIMED("reshape", td_reshape(p2, 2, (int64_t[]){B, 3136}));
        td_tensor *h = TIMED("linear", td_linear(f, w3.p, b3.p));
        td_tensor *r3 = TIMED("relu", td_relu(h));
        td_tensor *logits = TIMED("linear", td_linear(r3, w4.p, b4.p));
        td_tensor *loss = TIMED("xent_fwd", td__cross_entropy(logits, target, NULL, -100, 0, TD_REDUCTION_MEAN));
        /* backward */
        td_tensor *one = td_full(0, NULL, 1, TD_F32, TD_CPU);
        td_tensor *dlog =
            TIMED("xent_bw", td__cross_entropy_backward(one, logits, target, NULL, -100, 0, TD_REDUCTION_MEAN));
        td_tensor *dw4 = TIMED("matmul_bw", td_matmul(td_transpose(dlog, 0, 1), r3));
        td_tensor *db4 = TIMED("bias_sum", td_sum(dlog, 1, (int[]){0}, false));
        td_tensor *dr3 = TIMED("matmul_bw", td_matmul(dlog, w4.p));
        td_tensor *dh = relu_backward(r3, dr3, zero);
        td_tensor *dw3 = TIMED("matmul_bw", td_matmul(td_transpose(dh, 0, 1), f));
        td_tensor *db3 = TIMED("bias_sum", td_sum(dh, 1, (int[]){0}, false));
        td_tensor *df = TIMED("matmul_bw", td_matmul(dh, w3.p));
        td_tensor *dp2 = td_reshape(df, 4, (int64_t[]){B, 64, 7, 7});
        td_tensor *dr2 = TIMED("pool_bw", td__max_pool2d_backward(dp2, i2, td_shape(r2)));
        td_tensor *dc2 = relu_backward(r2, dr2, zero);
        td_tensor *dw2 = TIMED("conv_bw_weight", td__conv2d_backward_weight(dc2, p1, td_shape(w2.p), s1, pad1, s1, 1));
        td_tensor *db2 = TIMED("bias_sum", td_sum(dc2, 3, (int[]){0, 2, 3}, false));
        td_tensor *dp1 = TIMED("conv_bw_input", td__conv2d_backward_input(dc2, w2.p, td_shape(p1), s1, pad1, s1, 1));
        td_tensor *dr1 = TIMED("pool_bw", td__max_pool2d_backward(dp1, i1, td_shape(r1)));
        td_tensor *dc1 = relu_backward(r1, dr1, zero);
        td_tensor *dw1 = TIMED("conv_bw_weight", td__conv2d_backward_weight(dc1, x, td_shape(w1.p), s1, pad1, s1, 1));
        td_tensor *db1 = TIMED("bias_sum", td_sum(dc1, 3, (int[]){0, 2, 3}, false));
        /* Adam */
        td_tensor *grads[8] = {dw1, db1, dw2, db2, dw3, db3, dw4, db4};
        for (int k = 0; k < 8; k++)
            TIMED_ST("adam", td_adam_update(ps[k]->p, grads[k], ps[k]->m, ps[k]->v, NULL, 1e-3, 0.9, 0.999, 1e-8, 0,
                                            it + 1, false, false, false));
        (void)td_item(loss);
        td_scope_end();
        if (it >= WARMUP) total += bench_now_s() - t0, total_cpu += cpu_s() - c0;
    }
    double accounted = 0;
    for (int k = 0; k < n_kinds; k++) {
        printf("PROF %-15s %8.3f ms/step %8.3f cpu\n", kind_name[k], 1e3 * kind_s[k] / steps,
               1e3 * kind_cpu_s[k] / steps);
        accounted += kind_s[k];
    }
    printf("PROF %-15s %8.3f ms/step\n", "other", 1e3 * (total - accounted) / steps);
    printf("PROF %-15s %8.3f ms/step  (epoch of 468 steps: %.2f s)\n", "step", 1e3 * total / steps,
           468 * total / steps);
    printf("PROF %-15s %8.3f ms/step  (process CPU time)\n", "step_cpu", 1e3 * total_cpu / steps);
    return 0;
}
