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
} td_kernel_options;

/* CONSTRUCTOR. Compile source (language TD_KERNEL_*) with entry function entry
** (NULL: "main") and options opts (NULL: none) for device dev. CUDA goes
** through NVRTC for the device's architecture.
**   OUT *out: the kernel, to be freed with td_kernel_free; NULL on failure.
**   OUT log (optional, log_size bytes): the compiler's messages; on
**       TD_ERR_COMPILE the errors, always NUL-terminated.
** Returns TD_OK, TD_ERR_COMPILE (log says why), TD_ERR_UNSUPPORTED (the
** device's backend takes no kernels in that language), TD_ERR_UNAVAILABLE,
** TD_ERR_MISUSE (NULL source or a bad entry name). Compiled code is cached by
** a hash of (source, options, architecture), in memory and on disk.
** Thread-safe. */
TD_API td_status td_kernel_compile(td_device dev, int lang, const char *source, const char *entry,
                                   const td_kernel_options *opts, td_user_kernel **out, char *log, size_t log_size);

/* METHOD. Launch k over grid[3] workgroups (blocks) of block[3] threads with
** shared_bytes of dynamic shared memory, tensors[0..n) bound in order and
** push_size bytes of push data. block NULL (or {0,0,0}) keeps a GLSL shader's
** local size; CUDA needs it. GLSL takes no dynamic shared memory.
** Returns TD_OK, TD_ERR_MISUSE (a NULL tensor, a tensor count that differs
** from the kernel's bindings, too much push data, a misaligned tensor, a
** block larger than the device allows), TD_ERR_DEVICE (a tensor on another
** device), TD_ERR_STATE (a released tensor). Does not wait for the kernel. */
TD_API td_status td_kernel_launch(td_user_kernel *k, const uint32_t grid[3], const uint32_t block[3],
                                  size_t shared_bytes, int n, td_tensor *const *tensors, const void *push,
                                  size_t push_size);

/* DESTRUCTOR. Free k (waits for its queued launches). NULL is a no-op. */
TD_API void td_kernel_free(td_user_kernel *k);

#ifdef __cplusplus
}
#endif
#endif /* TRIDENT_KERNEL_H */
