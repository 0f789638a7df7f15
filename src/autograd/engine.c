/*
** The backward engine: td_backward and td_grad.
**
** One run:
**   pass 1  depth-first search from the roots' nodes, giving a post-order and,
**           per node, the inputs whose gradient the run needs (need_mask);
**   pass 2  seed the roots' gradients;
**   pass 3  visit the nodes in reverse post-order (a topological order), call
**           each formula on its accumulated output gradients and add the
**           results into the producers' buffers or the leaves' sums (a
**           formula may take such a sum into its kernel and return the
**           total instead: td__take_input_grad);
**   pass 4  run leaf hooks, then hand out captured gradients and accumulate
**           (+=) into .grad, then run post-accumulate hooks. In a td_backward
**           this happens for each leaf as soon as the last node feeding it
**           has run (counted in pass 1), while the rest of pass 3 goes on:
**           DDP's hooks launch their all-reduces from there.
** Everything runs inside one scope, with grad mode on only under create_graph.
*/
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "autograd_internal.h"

typedef struct leaf_sum {
    td_tensor *leaf;
    td_tensor *grad; /* +1 */
    int64_t pending; /* edges of nodes still to run that feed this leaf */
    bool done;       /* pass 4 ran for it */
} leaf_sum;

typedef struct grad_twin {
    td_tensor *g, *twin; /* +1 each */
    uint64_t version;    /* g's storage version when put */
} grad_twin;

typedef struct run_state {
    const td__engine_req *req;
    uint64_t id;
    td_node **order;
    size_t n_order, cap_order;
    leaf_sum *leaves;
    size_t n_leaves, cap_leaves;
    grad_twin twins[TD__GRAD_TWINS]; /* td__grad_twin_put's, not taken yet */
    int n_twins;
} run_state;

static atomic_uint_fast64_t run_counter;
static _Thread_local bool run_accumulates; /* of the innermost run on this thread */
static _Thread_local run_state *running;   /* the run and node whose formula runs now (td__take_input_grad) */
static _Thread_local const td_node *running_node;

bool td__engine_accumulating(void) { return run_accumulates; }

static bool same_shape(int na, const int64_t *a, int nb, const int64_t *b) {
    if (na != nb) return false;
    for (int i = 0; i < na; i++)
        if (a[i] != b[i]) return false;
    return true;
}

/* *slot += g, where *slot is +1 (NULL: none yet). */
static td_status accumulate(td_tensor **slot, td_tensor *g) {
    if (!*slot) {
        *slot = td_retain(g);
        return TD_OK;
    }
    td_tensor *s = td_keep(td_add(*slot, g));
    if (!s) return td_last_status();
    td_release(*slot);
    *slot = s;
    return TD_OK;
}

static bool leaf_captured(const run_state *rs, const td_tensor *leaf) {
    for (int k = 0; k < rs->req->n_captures; k++)
        if (rs->req->captures[k] == leaf) return true;
    return false;
}

static leaf_sum *find_leaf(run_state *rs, const td_tensor *leaf) {
    for (size_t k = 0; k < rs->n_leaves; k++)
        if (rs->leaves[k].leaf == leaf) return &rs->leaves[k];
    return NULL;
}

/* The leaf's entry, made (with no gradient yet) when missing; NULL when out of memory. */
static leaf_sum *leaf_entry(run_state *rs, td_tensor *leaf) {
    leaf_sum *l = find_leaf(rs, leaf);
    if (l) return l;
    if (rs->n_leaves == rs->cap_leaves) {
        size_t cap = rs->cap_leaves ? rs->cap_leaves * 2 : 16;
        leaf_sum *grown = realloc(rs->leaves, cap * sizeof *grown);
        if (!grown) return NULL;
        rs->leaves = grown;
        rs->cap_leaves = cap;
    }
    rs->leaves[rs->n_leaves] = (leaf_sum){.leaf = leaf};
    return &rs->leaves[rs->n_leaves++];
}

/* g may come in a lower dtype than leaf's (keeps_low_grad); a second one is summed in leaf's dtype. */
static td_status add_to_leaf(run_state *rs, td_tensor *leaf, td_tensor *g) {
    leaf_sum *l = leaf_entry(rs, leaf);
    if (!l) return TD_ERR(TD_ERR_OOM, "%s: out of host memory", rs->req->api);
    if (l->grad && l->grad->dtype != leaf->dtype && g->dtype != leaf->dtype && !(g = td_cast(g, leaf->dtype)))
        return td_last_status();
    return accumulate(&l->grad, g);
}

