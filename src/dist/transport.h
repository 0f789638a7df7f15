/*
** The contract between the distributed core (src/dist) and a transport
** plugin: libtrident-mpi.so (src/dist_mpi) or libtrident-nccl.so
** (src/dist_nccl), found beside libtrident.so like the backend plugins and
** loaded with dlopen by td_dist_init. Its entry point is
** `const td_dist_transport *td_dist_transport_plugin(void)`.
**
** Buffers are raw pointers: host memory for mpi, CUDA device memory for
** nccl (whose calls are queued on `stream`, a cudaStream_t; mpi ignores it).
** Counts are elements of dtype dt (a td_dtype). Every function returns 0 on
** success, or nonzero with a one-line message in why[0..TD_DIST_WHY).
** defines: td_dist_transport, TD_DIST_TRANSPORT_VERSION.
*/
#ifndef TRIDENT_DIST_TRANSPORT_H
#define TRIDENT_DIST_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>

#define TD_DIST_TRANSPORT_VERSION 3
#define TD_DIST_WHY               256
#define TD_DIST_ID_BYTES          128 /* sizeof(ncclUniqueId) */

/* reduction ops, as td_dist_op: sum, avg, max */
enum { TD_DIST_T_SUM = 0, TD_DIST_T_AVG = 1, TD_DIST_T_MAX = 2 };

typedef struct td_dist_transport {
    unsigned version; /* TD_DIST_TRANSPORT_VERSION */
    const char *name; /* "mpi", "nccl" */
    /* (nccl) Rank 0 makes the id that every rank passes to init. NULL: none needed. */
    int (*make_id)(unsigned char id[TD_DIST_ID_BYTES], char *why);
    /* Join: rank of world, on device ordinal `device` (nccl) with the id.
    ** mpi: MPI_Init; *rank and *world are MPI's and win (in/out). */
    int (*init)(int *rank, int *world, int device, const unsigned char id[TD_DIST_ID_BYTES], char *why);
    /* (mpi) Broadcast n bytes from rank 0 over the transport itself. May be NULL. */
    int (*bcast_bytes)(void *buf, size_t n, char *why);
    int (*all_reduce)(void *buf, size_t count, int dt, int op, void *stream, char *why);
    int (*broadcast)(void *buf, size_t count, int dt, int root, void *stream, char *why);
    /* out = count elements from each rank, in rank order (in may alias out + rank * count) */
    int (*all_gather)(const void *in, void *out, size_t count, int dt, void *stream, char *why);
    /* out = count elements: block `rank` of op over ranks of in (world * count elements) */
    int (*reduce_scatter)(const void *in, void *out, size_t count, int dt, int op, void *stream, char *why);
    int (*barrier)(void *stream, char *why);
    /* all_reduce that need not finish before later work on `stream` (nccl: on
    ** a stream of its own, after what `stream` queued so far); wait_started
    ** makes `stream` wait for every one started. mpi: all_reduce, and nothing. */
    int (*all_reduce_start)(void *buf, size_t count, int dt, int op, void *stream, char *why);
    int (*wait_started)(void *stream, char *why);
    /* (version 2) Reduce to root in place, started as all_reduce_start (and
    ** waited for by wait_started): root's buf = op over ranks of buf; the
    ** others' buf is unspecified afterwards. ZeRO-1's bucket-by-bucket reduction. */
    int (*reduce_start)(void *buf, size_t count, int dt, int op, int root, void *stream, char *why);
    /* Stop every pending and future collective (called from a watchdog thread
    ** after a peer died). May be NULL. */
    void (*abort)(void);
    void (*finalize)(void);
    /* (version 3) After init: whether the calls may come from a thread other than init's, one at a time
    ** (mpi: MPI_THREAD_SERIALIZED provided), so that the core runs DDP's started collectives on a worker
    ** thread. NULL: no (every call from init's thread). */
    bool (*any_thread)(void);
} td_dist_transport;

typedef const td_dist_transport *(*td_dist_transport_fn)(void);

#endif /* TRIDENT_DIST_TRANSPORT_H */
