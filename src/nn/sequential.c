/*
** nn.Sequential: children "0", "1", ... applied in order.
*/
#include <stdio.h>

#include "nn_internal.h"

static td_tensor *sequential_forward(td_module *m, td_tensor *x) {
    if (m->children.n == 0) return td__scope_add(td_retain(x));
    for (int i = 0; i < m->children.n && x; i++) x = td_module_forward(m->children.items[i].child, x);
    return x;
}

static const td_module_i sequential_iface = {.type = "Sequential", .forward = sequential_forward, .free_ctx = NULL};

td_status td_sequential_append(td_module *seq, td_module *child) {
    if (!td__module_is(seq, &sequential_iface, "sequential_append")) {
        td_status st = td_last_status();
        if (child && !child->has_parent) td_module_free(child);
        return st;
    }
    char name[16];
    snprintf(name, sizeof name, "%d", seq->children.n);
    return td_module_register_module(seq, name, child);
}

td_module *td_sequential_new(int n, td_module *const *mods) {
    td_status st = TD_OK;
    if (n < 0 || (n > 0 && !mods))
        st = TD_ERR(TD_ERR_MISUSE, "Sequential: %d modules from a %s array", n, mods ? "valid" : "NULL");
    for (int i = 0; st == TD_OK && i < n; i++)
        if (!mods[i]) /* a failed constructor: keep its error */
            st = td_last_status() ? td_last_status() : TD_ERR(TD_ERR_MISUSE, "Sequential: module %d is NULL", i);
    td_module *seq = st == TD_OK ? td__module_alloc(&sequential_iface, 0) : NULL;
    if (st == TD_OK && !seq) st = td_last_status();
    for (int i = 0; mods && i < n; i++) {
        if (st == TD_OK)
            st = td_sequential_append(seq, mods[i]);
        else
            td_module_free(mods[i]);
    }
    if (st != TD_OK) {
        td_module_free(seq);
        return NULL;
    }
    return seq;
}