/* Whether leaf's gradient may reach finish_leaf in the dtype its formula gave (an autocast weight's bf16 dW): the
** first .grad is then made by one cast, into the grad slot or as a fresh tensor, where a cast and then a copy (or
** clone) were two passes. Not when a hook or a capture would see it, or under create_graph. */
static bool keeps_low_grad(const run_state *rs, const td_tensor *leaf) {
    return rs->req->accumulate && !rs->req->create_graph && !td__has_leaf_hooks(leaf) && !leaf_captured(rs, leaf);
}

/* pass 1, for td_backward: count, per leaf, the edges of the run's nodes that feed it. */
static td_status count_leaf_edges(run_state *rs) {
    for (size_t k = 0; k < rs->n_order; k++) {
        td_node *n = rs->order[k];
        for (int i = 0; i < n->n_in && i < 64; i++) {
            if (!n->edges[i].leaf || !td__needs(n, i)) continue;
            leaf_sum *l = leaf_entry(rs, n->edges[i].leaf);
            if (!l) return TD_ERR(TD_ERR_OOM, "%s: out of host memory", rs->req->api);
            l->pending++;
        }
    }
    return TD_OK;
}

static bool node_is_target(const run_state *rs, const td_node *n) {
    for (int k = 0; k < rs->req->n_captures; k++)
        if (rs->req->captures[k]->grad_fn == n) return true;
    return false;
}

static bool edge_needed(const run_state *rs, const td__edge *e) {
    if (e->node)
        return e->node->need_mask || node_is_target(rs, e->node) || (e->node->side_effects && rs->req->accumulate);
    if (e->leaf) return rs->req->accumulate || leaf_captured(rs, e->leaf);
    return false;
}

/* Whether e leads to a cast from a wider float on the same device whose backward only widens the gradient again
** (td__grad_dtype), so that a gradient already in the wide dtype passes through it as it is. */
static bool widening_cast(const run_state *rs, const td__edge *e) {
    const td_node *c = e->node;
    if (!c || c->kind != TD_OP_COPY || c->n_in != 1 || c->n_out != 1 || rs->req->create_graph || node_is_target(rs, c))
        return false;
    const td__tmeta *src = &c->in_meta[0], *dst = &c->out_meta[0];
    return src->present && td_dtype_is_float(src->dtype) && td_dtype_is_float(dst->dtype) &&
           td_dtype_size(src->dtype) > td_dtype_size(dst->dtype) && td_device_equal(src->device, dst->device);
}

/* pass 1: iterative DFS; a node is appended after all its inputs' nodes. */
static td_status topo_sort(run_state *rs) {
    typedef struct frame {
        td_node *n;
        int next;
    } frame;
    size_t cap = 64, top = 0;
    frame *stack = malloc(cap * sizeof *stack);
    if (!stack) return TD_ERR(TD_ERR_OOM, "%s: out of host memory", rs->req->api);
    td_status st = TD_OK;
    for (int r = 0; r < rs->req->n_roots && st == TD_OK; r++) {
        td_node *root = rs->req->roots[r]->grad_fn;
        if (!root || root->run == rs->id) continue;
        root->run = rs->id, root->state = 1, root->buf = NULL;
        stack[top++] = (frame){root, 0};
        while (top && st == TD_OK) {
            frame *f = &stack[top - 1];
            td_node *n = f->n;
            if (f->next < n->n_in) {
                td_node *c = n->edges[f->next++].node;
                if (!c || c->run == rs->id) continue; /* visited: graphs are acyclic, so it is finished */
                c->run = rs->id, c->state = 1, c->buf = NULL;
                if (top == cap) {
                    frame *s = realloc(stack, 2 * cap * sizeof *s);
                    if (!s) {
                        st = TD_ERR(TD_ERR_OOM, "%s: out of host memory", rs->req->api);
                        break;
                    }
                    stack = s, cap *= 2;
                }
                stack[top++] = (frame){c, 0};
                continue;
            }
            top--;
            n->need_mask = n->wide_mask = 0;
            for (int i = 0; i < n->n_in && i < 64; i++) {
                if (edge_needed(rs, &n->edges[i])) n->need_mask |= (uint64_t)1 << i;
                if (widening_cast(rs, &n->edges[i])) n->wide_mask |= (uint64_t)1 << i;
            }
            n->state = 2;
            if (rs->n_order == rs->cap_order) {
                size_t c2 = rs->cap_order ? rs->cap_order * 2 : 64;
                td_node **o = realloc(rs->order, c2 * sizeof *o);
                if (!o) {
                    st = TD_ERR(TD_ERR_OOM, "%s: out of host memory", rs->req->api);
                    break;
                }
                rs->order = o, rs->cap_order = c2;
            }
            rs->order[rs->n_order++] = n;
        }
    }
    free(stack);
    return st;
}

