/*
** Named-tensor lists: (name, tensor) pairs and string metadata.
** Lookups are linear scans: lists hold tens to hundreds of entries.
*/
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "trident/io.h"

struct td_named_tensors {
    int64_t n, cap;
    char **names;
    td_tensor **tensors;
    int64_t n_meta, cap_meta;
    char **keys, **values;
};

td_named_tensors *td_named_tensors_new(void) {
    td_named_tensors *l = calloc(1, sizeof *l);
    if (!l) TD_FAIL_NULL(TD_ERR_OOM, "named_tensors_new: out of host memory");
    return l;
}

void td_named_tensors_free(td_named_tensors *l) {
    if (!l) return;
    for (int64_t i = 0; i < l->n; i++) {
        free(l->names[i]);
        td_release(l->tensors[i]);
    }
    for (int64_t i = 0; i < l->n_meta; i++) {
        free(l->keys[i]);
        free(l->values[i]);
    }
    free(l->names);
    free(l->tensors);
    free(l->keys);
    free(l->values);
    free(l);
}

/* Grow two parallel pointer arrays to hold one more entry. */
static bool grow(void ***a, void ***b, int64_t n, int64_t *cap) {
    if (n < *cap) return true;
    int64_t c = *cap ? *cap * 2 : 16;
    void **na = realloc(*a, (size_t)c * sizeof *na);
    if (na) *a = na;
    void **nb = na ? realloc(*b, (size_t)c * sizeof *nb) : NULL;
    if (nb) *b = nb;
    if (!na || !nb) return false;
    *cap = c;
    return true;
}

static int64_t find(char *const *names, int64_t n, const char *name) {
    for (int64_t i = 0; i < n; i++)
        if (!strcmp(names[i], name)) return i;
    return -1;
}

td_status td_named_tensors_add(td_named_tensors *l, const char *name, td_tensor *t) {
    if (!l || !name || !*name) return TD_ERR(TD_ERR_MISUSE, "named_tensors_add: list or name is NULL or empty");
    TD_CHECK_ARG_ST(t, "named_tensors_add");
    if (find(l->names, l->n, name) >= 0)
        return TD_ERR(TD_ERR_MISUSE, "named_tensors_add: duplicate name %s", TD_QUOTE(name));
    char *copy = strdup(name);
    if (!copy || !grow((void ***)&l->names, (void ***)&l->tensors, l->n, &l->cap)) {
        free(copy);
        return TD_ERR(TD_ERR_OOM, "named_tensors_add: out of host memory");
    }
    l->names[l->n] = copy;
    l->tensors[l->n++] = td_retain(t);
    return TD_OK;
}

int64_t td_named_tensors_len(const td_named_tensors *l) { return l ? l->n : -1; }

static bool in_range(const td_named_tensors *l, int64_t i, const char *fn) {
    if (l && i >= 0 && i < l->n) return true;
    TD_ERR(TD_ERR_INDEX, "%s: index %lld out of range for a list of %lld", fn, (long long)i, (long long)(l ? l->n : 0));
    return false;
}

const char *td_named_tensors_name(const td_named_tensors *l, int64_t i) {
    return in_range(l, i, "named_tensors_name") ? l->names[i] : NULL;
}

td_tensor *td_named_tensors_at(const td_named_tensors *l, int64_t i) {
    return in_range(l, i, "named_tensors_at") ? l->tensors[i] : NULL;
}

td_tensor *td_named_tensors_get(const td_named_tensors *l, const char *name) {
    if (!l || !name) return NULL;
    int64_t i = find(l->names, l->n, name);
    return i >= 0 ? l->tensors[i] : NULL;
}

td_status td_named_tensors_set_meta(td_named_tensors *l, const char *key, const char *value) {
    if (!l || !key || !*key || !value)
        return TD_ERR(TD_ERR_MISUSE, "named_tensors_set_meta: list, key or value is NULL (or the key is empty)");
    char *v = strdup(value);
    if (!v) return TD_ERR(TD_ERR_OOM, "named_tensors_set_meta: out of host memory");
    int64_t i = find(l->keys, l->n_meta, key);
    if (i >= 0) {
        free(l->values[i]);
        l->values[i] = v;
        return TD_OK;
    }
    char *k = strdup(key);
    if (!k || !grow((void ***)&l->keys, (void ***)&l->values, l->n_meta, &l->cap_meta)) {
        free(k);
        free(v);
        return TD_ERR(TD_ERR_OOM, "named_tensors_set_meta: out of host memory");
    }
    l->keys[l->n_meta] = k;
    l->values[l->n_meta++] = v;
    return TD_OK;
}

const char *td_named_tensors_meta(const td_named_tensors *l, const char *key) {
    if (!l || !key) return NULL;
    int64_t i = find(l->keys, l->n_meta, key);
    return i >= 0 ? l->values[i] : NULL;
}

int64_t td_named_tensors_meta_len(const td_named_tensors *l) { return l ? l->n_meta : -1; }

const char *td_named_tensors_meta_key(const td_named_tensors *l, int64_t i) {
    if (l && i >= 0 && i < l->n_meta) return l->keys[i];
    TD_ERR(TD_ERR_INDEX, "named_tensors_meta_key: index %lld out of range", (long long)i);
    return NULL;
}
