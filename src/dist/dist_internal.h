/*
** Internals of src/dist shared by its files.
** defines: td__rdzv, the rendezvous and the started all-reduce used by DDP.
*/
#ifndef TRIDENT_DIST_INTERNAL_H
#define TRIDENT_DIST_INTERNAL_H

#include "core/internal.h"
#include "dist/transport.h"
#include "trident/dist.h"
#include "trident/trident.h"

typedef struct td__rdzv {
    const char *addr; /* MASTER_ADDR */
    int port, rank, world;
    double timeout_s;
} td__rdzv;

/* rendezvous.c: run the rendezvous. Rank 0 sends payload (TD_DIST_ID_BYTES)
** and keeps a socket per rank in fds[1..world); another rank receives payload
** and keeps its socket to rank 0 in fds[0]. */
TD_API td_status td__rdzv_run(const td__rdzv *z, unsigned char *payload, int *fds); /* exported for test_dist */

/* rendezvous.c: the monotonic clock in seconds; read or write exactly n bytes
** of fd before the deadline: 0, or -1 with errno (ETIMEDOUT on time,
** ECONNRESET when the peer closed). */
double td__now_s(void);
int td__io_full(int fd, void *buf, size_t n, bool writing, double deadline);

/* tcp.c: the transport over the rendezvous's sockets (fds as td__rdzv_run
** left them, borrowed), each call failing after timeout_s without a peer. */
const td_dist_transport *td__tcp_transport(int *fds, int rank, int world, double timeout_s);

/* dist.c: all_reduce of t (contiguous, on the bound device) that later work
** on the device need not wait for, and the wait for every one started (DDP). */
td_status td__dist_all_reduce_start(td_tensor *t, td_dist_op op);
td_status td__dist_wait_started(void);
/* dist.c: the reduce of t to root, started likewise (ZeRO-1's buckets). */
td_status td__dist_reduce_start(td_tensor *t, td_dist_op op, int root);

/* staging.c: a device tensor's bytes on the host without a host wait on the calling thread, where its backend
** has host buffers and fences (able): start queues the copy of t (contiguous, borrowed until back or drop) into
** a pooled host buffer and a fence after it; wait (any thread) waits for the fence, after which host holds t's
** bytes; back queues the copy of host into t and frees the buffer for reuse; drop frees it unused; pool_free
** frees the pool (no copy in use). All but wait on start's thread. */
typedef struct td__host_copy {
    td_tensor *t;
    void *host;              /* the host buffer's bytes */
    struct td__host_buf *hb; /* the pool's buffer; NULL once back or dropped */
    td_fence *fence;         /* NULL once waited */
} td__host_copy;
bool td__host_copy_able(const td_tensor *t);
td_status td__host_copy_start(td_tensor *t, td__host_copy *c);
td_status td__host_copy_wait(td__host_copy *c);
td_status td__host_copy_back(td__host_copy *c);
void td__host_copy_drop(td__host_copy *c);
void td__host_copy_pool_free(void);

/* zero.c: ZeRO-1 over the arena of params (the module's parameters that
** require grad): new (checks they tile one arena), free, the start of the
** reduction of a bucket (buf: its gradients, or their bf16 copy, for arena
** elements [at, at + numel)) to the owners of its elements, the end of
** backward (the shard's gradient is its slice of the arena), the
** parameters' all-gather after the step (dropping params' gradients), the
** sharding of an optimizer over params, the unsharded state dict of the
** sharded optimizer, the shard's length. */
typedef struct td__zero td__zero;
td_status td__zero_new(td_module *m, td_tensor *const *params, int n, td__zero **out);
void td__zero_free(td__zero *z);
td_status td__zero_launch(td__zero *z, td_tensor *buf, td_tensor *grads);
void td__zero_finish(td__zero *z);
td_status td__zero_gather(td__zero *z, td_tensor *const *params, int n);
td_status td__zero_shard_optimizer(td__zero *z, td_optimizer *opt);
td_status td__zero_state_dict(td__zero *z, td_optimizer *opt, td_named_tensors **out);
int64_t td__zero_shard_len(const td__zero *z);

/* src/data/dataloader.c: the DataLoader's permutation of [0, n) for (seed, epoch). */
void td__data_perm(int64_t *perm, int64_t n, bool shuffle, uint64_t seed, int64_t epoch);

#endif /* TRIDENT_DIST_INTERNAL_H */
