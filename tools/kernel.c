/*
** trident kernel: quick iteration on one kernel file of a custom op
** (include/trident/kernel.h; walk-through in examples/custom_ops/README.md).
**
**   trident kernel check FILE --device D                    compile, print the compiler's log
**   trident kernel run   FILE --device D --shape S [--ref E] run once on random inputs (printed seed),
**                                                           compare with the reference expression E
**   trident kernel bench FILE --device D --shape S [--ref E] time the kernel (and E) on D
**
** FILE is GLSL (.comp, Vulkan) or CUDA (.cu; the entry is the file's stem unless --entry). The kernel is
** registered as a one-output custom op: bindings are the inputs of --shape ("64x256,256": two inputs), then
** the output, of input 0's shape unless --out-shape; --rows launches one block per row of input 0. E is made of
** ordinary ops over the inputs, named x, b, c, d, ... in order (--names renames them): numbers, + - * /,
** parentheses and gelu (tanh form), gelu_erf, relu, exp, log, tanh, sigmoid, sqrt, rsqrt.
*/
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "trident/trident.h"

#define K_MAX_IN 8

typedef struct kargs {
    const char *cmd, *file, *device, *shape, *out_shape, *ref, *entry, *names;
    bool rows;
    uint64_t seed;
} kargs;

/* ---- the reference expression: a recursive-descent parser evaluating as it goes ---- */

typedef struct expr {
    const char *p;
    int n;
    td_tensor *const *in;
    char names[K_MAX_IN][16];
    char err[128];
} expr;

static td_tensor *e_sum(expr *e);

static void e_space(expr *e) {
    while (isspace((unsigned char)*e->p)) e->p++;
}

static td_tensor *e_fail(expr *e, const char *what) {
    if (!e->err[0]) snprintf(e->err, sizeof e->err, "%s at '%.20s'", what, e->p);
    return NULL;
}

static td_tensor *e_apply(const char *f, td_tensor *a) {
    if (!strcmp(f, "gelu")) return td_gelu(a, true);
    if (!strcmp(f, "gelu_erf")) return td_gelu(a, false);
    if (!strcmp(f, "relu")) return td_relu(a);
    if (!strcmp(f, "exp")) return td_exp(a);
    if (!strcmp(f, "log")) return td_log(a);
    if (!strcmp(f, "tanh")) return td_tanh(a);
    if (!strcmp(f, "sigmoid")) return td_sigmoid(a);
    if (!strcmp(f, "sqrt")) return td_sqrt(a);
    if (!strcmp(f, "rsqrt")) return td_rsqrt(a);
    return NULL;
}

static td_tensor *e_atom(expr *e) {
    e_space(e);
    if (*e->p == '(') {
        e->p++;
        td_tensor *t = e_sum(e);
        e_space(e);
        if (*e->p != ')') return e_fail(e, "expected ')'");
        e->p++;
        return t;
    }
    if (*e->p == '-') {
        e->p++;
        td_tensor *t = e_atom(e);
        return t ? td_neg(t) : NULL;
    }
    if (isdigit((unsigned char)*e->p) || *e->p == '.') {
        char *end;
        double v = strtod(e->p, &end);
        e->p = end;
        return td_scalar(v, td_tensor_dtype(e->in[0]), td_tensor_device(e->in[0]));
    }
    char id[16] = "";
    int k = 0;
    while ((isalnum((unsigned char)*e->p) || *e->p == '_') && k < 15) id[k++] = *e->p++;
    id[k] = 0;
    if (!k) return e_fail(e, "expected a name, number or '('");
    e_space(e);
    if (*e->p == '(') {
        e->p++;
        td_tensor *a = e_sum(e);
        e_space(e);
        if (!a || *e->p != ')') return a ? e_fail(e, "expected ')'") : NULL;
        e->p++;
        td_tensor *r = e_apply(id, a);
        return r ? r : e_fail(e, "unknown function");
    }
    for (int i = 0; i < e->n; i++)
        if (!strcmp(id, e->names[i])) return e->in[i];
    return e_fail(e, "unknown input name");
}

