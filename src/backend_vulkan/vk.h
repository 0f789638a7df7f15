/*
** Internals of the Vulkan backend (libtrident-vulkan.so).
** defines: vk_dev (one logical device), td_buffer (a sub-allocation), vk_block,
** the recording/submission API used by the op encoders, and the push-constant
** mirrors shared by several shaders.
**
** Threading: every entry point takes the device's mutex; encoders run under it.
** Ordering: all work goes to one compute queue in submission order; the
** recorder inserts a memory barrier only where a dispatch touches a range that
** an earlier, not yet synchronized dispatch or transfer wrote (or reads-then-
** writes), and once at the start of every command buffer.
*/
#ifndef TRIDENT_VK_H
#define TRIDENT_VK_H

#include <assert.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

#include "trident/backend.h"
#include "vk_shaders.h"

#define VK_MAX_DEVICES         8
#define VK_MAX_BINDINGS        8
#define VK_PUSH_MAX            128   /* the push-constant range every pipeline layout declares */
#define VK_N_BATCHES           3     /* command buffers in flight */
#define VK_BATCH_DISPATCHES    256   /* dispatches recorded before a batch is submitted without waiting */
#define VK_MAX_HAZARDS         64    /* ranges tracked since the last barrier */
#define VK_N_CLASSES           128   /* size classes of the free lists (4 per power of two) */
#define VK_QUERY_COUNT         16384 /* timestamp queries (events; the profiler keeps up to 2049 per device) */
#define VK_MAX_SPEC            8     /* specialization constants per pipeline (id 0 = workgroup size) */
#define VK_COMPILE_THREADS     8     /* threads making pipelines (vk_compile.c), at most the CPUs */
#define VK_COMPILE_THREADS_MAX 64    /* ... and at most this many with TRIDENT_VULKAN_COMPILE_THREADS */

/* One VkDeviceMemory with one VkBuffer over all of it. */
typedef struct vk_block {
    VkDeviceMemory mem;
    VkBuffer buf;
    VkDeviceSize size, used; /* bump pointer for new sub-allocations */
    void *map;               /* host address when host-visible, else NULL */
    bool dedicated;          /* holds exactly one td_buffer (larger than a block) */
    struct vk_block *next;
} vk_block;

/* A buffer larger than one allocation (maxMemoryAllocationSize) is segmented: n_seg dedicated
** blocks of seg bytes each (the last may be shorter), byte x in segs[x / seg] at x % seg; block is
** then NULL. A binding lies within one segment (vk_bind_view); vk_view_too_wide counts a view that
** crosses a segment boundary as too wide, so the ops that run in parts split it (vk_split.c). */
struct td_buffer {
    struct vk_dev *dev;
    vk_block *block;
    VkDeviceSize offset; /* within block, aligned to VK_ALIGN */
    VkDeviceSize size;   /* bytes asked for */
    VkDeviceSize cap;    /* bytes reserved (size class) */
    int size_class;      /* -1: dedicated block or segmented */
    vk_block **segs;     /* segmented: the blocks, in order */
    int n_seg;
    VkDeviceSize seg;
    td_buffer *next_free;
};

/* One range a recorded command touches. */
typedef struct vk_range {
    VkBuffer buf;
    VkDeviceSize lo, hi;
    bool write;
} vk_range;

/* A command buffer and its fence. serial counts submissions; 0 = never submitted. */
typedef struct vk_batch {
    VkCommandBuffer cb;
    VkFence fence;
    VkDescriptorPool dpool; /* without push descriptors: sets of this batch */
    uint64_t serial;
    bool recording, pending;
    int n_cmds;
} vk_batch;

