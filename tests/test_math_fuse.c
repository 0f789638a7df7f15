/*
** The math-block fuser (src/math/plan.c) against composed evaluation
** (td_math_graph_eval: one table op per node) on cpu, vulkan:0 and cuda:0
** (skipped when absent), in f32, f64, f16 and bf16, new buffers NaN-poisoned:
**   ew:        every elementwise op of the language, alone and in a chain;
**   broadcast: inputs of every broadcast pattern ([N,C] with [C], [N,1],
**              [1,C], 0-d, a literal), a transposed and an expanded input;
**   reduce:    sum / mean / amax / amin over the last dim, over all dims,
**              over the leading dim (and keepdim), after elementwise work;
**   reduce_long: long reductions with few outputs (split into chunks on GPUs);
**   matmul:    two regions on either side of a matmul;
**   outputs:   several outputs of one region sharing a sub-expression.
**   threads:   (cpu) the fused kernels give the same bits on 1, 2, 3 and 16 threads.
**   half_rounding: (cpu) bf16 / f16 blocks round once, as the f32 block and a cast.
**   half_binary: (cpu) the bf16 / f16 add, sub, mul, div ops, as the f32 op and a cast.
**   isa_paths: (cpu) the runner's instruction-set paths (TRIDENT_CPU_ISA) give the same bits.
** Graphs are built with td_math_add (no parser). Each case also checks the
** plan's count of fused kernels (but for f64 on Vulkan, whose GLSL regions
** with transcendentals run composed).
** Inputs from a printed seed (TD_TEST_SEED).
*/
#include <math.h>
#include <string.h>

#include "math/graph.h"
#include "math/plan.h"
#include "runner.h"
#include "test_util.h"

static const td_dtype DTYPES[] = {TD_F32, TD_F64, TD_F16, TD_BF16};

static const char *EW_NAMES[] = {
#define EW_NAME_(N, a, s) #N,
    TD_MATH_EW_LIST(EW_NAME_)
#undef EW_NAME_
};
static const char *RED_NAMES[] = {"sum", "mean", "amax", "amin"};

/* tolerance (absolute and relative) of fused vs composed: the fused kernel rounds only its outputs */
static double tol_of(td_dtype dt) { return dt == TD_F64 ? 1e-10 : dt == TD_F32 ? 2e-5 : dt == TD_F16 ? 8e-3 : 4e-2; }

/* A graph as a node list (td__math_case_nodes adds them with td_math_add). */
typedef struct tgraph {
    td_math_node nodes[64];
    int n;
    const char *names[TD_MATH_MAX_INPUTS];
    int n_in;
    int outputs[TD_MATH_MAX_OUTPUTS];
    int n_out;
} tgraph;

static int node(tgraph *g, td_math_node n) {
    ASSERT(g->n < 64);
    g->nodes[g->n] = n;
    return g->n++;
}

static int in(tgraph *g, const char *name) {
    g->names[g->n_in] = name;
    return node(g, (td_math_node){.kind = TD_MK_INPUT, .input = g->n_in++, .args = {-1, -1, -1}});
}

static int ew(tgraph *g, int op, int a, int b, int c) {
    return node(g, (td_math_node){.kind = TD_MK_EW, .op = op, .n_args = b < 0 ? 1 : c < 0 ? 2 : 3, .args = {a, b, c}});
}

static int cst(tgraph *g, double v) {
    return node(g, (td_math_node){.kind = TD_MK_CONST, .value = v, .args = {-1, -1, -1}});
}

/* reduction over dim (99: all dims) */
static int red(tgraph *g, int op, int a, int dim, bool keepdim) {
    return node(g, (td_math_node){.kind = TD_MK_REDUCE,
                                  .op = op,
                                  .n_args = 1,
                                  .args = {a, -1, -1},
                                  .keepdim = keepdim,
                                  .n_wdims = dim == 99 ? 0 : 1,
                                  .wdims = {dim},
                                  .correction = 1});
}

static int unary(tgraph *g, td_math_kind kind, int a) {
    return node(g, (td_math_node){.kind = kind, .n_args = 1, .args = {a, -1, -1}});
}

static void out(tgraph *g, int n) { g->outputs[g->n_out++] = n; }

typedef struct spec {
    int ndim;
    int64_t shape[4];
    double lo, hi;
} spec;

