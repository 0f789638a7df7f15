/*
** trident bench --ddp: data-parallel scaling of W3 (GPT-mini, 64x256 tokens per process; 8 on the CPU) and W5
** (GPT-2 small, 16x1024; GPUs only unless --quick) at a fixed batch per process. For each n of --nproc (a list;
** one N means 1 and N) the driver runs `trident launch --nproc n -- trident bench --ddp-worker ...` once, and
** with --torch the PyTorch DDP twin (bench/torch_ddp.py) under `python -m torch.distributed.run` for the same
** n. A worker runs every workload of --only in every configuration of --zero x --ddp-grad-dtype (DDP or
** ZeRO-1, float32 or bf16 gradient buckets; alone, the plain model once), each on a fresh model: `warmup`
** steps, then `steps` timed between two td_synchronize calls, then `steps` more with the collectives left out
** (td_ddp_no_sync, no ZeRO all-gather). Rank 0 prints one line per run:
**   ddp-result wl=W3 zero=0 grad=fp32 world=4 ms=X tps=Y peak_mib=P opt_mib=O comm=C loss=L
** and the driver prints per workload and configuration: ms per step, tokens/s over all processes, the
** scaling efficiency tokens/s(n) / (n x tokens/s(1)), the step time against 1, the peak allocated MiB and
** the optimizer state's MiB (the largest over the ranks), and comm = 1 - t(no collectives) / t, the share of
** the step that the gradient reduction and ZeRO's all-gather add (ZeRO's leaves out the shard's update too).
*/
#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "workloads.h"

#define MAX_N 8

typedef struct ddp_bench {
    int nproc[MAX_N], n_nproc;
    int steps, warmup;
    bool quick, torch;
    const char *device, *python, *twin, *backend;
    const char *only, *amp_s, *zero_s, *grad_s; /* the lists as given, passed on to the workers */
    int wl[2], n_wl;                            /* 3 (W3), 5 (W5) */
    int zero[2], n_zero;
    td_dtype grad[2];
    int n_grad;
    td_dtype amp;
} ddp_bench;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The size and batch per process of workload wl (3 or 5). */
static void wl_size(const ddp_bench *o, int wl, td_device dev, workload_gpt_config *cfg, int64_t *batch) {
    *cfg = workload_gpt_config_default();
    if (wl == 5) workload_gpt_preset("gpt2-small", cfg);
    *batch = wl == 5 ? 16 : dev.type == TD_DEVICE_CPU ? 8 : 64;
    if (o->quick) cfg->d_model = 32, cfg->heads = 2, cfg->layers = 1, cfg->context = 32, *batch = 4;
}

/* One training step; without comm, the gradients stay local (no_sync) and ZeRO gathers nothing. */
static td_status step(workload *w, td_ddp *ddp, bool zero, bool comm, td_tensor *x, td_tensor *y, td_tensor **loss) {
    td_scope_begin();
    td_release(*loss);
    *loss = td_keep(workload_loss_step(w, x, y));
    td_status st = *loss ? TD_OK : td_last_status();
    if (st == TD_OK && ddp && comm) st = td_ddp_check(ddp);
    if (st == TD_OK && zero && comm) st = td_ddp_gather_parameters(ddp);
    if (st == TD_OK && zero && !comm) td_module_zero_grad(w->model); /* the gather's td_zero_grad */
    td_scope_end();
    return st;
}

/* Time n steps (after synchronizing) into *ms. */
static td_status timed(workload *w, td_ddp *ddp, bool zero, bool comm, td_tensor *x, td_tensor *y, td_tensor **loss,
                       int n, double *ms) {
    td_status st = td_synchronize(w->device);
    double t0 = now_s();
    for (int i = 0; st == TD_OK && i < n; i++) st = step(w, ddp, zero, comm, x, y, loss);
    if (st == TD_OK) st = td_synchronize(w->device);
    *ms = (now_s() - t0) * 1e3 / n;
    return st;
}