/* A pipeline of a shader variant and specialization constants. Once queued to
** the compile threads, pipe, result, state and job_next belong to the
** compiler's lock (vk_compile.c) until ready is set; the rest to the device's. */
enum { VK_PIPE_READY, VK_PIPE_PENDING, VK_PIPE_FAILED };
typedef struct vk_pipeline {
    int shader; /* the variant */
    uint32_t spec[VK_MAX_SPEC];
    int n_spec;
    bool ready; /* the recording thread saw it made: pipe may be used */
    VkPipeline pipe;
    int state;       /* VK_PIPE_* */
    VkResult result; /* of vkCreateComputePipelines, once not pending */
    struct vk_pipeline *next, *job_next;
} vk_pipeline;

/* The compile threads of a device (vk_compile.c): a FIFO of pending pipelines. */
typedef struct vk_compiler {
    pthread_mutex_t lock;
    pthread_cond_t work, done;
    vk_pipeline *head, *tail;
    pthread_t threads[VK_COMPILE_THREADS_MAX];
    int n_threads, max_threads;
    int pending; /* queued or being made */
    bool stop;
} vk_compiler;

/* A command kept on the host until the batch is submitted (vk_exec.c): once a dispatch of the
** recording batch waits for its pipeline, it and every later command of the batch are logged, and
** recorded in order when the batch is submitted. */
enum { VK_CMD_DISPATCH, VK_CMD_BARRIER, VK_CMD_HOST_BARRIER, VK_CMD_COPY, VK_CMD_FILL, VK_CMD_TIMESTAMP };
typedef struct vk_cmd {
    int kind;
    vk_pipeline *pipe; /* DISPATCH */
    vk_pipeline *alt;  /* DISPATCH: what runs instead, on alt_groups, where pipe is still being made */
    uint32_t alt_groups[3];
    VkDescriptorSet set; /* DISPATCH without push descriptors */
    int n_bind;
    VkDescriptorBufferInfo info[VK_MAX_BINDINGS];
    uint32_t push_size, groups[3];
    uint8_t push[VK_PUSH_MAX];
    VkBuffer src, dst;                /* COPY (src, dst), FILL (dst) */
    VkDeviceSize src_off, dst_off, n; /* bytes */
    uint32_t word;                    /* FILL: the 4-byte pattern; TIMESTAMP: the query */
} vk_cmd;

/* Optional device features, by bit: TRIDENT_VULKAN_DISABLE=name,... (or all) makes
** the backend behave as on a device without them (vk_feature.c; docs/vulkan.md
** says what takes over for each). The dtype features (fp64 .. storage8) remove
** their dtypes; "all" leaves them on, so that every dtype is still tested. */
#define VK_FEATURES(X)                                                                                                 \
    X(SUBGROUP, "subgroup")                                                                                            \
    X(FP16, "fp16")                                                                                                    \
    X(INT8, "int8")                                                                                                    \
    X(INT16, "int16")                                                                                                  \
    X(PUSH_DESCRIPTOR, "push_descriptor")                                                                              \
    X(BDA, "bda")                                                                                                      \
    X(COOPMAT, "coopmat")                                                                                              \
    X(TIMESTAMPS, "timestamps")                                                                                        \
    X(MEMORY_BUDGET, "memory_budget")                                                                                  \
    X(ATOMIC_FLOAT, "atomic_float")                                                                                    \
    X(FP64, "fp64")                                                                                                    \
    X(INT64, "int64")                                                                                                  \
    X(STORAGE16, "storage16")                                                                                          \
    X(STORAGE8, "storage8")
enum {
#define VK_FEATURE_BIT_(N, s) VK_F_BIT_##N,
    VK_FEATURES(VK_FEATURE_BIT_)
#undef VK_FEATURE_BIT_
};
#define VK_F(N)           (1u << VK_F_BIT_##N)
#define VK_F_DTYPES       (VK_F(FP64) | VK_F(INT64) | VK_F(STORAGE16) | VK_F(STORAGE8))
#define VK_F_ALL_FALLBACK ((1u << VK_F_BIT_FP64) - 1u) /* "all": every feature with a fallback path */

