/* LINEAR_DGELU's bias gradient (td__linear_dgelu with db): db = the sum over rows of the dh it returns, in dh's
** dtype or float32 for f16/bf16 dh (autocast's f32 parameters), against the float32 sum of that dh on the same
** device; dh itself equals the op's without db (bit for bit but on CUDA, where another kernel computes it). On
** CUDA the erf form (and f32's tanh form) sums dh in the pass that applies gelu'(h) (the fp32 products, before
** they round to dh's dtype), the tanh form in f16/bf16 runs wgrad_db's column sums after cuBLASLt's DGELU
** epilogue, f64 SUM's kernel; the CPU sums the rounded dh (SUM's kernel); Vulkan declines the f32 db of half dh
** and the core sums dh in its dtype, then casts. W5's shape (dy [16384, 768], h [16384, 3072]) and odd ones (no
** 16-byte loads, one row, no rows). */
#include <string.h>

#include "test_util.h"

#include "core/linear_dgelu.h"

#define TESTS(X)                                                                                                       \
    X(db_is_sum_cpu)                                                                                                   \
    X(db_is_sum_cuda)                                                                                                  \
    X(w5_shapes_cuda)                                                                                                  \
    X(db_is_sum_vulkan)                                                                                                \
    X(deterministic_cuda)                                                                                              \
    X(bad_db_dtype)

/* dy [M, N], w [N, K], h [M, K] of dt on dev, db of db_dt: dh with db equals dh without it, db is the float32
** (f64: float64) sum of dh over its rows within tol (test_rel_err: against db's scale, as CUDA's sum of the
** unrounded products differs from the rounded dh's by the sum of M rounding errors, ~sqrt(M) 2^-9 |dh| for bf16) */
static void check(td_device dev, td_dtype dt, td_dtype db_dt, int64_t M, int64_t N, int64_t K, bool tanh_form,
                  double tol) {
    td_scope_begin();
    td_tensor *dy = ASSERT_TENSOR(td_cast(td_randn(2, (int64_t[]){M, N}, 1, 0, TD_F32, dev), dt));
    td_tensor *w = ASSERT_TENSOR(td_mul_scalar(td_cast(td_randn(2, (int64_t[]){N, K}, 2, 0, TD_F32, dev), dt), 0.05));
    td_tensor *h = ASSERT_TENSOR(td_mul_scalar(td_cast(td_randn(2, (int64_t[]){M, K}, 3, 0, TD_F32, dev), dt), 2));
    td_tensor *db = NULL, *dh = ASSERT_TENSOR(td__linear_dgelu(dy, w, h, tanh_form, &db, db_dt));
    td_tensor *only = ASSERT_TENSOR(td__linear_dgelu(dy, w, h, tanh_form, NULL, db_dt));
    ASSERT_EQ_INT(td_tensor_dtype(db), db_dt);
    ASSERT_EQ_INT(td_ndim(db), 1);
    ASSERT_EQ_INT(td_size(db, 0), K);
    int rows = 0;
    td_tensor *ref = ASSERT_TENSOR(td_sum(td_cast(dh, dt == TD_F64 ? TD_F64 : TD_F32), 1, &rows, false));
    double e = test_rel_err(db, ref), same = test_max_rel(dh, only);
    fprintf(stderr, "  %s %s db %s dy[%lld,%lld] h[%lld,%lld]: db vs sum(dh) %.3g (tol %.3g), dh vs dh alone %.3g\n",
            td_dtype_name(dt), tanh_form ? "tanh" : "erf", td_dtype_name(db_dt), (long long)M, (long long)N,
            (long long)M, (long long)K, e, tol, same);
    ASSERT(e <= tol);
    ASSERT(dev.type == TD_DEVICE_CUDA ? same <= tol : same == 0); /* CUDA: another kernel, the same arithmetic */
    td_scope_end();
}

