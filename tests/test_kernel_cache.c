/*
** The shared kernel cache (include/trident/backend.h, "Kernel cache"): hits
** from memory and from disk, misses, corrupt or truncated files treated as
** misses and replaced, and the in-memory size limit.
*/
#include <stdlib.h>
#include <string.h>

#include "runner.h"
#include "test_util.h"
#include "trident/backend.h"

/* clang-format off */
#define TESTS(X) X(hit_and_miss) X(disk_hit) X(corrupt_file) X(size_limit) X(disk_off)
/* clang-format on */

/* A cache of test entries under a fresh $XDG_CACHE_HOME. */
static td_kernel_cache *cache_new(size_t max_entries, bool (*validate)(const void *, size_t)) {
    setenv("XDG_CACHE_HOME", test_tmp_dir(), 1);
    unsetenv("TD_TEST_CACHE_OFF");
    static const td_kernel_cache_config base = {
        .name = "test", .suffix = ".bin", .version = 3, .disable_env = "TD_TEST_CACHE_OFF"};
    td_kernel_cache_config cfg = base;
    cfg.max_entries = max_entries, cfg.validate = validate;
    td_kernel_cache *c = NULL;
    ASSERT_OK(td_kernel_cache_new(&cfg, &c));
    ASSERT(c);
    return c;
}

static const char *entry_path(uint64_t key) {
    char name[64];
    snprintf(name, sizeof name, "trident/test-%016llx.bin", (unsigned long long)key);
    return test_tmp_path(name);
}

/* Whether get(key) hits with exactly the bytes of want. */
static bool holds(td_kernel_cache *c, uint64_t key, const char *want) {
    void *data = NULL;
    size_t size = 0;
    bool hit = td_kernel_cache_get(c, key, &data, &size);
    bool same = hit && size == strlen(want) && !memcmp(data, want, size);
    ASSERT(hit == (data != NULL));
    free(data);
    return same;
}

static bool file_exists(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}

TEST(hit_and_miss) {
    td_kernel_cache *c = cache_new(4, NULL);
    uint64_t k1 = td_kernel_cache_hash(TD_KERNEL_CACHE_SEED, "a", 1), k2 = td_kernel_cache_hash(k1, "b", 1);
    ASSERT(k1 != k2 && k1 == td_kernel_cache_hash(TD_KERNEL_CACHE_SEED, "a", 1));
    ASSERT(!holds(c, k1, "")); /* miss */
    ASSERT_OK(td_kernel_cache_put(c, k1, "first", 5));
    ASSERT(holds(c, k1, "first"));
    ASSERT(!holds(c, k2, "first"));
    ASSERT_OK(td_kernel_cache_put(c, k1, "again", 5)); /* replaced */
    ASSERT(holds(c, k1, "again"));
    ASSERT(file_exists(entry_path(k1)));
    td_kernel_cache_free(c);
    td_kernel_cache_free(NULL);
    td_kernel_cache_config bad = {.name = "a/b", .suffix = ".bin", .max_entries = 1};
    ASSERT(td_kernel_cache_new(&bad, &c) == TD_ERR_MISUSE);
    ASSERT(c == NULL);
}

/* A new cache (another process, in effect) finds the entry on disk. */
TEST(disk_hit) {
    td_kernel_cache *c = cache_new(4, NULL);
    ASSERT_OK(td_kernel_cache_put(c, 42, "kernel image", 12));
    td_kernel_cache_free(c);
    c = cache_new(4, NULL);
    ASSERT(holds(c, 42, "kernel image"));
    td_kernel_cache_free(c);
}

/* Rejects data whose first byte is 'X', as a format check beyond the checksum would. */
static bool no_x(const void *data, size_t size) { return size == 0 || *(const char *)data != 'X'; }

/* a damaged cache file: `n` bytes at `bytes` */
typedef struct damaged {
    const char *what;
    const void *bytes;
    size_t n;
} damaged;

/* a copy of the n bytes at p in `size` bytes, zeros after them */
static unsigned char *zero_padded(const void *p, size_t n, size_t size) {
    unsigned char *b = calloc(1, size);
    ASSERT(b);
    memcpy(b, p, n);
    return b;
}

/* Each damaged file is a miss, deleted; the put that follows writes it anew. */
TEST(corrupt_file) {
    td_kernel_cache *c = cache_new(4, no_x);
    ASSERT_OK(td_kernel_cache_put(c, 7, "good data", 9));
    const char *path = entry_path(7);
    size_t n;
    unsigned char *good = test_read_file(path, &n);
    ASSERT(n > 9);
    unsigned char *flipped = zero_padded(good, n, n), *longer = zero_padded(good, n, n + 1);
    flipped[n - 2] ^= 0x40;
    const damaged bad[] = {{"empty", good, 0},
                           {"truncated to part of its header", good, 16},
                           {"truncated by one byte", good, n - 1},
                           {"one bit flipped", flipped, n},
                           {"a byte too long", longer, n + 1}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        printf("  %s\n", bad[i].what);
        td_kernel_cache_free(c);
        c = cache_new(4, no_x); /* nothing in memory: the file is read */
        test_write_file(path, bad[i].bytes, bad[i].n);
        ASSERT(!holds(c, 7, "good data"));
        ASSERT(!file_exists(path));
        ASSERT_OK(td_kernel_cache_put(c, 7, "good data", 9));
        size_t m;
        unsigned char *now = test_read_file(path, &m);
        ASSERT(m == n && !memcmp(now, good, n));
        free(now);
    }
    /* a well-formed file whose data validate() refuses */
    ASSERT_OK(td_kernel_cache_put(c, 8, "Xbad", 4));
    td_kernel_cache_free(c);
    c = cache_new(4, no_x);
    ASSERT(!holds(c, 8, "Xbad"));
    ASSERT(!file_exists(entry_path(8)));
    td_kernel_cache_free(c);
    free(longer);
    free(flipped);
    free(good);
}

/* At 2 entries, the least recently used one is dropped (seen with the disk emptied by hand). */
TEST(size_limit) {
    td_kernel_cache *c = cache_new(2, NULL);
    ASSERT_OK(td_kernel_cache_put(c, 1, "one", 3));
    ASSERT_OK(td_kernel_cache_put(c, 2, "two", 3));   /* [2, 1] */
    ASSERT(holds(c, 1, "one"));                       /* [1, 2] */
    ASSERT_OK(td_kernel_cache_put(c, 3, "three", 5)); /* [3, 1]: 2 dropped */
    for (uint64_t k = 1; k <= 3; k++) remove(entry_path(k));
    ASSERT(holds(c, 1, "one"));
    ASSERT(holds(c, 3, "three"));
    ASSERT(!holds(c, 2, "two"));
    td_kernel_cache_free(c);
}

/* disable_env=0 keeps the cache in memory only. */
TEST(disk_off) {
    td_kernel_cache *c = cache_new(2, NULL);
    setenv("TD_TEST_CACHE_OFF", "0", 1);
    ASSERT_OK(td_kernel_cache_put(c, 9, "nine", 4));
    ASSERT(!file_exists(entry_path(9)));
    ASSERT(holds(c, 9, "nine"));
    char dir[64];
    ASSERT(!td_kernel_cache_dir("TD_TEST_CACHE_OFF", dir, sizeof dir));
    unsetenv("TD_TEST_CACHE_OFF");
    td_kernel_cache_free(c);
}

TEST_MAIN(TESTS)
