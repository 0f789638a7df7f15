/*
** The profiler's report (src/profile/), issue 27: modules named by path and
** type ("0 (Linear)", "0.1 (Linear)" for a nested Sequential, in the trace and
** the summary), and "% roof" at most 100 (an op's time at the roofline is at
** most its time), with a GEMM peak per dtype in the CPU run's summary.
*/
#include "runner.h"

#define TESTS(X) X(module_names) X(roof_capped) X(roof_rule) X(roof_per_dtype)

/* The summary of the last run, as text (malloc'ed). */
static char *summary(void) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ASSERT(f);
    ASSERT_OK(td_profile_print(f, 100));
    fclose(f);
    printf("%s", text);
    return text;
}

/* Sequential(Sequential(Linear, Linear), ReLU): the inner Linears are "0.0 (Linear)" and "0.1 (Linear)". */
TEST(module_names) {
    td_manual_seed(1);
    td_module *inner = td_sequential_new(2, (td_module *[]){td_linear_new(8, 8, true), td_linear_new(8, 4, true)});
    td_module *m = td_sequential_new(2, (td_module *[]){inner, td_relu_new()});
    ASSERT(m);
    td_scope_begin();
    td_tensor *x = td_randn(2, (int64_t[]){3, 8}, 2, 0, TD_F32, TD_CPU);
    ASSERT_OK(td_profile_begin());
    ASSERT_OK(td_backward(td_sum(td_module_forward(m, x), 0, NULL, false), NULL, false));
    ASSERT_OK(td_profile_end(NULL));
    td_scope_end();
    td_profile_row rows[128];
    int n = td_profile_rows(rows, 128);
    ASSERT(n > 0 && n <= 128);
    bool l0 = false, l1 = false, relu = false, l1_bw = false;
    for (int i = 0; i < n; i++) {
        l0 |= !strcmp(rows[i].module, "0.0 (Linear)") && !rows[i].backward;
        l1 |= !strcmp(rows[i].module, "0.1 (Linear)") && !rows[i].backward;
        l1_bw |= !strcmp(rows[i].module, "0.1 (Linear)") && rows[i].backward;
        relu |= !strcmp(rows[i].module, "1 (ReLU)");
        ASSERT(!strstr(rows[i].module, "(Sequential).")); /* children extend the bare path */
    }
    if (!(l0 && l1 && relu && l1_bw)) TEST_FAIL_("rows by module: 0.0 %d, 0.1 %d (bw %d), 1 %d", l0, l1, l1_bw, relu);
    char *text = summary();
    ASSERT(strstr(text, "\n  0.1 (Linear) "));
    free(text);
    td_module_free(m);
}

/* A CPU run of small and large products in f32 and f64 plus elementwise ops:
** every "% roof" of the summary is a number of at most 100. */
TEST(roof_capped) {
    td_scope_begin();
    td_tensor *ts[2][3];
    for (int d = 0; d < 2; d++) {
        td_dtype dt = d ? TD_F64 : TD_F32;
        ts[d][0] = td_cast(td_randn(2, (int64_t[]){8, 8}, 1, 0, TD_F32, TD_CPU), dt);
        ts[d][1] = td_cast(td_randn(2, (int64_t[]){64, 64}, 2, 0, TD_F32, TD_CPU), dt);
        ts[d][2] = td_cast(td_randn(1, (int64_t[]){1024}, 3, 0, TD_F32, TD_CPU), dt);
    }
    ASSERT_OK(td_profile_begin());
    for (int rep = 0; rep < 50; rep++)
        for (int d = 0; d < 2; d++) {
            td_scope_begin();
            ASSERT_TENSOR(td_matmul(ts[d][0], ts[d][0]));
            ASSERT_TENSOR(td_matmul(ts[d][1], ts[d][1]));
            ASSERT_TENSOR(td_add(ts[d][2], ts[d][2]));
            ASSERT_TENSOR(td_relu(ts[d][2]));
            td_scope_end();
        }
    ASSERT_OK(td_profile_end(NULL));
    td_scope_end();
    char *text = summary();
    char *at = strstr(text, "% roof\n");
    ASSERT(at);
    int checked = 0;
    for (char *l = strchr(at, '\n') + 1; *l && strncmp(l, "\n", 1); l = strchr(l, '\n') + 1) {
        char *end = strchr(l, '\n');
        ASSERT(end);
        char *last = end;
        while (last > l && last[-1] != ' ') last--;
        if (*last != '-') {
            double pct = strtod(last, NULL);
            if (pct > 100) TEST_FAIL_("%.*s: %% roof over 100", (int)(end - l), l);
            checked++;
        }
    }
    ASSERT(checked >= 3); /* matmul, add, relu */
    free(text);
}

/* The rule: an op's time at the roofline is max(flops / peak, bytes /
** bandwidth), at most its own time. A roofline far below what the CPU does
** caps every row at its time; one far above leaves the formula's value. */
TEST(roof_rule) {
    td_scope_begin();
    td_tensor *a = td_randn(2, (int64_t[]){64, 64}, 1, 0, TD_F32, TD_CPU);
    for (int high = 0; high < 2; high++) {
        double gflops = high ? 1e9 : 1e-6, gbps = high ? 1e9 : 1e-6;
        ASSERT_OK(td_profile_set_roofline(TD_CPU, gflops, gbps));
        ASSERT_OK(td_profile_begin());
        for (int i = 0; i < 20; i++) {
            td_scope_begin();
            ASSERT_TENSOR(td_add(td_matmul(a, a), a));
            td_scope_end();
        }
        ASSERT_OK(td_profile_end(NULL));
        td_profile_row rows[8];
        int n = td_profile_rows(rows, 8);
        ASSERT_EQ_INT(n, 2);
        for (int i = 0; i < n; i++) {
            double f = rows[i].flops / (gflops * 1e6), b = rows[i].bytes / (gbps * 1e6);
            double want = high ? (f > b ? f : b) : rows[i].total_ms;
            ASSERT(rows[i].roof_ms <= rows[i].total_ms * (1 + 1e-12));
            ASSERT_NEAR(rows[i].roof_ms, want, want * 1e-9);
        }
    }
    td_scope_end();
}

/* Without a set roofline the CPU gets one measured with a GEMM per dtype its products ran in. */
TEST(roof_per_dtype) {
    td_scope_begin();
    td_tensor *a = td_randn(2, (int64_t[]){32, 32}, 1, 0, TD_F64, TD_CPU);
    ASSERT_OK(td_profile_begin());
    ASSERT_TENSOR(td_matmul(a, a));
    ASSERT_OK(td_profile_end(NULL));
    td_scope_end();
    char *text = summary();
    bool ok = strstr(text, "(float64 ") != NULL;
    free(text);
    ASSERT(ok);
}

TEST_MAIN(TESTS)
