/* safetensors read/write, its reference rules, checkpoints, and PyTorch interop. */
#include <dirent.h>
#include <inttypes.h>
#include <sys/stat.h>
#include <time.h>

#include "test_util.h"
#include "trident/io.h"

/* clang-format off */
#define TESTS(X)                                                                                               \
    X(roundtrip_all_dtypes) X(reference_bytes) X(writer_order_and_alignment) X(noncontiguous_and_empty)         \
    X(atomic_replace) X(save_unwritable_dir) X(bad_truncated) X(bad_too_short) X(bad_header_too_large)         \
    X(bad_header_past_end) X(bad_not_brace) X(bad_invalid_json) X(bad_overlap) X(bad_gap) X(bad_total_size)    \
    X(bad_dtype) X(bad_shape_size) X(bad_overflow) X(bad_missing_file) X(bad_duplicate) X(bad_metadata_value)  \
    X(bad_offsets_form) X(unsupported_dtype) X(named_list_misuse) X(named_list_edit) X(checkpoint_roundtrip)                      \
    X(checkpoint_wrong_model) X(checkpoint_tensor_mismatch) X(checkpoint_bad_metadata) X(pytorch_interop)
/* clang-format on */

/* A file with the given JSON header (padded to a multiple of 8 unless raw)
** followed by ndata bytes of data (values 1, 2, ...). */
static const char *make_file(const char *name, const char *json, size_t ndata) {
    size_t hl = strlen(json), pad = (8 - hl % 8) % 8, n = 8 + hl + pad + ndata;
    unsigned char *b = malloc(n);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)(hl + pad) >> (8 * i));
    memcpy(b + 8, json, hl);
    memset(b + 8 + hl, ' ', pad);
    for (size_t i = 0; i < ndata; i++) b[8 + hl + pad + i] = (unsigned char)(i + 1);
    const char *p = test_tmp_path(name);
    test_write_file(p, b, n);
    free(b);
    return p;
}

static td_status load(const char *path) {
    td_named_tensors *l = NULL;
    td_status st = td_safetensors_load(path, TD_CPU, &l);
    if (st != TD_OK) ASSERT(l == NULL);
    td_named_tensors_free(l);
    return st;
}

/* A tensor of dtype dt with values uniform in [-50, 150) drawn from
** Philox(seed, counter ...) on the host (then converted to dt). */
static td_tensor *rand_tensor(int ndim, const int64_t *shape, td_dtype dt, uint64_t seed, uint64_t counter) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) {
        uint32_t w[4];
        td_philox4x32(seed, counter + (uint64_t)i, w);
        v[i] = td_philox_uniform(w[0]) * 200.0 - 50.0;
    }
    td_tensor *t = td_cast(td_from_data(v, ndim, shape, TD_F64, TD_CPU), dt);
    free(v);
    return t;
}

/* The tensors tests/interop_safetensors.py's expected() builds. */
static td_named_tensors *interop_tensors(void) {
    td_named_tensors *l = td_named_tensors_new();
    td_scope_begin(); /* the list retains each tensor */
    float w[12];
    for (int i = 0; i < 12; i++) w[i] = (float)i * 0.25f - 1;
    double bias[4] = {1.5, -2.25, 3.125, 1e-3};
    float half[5] = {0, 0.5f, 1, 1.5f, 2}, bf[4] = {1, -2, 0.5f, 4}, sc = 3.5f;
    int64_t idx[3] = {-1, 0, (int64_t)1 << 40};
    int32_t i32[2] = {7, -9};
    uint8_t u8[4] = {0, 1, 128, 255}, mask[3] = {1, 0, 1};
    int64_t s34[2] = {3, 4}, s4 = 4, s5 = 5, s22[2] = {2, 2}, s3 = 3, s2 = 2;
    ASSERT_OK(td_named_tensors_add(l, "weight", ASSERT_TENSOR(td_from_data(w, 2, s34, TD_F32, TD_CPU))));
    ASSERT_OK(td_named_tensors_add(l, "bias", ASSERT_TENSOR(td_from_data(bias, 1, &s4, TD_F64, TD_CPU))));
    ASSERT_OK(
        td_named_tensors_add(l, "half", ASSERT_TENSOR(td_cast(td_from_data(half, 1, &s5, TD_F32, TD_CPU), TD_F16))));
    ASSERT_OK(td_named_tensors_add(l, "bf", ASSERT_TENSOR(td_cast(td_from_data(bf, 2, s22, TD_F32, TD_CPU), TD_BF16))));
    ASSERT_OK(td_named_tensors_add(l, "idx", ASSERT_TENSOR(td_from_data(idx, 1, &s3, TD_I64, TD_CPU))));
    ASSERT_OK(td_named_tensors_add(l, "i32", ASSERT_TENSOR(td_from_data(i32, 1, &s2, TD_I32, TD_CPU))));
    ASSERT_OK(td_named_tensors_add(l, "u8", ASSERT_TENSOR(td_from_data(u8, 1, &s4, TD_U8, TD_CPU))));
    ASSERT_OK(td_named_tensors_add(l, "mask", ASSERT_TENSOR(td_from_data(mask, 1, &s3, TD_BOOL, TD_CPU))));
    ASSERT_OK(td_named_tensors_add(l, "scalar", ASSERT_TENSOR(td_from_data(&sc, 0, NULL, TD_F32, TD_CPU))));
    td_scope_end();
    return l;
}