static td_tensor *e_product(expr *e) {
    td_tensor *a = e_atom(e);
    for (e_space(e); a && (*e->p == '*' || *e->p == '/'); e_space(e)) {
        char op = *e->p++;
        td_tensor *b = e_atom(e);
        a = b ? (op == '*' ? td_mul(a, b) : td_div(a, b)) : NULL;
    }
    return a;
}

static td_tensor *e_sum(expr *e) {
    td_tensor *a = e_product(e);
    for (e_space(e); a && (*e->p == '+' || *e->p == '-'); e_space(e)) {
        char op = *e->p++;
        td_tensor *b = e_product(e);
        a = b ? (op == '+' ? td_add(a, b) : td_sub(a, b)) : NULL;
    }
    return a;
}

/* ref evaluated over inputs in, or NULL with why on stderr */
static td_tensor *eval_ref(const kargs *a, int n, td_tensor *const *in) {
    expr e = {.p = a->ref, .n = n, .in = in};
    const char *nm = a->names ? a->names : "x,b,c,d,e,f,g,h";
    for (int i = 0; i < n; i++) {
        size_t len = strcspn(nm, ",");
        snprintf(e.names[i], sizeof e.names[i], "%.*s", (int)len, nm);
        nm += len + (nm[len] == ',');
    }
    td_tensor *t = e_sum(&e);
    e_space(&e);
    if (t && *e.p) t = e_fail(&e, "unexpected text");
    if (!t) fprintf(stderr, "trident kernel: --ref %s: %s\n", TD_QUOTE(a->ref), e.err[0] ? e.err : td_last_error());
    return t;
}

/* ---- the kernel as a custom op ---- */

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) free(s), s = NULL;
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

/* "64x256,256" into shapes; returns the count, or -1 */
static int parse_shapes(const char *s, int64_t shapes[][TD_MAX_DIMS], int *ndims) {
    int n = 0;
    while (s && *s && n < K_MAX_IN) {
        ndims[n] = 0;
        for (;;) {
            char *end;
            long long v = strtoll(s, &end, 10);
            if (end == s || v < 0 || ndims[n] == TD_MAX_DIMS) return -1;
            shapes[n][ndims[n]++] = v;
            s = end;
            if (*s != 'x') break;
            s++;
        }
        n++;
        if (*s == ',')
            s++;
        else if (*s)
            return -1;
    }
    return n;
}

static int64_t out_shape[TD_MAX_DIMS];
static int out_ndim = -1;

static td_status out_shape_fn(const td_custom_call *c, td_custom_meta *out) {
    if (out_ndim < 0) {
        out[0].ndim = td_ndim(c->inputs[0]);
        memcpy(out[0].shape, td_shape(c->inputs[0]), sizeof(int64_t) * (size_t)out[0].ndim);
    } else {
        out[0].ndim = out_ndim;
        memcpy(out[0].shape, out_shape, sizeof out_shape);
    }
    return TD_OK;
}

static double median_ms(td_device dev, td_custom_op *op, int n, td_tensor *const *in, const kargs *a) {
    double t[15];
    for (int r = -2; r < 15; r++) {
        td_synchronize(dev);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        td_scope_begin();
        td_tensor *y = op ? td_custom_op_apply(op, n, in, 0, NULL) : eval_ref(a, n, in);
        td_scope_end();
        if (!y) return -1;
        td_synchronize(dev);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (r >= 0) t[r] = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
    }
    for (int i = 1; i < 15; i++)
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double s = t[j];
            t[j] = t[j - 1], t[j - 1] = s;
        }
    return t[7];
}