/* Type g for inputs of specs in dt on dev, run the plan and the composed graph, compare every output.
** want_kernels: the plan's fused kernels. */
static void check(tgraph *g, const spec *specs, td_dtype dt, td_device dev, int want_kernels, const char *what) {
    td_dtype dts[TD_MATH_MAX_INPUTS];
    int nd[TD_MATH_MAX_INPUTS];
    int64_t shapes[TD_MATH_MAX_INPUTS][TD_MAX_DIMS];
    td_tensor *x[TD_MATH_MAX_INPUTS];
    for (int i = 0; i < g->n_in; i++) {
        dts[i] = dt, nd[i] = specs[i].ndim;
        for (int d = 0; d < specs[i].ndim; d++) shapes[i][d] = specs[i].shape[d];
        x[i] = ASSERT_TENSOR(test_uniform_tensor(nd[i], shapes[i], specs[i].lo, specs[i].hi, dt, dev));
    }
    td_math_case *c;
    ASSERT_OK(td__math_case_nodes(g->n, g->nodes, g->n_in, g->names, g->n_out, g->outputs, dts, nd,
                                  (const int64_t(*)[TD_MAX_DIMS])shapes, dev, &c));
    /* GLSL has no f64 transcendentals: such regions run composed on Vulkan */
    if (!(dev.type == TD_DEVICE_VULKAN && dt == TD_F64)) ASSERT_EQ_INT(td__math_case_kernels(c), want_kernels);
    td_tensor *fused[TD_MATH_MAX_OUTPUTS], *ref[TD_MATH_MAX_OUTPUTS];
    ASSERT_OK(td__math_case_run(c, true, x, fused));
    ASSERT_OK(td__math_case_run(c, false, x, ref));
    double tol = tol_of(dt);
    for (int k = 0; k < g->n_out; k++) {
        ASSERT_EQ_INT(td_ndim(fused[k]), td_ndim(ref[k]));
        ASSERT_EQ_INT(td_numel(fused[k]), td_numel(ref[k]));
        ASSERT_EQ_INT(td_tensor_dtype(fused[k]), td_tensor_dtype(ref[k]));
        double *a = test_host(fused[k]), *b = test_host(ref[k]);
        for (int64_t i = 0; i < td_numel(ref[k]); i++) {
            bool same_nan = isnan(a[i]) && isnan(b[i]);
            if (!same_nan && !(fabs(a[i] - b[i]) <= tol * (1 + fabs(b[i]))))
                TEST_FAIL_("%s (%s, output %d): element %lld: fused %.9g vs composed %.9g", what, td_dtype_name(dt), k,
                           (long long)i, a[i], b[i]);
        }
        free(a), free(b);
    }
    td__math_case_free(c);
}

static void ew_ops(const char *spec_dev) {
    td_device dev = test_device_or_skip(spec_dev);
    test_seed();
    td_debug_set(TD_DEBUG_POISON);
    for (size_t t = 0; t < sizeof DTYPES / sizeof DTYPES[0]; t++)
        for (int op = 0; op < TD_MEW_COUNT; op++) {
            if (op == TD_MEW_CAST || op == TD_MEW_ERF || op == TD_MEW_SIGN) continue; /* derived graphs only */
            td_scope_begin();
            tgraph g = {0};
            int x = in(&g, "x"), y = in(&g, "y");
            int arity = op == TD_MEW_WHERE || op == TD_MEW_CLAMP ? 3 : op >= TD_MEW_ADD ? 2 : 1, r;
            if (op == TD_MEW_WHERE)
                r = ew(&g, op, ew(&g, TD_MEW_GT, x, y, -1), x, y);
            else if (op == TD_MEW_CLAMP)
                r = ew(&g, op, x, cst(&g, 0.8), y);
            else
                r = ew(&g, op, x, arity > 1 ? y : -1, -1);
            out(&g, r);
            /* and in a chain: (op(...) * x + 1) */
            out(&g, ew(&g, TD_MEW_ADD, ew(&g, TD_MEW_MUL, r, x, -1), cst(&g, 1), -1));
            /* odd ops on 37 x 64 elements (the GPU kernels' vector path: n % 4 == 0), even ones on 37 x 65 */
            int64_t cols = op % 2 ? 64 : 65;
            spec s[2] = {{2, {37, cols}, 0.5, 2.0}, {2, {37, cols}, 0.5, 2.0}};
            check(&g, s, DTYPES[t], dev, 1, EW_NAMES[op]);
            td_scope_end();
        }
}

