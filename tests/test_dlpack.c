/*
** DLPack export and import (include/trident/dlpack.h): zero copy both ways,
** every dtype, strides, broadcast, byte offsets, 0-d and size 0, both the
** versioned and the legacy struct, deleters run exactly once, and bad input
** refused with the producer's tensor left to the caller (the ASan run checks
** that nothing leaks). A fake producer here owns malloc'd memory.
*/
#include "runner.h"
#include "test_util.h"
#include "trident/dlpack.h"

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

#define TESTS(X)                                                                                                       \
    X(export_cpu)                                                                                                      \
    X(import_cpu)                                                                                                      \
    X(round_trip)                                                                                                      \
    X(every_dtype)                                                                                                     \
    X(strides_broadcast_offset)                                                                                        \
    X(zero_dim_and_empty)                                                                                              \
    X(legacy)                                                                                                          \
    X(read_only_and_copy)                                                                                              \
    X(bad_input)                                                                                                       \
    X(import_overflowing_contiguous_strides)                                                                           \
    X(import_huge_empty_shape)                                                                                         \
    X(import_misaligned_byte_offset)                                                                                   \
    X(import_empty_null_data)                                                                                          \
    X(import_empty_export)                                                                                             \
    X(import_empty_within_empty_limits)                                                                                \
    X(vulkan_export)                                                                                                   \
    X(cuda_round_trip)

/* ---- a producer: n bytes of malloc'd memory behind a versioned or legacy tensor ---- */

typedef struct producer {
    DLManagedTensorVersioned v;
    DLManagedTensor legacy;
    int64_t shape[TD_MAX_DIMS + 1], strides[TD_MAX_DIMS + 1];
    void *mem;
    int deleted; /* deleter calls */
} producer;

static void producer_delete(DLManagedTensorVersioned *m) { ((producer *)m->manager_ctx)->deleted++; }
static void producer_delete_legacy(DLManagedTensor *m) { ((producer *)m->manager_ctx)->deleted++; }

static void producer_init(producer *p, void *mem, DLDataType dt, int ndim, const int64_t *shape, const int64_t *strides,
                          uint64_t byte_offset) {
    memset(p, 0, sizeof *p);
    p->mem = mem;
    for (int i = 0; i < ndim; i++) {
        p->shape[i] = shape[i];
        if (strides) p->strides[i] = strides[i];
    }
    DLTensor dl = {mem, {kDLCPU, 0}, ndim, dt, p->shape, strides ? p->strides : NULL, byte_offset};
    p->v = (DLManagedTensorVersioned){{1, 1}, p, producer_delete, 0, dl};
    p->legacy = (DLManagedTensor){dl, p, producer_delete_legacy};
}

/* Every tensor released, and (under ASan) no host memory unreachable: the
** runner's cases end in _exit, which skips LSan's own check. */
static void check_no_leaks(void) {
    ASSERT_EQ_INT(td_debug_live_tensors(), 0);
#ifdef __SANITIZE_ADDRESS__
    if (__lsan_do_recoverable_leak_check()) TEST_FAIL_("LeakSanitizer found leaks (above)");
#endif
}

/* ---- export ---- */

