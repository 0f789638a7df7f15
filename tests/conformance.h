/*
** The conformance harness: runs one op case on every available device and
** every dtype of its class, and compares each result with the same case run on
** the CPU in float64 (in the spirit of ggml's test-backend-ops and PyTorch's
** OpInfo). Included only by tests/test_conformance.c, which holds the case table.
** defines: conf_ctx, the input builders (conf_in, conf_idx, ...), conf_run_case,
** conf_perf.
**
** A case is a function  int case_x(conf_ctx *c, int v, td_tensor **out)  that
** builds the inputs of variant v from c's seeded generator, calls the op and
** stores its results in out[]; it returns the number of outputs, 0 when v is
** past its last variant, or -1 when a Trident call failed (td_last_error()
** says why). v == CONF_PERF asks for one large variant for --perf.
**
** The harness calls each variant twice with the same seed: once as the
** reference (c->ref: CPU, floating inputs cast to f64) and once on the device
** under test (c->dev, inputs in c->dt). Inputs are first rounded to c->dt, so
** both runs see identical values; integer, bool and index inputs made with
** conf_in_as() keep their dtype in both runs. The reference result is rounded
** to the device result's dtype (integers wrap, as C and PyTorch do) and the two
** are compared by NMSE = sum((a-b)^2)/sum(b^2) against the case's limit for
** that dtype (0 = exact). NaN/Inf must match position by position.
**
** On the CPU each variant runs twice, on 1 thread and on every thread
** (omp_get_max_threads(), at least 2): both runs must pass, and give the same
** bits, since the CPU kernels cut their work by the shapes only (issue 15: a
** cut that followed the thread count made training depend on it).
**
** Every buffer is NaN-poisoned and guarded (TD_DEBUG_POISON | TD_DEBUG_GUARDS):
** an element an op forgot to write shows up as an unexpected NaN, and a write
** past either end of a buffer raises td_debug_guard_failures() when the
** variant's scope ends. Leaked tensor handles fail the case too.
**
** Environment: TD_SEED (default: from the clock; always printed),
** TD_BACKENDS=cpu,vulkan:0 (default: every available device),
** TD_CONFORMANCE_TINY=1 (small shapes, for lavapipe), TD_CONF_VERBOSE=1
** (a line per variant).
*/
#ifndef TRIDENT_TESTS_CONFORMANCE_H
#define TRIDENT_TESTS_CONFORMANCE_H

#include <stdarg.h>
#include <time.h>

#include "runner.h"

/* OpenMP's thread count, weakly: libgomp comes in through libtrident (absent: one thread) */
void omp_set_num_threads(int n) __attribute__((weak));
int omp_get_max_threads(void) __attribute__((weak));

#define CONF_PERF        (-1)
#define CONF_MAX_OUT     4
#define CONF_MAX_DEVICES 8

/* dtype masks for a case's sweep (bit = 1 << td_dtype) */
#define CONF_DT(d)  (1u << TD_##d)
#define CONF_FLOATS (CONF_DT(F32) | CONF_DT(F64) | CONF_DT(F16) | CONF_DT(BF16))
#define CONF_INTS   (CONF_DT(I32) | CONF_DT(I64) | CONF_DT(U8))
#define CONF_NUMS   (CONF_FLOATS | CONF_INTS)
#define CONF_ALL    (CONF_NUMS | CONF_DT(BOOL))
#define CONF_CLASS  0u /* the op's dtype class from the op table */

/* NMSE limits per output dtype {f32, f64, f16, bf16}; integer and bool outputs
** are always compared exactly. */
typedef struct conf_tol {
    double f32, f64, f16, bf16;
} conf_tol;
#define TOL_EXACT ((conf_tol){0, 0, 0, 0})               /* copies, selections, comparisons */
#define TOL_ROUND ((conf_tol){1e-12, 1e-26, 1e-6, 3e-5}) /* one rounding: add, mul, div */
#define TOL_TRANS ((conf_tol){1e-9, 1e-24, 1e-5, 1e-4})  /* libm functions and formulas: exp, tanh, gelu */
#define TOL_ACCUM ((conf_tol){1e-9, 1e-24, 1e-5, 2e-4})  /* sums: reductions, matmul, norms */
#define TOL_LOOSE ((conf_tol){1e-7, 1e-22, 1e-4, 1e-3})  /* chains with cancellation: var, fused updates */

