/*
** nn.Dropout(p): in training y = x * keep / (1 - p) with keep ~ Bernoulli(1 - p)
** drawn from the default generator (one Philox counter per four elements);
** in evaluation y = x.
*/
#include "nn_internal.h"

typedef struct dropout_ctx {
    double p;
} dropout_ctx;

static td_tensor *dropout_forward(td_module *m, td_tensor *x) {
    double p = ((dropout_ctx *)m->ctx)->p;
    if (!m->training || p == 0) return td__scope_add(td_retain(x));
    td_rng_state r = td_rng_reserve((uint64_t)td_numel(x));
    return td_dropout(x, p, r.seed, r.offset);
}

static const td_module_i dropout_iface = {.type = "Dropout", .forward = dropout_forward, .free_ctx = NULL};

td_module *td_dropout_new(double p) {
    if (!(p >= 0 && p < 1)) TD_FAIL_NULL(TD_ERR_MISUSE, "Dropout: probability %g is outside [0, 1)", p);
    td_module *m = td__module_alloc(&dropout_iface, sizeof(dropout_ctx));
    if (m) ((dropout_ctx *)m->ctx)->p = p;
    return m;
}