TEST(export_cpu) {
    td_tensor *t = ASSERT_TENSOR(td_arange(0, 6, 1, TD_F32, TD_CPU));
    td_scope_begin();
    td_tensor *tt = td_keep(ASSERT_TENSOR(td_transpose(td_view(t, 2, (int64_t[]){2, 3}), 0, 1))); /* [3,2] */
    td_scope_end();
    DLManagedTensorVersioned *m = NULL;
    ASSERT_OK(td_to_dlpack(tt, 0, NULL, &m));
    ASSERT_EQ_INT(m->version.major, DLPACK_MAJOR_VERSION);
    ASSERT_EQ_INT(m->flags, 0);
    DLTensor *dl = &m->dl_tensor;
    ASSERT_EQ_INT(dl->device.device_type, kDLCPU);
    ASSERT_EQ_INT(dl->ndim, 2);
    ASSERT_EQ_INT(dl->shape[0], 3);
    ASSERT_EQ_INT(dl->strides[0], 1);
    ASSERT_EQ_INT(dl->strides[1], 3);
    ASSERT_EQ_INT(dl->dtype.code, kDLFloat);
    ASSERT_EQ_INT(dl->dtype.bits, 32);
    ASSERT((uint64_t)(uintptr_t)dl->data + dl->byte_offset == td_tensor_device_address(t)); /* zero copy */
    td_release(tt);
    td_release(t);
    int64_t live = td_debug_live_tensors();
    float *x = (float *)((char *)dl->data + dl->byte_offset);
    ASSERT_NEAR(x[1 * 3 + 2], 5, 0); /* element [1,2] of the [2,3] view: still alive */
    x[1] = 42;                       /* the export writes, nothing to see any more */
    m->deleter(m);                   /* the last reference: the storage goes */
    ASSERT_EQ_INT(td_debug_live_tensors(), live - 1);
    ASSERT_ERROR(td_to_dlpack(NULL, 0, NULL, &m), TD_ERR_MISUSE, "to_dlpack");
    ASSERT(m == NULL);
    check_no_leaks();
}

/* ---- import ---- */

TEST(import_cpu) {
    float mem[6] = {0, 1, 2, 3, 4, 5};
    producer p;
    producer_init(&p, mem, (DLDataType){kDLFloat, 32, 1}, 2, (int64_t[]){2, 3}, NULL, 0);
    td_tensor *t = ASSERT_TENSOR(td_from_dlpack(&p.v, 0));
    ASSERT(td_tensor_device_address(t) == (uint64_t)(uintptr_t)mem);
    ASSERT_NEAR(td_get(t, (int64_t[]){1, 2}), 5, 0);
    mem[4] = -7; /* the producer writes; Trident sees it */
    ASSERT_NEAR(td_get(t, (int64_t[]){1, 1}), -7, 0);
    td_tensor *row = ASSERT_TENSOR(td_select(t, 0, 1));
    td_scope_begin();
    ASSERT_OK(td_copy_(row, td_full(1, (int64_t[]){3}, 9, TD_F32, TD_CPU))); /* Trident writes; the producer sees it */
    td_scope_end();
    ASSERT_NEAR(mem[3], 9, 0);
    td_release(t);
    ASSERT_EQ_INT(p.deleted, 0); /* the view keeps it */
    td_release(row);
    ASSERT_EQ_INT(p.deleted, 1);
    /* pinned host memory (kDLCUDAHost) is a CPU tensor to Trident */
    producer_init(&p, mem, (DLDataType){kDLFloat, 32, 1}, 1, (int64_t[]){6}, NULL, 0);
    p.v.dl_tensor.device = (DLDevice){kDLCUDAHost, 0};
    t = ASSERT_TENSOR(td_from_dlpack(&p.v, 0));
    ASSERT_EQ_INT(td_tensor_device(t).type, TD_DEVICE_CPU);
    ASSERT_NEAR(td_get(t, (int64_t[]){3}), 9, 0);
    td_release(t);
    ASSERT_EQ_INT(p.deleted, 1);
    check_no_leaks();
}

/* Trident -> DLPack -> Trident: the same memory, and the export's deleter runs
** when the imported tensor goes, freeing the storage after the original. */
TEST(round_trip) {
    int64_t live = td_debug_live_tensors();
    td_tensor *t = ASSERT_TENSOR(td_arange(0, 8, 1, TD_F64, TD_CPU));
    DLManagedTensor *m = NULL;
    ASSERT_OK(td_to_dlpack_legacy(t, 0, NULL, &m));
    td_tensor *u = ASSERT_TENSOR(td_from_dlpack_legacy(m));
    ASSERT(td_tensor_device_address(u) == td_tensor_device_address(t));
    td_scope_begin();
    ASSERT_OK(td_copy_(td_slice(u, 0, 2, 3, 1), td_scalar(-1, TD_F64, TD_CPU)));
    ASSERT_NEAR(td_get(t, (int64_t[]){2}), -1, 0);
    td_release(t);
    ASSERT_NEAR(td_item(td_sum(u, 0, NULL, false)), 28 - 2 - 1, 0);
    td_scope_end();
    td_release(u);
    ASSERT_EQ_INT(td_debug_live_tensors(), live);
    check_no_leaks();
}