/* Bytes of the optimizer's state tensors on this rank (ZeRO: its shard's). */
static int64_t opt_bytes(td_optimizer *opt) {
    td_named_tensors *sd = td_optimizer_state_dict(opt);
    int64_t b = 0;
    for (int64_t i = 0; sd && i < td_named_tensors_len(sd); i++) {
        td_tensor *t = td_named_tensors_at(sd, i);
        b += td_numel(t) * (int64_t)td_dtype_size(td_tensor_dtype(t));
    }
    td_named_tensors_free(sd);
    return b;
}

/* One workload in one configuration on this rank; rank 0 prints its line. */
static td_status run_one(const ddp_bench *o, td_device dev, int wl, int zero, td_dtype grad) {
    int world = td_dist_world_size();
    workload_gpt_config cfg;
    int64_t batch;
    wl_size(o, wl, dev, &cfg, &batch);
    td_memory_stats m;
    td_memory_empty_cache(dev);
    bool mem = td_memory_stats_get(dev, true, &m) == TD_OK;
    td_clear_error();
    td_scope_begin();
    td_manual_seed(0);
    workload w;
    td_ddp *ddp = NULL;
    td_status st = workload_init(&w, WORKLOAD_GPT, &cfg, dev, NULL, 0, false);
    bool made = st == TD_OK;
    if (st == TD_OK && o->amp != TD_F32) st = workload_amp_set(&w, o->amp);
    if (st == TD_OK && world > 1) {
        td_ddp_opts dopt = {.broadcast_buffers = true, .grad_dtype = grad, .shard_optimizer = zero};
        st = td_ddp_new(w.model, &dopt, &ddp);
        if (st == TD_OK && zero) st = td_ddp_shard_optimizer(ddp, w.opt);
    }
    int64_t shape[2] = {batch, cfg.context};
    uint64_t seed = 1000 + (uint64_t)td_dist_rank();
    td_tensor *x = td_cast(td_mul_scalar(td_rand(2, shape, seed, 0, TD_F32, dev), 255.99), TD_I64);
    td_tensor *y = td_cast(td_mul_scalar(td_rand(2, shape, seed, 1 << 20, TD_F32, dev), 255.99), TD_I64);
    if (st == TD_OK && (!x || !y)) st = td_last_status();
    td_tensor *loss = NULL;
    bool sharded = zero && ddp;
    for (int i = 0; st == TD_OK && i < o->warmup; i++) st = step(&w, ddp, sharded, true, x, y, &loss);
    double ms = 0, ms_local = 0;
    if (st == TD_OK) st = timed(&w, ddp, sharded, true, x, y, &loss, o->steps, &ms);
    /* the peak and the state's bytes, the largest over the ranks */
    int64_t v[2] = {mem && td_memory_stats_get(dev, false, &m) == TD_OK ? (int64_t)m.peak_allocated : -1,
                    made ? opt_bytes(w.opt) : 0};
    td_clear_error();
    td_tensor *vt = st == TD_OK ? td_from_data(v, 1, (int64_t[]){2}, TD_I64, dev) : NULL;
    if (st == TD_OK) st = vt ? td_dist_all_reduce(vt, TD_DIST_MAX) : td_last_status();
    if (st == TD_OK) st = td_copy_to_host(vt, v, sizeof v, TD_I64);
    double l = st == TD_OK ? td_item(loss) : 0;
    if (st == TD_OK && ddp) {
        td_ddp_no_sync_begin(ddp);
        st = timed(&w, ddp, sharded, false, x, y, &loss, o->steps, &ms_local);
        td_ddp_no_sync_end(ddp);
    }
    if (st == TD_OK && td_dist_rank() == 0) {
        printf("ddp-result wl=W%d zero=%d grad=%s world=%d ms=%.3f tps=%.0f peak_mib=%.1f opt_mib=%.1f comm=%.3f "
               "loss=%.4f\n",
               wl, zero, grad == TD_BF16 ? "bf16" : "fp32", world, ms, (double)(batch * cfg.context * world) * 1e3 / ms,
               v[0] < 0 ? -1.0 : (double)v[0] / 1048576.0, (double)v[1] / 1048576.0,
               ddp && ms > 0 ? 1 - ms_local / ms : 0.0, l);
        fflush(stdout);
    }
    td_release(loss);
    td_ddp_free(ddp);
    if (made) workload_free(&w);
    td_scope_end();
    return st;
}

