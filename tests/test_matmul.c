/* matmul and linear against a double-precision loop written here. */
#include "nn_util.h"

/* clang-format off */
#define TESTS(X)                                                                                               \
    X(hand_2x3_3x2) X(random_sizes_all_dtypes) X(transposed_and_strided) X(batch_broadcast) X(one_dim_operands) \
    X(batched_times_matrix) X(empty_inner_dim) X(linear_bias) X(errors) X(blocked_threads)
/* clang-format on */

/* want[b] = a[b] @ bm[b] over broadcast batch dims: a is [ba..., M, K], bm is [bb..., K, N]
** (the batch dims given as the output's nb dims, size 1 where broadcast). */
static void ref_matmul(int nb, const int64_t *obatch, const int64_t *abatch, const int64_t *bbatch, int64_t M,
                       int64_t K, int64_t N, const double *a, const double *bm, double *want) {
    int64_t B = 1;
    for (int i = 0; i < nb; i++) B *= obatch[i];
    for (int64_t bi = 0; bi < B; bi++) {
        int64_t ia = 0, ib = 0, rem = bi, sa = 1, sb = 1;
        for (int d = nb - 1; d >= 0; d--) {
            int64_t i = rem % obatch[d];
            rem /= obatch[d];
            ia += (abatch[d] == 1 ? 0 : i) * sa, ib += (bbatch[d] == 1 ? 0 : i) * sb;
            sa *= abatch[d], sb *= bbatch[d];
        }
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++) s += a[ia * M * K + m * K + k] * bm[ib * K * N + k * N + n];
                want[bi * M * N + m * N + n] = s;
            }
    }
}

/* Compare td_matmul(a, b) for 2-D a [M,K], b [K,N] (any strides) with the loop. */
static void check_2d(td_tensor *a, td_tensor *b, double tol, const char *what) {
    int64_t M = td_size(a, 0), K = td_size(a, 1), N = td_size(b, 1), one = 1;
    double *ha = nn_host(a), *hb = nn_host(b), *want = malloc((size_t)(M * N) * sizeof(double));
    ref_matmul(0, NULL, &one, &one, M, K, N, ha, hb, want);
    td_tensor *c = ASSERT_TENSOR(td_matmul(a, b));
    ASSERT_EQ_INT(td_ndim(c), 2);
    ASSERT_EQ_INT(td_size(c, 0), M);
    ASSERT_EQ_INT(td_size(c, 1), N);
    ASSERT(td_tensor_dtype(c) == td_tensor_dtype(a));
    nn_check_tensor(what, c, want, tol * sqrt((double)K), tol * 4);
    free(ha), free(hb), free(want);
}

TEST(hand_2x3_3x2) {
    td_scope_begin();
    float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {7, 8, 9, 10, 11, 12};
    td_tensor *ta = ASSERT_TENSOR(td_from_data(a, 2, (int64_t[]){2, 3}, TD_F32, TD_CPU));
    td_tensor *tb = ASSERT_TENSOR(td_from_data(b, 2, (int64_t[]){3, 2}, TD_F32, TD_CPU));
    td_tensor *c = ASSERT_TENSOR(td_matmul(ta, tb));
    double want[4] = {58, 64, 139, 154};
    nn_check_tensor("c", c, want, 0, 0);
    td_scope_end();
}

TEST(random_sizes_all_dtypes) {
    nn_seed(11);
    const int64_t sizes[3] = {1, 7, 33};
    for (int d = 0; d < 4; d++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++)
                for (int k = 0; k < 3; k++) {
                    td_scope_begin();
                    td_tensor *a = nn_rand(2, (int64_t[]){sizes[i], sizes[k]}, 1, nn_float_dtypes[d]);
                    td_tensor *b = nn_rand(2, (int64_t[]){sizes[k], sizes[j]}, 1, nn_float_dtypes[d]);
                    char what[64];
                    snprintf(what, sizeof what, "%s %lldx%lldx%lld", td_dtype_name(nn_float_dtypes[d]),
                             (long long)sizes[i], (long long)sizes[k], (long long)sizes[j]);
                    check_2d(a, b, nn_tol(nn_float_dtypes[d]), what);
                    td_scope_end();
                }
}

