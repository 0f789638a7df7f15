/* Indexing ops against double loops: embedding (+ backward), index_select,
** gather, scatter_add, cat, one_hot; odd shapes, strided inputs, errors. */
#include "test_util.h"

#include "core/internal.h" /* td__embedding_backward */

/* clang-format off */
#define TESTS(X)                                                                                                       \
    X(embedding_forward)                                                                                               \
    X(embedding_errors) X(embedding_backward) X(embedding_backward_threads) X(index_select) X(index_select_errors)     \
        X(gather) X(gather_errors) X(scatter_add) X(scatter_add_int) X(scatter_add_errors) X(cat) X(cat_many)          \
            X(cat_errors) X(one_hot) X(one_hot_errors) X(no_leaks)
/* clang-format on */

/* ---- helpers ---- */

/* random values of dtype dt (integers for integer dtypes), host copy in *host */
static td_tensor *random_tensor(int ndim, const int64_t *shape, td_dtype dt, double **host) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = td_dtype_is_float(dt) ? test_uniform(-2, 2)
               : dt == TD_BOOL       ? (double)test_int(2)
                                     : (double)test_int(100) - 50;
    if (dt == TD_U8)
        for (int64_t i = 0; i < n; i++) v[i] = fabs(v[i]);
    td_tensor *t = test_tensor_f64(v, ndim, shape, dt);
    ASSERT_OK(td_copy_to_host(t, v, (size_t)n * sizeof *v, TD_F64)); /* values as stored */
    *host = v;
    return t;
}

static td_tensor *random_index(int ndim, const int64_t *shape, int64_t limit, td_dtype dt, int64_t **host) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    int64_t *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = test_int(limit);
    *host = v;
    td_tensor *t = ASSERT_TENSOR(td_from_data(v, ndim, shape, TD_I64, TD_CPU));
    return ASSERT_TENSOR(td_cast(t, dt));
}

/* x [a, b] -> a view of shape [a, b] with non-unit strides (transpose of a copy) */
static td_tensor *strided_2d(int64_t a, int64_t b, td_dtype dt, double **host) {
    int64_t shape[2] = {b, a};
    double *tv;
    td_tensor *t = random_tensor(2, shape, dt, &tv);
    td_tensor *x = ASSERT_TENSOR(td_transpose(t, 0, 1));
    ASSERT(!td_is_contiguous(x));
    free(tv);
    *host = test_host(x);
    return x;
}

static void assert_close(const double *got, const double *want, int64_t n, double tol) {
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i]))))
            TEST_FAIL_("element %lld: got %.10g, want %.10g", (long long)i, got[i], want[i]);
}

static void assert_shape(td_tensor *t, int ndim, const int64_t *shape) {
    ASSERT_EQ_INT(td_ndim(t), ndim);
    for (int i = 0; i < ndim; i++) ASSERT_EQ_INT(td_size(t, i), shape[i]);
}

/* ---- embedding ---- */

TEST(embedding_forward) {
    td_scope_begin();
    test_seed();
    td_dtype dts[4] = {TD_F32, TD_F64, TD_F16, TD_BF16};
    td_dtype its[2] = {TD_I64, TD_I32};
    for (int k = 0; k < 4; k++) {
        double *w;
        td_tensor *weight = strided_2d(7, 5, dts[k], &w); /* [V=7, D=5], strided */
        int64_t ishape[3] = {2, 3, 3}, *iv;
        td_tensor *idx = random_index(3, ishape, 7, its[k % 2], &iv);
        td_tensor *y = ASSERT_TENSOR(td_embedding(weight, idx));
        int64_t yshape[4] = {2, 3, 3, 5};
        assert_shape(y, 4, yshape);
        ASSERT_EQ_INT(td_tensor_dtype(y), dts[k]);
        double *yv = test_host(y), want[90];
        for (int n = 0; n < 18; n++)
            for (int d = 0; d < 5; d++) want[n * 5 + d] = w[iv[n] * 5 + d];
        assert_close(yv, want, 90, 0); /* a copy: exact */
        free(w), free(iv), free(yv);
    }
    td_scope_end();
}

