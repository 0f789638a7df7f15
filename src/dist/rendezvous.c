/*
** The TCP rendezvous of a torchrun-style launch: rank 0 listens at
** MASTER_ADDR:MASTER_PORT, every other rank connects (retrying until the
** deadline, since rank 0 may start last) and says hello; rank 0 checks that
** each rank is in range, appears once and reports the same WORLD_SIZE, then
** answers everyone with the payload (the NCCL unique id) or with the error.
**
**   hello  u32 magic, u32 version, i32 rank, i32 world
**   reply  u32 magic, i32 ok, char message[200], u8 payload[128]
**
** The sockets stay open afterwards: the watchdog (dist.c) reads them, and a
** socket that closes without a goodbye byte means its process died.
*/
#define _GNU_SOURCE /* accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "dist/dist_internal.h"

#define RDZV_MAGIC   0x54445256u /* "TDRV" */
#define RDZV_VERSION 1u

typedef struct hello {
    uint32_t magic, version;
    int32_t rank, world;
} hello;

typedef struct reply {
    uint32_t magic;
    int32_t ok;
    char message[200];
    unsigned char payload[TD_DIST_ID_BYTES];
} reply;

double td__now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int ms_left(double deadline) {
    double left = deadline - td__now_s();
    return left <= 0 ? 0 : (int)(left * 1000) + 1;
}

/* Read or write exactly n bytes before the deadline; 0, or -1 (errno set, ETIMEDOUT on time). */
int td__io_full(int fd, void *buf, size_t n, bool writing, double deadline) {
    char *p = buf;
    while (n) {
        struct pollfd pf = {.fd = fd, .events = writing ? POLLOUT : POLLIN};
        int r = poll(&pf, 1, ms_left(deadline));
        if (r == 0) return errno = ETIMEDOUT, -1;
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        ssize_t k = writing ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
        if (k == 0) return errno = ECONNRESET, -1;
        if (k < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            return -1;
        }
        p += k, n -= (size_t)k;
    }
    return 0;
}

static void send_reply(int fd, bool ok, const char *msg, const unsigned char *payload, double deadline) {
    reply r = {.magic = RDZV_MAGIC, .ok = ok};
    snprintf(r.message, sizeof r.message, "%s", msg ? msg : "");
    if (payload) memcpy(r.payload, payload, TD_DIST_ID_BYTES);
    td__io_full(fd, &r, sizeof r, true, deadline);
}

static td_status rank0(const td__rdzv *z, const unsigned char *payload, int *fds) {
    char where[300];
    snprintf(where, sizeof where, "rendezvous at %s:%d", z->addr, z->port);
    int ls = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool v6 = ls >= 0;
    if (!v6) ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (ls < 0) return TD_ERR(TD_ERR_IO, "%s: socket: %s", where, strerror(errno));
    int one = 1, zero = 0;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)z->port), .sin6_addr = in6addr_any};
    struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)z->port)};
    if (v6) setsockopt(ls, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    if ((v6 ? bind(ls, (struct sockaddr *)&a6, sizeof a6) : bind(ls, (struct sockaddr *)&a4, sizeof a4)) != 0 ||
        listen(ls, 128) != 0) {
        int e = errno;
        close(ls);
        return TD_ERR(TD_ERR_IO, "%s: rank 0 cannot listen on port %d: %s (MASTER_PORT in use?)", where, z->port,
                      strerror(e));
    }
    double deadline = td__now_s() + z->timeout_s;
    int joined = 0;
    char problem[200] = "";
    for (int r = 1; r < z->world; r++) fds[r] = -1;
    while (joined < z->world - 1 && !*problem) {
        struct pollfd pf = {.fd = ls, .events = POLLIN};
        int pr = poll(&pf, 1, ms_left(deadline));
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) break;
        int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) continue;
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        hello h;
        if (td__io_full(c, &h, sizeof h, false, td__now_s() + 5) != 0 || h.magic != RDZV_MAGIC) {
            close(c); /* not one of ours (a port scan, a stale client) */
            continue;
        }
        if (h.version != RDZV_VERSION)
            snprintf(problem, sizeof problem, "rank %d speaks rendezvous version %u, rank 0 version %u", h.rank,
                     h.version, RDZV_VERSION);
        else if (h.world != z->world)
            snprintf(problem, sizeof problem, "rank %d has WORLD_SIZE=%d but rank 0 has WORLD_SIZE=%d", h.rank, h.world,
                     z->world);
        else if (h.rank < 1 || h.rank >= z->world)
            snprintf(problem, sizeof problem, "a process joined as rank %d, outside [1, %d)", h.rank, z->world);
        else if (fds[h.rank] >= 0)
            snprintf(problem, sizeof problem, "two processes joined as rank %d (duplicate RANK)", h.rank);
        if (*problem) {
            send_reply(c, false, problem, NULL, td__now_s() + 2);
            close(c);
            break;
        }
        fds[h.rank] = c;
        joined++;
    }
    close(ls);
    if (!*problem && joined < z->world - 1) {
        int n = snprintf(problem, sizeof problem, "only %d of %d ranks joined within %.0f s; missing:", joined + 1,
                         z->world, z->timeout_s);
        for (int r = 1, shown = 0; r < z->world && n < (int)sizeof problem - 16; r++)
            if (fds[r] < 0 && shown++ < 8) n += snprintf(problem + n, sizeof problem - (size_t)n, " %d", r);
    }
    for (int r = 1; r < z->world; r++) {
        if (fds[r] < 0) continue;
        send_reply(fds[r], !*problem, problem, payload, td__now_s() + 5);
        if (*problem) close(fds[r]), fds[r] = -1;
    }
    if (*problem) return TD_ERR(TD_ERR_MISUSE, "%s: %s", where, problem);
    return TD_OK;
}

