/*
** Fused bias + GELU (tanh form) for the CPU: the C kernels of the bias_gelu
** custom op (custom_ops.c), and a file `trident kernel` runs by itself
** (its entry is the file's stem; the backward's is the entry + "_backward").
**   x, y, dy, du are [rows, cols] (contiguous, c->dtype: float32 or float64), b is [cols]
**   forward:  u = x[r, c] + b[c],  y = 0.5 * u * (1 + t),  t = tanh(k * (u + 0.044715 * u^3)),  k = sqrt(2 / pi)
**   backward: du = dy * (0.5 * (1 + t) + 0.5 * u * (1 - t^2) * k * (1 + 3 * 0.044715 * u^2))
** Rows are spread over the CPU backend's threads with td_parallel_for.
*/
#include <math.h>

#include <trident/trident.h>

typedef struct gelu_job {
    const td_custom_call *c;
    const void *const *in;
    void *const *out;
    int backward;
} gelu_job;

#define GELU_K 0.7978845608028654
#define GELU_A 0.044715

/* gelu_rows_<T>: the rows [begin, end) in type T, with TANH its tanh (constants rounded to T) */
#define GELU_ROWS(T, TANH)                                                                                             \
    static void gelu_rows_##T(const gelu_job *j, int64_t begin, int64_t end) {                                         \
        const int64_t cols = j->c->args.cols;                                                                          \
        const T *x = j->in[0], *b = j->in[1], *dy = j->backward ? j->in[2] : NULL;                                     \
        T *y = j->out[0];                                                                                              \
        const T k = (T)GELU_K, a = (T)GELU_A, half = (T)0.5;                                                           \
        for (int64_t r = begin; r < end; r++)                                                                          \
            for (int64_t c = 0, i = r * cols; c < cols; c++, i++) {                                                    \
                T u = x[i] + b[c];                                                                                     \
                T t = TANH(k * (u + a * u * u * u));                                                                   \
                y[i] = !dy ? half * u * (1 + t)                                                                        \
                           : dy[i] * (half * (1 + t) + half * u * (1 - t * t) * k * (1 + 3 * a * u * u));              \
            }                                                                                                          \
    }
GELU_ROWS(float, tanhf)
GELU_ROWS(double, tanh)

static void gelu_rows(void *user, int64_t begin, int64_t end) {
    const gelu_job *j = user;
    if (j->c->dtype == TD_F64)
        gelu_rows_double(j, begin, end);
    else
        gelu_rows_float(j, begin, end);
}

td_status bias_gelu_cpu(const td_custom_call *c, const void *const *in, void *const *out) {
    gelu_job j = {c, in, out, 0};
    td_parallel_for(c->args.rows, 16 * (int64_t)c->args.cols, gelu_rows, &j);
    return TD_OK;
}

td_status bias_gelu_cpu_backward(const td_custom_call *c, const void *const *in, void *const *out) {
    gelu_job j = {c, in, out, 1};
    td_parallel_for(c->args.rows, 24 * (int64_t)c->args.cols, gelu_rows, &j);
    return TD_OK;
}
