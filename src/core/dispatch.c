/*
** The dispatcher: every primitive op runs through td__dispatch(), which finds
** the backend of the operands' device, builds td_views, checks support, runs
** the op and lets autograd record it.
*/
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

td__record_fn td__record_hook;
void (*td__release_hook)(td_tensor *t);
void (*td__view_hook)(td_tensor *base, td_tensor *view, const td__view_info *info);
void (*td__split_hook)(td_tensor *base, int n, td_tensor *const *views, int dim);
/* (set by src/io/onnx_trace.c while it traces a forward) sees every op that ran, differentiable or not */
void (*td__trace_hook)(td_op_kind kind, int n_in, td_tensor *const *in, int n_out, td_tensor *const *out,
                       const td_op_params *p);

/* TD_OP_FACTS has TD_OP_LIST's ops in TD_OP_LIST's order */
enum {
#define FACT_ENUM_(N, gemm, batch, cost, sig, probe) FACT_##N,
    TD_OP_FACTS(FACT_ENUM_)
#undef FACT_ENUM_
        FACT_COUNT
};
_Static_assert((int)FACT_COUNT == (int)TD_OP_COUNT, "TD_OP_FACTS has a row per op of TD_OP_LIST");
#define FACT_ORDER_(N, gemm, batch, cost, sig, probe)                                                                  \
    _Static_assert((int)FACT_##N == (int)TD_OP_##N, "TD_OP_FACTS: " #N " is not where TD_OP_LIST has it");
TD_OP_FACTS(FACT_ORDER_)
#undef FACT_ORDER_

#define UNPAREN_(...) __VA_ARGS__
static const td_op_params probe_params[TD_OP_COUNT] = {
#define FACT_PROBE_(N, gemm, batch, cost, sig, params) [TD_OP_##N] = {UNPAREN_ params},
    TD_OP_FACTS(FACT_PROBE_)
#undef FACT_PROBE_
};

/* TD_OP_LIST's columns, then TD_OP_FACTS' into the same rows */
static const td_op_meta op_meta[TD_OP_COUNT] = {
#define TD_OP_META_(N, ni, no, g, dts, lay, amp, s) [TD_OP_##N] = {#N, ni, no, g, dts, lay, s, amp},
    TD_OP_LIST(TD_OP_META_)
#undef TD_OP_META_
#define FACT_META_(N, g, b, c, s, params)                                                                              \
    [TD_OP_##N].gemm = g, [TD_OP_##N].batchable = b, [TD_OP_##N].cost = c, [TD_OP_##N].sig = s,                        \
    [TD_OP_##N].probe = &probe_params[TD_OP_##N],
        TD_OP_FACTS(FACT_META_)
#undef FACT_META_
};

static char op_names[TD_OP_COUNT][32]; /* lower-case names, filled once */

static void fill_names(void) {
    for (int k = 0; k < TD_OP_COUNT; k++) {
        const char *s = op_meta[k].name;
        size_t i = 0;
        for (; s[i] && i + 1 < sizeof op_names[k]; i++)
            op_names[k][i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]);
        op_names[k][i] = 0;
    }
}

const char *td_op_name(td_op_kind k) {
    if ((unsigned)k >= TD_OP_COUNT) return "?";
    static pthread_once_t once = PTHREAD_ONCE_INIT; /* a reader never sees a half-filled table */
    pthread_once(&once, fill_names);
    return op_names[k];
}

const td_op_meta *td_op_info(td_op_kind k) { return (unsigned)k < TD_OP_COUNT ? &op_meta[k] : NULL; }

/* ---- the operand rules of TD_OP_FACTS' sig ---- */

static bool code_allows(char code, td_dtype x, td_dtype dt) {
    switch (code) {
    case 'x': return dt == x;
    case 'b': return dt == TD_BOOL;
    case 'l': return dt == TD_I64;
    case 'i': return dt == TD_I32 || dt == TD_I64;
    case 'f': return dt == TD_F32;
    case 's': return dt == (td_dtype_is_float(x) ? x : TD_I64);
    case 'm': return dt == TD_BOOL || dt == x;
    case 'w': return dt == (x == TD_F64 ? TD_F64 : TD_F32);
    case 'a': return dt == x || (dt == TD_F32 && (x == TD_F16 || x == TD_BF16));
    case 'h': return dt == x || (x == TD_F32 && (dt == TD_F16 || dt == TD_BF16));
    default: return true;
    }
}

static const char *code_wants(char code, td_dtype x, char *buf, size_t n) {
    switch (code) {
    case 'b': return "bool";
    case 'l': return "int64";
    case 'i': return "int32 or int64";
    case 'f': return "float32";
    case 's': return td_dtype_name(td_dtype_is_float(x) ? x : TD_I64);
    case 'm': return snprintf(buf, n, "bool or %s", td_dtype_name(x)), buf;
    case 'w': return td_dtype_name(x == TD_F64 ? TD_F64 : TD_F32);
    case 'a':
        return x == TD_F16 || x == TD_BF16 ? (snprintf(buf, n, "%s or float32", td_dtype_name(x)), buf)
                                           : td_dtype_name(x);
    case 'h': return x == TD_F32 ? "float32, float16 or bfloat16" : td_dtype_name(x);
    default: return td_dtype_name(x);
    }
}

typedef struct sig_side {
    int n;
    bool variadic;
    td_sig_arg a[8];
} sig_side;

static void sig_parse(const char *sig, sig_side *in, sig_side *out) {
    sig_side *side[2] = {in, out};
    for (int k = 0; k < 2; k++) {
        td_sig_arg a;
        side[k]->n = 0, side[k]->variadic = false;
        while (td_sig_next(&sig, &a))
            if (side[k]->n < 8) side[k]->a[side[k]->n++] = a, side[k]->variadic = a.repeat;
    }
}

/* Every op's sig, parsed once: the dispatcher checks operands against it on every call. uniform: the sig is
** all plain 'x' (no optional, repeated or other operands), as many as the op table's fixed counts, so
** operands that are all present and of one dtype pass as they are. */
static sig_side parsed_sigs[TD_OP_COUNT][2];
static bool uniform[TD_OP_COUNT];
static void parse_sigs(void) {
    for (int k = 0; k < TD_OP_COUNT; k++) {
        sig_side *s = parsed_sigs[k];
        sig_parse(op_meta[k].sig, &s[0], &s[1]);
        bool u = op_meta[k].n_in >= 0 && s[0].n == op_meta[k].n_in && s[1].n == op_meta[k].n_out && !s[0].variadic &&
                 !s[1].variadic;
        for (int side = 0; side < 2 && u; side++)
            for (int i = 0; i < s[side].n && u; i++) u = s[side].a[i].code == 'x' && !s[side].a[i].optional;
        uniform[k] = u;
    }
}
static pthread_once_t sigs_once = PTHREAD_ONCE_INIT; /* a reader never sees a half-parsed table */
static const sig_side *sig_of(td_op_kind k) {
    pthread_once(&sigs_once, parse_sigs);
    return parsed_sigs[k];
}

/* The operands of a uniform op, all present and of one dtype (*dt); else false, for the full check. */
static bool uniform_operands(const td_op *op, td_tensor *const *in, td_tensor *const *out, td_dtype *dt) {
    pthread_once(&sigs_once, parse_sigs);
    if (!uniform[op->kind] || op->n_in != op_meta[op->kind].n_in || op->n_out != op_meta[op->kind].n_out) return false;
    td_dtype x = op->n_in ? op->in[0].dtype : op->out[0].dtype;
    for (int i = 0; i < op->n_in; i++)
        if (!in[i] || op->in[i].dtype != x) return false;
    for (int i = 0; i < op->n_out; i++)
        if (!out[i] || op->out[i].dtype != x) return false;
    *dt = x;
    return true;
}

/* Operand i of one side: its signature entry, or NULL past the end. */
static const td_sig_arg *sig_at(const sig_side *s, int i) {
    return i < s->n ? &s->a[i] : s->variadic ? &s->a[s->n - 1] : NULL;
}

static bool dtype_in_class(td_dtype dt, int cls) {
    return cls == TD_DTS_ALL || (cls == TD_DTS_NUM && dt != TD_BOOL) || (cls == TD_DTS_FLOAT && td_dtype_is_float(dt));
}

/* "s" after a count other than one */
static const char *plural(int n) { return n == 1 ? "" : "s"; }

/* op's operand count and dtypes against the op table: TD_ERR_MISUSE or
** TD_ERR_DTYPE; *op_dt: the op's dtype (the first x operand's, else in[0]'s). */
static td_status check_operands(const td_op *op, td_tensor *const *in, td_tensor *const *out, td_dtype *op_dt) {
    if (uniform_operands(op, in, out, op_dt)) return TD_OK;
    const td_op_meta *m = &op_meta[op->kind];
    *op_dt = TD_F32;
    if ((m->n_in >= 0 ? op->n_in != m->n_in : op->n_in < 1) || op->n_out != m->n_out)
        return TD_ERR(TD_ERR_MISUSE, "%s: %d input%s and %d output%s; the op takes %s%d and %d", td_op_name(op->kind),
                      op->n_in, plural(op->n_in), op->n_out, plural(op->n_out), m->n_in < 0 ? "at least " : "",
                      m->n_in < 0 ? 1 : m->n_in, m->n_out);
    const sig_side *s = sig_of(op->kind);
    int n = op->n_in + op->n_out, x_at = -1;
    for (int i = 0; i < n && x_at < 0; i++) {
        const td_sig_arg *a = i < op->n_in ? sig_at(&s[0], i) : sig_at(&s[1], i - op->n_in);
        const td_tensor *t = i < op->n_in ? in[i] : out[i - op->n_in];
        if (a && a->code == 'x' && t) x_at = i;
    }
    if (x_at < 0) x_at = op->n_in && in[0] ? 0 : -1;
    td_dtype x = x_at < 0 ? TD_F32 : x_at < op->n_in ? op->in[x_at].dtype : op->out[x_at - op->n_in].dtype;
    *op_dt = x;
    for (int i = 0; i < n; i++) {
        bool is_in = i < op->n_in;
        int j = is_in ? i : i - op->n_in;
        const td_sig_arg *a = sig_at(&s[is_in ? 0 : 1], j);
        const td_tensor *t = is_in ? in[j] : out[j];
        const td_operand *v = is_in ? &op->in[j] : &op->out[j];
        if (!a || (!t && a->optional)) continue;
        if (!t)
            return TD_ERR(TD_ERR_MISUSE, "%s: %s[%d] is absent; it is not optional", td_op_name(op->kind),
                          is_in ? "in" : "out", j);
        if (!code_allows(a->code, x, v->dtype)) {
            char buf[48];
            return TD_ERR(TD_ERR_DTYPE, "%s: %s[%d] has dtype %s, expected %s", td_op_name(op->kind),
                          is_in ? "in" : "out", j, td_dtype_name(v->dtype), code_wants(a->code, x, buf, sizeof buf));
        }
    }
    return TD_OK;
}

/* The backend's error, prefixed "<op> on <device>: " unless it names the op already. */
static td_status run_failed(td_status st, td_op_kind kind, td_device dev) {
    if (st == TD_OK || strstr(td_last_error(), td_op_name(kind))) return st;
    char d[32];
    td_error_prefix("%s on %s", td_op_name(kind), td_device_str(dev, d, sizeof d));
    return st;
}

/* ---- batches: optimizer steps gathered into one run_many call ----
** Between td__batch_begin and td__batch_end (per thread), ADAM_STEP,
** SGD_STEP and AMP_UNSCALE ops on a backend with run_many are held, with references to their
** tensors, and sent together when the batch ends, fills, meets one of them of
** another kind, device or params, or before any other op runs. */
enum { BATCH_MAX = 256 };
typedef struct held_op {
    td_op op;
    td_operand views[8];
    td_tensor *tensors[8];
    int n_tensors;
} held_op;
static _Thread_local struct {
    bool on;
    int n;
    const td_backend *be;
    td_device dev;
    held_op *ops; /* BATCH_MAX, allocated on first use */
} batch;

static td_status batch_flush(void) {
    if (!batch.n) return TD_OK;
    td_op ops[BATCH_MAX];
    for (int i = 0; i < batch.n; i++) ops[i] = batch.ops[i].op;
    td_status st = __builtin_expect(td__profiling, 0) ? td__profile_run(batch.be, batch.dev, batch.n, ops)
                                                      : batch.be->iface->run_many(batch.dev.index, batch.n, ops);
    st = run_failed(st, ops[0].kind, batch.dev);
    for (int i = 0; i < batch.n; i++)
        for (int k = 0; k < batch.ops[i].n_tensors; k++) td_release(batch.ops[i].tensors[k]);
    batch.n = 0;
    return st;
}

static td_status batch_add(const td_backend *be, td_device dev, const td_op *op, int n_in, td_tensor *const *in,
                           int n_out, td_tensor *const *out) {
    if (!batch.ops && !(batch.ops = calloc(BATCH_MAX, sizeof *batch.ops)))
        return TD_ERR(TD_ERR_OOM, "%s: out of host memory batching optimizer steps", td_op_name(op->kind));
    td_status st = TD_OK;
    if (batch.n && (batch.n == BATCH_MAX || batch.be != be || !td_device_equal(batch.dev, dev) ||
                    batch.ops[0].op.kind != op->kind || memcmp(&batch.ops[0].op.p, &op->p, sizeof op->p)))
        st = batch_flush();
    if (st != TD_OK) return st;
    td__storage_written(n_out, out); /* issued now: the next op's view of the versions */
    held_op *h = &batch.ops[batch.n++];
    batch.be = be, batch.dev = dev;
    h->op = *op;
    h->n_tensors = 0;
    for (int i = 0; i < op->n_in + op->n_out && i < 8; i++)
        h->views[i] = i < op->n_in ? op->in[i] : op->out[i - op->n_in];
    h->op.in = h->views;
    h->op.out = h->views + op->n_in;
    for (int i = 0; i < n_in + n_out && i < 8; i++) {
        td_tensor *t = i < n_in ? in[i] : out[i - n_in];
        if (t) h->tensors[h->n_tensors++] = td_retain(t);
    }
    return TD_OK;
}

void td__batch_begin(void) { batch.on = true; }

td_status td__batch_end(void) {
    batch.on = false;
    return batch_flush();
}

td_status td__dispatch(td_op_kind kind, int n_in, td_tensor *const *in, const td_operand *in_views, int n_out,
                       td_tensor *const *out, const td_op_params *p) {
    enum { MAX_OPERANDS = 64 };
    if (n_in > MAX_OPERANDS || n_out > 8)
        return TD_ERR(TD_ERR_MISUSE, "%s: %d input%s and %d output%s; at most %d and 8", td_op_name(kind), n_in,
                      plural(n_in), n_out, plural(n_out), MAX_OPERANDS);
    const td_tensor *first = n_out ? out[0] : in[0];
    td_device dev = first->storage->device;
    for (int i = 0; i < n_in + n_out; i++) {
        const td_tensor *t = i < n_in ? in[i] : out[i - n_in];
        if (t && (t->storage->device.type != dev.type || t->storage->device.index != dev.index)) {
            char a[32], b[32];
            return TD_ERR(TD_ERR_DEVICE, "%s: operands on different devices (%s and %s); move them with td_to",
                          td_op_name(kind), td_device_str(dev, a, sizeof a),
                          td_device_str(t->storage->device, b, sizeof b));
        }
    }
    td_operand iv[MAX_OPERANDS], ov[8];
    if (!in_views)
        for (int i = 0; i < n_in; i++) iv[i] = in[i] ? td__view_of(in[i]) : (td_operand){0};
    for (int i = 0; i < n_out; i++) ov[i] = out[i] ? td__view_of(out[i]) : (td_operand){0};
    td_op op = {.kind = kind,
                .n_in = n_in,
                .n_out = n_out,
                .in = in_views ? in_views : iv,
                .out = ov,
                .flags = td__op_flags(kind)};
    if (p) op.p = *p;
    const td_backend *be = first->storage->backend;
    td_dtype dt;
    td_status bad = check_operands(&op, in, out, &dt);
    if (bad != TD_OK) return bad;
    if (!dtype_in_class(dt, op_meta[kind].dtypes) || !be->iface->supports(dev.index, &op)) {
        char d[32];
        return TD_ERR(TD_ERR_UNSUPPORTED, "%s: not supported for dtype %s on %s", td_op_name(kind), td_dtype_name(dt),
                      td_device_str(dev, d, sizeof d));
    }
    bool empty = false; /* an output with nothing to write: the backend is not called */
    for (int i = 0; i < n_out; i++)
        for (int d = 0; ov[i].buf && d < ov[i].ndim; d++) empty = empty || ov[i].shape[d] == 0;
    if (batch.on && be->iface->run_many && op_meta[kind].batchable && !empty)
        return batch_add(be, dev, &op, n_in, in, n_out, out);
    td_status held = batch.n ? batch_flush() : TD_OK; /* another op runs after the held ones */
    if (held != TD_OK) return held;
    td_status st = empty                                ? TD_OK
                   : __builtin_expect(td__profiling, 0) ? td__profile_run(be, dev, 1, &op)
                                                        : be->iface->run(dev.index, &op);
    if (st != TD_OK) return run_failed(st, kind, dev);
    td__storage_written(n_out, out);
    if (__builtin_expect(td__trace_hook != NULL, 0)) td__trace_hook(kind, n_in, in, n_out, out, p);
    if (td__record_hook && op_meta[kind].differentiable) return td__record_hook(kind, n_in, in, n_out, out, p);
    return TD_OK;
}

bool td__supports(td_op_kind kind, int n_in, td_tensor *const *in, int n_out, td_tensor *const *out,
                  const td_op_params *p) {
    enum { MAX_PROBED = 8 };
    if (n_in > MAX_PROBED || n_out > MAX_PROBED) return false;
    td_operand iv[MAX_PROBED], ov[MAX_PROBED];
    for (int i = 0; i < n_in; i++) iv[i] = in[i] ? td__view_of(in[i]) : (td_operand){0};
    for (int i = 0; i < n_out; i++) ov[i] = out[i] ? td__view_of(out[i]) : (td_operand){0};
    td_op op = {.kind = kind, .n_in = n_in, .n_out = n_out, .in = iv, .out = ov, .flags = td__op_flags(kind)};
    if (p) op.p = *p;
    const td_tensor *first = n_out ? out[0] : in[0];
    return first->storage->backend->iface->supports(first->storage->device.index, &op);
}

td_status td__dispatch_contig(td_op_kind kind, int n_in, td_tensor *const *in, int n_out, td_tensor *const *out,
                              const td_op_params *p) {
    td_tensor *c[4] = {NULL, NULL, NULL, NULL};
    td_status st =
        n_in <= 4 ? TD_OK : TD_ERR(TD_ERR_MISUSE, "%s: %d contiguous inputs is more than 4", td_op_name(kind), n_in);
    for (int i = 0; i < n_in && st == TD_OK; i++)
        if (in[i] && !(c[i] = td_keep(td_contiguous(in[i])))) st = td_last_status();
    for (int i = 0; i < n_out && st == TD_OK; i++)
        if (!out[i]) st = td_last_status();
    if (st == TD_OK) st = td__dispatch(kind, n_in, c, NULL, n_out, out, p);
    for (int i = 0; i < n_in && i < 4; i++) td_release(c[i]);
    return st;
}

td_tensor *td__finish(td_status st, td_tensor *out) {
    if (st != TD_OK) {
        td_release(out);
        return NULL;
    }
    return td__scope_add(out);
}