static int worker(const ddp_bench *o) {
    td_device want;
    if (td_device_parse(o->device, &want) != TD_OK) return fprintf(stderr, "bench --ddp: %s\n", td_last_error()), 1;
    td_dist_opts dopt = {
        .device_type = (td_device_type)want.type, .fixed_index = strchr(o->device, ':') != NULL, .index = want.index};
    if (td_dist_init(&dopt) != TD_OK) return fprintf(stderr, "bench --ddp: %s\n", td_last_error()), 1;
    td_device dev = td_dist_device();
    bool alone = td_dist_world_size() == 1;
    td_status st = TD_OK;
    for (int a = 0; st == TD_OK && a < o->n_wl; a++) {
        if (o->wl[a] == 5 && dev.type == TD_DEVICE_CPU && !o->quick) continue; /* hours per step */
        for (int z = 0; st == TD_OK && z < (alone ? 1 : o->n_zero); z++)
            for (int g = 0; st == TD_OK && g < (alone ? 1 : o->n_grad); g++)
                st = run_one(o, dev, o->wl[a], alone ? 0 : o->zero[z], alone ? TD_F32 : o->grad[g]);
    }
    if (st != TD_OK) fprintf(stderr, "bench --ddp: rank %d: %s\n", td_dist_rank(), td_last_error());
    td_dist_destroy();
    return st == TD_OK ? 0 : 1;
}

/* ---- the driver ------------------------------------------------------------------------------------------- */

typedef struct row {
    int wl, zero, world, twin;
    char grad[8];
    double ms, tps, peak, opt, comm;
} row;

#define MAX_ROWS 256

/* A port free now for a launch's rendezvous (the kernel's pick), so that runs beside this one don't meet on
** launch's default 29500; 29500 when none can be had. */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = 29500;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd >= 0 && !bind(fd, (struct sockaddr *)&a, sizeof a) && !getsockname(fd, (struct sockaddr *)&a, &len))
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

/* Run cmd and collect its "ddp-result" lines into rows (twin: from the PyTorch twin). */
static void collect(const char *cmd, int twin, row *rows, int *n) {
    fprintf(stderr, "+ %s\n", cmd);
    fflush(stderr);
    FILE *p = popen(cmd, "r");
    char line[1024];
    while (p && fgets(line, sizeof line, p)) {
        if (strncmp(line, "ddp-result ", 11) || *n >= MAX_ROWS) continue;
        fprintf(stderr, "%s %s", twin ? "torch" : "trident", line); /* as it comes: a run cut short keeps them */
        fflush(stderr);
        row r = {.twin = twin, .peak = -1, .opt = -1};
        for (char *save = NULL, *t = strtok_r(line + 11, " \n", &save); t; t = strtok_r(NULL, " \n", &save)) {
            char *eq = strchr(t, '=');
            if (!eq) continue;
            *eq++ = 0;
            if (!strcmp(t, "wl")) r.wl = atoi(eq + (*eq == 'W'));
            if (!strcmp(t, "zero")) r.zero = atoi(eq);
            if (!strcmp(t, "grad")) snprintf(r.grad, sizeof r.grad, "%s", eq);
            if (!strcmp(t, "world")) r.world = atoi(eq);
            if (!strcmp(t, "ms")) r.ms = atof(eq);
            if (!strcmp(t, "tps")) r.tps = atof(eq);
            if (!strcmp(t, "peak_mib")) r.peak = atof(eq);
            if (!strcmp(t, "opt_mib")) r.opt = atof(eq);
            if (!strcmp(t, "comm")) r.comm = atof(eq);
        }
        if (r.ms > 0 && r.world > 0) rows[(*n)++] = r;
    }
    if (p) pclose(p);
}

