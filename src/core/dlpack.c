/*
** DLPack export and import (include/trident/dlpack.h).
**
** Export: an export_ctx holds a header of its own over the tensor's storage
** (a view with no autograd, outside every scope) and the shape and strides the
** DLTensor points at; the consumer's deleter releases that header and frees
** the context. Import: td_from_foreign wraps the producer's memory, with an
** import_ctx whose deleter calls the producer's once the last tensor over it
** goes. The import_ctx is armed only once the tensor exists, so a failed
** import leaves the producer's tensor to the caller, its deleter not run.
*/
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "trident/autograd.h"
#include "trident/device.h"
#include "trident/dlpack.h"

/* ---- dtypes and devices ---- */

static const struct {
    td_dtype dt;
    DLDataType dl;
} dtype_map[] = {
    {TD_F32, {kDLFloat, 32, 1}},   {TD_F64, {kDLFloat, 64, 1}}, {TD_F16, {kDLFloat, 16, 1}},
    {TD_BF16, {kDLBfloat, 16, 1}}, {TD_I32, {kDLInt, 32, 1}},   {TD_I64, {kDLInt, 64, 1}},
    {TD_U8, {kDLUInt, 8, 1}},      {TD_BOOL, {kDLBool, 8, 1}},
};

static DLDataType dl_dtype(td_dtype dt) {
    for (size_t i = 0; i < sizeof dtype_map / sizeof dtype_map[0]; i++)
        if (dtype_map[i].dt == dt) return dtype_map[i].dl;
    return (DLDataType){0, 0, 0};
}