static td_status add_to_output(run_state *rs, td_node *n, int nr, td_tensor *g) {
    if (!n->buf) {
        n->buf = calloc((size_t)n->n_out, sizeof *n->buf);
        if (!n->buf) return TD_ERR(TD_ERR_OOM, "%s: out of host memory", rs->req->api);
    }
    return accumulate(&n->buf[nr], g);
}

static void free_buf(td_node *n) {
    if (!n->buf) return;
    for (int j = 0; j < n->n_out; j++) td_release(n->buf[j]);
    free(n->buf);
    n->buf = NULL;
}

/* A formula's gradient for input i, brought to the input's shape and (unless keep_dtype) dtype. */
static td_tensor *fit_grad(td_node *n, int i, td_tensor *g, bool keep_dtype) {
    const td__tmeta *m = &n->in_meta[i];
    if (!same_shape(g->ndim, g->shape, m->ndim, m->shape)) {
        int nb;
        int64_t b[TD_MAX_DIMS];
        if (td_broadcast_shapes(m->ndim, m->shape, g->ndim, g->shape, &nb, b) != TD_OK ||
            !same_shape(nb, b, g->ndim, g->shape)) {
            char s1[96], s2[96];
            TD_FAIL_NULL(TD_ERR_SHAPE, "%s backward: gradient of shape %s for input %d of shape %s", n->name,
                         td__shape_str(g->ndim, g->shape, s1, sizeof s1), i,
                         td__shape_str(m->ndim, m->shape, s2, sizeof s2));
        }
        g = td__sum_to(g, m->ndim, m->shape);
    }
    bool low = keep_dtype && g && td_dtype_is_float(g->dtype) && td_dtype_size(g->dtype) < td_dtype_size(m->dtype);
    bool wide = g && g->dtype == td__grad_dtype(n, i); /* the cast behind input i widens it back anyway */
    return g && g->dtype != m->dtype && !low && !wide ? td_cast(g, m->dtype) : g;
}

/* pass 3 for one node. */
static td_status run_node(run_state *rs, td_node *n) {
    bool any = false;
    for (int j = 0; n->buf && j < n->n_out; j++) any |= n->buf[j] != NULL;
    if (!any || !(n->need_mask || (n->side_effects && rs->req->accumulate))) return TD_OK;
    if (n->saved_freed)
        return TD_ERR(TD_ERR_STATE,
                      "%s: trying to backward through the graph a second time (or to use its saved tensors after "
                      "they were freed); pass retain_graph=true to the first backward",
                      n->name);
    td_tensor *gx[64] = {0};
    const char *at_module = td__prof_at.module, *at_node = td__prof_at.node;
    bool at_backward = td__prof_at.backward;
    if (__builtin_expect(td__profiling, 0)) /* its ops are the backward of n, issued by n's module */
        td__prof_at.module = n->module, td__prof_at.node = n->name, td__prof_at.backward = true;
    td_scope_begin();
    run_state *outer = running;
    const td_node *outer_node = running_node;
    running = rs, running_node = n;
    td_status st = n->backward(n, n->buf, gx);
    running = outer, running_node = outer_node;
    if (st != TD_OK && td_last_status() != TD_OK) st = td_last_status();
    for (int i = 0; st == TD_OK && i < n->n_in && i < 64; i++) {
        if (!gx[i] || !td__needs(n, i)) continue;
        td_tensor *g = fit_grad(n, i, gx[i], !n->edges[i].node && keeps_low_grad(rs, n->edges[i].leaf));
        if (!g)
            st = td_last_status() ? td_last_status() : TD_ERR_MISUSE;
        else if (n->edges[i].node)
            st = add_to_output(rs, n->edges[i].node, n->edges[i].nr, g);
        else
            st = add_to_leaf(rs, n->edges[i].leaf, g);
    }
    td_scope_end();
    td__prof_at.module = at_module, td__prof_at.node = at_node, td__prof_at.backward = at_backward;
    return st;
}