TEST(every_dtype) {
    static const struct {
        td_dtype dt;
        uint8_t code, bits;
    } cases[] = {{TD_F32, kDLFloat, 32}, {TD_F64, kDLFloat, 64}, {TD_F16, kDLFloat, 16}, {TD_BF16, kDLBfloat, 16},
                 {TD_I32, kDLInt, 32},   {TD_I64, kDLInt, 64},   {TD_U8, kDLUInt, 8},    {TD_BOOL, kDLBool, 8}};
    uint64_t seed = test_seed();
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        td_scope_begin();
        td_dtype dt = cases[k].dt;
        double hi = dt == TD_BOOL ? 2 : 100;
        td_tensor *t =
            ASSERT_TENSOR(td_cast(td_mul_scalar(td_rand(1, (int64_t[]){7}, seed, 0, TD_F32, TD_CPU), hi), dt));
        DLManagedTensorVersioned *m = NULL;
        ASSERT_OK(td_to_dlpack(t, 0, NULL, &m));
        ASSERT_EQ_INT(m->dl_tensor.dtype.code, cases[k].code);
        ASSERT_EQ_INT(m->dl_tensor.dtype.bits, cases[k].bits);
        ASSERT_EQ_INT(m->dl_tensor.dtype.lanes, 1);
        td_tensor *u = ASSERT_TENSOR(td_from_dlpack(m, 0));
        ASSERT_EQ_INT(td_tensor_dtype(u), dt);
        ASSERT(td_tensor_device_address(u) == td_tensor_device_address(t));
        for (int64_t i = 0; i < 7; i++) ASSERT_NEAR(td_get(u, &i), td_get(t, &i), 0);
        td_scope_end();
    }
    check_no_leaks();
}

TEST(strides_broadcast_offset) {
    double mem[12];
    for (int i = 0; i < 12; i++) mem[i] = i;
    producer p;
    /* [3,2] over mem + 2 doubles: column-major (strides {1,3}), then a broadcast row (stride 0) */
    producer_init(&p, mem, (DLDataType){kDLFloat, 64, 1}, 3, (int64_t[]){3, 2, 4}, (int64_t[]){1, 3, 0}, 16);
    td_tensor *t = ASSERT_TENSOR(td_from_dlpack(&p.v, 0));
    for (int64_t i = 0; i < 3; i++)
        for (int64_t j = 0; j < 2; j++)
            for (int64_t k = 0; k < 4; k++) ASSERT_NEAR(td_get(t, (int64_t[]){i, j, k}), 2 + i + 3 * j, 0);
    ASSERT_EQ_INT(td_stride(t, 2), 0);
    td_tensor *s = ASSERT_TENSOR(td_sum(t, 0, NULL, false));
    ASSERT_NEAR(td_item(s), 4 * (6 * 2 + 2 * 3 + 3 * 3), 0); /* 4 x sum of 2 + i + 3j */
    td_release(s);
    /* the export of a strided view keeps its strides and points at its element 0 */
    DLManagedTensorVersioned *m = NULL;
    td_tensor *v = ASSERT_TENSOR(td_slice(t, 0, 1, 3, 1));
    ASSERT_OK(td_to_dlpack(v, 0, NULL, &m));
    ASSERT(m->dl_tensor.data == (void *)(mem + 3));
    ASSERT_EQ_INT(m->dl_tensor.strides[1], 3);
    ASSERT_EQ_INT(m->dl_tensor.strides[2], 0);
    td_release(v);
    td_release(t);
    ASSERT_EQ_INT(p.deleted, 0); /* the export holds the storage */
    m->deleter(m);
    ASSERT_EQ_INT(p.deleted, 1);
    check_no_leaks();
}

