/*
** The generic module: registration of parameters, buffers and children,
** forward inside its own scope, dotted-name traversal, train/eval, zero_grad,
** moves between devices, custom modules, and freeing.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd_internal.h"
#include "nn_internal.h"

#define NAME_MAX_LEN 512

/* ---- entry lists ---- */

static td_entry *entries_find(const td_entries *e, const char *name, size_t len) {
    for (int i = 0; i < e->n; i++)
        if (strlen(e->items[i].name) == len && !strncmp(e->items[i].name, name, len)) return &e->items[i];
    return NULL;
}

static td_status entries_push(td_entries *e, const char *name, void *value, bool is_child) {
    if (e->n == e->cap) {
        int cap = e->cap ? e->cap * 2 : 4;
        td_entry *items = realloc(e->items, (size_t)cap * sizeof *items);
        if (!items) return TD_ERR(TD_ERR_OOM, "module: out of host memory registering '%s'", name);
        e->items = items;
        e->cap = cap;
    }
    char *copy = strdup(name);
    if (!copy) return TD_ERR(TD_ERR_OOM, "module: out of host memory registering '%s'", name);
    td_entry *it = &e->items[e->n++];
    it->name = copy;
    if (is_child)
        it->child = value;
    else
        it->tensor = value;
    return TD_OK;
}

/* A new name must be non-empty, dot-free and unused in m. */
static td_status check_new_name(const td_module *m, const char *name, const char *what) {
    if (!name || !*name) return TD_ERR(TD_ERR_MISUSE, "%s: the name is NULL or empty", what);
    if (strchr(name, '.')) return TD_ERR(TD_ERR_MISUSE, "%s: name '%s' contains '.'", what, name);
    size_t len = strlen(name);
    if (len >= NAME_MAX_LEN) return TD_ERR(TD_ERR_MISUSE, "%s: name '%.32s...' is too long", what, name);
    if (entries_find(&m->params, name, len) || entries_find(&m->buffers, name, len) ||
        entries_find(&m->children, name, len))
        return TD_ERR(TD_ERR_MISUSE, "%s: '%s' is already registered in this %s", what, name, td_module_type(m));
    return TD_OK;
}

/* ---- construction ---- */

td_module *td__module_alloc(const td_module_i *iface, size_t ctx_size) {
    td_module *m = calloc(1, sizeof *m);
    void *ctx = ctx_size ? calloc(1, ctx_size) : NULL;
    if (!m || (ctx_size && !ctx)) {
        free(m);
        free(ctx);
        TD_FAIL_NULL(TD_ERR_OOM, "%s: out of host memory", iface->type ? iface->type : "Module");
    }
    m->iface = iface;
    m->ctx = ctx;
    m->training = true;
    return m;
}

td_status td__module_add_param(td_module *m, const char *name, td_tensor *t) {
    td_status st = t ? check_new_name(m, name, "register_parameter") : td_last_status();
    if (st == TD_OK) st = td_set_requires_grad(t, true);
    if (st == TD_OK) st = entries_push(&m->params, name, t, false);
    if (st != TD_OK) td_release(t);
    return st;
}

td_status td__module_add_buffer(td_module *m, const char *name, td_tensor *t) {
    td_status st = t ? check_new_name(m, name, "register_buffer") : td_last_status();
    if (st == TD_OK) st = entries_push(&m->buffers, name, t, false);
    if (st != TD_OK) td_release(t);
    return st;
}

td_tensor *td__new_param(int ndim, const int64_t *shape) {
    td_tensor *t = td_empty(ndim, shape, TD_F32, TD_CPU);
    return td_keep(t);
}

bool td__module_is(const td_module *m, const td_module_i *iface, const char *fn) {
    if (!m) return TD_ERR(TD_ERR_MISUSE, "%s: module is NULL", fn), false;
    if (m->iface != iface)
        return TD_ERR(TD_ERR_MISUSE, "%s: module is a %s, not a %s", fn, td_module_type(m), iface->type), false;
    return true;
}

bool td__check_ndim(td_tensor *x, unsigned ndims, const char *layer, const char *layout) {
    int nd = td_ndim(x);
    if (nd < 0) return false;
    if (nd < 32 && (ndims >> nd) & 1u) return true;
    char s[96];
    TD_ERR(TD_ERR_SHAPE, "%s: expected input %s, got shape %s", layer, layout,
           td__shape_str(nd, td_shape(x), s, sizeof s));
    return false;
}

