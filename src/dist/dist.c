/*
** The process group: td_dist_init reads the launcher's environment, binds the
** device, loads the transport plugin (libtrident-nccl.so or libtrident-mpi.so,
** contract in transport.h), and for nccl runs the TCP rendezvous
** (rendezvous.c) that hands out rank 0's NCCL id. The collectives check their
** tensors and hand raw pointers to the transport: CPU memory and CUDA memory
** directly, Vulkan memory through a host copy (td_to the CPU, then td_copy_
** back).
**
** tcp (TD_DIST_TCP, tcp.c): the same rendezvous, whose sockets then carry
** the CPU collectives themselves (no watchdog: each call sees a lost peer).
**
** The worker (tcp; mpi where MPI_Init_thread provides MPI_THREAD_SERIALIZED):
** DDP's started collectives (td__dist_all_reduce_start, _reduce_start) run on
** a thread of their own. The caller stages the tensor and queues the job: a
** Vulkan bucket's staging (staging.c) only queues its copy into a host buffer
** and a fence, so the training thread never waits for the device; the worker
** waits for the fence, reduces on the host, and takes the next job, while
** backward goes on. td__dist_wait_started waits for the queue and queues each
** host copy's write back to its tensor (the device runs it before the later
** work: the optimizer step). Every other collective first waits for the
** queue, so the transport carries the collectives one at a time, in the order
** they were called (MPI_THREAD_SERIALIZED's rule). Without the thread level,
** mpi's calls stay on the caller's thread (a note on rank 0 says so).
**
** Watchdog (nccl): a thread reads the rendezvous sockets. A peer's socket that
** closes without the goodbye byte means that process died: the watchdog
** records "rank K exited ...", aborts the transport (ncclCommAbort ends the
** collectives in flight, so no host wait hangs), and rank 0 closes every other
** socket so that all ranks learn it. Every later collective returns
** TD_ERR_STATE with that message; if the process has not left the group 10 s
** later (it may be blocked where no error reaches it), the watchdog prints the
** message and ends the process with status 1 (TRIDENT_DIST_EXIT_ON_FAILURE=0
** turns that off).
*/
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "dist/dist_internal.h"

#define GOODBYE   'B'
#define MAX_RANKS 4096

static struct {
    bool inited;
    int rank, world, local_rank, local_world;
    td_device dev;
    td_dist_backend backend;
    const td_dist_transport *tr; /* NULL for a group of one */
    void *lib;
    /* nccl: rendezvous sockets (rank 0: [1, world), others: [0]) and the watchdog */
    int *fds;
    int wake[2];
    pthread_t watchdog;
    bool watchdog_on;
    atomic_bool failed, leaving;
    char failure[256];
} g = {.wake = {-1, -1}};

static td_status worker_start(void); /* tcp's worker for started collectives (below) */
static void worker_stop(void);

/* ---- environment ---------------------------------------------------------- */

/* *out = integer env var name; TD_OK, TD_ERR_MISUSE when malformed; *present says whether it was set. */
static td_status env_int(const char *name, int *out, bool *present) {
    const char *s = getenv(name);
    *present = s && *s;
    if (!*present) return TD_OK;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*end || errno || v < 0 || v > 1 << 30)
        return TD_ERR(TD_ERR_MISUSE, "dist_init: %s=%s is not a non-negative integer", name, TD_QUOTE(s));
    *out = (int)v;
    return TD_OK;
}

typedef struct launch_env {
    bool torchrun, ompi, master; /* master: MASTER_ADDR given, a rendezvous to meet at */
    int rank, world, local_rank, local_world, port;
    const char *addr;
} launch_env;

