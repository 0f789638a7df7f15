/*
** The public math block API (include/trident/math.h): compile, bind, the
** specialization cache per input signature, implicit-mode autograd (a run is
** one td_function node whose backward evaluates the symbolic backward graph),
** value_and_grad, checkpoint blocks, and td_m's process-wide cache.
*/
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "math_internal.h"
#include "plan.h"
#include "trident/amp.h"
#include "trident/autograd.h"
#include "trident/math.h"

#define MAX_SPECS 16 /* input signatures cached per block; the oldest goes first */
#define MAX_GRADS 4  /* backward graphs (wrt sets) cached per signature */

/* A backward graph shared by its signature and the autograd nodes that use it. */
typedef struct grad_ref {
    atomic_int refs;
    td_math_grad gr;
    td_math_plan *_Atomic fwd_plan, *_Atomic bwd_plan; /* the fuser's plans of the saving forward and the backward */
} grad_ref;

typedef struct spec {
    int n_in;
    td_dtype dt[TD_MATH_MAX_INPUTS];
    int nd[TD_MATH_MAX_INPUTS];
    int64_t shape[TD_MATH_MAX_INPUTS][TD_MAX_DIMS];
    uint64_t weak;
    td_device dev;
    td_dtype amp;    /* the autocast scope's low dtype for dev, or TD_F32 outside one */
    td_math_graph g; /* the block typed for this signature (with autocast's casts) */
    grad_ref *grads[MAX_GRADS];
    int n_grads;
    td_math_plan *_Atomic plan; /* the fuser's plan of the outputs (implicit mode) */
} spec;

struct td_math_block {
    td_math_graph src; /* as parsed, untyped */
    td_math_options opts;
    spec *specs[MAX_SPECS];
    int n_specs;
    td_math_stats stats;
};

static void grad_ref_release(void *p) {
    grad_ref *r = p;
    if (r && atomic_fetch_sub(&r->refs, 1) == 1) {
        td_math_grad_free(&r->gr);
        td_math_plan_free(atomic_load(&r->fwd_plan));
        td_math_plan_free(atomic_load(&r->bwd_plan));
        free(r);
    }
}

static void spec_free(spec *s) {
    if (!s) return;
    td_math_graph_free(&s->g);
    td_math_plan_free(atomic_load(&s->plan));
    for (int i = 0; i < s->n_grads; i++) grad_ref_release(s->grads[i]);
    free(s);
}

td_status td_math_compile(const char *src, const td_math_options *opts, td_math_block **out) {
    if (out) *out = NULL;
    if (!src || !out) return TD_ERR(TD_ERR_MISUSE, "math_compile: src and out must not be NULL");
    td_math_block *b = calloc(1, sizeof *b);
    if (!b) return TD_ERR(TD_ERR_OOM, "math_compile: out of memory");
    if (opts) b->opts = *opts;
    td_status st = td_math_parse(src, &b->src);
    if (st) {
        td_math_free(b);
        return st;
    }
    *out = b;
    return TD_OK;
}

void td_math_free(td_math_block *b) {
    if (!b) return;
    td_math_graph_free(&b->src);
    for (int i = 0; i < b->n_specs; i++) spec_free(b->specs[i]);
    free(b);
}

int td_math_n_outputs(const td_math_block *b) { return b ? b->src.n_outputs : 0; }
int td_math_n_inputs(const td_math_block *b) { return b ? b->src.n_inputs : 0; }
const char *td_math_input_name(const td_math_block *b, int i) {
    return b && i >= 0 && i < b->src.n_inputs ? b->src.input_names[i] : NULL;
}

td_status td_math_last_stats(const td_math_block *b, td_math_stats *out) {
    if (!b || !out) return TD_ERR(TD_ERR_MISUSE, "math_last_stats: NULL argument");
    *out = b->stats;
    return TD_OK;
}

/* ---- binding and specialization ---- */

