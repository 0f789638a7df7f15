/*
** trident bench --ddp: data-parallel scaling of W3 (GPT-mini) at a fixed batch
** per process. The driver runs `trident launch --nproc n -- trident bench
** --ddp-worker ...` for n = 1 and n = N, and with --torch the PyTorch DDP twin
** (bench/torch_ddp.py) under `python -m torch.distributed.run` for the same n,
** then prints per n: ms per step, tokens/s over all processes, the scaling
** efficiency tokens/s(n) / (n x tokens/s(1)) and the step time against 1.
**
** A worker joins the group, builds W3 on its device (no DDP when alone),
** wraps it in DDP, and times `steps` training steps on a fixed random batch
** after 3 warm-up steps, between two td_synchronize calls; rank 0 prints
** "ddp-result world=N ms_per_step=X tokens_per_s=Y".
*/
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "workloads.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int worker(const char *device, int steps, bool quick) {
    td_device want;
    if (td_device_parse(device, &want) != TD_OK) return fprintf(stderr, "bench --ddp: %s\n", td_last_error()), 1;
    td_dist_opts o = {
        .device_type = (td_device_type)want.type, .fixed_index = strchr(device, ':') != NULL, .index = want.index};
    if (td_dist_init(&o) != TD_OK) return fprintf(stderr, "bench --ddp: %s\n", td_last_error()), 1;
    td_device dev = td_dist_device();
    workload_gpt_config cfg = workload_gpt_config_default();
    int64_t batch = 64;
    if (quick) cfg.d_model = 32, cfg.heads = 2, cfg.layers = 1, cfg.context = 32, batch = 4;
    td_manual_seed(0);
    workload w;
    td_ddp *ddp = NULL;
    if (workload_init(&w, WORKLOAD_GPT, &cfg, dev, NULL, 0, false) != TD_OK ||
        (td_dist_world_size() > 1 && td_ddp_new(w.model, NULL, &ddp) != TD_OK))
        return fprintf(stderr, "bench --ddp: %s\n", td_last_error()), 1;
    int64_t shape[2] = {batch, cfg.context};
    uint64_t seed = 1000 + (uint64_t)td_dist_rank();
    td_tensor *x = td_keep(td_cast(td_mul_scalar(td_rand(2, shape, seed, 0, TD_F32, dev), 255.99), TD_I64));
    td_tensor *y = td_keep(td_cast(td_mul_scalar(td_rand(2, shape, seed, 1 << 20, TD_F32, dev), 255.99), TD_I64));
    td_status st = x && y ? TD_OK : td_last_status();
    double t0 = 0;
    td_tensor *loss = NULL;
    for (int i = 0; st == TD_OK && i < steps + 3; i++) {
        if (i == 3) st = td_synchronize(dev), t0 = now_s();
        td_scope_begin();
        td_release(loss);
        loss = td_keep(workload_loss_step(&w, x, y));
        if (!loss || (ddp && td_ddp_check(ddp) != TD_OK)) st = td_last_status();
        td_scope_end();
    }
    if (st == TD_OK) st = td_synchronize(dev);
    double dt = (now_s() - t0) / steps;
    if (st == TD_OK && td_dist_rank() == 0)
        printf("ddp-result world=%d ms_per_step=%.3f tokens_per_s=%.0f loss=%.4f\n", td_dist_world_size(), dt * 1e3,
               (double)(batch * cfg.context * td_dist_world_size()) / dt, td_item(loss));
    if (st != TD_OK) fprintf(stderr, "bench --ddp: rank %d: %s\n", td_dist_rank(), td_last_error());
    td_release(loss), td_release(x), td_release(y);
    td_ddp_free(ddp);
    workload_free(&w);
    td_dist_destroy();
    return st == TD_OK ? 0 : 1;
}

typedef struct result {
    double ms, tps;
    bool ok;
} result;

/* Run cmd; parse the first line holding `key` (ms_per_step=, tokens_per_s=, or the twin's JSON). */
static result run(const char *cmd) {
    result r = {0};
    fprintf(stderr, "+ %s\n", cmd);
    FILE *p = popen(cmd, "r");
    char line[1024];
    while (p && fgets(line, sizeof line, p)) {
        const char *a = strstr(line, "ms_per_step"), *b = strstr(line, "tokens_per_s");
        if (!a || !b || r.ok) continue;
        a += strlen("ms_per_step"), b += strlen("tokens_per_s");
        while (*a == '=' || *a == '"' || *a == ':' || *a == ' ') a++;
        while (*b == '=' || *b == '"' || *b == ':' || *b == ' ') b++;
        r.ms = atof(a), r.tps = atof(b), r.ok = r.ms > 0;
    }
    if (p) pclose(p);
    return r;
}