TEST(embedding_errors) {
    td_scope_begin(); /* the inputs and results, released at the end (the runner checks for leaks) */
    int64_t ws[2] = {5, 3}, is[2] = {2, 3};
    td_tensor *w = ASSERT_TENSOR(td_ones(2, ws, TD_F32, TD_CPU));
    int64_t bad[6] = {0, 1, 4, 2, 2, 5};
    td_tensor *idx = ASSERT_TENSOR(td_from_data(bad, 2, is, TD_I64, TD_CPU));
    ASSERT_ERROR(td_embedding(w, idx), TD_ERR_INDEX, "embedding: index 5 at position [1,2] is out of range [0, 5)");
    int32_t neg[6] = {0, -1, 0, 0, 0, 0};
    td_tensor *nidx = ASSERT_TENSOR(td_from_data(neg, 2, is, TD_I32, TD_CPU));
    ASSERT_ERROR(td_embedding(w, nidx), TD_ERR_INDEX, "index -1 at position [0,1]");
    td_tensor *fidx = ASSERT_TENSOR(td_ones(2, is, TD_F32, TD_CPU));
    ASSERT_ERROR(td_embedding(w, fidx), TD_ERR_DTYPE, "need int32 or int64");
    ASSERT_ERROR(td_embedding(idx, idx), TD_ERR_DTYPE, "weight has dtype int64");
    ASSERT_ERROR(td_embedding(td_select(w, 0, 0), idx), TD_ERR_SHAPE, "weight must be 2-D");
    ASSERT_ERROR(td_embedding(w, NULL), TD_ERR_MISUSE, "NULL");
    ASSERT_ERROR(td__embedding_backward(w, idx, 5, -1), TD_ERR_SHAPE, "is not idx [2,3] plus one dim");
    td_scope_end();
}

/* dW[v] = sum of dy rows with idx == v, padding row zero */
static void embedding_backward_ref(const double *dy, const int64_t *iv, int64_t N, int64_t V, int64_t D, int64_t pad,
                                   double *dw) {
    memset(dw, 0, (size_t)(V * D) * sizeof *dw);
    for (int64_t n = 0; n < N; n++)
        if (iv[n] != pad)
            for (int64_t d = 0; d < D; d++) dw[iv[n] * D + d] += dy[n * D + d];
}

TEST(embedding_backward) {
    td_scope_begin();
    test_seed();
    int64_t ishape[2] = {3, 4}, dshape[3] = {3, 4, 6}, V = 5, D = 6, N = 12;
    td_dtype dts[3] = {TD_F64, TD_F32, TD_BF16};
    double tols[3] = {1e-14, 1e-6, 2e-2};
    for (int k = 0; k < 3; k++) {
        for (int64_t pad = -1; pad < 3; pad += 3) {
            int64_t *iv;
            double *dy, dw[30];
            td_tensor *idx = random_index(2, ishape, V, k ? TD_I32 : TD_I64, &iv);
            iv[0] = iv[5] = iv[7] = 2; /* repeats, and a hit on the padding row */
            td_tensor *idx2 = ASSERT_TENSOR(td_cast(td_from_data(iv, 2, ishape, TD_I64, TD_CPU), td_tensor_dtype(idx)));
            td_tensor *g = random_tensor(3, dshape, dts[k], &dy);
            td_tensor *out = ASSERT_TENSOR(td__embedding_backward(g, idx2, V, pad));
            int64_t oshape[2] = {V, D};
            assert_shape(out, 2, oshape);
            double *ov = test_host(out);
            embedding_backward_ref(dy, iv, N, V, D, pad, dw);
            assert_close(ov, dw, V * D, tols[k]);
            if (pad == 2)
                for (int d = 0; d < D; d++) ASSERT(ov[2 * D + d] == 0);
            free(iv), free(dy), free(ov);
        }
    }
    td_scope_end();
}

TEST(embedding_backward_threads) {
    td_scope_begin();
    /* big enough for several threads; summation order must not change */
    test_seed();
    int64_t N = 20000, V = 37, D = 70, ishape[1] = {N}, dshape[2] = {N, D};
    int64_t *iv;
    double *dy;
    td_tensor *idx = random_index(1, ishape, V, TD_I64, &iv);
    td_tensor *g = random_tensor(2, dshape, TD_F32, &dy);
    double *a = test_host(ASSERT_TENSOR(td__embedding_backward(g, idx, V, 0)));
    double *b = test_host(ASSERT_TENSOR(td__embedding_backward(g, idx, V, 0)));
    ASSERT(!memcmp(a, b, (size_t)(V * D) * sizeof *a));
    double *want = malloc((size_t)(V * D) * sizeof *want);
    embedding_backward_ref(dy, iv, N, V, D, 0, want);
    assert_close(a, want, V * D, 1e-4);
    free(iv), free(dy), free(a), free(b), free(want);
    td_scope_end();
}

