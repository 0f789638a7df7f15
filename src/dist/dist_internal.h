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

/* dist.c: all_reduce of t (contiguous, on the bound device) that later work
** on the device need not wait for, and the wait for every one started (DDP). */
td_status td__dist_all_reduce_start(td_tensor *t, td_dist_op op);
td_status td__dist_wait_started(void);

/* src/data/dataloader.c: the DataLoader's permutation of [0, n) for (seed, epoch). */
void td__data_perm(int64_t *perm, int64_t n, bool shuffle, uint64_t seed, int64_t epoch);

#endif /* TRIDENT_DIST_INTERNAL_H */