static pthread_once_t take_once = PTHREAD_ONCE_INIT;
static bool take_off; /* TRIDENT_GRAD_TAKE=0: the engine's add passes (the baseline) */

static void take_env(void) {
    const char *e = getenv("TRIDENT_GRAD_TAKE");
    take_off = e && !strcmp(e, "0");
}

td_tensor *td__take_input_grad(const td_node *n, int i) {
    run_state *rs = running;
    pthread_once(&take_once, take_env);
    if (take_off || !rs || n != running_node || i < 0 || i >= n->n_in || i >= 64 || !td__needs(n, i) ||
        rs->req->create_graph)
        return NULL;
    const td__edge *e = &n->edges[i];
    td_tensor **slot = NULL;
    if (e->node && e->node->buf) {
        slot = &e->node->buf[e->nr];
    } else if (e->leaf) {
        leaf_sum *l = find_leaf(rs, e->leaf);
        slot = l ? &l->grad : NULL;
    }
    const td__tmeta *m = &n->in_meta[i];
    td_tensor *g = slot ? *slot : NULL;
    if (!g || g->dtype != m->dtype || !td_device_equal(g->storage->device, m->device) ||
        !same_shape(g->ndim, g->shape, m->ndim, m->shape))
        return NULL;
    *slot = NULL;
    return td__scope_add(g); /* the formula's scope releases the sum's reference */
}

static pthread_once_t twin_once = PTHREAD_ONCE_INIT;
static bool twin_off; /* TRIDENT_GRAD_TWIN=0: no twins kept, the consumers cast (the baseline) */

static void twin_env(void) {
    const char *e = getenv("TRIDENT_GRAD_TWIN");
    twin_off = e && !strcmp(e, "0");
}

void td__grad_twin_put(td_tensor *g, td_tensor *twin) {
    run_state *rs = running;
    pthread_once(&twin_once, twin_env);
    if (twin_off || !rs || rs->req->create_graph || !g || !twin || rs->n_twins == TD__GRAD_TWINS) return;
    rs->twins[rs->n_twins++] =
        (grad_twin){.g = td_retain(g), .twin = td_retain(twin), .version = atomic_load(&g->storage->version)};
}

td_tensor *td__grad_cast(td_tensor *g, td_dtype dt) {
    if (!g || g->dtype == dt) return g;
    run_state *rs = running;
    for (int k = 0; rs && k < rs->n_twins; k++) {
        grad_twin e = rs->twins[k];
        if (e.g != g || e.twin->dtype != dt) continue;
        rs->twins[k] = rs->twins[--rs->n_twins];
        bool same = atomic_load(&g->storage->version) == e.version;
        td_release(e.g);
        if (same) return td__scope_add(e.twin);
        td_release(e.twin);
        break;
    }
    return td_cast(g, dt);
}

static td_tensor *root_grad(const td__engine_req *req, int r) {
    td_tensor *t = req->roots[r], *g = req->grads ? req->grads[r] : NULL;
    char a[96], b[96];
    if (!g) {
        if (td__numel(t->ndim, t->shape) != 1)
            TD_FAIL_NULL(TD_ERR_MISUSE,
                         "%s: grad can be created implicitly only for one-element outputs; output %d has shape %s "
                         "(pass grad_output)",
                         req->api, r, td__shape_str(t->ndim, t->shape, a, sizeof a));
        return td_full_like(t, 1.0);
    }
    if (!td__check_arg(g, req->api, "grad_output")) return NULL;
    if (!same_shape(g->ndim, g->shape, t->ndim, t->shape))
        TD_FAIL_NULL(TD_ERR_SHAPE, "%s: grad_output of shape %s for output %d of shape %s", req->api,
                     td__shape_str(g->ndim, g->shape, a, sizeof a), r, td__shape_str(t->ndim, t->shape, b, sizeof b));
    return td_cast(g, t->dtype);
}

static td_status seed_roots(run_state *rs) {
    const td__engine_req *req = rs->req;
    for (int r = 0; r < req->n_roots; r++) {
        td_tensor *t = req->roots[r];
        if (!td__check_arg(t, req->api, "output")) return td_last_status();
        if (!t->requires_grad)
            return TD_ERR(TD_ERR_MISUSE, "%s: output %d does not require grad and has no grad_fn", req->api, r);
        td_tensor *g = root_grad(req, r);
        if (!g) return td_last_status();
        td_status st = t->grad_fn ? add_to_output(rs, t->grad_fn, t->output_nr, g) : add_to_leaf(rs, t, g);
        if (st != TD_OK) return st;
    }
    return TD_OK;
}