/* ---- index_select ---- */

TEST(index_select) {
    td_scope_begin();
    test_seed();
    td_dtype dts[5] = {TD_F32, TD_I64, TD_BOOL, TD_F16, TD_F64};
    int64_t shape[3] = {3, 5, 4};
    int perm[3] = {2, 0, 1};
    for (int k = 0; k < 5; k++) {
        for (int dim = 0; dim < 3; dim++) {
            /* x = permute of a [5,3,4]-ish base -> strided [3,5,4] */
            int64_t bshape[3] = {shape[1], shape[2], shape[0]};
            double *bv;
            td_tensor *base = random_tensor(3, bshape, dts[k], &bv);
            td_tensor *x = ASSERT_TENSOR(td_permute(base, perm)); /* [3,5,4], strided */
            const int64_t *xs = td_shape(x);
            double *xv = test_host(x);
            int64_t K = 7, *iv;
            td_tensor *idx = random_index(1, &K, xs[dim], dim % 2 ? TD_I32 : TD_I64, &iv);
            td_tensor *y = ASSERT_TENSOR(td_index_select(x, dim - 3 * (k % 2), idx)); /* negative dims too */
            int64_t ys[3] = {xs[0], xs[1], xs[2]};
            ys[dim] = K;
            assert_shape(y, 3, ys);
            double *yv = test_host(y);
            for (int64_t a = 0; a < ys[0]; a++)
                for (int64_t b = 0; b < ys[1]; b++)
                    for (int64_t c = 0; c < ys[2]; c++) {
                        int64_t s[3] = {a, b, c};
                        s[dim] = iv[s[dim]];
                        double want = xv[(s[0] * xs[1] + s[1]) * xs[2] + s[2]];
                        ASSERT(yv[(a * ys[1] + b) * ys[2] + c] == want);
                    }
            free(bv), free(xv), free(iv), free(yv);
        }
    }
    td_scope_end();
}

TEST(index_select_errors) {
    td_scope_begin(); /* the inputs and results, released at the end (the runner checks for leaks) */
    int64_t s[2] = {3, 4}, two[2] = {1, 2};
    td_tensor *x = ASSERT_TENSOR(td_ones(2, s, TD_F32, TD_CPU));
    int64_t bad[3] = {0, 4, 1}, three = 3;
    td_tensor *idx = ASSERT_TENSOR(td_from_data(bad, 1, &three, TD_I64, TD_CPU));
    ASSERT_ERROR(td_index_select(x, 1, idx), TD_ERR_INDEX,
                 "index_select: index 4 at position [1] is out of range [0, 4)");
    ASSERT_ERROR(td_index_select(x, 2, idx), TD_ERR_INDEX, "dim 2 out of range");
    ASSERT_ERROR(td_index_select(x, 0, td_reshape(td_slice(idx, 0, 0, 2, 1), 2, two)), TD_ERR_SHAPE, "must be 1-D");
    ASSERT_ERROR(td_index_select(x, 0, x), TD_ERR_DTYPE, "float32");
    /* an empty index gives an empty dim */
    int64_t zero = 0;
    td_tensor *e = ASSERT_TENSOR(td_index_select(x, 1, td_zeros(1, &zero, TD_I64, TD_CPU)));
    ASSERT_EQ_INT(td_size(e, 1), 0);
    td_scope_end();
}

/* ---- gather ---- */

