/*
** safetensors reader, following the reference reader's rules (see
** include/trident/io.h): every violation is TD_ERR_FORMAT naming the file and
** the problem, before any tensor is allocated. Below, path is the file's name
** already quoted (td_error_quote); names and keys are quoted where used.
**
** Phases: 1. length prefix and header bounds; 2. parse the JSON (duplicates
** rejected); 3. per-entry checks (dtype, shape, offsets); 4. sort by offsets
** and check contiguity, sizes and the exact file size; 5. read the data.
*/
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safetensors.h"
#include "trident/io.h"

typedef struct rentry {
    const char *name; /* borrowed from the JSON tree */
    const st_dtype *dt;
    int ndim;
    int64_t shape[TD_MAX_DIMS];
    uint64_t begin, end;
} rentry;

static int rentry_cmp(const void *pa, const void *pb) {
    const rentry *a = pa, *b = pb;
    if (a->begin != b->begin) return a->begin < b->begin ? -1 : 1;
    return a->end < b->end ? -1 : a->end > b->end;
}

#define BAD(...) TD_ERR(TD_ERR_FORMAT, __VA_ARGS__)

static td_status read_at(int fd, void *dst, size_t n, uint64_t off, const char *path) {
    char *c = dst;
    while (n) {
        ssize_t r = pread(fd, c, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return TD_ERR(TD_ERR_IO, "safetensors: cannot read %s: %s", path, strerror(errno));
        if (r == 0) return BAD("safetensors: %s ended early at byte %llu", path, (unsigned long long)off);
        c += r, n -= (size_t)r, off += (uint64_t)r;
    }
    return TD_OK;
}

static td_status parse_meta(const char *path, json_t *meta, td_named_tensors *out) {
    if (!json_is_object(meta)) return BAD("safetensors: %s: __metadata__ is not an object", path);
    const char *k;
    json_t *v;
    json_object_foreach(meta, k, v) {
        if (!json_is_string(v))
            return BAD("safetensors: %s: __metadata__ value of %s is not a string", path, TD_QUOTE(k));
        if (!*k) return BAD("safetensors: %s: __metadata__ has an empty key", path);
        td_status st = td_named_tensors_set_meta(out, k, json_string_value(v));
        if (st != TD_OK) return st;
    }
    return TD_OK;
}

/* Phase 3: one tensor entry's dtype, shape and offsets. */
static td_status parse_entry(const char *path, const char *name, json_t *info, rentry *e) {
    e->name = name;
    if (!*name) return BAD("safetensors: %s: a tensor has an empty name", path);
    if (!json_is_object(info)) return BAD("safetensors: %s: entry %s is not an object", path, TD_QUOTE(name));
    json_t *dt = json_object_get(info, "dtype"), *shape = json_object_get(info, "shape"),
           *offs = json_object_get(info, "data_offsets");
    if (!json_is_string(dt)) return BAD("safetensors: %s: tensor %s has no dtype string", path, TD_QUOTE(name));
    e->dt = st_dtype_by_name(json_string_value(dt));
    if (!e->dt)
        return BAD("safetensors: %s: tensor %s has unknown dtype %s", path, TD_QUOTE(name),
                   TD_QUOTE(json_string_value(dt)));
    if (!json_is_array(shape)) return BAD("safetensors: %s: tensor %s has no shape array", path, TD_QUOTE(name));
    if (json_array_size(shape) > TD_MAX_DIMS)
        return BAD("safetensors: %s: tensor %s has %zu dims, more than %d", path, TD_QUOTE(name),
                   json_array_size(shape), TD_MAX_DIMS);
    e->ndim = (int)json_array_size(shape);
    for (int d = 0; d < e->ndim; d++) {
        json_t *s = json_array_get(shape, (size_t)d);
        if (!json_is_integer(s) || json_integer_value(s) < 0)
            return BAD("safetensors: %s: tensor %s has a shape entry that is not a non-negative integer", path,
                       TD_QUOTE(name));
        e->shape[d] = json_integer_value(s);
    }
    if (!json_is_array(offs) || json_array_size(offs) != 2 || !json_is_integer(json_array_get(offs, 0)) ||
        !json_is_integer(json_array_get(offs, 1)) || json_integer_value(json_array_get(offs, 0)) < 0 ||
        json_integer_value(json_array_get(offs, 1)) < 0)
        return BAD("safetensors: %s: tensor %s needs data_offsets [begin, end] of non-negative integers", path,
                   TD_QUOTE(name));
    e->begin = (uint64_t)json_integer_value(json_array_get(offs, 0));
    e->end = (uint64_t)json_integer_value(json_array_get(offs, 1));
    return TD_OK;
}

/* Phase 4: contiguity from 0, byte sizes with overflow checks; *end gets the
** buffer length the header describes. */
static td_status check_layout(const char *path, rentry *e, size_t n, uint64_t *end) {
    qsort(e, n, sizeof *e, rentry_cmp);
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (e[i].begin != at)
            return BAD("safetensors: %s: tensor %s begins at byte %llu, expected %llu (%s)", path, TD_QUOTE(e[i].name),
                       (unsigned long long)e[i].begin, (unsigned long long)at,
                       e[i].begin > at ? "a gap before it" : "it overlaps the previous tensor");
        if (e[i].end < e[i].begin)
            return BAD("safetensors: %s: tensor %s ends (%llu) before it begins (%llu)", path, TD_QUOTE(e[i].name),
                       (unsigned long long)e[i].end, (unsigned long long)e[i].begin);
        uint64_t bytes = (uint64_t)e[i].dt->bytes;
        for (int d = 0; d < e[i].ndim; d++)
            if (__builtin_mul_overflow(bytes, (uint64_t)e[i].shape[d], &bytes))
                return BAD("safetensors: %s: the size of tensor %s overflows 64 bits", path, TD_QUOTE(e[i].name));
        if (e[i].end - e[i].begin != bytes) {
            char s[160];
            return BAD("safetensors: %s: tensor %s spans %llu bytes but %s %s needs %llu", path, TD_QUOTE(e[i].name),
                       (unsigned long long)(e[i].end - e[i].begin), td__shape_str(e[i].ndim, e[i].shape, s, sizeof s),
                       e[i].dt->name, (unsigned long long)bytes);
        }
        at = e[i].end;
    }
    *end = at;
    return TD_OK;
}

