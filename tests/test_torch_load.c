/*
** The weights-only torch.save reader (td_torch_load) on files torch 1.13 wrote
** (tests/fixtures/make_torch_fixtures.py), compared bit for bit with their
** safetensors twins; hostile pickles and broken archives refused with one
** clear line each.
*/
#include <math.h>

#include "test_util.h"
#include "trident/io.h"

/* clang-format off */
#define TESTS(X)                                                                                               \
    X(fixtures_match) X(deflated) X(nested_metadata) X(load_into_mlp) X(weights_load_dispatch)                \
    X(evil_os_system) X(evil_reduce) X(evil_stack_global) X(evil_deep) X(evil_huge) X(evil_expand) X(evil_dag) X(evil_dag_values) X(evil_storage_short)     \
    X(evil_memo) X(evil_truncated_pickle) X(evil_truncated) X(not_a_zip) X(missing_file)
/* clang-format on */

static const char *fixture(const char *name) {
    static char path[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(path[k], sizeof path[k], "%s/%s", TD_TORCH_FIXTURES, name);
    return path[k];
}

/* Every entry of a equals b's entry of the same position: name, shape, dtype, bytes. */
static void assert_same(const td_named_tensors *a, const td_named_tensors *b) {
    ASSERT_EQ_INT(td_named_tensors_len(a), td_named_tensors_len(b));
    for (int64_t i = 0; i < td_named_tensors_len(a); i++) {
        const char *name = td_named_tensors_name(a, i);
        td_tensor *x = td_named_tensors_at(a, i), *y = td_named_tensors_get(b, name);
        if (!y) TEST_FAIL_("%s is missing from the twin", name);
        if (strcmp(name, td_named_tensors_name(b, i)))
            TEST_FAIL_("entry %lld: %s vs %s", (long long)i, name, td_named_tensors_name(b, i));
        ASSERT_EQ_INT(td_tensor_dtype(x), td_tensor_dtype(y));
        ASSERT_EQ_INT(td_ndim(x), td_ndim(y));
        for (int d = 0; d < td_ndim(x); d++) ASSERT_EQ_INT(td_size(x, d), td_size(y, d));
        size_t n = (size_t)td_numel(x) * td_dtype_size(td_tensor_dtype(x));
        unsigned char *hx = malloc(n + 1), *hy = malloc(n + 1);
        ASSERT_OK(td_copy_to_host(x, hx, n, td_tensor_dtype(x)));
        ASSERT_OK(td_copy_to_host(y, hy, n, td_tensor_dtype(y)));
        if (memcmp(hx, hy, n)) TEST_FAIL_("%s differs from its twin", name);
        free(hx);
        free(hy);
    }
}

static void check_twin(const char *pt, const char *st) {
    td_named_tensors *a = NULL, *b = NULL;
    ASSERT_OK(td_torch_load(fixture(pt), TD_CPU, &a));
    ASSERT_OK(td_safetensors_load(fixture(st), TD_CPU, &b));
    assert_same(a, b);
    td_named_tensors_free(a);
    td_named_tensors_free(b);
}

TEST(fixtures_match) {
    static const char *const names[] = {"mlp", "cnn", "layers", "views", "dtypes", "nested", "param"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char pt[64], st[64];
        snprintf(pt, sizeof pt, "%s.pt", names[i]);
        snprintf(st, sizeof st, "%s.safetensors", names[i]);
        check_twin(pt, st);
    }
}

TEST(deflated) { check_twin("mlp_deflated.pt", "mlp.safetensors"); }

TEST(nested_metadata) {
    td_named_tensors *l = NULL;
    ASSERT_OK(td_torch_load(fixture("nested.pt"), TD_CPU, &l));
    ASSERT(!strcmp(td_named_tensors_meta(l, "epoch"), "3"));
    ASSERT(!strcmp(td_named_tensors_meta(l, "lr"), "0.5"));
    ASSERT(!strcmp(td_named_tensors_meta(l, "name"), "mlp"));
    ASSERT(!strcmp(td_named_tensors_meta(l, "flag"), "true"));
    ASSERT(!strcmp(td_named_tensors_meta(l, "pair.1.1"), "4"));
    ASSERT(!strcmp(td_named_tensors_meta(l, "optim.param_groups.0.lr"), "0.001"));
    ASSERT(td_named_tensors_meta(l, "none") == NULL);
    ASSERT(td_named_tensors_get(l, "optim.state.0.exp_avg") != NULL);
    ASSERT(td_named_tensors_get(l, "model.4.bias") != NULL);
    td_named_tensors_free(l);
}

/* torch's state dict loads into Trident's twin by key name; its output matches torch's */
TEST(load_into_mlp) {
    td_module *m =
        td_sequential_new(5, (td_module *[]){td_linear_new(20, 16, true), td_relu_new(), td_linear_new(16, 16, true),
                                             td_relu_new(), td_linear_new(16, 10, true)});
    td_named_tensors *sd = NULL, *io = NULL;
    ASSERT_OK(td_torch_load(fixture("mlp.pt"), TD_CPU, &sd));
    ASSERT_OK(td_module_load_state_dict(m, sd, true));
    ASSERT_OK(td_safetensors_load(fixture("mlp_io.safetensors"), TD_CPU, &io));
    td_tensor *y = ASSERT_TENSOR(td_module_forward(m, td_named_tensors_get(io, "x")));
    td_tensor *ref = td_named_tensors_get(io, "y");
    float hy[30], hr[30];
    ASSERT_OK(td_copy_to_host(y, hy, sizeof hy, TD_F32));
    ASSERT_OK(td_copy_to_host(ref, hr, sizeof hr, TD_F32));
    for (int i = 0; i < 30; i++) ASSERT_NEAR(hy[i], hr[i], 1e-5);
    td_named_tensors_free(sd);
    td_named_tensors_free(io);
    td_module_free(m);
}

TEST(weights_load_dispatch) {
    td_named_tensors *a = NULL, *b = NULL;
    ASSERT_OK(td_weights_load(fixture("cnn.pt"), TD_CPU, &a));
    ASSERT_OK(td_weights_load(fixture("cnn.safetensors"), TD_CPU, &b));
    assert_same(a, b);
    td_named_tensors_free(a);
    td_named_tensors_free(b);
}

static void refuse(const char *name, td_status st, const char *substr) {
    td_named_tensors *l = (td_named_tensors *)1;
    ASSERT_ERROR(td_torch_load(fixture(name), TD_CPU, &l), st, substr);
    ASSERT(l == NULL);
}

TEST(evil_os_system) { refuse("evil_os_system.pt", TD_ERR_FORMAT, "global 'posix.system'"); }
TEST(evil_reduce) { refuse("evil_eval.pt", TD_ERR_FORMAT, "global 'collections.Counter'"); }
TEST(evil_stack_global) { refuse("evil_stack_global.pt", TD_ERR_FORMAT, "global 'builtins.eval'"); }
TEST(evil_deep) { refuse("evil_deep.pt", TD_ERR_FORMAT, "nests deeper than 64"); }
TEST(evil_huge) { refuse("evil_huge.pt", TD_ERR_FORMAT, "reads past the end of its storage"); }
TEST(evil_expand) { refuse("evil_expand.pt", TD_ERR_FORMAT, "past the reader's limit"); }
TEST(evil_dag) { refuse("evil_dag.pt", TD_ERR_FORMAT, "expands to more than"); }
TEST(evil_dag_values) { refuse("evil_dag_values.pt", TD_ERR_FORMAT, "more than 16384 tensors and values"); }
TEST(evil_storage_short) { refuse("evil_storage_short.pt", TD_ERR_FORMAT, "but 4 elements of FloatStorage need 16"); }
TEST(evil_memo) { refuse("evil_memo.pt", TD_ERR_FORMAT, "memo get of unset id 5"); }
TEST(evil_truncated_pickle) { refuse("evil_truncated_pickle.pt", TD_ERR_FORMAT, "the pickle ends"); }
TEST(evil_truncated) { refuse("evil_truncated.pt", TD_ERR_FORMAT, "not a zip file"); }
TEST(not_a_zip) { refuse("mlp.safetensors", TD_ERR_FORMAT, "not a zip file"); }
TEST(missing_file) { refuse("no_such.pt", TD_ERR_IO, "cannot open"); }

TEST_MAIN(TESTS)
