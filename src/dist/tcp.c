/*
** The tcp transport (TD_DIST_TCP): CPU collectives over the sockets the
** rendezvous left open (rendezvous.c), for processes that no mpirun started:
** torchrun, or `trident launch` on several hosts. A star through rank 0:
**
**   all_reduce      every rank sends its buffer to rank 0, which combines
**                   them in rank order (acc = ((b0 op b1) op b2) ..., half
**                   dtypes through float, rounded after each step as the mpi
**                   transport's user ops do; AVG = SUM / world), and sends
**                   the result back. Two ranks with at least PAIR_MIN bytes:
**                   the socket carries both directions at once, a
**                   reduce-scatter then an all-gather in PAIR_CHUNK pieces
**                   (rank r reduces half r, acc = b0 op b1 as above, so
**                   both get the star's bits; each byte crosses once each
**                   way instead of twice in turn)
**   broadcast       root -> rank 0 (when root != 0) -> every other rank
**   all_gather      every block to rank 0, the whole [world * count] back
**   reduce_scatter  all_reduce at rank 0, block r sent to rank r
**   barrier         an empty all_reduce
**
** Each message starts with a header (kind, dtype, count) that rank 0 checks,
** so ranks that call different collectives get an error, not garbage. Every
** wait ends at a deadline (timeout_s, TRIDENT_DIST_TIMEOUT): a rank that
** exits closes its socket (the kernel does it for a killed process) and
** rank 0 sees it at once; one that hangs is seen at the deadline. Rank 0
** then sends every other rank a stop message naming the rank it lost, and
** each rank's call fails with that one line (dist.c then fails the group).
*/
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "backend_cpu/cpu.h" /* the f16/bf16 conversions */
#include "dist/dist_internal.h"

#define PAIR_MIN   (64 << 10) /* bytes: below, the star (its latency is one round trip less) */
#define PAIR_CHUNK (1 << 20)  /* bytes: a piece of the pair exchange, combined as it arrives */

enum { K_ALL_REDUCE = 1, K_BROADCAST, K_ALL_GATHER, K_REDUCE_SCATTER, K_BARRIER, K_STOP };
static const char *const kind_names[] = {"?", "all_reduce", "broadcast", "all_gather", "reduce_scatter", "barrier"};

typedef struct header {
    uint32_t kind, dt;
    uint64_t count; /* elements (K_STOP: bytes of the message that follows) */
    int32_t root, op;
} header;

static struct {
    int *fds; /* rank 0: [1, world); others: [0] */
    int rank, world;
    double timeout_s;
    char failure[TD_DIST_WHY]; /* set once a call failed: every later call fails with it */
} s;

static size_t elem_size(int dt) { return td_dtype_size((td_dtype)dt); }

/* acc[i] = acc[i] op in[i] over n elements of dt (op: SUM or MAX; bool SUM is or) */
static void combine(void *acc, const void *in, size_t n, int dt, int op) {
    bool max = op == TD_DIST_T_MAX;
#define LOOP(T, EXPR)                                                                                                  \
    for (size_t i = 0; i < n; i++) {                                                                                   \
        T x = ((const T *)in)[i], y = ((T *)acc)[i];                                                                   \
        ((T *)acc)[i] = (EXPR);                                                                                        \
    }
#define HALF(TO, FROM)                                                                                                 \
    for (size_t i = 0; i < n; i++) {                                                                                   \
        float x = TO(((const uint16_t *)in)[i]), y = TO(((uint16_t *)acc)[i]);                                         \
        ((uint16_t *)acc)[i] = FROM(max ? (isnan(x) || x > y ? x : y) : y + x);                                        \
    }
    switch (dt) {
    case TD_F32: LOOP(float, max ? (isnan(x) || x > y ? x : y) : y + x) break;
    case TD_F64: LOOP(double, max ? (isnan(x) || x > y ? x : y) : y + x) break;
    case TD_F16: HALF(cpu_f16_to_f32, cpu_f32_to_f16) break;
    case TD_BF16: HALF(cpu_bf16_to_f32, cpu_f32_to_bf16) break;
    case TD_I32: LOOP(int32_t, max ? (x > y ? x : y) : (int32_t)((uint32_t)y + (uint32_t)x)) break;
    case TD_I64: LOOP(int64_t, max ? (x > y ? x : y) : (int64_t)((uint64_t)y + (uint64_t)x)) break;
    case TD_U8: LOOP(uint8_t, max ? (x > y ? x : y) : (uint8_t)(y + x)) break;
    default: LOOP(uint8_t, (uint8_t)(x || y)) break; /* bool: or for SUM and MAX */
    }
#undef LOOP
#undef HALF
}