/* The row of (twin, wl, world) in configuration (zero, grad); one process has a single row. */
static const row *find(const row *rows, int n, int twin, int wl, int world, int zero, const char *grad) {
    for (int i = 0; i < n; i++)
        if (rows[i].twin == twin && rows[i].wl == wl && rows[i].world == world &&
            (world == 1 || (rows[i].zero == zero && !strcmp(rows[i].grad, grad))))
            return &rows[i];
    return NULL;
}

static void print_cells(const row *r, const row *one, int n) {
    if (!r) {
        printf(" %9s %11s %6s %6s %8s %7s %6s", "n/a", "n/a", "", "", "", "", "");
        return;
    }
    char peak[16] = "n/a", comm[16] = "-";
    if (r->peak >= 0) snprintf(peak, sizeof peak, "%.0f", r->peak);
    if (r->world > 1) snprintf(comm, sizeof comm, "%.1f%%", 100 * r->comm);
    printf(" %9.2f %11.0f %6.3f %6.3f %8s %7.2f %6s", r->ms, r->tps, one ? r->tps / (n * one->tps) : 0,
           one ? r->ms / one->ms : 0, peak, r->opt, comm);
}

/* a comma-separated list of names into indices of choices (at most max); -1 with a message on a bad name */
static int parse_list(const char *opt, const char *s, const char *const *choices, int n_choices, int *out, int max) {
    int n = 0;
    const char *p = s;
    while (*p) {
        size_t len = strcspn(p, ",");
        int k = -1;
        for (int c = 0; c < n_choices; c++)
            if (strlen(choices[c]) == len && !strncasecmp(p, choices[c], len)) k = c;
        if (k < 0 || n >= max || !len || (p[len] == ',' && !p[len + 1])) {
            if (max == 1)
                fprintf(stderr, "trident bench --ddp: %s %s: one of", opt, TD_QUOTE(s));
            else
                fprintf(stderr, "trident bench --ddp: %s %s: a list of at most %d of", opt, TD_QUOTE(s), max);
            for (int c = 0; c < n_choices; c++) fprintf(stderr, "%s %s", c ? "," : "", choices[c]);
            fputc('\n', stderr);
            return -1;
        }
        out[n++] = k;
        p += len + (p[len] == ',');
    }
    if (!n) fprintf(stderr, "trident bench --ddp: %s is empty\n", opt);
    return n ? n : -1;
}

static int parse_nproc(const char *s, ddp_bench *o) {
    o->n_nproc = 0;
    for (const char *p = s; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || (*end && *end != ',') || v < 1 || v > 64 || o->n_nproc >= MAX_N)
            return fprintf(stderr, "trident bench --ddp: --nproc %s: a list of at most %d counts in [1, 64]\n",
                           TD_QUOTE(s), MAX_N),
                   -1;
        o->nproc[o->n_nproc++] = (int)v;
        p = end + (*end == ',');
    }
    if (o->n_nproc == 1 && o->nproc[0] > 1) o->nproc[1] = o->nproc[0], o->nproc[0] = 1, o->n_nproc = 2;
    return o->n_nproc ? 0 : -1;
}