TEST(zero_dim_and_empty) {
    float one = 3.5f;
    producer p;
    producer_init(&p, &one, (DLDataType){kDLFloat, 32, 1}, 0, NULL, NULL, 0);
    td_tensor *t = ASSERT_TENSOR(td_from_dlpack(&p.v, 0));
    ASSERT_EQ_INT(td_ndim(t), 0);
    ASSERT_NEAR(td_item(t), 3.5, 0);
    td_release(t);
    ASSERT_EQ_INT(p.deleted, 1);
    producer q;
    producer_init(&q, NULL, (DLDataType){kDLInt, 64, 1}, 2, (int64_t[]){0, 5}, NULL, 0);
    td_tensor *e = ASSERT_TENSOR(td_from_dlpack(&q.v, 0));
    ASSERT_EQ_INT(td_numel(e), 0);
    ASSERT_EQ_INT(td_size(e, 1), 5);
    td_release(e);
    ASSERT_EQ_INT(q.deleted, 1);
    td_tensor *z = ASSERT_TENSOR(td_zeros(2, (int64_t[]){3, 0}, TD_F32, TD_CPU));
    DLManagedTensorVersioned *m = NULL;
    ASSERT_OK(td_to_dlpack(z, 0, NULL, &m));
    ASSERT_EQ_INT(m->dl_tensor.shape[1], 0);
    td_tensor *z2 = ASSERT_TENSOR(td_from_dlpack(m, 0));
    ASSERT_EQ_INT(td_numel(z2), 0);
    td_release(z2);
    td_release(z);
    check_no_leaks();
}

TEST(legacy) {
    int32_t mem[4] = {1, 2, 3, 4};
    producer p;
    producer_init(&p, mem, (DLDataType){kDLInt, 32, 1}, 1, (int64_t[]){4}, (int64_t[]){1}, 4);
    p.legacy.dl_tensor.shape[0] = 3;
    td_tensor *t = ASSERT_TENSOR(td_from_dlpack_legacy(&p.legacy));
    ASSERT_NEAR(td_get(t, (int64_t[]){0}), 2, 0);
    td_release(t);
    ASSERT_EQ_INT(p.deleted, 1);
    DLManagedTensor *m = NULL;
    td_tensor *x = ASSERT_TENSOR(td_ones(1, (int64_t[]){2}, TD_BF16, TD_CPU));
    ASSERT_ERROR(td_to_dlpack_legacy(x, TD_DLPACK_READ_ONLY, NULL, &m), TD_ERR_MISUSE, "read-only");
    ASSERT(m == NULL);
    ASSERT_OK(td_to_dlpack_legacy(x, 0, NULL, &m));
    ASSERT_EQ_INT(m->dl_tensor.dtype.code, kDLBfloat);
    td_release(x);
    m->deleter(m);
    check_no_leaks();
}

TEST(read_only_and_copy) {
    td_tensor *t = ASSERT_TENSOR(td_arange(0, 4, 1, TD_F32, TD_CPU));
    DLManagedTensorVersioned *m = NULL;
    ASSERT_OK(td_to_dlpack(t, TD_DLPACK_READ_ONLY, NULL, &m));
    ASSERT_EQ_INT(m->flags, DLPACK_FLAG_BITMASK_READ_ONLY);
    ASSERT_ERROR(td_from_dlpack(m, 0), TD_ERR_MISUSE, "read-only");
    td_tensor *r = ASSERT_TENSOR(td_from_dlpack(m, TD_DLPACK_READ_ONLY)); /* owns m now */
    td_release(r);
    ASSERT_OK(td_to_dlpack(t, TD_DLPACK_COPY, NULL, &m));
    ASSERT_EQ_INT(m->flags, DLPACK_FLAG_BITMASK_IS_COPIED);
    ASSERT(m->dl_tensor.data != (void *)(uintptr_t)td_tensor_device_address(t));
    ASSERT_NEAR(((float *)m->dl_tensor.data)[3], 3, 0);
    m->deleter(m);
    td_release(t);
    check_no_leaks();
}