static td_status read_env(launch_env *e) {
    *e = (launch_env){.world = 1, .local_world = 1, .port = 29500, .addr = "127.0.0.1"};
    int ow = 0, orank = 0, olr = 0, olw = 1;
    bool p1, p2, p3, p4, p5;
    td_status st;
    if ((st = env_int("OMPI_COMM_WORLD_SIZE", &ow, &p1)) || (st = env_int("OMPI_COMM_WORLD_RANK", &orank, &p2)) ||
        (st = env_int("OMPI_COMM_WORLD_LOCAL_RANK", &olr, &p3)) ||
        (st = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", &olw, &p4)))
        return st;
    e->ompi = p1;
    int tw = 1, trank = 0, tlr = 0, tlw = 1;
    if ((st = env_int("WORLD_SIZE", &tw, &p1)) || (st = env_int("RANK", &trank, &p2)) ||
        (st = env_int("LOCAL_RANK", &tlr, &p3)) || (st = env_int("LOCAL_WORLD_SIZE", &tlw, &p4)) ||
        (st = env_int("MASTER_PORT", &e->port, &p5)))
        return st;
    e->torchrun = p1;
    if (e->torchrun && !e->ompi && !p2)
        return TD_ERR(TD_ERR_MISUSE, "dist_init: WORLD_SIZE=%d is set but RANK is not", tw);
    const char *a = getenv("MASTER_ADDR");
    if (a && *a) e->addr = a, e->master = true;
    if (e->ompi) {
        if (e->torchrun && tw != ow)
            return TD_ERR(TD_ERR_MISUSE,
                          "dist_init: WORLD_SIZE=%d but mpirun started %d processes (OMPI_COMM_WORLD_SIZE)", tw, ow);
        e->rank = orank, e->world = ow, e->local_rank = olr, e->local_world = p4 ? olw : ow;
    } else if (e->torchrun) {
        e->rank = trank, e->world = tw, e->local_rank = p3 ? tlr : trank, e->local_world = p4 ? tlw : tw;
    }
    if (e->world < 1 || e->world > MAX_RANKS)
        return TD_ERR(TD_ERR_MISUSE, "dist_init: WORLD_SIZE=%d is outside [1, %d]", e->world, MAX_RANKS);
    if (e->rank >= e->world)
        return TD_ERR(TD_ERR_MISUSE, "dist_init: RANK=%d is not below WORLD_SIZE=%d", e->rank, e->world);
    if (e->local_rank >= e->local_world)
        return TD_ERR(TD_ERR_MISUSE, "dist_init: LOCAL_RANK=%d is not below LOCAL_WORLD_SIZE=%d", e->local_rank,
                      e->local_world);
    if (e->port < 1 || e->port > 65535)
        return TD_ERR(TD_ERR_MISUSE, "dist_init: MASTER_PORT=%d is outside [1, 65535]", e->port);
    return TD_OK;
}

/* ---- the transport plugin ------------------------------------------------- */

static td_status load_transport(const char *name) {
    char dir[4096], path[4200];
    const char *env = getenv("TRIDENT_PLUGIN_DIR");
    Dl_info info;
    if (env && *env)
        snprintf(dir, sizeof dir, "%s", env);
    else if (dladdr((void *)&load_transport, &info) && info.dli_fname && strrchr(info.dli_fname, '/'))
        snprintf(dir, sizeof dir, "%.*s", (int)(strrchr(info.dli_fname, '/') - info.dli_fname), info.dli_fname);
    else
        snprintf(dir, sizeof dir, ".");
    snprintf(path, sizeof path, "%s/libtrident-%s.so", dir, name);
    /* RTLD_GLOBAL: MPI's own components dlopen and expect libmpi's symbols */
    void *lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!lib) return TD_ERR(TD_ERR_UNSUPPORTED, "dist_init: the %s backend is not available: %s", name, dlerror());
    td_dist_transport_fn fn = (td_dist_transport_fn)dlsym(lib, "td_dist_transport_plugin");
    const td_dist_transport *tr = fn ? fn() : NULL;
    if (!tr || tr->version != TD_DIST_TRANSPORT_VERSION) {
        dlclose(lib);
        return TD_ERR(TD_ERR_UNSUPPORTED, "dist_init: %s is not a transport plugin of version %d", path,
                      TD_DIST_TRANSPORT_VERSION);
    }
    g.lib = lib, g.tr = tr;
    return TD_OK;
}

/* ---- watchdog ------------------------------------------------------------- */

/* After a failure: unless the process leaves the group within 10 s, say why and end it. */
static void *exit_timer(void *arg) {
    (void)arg;
    for (int i = 0; i < 100 && !atomic_load(&g.leaving); i++) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (atomic_load(&g.leaving)) return NULL;
    fprintf(stderr, "trident dist: rank %d: %s; exiting\n", g.rank, g.failure);
    _exit(1);
}

static void fail_group(const char *msg) {
    if (atomic_exchange(&g.failed, true)) return;
    snprintf(g.failure, sizeof g.failure, "%s", msg);
    const char *e = getenv("TRIDENT_DIST_EXIT_ON_FAILURE");
    pthread_t t;
    if (!(e && !strcmp(e, "0")) && pthread_create(&t, NULL, exit_timer, NULL) == 0) /* first: abort may block */
        pthread_detach(t);
    if (g.tr && g.tr->abort) g.tr->abort();
    for (int r = 0; r < g.world; r++) /* tell the others (rank 0), or stop listening */
        if (g.fds[r] >= 0) shutdown(g.fds[r], SHUT_RDWR);
}

static void *watchdog_main(void *arg) {
    (void)arg;
    struct pollfd pf[MAX_RANKS + 1];
    int who[MAX_RANKS + 1];
    for (;;) {
        int n = 0;
        pf[n] = (struct pollfd){.fd = g.wake[0], .events = POLLIN}, who[n++] = -1;
        for (int r = 0; r < g.world; r++)
            if (g.fds[r] >= 0) pf[n] = (struct pollfd){.fd = g.fds[r], .events = POLLIN}, who[n++] = r;
        if (n == 1 || atomic_load(&g.failed)) break;
        if (poll(pf, (nfds_t)n, -1) < 0 && errno != EINTR) break;
        if (pf[0].revents) return NULL; /* td_dist_destroy */
        for (int k = 1; k < n; k++) {
            if (!pf[k].revents) continue;
            char c = 0;
            ssize_t got = recv(pf[k].fd, &c, 1, 0);
            if (got == 1 && c == GOODBYE) { /* that rank left the group normally */
                close(g.fds[who[k]]);
                g.fds[who[k]] = -1;
                continue;
            }
            char msg[256];
            if (g.rank == 0)
                snprintf(msg, sizeof msg,
                         "rank %d exited or lost its connection without leaving the group (see its own output)",
                         who[k]);
            else
                snprintf(msg, sizeof msg,
                         "lost the connection to rank 0: a rank exited or failed (rank 0's output names it)");
            fail_group(msg);
            break;
        }
    }
    return NULL;
}

/* ---- init and destroy ------------------------------------------------------- */

static td_status bind_device(const td_dist_opts *o, const launch_env *e) {
    td_device_type type = o->device_type;
    if (type == TD_DEVICE_CPU) return g.dev = TD_CPU, TD_OK;
    int index = o->fixed_index ? o->index : e->local_rank;
    g.dev = (td_device){type, index};
    if (!td_device_available(g.dev)) {
        char d[32];
        return TD_ERR(TD_ERR_UNAVAILABLE,
                      "dist_init: rank %d (LOCAL_RANK %d) binds %s, which is not available here (fewer devices than "
                      "processes per host?)",
                      e->rank, e->local_rank, td_device_str(g.dev, d, sizeof d));
    }
    return TD_OK;
}

/* Seconds the rendezvous (and tcp's collectives) wait: opts, TRIDENT_DIST_TIMEOUT, else 60. */
static double timeout_of(const td_dist_opts *o) {
    const char *t = getenv("TRIDENT_DIST_TIMEOUT");
    return o->timeout_s > 0 ? o->timeout_s : t && atof(t) > 0 ? atof(t) : 60;
}

static td_status init_tcp(const td_dist_opts *o, const launch_env *e) {
    if (g.dev.type == TD_DEVICE_CUDA)
        return TD_ERR(TD_ERR_MISUSE, "dist_init: the tcp backend carries CPU (and Vulkan) tensors; CUDA uses nccl");
    double timeout = timeout_of(o);
    unsigned char id[TD_DIST_ID_BYTES] = {0};
    td__rdzv z = {.addr = e->addr, .port = e->port, .rank = e->rank, .world = e->world, .timeout_s = timeout};
    td_status st = td__rdzv_run(&z, id, g.fds);
    if (st) return st;
    g.tr = td__tcp_transport(g.fds, e->rank, e->world, timeout);
    return worker_start();
}

static td_status init_nccl(const td_dist_opts *o, const launch_env *e) {
    if (g.dev.type != TD_DEVICE_CUDA)
        return TD_ERR(TD_ERR_MISUSE,
                      "dist_init: the nccl backend needs CUDA tensors; use --device cuda or the mpi backend");
    td_status st = load_transport("nccl");
    if (st) return st;
    char why[TD_DIST_WHY] = "";
    unsigned char id[TD_DIST_ID_BYTES] = {0};
    if (e->rank == 0 && g.tr->make_id(id, why)) return TD_ERR(TD_ERR_DEVICE, "dist_init: %s", why);
    td__rdzv z = {.addr = e->addr, .port = e->port, .rank = e->rank, .world = e->world, .timeout_s = timeout_of(o)};
    if ((st = td__rdzv_run(&z, id, g.fds))) return st;
    int rank = e->rank, world = e->world;
    if (g.tr->init(&rank, &world, g.dev.index, id, why)) return TD_ERR(TD_ERR_DEVICE, "dist_init: %s", why);
    if (pipe(g.wake) != 0) return TD_ERR(TD_ERR_OOM, "dist_init: pipe: %s", strerror(errno));
    if (pthread_create(&g.watchdog, NULL, watchdog_main, NULL) != 0)
        return TD_ERR(TD_ERR_OOM, "dist_init: cannot start the watchdog thread");
    g.watchdog_on = true;
    return TD_OK;
}

static td_status init_mpi(const launch_env *e) {
    if (!e->ompi)
        return TD_ERR(
            TD_ERR_MISUSE,
            "dist_init: the mpi backend (CPU and Vulkan tensors) needs processes started by mpirun "
            "(mpirun -np N ..., or trident launch --backend mpi); this one has only torchrun's variables (without "
            "mpirun: TRIDENT_DIST_BACKEND=tcp, as trident launch --backend tcp sets)");
    td_status st = load_transport("mpi");
    if (st) return st;
    char why[TD_DIST_WHY] = "";
    int rank = e->rank, world = e->world;
    if (g.tr->init(&rank, &world, g.dev.index, NULL, why)) return TD_ERR(TD_ERR_DEVICE, "dist_init: %s", why);
    if (rank != e->rank || world != e->world)
        return TD_ERR(TD_ERR_MISUSE, "dist_init: MPI says rank %d of %d, the environment rank %d of %d", rank, world,
                      e->rank, e->world);
    if (g.tr->any_thread && g.tr->any_thread()) return worker_start();
    if (rank == 0)
        fprintf(stderr, "trident dist: MPI does not provide MPI_THREAD_SERIALIZED: DDP's all-reduces run on the "
                        "training thread\n");
    return TD_OK;
}

static void reset(void) {
    worker_stop(); /* before the sockets close: it runs what was queued */
    td__host_copy_pool_free();
    if (g.watchdog_on) {
        atomic_store(&g.leaving, true);
        if (write(g.wake[1], "x", 1) < 0) { /* the thread then sees the pipe closed below */
        }
        pthread_join(g.watchdog, NULL);
    }
    for (int r = 0; g.fds && r < g.world; r++)
        if (g.fds[r] >= 0) {
            if (send(g.fds[r], (char[]){GOODBYE}, 1, MSG_NOSIGNAL) < 0) { /* the peer is gone: nothing to tell */
            }
            close(g.fds[r]);
        }
    for (int k = 0; k < 2; k++)
        if (g.wake[k] >= 0) close(g.wake[k]);
    if (g.tr && g.tr->finalize) g.tr->finalize();
    free(g.fds);
    memset(&g, 0, sizeof g);
    g.wake[0] = g.wake[1] = -1;
}

td_status td_dist_init(const td_dist_opts *opts) {
    if (g.inited) return TD_ERR(TD_ERR_STATE, "dist_init: this process is in a group already (td_dist_destroy first)");
    td_dist_opts o = opts ? *opts : (td_dist_opts){0};
    launch_env e;
    td_status st = read_env(&e);
    if (st) return st;
    g.rank = e.rank, g.world = e.world, g.local_rank = e.local_rank, g.local_world = e.local_world;
    g.fds = malloc(sizeof *g.fds * (size_t)e.world);
    if (!g.fds) return TD_ERR(TD_ERR_OOM, "dist_init: out of host memory");
    for (int r = 0; r < e.world; r++) g.fds[r] = -1;
    if ((st = bind_device(&o, &e))) return reset(), st;
    const char *b = getenv("TRIDENT_DIST_BACKEND");
    if (!o.backend && b && *b) {
        o.backend = !strcmp(b, "nccl")  ? TD_DIST_NCCL
                    : !strcmp(b, "mpi") ? TD_DIST_MPI
                    : !strcmp(b, "tcp") ? TD_DIST_TCP
                                        : 0;
        if (!o.backend)
            return reset(),
                   TD_ERR(TD_ERR_MISUSE, "dist_init: TRIDENT_DIST_BACKEND=%s is not nccl, mpi or tcp", TD_QUOTE(b));
    }
    /* by default: NCCL for CUDA tensors; else MPI under mpirun, tcp where only a rendezvous address was given
    ** (trident launch or torchrun on a host whose command trains on the CPU or Vulkan) */
    g.backend = o.backend                           ? o.backend
                : g.dev.type == TD_DEVICE_CUDA      ? TD_DIST_NCCL
                : !e.ompi && e.torchrun && e.master ? TD_DIST_TCP
                                                    : TD_DIST_MPI;
    if (e.world > 1)
        st = g.backend == TD_DIST_NCCL ? init_nccl(&o, &e) : g.backend == TD_DIST_TCP ? init_tcp(&o, &e) : init_mpi(&e);
    if (st) {
        td_status keep = td_last_status();
        char msg[512];
        snprintf(msg, sizeof msg, "%s", td_last_error());
        reset();
        return td_error_set(keep, "%s", msg);
    }
    g.inited = true;
    return TD_OK;
}

void td_dist_destroy(void) {
    if (g.inited) reset();
}

bool td_dist_is_initialized(void) { return g.inited; }
int td_dist_rank(void) { return g.inited ? g.rank : 0; }
int td_dist_world_size(void) { return g.inited ? g.world : 1; }
int td_dist_local_rank(void) { return g.inited ? g.local_rank : 0; }
td_device td_dist_device(void) { return g.inited ? g.dev : TD_CPU; }
td_dist_backend td_dist_get_backend(void) { return g.inited ? g.backend : TD_DIST_AUTO; }

/* ---- collectives ------------------------------------------------------------- */

/* A tensor handed to the transport: its memory, or a host copy of it. */
typedef struct staged {
    td_tensor *t, *host; /* host: the CPU copy of a Vulkan tensor (+1), else NULL */
    td__host_copy hc;    /* a queued job's Vulkan tensor: its host buffer (hc.hb), else hc.hb NULL */
    void *ptr, *stream;
} staged;

/* tcp: a started collective for the worker (t of s is retained, +1) */
typedef struct job {
    staged s;
    size_t count;
    int dt, op, root; /* root < 0: all_reduce, else reduce to root */
} job;

static struct {
    pthread_t thread;
    bool on, stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    job *jobs;
    int n, cap, done; /* queued, and run (in order) */
    int rc;           /* the first failure's, with why */
    char why[TD_DIST_WHY];
} w = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void *worker_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&w.mu);
    for (;;) {
        while (w.done == w.n && !w.stop) pthread_cond_wait(&w.cv, &w.mu);
        if (w.done == w.n) break;
        int at = w.done;
        job j = w.jobs[at];
        bool skip = w.rc != 0; /* after a failure the queue only drains */
        pthread_mutex_unlock(&w.mu);
        char why[TD_DIST_WHY] = "";
        int rc = 0;
        if (j.s.hc.fence && td__host_copy_wait(&j.s.hc) != TD_OK) /* the bucket's bytes are on the host now */
            rc = 1, snprintf(why, sizeof why, "%s", td_last_error());
        if (!rc && !skip)
            rc = j.root < 0 ? g.tr->all_reduce(j.s.ptr, j.count, j.dt, j.op, NULL, why)
                            : g.tr->reduce_start(j.s.ptr, j.count, j.dt, j.op, j.root, NULL, why);
        pthread_mutex_lock(&w.mu);
        w.jobs[at].s.hc.fence = NULL; /* waited */
        if (rc && !w.rc) w.rc = rc, snprintf(w.why, sizeof w.why, "%s", why);
        w.done++;
        pthread_cond_broadcast(&w.cv);
    }
    pthread_mutex_unlock(&w.mu);
    return NULL;
}

