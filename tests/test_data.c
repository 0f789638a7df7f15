/* Data: IDX and CIFAR-10 readers, datasets, the DataLoader, transforms,
** metrics, early stopping and metric logs. */
#include <inttypes.h>
#include <sys/stat.h>
#include <time.h>

#include "test_util.h"
#include "trident/data.h"

/* clang-format off */
#define TESTS(X)                                                                                               \
    X(idx_raw_and_gz) X(idx_types) X(idx_corrupt) X(idx_gz_corrupt) X(fashion_mnist_real) X(mnist_dir)         \
    X(cifar_small) X(cifar_bad) X(tensor_dataset) X(loader_order) X(loader_drop_last) X(loader_shuffle)         \
    X(loader_workers_match) X(loader_generic_get) X(loader_shutdown_midepoch) X(loader_worker_error)           \
    X(loader_first_batch) X(loader_transform) X(loader_misuse) X(normalize) X(random_crop) X(hflip)           \
    X(metrics_hand) X(metrics_errors) X(early_stopping_min) X(early_stopping_max_nan) X(log_csv) X(log_jsonl)
/* clang-format on */

/* gzip src into dst with the gzip tool (independent of the reader's zlib use). */
static void gzip_file(const char *src, const char *dst) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "gzip -c '%s' > '%s'", src, dst);
    if (system(cmd) != 0) TEST_SKIP("the gzip tool is not available");
}

/* An IDX file: header for (type, dims) then payload bytes. */
static size_t make_idx(unsigned char *b, int type, int ndim, const uint32_t *dims, const void *payload, size_t n) {
    b[0] = b[1] = 0, b[2] = (unsigned char)type, b[3] = (unsigned char)ndim;
    for (int d = 0; d < ndim; d++)
        for (int k = 0; k < 4; k++) b[4 + 4 * d + k] = (unsigned char)(dims[d] >> (24 - 8 * k));
    memcpy(b + 4 + 4 * ndim, payload, n);
    return 4 + 4 * (size_t)ndim + n;
}

static unsigned char img_pixel(int i) { return (unsigned char)((i * 37 + 11) % 256); }

TEST(idx_raw_and_gz) {
    unsigned char px[3 * 4 * 5], buf[512], lab[3] = {7, 0, 9};
    for (int i = 0; i < 60; i++) px[i] = img_pixel(i);
    uint32_t di[3] = {3, 4, 5}, dl[1] = {3};
    const char *raw = test_tmp_path("img.idx"), *gz = test_tmp_path("img.idx.gz"), *lraw = test_tmp_path("lab.idx");
    test_write_file(raw, buf, make_idx(buf, 0x08, 3, di, px, 60));
    test_write_file(lraw, buf, make_idx(buf, 0x08, 1, dl, lab, 3));
    gzip_file(raw, gz);
    for (int pass = 0; pass < 2; pass++) {
        const char *p = pass ? gz : raw;
        td_tensor *x;
        ASSERT_OK(td_idx_load(p, TD_IDX_RAW, &x));
        ASSERT_EQ_INT(td_tensor_dtype(x), TD_U8);
        ASSERT_EQ_INT(td_ndim(x), 3);
        ASSERT_EQ_INT(td_size(x, 2), 5);
        uint8_t got[60];
        ASSERT_OK(td_copy_to_host(x, got, 60, TD_U8));
        for (int i = 0; i < 60; i++) ASSERT_EQ_INT(got[i], px[i]);
        td_tensor *xf;
        ASSERT_OK(td_idx_load(p, TD_IDX_IMAGES_F32, &xf));
        ASSERT_EQ_INT(td_size(xf, 0), 3);
        ASSERT_EQ_INT(td_size(xf, 1), 20);
        float f[60];
        ASSERT_OK(td_copy_to_host(xf, f, sizeof f, TD_F32));
        for (int i = 0; i < 60; i++) ASSERT_NEAR(f[i], px[i] / 255.0, 1e-7);
        td_release(x);
        td_release(xf);
    }
    td_tensor *y;
    ASSERT_OK(td_idx_load(lraw, TD_IDX_LABELS_I64, &y));
    ASSERT_EQ_INT(td_tensor_dtype(y), TD_I64);
    int64_t yl[3];
    ASSERT_OK(td_copy_to_host(y, yl, sizeof yl, TD_I64));
    ASSERT_EQ_INT(yl[0], 7);
    ASSERT_EQ_INT(yl[2], 9);
    td_release(y);
}

TEST(idx_types) {
    /* i32 big-endian with negatives, f64, i16 */
    unsigned char be[16] = {0xFF, 0xFF, 0xFF, 0xFE, 0x00, 0x01, 0x00, 0x00}, buf[64];
    uint32_t d2[1] = {2};
    const char *p = test_tmp_path("i32.idx");
    test_write_file(p, buf, make_idx(buf, 0x0C, 1, d2, be, 8));
    td_tensor *t;
    ASSERT_OK(td_idx_load(p, TD_IDX_RAW, &t));
    ASSERT_EQ_INT(td_tensor_dtype(t), TD_I32);
    ASSERT_NEAR(td_get(t, (int64_t[]){0}), -2, 0);
    ASSERT_NEAR(td_get(t, (int64_t[]){1}), 65536, 0);
    td_release(t);
    unsigned char f64[8] = {0x40, 0x09, 0x21, 0xFB, 0x54, 0x44, 0x2D, 0x18}; /* pi */
    uint32_t d1[1] = {1};
    test_write_file(p, buf, make_idx(buf, 0x0E, 1, d1, f64, 8));
    ASSERT_OK(td_idx_load(p, TD_IDX_RAW, &t));
    ASSERT_NEAR(td_get(t, (int64_t[]){0}), 3.141592653589793, 0);
    td_release(t);
    unsigned char i16[4] = {0x80, 0x00, 0x7F, 0xFF};
    test_write_file(p, buf, make_idx(buf, 0x0B, 1, d2, i16, 4));
    ASSERT_OK(td_idx_load(p, TD_IDX_RAW, &t));
    ASSERT_NEAR(td_get(t, (int64_t[]){0}), -32768, 0);
    ASSERT_NEAR(td_get(t, (int64_t[]){1}), 32767, 0);
    td_release(t);
    ASSERT_ERROR(td_idx_load(p, TD_IDX_IMAGES_F32, &t), TD_ERR_FORMAT, "not an image file");
}

