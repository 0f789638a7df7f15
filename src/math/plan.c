/*
** The fuser (plan.h): cuts a typed math graph into single-node steps and
** fused elementwise regions, and runs them.
**
** Regions. A node is a buffer (materialized) when it is an output, an
** argument of a single node, a reduction, or the argument of a RESHAPE. Each
** buffer that fuses is a root; a root joins an earlier region of the same
** domain (its shape; a reduction's: its argument's) when everything it loads
** is ready before that region runs, else it opens one. A root's value is
** inlined from its cone back to buffers: an EW node computes at each domain
** element, its arguments through broadcast index maps (a map gives, per dim
** of a node, the domain dim it follows or none: size 1). EXPAND and TRANSPOSE
** only change the map; RESHAPE reads its (materialized) argument with its own
** contiguous strides. The IR shares identical instructions, so a root that
** another root of its region uses is computed once.
*/
#include "math/plan.h"

#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "trident/autograd.h"
#include "trident/kernel.h"

enum { STEP_NODE, STEP_KERNEL };

typedef struct plan_step {
    int kind;
    int node;               /* STEP_NODE */
    td_kernel_ir ir;        /* STEP_KERNEL */
    int *cone, n_cone;      /* STEP_KERNEL: the nodes it computes, in order (for the composed path) */
    td_user_kernel *gpu[2]; /* the region; with ir.split > 1 also the partials' reduction */
    uint32_t grid[2], block[2];
    bool composed; /* the device takes no kernel for it: run cone with td_math_node_eval */
} plan_step;

struct td_math_plan {
    td_math_graph g; /* a copy of the typed graph (nodes and names) */
    td_device dev;
    int n_steps;
    plan_step *steps;
    int *last_use; /* per node: the last step reading it (-1: none, or an output) */
};

static bool is_int(td_dtype dt) { return dt == TD_I32 || dt == TD_I64 || dt == TD_U8; }

/* The reduced dims of a REDUCE node as a contiguous run [*r0, *r1] of its
** argument's dims, size-1 dims going either way; false if they are not. */
static bool reduce_run(const td_math_node *arg, uint32_t dims, int *r0, int *r1) {
    uint32_t m = dims ? dims : (arg->ndim ? (uint32_t)((1ull << arg->ndim) - 1) : 0);
    int lo = -1, hi = -1;
    for (int d = 0; d < arg->ndim; d++)
        if ((m >> d & 1) && arg->shape[d] != 1) lo = lo < 0 ? d : lo, hi = d;
    for (int d = lo; lo >= 0 && d <= hi; d++)
        if (!(m >> d & 1) && arg->shape[d] != 1) return false;
    *r0 = lo < 0 ? 0 : lo, *r1 = lo < 0 ? -1 : hi;
    return true;
}

/* Whether node n is computed inside a region (else it runs as a single node). */
static bool fuses(const td_math_graph *g, int n) {
    const td_math_node *p = &g->nodes[n];
    switch (p->kind) {
    case TD_MK_INPUT:
    case TD_MK_CONST:
    case TD_MK_EXPAND:
    case TD_MK_TRANSPOSE:
    case TD_MK_RESHAPE: return true;
    case TD_MK_EW: return !is_int(p->dtype); /* integer arithmetic keeps the table ops' integer semantics */
    case TD_MK_REDUCE: {
        int r0, r1;
        return (p->op == TD_MRED_SUM || p->op == TD_MRED_MEAN || p->op == TD_MRED_AMAX || p->op == TD_MRED_AMIN) &&
               !is_int(p->dtype) && reduce_run(&g->nodes[p->args[0]], p->dims, &r0, &r1);
    }
    default: return false;
    }
}

typedef struct builder {
    const td_math_graph *g;
    bool *buffer;  /* per node */
    int *produced; /* per node: the step that makes it (-1: an input, or not yet) */
    int step;      /* the region being extended */
    bool *in_cone; /* nodes the region computes */
} builder;