static td_status worker_start(void) {
    w.stop = false, w.n = w.done = w.rc = 0;
    if (pthread_create(&w.thread, NULL, worker_main, NULL) != 0)
        return TD_ERR(TD_ERR_OOM, "dist_init: cannot start the collectives' worker thread");
    w.on = true;
    return TD_OK;
}

/* Wait until the worker ran every queued job; *rc and why: the first failure. */
static void worker_drain(int *rc, char *why) {
    pthread_mutex_lock(&w.mu);
    while (w.done < w.n) pthread_cond_wait(&w.cv, &w.mu);
    *rc = w.rc;
    snprintf(why, TD_DIST_WHY, "%s", w.why);
    w.rc = 0, w.why[0] = 0;
    pthread_mutex_unlock(&w.mu);
}

static void worker_stop(void) {
    if (!w.on) return;
    pthread_mutex_lock(&w.mu);
    w.stop = true;
    pthread_cond_broadcast(&w.cv);
    pthread_mutex_unlock(&w.mu);
    pthread_join(w.thread, NULL);
    for (int k = 0; k < w.n; k++) {
        td__host_copy_drop(&w.jobs[k].s.hc);
        td_release(w.jobs[k].s.host), td_release(w.jobs[k].s.t);
    }
    free(w.jobs);
    w.jobs = NULL, w.n = w.cap = w.done = 0, w.on = false;
}

