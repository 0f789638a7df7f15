/*
** trident launch: start N local processes of a command for data-parallel
** training, as torchrun does (docs/distributed.md).
**
**   trident launch --nproc N [--nnodes M --node-rank R] [--backend nccl|mpi|tcp] [--master-addr A]
**                  [--master-port P] -- CMD [ARG ...]
**
** nccl (the default when a CUDA device is present) and tcp (the default
** without one when --nnodes > 1): fork N processes with torchrun's
** environment (RANK = R * N + LOCAL_RANK, LOCAL_RANK, WORLD_SIZE = M * N,
** LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, ROLE_RANK,
** ROLE_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_*; tcp adds
** TRIDENT_DIST_BACKEND=tcp), each in a process group of its own, and watch
** them: when one exits with an error or is killed, the others' groups get
** SIGTERM (as does every rank on SIGINT or SIGTERM), then SIGKILL 10 s later,
** and launch exits with status 1 naming the rank. With --nnodes M, one launch
** runs on each of M hosts (node ranks 0..M-1), all naming node 0's address;
** the ranks meet in the rendezvous (src/dist/rendezvous.c). mpi (the default
** otherwise, one host only): run `mpirun -np N CMD ...`, which does the same
** for its processes. All set OMP_NUM_THREADS to the cores per process unless
** it is set. CMD `trident` runs this executable.
*/
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "trident/trident.h"

#define MAX_PROCS 256

static int fail(const char *fmt, const char *arg) {
    fputs("trident launch: ", stderr);
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    return 2;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: trident launch --nproc N [--nnodes M --node-rank R] [--backend nccl|mpi|tcp] [--master-addr ADDR] "
            "[--master-port PORT] -- CMD [ARG ...]\n\n"
            "Run N processes of CMD on this host for data-parallel training (like torchrun).\n"
            "  --nproc N          processes on this host (one per device; also --nproc-per-node)\n"
            "  --nnodes M         hosts, each running one trident launch (default 1)\n"
            "  --node-rank R      this host's place in [0, M): its ranks are R * N .. R * N + N - 1\n"
            "  --backend B        nccl: fork them with torchrun's variables (default with a CUDA device);\n"
            "                     tcp: the same, CPU collectives over TCP (default without one when M > 1);\n"
            "                     mpi: run them with mpirun (default otherwise: CPU and Vulkan, one host)\n"
            "  --master-addr A    node 0's address for the rendezvous (default 127.0.0.1)\n"
            "  --master-port P    its port (default 29500)\n"
            "TRIDENT_DIST_TIMEOUT (seconds, default 60) bounds the rendezvous and, with tcp, every collective.\n"
            "CMD `trident` is this executable. When a process fails, the others are stopped and launch\n"
            "exits with status 1 naming it.\n");
}

