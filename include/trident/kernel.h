/*
** User kernels: compile GLSL (Vulkan) or CUDA source at run time and launch it
** on tensors.
**
** A kernel belongs to the device it was compiled for. Tensors are bound in
** order (GLSL: storage buffers 0..n-1 of set 0; each tensor is bound from its
** first element, which must be suitably aligned: fresh and contiguous tensors
** are). Push data (at most 128 bytes for GLSL, 4 KiB for CUDA) reaches GLSL as
** the push-constant block; CUDA kernels take one pointer parameter per tensor
** (its element 0) followed by the push data as the remaining parameters, laid
** out as a C struct of those parameters would be:
**     extern "C" __global__ void scale(float *y, const float *x, float a, int n);
**     struct { float a; int n; } push = {2.0f, n};   // tensors {y, x}
** Launches are asynchronous, ordered with the device's other work; reading a
** tensor waits for them.
*/
#ifndef TRIDENT_KERNEL_H
#define TRIDENT_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Source languages (values equal the backend contract's TD_LANG_*). */
enum { TD_KERNEL_GLSL = 1, TD_KERNEL_CUDA = 2 };

typedef struct td_user_kernel td_user_kernel; /* opaque */

/* Compile options (all optional; a zeroed struct or NULL means none). */
typedef struct td_kernel_options {
    const char *const *defines; /* n_defines "NAME" or "NAME=VALUE" macros */
    int n_defines;
    const char *arch; /* CUDA: "sm_90", "compute_90"; NULL: the device's own. Ignored by GLSL. */
    const char *name; /* where the source came from, for messages ("bias_gelu.comp"); NULL: "glsl" / "cuda" */
} td_kernel_options;

/* CONSTRUCTOR. Compile source (language TD_KERNEL_*) with entry function entry
** (NULL: "main") and options opts (NULL: none) for device dev. CUDA goes
** through NVRTC for the device's architecture.
**   OUT *out: the kernel, to be freed with td_kernel_free; NULL on failure.
**   OUT log (optional, log_size bytes): the compiler's messages; on
**       TD_ERR_COMPILE the errors, always NUL-terminated.
** Returns TD_OK, TD_ERR_COMPILE (log says why; the error message is the first
** error on one line, `<name>:<line>: <what>`, the count of the others after
** it; with TRIDENT_KERNEL_LOG=1 the whole log is also printed to stderr),
** TD_ERR_UNSUPPORTED (the
** device's backend takes no kernels in that language), TD_ERR_UNAVAILABLE,
** TD_ERR_MISUSE (NULL source or a bad entry name). Compiled code is cached by
** a hash of (source, options, architecture), in memory and on disk. A line
** `#include <trident.glsl>` (GLSL) or `#include <trident.cuh>` (CUDA) is
** replaced by that header of include/trident/kernel/ (compiler messages keep
** the source's line numbers). Thread-safe. */
TD_API td_status td_kernel_compile(td_device dev, int lang, const char *source, const char *entry,
                                   const td_kernel_options *opts, td_user_kernel **out, char *log, size_t log_size);

/* METHOD. Launch k over grid[3] workgroups (blocks) of block[3] threads with
** shared_bytes of dynamic shared memory, tensors[0..n) bound in order and
** push_size bytes of push data. block NULL (or {0,0,0}) keeps a GLSL shader's
** local size; CUDA needs it. GLSL takes no dynamic shared memory.
** Returns TD_OK, TD_ERR_MISUSE (a NULL tensor, a tensor count that differs
** from the kernel's bindings, too much push data, a misaligned tensor, a
** block larger than the device allows), TD_ERR_DEVICE (a tensor on another
** device), TD_ERR_STATE (a released tensor). Does not wait for the kernel.
** The kernel may write any of tensors: a parameter among them loses its
** autocast shadow (include/trident/amp.h). */
TD_API td_status td_kernel_launch(td_user_kernel *k, const uint32_t grid[3], const uint32_t block[3],
                                  size_t shared_bytes, int n, td_tensor *const *tensors, const void *push,
                                  size_t push_size);

/* METHOD. Whether k can be launched with block: TD_OK, or TD_ERR_MISUSE
** naming both sizes when the kernel fixes another one (a GLSL shader with a
** literal layout(local_size_x = 64) launched with a block of 256; a CUDA
** kernel whose __launch_bounds__ or register use allow fewer threads).
** td_kernel_launch makes the same check; a NULL or {0,0,0} block is always
** valid for GLSL (the shader's own size). */
TD_API td_status td_kernel_check_block(const td_user_kernel *k, const uint32_t block[3]);

/* DESTRUCTOR. Free k (waits for its queued launches). NULL is a no-op. */
TD_API void td_kernel_free(td_user_kernel *k);