TEST(transposed_and_strided) {
    td_scope_begin();
    nn_seed(12);
    for (int d = 0; d < 2; d++) {
        td_dtype dt = nn_float_dtypes[d];
        td_tensor *at = nn_rand(2, (int64_t[]){33, 7}, 1, dt), *bt = nn_rand(2, (int64_t[]){5, 33}, 1, dt);
        td_tensor *a = ASSERT_TENSOR(td_transpose(at, 0, 1)); /* [7,33] column-major */
        td_tensor *b = ASSERT_TENSOR(td_transpose(bt, 0, 1)); /* [33,5] column-major */
        check_2d(a, b, nn_tol(dt), "a^T @ b^T");
        td_tensor *wide = nn_rand(2, (int64_t[]){7, 66}, 1, dt);
        td_tensor *as = ASSERT_TENSOR(td_slice(wide, 1, 0, 66, 2)); /* [7,33], column stride 2: copied */
        check_2d(as, b, nn_tol(dt), "strided a @ b^T");
        td_tensor *rows = nn_rand(2, (int64_t[]){66, 5}, 1, dt);
        td_tensor *bs = ASSERT_TENSOR(td_slice(rows, 0, 1, 66, 2)); /* [33,5], row stride 10 (ld > cols) */
        check_2d(a, bs, nn_tol(dt), "a^T @ row-strided b");
        td_tensor *col = ASSERT_TENSOR(td_slice(wide, 1, 3, 4, 1)); /* [7,1] with row stride 66 */
        td_tensor *row = ASSERT_TENSOR(td_slice(bt, 0, 2, 3, 1));   /* [1,33] */
        check_2d(col, row, nn_tol(dt), "outer product of slices");
        check_2d(row, b, nn_tol(dt), "row @ b^T");
        td_tensor *e = ASSERT_TENSOR(td_expand(row, 2, (int64_t[]){4, 33})); /* stride-0 rows: copied */
        check_2d(e, b, nn_tol(dt), "expanded rows @ b^T");
    }
    td_scope_end();
}

TEST(batch_broadcast) {
    td_scope_begin();
    nn_seed(13);
    for (int d = 0; d < 4; d++) {
        td_dtype dt = nn_float_dtypes[d];
        int64_t M = 7, K = 33, N = 5;
        td_tensor *a = nn_rand(4, (int64_t[]){2, 1, M, K}, 1, dt);
        td_tensor *b = nn_rand(3, (int64_t[]){3, K, N}, 1, dt);
        td_tensor *c = ASSERT_TENSOR(td_matmul(a, b));
        ASSERT_EQ_INT(td_ndim(c), 4);
        int64_t ob[2] = {2, 3}, ab[2] = {2, 1}, bb[2] = {1, 3};
        double *ha = nn_host(a), *hb = nn_host(b), want[2 * 3 * 7 * 5];
        ref_matmul(2, ob, ab, bb, M, K, N, ha, hb, want);
        nn_check_tensor(td_dtype_name(dt), c, want, nn_tol(dt) * 6, nn_tol(dt) * 4);
        /* the same with b's matrices transposed (column-major in every batch) */
        td_tensor *bt = nn_rand(3, (int64_t[]){3, N, K}, 1, dt);
        td_tensor *bv = ASSERT_TENSOR(td_transpose(bt, 1, 2));
        double *hbv = nn_host(bv);
        ref_matmul(2, ob, ab, bb, M, K, N, ha, hbv, want);
        nn_check_tensor("transposed batches", ASSERT_TENSOR(td_matmul(a, bv)), want, nn_tol(dt) * 6, nn_tol(dt) * 4);
        free(ha), free(hb), free(hbv);
    }
    td_scope_end();
}

TEST(one_dim_operands) {
    td_scope_begin();
    nn_seed(14);
    td_tensor *v = nn_rand(1, (int64_t[]){33}, 1, TD_F64), *m = nn_rand(2, (int64_t[]){33, 7}, 1, TD_F64);
    td_tensor *mt = nn_rand(2, (int64_t[]){7, 33}, 1, TD_F64);
    td_tensor *bm = nn_rand(3, (int64_t[]){2, 7, 33}, 1, TD_F64);
    double *hv = nn_host(v), *hm = nn_host(m), *hmt = nn_host(mt), *hbm = nn_host(bm), want[14];
    int64_t one = 1, two = 2;
    /* vector @ matrix -> [7] */
    td_tensor *vm = ASSERT_TENSOR(td_matmul(v, m));
    ASSERT_EQ_INT(td_ndim(vm), 1);
    ASSERT_EQ_INT(td_size(vm, 0), 7);
    ref_matmul(0, NULL, &one, &one, 1, 33, 7, hv, hm, want);
    nn_check_tensor("v @ m", vm, want, 1e-12, 1e-12);
    /* matrix @ vector -> [7] */
    td_tensor *mv = ASSERT_TENSOR(td_matmul(mt, v));
    ASSERT_EQ_INT(td_ndim(mv), 1);
    ref_matmul(0, NULL, &one, &one, 7, 33, 1, hmt, hv, want);
    nn_check_tensor("m @ v", mv, want, 1e-12, 1e-12);
    /* vector @ vector -> 0-d */
    td_tensor *vv = ASSERT_TENSOR(td_matmul(v, v));
    ASSERT_EQ_INT(td_ndim(vv), 0);
    double dot = 0;
    for (int i = 0; i < 33; i++) dot += hv[i] * hv[i];
    ASSERT_NEAR(td_item(vv), dot, 1e-12);
    /* batch @ vector -> [2, 7] */
    td_tensor *bv = ASSERT_TENSOR(td_matmul(bm, v));
    ASSERT_EQ_INT(td_ndim(bv), 2);
    ref_matmul(1, &two, &two, &one, 7, 33, 1, hbm, hv, want);
    nn_check_tensor("batch @ v", bv, want, 1e-12, 1e-12);
    free(hv), free(hm), free(hmt), free(hbm);
    td_scope_end();
}

