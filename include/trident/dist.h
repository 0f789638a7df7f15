/*
** Trident distributed: data-parallel training over several processes.
**
** One process per device. A process group is made once per process by
** td_dist_init() from the launcher's environment, and every collective runs
** over it. Three transports, the first two optional plugins loaded on first use:
**
**   nccl  (libtrident-nccl.so, needs libnccl.so.2): CUDA tensors, on the
**         device's stream (stream-ordered: the call returns once the
**         collective is queued, later ops on the stream see its result).
**   mpi   (libtrident-mpi.so, OpenMPI): CPU tensors in place, and Vulkan
**         tensors through host staging: the tensor is read to the host (a
**         host wait), reduced by MPI, and written back on the device's queue.
**   tcp   (built in, TD_DIST_TCP or TRIDENT_DIST_BACKEND=tcp): CPU tensors
**         (Vulkan staged as with mpi) without mpirun, e.g. on several hosts
**         started by `trident launch --nnodes`: a star through rank 0 over
**         the rendezvous's sockets. A rank that exits is seen at once, one
**         that hangs after the timeout; every rank's call then fails naming it.
**
** Launchers (docs/distributed.md): torchrun or `trident launch` set RANK,
** WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT;
** mpirun sets OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK and _LOCAL_SIZE. With
** nccl, rank 0 makes the NCCL unique id and hands it to the others over a TCP
** rendezvous at MASTER_ADDR:MASTER_PORT (under mpirun: over MPI); the
** rendezvous checks that every rank agrees on WORLD_SIZE and keeps its
** sockets open, so a rank that dies is seen by the others (their next
** collective fails with a message naming it). mpi needs mpirun. With
** backend AUTO, TRIDENT_DIST_BACKEND (nccl, mpi, tcp) picks, else nccl for
** a CUDA device and mpi otherwise.
**
** Thread safety: one group per process; call the collectives from one thread.
*/
#ifndef TRIDENT_DIST_H
#define TRIDENT_DIST_H

#include "io.h"
#include "nn.h"
#include "optim.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum td_dist_backend {
    TD_DIST_AUTO = 0, /* nccl for a CUDA device, mpi otherwise */
    TD_DIST_NCCL = 1,
    TD_DIST_MPI = 2,
    TD_DIST_TCP = 3, /* CPU (and Vulkan, staged) over the rendezvous's sockets: no mpirun needed */
} td_dist_backend;

typedef struct td_dist_opts {
    td_dist_backend backend;
    /* The device type each rank binds: device index LOCAL_RANK of this type
    ** (cpu: the CPU), or index `index` when fixed_index (several ranks may
    ** then share one device, e.g. lavapipe). */
    td_device_type device_type;
    bool fixed_index;
    int index;
    /* Seconds the rendezvous waits for every rank, and with tcp each
    ** collective for its peers (0: TRIDENT_DIST_TIMEOUT, else 60). */
    double timeout_s;
} td_dist_opts;

/*
** CONSTRUCTOR (of the process's group). Join the group the environment
** describes, bind the device and set up the transport. Without a launcher's
** environment (no WORLD_SIZE, no OMPI_COMM_WORLD_SIZE) the group is this
** process alone (rank 0 of 1) and every collective is the identity.
**   IN opts  may be NULL: auto backend, CPU
** Returns TD_OK, or: TD_ERR_MISUSE for a malformed or inconsistent
** environment (RANK >= WORLD_SIZE, a rank that reports another WORLD_SIZE
** than rank 0, two ranks of one RANK, an unknown TRIDENT_DIST_BACKEND, a LOCAL_RANK without a device of that index, mpi
*without
** mpirun, nccl for a CPU device), TD_ERR_IO for a rendezvous that failed
** (MASTER_ADDR unreachable or not every rank within the timeout, naming the
** address and the ranks missing), TD_ERR_UNSUPPORTED when the transport's
** plugin or library is missing (with the loader's reason), TD_ERR_STATE when
** a group exists already. Not thread-safe.
*/
TD_API td_status td_dist_init(const td_dist_opts *opts);

/* DESTRUCTOR. Leave the group (no collective may be running). No-op without one. */
TD_API void td_dist_destroy(void);

/* GETTERS. Without a group: false, rank 0, world 1, local rank 0, CPU, AUTO. */
TD_API bool td_dist_is_initialized(void);
TD_API int td_dist_rank(void);
TD_API int td_dist_world_size(void);
TD_API int td_dist_local_rank(void);
TD_API td_device td_dist_device(void);            /* the bound device */
TD_API td_dist_backend td_dist_get_backend(void); /* the transport in use (never AUTO with a group) */