TEST(idx_corrupt) {
    td_scope_begin();
    unsigned char px[12], buf[128];
    for (int i = 0; i < 12; i++) px[i] = (unsigned char)i;
    uint32_t d[2] = {3, 4};
    const char *p = test_tmp_path("bad.idx");
    td_tensor *t = (td_tensor *)1;
    size_t n = make_idx(buf, 0x08, 2, d, px, 12);
    test_write_file(p, buf, n - 1);
    ASSERT_ERROR(td_idx_load(p, TD_IDX_RAW, &t), TD_ERR_FORMAT, "truncated: the payload needs 12 bytes, only 11");
    ASSERT(t == NULL);
    test_write_file(p, buf, 6);
    ASSERT_ERROR(td_idx_load(p, TD_IDX_RAW, &t), TD_ERR_FORMAT, "truncated: the dimension sizes");
    buf[n] = 0x55;
    test_write_file(p, buf, n + 1);
    ASSERT_ERROR(td_idx_load(p, TD_IDX_RAW, &t), TD_ERR_FORMAT,
                 "has more bytes than the 12 its header (magic number 0x00000802, u8 [3,4]) describes");
    buf[2] = 0x07;
    test_write_file(p, buf, n);
    ASSERT_ERROR(td_idx_load(p, TD_IDX_RAW, &t), TD_ERR_FORMAT, "magic number 0x00000702, not an IDX one");
    buf[2] = 0x08, buf[1] = 0x01;
    test_write_file(p, buf, n);
    ASSERT_ERROR(td_idx_load(p, TD_IDX_RAW, &t), TD_ERR_FORMAT, "magic number 0x00010802, not an IDX one");
    buf[1] = 0, buf[3] = 0;
    test_write_file(p, buf, n);
    ASSERT_ERROR(td_idx_load(p, TD_IDX_RAW, &t), TD_ERR_FORMAT, "magic number 0x00000800, not an IDX one");
    buf[3] = 2;
    test_write_file(p, buf, n);
    ASSERT_ERROR(td_idx_load(p, TD_IDX_LABELS_I64, &t), TD_ERR_FORMAT,
                 "magic number 0x00000802 (2-D u8), not a label file's 0x00000801 (1-D u8)");
    /* claims 2^32-1 x 2^32-1 images: refused before any allocation */
    uint32_t huge[3] = {0xFFFFFFFFu, 0xFFFFFFFFu, 28};
    test_write_file(p, buf, make_idx(buf, 0x08, 3, huge, px, 12));
    ASSERT_ERROR(td_idx_load(p, TD_IDX_RAW, &t), TD_ERR_FORMAT, "implausible sizes");
    /* size 0, but the strides of 2^32-1 x 2^32-1 x 2^32-1 overflow (fuzz finding) */
    uint32_t empty_huge[4] = {0, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu};
    test_write_file(p, buf, make_idx(buf, 0x08, 4, empty_huge, px, 0));
    ASSERT_ERROR(td_idx_load(p, TD_IDX_RAW, &t), TD_ERR_OOM, "overflows 2^48 bytes");
    ASSERT(t == NULL);
    uint32_t big[1] = {1u << 30}; /* 1 GiB claimed, 12 bytes present */
    test_write_file(p, buf, make_idx(buf, 0x08, 1, big, px, 12));
    ASSERT_ERROR(td_idx_load(p, TD_IDX_RAW, &t), TD_ERR_FORMAT, "truncated");
    ASSERT_ERROR(td_idx_load(test_tmp_path("missing.idx"), TD_IDX_RAW, &t), TD_ERR_IO, "No such file");
    ASSERT_ERROR(td_idx_load(p, (td_idx_mode)9, &t), TD_ERR_MISUSE, "unknown mode");
    td_scope_end();
}

TEST(idx_gz_corrupt) {
    td_scope_begin();
    unsigned char px[4000], buf[4100];
    uint64_t seed = (uint64_t)time(NULL);
    printf("seed %" PRIu64 "\n", seed);
    for (int i = 0; i < 4000; i++) {
        uint32_t w[4];
        td_philox4x32(seed, (uint64_t)i, w);
        px[i] = (unsigned char)w[0];
    }
    uint32_t d[2] = {40, 100};
    const char *raw = test_tmp_path("g.idx"), *gz = test_tmp_path("g.idx.gz");
    test_write_file(raw, buf, make_idx(buf, 0x08, 2, d, px, 4000));
    gzip_file(raw, gz);
    size_t n;
    unsigned char *z = test_read_file(gz, &n);
    td_tensor *t;
    test_write_file(gz, z, n / 2); /* cut the stream in half */
    ASSERT_ERROR(td_idx_load(gz, TD_IDX_RAW, &t), TD_ERR_FORMAT, "g.idx.gz");
    z[n / 2] ^= 0xFF; /* flip bits in the middle of the deflate data */
    z[n / 2 + 1] ^= 0x5A;
    test_write_file(gz, z, n);
    td_clear_error();
    td_status st = td_idx_load(gz, TD_IDX_RAW, &t);
    ASSERT_EQ_INT(st, TD_ERR_FORMAT); /* a bad block or a CRC mismatch */
    ASSERT(strstr(td_last_error(), "g.idx.gz"));
    free(z);
    td_scope_end();
}

TEST(fashion_mnist_real) {
    const char *dir = "/usr/share/datasets/fashion-mnist";
    struct stat sb;
    if (stat("/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz", &sb) != 0)
        TEST_SKIP("Fashion-MNIST is not installed in %s", dir);
    td_tensor *x, *y;
    ASSERT_OK(td_mnist_load(dir, false, true, &x, &y));
    ASSERT_EQ_INT(td_size(x, 0), 10000);
    ASSERT_EQ_INT(td_size(x, 1), 784);
    int64_t *yl = malloc(10000 * sizeof *yl);
    ASSERT_OK(td_copy_to_host(y, yl, 10000 * sizeof *yl, TD_I64));
    int64_t count[10] = {0};
    for (int i = 0; i < 10000; i++) {
        ASSERT(yl[i] >= 0 && yl[i] < 10);
        count[yl[i]]++;
    }
    for (int k = 0; k < 10; k++) ASSERT_EQ_INT(count[k], 1000); /* the test set is balanced */
    float *xf = malloc(784 * sizeof *xf);
    td_scope_begin();
    ASSERT_OK(td_copy_to_host(td_select(x, 0, 0), xf, 784 * sizeof *xf, TD_F32));
    td_scope_end();
    float mx = 0;
    for (int i = 0; i < 784; i++) {
        ASSERT(xf[i] >= 0 && xf[i] <= 1);
        mx = xf[i] > mx ? xf[i] : mx;
    }
    ASSERT(mx > 0.5f);
    free(xf);
    free(yl);
    td_release(x);
    td_release(y);
}