static void contiguous_strides(int ndim, const int64_t *shape, int64_t *st) {
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) st[d] = s, s *= shape[d];
}

/* Load of buffer node b read as (ndim, shape) contiguous through map. */
static int emit_load(builder *b, td_kernel_ir *ir, int node, int ndim, const int64_t *shape, const int *map) {
    const td_math_node *p = &b->g->nodes[node];
    if (p->kind != TD_MK_INPUT && (b->produced[node] < 0 || b->produced[node] >= b->step)) return -1;
    int64_t cs[TD_MAX_DIMS], st[TD_MAX_DIMS] = {0};
    contiguous_strides(ndim, shape, cs);
    for (int d = 0; d < ndim; d++)
        if (map[d] >= 0) st[map[d]] += cs[d];
    int buf = td_ki_buffer(ir, node, p->dtype, false);
    return buf < 0 ? -1 : td_ki_load(ir, buf, st, p->dtype);
}

/* The SSA value of node under map (per dim of node: the domain dim, or -1). -1 if the region cannot take it. */
static int emit(builder *b, td_kernel_ir *ir, int node, const int *map, int root) {
    const td_math_graph *g = b->g;
    const td_math_node *p = &g->nodes[node];
    if (p->kind == TD_MK_INPUT || (b->buffer[node] && node != root && b->produced[node] != b->step))
        return emit_load(b, ir, node, p->ndim, p->shape, map);
    if (b->buffer[node] && node != root && p->kind == TD_MK_REDUCE) return -1; /* this region's own reduction */
    b->in_cone[node] = true;
    int amap[TD_MAX_DIMS];
    switch (p->kind) {
    case TD_MK_CONST: return td_ki_const(ir, p->value, p->dtype);
    case TD_MK_EW: {
        int a[TD_MATH_MAX_ARGS];
        for (int k = 0; k < p->n_args; k++) {
            const td_math_node *q = &g->nodes[p->args[k]];
            for (int d = 0; d < q->ndim; d++) amap[d] = q->shape[d] == 1 ? -1 : map[d + p->ndim - q->ndim];
            if ((a[k] = emit(b, ir, p->args[k], amap, root)) < 0) return -1;
        }
        return td_ki_ew(ir, p->op, p->n_args, a, p->dtype);
    }
    case TD_MK_EXPAND: {
        const td_math_node *q = &g->nodes[p->args[0]];
        for (int d = 0; d < q->ndim; d++) amap[d] = q->shape[d] == 1 ? -1 : map[d + p->ndim - q->ndim];
        return emit(b, ir, p->args[0], amap, root);
    }
    case TD_MK_TRANSPOSE:
        memcpy(amap, map, sizeof amap[0] * p->ndim);
        if (p->ndim >= 2) amap[p->ndim - 1] = map[p->ndim - 2], amap[p->ndim - 2] = map[p->ndim - 1];
        return emit(b, ir, p->args[0], amap, root);
    case TD_MK_RESHAPE: /* the materialized argument's elements as this shape */
        return emit_load(b, ir, p->args[0], p->ndim, p->shape, map);
    default: return -1;
    }
}