static td_status usable(const char *api) {
    if (!g.inited) return TD_ERR(TD_ERR_STATE, "%s: no process group (call td_dist_init first)", api);
    if (atomic_load(&g.failed)) return TD_ERR(TD_ERR_STATE, "%s: the group failed: %s", api, g.failure);
    return TD_OK;
}

/* t's memory, or its host copy, for the transport: s->ptr. queued: for the worker, whose
** wait for a Vulkan tensor's host buffer (when its backend has them) keeps this thread from waiting. */
static td_status stage(td_tensor *t, const char *api, const char *arg, bool queued, staged *s) {
    *s = (staged){.t = t};
    if (!td__check_arg(t, api, arg)) return td_last_status();
    char a[32], b[32];
    td_device d = td_tensor_device(t);
    bool here = td_device_equal(d, g.dev) || (g.backend != TD_DIST_NCCL && d.type == TD_DEVICE_CPU);
    if (!here)
        return TD_ERR(TD_ERR_MISUSE, "%s: %s is on %s, but this rank's group is bound to %s", api, arg,
                      td_device_str(d, a, sizeof a), td_device_str(g.dev, b, sizeof b));
    if (!td_is_contiguous(t)) return TD_ERR(TD_ERR_MISUSE, "%s: %s is not contiguous (td_contiguous first)", api, arg);
    if (!g.tr || td_numel(t) == 0) return TD_OK;
    if (d.type == TD_DEVICE_VULKAN && queued && td__host_copy_able(t)) { /* host staging without a wait here */
        td_status st = td__host_copy_start(t, &s->hc);
        if (st) return st;
        s->ptr = s->hc.host;
    } else if (d.type == TD_DEVICE_VULKAN) { /* host staging: a host wait */
        td_scope_begin();
        s->host = td_keep(td_contiguous(td_to(t, TD_CPU)));
        td_scope_end();
        if (!s->host) return td_last_status();
        s->ptr = (void *)(uintptr_t)td_tensor_device_address(s->host);
    } else {
        s->ptr = (void *)(uintptr_t)td_tensor_device_address(t);
        if (d.type == TD_DEVICE_CUDA) s->stream = td_device_native_stream(d);
    }
    return s->ptr ? TD_OK : td_last_status();
}

