/*
** The DataLoader: seeded per-epoch permutations, batching, and worker threads
** that build whole batches ahead into a bounded ring.
**
** Queue protocol (all under lock): workers claim batch numbers in order
** (next_claim) but only while next_claim < next_fetch + cap, so at most cap
** batches exist ahead of the consumer; batch b lives in slot b % cap. The
** consumer waits for its slot to be ready, takes it, and advances next_fetch,
** which frees a claim. A worker that finds stop set releases what it built and
** exits. Batch contents depend only on (seed, epoch, b), so any number of
** workers hands out the same batches as 0 workers.
*/
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "trident/data.h"

#define MAX_WORKERS          64
#define SHUFFLE_EPOCH_STRIDE ((uint64_t)1 << 40) /* Philox counters per epoch */

typedef struct slot {
    bool ready;
    td_status status;
    char message[512]; /* the worker's td_last_error() when status != TD_OK */
    td_tensor *fields[TD_DATA_MAX_FIELDS];
} slot;

struct td_dataloader {
    td_dataset *ds;
    td_dataloader_opts o;
    int n_fields;
    int64_t n_samples, n_batches;
    int64_t *perm; /* this epoch's sample order */
    int64_t epoch;
    bool running; /* an epoch was started and not ended */
    /* queue */
    pthread_mutex_t lock;
    pthread_cond_t space, ready;
    slot *slots;
    int cap;
    int64_t next_claim, next_fetch;
    bool stop;
    pthread_t threads[MAX_WORKERS];
    int n_threads;
};

/* Uniform integer in [0, m) from the 64-bit value (hi:lo): floor(u * m / 2^64). */
static int64_t draw(uint64_t seed, uint64_t counter, int64_t m) {
    uint32_t w[4];
    td_philox4x32(seed, counter, w);
    uint64_t u = (uint64_t)w[0] | (uint64_t)w[1] << 32;
    return (int64_t)(((unsigned __int128)u * (uint64_t)m) >> 64);
}