/* buf[0..n) /= world, for AVG (floating dtypes; the core refuses others) */
static void divide(void *buf, size_t n, int dt) {
    float w = (float)s.world;
    for (size_t i = 0; i < n; i++) switch (dt) {
        case TD_F32: ((float *)buf)[i] /= w; break;
        case TD_F64: ((double *)buf)[i] /= (double)s.world; break;
        case TD_F16: ((uint16_t *)buf)[i] = cpu_f32_to_f16(cpu_f16_to_f32(((uint16_t *)buf)[i]) / w); break;
        case TD_BF16: ((uint16_t *)buf)[i] = cpu_f32_to_bf16(cpu_bf16_to_f32(((uint16_t *)buf)[i]) / w); break;
        default: break;
        }
}

/* ---- failure ---------------------------------------------------------------- */

static int failed(char *why) {
    snprintf(why, TD_DIST_WHY, "%s", s.failure);
    return 1;
}

/* Record the failure; rank 0 tells every other rank (best effort, 2 s). */
static int fail(char *why, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(char *why, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s.failure, sizeof s.failure, fmt, ap);
    va_end(ap);
    if (s.rank == 0) {
        header h = {.kind = K_STOP, .count = strlen(s.failure)};
        for (int r = 1; r < s.world; r++)
            if (s.fds[r] >= 0 && td__io_full(s.fds[r], &h, sizeof h, true, td__now_s() + 2) == 0)
                td__io_full(s.fds[r], s.failure, h.count, true, td__now_s() + 2);
    }
    return failed(why);
}

/* The failure of an io with rank peer (errno set by td__io_full). */
static int io_fail(char *why, int peer, const char *what) {
    if (s.rank != 0)
        return fail(why, "tcp: lost rank 0 during %s (%s): it exited or failed; its output names the rank it lost",
                    what, errno == ETIMEDOUT ? "no answer within the timeout" : strerror(errno));
    if (errno == ETIMEDOUT)
        return fail(why,
                    "tcp: rank %d did not take part in %s within %.0f s (hung, or busy for longer than "
                    "TRIDENT_DIST_TIMEOUT)",
                    peer, what, s.timeout_s);
    return fail(why, "tcp: rank %d exited or lost its connection during %s (%s)", peer, what,
                errno == ECONNRESET ? "connection closed" : strerror(errno));
}

/* ---- messages ----------------------------------------------------------------- */

static double deadline(void) { return td__now_s() + s.timeout_s; }

/* rank 0: receive rank r's header and check it against want */
static int recv_header(int r, const header *want, char *why) {
    header h;
    const char *what = kind_names[want->kind];
    if (td__io_full(s.fds[r], &h, sizeof h, false, deadline()) != 0) return io_fail(why, r, what);
    if (h.kind != want->kind || h.dt != want->dt || h.count != want->count || h.root != want->root || h.op != want->op)
        return fail(why,
                    "tcp: rank %d called %s of %llu elements of %s while rank 0 called %s of %llu of %s (every rank "
                    "must call the same collectives in the same order)",
                    r, h.kind && h.kind < K_STOP ? kind_names[h.kind] : "?", (unsigned long long)h.count,
                    td_dtype_name((td_dtype)(h.dt < TD_DTYPE_COUNT ? h.dt : 0)), what, (unsigned long long)want->count,
                    td_dtype_name((td_dtype)want->dt));
    return 0;
}