TEST(mnist_dir) {
    td_scope_begin();
    /* a tiny MNIST directory: plain images, gzip'd labels; then a count mismatch */
    unsigned char px[2 * 28 * 28], buf[2000], lab[3] = {1, 2, 3};
    for (int i = 0; i < 2 * 784; i++) px[i] = img_pixel(i);
    uint32_t di[3] = {2, 28, 28}, dl[1] = {2};
    char dir[600];
    snprintf(dir, sizeof dir, "%s/mnist", test_tmp_dir());
    mkdir(dir, 0755);
    char pi[700], pl[700], plg[700];
    snprintf(pi, sizeof pi, "%s/t10k-images-idx3-ubyte", dir);
    snprintf(pl, sizeof pl, "%s/lab.raw", dir);
    snprintf(plg, sizeof plg, "%s/t10k-labels-idx1-ubyte.gz", dir);
    test_write_file(pi, buf, make_idx(buf, 0x08, 3, di, px, sizeof px));
    test_write_file(pl, buf, make_idx(buf, 0x08, 1, dl, lab, 2));
    gzip_file(pl, plg);
    td_tensor *x, *y;
    ASSERT_OK(td_mnist_load(dir, false, false, &x, &y));
    ASSERT_EQ_INT(td_tensor_dtype(x), TD_U8);
    ASSERT_EQ_INT(td_size(x, 1), 28);
    ASSERT_NEAR(td_get(x, (int64_t[]){1, 0, 3}), img_pixel(784 + 3), 0);
    ASSERT_NEAR(td_get(y, (int64_t[]){1}), 2, 0);
    uint32_t dl3[1] = {3};
    test_write_file(pl, buf, make_idx(buf, 0x08, 1, dl3, lab, 3));
    gzip_file(pl, plg);
    ASSERT_ERROR(td_mnist_load(dir, false, false, &x, &y), TD_ERR_FORMAT, "has 2 images but");
    ASSERT(x == NULL && y == NULL);
    ASSERT_ERROR(td_mnist_load(dir, true, false, &x, &y), TD_ERR_IO, "train-images-idx3-ubyte");
    td_scope_end();
}

TEST(cifar_small) {
    td_scope_begin();
    enum { N = 3 };
    static unsigned char rec[N][3073];
    for (int r = 0; r < N; r++) {
        rec[r][0] = (unsigned char)(r * 4 + 1); /* labels 1, 5, 9 */
        for (int i = 0; i < 3072; i++) rec[r][1 + i] = (unsigned char)((r * 3072 + i) * 7 % 251);
    }
    const char *a = test_tmp_path("data_batch_1.bin"), *b = test_tmp_path("data_batch_2.bin");
    test_write_file(a, rec, 2 * 3073);
    test_write_file(b, rec[2], 3073);
    const char *paths[2] = {a, b};
    td_tensor *x, *y;
    ASSERT_OK(td_cifar10_load(2, paths, false, &x, &y));
    ASSERT_EQ_INT(td_size(x, 0), 3);
    ASSERT_EQ_INT(td_size(x, 1), 3);
    ASSERT_EQ_INT(td_size(x, 3), 32);
    int64_t yl[3];
    ASSERT_OK(td_copy_to_host(y, yl, sizeof yl, TD_I64));
    ASSERT_EQ_INT(yl[0], 1);
    ASSERT_EQ_INT(yl[1], 5);
    ASSERT_EQ_INT(yl[2], 9);
    /* x[r, c, h, w] = record r byte 1 + c*1024 + h*32 + w */
    int64_t at[4] = {2, 1, 5, 7};
    ASSERT_NEAR(td_get(x, at), rec[2][1 + 1024 + 5 * 32 + 7], 0);
    td_tensor *xf, *yf;
    ASSERT_OK(td_cifar10_load(1, paths, true, &xf, &yf));
    ASSERT_EQ_INT(td_tensor_dtype(xf), TD_F32);
    int64_t at2[4] = {1, 2, 31, 31};
    ASSERT_NEAR(td_get(xf, at2), rec[1][3072] / 255.0, 1e-7);
    td_scope_end();
}

TEST(cifar_bad) {
    td_scope_begin();
    static unsigned char rec[2][3073];
    const char *p = test_tmp_path("c.bin");
    td_tensor *x, *y;
    test_write_file(p, rec, 3073 + 100);
    ASSERT_ERROR(td_cifar10_load(1, &p, false, &x, &y), TD_ERR_FORMAT, "not a multiple of the 3073-byte record");
    rec[1][0] = 10;
    test_write_file(p, rec, 2 * 3073);
    ASSERT_ERROR(td_cifar10_load(1, &p, false, &x, &y), TD_ERR_FORMAT, "record 1 has label 10");
    ASSERT(x == NULL && y == NULL);
    const char *missing = test_tmp_path("none.bin");
    ASSERT_ERROR(td_cifar10_load(1, &missing, false, &x, &y), TD_ERR_IO, "none.bin");
    td_scope_end();
}