static void broadcast(const char *spec_dev) {
    td_device dev = test_device_or_skip(spec_dev);
    test_seed();
    td_debug_set(TD_DEBUG_POISON);
    for (size_t t = 0; t < sizeof DTYPES / sizeof DTYPES[0]; t++) {
        td_scope_begin();
        tgraph g = {0};
        /* out = (x * c + r) * s - k + 0.5 + exp(x - u' ) * e  with x [N, C], c [C], r [N, 1], k [1, C], s 0-d,
        ** u [C, N] transposed, e [C] expanded to [N, C] */
        int x = in(&g, "x"), c = in(&g, "c"), r = in(&g, "r"), k = in(&g, "k"), s = in(&g, "s"), u = in(&g, "u"),
            e = in(&g, "e");
        int ee = node(
            &g, (td_math_node){.kind = TD_MK_EXPAND, .n_args = 1, .args = {e, -1, -1}, .ndim = 2, .shape = {19, 33}});
        int v = ew(&g, TD_MEW_MUL, ew(&g, TD_MEW_ADD, ew(&g, TD_MEW_MUL, x, c, -1), r, -1), s, -1);
        v = ew(&g, TD_MEW_ADD, ew(&g, TD_MEW_SUB, v, k, -1), cst(&g, 0.5), -1);
        int w = ew(&g, TD_MEW_EXP, ew(&g, TD_MEW_SUB, x, unary(&g, TD_MK_TRANSPOSE, u), -1), -1, -1);
        out(&g, ew(&g, TD_MEW_ADD, v, ew(&g, TD_MEW_MUL, w, ee, -1), -1));
        spec sp[7] = {{2, {19, 33}, -1, 1}, {1, {33}, -1, 1},     {2, {19, 1}, -1, 1}, {2, {1, 33}, -1, 1},
                      {0, {0}, -1, 1},      {2, {33, 19}, -1, 1}, {1, {33}, -1, 1}};
        check(&g, sp, DTYPES[t], dev, 1, "broadcast");
        td_scope_end();
    }
}

static void reduce(const char *spec_dev) {
    td_device dev = test_device_or_skip(spec_dev);
    test_seed();
    td_debug_set(TD_DEBUG_POISON);
    const int ops[] = {TD_MRED_SUM, TD_MRED_MEAN, TD_MRED_AMAX, TD_MRED_AMIN};
    const struct {
        int dim;
        bool keepdim;
    } how[] = {{-1, false}, {-1, true}, {99, false}, {0, false}, {0, true}, {1, false}};
    for (size_t t = 0; t < sizeof DTYPES / sizeof DTYPES[0]; t++)
        for (int o = 0; o < 4; o++)
            for (size_t h = 0; h < sizeof how / sizeof how[0]; h++) {
                td_scope_begin();
                tgraph g = {0};
                /* red(exp(x) * y - 1) over x [7, 300, 9] */
                int x = in(&g, "x"), y = in(&g, "y");
                int v = ew(&g, TD_MEW_SUB, ew(&g, TD_MEW_MUL, ew(&g, TD_MEW_EXP, x, -1, -1), y, -1), cst(&g, 1), -1);
                out(&g, red(&g, ops[o], v, how[h].dim, how[h].keepdim));
                spec sp[2] = {{3, {7, 300, 9}, -1, 1}, {1, {9}, -1, 1}};
                char what[64];
                snprintf(what, sizeof what, "%s over dim %d%s", RED_NAMES[o], how[h].dim,
                         how[h].keepdim ? " keepdim" : "");
                check(&g, sp, DTYPES[t], dev, 1, what);
                td_scope_end();
            }
}

/* long reductions with few outputs, which GPU kernels cut into chunks of k (a second kernel combines them) */
static void reduce_long(const char *spec_dev) {
    td_device dev = test_device_or_skip(spec_dev);
    test_seed();
    td_debug_set(TD_DEBUG_POISON);
    const int ops[] = {TD_MRED_SUM, TD_MRED_MEAN, TD_MRED_AMAX, TD_MRED_AMIN};
    for (size_t t = 0; t < sizeof DTYPES / sizeof DTYPES[0]; t++)
        for (int o = 0; o < 4; o++)
            for (int h = 0; h < 3; h++) {
                td_scope_begin();
                tgraph g = {0};
                /* red(x * y + x) over all of [64, 4096], or over dim 0 of [12288, 3] or [4096, 40] (a column each) */
                int x = in(&g, "x"), y = in(&g, "y");
                out(&g, red(&g, ops[o], ew(&g, TD_MEW_ADD, ew(&g, TD_MEW_MUL, x, y, -1), x, -1), h ? 0 : 99, false));
                spec sp[2] = {{2, {64, 4096}, -1, 1}, {2, {64, 4096}, -1, 1}};
                if (h) sp[0] = sp[1] = (spec){2, {h == 1 ? 12288 : 4096, h == 1 ? 3 : 40}, -1, 1};
                char what[64];
                snprintf(what, sizeof what, "%s over %s", RED_NAMES[o],
                         h == 0   ? "all"
                         : h == 1 ? "dim 0"
                                  : "dim 0 of 40");
                check(&g, sp, DTYPES[t], dev, 1, what);
                td_scope_end();
            }
}

