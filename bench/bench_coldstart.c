/*
** W2-cold-start: seconds from process start to the end of a process that
** runs two W2 training steps on a Vulkan device, each sample a fresh process:
** `trident bench --first-step DEVICE [--quick]` (bench_first_step) builds W2,
** runs two steps on random pixels (batch 128; --quick 16), reads the loss and
** exits through exit(), as `trident train --max-steps 2` does: pipelines still
** being made on the compile threads are waited for there (vk_compile.c), so they
** count. The sample is that child's wall time, from fork to exit.
** Rows: "empty-cache" (a new empty $XDG_CACHE_HOME for each sample: every
** pipeline and kernel is compiled) and "warm-cache" (the cache that an untimed
** first child left: pipelines from the driver's cache, made in parallel from the
** pre-warm list as `trident train --model cnn` does; SPIR-V and NVRTC caches).
** Other backends get no row; a software device (lavapipe, a minute per
** sample) only when --only asks for this workload.
*/
#define _GNU_SOURCE
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

typedef struct cold_arg {
    char label[16];
    bool quick, empty;
    char warm_dir[64];
} cold_arg;

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* One child process: one W2 step on a.label with $XDG_CACHE_HOME = dir. */
static td_status child_step(const cold_arg *a, const char *dir) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return td_error_set(TD_ERR_IO, "W2-cold-start: fork failed");
    if (pid == 0) {
        setenv("XDG_CACHE_HOME", dir, 1);
        if (!freopen("/dev/null", "w", stdout)) _exit(126);
        execl("/proc/self/exe", "trident", "bench", "--first-step", a->label, a->quick ? "--quick" : NULL, NULL);
        _exit(127);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
        return td_error_set(TD_ERR_DEVICE, "W2-cold-start: trident bench --first-step %s failed (status 0x%x)",
                            a->label, status);
    return TD_OK;
}

static td_status fn_cold(void *p, int rep) {
    (void)rep;
    cold_arg *a = p;
    if (!a->empty) return child_step(a, a->warm_dir);
    char dir[64] = "/tmp/trident-cold-XXXXXX";
    if (!mkdtemp(dir)) return td_error_set(TD_ERR_IO, "W2-cold-start: cannot make a temporary directory");
    td_status st = child_step(a, dir);
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return st;
}

td_status bench_run_cold_start(bench_session *s, int device) {
    bench_device *d = &s->devices[device];
    /* minutes on a software device, and most of a minute with an empty cache on NVIDIA: --quick leaves it out */
    bool wait = (d->info.emulated || s->opt.quick) && !s->opt.only;
    if (d->dev.type != TD_DEVICE_VULKAN || wait) { /* the reason bench prints */
        td_error_set(TD_ERR_UNSUPPORTED, "W2-cold-start runs on Vulkan devices%s",
                     wait ? ", on a software one or with --quick only with --only W2-cold-start" : "");
        return TD_OK;
    }
    cold_arg a = {.quick = s->opt.quick};
    snprintf(a.label, sizeof a.label, "%s", d->label);
    snprintf(a.warm_dir, sizeof a.warm_dir, "/tmp/trident-warm-XXXXXX");
    if (!mkdtemp(a.warm_dir)) return td_error_set(TD_ERR_IO, "W2-cold-start: cannot make a temporary directory");
    char size[32];
    snprintf(size, sizeof size, "%lldx1x28x28", (long long)bench_image_batch(s));
    int n = s->opt.quick ? 1 : 2;
    td_status st = TD_OK;
    for (int warm = 0; warm < 2; warm++) {
        a.empty = !warm;
        bench_sampling how = {.warmup = warm, .max_samples = n, .budget_s = 0, .host_clock = true};
        if (!bench_time_ext(s, device, "W2-cold-start", warm ? "warm-cache" : "empty-cache", size, BENCH_UNIT_OPS, 1, 1,
                            fn_cold, &a, &how))
            st = TD_ERR_DEVICE;
    }
    nftw(a.warm_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return st;
}

int bench_first_step(const char *device, bool quick) {
    td_device dev;
    workload w;
    setenv("TRIDENT_VULKAN_PREWARM", "cnn", 0); /* as trident train --model cnn: W2's pipelines made in parallel */
    if (td_device_parse(device, &dev) != TD_OK || workload_init(&w, WORKLOAD_CNN, NULL, dev, NULL, 0, false) != TD_OK) {
        fprintf(stderr, "trident bench --first-step: %s\n", td_last_error());
        return 1;
    }
    int64_t n = quick ? 16 : 128, xs[2] = {n, 784}, labels[128];
    for (int64_t i = 0; i < n; i++) labels[i] = (i * 7) % 10;
    td_scope_begin();
    td_tensor *x = td_rand(2, xs, 1, 0, TD_F32, dev);
    td_tensor *y = td_to(td_from_data(labels, 1, &n, TD_I64, TD_CPU), dev);
    double loss = 0;
    td_status st = x && y ? TD_OK : td_last_status();
    for (int step = 0; step < 2 && st == TD_OK; step++) st = workload_train_step(&w, x, y, &loss);
    if (st != TD_OK) {
        fprintf(stderr, "trident bench --first-step: %s\n", td_last_error());
        return 1;
    }
    printf("two W2 steps on %s: loss %.4f\n", device, loss);
    return 0; /* main returns: exit() and its handlers (the compile threads joined) are timed too */
}