/* ---- custom modules ---- */

static td_tensor *custom_forward(td_module *m, td_tensor *x) { return m->user_forward(m, x); }
static const td_module_i custom_iface = {.type = NULL, .forward = custom_forward, .free_ctx = NULL};

td_module *td_module_new(const char *type, td_forward_fn fn, void *user, void (*free_user)(void *)) {
    if (!fn) TD_FAIL_NULL(TD_ERR_MISUSE, "module_new: forward function is NULL");
    td_module *m = td__module_alloc(&custom_iface, 0);
    if (!m) return NULL;
    m->ctx = strdup(type && *type ? type : "Module");
    if (!m->ctx) {
        free(m);
        TD_FAIL_NULL(TD_ERR_OOM, "module_new: out of host memory");
    }
    m->user_forward = fn;
    m->user = user;
    m->free_user = free_user;
    return m;
}

void *td_module_user(const td_module *m) { return m ? m->user : NULL; }

td_status td_module_register_parameter(td_module *m, const char *name, td_tensor *t) {
    if (!m) return TD_ERR(TD_ERR_MISUSE, "register_parameter: module is NULL");
    TD_CHECK_ARG_ST(t, "register_parameter");
    return td__module_add_param(m, name, td_retain(t));
}

td_status td_module_register_buffer(td_module *m, const char *name, td_tensor *t) {
    if (!m) return TD_ERR(TD_ERR_MISUSE, "register_buffer: module is NULL");
    TD_CHECK_ARG_ST(t, "register_buffer");
    return td__module_add_buffer(m, name, td_retain(t));
}

td_status td_module_register_module(td_module *m, const char *name, td_module *child) {
    td_status st = TD_OK;
    if (!m)
        st = TD_ERR(TD_ERR_MISUSE, "register_module: module is NULL");
    else if (!child)
        st = td_last_status() ? td_last_status() : TD_ERR(TD_ERR_MISUSE, "register_module: child is NULL");
    else if (child == m || child->has_parent)
        st = TD_ERR(TD_ERR_MISUSE, "register_module: '%s' already has a parent", name ? name : "?");
    else
        st = check_new_name(m, name, "register_module");
    if (st == TD_OK) st = entries_push(&m->children, name, child, true);
    if (st == TD_OK)
        child->has_parent = true;
    else if (child && child != m && !child->has_parent)
        td_module_free(child);
    return st;
}

/* ---- the generic interface ---- */

const char *td_module_type(const td_module *m) {
    if (!m) return "?";
    return m->iface == &custom_iface ? (const char *)m->ctx : m->iface->type;
}

/* Under the profiler: the ops of m's forward are issued by m's path, its
** parent's path plus its name among the parent's children ("blocks.0.qkv"),
** followed by its type ("blocks.0.qkv (Linear)", "0 (Linear)" in a
** Sequential); a module called from no module is named by its type ("GPT").
** Children extend the bare path, kept per depth. */
static _Thread_local td_module *fwd_stack[TD_PROF_DEPTH];
static _Thread_local const char *fwd_path[TD_PROF_DEPTH];
static _Thread_local int fwd_depth;

static td_tensor *forward_profiled(td_module *m, td_tensor *x) {
    const char *up = td__prof_at.module, *name = NULL;
    bool nested = fwd_depth > 0 && fwd_depth <= TD_PROF_DEPTH;
    td_module *parent = nested ? fwd_stack[fwd_depth - 1] : NULL;
    const char *up_path = nested && fwd_path[fwd_depth - 1] ? fwd_path[fwd_depth - 1] : up;
    for (int i = 0; parent && i < parent->children.n && !name; i++)
        if (parent->children.items[i].child == m) name = parent->children.items[i].name;
    char path[512], shown[600];
    if (name && parent && fwd_depth > 1)
        snprintf(path, sizeof path, "%s.%s", up_path ? up_path : "", name);
    else if (name || !up)
        snprintf(path, sizeof path, "%s", name ? name : td_module_type(m));
    else
        snprintf(path, sizeof path, "%s/%s", up, td_module_type(m));
    if (name)
        snprintf(shown, sizeof shown, "%s (%s)", path, td_module_type(m));
    else
        snprintf(shown, sizeof shown, "%s", path);
    if (fwd_depth < TD_PROF_DEPTH) fwd_stack[fwd_depth] = m, fwd_path[fwd_depth] = td__profile_intern(path);
    fwd_depth++;
    td__prof_at.module = td__profile_intern(shown);
    td_scope_begin();
    td_tensor *y = td__scope_end_keep(m->iface->forward(m, x));
    fwd_depth--;
    td__prof_at.module = up;
    return y;
}