/* another rank: receive n bytes from rank 0, or its stop message */
static int recv_from_root(void *buf, size_t n, const char *what, char *why) {
    header h; /* rank 0 answers with a header too: K_STOP carries its message */
    if (td__io_full(s.fds[0], &h, sizeof h, false, deadline() + 5) != 0) return io_fail(why, 0, what);
    if (h.kind == K_STOP) {
        char msg[TD_DIST_WHY] = "";
        size_t len = h.count < sizeof msg - 1 ? h.count : sizeof msg - 1;
        if (td__io_full(s.fds[0], msg, len, false, td__now_s() + 2) != 0) snprintf(msg, sizeof msg, "(no reason)");
        return fail(why, "%s", msg);
    }
    if (td__io_full(s.fds[0], buf, n, false, deadline()) != 0) return io_fail(why, 0, what);
    return 0;
}

/* rank 0: send rank r an answer header and n bytes */
static int send_to(int r, const void *buf, size_t n, const char *what, char *why) {
    header h = {.kind = K_ALL_REDUCE, .count = n};
    if (td__io_full(s.fds[r], &h, sizeof h, true, deadline()) != 0 ||
        (n && td__io_full(s.fds[r], (void *)(uintptr_t)buf, n, true, deadline()) != 0))
        return io_fail(why, r, what);
    return 0;
}

/* another rank: send rank 0 the header and n bytes */
static int send_root(const header *h, const void *buf, size_t n, char *why) {
    const char *what = kind_names[h->kind];
    if (td__io_full(s.fds[0], (void *)(uintptr_t)h, sizeof *h, true, deadline()) != 0 ||
        (n && td__io_full(s.fds[0], (void *)(uintptr_t)buf, n, true, deadline()) != 0))
        return io_fail(why, 0, what);
    return 0;
}

/* ---- the collectives ---------------------------------------------------------- */

/* rank 0: acc (count elements, its own contribution already in) op= every other rank's */
static int gather_reduce(void *acc, const header *h, char *why) {
    size_t bytes = h->count * elem_size((int)h->dt);
    void *tmp = malloc(bytes ? bytes : 1);
    if (!tmp) return fail(why, "tcp: out of host memory for %zu bytes", bytes);
    int rc = 0;
    for (int r = 1; r < s.world && !rc; r++) {
        rc = recv_header(r, h, why);
        if (!rc && bytes && td__io_full(s.fds[r], tmp, bytes, false, deadline()) != 0)
            rc = io_fail(why, r, kind_names[h->kind]);
        if (!rc) combine(acc, tmp, h->count, (int)h->dt, h->op);
    }
    free(tmp);
    if (!rc && h->op == TD_DIST_T_AVG) divide(acc, h->count, (int)h->dt);
    return rc;
}