/* Add root to the region of step s (its IR in ir); false (ir untouched) if it does not fit. */
static bool add_root(builder *b, plan_step *s, int step, int root) {
    const td_math_node *p = &b->g->nodes[root];
    bool red = p->kind == TD_MK_REDUCE;
    const td_math_node *dom = red ? &b->g->nodes[p->args[0]] : p;
    if (s->ir.ndim != dom->ndim || memcmp(s->ir.shape, dom->shape, sizeof dom->shape[0] * dom->ndim) ||
        s->ir.red_value >= 0)
        return false;
    td_kernel_ir save = s->ir;
    save.insns = malloc(sizeof *save.insns * (size_t)(s->ir.cap_insns ? s->ir.cap_insns : 1));
    bool *cone_save = malloc(sizeof *cone_save * (size_t)b->g->n_nodes);
    if (!save.insns || !cone_save) {
        free(save.insns), free(cone_save);
        return false;
    }
    if (s->ir.n_insns) memcpy(save.insns, s->ir.insns, sizeof *save.insns * (size_t)s->ir.n_insns);
    memcpy(cone_save, b->in_cone, sizeof *cone_save * (size_t)b->g->n_nodes);
    int map[TD_MAX_DIMS];
    for (int d = 0; d < dom->ndim; d++) map[d] = dom->shape[d] == 1 ? -1 : d;
    b->step = step;
    int v = red ? emit(b, &s->ir, p->args[0], map, root) : emit(b, &s->ir, root, map, root);
    int buf = v < 0 ? -1 : td_ki_buffer(&s->ir, root, p->dtype, true);
    if (buf >= 0 && !red && s->ir.n_stores == (int)(sizeof s->ir.store_buf / sizeof s->ir.store_buf[0])) buf = -1;
    if (buf < 0) { /* roll back */
        free(s->ir.insns);
        s->ir = save;
        memcpy(b->in_cone, cone_save, sizeof *cone_save * (size_t)b->g->n_nodes);
        free(cone_save);
        return false;
    }
    free(save.insns), free(cone_save);
    b->in_cone[root] = true;
    if (red) {
        int r0, r1;
        reduce_run(dom, p->dims, &r0, &r1);
        s->ir.red_value = v, s->ir.red_op = p->op, s->ir.red_buf = buf;
        s->ir.outer = s->ir.k = s->ir.inner = 1;
        for (int d = 0; d < dom->ndim; d++)
            *(d < r0 ? &s->ir.outer : d <= r1 ? &s->ir.k : &s->ir.inner) *= dom->shape[d];
    } else {
        s->ir.store_value[s->ir.n_stores] = v, s->ir.store_buf[s->ir.n_stores++] = buf;
    }
    b->produced[root] = step;
    return true;
}

static void step_free(plan_step *s) {
    if (s->kind == STEP_KERNEL) td_ki_free(&s->ir);
    free(s->cone);
    td_kernel_free(s->gpu[0]);
    td_kernel_free(s->gpu[1]);
}

void td_math_plan_free(td_math_plan *p) {
    if (!p) return;
    for (int i = 0; i < p->n_steps; i++) step_free(&p->steps[i]);
    free(p->steps);
    free(p->last_use);
    free(p->g.nodes);
    for (int i = 0; i < p->g.n_inputs; i++) free(p->g.input_names[i]);
    free(p);
}

/* Generate and compile step s's kernel for the plan's GPU device; on any failure it runs composed
** ($TRIDENT_MATH_DEBUG set: the source and the compiler's messages go to stderr). */
static void compile_step(td_math_plan *p, plan_step *s) {
    if (p->dev.type == TD_DEVICE_CPU) return;
    bool cuda = p->dev.type == TD_DEVICE_CUDA;
    for (int part = 0; part < (s->ir.split > 1 ? 2 : 1) && !s->composed; part++) {
        char *src = cuda ? td_ki_emit_cuda(&s->ir, part, &s->grid[part], &s->block[part])
                         : td_ki_emit_glsl(&s->ir, part, &s->grid[part], &s->block[part]);
        char log[2048] = "";
        if (!src || td_kernel_compile(p->dev, cuda ? TD_KERNEL_CUDA : TD_KERNEL_GLSL, src,
                                      cuda ? "td_math_kernel" : NULL, NULL, &s->gpu[part], log, sizeof log) != TD_OK) {
            s->composed = true;
            if (getenv("TRIDENT_MATH_DEBUG"))
                fprintf(stderr, "math block: region runs composed: %s\n%s\n%s\n", src ? "compile failed" : "no kernel",
                        src ? src : "", src && log[0] ? log : td_last_error());
        }
        free(src);
    }
}