td_tensor *td_module_forward(td_module *m, td_tensor *x) {
    if (!m) {
        if (td_last_status() == TD_OK) TD_ERR(TD_ERR_MISUSE, "module_forward: module is NULL");
        return NULL;
    }
    const char *type = td_module_type(m);
    TD_CHECK_ARG(x, type);
    if (__builtin_expect(td__profiling, 0)) return forward_profiled(m, x);
    /* Temporaries die with this scope; the result leaves it for the caller's. */
    td_scope_begin();
    return td__scope_end_keep(m->iface->forward(m, x));
}

void td_module_free(td_module *m) {
    if (!m) return;
    for (int i = 0; i < m->params.n; i++) td_release(m->params.items[i].tensor), free(m->params.items[i].name);
    for (int i = 0; i < m->buffers.n; i++) td_release(m->buffers.items[i].tensor), free(m->buffers.items[i].name);
    for (int i = 0; i < m->children.n; i++) td_module_free(m->children.items[i].child), free(m->children.items[i].name);
    free(m->params.items);
    free(m->buffers.items);
    free(m->children.items);
    td__module_arena_free(m);
    if (m->iface->free_ctx)
        m->iface->free_ctx(m->ctx);
    else
        free(m->ctx);
    if (m->free_user) m->free_user(m->user);
    free(m);
}

void td_module_train(td_module *m, bool mode) {
    if (!m) return;
    m->training = mode;
    for (int i = 0; i < m->children.n; i++) td_module_train(m->children.items[i].child, mode);
}

void td_module_eval(td_module *m) { td_module_train(m, false); }
bool td_module_is_training(const td_module *m) { return m && m->training; }

/* ---- traversal by dotted names ---- */

/* Calls fn on every parameter (and buffer, when with_buffers) of m in
** state_dict order with its dotted name; stops at the first error. */
typedef td_status (*visit_fn)(void *arg, const char *name, td_tensor **slot, bool is_param);

static td_status walk(td_module *m, char *name, size_t len, bool with_buffers, visit_fn fn, void *arg) {
    const td_entries *lists[2] = {&m->params, &m->buffers};
    for (int l = 0; l < (with_buffers ? 2 : 1); l++)
        for (int i = 0; i < lists[l]->n; i++) {
            snprintf(name + len, NAME_MAX_LEN - len, "%s", lists[l]->items[i].name);
            td_status st = fn(arg, name, &lists[l]->items[i].tensor, l == 0);
            if (st != TD_OK) return st;
        }
    for (int i = 0; i < m->children.n; i++) {
        int k = snprintf(name + len, NAME_MAX_LEN - len, "%s.", m->children.items[i].name);
        if (k < 0 || len + (size_t)k >= NAME_MAX_LEN)
            return TD_ERR(TD_ERR_MISUSE, "module: dotted name '%.64s...' is too long", name);
        td_status st = walk(m->children.items[i].child, name, len + (size_t)k, with_buffers, fn, arg);
        if (st != TD_OK) return st;
    }
    name[len] = '\0';
    return TD_OK;
}

static td_status walk_all(td_module *m, bool with_buffers, visit_fn fn, void *arg) {
    char name[NAME_MAX_LEN];
    name[0] = '\0';
    return walk(m, name, 0, with_buffers, fn, arg);
}

typedef struct collect_arg {
    td_tensor **out;
    int cap, n;
} collect_arg;

static td_status collect(void *arg, const char *name, td_tensor **slot, bool is_param) {
    (void)name, (void)is_param;
    collect_arg *c = arg;
    if (c->n < c->cap) c->out[c->n] = *slot;
    c->n++;
    return TD_OK;
}

int td_module_parameters(td_module *m, td_tensor **out, int cap) {
    if (!m) return TD_ERR(TD_ERR_MISUSE, "module_parameters: module is NULL"), -1;
    collect_arg c = {out, out ? cap : 0, 0};
    walk_all(m, false, collect, &c);
    return c.n;
}