/* Capabilities found at device creation (also reported through td_device_info). */
typedef struct vk_caps {
    uint32_t api_version, vendor, subgroup_size;
    bool subgroup_arith, fp16_arith, int8_arith, storage16, storage8, int64, fp64, int16;
    bool push_descriptor, bda, memory_budget, coopmat_nv, coopmat_khr, timestamps, atomic_float;
    bool atomic_float_add;     /* shaderBufferFloat32AtomicAdd (VK_EXT_shader_atomic_float) */
    int coopmat;               /* the f16 matmul's tensor-core path: VK_COOPMAT_NONE, _NV or _KHR (vk_coopmat.c) */
    uint32_t coopmat_shape[3]; /* its M, N, K (the largest listed that tiles 64 x subgroup size x 32) */
    bool coopmat_bf16;         /* the KHR extension lists bf16 shapes */
    bool bf16_type;            /* VK_KHR_shader_bfloat16 with shaderBFloat16Type and ...CooperativeMatrix */
    bool coopmat_bf16_native;  /* ... and bf16 x bf16 -> f32 at coopmat_shape on the KHR path: the retyped f16
                               ** GEMM runs bf16 (vk_coopmat.c; enabled at device creation) */
    bool memory_model;         /* vulkanMemoryModel (the cooperative-matrix shader needs it) */
    float timestamp_period;    /* ns per tick */
    VkDeviceSize max_storage_range, max_alloc, min_storage_align, shared_mem;
    uint32_t max_groups[3], max_wg_invocations, max_push;
    uint32_t disabled; /* TRIDENT_VULKAN_DISABLE mask (VK_F bits) */
} vk_caps;

typedef struct vk_dev {
    int index;
    VkPhysicalDevice phys;
    VkPhysicalDeviceProperties props;
    VkPhysicalDeviceMemoryProperties memprops;
    vk_caps caps;
    pthread_mutex_t lock;
    bool created;     /* logical device made (lazily, on first use) */
    td_status failed; /* creation failed: the status to report again */
    char fail_msg[256];
    VkDevice dev;
    VkQueue queue;
    uint32_t qfam;
    /* memory */
    uint32_t mt_device;  /* memory type of blocks */
    uint32_t mt_staging; /* host-visible, coherent (cached when possible) */
    bool direct;         /* blocks are host-visible and coherent: map instead of staging */
    bool direct_read;    /* ... and host-cached, so reading them is fast */
    VkDeviceSize block_size;
    vk_block *blocks;
    td_buffer *free_list[VK_N_CLASSES];
    td_buffer *big_free; /* cached dedicated blocks and segmented buffers */
    vk_block *staging;
    VkDeviceSize staging_used;
    td_buffer *dummy;                         /* bound in place of empty operands */
    VkDeviceSize bytes_reserved;              /* held from the driver (blocks, staging) */
    VkDeviceSize bytes_allocated, bytes_peak; /* in live buffers (size classes), and the most ever */
    /* execution */
    VkCommandPool pool;
    vk_batch batches[VK_N_BATCHES];
    int cur; /* index of the recording batch, or -1 */
    uint64_t next_serial, done_serial;
    vk_range hazards[VK_MAX_HAZARDS];
    int n_hazards;
    bool batch_fresh; /* no barrier yet in the recording batch */
    vk_cmd *log;      /* commands waiting for a pipeline (see vk_cmd) */
    int n_log, log_cap;
    /* pipelines */
    VkPipelineCache cache;
    bool cache_dirty;
    size_t cache_saved; /* bytes of the pipeline cache as last loaded or saved */
    vk_compiler compiler;
    bool verbose; /* TRIDENT_VULKAN_VERBOSE: pipeline times */
    VkShaderModule modules[VK_SHADER_COUNT];
    vk_pipeline *pipelines[VK_SHADER_COUNT];
    VkDescriptorSetLayout dsl; /* VK_MAX_BINDINGS storage buffers; shaders use a prefix */
    VkPipelineLayout layout;   /* dsl + VK_PUSH_MAX bytes of push constants */
    PFN_vkCmdPushDescriptorSetKHR push_descriptor;
    /* timing */
    VkQueryPool qpool;
    uint32_t next_query;
    /* f16 matmul on cooperative matrices: 0 unavailable, 1 not yet checked, 2 verified, -1 failed its self-test */
    int coopmat_state;
    /* bf16 matmul on them (vk_ops_matmul.c): 0 not yet checked, 1 verified, -1 failed its self-test */
    int coopmat_bf16_state;
    /* bf16 matmul on the retyped f16 kernel (caps.coopmat_bf16_native): 0 not yet checked, 1 verified, -1 failed */
    int bf16_native_state;
    uint32_t coop_tile_test; /* vk_ops_matmul.c: 1 + the tile its self-test prefers, 0 outside it */
    /* capture: while set, commands go into this graph's command buffer */
    struct td_graph *capturing;
    /* the graph replayed last, whose fence vk_idle also checks (a replay is not a batch) */
    struct td_graph *replayed;
    /* self-test (vk_selftest.c): variants that run as their generic twin on this driver (and whether that
    ** was said), variants with a twin that ran since the last mark, the variant made to give wrong output
    ** (TRIDENT_VULKAN_PLANT; -1 none) */
    bool denied[VK_SHADER_COUNT], warned[VK_SHADER_COUNT], used[VK_SHADER_COUNT];
    int planted;
} vk_dev;

