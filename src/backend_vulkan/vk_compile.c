/*
** Compile threads: pipelines made in parallel, off the recording thread.
**
** vkCreateComputePipelines is the cold start's cost (NVIDIA's driver compiles
** each pipeline's SPIR-V to machine code; lavapipe through LLVM). A pipeline
** that a dispatch needs and that does not exist yet becomes a job here; the
** dispatch is logged (vk_exec.c) and recorded into its command buffer when the
** batch is submitted, after the jobs it needs are done. So the pipelines of a
** first training step are made concurrently, on up to VK_COMPILE_THREADS
** threads (TRIDENT_VULKAN_COMPILE_THREADS=n sets another count; 0 makes every
** pipeline on the recording thread at its first dispatch, one at a time). The
** pre-warm list (vk_prewarm.c) queues its pipelines at device creation the
** same way.
**
** Thread safety: the threads share the device's VkPipelineCache, which is
** internally synchronized (created without
** VK_PIPELINE_CACHE_CREATE_EXTERNALLY_SYNCHRONIZED_BIT), and read only
** immutable state of the device (its VkDevice, layout, the variant's shader
** module, made on the recording thread before the job is queued). A job's
** pipe, result and state are written under the compiler's lock and read under
** it (vk_compile_state); the device's pipeline lists stay the recording thread's.
** At exit the threads are joined before the driver's own exit handlers run.
*/
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "vk.h"

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