/* perm = Fisher-Yates shuffle of [0, n) for (seed, epoch); see data.h. Also
** the order of td_dist_sampler_indices (src/dist/sampler.c). */
void td__data_perm(int64_t *perm, int64_t n, bool shuffle, uint64_t seed, int64_t epoch) {
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    if (!shuffle) return;
    uint64_t base = (uint64_t)epoch * SHUFFLE_EPOCH_STRIDE, k = 0;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = draw(seed, base + k++, i + 1);
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

/* Build batch b into s (fields owned +1, or an error with its message). */
static void build_batch(td_dataloader *dl, int64_t b, slot *s) {
    int64_t first = b * dl->o.batch_size;
    int64_t n = dl->n_samples - first < dl->o.batch_size ? dl->n_samples - first : dl->o.batch_size;
    memset(s->fields, 0, sizeof s->fields);
    td_clear_error();
    td_scope_begin();
    td_status st = td_dataset_get_batch(dl->ds, n, dl->perm + first, s->fields);
    if (st == TD_OK && dl->o.transform) {
        td_tensor *old[TD_DATA_MAX_FIELDS];
        memcpy(old, s->fields, sizeof old);
        st = dl->o.transform(dl->o.transform_user, s->fields, dl->n_fields, dl->epoch, b);
        for (int k = 0; k < dl->n_fields && st == TD_OK; k++)
            if (!s->fields[k]) st = TD_ERR(TD_ERR_MISUSE, "dataloader: the transform left field %d NULL", k);
        if (st != TD_OK) memcpy(s->fields, old, sizeof old); /* old ones are still in the scope */
    }
    for (int k = 0; k < dl->n_fields; k++) td_keep(s->fields[k]);
    td_scope_end();
    s->status = st;
    if (st != TD_OK) {
        snprintf(s->message, sizeof s->message, "%s", td_last_error());
        for (int k = 0; k < dl->n_fields; k++) td_release(s->fields[k]), s->fields[k] = NULL;
    }
}

static void slot_clear(td_dataloader *dl, slot *s) {
    for (int k = 0; k < dl->n_fields; k++) td_release(s->fields[k]), s->fields[k] = NULL;
    s->ready = false;
}

static void *worker(void *arg) {
    td_dataloader *dl = arg;
    pthread_mutex_lock(&dl->lock);
    for (;;) {
        while (!dl->stop && (dl->next_claim >= dl->n_batches || dl->next_claim >= dl->next_fetch + dl->cap))
            pthread_cond_wait(&dl->space, &dl->lock);
        if (dl->stop) break;
        int64_t b = dl->next_claim++;
        pthread_mutex_unlock(&dl->lock);
        slot built;
        build_batch(dl, b, &built);
        pthread_mutex_lock(&dl->lock);
        if (dl->stop) {
            slot_clear(dl, &built);
            break;
        }
        built.ready = true;
        dl->slots[b % dl->cap] = built;
        pthread_cond_broadcast(&dl->ready);
    }
    pthread_mutex_unlock(&dl->lock);
    return NULL;
}

/* Stop and join the workers, drop queued batches. */
static void end_epoch(td_dataloader *dl) {
    pthread_mutex_lock(&dl->lock);
    dl->stop = true;
    pthread_cond_broadcast(&dl->space);
    pthread_mutex_unlock(&dl->lock);
    for (int i = 0; i < dl->n_threads; i++) pthread_join(dl->threads[i], NULL);
    dl->n_threads = 0;
    for (int i = 0; i < dl->cap; i++) slot_clear(dl, &dl->slots[i]);
    dl->running = false;
}

td_status td_dataloader_new(td_dataset *ds, const td_dataloader_opts *o, td_dataloader **out) {
    if (!out) return TD_ERR(TD_ERR_MISUSE, "dataloader_new: out is NULL");
    *out = NULL;
    if (!ds || !o) return TD_ERR(TD_ERR_MISUSE, "dataloader_new: dataset or options is NULL");
    if (o->batch_size < 1)
        return TD_ERR(TD_ERR_MISUSE, "dataloader_new: batch_size %lld < 1", (long long)o->batch_size);
    if (o->num_workers < 0 || o->num_workers > MAX_WORKERS)
        return TD_ERR(TD_ERR_MISUSE, "dataloader_new: num_workers %d outside [0, %d]", o->num_workers, MAX_WORKERS);
    if (o->prefetch < 0 || o->prefetch > 64)
        return TD_ERR(TD_ERR_MISUSE, "dataloader_new: prefetch %d outside [0, 64]", o->prefetch);
    td_dataloader *dl = calloc(1, sizeof *dl);
    if (!dl) return TD_ERR(TD_ERR_OOM, "dataloader_new: out of host memory");
    dl->ds = ds;
    dl->o = *o;
    dl->n_fields = td_dataset_num_fields(ds);
    dl->n_samples = td_dataset_len(ds);
    dl->n_batches = o->drop_last ? dl->n_samples / o->batch_size : (dl->n_samples + o->batch_size - 1) / o->batch_size;
    dl->cap = o->num_workers * (o->prefetch ? o->prefetch : 2);
    if (dl->cap < 1) dl->cap = 1;
    dl->perm = malloc(sizeof(int64_t) * (size_t)(dl->n_samples ? dl->n_samples : 1));
    dl->slots = calloc((size_t)dl->cap, sizeof *dl->slots);
    if (!dl->perm || !dl->slots) {
        int64_t n = dl->n_samples;
        free(dl->perm);
        free(dl->slots);
        free(dl);
        return TD_ERR(TD_ERR_OOM, "dataloader_new: out of host memory for %lld indices", (long long)n);
    }
    pthread_mutex_init(&dl->lock, NULL);
    pthread_cond_init(&dl->space, NULL);
    pthread_cond_init(&dl->ready, NULL);
    *out = dl;
    return TD_OK;
}

void td_dataloader_free(td_dataloader *dl) {
    if (!dl) return;
    end_epoch(dl);
    pthread_mutex_destroy(&dl->lock);
    pthread_cond_destroy(&dl->space);
    pthread_cond_destroy(&dl->ready);
    free(dl->perm);
    free(dl->slots);
    free(dl);
}

int64_t td_dataloader_num_batches(const td_dataloader *dl) { return dl ? dl->n_batches : -1; }

td_status td_dataloader_start_epoch(td_dataloader *dl, int64_t epoch, int64_t first_batch) {
    if (!dl) return TD_ERR(TD_ERR_MISUSE, "dataloader_start_epoch: loader is NULL");
    if (epoch < 0 || first_batch < 0 || first_batch > dl->n_batches)
        return TD_ERR(TD_ERR_MISUSE, "dataloader_start_epoch: epoch %lld / first batch %lld invalid (%lld batches)",
                      (long long)epoch, (long long)first_batch, (long long)dl->n_batches);
    end_epoch(dl);
    td__data_perm(dl->perm, dl->n_samples, dl->o.shuffle, dl->o.seed, epoch);
    dl->epoch = epoch;
    dl->next_claim = dl->next_fetch = first_batch;
    dl->stop = false;
    dl->running = true;
    for (int i = 0; i < dl->o.num_workers; i++) {
        if (pthread_create(&dl->threads[i], NULL, worker, dl) != 0) {
            end_epoch(dl);
            return TD_ERR(TD_ERR_OOM, "dataloader: cannot start worker thread %d", i);
        }
        dl->n_threads = i + 1;
    }
    return TD_OK;
}

/* Hand a built slot to the caller: move to the device, register with scope. */
static td_status hand_out(td_dataloader *dl, slot *s, td_tensor **fields) {
    td_status st = s->status;
    if (st != TD_OK) TD_ERR(st, "%s", s->message);
    for (int k = 0; k < dl->n_fields && st == TD_OK; k++) {
        td_tensor *t = td_to(s->fields[k], dl->o.device); /* +1 and scope-owned */
        if (!t) st = td_last_status();
        fields[k] = t;
    }
    if (st != TD_OK)
        for (int k = 0; k < dl->n_fields; k++) fields[k] = NULL;
    slot_clear(dl, s);
    return st;
}

td_status td_dataloader_next(td_dataloader *dl, td_tensor **fields) {
    if (!dl || !fields) return TD_ERR(TD_ERR_MISUSE, "dataloader_next: loader or fields is NULL");
    for (int k = 0; k < dl->n_fields; k++) fields[k] = NULL;
    if (!dl->running)
        return TD_ERR(TD_ERR_STATE, "dataloader_next: no epoch in progress (call td_dataloader_start_epoch)");
    if (dl->next_fetch >= dl->n_batches) return TD_OK;
    td_status st;
    if (dl->n_threads == 0) {
        slot s;
        build_batch(dl, dl->next_fetch++, &s);
        st = hand_out(dl, &s, fields);
    } else {
        pthread_mutex_lock(&dl->lock);
        slot *s = &dl->slots[dl->next_fetch % dl->cap];
        while (!s->ready) pthread_cond_wait(&dl->ready, &dl->lock);
        slot taken = *s;
        s->ready = false;
        memset(s->fields, 0, sizeof s->fields);
        dl->next_fetch++;
        pthread_cond_broadcast(&dl->space);
        pthread_mutex_unlock(&dl->lock);
        st = hand_out(dl, &taken, fields);
    }
    if (st != TD_OK) end_epoch(dl);
    return st;
}