/* Write a staged host copy back to its Vulkan tensor (queued), and free it. */
static td_status unstage(staged *s, td_status st) {
    if (st == TD_OK) td__storage_written(1, &s->t); /* the transport wrote it in place */
    if (s->hc.hb && st == TD_OK) st = td__host_copy_back(&s->hc);
    td__host_copy_drop(&s->hc); /* after a failure */
    if (s->host && st == TD_OK) st = td_copy_(s->t, s->host);
    td_release(s->host);
    s->host = NULL;
    return st;
}

static td_status transport_rc(int rc, const char *api, const char *why) {
    if (!rc) return TD_OK;
    if (g.backend == TD_DIST_TCP) fail_group(why); /* tcp names the lost rank; every later call fails */
    if (atomic_load(&g.failed)) return TD_ERR(TD_ERR_STATE, "%s: the group failed: %s", api, g.failure);
    return TD_ERR(TD_ERR_DEVICE, "%s: %s", api, why);
}

/* tcp: queue t's collective for the worker (root < 0: all_reduce); t is staged now. */
static td_status queue_job(td_tensor *t, td_dist_op op, int root, const char *api) {
    staged s;
    td_status st = stage(t, api, "t", true, &s);
    if (st || !s.ptr) return unstage(&s, st);
    pthread_mutex_lock(&w.mu);
    if (w.n == w.cap) {
        int cap = w.cap ? 2 * w.cap : 16;
        job *grown = realloc(w.jobs, sizeof *grown * (size_t)cap);
        if (!grown) {
            pthread_mutex_unlock(&w.mu);
            return unstage(&s, TD_ERR(TD_ERR_OOM, "%s: out of host memory", api));
        }
        w.jobs = grown, w.cap = cap;
    }
    s.t = td_retain(t);
    w.jobs[w.n++] = (job){.s = s, .count = (size_t)td_numel(t), .dt = td_tensor_dtype(t), .op = op, .root = root};
    pthread_cond_broadcast(&w.cv);
    pthread_mutex_unlock(&w.mu);
    return TD_OK;
}

