/*
** trident kernel: quick iteration on one kernel file of a custom op
** (include/trident/kernel.h; walk-through in examples/custom_ops/README.md).
**
**   trident kernel check FILE [--device D]                          compile, print the compiler's log
**   trident kernel run FILE --shape S [--ref E]                     run once on random inputs (printed seed)
**                                                                   and compare with the expression E
**   trident kernel bench FILE --shape S [--ref E] [--svg OUT.svg]   time the kernel next to E
**   trident kernel gradcheck FILE --shape S [--backward BFILE] [--grads N]   td_gradcheck of the op
**
** FILE is GLSL (.comp: vulkan:0), CUDA (.cu: cuda:0) or C (.c: cpu, compiled by $CC (cc) into a shared
** library against the Trident headers, $TRIDENT_INCLUDE or the source tree's). The entry is the file's stem
** unless --entry (GLSL: main). The kernel is registered as a one-output custom op: its bindings are the inputs
** of --shape ("64x256,256": two inputs), then the output, of input 0's shape unless --out-shape; --rows
** launches one block per row of input 0; --params 1e-5,2 fills the kernel's float parameters; --f64 says the kernel
*also computes in float64 (scalar_t, c->dtype).
** The backward (gradcheck) is BFILE's kernel (default: FILE's entry + "_backward"; GLSL needs --backward):
** its bindings are the inputs, the output's gradient, then N gradients (--grads, default 1) of the output's
** shape, summed down to each input's shape: one per input, or with N = 1 one for all (an op of the inputs'
** broadcast sum, as bias+GELU). E is made of ordinary ops over the inputs, named x, b, c, d, ... in order
** (--names renames them): numbers, + - * /, parentheses and gelu (tanh form), gelu_erf, relu, exp, log,
** tanh, sigmoid, sqrt, rsqrt.
*/
#include <ctype.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "trident/trident.h"

#define K_MAX_IN 8

typedef struct kargs {
    const char *cmd, *file, *device, *shape, *out_shape, *ref, *entry, *names, *backward, *svg;
    bool rows, f64, log;
    int grads, n_params;
    float params[TD_CUSTOM_MAX_PARAMS];
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

static td_tensor *e_level(expr *e, int level);

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
        td_tensor *t = e_level(e, 0);
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
        td_tensor *a = e_level(e, 0);
        e_space(e);
        if (!a || *e->p != ')') return a ? e_fail(e, "expected ')'") : NULL;
        e->p++;
        td_tensor *r = e_apply(id, a);
        if (!r && !e->err[0]) snprintf(e->err, sizeof e->err, "unknown function '%s'", id);
        return r;
    }
    for (int i = 0; i < e->n; i++)
        if (!strcmp(id, e->names[i])) return e->in[i];
    if (!e->err[0]) snprintf(e->err, sizeof e->err, "unknown input name '%s'", id);
    return NULL;
}