typedef enum td_dist_op {
    TD_DIST_SUM = 0,
    TD_DIST_AVG = 1, /* sum / world_size; floating dtypes only */
    TD_DIST_MAX = 2,
} td_dist_op;

/*
** METHODS. Collectives over the group, on contiguous tensors of the bound
** device (or the CPU under mpi). Every rank calls them in the same order with
** tensors of the same shape and dtype. Every dtype; bool SUM is logical or.
**   all_reduce      t = op over ranks of t (in place)
**   broadcast       t = t of rank root (in place)
**   all_gather      out [world * n0, ...] = cat(in of rank 0, 1, ...) along dim 0
**   reduce_scatter  out [n0, ...] = rows [rank * n0, (rank+1) * n0) of op over ranks of in [world * n0, ...]
**   barrier         returns once every rank has called it
** Returns TD_OK, TD_ERR_STATE without a group or after a peer failed (the
** message names the rank), TD_ERR_MISUSE for a non-contiguous tensor, a
** tensor on another device or of mismatched size, TD_ERR_DTYPE for AVG of a
** non-floating dtype, TD_ERR_DEVICE for a transport error (its message).
*/
TD_API td_status td_dist_all_reduce(td_tensor *t, td_dist_op op);
TD_API td_status td_dist_broadcast(td_tensor *t, int root);
TD_API td_status td_dist_all_gather(td_tensor *out, td_tensor *in);
TD_API td_status td_dist_reduce_scatter(td_tensor *out, td_tensor *in, td_dist_op op);
TD_API td_status td_dist_barrier(void);

/* ---- DistributedDataParallel ---------------------------------------------
** td_ddp_new(module, opts) makes every rank's parameters and buffers rank 0's
** (broadcast), after checking that every rank has the same parameter names,
** shapes and dtypes. It then groups the parameters into buckets of at most
** bucket_cap_mb MiB, in reverse registration order (the order backward
** produces gradients in), and registers a post-accumulate hook on each. In a
** td_backward, once every gradient of a bucket is final, the hook copies them
** into the bucket's flat buffer and launches its AVG all-reduce, while
** backward still runs on the layers before (with nccl, communication overlaps
** compute); the last bucket's hook copies the averaged gradients back into
** each .grad. So after td_backward every rank holds the mean gradient over
** the ranks' batches, and the optimizer steps the same on every rank.
**
** Every parameter that requires grad must get a gradient in every backward
** (as torch's find_unused_parameters=False); otherwise the next td_ddp call
** names the parameters that did not. */
typedef struct td_ddp td_ddp;

typedef struct td_ddp_opts {
    double bucket_cap_mb;   /* 0: 25 */
    bool broadcast_buffers; /* also broadcast buffers (BatchNorm statistics) at td_ddp_new */
    /* The dtype float32 gradients travel in: TD_F32 (0, the default, as
    ** torch) or TD_BF16 (each float32 bucket is copied to bf16, all-reduced,
    ** and copied back: half the bytes, two roundings). Half-precision
    ** parameters' buckets always travel in their own dtype. */
    td_dtype grad_dtype;
    /* ZeRO-1: shard the optimizer state over the ranks. The parameters that
    ** require grad must tile one arena (one dtype, none frozen, n >= world
    ** elements). Backward reduce-scatters the gradient arena instead of
    ** all-reducing buckets: rank r's slice of the arena gets the mean
    ** gradient, and the module's .grad are not the mean (they are dropped by
    ** td_ddp_gather_parameters). Use with td_ddp_shard_optimizer. */
    bool shard_optimizer;
} td_ddp_opts;

/*
** CONSTRUCTOR. DDP over module (borrowed: it must outlive the DDP).
**   IN opts  may be NULL: 25 MiB buckets, buffers broadcast
** Returns TD_OK, TD_ERR_STATE without a group, TD_ERR_SHAPE when the ranks'
** parameters differ (naming the first parameter, the shapes, and the rank),
** the collectives' errors, TD_ERR_OOM. *out is NULL on failure.
*/
TD_API td_status td_ddp_new(td_module *module, const td_ddp_opts *opts, td_ddp **out);

/* DESTRUCTOR. Remove the hooks' effect (they become no-ops) and free the
** buckets. NULL is a no-op. */
TD_API void td_ddp_free(td_ddp *d);