TEST(gather) {
    td_scope_begin();
    test_seed();
    td_dtype dts[3] = {TD_F32, TD_I32, TD_F64};
    for (int k = 0; k < 3; k++)
        for (int dim = 0; dim < 3; dim++) {
            int64_t bshape[3] = {5, 4, 6}; /* x = transpose(base, 0, 2): [6, 4, 5] */
            double *bv;
            td_tensor *x = ASSERT_TENSOR(td_transpose(random_tensor(3, bshape, dts[k], &bv), 0, 2));
            double *xv = test_host(x);
            int64_t xs[3] = {6, 4, 5}, is[3] = {5, 3, 4};
            is[dim] = 7; /* the gathered dim may be longer than x's */
            int64_t *iv;
            td_tensor *idx = random_index(3, is, xs[dim], k % 2 ? TD_I32 : TD_I64, &iv);
            td_tensor *y = ASSERT_TENSOR(td_gather(x, dim, idx));
            assert_shape(y, 3, is);
            double *yv = test_host(y);
            for (int64_t a = 0; a < is[0]; a++)
                for (int64_t b = 0; b < is[1]; b++)
                    for (int64_t c = 0; c < is[2]; c++) {
                        int64_t p = (a * is[1] + b) * is[2] + c, s[3] = {a, b, c};
                        s[dim] = iv[p];
                        ASSERT(yv[p] == xv[(s[0] * xs[1] + s[1]) * xs[2] + s[2]]);
                    }
            free(bv), free(xv), free(iv), free(yv);
        }
    td_scope_end();
}

TEST(gather_errors) {
    td_scope_begin(); /* the inputs and results, released at the end (the runner checks for leaks) */
    int64_t s[2] = {3, 4}, big[2] = {4, 2}, ok[2] = {2, 2};
    td_tensor *x = ASSERT_TENSOR(td_ones(2, s, TD_F32, TD_CPU));
    ASSERT_ERROR(td_gather(x, 1, td_zeros(2, big, TD_I64, TD_CPU)), TD_ERR_SHAPE,
                 "idx [4,2] is larger than x [3,4] in dim 0 (4 > 3)");
    ASSERT_ERROR(td_gather(x, 1, td_zeros(1, s, TD_I64, TD_CPU)), TD_ERR_SHAPE, "differ in ndim");
    int64_t bad[4] = {0, 3, 1, 4};
    td_tensor *idx = ASSERT_TENSOR(td_from_data(bad, 2, ok, TD_I64, TD_CPU));
    ASSERT_ERROR(td_gather(x, 1, idx), TD_ERR_INDEX, "gather: index 4 at position [1,1] is out of range [0, 4)");
    ASSERT_ERROR(td_gather(x, 0, idx), TD_ERR_INDEX, "index 3 at position [0,1] is out of range [0, 3)");
    td_scope_end();
}

/* ---- scatter_add ---- */

static void scatter_ref(double *out, const int64_t *os, const int64_t *iv, const int64_t *is, const double *src,
                        const int64_t *ss, int dim) {
    for (int64_t a = 0; a < is[0]; a++)
        for (int64_t b = 0; b < is[1]; b++)
            for (int64_t c = 0; c < is[2]; c++) {
                int64_t p = (a * is[1] + b) * is[2] + c, t[3] = {a, b, c};
                double v = src[(a * ss[1] + b) * ss[2] + c];
                t[dim] = iv[p];
                out[(t[0] * os[1] + t[1]) * os[2] + t[2]] += v;
            }
}

TEST(scatter_add) {
    td_scope_begin();
    test_seed();
    td_dtype dts[4] = {TD_F32, TD_F64, TD_F16, TD_BF16};
    double tols[4] = {1e-6, 1e-14, 4e-3, 3e-2};
    for (int k = 0; k < 4; k++)
        for (int dim = 0; dim < 3; dim++) {
            int64_t os[3] = {4, 5, 3}, is[3] = {3, 4, 2}, ss[3] = {4, 6, 3};
            is[dim] = 9; /* many duplicates along dim */
            ss[dim] = 10;
            double *selfv, *srcv;
            int64_t *iv;
            td_tensor *self = random_tensor(3, os, dts[k], &selfv);
            int64_t sb[3] = {ss[2], ss[1], ss[0]};
            td_tensor *src = ASSERT_TENSOR(td_transpose(random_tensor(3, sb, dts[k], &srcv), 0, 2)); /* strided */
            free(srcv);
            srcv = test_host(src);
            td_tensor *idx = random_index(3, is, os[dim], dim == 1 ? TD_I32 : TD_I64, &iv);
            td_tensor *y = ASSERT_TENSOR(td_scatter_add(self, dim, idx, src));
            assert_shape(y, 3, os);
            scatter_ref(selfv, os, iv, is, srcv, ss, dim);
            double *yv = test_host(y);
            assert_close(yv, selfv, 60, tols[k]);
            double *again = test_host(ASSERT_TENSOR(td_scatter_add(self, dim, idx, src)));
            ASSERT(!memcmp(again, yv, 60 * sizeof *yv)); /* deterministic */
            free(selfv), free(srcv), free(iv), free(yv), free(again);
        }
    td_scope_end();
}

