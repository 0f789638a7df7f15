/*
** IDX reader (MNIST, Fashion-MNIST), plain or gzip'd, through zlib's gzread,
** which passes plain files through unchanged.
**
** Format (http://yann.lecun.com/exdb/mnist/): bytes 0-1 zero, byte 2 the
** type (0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32, 0x0D f32, 0x0E f64), byte 3 the
** number of dims; then each dim as a big-endian u32; then the elements,
** big-endian, row-major.
*/
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "core/internal.h"
#include "trident/data.h"

#define IDX_MAX_BYTES  ((uint64_t)1 << 40) /* refuse absurd payloads before reading */
#define IDX_CHUNK      (1u << 20)
#define IDX_FIRST_STEP ((uint64_t)64 << 10) /* the payload buffer's first size */
#define IDX_MAX_STEP   ((uint64_t)64 << 20) /* its largest growth */

typedef struct idx_type {
    int code, bytes;
    td_dtype raw; /* dtype of a TD_IDX_RAW read */
    const char *name;
} idx_type;

static const idx_type idx_types[] = {
    {0x08, 1, TD_U8, "u8"},   {0x09, 1, TD_I32, "i8"},  {0x0B, 2, TD_I32, "i16"},
    {0x0C, 4, TD_I32, "i32"}, {0x0D, 4, TD_F32, "f32"}, {0x0E, 8, TD_F64, "f64"},
};

#define BAD(...) TD_ERR(TD_ERR_FORMAT, __VA_ARGS__)

/* Read exactly n bytes; a short read is truncation, a zlib error corruption. */
static td_status read_exact(gzFile f, const char *path, void *dst, uint64_t n, const char *what) {
    unsigned char *p = dst;
    uint64_t got = 0;
    while (got < n) {
        unsigned chunk = n - got < IDX_CHUNK ? (unsigned)(n - got) : IDX_CHUNK;
        int r = gzread(f, p + got, chunk);
        if (r < 0) {
            int zerr;
            const char *msg = gzerror(f, &zerr);
            return BAD("idx: %s is corrupt (%s) while reading the %s", path, msg, what);
        }
        if (r == 0) break;
        got += (uint64_t)r;
    }
    if (got < n)
        return BAD("idx: %s is truncated: the %s needs %llu bytes, only %llu remain", path, what, (unsigned long long)n,
                   (unsigned long long)got);
    return TD_OK;
}

/* Decode n big-endian elements of type t from src into dst (of dtype t->raw). */
static void decode(const idx_type *t, const unsigned char *src, uint64_t n, void *dst) {
    for (uint64_t i = 0; i < n; i++) {
        const unsigned char *e = src + i * (uint64_t)t->bytes;
        uint64_t u = 0;
        for (int b = 0; b < t->bytes; b++) u = u << 8 | e[b];
        switch (t->code) {
        case 0x08: ((uint8_t *)dst)[i] = (uint8_t)u; break;
        case 0x09: ((int32_t *)dst)[i] = (int8_t)(uint8_t)u; break;
        case 0x0B: ((int32_t *)dst)[i] = (int16_t)(uint16_t)u; break;
        case 0x0C: ((int32_t *)dst)[i] = (int32_t)(uint32_t)u; break;
        case 0x0D: {
            uint32_t w = (uint32_t)u;
            memcpy((float *)dst + i, &w, 4);
            break;
        }
        default: memcpy((double *)dst + i, &u, 8); break;
        }
    }
}