/* Whether g, leaf k's summed gradient as finish_leaf holds it, may become the leaf's .grad as it is (where a clone
** was one more pass and a second buffer while both lived): leaf's dtype, no hook or capture saw it, no
** create_graph, and no one else holds it: two references (the leaf's sum and finish_leaf's), its storage its own
** (no view of it or of a larger buffer) and dense from offset 0. The caller's grad_output, a gradient handed to two
** edges, or one a node still keeps all hold a third. */
static bool sole_gradient(const run_state *rs, size_t k, const td_tensor *g) {
    const td_tensor *leaf = rs->leaves[k].leaf;
    return g == rs->leaves[k].grad && g->dtype == leaf->dtype && !rs->req->create_graph && !td__has_leaf_hooks(leaf) &&
           !leaf_captured(rs, leaf) && atomic_load(&g->refcount) == 2 && atomic_load(&g->storage->refcount) == 1 &&
           g->offset == 0 && td__strides_contiguous(g->ndim, g->shape, g->strides) &&
           g->storage->nbytes == (size_t)td__numel(g->ndim, g->shape) * td_dtype_size(g->dtype);
}

/* pass 4 for leaf k. */
static td_status finish_leaf(run_state *rs, size_t k) {
    const td__engine_req *req = rs->req;
    td_tensor *leaf = rs->leaves[k].leaf;
    rs->leaves[k].done = true;
    if (!rs->leaves[k].grad || (!req->accumulate && !leaf_captured(rs, leaf))) {
        td_release(rs->leaves[k].grad);
        rs->leaves[k].grad = NULL;
        return TD_OK;
    }
    td_tensor *g = td__run_leaf_hooks(leaf, rs->leaves[k].grad);
    if (!g) return td_last_status();
    for (int c = 0; c < req->n_captures; c++)
        if (req->captures[c] == leaf) req->captured[c] = td_retain(g);
    td_status st = TD_OK;
    if (req->accumulate) {
        td_tensor *slot = td__grad_slot(leaf); /* a parameter arena's view: written in place */
        if (slot && !req->create_graph && (!leaf->grad || leaf->grad == slot)) {
            st = td_copy_(slot, leaf->grad ? td_add(slot, g) : g); /* copy_ casts a low g (keeps_low_grad) */
            if (st == TD_OK && !leaf->grad) leaf->grad = td_retain(slot);
        } else if (!leaf->grad && sole_gradient(rs, k, g)) { /* no one else can see g: it becomes .grad */
            leaf->grad = td_retain(g);
        } else if (!leaf->grad) { /* a fresh tensor: .grad never aliases a gradient the caller may hold */
            leaf->grad = td_keep(g->dtype != leaf->dtype ? td_cast(g, leaf->dtype) : td_clone(g)); /* cast: new */
            if (!leaf->grad) st = td_last_status();
        } else {
            st = accumulate(&leaf->grad, g);
        }
    }
    td_release(g);
    td_release(rs->leaves[k].grad); /* done: an autocast weight's bf16 sum goes now, not after the whole backward */
    rs->leaves[k].grad = NULL;
    if (st == TD_OK && req->accumulate) st = td__run_post_accumulate_hooks(leaf);
    return st;
}

/* pass 4 for the leaves not finished yet */
static td_status finish_leaves(run_state *rs) {
    for (size_t k = 0; k < rs->n_leaves; k++) {
        if (rs->leaves[k].done) continue;
        td_status st = finish_leaf(rs, k);
        if (st != TD_OK) return st;
    }
    return TD_OK;
}

/* td_backward: after node n ran, finish each leaf it was the last to feed. */
static td_status finish_fed_leaves(run_state *rs, const td_node *n) {
    for (int i = 0; i < n->n_in && i < 64; i++) {
        if (!n->edges[i].leaf || !td__needs(n, i)) continue;
        leaf_sum *l = find_leaf(rs, n->edges[i].leaf);
        if (l && --l->pending == 0 && !l->done) {
            td_status st = finish_leaf(rs, (size_t)(l - rs->leaves));
            if (st != TD_OK) return st;
        }
    }
    return TD_OK;
}

