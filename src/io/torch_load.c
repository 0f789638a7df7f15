/*
** td_torch_load: a torch.save file (the zip format of torch >= 1.6) into a
** named-tensor list, without running code. The archive holds
** <dir>/data.pkl (the pickled object), <dir>/data/<key> (each storage's raw
** little-endian bytes) and optionally <dir>/byteorder; torch_zip.c reads the
** container and torch_unpickle.c the pickle, and this file walks the result:
** dicts and lists flatten to dotted names ("model.fc1.weight", "layers.0.w"),
** each tensor is gathered from its storage by its offset and strides into a
** new contiguous tensor, and numbers and strings become metadata.
*/
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "torch_format.h"
#include "trident/io.h"

#define BAD(...)     TD_ERR(TD_ERR_FORMAT, __VA_ARGS__)
#define MAX_NAME     1024
#define MAX_VISITS   (1 << 20)            /* values walked, shared ones once per path */
#define MAX_ENTRIES  (1 << 14)            /* tensors + metadata entries (each name is checked against all before it) */
#define BUDGET_SLACK ((uint64_t)64 << 20) /* bytes the tensors may take beyond 4x the file (see add_tensor) */

typedef struct loaded {
    const char *key;
    uint8_t *bytes;
} loaded;

typedef struct load_ctx {
    tz_archive z;
    const char *path; /* quoted */
    char prefix[256]; /* the archive's top folder with its '/' */
    td_device dev;
    td_named_tensors *out;
    uint64_t budget; /* bytes the tensors may still take: 4x the file + BUDGET_SLACK */
    int64_t visits;  /* values walked: shared references (the memo) could make a DAG of 2^depth paths */
    loaded *st;      /* storages read so far */
    int64_t nst, capst;
} load_ctx;

/* The bytes of storage s (read once, then cached), checked against its numel. */
static td_status storage_bytes(load_ctx *c, const tp_value *s, const uint8_t **bytes) {
    for (int64_t i = 0; i < c->nst; i++)
        if (!strcmp(c->st[i].key, s->s)) return *bytes = c->st[i].bytes, TD_OK;
    char name[512];
    if ((size_t)snprintf(name, sizeof name, "%sdata/%s", c->prefix, s->s) >= sizeof name)
        return BAD("torch: %s: storage key %s is too long", c->path, TD_QUOTE(s->s));
    const tz_entry *e = tz_find(&c->z, name);
    if (!e) return BAD("torch: %s: the pickle refers to storage %s, which the archive lacks", c->path, TD_QUOTE(name));
    uint64_t want;
    if (__builtin_mul_overflow((uint64_t)s->i, (uint64_t)td_dtype_size(s->dtype), &want) || e->usize != want)
        return BAD("torch: %s: storage %s holds %llu bytes, but %" PRId64 " elements of %s need %llu", c->path,
                   TD_QUOTE(name), (unsigned long long)e->usize, s->i, s->storage_type, (unsigned long long)want);
    if (c->nst == c->capst) {
        int64_t cap = c->capst ? 2 * c->capst : 16;
        loaded *g = realloc(c->st, (size_t)cap * sizeof *g);
        if (!g) return TD_ERR(TD_ERR_OOM, "torch: out of host memory");
        c->st = g, c->capst = cap;
    }
    uint8_t *b = malloc(want ? (size_t)want : 1);
    if (!b)
        return TD_ERR(TD_ERR_OOM, "torch: no host memory for storage %s (%llu bytes)", TD_QUOTE(name),
                      (unsigned long long)want);
    td_status st = tz_read(&c->z, e, b);
    if (st != TD_OK) return free(b), st;
    c->st[c->nst++] = (loaded){s->s, b};
    *bytes = b;
    return TD_OK;
}