/* Each bad tensor is refused with a message naming the problem, and the
** producer still owns it: its deleter has not run. */
TEST(bad_input) {
    float mem[8] = {0};
    producer p;
#define REFUSED(setup, st, substr)                                                                                     \
    do {                                                                                                               \
        producer_init(&p, mem, (DLDataType){kDLFloat, 32, 1}, 2, (int64_t[]){2, 4}, NULL, 0);                          \
        setup;                                                                                                         \
        ASSERT_ERROR(td_from_dlpack(&p.v, 0), st, substr);                                                             \
        ASSERT_EQ_INT(p.deleted, 0);                                                                                   \
    } while (0)
    REFUSED(p.v.dl_tensor.device.device_type = kDLVulkan, TD_ERR_UNSUPPORTED, "device type 7 (kDLVulkan)");
    REFUSED(p.v.dl_tensor.device.device_type = kDLROCM, TD_ERR_UNSUPPORTED, "kDLROCM) is not supported");
    REFUSED(p.v.dl_tensor.dtype = ((DLDataType){kDLComplex, 64, 1}), TD_ERR_UNSUPPORTED, "dtype complex64");
    REFUSED(p.v.dl_tensor.dtype = ((DLDataType){kDLInt, 8, 1}), TD_ERR_UNSUPPORTED, "dtype int8");
    REFUSED(p.v.dl_tensor.dtype = ((DLDataType){kDLFloat, 32, 4}), TD_ERR_UNSUPPORTED, "lanes 4");
    REFUSED(p.v.version.major = 2, TD_ERR_UNSUPPORTED, "DLPack version 2.1 is not supported");
    REFUSED(p.v.version.major = 0, TD_ERR_UNSUPPORTED, "version 0.1");
    REFUSED((p.v.dl_tensor.strides = p.strides, p.strides[0] = -4, p.strides[1] = 1), TD_ERR_MISUSE,
            "dim 0 has stride -4");
    REFUSED(p.v.dl_tensor.ndim = 9, TD_ERR_MISUSE, "ndim 9");
    REFUSED(p.v.dl_tensor.ndim = -1, TD_ERR_MISUSE, "ndim -1");
    REFUSED(p.v.dl_tensor.shape[1] = -3, TD_ERR_MISUSE, "size -3");
    REFUSED(p.v.dl_tensor.data = NULL, TD_ERR_MISUSE, "address is 0");
    REFUSED(p.v.flags = DLPACK_FLAG_BITMASK_READ_ONLY, TD_ERR_MISUSE, "read-only");
    REFUSED(p.v.dl_tensor.device = ((DLDevice){kDLCUDA, 7}),
            td_device_available(TD_CUDA(7)) ? TD_OK : TD_ERR_UNAVAILABLE, "");
    ASSERT_ERROR(td_from_dlpack(NULL, 0), TD_ERR_MISUSE, "NULL");
    ASSERT_ERROR(td_from_dlpack(&p.v, 64), TD_ERR_MISUSE, "unknown flags");
    ASSERT_ERROR(td_from_dlpack_legacy(NULL), TD_ERR_MISUSE, "NULL");
    producer_init(&p, mem, (DLDataType){kDLBool, 16, 1}, 1, (int64_t[]){2}, NULL, 0);
    ASSERT_ERROR(td_from_dlpack_legacy(&p.legacy), TD_ERR_UNSUPPORTED, "dtype bool16");
    ASSERT_EQ_INT(p.deleted, 0);
    td_tensor *t = ASSERT_TENSOR(td_ones(1, (int64_t[]){2}, TD_F32, TD_CPU));
    DLManagedTensorVersioned *m = NULL;
    ASSERT_ERROR(td_to_dlpack(t, 8, NULL, &m), TD_ERR_MISUSE, "unknown flags 0x8");
    ASSERT_ERROR(td_to_dlpack(t, 0, NULL, NULL), TD_ERR_MISUSE, "out is NULL");
    td_release(t);
    ASSERT_ERROR(td_to_dlpack(t, 0, NULL, &m), TD_ERR_STATE, "released");
#undef REFUSED
    check_no_leaks();
}

/* ---- imports found by fuzzing (issue 27): each refused with a clear error, or imported as a tensor every op takes;
** td_from_foreign, the import under both capsules, keeps the same rules ---- */

static void foreign_delete(void *ctx) { (*(int *)ctx)++; }

