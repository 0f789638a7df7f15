/*
** optim internals.
** defines: struct td_optimizer, the per-algorithm table, per-parameter state.
*/
#ifndef TRIDENT_OPTIM_INTERNAL_H
#define TRIDENT_OPTIM_INTERNAL_H

#include "nn/nn_internal.h"
#include "trident/optim.h"

#define TD_OPTIM_SLOTS 3

/* Per-parameter state: the step counter, up to three state tensors and, with
** master_weights for a half-precision parameter, its float32 master copy (the
** state tensors are then float32 too). */
typedef struct td_param_state {
    td_tensor *param; /* retained */
    int group;
    int64_t step;
    td_tensor *slot[TD_OPTIM_SLOTS]; /* +1, NULL until the first step or when unused */
    td_tensor *step_t; /* capturable Adam: the steps done, f32 0-d on the parameter's device (exact to 2^24); +1 */
    td_tensor *lr_t;   /* capturable: the group's device lr for this parameter (device_lr.c); borrowed */
    td_tensor *master; /* master_weights: float32 copy of a half parameter; +1, NULL until the first step */
} td_param_state;

/* One algorithm: its name, state slot names (as in PyTorch's state) and update. */
typedef struct td_optim_algo {
    const char *name;
    const char *slot_names[TD_OPTIM_SLOTS];
    /* Which slots options o needs. */
    bool (*uses_slot)(const td_optim_options *o, int slot);
    /* Check options, naming the algorithm; TD_OK or TD_ERR_MISUSE. */
    td_status (*validate)(const td_optim_options *o);
    /* One fused update of ps with gradient g (contiguous); slots exist. */
    td_status (*update)(const td_optim_options *o, td_param_state *ps, td_tensor *g, bool first_step);
} td_optim_algo;

/* Defines the algorithm td_optim_<id>, named label, with its slot test uses, <fns>_validate and <fns>_update, and
** the slot names that follow. */
#define TD_OPTIM_ALGO(id, label, uses, fns, ...)                                                                       \
    const td_optim_algo td_optim_##id = {.name = label,                                                                \
                                         .slot_names = {__VA_ARGS__},                                                  \
                                         .uses_slot = uses,                                                            \
                                         .validate = fns##_validate,                                                   \
                                         .update = fns##_update}

/* A capturable group's lr in device memory: one 0-d tensor per (group,
** device, dtype), f64 for f64 parameters, else f32 (device_lr.c). */
typedef struct td_device_lr {
    int group;
    td_tensor *t; /* +1 */
} td_device_lr;

struct td_optimizer {
    const td_optim_algo *algo;
    td_optim_options *groups;
    int n_groups;
    td_param_state *p;
    int n, cap;
    td_device_lr *lrs; /* capturable groups' device lrs */
    int n_lrs;
};

extern const td_optim_algo td_optim_sgd, td_optim_adam, td_optim_adamw, td_optim_rmsprop;

td_optimizer *td__optimizer_new(const td_optim_algo *algo, int n, td_tensor *const *params,
                                const td_optim_options *opt);

/* The flat step (flat.c). td__flat_run_end: the end (exclusive) of the run of
** parameters from i (which has a gradient) that one update can take, i + 1
** when none longer. td__flat_prepare: the run's state tensors made views of
** flat state arenas (before the batch). td__flat_update: the run's steps
** advanced and its one update issued; first as for the algorithm's update. */
int td__flat_run_end(const td_optimizer *o, int i);
td_status td__flat_prepare(td_optimizer *o, int i, int j);
td_status td__flat_update(td_optimizer *o, int i, int j, bool first);

/* The device lr (device_lr.c). td__device_lr_bind: ps->lr_t set to the
** lr of ps's group for a parameter (or master copy) like t, made the first
** time with the group's lr. td__device_lr_set: group g's device lrs given its
** lr, each by a fill op in place, ordered on its device's stream (no host
** wait), so a captured step replayed afterwards reads it. td__device_lr_free:
** released. */
td_status td__device_lr_bind(td_optimizer *o, td_param_state *ps, const td_tensor *t);
td_status td__device_lr_set(td_optimizer *o, int g);
void td__device_lr_free(td_optimizer *o);

#endif /* TRIDENT_OPTIM_INTERNAL_H */