static void matmul(const char *spec_dev) {
    td_device dev = test_device_or_skip(spec_dev);
    test_seed();
    td_debug_set(TD_DEBUG_POISON);
    for (size_t t = 0; t < sizeof DTYPES / sizeof DTYPES[0]; t++) {
        td_scope_begin();
        tgraph g = {0};
        /* y = relu(tanh(x) @ w + b) * 2 - 1; also mean(y) */
        int x = in(&g, "x"), w = in(&g, "w"), b = in(&g, "b");
        int h = node(
            &g, (td_math_node){.kind = TD_MK_MATMUL, .n_args = 2, .args = {ew(&g, TD_MEW_TANH, x, -1, -1), w, -1}});
        int y = ew(&g, TD_MEW_SUB,
                   ew(&g, TD_MEW_MUL, ew(&g, TD_MEW_RELU, ew(&g, TD_MEW_ADD, h, b, -1), -1, -1), cst(&g, 2), -1),
                   cst(&g, 1), -1);
        out(&g, y);
        out(&g, red(&g, TD_MRED_MEAN, y, 99, false));
        spec sp[3] = {{2, {24, 40}, -1, 1}, {2, {40, 17}, -1, 1}, {1, {17}, -1, 1}};
        check(&g, sp, DTYPES[t], dev, 2, "matmul regions");
        td_scope_end();
    }
}

static void outputs(const char *spec_dev) {
    td_device dev = test_device_or_skip(spec_dev);
    test_seed();
    td_debug_set(TD_DEBUG_POISON);
    for (size_t t = 0; t < sizeof DTYPES / sizeof DTYPES[0]; t++) {
        td_scope_begin();
        tgraph g = {0};
        /* a = sigmoid(x) * y; return a * y, a + x, x (an input as it is), sum(a, -1) */
        int x = in(&g, "x"), y = in(&g, "y");
        int a = ew(&g, TD_MEW_MUL, ew(&g, TD_MEW_SIGMOID, x, -1, -1), y, -1);
        out(&g, ew(&g, TD_MEW_MUL, a, y, -1));
        out(&g, ew(&g, TD_MEW_ADD, a, x, -1));
        out(&g, x);
        out(&g, red(&g, TD_MRED_SUM, a, -1, false));
        spec sp[2] = {{2, {64, 130}, -2, 2}, {2, {64, 130}, -2, 2}};
        check(&g, sp, DTYPES[t], dev, 1, "outputs");
        td_scope_end();
    }
}

void omp_set_num_threads(int n) __attribute__((weak));
int omp_get_max_threads(void) __attribute__((weak));

