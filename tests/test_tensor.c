/* Core tensor behaviour: creation, views, copies, scopes, refcounts. */
#include <unistd.h>

#include "runner.h"

/* clang-format off */
#define TESTS(X) X(full_and_item) X(from_data_roundtrip) X(view_shares_storage) X(permute_contiguous_copy) \
    X(slice_and_select) X(expand_broadcast_copy) X(reshape_noncontiguous) X(scope_releases) X(cast_dtypes) \
    X(half_conversion) X(zero_size) X(zero_size_huge_dims) X(philox_known_answer) X(omp_wait_policy)
/* clang-format on */

TEST(full_and_item) {
    int64_t shape[2] = {3, 4};
    td_tensor *t = ASSERT_TENSOR(td_full(2, shape, 2.5, TD_F32, TD_CPU));
    ASSERT_EQ_INT(td_numel(t), 12);
    int64_t idx[2] = {2, 3};
    ASSERT_NEAR(td_get(t, idx), 2.5, 0);
    td_release(t);
    ASSERT_EQ_INT(td_debug_live_tensors(), 0);
}

TEST(from_data_roundtrip) {
    double v[6] = {1, -2, 3.5, 4, 5, 6e10};
    int64_t shape[2] = {2, 3};
    td_tensor *t = ASSERT_TENSOR(td_from_data(v, 2, shape, TD_F64, TD_CPU));
    double back[6];
    ASSERT_OK(td_copy_to_host(t, back, sizeof back, TD_F64));
    for (int i = 0; i < 6; i++) ASSERT_NEAR(back[i], v[i], 0);
    td_release(t);
}

TEST(view_shares_storage) {
    td_scope_begin();
    float v[6] = {0, 1, 2, 3, 4, 5};
    int64_t shape[1] = {6}, s2[2] = {3, -1};
    td_tensor *t = ASSERT_TENSOR(td_from_data(v, 1, shape, TD_F32, TD_CPU));
    td_tensor *w = ASSERT_TENSOR(td_view(t, 2, s2));
    ASSERT_EQ_INT(td_size(w, 1), 2);
    td_tensor *one = ASSERT_TENSOR(td_scalar(42, TD_F32, TD_CPU));
    td_tensor *elem = ASSERT_TENSOR(td_select(td_select(w, 0, 1), 0, 1));
    ASSERT_OK(td_copy_(elem, one));
    int64_t i3 = 3;
    ASSERT_NEAR(td_get(t, &i3), 42, 0);
    td_scope_end();
}

TEST(permute_contiguous_copy) {
    td_scope_begin();
    float v[6] = {0, 1, 2, 3, 4, 5};
    int64_t shape[2] = {2, 3};
    td_tensor *t = ASSERT_TENSOR(td_from_data(v, 2, shape, TD_F32, TD_CPU));
    td_tensor *tt = ASSERT_TENSOR(td_transpose(t, 0, 1));
    ASSERT(!td_is_contiguous(tt));
    td_tensor *c = ASSERT_TENSOR(td_contiguous(tt));
    ASSERT(td_is_contiguous(c));
    float out[6];
    ASSERT_OK(td_copy_to_host(c, out, sizeof out, TD_F32));
    float want[6] = {0, 3, 1, 4, 2, 5};
    for (int i = 0; i < 6; i++) ASSERT_NEAR(out[i], want[i], 0);
    td_scope_end();
}

TEST(slice_and_select) {
    td_scope_begin();
    td_tensor *t = ASSERT_TENSOR(td_arange(0, 20, 1, TD_F32, TD_CPU));
    td_tensor *s = ASSERT_TENSOR(td_slice(t, 0, 3, -2, 4)); /* 3, 7, 11, 15 */
    ASSERT_EQ_INT(td_numel(s), 4);
    float out[4];
    ASSERT_OK(td_copy_to_host(s, out, sizeof out, TD_F32));
    for (int i = 0; i < 4; i++) ASSERT_NEAR(out[i], 3 + 4 * i, 0);
    ASSERT_ERROR(td_select(t, 0, 20), TD_ERR_INDEX, "out of range");
    td_scope_end();
}