/* a and b hold the same names, shapes, dtypes and bytes. */
static void assert_same_lists(const td_named_tensors *a, const td_named_tensors *b) {
    ASSERT_EQ_INT(td_named_tensors_len(a), td_named_tensors_len(b));
    for (int64_t i = 0; i < td_named_tensors_len(a); i++) {
        const char *n = td_named_tensors_name(a, i);
        td_tensor *x = td_named_tensors_at(a, i), *y = td_named_tensors_get(b, n);
        if (!y) TEST_FAIL_("tensor '%s' is missing", n);
        ASSERT_EQ_INT(td_tensor_dtype(x), td_tensor_dtype(y));
        ASSERT_EQ_INT(td_ndim(x), td_ndim(y));
        for (int d = 0; d < td_ndim(x); d++) ASSERT_EQ_INT(td_size(x, d), td_size(y, d));
        size_t nb = (size_t)td_numel(x) * td_dtype_size(td_tensor_dtype(x));
        unsigned char *bx = malloc(nb + 1), *by = malloc(nb + 1);
        ASSERT_OK(td_copy_to_host(x, bx, nb, td_tensor_dtype(x)));
        ASSERT_OK(td_copy_to_host(y, by, nb, td_tensor_dtype(y)));
        if (memcmp(bx, by, nb)) TEST_FAIL_("tensor '%s' differs", n);
        free(bx);
        free(by);
    }
}

TEST(roundtrip_all_dtypes) {
    td_scope_begin();
    uint64_t seed = (uint64_t)time(NULL);
    printf("seed %" PRIu64 "\n", seed);
    td_named_tensors *l = interop_tensors();
    int64_t shape[3] = {2, 3, 5};
    for (int dt = 0; dt < TD_DTYPE_COUNT; dt++) { /* random values of every dtype */
        char name[32];
        snprintf(name, sizeof name, "rand.%s", td_dtype_name((td_dtype)dt));
        td_tensor *r = ASSERT_TENSOR(rand_tensor(3, shape, (td_dtype)dt, seed, (uint64_t)dt * 100));
        ASSERT_OK(td_named_tensors_add(l, name, r));
    }
    ASSERT_OK(td_named_tensors_set_meta(l, "producer", "trident"));
    ASSERT_OK(td_named_tensors_set_meta(l, "note", "quote \" and unicode \xc3\xa9"));
    const char *p = test_tmp_path("rt.safetensors");
    ASSERT_OK(td_safetensors_save(p, l));
    td_named_tensors *back = NULL;
    ASSERT_OK(td_safetensors_load(p, TD_CPU, &back));
    assert_same_lists(l, back);
    ASSERT(!strcmp(td_named_tensors_meta(back, "note"), "quote \" and unicode \xc3\xa9"));
    ASSERT_EQ_INT(td_named_tensors_meta_len(back), 2);
    td_named_tensors_free(l);
    td_named_tensors_free(back);
    td_scope_end();
}