int cmd_bench_ddp(int argc, char **argv) {
    ddp_bench o = {.nproc = {1, 2},
                   .n_nproc = 2,
                   .steps = 20,
                   .warmup = 3,
                   .device = "cuda",
                   .python = "python3",
                   .twin = "bench/torch_ddp.py",
                   .only = "W3",
                   .amp_s = "fp32",
                   .zero_s = "0",
                   .grad_s = "fp32"};
    bool is_worker = false, steps_set = false;
    const char *nproc_s = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--ddp")) continue;
        if (!strcmp(a, "--ddp-worker"))
            is_worker = true;
        else if (!strcmp(a, "--quick"))
            o.quick = true;
        else if (!strcmp(a, "--torch"))
            o.torch = true;
        else if (v && !strcmp(a, "--nproc"))
            nproc_s = argv[++i];
        else if (v && !strcmp(a, "--steps"))
            o.steps = atoi(argv[++i]), steps_set = true;
        else if (v && !strcmp(a, "--warmup"))
            o.warmup = atoi(argv[++i]);
        else if (v && (!strcmp(a, "--device") || !strcmp(a, "--backends")))
            o.device = argv[++i];
        else if (v && !strcmp(a, "--backend"))
            o.backend = argv[++i];
        else if (v && !strcmp(a, "--only"))
            o.only = argv[++i];
        else if (v && !strcmp(a, "--amp"))
            o.amp_s = argv[++i];
        else if (v && !strcmp(a, "--zero"))
            o.zero_s = argv[++i];
        else if (v && !strcmp(a, "--ddp-grad-dtype"))
            o.grad_s = argv[++i];
        else if (v && !strcmp(a, "--python"))
            o.python = argv[++i];
        else if (v && !strcmp(a, "--twin")) /* default: bench/torch_ddp.py here, else in the source tree */
            o.twin = argv[++i];
        else
            return fprintf(stderr,
                           "trident bench --ddp: unknown option %s (--nproc N[,N...], --only W3,W5, --amp fp32|bf16, "
                           "--zero 0,1, --ddp-grad-dtype fp32,bf16, --steps N, --warmup N, --device D, --backend B, "
                           "--quick, --torch, --python EXE, --twin PATH)\n",
                           TD_QUOTE(a)),
                   2;
    }
    if (o.quick && !steps_set) o.steps = 5;
    if (nproc_s && parse_nproc(nproc_s, &o)) return 2;
    if (o.steps < 1 || o.warmup < 0) return fprintf(stderr, "trident bench --ddp: --steps >= 1, --warmup >= 0\n"), 2;
    if (o.backend && strcmp(o.backend, "nccl") && strcmp(o.backend, "mpi") && strcmp(o.backend, "tcp"))
        return fprintf(stderr, "trident bench --ddp: --backend %s is not nccl, mpi or tcp\n", TD_QUOTE(o.backend)), 2;
    static const char *const wls[] = {"W3", "W5"}, *const zeros[] = {"0", "1"}, *const dts[] = {"fp32", "bf16"};
    int idx[2];
    if ((o.n_wl = parse_list("--only", o.only, wls, 2, idx, 2)) < 0) return 2;
    for (int k = 0; k < o.n_wl; k++) o.wl[k] = idx[k] ? 5 : 3;
    if ((o.n_zero = parse_list("--zero", o.zero_s, zeros, 2, o.zero, 2)) < 0) return 2;
    if ((o.n_grad = parse_list("--ddp-grad-dtype", o.grad_s, dts, 2, idx, 2)) < 0) return 2;
    for (int k = 0; k < o.n_grad; k++) o.grad[k] = idx[k] ? TD_BF16 : TD_F32;
    if (parse_list("--amp", o.amp_s, dts, 2, idx, 1) < 0) return 2;
    o.amp = idx[0] ? TD_BF16 : TD_F32;
    td_device parsed;
    if (td_device_parse(o.device, &parsed) != TD_OK)
        return fprintf(stderr, "trident bench --ddp: --device: %s\n", td_last_error()), 2;
    if (is_worker) return worker(&o);
#ifdef BENCH_SOURCE_DIR
    if (!strcmp(o.twin, "bench/torch_ddp.py") && access(o.twin, R_OK)) o.twin = BENCH_SOURCE_DIR "/bench/torch_ddp.py";