typedef struct conf_ctx {
    td_device dev;       /* where the op runs (CPU for the reference) */
    td_dtype dt;         /* the swept dtype (the same in both runs) */
    td_dtype odt;        /* dtype for swept float tensors: dt, or f64 in the reference */
    bool ref;            /* this is the float64 reference run */
    bool tiny;           /* TD_CONFORMANCE_TINY: small shapes */
    uint64_t rng;        /* xorshift64* state, reset per variant */
    uint64_t seed;       /* the variant's seed, for td_rand/dropout */
    const char *variant; /* set by the case: what this variant exercises */
    char name_buf[128];  /* storage for a formatted variant name */
    /* --perf */
    int reps;            /* times TIMED() runs its expression (1 when checking) */
    double ms[64];       /* milliseconds of each repetition */
    double bytes, flops; /* bytes read+written (inputs via conf_in*) and flops of one call */
} conf_ctx;

/* ---- seeded host random numbers (xorshift64*) ---- */

static uint64_t conf_next(conf_ctx *c) {
    c->rng ^= c->rng >> 12;
    c->rng ^= c->rng << 25;
    c->rng ^= c->rng >> 27;
    return c->rng * 0x2545F4914F6CDD1DULL;
}
static double conf_uniform(conf_ctx *c) { return (double)(conf_next(c) >> 11) * 0x1.0p-53; }
static int64_t conf_randint(conf_ctx *c, int64_t lo, int64_t hi) { /* [lo, hi) */
    return lo + (int64_t)(conf_next(c) % (uint64_t)(hi - lo));
}

