/*
** Pipeline pre-warm for a fast start: TRIDENT_VULKAN_PREWARM=<name> (trident
** train sets the model's name, the bench's W2 cold start "w2").
**
** Each cache save (vk_pipeline.c, at host waits after new pipelines) writes
** every pipeline the process has made to
**     <cache dir>/vulkan-<vendor>-<device>-prewarm-<name>.txt
** one "<variant> <spec constants...>" line each. When the next process with
** that name creates the device, it makes those pipelines up front on up to 4
** threads (vkCreateComputePipelines with the shared, internally synchronized
** pipeline cache), skipping variants that would not run there now (a feature
** mask, a denied variant, another cooperative-matrix path). Only the
** variants a model used are made, in parallel; the rest stay lazy. Without
** the variable nothing is listed or pre-warmed, so tests and other programs
** keep creating pipelines on first use only.
*/
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vk.h"

#define PREWARM_THREADS 4

static bool list_path(const vk_dev *d, char *path, size_t n) {
    const char *name = getenv("TRIDENT_VULKAN_PREWARM");
    char dir[3072];
    if (!name || !*name || strchr(name, '/') || strlen(name) > 64 || !vk_cache_dir(dir, sizeof dir)) return false;
    snprintf(path, n, "%s/vulkan-%04x-%04x-prewarm-%s.txt", dir, d->props.vendorID, d->props.deviceID, name);
    return true;
}

void vk_prewarm_save(vk_dev *d) {
    char path[4096], tmp[4200];
    if (!list_path(d, path, sizeof path)) return;
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    bool ok = f != NULL;
    for (int s = 0; ok && s < VK_SHADER_COUNT; s++)
        for (const vk_pipeline *p = d->pipelines[s]; ok && p; p = p->next) {
            ok = fprintf(f, "%s", vk_shader_table[s].name) > 0;
            for (int i = 0; ok && i < p->n_spec; i++) ok = fprintf(f, " %u", p->spec[i]) > 0;
            ok = ok && fputc('\n', f) != EOF;
        }
    if (f) ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) unlink(tmp);
}

/* Whether variant v is what runs on d now (its base picks it; the chosen cooperative-matrix path). */
static bool runs_now(const vk_dev *d, int v) {
    const char *name = vk_shader_table[v].name;
    if (!strncmp(name, "matmul_coopmat", 14))
        return d->coopmat_state > 0 && (strstr(name, "_khr_") != NULL) == (d->caps.coopmat == VK_COOPMAT_KHR);
    int base = v;
    for (int i = 0; i < VK_SHADER_COUNT; i++)
        if (vk_shader_table[i].generic == v) base = i;
    return vk_pipeline_pick(d, base) == v;
}

typedef struct prewarm_job {
    int shader, n_spec;
    uint32_t spec[VK_MAX_SPEC];
    VkPipeline pipe;
} prewarm_job;

typedef struct prewarm_pool {
    vk_dev *d;
    prewarm_job *jobs;
    int n;
    atomic_int next;
} prewarm_pool;

static void *prewarm_thread(void *arg) {
    prewarm_pool *pool = arg;
    for (int i; (i = atomic_fetch_add(&pool->next, 1)) < pool->n;) {
        prewarm_job *j = &pool->jobs[i];
        if (vk_pipeline_create(pool->d, j->shader, j->spec, j->n_spec, &j->pipe) != VK_SUCCESS)
            j->pipe = VK_NULL_HANDLE;
    }
    return NULL;
}

/* The listed pipelines that run on d now, with their modules made; *n of them. */
static prewarm_job *read_list(vk_dev *d, int *n) {
    char path[4096], line[512];
    *n = 0;
    FILE *f = list_path(d, path, sizeof path) ? fopen(path, "r") : NULL;
    if (!f) return NULL;
    int cap = 0;
    prewarm_job *jobs = NULL;
    while (fgets(line, sizeof line, f)) {
        prewarm_job j = {0};
        char *save = NULL, *tok = strtok_r(line, " \n", &save);
        j.shader = tok ? vk_variant_id(tok) : -1;
        while (j.shader >= 0 && (tok = strtok_r(NULL, " \n", &save)) && j.n_spec < VK_MAX_SPEC)
            j.spec[j.n_spec++] = (uint32_t)strtoul(tok, NULL, 10);
        if (j.shader < 0 || !runs_now(d, j.shader) || vk_pipeline_module(d, j.shader) != TD_OK) continue;
        if (*n == cap) {
            prewarm_job *more = realloc(jobs, (size_t)(cap = cap ? 2 * cap : 64) * sizeof *jobs);
            if (!more) break;
            jobs = more;
        }
        jobs[(*n)++] = j;
    }
    fclose(f);
    td_clear_error();
    return jobs;
}

void vk_prewarm(vk_dev *d) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    prewarm_pool pool = {.d = d};
    pool.jobs = read_list(d, &pool.n);
    if (!pool.n) {
        free(pool.jobs);
        return;
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int n_threads = PREWARM_THREADS < cpus ? PREWARM_THREADS : (int)(cpus > 1 ? cpus : 1), started = 0;
    if (n_threads > pool.n) n_threads = pool.n;
    pthread_t th[PREWARM_THREADS];
    for (int i = 1; i < n_threads; i++) started += pthread_create(&th[started], NULL, prewarm_thread, &pool) == 0;
    prewarm_thread(&pool);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    int made = 0;
    for (int i = 0; i < pool.n; i++) {
        prewarm_job *j = &pool.jobs[i];
        vk_pipeline *p = j->pipe ? calloc(1, sizeof *p) : NULL;
        if (!p) {
            if (j->pipe) vkDestroyPipeline(d->dev, j->pipe, NULL);
            continue;
        }
        memcpy(p->spec, j->spec, sizeof p->spec);
        p->n_spec = j->n_spec;
        p->pipe = j->pipe;
        p->next = d->pipelines[j->shader];
        d->pipelines[j->shader] = p;
        made++;
    }
    d->cache_dirty = made > 0;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (getenv("TRIDENT_VULKAN_VERBOSE"))
        fprintf(stderr, "trident: vulkan:%d: pre-warmed %d pipelines on %d threads in %.0f ms\n", d->index, made,
                1 + started, (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6);
    free(pool.jobs);
}