/* Send sn bytes of out and receive rn bytes into in over fd at once (neither
** side blocks the other on full socket buffers): 0, or -1 with errno. */
static int duplex(int fd, const char *out, size_t sn, char *in, size_t rn, double deadline) {
    while (sn || rn) {
        struct pollfd pf = {.fd = fd, .events = (short)((sn ? POLLOUT : 0) | (rn ? POLLIN : 0))};
        double left = deadline - td__now_s();
        int r = poll(&pf, 1, left > 0 ? (int)(left * 1000) + 1 : 0);
        if (r == 0) return errno = ETIMEDOUT, -1;
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (rn && (pf.revents & (POLLIN | POLLHUP | POLLERR))) {
            ssize_t k = recv(fd, in, rn, MSG_DONTWAIT);
            if (k == 0) return errno = ECONNRESET, -1;
            if (k < 0 && errno != EINTR && errno != EAGAIN) return -1;
            if (k > 0) in += k, rn -= (size_t)k;
        }
        if (sn && (pf.revents & (POLLOUT | POLLERR))) {
            ssize_t k = send(fd, out, sn, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (k < 0 && errno != EINTR && errno != EAGAIN) return -1;
            if (k > 0) out += k, sn -= (size_t)k;
        }
    }
    return 0;
}

/* Two ranks, after the header handshake: rank r reduces elements [cut_r, cut_r+1)
** of buf (cut = 0, half, count) with the peer's, then each sends its half and
** receives the other, PAIR_CHUNK bytes at a time. */
static int pair_exchange(void *buf, size_t count, int dt, int op, char *why) {
    size_t es = elem_size(dt), half = count / 2, per = PAIR_CHUNK / es;
    size_t mine_at = s.rank ? half : 0, mine_n = s.rank ? count - half : half;
    size_t peer_at = s.rank ? 0 : half, peer_n = count - mine_n;
    int fd = s.fds[s.rank ? 0 : 1], peer = 1 - s.rank;
    char *b = buf, *tmp = malloc(per * es);
    if (!tmp) return fail(why, "tcp: out of host memory for %zu bytes", per * es);
    int rc = 0;
    /* reduce-scatter: chunk k of the peer's half goes out while chunk k of mine comes in */
    for (size_t k = 0; !rc && (k < mine_n || k < peer_n); k += per) {
        size_t sn = k < peer_n ? (peer_n - k < per ? peer_n - k : per) : 0;
        size_t rn = k < mine_n ? (mine_n - k < per ? mine_n - k : per) : 0;
        if (duplex(fd, b + (peer_at + k) * es, sn * es, tmp, rn * es, deadline()) != 0) {
            rc = io_fail(why, peer, "all_reduce");
            break;
        }
        char *acc = b + (mine_at + k) * es;
        if (s.rank == 0) { /* acc = b0 op b1: mine is b0 */
            combine(acc, tmp, rn, dt, op);
        } else { /* tmp is b0: tmp op= mine, then mine = tmp */
            combine(tmp, acc, rn, dt, op);
            memcpy(acc, tmp, rn * es);
        }
        if (op == TD_DIST_T_AVG) divide(acc, rn, dt);
    }
    free(tmp);
    /* all-gather: my reduced half out, the peer's in */
    if (!rc && duplex(fd, b + mine_at * es, mine_n * es, b + peer_at * es, peer_n * es, deadline()) != 0)
        rc = io_fail(why, peer, "all_reduce");
    return rc;
}

static int all_reduce(void *buf, size_t count, int dt, int op, void *stream, char *why) {
    (void)stream;
    if (*s.failure) return failed(why);
    header h = {.kind = K_ALL_REDUCE, .dt = (uint32_t)dt, .count = count, .op = op};
    size_t bytes = count * elem_size(dt);
    if (s.world == 2 && bytes >= PAIR_MIN) { /* rank 0 checks rank 1's header and answers, then both exchange */
        if (s.rank != 0 && (send_root(&h, NULL, 0, why) || recv_from_root(NULL, 0, "all_reduce", why))) return 1;
        if (s.rank == 0 && (recv_header(1, &h, why) || send_to(1, NULL, 0, "all_reduce", why))) return 1;
        return pair_exchange(buf, count, dt, op, why);
    }
    if (s.rank != 0) return send_root(&h, buf, bytes, why) || recv_from_root(buf, bytes, "all_reduce", why);
    int rc = gather_reduce(buf, &h, why);
    for (int r = 1; r < s.world && !rc; r++) rc = send_to(r, buf, bytes, "all_reduce", why);
    return rc;
}

static int broadcast(void *buf, size_t count, int dt, int root, void *stream, char *why) {
    (void)stream;
    if (*s.failure) return failed(why);
    header h = {.kind = K_BROADCAST, .dt = (uint32_t)dt, .count = count, .root = root};
    size_t bytes = count * elem_size(dt);
    if (s.rank != 0) /* the root sends its buffer up; every rank gets rank 0's answer */
        return send_root(&h, buf, s.rank == root ? bytes : 0, why) || recv_from_root(buf, bytes, "broadcast", why);
    int rc = 0;
    for (int r = 1; r < s.world && !rc; r++) {
        rc = recv_header(r, &h, why);
        if (!rc && r == root && bytes && td__io_full(s.fds[r], buf, bytes, false, deadline()) != 0)
            rc = io_fail(why, r, "broadcast");
    }
    for (int r = 1; r < s.world && !rc; r++) rc = send_to(r, buf, bytes, "broadcast", why);
    return rc;
}

static int all_gather(const void *in, void *out, size_t count, int dt, void *stream, char *why) {
    (void)stream;
    if (*s.failure) return failed(why);
    header h = {.kind = K_ALL_GATHER, .dt = (uint32_t)dt, .count = count};
    size_t bytes = count * elem_size(dt);
    if (s.rank != 0) return send_root(&h, in, bytes, why) || recv_from_root(out, bytes * s.world, "all_gather", why);
    memmove(out, in, bytes);
    int rc = 0;
    for (int r = 1; r < s.world && !rc; r++) {
        rc = recv_header(r, &h, why);
        if (!rc && bytes && td__io_full(s.fds[r], (char *)out + r * bytes, bytes, false, deadline()) != 0)
            rc = io_fail(why, r, "all_gather");
    }
    for (int r = 1; r < s.world && !rc; r++) rc = send_to(r, out, bytes * s.world, "all_gather", why);
    return rc;
}

static int reduce_scatter(const void *in, void *out, size_t count, int dt, int op, void *stream, char *why) {
    (void)stream;
    if (*s.failure) return failed(why);
    header h = {.kind = K_REDUCE_SCATTER, .dt = (uint32_t)dt, .count = count * (size_t)s.world, .op = op};
    size_t bytes = count * elem_size(dt);
    if (s.rank != 0)
        return send_root(&h, in, bytes * s.world, why) || recv_from_root(out, bytes, "reduce_scatter", why);
    void *acc = malloc(bytes * s.world + 1);
    if (!acc) return fail(why, "tcp: out of host memory for %zu bytes", bytes * s.world);
    memcpy(acc, in, bytes * s.world);
    int rc = gather_reduce(acc, &h, why);
    for (int r = 1; r < s.world && !rc; r++) rc = send_to(r, (char *)acc + r * bytes, bytes, "reduce_scatter", why);
    if (!rc) memcpy(out, acc, bytes);
    free(acc);
    return rc;
}

static int barrier(void *stream, char *why) {
    (void)stream;
    if (*s.failure) return failed(why);
    header h = {.kind = K_BARRIER};
    if (s.rank != 0) return send_root(&h, NULL, 0, why) || recv_from_root(NULL, 0, "barrier", why);
    int rc = 0;
    for (int r = 1; r < s.world && !rc; r++) rc = recv_header(r, &h, why);
    for (int r = 1; r < s.world && !rc; r++) rc = send_to(r, NULL, 0, "barrier", why);
    return rc;
}

/* tcp: an all_reduce (rank 0 combines everything anyway); root keeps the result, as do the others */
static int reduce_start(void *buf, size_t count, int dt, int op, int root, void *stream, char *why) {
    (void)root;
    return all_reduce(buf, count, dt, op, stream, why);
}

static int wait_started(void *stream, char *why) {
    (void)stream;
    return *s.failure ? failed(why) : 0;
}

static void tcp_abort(void) {
    for (int r = 0; r < s.world; r++)
        if (s.fds[r] >= 0) shutdown(s.fds[r], SHUT_RDWR);
}

/* dist.c runs the started collectives on its worker thread */
static bool any_thread(void) { return true; }

static const td_dist_transport tcp_transport = {
    .version = TD_DIST_TRANSPORT_VERSION,
    .name = "tcp",
    .make_id = NULL,
    .init = NULL, /* td__tcp_transport */
    .bcast_bytes = NULL,
    .all_reduce = all_reduce,
    .broadcast = broadcast,
    .all_gather = all_gather,
    .reduce_scatter = reduce_scatter,
    .barrier = barrier,
    .all_reduce_start = all_reduce,
    .wait_started = wait_started,
    .reduce_start = reduce_start,
    .abort = tcp_abort,
    .finalize = NULL, /* dist.c closes the sockets */
    .any_thread = any_thread,
};

const td_dist_transport *td__tcp_transport(int *fds, int rank, int world, double timeout_s) {
    s.fds = fds, s.rank = rank, s.world = world, s.timeout_s = timeout_s;
    s.failure[0] = 0;
    return &tcp_transport;
}