/* One connect attempt to any address of ai before the deadline; the socket or -1 (errno). */
static int connect_once(struct addrinfo *ai, double deadline) {
    int err = ECONNREFUSED;
    for (struct addrinfo *p = ai; p; p = p->ai_next) {
        int s = socket(p->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (s < 0) continue;
        if (connect(s, p->ai_addr, p->ai_addrlen) == 0) return s;
        if (errno == EINPROGRESS) {
            struct pollfd pf = {.fd = s, .events = POLLOUT};
            int left = ms_left(deadline);
            if (poll(&pf, 1, left < 2000 ? left : 2000) == 1) {
                int so = 0;
                socklen_t len = sizeof so;
                getsockopt(s, SOL_SOCKET, SO_ERROR, &so, &len);
                if (!so) return s;
                err = so;
            } else {
                err = ETIMEDOUT;
            }
        } else {
            err = errno;
        }
        close(s);
    }
    errno = err;
    return -1;
}

static td_status other_rank(const td__rdzv *z, unsigned char *payload, int *fd0) {
    char where[300], port[16];
    snprintf(where, sizeof where, "rendezvous at %s:%d", z->addr, z->port);
    snprintf(port, sizeof port, "%d", z->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    int gr = getaddrinfo(z->addr, port, &hints, &ai);
    if (gr != 0)
        return TD_ERR(TD_ERR_IO, "%s: rank %d cannot resolve MASTER_ADDR %s: %s", where, z->rank, TD_QUOTE(z->addr),
                      gai_strerror(gr));
    double deadline = td__now_s() + z->timeout_s;
    int s = -1, err = 0;
    while ((s = connect_once(ai, deadline)) < 0 && td__now_s() < deadline) {
        err = errno;
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (s < 0 && !err) err = errno;
    freeaddrinfo(ai);
    if (s < 0)
        return TD_ERR(TD_ERR_IO,
                      "%s: rank %d could not reach rank 0 within %.0f s (%s); is MASTER_ADDR right and rank 0 running?",
                      where, z->rank, z->timeout_s, strerror(err));
    fcntl(s, F_SETFL, fcntl(s, F_GETFL) & ~O_NONBLOCK);
    int one = 1;
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    hello h = {.magic = RDZV_MAGIC, .version = RDZV_VERSION, .rank = z->rank, .world = z->world};
    reply r;
    /* rank 0 answers once every rank has joined: wait up to the whole timeout again */
    if (td__io_full(s, &h, sizeof h, true, deadline) != 0 ||
        td__io_full(s, &r, sizeof r, false, td__now_s() + z->timeout_s + 5) != 0 || r.magic != RDZV_MAGIC) {
        int e = errno;
        close(s);
        return TD_ERR(TD_ERR_IO, "%s: rank %d: rank 0 did not answer (%s)", where, z->rank, strerror(e));
    }
    r.message[sizeof r.message - 1] = 0;
    if (!r.ok) {
        close(s);
        return TD_ERR(TD_ERR_MISUSE, "%s: %s", where, r.message);
    }
    memcpy(payload, r.payload, TD_DIST_ID_BYTES);
    *fd0 = s;
    return TD_OK;
}

td_status td__rdzv_run(const td__rdzv *z, unsigned char *payload, int *fds) {
    return z->rank == 0 ? rank0(z, payload, fds) : other_rank(z, payload, &fds[0]);
}