static td_status graph_copy(td_math_graph *dst, const td_math_graph *src) {
    td_math_graph_init(dst);
    *dst = *src;
    dst->nodes = NULL, dst->source = NULL, dst->n_inputs = 0;
    dst->nodes = malloc(sizeof *dst->nodes * (size_t)(src->n_nodes ? src->n_nodes : 1));
    dst->source = src->source ? strdup(src->source) : NULL;
    if (!dst->nodes || (src->source && !dst->source))
        return td_math_graph_free(dst), TD_ERR(TD_ERR_OOM, "math block: out of memory");
    memcpy(dst->nodes, src->nodes, sizeof *dst->nodes * (size_t)src->n_nodes);
    dst->cap_nodes = src->n_nodes ? src->n_nodes : 1;
    for (int i = 0; i < src->n_inputs; i++) {
        dst->input_names[i] = strdup(src->input_names[i]);
        if (!dst->input_names[i]) return td_math_graph_free(dst), TD_ERR(TD_ERR_OOM, "math block: out of memory");
        dst->n_inputs = i + 1;
    }
    return TD_OK;
}

/* Resolve the block's names to tensors (vals[k]: +1 references the caller releases) and find or make the
** specialization for their signature. */
static td_status bind(td_math_block *b, const td_math_binding *bindings, int n, td_tensor **vals, spec **out) {
    const td_math_graph *g = &b->src;
    td_status st = TD_OK;
    bool have_dev = false;
    td_device dev = TD_CPU;
    uint64_t weak = 0;
    if (n < 0 || (n > 0 && !bindings)) return TD_ERR(TD_ERR_MISUSE, "math_run: %d bindings at NULL", n);
    int found[TD_MATH_MAX_INPUTS];
    for (int k = 0; k < g->n_inputs; k++) {
        found[k] = -1;
        for (int i = 0; i < n; i++)
            if (bindings[i].name && strcmp(bindings[i].name, g->input_names[k]) == 0) found[k] = i;
        if (found[k] < 0)
            return td_math_error(g, g->input_src_off[k], g->input_src_len[k], TD_ERR_MISUSE,
                                 "unknown name `%s` (not bound)", g->input_names[k]);
        td_tensor *t = bindings[found[k]].tensor;
        if (!t) continue;
        if (td_ndim(t) < 0) return td_error_prefix("math_run: '%s'", g->input_names[k]);
        td_device d = td_tensor_device(t);
        if (have_dev && !td_device_equal(d, dev)) {
            char a[32], c[32];
            return TD_ERR(TD_ERR_DEVICE, "math_run: '%s' is on %s, an earlier input on %s", g->input_names[k],
                          td_device_str(d, a, sizeof a), td_device_str(dev, c, sizeof c));
        }
        dev = d, have_dev = true;
    }
    for (int k = 0; k < g->n_inputs && !st; k++) {
        const td_math_binding *bd = &bindings[found[k]];
        if (bd->tensor)
            vals[k] = td_retain(bd->tensor);
        else {
            vals[k] = td_keep(td_scalar(bd->scalar, TD_F64, dev));
            weak |= 1ull << k;
            if (!vals[k]) st = td_last_status();
        }
    }
    if (st) return st;
    td_dtype amp = TD_F32;
    td_autocast_enabled(dev.type, &amp); /* sets amp inside a scope only */
    for (int i = 0; i < b->n_specs; i++) {
        spec *s = b->specs[i];
        bool same = s->weak == weak && s->amp == amp && td_device_equal(s->dev, dev);
        for (int k = 0; same && k < g->n_inputs; k++) {
            same = s->dt[k] == td_tensor_dtype(vals[k]) && s->nd[k] == td_ndim(vals[k]) &&
                   memcmp(s->shape[k], td_shape(vals[k]), sizeof(int64_t) * (size_t)s->nd[k]) == 0;
        }
        if (same) return *out = s, TD_OK;
    }
    spec *s = calloc(1, sizeof *s);
    if (!s) return TD_ERR(TD_ERR_OOM, "math block: out of memory");
    s->n_in = g->n_inputs, s->weak = weak, s->dev = dev, s->amp = amp;
    for (int k = 0; k < g->n_inputs; k++) {
        s->dt[k] = td_tensor_dtype(vals[k]), s->nd[k] = td_ndim(vals[k]);
        memcpy(s->shape[k], td_shape(vals[k]), sizeof(int64_t) * (size_t)s->nd[k]);
    }
    st = graph_copy(&s->g, g);
    if (!st) {
        s->g.weak_inputs = weak;
        st = td_math_graph_specialize(&s->g, s->dt, s->nd, (const int64_t(*)[TD_MAX_DIMS])s->shape);
    }
    if (!st && amp != TD_F32) {
        td_math_graph cast;
        st = td_math_graph_autocast(&s->g, amp, &cast);
        if (!st) td_math_graph_free(&s->g), s->g = cast;
    }
    if (st) {
        spec_free(s);
        return st;
    }
    if (b->n_specs == MAX_SPECS) {
        spec_free(b->specs[0]);
        memmove(b->specs, b->specs + 1, sizeof b->specs[0] * (MAX_SPECS - 1));
        b->n_specs--;
    }
    b->specs[b->n_specs++] = s;
    *out = s;
    return TD_OK;
}