TEST(reference_bytes) {
    td_scope_begin();
    /* The reference crate's own test vectors (safetensors/src/tensor.rs,
    ** test_serialization and test_empty). */
    float v[6] = {0, 1, 2, 3, 4, 5};
    int64_t shape[3] = {1, 2, 3};
    td_named_tensors *l = td_named_tensors_new();
    ASSERT_OK(td_named_tensors_add(l, "attn.0", ASSERT_TENSOR(td_from_data(v, 3, shape, TD_F32, TD_CPU))));
    const char *p = test_tmp_path("ref.safetensors");
    ASSERT_OK(td_safetensors_save(p, l));
    static const unsigned char want[] = {
        64,  0,  0,   0,  0,   0,  0,   0,   123, 34,  97,  116, 116, 110, 46,  48, 34, 58, 123, 34, 100, 116, 121, 112,
        101, 34, 58,  34, 70,  51, 50,  34,  44,  34,  115, 104, 97,  112, 101, 34, 58, 91, 49,  44, 50,  44,  51,  93,
        44,  34, 100, 97, 116, 97, 95,  111, 102, 102, 115, 101, 116, 115, 34,  58, 91, 48, 44,  50, 52,  93,  125, 125,
        0,   0,  0,   0,  0,   0,  128, 63,  0,   0,   0,   64,  0,   0,   64,  64, 0,  0,  128, 64, 0,   0,   160, 64};
    size_t n;
    unsigned char *got = test_read_file(p, &n);
    ASSERT_EQ_INT(n, sizeof want);
    ASSERT(!memcmp(got, want, n));
    free(got);
    td_named_tensors_free(l);

    td_named_tensors *e = td_named_tensors_new();
    ASSERT_OK(td_named_tensors_set_meta(e, "framework", "pt"));
    ASSERT_OK(td_safetensors_save(p, e));
    static const unsigned char want_empty[] = {
        40,  0,  0,   0,   0,  0,   0,   0,   123, 34,  95,  95, 109, 101, 116, 97,  100, 97,  116, 97, 95, 95, 34, 58,
        123, 34, 102, 114, 97, 109, 101, 119, 111, 114, 107, 34, 58,  34,  112, 116, 34,  125, 125, 32, 32, 32, 32, 32};
    got = test_read_file(p, &n);
    ASSERT_EQ_INT(n, sizeof want_empty);
    ASSERT(!memcmp(got, want_empty, n));
    free(got);
    td_named_tensors_free(e);
    td_scope_end();
}

TEST(writer_order_and_alignment) {
    td_scope_begin();
    /* sorted by descending dtype alignment, then name: d (I64), a, b (F32), c (U8) */
    td_named_tensors *l = td_named_tensors_new();
    int64_t three = 3;
    const char *names[4] = {"b", "a", "c", "d"};
    td_dtype dts[4] = {TD_F32, TD_F32, TD_U8, TD_I64};
    for (int i = 0; i < 4; i++)
        ASSERT_OK(td_named_tensors_add(l, names[i], ASSERT_TENSOR(td_full(1, &three, i + 1, dts[i], TD_CPU))));
    const char *p = test_tmp_path("order.safetensors");
    ASSERT_OK(td_safetensors_save(p, l));
    size_t n;
    unsigned char *b = test_read_file(p, &n);
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)b[i] << (8 * i);
    ASSERT_EQ_INT(hl % 8, 0);
    ASSERT_EQ_INT(n, 8 + hl + 24 + 12 + 12 + 3);
    b[8 + hl] = 0;
    const char *h = (const char *)b + 8;
    const char *pd = strstr(h, "\"d\":"), *pa = strstr(h, "\"a\":"), *pb = strstr(h, "\"b\":"),
               *pc = strstr(h, "\"c\":");
    ASSERT(pd && pa && pb && pc && pd < pa && pa < pb && pb < pc);
    ASSERT(strstr(h, "\"d\":{\"dtype\":\"I64\",\"shape\":[3],\"data_offsets\":[0,24]}"));
    ASSERT(strstr(h, "\"c\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[48,51]}"));
    free(b);
    td_named_tensors *back = NULL;
    ASSERT_OK(td_safetensors_load(p, TD_CPU, &back));
    ASSERT(!strcmp(td_named_tensors_name(back, 0), "d")); /* loaded in offset order */
    ASSERT(!strcmp(td_named_tensors_name(back, 3), "c"));
    assert_same_lists(l, back);
    td_named_tensors_free(back);
    td_named_tensors_free(l);
    td_scope_end();
}

TEST(noncontiguous_and_empty) {
    td_scope_begin();
    td_tensor *a = ASSERT_TENSOR(td_arange(0, 12, 1, TD_F32, TD_CPU));
    td_tensor *t = ASSERT_TENSOR(td_transpose(td_view(a, 2, (int64_t[]){3, 4}), 0, 1)); /* [4,3], strided */
    td_tensor *e = ASSERT_TENSOR(td_empty(2, (int64_t[]){0, 7}, TD_F64, TD_CPU));
    td_named_tensors *l = td_named_tensors_new();
    ASSERT_OK(td_named_tensors_add(l, "t", t));
    ASSERT_OK(td_named_tensors_add(l, "empty", e));
    const char *p = test_tmp_path("nc.safetensors");
    ASSERT_OK(td_safetensors_save(p, l));
    td_named_tensors *back = NULL;
    ASSERT_OK(td_safetensors_load(p, TD_CPU, &back));
    td_tensor *bt = td_named_tensors_get(back, "t");
    ASSERT_NEAR(td_get(bt, (int64_t[]){1, 2}), 9, 0); /* t[1,2] = a[2*4+1] */
    ASSERT_EQ_INT(td_numel(td_named_tensors_get(back, "empty")), 0);
    ASSERT_EQ_INT(td_size(td_named_tensors_get(back, "empty"), 1), 7);
    td_named_tensors_free(back);
    td_named_tensors_free(l);
    td_scope_end();
}

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