/* x [N, 2] with x[i] = (10 i, 10 i + 1) as f32; y [N] = i as i64. */
static td_dataset *make_ds(int64_t n, td_tensor **xo, td_tensor **yo) {
    float *xv = malloc(sizeof(float) * (size_t)(2 * n));
    int64_t *yv = malloc(sizeof(int64_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) xv[2 * i] = (float)(10 * i), xv[2 * i + 1] = (float)(10 * i + 1), yv[i] = i;
    td_tensor *t[2] = {td_from_data(xv, 2, (int64_t[]){n, 2}, TD_F32, TD_CPU), td_from_data(yv, 1, &n, TD_I64, TD_CPU)};
    free(xv);
    free(yv);
    td_dataset *ds;
    ASSERT_OK(td_tensor_dataset_new(2, t, &ds));
    if (xo)
        *xo = t[0], *yo = t[1];
    else
        td_release(t[0]), td_release(t[1]);
    return ds;
}

/* The next batch into f inside a new scope, which the caller ends; at the end of the epoch (f NULL) the scope is
** ended here and the result is false. */
static bool next_batch(td_dataloader *dl, td_tensor **f) {
    td_scope_begin();
    ASSERT_OK(td_dataloader_next(dl, f));
    if (f[0]) return true;
    ASSERT(f[1] == NULL);
    td_scope_end();
    return false;
}

/* Labels of the next batch into ids (checking x matches y); returns its size, 0 at the end. */
static int64_t next_ids(td_dataloader *dl, int64_t *ids) {
    td_tensor *f[2];
    if (!next_batch(dl, f)) return 0;
    int64_t n = td_size(f[1], 0);
    ASSERT_EQ_INT(td_size(f[0], 0), n);
    ASSERT_EQ_INT(td_size(f[0], 1), 2);
    float *xv = malloc(sizeof(float) * (size_t)(2 * n));
    ASSERT_OK(td_copy_to_host(f[1], ids, sizeof(int64_t) * (size_t)n, TD_I64));
    ASSERT_OK(td_copy_to_host(f[0], xv, sizeof(float) * (size_t)(2 * n), TD_F32));
    for (int64_t i = 0; i < n; i++) ASSERT_NEAR(xv[2 * i + 1], 10 * ids[i] + 1, 0);
    free(xv);
    td_scope_end();
    return n;
}

/* All label ids of one epoch, concatenated; returns the count and batch sizes. */
static int64_t epoch_ids(td_dataloader *dl, int64_t epoch, int64_t first, int64_t *ids, int64_t *sizes) {
    ASSERT_OK(td_dataloader_start_epoch(dl, epoch, first));
    int64_t total = 0, b = 0, n;
    while ((n = next_ids(dl, ids + total)) > 0) {
        if (sizes) sizes[b] = n;
        total += n, b++;
    }
    return total;
}

TEST(tensor_dataset) {
    td_tensor *x, *y;
    td_dataset *ds = make_ds(5, &x, &y);
    ASSERT_EQ_INT(td_dataset_len(ds), 5);
    ASSERT_EQ_INT(td_dataset_num_fields(ds), 2);
    td_tensor *f[2];
    ASSERT_OK(td_dataset_get_batch(ds, 3, (int64_t[]){4, 0, 2}, f));
    ASSERT_NEAR(td_get(f[0], (int64_t[]){0, 0}), 40, 0);
    ASSERT_NEAR(td_get(f[1], (int64_t[]){2}), 2, 0);
    td_release(f[0]);
    td_release(f[1]);
    ASSERT_ERROR(td_dataset_get_batch(ds, 1, (int64_t[]){5}, f), TD_ERR_INDEX, "index 5 out of range for 5");
    td_tensor *bad[2] = {x, ASSERT_TENSOR(td_zeros(1, (int64_t[]){4}, TD_I64, TD_CPU))};
    td_dataset *d2;
    ASSERT_ERROR(td_tensor_dataset_new(2, bad, &d2), TD_ERR_SHAPE, "tensor 1 has 4 samples, tensor 0 has 5");
    td_dataset_free(ds);
    td_release(x);
    td_release(y);
    td_release(bad[1]);
    ASSERT_EQ_INT(td_debug_live_tensors(), 0);
}

TEST(loader_order) {
    td_scope_begin();
    td_dataset *ds = make_ds(10, NULL, NULL);
    td_dataloader *dl;
    ASSERT_OK(td_dataloader_new(ds, &(td_dataloader_opts){.batch_size = 4}, &dl));
    ASSERT_EQ_INT(td_dataloader_num_batches(dl), 3);
    int64_t ids[16], sizes[4];
    ASSERT_EQ_INT(epoch_ids(dl, 0, 0, ids, sizes), 10);
    for (int i = 0; i < 10; i++) ASSERT_EQ_INT(ids[i], i);
    ASSERT_EQ_INT(sizes[0], 4);
    ASSERT_EQ_INT(sizes[2], 2);
    td_tensor *f[2];
    ASSERT_OK(td_dataloader_next(dl, f)); /* still at the end */
    ASSERT(f[0] == NULL);
    td_dataloader_free(dl);
    td_dataset_free(ds);
    ASSERT_EQ_INT(td_debug_live_tensors(), 0);
    td_scope_end();
}

TEST(loader_drop_last) {
    td_scope_begin();
    td_dataset *ds = make_ds(10, NULL, NULL);
    td_dataloader *dl;
    ASSERT_OK(td_dataloader_new(ds, &(td_dataloader_opts){.batch_size = 4, .drop_last = true, .num_workers = 2}, &dl));
    ASSERT_EQ_INT(td_dataloader_num_batches(dl), 2);
    int64_t ids[16], sizes[4];
    ASSERT_EQ_INT(epoch_ids(dl, 0, 0, ids, sizes), 8);
    ASSERT_EQ_INT(sizes[1], 4);
    td_dataloader_free(dl);
    td_dataset_free(ds);
    td_scope_end();
}

/* The documented permutation, written out independently (data.h). */
static void ref_perm(int64_t *p, int64_t n, uint64_t seed, int64_t epoch) {
    for (int64_t i = 0; i < n; i++) p[i] = i;
    uint64_t k = (uint64_t)epoch << 40;
    for (int64_t i = n - 1; i > 0; i--) {
        uint32_t w[4];
        td_philox4x32(seed, k++, w);
        uint64_t u = ((uint64_t)w[1] << 32) | w[0];
        int64_t j = (int64_t)(((unsigned __int128)u * (unsigned __int128)(i + 1)) >> 64);
        int64_t t = p[i];
        p[i] = p[j], p[j] = t;
    }
}

TEST(loader_shuffle) {
    td_scope_begin();
    enum { N = 50 };
    td_dataset *ds = make_ds(N, NULL, NULL);
    td_dataloader *dl;
    uint64_t seed = (uint64_t)time(NULL);
    printf("seed %" PRIu64 "\n", seed);
    ASSERT_OK(td_dataloader_new(ds, &(td_dataloader_opts){.batch_size = 7, .shuffle = true, .seed = seed}, &dl));
    int64_t a[N], b[N], c[N], want[N];
    ASSERT_EQ_INT(epoch_ids(dl, 0, 0, a, NULL), N);
    ASSERT_EQ_INT(epoch_ids(dl, 1, 0, b, NULL), N);
    ASSERT_EQ_INT(epoch_ids(dl, 0, 0, c, NULL), N);
    ASSERT(!memcmp(a, c, sizeof a)); /* same (seed, epoch): same order */
    ASSERT(memcmp(a, b, sizeof a));  /* another epoch: another order */
    ref_perm(want, N, seed, 1);
    for (int i = 0; i < N; i++) ASSERT_EQ_INT(b[i], want[i]);
    int seen[N] = {0}, moved = 0;
    for (int i = 0; i < N; i++) seen[a[i]]++, moved += a[i] != i;
    for (int i = 0; i < N; i++) ASSERT_EQ_INT(seen[i], 1);
    ASSERT(moved > N / 2);
    td_dataloader_free(dl);
    td_dataset_free(ds);
    td_scope_end();
}

TEST(loader_workers_match) {
    td_scope_begin();
    enum { N = 103 };
    td_dataset *ds = make_ds(N, NULL, NULL);
    int64_t ref[2][N], got[N], rs[16], gs[16];
    td_dataloader *d0;
    td_dataloader_opts o = {.batch_size = 8, .shuffle = true, .seed = 99};
    ASSERT_OK(td_dataloader_new(ds, &o, &d0));
    for (int e = 0; e < 2; e++) ASSERT_EQ_INT(epoch_ids(d0, e, 0, ref[e], e ? NULL : rs), N);
    td_dataloader_free(d0);
    for (int workers = 1; workers <= 4; workers += 3) {
        td_dataloader *dw;
        o.num_workers = workers;
        o.prefetch = workers == 1 ? 1 : 0;
        ASSERT_OK(td_dataloader_new(ds, &o, &dw));
        for (int e = 0; e < 2; e++) {
            ASSERT_EQ_INT(epoch_ids(dw, e, 0, got, e ? NULL : gs), N);
            for (int i = 0; i < N; i++) ASSERT_EQ_INT(got[i], ref[e][i]);
        }
        for (int b = 0; b < 13; b++) ASSERT_EQ_INT(gs[b], rs[b]);
        td_dataloader_free(dw);
    }
    td_dataset_free(ds);
    ASSERT_EQ_INT(td_debug_live_tensors(), 0);
    td_scope_end();
}

/* A dataset with only get(): sample i is ([i, -i] as f64 [2], i as i32 []);
** get fails for the index stored in fail_at. */
static int64_t gen_len(void *ctx) { return ((int64_t *)ctx)[0]; }
static int gen_fields(void *ctx) {
    (void)ctx;
    return 2;
}
static td_status gen_get(void *ctx, int64_t i, td_tensor **f) {
    if (i == ((int64_t *)ctx)[1]) return td_error_set(TD_ERR_FORMAT, "bad sample %lld", (long long)i);
    double v[2] = {(double)i, (double)-i};
    int32_t l = (int32_t)i;
    f[0] = td_from_data(v, 1, (int64_t[]){2}, TD_F64, TD_CPU);
    f[1] = td_from_data(&l, 0, NULL, TD_I32, TD_CPU);
    return TD_OK;
}
static const td_dataset_i gen_iface = {.len = gen_len, .num_fields = gen_fields, .get = gen_get};

TEST(loader_generic_get) {
    int64_t ctx[2] = {21, -1};
    td_dataset *ds;
    ASSERT_OK(td_dataset_new(&gen_iface, ctx, &ds));
    td_dataloader *dl;
    ASSERT_OK(td_dataloader_new(
        ds, &(td_dataloader_opts){.batch_size = 5, .shuffle = true, .seed = 3, .num_workers = 3}, &dl));
    int64_t want[21];
    ref_perm(want, 21, 3, 0);
    ASSERT_OK(td_dataloader_start_epoch(dl, 0, 0));
    int64_t at = 0;
    td_tensor *f[2];
    while (next_batch(dl, f)) {
        ASSERT_EQ_INT(td_ndim(f[0]), 2);
        ASSERT_EQ_INT(td_tensor_dtype(f[1]), TD_I32);
        ASSERT_EQ_INT(td_ndim(f[1]), 1);
        for (int64_t i = 0; i < td_size(f[1], 0); i++, at++) {
            ASSERT_NEAR(td_get(f[1], &i), want[at], 0);
            ASSERT_NEAR(td_get(f[0], (int64_t[]){i, 1}), -want[at], 0);
        }
        td_scope_end();
    }
    ASSERT_EQ_INT(at, 21);
    td_dataloader_free(dl);
    td_dataset_free(ds);
    ASSERT_EQ_INT(td_debug_live_tensors(), 0);
}

TEST(loader_shutdown_midepoch) {
    td_scope_begin();
    td_dataset *ds = make_ds(1000, NULL, NULL);
    for (int round = 0; round < 20; round++) {
        td_dataloader *dl;
        ASSERT_OK(
            td_dataloader_new(ds, &(td_dataloader_opts){.batch_size = 3, .shuffle = true, .num_workers = 4}, &dl));
        int64_t ids[8];
        ASSERT_OK(td_dataloader_start_epoch(dl, 0, 0));
        for (int b = 0; b < round % 4; b++) ASSERT_EQ_INT(next_ids(dl, ids), 3);
        if (round % 2) ASSERT_OK(td_dataloader_start_epoch(dl, 1, 0)); /* restart mid-epoch */
        td_dataloader_free(dl);                                        /* workers busy or blocked on a full queue */
    }
    td_dataset_free(ds);
    ASSERT_EQ_INT(td_debug_live_tensors(), 0);
    td_scope_end();
}

TEST(loader_worker_error) {
    for (int workers = 0; workers <= 2; workers += 2) {
        int64_t ctx[2] = {40, 17};
        td_dataset *ds;
        ASSERT_OK(td_dataset_new(&gen_iface, ctx, &ds));
        td_dataloader *dl;
        ASSERT_OK(td_dataloader_new(ds, &(td_dataloader_opts){.batch_size = 4, .num_workers = workers}, &dl));
        ASSERT_OK(td_dataloader_start_epoch(dl, 0, 0));
        td_tensor *f[2];
        for (int b = 0; b < 4; b++) { /* batches 0..3 hold samples 0..15 */
            td_scope_begin();
            ASSERT_OK(td_dataloader_next(dl, f));
            ASSERT(f[0] != NULL);
            td_scope_end();
        }
        ASSERT_ERROR(td_dataloader_next(dl, f), TD_ERR_FORMAT, "bad sample 17");
        ASSERT(f[0] == NULL && f[1] == NULL);
        ASSERT_ERROR(td_dataloader_next(dl, f), TD_ERR_STATE, "no epoch in progress");
        td_dataloader_free(dl);
        td_dataset_free(ds);
    }
    ASSERT_EQ_INT(td_debug_live_tensors(), 0);
}

TEST(loader_first_batch) {
    td_scope_begin();
    enum { N = 30 };
    td_dataset *ds = make_ds(N, NULL, NULL);
    td_dataloader *dl;
    ASSERT_OK(td_dataloader_new(
        ds, &(td_dataloader_opts){.batch_size = 4, .shuffle = true, .seed = 5, .num_workers = 2}, &dl));
    int64_t all[N], tail[N];
    ASSERT_EQ_INT(epoch_ids(dl, 3, 0, all, NULL), N);
    ASSERT_EQ_INT(epoch_ids(dl, 3, 5, tail, NULL), N - 20); /* resume after 5 batches */
    for (int i = 0; i < N - 20; i++) ASSERT_EQ_INT(tail[i], all[20 + i]);
    ASSERT_EQ_INT(epoch_ids(dl, 3, 8, tail, NULL), 0);
    ASSERT_ERROR(td_dataloader_start_epoch(dl, 3, 9), TD_ERR_MISUSE, "first batch 9");
    td_dataloader_free(dl);
    td_dataset_free(ds);
    td_scope_end();
}

/* Flip every image of the batch (p = 1) and record the calls. */
static td_status flip_all(void *user, td_tensor **f, int n, int64_t epoch, int64_t batch) {
    (void)epoch, (void)batch;
    if (n != 2) return td_error_set(TD_ERR_MISUSE, "two fields expected");
    ((int *)user)[0]++;
    f[0] = td_transform_hflip(f[0], 1.0, 0, 0);
    return f[0] ? TD_OK : td_last_status();
}

TEST(loader_transform) {
    /* x [N,1,1,2]: a 1x2 image (10i, 10i+1) per sample; flipped gives (10i+1, 10i) */
    enum { N = 9 };
    float xv[2 * N];
    int64_t yv[N];
    for (int i = 0; i < N; i++) xv[2 * i] = (float)(10 * i), xv[2 * i + 1] = (float)(10 * i + 1), yv[i] = i;
    td_tensor *t[2] = {td_from_data(xv, 4, (int64_t[]){N, 1, 1, 2}, TD_F32, TD_CPU),
                       td_from_data(yv, 1, (int64_t[]){N}, TD_I64, TD_CPU)};
    td_dataset *ds;
    ASSERT_OK(td_tensor_dataset_new(2, t, &ds));
    td_release(t[0]);
    td_release(t[1]);
    int calls = 0;
    td_dataloader *dl;
    ASSERT_OK(td_dataloader_new(
        ds, &(td_dataloader_opts){.batch_size = 4, .num_workers = 2, .transform = flip_all, .transform_user = &calls},
        &dl));
    ASSERT_OK(td_dataloader_start_epoch(dl, 0, 0));
    int64_t at = 0;
    td_tensor *f[2];
    while (next_batch(dl, f)) {
        for (int64_t i = 0; i < td_size(f[0], 0); i++, at++) {
            ASSERT_NEAR(td_get(f[0], (int64_t[]){i, 0, 0, 0}), 10 * at + 1, 0);
            ASSERT_NEAR(td_get(f[0], (int64_t[]){i, 0, 0, 1}), 10 * at, 0);
        }
        td_scope_end();
    }
    ASSERT_EQ_INT(at, N);
    td_dataloader_free(dl);
    ASSERT_EQ_INT(calls, 3);
    td_dataset_free(ds);
    ASSERT_EQ_INT(td_debug_live_tensors(), 0);
}

TEST(loader_misuse) {
    td_scope_begin();
    td_dataset *ds = make_ds(4, NULL, NULL);
    td_dataloader *dl = (td_dataloader *)1;
    ASSERT_ERROR(td_dataloader_new(ds, &(td_dataloader_opts){.batch_size = 0}, &dl), TD_ERR_MISUSE, "batch_size 0");
    ASSERT(dl == NULL);
    ASSERT_ERROR(td_dataloader_new(ds, &(td_dataloader_opts){.batch_size = 1, .num_workers = 65}, &dl), TD_ERR_MISUSE,
                 "num_workers 65");
    ASSERT_OK(td_dataloader_new(ds, &(td_dataloader_opts){.batch_size = 2}, &dl));
    td_tensor *f[2];
    ASSERT_ERROR(td_dataloader_next(dl, f), TD_ERR_STATE, "no epoch in progress");
    ASSERT_ERROR(td_dataloader_start_epoch(dl, -1, 0), TD_ERR_MISUSE, "epoch -1");
    td_dataloader_free(dl);
    td_dataset *d2;
    ASSERT_ERROR(td_dataset_new(&(td_dataset_i){.len = gen_len}, NULL, &d2), TD_ERR_MISUSE,
                 "needs len, num_fields and get");
    td_dataset_free(ds);
    td_scope_end();
}

TEST(normalize) {
    td_scope_begin();
    /* x [2,3,1,2]: per channel mean/std; checked against a loop here */
    double xv[12], mean[3] = {0.5, -1, 2}, sd[3] = {0.25, 2, 4};
    for (int i = 0; i < 12; i++) xv[i] = i * 0.75 - 3;
    td_tensor *x = ASSERT_TENSOR(td_from_data(xv, 4, (int64_t[]){2, 3, 1, 2}, TD_F64, TD_CPU));
    td_tensor *y = ASSERT_TENSOR(td_transform_normalize(x, 3, mean, sd));
    double out[12];
    ASSERT_OK(td_copy_to_host(y, out, sizeof out, TD_F64));
    for (int b = 0; b < 2; b++)
        for (int c = 0; c < 3; c++)
            for (int w = 0; w < 2; w++) {
                int i = (b * 3 + c) * 2 + w;
                ASSERT_NEAR(out[i], (xv[i] - mean[c]) / sd[c], 1e-15);
            }
    ASSERT_NEAR(out[5], -0.3125, 0);                                    /* x[0,2,0,1] = 0.75: (0.75 - 2) / 4 */
    td_tensor *xf = ASSERT_TENSOR(td_cast(td_select(x, 0, 1), TD_F32)); /* [3,1,2] */
    td_tensor *yf = ASSERT_TENSOR(td_transform_normalize(xf, 3, mean, sd));
    ASSERT_EQ_INT(td_tensor_dtype(yf), TD_F32);
    ASSERT_NEAR(td_get(yf, (int64_t[]){1, 0, 0}), (xv[8] - mean[1]) / sd[1], 1e-6);
    ASSERT_ERROR(td_transform_normalize(x, 2, mean, sd), TD_ERR_SHAPE, "2 means/stds for 3 channels");
    ASSERT_ERROR(td_transform_normalize(x, 3, mean, (double[]){1, 0, 1}), TD_ERR_MISUSE, "std[1] is 0");
    td_tensor *u = ASSERT_TENSOR(td_zeros(3, (int64_t[]){3, 2, 2}, TD_U8, TD_CPU));
    ASSERT_ERROR(td_transform_normalize(u, 3, mean, sd), TD_ERR_DTYPE, "must be floating");
    ASSERT_ERROR(td_transform_normalize(td_select(u, 0, 0), 2, mean, sd), TD_ERR_SHAPE, "[C,H,W] or [B,C,H,W]");
    td_scope_end();
}

TEST(random_crop) {
    td_scope_begin();
    /* x [B=6, C=2, 3, 4] with distinct values; crop 3x4 with padding 2 */
    enum { B = 6, C = 2, H = 3, W = 4, P = 2, OH = 3, OW = 4 };
    int32_t xv[B * C * H * W];
    for (int i = 0; i < B * C * H * W; i++) xv[i] = i + 1;
    td_tensor *x = ASSERT_TENSOR(td_from_data(xv, 4, (int64_t[]){B, C, H, W}, TD_I32, TD_CPU));
    uint64_t seed = (uint64_t)time(NULL), off = 1000;
    printf("seed %" PRIu64 "\n", seed);
    td_tensor *y = ASSERT_TENSOR(td_transform_random_crop(x, OH, OW, P, seed, off));
    int32_t out[B * C * OH * OW];
    ASSERT_OK(td_copy_to_host(y, out, sizeof out, TD_I32));
    int corners = 0;
    for (int b = 0; b < B; b++) {
        uint32_t w[4];
        td_philox4x32(seed, off + (uint64_t)b, w);
        int top = (int)(w[0] % (H + 2 * P - OH + 1)), left = (int)(w[1] % (W + 2 * P - OW + 1));
        corners += top * 10 + left;
        int32_t padded[C][H + 2 * P][W + 2 * P];
        memset(padded, 0, sizeof padded);
        for (int c = 0; c < C; c++)
            for (int i = 0; i < H; i++)
                for (int j = 0; j < W; j++) padded[c][i + P][j + P] = xv[((b * C + c) * H + i) * W + j];
        for (int c = 0; c < C; c++)
            for (int r = 0; r < OH; r++)
                for (int q = 0; q < OW; q++)
                    ASSERT_EQ_INT(out[((b * C + c) * OH + r) * OW + q], padded[c][top + r][left + q]);
    }
    ASSERT(corners > 0); /* not every sample at the corner (0, 0) */
    td_tensor *s = ASSERT_TENSOR(td_transform_random_crop(td_select(x, 0, 0), 2, 2, 0, seed, 0)); /* [C,H,W] */
    ASSERT_EQ_INT(td_ndim(s), 3);
    ASSERT_EQ_INT(td_size(s, 2), 2);
    ASSERT_ERROR(td_transform_random_crop(x, 8, 4, 2, 0, 0), TD_ERR_SHAPE, "does not fit");
    td_scope_end();
}

TEST(hflip) {
    td_scope_begin();
    enum { B = 64, W = 5 };
    float xv[B * 2 * W];
    for (int i = 0; i < B * 2 * W; i++) xv[i] = (float)i;
    td_tensor *x = ASSERT_TENSOR(td_from_data(xv, 4, (int64_t[]){B, 1, 2, W}, TD_F32, TD_CPU));
    uint64_t seed = 77;
    td_tensor *y = ASSERT_TENSOR(td_transform_hflip(x, 0.5, seed, 10));
    float out[B * 2 * W];
    ASSERT_OK(td_copy_to_host(y, out, sizeof out, TD_F32));
    int flipped = 0;
    for (int b = 0; b < B; b++) {
        uint32_t w[4];
        td_philox4x32(seed, 10 + (uint64_t)b, w);
        bool f = td_philox_uniform(w[2]) < 0.5f;
        flipped += f;
        for (int r = 0; r < 2; r++)
            for (int j = 0; j < W; j++)
                ASSERT_NEAR(out[(b * 2 + r) * W + j], xv[(b * 2 + r) * W + (f ? W - 1 - j : j)], 0);
    }
    ASSERT(flipped > 10 && flipped < 54);
    td_tensor *none = ASSERT_TENSOR(td_transform_hflip(x, 0, seed, 0));
    ASSERT_OK(td_copy_to_host(none, out, sizeof out, TD_F32));
    ASSERT(!memcmp(out, xv, sizeof out));
    ASSERT_ERROR(td_transform_hflip(x, 1.5, 0, 0), TD_ERR_MISUSE, "outside [0, 1]");
    td_scope_end();
}

TEST(metrics_hand) {
    td_scope_begin();
    /* target 0 0 1 1 2 2, pred 0 1 1 1 2 0 -> cm rows [1 1 0] [0 2 0] [1 0 1]
    ** precision 1/2, 2/3, 1; recall 1/2, 1, 1/2; f1 1/2, 4/5, 2/3 */
    int64_t target[6] = {0, 0, 1, 1, 2, 2}, pred[6] = {0, 1, 1, 1, 2, 0}, cm[9] = {0};
    ASSERT_OK(td_confusion_update(cm, 3, pred, target, 6));
    int64_t want[9] = {1, 1, 0, 0, 2, 0, 1, 0, 1};
    for (int i = 0; i < 9; i++) ASSERT_EQ_INT(cm[i], want[i]);
    td_metrics m;
    ASSERT_OK(td_metrics_from_confusion(cm, 3, &m));
    ASSERT_EQ_INT(m.n, 6);
    ASSERT_NEAR(m.accuracy, 4.0 / 6, 1e-15);
    ASSERT_NEAR(m.precision, (0.5 + 2.0 / 3 + 1) / 3, 1e-15);
    ASSERT_NEAR(m.recall, (0.5 + 1 + 0.5) / 3, 1e-15);
    ASSERT_NEAR(m.f1, (0.5 + 0.8 + 2.0 / 3) / 3, 1e-15);
    /* a 4th class never predicted nor present counts 0 in the macro means */
    int64_t cm4[16] = {0};
    ASSERT_OK(td_confusion_update(cm4, 4, pred, target, 6));
    ASSERT_OK(td_metrics_from_confusion(cm4, 4, &m));
    ASSERT_NEAR(m.precision, (0.5 + 2.0 / 3 + 1) / 4, 1e-15);
    /* tensors accumulate into the same matrix */
    td_tensor *pt = ASSERT_TENSOR(td_from_data(pred, 1, (int64_t[]){6}, TD_I64, TD_CPU));
    td_tensor *tt = ASSERT_TENSOR(td_cast(td_from_data(target, 1, (int64_t[]){6}, TD_I64, TD_CPU), TD_I32));
    ASSERT_OK(td_confusion_update_tensors(cm, 3, pt, tt));
    for (int i = 0; i < 9; i++) ASSERT_EQ_INT(cm[i], 2 * want[i]);
    td_scope_end();
}

TEST(metrics_errors) {
    td_scope_begin();
    int64_t target[3] = {0, 3, 1}, pred[3] = {0, 1, 1}, cm[9] = {0};
    ASSERT_ERROR(td_confusion_update(cm, 3, pred, target, 3), TD_ERR_INDEX, "true label 3 at position 1");
    for (int i = 0; i < 9; i++) ASSERT_EQ_INT(cm[i], 0);
    int64_t neg[3] = {0, -1, 0};
    ASSERT_ERROR(td_confusion_update(cm, 3, neg, pred, 3), TD_ERR_INDEX, "predicted label -1");
    td_tensor *f = ASSERT_TENSOR(td_zeros(1, (int64_t[]){3}, TD_F32, TD_CPU));
    td_tensor *i2 = ASSERT_TENSOR(td_zeros(1, (int64_t[]){2}, TD_I64, TD_CPU));
    td_tensor *i3 = ASSERT_TENSOR(td_zeros(1, (int64_t[]){3}, TD_I64, TD_CPU));
    ASSERT_ERROR(td_confusion_update_tensors(cm, 3, f, i3), TD_ERR_DTYPE, "must be integers");
    ASSERT_ERROR(td_confusion_update_tensors(cm, 3, i2, i3), TD_ERR_SHAPE, "2 predictions but 3 targets");
    ASSERT_ERROR(td_metrics_from_confusion(cm, 0, &(td_metrics){0}), TD_ERR_MISUSE, "num_classes >= 1");
    td_scope_end();
}

TEST(early_stopping_min) {
    td_scope_begin();
    td_early_stopping es;
    ASSERT_OK(td_early_stopping_init(&es, 2, 0.1, TD_MODE_MIN));
    double v[5] = {1.0, 0.95, 0.85, 0.84, 0.86};
    bool want_stop[5] = {false, false, false, false, true}, want_imp[5] = {true, false, true, false, false};
    for (int i = 0; i < 5; i++) {
        ASSERT_EQ_INT(td_early_stopping_step(&es, v[i]), want_stop[i]);
        ASSERT_EQ_INT(es.improved, want_imp[i]);
    }
    ASSERT_NEAR(es.best, 0.85, 0);
    ASSERT_EQ_INT(es.best_epoch, 2);
    ASSERT_OK(td_early_stopping_init(&es, 0, 0, TD_MODE_MIN)); /* patience 0: first non-improvement stops */
    ASSERT(!td_early_stopping_step(&es, 1));
    ASSERT(!td_early_stopping_step(&es, 0.5));
    ASSERT(td_early_stopping_step(&es, 0.5));
    ASSERT_ERROR(td_early_stopping_init(&es, -1, 0, TD_MODE_MIN), TD_ERR_MISUSE, "patience >= 0");
    ASSERT_ERROR(td_early_stopping_init(&es, 1, -0.5, TD_MODE_MIN), TD_ERR_MISUSE, "min_delta >= 0");
    td_scope_end();
}

TEST(early_stopping_max_nan) {
    td_scope_begin();
    td_early_stopping es;
    ASSERT_OK(td_early_stopping_init(&es, 3, 0, TD_MODE_MAX));
    ASSERT(!td_early_stopping_step(&es, 0.5));
    ASSERT(!td_early_stopping_step(&es, 0.7));
    ASSERT(!td_early_stopping_step(&es, 0.7)); /* equal is not better */
    ASSERT_EQ_INT(es.wait, 1);
    ASSERT(td_early_stopping_step(&es, NAN));
    ASSERT_NEAR(es.best, 0.7, 0);
    ASSERT_EQ_INT(es.best_epoch, 1);
    td_scope_end();
}

TEST(log_csv) {
    td_scope_begin();
    const char *p = test_tmp_path("log.csv");
    const char *keys[3] = {"epoch", "loss", "acc"};
    td_metric_log *log;
    ASSERT_OK(td_metric_log_open(p, TD_LOG_CSV, &log));
    ASSERT_OK(td_metric_log_write(log, 3, keys, (double[]){1, 0.25, 0.875}));
    size_t n;
    char *text = (char *)test_read_file(p, &n); /* flushed at once */
    ASSERT(!strcmp(text, "epoch,loss,acc\n1,0.25,0.875\n"));
    free(text);
    td_metric_log_close(log);
    ASSERT_OK(td_metric_log_open(p, TD_LOG_CSV, &log)); /* append: header kept, not repeated */
    ASSERT_OK(td_metric_log_write(log, 3, keys, (double[]){2, 0.1, 0.9}));
    const char *other[3] = {"epoch", "loss", "f1"};
    ASSERT_ERROR(td_metric_log_write(log, 3, other, (double[]){3, 0, 0}), TD_ERR_MISUSE, "differ from the header");
    td_metric_log_close(log);
    text = (char *)test_read_file(p, &n);
    ASSERT(!strcmp(text, "epoch,loss,acc\n1,0.25,0.875\n2,0.10000000000000001,0.90000000000000002\n"));
    free(text);
    ASSERT_ERROR(td_metric_log_open("/nonexistent_td/log.csv", TD_LOG_CSV, &log), TD_ERR_IO, "nonexistent_td");
    td_scope_end();
}

TEST(log_jsonl) {
    td_scope_begin();
    const char *p = test_tmp_path("log.jsonl");
    const char *keys[3] = {"epoch", "loss", "acc"};
    td_metric_log *log;
    ASSERT_OK(td_metric_log_open(p, TD_LOG_JSONL, &log));
    ASSERT_OK(td_metric_log_write(log, 3, keys, (double[]){1, 0.25, NAN}));
    ASSERT_OK(td_metric_log_write(log, 2, keys, (double[]){2, -1.5e-7}));
    td_metric_log_close(log);
    size_t n;
    char *text = (char *)test_read_file(p, &n);
    ASSERT(!strcmp(text, "{\"epoch\":1,\"loss\":0.25,\"acc\":null}\n{\"epoch\":2,\"loss\":-1.4999999999999999e-7}\n"));
    free(text);
    td_scope_end();
}

TEST_MAIN(TESTS)