static volatile sig_atomic_t got_signal;
static void on_signal(int sig) { got_signal = sig; }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void describe(int status, char *buf, size_t n) {
    if (WIFSIGNALED(status))
        snprintf(buf, n, "was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(buf, n, "exited with status %d", WEXITSTATUS(status));
}

/* Stop the ranks still running, each with its process group (what it started):
** SIGTERM, then SIGKILL after grace seconds. */
static void stop_all(pid_t *pids, int n, double grace) {
    for (int r = 0; r < n; r++)
        if (pids[r] > 0) kill(-pids[r], SIGTERM);
    double deadline = now_s() + grace;
    int left = 0;
    for (int r = 0; r < n; r++) left += pids[r] > 0;
    while (left > 0) {
        int status;
        pid_t p = waitpid(-1, &status, WNOHANG);
        if (p > 0) {
            for (int r = 0; r < n; r++)
                if (pids[r] == p) pids[r] = 0, left--;
            continue;
        }
        if (p < 0 && errno == ECHILD) break;
        if (now_s() > deadline) {
            for (int r = 0; r < n; r++)
                if (pids[r] > 0) kill(-pids[r], SIGKILL);
            deadline = now_s() + 1e9;
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* name=value for an integer value */
static void setenv_int(const char *name, int value) {
    char v[16];
    snprintf(v, sizeof v, "%d", value);
    setenv(name, v, 1);
}

/* n processes of node `node` of nnodes, with torchrun's variables */
static int run_forked(int n, int nnodes, int node, const char *addr, const char *port, char **cmd) {
    pid_t pids[MAX_PROCS] = {0};
    setenv("MASTER_ADDR", addr, 1);
    setenv("MASTER_PORT", port, 1);
    setenv_int("WORLD_SIZE", n * nnodes);
    setenv_int("ROLE_WORLD_SIZE", n * nnodes);
    setenv_int("LOCAL_WORLD_SIZE", n);
    setenv_int("GROUP_RANK", node);
    setenv_int("GROUP_WORLD_SIZE", nnodes);
    setenv("ROLE_NAME", "default", 1);
    setenv("TORCHELASTIC_RUN_ID", "none", 1);
    setenv("TORCHELASTIC_RESTART_COUNT", "0", 1);
    setenv("TORCHELASTIC_MAX_RESTARTS", "0", 1);
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    for (int r = 0; r < n; r++) {
        pid_t p = fork();
        if (p < 0) {
            fprintf(stderr, "trident launch: fork: %s\n", strerror(errno));
            stop_all(pids, r, 10);
            return 1;
        }
        if (p == 0) {
            setenv_int("RANK", node * n + r);
            setenv_int("ROLE_RANK", node * n + r);
            setenv_int("LOCAL_RANK", r);
            signal(SIGINT, SIG_DFL), signal(SIGTERM, SIG_DFL);
            sigset_t none; /* a launcher's caller may block signals; the ranks must take SIGTERM */
            sigemptyset(&none);
            sigprocmask(SIG_SETMASK, &none, NULL);
            setpgid(0, 0); /* a group per rank: stop_all reaches what it starts */
            execvp(cmd[0], cmd);
            fprintf(stderr, "trident launch: rank %d: cannot run %s: %s\n", node * n + r, TD_QUOTE(cmd[0]),
                    strerror(errno));
            _exit(127);
        }
        pids[r] = p;
    }
    int done = 0;
    while (done < n) {
        int status;
        pid_t p = waitpid(-1, &status, 0);
        if (p < 0) {
            if (errno == EINTR && got_signal) {
                fprintf(stderr, "trident launch: got signal %d; stopping the %d ranks\n", (int)got_signal, n);
                stop_all(pids, n, 10);
                return 1;
            }
            if (errno == EINTR) continue;
            break;
        }
        int r = 0;
        while (r < n && pids[r] != p) r++;
        if (r == n) continue;
        pids[r] = 0, done++;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
        char what[96];
        describe(status, what, sizeof what);
        fprintf(stderr, "trident launch: rank %d (pid %d) %s; stopping the other ranks%s\n", node * n + r, (int)p, what,
                nnodes > 1 ? " of this node" : "");
        stop_all(pids, n, 10);
        return 1;
    }
    return 0;
}

static int run_mpi(int n, char **cmd, int n_cmd) {
    char np[16];
    snprintf(np, sizeof np, "%d", n);
    char **argv = calloc((size_t)n_cmd + 8, sizeof *argv);
    if (!argv) return fail("%s", "out of host memory");
    int k = 0;
    argv[k++] = "mpirun";
    argv[k++] = "-np";
    argv[k++] = np;
    argv[k++] = "--oversubscribe"; /* more processes than cores, e.g. 2 on a CI machine's 2 */
    if (geteuid() == 0) argv[k++] = "--allow-run-as-root";
    for (int i = 0; i < n_cmd; i++) argv[k++] = cmd[i];
    /* containers often forbid the cross-memory attach of the shared-memory transport */
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
    execvp("mpirun", argv);
    fprintf(stderr, "trident launch: cannot run mpirun: %s (apt-get install openmpi-bin, or --backend nccl)\n",
            strerror(errno));
    free(argv);
    return 1;
}

/* *out = val when it is an integer in [lo, hi]; else 0 after the message */
static bool int_arg(const char *name, const char *val, long lo, long hi, int *out) {
    char *end;
    long v = strtol(val, &end, 10);
    if (*val && !*end && v >= lo && v <= hi) return *out = (int)v, true;
    fputs("trident launch: ", stderr);
    fprintf(stderr, "%s expects an integer in [%ld, %ld], got %s\n", name, lo, hi, TD_QUOTE(val));
    return false;
}

int cmd_launch(int argc, char **argv) {
    int n = 0, nnodes = 1, node = 0;
    const char *backend = NULL, *addr = "127.0.0.1", *port = "29500";
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--"); i++) {
        char a[64]; /* torchrun's spellings too: --nproc_per_node, --node_rank, --master_addr */
        snprintf(a, sizeof a, "%s", argv[i]);
        for (char *c = a + 2; a[0] == '-' && a[1] == '-' && *c; c++)
            if (*c == '_') *c = '-';
        if (!strcmp(a, "--nproc-per-node")) snprintf(a, sizeof a, "--nproc");
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(stdout), 0;
        if (strcmp(a, "--nproc") && strcmp(a, "--backend") && strcmp(a, "--master-addr") &&
            strcmp(a, "--master-port") && strcmp(a, "--nnodes") && strcmp(a, "--node-rank"))
            return fail("unknown option %s (see trident launch --help)", TD_QUOTE(argv[i]));
        if (!val) return fail("%s needs a value", a);
        i++;
        if (!strcmp(a, "--nproc")) {
            if (!int_arg(a, val, 1, MAX_PROCS, &n)) return 2;
        } else if (!strcmp(a, "--nnodes")) {
            if (!int_arg(a, val, 1, 4096, &nnodes)) return 2;
        } else if (!strcmp(a, "--node-rank")) {
            if (!int_arg(a, val, 0, 4095, &node)) return 2;
        } else if (!strcmp(a, "--backend")) {
            if (strcmp(val, "nccl") && strcmp(val, "mpi") && strcmp(val, "tcp"))
                return fail("--backend %s is not nccl, mpi or tcp", TD_QUOTE(val));
            backend = val;
        } else if (!strcmp(a, "--master-addr")) {
            addr = val;
        } else {
            char *end;
            long v = strtol(val, &end, 10);
            if (*end || v < 1 || v > 65535)
                return fail("--master-port expects a port in [1, 65535], got %s", TD_QUOTE(val));
            port = val;
        }
    }
    if (!n) return fail("%s", "--nproc N is required");
    if (node >= nnodes) {
        fprintf(stderr, "trident launch: --node-rank %d is not below --nnodes %d\n", node, nnodes);
        return 2;
    }
    if (i + 1 >= argc) return fail("%s", "no command: trident launch --nproc N -- CMD [ARG ...]");
    char **cmd = argv + i + 1;
    int n_cmd = argc - i - 1;
    static char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (!strcmp(cmd[0], "trident") && len > 0) self[len] = 0, cmd[0] = self;
    if (!backend) {
        td_device d;
        backend = td_device_parse("cuda", &d) == TD_OK ? "nccl" : nnodes > 1 ? "tcp" : "mpi";
    }
    if (!strcmp(backend, "mpi") && nnodes > 1)
        return fail("%s", "--backend mpi runs one mpirun over every host (mpirun --hostfile); with --nnodes, each "
                          "host's launch needs --backend nccl or tcp");
    if (!strcmp(backend, "tcp")) setenv("TRIDENT_DIST_BACKEND", "tcp", 1);
    if (!getenv("OMP_NUM_THREADS")) { /* share the cores */
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        char v[24];
        snprintf(v, sizeof v, "%ld", cores / n > 1 ? cores / n : 1);
        setenv("OMP_NUM_THREADS", v, 1);
    }
    return !strcmp(backend, "mpi") ? run_mpi(n, cmd, n_cmd) : run_forked(n, nnodes, node, addr, port, cmd);
}
