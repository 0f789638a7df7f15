/*
** State dicts: an ordered list of (name, +1 tensor) pairs. Lookups are linear,
** which is fine for the few hundred entries of a model.
*/
#include <stdlib.h>
#include <string.h>

#include "nn_internal.h"

struct td_state_dict {
    char **names;
    td_tensor **tensors;
    int n, cap;
};

td_state_dict *td_state_dict_new(void) {
    td_state_dict *sd = calloc(1, sizeof *sd);
    if (!sd) TD_FAIL_NULL(TD_ERR_OOM, "state_dict_new: out of host memory");
    return sd;
}

void td_state_dict_free(td_state_dict *sd) {
    if (!sd) return;
    for (int i = 0; i < sd->n; i++) {
        free(sd->names[i]);
        td_release(sd->tensors[i]);
    }
    free(sd->names);
    free(sd->tensors);
    free(sd);
}

static int find(const td_state_dict *sd, const char *name) {
    for (int i = 0; i < sd->n; i++)
        if (!strcmp(sd->names[i], name)) return i;
    return -1;
}

td_status td_state_dict_set(td_state_dict *sd, const char *name, td_tensor *t) {
    if (!sd || !name) return TD_ERR(TD_ERR_MISUSE, "state_dict_set: state dict or name is NULL");
    TD_CHECK_ARG_ST(t, "state_dict_set");
    int i = find(sd, name);
    if (i >= 0) {
        td_retain(t);
        td_release(sd->tensors[i]);
        sd->tensors[i] = t;
        return TD_OK;
    }
    if (sd->n == sd->cap) {
        int cap = sd->cap ? sd->cap * 2 : 16;
        char **names = realloc(sd->names, (size_t)cap * sizeof *names);
        if (names) sd->names = names;
        td_tensor **tensors = names ? realloc(sd->tensors, (size_t)cap * sizeof *tensors) : NULL;
        if (!tensors) return TD_ERR(TD_ERR_OOM, "state_dict_set: out of host memory");
        sd->tensors = tensors;
        sd->cap = cap;
    }
    char *copy = strdup(name);
    if (!copy) return TD_ERR(TD_ERR_OOM, "state_dict_set: out of host memory");
    sd->names[sd->n] = copy;
    sd->tensors[sd->n++] = td_retain(t);
    return TD_OK;
}

td_tensor *td_state_dict_get(const td_state_dict *sd, const char *name) {
    if (!sd || !name) return NULL;
    int i = find(sd, name);
    return i >= 0 ? sd->tensors[i] : NULL;
}

int td_state_dict_count(const td_state_dict *sd) { return sd ? sd->n : -1; }

const char *td_state_dict_name(const td_state_dict *sd, int i) {
    return sd && i >= 0 && i < sd->n ? sd->names[i] : NULL;
}

td_tensor *td_state_dict_tensor(const td_state_dict *sd, int i) {
    return sd && i >= 0 && i < sd->n ? sd->tensors[i] : NULL;
}
