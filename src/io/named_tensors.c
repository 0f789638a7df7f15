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

/* ---- editing: remove, rename, filter, map names ---- */

td_status td_named_tensors_remove(td_named_tensors *l, const char *name) {
    if (!l || !name) return TD_ERR(TD_ERR_MISUSE, "named_tensors_remove: list or name is NULL");
    int64_t i = find(l->names, l->n, name);
    if (i < 0) return TD_ERR(TD_ERR_MISUSE, "named_tensors_remove: no entry '%s'", name);
    free(l->names[i]);
    td_release(l->tensors[i]);
    memmove(l->names + i, l->names + i + 1, (size_t)(l->n - i - 1) * sizeof *l->names);
    memmove(l->tensors + i, l->tensors + i + 1, (size_t)(l->n - i - 1) * sizeof *l->tensors);
    l->n--;
    return TD_OK;
}

td_status td_named_tensors_rename(td_named_tensors *l, const char *from, const char *to) {
    if (!l || !from || !to || !*to)
        return TD_ERR(TD_ERR_MISUSE, "named_tensors_rename: list or a name is NULL (or the new name is empty)");
    int64_t i = find(l->names, l->n, from);
    if (i < 0) return TD_ERR(TD_ERR_MISUSE, "named_tensors_rename: no entry '%s'", from);
    if (strcmp(from, to) && find(l->names, l->n, to) >= 0)
        return TD_ERR(TD_ERR_MISUSE, "named_tensors_rename: '%s' to '%s': that name is taken", from, to);
    char *copy = strdup(to);
    if (!copy) return TD_ERR(TD_ERR_OOM, "named_tensors_rename: out of host memory");
    free(l->names[i]);
    l->names[i] = copy;
    return TD_OK;
}

/* A new list with the metadata of l and, in order, each entry that keep
** accepts, under the name map gives it (NULL from either drops it). */
static td_named_tensors *derive(const td_named_tensors *l, td_name_filter_fn keep, td_name_map_fn map, void *ctx,
                                const char *fn) {
    if (!l || (!keep && !map)) TD_FAIL_NULL(TD_ERR_MISUSE, "%s: list or function is NULL", fn);
    td_named_tensors *out = td_named_tensors_new();
    td_status st = out ? TD_OK : td_last_status();
    for (int64_t i = 0; i < l->n_meta && st == TD_OK; i++)
        st = td_named_tensors_set_meta(out, l->keys[i], l->values[i]);
    for (int64_t i = 0; i < l->n && st == TD_OK; i++) {
        char buf[512];
        const char *name = keep ? (keep(l->names[i], l->tensors[i], ctx) ? l->names[i] : NULL)
                                : map(l->names[i], ctx, buf, sizeof buf);
        if (!name) continue;
        if (find(out->names, out->n, name) >= 0)
            st = TD_ERR(TD_ERR_MISUSE, "%s: '%s' maps to '%s', which an earlier entry already has", fn, l->names[i],
                        name);
        else
            st = td_named_tensors_add(out, name, l->tensors[i]);
    }
    if (st == TD_OK) return out;
    td_named_tensors_free(out);
    return NULL;
}

td_named_tensors *td_named_tensors_filter(const td_named_tensors *l, td_name_filter_fn keep, void *ctx) {
    return derive(l, keep, NULL, ctx, "named_tensors_filter");
}

td_named_tensors *td_named_tensors_map_names(const td_named_tensors *l, td_name_map_fn map, void *ctx) {
    return derive(l, NULL, map, ctx, "named_tensors_map_names");
}