int vk_compile_threads(void) {
    const char *env = getenv("TRIDENT_VULKAN_COMPILE_THREADS");
    if (env && *env) {
        char *end;
        long n = strtol(env, &end, 10);
        if (!*end && n >= 0) return n < VK_COMPILE_THREADS_MAX ? (int)n : VK_COMPILE_THREADS_MAX;
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return cpus < 1 ? 1 : cpus < VK_COMPILE_THREADS ? (int)cpus : VK_COMPILE_THREADS;
}

/* Make the pipeline of (shader, spec) on the calling thread; the driver's result. */
static VkResult make(vk_dev *d, int shader, const uint32_t *spec, int n_spec, VkPipeline *out) {
    double t0 = now_ms();
    VkResult r = vk_pipeline_create(d, shader, spec, n_spec, out);
    if (d->verbose) {
        char line[256];
        int n =
            snprintf(line, sizeof line, "trident: vulkan:%d: pipeline %s [", d->index, vk_shader_table[shader].name);
        for (int i = 0; i < n_spec && n < 200; i++)
            n += snprintf(line + n, sizeof line - (size_t)n, i ? " %u" : "%u", spec[i]);
        fprintf(stderr, "%s] %s in %.1f ms\n", line, r == VK_SUCCESS ? "made" : vk_result_str(r), now_ms() - t0);
    }
    return r;
}

static void *compile_thread(void *arg) {
    vk_dev *d = arg;
    vk_compiler *c = &d->compiler;
    pthread_mutex_lock(&c->lock);
    for (;;) {
        while (!c->head && !c->stop) pthread_cond_wait(&c->work, &c->lock);
        vk_pipeline *p = c->head;
        if (!p) break; /* stopping, and nothing is queued */
        c->head = p->job_next;
        if (!c->head) c->tail = NULL;
        pthread_mutex_unlock(&c->lock);
        VkPipeline pipe = VK_NULL_HANDLE;
        VkResult r = make(d, p->shader, p->spec, p->n_spec, &pipe); /* the key, set before it was queued */
        pthread_mutex_lock(&c->lock);
        p->pipe = pipe;
        p->result = r;
        p->state = r == VK_SUCCESS ? VK_PIPE_READY : VK_PIPE_FAILED;
        c->pending--;
        pthread_cond_broadcast(&c->done);
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

void vk_compile_init(vk_dev *d) {
    vk_compiler *c = &d->compiler;
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->work, NULL);
    pthread_cond_init(&c->done, NULL);
    c->max_threads = vk_compile_threads();
}

bool vk_compile_async(const vk_dev *d) { return d->compiler.max_threads > 0; }

/* Stop d's threads (queued jobs dropped when drop, failing) and join them. */
static void stop(vk_dev *d, bool drop) {
    vk_compiler *c = &d->compiler;
    pthread_mutex_lock(&c->lock);
    c->stop = true;
    for (vk_pipeline *p = drop ? c->head : NULL; p; p = p->job_next) {
        p->state = VK_PIPE_FAILED;
        p->result = VK_ERROR_INITIALIZATION_FAILED;
        c->pending--;
    }
    if (drop) c->head = c->tail = NULL;
    pthread_cond_broadcast(&c->work);
    pthread_cond_broadcast(&c->done);
    int n = c->n_threads;
    c->n_threads = 0;
    pthread_mutex_unlock(&c->lock);
    for (int i = 0; i < n; i++) pthread_join(c->threads[i], NULL);
}

/* At exit, no thread may still be inside the driver while its own exit handlers tear it down
** (they were registered before this one, so they run after it): unstarted jobs are dropped, the
** threads joined (a pipeline being made is finished), and the pipeline cache saved. */
static pthread_mutex_t running_lock = PTHREAD_MUTEX_INITIALIZER;
static vk_dev *running[VK_MAX_DEVICES];
static int n_running;
static bool at_exit_set;

static void stop_at_exit(void) {
    pthread_mutex_lock(&running_lock);
    for (int i = 0; i < n_running; i++) {
        vk_dev *d = running[i];
        stop(d, true);
        /* what the threads made since the last host wait goes into the disk cache for the next process */
        if (pthread_mutex_trylock(&d->lock) == 0) {
            vk_pipeline_cache_save(d);
            pthread_mutex_unlock(&d->lock);
        }
    }
    n_running = 0;
    pthread_mutex_unlock(&running_lock);
}

/* Note that d has threads (called once per device, with its first thread). */
static void note_running(vk_dev *d) {
    pthread_mutex_lock(&running_lock);
    if (!at_exit_set) at_exit_set = atexit(stop_at_exit) == 0;
    if (n_running < VK_MAX_DEVICES) running[n_running++] = d;
    pthread_mutex_unlock(&running_lock);
}

void vk_compile_submit(vk_dev *d, vk_pipeline *p) {
    vk_compiler *c = &d->compiler;
    pthread_mutex_lock(&c->lock);
    /* threads start with the first jobs, up to max_threads */
    bool first = false;
    if (!c->stop && c->n_threads < c->max_threads &&
        pthread_create(&c->threads[c->n_threads], NULL, compile_thread, d) == 0)
        first = c->n_threads++ == 0;
    if (!c->n_threads) { /* none could be started: make it here */
        pthread_mutex_unlock(&c->lock);
        vk_compile_now(d, p);
        return;
    }
    p->state = VK_PIPE_PENDING;
    p->job_next = NULL;
    if (c->tail)
        c->tail->job_next = p;
    else
        c->head = p;
    c->tail = p;
    c->pending++;
    pthread_cond_signal(&c->work);
    pthread_mutex_unlock(&c->lock);
    if (first) note_running(d);
}

int vk_compile_state(vk_dev *d, vk_pipeline *p, bool wait) {
    vk_compiler *c = &d->compiler;
    pthread_mutex_lock(&c->lock);
    while (wait && p->state == VK_PIPE_PENDING) pthread_cond_wait(&c->done, &c->lock);
    int state = p->state;
    pthread_mutex_unlock(&c->lock);
    return state;
}

VkResult vk_compile_now(vk_dev *d, vk_pipeline *p) {
    p->result = make(d, p->shader, p->spec, p->n_spec, &p->pipe);
    p->state = p->result == VK_SUCCESS ? VK_PIPE_READY : VK_PIPE_FAILED;
    return p->result;
}

void vk_compile_stop(vk_dev *d) {
    stop(d, false);
    pthread_mutex_destroy(&d->compiler.lock);
    pthread_cond_destroy(&d->compiler.work);
    pthread_cond_destroy(&d->compiler.done);
}

/* For trident bench (found with td_backend_symbol): wait until device dev's compile threads have made
** every pipeline queued so far, so that timed samples run on the pipelines a steady state uses (matmul's
** large tiles rather than their alternative). */
__attribute__((visibility("default"))) void td_vulkan_compile_wait(int dev) {
    vk_dev *d = vk_get(dev);
    if (!d) return;
    vk_compiler *c = &d->compiler;
    pthread_mutex_lock(&c->lock);
    while (c->pending > 0) pthread_cond_wait(&c->done, &c->lock);
    pthread_mutex_unlock(&c->lock);
}
