/*
** libtrident-nccl.so: the NCCL transport of src/dist (contract in
** src/dist/transport.h), for CUDA tensors. Built only when the CUDA plugin is
** and nccl.h is found; it links libnccl.so.2, so a machine without NCCL fails
** to load it and td_dist_init names the missing library.
**
** Collectives are queued on the caller's stream (the CUDA backend's stream of
** the device). all_reduce_start queues on a stream of its own instead, after
** an event recorded on the caller's stream (so it reads the finished
** gradients), and wait_started makes the caller's stream wait for an event
** recorded after the last one: backward's kernels keep running on the
** caller's stream while the bucket's all-reduce runs. bool SUM is MAX on
** bytes (logical or); AVG is ncclAvg (NCCL >= 2.10).
*/
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "dist/transport.h"
#include "trident/tensor.h"

static ncclComm_t comm;
static int dev_ordinal = -1;
static cudaStream_t side;         /* all_reduce_start's stream */
static cudaEvent_t before, after; /* caller -> side, side -> caller */
static int *barrier_word;         /* one device int for barrier */
static atomic_bool aborted;

static int cuda_fail(char *why, const char *what, cudaError_t e) {
    snprintf(why, TD_DIST_WHY, "nccl: %s failed: %s", what, cudaGetErrorString(e));
    return 1;
}

static int nccl_fail(char *why, const char *what, ncclResult_t r) {
    snprintf(why, TD_DIST_WHY, "nccl: %s failed: %s%s", what, ncclGetErrorString(r),
             atomic_load(&aborted) ? " (the communicator was aborted after a peer failed)" : "");
    return 1;
}

#define CUDA_TRY(call)                                                                                                 \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) return cuda_fail(why, #call, e_);                                                       \
    } while (0)
