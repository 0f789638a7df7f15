/*
** safetensors writer (see include/trident/io.h for the layout).
**
** Layout, as the reference serializer makes it: tensors sorted by descending
** dtype alignment rank, then by name (bytewise); each tensor's data follows the
** previous one; the compact JSON header is padded with spaces to a multiple of
** 8 so that the buffer starts 8-byte aligned.
**
** Atomicity: write <path>.tmp.XXXXXX in the same directory, fsync it, rename it
** over path, then fsync the directory so the rename itself is durable.
*/
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safetensors.h"
#include "trident/io.h"

typedef struct entry {
    const char *name;
    td_tensor *t;
    const st_dtype *dt;
    uint64_t nbytes, begin;
} entry;

static int entry_cmp(const void *pa, const void *pb) {
    const entry *a = pa, *b = pb;
    if (a->dt->rank != b->dt->rank) return b->dt->rank - a->dt->rank;
    return strcmp(a->name, b->name);
}

/* The JSON header (malloc'd, space-padded to a multiple of 8) for the sorted
** entries, or NULL with an error. */
static char *build_header(const td_named_tensors *list, const entry *e, int64_t n, size_t *len) {
    json_t *root = json_object();
    bool ok = root != NULL;
    int64_t n_meta = td_named_tensors_meta_len(list);
    if (ok && n_meta > 0) {
        json_t *meta = json_object();
        ok = meta && !json_object_set_new(root, "__metadata__", meta);
        for (int64_t i = 0; ok && i < n_meta; i++) {
            const char *k = td_named_tensors_meta_key(list, i);
            ok = !json_object_set_new(meta, k, json_string(td_named_tensors_meta(list, k)));
        }
    }
    for (int64_t i = 0; ok && i < n; i++) {
        json_t *shape = json_array(), *offs = json_array(), *info = json_object();
        ok = shape && offs && info;
        for (int d = 0; ok && d < td_ndim(e[i].t); d++)
            ok = !json_array_append_new(shape, json_integer(td_size(e[i].t, d)));
        ok = ok && !json_array_append_new(offs, json_integer((json_int_t)e[i].begin)) &&
             !json_array_append_new(offs, json_integer((json_int_t)(e[i].begin + e[i].nbytes))) &&
             !json_object_set_new(info, "dtype", json_string(e[i].dt->name)) &&
             !json_object_set(info, "shape", shape) && !json_object_set(info, "data_offsets", offs) &&
             !json_object_set(root, e[i].name, info);
        json_decref(shape);
        json_decref(offs);
        json_decref(info);
    }
    char *s = ok ? json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    if (!s) return TD_ERR(TD_ERR_OOM, "safetensors: cannot build the JSON header (out of memory)"), NULL;
    size_t l = strlen(s), pad = (8 - l % 8) % 8;
    char *h = realloc(s, l + pad + 1);
    if (!h) {
        free(s);
        return TD_ERR(TD_ERR_OOM, "safetensors: out of host memory for the header"), NULL;
    }
    memset(h + l, ' ', pad);
    h[l + pad] = 0;
    *len = l + pad;
    return h;
}

static td_status write_all(int fd, const void *p, size_t n, const char *path) {
    const char *c = p;
    while (n) {
        ssize_t w = td__fault_write_hit() ? (errno = ENOSPC, -1) : write(fd, c, n); /* TRIDENT_FAULT_WRITE */
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return TD_ERR(TD_ERR_IO, "safetensors: cannot write %s: %s", TD_QUOTE(path), strerror(errno));
        c += w;
        n -= (size_t)w;
    }
    return TD_OK;
}