static grad_ref *get_grad(td_math_block *b, spec *s, uint64_t wrt) {
    for (int i = 0; i < s->n_grads; i++)
        if (s->grads[i]->gr.wrt == wrt) return s->grads[i];
    grad_ref *r = calloc(1, sizeof *r);
    if (!r) return TD_ERR(TD_ERR_OOM, "math block: out of memory"), NULL;
    atomic_init(&r->refs, 1);
    if (td_math_grad_build(&s->g, wrt, b->opts.checkpoint, &r->gr)) return free(r), NULL;
    if (s->n_grads == MAX_GRADS) {
        grad_ref_release(s->grads[0]);
        memmove(s->grads, s->grads + 1, sizeof s->grads[0] * (MAX_GRADS - 1));
        s->n_grads--;
    }
    s->grads[s->n_grads++] = r;
    return r;
}

/* ---- execution ----
** The one place a graph is executed: the fuser's plan for (g, nodes), built on
** first use into *slot (kept with the specialization), or the composed ops
** where the plan cannot be built or refuses the inputs. Writes the values of
** nodes[0..n) (new tensors in the current scope). */
static td_status run_graph(const td_math_graph *g, td_tensor *const *inputs, int n, const int *nodes,
                           td_tensor **values, td_math_plan *_Atomic *slot) {
    td_math_plan *p = atomic_load(slot);
    if (!p && n <= TD_MATH_MAX_OUTPUTS) {
        td_device dev = TD_CPU;
        for (int k = g->n_inputs - 1; k >= 0; k--)
            if (inputs[k]) dev = td_tensor_device(inputs[k]);
        td_math_graph want = *g; /* g with nodes as its outputs (the plan copies what it keeps) */
        want.n_outputs = n;
        memcpy(want.outputs, nodes, sizeof(int) * (size_t)n);
        td_math_plan *expected = NULL;
        if (td_math_plan_build(&want, dev, &p) == TD_OK && !atomic_compare_exchange_strong(slot, &expected, p))
            td_math_plan_free(p), p = expected;
    }
    if (p && td_math_plan_run(p, inputs, values) == TD_OK) return TD_OK;
    return td_math_graph_eval_nodes(g, inputs, n, nodes, values);
}