/* [2^32, 2^32] with NULL strides: the contiguous strides would overflow */
TEST(import_overflowing_contiguous_strides) {
    float mem[8] = {0};
    producer p;
    int64_t shape[2] = {1ll << 32, 1ll << 32};
    producer_init(&p, mem, (DLDataType){kDLFloat, 32, 1}, 2, shape, NULL, 0);
    ASSERT_ERROR(td_from_dlpack(&p.v, 0), TD_ERR_MISUSE, "multiply past 2^48 bytes at dim 1");
    ASSERT_ERROR(td_from_dlpack_legacy(&p.legacy), TD_ERR_MISUSE, "multiply past 2^48 bytes");
    int deleted = 0;
    ASSERT_ERROR(td_from_foreign(TD_CPU, (uintptr_t)mem, 2, shape, NULL, TD_F32, foreign_delete, &deleted),
                 TD_ERR_MISUSE, "from_foreign: the sizes (a 0 taken as 1) multiply past 2^48 bytes at dim 1");
    ASSERT_EQ_INT(p.deleted + deleted, 0);
    check_no_leaks();
}

/* [2^40, 2^40, 0] with strides 0: no element, but the sizes' product would overflow an iteration */
TEST(import_huge_empty_shape) {
    float mem[8] = {0};
    producer p;
    int64_t shape[3] = {1ll << 40, 1ll << 40, 0}, strides[3] = {0, 0, 0};
    producer_init(&p, mem, (DLDataType){kDLFloat, 32, 1}, 3, shape, strides, 0);
    ASSERT_ERROR(td_from_dlpack(&p.v, 0), TD_ERR_MISUSE, "multiply past 2^48 bytes");
    ASSERT_ERROR(td_from_dlpack_legacy(&p.legacy), TD_ERR_MISUSE, "multiply past 2^48 bytes");
    int deleted = 0;
    ASSERT_ERROR(td_from_foreign(TD_CPU, (uintptr_t)mem, 3, shape, strides, TD_F32, foreign_delete, &deleted),
                 TD_ERR_MISUSE, "multiply past 2^48 bytes");
    ASSERT_EQ_INT(p.deleted + deleted, 0);
    check_no_leaks();
}

/* data + byte_offset that is not a multiple of the element size: the kernels would load misaligned elements */
TEST(import_misaligned_byte_offset) {
    float mem[8] = {0};
    producer p;
    producer_init(&p, mem, (DLDataType){kDLFloat, 32, 1}, 1, (int64_t[]){4}, NULL, 2);
    ASSERT_ERROR(td_from_dlpack(&p.v, 0), TD_ERR_MISUSE, "byte_offset (2) is not a multiple of the element size 4");
    producer_init(&p, (char *)mem + 1, (DLDataType){kDLInt, 64, 1}, 1, (int64_t[]){2}, NULL, 8);
    ASSERT_ERROR(td_from_dlpack_legacy(&p.legacy), TD_ERR_MISUSE, "not a multiple of the element size 8");
    ASSERT_EQ_INT(p.deleted, 0);
    int deleted = 0;
    ASSERT_ERROR(td_from_foreign(TD_CPU, (uintptr_t)mem + 2, 1, (int64_t[]){3}, NULL, TD_F32, foreign_delete, &deleted),
                 TD_ERR_MISUSE, "is not a multiple of the element size 4");
    ASSERT_EQ_INT(deleted, 0);
    /* an offset that keeps the elements aligned is taken */
    mem[2] = 7;
    producer_init(&p, mem, (DLDataType){kDLFloat, 32, 1}, 1, (int64_t[]){4}, NULL, 8);
    td_tensor *t = ASSERT_TENSOR(td_from_dlpack(&p.v, 0));
    ASSERT_NEAR(td_get(t, (int64_t[]){0}), 7, 0);
    td_release(t);
    ASSERT_EQ_INT(p.deleted, 1);
    check_no_leaks();
}