/* a chain (in registers), broadcasts, and sums over the last dim, dim 0 and all: the same bits on any thread count */
TEST(threads_cpu) {
    if (!omp_set_num_threads) TEST_SKIP("no OpenMP");
    test_seed();
    int keep = omp_get_max_threads(), counts[] = {1, 2, 3, 16};
    for (size_t t = 0; t < sizeof DTYPES / sizeof DTYPES[0]; t++) {
        td_scope_begin();
        tgraph g = {0};
        /* a = ((x * 1.5 + b) * x - 2) / y; return a, sum(a * y, -1), sum(a, 0), mean(a) */
        int x = in(&g, "x"), y = in(&g, "y"), b = in(&g, "b");
        int a = ew(&g, TD_MEW_MUL, ew(&g, TD_MEW_ADD, ew(&g, TD_MEW_MUL, x, cst(&g, 1.5), -1), b, -1), x, -1);
        a = ew(&g, TD_MEW_DIV, ew(&g, TD_MEW_SUB, a, cst(&g, 2), -1), y, -1);
        out(&g, a);
        out(&g, red(&g, TD_MRED_SUM, ew(&g, TD_MEW_MUL, a, y, -1), -1, false));
        out(&g, red(&g, TD_MRED_SUM, a, 0, false));
        out(&g, red(&g, TD_MRED_MEAN, a, 99, false));
        int64_t shapes[3][TD_MAX_DIMS] = {{300, 1031}, {300, 1031}, {300, 1}};
        td_dtype dts[3] = {DTYPES[t], DTYPES[t], DTYPES[t]};
        int nd[3] = {2, 2, 2};
        td_tensor *in3[3];
        for (int i = 0; i < 3; i++) in3[i] = ASSERT_TENSOR(test_uniform_tensor(2, shapes[i], 1, 2, DTYPES[t], TD_CPU));
        td_math_case *c;
        ASSERT_OK(td__math_case_nodes(g.n, g.nodes, g.n_in, g.names, g.n_out, g.outputs, dts, nd,
                                      (const int64_t(*)[TD_MAX_DIMS])shapes, TD_CPU, &c));
        double *first[4] = {NULL};
        for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
            omp_set_num_threads(counts[k]);
            td_tensor *res[TD_MATH_MAX_OUTPUTS];
            ASSERT_OK(td__math_case_run(c, true, in3, res));
            for (int o = 0; o < g.n_out; o++) {
                double *h = test_host(res[o]);
                if (!first[o])
                    first[o] = h;
                else {
                    for (int64_t i = 0; i < td_numel(res[o]); i++)
                        if (memcmp(&h[i], &first[o][i], sizeof h[i]))
                            TEST_FAIL_("%s output %d element %lld: %.17g on %d threads, %.17g on 1",
                                       td_dtype_name(DTYPES[t]), o, (long long)i, h[i], counts[k], first[o][i]);
                    free(h);
                }
            }
        }
        omp_set_num_threads(keep);
        for (int o = 0; o < g.n_out; o++) free(first[o]);
        td__math_case_free(c);
        td_scope_end();
    }
}

/* The fused block in bf16 / f16 (inputs widened in registers or once per block, the f32 results rounded once at
** the store) against the same block in f32, fused and then composed (one table op a node; NaN for NaN), followed
** by the cast op's rounding: the same bits, for random bit patterns (ties to even, overflow to Inf, subnormals) and NaN
*payloads, Inf and
** zeros; at ragged lengths, a size under the streamed-store threshold and one over it. */
static bool half_nan(td_dtype dt, uint16_t h) { return (h & 0x7FFF) > (dt == TD_BF16 ? 0x7F80 : 0x7C00); }