/* ---- custom ops: one definition, a kernel per backend, called like an op ----
**
** A custom op takes n_in tensors and up to 8 float parameters and makes n_out
** tensors. Its definition gives a shape function and, per backend, a kernel:
** GLSL source for Vulkan, CUDA C for CUDA, a C function for the CPU. A call
** picks the kernel of the inputs' device, makes the inputs contiguous in the
** kernel's compute dtype (the inputs' promoted float dtype when the kernel
** lists it in `dtypes`, else float32; outputs are cast back), allocates the
** outputs and launches, asynchronously like any op. With a backward the call
** records one node on the autograd tape (td_function_apply), so it also works
** inside td_checkpoint regions and CUDA/Vulkan capture.
**
** Kernel interface (GLSL and CUDA; the sources' `#include <trident.glsl>` /
** `#include <trident.cuh>` brings in include/trident/kernel/):
**   bindings / pointer parameters: the inputs in order, then the outputs
**   push constants / last parameter: td_custom_args (`td` in GLSL, a
**     `td_args` parameter in CUDA)
**   defines: TD_BLOCK (the block size), scalar_t (float or double), TD_F64
**     when the compute dtype is float64, plus the impl's own
**   grid: TD_GRID_ELEMENTS launches ceil(n / block) blocks, TD_GRID_ROWS one
**     block per row of input 0 (rows = numel / last dim)
** Compiled kernels are kept per (op, device, dtype) by the op and cached by
** the backend per (source, options, device architecture), on disk too. */

#define TD_CUSTOM_MAX_PARAMS 8

/* The push data of a custom op's kernel (48 bytes; mirrored in trident.glsl and trident.cuh). */
typedef struct td_custom_args {
    uint32_t n;        /* elements of output 0 */
    uint32_t rows;     /* input 0 as [rows, cols] */
    uint32_t cols;     /* last dim of input 0 (1 for a scalar) */
    uint32_t n_params; /* valid entries of p */
    float p[TD_CUSTOM_MAX_PARAMS];
} td_custom_args;

typedef struct td_custom_op td_custom_op; /* opaque */

/* What a shape function, CPU kernel or backward sees of one call. */
typedef struct td_custom_call {
    const td_custom_op *op;
    void *user;                /* the definition's user pointer */
    td_device device;          /* where the inputs are */
    td_dtype dtype;            /* the compute dtype (kernels); the inputs' promoted dtype (shape, backward) */
    int n_in, n_out;           /* tensors in and out */
    td_tensor *const *inputs;  /* the call's inputs (shape function, backward) or the kernel's (contiguous) */
    td_tensor *const *outputs; /* NULL in the shape function */
    td_custom_args args;       /* the launch's push data, with the call's parameters */
    const void *internal;      /* private to Trident */
} td_custom_call;

/* One output's shape and dtype, written by a shape function. */
typedef struct td_custom_meta {
    td_dtype dtype;
    int ndim;
    int64_t shape[TD_MAX_DIMS];
} td_custom_meta;

/* Shape function: fill out[0..n_out) from c's inputs (no outputs yet).
** Return TD_OK, or an error status; its message (set with td_error_set of
** backend.h, else one naming the status) is returned by the call prefixed by
** the op's name. NULL in the definition: every output has input
** 0's shape and dtype. */
typedef td_status (*td_custom_shape_fn)(const td_custom_call *c, td_custom_meta *out);
/* CPU kernel: in[i] / out[j] point at contiguous host data of c->dtype. It may
** run loops through td_parallel_for (the CPU backend's threads). */
typedef td_status (*td_custom_cpu_fn)(const td_custom_call *c, const void *const *in, void *const *out);
/* Backward: given the gradients of the outputs (one per output, zeros for an
** output that got none) write grad_inputs[i] (a new tensor of input i's shape,
** made with ops or custom ops) for each input where td_custom_needs_grad says
** so, NULL elsewhere. c->inputs are the call's inputs and c->outputs its
** outputs. A gradient of another shape fails the backward with TD_ERR_SHAPE.
** Ownership: the backward runs inside a scope (td_scope_begin) that the
** autograd engine opens around it and ends once it has taken the gradients,
** so every tensor the backward makes, temporaries and grad_inputs alike,
** belongs to that scope: do not td_release or td_keep them. c->inputs,
** c->outputs and grad_outputs are borrowed.
** Naming (the convention `trident kernel` and examples/custom_ops follow): a
** C kernel file's entry function is named after the file's stem (bias_gelu.c:
** bias_gelu) and its backward kernel, in the same file, `<stem>_backward`
** (bias_gelu_backward); a CUDA file's the same; GLSL's entry is main, with the
** backward in its own file. */
typedef td_status (*td_custom_backward_fn)(const td_custom_call *c, td_tensor *const *grad_outputs,
                                           td_tensor **grad_inputs);