/* tcp: wait for the worker's queue, write its host copies back (queued) and
** drop the jobs; the first failure. */
static td_status settle(const char *api) {
    if (!w.on) return TD_OK;
    int rc;
    char why[TD_DIST_WHY];
    worker_drain(&rc, why);
    td_status st = transport_rc(rc, api, why);
    pthread_mutex_lock(&w.mu);
    for (int k = 0; k < w.n; k++) {
        td_status back = unstage(&w.jobs[k].s, st);
        if (st == TD_OK) st = back;
        td_release(w.jobs[k].s.t);
    }
    w.n = w.done = 0;
    pthread_mutex_unlock(&w.mu);
    return st;
}

/* usable, and the started collectives finished (a blocking collective's start) */
static td_status settled(const char *api) {
    td_status st = usable(api);
    return st ? st : settle(api);
}

static td_status check_op(td_tensor *t, td_dist_op op, const char *api) {
    if ((unsigned)op > TD_DIST_MAX) return TD_ERR(TD_ERR_MISUSE, "%s: op %d is not sum, avg or max", api, (int)op);
    if (op == TD_DIST_AVG && !td_dtype_is_float(td_tensor_dtype(t)))
        return TD_ERR(TD_ERR_DTYPE, "%s: avg needs a floating dtype, not %s (use sum)", api,
                      td_dtype_name(td_tensor_dtype(t)));
    return TD_OK;
}