/* Tensor t: bounds-checked against its storage, gathered row-major. */
static td_status add_tensor(load_ctx *c, const char *name, const tp_value *t) {
    const tp_value *s = t->storage;
    if (s->dtype == TD_DTYPE_COUNT)
        return TD_ERR(TD_ERR_UNSUPPORTED, "torch: %s: tensor %s is a torch.%s, a dtype Trident lacks", c->path,
                      TD_QUOTE(name), s->storage_type);
    int64_t numel = 1, last = t->i; /* last: the highest element index the view reads */
    bool ovf = false;
    for (int d = 0; d < t->ndim; d++) {
        int64_t reach;
        ovf = ovf || __builtin_mul_overflow(numel, t->size[d], &numel);
        if (t->size[d] > 0)
            ovf = ovf || __builtin_mul_overflow(t->size[d] - 1, t->stride[d], &reach) ||
                  __builtin_add_overflow(last, reach, &last);
    }
    if (!ovf && numel > 0 && last >= s->i) ovf = true;
    if (ovf)
        return BAD("torch: %s: tensor %s (offset %" PRId64 ") reads past the end of its storage of %" PRId64
                   " elements",
                   c->path, TD_QUOTE(name), t->i, s->i);
    /* Views may repeat a storage (tied weights) or expand it (stride 0), so the
    ** tensors' bytes are not bounded by the file's: a few bytes of pickle could
    ** ask for terabytes. A legitimate file's tensors take at most a few times its
    ** storages; more is refused. */
    size_t es = td_dtype_size(s->dtype);
    uint64_t bytes;
    if (__builtin_mul_overflow((uint64_t)numel, (uint64_t)es, &bytes) || bytes > c->budget)
        return BAD(
            "torch: %s: tensor %s needs %llu bytes, past the reader's limit of 4x the file size + 64 MiB for all "
            "tensors (views repeating or expanding storages)",
            c->path, TD_QUOTE(name), (unsigned long long)bytes);
    c->budget -= bytes;
    const uint8_t *src = NULL;
    td_status st = numel ? storage_bytes(c, s, &src) : TD_OK;
    if (st != TD_OK) return st;
    uint8_t *dst = malloc(numel ? (size_t)numel * es : 1);
    if (!dst) return TD_ERR(TD_ERR_OOM, "torch: no host memory for tensor %s", TD_QUOTE(name));
    int64_t idx[TD_MAX_DIMS] = {0};
    for (int64_t k = 0; k < numel; k++) { /* idx: the row-major index of element k */
        int64_t off = t->i;
        for (int d = 0; d < t->ndim; d++) off += idx[d] * t->stride[d];
        memcpy(dst + (size_t)k * es, src + (size_t)off * es, es);
        for (int d = t->ndim - 1; d >= 0 && ++idx[d] == t->size[d]; d--) idx[d] = 0;
    }
    td_tensor *x = td_keep(td_from_data(dst, t->ndim, t->size, s->dtype, c->dev));
    free(dst);
    st = x ? td_named_tensors_add(c->out, name, x) : td_last_status();
    td_release(x);
    return st;
}

/* prefix + "." + key (or key alone at the top) into buf. */
static td_status join(load_ctx *c, const char *prefix, const char *key, char *buf) {
    int n = *prefix ? snprintf(buf, MAX_NAME, "%s.%s", prefix, key) : snprintf(buf, MAX_NAME, "%s", key);
    if (n < 0 || n >= MAX_NAME)
        return BAD("torch: %s: a name under %s is over %d bytes", c->path, TD_QUOTE(prefix), MAX_NAME);
    return TD_OK;
}

static td_status walk(load_ctx *c, const char *name, const tp_value *v, int depth) {
    if (++c->visits > MAX_VISITS)
        return BAD("torch: %s: the object expands to more than %d values (references shared through the memo)", c->path,
                   MAX_VISITS);
    if (td_named_tensors_len(c->out) + td_named_tensors_meta_len(c->out) >= MAX_ENTRIES)
        return BAD("torch: %s: more than %d tensors and values (the reader's limit)", c->path, MAX_ENTRIES);
    if (depth > TP_MAX_DEPTH)
        return BAD("torch: %s: the object nests deeper than %d levels at %s", c->path, TP_MAX_DEPTH, TD_QUOTE(name));
    char buf[MAX_NAME], val[64];
    const char *top = *name ? name : "tensor";
    switch (v->kind) {
    case TP_TENSOR: return add_tensor(c, top, v);
    case TP_NONE: return TD_OK;
    case TP_BOOL: return td_named_tensors_set_meta(c->out, top, v->i ? "true" : "false");
    case TP_INT: snprintf(val, sizeof val, "%" PRId64, v->i); return td_named_tensors_set_meta(c->out, top, val);
    case TP_FLOAT: snprintf(val, sizeof val, "%.17g", v->f); return td_named_tensors_set_meta(c->out, top, val);
    case TP_STR:
        if (strlen(v->s) != v->len) return BAD("torch: %s: string %s holds a NUL byte", c->path, TD_QUOTE(name));
        return td_named_tensors_set_meta(c->out, top, v->s);
    case TP_TUPLE:
    case TP_LIST:
        for (int64_t i = 0; i < v->n; i++) {
            snprintf(val, sizeof val, "%" PRId64, i);
            td_status st = join(c, name, val, buf);
            if (st == TD_OK) st = walk(c, buf, v->items[i], depth + 1);
            if (st != TD_OK) return st;
        }
        return TD_OK;
    case TP_DICT:
        for (int64_t i = 0; i + 1 < v->n; i += 2) {
            const tp_value *k = v->items[i];
            if (k->kind == TP_INT)
                snprintf(val, sizeof val, "%" PRId64, k->i);
            else if (k->kind != TP_STR || strlen(k->s) != k->len || !k->len)
                return BAD("torch: %s: a dict under %s has a key that is not a non-empty string or an integer", c->path,
                           TD_QUOTE(top));
            td_status st = join(c, name, k->kind == TP_INT ? val : k->s, buf);
            if (st == TD_OK) st = walk(c, buf, v->items[i + 1], depth + 1);
            if (st != TD_OK) return st;
        }
        return TD_OK;
    default:
        return BAD("torch: %s: %s is a %s, not a tensor, container, number or string", c->path, TD_QUOTE(top),
                   v->kind == TP_STORAGE ? "bare storage" : "global");
    }
}

