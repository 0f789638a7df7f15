/*
** The kernel cache that the backends' run-time compilers share (GLSL to SPIR-V,
** NVRTC): key hashing, the in-memory list with its size limit, and the disk
** files with their header. The format and the rules are in
** include/trident/backend.h, "Kernel cache (shared service)".
*/
#define _GNU_SOURCE
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trident/backend.h"

#define FILE_MAGIC   0x434B4454u /* "TDKC" */
#define FILE_VERSION 1u
#define DATA_MAX     ((uint64_t)1 << 30) /* no compiled kernel comes near */

/* The disk file's header, followed by size bytes of data. */
typedef struct file_header {
    uint32_t magic;   /* FILE_MAGIC */
    uint32_t version; /* FILE_VERSION */
    uint32_t owner;   /* td_kernel_cache_config.version */
    uint32_t pad;
    uint64_t key; /* as in the file name */
    uint64_t size;
    uint64_t checksum; /* td_kernel_cache_hash of the data */
} file_header;

typedef struct entry {
    uint64_t key;
    void *data;
    size_t size;
    struct entry *next;
} entry;

struct td_kernel_cache {
    char name[32], suffix[16], disable_env[64];
    uint32_t version;
    size_t max_entries;
    bool (*validate)(const void *data, size_t size);
    pthread_mutex_t lock;
    entry *head; /* most recently used first */
};

uint64_t td_kernel_cache_hash(uint64_t h, const void *data, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)data)[i]) * 0x100000001B3ull;
    return h;
}

/* mkdir -p of dir (each '/' is put back). */
static void mkdirs(char *dir) {
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        mkdir(dir, 0755);
        *p = '/';
    }
    mkdir(dir, 0755);
}

bool td_kernel_cache_dir(const char *disable_env, char *dir, size_t n) {
    const char *off = disable_env ? getenv(disable_env) : NULL;
    if (off && !strcmp(off, "0")) return false;
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int w;
    if (xdg && *xdg)
        w = snprintf(dir, n, "%s/trident", xdg);
    else if (home && *home)
        w = snprintf(dir, n, "%s/.cache/trident", home);
    else
        return false;
    if (w < 0 || (size_t)w >= n) return false;
    mkdirs(dir);
    return true;
}

static bool name_ok(const char *s, size_t max) {
    if (!s || !*s || strlen(s) >= max) return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_') return false;
    return true;
}

td_status td_kernel_cache_new(const td_kernel_cache_config *cfg, td_kernel_cache **out) {
    if (out) *out = NULL;
    if (!cfg || !out) return td_error_set(TD_ERR_MISUSE, "kernel cache: NULL argument");
    if (!name_ok(cfg->name, 32) || !cfg->suffix || strlen(cfg->suffix) >= 16 || strchr(cfg->suffix, '/') ||
        (cfg->disable_env && strlen(cfg->disable_env) >= 64))
        return td_error_set(TD_ERR_MISUSE, "kernel cache: bad name, suffix or environment variable");
    td_kernel_cache *c = calloc(1, sizeof *c);
    if (!c) return td_error_set(TD_ERR_OOM, "kernel cache: out of host memory");
    snprintf(c->name, sizeof c->name, "%s", cfg->name);
    snprintf(c->suffix, sizeof c->suffix, "%s", cfg->suffix);
    if (cfg->disable_env) snprintf(c->disable_env, sizeof c->disable_env, "%s", cfg->disable_env);
    c->version = cfg->version;
    c->max_entries = cfg->max_entries ? cfg->max_entries : 1;
    c->validate = cfg->validate;
    pthread_mutex_init(&c->lock, NULL);
    *out = c;
    return TD_OK;
}

static void entry_free(entry *e) {
    free(e->data);
    free(e);
}