/* size 0 with NULL data and hostile strides: a fresh empty tensor that every op takes (no offset is applied to a
** NULL pointer); the producer's deleter runs exactly once, at the import */
TEST(import_empty_null_data) {
    producer p;
    producer_init(&p, NULL, (DLDataType){kDLFloat, 32, 1}, 3, (int64_t[]){3, 0, 5}, (int64_t[]){-7, 1ll << 60, 3}, 6);
    td_tensor *e = ASSERT_TENSOR(td_from_dlpack(&p.v, 0));
    ASSERT_EQ_INT(p.deleted, 1);
    ASSERT_EQ_INT(td_numel(e), 0);
    ASSERT_EQ_INT(td_size(e, 2), 5);
    td_tensor *s = ASSERT_TENSOR(td_sum(e, 0, NULL, false));
    ASSERT_NEAR(td_item(s), 0, 0);
    td_tensor *tr = ASSERT_TENSOR(td_transpose(e, 0, 2));
    td_tensor *c = ASSERT_TENSOR(td_contiguous(tr));
    ASSERT_EQ_INT(td_numel(c), 0);
    td_tensor *a = ASSERT_TENSOR(td_add(e, e));
    td_release(a);
    td_release(c);
    td_release(tr);
    td_release(s);
    td_release(e);
    ASSERT_EQ_INT(p.deleted, 1);
    /* td_from_foreign: the same, its deleter run once at the import */
    int deleted = 0;
    td_tensor *f =
        ASSERT_TENSOR(td_from_foreign(TD_CPU, 0, 2, (int64_t[]){0, 4}, NULL, TD_F64, foreign_delete, &deleted));
    ASSERT_EQ_INT(deleted, 1);
    td_tensor *fs = ASSERT_TENSOR(td_sum(f, 0, NULL, false));
    ASSERT_NEAR(td_item(fs), 0, 0);
    td_release(fs);
    td_release(f);
    ASSERT_EQ_INT(deleted, 1);
    check_no_leaks();
}

/* an empty export (its data NULL) imported back, with nothing but legitimate calls: the same */
TEST(import_empty_export) {
    td_tensor *z = ASSERT_TENSOR(td_zeros(2, (int64_t[]){0, 3}, TD_F32, TD_CPU));
    DLManagedTensorVersioned *m = NULL;
    ASSERT_OK(td_to_dlpack(z, 0, NULL, &m));
    ASSERT(m->dl_tensor.data == NULL);
    td_release(z);
    td_tensor *z2 = ASSERT_TENSOR(td_from_dlpack(m, 0));
    td_tensor *zs = ASSERT_TENSOR(td_sum(z2, 0, NULL, false));
    ASSERT_NEAR(td_item(zs), 0, 0);
    td_release(zs);
    td_release(z2);
    DLManagedTensor *ml = NULL;
    td_tensor *e = ASSERT_TENSOR(td_empty(1, (int64_t[]){0}, TD_I64, TD_CPU));
    ASSERT_OK(td_to_dlpack_legacy(e, 0, NULL, &ml));
    td_release(e);
    td_tensor *e2 = ASSERT_TENSOR(td_from_dlpack_legacy(ml));
    td_tensor *r = ASSERT_TENSOR(td_reshape(e2, 2, (int64_t[]){0, 7})), *c = ASSERT_TENSOR(td_contiguous(r));
    ASSERT_EQ_INT(td_numel(c), 0);
    td_release(c);
    td_release(r);
    td_release(e2);
    check_no_leaks();
}

