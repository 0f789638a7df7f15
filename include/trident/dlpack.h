/*
** DLPack: share tensors with PyTorch, NumPy, CuPy, JAX and others without a
** copy (https://dmlc.github.io/dlpack/latest/).
**
** Both kinds of DLPack tensor are read and written: DLPack 1.x's
** DLManagedTensorVersioned (a version, and the READ_ONLY and IS_COPIED
** flags) and the legacy DLManagedTensor of DLPack 0.x.
**
** Supported: devices kDLCPU, kDLCUDA and kDLCUDAHost (pinned host memory,
** which Trident imports as a CPU tensor); dtypes f32, f64, f16, bf16, i32, i64,
** u8 and bool, one lane; up to 8 dims of any non-negative strides (elements,
** 0 for broadcast; NULL strides mean row-major), a non-zero byte_offset, 0-d
** and size-0 tensors.
**
** Lifetimes. An exported DLPack tensor keeps Trident's storage alive until the
** consumer calls its deleter (from any thread). An imported one calls the
** producer's deleter once, when the last Trident tensor over its memory (views
** included) is released, after the device work queued on it.
**
** Streams (CUDA). Exporting with a consumer stream records an event on
** Trident's stream and makes the consumer's stream wait for it: no host wait.
** Importing does not synchronize: the producer orders its work before
** Trident's stream (in Python, __dlpack__(stream=td_device_native_stream)).
**
** Threads: every function here is thread-safe.
*/
#ifndef TRIDENT_DLPACK_H
#define TRIDENT_DLPACK_H

#include <stdint.h>

#include "tensor.h"

/* ---- The DLPack ABI ----
** Written from the DLPack 1.1 specification (dlpack/include/dlpack/dlpack.h,
** v1.1): these structs and constants are the ABI every DLPack library shares.
** The include guard is the reference header's, so either one may come first;
** an older (0.x) reference header included first is refused below. */
#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_

#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 1

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;

typedef enum {
    kDLCPU = 1,
    kDLCUDA = 2,
    kDLCUDAHost = 3,
    kDLOpenCL = 4,
    kDLVulkan = 7,
    kDLMetal = 8,
    kDLVPI = 9,
    kDLROCM = 10,
    kDLROCMHost = 11,
    kDLExtDev = 12,
    kDLCUDAManaged = 13,
    kDLOneAPI = 14,
    kDLWebGPU = 15,
    kDLHexagon = 16,
    kDLMAIA = 17,
} DLDeviceType;

typedef struct {
    DLDeviceType device_type;
    int32_t device_id;
} DLDevice;

typedef enum {
    kDLInt = 0U,
    kDLUInt = 1U,
    kDLFloat = 2U,
    kDLOpaqueHandle = 3U,
    kDLBfloat = 4U,
    kDLComplex = 5U,
    kDLBool = 6U,
} DLDataTypeCode;

typedef struct {
    uint8_t code; /* DLDataTypeCode */
    uint8_t bits;
    uint16_t lanes;
} DLDataType;

typedef struct {
    void *data; /* device pointer; the first element is at data + byte_offset */
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides; /* elements; NULL: row-major */
    uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

#define DLPACK_FLAG_BITMASK_READ_ONLY              (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED              (1UL << 1UL)
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)

typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags; /* DLPACK_FLAG_BITMASK_* */
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

#ifdef __cplusplus
}
#endif
#endif /* DLPACK_DLPACK_H_ */

#ifndef DLPACK_MAJOR_VERSION
#error "trident/dlpack.h needs DLPack >= 1.0; an older dlpack/dlpack.h was included before it"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Flags of td_to_dlpack and td_from_dlpack. */
enum {
    /* export: mark the tensor DLPACK_FLAG_BITMASK_READ_ONLY (versioned only).
    ** import: accept a READ_ONLY tensor; the caller promises not to write it
    ** (Trident has no read-only tensors, so it is refused otherwise). */
    TD_DLPACK_READ_ONLY = 1u << 0,
    /* export: share a copy (on the CPU when the tensor's memory cannot be
    ** shared, e.g. Vulkan), flagged DLPACK_FLAG_BITMASK_IS_COPIED. */
    TD_DLPACK_COPY = 1u << 1,
};

/* CONSTRUCTOR. Export t as a DLPack 1.x tensor sharing its memory.
**   IN flags: TD_DLPACK_* (READ_ONLY, COPY).
**   IN stream: the consumer's stream for a CUDA tensor (a cudaStream_t; 1 and 2
**       are the legacy and per-thread default streams, as in __dlpack__), which
**       is made to wait for the work Trident queued on t, without a host wait;
**       NULL or (void *)-1: no ordering. Ignored for CPU tensors.
**   OUT *out: the DLPack tensor; the consumer calls (*out)->deleter(*out) once.
**       NULL on failure.
** The export is a view of t's data only (no autograd); t may be released at
** once. Returns TD_OK, TD_ERR_MISUSE (NULL, released), TD_ERR_UNSUPPORTED (a
** device whose memory has no address to share: Vulkan without
** TD_DLPACK_COPY), TD_ERR_OOM, TD_ERR_DEVICE. */
TD_API td_status td_to_dlpack(td_tensor *t, uint32_t flags, void *stream, DLManagedTensorVersioned **out);
/* CONSTRUCTOR. As td_to_dlpack, as a legacy DLManagedTensor (no flags: a
** READ_ONLY export is refused with TD_ERR_MISUSE; COPY is kept silently). */
TD_API td_status td_to_dlpack_legacy(td_tensor *t, uint32_t flags, void *stream, DLManagedTensor **out);

/* CONSTRUCTOR. A tensor over a DLPack 1.x tensor's memory (zero copy).
**   IN m: the producer's tensor. On success Trident owns it and calls
**       m->deleter(m) once, when the last tensor over the memory is released.
**       On failure the caller still owns it (the deleter has not run).
**   IN flags: TD_DLPACK_READ_ONLY to accept a read-only tensor.
** Fails with TD_ERR_MISUSE (NULL m, bad ndim or shape, NULL data with
** elements, a negative stride: Trident tensors take strides >= 0, a read-only
** tensor without TD_DLPACK_READ_ONLY), TD_ERR_UNSUPPORTED (a major version
** other than 1, a device other than kDLCPU/kDLCUDA/kDLCUDAHost, a dtype other
** than the eight), TD_ERR_UNAVAILABLE (no such CUDA device here), TD_ERR_OOM.
** The result has no gradient; td_set_requires_grad makes it a leaf. */
TD_API td_tensor *td_from_dlpack(DLManagedTensorVersioned *m, uint32_t flags);
/* CONSTRUCTOR. As td_from_dlpack, for a legacy DLManagedTensor. */
TD_API td_tensor *td_from_dlpack_legacy(DLManagedTensor *m);

#ifdef __cplusplus
}
#endif
#endif /* TRIDENT_DLPACK_H */