static void half_case(td_dtype dt, int64_t n, const char *src) {
    static const uint16_t bf16_sp[] = {0x7FC0, 0xFFC0, 0x7F81, 0xFF81, 0x7FFF, 0x7F80, 0xFF80,
                                       0x0000, 0x8000, 0x0001, 0x807F, 0x7F7F, 0xFF7F};
    static const uint16_t f16_sp[] = {0x7E00, 0xFE00, 0x7C01, 0xFDFF, 0x7C00, 0xFC00,
                                      0x0000, 0x8000, 0x0001, 0x83FF, 0x7BFF};
    const uint16_t *sp = dt == TD_BF16 ? bf16_sp : f16_sp;
    size_t n_sp = dt == TD_BF16 ? sizeof bf16_sp / 2 : sizeof f16_sp / 2;
    td_scope_begin();
    uint16_t *xy = malloc(sizeof *xy * (size_t)n * 2), *got = malloc(sizeof *got * (size_t)n),
             *want = malloc(sizeof *want * (size_t)n);
    float *ref = malloc(sizeof *ref * (size_t)n);
    ASSERT(xy && got && want && ref);
    for (int64_t i = 0; i < 2 * n; i++) xy[i] = (uint16_t)test_next();
    for (size_t k = 0; k < n_sp && (int64_t)(n_sp + k) < n; k++) /* specials in x, and in y */
        xy[k] = sp[k], xy[n + n_sp + k] = sp[k];
    td_tensor *in[2], *in32[2], *res[3], *res32[3];
    for (int k = 0; k < 2; k++) {
        in[k] = ASSERT_TENSOR(td_from_data(xy + k * n, 1, &n, dt, TD_CPU));
        in32[k] = ASSERT_TENSOR(td_cast(in[k], TD_F32));
    }
    const char *names[2] = {"x", "y"};
    td_dtype dts[2] = {dt, dt}, f32s[2] = {TD_F32, TD_F32};
    int nd[2] = {1, 1};
    int64_t shapes[2][TD_MAX_DIMS] = {{n}, {n}};
    td_math_case *c, *c32;
    ASSERT_OK(td__math_case_parse(src, 2, names, dts, nd, (const int64_t(*)[TD_MAX_DIMS])shapes, TD_CPU, &c));
    ASSERT_OK(td__math_case_parse(src, 2, names, f32s, nd, (const int64_t(*)[TD_MAX_DIMS])shapes, TD_CPU, &c32));
    ASSERT_EQ_INT(td__math_case_kernels(c), 1);
    ASSERT_OK(td__math_case_run(c, true, in, res));
    int64_t ties = 0;
    for (int k = 0; k < 6; k++) { /* the f32 block fused, then composed (one table op a node) */
        int o = k % 3;
        if (o == 0) ASSERT_OK(td__math_case_run(c32, k < 3, in32, res32));
        ASSERT_OK(td_copy_to_host(res[o], got, sizeof *got * (size_t)n, dt));
        ASSERT_OK(td_copy_to_host(ASSERT_TENSOR(td_cast(res32[o], dt)), want, sizeof *want * (size_t)n, dt));
        ASSERT_OK(td_copy_to_host(res32[o], ref, sizeof *ref * (size_t)n, TD_F32));
        for (int64_t i = 0; i < n; i++) {
            uint32_t b;
            memcpy(&b, &ref[i], 4);
            /* exactly half an ulp of the result's type (normal range) */
            if (dt == TD_BF16 ? (b & 0xFFFF) == 0x8000
                              : (b & 0x1FFF) == 0x1000 && fabsf(ref[i]) >= 0x1p-14f && fabsf(ref[i]) < 65504.0f)
                ties++;
            /* composed, NaN op NaN may give the other's payload (the compiler may swap a commutative op's operands;
            ** the fused f32 block has the half block's order) */
            if (k >= 3 && half_nan(dt, got[i]) && half_nan(dt, want[i])) continue;
            if (got[i] != want[i])
                TEST_FAIL_("%s n %lld output %d element %lld: x %04x y %04x, f32 %08x: fused %04x, %s and cast %04x",
                           td_dtype_name(dt), (long long)n, o, (long long)i, xy[i], xy[n + i], b, got[i],
                           k < 3 ? "fused f32" : "composed f32", want[i]);
        }
    }
    ASSERT(ties > 0 || n < 1000);
    free(xy), free(got), free(want), free(ref);
    td__math_case_free(c);
    td__math_case_free(c32);
    td_scope_end();
}

TEST(half_rounding_cpu) {
    test_seed();
    /* the first runs as chains over blocks (the last output: NaNs unquieted); the second, of + - * / alone, as one
    ** program (values read by several ops in local tiles) */
    const char *srcs[2] = {"return x * y, ((((x*1.5+0.5)*x-2)*0.25+x)*3-1) * y, where(y > 0, x, y)",
                           "a = x * 3; b = a * 0.25; return x * y, (a + b * (y * 1.5 + 0.5)) + b * y * 1.5, (x + y) / "
                           "(x - y) - 2 / y"};
    td_dtype dts[] = {TD_BF16, TD_F16};
    for (int t = 0; t < 2; t++) {
        for (int k = 0; k < 2; k++) {
            const char *src = srcs[k];
            half_case(dts[t], 5, src); /* ragged tails: shorter than a register step, and past whole blocks */
            half_case(dts[t], 3 * 1024 + 1001, src);
            half_case(dts[t], (1 << 16) + 13, src);
            half_case(dts[t], (1 << 22) + 5, src); /* outputs of >= 16 MB as f32: streamed stores */
        }
    }
}