TEST(atomic_replace) {
    td_scope_begin();
    const char *p = test_tmp_path("a.safetensors");
    test_write_file(p, "old", 3);
    td_named_tensors *l = interop_tensors();
    ASSERT_OK(td_safetensors_save(p, l));
    ASSERT_OK(load(p));
    ASSERT_EQ_INT(count_entries(test_tmp_dir()), 1); /* no temporary file left behind */
    struct stat sb;
    ASSERT(stat(p, &sb) == 0 && (sb.st_mode & 0777) == 0644);
    td_named_tensors_free(l);
    td_scope_end();
}

TEST(save_unwritable_dir) {
    td_scope_begin();
    td_named_tensors *l = interop_tensors();
    ASSERT_ERROR(td_safetensors_save("/nonexistent_dir_td/x.safetensors", l), TD_ERR_IO, "nonexistent_dir_td");
    td_named_tensors_free(l);
    td_scope_end();
}

/* One valid F32 tensor [2] at [0,8]. */
#define ONE_F32 "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}"

TEST(bad_truncated) {
    td_scope_begin();
    td_named_tensors *l = interop_tensors();
    const char *p = test_tmp_path("trunc.safetensors");
    ASSERT_OK(td_safetensors_save(p, l));
    size_t n;
    unsigned char *b = test_read_file(p, &n);
    test_write_file(p, b, n - 3);
    ASSERT_ERROR(load(p), TD_ERR_FORMAT, "but its header describes");
    test_write_file(p, b, 20); /* cut inside the header */
    ASSERT_ERROR(load(p), TD_ERR_FORMAT, "runs past the end");
    free(b);
    td_named_tensors_free(l);
    td_scope_end();
}

TEST(bad_too_short) {
    const char *p = test_tmp_path("short.safetensors");
    test_write_file(p, "\x08\x00\x00", 3);
    ASSERT_ERROR(load(p), TD_ERR_FORMAT, "too short");
}

TEST(bad_header_too_large) {
    const char *p = test_tmp_path("big.safetensors");
    unsigned char b[16] = {0x01, 0xE1, 0xF5, 0x05, 0, 0, 0, 0, '{', '}'}; /* 100,000,001 */
    test_write_file(p, b, sizeof b);
    ASSERT_ERROR(load(p), TD_ERR_FORMAT, "exceeds the 100000000-byte limit");
}

TEST(bad_header_past_end) {
    const char *p = test_tmp_path("past.safetensors");
    unsigned char b[16] = {200, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '};
    test_write_file(p, b, sizeof b);
    ASSERT_ERROR(load(p), TD_ERR_FORMAT, "runs past the end");
}

TEST(bad_not_brace) {
    ASSERT_ERROR(load(make_file("nb.safetensors", " " ONE_F32, 8)), TD_ERR_FORMAT, "does not start with '{'");
    ASSERT_ERROR(load(make_file("arr.safetensors", "[1,2]", 0)), TD_ERR_FORMAT, "does not start with '{'");
}

TEST(bad_invalid_json) {
    ASSERT_ERROR(load(make_file("json.safetensors", "{\"a\":{\"dtype\":\"F32\",", 8)), TD_ERR_FORMAT, "invalid JSON");
    ASSERT_ERROR(load(make_file("utf8.safetensors", "{\"\xff\xfe\":{}}", 0)), TD_ERR_FORMAT, "invalid JSON");
}

TEST(bad_overlap) {
    const char *j = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                    "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}";
    ASSERT_ERROR(load(make_file("ov.safetensors", j, 12)), TD_ERR_FORMAT, "overlaps the previous tensor");
}

TEST(bad_gap) {
    const char *j = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                    "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}";
    ASSERT_ERROR(load(make_file("gap.safetensors", j, 20)), TD_ERR_FORMAT, "a gap before it");
    const char *k = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}";
    ASSERT_ERROR(load(make_file("gap0.safetensors", k, 12)), TD_ERR_FORMAT, "expected 0");
}

TEST(bad_total_size) {
    ASSERT_ERROR(load(make_file("extra.safetensors", ONE_F32, 9)), TD_ERR_FORMAT, "header describes");
    ASSERT_ERROR(load(make_file("less.safetensors", ONE_F32, 7)), TD_ERR_FORMAT, "header describes");
    ASSERT_OK(load(make_file("exact.safetensors", ONE_F32, 8)));
}

/* a corrupt file of the TEST `test`: written as `name` with header `json` and `ndata` data bytes, loading fails
** with `st` and `msg` */
typedef struct bad_file {
    const char *test, *name, *json;
    size_t ndata;
    td_status st;
    const char *msg;
} bad_file;

#define F32_A(SHAPE, OFFSETS) "{\"a\":{\"dtype\":\"F32\",\"shape\":" SHAPE ",\"data_offsets\":" OFFSETS "}}"

