/*
** Devices as objects an application can ask about and order work on:
** properties, memory statistics, synchronization, events, native handles,
** foreign memory, CUDA-graph style capture, and the fp32 matmul precision.
**
** Work on one device runs in submission order on that device's queue (one
** CUDA stream, one Vulkan queue; the CPU backend runs ops synchronously).
** Functions here that wait for the device say so ("waits"); nothing else in
** this header blocks the host.
**
** Threads: every function is thread-safe unless its comment says otherwise.
*/
#ifndef TRIDENT_DEVICE_H
#define TRIDENT_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a device is and can do (td_device_get_info). */
typedef struct td_device_info {
    char name[128];          /* "NVIDIA H100 80GB HBM3", "llvmpipe", "AMD EPYC ..." */
    char driver[64];         /* driver or library version */
    uint64_t total_memory;   /* bytes; 0 if unknown */
    uint64_t free_memory;    /* bytes; 0 if unknown */
    int compute_units;       /* SMs, CUs or CPU threads */
    int subgroup_size;       /* warp/subgroup width; SIMD lanes (f32) on CPU */
    int arch;                /* CUDA compute capability as 10*major+minor (90 for sm_90); 0 elsewhere */
    bool fp16, bf16, int8;   /* native arithmetic of these types */
    bool tf32;               /* TF32 tensor-core matmul ("high" precision) */
    bool cooperative_matrix; /* tensor-core style matrix ops */
    bool timestamps;         /* event timing is available */
    bool unified_memory;     /* host can address device buffers */
    bool emulated;           /* a software device on the host CPU (lavapipe): "auto" never picks it */
    char features[256];      /* free-form extras, e.g. "avx2 fma openblas" */
} td_device_info;

/* METHOD. Fill *out with dev's properties.
** Returns TD_OK, TD_ERR_MISUSE (out is NULL), TD_ERR_UNAVAILABLE (no such
** device; the message says why). */
TD_API td_status td_device_get_info(td_device dev, td_device_info *out);
/* METHOD. Why the backend of a device type (td_device_type) is unavailable
** ("plugin not loaded: ..."), or NULL if it is available. The string is owned
** by the library and lives as long as the process; thread-safe. */
TD_API const char *td_backend_unavailable_reason(int device_type);
/* METHOD. A symbol that the plugin of an available device type exports beside
** td_backend_plugin (a backend's own tools, such as the Vulkan self-test hooks
** of backend_vulkan/vk_selftest.h), or NULL. */
TD_API void *td_backend_symbol(int device_type, const char *name);

/* Memory of one device as its allocator sees it (bytes). */
typedef struct td_memory_stats {
    uint64_t allocated;      /* held by live tensors now */
    uint64_t reserved;       /* taken from the driver: allocated + cached */
    uint64_t peak_allocated; /* highest `allocated` since the last reset */
    uint64_t alloc_count;    /* allocations served */
    uint64_t oom_retries;    /* allocations that emptied the cache and tried again */
} td_memory_stats;

/* METHOD. Fill *out with dev's allocator statistics. reset_peak: start a new
** peak window at the current allocation.
** Returns TD_OK, TD_ERR_MISUSE, TD_ERR_UNAVAILABLE, TD_ERR_UNSUPPORTED (the
** backend keeps no statistics). */
TD_API td_status td_memory_stats_get(td_device dev, bool reset_peak, td_memory_stats *out);

/* METHOD. Return dev's cached, unused memory to the driver. TD_OK on a backend
** without a cache. */
TD_API td_status td_memory_empty_cache(td_device dev);

/* METHOD. Wait until all work queued on dev has finished (waits).
** Returns TD_OK, TD_ERR_UNAVAILABLE, or the first asynchronous error of the
** device (TD_ERR_DEVICE with the driver's message). */
TD_API td_status td_synchronize(td_device dev);

/* GETTER. Device-to-host waits made so far by this process on GPU devices:
** reads of tensor data and synchronizations. A training step that shows its
** loss makes one; tests use it to prove there are no hidden waits. */
TD_API int64_t td_host_sync_count(void);

/* ---- Events: points in a device's queue ---- */
typedef struct td_device_event td_device_event; /* opaque */