td_status td_math_plan_build(const td_math_graph *typed, td_device dev, td_math_plan **out) {
    if (!out) return TD_ERR(TD_ERR_MISUSE, "td_math_plan_build: out is NULL");
    *out = NULL;
    if (!typed || !typed->typed) return TD_ERR(TD_ERR_MISUSE, "td_math_plan_build: the graph is not specialized");
    int n = typed->n_nodes;
    td_math_plan *p = calloc(1, sizeof *p);
    builder b = {.g = NULL};
    bool *live = calloc((size_t)n + 1, sizeof *live);
    b.buffer = calloc((size_t)n + 1, sizeof *b.buffer);
    b.produced = malloc(sizeof *b.produced * ((size_t)n + 1));
    b.in_cone = calloc((size_t)n + 1, sizeof *b.in_cone);
    if (!p || !live || !b.buffer || !b.produced || !b.in_cone) goto oom;
    p->dev = dev;
    p->g = *typed;
    p->g.source = NULL;
    p->g.nodes = malloc(sizeof *p->g.nodes * ((size_t)n + 1));
    p->steps = calloc((size_t)n + 1, sizeof *p->steps);
    p->last_use = malloc(sizeof *p->last_use * ((size_t)n + 1));
    memset(p->g.input_names, 0, sizeof p->g.input_names);
    if (!p->g.nodes || !p->steps || !p->last_use) goto oom;
    memcpy(p->g.nodes, typed->nodes, sizeof *p->g.nodes * (size_t)n);
    p->g.cap_nodes = n;
    for (int i = 0; i < typed->n_inputs; i++)
        if (!(p->g.input_names[i] = strdup(typed->input_names[i]))) goto oom;
    const td_math_graph *g = b.g = &p->g;
    /* live nodes and buffers */
    for (int k = 0; k < g->n_outputs; k++) live[g->outputs[k]] = b.buffer[g->outputs[k]] = true;
    for (int i = n - 1; i >= 0; i--) {
        if (!live[i]) continue;
        const td_math_node *q = &g->nodes[i];
        bool single = !fuses(g, i);
        if (single || q->kind == TD_MK_REDUCE) b.buffer[i] = true; /* results of single nodes and reductions */
        for (int k = 0; k < q->n_args; k++) {
            if (q->args[k] < 0) continue;
            live[q->args[k]] = true;
            if (single || q->kind == TD_MK_RESHAPE) b.buffer[q->args[k]] = true;
        }
    }
    for (int i = 0; i < n; i++) b.produced[i] = p->last_use[i] = -1;
    /* steps in topological order */
    for (int i = 0; i < n; i++) {
        const td_math_node *q = &g->nodes[i];
        if (!live[i] || q->kind == TD_MK_INPUT) continue;
        if (!fuses(g, i)) {
            p->steps[p->n_steps] = (plan_step){.kind = STEP_NODE, .node = i};
            b.produced[i] = p->n_steps++;
            continue;
        }
        if (!b.buffer[i]) continue;
        bool placed = false;
        for (int s = 0; s < p->n_steps && !placed; s++)
            if (p->steps[s].kind == STEP_KERNEL) placed = add_root(&b, &p->steps[s], s, i);
        if (placed) continue;
        plan_step *s = &p->steps[p->n_steps];
        const td_math_node *dom = q->kind == TD_MK_REDUCE ? &g->nodes[q->args[0]] : q;
        *s = (plan_step){.kind = STEP_KERNEL};
        td_ki_init(&s->ir, dom->ndim, dom->shape);
        if (!add_root(&b, s, p->n_steps, i)) {
            td_ki_free(&s->ir);
            goto oom;
        }
        p->n_steps++;
    }
    /* finish the kernels: their cones (composed path), dims, slots, GPU code */
    for (int s = 0; s < p->n_steps; s++) {
        plan_step *st = &p->steps[s];
        if (st->kind == STEP_NODE) {
            for (int k = 0; k < g->nodes[st->node].n_args; k++)
                if (g->nodes[st->node].args[k] >= 0) p->last_use[g->nodes[st->node].args[k]] = s;
            continue;
        }
        for (int b2 = 0; b2 < st->ir.n_loaded; b2++) p->last_use[st->ir.buf_node[b2]] = s;
        if (!td_ki_finish(&st->ir)) goto oom;
        st->cone = malloc(sizeof *st->cone * (size_t)n);
        if (!st->cone) goto oom;
        /* the composed path recomputes the region's nodes: those inlined in its cone */
        memset(b.in_cone, 0, sizeof *b.in_cone * (size_t)n);
        b.step = s;
        for (int v = st->ir.n_loaded; v < st->ir.n_bufs; v++) {
            int r = st->ir.buf_node[v], map[TD_MAX_DIMS];
            const td_math_node *q = &g->nodes[r];
            const td_math_node *dom = q->kind == TD_MK_REDUCE ? &g->nodes[q->args[0]] : q;
            for (int d = 0; d < dom->ndim; d++) map[d] = d;
            td_kernel_ir scratch;
            td_ki_init(&scratch, dom->ndim, dom->shape);
            if (q->kind == TD_MK_REDUCE)
                emit(&b, &scratch, q->args[0], map, r);
            else
                emit(&b, &scratch, r, map, r);
            b.in_cone[r] = true;
            td_ki_free(&scratch);
        }
        for (int i = 0; i < n; i++)
            if (b.in_cone[i] && g->nodes[i].kind != TD_MK_INPUT) st->cone[st->n_cone++] = i;
        compile_step(p, st);
    }
    for (int k = 0; k < g->n_outputs; k++) p->last_use[g->outputs[k]] = -1; /* kept for the caller */
    free(live), free(b.buffer), free(b.produced), free(b.in_cone);
    *out = p;
    return TD_OK;
oom:
    free(live), free(b.buffer), free(b.produced), free(b.in_cone);
    td_math_plan_free(p);
    return TD_ERR(TD_ERR_OOM, "td_math_plan_build: out of host memory");
}

