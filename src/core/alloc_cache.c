/*
** td_alloc_cache (include/trident/backend.h): the size-class caching allocator
** that a backend puts over its raw alloc/free. Requests round up to a class (8
** per power of two above min_block: at most 1/8 of a block unused); a freed block waits in the free list of
** its class and stream tag until an allocation of that class and tag takes it.
*/
#include <stdlib.h>

#include "spin_lock.h"
#include "trident/backend.h"

#define MAX_CLASSES 256
#define PER_OCTAVE  8 /* classes per power of two */

/* The free lists of one stream tag. */
typedef struct tag_lists {
    uintptr_t stream;
    bool kept; /* td_alloc_cache_keep: not emptied */
    td_alloc_block *free[MAX_CLASSES];
    struct tag_lists *next;
} tag_lists;

struct td_alloc_cache {
    td_alloc_cache_config cfg;
    int min_log2;
    td__spin_lock lock;    /* its sections: list and counter updates (and emptying, which is rare) */
    tag_lists *tags;       /* one per tag seen, the most recently added first */
    size_t cached;         /* bytes waiting in free lists */
    td_memory_stats stats; /* allocated counts capacities; reserved = allocated + cached */
};

td_status td_alloc_cache_new(const td_alloc_cache_config *cfg, td_alloc_cache **out) {
    if (!out) return td_error_set(TD_ERR_MISUSE, "td_alloc_cache_new: out is NULL");
    *out = NULL;
    if (!cfg || !cfg->raw_alloc || !cfg->raw_free || cfg->header_size < sizeof(td_alloc_block) || cfg->classes < 1 ||
        cfg->classes > MAX_CLASSES || !cfg->align || !cfg->min_block || (cfg->min_block & (cfg->min_block - 1)))
        return td_error_set(TD_ERR_MISUSE, "td_alloc_cache_new: a NULL or inconsistent configuration");
    td_alloc_cache *c = calloc(1, sizeof *c);
    if (!c) return td_error_set(TD_ERR_OOM, "td_alloc_cache_new: out of host memory");
    c->cfg = *cfg;
    c->min_log2 = __builtin_ctzll((unsigned long long)cfg->min_block);
    td__spin_init(&c->lock);
    *out = c;
    return TD_OK;
}

/* Size class of n bytes and the capacity it rounds up to; -1 (capacity rounded to align) if uncached. */
static int size_class(const td_alloc_cache *c, size_t n, size_t *capacity) {
    const td_alloc_cache_config *g = &c->cfg;
    *capacity = (n + g->align - 1) / g->align * g->align;
    if (g->disabled) return -1;
    if (n <= g->min_block) {
        *capacity = g->min_block;
        return 0;
    }
    int log2 = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^log2 < n <= 2^(log2+1) */
    size_t base = (size_t)1 << log2, step = base / PER_OCTAVE;
    size_t part = (n - base + step - 1) / step; /* 1..PER_OCTAVE */
    int k = (log2 - c->min_log2) * PER_OCTAVE + (int)part;
    *capacity = base + part * step;
    if (k < g->classes) return k;
    if (!g->large_round) return -1;
    *capacity = (n + g->large_round - 1) / g->large_round * g->large_round;
    return g->classes - 1;
}

static tag_lists *lists_of(td_alloc_cache *c, uintptr_t stream, bool add) {
    for (tag_lists *t = c->tags; t; t = t->next)
        if (t->stream == stream) return t;
    tag_lists *t = add ? calloc(1, sizeof *t) : NULL;
    if (t) {
        t->stream = stream;
        t->next = c->tags;
        c->tags = t;
    }
    return t;
}

static void take(td_alloc_cache *c, td_alloc_block *b, size_t nbytes) {
    b->size = nbytes;
    b->next_free = NULL;
    c->stats.allocated += b->capacity;
    c->stats.alloc_count++;
    if (c->stats.allocated > c->stats.peak_allocated) c->stats.peak_allocated = c->stats.allocated;
}

/* A cached block for nbytes of class k with tag stream, taken out of its list; NULL if none. Under lock. */
static td_alloc_block *reuse_locked(td_alloc_cache *c, int k, size_t capacity, size_t nbytes, uintptr_t stream) {
    tag_lists *t = k >= 0 ? lists_of(c, stream, false) : NULL;
    td_alloc_block **pb = t ? &t->free[k] : NULL;
    for (; pb && *pb; pb = &(*pb)->next_free)
        if ((*pb)->capacity >= capacity) break; /* only the last class holds blocks of many sizes */
    if (!pb || !*pb) return NULL;
    td_alloc_block *b = *pb;
    *pb = b->next_free;
    c->cached -= b->capacity;
    take(c, b, nbytes);
    return b;
}

static void free_block(td_alloc_cache *c, td_alloc_block *b) {
    c->cfg.raw_free(c->cfg.ctx, b->ptr);
    free(b);
}

