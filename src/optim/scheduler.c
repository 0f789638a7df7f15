/*
** Learning-rate schedulers by closed form (torch.optim.lr_scheduler's
** _get_closed_form_lr), e = the epoch counter, base = each group's initial lr:
**   StepLR             base * gamma^floor(e / step_size)
**   ExponentialLR      base * gamma^e
**   CosineAnnealingLR  eta_min + (base - eta_min) (1 + cos(pi e / T_max)) / 2
**   LinearLR           base * (start + (end - start) min(e, total) / total)
*/
#include <math.h>
#include <stdlib.h>

#include "optim_internal.h"

typedef enum { SCHED_STEP, SCHED_EXP, SCHED_COSINE, SCHED_LINEAR } sched_kind;

struct td_scheduler {
    td_optimizer *opt;
    sched_kind kind;
    double gamma, eta_min, start, end;
    int64_t period; /* step_size, T_max or total_iters */
    int64_t epoch;
    double *base;
    int n_groups;
};

double td_scheduler_lr_at(const td_scheduler *s, int g, int64_t e) {
    if (!s || g < 0 || g >= s->n_groups) return TD_ERR(TD_ERR_INDEX, "scheduler_lr_at: group %d out of range", g), NAN;
    double b = s->base[g];
    switch (s->kind) {
    case SCHED_STEP: return b * pow(s->gamma, (double)(e / s->period));
    case SCHED_EXP: return b * pow(s->gamma, (double)e);
    case SCHED_COSINE: return s->eta_min + (b - s->eta_min) * (1 + cos(M_PI * (double)e / (double)s->period)) / 2;
    case SCHED_LINEAR: {
        double f = (double)(e < s->period ? e : s->period) / (double)s->period;
        return b * (s->start + (s->end - s->start) * f);
    }
    }
    return NAN;
}

void td_scheduler_set_epoch(td_scheduler *s, int64_t e) {
    if (!s) return;
    s->epoch = e;
    for (int g = 0; g < s->n_groups; g++) td_optimizer_set_group_lr(s->opt, g, td_scheduler_lr_at(s, g, e));
}

void td_scheduler_step(td_scheduler *s) {
    if (s) td_scheduler_set_epoch(s, s->epoch + 1);
}

int64_t td_scheduler_last_epoch(const td_scheduler *s) { return s ? s->epoch : -1; }

void td_scheduler_free(td_scheduler *s) {
    if (!s) return;
    free(s->base);
    free(s);
}

static td_scheduler *sched_new(td_optimizer *o, sched_kind kind, const char *name) {
    if (!o) TD_FAIL_NULL(TD_ERR_MISUSE, "%s: optimizer is NULL", name);
    td_scheduler *s = calloc(1, sizeof *s);
    double *base = malloc((size_t)o->n_groups * sizeof *base);
    if (!s || !base) {
        free(s);
        free(base);
        TD_FAIL_NULL(TD_ERR_OOM, "%s: out of host memory", name);
    }
    for (int g = 0; g < o->n_groups; g++) base[g] = o->groups[g].lr;
    *s = (td_scheduler){.opt = o, .kind = kind, .base = base, .n_groups = o->n_groups, .period = 1};
    return s;
}

static td_scheduler *sched_start(td_scheduler *s) {
    if (s) td_scheduler_set_epoch(s, 0);
    return s;
}

td_scheduler *td_step_lr_new(td_optimizer *o, int64_t step_size, double gamma) {
    if (step_size <= 0) TD_FAIL_NULL(TD_ERR_MISUSE, "StepLR: step_size %lld must be positive", (long long)step_size);
    td_scheduler *s = sched_new(o, SCHED_STEP, "StepLR");
    if (s) s->period = step_size, s->gamma = gamma;
    return sched_start(s);
}

td_scheduler *td_exponential_lr_new(td_optimizer *o, double gamma) {
    td_scheduler *s = sched_new(o, SCHED_EXP, "ExponentialLR");
    if (s) s->gamma = gamma;
    return sched_start(s);
}

td_scheduler *td_cosine_annealing_lr_new(td_optimizer *o, int64_t t_max, double eta_min) {
    if (t_max <= 0) TD_FAIL_NULL(TD_ERR_MISUSE, "CosineAnnealingLR: T_max %lld must be positive", (long long)t_max);
    td_scheduler *s = sched_new(o, SCHED_COSINE, "CosineAnnealingLR");
    if (s) s->period = t_max, s->eta_min = eta_min;
    return sched_start(s);
}

td_scheduler *td_linear_lr_new(td_optimizer *o, double start_factor, double end_factor, int64_t total_iters) {
    if (!(start_factor > 0 && start_factor <= 1) || !(end_factor >= 0 && end_factor <= 1) || total_iters <= 0)
        TD_FAIL_NULL(TD_ERR_MISUSE,
                     "LinearLR: start_factor %g must be in (0, 1], end_factor %g in [0, 1], total_iters %lld > 0",
                     start_factor, end_factor, (long long)total_iters);
    td_scheduler *s = sched_new(o, SCHED_LINEAR, "LinearLR");
    if (s) s->period = total_iters, s->start = start_factor, s->end = end_factor;
    return sched_start(s);
}