TEST(batched_times_matrix) {
    td_scope_begin();
    /* [2,3,7,33] @ [33,5] folds into one [42,33] @ [33,5] GEMM; a sliced batch must not fold */
    nn_seed(15);
    td_tensor *a = nn_rand(4, (int64_t[]){2, 3, 7, 33}, 1, TD_F32), *b = nn_rand(2, (int64_t[]){33, 5}, 1, TD_F32);
    int64_t ob[1] = {42}, one = 1;
    double *ha = nn_host(a), *hb = nn_host(b), want[42 * 5];
    ref_matmul(1, ob, ob, &one, 1, 33, 5, ha, hb, want);
    td_tensor *c = ASSERT_TENSOR(td_matmul(a, b));
    ASSERT_EQ_INT(td_ndim(c), 4);
    ASSERT_EQ_INT(td_size(c, 2), 7);
    nn_check_tensor("folded", c, want, 1e-4, 1e-4);
    td_tensor *big = nn_rand(3, (int64_t[]){4, 9, 33}, 1, TD_F32);
    td_tensor *s = ASSERT_TENSOR(td_slice(big, 1, 1, 8, 1)); /* [4,7,33]: batch stride 9*33, rows 7 */
    double *hs = nn_host(s), want2[4 * 7 * 5];
    int64_t b4 = 4;
    ref_matmul(1, &b4, &b4, &one, 7, 33, 5, hs, hb, want2);
    nn_check_tensor("sliced batches", ASSERT_TENSOR(td_matmul(s, b)), want2, 1e-4, 1e-4);
    free(ha), free(hb), free(hs);
    td_scope_end();
}

TEST(empty_inner_dim) {
    td_scope_begin();
    td_tensor *a = ASSERT_TENSOR(td_empty(2, (int64_t[]){3, 0}, TD_F32, TD_CPU));
    td_tensor *b = ASSERT_TENSOR(td_empty(2, (int64_t[]){0, 4}, TD_F32, TD_CPU));
    td_tensor *c = ASSERT_TENSOR(td_matmul(a, b));
    double want[12] = {0};
    nn_check_tensor("zeros", c, want, 0, 0);
    td_tensor *e = ASSERT_TENSOR(td_matmul(b, ASSERT_TENSOR(td_empty(2, (int64_t[]){4, 2}, TD_F32, TD_CPU))));
    ASSERT_EQ_INT(td_numel(e), 0);
    td_scope_end();
}

TEST(linear_bias) {
    td_scope_begin();
    nn_seed(16);
    td_tensor *x = nn_rand(3, (int64_t[]){2, 3, 33}, 1, TD_F32);
    td_tensor *w = nn_rand(2, (int64_t[]){7, 33}, 1, TD_F32), *b = nn_rand(1, (int64_t[]){7}, 1, TD_F32);
    double *hx = nn_host(x), *hw = nn_host(w), *hb = nn_host(b), want[6 * 7], want_nb[6 * 7];
    for (int r = 0; r < 6; r++)
        for (int o = 0; o < 7; o++) {
            double s = 0;
            for (int i = 0; i < 33; i++) s += hx[r * 33 + i] * hw[o * 33 + i];
            want_nb[r * 7 + o] = s;
            want[r * 7 + o] = s + hb[o];
        }
    td_tensor *y = ASSERT_TENSOR(td_linear(x, w, b));
    ASSERT_EQ_INT(td_ndim(y), 3);
    ASSERT_EQ_INT(td_size(y, 2), 7);
    nn_check_tensor("linear", y, want, 1e-4, 1e-4);
    nn_check_tensor("linear, no bias", ASSERT_TENSOR(td_linear(x, w, NULL)), want_nb, 1e-4, 1e-4);
    ASSERT_ERROR(td_linear(x, b, NULL), TD_ERR_SHAPE, "weight must be [out, in]");
    ASSERT_ERROR(td_linear(x, w, w), TD_ERR_SHAPE, "bias must be [7]");
    free(hx), free(hw), free(hb);
    td_scope_end();
}