/* A captured command buffer (vk_capture.c). Buffers freed while capturing stay
** with the graph, so replays never write memory that was handed out again. */
struct td_graph {
    vk_dev *d;
    VkCommandBuffer cb;
    VkFence fence;
    VkDescriptorPool dpool; /* without push descriptors */
    bool pending;
    td_buffer *held;
};

/* ---- vk_coopmat.c ---- */
enum { VK_COOPMAT_NONE, VK_COOPMAT_NV, VK_COOPMAT_KHR };
/* VkPhysicalDeviceCooperativeMatrixFeatures{NV,KHR} (the same layout) */
typedef struct vk_coopmat_feat {
    VkStructureType sType;
    void *pNext;
    VkBool32 cooperativeMatrix, cooperativeMatrixRobustBufferAccess;
} vk_coopmat_feat;
/* Choose caps.coopmat and caps.coopmat_shape (after the feature mask is applied). */
void vk_coopmat_probe(vk_dev *d);
/* f filled for the chosen extension, chained before next; next when there is none. */
void *vk_coopmat_chain(const vk_dev *d, vk_coopmat_feat *f, void *next);
/* VkPhysicalDeviceShaderBfloat16FeaturesKHR (Debian 12's headers predate it) */
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR_ ((VkStructureType)1000141000)
typedef struct vk_bf16_feat {
    VkStructureType sType;
    void *pNext;
    VkBool32 shaderBFloat16Type, shaderBFloat16DotProduct, shaderBFloat16CooperativeMatrix;
} vk_bf16_feat;
/* f filled with the two bf16 features the retyped GEMM needs, chained before next, where
** caps.coopmat_bf16_native; else next. */
void *vk_bf16_chain(const vk_dev *d, vk_bf16_feat *f, void *next);
const char *vk_coopmat_name(int path); /* "khr", "nv", "none" */

/* ---- vk_feature.c ---- */
/* Parse TRIDENT_VULKAN_DISABLE into *mask; an unknown name is an error naming the known ones. */
td_status vk_feature_mask(uint32_t *mask);
/* Clear the capabilities that mask disables. */
void vk_feature_apply(vk_caps *c, uint32_t mask);
/* "subgroup,fp16" for a mask ("" when 0; "all" stands for VK_F_ALL_FALLBACK). */
void vk_feature_names(uint32_t mask, char *out, size_t n);

/* ---- vk_device.c ---- */
extern VkInstance vk_instance;
/* The plugin's init (td_backend.init): the instance and the list of usable devices. */
td_status vk_init(char *why, size_t why_size);
int vk_device_count(void);
td_status vk_device_info(int index, td_device_info *out);
/* The device, created on first use; NULL with an error set when it cannot be made. Locks nothing. */
vk_dev *vk_get(int index);
void vk_lock(vk_dev *d);
void vk_unlock(vk_dev *d);
/* Map a VkResult to a td_status with a message naming what failed. */
td_status vk_fail(VkResult r, const char *what);
const char *vk_result_str(VkResult r);
/* Validation messages counted by the debug messenger (TRIDENT_VULKAN_VALIDATION=1). */
int vk_validation_errors(void);