/* an accepted size-0 import is within td_empty's limits: its contiguous copy and every view can be made (the import
** limit and td_empty's agree: 2^48 bytes with zeros taken as 1) */
TEST(import_empty_within_empty_limits) {
    float mem[1] = {0};
    producer p;
    int64_t shape[3] = {1ll << 23, 0, 1ll << 23}; /* 2^46 floats: exactly 2^48 bytes */
    producer_init(&p, mem, (DLDataType){kDLFloat, 32, 1}, 3, shape, NULL, 0);
    td_scope_begin();
    td_tensor *t = ASSERT_TENSOR(td_from_dlpack(&p.v, 0));
    ASSERT_EQ_INT(td_numel(ASSERT_TENSOR(td_contiguous(ASSERT_TENSOR(td_transpose(t, 0, 2))))), 0);
    ASSERT_EQ_INT(td_numel(ASSERT_TENSOR(td_sum(t, 0, NULL, false))), 1);
    int deleted = 0;
    td_tensor *f =
        ASSERT_TENSOR(td_from_foreign(TD_CPU, (uintptr_t)mem, 3, shape, NULL, TD_F32, foreign_delete, &deleted));
    ASSERT_EQ_INT(td_numel(ASSERT_TENSOR(td_contiguous(ASSERT_TENSOR(td_permute(f, (int[]){2, 0, 1}))))), 0);
    td_scope_end();
    shape[0] *= 2; /* one past: refused by both, with the same rule td_empty gives */
    producer_init(&p, mem, (DLDataType){kDLFloat, 32, 1}, 3, shape, NULL, 0);
    ASSERT_ERROR(td_from_dlpack(&p.v, 0), TD_ERR_MISUSE, "multiply past 2^48 bytes");
    ASSERT_ERROR(td_from_foreign(TD_CPU, (uintptr_t)mem, 3, shape, NULL, TD_F32, NULL, NULL), TD_ERR_MISUSE,
                 "multiply past 2^48 bytes");
    ASSERT_ERROR(td_empty(3, shape, TD_F32, TD_CPU), TD_ERR_OOM, "overflows 2^48 bytes");
    ASSERT_EQ_INT(p.deleted, 0);
    ASSERT_EQ_INT(deleted, 1);
    check_no_leaks();
}

/* Vulkan memory has no address PyTorch can use: refused, or copied to the host on request. */
TEST(vulkan_export) {
    if (!td_device_available(TD_VULKAN(0)))
        TEST_SKIP("no Vulkan device: %s", td_backend_unavailable_reason(TD_DEVICE_VULKAN));
    td_tensor *t = ASSERT_TENSOR(td_arange(0, 5, 1, TD_F32, TD_VULKAN(0)));
    DLManagedTensorVersioned *m = NULL;
    ASSERT_ERROR(td_to_dlpack(t, 0, NULL, &m), TD_ERR_UNSUPPORTED, "vulkan:0 memory has no address");
    ASSERT_OK(td_to_dlpack(t, TD_DLPACK_COPY, NULL, &m));
    ASSERT_EQ_INT(m->dl_tensor.device.device_type, kDLCPU);
    ASSERT_EQ_INT(m->flags, DLPACK_FLAG_BITMASK_IS_COPIED);
    ASSERT_NEAR(((float *)m->dl_tensor.data)[4], 4, 0);
    m->deleter(m);
    td_release(t);
    check_no_leaks();
}

/* CUDA: an export ordered on the legacy default stream ((void *)1), imported
** back; the memory is the same and the deleter runs after the queued work. */
TEST(cuda_round_trip) {
    if (!td_device_available(TD_CUDA(0)))
        TEST_SKIP("no CUDA device: %s", td_backend_unavailable_reason(TD_DEVICE_CUDA));
    td_tensor *t = ASSERT_TENSOR(td_arange(0, 1 << 20, 1, TD_F32, TD_CUDA(0)));
    DLManagedTensorVersioned *m = NULL;
    int64_t waits = td_host_sync_count();
    ASSERT_OK(td_to_dlpack(t, 0, (void *)1, &m));
    ASSERT_EQ_INT(td_host_sync_count(), waits); /* the stream waits, not the host */
    ASSERT_EQ_INT(m->dl_tensor.device.device_type, kDLCUDA);
    ASSERT_EQ_INT(m->dl_tensor.device.device_id, 0);
    ASSERT((uint64_t)(uintptr_t)m->dl_tensor.data == td_tensor_device_address(t));
    td_tensor *u = ASSERT_TENSOR(td_from_dlpack(m, 0));
    td_release(t);
    td_scope_begin();
    ASSERT_NEAR(td_item(td_sum(td_cast(u, TD_F64), 0, NULL, false)), (double)(1 << 20) * ((1 << 20) - 1) / 2, 0);
    td_scope_end();
    td_release(u);
    ASSERT_OK(td_synchronize(TD_CUDA(0)));
    td_release(td_zeros(1, (int64_t[]){1}, TD_F32, TD_CUDA(0))); /* runs the deferred deleter: the export's view */
    check_no_leaks();
}

TEST_MAIN(TESTS)