/* The whole file into fd: length, header, each tensor's row-major bytes. */
static td_status write_file(int fd, const char *tmp, const char *header, size_t hlen, const entry *e, int64_t n) {
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i)); /* little-endian */
    td_status st = write_all(fd, len8, 8, tmp);
    if (st == TD_OK) st = write_all(fd, header, hlen, tmp);
    for (int64_t i = 0; st == TD_OK && i < n; i++) {
        if (!e[i].nbytes) continue;
        void *buf = malloc(e[i].nbytes);
        if (!buf)
            return TD_ERR(TD_ERR_OOM, "safetensors: no host memory to stage %s (%llu bytes)", TD_QUOTE(e[i].name),
                          (unsigned long long)e[i].nbytes);
        st = td_copy_to_host(e[i].t, buf, e[i].nbytes, td_tensor_dtype(e[i].t));
        if (st == TD_OK) st = write_all(fd, buf, e[i].nbytes, tmp);
        free(buf);
    }
    if (st == TD_OK && fsync(fd) != 0)
        st = TD_ERR(TD_ERR_IO, "safetensors: fsync %s: %s", TD_QUOTE(tmp), strerror(errno));
    return st;
}

static td_status fsync_dir_of(const char *path) {
    char *copy = strdup(path);
    if (!copy) return TD_ERR(TD_ERR_OOM, "safetensors: out of host memory");
    const char *dir = dirname(copy);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    td_status st = TD_OK;
    if (dfd < 0 || fsync(dfd) != 0)
        st = TD_ERR(TD_ERR_IO, "safetensors: fsync directory %s: %s", TD_QUOTE(dir), strerror(errno));
    if (dfd >= 0) close(dfd);
    free(copy);
    return st;
}

td_status td_safetensors_save(const char *path, const td_named_tensors *list) {
    if (!path || !list) return TD_ERR(TD_ERR_MISUSE, "safetensors_save: path or list is NULL");
    int64_t n = td_named_tensors_len(list);
    entry *e = calloc((size_t)(n ? n : 1), sizeof *e);
    if (!e) return TD_ERR(TD_ERR_OOM, "safetensors_save: out of host memory");
    td_status st = TD_OK;
    for (int64_t i = 0; i < n && st == TD_OK; i++) {
        e[i].name = td_named_tensors_name(list, i);
        e[i].t = td_named_tensors_at(list, i);
        if (!td__check_arg(e[i].t, "safetensors_save", e[i].name))
            st = td_last_status();
        else {
            e[i].dt = st_dtype_of(td_tensor_dtype(e[i].t));
            e[i].nbytes = (uint64_t)td_numel(e[i].t) * td_dtype_size(td_tensor_dtype(e[i].t));
        }
    }
    if (st != TD_OK) return free(e), st;
    qsort(e, (size_t)n, sizeof *e, entry_cmp);
    for (int64_t i = 1; i < n; i++) e[i].begin = e[i - 1].begin + e[i - 1].nbytes;
    size_t hlen = 0;
    char *header = build_header(list, e, n, &hlen);
    if (!header) return free(e), td_last_status();

    size_t plen = strlen(path);
    char *tmp = malloc(plen + 16);
    int fd = -1;
    if (!tmp)
        st = TD_ERR(TD_ERR_OOM, "safetensors_save: out of host memory");
    else {
        memcpy(tmp, path, plen);
        memcpy(tmp + plen, ".tmp.XXXXXX", 12);
        fd = mkstemp(tmp);
        if (fd < 0) st = TD_ERR(TD_ERR_IO, "safetensors: cannot create %s: %s", TD_QUOTE(tmp), strerror(errno));
    }
    if (st == TD_OK && fchmod(fd, 0644) != 0)
        st = TD_ERR(TD_ERR_IO, "safetensors: chmod %s: %s", TD_QUOTE(tmp), strerror(errno));
    if (st == TD_OK) st = write_file(fd, tmp, header, hlen, e, n);
    if (fd >= 0 && close(fd) != 0 && st == TD_OK)
        st = TD_ERR(TD_ERR_IO, "safetensors: close %s: %s", TD_QUOTE(tmp), strerror(errno));
    if (st == TD_OK && rename(tmp, path) != 0)
        st = TD_ERR(TD_ERR_IO, "safetensors: cannot rename %s to %s: %s", TD_QUOTE(tmp), TD_QUOTE(path),
                    strerror(errno));
    if (st != TD_OK && fd >= 0) unlink(tmp);
    if (st == TD_OK) st = fsync_dir_of(path);
    free(tmp);
    free(header);
    free(e);
    return st;
}