/* The forward with the values the backward saves: outputs[0..n_out) then saved[0..n_saved). */
static td_status forward_saving(const td_math_graph *g, grad_ref *r, td_tensor *const *inputs, td_tensor **values) {
    const td_math_grad *gr = &r->gr;
    int n = g->n_outputs + gr->n_saved, *nodes = malloc(sizeof(int) * (size_t)(n ? n : 1));
    if (!nodes) return TD_ERR(TD_ERR_OOM, "math block: out of memory");
    memcpy(nodes, g->outputs, sizeof(int) * (size_t)g->n_outputs);
    memcpy(nodes + g->n_outputs, gr->saved, sizeof(int) * (size_t)gr->n_saved);
    td_status st = run_graph(g, inputs, n, nodes, values, &r->fwd_plan);
    free(nodes);
    return st;
}

/* The backward: gradients (outputs of the backward graph) from inputs, upstream grads and saved values. */
static td_status backward_eval(grad_ref *r, int n_in, td_tensor *const *inputs, int n_out, td_tensor *const *gy,
                               td_tensor *const *saved, td_tensor **grads) {
    const td_math_grad *gr = &r->gr;
    td_tensor *all[TD_MATH_MAX_INPUTS];
    for (int k = 0; k < n_in; k++) all[k] = inputs[k];
    for (int k = 0; k < n_out; k++) all[n_in + k] = gy[k];
    for (int s = 0; s < gr->n_saved; s++) all[n_in + n_out + s] = saved[s];
    return run_graph(&gr->graph, all, gr->graph.n_outputs, gr->graph.outputs, grads, &r->bwd_plan);
}

typedef struct run_ctx {
    td_math_block *block;
    spec *s;
    grad_ref *r;
} run_ctx;

static td_status fn_forward(td_function_ctx *ctx, int n_in, td_tensor *const *inputs, int n_out, td_tensor **outputs) {
    run_ctx *rc = td_ctx_user(ctx);
    const td_math_grad *gr = &rc->r->gr;
    td_tensor **values = calloc((size_t)(n_out + gr->n_saved + 1), sizeof *values);
    if (!values) return TD_ERR(TD_ERR_OOM, "math block: out of memory");
    td_status st = forward_saving(&rc->s->g, rc->r, inputs, values);
    if (!st) st = td_ctx_save_for_backward(ctx, n_in, inputs);
    if (!st && gr->n_saved) st = td_ctx_save_for_backward(ctx, gr->n_saved, values + n_out);
    if (!st) {
        for (int k = 0; k < n_out; k++) outputs[k] = values[k];
        atomic_fetch_add(&rc->r->refs, 1);
        td_ctx_set_data(ctx, rc->r, grad_ref_release);
        td_math_stats *stt = &rc->block->stats;
        stt->saved_inputs = n_in, stt->saved_tensors = n_in + gr->n_saved, stt->saved_bytes = 0;
        for (int k = 0; k < n_in + gr->n_saved; k++) {
            td_tensor *t = k < n_in ? inputs[k] : values[n_out + k - n_in];
            stt->saved_bytes += td_numel(t) * (int64_t)td_dtype_size(td_tensor_dtype(t));
        }
        stt->backward_nodes = gr->graph.n_nodes;
    }
    free(values);
    return st; /* the values live in td_function_apply's scope; the ctx and the outputs hold their own references */
}

static td_status fn_backward(td_function_ctx *ctx, int n_out, td_tensor *const *gy, int n_in, td_tensor **grad_inputs) {
    grad_ref *r = td_ctx_data(ctx);
    const td_math_grad *gr = &r->gr;
    td_tensor *inputs[TD_MATH_MAX_INPUTS], *saved[TD_MATH_MAX_INPUTS], *grads[TD_MATH_MAX_OUTPUTS];
    for (int k = 0; k < n_in; k++) inputs[k] = td_ctx_saved(ctx, k);
    for (int s = 0; s < gr->n_saved; s++) saved[s] = td_ctx_saved(ctx, n_in + s);
    td_status st = backward_eval(r, n_in, inputs, n_out, gy, saved, grads);
    if (st) return st;
    for (int k = 0; k < n_in; k++)
        grad_inputs[k] = ((gr->wrt >> k) & 1) && td_ctx_needs_input_grad(ctx, k) ? grads[gr->grad_of[k]] : NULL;
    return TD_OK;
}