int cmd_bench_ddp(int argc, char **argv) {
    int nproc = 2, steps = 20;
    bool quick = false, torch = false, is_worker = false;
    const char *device = "cuda", *python = "python3", *twin = "bench/torch_ddp.py", *backend = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--ddp")) continue;
        if (!strcmp(a, "--ddp-worker"))
            is_worker = true;
        else if (!strcmp(a, "--quick"))
            quick = true, steps = 5;
        else if (!strcmp(a, "--torch"))
            torch = true;
        else if (v && !strcmp(a, "--nproc"))
            nproc = atoi(argv[++i]);
        else if (v && !strcmp(a, "--steps"))
            steps = atoi(argv[++i]);
        else if (v && !strcmp(a, "--device"))
            device = argv[++i];
        else if (v && !strcmp(a, "--backend"))
            backend = argv[++i];
        else if (v && !strcmp(a, "--python"))
            python = argv[++i];
        else if (v && !strcmp(a, "--twin"))
            twin = argv[++i];
        else
            return fprintf(stderr,
                           "trident bench --ddp: unknown option %s (--nproc N, --steps N, --device D, --backend B, "
                           "--quick, --torch, --python EXE, --twin PATH)\n",
                           TD_QUOTE(a)),
                   2;
    }
    if (nproc < 1 || nproc > 64 || steps < 1)
        return fprintf(stderr, "trident bench --ddp: --nproc in [1, 64], --steps >= 1\n"), 2;
    if (backend && strcmp(backend, "nccl") && strcmp(backend, "mpi"))
        return fprintf(stderr, "trident bench --ddp: --backend %s is not nccl or mpi\n", TD_QUOTE(backend)), 2;
    td_device parsed;
    if (td_device_parse(device, &parsed) != TD_OK)
        return fprintf(stderr, "trident bench --ddp: --device: %s\n", td_last_error()), 2;
    if (is_worker) return worker(device, steps, quick);
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return fprintf(stderr, "trident bench --ddp: cannot find this executable\n"), 1;
    self[len] = 0;
    if (!backend) backend = !strncmp(device, "cuda", 4) ? "nccl" : "mpi";
    int ns[2] = {1, nproc};
    result tr[2], pt[2] = {{0}};
    for (int k = 0; k < 2; k++) {
        char cmd[12288];
        snprintf(cmd, sizeof cmd,
                 "'%s' launch --nproc %d --backend %s -- '%s' bench --ddp-worker --device %s --steps %d%s", self, ns[k],
                 backend, self, device, steps, quick ? " --quick" : "");
        tr[k] = run(cmd);
        if (torch && !strncmp(device, "cuda", 4)) {
            snprintf(cmd, sizeof cmd,
                     "%s -m torch.distributed.run --standalone --nproc_per_node %d '%s' --steps %d%s 2>/dev/null",
                     python, ns[k], twin, steps, quick ? " --quick" : "");
            pt[k] = run(cmd);
        }
    }
    printf("W3 GPT-mini data-parallel on %s (%s), fixed batch per process, %d timed steps\n", device, backend, steps);
    printf("%-10s %10s %12s %11s %12s %14s %14s %12s\n", "processes", "ms/step", "tokens/s", "efficiency", "step vs 1",
           "torch ms/step", "torch tok/s", "torch eff.");
    for (int k = 0; k < 2; k++) {
        if (!tr[k].ok) {
            printf("%-10d failed (see above)\n", ns[k]);
            continue;
        }
        double eff = tr[0].ok ? tr[k].tps / (ns[k] * tr[0].tps) : 0, rel = tr[0].ok ? tr[k].ms / tr[0].ms : 0;
        printf("%-10d %10.2f %12.0f %11.3f %12.3f", ns[k], tr[k].ms, tr[k].tps, eff, rel);
        if (pt[k].ok)
            printf(" %14.2f %14.0f %12.3f\n", pt[k].ms, pt[k].tps, pt[0].ok ? pt[k].tps / (ns[k] * pt[0].tps) : 0);
        else
            printf(" %14s %14s %12s\n", "n/a", "n/a", "n/a");
    }
    return tr[0].ok && tr[1].ok ? 0 : 1;
}