/* METHODS. Gradient accumulation: between no_sync_begin and no_sync_end,
** backward accumulates into .grad locally without communication; the first
** backward after the scope all-reduces the accumulated sum. Nest. */
TD_API void td_ddp_no_sync_begin(td_ddp *d);
TD_API void td_ddp_no_sync_end(td_ddp *d);

/* METHOD. Check that the previous backward reduced every bucket; call before
** the optimizer step (td_ddp_new's hooks do everything else). Returns TD_OK,
** TD_ERR_STATE naming the parameters that got no gradient, or the error a
** hook met. */
TD_API td_status td_ddp_check(td_ddp *d);

/* GETTERS. Number of buckets; parameters of bucket b (-1 when out of range). */
TD_API int td_ddp_num_buckets(const td_ddp *d);
TD_API int td_ddp_bucket_size(const td_ddp *d, int b);

/* ---- ZeRO-1 (td_ddp_opts.shard_optimizer) -----------------------------------
** With N ranks and the module's n parameter elements in its flat arena, rank
** r owns the slice [r * (n / N), (r + 1) * (n / N)) of the arena (rank N - 1
** also the remainder). A step:
**     td_optimizer_zero_grad(opt); forward; td_backward(loss)   (reduce-scatter)
**     td_optimizer_step(opt)                                     (this rank's slice)
**     td_ddp_gather_parameters(d)                                (all-gather)
** after which every rank holds the parameters an unsharded DDP run would. */

/*
** METHOD. Shard opt in place: opt, made over the DDP module's parameters
** that require grad (one param group, any algorithm, any state, e.g. loaded
** from an unsharded checkpoint), becomes an optimizer of the same algorithm
** and options over one parameter, the view of the arena at this rank's slice,
** with the matching slice of its state (1/N of it); the rest is freed.
** Pointers to opt (schedulers) stay valid. Not collective.
** Returns TD_OK, TD_ERR_MISUSE (no shard_optimizer, NULL, opt over other
** parameters or several groups), TD_ERR_STATE (sharded already), TD_ERR_OOM.
*/
TD_API td_status td_ddp_shard_optimizer(td_ddp *d, td_optimizer *opt);

/* METHOD, collective. After the sharded optimizer's step: every rank's
** parameters become the updated ones (all-gather in place), and the module's
** gradients are dropped (td_zero_grad) so the next backward starts afresh.
** Returns TD_OK, TD_ERR_MISUSE without shard_optimizer, the collectives' errors. */
TD_API td_status td_ddp_gather_parameters(td_ddp *d);

/* CONSTRUCTOR, collective. The sharded optimizer opt's state gathered into
** the layout of the unsharded optimizer's td_optimizer_state_dict
** ("state.<i>.<slot>" shaped as parameter i), on every rank: a checkpoint of it
** resumes on any number of ranks, sharded or not. *out: +1, free with
** td_named_tensors_free. Returns TD_OK, TD_ERR_MISUSE (no shard_optimizer,
** opt not the sharded optimizer), the collectives' errors, TD_ERR_OOM. */
TD_API td_status td_ddp_optimizer_state_dict(td_ddp *d, td_optimizer *opt, td_named_tensors **out);

/* GETTER. Elements of this rank's slice; -1 without shard_optimizer or for NULL. */
TD_API int64_t td_ddp_shard_numel(const td_ddp *d);

/* ---- DistributedSampler --------------------------------------------------
** The samples of rank `rank` of `world` for an epoch, as torch's
** DistributedSampler: the order is the DataLoader's permutation of (seed,
** epoch) (data.h) when shuffle, else 0..n-1; without drop_last it is padded
** by repeating its head to a multiple of world; with drop_last it is cut to
** the largest multiple of world; rank r takes positions r, r + world, ...
** So with a per-rank batch b, the ranks' k-th batches together are the k-th
** batch of size world * b of a single process over the same order.
**   OUT idx  receives td_dist_sampler_len() indices
** Returns TD_OK or TD_ERR_MISUSE (n < 0, world < 1, rank outside [0, world),
** epoch < 0, idx NULL). */
TD_API td_status td_dist_sampler_indices(int64_t n, int world, int rank, bool shuffle, uint64_t seed, int64_t epoch,
                                         bool drop_last, int64_t *idx);
/* GETTER. Samples per rank: ceil(n / world), or floor with drop_last. */
TD_API int64_t td_dist_sampler_len(int64_t n, int world, bool drop_last);

#ifdef __cplusplus
}
#endif

#endif /* TRIDENT_DIST_H */