TEST(scatter_add_int) {
    td_scope_begin();
    test_seed();
    td_dtype dts[3] = {TD_I64, TD_I32, TD_U8};
    for (int k = 0; k < 3; k++) {
        int64_t os[3] = {2, 7, 3}, is[3] = {2, 11, 3}, ss[3] = {2, 11, 3};
        double *selfv, *srcv;
        int64_t *iv;
        td_tensor *self = random_tensor(3, os, dts[k], &selfv);
        td_tensor *src = random_tensor(3, ss, dts[k], &srcv);
        td_tensor *idx = random_index(3, is, os[1], TD_I64, &iv);
        double *yv = test_host(ASSERT_TENSOR(td_scatter_add(self, -2, idx, src)));
        scatter_ref(selfv, os, iv, is, srcv, ss, 1);
        if (dts[k] == TD_U8)
            for (int i = 0; i < 42; i++) selfv[i] = fmod(selfv[i], 256); /* wraps */
        assert_close(yv, selfv, 42, 0);
        free(selfv), free(srcv), free(iv), free(yv);
    }
    td_scope_end();
}

TEST(scatter_add_errors) {
    td_scope_begin(); /* the inputs and results, released at the end (the runner checks for leaks) */
    int64_t s[2] = {3, 4}, is[2] = {2, 5}, small[2] = {2, 2};
    td_tensor *self = ASSERT_TENSOR(td_zeros(2, s, TD_F32, TD_CPU));
    td_tensor *src = ASSERT_TENSOR(td_ones(2, small, TD_F32, TD_CPU));
    ASSERT_ERROR(td_scatter_add(self, 1, td_zeros(2, is, TD_I64, TD_CPU), src), TD_ERR_SHAPE,
                 "idx [2,5] is larger than src [2,2] in dim 1");
    ASSERT_ERROR(td_scatter_add(self, 0, td_zeros(2, is, TD_I64, TD_CPU), td_ones(2, is, TD_F32, TD_CPU)), TD_ERR_SHAPE,
                 "larger than self [3,4] in dim 1");
    ASSERT_ERROR(td_scatter_add(self, 0, td_zeros(2, small, TD_I64, TD_CPU), td_ones(2, small, TD_F64, TD_CPU)),
                 TD_ERR_DTYPE, "src has dtype float64 but self has float32");
    int64_t bad[4] = {0, 1, 2, 3};
    td_tensor *idx = ASSERT_TENSOR(td_from_data(bad, 2, small, TD_I64, TD_CPU));
    ASSERT_ERROR(td_scatter_add(self, 0, idx, src), TD_ERR_INDEX, "scatter_add: index 3 at position [1,1]");
    td_tensor *b = ASSERT_TENSOR(td_zeros(2, s, TD_BOOL, TD_CPU));
    ASSERT_ERROR(td_scatter_add(b, 0, idx, b), TD_ERR_DTYPE, "bool");
    td_scope_end();
}

/* ---- cat ---- */