/* Drop node i's value (a scoped tensor of this run) now. */
static void drop(td_tensor **vals, int i) {
    td_keep(vals[i]);
    td_release(vals[i]);
    vals[i] = NULL;
}

/* Run step s composed: each node of its cone through the table ops. */
static td_status run_composed(td_math_plan *p, plan_step *s, td_tensor **vals, const bool *owned) {
    const td_math_graph *g = &p->g;
    td_status st = TD_OK;
    for (int c = 0; c < s->n_cone && st == TD_OK; c++) {
        int i = s->cone[c];
        const td_math_node *q = &g->nodes[i];
        td_tensor *args[TD_MATH_MAX_ARGS] = {NULL};
        for (int k = 0; k < q->n_args; k++) args[k] = q->args[k] >= 0 ? vals[q->args[k]] : NULL;
        if (!(vals[i] = td_math_node_eval(g, i, args))) st = td_last_status();
    }
    /* keep the stored roots, drop the region's inner values */
    for (int c = 0; c < s->n_cone; c++) {
        int i = s->cone[c];
        bool root = false;
        for (int b = s->ir.n_loaded; b < s->ir.n_bufs; b++) root |= s->ir.buf_node[b] == i;
        if (!root && vals[i] && !owned[i]) drop(vals, i);
    }
    return st;
}