static const bad_file bad_files[] = {
    {"dtype", "dt.safetensors", "{\"a\":{\"dtype\":\"F31\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, TD_ERR_FORMAT,
     "unknown dtype 'F31'"},
    {"dtype", "nodt.safetensors", "{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, TD_ERR_FORMAT, "no dtype"},
    {"shape_size", "ss.safetensors", F32_A("[3]", "[0,8]"), 8, TD_ERR_FORMAT, "needs 12"},
    {"shape_size", "neg.safetensors", F32_A("[2,-1]", "[0,8]"), 8, TD_ERR_FORMAT, "non-negative"},
    {"shape_size", "dims.safetensors", F32_A("[1,1,1,1,1,1,1,1,2]", "[0,8]"), 8, TD_ERR_FORMAT, "more than 8"},
    /* 2^62 * 2^3 elements of 4 bytes: overflows 64 bits */
    {"overflow", "of.safetensors", F32_A("[4611686018427387904,8]", "[0,8]"), 8, TD_ERR_FORMAT, "overflows"},
    {"overflow", "of2.safetensors", F32_A("[2]", "[0,99999999999999999999]"), 8, TD_ERR_FORMAT, "invalid JSON"},
    /* size 0, but its strides would span 2^40 * 2^40 elements (fuzz finding: signed overflow) */
    {"overflow", "of0.safetensors", F32_A("[0,1099511627776,1099511627776]", "[0,0]"), 0, TD_ERR_OOM,
     "overflows 2^48 bytes"},
};

/* the bad_files of TEST bad_<test> (at least one) */
static void expect_bad(const char *test) {
    int n = 0;
    for (size_t i = 0; i < sizeof bad_files / sizeof *bad_files; i++) {
        const bad_file *f = &bad_files[i];
        if (strcmp(f->test, test)) continue;
        ASSERT_ERROR(load(make_file(f->name, f->json, f->ndata)), f->st, f->msg);
        n++;
    }
    ASSERT(n > 0);
}

TEST(bad_dtype) { expect_bad("dtype"); }
TEST(bad_shape_size) { expect_bad("shape_size"); }
TEST(bad_overflow) { expect_bad("overflow"); }

TEST(bad_missing_file) {
    ASSERT_ERROR(load("/nonexistent_td/none.safetensors"), TD_ERR_IO, "No such file");
    ASSERT_ERROR(td_safetensors_load(NULL, TD_CPU, &(td_named_tensors *){0}), TD_ERR_MISUSE, "path is NULL");
}

TEST(bad_duplicate) {
    const char *j = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                    "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}";
    ASSERT_ERROR(load(make_file("dup.safetensors", j, 8)), TD_ERR_FORMAT, "duplicate");
}

TEST(bad_metadata_value) {
    const char *j = "{\"__metadata__\":{\"step\":3},\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    ASSERT_ERROR(load(make_file("meta.safetensors", j, 8)), TD_ERR_FORMAT, "value of 'step' is not a string");
    ASSERT_ERROR(load(make_file("meta2.safetensors", "{\"__metadata__\":[]}", 0)), TD_ERR_FORMAT, "not an object");
}

TEST(bad_offsets_form) {
    const char *j = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}";
    ASSERT_ERROR(load(make_file("of1.safetensors", j, 8)), TD_ERR_FORMAT, "data_offsets");
    const char *k = "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
                    "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}";
    ASSERT_ERROR(load(make_file("rev.safetensors", k, 8)), TD_ERR_FORMAT, "gap");
    ASSERT_ERROR(load(make_file("ent.safetensors", "{\"a\":5}", 0)), TD_ERR_FORMAT, "not an object");
}

TEST(unsupported_dtype) {
    const char *j = "{\"a\":{\"dtype\":\"I8\",\"shape\":[8],\"data_offsets\":[0,8]}}";
    ASSERT_ERROR(load(make_file("i8.safetensors", j, 8)), TD_ERR_UNSUPPORTED, "dtype I8");
}

TEST(named_list_misuse) {
    td_named_tensors *l = td_named_tensors_new();
    td_tensor *t = ASSERT_TENSOR(td_zeros(1, (int64_t[]){2}, TD_F32, TD_CPU));
    ASSERT_OK(td_named_tensors_add(l, "x", t));
    ASSERT_ERROR(td_named_tensors_add(l, "x", t), TD_ERR_MISUSE, "duplicate name 'x'");
    ASSERT_ERROR(td_named_tensors_add(l, "", t), TD_ERR_MISUSE, "empty");
    ASSERT_ERROR(td_named_tensors_add(l, "y", NULL), TD_ERR_MISUSE, "NULL");
    ASSERT_ERROR(td_named_tensors_at(l, 5), TD_ERR_INDEX, "out of range");
    td_clear_error();
    ASSERT(td_named_tensors_get(l, "nope") == NULL);
    ASSERT_EQ_INT(td_last_status(), TD_OK);
    ASSERT_OK(td_named_tensors_set_meta(l, "k", "1"));
    ASSERT_OK(td_named_tensors_set_meta(l, "k", "2"));
    ASSERT(!strcmp(td_named_tensors_meta(l, "k"), "2"));
    ASSERT_EQ_INT(td_named_tensors_meta_len(l), 1);
    td_release(t);
    int64_t live = td_debug_live_tensors();
    td_named_tensors_free(l); /* drops the list's reference: t is freed */
    ASSERT_EQ_INT(td_debug_live_tensors(), live - 1);
}

