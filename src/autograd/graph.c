/*
** The graph: nodes, their edges and saved tensors, and the recording hooks the
** core calls.
**
** The hooks are installed by a constructor when libtrident is loaded, so every
** op is recorded from the start (recording itself is cheap to skip: it returns
** at once when no input requires grad).
*/
#include <stdlib.h>
#include <string.h>

#include "autograd_internal.h"

static void meta_of(const td_tensor *t, td__tmeta *m) {
    if (!t) return;
    m->present = true;
    m->dtype = t->dtype;
    m->ndim = t->ndim;
    memcpy(m->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    m->device = t->storage->device;
}

td_node *td__node_new(const char *name, td__backward_fn fn, int kind, int n_in, td_tensor *const *in, int n_out,
                      td_tensor *const *out) {
    td_node *n = calloc(1, sizeof *n);
    if (n) {
        n->edges = calloc((size_t)(n_in ? n_in : 1), sizeof *n->edges);
        n->in_meta = calloc((size_t)(n_in ? n_in : 1), sizeof *n->in_meta);
        n->saved_in = calloc((size_t)(n_in ? n_in : 1), sizeof *n->saved_in);
        n->out_meta = calloc((size_t)(n_out ? n_out : 1), sizeof *n->out_meta);
        n->saved_out = calloc((size_t)(n_out ? n_out : 1), sizeof *n->saved_out);
        n->saved_version = calloc((size_t)(n_in + n_out ? n_in + n_out : 1), sizeof *n->saved_version);
    }
    if (!n || !n->edges || !n->in_meta || !n->saved_in || !n->out_meta || !n->saved_out || !n->saved_version) {
        if (n) {
            free(n->edges), free(n->in_meta), free(n->saved_in), free(n->out_meta), free(n->saved_out);
            free(n->saved_version);
            free(n);
        }
        TD_FAIL_NULL(TD_ERR_OOM, "%s: out of host memory recording the autograd graph", name);
    }
    atomic_init(&n->refcount, 1);
    n->name = name;
    n->backward = fn;
    n->kind = kind;
    if (__builtin_expect(td__profiling, 0)) n->module = td__prof_at.module;
    n->n_in = n_in;
    n->n_out = n_out;
    for (int i = 0; i < n_in; i++) {
        td_tensor *t = in[i];
        meta_of(t, &n->in_meta[i]);
        if (!t || !t->requires_grad) continue;
        if (t->grad_fn) {
            n->edges[i].node = t->grad_fn;
            n->edges[i].nr = t->output_nr;
            td__node_retain(t->grad_fn);
        } else {
            n->edges[i].leaf = td_retain(t);
        }
    }
    for (int j = 0; j < n_out; j++) meta_of(out[j], &n->out_meta[j]);
    return n;
}

void td__node_retain(td_node *n) { atomic_fetch_add(&n->refcount, 1); }

void td__node_free_saved(td_node *n) {
    for (int i = 0; i < n->n_in; i++) {
        td_release(n->saved_in[i]);
        n->saved_in[i] = NULL;
    }
    for (int j = 0; j < n->n_out; j++) {
        td_release(n->saved_out[j]);
        n->saved_out[j] = NULL;
    }
    if (n->free_saved) n->free_saved(n);
    if (n->has_saved) n->saved_freed = true;
}

static void node_free(td_node *n) {
    td__node_free_saved(n);
    for (int i = 0; i < n->n_in; i++) {
        td__node_release(n->edges[i].node);
        td_release(n->edges[i].leaf);
    }
    if (n->free_data) n->free_data(n->data);
    free(n->edges), free(n->in_meta), free(n->saved_in), free(n->out_meta), free(n->saved_out);
    free(n->saved_version);
    free(n);
}

/* Nodes whose count reached 0 wait here while an outer release is freeing, so
** that freeing a long chain iterates instead of recursing. */
#define INLINE_PENDING 64
static _Thread_local td_node *pending_inline[INLINE_PENDING];
static _Thread_local td_node **pending_heap;
static _Thread_local size_t n_pending, cap_heap;
static _Thread_local bool draining;

static bool pending_push(td_node *n) {
    if (n_pending < INLINE_PENDING) {
        pending_inline[n_pending++] = n;
        return true;
    }
    size_t k = n_pending - INLINE_PENDING;
    if (k == cap_heap) {
        size_t cap = cap_heap ? cap_heap * 2 : 256;
        td_node **h = realloc(pending_heap, cap * sizeof *h);
        if (!h) return false;
        pending_heap = h;
        cap_heap = cap;
    }
    pending_heap[k] = n;
    n_pending++;
    return true;
}

static td_node *pending_pop(void) {
    n_pending--;
    return n_pending < INLINE_PENDING ? pending_inline[n_pending] : pending_heap[n_pending - INLINE_PENDING];
}

void td__node_release(td_node *n) {
    if (!n || atomic_fetch_sub(&n->refcount, 1) != 1) return;
    if (!pending_push(n)) {
        node_free(n); /* out of memory for the queue: recurse instead */
        return;
    }
    if (draining) return;
    draining = true;
    while (n_pending) node_free(pending_pop());
    draining = false;
    free(pending_heap);
    pending_heap = NULL;
    cap_heap = 0;
}

void td__node_attach(td_node *n, td_tensor *out, int nr) {
    td__node_retain(n);
    out->requires_grad = true;
    out->grad_fn = n;
    out->output_nr = nr;
}

td_tensor *td__alias(td_tensor *t) { return td_keep(td__make_view(t, t->ndim, t->shape, t->strides, t->offset)); }

/* A saved tensor whose storage an op wrote since it was saved (td_copy_ into
** it or a view of it, an optimizer step) would give wrong gradients: refuse
** it as torch does. what/k name it in the message. */
static bool unchanged_since_saved(const td_node *n, const td_tensor *t, uint64_t saved, const char *what, int k) {
    uint64_t now = atomic_load(&t->storage->version);
    if (now == saved) return true;
    char s[96];
    TD_ERR(TD_ERR_STATE,
           "one of the variables needed for gradient computation has been modified by an inplace operation: [%s %s], "
           "%s %d of %s, is at version %llu; expected version %llu instead",
           td_dtype_name(t->dtype), td__shape_str(t->ndim, t->shape, s, sizeof s), what, k, n->name,
           (unsigned long long)now, (unsigned long long)saved);
    return false;
}

td_tensor *td__saved_input(td_node *n, int i) {
    if (!n->saved_in[i]) TD_FAIL_NULL(TD_ERR_STATE, "%s: saved input %d is not available", n->name, i);
    if (!unchanged_since_saved(n, n->saved_in[i], n->saved_version[i], "input", i)) return NULL;
    return n->saved_in[i];
}

td_tensor *td__saved_output(td_node *n, int j) {
    td_tensor *a = n->saved_out[j];
    if (!a) TD_FAIL_NULL(TD_ERR_STATE, "%s: saved output %d is not available", n->name, j);
    if (!unchanged_since_saved(n, a, n->saved_version[n->n_in + j], "output", j)) return NULL;
    if (!td_grad_enabled()) return a;
    /* create_graph: the saved output is a function of the inputs through n,
    ** unless it carries no gradient (max_pool2d's indices, layer_norm's rstd) */
    const td__formula *f = n->kind >= 0 ? td__formula_for((td_op_kind)n->kind) : NULL;
    if (!td_dtype_is_float(a->dtype) || (f && f->n_diff_out && j >= f->n_diff_out)) return a;
    td_tensor *v = td__make_view(a, a->ndim, a->shape, a->strides, a->offset);
    if (v) td__node_attach(n, v, j);
    return v;
}

bool td__any_requires_grad(int n, td_tensor *const *in) {
    for (int i = 0; i < n; i++)
        if (in[i] && in[i]->requires_grad) return true;
    return false;
}

/* ---- probe mode ---- */

static _Thread_local int probe_depth;
static _Thread_local bool probe_hit;

bool td__probe_begin(void) {
    bool old = probe_hit;
    probe_hit = false;
    probe_depth++;
    return old;
}

bool td__probe_end(bool old) {
    bool hit = probe_hit;
    probe_depth--;
    probe_hit = old || hit;
    return hit;
}

void td__probe_note(int n, td_tensor *const *in) {
    if (probe_depth && td__any_requires_grad(n, in)) probe_hit = true;
}

/* ---- the hooks ---- */

/* Records a node for a differentiable op; a failure fails the op (the
** dispatcher releases its outputs), so no result escapes unrecorded. */
static td_status record_op(td_op_kind kind, int n_in, td_tensor *const *in, int n_out, td_tensor *const *out,
                           const td_op_params *p) {
    if (!td__any_requires_grad(n_in, in)) return TD_OK;
    if (!td_grad_enabled()) {
        td__probe_note(n_in, in);
        return TD_OK;
    }
    const td__formula *f = td__formula_for(kind);
    if (!f)
        return TD_ERR(TD_ERR_UNSUPPORTED, "%s: no derivative formula, and an input requires grad", td_op_name(kind));
    td_node *n = td__node_new(td_op_name(kind), f->fn, kind, n_in, in, n_out, out);
    if (!n) return td_last_status();
    if (p) n->p = *p;
    for (int i = 0; i < n_in && i < 32; i++)
        if (((f->save_in >> i) & 1) && in[i]) {
            n->saved_in[i] = td_retain(in[i]);
            n->saved_version[i] = atomic_load(&in[i]->storage->version);
            n->has_saved = true;
        }
    for (int j = 0; j < n_out && j < 32; j++)
        if (((f->save_out >> j) & 1) && out[j]) {
            n->saved_out[j] = td__alias(out[j]);
            n->saved_version[n_in + j] = atomic_load(&out[j]->storage->version);
            n->has_saved = true;
            if (!n->saved_out[j]) {
                td__node_release(n);
                return td_last_status();
            }
        }
    int n_diff = f->n_diff_out ? f->n_diff_out : n_out;
    for (int j = 0; j < n_diff; j++)
        if (out[j] && td_dtype_is_float(out[j]->dtype)) td__node_attach(n, out[j], j);
    td__node_release(n); /* the outputs hold it now */
    return TD_OK;
}

static void release_tensor(td_tensor *t) {
    td_node *n = t->grad_fn;
    t->grad_fn = NULL;
    td__node_release(n);
    if (t->autograd_meta) {
        td__free_tensor_meta(t->autograd_meta);
        t->autograd_meta = NULL;
    }
}

__attribute__((constructor)) static void install_hooks(void) {
    td__record_hook = record_op;
    td__view_hook = td__record_view;
    td__split_hook = td__record_split;
    td__release_hook = release_tensor;
}