TEST(errors) {
    td_scope_begin(); /* the inputs and results, released at the end (the runner checks for leaks) */
    td_tensor *a = ASSERT_TENSOR(td_zeros(2, (int64_t[]){2, 3}, TD_F32, TD_CPU));
    td_tensor *b = ASSERT_TENSOR(td_zeros(2, (int64_t[]){4, 5}, TD_F32, TD_CPU));
    ASSERT_ERROR(td_matmul(a, b), TD_ERR_SHAPE, "matmul: shapes [2,3] and [4,5] do not align (3 != 4)");
    td_tensor *d = ASSERT_TENSOR(td_zeros(2, (int64_t[]){3, 2}, TD_F64, TD_CPU));
    ASSERT_ERROR(td_matmul(a, d), TD_ERR_DTYPE, "float32 and float64");
    td_tensor *i = ASSERT_TENSOR(td_zeros(2, (int64_t[]){3, 2}, TD_I64, TD_CPU));
    ASSERT_ERROR(td_matmul(ASSERT_TENSOR(td_cast(a, TD_I64)), i), TD_ERR_DTYPE, "floating-point");
    ASSERT_ERROR(td_matmul(ASSERT_TENSOR(td_scalar(1, TD_F32, TD_CPU)), a), TD_ERR_SHAPE, "at least 1 dim");
    td_tensor *b1 = ASSERT_TENSOR(td_zeros(3, (int64_t[]){2, 2, 3}, TD_F32, TD_CPU));
    td_tensor *b2 = ASSERT_TENSOR(td_zeros(3, (int64_t[]){3, 3, 2}, TD_F32, TD_CPU));
    ASSERT_ERROR(td_matmul(b1, b2), TD_ERR_SHAPE, "batch dims");
    td_clear_error();
    ASSERT(td_matmul(NULL, a) == NULL);
    td_scope_end();
}

/* Products large enough to be cut into per-thread GEMM blocks, run on 3 threads so that the blocks
** are uneven: output rows (M >= N), columns (N > M) with transposed and strided operands, and batches
** fewer than the threads (each batch cut too). A rerun must give the same bits. */
TEST(blocked_threads) {
    td_scope_begin();
    nn_seed(17);
    nn_threads(3);
    for (int d = 0; d < 2; d++) {
        td_dtype dt = nn_float_dtypes[d];
        check_2d(nn_rand(2, (int64_t[]){203, 150}, 1, dt), nn_rand(2, (int64_t[]){150, 41}, 1, dt), nn_tol(dt),
                 "rows 203x150x41");
        td_tensor *at = nn_rand(2, (int64_t[]){150, 203}, 1, dt), *bt = nn_rand(2, (int64_t[]){41, 150}, 1, dt);
        check_2d(ASSERT_TENSOR(td_transpose(at, 0, 1)), ASSERT_TENSOR(td_transpose(bt, 0, 1)), nn_tol(dt),
                 "rows of a^T @ b^T");
        td_tensor *wide = nn_rand(2, (int64_t[]){300, 150}, 1, dt); /* b^T: columns of b are rows of wide */
        check_2d(nn_rand(2, (int64_t[]){21, 150}, 1, dt), ASSERT_TENSOR(td_transpose(wide, 0, 1)), nn_tol(dt),
                 "columns 21x150x300 of a @ b^T");
        td_tensor *rows = nn_rand(2, (int64_t[]){150, 610}, 1, dt);
        td_tensor *bs = ASSERT_TENSOR(td_slice(rows, 1, 3, 308, 1)); /* [150,305], row stride 610 */
        check_2d(nn_rand(2, (int64_t[]){17, 150}, 1, dt), bs, nn_tol(dt), "columns of a @ row-strided b");
        int64_t M = 70, K = 90, N = 61, one = 2;
        td_tensor *a = nn_rand(3, (int64_t[]){2, M, K}, 1, dt), *b = nn_rand(3, (int64_t[]){2, K, N}, 1, dt);
        double *ha = nn_host(a), *hb = nn_host(b), *want = malloc(sizeof(double) * (size_t)(2 * M * N));
        ref_matmul(1, &one, &one, &one, M, K, N, ha, hb, want);
        td_tensor *c = ASSERT_TENSOR(td_matmul(a, b));
        nn_check_tensor("2 batches on 3 threads", c, want, nn_tol(dt) * 10, nn_tol(dt) * 4);
        double *h1 = nn_host(c), *h2 = nn_host(ASSERT_TENSOR(td_matmul(a, b)));
        ASSERT(memcmp(h1, h2, sizeof(double) * (size_t)(2 * M * N)) == 0);
        free(ha), free(hb), free(want), free(h1), free(h2);
    }
    td_scope_end();
}

TEST_MAIN(TESTS)