/* A small "model" state and optimizer state. */
static void make_state(td_named_tensors **model, td_named_tensors **optim) {
    *model = td_named_tensors_new();
    *optim = td_named_tensors_new();
    ASSERT_OK(td_named_tensors_add(*model, "fc1.weight", rand_tensor(2, (int64_t[]){4, 3}, TD_F32, 7, 0)));
    ASSERT_OK(td_named_tensors_add(*model, "fc1.bias", rand_tensor(1, (int64_t[]){4}, TD_F32, 7, 100)));
    ASSERT_OK(td_named_tensors_add(*optim, "fc1.weight.exp_avg", rand_tensor(2, (int64_t[]){4, 3}, TD_F32, 8, 0)));
    ASSERT_OK(td_named_tensors_add(*optim, "step", td_scalar(12, TD_I64, TD_CPU)));
    ASSERT_OK(td_named_tensors_set_meta(*optim, "lr", "0.001"));
}

static bool is_weight(const char *name, td_tensor *t, void *ctx) {
    (void)t, (void)ctx;
    return strstr(name, "weight") != NULL;
}

/* "a.weight" -> "A.weight": the first letter upper-cased; "drop" is dropped */
static const char *upper_first(const char *name, void *ctx, char *buf, size_t size) {
    (void)ctx;
    if (!strcmp(name, "drop")) return NULL;
    snprintf(buf, size, "%c%s", name[0] - 'a' + 'A', name + 1);
    return buf;
}

static const char *to_one_name(const char *name, void *ctx, char *buf, size_t size) {
    (void)name, (void)buf, (void)size;
    return ctx;
}

TEST(named_list_edit) {
    td_named_tensors *l = td_named_tensors_new();
    td_tensor *t[4];
    static const char *names[4] = {"a.weight", "a.bias", "b.weight", "drop"};
    for (int i = 0; i < 4; i++) {
        t[i] = ASSERT_TENSOR(td_scalar(i, TD_F32, TD_CPU));
        ASSERT_OK(td_named_tensors_add(l, names[i], t[i]));
    }
    ASSERT_OK(td_named_tensors_set_meta(l, "format", "pt"));
    /* filter: the weights, in order, sharing the tensors, with the metadata */
    td_named_tensors *w = td_named_tensors_filter(l, is_weight, NULL);
    ASSERT(w && td_named_tensors_len(w) == 2);
    ASSERT(!strcmp(td_named_tensors_name(w, 1), "b.weight") && td_named_tensors_at(w, 1) == t[2]);
    ASSERT(!strcmp(td_named_tensors_meta(w, "format"), "pt"));
    td_named_tensors_free(w);
    /* map_names: renamed through buf, one dropped; two names onto one is an error */
    td_named_tensors *u = td_named_tensors_map_names(l, upper_first, NULL);
    ASSERT(u && td_named_tensors_len(u) == 3);
    ASSERT(td_named_tensors_get(u, "A.bias") == t[1] && !td_named_tensors_get(u, "drop"));
    td_named_tensors_free(u);
    ASSERT_ERROR(td_named_tensors_map_names(l, to_one_name, "x"), TD_ERR_MISUSE, "'a.bias' maps to 'x'");
    ASSERT_ERROR(td_named_tensors_filter(l, NULL, NULL), TD_ERR_MISUSE, "NULL");
    /* rename and remove, in place */
    ASSERT_OK(td_named_tensors_rename(l, "a.bias", "a.b"));
    ASSERT(td_named_tensors_get(l, "a.b") == t[1] && !td_named_tensors_get(l, "a.bias"));
    ASSERT_EQ_INT(td_named_tensors_len(l), 4);
    ASSERT_ERROR(td_named_tensors_rename(l, "a.b", "b.weight"), TD_ERR_MISUSE, "taken");
    ASSERT_ERROR(td_named_tensors_rename(l, "nope", "x"), TD_ERR_MISUSE, "no entry 'nope'");
    ASSERT_OK(td_named_tensors_remove(l, "a.weight"));
    ASSERT_EQ_INT(td_named_tensors_len(l), 3);
    ASSERT(!strcmp(td_named_tensors_name(l, 0), "a.b") && !strcmp(td_named_tensors_name(l, 2), "drop"));
    ASSERT_ERROR(td_named_tensors_remove(l, "a.weight"), TD_ERR_MISUSE, "no entry 'a.weight'");
    td_named_tensors_free(l);
    for (int i = 0; i < 4; i++) td_release(t[i]);
    ASSERT_EQ_INT(td_debug_live_tensors(), 0);
}