static td_status run_kernel(td_math_plan *p, plan_step *s, td_tensor **vals) {
    const td_math_graph *g = &p->g;
    td_tensor *t[TD_KI_MAX_BUFS + 1];
    for (int b = 0; b < s->ir.n_bufs; b++) {
        const td_math_node *q = &g->nodes[s->ir.buf_node[b]];
        if (b >= s->ir.n_loaded) {
            vals[s->ir.buf_node[b]] = td_empty(q->ndim, q->shape, q->dtype, p->dev);
            if (!vals[s->ir.buf_node[b]]) return td_last_status();
        }
        t[b] = vals[s->ir.buf_node[b]];
    }
    if (p->dev.type == TD_DEVICE_CPU) {
        void *host[TD_KI_MAX_BUFS];
        for (int b = 0; b < s->ir.n_bufs; b++) host[b] = td__host_data(t[b]);
        return td_ki_run_cpu(&s->ir, host) ? TD_OK : TD_ERR(TD_ERR_OOM, "math block: out of host memory");
    }
    bool cuda = p->dev.type == TD_DEVICE_CUDA, split = s->ir.red_value >= 0 && s->ir.split > 1;
    if (split) { /* the chunks' partials, in the compute dtype */
        int64_t n = s->ir.outer * s->ir.inner * s->ir.split;
        if (!(t[s->ir.n_bufs] = td_empty(1, &n, s->ir.compute, p->dev))) return td_last_status();
    }
    uint32_t grid[3] = {s->grid[0], 1, 1}, block[3] = {s->block[0], 1, 1};
    td_status st = td__kernel_launch(s->gpu[0], grid, cuda ? block : NULL, 0, s->ir.n_bufs + split, t, NULL, 0);
    if (st || !split) return st;
    td_tensor *fin[2] = {t[s->ir.n_bufs], t[s->ir.red_buf]};
    grid[0] = s->grid[1], block[0] = s->block[1];
    st = td__kernel_launch(s->gpu[1], grid, cuda ? block : NULL, 0, 2, fin, NULL, 0);
    td_keep(fin[0]);
    td_release(fin[0]); /* freed once the launches that use it are done (the backends keep it alive) */
    return st;
}

td_status td_math_plan_run(td_math_plan *p, td_tensor *const *inputs, td_tensor **outputs) {
    if (!p || !outputs || (p->g.n_inputs && !inputs)) return TD_ERR(TD_ERR_MISUSE, "td_math_plan_run: NULL argument");
    const td_math_graph *g = &p->g;
    int n = g->n_nodes;
    for (int k = 0; k < g->n_outputs; k++) outputs[k] = NULL;
    enum { ON_STACK = 64 }; /* graphs of up to this many nodes run without a malloc */
    td_tensor *vals_here[ON_STACK];
    bool owned_here[ON_STACK];
    bool heap = n >= ON_STACK;
    td_tensor **vals = heap ? calloc((size_t)n + 1, sizeof *vals) : vals_here;
    bool *owned = heap ? calloc((size_t)n + 1, sizeof *owned) : owned_here; /* inputs: borrowed from the caller */
    if (!vals || !owned) {
        if (heap) free(vals), free(owned);
        return TD_ERR(TD_ERR_OOM, "td_math_plan_run: out of host memory");
    }
    if (!heap) memset(vals, 0, sizeof *vals * ((size_t)n + 1)), memset(owned, 0, sizeof *owned * ((size_t)n + 1));
    td_status st = TD_OK;
    td_no_grad_begin();
    td_scope_begin();
    for (int i = 0; i < n && st == TD_OK; i++) {
        const td_math_node *q = &g->nodes[i];
        if (q->kind != TD_MK_INPUT) continue;
        td_tensor *x = inputs[q->input];
        if (!x) {
            st = TD_ERR(TD_ERR_MISUSE, "math block: input `%s` is NULL", g->input_names[q->input]);
            break;
        }
        char a[32], b[32];
        if (!td_device_equal(td_tensor_device(x), p->dev))
            st = TD_ERR(TD_ERR_DEVICE, "math block: input `%s` is on %s, the block was built for %s",
                        g->input_names[q->input], td_device_str(td_tensor_device(x), a, sizeof a),
                        td_device_str(p->dev, b, sizeof b));
        else if (td_tensor_dtype(x) != q->dtype || td_ndim(x) != q->ndim ||
                 memcmp(td_shape(x), q->shape, sizeof q->shape[0] * q->ndim))
            st = TD_ERR(TD_ERR_SHAPE, "math block: input `%s` is not of the dtype and shape the block was built for",
                        g->input_names[q->input]);
        else if (!td_is_contiguous(x) || (p->dev.type != TD_DEVICE_CPU && td_storage_offset(x) != 0)) {
            vals[i] = td_is_contiguous(x) ? td_clone(x) : td_contiguous(x); /* kernels bind element 0, contiguous */
            if (!vals[i]) st = td_last_status();
        } else {
            vals[i] = x, owned[i] = true;
        }
    }
    for (int s = 0; s < p->n_steps && st == TD_OK; s++) {
        plan_step *ps = &p->steps[s];
        if (ps->kind == STEP_NODE) {
            const td_math_node *q = &g->nodes[ps->node];
            td_tensor *args[TD_MATH_MAX_ARGS] = {NULL};
            for (int k = 0; k < q->n_args; k++) args[k] = q->args[k] >= 0 ? vals[q->args[k]] : NULL;
            if (!(vals[ps->node] = td_math_node_eval(g, ps->node, args))) st = td_last_status();
        } else {
            st = ps->composed ? run_composed(p, ps, vals, owned) : run_kernel(p, ps, vals);
        }
        for (int i = 0; i < n && st == TD_OK; i++) /* values no later step reads (outputs have last use -1) */
            if (p->last_use[i] == s && vals[i] && !owned[i]) drop(vals, i);
    }
    if (st == TD_OK)
        for (int k = 0; k < g->n_outputs; k++) {
            int i = g->outputs[k];
            bool again = owned[i];
            for (int j = 0; j < k; j++) again |= g->outputs[j] == i;
            outputs[k] = again ? td_retain(vals[i]) : td_keep(vals[i]);
        }
    td_scope_end();
    td_no_grad_end();
    for (int k = 0; k < g->n_outputs; k++) td__scope_add(outputs[k]);
    if (heap) free(vals), free(owned);
    return st;
}

