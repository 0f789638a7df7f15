/*
** trident train's learning-rate schedule: the lr of step k (0-based, the
** lr that step's update uses) in closed form, as torch's
**   SequentialLR([LinearLR(1 / (W + 1), 1, W), main], milestones=[W])
** steps it once per training step (W = warmup steps, D = total - W):
**   k < W      base * (f + (1 - f) k / W),  f = 1 / (W + 1)   (= base (k + 1) / (W + 1))
**   e = k - W:
**   constant   base
**   cosine     min + (base - min) (1 + cos(pi e / D)) / 2     CosineAnnealingLR(D, min)
**   linear     base * (1 + (min / base - 1) min(e, D) / D)    LinearLR(1, min / base, D)
**   step       base * gamma^floor(e / step_size)              StepLR(step_size, gamma)
** With W = 0 the main schedule alone. The lr depends only on k and these
** numbers, which the checkpoint keeps (model.lr_schedule), so a resumed run
** uses exactly the lrs of an uninterrupted one.
*/
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "train.h"

static const char *const kind_names[] = {"constant", "cosine", "linear", "step"};

bool train_schedule_kind_parse(const char *s, train_lr_kind *kind) {
    for (int k = 0; k < 4; k++)
        if (!strcmp(s, kind_names[k])) return *kind = (train_lr_kind)k, true;
    return false;
}

double train_schedule_lr(const train_schedule *s, int64_t k) {
    double base = s->base;
    if (k < s->warmup) {
        double f = 1.0 / (double)(s->warmup + 1);
        return base * (f + (1 - f) * (double)k / (double)s->warmup);
    }
    int64_t e = k - s->warmup, d = s->total - s->warmup > 0 ? s->total - s->warmup : 1;
    switch (s->kind) {
    case TRAIN_LR_DEFAULT: /* resolved before the first step */
    case TRAIN_LR_CONSTANT: return base;
    case TRAIN_LR_COSINE: return s->min_lr + (base - s->min_lr) * (1 + cos(M_PI * (double)e / (double)d)) / 2;
    case TRAIN_LR_LINEAR: return base * (1 + (s->min_lr / base - 1) * (double)(e < d ? e : d) / (double)d);
    case TRAIN_LR_STEP: return base * pow(s->gamma, (double)(e / s->step_size));
    }
    return base;
}

const char *train_schedule_str(const train_schedule *s, bool exact, char *buf, size_t n) {
    const char *fmt = exact ? "%s warmup=%" PRId64 " total=%" PRId64 " lr=%.17g min_lr=%.17g step_size=%" PRId64
                              " gamma=%.17g"
                            : "%s warmup=%" PRId64 " total=%" PRId64 " lr=%g min_lr=%g step_size=%" PRId64 " gamma=%g";
    snprintf(buf, n, fmt, kind_names[s->kind], s->warmup, s->total, s->base, s->min_lr, s->step_size, s->gamma);
    return buf;
}

int train_schedule_parse(const char *str, const char *path, train_schedule *s) {
    char name[16];
    train_schedule t = {0};
    int used = 0;
    train_lr_kind kind;
    int got =
        sscanf(str, "%15s warmup=%" SCNd64 " total=%" SCNd64 " lr=%lf min_lr=%lf step_size=%" SCNd64 " gamma=%lf%n",
               name, &t.warmup, &t.total, &t.base, &t.min_lr, &t.step_size, &t.gamma, &used);
    if (got != 7 || str[used] || !train_schedule_kind_parse(name, &kind) || t.warmup < 0 ||
        t.warmup > TRAIN_COUNT_MAX || t.total < 1 || t.total > TRAIN_COUNT_MAX || !(t.base > 0) || !isfinite(t.base) ||
        !(t.min_lr >= 0) || t.min_lr > t.base || t.step_size < 1 || !(t.gamma > 0) || !isfinite(t.gamma))
        return train_fail("checkpoint %s: metadata model.lr_schedule = %s is not a schedule trident train wrote", path,
                          TD_QUOTE(str));
    t.kind = kind;
    *s = t;
    return 0;
}

int train_schedule_resolve(train_schedule *s, int64_t per_epoch, int64_t epochs, bool gpt) {
    if (s->total) return 0; /* resumed: the checkpoint's */
    int64_t total = s->total = per_epoch * epochs;
    if (s->kind == TRAIN_LR_DEFAULT) s->kind = gpt ? TRAIN_LR_COSINE : TRAIN_LR_CONSTANT;
    if (s->warmup < 0) s->warmup = gpt && s->kind != TRAIN_LR_CONSTANT ? total / 20 : 0;
    if (s->min_lr < 0) s->min_lr = gpt ? s->base / 10 : 0;
    if (s->step_size < 1) s->step_size = per_epoch;
    if (s->min_lr > s->base) return train_fail("--min-lr %g is above the learning rate %g", s->min_lr, s->base);
    if (s->warmup >= total && s->kind != TRAIN_LR_CONSTANT)
        return train_fail("--warmup-steps %" PRId64 " leaves none of the run's %" PRId64 " steps to decay over",
                          s->warmup, total);
    return 0;
}