static int run_kernel(const kargs *a, td_device dev, const char *src, bool cuda, const char *entry) {
    int64_t shapes[K_MAX_IN][TD_MAX_DIMS];
    int ndims[K_MAX_IN];
    int n = parse_shapes(a->shape, shapes, ndims);
    if (n < 1) return fprintf(stderr, "trident kernel: --shape %s is not like 64x256,256\n", TD_QUOTE(a->shape)), 2;
    if (a->out_shape) {
        int nd[1];
        int64_t s[1][TD_MAX_DIMS];
        if (parse_shapes(a->out_shape, s, nd) != 1)
            return fprintf(stderr, "trident kernel: --out-shape %s is not like 64x256\n", TD_QUOTE(a->out_shape)), 2;
        out_ndim = nd[0];
        memcpy(out_shape, s[0], sizeof out_shape);
    }
    td_custom_impl im = {.source = src, .entry = entry, .grid = a->rows ? TD_GRID_ROWS : TD_GRID_ELEMENTS};
    td_custom_op_def def = {.name = "kernel", .n_in = n, .n_out = 1, .shape = out_shape_fn};
    if (cuda)
        def.cuda = im;
    else
        def.vulkan = im;
    td_custom_op *op;
    if (td_custom_op_register(&def, &op) != TD_OK) return fprintf(stderr, "trident kernel: %s\n", td_last_error()), 1;
    int rc = 0;
    td_scope_begin();
    td_tensor *in[K_MAX_IN];
    printf("seed %llu (--seed %llu to repeat)\n", (unsigned long long)a->seed, (unsigned long long)a->seed);
    for (int i = 0; i < n; i++) in[i] = td_randn(ndims[i], shapes[i], a->seed + (uint64_t)i, 0, TD_F32, dev);
    td_tensor *y = td_custom_op_apply(op, n, in, 0, NULL);
    if (!y) {
        fprintf(stderr, "trident kernel: %s\n", td_last_error());
        rc = 1;
    } else if (!strcmp(a->cmd, "run")) {
        td_tensor *yc = td_to(y, TD_CPU);
        double sum = td_item(td_sum(td_abs(td_cast(yc, TD_F64)), 0, NULL, false));
        printf("output [%lld elements] mean |y| %.6g\n", (long long)td_numel(y), sum / (double)td_numel(y));
        if (a->ref) {
            td_tensor *r = eval_ref(a, n, in);
            td_tensor *d =
                r ? td_amax(td_abs(td_sub(td_cast(yc, TD_F64), td_cast(td_to(r, TD_CPU), TD_F64))), 0, NULL, false)
                  : NULL;
            double scale = r ? td_item(td_amax(td_abs(td_cast(td_to(r, TD_CPU), TD_F64)), 0, NULL, false)) : 0;
            double diff = d ? td_item(d) : INFINITY;
            bool ok = diff <= 1e-5 * (1 + scale);
            printf("max |kernel - ref| = %.3g (%s: tolerance 1e-5 * (1 + max |ref|))\n", diff, ok ? "ok" : "MISMATCH");
            rc = ok ? 0 : 1;
        }
    } else {
        double k = median_ms(dev, op, n, in, a), r = a->ref ? median_ms(dev, NULL, n, in, a) : -1;
        char d[32];
        printf("%-10s %-12s %12s %12s %9s\n", "device", "kernel", "kernel ms", "ref ms", "speedup");
        printf("%-10s %-12.12s %12.4f", td_device_str(dev, d, sizeof d), entry ? entry : "main", k);
        if (r > 0)
            printf(" %12.4f %8.2fx\n", r, r / k);
        else
            printf(" %12s %9s\n", "-", "-");
        rc = k < 0;
    }
    td_scope_end();
    td_custom_op_free(op);
    return rc;
}