TEST(cat) {
    td_scope_begin();
    test_seed();
    int64_t s0[3] = {2, 3, 4}, s1[3] = {2, 1, 4}, s2[3] = {2, 0, 4}, s3b[3] = {4, 2, 2};
    double *v0, *v1, *v2, *v3;
    td_tensor *a = random_tensor(3, s0, TD_F32, &v0);
    td_tensor *b = random_tensor(3, s1, TD_I32, &v1); /* promotes to float32 */
    td_tensor *c = random_tensor(3, s2, TD_F32, &v2);
    td_tensor *d = ASSERT_TENSOR(td_transpose(random_tensor(3, s3b, TD_F32, &v3), 0, 2)); /* [2,2,4] strided */
    free(v3);
    v3 = test_host(d);
    td_tensor *xs[4] = {a, b, c, d};
    td_tensor *y = ASSERT_TENSOR(td_cat(4, xs, 1));
    int64_t ys[3] = {2, 6, 4};
    assert_shape(y, 3, ys);
    ASSERT_EQ_INT(td_tensor_dtype(y), TD_F32);
    double *yv = test_host(y);
    const double *src[4] = {v0, v1, v2, v3};
    int64_t len[4] = {3, 1, 0, 2};
    for (int64_t i = 0; i < 2; i++)
        for (int64_t j = 0, k = 0, at = 0; j < 6; j++, at++) {
            while (at >= len[k]) at -= len[k], k++;
            for (int64_t l = 0; l < 4; l++) ASSERT(yv[(i * 6 + j) * 4 + l] == src[k][(i * len[k] + at) * 4 + l]);
        }
    /* dim 0 and a negative dim */
    td_tensor *pair[2] = {a, a};
    td_tensor *y0 = ASSERT_TENSOR(td_cat(2, pair, 0));
    double *y0v = test_host(y0);
    for (int i = 0; i < 48; i++) ASSERT(y0v[i] == v0[i % 24]);
    td_tensor *yl = ASSERT_TENSOR(td_cat(2, pair, -1));
    double *ylv = test_host(yl);
    for (int i = 0; i < 48; i++) ASSERT(ylv[i] == v0[(i / 8) * 4 + i % 4]);
    free(v0), free(v1), free(v2), free(v3), free(yv), free(y0v), free(ylv);
    td_scope_end();
}

TEST(cat_many) {
    td_scope_begin();
    enum { N = 150 }; /* more than one CAT dispatch takes */
    td_tensor *xs[N];
    int64_t s[2] = {1, 3};
    for (int k = 0; k < N; k++) xs[k] = ASSERT_TENSOR(td_full(2, s, k, k % 3 ? TD_F32 : TD_F16, TD_CPU));
    td_tensor *y = ASSERT_TENSOR(td_cat(N, xs, 0));
    ASSERT_EQ_INT(td_size(y, 0), N);
    ASSERT_EQ_INT(td_tensor_dtype(y), TD_F32);
    double *yv = test_host(y);
    for (int i = 0; i < 3 * N; i++) ASSERT(yv[i] == i / 3);
    free(yv);
    td_scope_end();
}

TEST(cat_errors) {
    td_scope_begin(); /* the inputs and results, released at the end (the runner checks for leaks) */
    int64_t s[2] = {2, 3}, t[2] = {3, 3}, u[3] = {2, 3, 1};
    td_tensor *a = ASSERT_TENSOR(td_ones(2, s, TD_F32, TD_CPU));
    td_tensor *xs[2] = {a, ASSERT_TENSOR(td_ones(2, t, TD_F32, TD_CPU))};
    ASSERT_ERROR(td_cat(2, xs, 1), TD_ERR_SHAPE, "cat: xs[1] [3,3] does not match xs[0] [2,3] outside dim 1");
    td_tensor *ok = ASSERT_TENSOR(td_cat(2, xs, 0));
    ASSERT_EQ_INT(td_size(ok, 0), 5);
    xs[1] = ASSERT_TENSOR(td_ones(3, u, TD_F32, TD_CPU));
    ASSERT_ERROR(td_cat(2, xs, 0), TD_ERR_SHAPE, "does not match");
    ASSERT_ERROR(td_cat(0, xs, 0), TD_ERR_MISUSE, "at least one");
    xs[1] = NULL;
    ASSERT_ERROR(td_cat(2, xs, 0), TD_ERR_MISUSE, "NULL");
    td_tensor *sc = ASSERT_TENSOR(td_scalar(1, TD_F32, TD_CPU));
    ASSERT_ERROR(td_cat(1, &sc, 0), TD_ERR_SHAPE, "0-d");
    ASSERT_ERROR(td_cat(1, &a, 2), TD_ERR_INDEX, "dim 2 out of range");
    td_scope_end();
}

/* ---- one_hot ---- */