TEST(expand_broadcast_copy) {
    td_scope_begin();
    float v[3] = {1, 2, 3};
    int64_t shape[2] = {1, 3}, big[2] = {4, 3};
    td_tensor *t = ASSERT_TENSOR(td_from_data(v, 2, shape, TD_F32, TD_CPU));
    td_tensor *e = ASSERT_TENSOR(td_expand(t, 2, big));
    ASSERT_EQ_INT(td_stride(e, 0), 0);
    td_tensor *c = ASSERT_TENSOR(td_contiguous(e));
    float out[12];
    ASSERT_OK(td_copy_to_host(c, out, sizeof out, TD_F32));
    for (int i = 0; i < 12; i++) ASSERT_NEAR(out[i], v[i % 3], 0);
    int64_t bad[2] = {4, 2};
    ASSERT_ERROR(td_expand(t, 2, bad), TD_ERR_SHAPE, "cannot expand");
    td_scope_end();
}

TEST(reshape_noncontiguous) {
    td_scope_begin();
    td_tensor *t = ASSERT_TENSOR(td_arange(0, 24, 1, TD_F32, TD_CPU));
    int64_t s3[3] = {2, 3, 4}, flat[1] = {24};
    td_tensor *a = ASSERT_TENSOR(td_view(t, 3, s3));
    td_tensor *p = ASSERT_TENSOR(td_transpose(a, 1, 2)); /* [2,4,3] */
    ASSERT_ERROR(td_view(p, 1, flat), TD_ERR_SHAPE, "use td_reshape");
    td_tensor *r = ASSERT_TENSOR(td_reshape(p, 1, flat));
    int64_t i1 = 1;
    ASSERT_NEAR(td_get(r, &i1), 4, 0); /* p[0,0,1] = a[0,1,0] = 4 */
    int64_t s2[2] = {2, 12};
    td_tensor *m = ASSERT_TENSOR(td_view(td_transpose(td_view(t, 2, s2), 0, 1), 2, (int64_t[]){12, 2}));
    ASSERT_EQ_INT(td_size(m, 0), 12);
    td_scope_end();
}

TEST(scope_releases) {
    int64_t live = td_debug_live_tensors();
    td_tensor *kept;
    td_scope_begin();
    td_tensor *a = td_arange(0, 10, 1, TD_F32, TD_CPU);
    td_tensor *b = td_slice(a, 0, 2, 5, 1);
    (void)b;
    kept = td_keep(td_clone(a));
    td_scope_end();
    ASSERT_EQ_INT(td_debug_live_tensors(), live + 1);
    td_release(kept);
    ASSERT_EQ_INT(td_debug_live_tensors(), live);
}

TEST(cast_dtypes) {
    double v[5] = {-1.5, 0, 2.7, 300, 1e40};
    int64_t n = 5;
    td_tensor *t = ASSERT_TENSOR(td_from_data(v, 1, &n, TD_F64, TD_CPU));
    int32_t i32[5];
    ASSERT_OK(td_copy_to_host(t, i32, sizeof i32, TD_I32));
    ASSERT_EQ_INT(i32[0], -1);
    ASSERT_EQ_INT(i32[2], 2);
    uint8_t b[5];
    ASSERT_OK(td_copy_to_host(t, b, sizeof b, TD_BOOL));
    ASSERT_EQ_INT(b[1], 0);
    ASSERT_EQ_INT(b[0], 1);
    float f[5];
    ASSERT_OK(td_copy_to_host(t, f, sizeof f, TD_F32));
    ASSERT(isinf(f[4]));
    td_release(t);
}

TEST(half_conversion) {
    td_scope_begin();
    /* values exactly representable in f16 and bf16 survive the round trip */
    float v[6] = {1.0f, -2.5f, 0.000061035156f, 65504.0f, 0.5f, -0.0f};
    int64_t n = 6;
    td_tensor *t = ASSERT_TENSOR(td_from_data(v, 1, &n, TD_F32, TD_CPU));
    td_tensor *h = ASSERT_TENSOR(td_cast(t, TD_F16));
    float back[6];
    ASSERT_OK(td_copy_to_host(h, back, sizeof back, TD_F32));
    for (int i = 0; i < 6; i++) ASSERT_NEAR(back[i], v[i], 0);
    float r[1] = {1.00048828125f}; /* halfway between 1 and 1+2^-10: rounds to even (1) */
    int64_t one = 1;
    td_tensor *x = ASSERT_TENSOR(td_cast(td_from_data(r, 1, &one, TD_F32, TD_CPU), TD_F16));
    ASSERT_NEAR(td_item(x), 1.0, 0);
    td_tensor *bf = ASSERT_TENSOR(td_cast(t, TD_BF16));
    ASSERT_NEAR(td_item(td_select(bf, 0, 1)), -2.5, 0);
    td_scope_end();
}