/* Operands joined left to right by the operators of one precedence level: + - (level 0) over * / (level 1)
** over atoms. */
static td_tensor *e_level(expr *e, int level) {
    static const char ops[2][2] = {{'+', '-'}, {'*', '/'}};
    static td_tensor *(*const fns[2][2])(td_tensor *, td_tensor *) = {{td_add, td_sub}, {td_mul, td_div}};
    td_tensor *a = level ? e_atom(e) : e_level(e, 1);
    for (e_space(e); a && (*e->p == ops[level][0] || *e->p == ops[level][1]); e_space(e)) {
        int k = *e->p++ == ops[level][1];
        td_tensor *b = level ? e_atom(e) : e_level(e, 1);
        a = b ? fns[level][k](a, b) : NULL;
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
    td_tensor *t = e_level(&e, 0);
    e_space(&e);
    if (t && *e.p) t = e_fail(&e, "unexpected text");
    if (!t) fprintf(stderr, "trident kernel: --ref %s: %s\n", TD_QUOTE(a->ref), e.err[0] ? e.err : td_last_error());
    return t;
}

/* --params "1e-5,2" into a->params: each entry a number, at most TD_CUSTOM_MAX_PARAMS; false with a message */
static bool parse_params(const char *v, kargs *a) {
    for (const char *p = v;; p++) {
        char *end;
        float x = strtof(p, &end);
        if (end == p || (*end && *end != ',') || a->n_params == TD_CUSTOM_MAX_PARAMS) {
            fprintf(stderr, "trident kernel: --params %s: expected a comma list of at most %d numbers, as 1e-5,2\n",
                    TD_QUOTE(v), TD_CUSTOM_MAX_PARAMS);
            return false;
        }
        a->params[a->n_params++] = x;
        if (!*(p = end)) return true;
    }
}

/* --names "x,b": one name per input (n of them), each a letter or '_' then letters, digits or '_' (at most 15),
** all different; false with a message */
static bool check_names(const char *names, int n) {
    char seen[K_MAX_IN][16];
    int k = 0;
    for (const char *p = names;; p++) {
        size_t len = strcspn(p, ",");
        bool ok = len && len < 16 && !isdigit((unsigned char)*p) && k < n;
        for (size_t i = 0; ok && i < len; i++) ok = isalnum((unsigned char)p[i]) || p[i] == '_';
        for (int j = 0; ok && j < k; j++) ok = strlen(seen[j]) != len || strncmp(seen[j], p, len);
        if (!ok) break;
        snprintf(seen[k++], sizeof seen[0], "%.*s", (int)len, p);
        if (!p[len]) {
            if (k == n) return true;
            break;
        }
        p += len;
    }
    fprintf(stderr,
            "trident kernel: --names %s: expected %d different name%s (one per input of --shape), each a letter "
            "or '_' then letters, digits or '_'\n",
            TD_QUOTE(names), n, n == 1 ? "" : "s");
    return false;
}

/* Whether the --ref expression parses over n inputs (evaluated on 0-d zeros, so before any kernel runs);
** false with why on stderr */
static bool ref_parses(const kargs *a, int n) {
    td_tensor *in[K_MAX_IN];
    td_scope_begin();
    for (int i = 0; i < n; i++) in[i] = td_scalar(0, TD_F32, TD_CPU);
    bool ok = eval_ref(a, n, in) != NULL;
    td_scope_end();
    return ok;
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

/* "64x256,256" (and "scalar" for a 0-d input) into shapes; returns the count, or -1 */
static int parse_shapes(const char *s, int64_t shapes[][TD_MAX_DIMS], int *ndims) {
    int n = 0;
    while (s && *s && n < K_MAX_IN) {
        ndims[n] = 0;
        if (!strncmp(s, "scalar", 6) && (s[6] == ',' || !s[6])) /* a 0-d input */
            s += 6;
        else
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

/* ---- the kernel file(s) as custom ops ---- */

enum { LANG_GLSL, LANG_CUDA, LANG_C };

typedef struct kfile {
    int lang;
    char *source;    /* GLSL, CUDA */
    void *lib;       /* C: the compiled shared library */
    char dir[64];    /* C: its temporary directory */
    char entry[128]; /* "" for GLSL's main */
    char stem[48];   /* the file's name without directory and extension, as an op name */
} kfile;

typedef struct kop {
    const kargs *a;
    td_custom_op *fwd, *bwd;
    int n_in, grads;
    int out_ndim; /* -1: input 0's shape */
    int64_t out_shape[TD_MAX_DIMS];
} kop;

static int lang_of(const char *file) {
    size_t n = strlen(file);
    if (n > 5 && !strcmp(file + n - 5, ".comp")) return LANG_GLSL;
    if (n > 3 && !strcmp(file + n - 3, ".cu")) return LANG_CUDA;
    if (n > 2 && !strcmp(file + n - 2, ".c")) return LANG_C;
    return -1;
}

/* C: $CC -O2 -shared -fPIC -I<include> file -o dir/kernel.so -lm, without a shell */
static int compile_c(const char *file, kfile *k) {
    snprintf(k->dir, sizeof k->dir, "/tmp/trident-kernel-XXXXXX");
    if (!mkdtemp(k->dir)) return fprintf(stderr, "trident kernel: cannot make a temporary directory\n"), 1;
    char so[128], inc[1100];
    snprintf(so, sizeof so, "%s/kernel.so", k->dir);
    const char *dir = getenv("TRIDENT_INCLUDE") ? getenv("TRIDENT_INCLUDE") : TRIDENT_SOURCE_INCLUDE;
    snprintf(inc, sizeof inc, "-I%s", dir);
    const char *cc = getenv("CC") && *getenv("CC") ? getenv("CC") : "cc";
    char *argv[] = {(char *)cc, "-O2", "-shared", "-fPIC", inc, (char *)file, "-o", so, "-lm", NULL};
    pid_t pid = fork();
    if (pid == 0) {
        execvp(cc, argv);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status)) {
        fprintf(stderr, "trident kernel: %s %s failed (exit %d)\n", cc, TD_QUOTE(file),
                WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return 1;
    }
    k->lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    unlink(so);
    rmdir(k->dir);
    if (!k->lib) return fprintf(stderr, "trident kernel: %s\n", dlerror()), 1;
    return 0;
}

/* Load file (GLSL/CUDA text, or C compiled); entry "" means the stem (CUDA, C) or main (GLSL). */
static int kfile_load(kfile *k, const char *file, const char *entry) {
    memset(k, 0, sizeof *k);
    k->lang = lang_of(file);
    if (k->lang < 0)
        return fprintf(stderr, "trident kernel: %s is not .comp (GLSL), .cu (CUDA) or .c (C)\n", TD_QUOTE(file)), 2;
    const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    snprintf(k->stem, sizeof k->stem, "%.*s", (int)(strcspn(base, ".")), base);
    for (char *p = k->stem; *p; p++)
        if (!isalnum((unsigned char)*p)) *p = '_';
    if (!k->stem[0]) snprintf(k->stem, sizeof k->stem, "kernel");
    if (entry && *entry)
        snprintf(k->entry, sizeof k->entry, "%s", entry);
    else if (k->lang != LANG_GLSL)
        snprintf(k->entry, sizeof k->entry, "%.*s", (int)(strcspn(base, ".")), base);
    if (k->lang == LANG_C) return compile_c(file, k);
    if (!(k->source = read_text(file))) return fprintf(stderr, "trident kernel: cannot read %s\n", TD_QUOTE(file)), 1;
    return 0;
}

static void kfile_free(kfile *k) {
    free(k->source);
    if (k->lib) dlclose(k->lib);
}

/* the impl of entry (C: looked up in the library) */
static int kfile_impl(const kfile *k, const char *entry, const kargs *a, td_custom_impl *im) {
    *im = (td_custom_impl){.source = k->source,
                           .entry = *entry ? entry : NULL,
                           .grid = a->rows ? TD_GRID_ROWS : TD_GRID_ELEMENTS,
                           .dtypes = a->f64 ? 1u << TD_F32 | 1u << TD_F64 : 0};
    if (k->lang == LANG_C) {
        im->source = NULL, im->entry = NULL;
        *(void **)&im->cpu = dlsym(k->lib, entry);
        if (!im->cpu) return fprintf(stderr, "trident kernel: no function %s in the C file\n", TD_QUOTE(entry)), 1;
    }
    return 0;
}

static td_status kop_shape(const td_custom_call *c, td_custom_meta *out) {
    const kop *o = c->user;
    out[0].ndim = o->out_ndim < 0 ? td_ndim(c->inputs[0]) : o->out_ndim;
    memcpy(out[0].shape, o->out_ndim < 0 ? td_shape(c->inputs[0]) : o->out_shape,
           sizeof(int64_t) * (size_t)out[0].ndim);
    return TD_OK;
}

static td_status bwd_shape(const td_custom_call *c, td_custom_meta *out) {
    for (int j = 0; j < c->n_out; j++) {
        out[j].ndim = td_ndim(c->inputs[c->n_in - 1]);
        memcpy(out[j].shape, td_shape(c->inputs[c->n_in - 1]), sizeof(int64_t) * (size_t)out[j].ndim);
    }
    return TD_OK;
}

/* g (the output's shape) summed down to t's shape (its broadcast dims) */
static td_tensor *sum_to(td_tensor *g, td_tensor *t) {
    int lead = td_ndim(g) - td_ndim(t), dims[TD_MAX_DIMS], n = 0;
    if (lead < 0) return g; /* the custom op's shape check reports it */
    for (int d = 0; d < td_ndim(g); d++)
        if (d < lead || (td_size(t, d - lead) == 1 && td_size(g, d) != 1)) dims[n++] = d;
    return n ? td_reshape(td_sum(g, n, dims, false), td_ndim(t), td_shape(t)) : g;
}

static td_status kop_backward(const td_custom_call *c, td_tensor *const *dy, td_tensor **dx) {
    const kop *o = c->user;
    td_tensor *in[K_MAX_IN + 1], *g[K_MAX_IN];
    for (int i = 0; i < c->n_in; i++) in[i] = c->inputs[i];
    in[c->n_in] = dy[0];
    td_status st = td_custom_op_call(o->bwd, c->n_in + 1, in, (int)c->args.n_params, c->args.p, o->grads, g);
    for (int i = 0; st == TD_OK && i < c->n_in; i++)
        if (td_custom_needs_grad(c, i) && !(dx[i] = sum_to(g[o->grads == 1 ? 0 : i], c->inputs[i])))
            st = td_last_status();
    return st;
}

static int kop_register(kop *o, const kargs *a, const kfile *f, const kfile *b, int n_in) {
    o->a = a;
    o->n_in = n_in;
    o->grads = a->grads;
    td_custom_impl im;
    if (kfile_impl(f, f->entry, a, &im)) return 1;
    td_custom_op_def def = {.name = f->stem, .n_in = n_in, .n_out = 1, .shape = kop_shape, .user = o};
    td_custom_impl *slot = f->lang == LANG_CUDA ? &def.cuda : f->lang == LANG_GLSL ? &def.vulkan : &def.cpu;
    *slot = im;
    if (b) {
        char entry[160];
        snprintf(entry, sizeof entry, "%s%s", b->entry, b == f && *f->entry ? "_backward" : "");
        td_custom_impl bim;
        if (kfile_impl(b, entry, a, &bim)) return 1;
        bim.grid = TD_GRID_ELEMENTS;
        char bname[64];
        snprintf(bname, sizeof bname, "%s%s", b->stem, b == f ? "_backward" : "");
        td_custom_op_def bdef = {.name = bname, .n_in = n_in + 1, .n_out = o->grads, .shape = bwd_shape};
        *(b->lang == LANG_CUDA ? &bdef.cuda : b->lang == LANG_GLSL ? &bdef.vulkan : &bdef.cpu) = bim;
        if (td_custom_op_register(&bdef, &o->bwd) != TD_OK)
            return fprintf(stderr, "trident kernel: %s\n", td_last_error()), 1;
        def.backward = kop_backward;
    }
    if (td_custom_op_register(&def, &o->fwd) != TD_OK)
        return fprintf(stderr, "trident kernel: %s\n", td_last_error()), 1;
    return 0;
}

static void kop_free(kop *o) {
    td_custom_op_free(o->fwd);
    td_custom_op_free(o->bwd);
}

/* ---- the commands ---- */

static double median_ms(td_device dev, td_custom_op *op, int n, td_tensor *const *in, const kargs *a) {
    double t[15];
    for (int r = -2; r < 15; r++) {
        td_synchronize(dev);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        td_scope_begin();
        td_tensor *y = op ? td_custom_op_apply(op, n, in, a->n_params, a->params) : eval_ref(a, n, in);
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

/* a bar chart of the kernel's and the reference's times */
static int write_svg(const char *path, const char *label, double k, double r) {
    FILE *f = fopen(path, "w");
    if (!f) return fprintf(stderr, "trident kernel: cannot write %s\n", TD_QUOTE(path)), 1;
    double top = k > r ? k : r;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"420\" height=\"160\" font-family=\"sans-serif\" "
            "font-size=\"12\">\n<text x=\"10\" y=\"18\">%s (median ms, shorter is faster)</text>\n",
            label);
    const char *names[2] = {"kernel", "reference"}, *colors[2] = {"#2a7ab0", "#b0602a"};
    double v[2] = {k, r};
    for (int i = 0; i < 2; i++) {
        if (v[i] <= 0) continue;
        double w = 300 * v[i] / top;
        fprintf(f,
                "<text x=\"10\" y=\"%d\">%s</text><rect x=\"80\" y=\"%d\" width=\"%.1f\" height=\"30\" fill=\"%s\"/>"
                "<text x=\"%.1f\" y=\"%d\">%.4f</text>\n",
                60 + 50 * i, names[i], 40 + 50 * i, w, colors[i], 85 + w, 60 + 50 * i, v[i]);
    }
    fprintf(f, "</svg>\n");
    return fclose(f) != 0;
}

static td_tensor *kop_apply(void *user, int n, td_tensor *const *in) {
    const kop *o = user;
    return td_custom_op_apply(o->fwd, n, in, o->a->n_params, o->a->params);
}

static int run_op(const kargs *a, td_device dev, const kop *o, int n, int64_t shapes[][TD_MAX_DIMS], int *ndims) {
    int rc = 0;
    char d[32];
    td_device_str(dev, d, sizeof d);
    td_scope_begin();
    td_tensor *in[K_MAX_IN];
    bool grad = !strcmp(a->cmd, "gradcheck");
    printf("seed %llu (--seed %llu to repeat)\n", (unsigned long long)a->seed, (unsigned long long)a->seed);
    for (int i = 0; i < n; i++) {
        in[i] = td_randn(ndims[i], shapes[i], a->seed + (uint64_t)i, 0, TD_F32, dev);
        if (grad) in[i] = td_cast(in[i], TD_F64);
        if (grad && td_set_requires_grad(in[i], true) != TD_OK) in[i] = NULL;
    }
    if (grad) {
        td_gradcheck_options loose = {1e-2, 2e-3, 2e-2}; /* a kernel computing in float32 */
        td_status st = td_gradcheck(kop_apply, (void *)o, n, in, a->f64 ? NULL : &loose);
        if (st == TD_OK)
            printf("gradcheck ok on %s (%s)\n", d,
                   a->f64 ? "float64" : "a float32 kernel: eps 1e-2, atol 2e-3, rtol 2e-2");
        else
            fprintf(stderr, "trident kernel: %s\n", td_last_error());
        rc = st != TD_OK;
        td_scope_end();
        return rc;
    }
    td_tensor *y = td_custom_op_apply(o->fwd, n, in, a->n_params, a->params);
    if (!y) {
        fprintf(stderr, "trident kernel: %s\n", td_last_error());
        rc = 1;
    } else if (!strcmp(a->cmd, "run")) {
        td_tensor *yc = td_cast(td_to(y, TD_CPU), TD_F64);
        printf("output [%lld element%s] mean |y| %.6g\n", (long long)td_numel(y), td_numel(y) == 1 ? "" : "s",
               td_item(td_mean(td_abs(yc), 0, NULL, false)));
        if (a->ref) {
            td_tensor *r = eval_ref(a, n, in);
            td_tensor *rc64 = r ? td_cast(td_to(r, TD_CPU), TD_F64) : NULL;
            double diff = rc64 ? td_item(td_amax(td_abs(td_sub(yc, rc64)), 0, NULL, false)) : INFINITY;
            double scale = rc64 ? td_item(td_amax(td_abs(rc64), 0, NULL, false)) : 0;
            bool ok = diff <= 1e-5 * (1 + scale);
            printf("max |kernel - ref| = %.3g (%s: tolerance 1e-5 * (1 + max |ref|))\n", diff, ok ? "ok" : "MISMATCH");
            rc = !ok;
        }
    } else {
        double k = median_ms(dev, o->fwd, n, in, a), r = a->ref ? median_ms(dev, NULL, n, in, a) : -1;
        printf("%-10s %-24s %12s %12s %9s\n", "device", "kernel", "kernel ms", "ref ms", "speedup");
        const char *base = strrchr(a->file, '/') ? strrchr(a->file, '/') + 1 : a->file;
        printf("%-10s %-24.24s %12.4f", d, base, k);
        if (r > 0)
            printf(" %12.4f %8.2fx\n", r, r / k);
        else
            printf(" %12s %9s\n", "-", "-");
        rc = k < 0;
        if (!rc && a->svg) rc = write_svg(a->svg, a->file, k, r);
    }
    td_scope_end();
    return rc;
}

static const char kernel_usage[] =
    "usage: trident kernel check|run|bench|gradcheck FILE.comp|FILE.cu|FILE.c [--device D] [--shape 64x256,256]\n"
    "       [--out-shape S] [--rows] [--f64] [--ref EXPR] [--names x,b] [--entry NAME] [--seed N] [--svg OUT]\n"
    "       [--backward FILE] [--grads N] [--params P0,P1,...] [--log]\n";

static void kernel_help(FILE *f) {
    fputs(kernel_usage, f);
    fputs("\n"
          "Compile, run, time or gradcheck one kernel file of a custom op (walk-through: "
          "examples/custom_ops/README.md).\n"
          "\n"
          "commands:\n"
          "  check       compile as a custom op does (TD_BLOCK=256) and check the block; errors on one line,\n"
          "              <FILE>:<line>: <first error>\n"
          "  run         run once on random inputs (the seed is printed) and, with --ref, compare with EXPR\n"
          "  bench       time the kernel, and EXPR next to it with --ref\n"
          "  gradcheck   td_gradcheck of the op with its backward kernel\n"
          "\n"
          "FILE is GLSL (.comp, default device vulkan:0), CUDA (.cu, cuda:0) or C (.c, cpu; compiled by $CC, default\n"
          "cc, into a shared library against the Trident headers: $TRIDENT_INCLUDE or the source tree's).\n"
          "Naming: the entry function is named after the file's stem (bias_gelu.c: bias_gelu; GLSL: main) unless\n"
          "--entry; the backward is <stem>_backward in the same file (C, CUDA) or --backward's file (GLSL needs one).\n"
          "A backward's temporaries are scoped: the tensors it makes belong to the scope autograd opens around it.\n"
          "\n"
          "options:\n"
          "  --device D        device to run on (cpu, cuda:N, vulkan:N)\n"
          "  --shape S         the inputs' shapes, comma-separated, dims joined by x: 64x256,256 is two inputs;\n"
          "                    scalar is a 0-d input (scalar,256)\n"
          "  --out-shape S     the output's shape (default: input 0's); scalar for 0-d\n"
          "  --rows            launch one block per row of input 0 (TD_GRID_ROWS; default one thread per element)\n"
          "  --f64             the kernel also computes in float64 (scalar_t, c->dtype); gradcheck in float64\n"
          "  --ref EXPR        reference expression over the inputs, named x, b, c, d, ... in order: numbers,\n"
          "                    + - * /, parentheses and the functions gelu (tanh form), gelu_erf, relu, exp, log,\n"
          "                    tanh, sigmoid, sqrt, rsqrt; one that does not parse is refused before anything runs\n"
          "  --names x,b       other names for the inputs in EXPR, one per input of --shape\n"
          "  --entry NAME      the entry function (default: the file's stem; GLSL: main)\n"
          "  --params P0,P1    up to 8 float parameters, the kernel's td.p[] (GLSL) / a.p[] (CUDA, C)\n"
          "  --seed N          seed of the random inputs (default: from the clock, printed)\n"
          "  --svg OUT         bench: a bar chart of the kernel's and EXPR's times\n"
          "  --backward FILE   gradcheck: the backward kernel's file (default FILE, entry <stem>_backward)\n"
          "  --grads N         gradcheck: the backward's outputs: 1 (one gradient of the output's shape, summed down\n"
          "                    to each input's shape) or one per input (default 1); the backward's bindings are the\n"
          "                    inputs, the output's gradient, then these N gradients\n"
          "  --log             check: the compiler's whole log on an error too (or TRIDENT_KERNEL_LOG=1, any command)\n"
          "  -h, --help        this help\n",
          f);
}

int cmd_kernel(int argc, char **argv) {
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) return kernel_help(stdout), 0;
    if (argc < 3) return fputs(kernel_usage, stderr), 2;
    kargs a = {.cmd = argv[1], .file = argv[2], .grads = 1, .seed = (uint64_t)time(NULL) % 100000};
    if (strcmp(a.cmd, "check") && strcmp(a.cmd, "run") && strcmp(a.cmd, "bench") && strcmp(a.cmd, "gradcheck"))
        return fprintf(stderr, "trident kernel: unknown command %s (check, run, bench, gradcheck)\n", TD_QUOTE(a.cmd)),
               2;
    for (int i = 3; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "--rows") || !strcmp(o, "--f64") || !strcmp(o, "--log")) {
            *(o[2] == 'r' ? &a.rows : o[2] == 'f' ? &a.f64 : &a.log) = true;
            continue;
        }
        if (!v) return fprintf(stderr, "trident kernel: %s needs a value\n", TD_QUOTE(o)), 2;
        i++;
        const struct {
            const char *name, **to;
        } strings[] = {{"--device", &a.device},     {"--shape", &a.shape}, {"--out-shape", &a.out_shape},
                       {"--ref", &a.ref},           {"--names", &a.names}, {"--entry", &a.entry},
                       {"--backward", &a.backward}, {"--svg", &a.svg}};
        size_t k = 0;
        while (k < sizeof strings / sizeof *strings && strcmp(o, strings[k].name)) k++;
        if (k < sizeof strings / sizeof *strings)
            *strings[k].to = v;
        else if (!strcmp(o, "--grads"))
            a.grads = atoi(v);
        else if (!strcmp(o, "--seed"))
            a.seed = strtoull(v, NULL, 10);
        else if (!strcmp(o, "--params")) { /* "1e-5,2": the kernel's td.p[] / a.p[] */
            if (!parse_params(v, &a)) return 2;
        } else
            return fprintf(stderr, "trident kernel: unknown option %s (see trident kernel --help)\n", TD_QUOTE(o)), 2;
    }
    /* everything the command line can get wrong, refused before anything compiles or runs */
    bool grad = !strcmp(a.cmd, "gradcheck"), own_b = grad && a.backward && strcmp(a.backward, a.file);
    int64_t shapes[K_MAX_IN][TD_MAX_DIMS];
    int ndims[K_MAX_IN], n = 0;
    kop o = {.out_ndim = -1};
    if (strcmp(a.cmd, "check")) {
        if ((n = parse_shapes(a.shape, shapes, ndims)) < 1)
            return fprintf(stderr, "trident kernel %s: --shape %s is not like 64x256,256 (scalar: 0-d)\n", a.cmd,
                           a.shape ? TD_QUOTE(a.shape) : "(missing)"),
                   2;
        if (a.grads != 1 && a.grads != n)
            return fprintf(stderr, "trident kernel: --grads %d is neither 1 nor the number of inputs (%d)\n", a.grads,
                           n),
                   2;
        if (a.names && !check_names(a.names, n)) return 2;
        if (grad && lang_of(a.file) == LANG_GLSL && !a.backward)
            return fprintf(stderr, "trident kernel gradcheck: a GLSL kernel needs --backward FILE.comp\n"), 2;
        if (a.out_shape) {
            int nd[1];
            int64_t s[1][TD_MAX_DIMS];
            if (parse_shapes(a.out_shape, s, nd) != 1)
                return fprintf(stderr, "trident kernel: --out-shape %s is not like 64x256 (scalar: 0-d)\n",
                               TD_QUOTE(a.out_shape)),
                       2;
            o.out_ndim = nd[0];
            memcpy(o.out_shape, s[0], sizeof o.out_shape);
        }
        if (a.ref && !ref_parses(&a, n)) return 2;
    }
    kfile f, b;
    int rc = kfile_load(&f, a.file, a.entry);
    if (rc) return rc;
    static const char *const default_device[3] = {"vulkan:0", "cuda:0", "cpu"};
    const char *dev_name = a.device ? a.device : default_device[f.lang];
    td_device dev;
    if (td_device_parse(dev_name, &dev) != TD_OK || !td_device_available(dev)) {
        fprintf(stderr, "trident kernel: device %s: %s\n", TD_QUOTE(dev_name), td_last_error());
        kfile_free(&f);
        return 1;
    }
    if (!strcmp(a.cmd, "check")) {
        if (f.lang == LANG_C)
            printf("%s: compiled (C, for cpu)\n", a.file);
        else {
            /* compiled as a custom op compiles it: its block and dtype defines, checked against its block */
            char log[16384], d[32];
            const char *defs[] = {"TD_BLOCK=256", a.f64 ? "scalar_t=double" : "scalar_t=float", "TD_F64"};
            td_kernel_options opts = {.defines = defs, .n_defines = a.f64 ? 3 : 2, .name = a.file};
            td_user_kernel *k = NULL;
            td_status st = td_kernel_compile(dev, f.lang == LANG_CUDA ? TD_KERNEL_CUDA : TD_KERNEL_GLSL, f.source,
                                             *f.entry ? f.entry : NULL, &opts, &k, log, sizeof log);
            static const uint32_t block[3] = {256, 1, 1};
            bool compiled = st == TD_OK;
            if (compiled) st = td_kernel_check_block(k, block);
            if (log[0] && (st == TD_OK || a.log) && !getenv("TRIDENT_KERNEL_LOG"))
                fputs(log, st == TD_OK ? stdout : stderr);
            if (st == TD_OK)
                printf("%s: compiled for %s\n", a.file, td_device_str(dev, d, sizeof d));
            else /* a compile error names the file already */
                fprintf(stderr, "trident kernel: %s%s%s\n", compiled ? a.file : "", compiled ? ": " : "",
                        td_last_error());
            td_kernel_free(k);
            rc = st != TD_OK;
        }
        kfile_free(&f);
        return rc;
    }
    if (!rc && own_b) {
        rc = kfile_load(&b, a.backward, NULL);
        if (!rc && b.lang != f.lang) {
            fprintf(stderr, "trident kernel: --backward %s is not in FILE's language\n", TD_QUOTE(a.backward));
            rc = 2;
        }
    }
    if (!rc) rc = kop_register(&o, &a, &f, grad ? (own_b ? &b : &f) : NULL, n);
    if (!rc) rc = run_op(&a, dev, &o, n, shapes, ndims);
    kop_free(&o);
    if (own_b) kfile_free(&b);
    kfile_free(&f);
    return rc;
}