#endif

    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return fprintf(stderr, "trident bench --ddp: cannot find this executable\n"), 1;
    self[len] = 0;
    bool cuda = parsed.type == TD_DEVICE_CUDA, cpu = parsed.type == TD_DEVICE_CPU;
    if (!o.backend) o.backend = cuda ? "nccl" : "mpi";
    static row rows[MAX_ROWS];
    int n_rows = 0;
    char lists[512];
    snprintf(lists, sizeof lists, "--only %s --amp %s --zero %s --ddp-grad-dtype %s --steps %d --warmup %d%s", o.only,
             o.amp_s, o.zero_s, o.grad_s, o.steps, o.warmup, o.quick ? " --quick" : "");
    for (int k = 0; k < o.n_nproc; k++) {
        char cmd[12288];
        snprintf(cmd, sizeof cmd,
                 "'%s' launch --nproc %d --backend %s --master-port %d -- '%s' bench --ddp-worker --device %s %s", self,
                 o.nproc[k], o.backend, free_port(), self, o.device, lists);
        collect(cmd, 0, rows, &n_rows);
        /* the twin under torchrun on GPUs; on the CPU under this launch (torchrun's variables), as torch 1.13's
        ** torchrun fails on Python 3.11 */
        if (o.torch && cuda)
            snprintf(cmd, sizeof cmd,
                     "%s -m torch.distributed.run --standalone --nproc_per_node %d '%s' --device cuda %s", o.python,
                     o.nproc[k], o.twin, lists);
        else if (o.torch && cpu)
            snprintf(cmd, sizeof cmd,
                     "'%s' launch --nproc %d --backend tcp --master-port %d -- %s '%s' --device cpu %s", self,
                     o.nproc[k], free_port(), o.python, o.twin, lists);
        if (o.torch && (cuda || cpu)) collect(cmd, 1, rows, &n_rows);
    }
    bool ok = true;
    for (int a = 0; a < o.n_wl; a++)
        for (int z = 0; z < o.n_zero; z++)
            for (int g = 0; g < o.n_grad; g++) {
                if (o.wl[a] == 5 && cpu && !o.quick) { /* as the workers: hours per step */
                    if (!z && !g) printf("\nW5 GPT-2 small: GPUs only (or --quick)\n");
                    continue;
                }
                const char *gd = o.grad[g] == TD_BF16 ? "bf16" : "fp32";
                printf("\nW%d %s%s on %s (%s), %s, %s gradient buckets: fixed batch per process, %d warm-up + %d "
                       "timed steps\n",
                       o.wl[a], o.wl[a] == 5 ? "GPT-2 small" : "GPT-mini", o.amp == TD_BF16 ? " bf16 autocast" : "",
                       o.device, o.backend, o.zero[z] ? "ZeRO-1" : "DDP", gd, o.warmup, o.steps);
                printf("%-5s %9s %11s %6s %6s %8s %7s %6s |%s %9s %11s %6s %6s %8s %7s %6s\n", "procs", "ms/step",
                       "tokens/s", "eff.", "vs 1", "peak MiB", "opt MiB", "comm", " torch", "ms/step", "tokens/s",
                       "eff.", "vs 1", "peak MiB", "opt MiB", "comm");
                for (int k = 0; k < o.n_nproc; k++) {
                    int n = o.nproc[k];
                    const row *t = find(rows, n_rows, 0, o.wl[a], n, o.zero[z], gd),
                              *t1 = find(rows, n_rows, 0, o.wl[a], 1, 0, ""),
                              *p = find(rows, n_rows, 1, o.wl[a], n, o.zero[z], gd),
                              *p1 = find(rows, n_rows, 1, o.wl[a], 1, 0, "");
                    ok = ok && t;
                    printf("%-5d", n);
                    print_cells(t, t1, n);
                    printf(" |      ");
                    print_cells(p, p1, n);
                    printf("\n");
                }
            }
    return ok ? 0 : 1;
}