/* every float dtype, both forms; f16/bf16 with a db of their own dtype and of f32 */
static void check_all(td_device dev) {
    const td_dtype dts[4] = {TD_F32, TD_BF16, TD_F16, TD_F64};
    const int64_t shapes[][3] = {{64, 40, 64}, {1024, 96, 48}, {37, 7, 9}, {300, 16, 33}, {1, 5, 8}, {0, 4, 16}};
    for (int i = 0; i < 4; i++)
        for (int s = 0; s < (int)(sizeof shapes / sizeof shapes[0]); s++)
            for (int tf = 0; tf < 2; tf++) {
                bool half = dts[i] == TD_F16 || dts[i] == TD_BF16;
                /* f32 sums in another order; a half db rounds once (2^-8 for bf16) */
                double tol = dts[i] == TD_F64 ? 1e-12 : half ? 1e-2 : 1e-5;
                check(dev, dts[i], dts[i], shapes[s][0], shapes[s][1], shapes[s][2], tf, tol);
                /* f32 db of the rounded dh (CPU) or of the unrounded products (CUDA): within a rounding of each
                ** term; the core's fallback (Vulkan) rounds the sum to the half dtype */
                if (half) check(dev, dts[i], TD_F32, shapes[s][0], shapes[s][1], shapes[s][2], tf, 5e-3);
            }
}

TEST(db_is_sum_cpu) { check_all(TD_CPU); }

TEST(db_is_sum_vulkan) { check_all(test_device_or_skip("vulkan:0")); }

TEST(db_is_sum_cuda) { check_all(test_device_or_skip("cuda:0")); }

TEST(w5_shapes_cuda) {
    td_device dev = test_device_or_skip("cuda:0");
    for (int tf = 0; tf < 2; tf++) { /* W5's fc2 backward: dh [16384, 3072], db over many chunks of rows */
        check(dev, TD_BF16, TD_F32, 16384, 768, 3072, tf, 5e-3);
        check(dev, TD_F32, TD_F32, 16384, 768, 3072, tf, 1e-5);
        check(dev, TD_BF16, TD_F32, 16383, 768, 3071, tf, 5e-3); /* odd: one element a thread */
    }
}

/* two runs give the same bits (the chunks' partial sums add in a fixed order) */
TEST(deterministic_cuda) {
    td_device dev = test_device_or_skip("cuda:0");
    td_scope_begin();
    enum { M = 8192, N = 256, K = 3072 };
    td_tensor *dy = ASSERT_TENSOR(td_randn(2, (int64_t[]){M, N}, 1, 0, TD_BF16, dev));
    td_tensor *w = ASSERT_TENSOR(td_mul_scalar(td_randn(2, (int64_t[]){N, K}, 2, 0, TD_BF16, dev), 0.05));
    td_tensor *h = ASSERT_TENSOR(td_randn(2, (int64_t[]){M, K}, 3, 0, TD_BF16, dev));
    static float got[2][K];
    for (int tf = 0; tf < 2; tf++) {
        for (int run = 0; run < 2; run++) {
            td_tensor *db = NULL;
            ASSERT_TENSOR(td__linear_dgelu(dy, w, h, tf, &db, TD_F32));
            ASSERT_OK(td_copy_to_host(db, got[run], sizeof got[run], TD_F32));
        }
        ASSERT(!memcmp(got[0], got[1], sizeof got[0]));
    }
    td_scope_end();
}

/* db of a dtype other than dy's, or f32 for f16/bf16 dy: a one-line error */
TEST(bad_db_dtype) {
    td_scope_begin();
    td_tensor *dy = td_randn(2, (int64_t[]){4, 3}, 1, 0, TD_F32, TD_CPU),
              *w = td_randn(2, (int64_t[]){3, 5}, 2, 0, TD_F32, TD_CPU);
    td_tensor *h = td_randn(2, (int64_t[]){4, 5}, 3, 0, TD_F32, TD_CPU), *db = NULL;
    ASSERT(!td__linear_dgelu(dy, w, h, false, &db, TD_BF16));
    ASSERT_EQ_INT(td_last_status(), TD_ERR_DTYPE);
    ASSERT(strstr(td_last_error(), "linear_dgelu: db of bfloat16 for dy of float32"));
    ASSERT(!td__linear_dgelu(td_cast(dy, TD_BF16), td_cast(w, TD_BF16), td_cast(h, TD_BF16), false, &db, TD_F64));
    ASSERT_EQ_INT(td_last_status(), TD_ERR_DTYPE);
    td_clear_error();
    td_scope_end();
}

TEST_MAIN(TESTS)