/* Give the cached blocks back to raw_free: those of every tag (all), else all but the kept tags'. Returns the
** bytes given back. Under lock. */
static size_t empty_locked(td_alloc_cache *c, bool all) {
    size_t freed = 0;
    for (tag_lists *t = c->tags; t; t = t->next) {
        if (t->kept && !all) continue;
        for (int k = 0; k < c->cfg.classes; k++) {
            for (td_alloc_block *b = t->free[k], *next; b; b = next) {
                next = b->next_free;
                freed += b->capacity;
                free_block(c, b);
            }
            t->free[k] = NULL;
        }
    }
    c->cached -= freed;
    return freed;
}

td_alloc_block *td_alloc_cache_reuse(td_alloc_cache *c, size_t nbytes, uintptr_t stream) {
    size_t capacity;
    int k = size_class(c, nbytes, &capacity);
    td__spin_acquire(&c->lock);
    td_alloc_block *b = reuse_locked(c, k, capacity, nbytes, stream);
    td__spin_release(&c->lock);
    return b;
}

td_alloc_block *td_alloc_cache_alloc(td_alloc_cache *c, size_t nbytes, uintptr_t stream) {
    td_alloc_block *b = td_alloc_cache_reuse(c, nbytes, stream);
    if (b) return b;
    size_t capacity;
    int k = size_class(c, nbytes, &capacity);
    b = calloc(1, c->cfg.header_size);
    void *ptr = b ? c->cfg.raw_alloc(c->cfg.ctx, capacity ? capacity : c->cfg.align) : NULL;
    td__spin_acquire(&c->lock);
    if (b && !ptr && c->cfg.oom_retry && empty_locked(c, false)) {
        c->stats.oom_retries++;
        ptr = c->cfg.raw_alloc(c->cfg.ctx, capacity ? capacity : c->cfg.align);
    }
    if (ptr) {
        *b = (td_alloc_block){.ptr = ptr, .capacity = capacity, .size_class = k, .stream = stream};
        take(c, b, nbytes);
    }
    td__spin_release(&c->lock);
    if (!ptr) {
        free(b);
        return NULL;
    }
    return b;
}

void td_alloc_cache_release(td_alloc_cache *c, td_alloc_block *b, uintptr_t stream) {
    if (!b) return;
    td__spin_acquire(&c->lock);
    c->stats.allocated -= b->capacity;
    bool keep = b->size_class >= 0 && (!c->cfg.cache_limit || c->cached + b->capacity <= c->cfg.cache_limit);
    tag_lists *t = keep ? lists_of(c, stream, true) : NULL;
    if (t) {
        b->stream = stream;
        b->next_free = t->free[b->size_class];
        t->free[b->size_class] = b;
        c->cached += b->capacity;
    }
    td__spin_release(&c->lock);
    if (!t) free_block(c, b);
}

td_status td_alloc_cache_keep(td_alloc_cache *c, uintptr_t stream) {
    td__spin_acquire(&c->lock);
    tag_lists *t = lists_of(c, stream, true);
    if (t) t->kept = true;
    td__spin_release(&c->lock);
    return t ? TD_OK : td_error_set(TD_ERR_OOM, "td_alloc_cache_keep: out of host memory");
}

void td_alloc_cache_retag(td_alloc_cache *c, uintptr_t from, uintptr_t to) {
    td__spin_acquire(&c->lock);
    tag_lists *src = from != to ? lists_of(c, from, false) : NULL, *dst = src ? lists_of(c, to, false) : NULL;
    if (src && !dst) { /* from's lists become to's */
        src->stream = to;
        src->kept = false;
        for (int k = 0; k < c->cfg.classes; k++)
            for (td_alloc_block *b = src->free[k]; b; b = b->next_free) b->stream = to;
    } else if (src) { /* moved into to's lists; from's are dropped */
        for (int k = 0; k < c->cfg.classes; k++)
            for (td_alloc_block *b = src->free[k], *next; b; b = next) {
                next = b->next_free;
                b->stream = to;
                b->next_free = dst->free[k];
                dst->free[k] = b;
            }
        for (tag_lists **p = &c->tags; *p; p = &(*p)->next)
            if (*p == src) {
                *p = src->next;
                break;
            }
        free(src);
    }
    td__spin_release(&c->lock);
}

void td_alloc_cache_set_oom_retry(td_alloc_cache *c, bool on) {
    td__spin_acquire(&c->lock);
    c->cfg.oom_retry = on;
    td__spin_release(&c->lock);
}

void td_alloc_cache_empty(td_alloc_cache *c) {
    td__spin_acquire(&c->lock);
    empty_locked(c, false);
    td__spin_release(&c->lock);
}

void td_alloc_cache_stats(td_alloc_cache *c, bool reset_peak, td_memory_stats *out) {
    td__spin_acquire(&c->lock);
    c->stats.reserved = c->stats.allocated + c->cached;
    *out = c->stats;
    if (reset_peak) c->stats.peak_allocated = c->stats.allocated;
    td__spin_release(&c->lock);
}

void td_alloc_cache_destroy(td_alloc_cache *c) {
    if (!c) return;
    empty_locked(c, true);
    for (tag_lists *t = c->tags, *next; t; t = next) {
        next = t->next;
        free(t);
    }
    free(c);
}