/* ---- vk_memory.c ---- */
#define VK_ALIGN 256
td_status vk_memory_init(vk_dev *d);
void vk_memory_destroy(vk_dev *d);
td_status vk_alloc(vk_dev *d, size_t nbytes, td_buffer **out); /* under the lock */
void vk_free(td_buffer *b);                                    /* under the lock */
td_status vk_buffer_alloc(int dev, size_t nbytes, td_buffer **out);
void vk_buffer_free(td_buffer *buf);
td_status vk_write(td_buffer *dst, size_t offset, const void *src, size_t nbytes);
td_status vk_read(td_buffer *src, size_t offset, void *dst, size_t nbytes);
td_status vk_copy(td_buffer *src, size_t so, td_buffer *dst, size_t dof, size_t nbytes);
uint64_t vk_buffer_address(td_buffer *b); /* VkDeviceAddress of byte 0; 0 without buffer device addresses */
/* The part of bytes [off, off + n) of b that lies in one block: its VkBuffer, offset there and host
** address (NULL when not mapped); returns the part's length (n unless b is segmented). */
VkDeviceSize vk_buffer_piece(const td_buffer *b, VkDeviceSize off, VkDeviceSize n, VkBuffer *buf, VkDeviceSize *at,
                             char **map);
td_status vk_memset(td_buffer *dst, size_t offset, uint8_t byte, size_t nbytes);
/* The memory_stats slot: bytes in live buffers, held from the driver, and the
** most in live buffers since the last reset. */
td_status vk_memory_stats(int dev, bool reset_peak, td_memory_stats *out);

/* ---- vk_exec.c ---- */
/* One storage-buffer binding of a dispatch. */
typedef struct vk_bind {
    VkBuffer buf;
    VkDeviceSize offset, range; /* bytes; offset is a multiple of minStorageBufferOffsetAlignment */
    bool write;
} vk_bind;
td_status vk_exec_init(vk_dev *d);
td_status vk_new_dpool(vk_dev *d, VkDescriptorPool *out);
void vk_exec_destroy(vk_dev *d);
/* Commands other than dispatches, each after a barrier where its ranges need one: a buffer copy,
** a fill with a 4-byte pattern, the barrier that makes device writes visible to the host, a
** timestamp into query (reset first). Recorded now, or logged while the batch waits for a pipeline. */
td_status vk_cmd_copy(vk_dev *d, VkBuffer src, VkDeviceSize src_off, VkBuffer dst, VkDeviceSize dst_off,
                      VkDeviceSize n);
td_status vk_cmd_fill(vk_dev *d, VkBuffer dst, VkDeviceSize off, VkDeviceSize n, uint32_t word);
td_status vk_cmd_host_barrier(vk_dev *d);
td_status vk_cmd_timestamp(vk_dev *d, uint32_t query);
/* Record a compute dispatch of shader with spec constants spec[0..n_spec) (spec[0]: workgroup size);
** a pipeline not made yet is made on a compile thread meanwhile (vk_compile.c). */
td_status vk_dispatch(vk_dev *d, int shader, const uint32_t *spec, int n_spec, int n_bind, const vk_bind *binds,
                      const void *push, size_t push_size, uint32_t gx, uint32_t gy, uint32_t gz);
/* vk_dispatch with an alternative that gives the same result: the variant's pipeline of alt_spec
** on the grid alt_groups. When spec's pipeline is still being made where the batch is submitted,
** after the batch's other pipelines and the alternative's are made, the alternative runs (a
** costlier pipeline, such as matmul's large tiles, then never holds up a first step). */
td_status vk_dispatch_alt(vk_dev *d, int shader, const uint32_t *spec, const uint32_t *alt_spec, int n_spec,
                          const uint32_t alt_groups[3], int n_bind, const vk_bind *binds, const void *push,
                          size_t push_size, uint32_t gx, uint32_t gy, uint32_t gz);