TEST(one_hot) {
    td_scope_begin();
    test_seed();
    int64_t is[2] = {3, 5}, *iv;
    for (int k = 0; k < 2; k++) {
        td_tensor *idx = random_index(2, is, 6, k ? TD_I32 : TD_I64, &iv);
        iv[4] = 5;
        idx = ASSERT_TENSOR(td_cast(td_from_data(iv, 2, is, TD_I64, TD_CPU), k ? TD_I32 : TD_I64));
        for (int64_t C = -1; C <= 8; C += 9) {
            td_tensor *y = ASSERT_TENSOR(td_one_hot(td_transpose(idx, 0, 1), C)); /* strided idx [5,3] */
            int64_t want_c = C < 0 ? 6 : C, ys[3] = {5, 3, want_c};
            assert_shape(y, 3, ys);
            ASSERT_EQ_INT(td_tensor_dtype(y), TD_I64);
            int64_t *yv = malloc((size_t)(15 * want_c) * sizeof *yv);
            ASSERT_OK(td_copy_to_host(y, yv, (size_t)(15 * want_c) * sizeof *yv, TD_I64));
            for (int64_t a = 0; a < 5; a++)
                for (int64_t b = 0; b < 3; b++)
                    for (int64_t c = 0; c < want_c; c++)
                        ASSERT_EQ_INT(yv[(a * 3 + b) * want_c + c], iv[b * 5 + a] == c);
            free(yv);
        }
        free(iv);
    }
    td_scope_end();
}

TEST(one_hot_errors) {
    td_scope_begin(); /* the inputs and results, released at the end (the runner checks for leaks) */
    int64_t v[4] = {0, 2, -1, 1}, n = 4, zero = 0;
    td_tensor *idx = ASSERT_TENSOR(td_from_data(v, 1, &n, TD_I64, TD_CPU));
    ASSERT_ERROR(td_one_hot(idx, 3), TD_ERR_INDEX, "one_hot: index -1 at position [2] is out of range [0, 3)");
    ASSERT_ERROR(td_one_hot(idx, -1), TD_ERR_INDEX, "index -1");
    ASSERT_ERROR(td_one_hot(td_slice(idx, 0, 0, 2, 1), 2), TD_ERR_INDEX,
                 "index 2 at position [1] is out of range [0, 2)");
    ASSERT_ERROR(td_one_hot(idx, -2), TD_ERR_MISUSE, "num_classes");
    ASSERT_ERROR(td_one_hot(td_zeros(1, &zero, TD_I64, TD_CPU), -1), TD_ERR_SHAPE, "empty");
    ASSERT_ERROR(td_one_hot(td_ones(1, &n, TD_F32, TD_CPU), 3), TD_ERR_DTYPE, "float32");
    td_tensor *e = ASSERT_TENSOR(td_one_hot(td_zeros(1, &zero, TD_I64, TD_CPU), 4));
    ASSERT_EQ_INT(td_size(e, 1), 4);
    td_scope_end();
}

TEST(no_leaks) {
    /* every op, on success and on failure, leaves no tensor behind its scope */
    int64_t live = td_debug_live_tensors();
    td_scope_begin();
    int64_t ws[2] = {4, 3}, is[2] = {2, 2}, bad[4] = {0, 1, 2, 9}, ok[4] = {0, 1, 2, 3};
    td_tensor *w = td_transpose(td_ones(2, (int64_t[]){3, 4}, TD_F32, TD_CPU), 0, 1); /* [4,3] strided */
    td_tensor *good = td_from_data(ok, 2, is, TD_I64, TD_CPU), *oob = td_from_data(bad, 2, is, TD_I64, TD_CPU);
    td_tensor *xs[3] = {w, td_zeros(2, ws, TD_I32, TD_CPU), w};
    ASSERT(td_embedding(w, good) && !td_embedding(w, oob));
    ASSERT(td__embedding_backward(td_ones(3, (int64_t[]){2, 2, 3}, TD_F32, TD_CPU), good, 4, 1));
    ASSERT(td_index_select(w, 0, td_reshape(good, 1, (int64_t[]){4})) &&
           !td_index_select(w, 0, td_reshape(oob, 1, (int64_t[]){4})));
    ASSERT(td_gather(w, 0, good) && !td_gather(w, 0, oob));
    ASSERT(td_scatter_add(w, 0, good, w) && !td_scatter_add(w, 0, oob, w));
    ASSERT(td_cat(3, xs, 1) && td_one_hot(good, -1) && !td_one_hot(oob, 4));
    ASSERT(td_dropout(w, 0.5, 1, 2));
    td_scope_end();
    td_clear_error();
    ASSERT_EQ_INT(td_debug_live_tensors(), live);
}

TEST_MAIN(TESTS)
