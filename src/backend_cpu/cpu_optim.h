/*
** Per-element math of the fused optimizer updates, shared by the scalar
** kernels (cpu_ops_optim.c) and the AVX2 Adam (x86/optim_avx2.c).
** defines: cpu_adam_k_float/double, cpu_adam_consts_*, cpu_adam_elem_*,
**          cpu_adam_f32_avx2.
**
** Adam/AdamW, as torch.optim.Adam/AdamW (foreach=False), step t >= 1:
**   g = maximize ? -grad : grad
**   g += wd * p                          (Adam's L2 penalty, !decoupled)
**   p *= 1 - lr * wd                     (AdamW, decoupled)
**   m = b1 * m + (1 - b1) * g
**   v = b2 * v + (1 - b2) * g * g
**   vmax = max(vmax, v)                  (amsgrad; then v below means vmax)
**   p += -(lr / (1 - b1^t)) * (m / (sqrt(v) / sqrt(1 - b2^t) + eps))
** The scalar factors are computed in double and rounded once to the compute
** type (float for f32/f16/bf16, double for f64), as PyTorch passes them.
*/
#ifndef TRIDENT_BACKEND_CPU_OPTIM_H
#define TRIDENT_BACKEND_CPU_OPTIM_H

#include "cpu.h"

#define CPU_ADAM_(T, SQRT)                                                                                             \
    typedef struct cpu_adam_k_##T {                                                                                    \
        T b1, one_b1, b2, one_b2, wd, decay, neg_step, bc2_sqrt, eps;                                                  \
        bool l2, decoupled, amsgrad, maximize;                                                                         \
    } cpu_adam_k_##T;                                                                                                  \
    static inline cpu_adam_k_##T cpu_adam_consts_##T(const td_op *op) {                                                \
        double b1 = op->p.adam.beta1, b2 = op->p.adam.beta2, lr = op->p.adam.lr, wd = op->p.adam.weight_decay;         \
        double t = (double)op->p.adam.step;                                                                            \
        return (cpu_adam_k_##T){.b1 = (T)b1,                                                                           \
                                .one_b1 = (T)(1 - b1),                                                                 \
                                .b2 = (T)b2,                                                                           \
                                .one_b2 = (T)(1 - b2),                                                                 \
                                .wd = (T)wd,                                                                           \
                                .decay = (T)(1 - lr * wd),                                                             \
                                .neg_step = (T)(-lr / (1 - pow(b1, t))),                                               \
                                .bc2_sqrt = (T)sqrt(1 - pow(b2, t)),                                                   \
                                .eps = (T)op->p.adam.eps,                                                              \
                                .l2 = wd != 0 && !op->p.adam.decoupled,                                                \
                                .decoupled = op->p.adam.decoupled,                                                     \
                                .amsgrad = op->p.adam.amsgrad,                                                         \
                                .maximize = op->p.adam.maximize};                                                      \
    }                                                                                                                  \
    /* returns the new p; updates *m, *v and (amsgrad) *vmax */                                                        \
    static inline T cpu_adam_elem_##T(T p, T g, T *m, T *v, T *vmax, const cpu_adam_k_##T *k) {                        \
        if (k->maximize) g = -g;                                                                                       \
        if (k->l2) g += k->wd * p;                                                                                     \
        if (k->decoupled) p *= k->decay;                                                                               \
        *m = *m * k->b1 + k->one_b1 * g;                                                                               \
        *v = *v * k->b2 + k->one_b2 * g * g;                                                                           \
        T vv = *v;                                                                                                     \
        if (k->amsgrad) vv = *vmax = (*vmax != *vmax || *vmax > vv) ? *vmax : vv; /* NaN propagates */                 \
        return p + k->neg_step * (*m / (SQRT(vv) / k->bc2_sqrt + k->eps));                                             \
    }
CPU_ADAM_(float, sqrtf)
CPU_ADAM_(double, sqrt)
#undef CPU_ADAM_

/* Adam on f32 elements [0, n) with AVX2 (x86/optim_avx2.c); vmax may be NULL
** unless k->amsgrad. The caller checks that the CPU has AVX2. */
void cpu_adam_f32_avx2(int64_t n, float *p, const float *g, float *m, float *v, float *vmax, const cpu_adam_k_float *k);

#endif /* TRIDENT_BACKEND_CPU_OPTIM_H */