/* Record a dispatch of a ready pipeline (user kernels). */
td_status vk_dispatch_pipeline(vk_dev *d, VkPipeline pipe, int n_bind, const vk_bind *binds, const void *push,
                               size_t push_size, uint32_t gx, uint32_t gy, uint32_t gz);
/* The descriptor pool for the command buffer being recorded (no push descriptors). */
VkDescriptorPool vk_current_dpool(vk_dev *d);
/* Submit the recording batch (no wait); logged commands are recorded first, once their pipelines
** are made. */
td_status vk_flush(vk_dev *d);
/* Submit and wait until the device is idle. */
td_status vk_finish(vk_dev *d);
/* True when nothing is recorded or in flight. */
bool vk_idle(vk_dev *d);
/* Bind a view: the window of its buffer that holds all its elements. *elem_off
** gets the view's first element relative to the window.
** A NULL view, or one without a buffer or elements, binds the dummy buffer (offset 0). */
td_status vk_bind_view(vk_dev *d, const td_operand *v, bool write, vk_bind *b, uint32_t *elem_off);
/* vk_bind_view of views[0..n-1] into b[k] and *offs[k]; view k is written when bit k of writes is set. */
td_status vk_bind_views(vk_dev *d, int n, const td_operand *const *views, uint32_t writes, vk_bind *b,
                        uint32_t *const *offs);
/* Whether v's window (with the offset alignment's slack, as vk_bind_view binds it) exceeds
** maxStorageBufferRange, or crosses a segment of a buffer larger than one allocation. */
bool vk_view_too_wide(vk_dev *d, const td_operand *v);
/* Whether a contiguous copy of v's elements fits one allocation and one binding. */
bool vk_fits_one(vk_dev *d, const td_operand *v);
/* Bind a whole buffer (at least min_bytes); not a segmented one. */
vk_bind vk_bind_buffer(td_buffer *b, bool write);

/* ---- vk_pipeline.c ---- */
td_status vk_pipeline_init(vk_dev *d);
void vk_pipeline_destroy(vk_dev *d);
/* The pipeline of (shader, spec); on first use queued to a compile thread (pending) when wait is
** false and there are compile threads, else made now. */
td_status vk_pipeline_find(vk_dev *d, int shader, const uint32_t *spec, int n_spec, bool wait, vk_pipeline **out);
/* Wait for a pending pipeline; its handle, or an error naming the shader. */
td_status vk_pipeline_ready(vk_dev *d, vk_pipeline *p, VkPipeline *out);
/* Pipeline for a user-supplied SPIR-V module (vk_glsl.c). */
td_status vk_pipeline_from_spirv(vk_dev *d, const uint32_t *code, size_t size, const char *entry, uint32_t wg,
                                 VkShaderModule *mod, VkPipeline *out);
/* The variant that runs for shader: its generic twin without subgroup arithmetic or where the
** self-test denied it; notes that a variant with a twin ran. */
int vk_pipeline_variant(vk_dev *d, int shader);
/* The shader variant named name ("softmax_f32"), or -1. */
int vk_variant_id(const char *name);
/* TRIDENT_VULKAN_PREWARM=<name>: queue the pipelines that the last process with that name made to the
** compile threads (vk_prewarm.c); its own are listed at each cache save. */
void vk_prewarm(vk_dev *d);
void vk_prewarm_save(vk_dev *d);
/* For vk_prewarm.c and vk_compile.c: the shader module of a variant, made on first use; a pipeline
** from it (thread-safe); a new entry of variant shader's list (its state is the caller's); the
** variant that runs for shader (no warning, no note). */
td_status vk_pipeline_module(vk_dev *d, int shader);
VkResult vk_pipeline_create(vk_dev *d, int shader, const uint32_t *spec, int n_spec, VkPipeline *out);
vk_pipeline *vk_pipeline_add(vk_dev *d, int shader, const uint32_t *spec, int n_spec);
int vk_pipeline_pick(const vk_dev *d, int shader);