TEST(checkpoint_roundtrip) {
    td_scope_begin();
    td_train_state ck = {.model_name = "mlp", .step = 1234, .epoch = 3, .rng = {0xFFFFFFFFFFFFFFFFull, 987654321}};
    make_state(&ck.model, &ck.optim);
    const char *p = test_tmp_path("ck.safetensors");
    ASSERT_OK(td_train_state_save(p, &ck));
    td_train_state back;
    ASSERT_OK(td_train_state_load(p, TD_CPU, "mlp", ck.model, &back));
    ASSERT(!strcmp(back.model_name, "mlp"));
    ASSERT_EQ_INT(back.step, 1234);
    ASSERT_EQ_INT(back.epoch, 3);
    ASSERT(back.rng.seed == 0xFFFFFFFFFFFFFFFFull && back.rng.offset == 987654321);
    assert_same_lists(ck.model, back.model);
    assert_same_lists(ck.optim, back.optim);
    ASSERT(!strcmp(td_named_tensors_meta(back.optim, "lr"), "0.001"));
    /* the raw file uses the documented prefixes and metadata */
    td_named_tensors *raw = NULL;
    ASSERT_OK(td_safetensors_load(p, TD_CPU, &raw));
    ASSERT(td_named_tensors_get(raw, "model.fc1.weight") && td_named_tensors_get(raw, "optim.step"));
    ASSERT(!strcmp(td_named_tensors_meta(raw, "rng_seed"), "18446744073709551615"));
    ASSERT(!strcmp(td_named_tensors_meta(raw, "step"), "1234"));
    td_named_tensors_free(raw);
    td_train_state_clear(&back);
    td_train_state_clear(&ck);
    td_scope_end();
    ASSERT_EQ_INT(td_debug_live_tensors(), 0);
}

TEST(checkpoint_wrong_model) {
    td_scope_begin();
    td_train_state ck = {.model_name = "cnn", .step = 1};
    td_named_tensors *optim;
    make_state(&ck.model, &optim);
    const char *p = test_tmp_path("ck2.safetensors");
    ASSERT_OK(td_train_state_save(p, &ck));
    td_train_state back;
    ASSERT_ERROR(td_train_state_load(p, TD_CPU, "mlp", NULL, &back), TD_ERR_FORMAT,
                 "model 'mlp' expected, checkpoint holds 'cnn'");
    ASSERT(back.model == NULL && back.optim == NULL);
    ASSERT_OK(td_train_state_load(p, TD_CPU, NULL, NULL, &back)); /* no expectation: accepted */
    ASSERT_EQ_INT(td_named_tensors_len(back.optim), 0);
    td_train_state_clear(&back);
    ASSERT_ERROR(td_train_state_save(p, &(td_train_state){.model = ck.model}), TD_ERR_MISUSE, "model name");
    td_train_state_clear(&ck);
    td_named_tensors_free(optim);
    td_scope_end();
}

TEST(checkpoint_tensor_mismatch) {
    td_scope_begin();
    td_train_state ck = {.model_name = "mlp"};
    td_named_tensors *optim;
    make_state(&ck.model, &optim);
    const char *p = test_tmp_path("ck3.safetensors");
    ASSERT_OK(td_train_state_save(p, &ck));
    td_train_state back;
    td_named_tensors *exp = td_named_tensors_new(); /* a model with another layer */
    ASSERT_OK(td_named_tensors_add(exp, "fc1.weight", td_named_tensors_get(ck.model, "fc1.weight")));
    ASSERT_OK(td_named_tensors_add(exp, "fc1.bias", td_named_tensors_get(ck.model, "fc1.bias")));
    ASSERT_OK(td_named_tensors_add(exp, "fc2.weight", td_named_tensors_get(ck.model, "fc1.bias")));
    ASSERT_ERROR(td_train_state_load(p, TD_CPU, "mlp", exp, &back), TD_ERR_FORMAT, "lacks model.fc2.weight");
    td_named_tensors_free(exp);
    exp = td_named_tensors_new(); /* a smaller model */
    ASSERT_OK(td_named_tensors_add(exp, "fc1.weight", td_named_tensors_get(ck.model, "fc1.weight")));
    ASSERT_ERROR(td_train_state_load(p, TD_CPU, "mlp", exp, &back), TD_ERR_FORMAT,
                 "unexpected tensor 'model.fc1.bias'");
    td_named_tensors_free(exp);
    exp = td_named_tensors_new(); /* same names, other shapes / dtypes */
    ASSERT_OK(td_named_tensors_add(exp, "fc1.weight", td_zeros(2, (int64_t[]){4, 5}, TD_F32, TD_CPU)));
    ASSERT_OK(td_named_tensors_add(exp, "fc1.bias", td_zeros(1, (int64_t[]){4}, TD_F64, TD_CPU)));
    ASSERT_ERROR(td_train_state_load(p, TD_CPU, "mlp", exp, &back), TD_ERR_FORMAT, "has shape [4,3], expected [4,5]");
    td_named_tensors_free(exp);
    exp = td_named_tensors_new();
    ASSERT_OK(td_named_tensors_add(exp, "fc1.weight", td_zeros(2, (int64_t[]){4, 3}, TD_F32, TD_CPU)));
    ASSERT_OK(td_named_tensors_add(exp, "fc1.bias", td_zeros(1, (int64_t[]){4}, TD_F64, TD_CPU)));
    ASSERT_ERROR(td_train_state_load(p, TD_CPU, "mlp", exp, &back), TD_ERR_DTYPE, "dtype float32, expected float64");
    td_named_tensors_free(exp);
    td_train_state_clear(&ck);
    td_named_tensors_free(optim);
    td_scope_end();
}