static td_status td_dtype_of(DLDataType dl, const char *fn, td_dtype *out) {
    for (size_t i = 0; i < sizeof dtype_map / sizeof dtype_map[0]; i++)
        if (dtype_map[i].dl.code == dl.code && dtype_map[i].dl.bits == dl.bits && dl.lanes == 1) {
            *out = dtype_map[i].dt;
            return TD_OK;
        }
    static const char *codes[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
    return TD_ERR(TD_ERR_UNSUPPORTED,
                  "%s: dtype %s%u (code %u, bits %u, lanes %u) is not supported: Trident takes float32, "
                  "float64, float16, bfloat16, int32, int64, uint8 and bool, one lane",
                  fn, dl.code < 7 ? codes[dl.code] : "code", (unsigned)dl.bits, (unsigned)dl.code, (unsigned)dl.bits,
                  (unsigned)dl.lanes);
}

static const char *dl_device_name(int type) {
    switch (type) {
    case kDLCPU: return "kDLCPU";
    case kDLCUDA: return "kDLCUDA";
    case kDLCUDAHost: return "kDLCUDAHost";
    case kDLOpenCL: return "kDLOpenCL";
    case kDLVulkan: return "kDLVulkan";
    case kDLMetal: return "kDLMetal";
    case kDLROCM: return "kDLROCM";
    case kDLROCMHost: return "kDLROCMHost";
    case kDLCUDAManaged: return "kDLCUDAManaged";
    case kDLOneAPI: return "kDLOneAPI";
    default: return "an unknown type";
    }
}

/* ---- export ---- */

typedef struct export_ctx {
    DLManagedTensorVersioned v;
    DLManagedTensor legacy;
    int64_t shape[TD_MAX_DIMS], strides[TD_MAX_DIMS];
    td_tensor *view; /* keeps the storage alive */
} export_ctx;

static void export_release(export_ctx *c) {
    td_release(c->view);
    free(c);
}
static void export_delete_versioned(DLManagedTensorVersioned *m) {
    if (m) export_release(m->manager_ctx);
}
static void export_delete_legacy(DLManagedTensor *m) {
    if (m) export_release(m->manager_ctx);
}

/* The consumer's stream waits for the work queued so far on t's device. */
static td_status order_stream(td_device dev, void *stream, const char *fn) {
    if (!stream || stream == (void *)(intptr_t)-1 || dev.type != TD_DEVICE_CUDA) return TD_OK;
    td_device_event *ev = NULL;
    td_status st = td_event_new(dev, &ev);
    if (st == TD_OK) st = td_event_record(ev);
    if (st == TD_OK) st = td_event_wait_native(ev, stream);
    td_event_free(ev); /* CUDA keeps the event until the wait is done */
    return st == TD_OK ? TD_OK : td_error_prefix("%s: ordering the consumer's stream", fn);
}

static td_status export_new(td_tensor *t, uint32_t flags, void *stream, const char *fn, export_ctx **out) {
    *out = NULL;
    if (!td__check_arg(t, fn, "t")) return td_last_status() ? td_last_status() : TD_ERR_MISUSE;
    if (flags & ~(uint32_t)(TD_DLPACK_READ_ONLY | TD_DLPACK_COPY))
        return TD_ERR(TD_ERR_MISUSE, "%s: unknown flags 0x%x", fn, flags);
    char d[32];
    td_device dev = t->storage->device;
    bool shareable = dev.type == TD_DEVICE_CPU || dev.type == TD_DEVICE_CUDA;
    if (!shareable && !(flags & TD_DLPACK_COPY))
        return TD_ERR(TD_ERR_UNSUPPORTED,
                      "%s: %s memory has no address another library can use (PyTorch refuses kDLVulkan, and the "
                      "Vulkan-to-CUDA export through VK_KHR_external_memory_fd is not implemented); pass "
                      "TD_DLPACK_COPY for a host copy",
                      fn, td_device_str(dev, d, sizeof d));
    export_ctx *c = calloc(1, sizeof *c);
    if (!c) return TD_ERR(TD_ERR_OOM, "%s: out of host memory", fn);
    td_no_grad_begin(); /* the export shares data, never the graph */
    if (flags & TD_DLPACK_COPY)
        c->view = shareable ? td_clone(t) : td_to(t, TD_CPU); /* a fresh copy, in the current scope */
    else
        c->view = td__make_view(t, t->ndim, t->shape, t->strides, t->offset);
    td_no_grad_end();
    if (!(flags & (TD_DLPACK_COPY | TD_DLPACK_READ_ONLY))) { /* the consumer may write it: no autocast shadow */
        t->storage->flags |= TD__STORAGE_SHARED;
        td__shadow_drop(t);
    }
    if (!c->view) {
        free(c);
        return td_error_prefix("%s", fn);
    }
    td_keep(c->view);
    td_tensor *v = c->view;
    dev = v->storage->device;
    DLTensor *dl = &c->v.dl_tensor;
    dl->ndim = v->ndim;
    dl->dtype = dl_dtype(v->dtype);
    dl->shape = c->shape;
    dl->strides = c->strides;
    for (int i = 0; i < v->ndim; i++) {
        c->shape[i] = v->shape[i];
        c->strides[i] = v->strides[i];
    }
    dl->device = (DLDevice){dev.type == TD_DEVICE_CUDA ? kDLCUDA : kDLCPU, dev.index};
    if (td_numel(v) > 0 || v->storage->nbytes > 0) {
        uint64_t addr = td_tensor_device_address(v);
        if (!addr) {
            export_release(c);
            return td_error_prefix("%s", fn);
        }
        dl->data = (void *)(uintptr_t)addr; /* element 0, byte_offset 0: as PyTorch and CuPy export */
    }
    td_status st = order_stream(dev, stream, fn);
    if (st != TD_OK) {
        export_release(c);
        return st;
    }
    c->v.version = (DLPackVersion){DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    c->v.manager_ctx = c;
    c->v.deleter = export_delete_versioned;
    c->v.flags = (flags & TD_DLPACK_READ_ONLY ? DLPACK_FLAG_BITMASK_READ_ONLY : 0) |
                 (flags & TD_DLPACK_COPY ? DLPACK_FLAG_BITMASK_IS_COPIED : 0);
    c->legacy.dl_tensor = *dl;
    c->legacy.manager_ctx = c;
    c->legacy.deleter = export_delete_legacy;
    *out = c;
    return TD_OK;
}

td_status td_to_dlpack(td_tensor *t, uint32_t flags, void *stream, DLManagedTensorVersioned **out) {
    if (!out) return TD_ERR(TD_ERR_MISUSE, "to_dlpack: out is NULL");
    export_ctx *c;
    td_status st = export_new(t, flags, stream, "to_dlpack", &c);
    *out = st == TD_OK ? &c->v : NULL;
    return st;
}

td_status td_to_dlpack_legacy(td_tensor *t, uint32_t flags, void *stream, DLManagedTensor **out) {
    if (!out) return TD_ERR(TD_ERR_MISUSE, "to_dlpack_legacy: out is NULL");
    *out = NULL;
    if (flags & TD_DLPACK_READ_ONLY)
        return TD_ERR(TD_ERR_MISUSE, "to_dlpack_legacy: a legacy DLManagedTensor cannot be marked read-only");
    export_ctx *c;
    td_status st = export_new(t, flags, stream, "to_dlpack_legacy", &c);
    *out = st == TD_OK ? &c->legacy : NULL;
    return st;
}

/* ---- import ---- */

#define IMPORT_MAX_BYTES ((uint64_t)1 << 48) /* td_empty's limit (tensor.c) */

typedef struct import_ctx {
    DLManagedTensorVersioned *v; /* one of the two */
    DLManagedTensor *legacy;
    bool armed; /* the tensor exists: its last release runs the producer's deleter */
} import_ctx;

static void import_delete(void *p) {
    import_ctx *c = p;
    if (!c->armed) return; /* the import failed: the caller still owns the producer's tensor, and frees c */
    if (c->v && c->v->deleter) c->v->deleter(c->v);
    if (c->legacy && c->legacy->deleter) c->legacy->deleter(c->legacy);
    free(c);
}

static td_tensor *import(const DLTensor *dl, import_ctx *c, const char *fn) {
    if (dl->ndim < 0 || dl->ndim > TD_MAX_DIMS)
        TD_FAIL_NULL(TD_ERR_MISUSE, "%s: ndim %d is outside [0, %d]", fn, (int)dl->ndim, TD_MAX_DIMS);
    if (dl->ndim > 0 && !dl->shape) TD_FAIL_NULL(TD_ERR_MISUSE, "%s: shape is NULL with ndim %d", fn, (int)dl->ndim);
    td_dtype dt = TD_F32;
    if (td_dtype_of(dl->dtype, fn, &dt) != TD_OK) return NULL;
    td_device dev;
    switch ((int)dl->device.device_type) {
    case kDLCPU:
    case kDLCUDAHost: dev = TD_CPU; break;
    case kDLCUDA: dev = TD_CUDA(dl->device.device_id); break;
    default:
        TD_FAIL_NULL(TD_ERR_UNSUPPORTED,
                     "%s: device type %d (%s) is not supported: Trident takes kDLCPU, kDLCUDA and "
                     "kDLCUDAHost",
                     fn, (int)dl->device.device_type, dl_device_name(dl->device.device_type));
    }
    /* the shape before anything is computed from it: sizes >= 0, and their product (a 0 taken as 1, since a
    ** size-0 tensor's strides still span its other dims) within td_empty's 2^48 bytes */
    uint64_t extent = td_dtype_size(dt);
    bool empty = false;
    for (int i = 0; i < dl->ndim; i++) {
        if (dl->shape[i] < 0) TD_FAIL_NULL(TD_ERR_MISUSE, "%s: dim %d has size %lld", fn, i, (long long)dl->shape[i]);
        empty |= dl->shape[i] == 0;
        if (__builtin_mul_overflow(extent, dl->shape[i] ? (uint64_t)dl->shape[i] : 1, &extent) ||
            extent > IMPORT_MAX_BYTES)
            TD_FAIL_NULL(TD_ERR_MISUSE, "%s: the shape's sizes (a 0 taken as 1) multiply past 2^48 bytes at dim %d", fn,
                         i);
    }
    /* nothing to wrap: a fresh empty tensor (a valid buffer, whatever data is), and the producer's tensor goes */
    if (empty) {
        td_tensor *t = td_empty(dl->ndim, dl->shape, dt, dev);
        if (!t) return (void)td_error_prefix("%s", fn), NULL;
        c->armed = true;
        import_delete(c);
        return t;
    }
    uint64_t offset_addr = (uint64_t)(uintptr_t)dl->data + dl->byte_offset;
    if (dl->data && offset_addr % td_dtype_size(dt))
        TD_FAIL_NULL(TD_ERR_MISUSE,
                     "%s: data + byte_offset (%llu) is not a multiple of the element size %zu: the elements would be "
                     "misaligned (copy it first)",
                     fn, (unsigned long long)dl->byte_offset, td_dtype_size(dt));
    for (int i = 0; dl->strides && i < dl->ndim; i++)
        if (dl->strides[i] < 0 && dl->shape[i] > 1)
            TD_FAIL_NULL(TD_ERR_MISUSE, "%s: dim %d has stride %lld: Trident tensors take strides >= 0 (copy it first)",
                         fn, i, (long long)dl->strides[i]);
    int64_t strides[TD_MAX_DIMS];
    for (int i = 0; dl->strides && i < dl->ndim; i++)
        strides[i] = dl->shape[i] > 1 ? dl->strides[i] : 0; /* any stride of a dim of size 1 */
    uint64_t addr = (uint64_t)(uintptr_t)dl->data + (dl->data ? dl->byte_offset : 0);
    td_tensor *t = td_from_foreign(dev, addr, dl->ndim, dl->shape, dl->strides ? strides : NULL, dt, import_delete, c);
    if (!t) return (void)td_error_prefix("%s", fn), NULL;
    c->armed = true;
    return t;
}

/* Imports dl, the tensor of the managed v or legacy (one of them), under a fresh context (freed if it fails). */
static td_tensor *import_managed(const DLTensor *dl, DLManagedTensorVersioned *v, DLManagedTensor *legacy,
                                 const char *fn) {
    import_ctx *c = calloc(1, sizeof *c);
    if (!c) TD_FAIL_NULL(TD_ERR_OOM, "%s: out of host memory", fn);
    c->v = v;
    c->legacy = legacy;
    td_tensor *t = import(dl, c, fn);
    if (!t) free(c);
    return t;
}

td_tensor *td_from_dlpack(DLManagedTensorVersioned *m, uint32_t flags) {
    if (!m) TD_FAIL_NULL(TD_ERR_MISUSE, "from_dlpack: the DLPack tensor is NULL");
    if (flags & ~(uint32_t)TD_DLPACK_READ_ONLY) TD_FAIL_NULL(TD_ERR_MISUSE, "from_dlpack: unknown flags 0x%x", flags);
    if (m->version.major != DLPACK_MAJOR_VERSION)
        TD_FAIL_NULL(TD_ERR_UNSUPPORTED, "from_dlpack: DLPack version %u.%u is not supported: Trident reads %d.x",
                     m->version.major, m->version.minor, DLPACK_MAJOR_VERSION);
    if ((m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) && !(flags & TD_DLPACK_READ_ONLY))
        TD_FAIL_NULL(TD_ERR_MISUSE, "from_dlpack: the tensor is read-only and Trident cannot keep it so; pass "
                                    "TD_DLPACK_READ_ONLY to promise not to write it");
    return import_managed(&m->dl_tensor, m, NULL, "from_dlpack");
}

td_tensor *td_from_dlpack_legacy(DLManagedTensor *m) {
    if (!m) TD_FAIL_NULL(TD_ERR_MISUSE, "from_dlpack_legacy: the DLPack tensor is NULL");
    return import_managed(&m->dl_tensor, NULL, m, "from_dlpack_legacy");
}