static td_status all_reduce(td_tensor *t, td_dist_op op, bool start, const char *api) {
    td_status st = start ? usable(api) : settled(api);
    if (st) return st;
    if (!td__check_arg(t, api, "t")) return td_last_status();
    if ((st = check_op(t, op, api))) return st;
    if (start && w.on) return queue_job(t, op, -1, api);
    staged s;
    if ((st = stage(t, api, "t", false, &s)) || !s.ptr) return unstage(&s, st);
    char why[TD_DIST_WHY] = "";
    int rc = (start ? g.tr->all_reduce_start : g.tr->all_reduce)(s.ptr, (size_t)td_numel(t), td_tensor_dtype(t), op,
                                                                 s.stream, why);
    return unstage(&s, transport_rc(rc, api, why));
}

td_status td_dist_all_reduce(td_tensor *t, td_dist_op op) { return all_reduce(t, op, false, "dist_all_reduce"); }

td_status td__dist_reduce_start(td_tensor *t, td_dist_op op, int root) {
    const char *api = "ddp reduce";
    td_status st = usable(api);
    if (st || (st = check_op(t, op, api))) return st;
    if (w.on) return queue_job(t, op, root, api);
    staged s;
    if ((st = stage(t, api, "t", false, &s)) || !s.ptr) return unstage(&s, st);
    char why[TD_DIST_WHY] = "";
    int rc = g.tr->reduce_start(s.ptr, (size_t)td_numel(t), td_tensor_dtype(t), op, root, s.stream, why);
    return unstage(&s, transport_rc(rc, api, why));
}
td_status td__dist_all_reduce_start(td_tensor *t, td_dist_op op) { return all_reduce(t, op, true, "ddp all_reduce"); }