void td_kernel_cache_free(td_kernel_cache *c) {
    if (!c) return;
    while (c->head) {
        entry *e = c->head;
        c->head = e->next;
        entry_free(e);
    }
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static bool file_path(const td_kernel_cache *c, uint64_t key, char *path, size_t n) {
    char dir[3800];
    if (!td_kernel_cache_dir(c->disable_env[0] ? c->disable_env : NULL, dir, sizeof dir)) return false;
    int w = snprintf(path, n, "%s/%s-%016llx%s", dir, c->name, (unsigned long long)key, c->suffix);
    return w > 0 && (size_t)w < n;
}

/* The data of file f (len bytes) if every check passes, else NULL. */
static void *file_data(const td_kernel_cache *c, FILE *f, long len, uint64_t key, size_t *size) {
    file_header h;
    if (len < (long)sizeof h || fread(&h, sizeof h, 1, f) != 1) return NULL;
    if (h.magic != FILE_MAGIC || h.version != FILE_VERSION || h.owner != c->version || h.key != key ||
        h.size > DATA_MAX || h.size != (uint64_t)len - sizeof h)
        return NULL;
    void *data = malloc(h.size ? (size_t)h.size : 1);
    if (!data || fread(data, 1, (size_t)h.size, f) != (size_t)h.size ||
        td_kernel_cache_hash(TD_KERNEL_CACHE_SEED, data, (size_t)h.size) != h.checksum ||
        (c->validate && !c->validate(data, (size_t)h.size))) {
        free(data);
        return NULL;
    }
    *size = (size_t)h.size;
    return data;
}

/* key's entry read from disk, or NULL; a file that does not check out is deleted. */
static entry *disk_read(const td_kernel_cache *c, uint64_t key) {
    char path[4096];
    if (!file_path(c, key, path, sizeof path)) return NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    long len = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    size_t size = 0;
    void *data = len >= 0 && fseek(f, 0, SEEK_SET) == 0 ? file_data(c, f, len, key, &size) : NULL;
    fclose(f);
    entry *e = data ? calloc(1, sizeof *e) : NULL;
    if (!e) {
        free(data);
        unlink(path); /* corrupt, truncated or stale: the put that follows the compile writes it anew */
        return NULL;
    }
    *e = (entry){.key = key, .data = data, .size = size};
    return e;
}

static void disk_write(const td_kernel_cache *c, const entry *e) {
    char path[4096], tmp[4200];
    if (!file_path(c, e->key, path, sizeof path)) return;
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
    file_header h = {.magic = FILE_MAGIC,
                     .version = FILE_VERSION,
                     .owner = c->version,
                     .key = e->key,
                     .size = e->size,
                     .checksum = td_kernel_cache_hash(TD_KERNEL_CACHE_SEED, e->data, e->size)};
    FILE *f = fopen(tmp, "wb");
    bool ok = f && fwrite(&h, sizeof h, 1, f) == 1 && fwrite(e->data, 1, e->size, f) == e->size;
    if (f) ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) unlink(tmp);
}

/* Put e at the front, then drop entries beyond max_entries from the tail (the least recently used). */
static void push_front(td_kernel_cache *c, entry *e) {
    e->next = c->head;
    c->head = e;
    entry **p = &c->head;
    for (size_t i = 0; *p && i < c->max_entries; i++) p = &(*p)->next;
    while (*p) {
        entry *drop = *p;
        *p = drop->next;
        entry_free(drop);
    }
}

bool td_kernel_cache_get(td_kernel_cache *c, uint64_t key, void **data, size_t *size) {
    if (data) *data = NULL;
    if (!c || !data || !size) return false;
    pthread_mutex_lock(&c->lock);
    entry *e = NULL;
    for (entry **p = &c->head; *p; p = &(*p)->next)
        if ((*p)->key == key) {
            e = *p;
            *p = e->next; /* a hit moves to the front */
            break;
        }
    if (!e) e = disk_read(c, key);
    if (e) {
        push_front(c, e);
        *data = malloc(e->size ? e->size : 1);
        if (*data) {
            memcpy(*data, e->data, e->size);
            *size = e->size;
        }
    }
    pthread_mutex_unlock(&c->lock);
    return *data != NULL;
}

td_status td_kernel_cache_put(td_kernel_cache *c, uint64_t key, const void *data, size_t size) {
    if (!c || (!data && size)) return td_error_set(TD_ERR_MISUSE, "kernel cache: NULL argument");
    entry *e = calloc(1, sizeof *e);
    if (e) e->data = malloc(size ? size : 1);
    if (!e || !e->data) {
        free(e);
        return td_error_set(TD_ERR_OOM, "kernel cache: out of host memory");
    }
    if (size) memcpy(e->data, data, size);
    e->size = size;
    e->key = key;
    pthread_mutex_lock(&c->lock);
    for (entry **p = &c->head; *p; p = &(*p)->next)
        if ((*p)->key == key) { /* replaced */
            entry *old = *p;
            *p = old->next;
            entry_free(old);
            break;
        }
    disk_write(c, e);
    push_front(c, e);
    pthread_mutex_unlock(&c->lock);
    return TD_OK;
}