static td_status add_to_dict(void *arg, const char *name, td_tensor **slot, bool is_param) {
    (void)is_param;
    return td_named_tensors_add(arg, name, *slot);
}

static td_named_tensors *to_dict(td_module *m, bool with_buffers, const char *fn) {
    if (!m) TD_FAIL_NULL(TD_ERR_MISUSE, "%s: module is NULL", fn);
    td_named_tensors *sd = td_named_tensors_new();
    if (sd && walk_all(m, with_buffers, add_to_dict, sd) != TD_OK) {
        td_named_tensors_free(sd);
        return NULL;
    }
    return sd;
}

td_named_tensors *td_module_named_parameters(td_module *m) { return to_dict(m, false, "named_parameters"); }
td_named_tensors *td_module_state_dict(td_module *m) { return to_dict(m, true, "state_dict"); }

td_module *td_module_child(td_module *m, const char *name) {
    if (!m || !name) TD_FAIL_NULL(TD_ERR_MISUSE, "module_child: module or name is NULL");
    const char *p = name;
    while (m) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        td_entry *e = entries_find(&m->children, p, len);
        if (!e) break;
        if (!dot) return e->child;
        m = e->child;
        p = dot + 1;
    }
    TD_FAIL_NULL(TD_ERR_MISUSE, "module_child: no submodule %s", TD_QUOTE(name));
}

td_tensor *td_module_get(td_module *m, const char *name) {
    if (!m || !name) TD_FAIL_NULL(TD_ERR_MISUSE, "module_get: module or name is NULL");
    const char *leaf = strrchr(name, '.');
    td_module *owner = m;
    if (leaf) {
        char path[NAME_MAX_LEN];
        size_t len = (size_t)(leaf - name);
        if (len >= sizeof path) TD_FAIL_NULL(TD_ERR_MISUSE, "module_get: name '%.64s...' is too long", name);
        memcpy(path, name, len);
        path[len] = '\0';
        owner = td_module_child(m, path);
        leaf++;
    } else {
        leaf = name;
    }
    td_entry *e = owner ? entries_find(&owner->params, leaf, strlen(leaf)) : NULL;
    if (!e && owner) e = entries_find(&owner->buffers, leaf, strlen(leaf));
    if (!e)
        TD_FAIL_NULL(TD_ERR_MISUSE, "module_get: %s has no parameter or buffer %s", td_module_type(m), TD_QUOTE(name));
    return e->tensor;
}

static td_status zero_one(void *arg, const char *name, td_tensor **slot, bool is_param) {
    (void)arg, (void)name, (void)is_param;
    td_zero_grad(*slot);
    return TD_OK;
}

void td_module_zero_grad(td_module *m) {
    if (m) walk_all(m, false, zero_one, NULL);
}

/* ---- moving between devices or dtypes: build every new tensor, then swap ----
** The data moves under the same tensor handles (as torch's module.to() moves
** param.data), so an optimizer built before the move updates the moved
** parameters. */

typedef struct move_arg {
    td_device dev;
    td_dtype dt;  /* to_dtype: the floating tensors' new dtype */
    bool to_type; /* a dtype change, else a device move */
    td_tensor **moved;
    int n, cap;
} move_arg;

static td_status move_one(void *arg, const char *name, td_tensor **slot, bool is_param) {
    (void)name, (void)is_param;
    move_arg *a = arg;
    if (a->n == a->cap) {
        int cap = a->cap ? a->cap * 2 : 16;
        td_tensor **p = realloc(a->moved, (size_t)cap * sizeof *p);
        if (!p) return TD_ERR(TD_ERR_OOM, "module_to: out of host memory");
        a->moved = p;
        a->cap = cap;
    }
    td_dtype old = td_tensor_dtype(*slot);
    td_tensor *t = td_keep(a->to_type ? td_cast(*slot, td_dtype_is_float(old) ? a->dt : old) : td_to(*slot, a->dev));
    if (!t) return td_last_status();
    a->moved[a->n++] = t;
    return TD_OK;
}