static const td_function math_fn = {.name = "math_block", .forward = fn_forward, .backward = fn_backward};

td_status td_math_run(td_math_block *b, const td_math_binding *bindings, int n, td_tensor **outputs) {
    if (!b || !outputs) return TD_ERR(TD_ERR_MISUSE, "math_run: block and outputs must not be NULL");
    int n_out = b->src.n_outputs, n_in = b->src.n_inputs;
    for (int k = 0; k < n_out; k++) outputs[k] = NULL;
    td_tensor *vals[TD_MATH_MAX_INPUTS] = {0};
    spec *s = NULL;
    td_status st = bind(b, bindings, n, vals, &s);
    uint64_t wrt = 0;
    for (int k = 0; !st && k < n_in; k++)
        if (td_requires_grad(vals[k])) wrt |= 1ull << k;
    memset(&b->stats, 0, sizeof b->stats);
    if (!st && (!wrt || !td_grad_enabled())) { /* implicit mode: nothing recorded, nothing saved */
        st = run_graph(&s->g, vals, n_out, s->g.outputs, outputs, &s->plan);
    } else if (!st) {
        run_ctx rc = {.block = b, .s = s, .r = get_grad(b, s, wrt)};
        st = rc.r ? td_function_apply(&math_fn, &rc, n_in, vals, n_out, outputs) : td_last_status();
        b->stats.recorded = st == TD_OK;
    }
    for (int k = 0; k < n_in; k++) td_release(vals[k]);
    return st;
}

td_status td_math_value_and_grad(td_math_block *b, const td_math_binding *bindings, int n, int n_wrt,
                                 const char *const *wrt, td_tensor **value, td_tensor **grads) {
    if (value) *value = NULL;
    for (int i = 0; grads && i < n_wrt; i++) grads[i] = NULL;
    if (!b || n_wrt < 0 || (n_wrt > 0 && (!wrt || !grads)))
        return TD_ERR(TD_ERR_MISUSE, "math_value_and_grad: NULL block, wrt or grads");
    const td_math_graph *g = &b->src;
    int idx[TD_MATH_MAX_INPUTS];
    uint64_t mask = 0;
    for (int i = 0; i < n_wrt; i++) {
        idx[i] = -1;
        for (int k = 0; k < g->n_inputs; k++)
            if (wrt[i] && strcmp(wrt[i], g->input_names[k]) == 0) idx[i] = k;
        if (idx[i] < 0)
            return TD_ERR(TD_ERR_MISUSE, "math_value_and_grad: the block does not read %s", TD_QUOTE(wrt[i]));
        mask |= 1ull << idx[i];
    }
    td_tensor *vals[TD_MATH_MAX_INPUTS] = {0};
    spec *s = NULL;
    td_no_grad_begin();
    td_status st = bind(b, bindings, n, vals, &s);
    for (int i = 0; !st && i < n_wrt; i++) {
        if ((s->weak >> idx[i]) & 1)
            st = TD_ERR(TD_ERR_MISUSE, "math_value_and_grad: '%s' is bound to a number, not a tensor", wrt[i]);
        else if (!td_dtype_is_float(s->dt[idx[i]]))
            st = TD_ERR(TD_ERR_DTYPE, "math_value_and_grad: '%s' is %s, not a float tensor", wrt[i],
                        td_dtype_name(s->dt[idx[i]]));
    }
    const td_math_node *y = st ? NULL : &s->g.nodes[s->g.outputs[0]];
    if (!st && (td__numel(y->ndim, y->shape) != 1 || !td_dtype_is_float(y->dtype)))
        st = TD_ERR(TD_ERR_SHAPE, "math_value_and_grad: the block's value must be one float element, not %s %s",
                    td_dtype_name(y->dtype), td__shape_str(y->ndim, y->shape, (char[96]){0}, 96));
    grad_ref *r = st ? NULL : get_grad(b, s, mask);
    if (!st && !r) st = td_last_status();
    int n_out = g->n_outputs;
    td_tensor **fw = NULL, *gy[TD_MATH_MAX_OUTPUTS] = {0}, *gx[TD_MATH_MAX_OUTPUTS] = {0};
    if (!st) {
        td_scope_begin();
        fw = calloc((size_t)(n_out + r->gr.n_saved + 1), sizeof *fw);
        st = fw ? forward_saving(&s->g, r, vals, fw) : TD_ERR(TD_ERR_OOM, "math block: out of memory");
        for (int k = 0; !st && k < n_out; k++) {
            gy[k] = k == 0 ? td_full_like(fw[k], 1.0) : td_zeros_like(fw[k]);
            if (!gy[k]) st = td_last_status();
        }
        if (!st) st = backward_eval(r, g->n_inputs, vals, n_out, gy, fw + n_out, gx);
        if (!st) {
            if (value) *value = td_keep(fw[0]);
            for (int i = 0; i < n_wrt; i++) grads[i] = td_keep(gx[r->gr.grad_of[idx[i]]]);
        }
        td_scope_end();
        if (!st) {
            if (value) td__scope_add(*value);
            for (int i = 0; i < n_wrt; i++) td__scope_add(grads[i]);
        }
        free(fw);
    }
    td_no_grad_end();
    for (int k = 0; k < g->n_inputs; k++) td_release(vals[k]);
    if (st && value) *value = NULL;
    return st;
}