enum { TD_GRID_ELEMENTS = 0, TD_GRID_ROWS = 1 };

/* One backend's implementation. A GPU one has source (entry names its
** function: NULL is "main" for GLSL and required for CUDA); the CPU one has
** cpu. dtypes is a mask of (1u << td_dtype) the kernel computes in (0:
** float32 only). */
typedef struct td_custom_impl {
    const char *source;
    const char *entry;
    td_custom_cpu_fn cpu;
    uint32_t dtypes;
    int grid;       /* TD_GRID_* */
    uint32_t block; /* threads per block, TD_BLOCK (0: 256); a multiple of 32 for TD_GRID_ROWS kernels that shuffle */
    const char *const *defines; /* n_defines "NAME" or "NAME=VALUE" */
    int n_defines;
} td_custom_impl;

typedef struct td_custom_op_def {
    const char *name; /* [A-Za-z0-9_.] , at most 47 characters */
    int n_in;         /* 1..8 */
    int n_out;        /* 1..4 */
    td_custom_shape_fn shape;
    td_custom_impl cpu, cuda, vulkan; /* a zeroed impl: none on that backend */
    td_custom_backward_fn backward;   /* NULL: the op is not differentiable (its outputs never require grad) */
    void *user;
} td_custom_op_def;

/* CONSTRUCTOR. Register def as a custom op; the strings it points at must
** outlive the op. OUT *out: the op (NULL on failure), freed with
** td_custom_op_free. Returns TD_OK, TD_ERR_MISUSE (a bad name or count, an
** impl with neither source nor cpu function where one is needed, a GPU impl
** with a cpu function or a CPU impl with source), TD_ERR_STATE (the name is
** taken). Nothing is compiled until the first call on a device.
** Thread-safe. */
TD_API td_status td_custom_op_register(const td_custom_op_def *def, td_custom_op **out);

/* DESTRUCTOR. Unregister op and free its kernels (waits for their launches).
** Tensors it made stay valid, but their graph nodes must be gone (a backward
** after the free is undefined). NULL is a no-op. */
TD_API void td_custom_op_free(td_custom_op *op);

/* CONSTRUCTOR (of outputs[0..n_out)). Run op on inputs (all on one device)
** with params[0..n_params) (n_params <= 8). Returns TD_OK, or: TD_ERR_MISUSE
** (counts, a NULL input, a binding count the kernel does not have, a GLSL
** entry point missing from the source), TD_ERR_UNSUPPORTED ("bias_gelu: no
** implementation for vulkan:0 (it has cpu)"), TD_ERR_COMPILE (the compiler's
** first error with its line; a CUDA entry point missing), TD_ERR_DEVICE
** (inputs on different devices), or the shape function's error; every message
** starts with the op's name. On failure outputs are NULL. Thread-safe (the
** first call per device compiles). */
TD_API td_status td_custom_op_call(const td_custom_op *op, int n_in, td_tensor *const *inputs, int n_params,
                                   const float *params, int n_out, td_tensor **outputs);

/* CONSTRUCTOR. td_custom_op_call for an op with one output: the output, or
** NULL (td_last_error says why). A NULL input propagates. */
TD_API td_tensor *td_custom_op_apply(const td_custom_op *op, int n_in, td_tensor *const *inputs, int n_params,
                                     const float *params);

/* GETTER (backward). Whether the call's input i needs a gradient. */
TD_API bool td_custom_needs_grad(const td_custom_call *c, int i);

/* GETTERS of the registry: the number of custom ops, the i-th (NULL out of
** range; borrowed), its name, whether it has a kernel for device type type
** (td_device_type) and a backward. */
TD_API int td_custom_op_count(void);
TD_API const td_custom_op *td_custom_op_at(int i);
TD_API const td_custom_op *td_custom_op_find(const char *name);
TD_API const char *td_custom_op_name(const td_custom_op *op);
TD_API bool td_custom_op_has_impl(const td_custom_op *op, int type);
TD_API bool td_custom_op_has_backward(const td_custom_op *op);

/* METHOD. Run fn(user, begin, end) over [0, n) cut into contiguous pieces on
** the CPU backend's threads (OpenMP), cost_per_item (in rough flops) deciding
** how many: small loops stay on the calling thread. Returns after every piece
** ran. fn must be thread-safe for disjoint ranges. */
TD_API void td_parallel_for(int64_t n, int64_t cost_per_item, void (*fn)(void *user, int64_t begin, int64_t end),
                            void *user);

#ifdef __cplusplus
}
#endif
#endif /* TRIDENT_KERNEL_H */