/* Parse header and payload of an open file into a tensor for mode; path is
** the file's name, quoted for messages. */
static td_status load_gz(gzFile f, const char *path, td_idx_mode mode, td_tensor **out) {
    unsigned char head[4];
    td_status st = read_exact(f, path, head, 4, "magic number");
    if (st != TD_OK) return st;
    const idx_type *t = NULL;
    for (size_t i = 0; i < sizeof idx_types / sizeof idx_types[0]; i++)
        if (idx_types[i].code == head[2]) t = &idx_types[i];
    unsigned magic = (unsigned)head[0] << 24 | (unsigned)head[1] << 16 | (unsigned)head[2] << 8 | head[3];
    int ndim = head[3];
    if (head[0] || head[1] || !t || ndim < 1 || ndim > TD_MAX_DIMS)
        return BAD("idx: %s has magic number 0x%08x, not an IDX one: expected 0x0000TTNN with type TT in 08..0E "
                   "and NN in 1..%d dims (0x00000801 labels, 0x00000803 images)",
                   path, magic, TD_MAX_DIMS);
    unsigned char dims[4 * TD_MAX_DIMS];
    if ((st = read_exact(f, path, dims, 4 * (uint64_t)ndim, "dimension sizes")) != TD_OK) return st;
    int64_t shape[TD_MAX_DIMS];
    uint64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        shape[d] = (int64_t)dims[4 * d] << 24 | dims[4 * d + 1] << 16 | dims[4 * d + 2] << 8 | dims[4 * d + 3];
        if (__builtin_mul_overflow(n, (uint64_t)shape[d], &n) || n * (uint64_t)t->bytes > IDX_MAX_BYTES) {
            char s[160];
            return BAD("idx: %s has implausible sizes %s", path, td__shape_str(d + 1, shape, s, sizeof s));
        }
    }
    if (mode == TD_IDX_LABELS_I64 && (ndim != 1 || t->code != 0x08))
        return BAD("idx: %s has magic number 0x%08x (%d-D %s), not a label file's 0x00000801 (1-D u8)", path, magic,
                   ndim, t->name);
    if (mode == TD_IDX_IMAGES_F32 && (ndim < 2 || t->code != 0x08))
        return BAD("idx: %s has magic number 0x%08x (%d-D %s), not an image file's 0x000008NN (u8, NN >= 2 dims)", path,
                   magic, ndim, t->name);
    /* The payload grows as it arrives, in steps that double from IDX_FIRST_STEP
    ** up to IDX_MAX_STEP, so a tiny corrupt file cannot demand a large
    ** allocation up front. */
    uint64_t nbytes = n * (uint64_t)t->bytes, have = 0, cap = 0;
    unsigned char *raw = NULL;
    while (st == TD_OK && have < nbytes) {
        uint64_t step = have < IDX_FIRST_STEP ? IDX_FIRST_STEP : have > IDX_MAX_STEP ? IDX_MAX_STEP : have;
        uint64_t want = nbytes - have < step ? nbytes - have : step;
        if (have + want > cap) {
            cap = have + want > 2 * cap ? have + want : 2 * cap;
            if (cap > nbytes) cap = nbytes;
            unsigned char *r = realloc(raw, cap);
            if (!r)
                st = TD_ERR(TD_ERR_OOM, "idx: out of host memory reading %s", path);
            else
                raw = r;
        }
        if (st == TD_OK) st = read_exact(f, path, raw + have, want, "payload");
        have += want;
    }
    unsigned char extra;
    if (st == TD_OK) {
        int r = gzread(f, &extra, 1);
        if (r > 0)
            st = BAD("idx: %s has more bytes than the %llu its header (magic number 0x%08x, %s %s) describes", path,
                     (unsigned long long)nbytes, magic, t->name, td__shape_str(ndim, shape, (char[160]){0}, 160));
        else if (r < 0)
            st = BAD("idx: %s is corrupt (%s) at its end", path, gzerror(f, &(int){0}));
    }
    td_tensor *res = NULL;
    if (st == TD_OK) {
        int64_t flat[2] = {shape[0], shape[0] ? (int64_t)(n / (uint64_t)shape[0]) : 0};
        td_dtype dt = mode == TD_IDX_RAW ? t->raw : mode == TD_IDX_LABELS_I64 ? TD_I64 : TD_F32;
        res = mode == TD_IDX_IMAGES_F32 ? td__alloc(2, flat, dt, TD_CPU) : td__alloc(ndim, shape, dt, TD_CPU);
        if (!res) st = td_last_status();
    }
    if (st == TD_OK) {
        void *dst = td__host_data(res);
        if (mode == TD_IDX_RAW)
            decode(t, raw, n, dst);
        else if (mode == TD_IDX_LABELS_I64)
            for (uint64_t i = 0; i < n; i++) ((int64_t *)dst)[i] = raw[i];
        else
            for (uint64_t i = 0; i < n; i++) ((float *)dst)[i] = (float)raw[i] / 255.0f;
        *out = td__scope_add(res);
    }
    free(raw);
    return st;
}

td_status td_idx_load(const char *path, td_idx_mode mode, td_tensor **out) {
    if (!out) return TD_ERR(TD_ERR_MISUSE, "idx_load: out is NULL");
    *out = NULL;
    if (!path) return TD_ERR(TD_ERR_MISUSE, "idx_load: path is NULL");
    if ((unsigned)mode > TD_IDX_LABELS_I64) return TD_ERR(TD_ERR_MISUSE, "idx_load: unknown mode %d", (int)mode);
    errno = 0;
    gzFile f = gzopen(path, "rb");
    if (!f)
        return TD_ERR(TD_ERR_IO, "idx: cannot open %s: %s", TD_QUOTE(path), errno ? strerror(errno) : "out of memory");
    td_status st = load_gz(f, TD_QUOTE(path), mode, out);
    gzclose(f);
    return st;
}

/* "<dir>/<name>.gz" when it exists, else "<dir>/<name>". */
static void pick_path(char *buf, size_t n, const char *dir, const char *name) {
    snprintf(buf, n, "%s/%s.gz", dir, name);
    FILE *f = fopen(buf, "rb");
    if (f)
        fclose(f);
    else
        snprintf(buf, n, "%s/%s", dir, name);
}

td_status td_mnist_load(const char *dir, bool train, bool as_f32, td_tensor **x, td_tensor **y) {
    if (!x || !y || !dir) return TD_ERR(TD_ERR_MISUSE, "mnist_load: dir, x or y is NULL");
    *x = *y = NULL;
    char pi[4096], pl[4096];
    pick_path(pi, sizeof pi, dir, train ? "train-images-idx3-ubyte" : "t10k-images-idx3-ubyte");
    pick_path(pl, sizeof pl, dir, train ? "train-labels-idx1-ubyte" : "t10k-labels-idx1-ubyte");
    td_tensor *xi = NULL, *yl = NULL;
    td_status st = td_idx_load(pi, as_f32 ? TD_IDX_IMAGES_F32 : TD_IDX_RAW, &xi);
    if (st == TD_OK) st = td_idx_load(pl, TD_IDX_LABELS_I64, &yl);
    if (st == TD_OK && td_tensor_dtype(xi) != TD_F32 && td_tensor_dtype(xi) != TD_U8)
        st = TD_ERR(TD_ERR_FORMAT, "mnist: %s does not hold u8 images", TD_QUOTE(pi));
    if (st == TD_OK && td_size(xi, 0) != td_size(yl, 0))
        st = TD_ERR(TD_ERR_FORMAT, "mnist: %s has %lld images but %s has %lld labels", TD_QUOTE(pi),
                    (long long)td_size(xi, 0), TD_QUOTE(pl), (long long)td_size(yl, 0));
    if (st != TD_OK) {
        td_release(td_keep(xi));
        td_release(td_keep(yl));
        return st;
    }
    *x = xi;
    *y = yl;
    return TD_OK;
}