TEST(checkpoint_bad_metadata) {
    td_train_state back;
    /* a plain safetensors file is not a checkpoint */
    ASSERT_ERROR(td_train_state_load(make_file("plain.safetensors", ONE_F32, 8), TD_CPU, NULL, NULL, &back),
                 TD_ERR_FORMAT, "format is missing");
    const char *j = "{\"__metadata__\":{\"format\":\"trident-checkpoint-1\",\"model\":\"mlp\",\"step\":\"12x\","
                    "\"epoch\":\"1\",\"rng_seed\":\"1\",\"rng_offset\":\"0\"}}";
    ASSERT_ERROR(td_train_state_load(make_file("badstep.safetensors", j, 0), TD_CPU, NULL, NULL, &back), TD_ERR_FORMAT,
                 "'step' = '12x' is not a decimal integer");
    const char *k = "{\"__metadata__\":{\"format\":\"trident-checkpoint-1\",\"model\":\"mlp\",\"step\":\"1\","
                    "\"epoch\":\"1\",\"rng_seed\":\"1\"}}";
    ASSERT_ERROR(td_train_state_load(make_file("norng.safetensors", k, 0), TD_CPU, NULL, NULL, &back), TD_ERR_FORMAT,
                 "lacks metadata 'rng_offset'");
    ASSERT_ERROR(td_train_state_load("/nonexistent_td/ck", TD_CPU, NULL, NULL, &back), TD_ERR_IO, "cannot open");
}

/* Path of tests/interop_safetensors.py, beside this source file. */
static const char *script_path(void) {
    static char p[1024];
    const char *env = getenv("TD_TEST_SOURCE_DIR");
    if (env)
        snprintf(p, sizeof p, "%s/interop_safetensors.py", env);
    else {
        snprintf(p, sizeof p, "%s", __FILE__);
        char *slash = strrchr(p, '/');
        snprintf(slash ? slash + 1 : p, sizeof p - (size_t)(slash ? slash + 1 - p : 0), "interop_safetensors.py");
    }
    return p;
}

static int run_script(const char *mode, const char *file) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' %s '%s'", script_path(), mode, file);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(pytorch_interop) {
    if (access("/usr/bin/python3", X_OK) != 0) TEST_SKIP("/usr/bin/python3 is missing");
    if (access(script_path(), R_OK) != 0) TEST_SKIP("cannot find %s (set TD_TEST_SOURCE_DIR)", script_path());
    if (system("/usr/bin/python3 -c 'import torch' 2>/dev/null") != 0)
        TEST_SKIP("/usr/bin/python3 cannot import torch");
    td_named_tensors *l = interop_tensors();
    ASSERT_OK(td_named_tensors_set_meta(l, "producer", "trident"));
    const char *ours = test_tmp_path("trident.safetensors"), *theirs = test_tmp_path("torch.safetensors");
    ASSERT_OK(td_safetensors_save(ours, l));
    ASSERT_EQ_INT(run_script("read", ours), 0);
    ASSERT_EQ_INT(run_script("write", theirs), 0);
    td_named_tensors *back = NULL;
    ASSERT_OK(td_safetensors_load(theirs, TD_CPU, &back));
    ASSERT(!strcmp(td_named_tensors_meta(back, "producer"), "torch"));
    assert_same_lists(l, back);
    td_named_tensors_free(back);
    td_named_tensors_free(l);
}

TEST_MAIN(TESTS)