int td_math_plan_kernels(const td_math_plan *p) {
    int k = 0;
    for (int s = 0; p && s < p->n_steps; s++) k += p->steps[s].kind == STEP_KERNEL && !p->steps[s].composed;
    return k;
}

int td_math_plan_composed(const td_math_plan *p) {
    int k = 0;
    for (int s = 0; p && s < p->n_steps; s++) k += p->steps[s].kind == STEP_NODE || p->steps[s].composed;
    return k;
}

static const char *kind_name(int kind) {
    static const char *names[] = {"input",     "const",  "ew",      "reduce",  "softmax",       "log_softmax", "matmul",
                                  "transpose", "expand", "reshape", "one_hot", "cross_entropy", "layer_norm"};
    return kind >= 0 && kind < TD_MK_COUNT ? names[kind] : "?";
}

void td_math_plan_print(const td_math_plan *p, const char *lang, FILE *f) {
    for (int s = 0; s < p->n_steps; s++) {
        const plan_step *ps = &p->steps[s];
        if (ps->kind == STEP_NODE) {
            const td_math_node *q = &p->g.nodes[ps->node];
            fprintf(f, "// step %d: t%d = %s(", s, ps->node, kind_name(q->kind));
            for (int k = 0; k < q->n_args; k++) fprintf(f, "%st%d", k ? ", " : "", q->args[k]);
            fprintf(f, ") through the table ops\n\n");
            continue;
        }
        fprintf(f, "// step %d: fused region of %d nodes\n", s, ps->n_cone);
        if (strcmp(lang, "cuda") && strcmp(lang, "glsl")) {
            td_ki_print(&ps->ir, &p->g, f);
            fprintf(f, "\n");
            continue;
        }
        for (int part = 0; part < (ps->ir.split > 1 ? 2 : 1); part++) {
            uint32_t grid = 0, block = 0;
            char *src = !strcmp(lang, "cuda") ? td_ki_emit_cuda(&ps->ir, part, &grid, &block)
                                              : td_ki_emit_glsl(&ps->ir, part, &grid, &block);
            if (src)
                fprintf(f, "// %slaunch: %u blocks of %u threads\n%s\n", part ? "then the partials' reduction, " : "",
                        grid, block, src);
            else
                fprintf(f, "// no %s kernel for this region: it runs composed\n\n", lang);
            free(src);
        }
    }
}