/* ---- vk_compile.c ---- */
/* The compile threads a device gets: TRIDENT_VULKAN_COMPILE_THREADS, else the CPUs up to VK_COMPILE_THREADS. */
int vk_compile_threads(void);
void vk_compile_init(vk_dev *d);
bool vk_compile_async(const vk_dev *d); /* pipelines are made on compile threads */
/* Queue p (its key set) to be made on a compile thread; made here when no thread can be started. */
void vk_compile_submit(vk_dev *d, vk_pipeline *p);
/* Wait until p is not pending (or, without wait, look); its state. */
int vk_compile_state(vk_dev *d, vk_pipeline *p, bool wait);
/* Make p on this thread (p is not queued); its result. */
VkResult vk_compile_now(vk_dev *d, vk_pipeline *p);
/* Let the threads finish the queue, and join them. */
void vk_compile_stop(vk_dev *d);
/* td_kernel_cache_dir (made if absent); false when there is none or TRIDENT_VULKAN_PIPELINE_CACHE=0. */
bool vk_cache_dir(char *dir, size_t n);
/* Write the pipeline cache to disk when new pipelines were made. */
void vk_pipeline_cache_save(vk_dev *d);

/* ---- vk_selftest.c ---- */
/* Read the self-test record of d's driver (denied variants) and TRIDENT_VULKAN_PLANT. */
void vk_selftest_load(vk_dev *d);
/* The one-line warning that shader runs as its generic twin (once per variant). */
void vk_selftest_warn(vk_dev *d, int shader);
/* After a dispatch of variant: the planted variant's outputs are overwritten with NaN bytes. */
td_status vk_selftest_plant(vk_dev *d, int variant, int n_bind, const vk_bind *binds);

/* ---- ops (vk_ops_*.c) ---- */
typedef td_status (*vk_op_fn)(vk_dev *d, const td_op *op);
/* ---- vk_split.c ---- */
/* Run op with encoder table enc, MATMUL and CONV2D* in parts where an operand is wider than one
** binding (maxStorageBufferRange). */
td_status vk_split_run(vk_dev *d, const td_op *op, const vk_op_fn *enc);
typedef bool (*vk_supports_fn)(vk_dev *d, const td_op *op);
/* Workgroup count for n items of wg each, capped (shaders loop over the rest). */
uint32_t vk_groups(int64_t n, uint32_t per_group);
bool vk_dtype_ok(vk_dev *d, td_dtype dt); /* the device can store and load dt */

/* Elementwise push constants. GLSL: shaders/elem.glsl, block PC. */
typedef struct vk_pc_elem {
    uint32_t n;    /* elements */
    uint32_t ndim; /* 1..4 dims of shape, innermost last */
    uint32_t shape[4];
    uint32_t off[4];     /* first element of operand k (= binding k) */
    uint32_t stride[16]; /* stride[4*k + d] of operand k along dim d, in elements */
    uint32_t sc[4];      /* scalars; meaning per shader */
} vk_pc_elem;
static_assert(sizeof(vk_pc_elem) == 120, "vk_pc_elem must match shaders/elem.glsl");

/* Elementwise launch: views[0..n) all of out's shape (inputs already broadcast),
** bound in order; merges dims and splits into several dispatches past 4 dims. */
td_status vk_elementwise(vk_dev *d, int shader, const uint32_t *spec, int n_spec, int n, const td_operand *const *views,
                         const bool *writes, const uint32_t sc[4]);
/* Scalars of an elementwise op: the value as dtype dt's bits into sc at slot k
** (64-bit dtypes take two slots 2k, 2k+1). */
void vk_scalar(uint32_t sc[4], int k, td_dtype dt, double v);

#endif /* TRIDENT_VK_H */