/* ---- td_m: blocks cached per source string ---- */

#define M_CACHE 64
static pthread_mutex_t m_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char *src;
    td_math_block *block;
} m_cache[M_CACHE];
static int m_n;

td_tensor *td_m(const char *src, ...) {
    if (!src) TD_FAIL_NULL(TD_ERR_MISUSE, "td_m: src is NULL");
    td_math_binding bind_list[TD_MATH_MAX_NAMES];
    int n = 0;
    va_list ap;
    va_start(ap, src);
    for (const char *name; (name = va_arg(ap, const char *)) != NULL;) {
        td_tensor *t = va_arg(ap, td_tensor *);
        if (n == TD_MATH_MAX_NAMES) {
            va_end(ap);
            TD_FAIL_NULL(TD_ERR_MISUSE, "td_m: more than %d names", TD_MATH_MAX_NAMES);
        }
        if (!t) {
            va_end(ap);
            TD_FAIL_NULL(td_last_status() ? td_last_status() : TD_ERR_MISUSE, "td_m: tensor '%s' is NULL", name);
        }
        bind_list[n++] = (td_math_binding){.name = name, .tensor = t};
    }
    va_end(ap);
    pthread_mutex_lock(&m_lock); /* a block runs on one thread at a time: held through the run */
    td_math_block *b = NULL;
    for (int i = 0; i < m_n && !b; i++)
        if (strcmp(m_cache[i].src, src) == 0) b = m_cache[i].block;
    td_status st = TD_OK;
    if (!b) {
        char *copy = strdup(src);
        st = copy ? td_math_compile(src, NULL, &b) : TD_ERR(TD_ERR_OOM, "td_m: out of memory");
        if (st)
            free(copy);
        else {
            if (m_n == M_CACHE) {
                free(m_cache[0].src), td_math_free(m_cache[0].block);
                memmove(m_cache, m_cache + 1, sizeof m_cache[0] * (M_CACHE - 1));
                m_n--;
            }
            m_cache[m_n].src = copy, m_cache[m_n].block = b, m_n++;
        }
    }
    td_tensor *out = NULL;
    if (!st && b->src.n_outputs != 1)
        st = TD_ERR(TD_ERR_MISUSE, "td_m: the block returns %d values (td_math_run takes several)", b->src.n_outputs);
    if (!st) td_math_run(b, bind_list, n, &out);
    pthread_mutex_unlock(&m_lock);
    return out;
}