/* CONSTRUCTOR. A new event of dev, for td_event_free.
** Returns TD_OK, TD_ERR_MISUSE, TD_ERR_UNAVAILABLE, TD_ERR_UNSUPPORTED. */
TD_API td_status td_event_new(td_device dev, td_device_event **out);
/* METHOD. Mark the current end of its device's queue. Does not wait. */
TD_API td_status td_event_record(td_device_event *ev);
/* METHOD. Make dev's queue wait for ev (recorded on any device of the same
** backend) without a host wait; across backends the host waits for ev. */
TD_API td_status td_event_wait(td_device_event *ev, td_device dev);
/* METHOD. Make a native queue the caller owns wait for ev without a host wait:
** a cudaStream_t of ev's CUDA device ((void *)1 and (void *)2 are the legacy
** and per-thread default streams, as in DLPack's __dlpack__). A backend
** without such waits makes the host wait for ev's device instead. */
TD_API td_status td_event_wait_native(td_device_event *ev, void *native_stream);
/* METHOD. Milliseconds between two recorded events of one device (waits for
** end). */
TD_API td_status td_event_elapsed_ms(td_device_event *start, td_device_event *end, double *ms);
/* DESTRUCTOR. NULL is a no-op. */
TD_API void td_event_free(td_device_event *ev);

/* ---- Native handles and foreign memory (for DLPack, NCCL, user streams) ---- */

/* GETTER. dev's native queue: cudaStream_t on CUDA, VkQueue on Vulkan, NULL on
** the CPU. Work the caller enqueues there is ordered with Trident's. */
TD_API void *td_device_native_stream(td_device dev);

/* GETTER. Address of t's element 0 as its device sees it: a CUdeviceptr on
** CUDA, a VkDeviceAddress on Vulkan (0 when the device has no buffer device
** addresses), a host pointer on the CPU. 0 with an error on failure. */
TD_API uint64_t td_tensor_device_address(const td_tensor *t);

/* CONSTRUCTOR. A tensor over memory Trident did not allocate: address is a
** CUdeviceptr (CUDA) or a host pointer (CPU) of at least the bytes the shape
** and strides (elements; NULL: contiguous) reach. deleter(ctx), if not NULL,
** runs once when the last tensor over the memory is released.
** A tensor with no element holds none of the memory: it is a fresh empty
** tensor, and deleter(ctx) runs at once (the address may be 0).
** Fails with TD_ERR_MISUSE (bad shape, sizes past 2^48 bytes with zeros taken
** as 1, as td_empty, negative strides, NULL address with elements, an address
** that is no multiple of the element size), TD_ERR_UNSUPPORTED (the backend
** imports no memory). If the
** import itself fails the deleter is not called and the caller still owns the
** memory; once imported, a later failure runs it. */
TD_API td_tensor *td_from_foreign(td_device dev, uint64_t address, int ndim, const int64_t *shape,
                                  const int64_t *strides, td_dtype dt, void (*deleter)(void *ctx), void *ctx);

/* ---- Capture: record a sequence of ops once, replay it many times ----
** Between td_capture_begin and td_capture_end, ops on dev are recorded (and
** not run); reading tensor data there is TD_ERR_STATE. Tensors allocated
** during capture keep their memory for the graph's lifetime, so a replay
** writes the same buffers: keep the tensors you read after a replay. Replay
** re-runs the recorded work on the same buffers with the values they hold
** then, bit for bit as eager. CUDA records a CUDA graph; Vulkan a command
** buffer; the CPU backend does not capture (TD_ERR_UNSUPPORTED). */
typedef struct td_captured_graph td_captured_graph; /* opaque */
TD_API td_status td_capture_begin(td_device dev);
TD_API td_status td_capture_end(td_device dev, td_captured_graph **out);
/* METHOD. Enqueue one replay; does not wait. */
TD_API td_status td_graph_replay(td_captured_graph *g);
/* DESTRUCTOR. NULL is a no-op. */
TD_API void td_graph_free(td_captured_graph *g);

/* ---- fp32 matmul precision, as torch.set_float32_matmul_precision ----
** "highest" (the default): strict fp32. "high": TF32 tensor cores where the
** device has them (CUDA sm_80+), strict elsewhere. "medium": as "high" (bf16
** passes are not used). Applies to matmul, linear and convolution issued after
** the call, on every thread. Returns TD_ERR_MISUSE for another string. */
TD_API td_status td_set_float32_matmul_precision(const char *precision);
/* GETTER. "highest" or "high". */
TD_API const char *td_get_float32_matmul_precision(void);

#ifdef __cplusplus
}
#endif
#endif /* TRIDENT_DEVICE_H */