/* The archive's top folder: the entry "<dir>/data.pkl". */
static td_status find_pickle(load_ctx *c, const tz_entry **pkl) {
    *pkl = NULL;
    for (int64_t i = 0; i < c->z.n; i++) {
        const char *n = c->z.e[i].name, *slash = strchr(n, '/');
        if (slash && !strcmp(slash, "/data.pkl") && (size_t)(slash - n) + 2 < sizeof c->prefix) {
            memcpy(c->prefix, n, (size_t)(slash - n) + 1);
            c->prefix[slash - n + 1] = 0;
            *pkl = &c->z.e[i];
            break;
        }
    }
    if (!*pkl) return BAD("torch: %s: the zip archive has no <dir>/data.pkl (not a torch.save file)", c->path);
    char name[300];
    snprintf(name, sizeof name, "%sbyteorder", c->prefix);
    const tz_entry *bo = tz_find(&c->z, name);
    char order[8] = {0};
    if (bo && bo->usize < sizeof order) {
        td_status st = tz_read(&c->z, bo, order);
        if (st != TD_OK) return st;
    }
    if (bo && strcmp(order, "little"))
        return TD_ERR(TD_ERR_UNSUPPORTED, "torch: %s: the storages are not little-endian", c->path);
    return TD_OK;
}

static td_status load(load_ctx *c, const char *path) {
    td_status st = tz_open(path, c->path, &c->z);
    c->budget = 4 * c->z.size + BUDGET_SLACK;
    const tz_entry *pkl = NULL;
    if (st == TD_OK) st = find_pickle(c, &pkl);
    if (st == TD_OK && pkl->usize > TP_MAX_PICKLE)
        st = BAD("torch: %s: data.pkl is %llu bytes, over the %llu-byte limit", c->path, (unsigned long long)pkl->usize,
                 (unsigned long long)TP_MAX_PICKLE);
    uint8_t *data = st == TD_OK ? malloc(pkl->usize ? (size_t)pkl->usize : 1) : NULL;
    if (st == TD_OK && !data) st = TD_ERR(TD_ERR_OOM, "torch: out of host memory");
    if (st == TD_OK) st = tz_read(&c->z, pkl, data);
    tp_arena *arena = NULL;
    tp_value *root = NULL;
    if (st == TD_OK) st = tp_unpickle(data, (size_t)pkl->usize, c->path, &arena, &root);
    free(data);
    if (st == TD_OK) st = walk(c, "", root, 0);
    tp_free(arena);
    return st;
}

td_status td_torch_load(const char *path, td_device dev, td_named_tensors **out) {
    if (!out) return TD_ERR(TD_ERR_MISUSE, "torch_load: out is NULL");
    *out = NULL;
    if (!path) return TD_ERR(TD_ERR_MISUSE, "torch_load: path is NULL");
    char qpath[TD_QUOTE_SIZE];
    load_ctx c = {.path = td_error_quote(path, qpath, sizeof qpath), .dev = dev, .z = {.fd = -1}};
    c.out = td_named_tensors_new();
    td_status st = c.out ? load(&c, path) : td_last_status();
    tz_close(&c.z);
    for (int64_t i = 0; i < c.nst; i++) free(c.st[i].bytes);
    free(c.st);
    if (st != TD_OK) {
        td_named_tensors_free(c.out);
        return st;
    }
    *out = c.out;
    return TD_OK;
}

td_status td_weights_load(const char *path, td_device dev, td_named_tensors **out) {
    if (!out) return TD_ERR(TD_ERR_MISUSE, "weights_load: out is NULL");
    *out = NULL;
    if (!path) return TD_ERR(TD_ERR_MISUSE, "weights_load: path is NULL");
    unsigned char magic[4] = {0};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return td_safetensors_load(path, dev, out); /* its message names the path and the error */
    ssize_t got = read(fd, magic, sizeof magic);
    close(fd);
    if (got == 4 && !memcmp(magic, "PK\x03\x04", 4)) return td_torch_load(path, dev, out);
    return td_safetensors_load(path, dev, out);
}