/* A formatted variant name, kept in c. */
__attribute__((format(printf, 2, 3))) static const char *conf_name(conf_ctx *c, const char *fmt, ...) {
    char tmp[sizeof c->name_buf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    memcpy(c->name_buf, tmp, sizeof tmp);
    return c->name_buf;
}

/* ---- shapes ---- */
#define CONF_NARG_(a, b, c, d, e, f, g, h, N, ...) N
#define CONF_NARG(...)                             CONF_NARG_(__VA_ARGS__, 8, 7, 6, 5, 4, 3, 2, 1, 0)
/* SHAPE(33, 7) expands to the (ndim, shape) argument pair; SCALAR is 0-d. */
#define SHAPE(...)                                                                                                     \
    CONF_NARG(__VA_ARGS__), (const int64_t[]) { __VA_ARGS__ }
#define SCALAR 0, (const int64_t *)NULL
/* n, or a small stand-in in tiny mode */
#define BIG(c, n, small) ((c)->tiny ? (int64_t)(small) : (int64_t)(n))

static int64_t conf_numel(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

static const char *conf_shape_str(int ndim, const int64_t *shape, char *buf, size_t n) {
    size_t at = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s%lld", i ? "," : "", (long long)shape[i]);
    if (at < n) snprintf(buf + at, n - at, "]");
    return buf;
}

static bool conf_is_int(td_dtype dt) { return !td_dtype_is_float(dt); }

/* Host values for a tensor of dtype dt drawn uniformly from [lo, hi]:
** integers are rounded (u8 shifted to >= 0), bools are 0/1. */
static void conf_fill_host(conf_ctx *c, td_dtype dt, double *v, int64_t n, double lo, double hi) {
    for (int64_t i = 0; i < n; i++) {
        double u = conf_uniform(c);
        if (dt == TD_BOOL)
            v[i] = u < 0.5;
        else if (conf_is_int(dt)) {
            double l = dt == TD_U8 && lo < 0 ? 0 : lo, h = dt == TD_U8 && lo < 0 ? hi - lo : hi;
            v[i] = floor(l + u * (h - l + 1));
            if (v[i] > h) v[i] = h;
        } else
            v[i] = lo + u * (hi - lo);
    }
}

/* Tensor of dtype dt on the case's device from host doubles (kept in dtype). */
static td_tensor *conf_tensor(conf_ctx *c, td_dtype dt, int ndim, const int64_t *shape, const double *v) {
    td_tensor *h = td_from_data(v, ndim, shape, TD_F64, TD_CPU);
    td_tensor *t = td_cast(h, dt);
    c->bytes += (double)conf_numel(ndim, shape) * (double)td_dtype_size(dt);
    return td_to(t, c->dev);
}

/* Input of the swept dtype with values in [lo, hi], rounded to c->dt; in the
** reference run it is then widened to f64 on the CPU. */
static td_tensor *conf_in(conf_ctx *c, double lo, double hi, int ndim, const int64_t *shape) {
    int64_t n = conf_numel(ndim, shape);
    double *v = calloc((size_t)(n ? n : 1), sizeof *v);
    if (!v) return NULL;
    conf_fill_host(c, c->dt, v, n, lo, hi);
    td_tensor *h = td_from_data(v, ndim, shape, TD_F64, TD_CPU);
    free(v);
    td_tensor *t = td_cast(h, c->dt); /* round to the swept dtype */
    c->bytes += (double)n * (double)td_dtype_size(c->dt);
    return c->ref ? td_cast(t, TD_F64) : td_to(t, c->dev);
}

/* Input that keeps dtype dt in both runs (indices, masks, targets): values in
** [lo, hi], integers for integer dtypes. */
static td_tensor *conf_in_as(conf_ctx *c, td_dtype dt, double lo, double hi, int ndim, const int64_t *shape) {
    int64_t n = conf_numel(ndim, shape);
    double *v = calloc((size_t)(n ? n : 1), sizeof *v);
    if (!v) return NULL;
    conf_fill_host(c, dt, v, n, lo, hi);
    td_tensor *t = conf_tensor(c, dt, ndim, shape, v);
    free(v);
    return t;
}

/* Values from the small set {-2, -1.5, ..., 2} (integers for integer dtypes),
** so that comparisons and extrema meet ties. */
static td_tensor *conf_ties(conf_ctx *c, int ndim, const int64_t *shape) {
    if (conf_is_int(c->dt)) return conf_in(c, -2, 2, ndim, shape);
    int64_t n = conf_numel(ndim, shape);
    double *v = calloc((size_t)(n ? n : 1), sizeof *v);
    if (!v) return NULL;
    for (int64_t i = 0; i < n; i++) v[i] = -2 + 0.5 * (double)conf_randint(c, 0, 9);
    td_tensor *h = td_from_data(v, ndim, shape, TD_F64, TD_CPU);
    free(v);
    td_tensor *t = td_cast(h, c->odt);
    c->bytes += (double)n * (double)td_dtype_size(c->dt);
    return td_to(t, c->dev);
}

/* A [rows, cols] input that is the transpose of a contiguous [cols, rows]. */
static td_tensor *conf_in_t(conf_ctx *c, double lo, double hi, int64_t rows, int64_t cols) {
    return td_transpose(conf_in(c, lo, hi, SHAPE(cols, rows)), 0, 1);
}

/* An input of the given shape that is every 'step'-th row of a taller one. */
static td_tensor *conf_in_step(conf_ctx *c, double lo, double hi, int64_t step, int ndim, const int64_t *shape) {
    int64_t tall[TD_MAX_DIMS];
    memcpy(tall, shape, sizeof(int64_t) * (size_t)ndim);
    tall[0] = shape[0] * step;
    return td_slice(conf_in(c, lo, hi, ndim, tall), 0, 1, INT64_MAX, step);
}

/* ---- timing (used by TIMED) ---- */

static double conf_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static void conf_sync(td_device dev) {
    const td_backend *be = td_backend_for(dev.type);
    if (be) be->iface->synchronize(dev.index);
}

/* Evaluate expr c->reps times (while ok holds of the last result r_), timing
** each and running before ahead of each; the last result. */
#define TIMED_(c, T, init, ok, before, expr)                                                                           \
    ({                                                                                                                 \
        T r_ = init;                                                                                                   \
        for (int i_ = 0; i_ < (c)->reps && (ok); i_++) {                                                               \
            before;                                                                                                    \
            conf_sync((c)->dev);                                                                                       \
            double t0_ = conf_now_ms();                                                                                \
            r_ = (expr);                                                                                               \
            conf_sync((c)->dev);                                                                                       \
            (c)->ms[i_] = conf_now_ms() - t0_;                                                                         \
        }                                                                                                              \
        r_;                                                                                                            \
    })
/* A tensor expression (earlier results are released), and an in-place update returning td_status. */
#define TIMED(c, expr)    TIMED_(c, td_tensor *, NULL, true, if (r_) td_release(td_keep(r_)), expr)
#define TIMED_ST(c, expr) TIMED_(c, td_status, TD_OK, r_ == TD_OK, (void)0, expr)

/* ---- the sweep ---- */

typedef int (*conf_case_fn)(conf_ctx *c, int v, td_tensor **out);

typedef struct conf_case {
    const char *name;
    td_op_kind kind;
    unsigned dtypes; /* CONF_* mask, or CONF_CLASS */
    conf_tol tol;
    conf_case_fn fn;
} conf_case;

typedef struct conf_env {
    uint64_t seed;
    bool tiny, verbose;
    int threads; /* the CPU's second run: every thread OpenMP runs, at least 2 */
    int n_dev;
    td_device devs[CONF_MAX_DEVICES];
} conf_env;

static unsigned conf_class_mask(td_op_kind k) {
    switch (td_op_info(k)->dtypes) {
    case TD_DTS_FLOAT: return CONF_FLOATS;
    case TD_DTS_NUM: return CONF_NUMS;
    default: return CONF_ALL;
    }
}

static const char *conf_dt_short(td_dtype dt) {
    static const char *names[] = {"f32", "f64", "f16", "bf16", "i32", "i64", "u8", "bool"};
    return (unsigned)dt < TD_DTYPE_COUNT ? names[dt] : "?";
}

static conf_env conf_env_load(void) {
    conf_env e = {0};
    const char *s = getenv("TD_SEED");
    e.seed = s && *s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL) % 100000;
    e.tiny = getenv("TD_CONFORMANCE_TINY") && atoi(getenv("TD_CONFORMANCE_TINY"));
    e.verbose = getenv("TD_CONF_VERBOSE") && atoi(getenv("TD_CONF_VERBOSE"));
    e.threads = omp_get_max_threads ? omp_get_max_threads() : 1;
    if (e.threads < 2) e.threads = 2;
    const char *b = getenv("TD_BACKENDS");
    if (b && *b) {
        char list[256];
        snprintf(list, sizeof list, "%s", b);
        char *save = NULL; /* strtok_r: a library call in between may use strtok's own state */
        for (char *tok = strtok_r(list, ", ", &save); tok && e.n_dev < CONF_MAX_DEVICES;
             tok = strtok_r(NULL, ", ", &save)) {
            td_device d;
            if (td_device_parse(tok, &d) == TD_OK)
                e.devs[e.n_dev++] = d;
            else
                printf("  TD_BACKENDS: %s\n", td_last_error());
        }
        td_clear_error();
        return e;
    }
    const td_device all[] = {TD_CPU, TD_CUDA(0), TD_VULKAN(0)};
    for (int i = 0; i < 3; i++) {
        if (td_device_available(all[i]))
            e.devs[e.n_dev++] = all[i];
        else if (i)
            printf("  %s: %s\n", i == 1 ? "cuda" : "vulkan", td_backend_unavailable_reason(all[i].type));
    }
    return e;
}

/* Variant seed: the same for the reference and the device run. */
static uint64_t conf_variant_seed(uint64_t seed, const char *name, int v) {
    uint64_t h = 1469598103934665603ULL ^ seed;
    for (const char *p = name; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    h = (h ^ (uint64_t)(v + 7)) * 1099511628211ULL;
    return h ? h : 1;
}

/* Result of one output as host doubles, with its dtype and shape. */
typedef struct conf_host {
    td_dtype dt;
    int ndim;
    int64_t shape[TD_MAX_DIMS];
    int64_t n;
    double *v;
} conf_host;

/* Bring t to the host as doubles; when as is a valid dtype, first round the
** values to it (float dtypes through the CPU cast, integers by wrapping). */
static bool conf_fetch(td_tensor *t, td_dtype as, conf_host *h) {
    td_tensor *cpu = td_to(t, TD_CPU);
    if (!cpu) return false;
    h->dt = td_tensor_dtype(cpu);
    h->ndim = td_ndim(cpu);
    memcpy(h->shape, td_shape(cpu), sizeof(int64_t) * (size_t)h->ndim);
    h->n = td_numel(cpu);
    h->v = malloc((size_t)(h->n ? h->n : 1) * sizeof(double));
    if (!h->v) return false;
    td_tensor *q = (as < TD_DTYPE_COUNT && td_dtype_is_float(as)) ? td_cast(cpu, as) : cpu;
    if (!q || td_copy_to_host(q, h->v, (size_t)h->n * sizeof(double), TD_F64) != TD_OK) return false;
    if (as < TD_DTYPE_COUNT && !td_dtype_is_float(as))
        for (int64_t i = 0; i < h->n; i++) {
            double r = h->v[i];
            if (!isfinite(r)) continue; /* cannot be represented: the comparison reports it */
            int64_t x = (int64_t)r;
            h->v[i] = as == TD_I32    ? (double)(int32_t)(uint32_t)x
                      : as == TD_U8   ? (double)(uint8_t)x
                      : as == TD_BOOL ? (double)(x != 0)
                                      : (double)x;
        }
    return true;
}

static double conf_limit(conf_tol tol, td_dtype dt) {
    switch (dt) {
    case TD_F32: return tol.f32;
    case TD_F64: return tol.f64;
    case TD_F16: return tol.f16;
    case TD_BF16: return tol.bf16;
    default: return 0;
    }
}

/* Compare got with the reference; on failure write why into msg. */
static bool conf_compare(const conf_host *got, const conf_host *ref, double limit, double *nmse_out, char *msg,
                         size_t msg_size) {
    char a[96], b[96];
    *nmse_out = 0;
    bool same_shape = got->ndim == ref->ndim;
    for (int i = 0; same_shape && i < got->ndim; i++) same_shape = got->shape[i] == ref->shape[i];
    if (!same_shape) {
        td_clear_error();
        snprintf(msg, msg_size, "shape %s, reference %s", conf_shape_str(got->ndim, got->shape, a, sizeof a),
                 conf_shape_str(ref->ndim, ref->shape, b, sizeof b));
        return false;
    }
    double err = 0, den = 0, maxdiff = 0;
    int64_t bad = 0, first[3] = {-1, -1, -1}, maxat = -1;
    for (int64_t i = 0; i < got->n; i++) {
        double x = got->v[i], r = ref->v[i];
        bool ok;
        if (!isfinite(r))
            ok = isnan(r) ? isnan(x) : x == r;
        else if (!isfinite(x))
            ok = false;
        else {
            double d = x - r;
            err += d * d;
            den += r * r;
            ok = limit > 0 || d == 0;
            if (fabs(d) > maxdiff) maxdiff = fabs(d), maxat = i;
        }
        if (!ok) {
            if (bad < 3) first[bad] = i;
            bad++;
        }
    }
    /* Outputs that should be ~0 (the variance of equal values) make sum(r^2) tiny, so
    ** the denominator has a floor of 1e-12 per element (an RMS of 1e-6): such
    ** outputs must then be within sqrt(limit)*1e-6 of the reference, absolutely. */
    double floor = 1e-12 * (double)(got->n > 0 ? got->n : 1);
    double nmse = err / (den > floor ? den : floor);
    *nmse_out = nmse;
    if (bad == 0 && nmse <= limit) return true;
    int at = 0;
    if (bad)
        at += snprintf(msg + at, msg_size - (size_t)at, "%lld of %lld elements differ%s", (long long)bad,
                       (long long)got->n, limit > 0 ? " (non-finite)" : "");
    else
        at +=
            snprintf(msg + at, msg_size - (size_t)at, "nmse %.3g > limit %.3g; max |diff| %.3g at %lld (%.9g vs %.9g)",
                     nmse, limit, maxdiff, (long long)maxat, got->v[maxat], ref->v[maxat]);
    for (int k = 0; k < 3 && first[k] >= 0 && (size_t)at < msg_size; k++)
        at += snprintf(msg + at, msg_size - (size_t)at, "%s[%lld] %.9g vs %.9g", k ? ", " : ": ", (long long)first[k],
                       got->v[first[k]], ref->v[first[k]]);
    return false;
}

/* Outcome of one variant on one device and dtype. */
enum { CONF_PASS, CONF_FAIL, CONF_UNSUPPORTED, CONF_END };

/* Whether two results hold the same bits (NaNs of any payload count as equal); *at is the first
** element that differs. */
static bool conf_same_bits(const conf_host *a, const conf_host *b, int64_t *at) {
    for (int64_t i = 0; i < a->n && i < b->n; i++)
        if (!(isnan(a->v[i]) && isnan(b->v[i])) && memcmp(&a->v[i], &b->v[i], sizeof(double))) {
            *at = i;
            return false;
        }
    *at = a->n < b->n ? a->n : b->n;
    return a->n == b->n;
}

/* Run variant v of a case as the reference and on (dev, dt) and compare.
** On the CPU the device run is made on 1 thread and on e->threads threads: each is compared with
** the reference, and the two with each other bit for bit. *worst collects the largest NMSE seen;
** msg says what failed. */
static int conf_run_variant(const conf_case *cc, const conf_env *e, td_device dev, td_dtype dt, int v, double *worst,
                            char *msg, size_t msg_size) {
    int64_t live0 = td_debug_live_tensors();
    int guards0 = td_debug_guard_failures();
    uint64_t vseed = conf_variant_seed(e->seed, cc->name, v);
    int result = CONF_PASS, n = 0;
    bool cpu = dev.type == TD_DEVICE_CPU && omp_set_num_threads;
    int passes = cpu ? 2 : 1, threads[2] = {1, e->threads};
    conf_host got[2][CONF_MAX_OUT] = {{{0}}};
    td_tensor *ref_out[CONF_MAX_OUT] = {0}, *out[2][CONF_MAX_OUT] = {{0}};
    char variant[sizeof((conf_ctx *)0)->name_buf] = "";

    td_scope_begin();
    td_clear_error();
    conf_ctx c = {
        .dev = TD_CPU, .dt = dt, .odt = TD_F64, .ref = true, .tiny = e->tiny, .rng = vseed, .seed = vseed, .reps = 1};
    n = cc->fn(&c, v, ref_out);
    snprintf(variant, sizeof variant, "%s", c.variant ? c.variant : "");
    if (n == 0)
        result = CONF_END;
    else if (n < 0) {
        snprintf(msg, msg_size, "[%s] the f64 reference failed: %s", variant, td_last_error());
        result = CONF_FAIL;
    }
    for (int pass = 0; pass < passes && result == CONF_PASS; pass++) {
        char on[32] = "";
        if (cpu) {
            omp_set_num_threads(threads[pass]);
            snprintf(on, sizeof on, " on %d thread%s", threads[pass], threads[pass] == 1 ? "" : "s");
        }
        td_clear_error();
        c = (conf_ctx){.dev = dev, .dt = dt, .odt = dt, .tiny = e->tiny, .rng = vseed, .seed = vseed, .reps = 1};
        int m = cc->fn(&c, v, out[pass]);
        if (m < 0) {
            td_status st = td_last_status();
            bool unsupported = dev.type != TD_DEVICE_CPU && (st == TD_ERR_UNSUPPORTED || st == TD_ERR_UNAVAILABLE);
            snprintf(msg, msg_size, "[%s]%s %s", variant, on, td_last_error());
            result = unsupported ? CONF_UNSUPPORTED : CONF_FAIL;
        } else if (m != n) {
            snprintf(msg, msg_size, "[%s]%s %d outputs, reference %d", variant, on, m, n);
            result = CONF_FAIL;
        }
        for (int k = 0; result == CONF_PASS && k < n; k++) {
            char why[512];
            double nmse = 0;
            conf_host r = {0};
            /* the reference is rounded to the dtype of the device's output */
            if (!out[pass][k] || !conf_fetch(out[pass][k], TD_DTYPE_COUNT, &got[pass][k]) || !ref_out[k] ||
                !conf_fetch(ref_out[k], got[pass][k].dt, &r)) {
                snprintf(msg, msg_size, "[%s]%s output %d unreadable: %s", variant, on, k, td_last_error());
                result = CONF_FAIL;
            } else if (!conf_compare(&got[pass][k], &r, conf_limit(cc->tol, got[pass][k].dt), &nmse, why, sizeof why)) {
                snprintf(msg, msg_size, "[%s]%s output %d: %s", variant, on, k, why);
                result = CONF_FAIL;
            }
            free(r.v);
            if (nmse > *worst) *worst = nmse;
        }
    }
    if (cpu) omp_set_num_threads(e->threads);
    for (int k = 0; result == CONF_PASS && passes == 2 && k < n; k++) {
        int64_t at = 0;
        if (!conf_same_bits(&got[0][k], &got[1][k], &at))
            snprintf(msg, msg_size, "[%s] output %d: 1 thread and %d threads differ at [%lld]: %.17g vs %.17g", variant,
                     k, e->threads, (long long)at, at < got[0][k].n ? got[0][k].v[at] : NAN,
                     at < got[1][k].n ? got[1][k].v[at] : NAN),
                result = CONF_FAIL;
    }
    td_scope_end();
    for (int k = 0; k < CONF_MAX_OUT; k++) free(got[0][k].v), free(got[1][k].v);
    if (result == CONF_PASS || result == CONF_END) {
        int64_t leaked = td_debug_live_tensors() - live0;
        if (td_debug_guard_failures() != guards0) {
            snprintf(msg, msg_size, "[%s] guard bytes overwritten: a write out of bounds", variant);
            result = CONF_FAIL;
        } else if (leaked) {
            snprintf(msg, msg_size, "[%s] %lld tensor handles leaked", variant, (long long)leaked);
            result = CONF_FAIL;
        }
    }
    if (e->verbose && result != CONF_END) {
        char d[32];
        printf("    %-9s %-4s #%-2d %-44s %s\n", td_device_str(dev, d, sizeof d), conf_dt_short(dt), v, variant,
               result == CONF_PASS   ? "ok"
               : result == CONF_FAIL ? msg
                                     : "unsupported");
    }
    return result;
}

/* Sweep one case over every device, dtype and variant; fails the runner case
** on any mismatch and lists what a backend does not support. */
static void conf_run_case(const conf_case *cc) {
    conf_env e = conf_env_load();
    printf("  %s: seed %llu (TD_SEED=%llu to repeat)%s\n", cc->name, (unsigned long long)e.seed,
           (unsigned long long)e.seed, e.tiny ? ", tiny shapes" : "");
    td_debug_set(TD_DEBUG_POISON | TD_DEBUG_GUARDS);
    unsigned mask = cc->dtypes ? cc->dtypes : conf_class_mask(cc->kind);
    int failures = 0, checked = 0;
    char unsupported[1024] = "";
    for (int di = 0; di < e.n_dev; di++) {
        char dname[32];
        td_device_str(e.devs[di], dname, sizeof dname);
        for (int dt = 0; dt < TD_DTYPE_COUNT; dt++) {
            if (!(mask & (1u << dt))) continue;
            double worst = 0;
            int passed = 0, skipped = 0, failed = 0;
            char msg[1024] = "", first_skip[1024] = "";
            for (int v = 0; v < 64; v++) {
                int r = conf_run_variant(cc, &e, e.devs[di], (td_dtype)dt, v, &worst, msg, sizeof msg);
                if (r == CONF_END) break;
                if (r == CONF_PASS) passed++;
                if (r == CONF_UNSUPPORTED) {
                    if (!skipped) snprintf(first_skip, sizeof first_skip, "%s", msg);
                    skipped++;
                }
                if (r == CONF_FAIL) {
                    failed++;
                    printf("  FAIL %s %s %s\n", dname, conf_dt_short((td_dtype)dt), msg);
                }
            }
            checked += passed;
            failures += failed;
            if (skipped) {
                size_t at = strlen(unsupported);
                snprintf(unsupported + at, sizeof unsupported - at, "%s%s/%s", at ? ", " : "", dname,
                         conf_dt_short((td_dtype)dt));
                printf("  unsupported %s %s: %d of %d variants (%s)\n", dname, conf_dt_short((td_dtype)dt), skipped,
                       passed + skipped + failed, first_skip);
            }
            if (passed || failed)
                printf("  %-9s %-4s %2d variants ok, %d failed; worst nmse %.2g\n", dname, conf_dt_short((td_dtype)dt),
                       passed, failed, worst);
        }
    }
    printf("  %s: %d checks passed, %d failed%s%s\n", cc->name, checked, failures,
           *unsupported ? "; unsupported (skipped): " : "", unsupported);
    fflush(stdout);
    if (failures) TEST_FAIL_("%s: %d failed checks (seed %llu)", cc->name, failures, (unsigned long long)e.seed);
    if (!checked) TEST_SKIP("%s: no device ran it", cc->name);
}

/* --perf: time the CONF_PERF variant of each chosen case on each device in
** f32 and print GFLOP/s (when the case sets flops) or GB/s. */
static int conf_perf(const conf_case *cases, int n_cases, int argc, char **argv) {
    conf_env e = conf_env_load();
    enum { REPS = 12, WARMUP = 2 };
    printf("%-22s %-9s %-36s %10s %12s\n", "op", "device", "shape", "ms", "rate");
    for (int i = 0; i < n_cases; i++) {
        bool chosen = argc == 0;
        for (int a = 0; a < argc; a++) chosen |= !strcmp(argv[a], cases[i].name);
        if (!chosen) continue;
        for (int di = 0; di < e.n_dev; di++) {
            char dname[32];
            td_device_str(e.devs[di], dname, sizeof dname);
            td_scope_begin();
            conf_ctx c = {.dev = e.devs[di], .dt = TD_F32, .odt = TD_F32, .rng = 12345, .seed = 12345, .reps = REPS};
            td_tensor *out[CONF_MAX_OUT] = {0};
            int n = cases[i].fn(&c, CONF_PERF, out);
            if (n > 0) {
                for (int k = 0; k < n; k++)
                    if (out[k]) c.bytes += (double)td_numel(out[k]) * (double)td_dtype_size(td_tensor_dtype(out[k]));
                double *ms = c.ms + WARMUP;
                int m = REPS - WARMUP;
                for (int a = 1; a < m; a++) /* insertion sort for the median */
                    for (int b = a; b > 0 && ms[b] < ms[b - 1]; b--) {
                        double t = ms[b];
                        ms[b] = ms[b - 1], ms[b - 1] = t;
                    }
                double med = (ms[(m - 1) / 2] + ms[m / 2]) / 2;
                if (c.flops > 0)
                    printf("%-22s %-9s %-36s %10.3f %8.1f GFLOP/s\n", cases[i].name, dname, c.variant, med,
                           c.flops / med * 1e-6);
                else
                    printf("%-22s %-9s %-36s %10.3f %8.2f GB/s\n", cases[i].name, dname, c.variant, med,
                           c.bytes / med * 1e-6);
            } else if (n < 0) {
                printf("%-22s %-9s %-36s %s\n", cases[i].name, dname, c.variant ? c.variant : "", td_last_error());
            }
            td_scope_end();
            td_clear_error();
        }
    }
    return 0;
}

#endif /* TRIDENT_TESTS_CONFORMANCE_H */