int cmd_kernel(int argc, char **argv) {
    static const char usage[] =
        "usage: trident kernel check|run|bench FILE.comp|FILE.cu --device D [--shape 64x256,256] [--out-shape S]\n"
        "       [--rows] [--ref EXPR] [--names x,b] [--entry NAME] [--seed N]\n";
    if (argc < 3) return fputs(usage, stderr), 2;
    kargs a = {.cmd = argv[1], .file = argv[2], .seed = (uint64_t)time(NULL) % 100000};
    if (strcmp(a.cmd, "check") && strcmp(a.cmd, "run") && strcmp(a.cmd, "bench"))
        return fprintf(stderr, "trident kernel: unknown command %s (check, run, bench)\n", TD_QUOTE(a.cmd)), 2;
    for (int i = 3; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "--rows")) {
            a.rows = true;
            continue;
        }
        if (!v) return fprintf(stderr, "trident kernel: %s needs a value\n", TD_QUOTE(o)), 2;
        i++;
        if (!strcmp(o, "--device"))
            a.device = v;
        else if (!strcmp(o, "--shape"))
            a.shape = v;
        else if (!strcmp(o, "--out-shape"))
            a.out_shape = v;
        else if (!strcmp(o, "--ref"))
            a.ref = v;
        else if (!strcmp(o, "--names"))
            a.names = v;
        else if (!strcmp(o, "--entry"))
            a.entry = v;
        else if (!strcmp(o, "--seed"))
            a.seed = strtoull(v, NULL, 10);
        else
            return fprintf(stderr, "trident kernel: unknown option %s\n%s", TD_QUOTE(o), usage), 2;
    }
    size_t len = strlen(a.file);
    bool cuda = len > 3 && !strcmp(a.file + len - 3, ".cu");
    bool glsl = len > 5 && !strcmp(a.file + len - 5, ".comp");
    if (!cuda && !glsl)
        return fprintf(stderr,
                       "trident kernel: %s is neither .comp (GLSL) nor .cu (CUDA); C kernels are registered "
                       "from a program (td_custom_op_def.cpu)\n",
                       TD_QUOTE(a.file)),
               2;
    td_device dev;
    if (td_device_parse(a.device ? a.device : cuda ? "cuda:0" : "vulkan:0", &dev) != TD_OK || !td_device_available(dev))
        return fprintf(stderr, "trident kernel: device %s: %s\n", a.device ? TD_QUOTE(a.device) : "default",
                       td_last_error()),
               1;
    char *src = read_text(a.file);
    if (!src) return fprintf(stderr, "trident kernel: cannot read %s\n", TD_QUOTE(a.file)), 1;
    char entry[64] = "";
    if (a.entry)
        snprintf(entry, sizeof entry, "%s", a.entry);
    else if (cuda) { /* the file's stem */
        const char *base = strrchr(a.file, '/') ? strrchr(a.file, '/') + 1 : a.file;
        snprintf(entry, sizeof entry, "%.*s", (int)(strlen(base) - 3), base);
    }
    int rc;
    if (!strcmp(a.cmd, "check")) {
        char log[16384];
        td_user_kernel *k;
        td_status st = td_kernel_compile(dev, cuda ? TD_KERNEL_CUDA : TD_KERNEL_GLSL, src, entry[0] ? entry : NULL,
                                         NULL, &k, log, sizeof log);
        if (log[0]) fputs(log, st == TD_OK ? stdout : stderr);
        char d[32];
        if (st == TD_OK)
            printf("%s: compiled for %s\n", a.file, td_device_str(dev, d, sizeof d));
        else
            fprintf(stderr, "trident kernel: %s\n", td_last_error());
        td_kernel_free(k);
        rc = st != TD_OK;
    } else if (!a.shape) {
        fprintf(stderr, "trident kernel %s: needs --shape (the inputs' shapes, e.g. 64x256,256)\n", a.cmd);
        rc = 2;
    } else
        rc = run_kernel(&a, dev, src, cuda, entry[0] ? entry : NULL);
    free(src);
    return rc;
}