/* Phase 5: each tensor's bytes into a new tensor on dev, appended to out. */
static td_status read_tensors(int fd, const char *path, uint64_t base, const rentry *e, size_t n, td_device dev,
                              td_named_tensors *out) {
    for (size_t i = 0; i < n; i++) {
        if (e[i].dt->dtype == TD_DTYPE_COUNT)
            return TD_ERR(TD_ERR_UNSUPPORTED, "safetensors: %s: tensor %s has dtype %s, which Trident lacks", path,
                          TD_QUOTE(e[i].name), e[i].dt->name);
        size_t nbytes = (size_t)(e[i].end - e[i].begin);
        void *buf = malloc(nbytes ? nbytes : 1);
        if (!buf)
            return TD_ERR(TD_ERR_OOM, "safetensors: %s: no host memory for tensor %s (%zu bytes)", path,
                          TD_QUOTE(e[i].name), nbytes);
        td_status st = read_at(fd, buf, nbytes, base + e[i].begin, path);
        td_tensor *t = st == TD_OK ? td_keep(td_from_data(buf, e[i].ndim, e[i].shape, e[i].dt->dtype, dev)) : NULL;
        free(buf);
        if (st == TD_OK && !t) st = td_last_status();
        if (st == TD_OK) st = td_named_tensors_add(out, e[i].name, t);
        td_release(t);
        if (st != TD_OK) return st;
    }
    return TD_OK;
}