/* The bf16 / f16 table ops ADD, SUB, MUL, DIV (the elementwise op the block is timed against; AVX2 rows that widen
** and round in registers) against the f32 op and a cast: the same bits, for random bit patterns and specials, at
** ragged lengths, with a broadcast scalar on either side, and at a length whose output is streamed. */
static void half_binary_case(td_dtype dt, int64_t n) {
    static const uint16_t sp[] = {0x7FC0, 0xFF81, 0x7F80, 0xFF80, 0x0000, 0x8000, 0x0001, 0x807F,
                                  0x7F7F, 0x7E00, 0xFDFF, 0x7C00, 0xFC00, 0x83FF, 0x7BFF, 0x3C00};
    td_tensor *(*ops[])(td_tensor *, td_tensor *) = {td_add, td_sub, td_mul, td_div};
    td_scope_begin();
    uint16_t *ab = malloc(sizeof *ab * (size_t)n * 2), *got = malloc(sizeof *got * (size_t)n),
             *want = malloc(sizeof *want * (size_t)n);
    ASSERT(ab && got && want);
    for (int64_t i = 0; i < 2 * n; i++) ab[i] = (uint16_t)test_next();
    for (size_t k = 0; k < sizeof sp / 2 && (int64_t)k < n; k++) ab[k] = sp[k], ab[2 * n - 1 - (int64_t)k] = sp[k];
    int64_t one = 1;
    td_tensor *a = ASSERT_TENSOR(td_from_data(ab, 1, &n, dt, TD_CPU));
    td_tensor *b = ASSERT_TENSOR(td_from_data(ab + n, 1, &n, dt, TD_CPU));
    const int64_t si = n > 3 ? 3 : 0; /* the scalar's element: a NaN (bf16) or a normal (f16), or sp[0] */
    td_tensor *s = ASSERT_TENSOR(td_from_data(ab + si, 1, &one, dt, TD_CPU));
    td_tensor *lhs[3] = {a, s, a}, *rhs[3] = {b, a, s};
    for (int o = 0; o < 4; o++)
        for (int c = 0; c < 3; c++) {
            td_tensor *r = ASSERT_TENSOR(ops[o](lhs[c], rhs[c]));
            td_tensor *r32 = ASSERT_TENSOR(ops[o](td_cast(lhs[c], TD_F32), td_cast(rhs[c], TD_F32)));
            ASSERT_OK(td_copy_to_host(r, got, sizeof *got * (size_t)n, dt));
            ASSERT_OK(td_copy_to_host(ASSERT_TENSOR(td_cast(r32, dt)), want, sizeof *want * (size_t)n, dt));
            for (int64_t i = 0; i < n; i++) {
                uint16_t x = c == 1 ? ab[si] : ab[i], y = c == 0 ? ab[n + i] : c == 1 ? ab[i] : ab[si];
                /* NaN op NaN: the payload of either (the compiler may swap a commutative op's operands) */
                if (half_nan(dt, x) && half_nan(dt, y) && half_nan(dt, got[i]) && half_nan(dt, want[i])) continue;
                if (got[i] != want[i])
                    TEST_FAIL_("%s n %lld op %d operands %d element %lld: %04x, f32 and cast %04x", td_dtype_name(dt),
                               (long long)n, o, c, (long long)i, got[i], want[i]);
            }
        }
    free(ab), free(got), free(want);
    td_scope_end();
}

TEST(half_binary_cpu) {
    test_seed();
    td_dtype dts[] = {TD_BF16, TD_F16};
    int64_t ns[] = {1, 15, 16, 17, 16384 + 33, (1 << 22) + 7}; /* the last: a streamed output */
    for (int t = 0; t < 2; t++)
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) half_binary_case(dts[t], ns[k]);
}