/* A transport call that takes only the group's stream: barrier, else wait_started */
static td_status stream_call(bool barrier, const char *api) {
    td_status st = settled(api);
    if (st || !g.tr) return st;
    char why[TD_DIST_WHY] = "";
    void *stream = g.dev.type == TD_DEVICE_CUDA ? td_device_native_stream(g.dev) : NULL;
    return transport_rc((barrier ? g.tr->barrier : g.tr->wait_started)(stream, why), api, why);
}

td_status td__dist_wait_started(void) { return stream_call(false, "ddp wait"); }

td_status td_dist_broadcast(td_tensor *t, int root) {
    const char *api = "dist_broadcast";
    td_status st = settled(api);
    if (st) return st;
    if (root < 0 || root >= g.world) return TD_ERR(TD_ERR_MISUSE, "%s: root %d is outside [0, %d)", api, root, g.world);
    staged s;
    if ((st = stage(t, api, "t", false, &s)) || !s.ptr) return unstage(&s, st);
    char why[TD_DIST_WHY] = "";
    int rc = g.tr->broadcast(s.ptr, (size_t)td_numel(t), td_tensor_dtype(t), root, s.stream, why);
    return unstage(&s, transport_rc(rc, api, why));
}

/* big = world * small elements of one dtype */
static td_status check_pair(td_tensor *big, td_tensor *small, const char *api, const char *nb, const char *ns) {
    if (!td__check_arg(big, api, nb) || !td__check_arg(small, api, ns)) return td_last_status();
    if (td_tensor_dtype(big) != td_tensor_dtype(small))
        return TD_ERR(TD_ERR_DTYPE, "%s: %s is %s but %s is %s", api, nb, td_dtype_name(td_tensor_dtype(big)), ns,
                      td_dtype_name(td_tensor_dtype(small)));
    if (td_numel(big) != (int64_t)g.world * td_numel(small))
        return TD_ERR(TD_ERR_SHAPE, "%s: %s has %lld elements, expected world size %d x %lld (%s)", api, nb,
                      (long long)td_numel(big), g.world, (long long)td_numel(small), ns);
    return TD_OK;
}

/* out and in of a gather or scatter staged, out first; on failure both are unstaged */
static td_status stage_pair(td_tensor *out, td_tensor *in, const char *api, staged *so, staged *si) {
    td_status st = stage(out, api, "out", false, so);
    if (st) return unstage(so, st);
    if ((st = stage(in, api, "in", false, si))) return unstage(si, unstage(so, st));
    return TD_OK;
}

/* The end of a gather or scatter: in is only read (its host copy is not written back), out takes st. */
static td_status unstage_pair(staged *so, staged *si, td_status st) {
    unstage(si, TD_ERR_STATE);
    return unstage(so, st);
}

td_status td_dist_all_gather(td_tensor *out, td_tensor *in) {
    const char *api = "dist_all_gather";
    td_status st = settled(api);
    if (st || (st = check_pair(out, in, api, "out", "in"))) return st;
    staged so, si;
    if ((st = stage_pair(out, in, api, &so, &si))) return st;
    if (!g.tr) return unstage_pair(&so, &si, td_copy_(out, in));
    char why[TD_DIST_WHY] = "";
    int rc = so.ptr ? g.tr->all_gather(si.ptr, so.ptr, (size_t)td_numel(in), td_tensor_dtype(in), so.stream, why) : 0;
    return unstage_pair(&so, &si, transport_rc(rc, api, why));
}

td_status td_dist_reduce_scatter(td_tensor *out, td_tensor *in, td_dist_op op) {
    const char *api = "dist_reduce_scatter";
    td_status st = settled(api);
    if (st || (st = check_pair(in, out, api, "in", "out")) || (st = check_op(in, op, api))) return st;
    staged so, si;
    if ((st = stage_pair(out, in, api, &so, &si))) return st;
    if (!g.tr) return unstage_pair(&so, &si, td_copy_(out, in));
    char why[TD_DIST_WHY] = "";
    int rc = so.ptr
                 ? g.tr->reduce_scatter(si.ptr, so.ptr, (size_t)td_numel(out), td_tensor_dtype(in), op, so.stream, why)
                 : 0;
    return unstage_pair(&so, &si, transport_rc(rc, api, why));
}

td_status td_dist_barrier(void) { return stream_call(true, "dist_barrier"); }