TEST(zero_size) {
    td_scope_begin();
    int64_t shape[2] = {0, 5};
    td_tensor *t = ASSERT_TENSOR(td_zeros(2, shape, TD_F32, TD_CPU));
    ASSERT_EQ_INT(td_numel(t), 0);
    td_tensor *c = ASSERT_TENSOR(td_contiguous(td_transpose(t, 0, 1)));
    ASSERT_EQ_INT(td_size(c, 0), 5);
    int64_t neg[1] = {-3};
    ASSERT_ERROR(td_empty(1, neg, TD_F32, TD_CPU), TD_ERR_MISUSE, "negative size");
    td_scope_end();
}

/* A size-0 tensor's strides still span its other dims: [0, 2^40, 2^40] f32
** would need strides of 2^80 elements, which overflow int64 (fuzz finding). */
TEST(zero_size_huge_dims) {
    int64_t huge[3] = {0, (int64_t)1 << 40, (int64_t)1 << 40}, fine[3] = {0, 1 << 20, 1 << 20};
    ASSERT_ERROR(td_empty(3, huge, TD_F32, TD_CPU), TD_ERR_OOM, "overflows 2^48 bytes");
    int64_t last_zero[3] = {(int64_t)1 << 40, (int64_t)1 << 40, 0};
    ASSERT_ERROR(td_zeros(3, last_zero, TD_F32, TD_CPU), TD_ERR_OOM, "size-0");
    float none = 0;
    ASSERT_ERROR(td_from_data(&none, 3, huge, TD_F32, TD_CPU), TD_ERR_OOM, "2^48");
    td_tensor *t = ASSERT_TENSOR(td_empty(3, fine, TD_F32, TD_CPU));
    ASSERT_EQ_INT(td_numel(t), 0);
    ASSERT_EQ_INT(td_stride(t, 0), (int64_t)1 << 40);
    /* a view of an empty tensor to such a shape fails the same way */
    ASSERT_ERROR(td_view(t, 3, huge), TD_ERR_SHAPE, "invalid for a tensor");
    int64_t huge_infer[3] = {(int64_t)1 << 40, (int64_t)1 << 40, -1};
    ASSERT_ERROR(td_reshape(t, 3, huge_infer), TD_ERR_SHAPE, "invalid for a tensor");
    td_release(t);
}

TEST(philox_known_answer) {
    /* Random123's published known-answer vectors for philox4x32-10 */
    uint32_t out[4];
    td_philox4x32(0, 0, out);
    ASSERT_EQ_INT(out[0], 0x6627e8d5u);
    ASSERT_EQ_INT(out[1], 0xe169c58du);
    ASSERT_EQ_INT(out[2], 0xbc57ac4cu);
    ASSERT_EQ_INT(out[3], 0x9b00dbd8u);
}

TEST_MAIN(TESTS)

/* The GOMP_SPINCOUNT libgomp settled on in a fresh run of this executable under env_args. */
static long long spin_count_with(const char *env_args) {
    char cmd[512], line[256];
    snprintf(cmd, sizeof cmd,
             "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT OMP_DISPLAY_ENV=verbose %s /proc/%d/exe --list 2>&1", env_args,
             (int)getpid());
    FILE *p = popen(cmd, "r");
    ASSERT(p);
    long long spin = -1;
    while (fgets(line, sizeof line, p))
        if (strstr(line, "GOMP_SPINCOUNT = '")) spin = atoll(strchr(line, '\'') + 1);
    ASSERT(pclose(p) == 0);
    return spin;
}

/* Idle OpenMP threads sleep in any program linking libtrident, without
** OMP_WAIT_POLICY in its environment: libtrident-ompenv sets the passive
** policy before libgomp reads it (src/omp_env/omp_env.c). A policy the
** environment sets is kept. */
TEST(omp_wait_policy) {
    td_device_info info;
    ASSERT_OK(td_backend_for(TD_DEVICE_CPU)->iface->device_info(0, &info));
    if (!strstr(info.features, "openmp=")) TEST_SKIP("built without OpenMP");
    long long by_default = spin_count_with(""), active = spin_count_with("OMP_WAIT_POLICY=active");
    printf("  GOMP_SPINCOUNT: %lld by default, %lld with OMP_WAIT_POLICY=active\n", by_default, active);
    ASSERT_EQ_INT(by_default, 0);
    ASSERT(active > 0);
}