/* The CPU runner's instruction-set paths (TRIDENT_CPU_ISA: the portable vectors, AVX2 + F16C, AVX-512 with
** AVX512_BF16; a path the CPU lacks falls back to the best it has) give the same bits: bf16, f16 and f32 blocks run
** as chains over blocks and as one program, for random bit patterns (subnormal f32 results: AVX-512's bf16
** rounding takes another route there, NaN payloads, ties), at ragged lengths and a streamed one. */
static void isa_case(td_dtype dt, int64_t n, const char *src) {
    static const char *isas[] = {"scalar", "avx2", "avx512"};
    size_t es = td_dtype_size(dt);
    td_scope_begin();
    uint16_t *xy = malloc(es * (size_t)n);
    unsigned char *bits[3][3] = {{NULL}}; /* [path][output] */
    ASSERT(xy);
    td_tensor *in[2];
    for (int k = 0; k < 2; k++) {
        for (int64_t i = 0; i < n * (int64_t)es / 2; i++) xy[i] = (uint16_t)test_next();
        in[k] = ASSERT_TENSOR(td_from_data(xy, 1, &n, dt, TD_CPU));
    }
    const char *names[2] = {"x", "y"};
    td_dtype dts[2] = {dt, dt};
    int nd[2] = {1, 1};
    int64_t shapes[2][TD_MAX_DIMS] = {{n}, {n}};
    td_math_case *c;
    ASSERT_OK(td__math_case_parse(src, 2, names, dts, nd, (const int64_t(*)[TD_MAX_DIMS])shapes, TD_CPU, &c));
    ASSERT_EQ_INT(td__math_case_kernels(c), 1);
    for (int k = 0; k < 3; k++) {
        td_tensor *res[3] = {NULL};
        setenv("TRIDENT_CPU_ISA", isas[k], 1);
        td_status st = td__math_case_run(c, true, in, res);
        unsetenv("TRIDENT_CPU_ISA");
        ASSERT_OK(st);
        for (int o = 0; o < 3 && res[o]; o++) {
            bits[k][o] = malloc(es * (size_t)n);
            ASSERT(bits[k][o]);
            ASSERT_OK(td_copy_to_host(res[o], bits[k][o], es * (size_t)n, dt));
            if (k == 0) continue;
            /* AVX-512 against AVX2 exactly; AVX2 against the portable vectors, but for NaN op NaN, which may give
            ** either payload (the compiler may swap a commutative op's operands) */
            const unsigned char *want = bits[k - 1][o], *got = bits[k][o];
            for (int64_t i = 0; i < n; i++) {
                uint32_t g = 0, w = 0;
                memcpy(&g, got + i * (int64_t)es, es), memcpy(&w, want + i * (int64_t)es, es);
                if (g == w) continue;
                float gf, wf;
                memcpy(&gf, &g, 4), memcpy(&wf, &w, 4);
                bool nans =
                    dt == TD_F32 ? gf != gf && wf != wf : half_nan(dt, (uint16_t)g) && half_nan(dt, (uint16_t)w);
                if (k == 1 && nans) continue;
                TEST_FAIL_("%s n %lld output %d element %lld: %s %08x, %s %08x (%s)", td_dtype_name(dt), (long long)n,
                           o, (long long)i, isas[k], g, isas[k - 1], w, src);
            }
        }
    }
    for (int k = 0; k < 3; k++)
        for (int o = 0; o < 3; o++) free(bits[k][o]);
    free(xy);
    td__math_case_free(c);
    td_scope_end();
}

TEST(isa_paths_cpu) {
    test_seed();
    const char *srcs[3] = {"((((x*1.5+0.5)*x-2)*0.25+x)*3-1)",
                           "return x * y, ((((x*1.5+0.5)*x-2)*0.25+x)*3-1) * y, where(y > 0, x, y)",
                           "a = x * 3; b = a * 0.25; return x * y, (a + b * (y * 1.5 + 0.5)) + b * y * 1.5, (x + y) / "
                           "(x - y) - 2 / y"};
    td_dtype dts[] = {TD_BF16, TD_F16, TD_F32};
    for (int t = 0; t < 3; t++)
        for (int k = 0; k < 3; k++) {
            isa_case(dts[t], 5, srcs[k]);
            isa_case(dts[t], 3 * 1024 + 1001, srcs[k]);
            isa_case(dts[t], (1 << 22) + 5, srcs[k]); /* streamed stores */
        }
}

#define ON_EACH_DEVICE(NAME)                                                                                           \
    TEST(NAME##_cpu) { NAME("cpu"); }                                                                                  \
    TEST(NAME##_vulkan) { NAME("vulkan:0"); }                                                                          \
    TEST(NAME##_cuda) { NAME("cuda:0"); }
ON_EACH_DEVICE(ew_ops)
ON_EACH_DEVICE(broadcast)
ON_EACH_DEVICE(reduce)
ON_EACH_DEVICE(reduce_long)
ON_EACH_DEVICE(matmul)
ON_EACH_DEVICE(outputs)

/* clang-format off */
#define TESTS(X)                                                                                                       \
    X(ew_ops_cpu) X(ew_ops_vulkan) X(ew_ops_cuda)                                                                      \
    X(broadcast_cpu) X(broadcast_vulkan) X(broadcast_cuda)                                                             \
    X(reduce_cpu) X(reduce_vulkan) X(reduce_cuda)                                                                      \
    X(reduce_long_cpu) X(reduce_long_vulkan) X(reduce_long_cuda)                                                       \
    X(matmul_cpu) X(matmul_vulkan) X(matmul_cuda)                                                                      \
    X(outputs_cpu) X(outputs_vulkan) X(outputs_cuda)                                                                   \
    X(threads_cpu) X(half_rounding_cpu) X(half_binary_cpu) X(isa_paths_cpu)
/* clang-format on */
TEST_MAIN(TESTS)