#define NCCL_TRY(call)                                                                                                 \
    do {                                                                                                               \
        if (!comm) return nccl_fail(why, #call, ncclInvalidUsage);                                                     \
        ncclResult_t r_ = (call);                                                                                      \
        if (r_ != ncclSuccess) return nccl_fail(why, #call, r_);                                                       \
    } while (0)

/* A collective's NCCL dtype and reduction */
typedef struct nccl_kind {
    ncclDataType_t type;
    ncclRedOp_t op;
} nccl_kind;

static int nccl_types(int dt, int op, nccl_kind *k, char *why) {
    switch (dt) {
    case TD_F32: k->type = ncclFloat32; break;
    case TD_F64: k->type = ncclFloat64; break;
    case TD_F16: k->type = ncclFloat16; break;
    case TD_BF16: k->type = ncclBfloat16; break;
    case TD_I32: k->type = ncclInt32; break;
    case TD_I64: k->type = ncclInt64; break;
    case TD_U8: k->type = ncclUint8; break;
    case TD_BOOL: k->type = ncclUint8, k->op = ncclMax; return 0;
    default: snprintf(why, TD_DIST_WHY, "nccl: dtype %d has no NCCL type", dt); return 1;
    }
    k->op = op == TD_DIST_T_SUM ? ncclSum : op == TD_DIST_T_AVG ? ncclAvg : ncclMax;
    return 0;
}

/* The start of a collective: its NCCL dtype and reduction, on the group's device. */
static int begin(int dt, int op, nccl_kind *k, char *why) {
    if (nccl_types(dt, op, k, why)) return 1;
    CUDA_TRY(cudaSetDevice(dev_ordinal));
    return 0;
}

static int make_id(unsigned char id[TD_DIST_ID_BYTES], char *why) {
    _Static_assert(sizeof(ncclUniqueId) <= TD_DIST_ID_BYTES, "ncclUniqueId fits the rendezvous payload");
    ncclUniqueId u;
    ncclResult_t r = ncclGetUniqueId(&u);
    if (r != ncclSuccess) return nccl_fail(why, "ncclGetUniqueId", r);
    memcpy(id, &u, sizeof u);
    return 0;
}

static int init(int *rank, int *world, int device, const unsigned char id[TD_DIST_ID_BYTES], char *why) {
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    dev_ordinal = device;
    CUDA_TRY(cudaSetDevice(device));
    ncclResult_t r = ncclCommInitRank(&comm, *world, u, *rank);
    if (r != ncclSuccess) return comm = NULL, nccl_fail(why, "ncclCommInitRank", r);
    CUDA_TRY(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    CUDA_TRY(cudaEventCreateWithFlags(&before, cudaEventDisableTiming));
    CUDA_TRY(cudaEventCreateWithFlags(&after, cudaEventDisableTiming));
    CUDA_TRY(cudaMalloc((void **)&barrier_word, sizeof *barrier_word));
    return 0;
}

static int all_reduce(void *buf, size_t count, int dt, int op, void *stream, char *why) {
    nccl_kind k;
    if (begin(dt, op, &k, why)) return 1;
    NCCL_TRY(ncclAllReduce(buf, buf, count, k.type, k.op, comm, (cudaStream_t)stream));
    return 0;
}

static int all_reduce_start(void *buf, size_t count, int dt, int op, void *stream, char *why) {
    CUDA_TRY(cudaSetDevice(dev_ordinal));
    CUDA_TRY(cudaEventRecord(before, (cudaStream_t)stream));
    CUDA_TRY(cudaStreamWaitEvent(side, before, 0));
    return all_reduce(buf, count, dt, op, side, why);
}

static int reduce_start(void *buf, size_t count, int dt, int op, int root, void *stream, char *why) {
    nccl_kind k;
    if (begin(dt, op, &k, why)) return 1;
    CUDA_TRY(cudaEventRecord(before, (cudaStream_t)stream));
    CUDA_TRY(cudaStreamWaitEvent(side, before, 0));
    NCCL_TRY(ncclReduce(buf, buf, count, k.type, k.op, root, comm, side));
    return 0;
}

static int wait_started(void *stream, char *why) {
    CUDA_TRY(cudaEventRecord(after, side));
    CUDA_TRY(cudaStreamWaitEvent((cudaStream_t)stream, after, 0));
    return 0;
}

static int broadcast(void *buf, size_t count, int dt, int root, void *stream, char *why) {
    nccl_kind k;
    if (begin(dt, TD_DIST_T_SUM, &k, why)) return 1;
    NCCL_TRY(ncclBroadcast(buf, buf, count, k.type, root, comm, (cudaStream_t)stream));
    return 0;
}

static int all_gather(const void *in, void *out, size_t count, int dt, void *stream, char *why) {
    nccl_kind k;
    if (begin(dt, TD_DIST_T_SUM, &k, why)) return 1;
    NCCL_TRY(ncclAllGather(in, out, count, k.type, comm, (cudaStream_t)stream));
    return 0;
}

static int reduce_scatter(const void *in, void *out, size_t count, int dt, int op, void *stream, char *why) {
    nccl_kind k;
    if (begin(dt, op, &k, why)) return 1;
    NCCL_TRY(ncclReduceScatter(in, out, count, k.type, k.op, comm, (cudaStream_t)stream));
    return 0;
}

/* A one-int all-reduce, then a host wait for it: every rank has reached the barrier. */
static int barrier(void *stream, char *why) {
    CUDA_TRY(cudaSetDevice(dev_ordinal));
    NCCL_TRY(ncclAllReduce(barrier_word, barrier_word, 1, ncclInt32, ncclSum, comm, (cudaStream_t)stream));
    CUDA_TRY(cudaStreamSynchronize((cudaStream_t)stream));
    return 0;
}

/* From the watchdog thread: ends the kernels in flight, so no stream waits forever. */
static void abort_comm(void) {
    atomic_store(&aborted, true);
    ncclComm_t c = comm;
    comm = NULL; /* later calls fail instead of using the freed communicator */
    if (c) ncclCommAbort(c);
}

static void finalize(void) {
    if (comm && !atomic_load(&aborted)) ncclCommDestroy(comm);
    comm = NULL;
    if (barrier_word) cudaFree(barrier_word);
    if (side) cudaStreamDestroy(side);
    if (before) cudaEventDestroy(before);
    if (after) cudaEventDestroy(after);
    barrier_word = NULL, side = NULL, before = after = NULL;
}

static const td_dist_transport nccl_transport = {
    .version = TD_DIST_TRANSPORT_VERSION,
    .name = "nccl",
    .make_id = make_id,
    .init = init,
    .bcast_bytes = NULL,
    .all_reduce = all_reduce,
    .broadcast = broadcast,
    .all_gather = all_gather,
    .reduce_scatter = reduce_scatter,
    .barrier = barrier,
    .all_reduce_start = all_reduce_start,
    .wait_started = wait_started,
    .reduce_start = reduce_start,
    .abort = abort_comm,
    .finalize = finalize,
};

__attribute__((visibility("default"))) const td_dist_transport *td_dist_transport_plugin(void) {
    return &nccl_transport;
}