/* The slot's tensor takes the moved tensor's storage (and dtype), which takes
** the old one and is released with it; the old gradient is dropped. */
static td_status swap_one(void *arg, const char *name, td_tensor **slot, bool is_param) {
    (void)name, (void)is_param;
    move_arg *a = arg;
    td_tensor *t = *slot, *moved = a->moved[a->n++];
    if (moved != t) {
        td_storage *s = t->storage;
        t->storage = moved->storage, moved->storage = s;
        int64_t offset = t->offset, strides[TD_MAX_DIMS];
        t->offset = moved->offset, moved->offset = offset;
        memcpy(strides, t->strides, sizeof strides);
        memcpy(t->strides, moved->strides, sizeof strides);
        memcpy(moved->strides, strides, sizeof strides);
        td_dtype dt = t->dtype;
        t->dtype = moved->dtype, moved->dtype = dt;
        td_zero_grad(t);
        td__set_grad_slot(t, NULL); /* its own storage now: out of any arena */
    }
    td_release(moved);
    return TD_OK;
}

static td_status move_all(td_module *m, move_arg *a) {
    td_no_grad_begin();
    td_status st = walk_all(m, true, move_one, a);
    td_no_grad_end();
    if (st == TD_OK) {
        a->n = 0;
        walk_all(m, true, swap_one, a);
    } else {
        for (int i = 0; i < a->n; i++) td_release(a->moved[i]);
    }
    free(a->moved);
    return st;
}

td_status td_module_to(td_module *m, td_device dev) {
    if (!m) return TD_ERR(TD_ERR_MISUSE, "module_to: module is NULL");
    td_status st = move_all(m, &(move_arg){.dev = dev});
    if (st == TD_OK && m->n_arenas) m->arena_device = dev;
    return st == TD_OK ? td__module_reflatten(m) : st;
}

td_status td_module_to_dtype(td_module *m, td_dtype dt) {
    if (!m) return TD_ERR(TD_ERR_MISUSE, "module_to_dtype: module is NULL");
    if ((unsigned)dt >= TD_DTYPE_COUNT || !td_dtype_is_float(dt))
        return TD_ERR(TD_ERR_DTYPE, "module_to_dtype: %s is not a floating dtype",
                      (unsigned)dt < TD_DTYPE_COUNT ? td_dtype_name(dt) : "an invalid dtype");
    td_status st = move_all(m, &(move_arg){.dt = dt, .to_type = true});
    return st == TD_OK ? td__module_reflatten(m) : st;
}

/* ---- load_state_dict: check everything, then copy ---- */

/* Buffers a state dict may lack, as torch's BatchNorm accepts a state dict
** without num_batches_tracked (the count then restarts at 0). */
static bool optional_buffer(const char *name, bool is_param) {
    const char *leaf = strrchr(name, '.');
    return !is_param && !strcmp(leaf ? leaf + 1 : name, "num_batches_tracked");
}

typedef struct load_arg {
    const td_named_tensors *sd;
    bool copy;
    int matched, n_missing;
    char missing[256];  /* the first missing keys */
    td_status mismatch; /* the first shape or dtype mismatch, its message in text */
    char text[320];
    td_load_report *report; /* or NULL */
} load_arg;

/* Append a copy of name to a report list. */
static td_status report_add(char ***list, int *n, const char *name) {
    char **grown = realloc(*list, (size_t)(*n + 1) * sizeof *grown);
    char *copy = grown ? strdup(name) : NULL;
    if (grown) *list = grown;
    if (!copy) return TD_ERR(TD_ERR_OOM, "load_state_dict: out of host memory");
    (*list)[(*n)++] = copy;
    return TD_OK;
}

static td_status load_one(void *arg, const char *name, td_tensor **slot, bool is_param) {
    load_arg *a = arg;
    td_tensor *src = td_named_tensors_get(a->sd, name), *dst = *slot;
    if (!src && optional_buffer(name, is_param)) return a->copy ? td_copy_(dst, td_zeros_like(dst)) : TD_OK;
    if (!src) {
        if (a->copy) return TD_OK;
        if (a->n_missing++ < 4) {
            size_t at = strlen(a->missing);
            snprintf(a->missing + at, sizeof a->missing - at, "%s'%s'", at ? ", " : "", name);
        }
        return a->report ? report_add(&a->report->missing, &a->report->n_missing, name) : TD_OK;
    }
    a->matched++;
    if (a->copy) {
        td_status st = td_copy_(dst, src);
        if (st != TD_OK) td_error_prefix("load_state_dict: %s", TD_QUOTE(name));
        return st;
    }
    if (a->mismatch) return TD_OK;
    char s1[96], s2[96];
    if (td_ndim(src) != td_ndim(dst) || memcmp(td_shape(src), td_shape(dst), sizeof(int64_t) * (size_t)td_ndim(dst))) {
        a->mismatch = TD_ERR_SHAPE;
        snprintf(a->text, sizeof a->text, "'%s': checkpoint shape %s, model shape %s", name,
                 td__shape_str(td_ndim(src), td_shape(src), s1, sizeof s1),
                 td__shape_str(td_ndim(dst), td_shape(dst), s2, sizeof s2));
    } else if (td_tensor_dtype(src) != td_tensor_dtype(dst)) {
        a->mismatch = TD_ERR_DTYPE;
        snprintf(a->text, sizeof a->text, "'%s': checkpoint dtype %s, model dtype %s", name,
                 td_dtype_name(td_tensor_dtype(src)), td_dtype_name(td_tensor_dtype(dst)));
    }
    return TD_OK;
}