static td_status load_fd(int fd, const char *path, td_device dev, td_named_tensors *out) {
    /* phase 1: the length prefix and the header's bounds */
    struct stat sb;
    if (fstat(fd, &sb) != 0) return TD_ERR(TD_ERR_IO, "safetensors: cannot stat %s: %s", path, strerror(errno));
    uint64_t size = (uint64_t)sb.st_size;
    if (size < 8)
        return BAD("safetensors: %s is %llu bytes, too short for the 8-byte header length", path,
                   (unsigned long long)size);
    unsigned char len8[8];
    td_status st = read_at(fd, len8, 8, 0, path);
    if (st != TD_OK) return st;
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)len8[i] << (8 * i);
    if (hlen > ST_MAX_HEADER)
        return BAD("safetensors: %s: header length %llu exceeds the %llu-byte limit", path, (unsigned long long)hlen,
                   ST_MAX_HEADER);
    if (8 + hlen > size)
        return BAD("safetensors: %s: header length %llu runs past the end of the %llu-byte file", path,
                   (unsigned long long)hlen, (unsigned long long)size);
    char *header = malloc(hlen + 1);
    if (!header)
        return TD_ERR(TD_ERR_OOM, "safetensors: no host memory for a %llu-byte header", (unsigned long long)hlen);
    st = read_at(fd, header, hlen, 8, path);
    if (st == TD_OK && (hlen == 0 || header[0] != '{'))
        st = BAD("safetensors: %s: header does not start with '{'", path);
    /* phase 2: JSON */
    json_error_t jerr;
    json_t *root = st == TD_OK ? json_loadb(header, hlen, JSON_REJECT_DUPLICATES, &jerr) : NULL;
    free(header);
    if (st == TD_OK && !root)
        st = BAD("safetensors: %s: invalid JSON header at column %d: %s", path, jerr.column, jerr.text);
    if (st == TD_OK && !json_is_object(root)) st = BAD("safetensors: %s: header is not a JSON object", path);
    /* phase 3 */
    size_t n = st == TD_OK ? json_object_size(root) : 0, k = 0;
    rentry *e = calloc(n ? n : 1, sizeof *e);
    if (st == TD_OK && !e) st = TD_ERR(TD_ERR_OOM, "safetensors: out of host memory");
    const char *key;
    json_t *val;
    if (st == TD_OK) json_object_foreach(root, key, val) {
            st = !strcmp(key, "__metadata__") ? parse_meta(path, val, out) : parse_entry(path, key, val, &e[k++]);
            if (st != TD_OK) break;
        }
    /* phase 4 */
    uint64_t end = 0;
    if (st == TD_OK) st = check_layout(path, e, k, &end);
    if (st == TD_OK && (end > size || 8 + hlen + end != size))
        st = BAD("safetensors: %s is %llu bytes, but its header describes %llu (8 + %llu header + %llu data)", path,
                 (unsigned long long)size, (unsigned long long)(8 + hlen + end), (unsigned long long)hlen,
                 (unsigned long long)end);
    /* phase 5 */
    if (st == TD_OK) st = read_tensors(fd, path, 8 + hlen, e, k, dev, out);
    free(e);
    json_decref(root);
    return st;
}

td_status td_safetensors_load(const char *path, td_device dev, td_named_tensors **out) {
    if (!out) return TD_ERR(TD_ERR_MISUSE, "safetensors_load: out is NULL");
    *out = NULL;
    if (!path) return TD_ERR(TD_ERR_MISUSE, "safetensors_load: path is NULL");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return TD_ERR(TD_ERR_IO, "safetensors: cannot open %s: %s", TD_QUOTE(path), strerror(errno));
    td_named_tensors *list = td_named_tensors_new();
    td_status st = list ? load_fd(fd, TD_QUOTE(path), dev, list) : td_last_status();
    close(fd);
    if (st != TD_OK) {
        td_named_tensors_free(list);
        return st;
    }
    *out = list;
    return TD_OK;
}