td_status td__engine_run(const td__engine_req *req) {
    run_state rs = {.req = req, .id = atomic_fetch_add(&run_counter, 1) + 1};
    for (int c = 0; c < req->n_captures; c++) req->captured[c] = NULL;
    bool outer_accumulates = run_accumulates;
    run_accumulates = req->accumulate;
    if (req->create_graph)
        td_enable_grad_begin();
    else
        td_no_grad_begin();
    td__autocast_suspend(true); /* formulas run in the dtypes autograd saw, as torch's engine threads */
    td_scope_begin();
    td_status st = topo_sort(&rs);
    if (st == TD_OK && req->accumulate) st = count_leaf_edges(&rs);
    if (st == TD_OK) st = seed_roots(&rs);
    for (size_t k = rs.n_order; st == TD_OK && k-- > 0;) {
        td_node *n = rs.order[k];
        if (node_is_target(&rs, n))
            for (int c = 0; c < req->n_captures; c++)
                if (req->captures[c]->grad_fn == n && n->buf && n->buf[req->captures[c]->output_nr])
                    req->captured[c] = td_retain(n->buf[req->captures[c]->output_nr]);
        st = run_node(&rs, n);
        free_buf(n);
        if (st == TD_OK && req->accumulate) st = finish_fed_leaves(&rs, n);
        if (st == TD_OK && !req->retain_graph && (n->need_mask || (n->side_effects && req->accumulate)))
            td__node_free_saved(n);
    }
    if (st == TD_OK) st = finish_leaves(&rs);
    for (size_t k = 0; k < rs.n_order; k++) free_buf(rs.order[k]);
    for (size_t k = 0; k < rs.n_leaves; k++) td_release(rs.leaves[k].grad);
    for (int k = 0; k < rs.n_twins; k++) td_release(rs.twins[k].g), td_release(rs.twins[k].twin);
    free(rs.order);
    free(rs.leaves);
    td_scope_end();
    td__autocast_suspend(false);
    if (req->create_graph)
        td_enable_grad_end();
    else
        td_no_grad_end();
    run_accumulates = outer_accumulates;
    if (st != TD_OK)
        for (int c = 0; c < req->n_captures; c++) {
            td_release(req->captured[c]);
            req->captured[c] = NULL;
        }
    return st;
}

/* ---- public API ---- */

td_status td_backward(td_tensor *t, td_tensor *grad_output, bool retain_graph) {
    TD_CHECK_ARG_ST(t, "backward");
    td__engine_req req = {.n_roots = 1,
                          .roots = &t,
                          .grads = &grad_output,
                          .accumulate = true,
                          .retain_graph = retain_graph,
                          .api = "backward"};
    return td__engine_run(&req);
}

td_status td_grad(int n_out, td_tensor *const *outputs, td_tensor *const *grad_outputs, int n_in,
                  td_tensor *const *inputs, td_tensor **grads_out, bool retain_graph, bool create_graph,
                  bool allow_unused) {
    if (n_in > 0 && !grads_out) return TD_ERR(TD_ERR_MISUSE, "grad: grads_out is NULL");
    for (int i = 0; i < n_in; i++) grads_out[i] = NULL;
    if (n_out <= 0 || !outputs || n_in <= 0 || !inputs)
        return TD_ERR(TD_ERR_MISUSE, "grad: need at least one output and one input (got %d and %d)", n_out, n_in);
    for (int i = 0; i < n_in; i++) {
        if (!td__check_arg(inputs[i], "grad", "inputs[i]")) return td_last_status();
        if (!inputs[i]->requires_grad) return TD_ERR(TD_ERR_MISUSE, "grad: input %d does not require grad", i);
    }
    td__engine_req req = {.n_roots = n_out,
                          .roots = outputs,
                          .grads = grad_outputs,
                          .n_captures = n_in,
                          .captures = inputs,
                          .captured = grads_out,
                          .retain_graph = retain_graph,
                          .create_graph = create_graph,
                          .api = "grad"};
    td_status st = td__engine_run(&req);
    for (int i = 0; st == TD_OK && i < n_in; i++)
        if (!grads_out[i] && !allow_unused)
            st = TD_ERR(TD_ERR_MISUSE, "grad: input %d was not used to compute the outputs (pass allow_unused)", i);
    return td__hand_out(st, n_in, grads_out);
}

td_status td__hand_out(td_status st, int n, td_tensor **ts) {
    for (int i = 0; i < n; i++) {
        if (st != TD_OK) {
            td_release(ts[i]);
            ts[i] = NULL;
        } else {
            td__scope_add(ts[i]);
        }
    }
    return st;
}