/* The keys of sd that m lacks: their count, the first in *first, all in the report. */
static td_status find_unexpected(td_module *m, const td_named_tensors *sd, td_load_report *report, int *n,
                                 const char **first) {
    *n = 0, *first = NULL;
    for (int64_t i = 0; i < td_named_tensors_len(sd); i++) {
        const char *key = td_named_tensors_name(sd, i);
        bool found = td_module_get(m, key) != NULL;
        td_clear_error();
        if (found) continue;
        if (!(*n)++) *first = key;
        td_status st = report ? report_add(&report->unexpected, &report->n_unexpected, key) : TD_OK;
        if (st != TD_OK) return st;
    }
    return TD_OK;
}

static td_status load_state_dict(td_module *m, const td_named_tensors *sd, bool strict, td_load_report *report) {
    load_arg a = {.sd = sd, .report = report};
    td_status st = walk_all(m, true, load_one, &a);
    int unexpected = 0;
    const char *first = NULL;
    if (st == TD_OK) st = find_unexpected(m, sd, report, &unexpected, &first);
    if (st != TD_OK) return st;
    /* Keys that do not match say "another model" most plainly: report them first. */
    if (strict && (a.n_missing || unexpected)) {
        char more[200] = "";
        if (unexpected)
            snprintf(more, sizeof more, "%s%d unexpected key(s), e.g. %s", a.n_missing ? "; " : "", unexpected,
                     TD_QUOTE(first));
        if (a.n_missing)
            return TD_ERR(
                TD_ERR_MISUSE,
                "load_state_dict: the checkpoint does not fit this %s: %d key(s) missing from the checkpoint: %s%s%s",
                td_module_type(m), a.n_missing, a.missing, a.n_missing > 4 ? ", ..." : "", more);
        return TD_ERR(TD_ERR_MISUSE, "load_state_dict: the checkpoint does not fit this %s: %s", td_module_type(m),
                      more);
    }
    if (a.mismatch) return TD_ERR(a.mismatch, "load_state_dict: %s", a.text);
    a.copy = true;
    td_no_grad_begin();
    td_scope_begin();
    st = walk_all(m, true, load_one, &a);
    td_scope_end();
    td_no_grad_end();
    return st;
}

td_status td_module_load_state_dict(td_module *m, const td_named_tensors *sd, bool strict) {
    return td_module_load_state_dict_ext(m, sd, &(td_load_opts){.strict = strict}, NULL);
}

td_status td_module_load_state_dict_ext(td_module *m, const td_named_tensors *sd, const td_load_opts *opts,
                                        td_load_report *report) {
    if (report) *report = (td_load_report){0};
    if (!m || !sd || !opts) return TD_ERR(TD_ERR_MISUSE, "load_state_dict: module, state dict or options is NULL");
    td_named_tensors *mapped = opts->map_key ? td_named_tensors_map_names(sd, opts->map_key, opts->ctx) : NULL;
    if (opts->map_key && !mapped) return td_last_status();
    td_status st = load_state_dict(m, mapped ? mapped : sd, opts->strict, report);
    td_named_tensors_free(mapped);
    if (st != TD_OK) td_load_report_clear(report);
    return st;
}

void td_load_report_clear(td_load_report *r) {
    if (!r) return;
    for (int i = 0; i < r->n_missing; i++) free(r->missing[i]);
    for (int i = 0; i < r->n_unexpected; i++) free(r->unexpected[i]);
    free(r->missing);
    free(r->unexpected);
    *r = (td_load_report){0};
}
