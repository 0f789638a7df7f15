/*
** Devices of the CUDA backend: discovery (CUDA_VISIBLE_DEVICES is the
** driver's; TRIDENT_CUDA_DEVICE picks among the visible ones), lazy creation
** of each device's stream, cuBLAS/cuBLASLt handles and workspace, device
** properties, synchronization, and the mapping of CUDA and cuBLAS codes to
** td_status.
*/
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu.h"
#include "cu_runtime.h"

static cu_dev devices[CU_MAX_DEVICES];
static int n_devices;
static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;

td_status cu_status(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return TD_OK;
    td_status st = e == cudaErrorMemoryAllocation ? TD_ERR_OOM : TD_ERR_DEVICE;
    return td_error_set(st, "cuda: %s: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
}

td_status cu_blas_status(cublasStatus_t s, const char *what) {
    if (s == CUBLAS_STATUS_SUCCESS) return TD_OK;
    td_status st = s == CUBLAS_STATUS_ALLOC_FAILED                                        ? TD_ERR_OOM
                   : s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_ARCH_MISMATCH ? TD_ERR_UNSUPPORTED
                   : s == CUBLAS_STATUS_INVALID_VALUE                                     ? TD_ERR_MISUSE
                                                                                          : TD_ERR_DEVICE;
    return td_error_set(st, "cublas: %s: %s (%s)", what, cublasGetStatusName(s), cublasGetStatusString(s));
}

/* TRIDENT_CUDA_DEVICE: a comma-separated list of visible ordinals ("1" or "0,2"); unset: all. */
static int select_devices(int visible, int *ordinals, char *why, size_t why_size) {
    const char *sel = getenv("TRIDENT_CUDA_DEVICE");
    if (!sel || !*sel) {
        for (int i = 0; i < visible && i < CU_MAX_DEVICES; i++) ordinals[i] = i;
        return visible < CU_MAX_DEVICES ? visible : CU_MAX_DEVICES;
    }
    int n = 0;
    for (const char *p = sel; *p && n < CU_MAX_DEVICES;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v >= visible) {
            snprintf(why, why_size, "TRIDENT_CUDA_DEVICE=%.64s: expected ordinals below %d, comma-separated", sel,
                     visible);
            return 0;
        }
        ordinals[n++] = (int)v;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') {
            snprintf(why, why_size, "TRIDENT_CUDA_DEVICE=%.64s: expected ordinals below %d, comma-separated", sel,
                     visible);
            return 0;
        }
    }
    return n;
}

td_status cu_init(char *why, size_t why_size) {
    int visible = 0;
    void *libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!libcuda) {
        snprintf(why, why_size, "no NVIDIA driver: libcuda.so.1 not found (%s)", dlerror());
        return TD_ERR_UNAVAILABLE;
    }
    dlclose(libcuda);
    cudaError_t e = cudaGetDeviceCount(&visible);
    if (e != cudaSuccess) {
        snprintf(why, why_size, "no usable CUDA driver or device: %s (%s)", cudaGetErrorName(e), cudaGetErrorString(e));
        return TD_ERR_UNAVAILABLE;
    }
    int ordinals[CU_MAX_DEVICES];
    n_devices = select_devices(visible, ordinals, why, why_size);
    if (n_devices == 0) {
        if (!why[0]) snprintf(why, why_size, "no CUDA device (CUDA_VISIBLE_DEVICES hides them all?)");
        return TD_ERR_UNAVAILABLE;
    }
    for (int i = 0; i < n_devices; i++) {
        cu_dev *d = &devices[i];
        d->index = i;
        d->ordinal = ordinals[i];
        e = cudaGetDeviceProperties(&d->prop, d->ordinal);
        if (e != cudaSuccess) {
            snprintf(why, why_size, "cudaGetDeviceProperties(%d): %s", d->ordinal, cudaGetErrorString(e));
            return TD_ERR_UNAVAILABLE;
        }
        d->sm_count = d->prop.multiProcessorCount;
        d->cc_major = d->prop.major;
        d->cc_minor = d->prop.minor;
        pthread_mutexattr_t ma;
        pthread_mutexattr_init(&ma);
        pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
        pthread_mutex_init(&d->lock, &ma);
        pthread_mutexattr_destroy(&ma);
    }
    return TD_OK;
}

int cu_device_count(void) { return n_devices; }

/* The stream, library handles and workspace of d, made on first use. */
static td_status create(cu_dev *d) {
    CU_TRY(cudaSetDevice(d->ordinal));
    CU_TRY(cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking));
    td_status st = cu_blas_status(cublasLtCreate(&d->lt), "cublasLtCreate");
    if (st == TD_OK) st = cu_blas_status(cublasCreate(&d->blas), "cublasCreate");
    if (st == TD_OK) st = cu_blas_status(cublasSetStream(d->blas, d->stream), "cublasSetStream");
    /* the workspace cuBLAS(Lt) may use, fixed so that captured graphs never allocate (32 MiB on Hopper) */
    d->lt_workspace_size = (size_t)(d->cc_major >= 9 ? 32 : 8) << 20;
    if (st == TD_OK) st = cu_status(cudaMalloc(&d->lt_workspace, d->lt_workspace_size), "cudaMalloc(workspace)");
    if (st == TD_OK)
        st = cu_blas_status(cublasSetWorkspace(d->blas, d->lt_workspace, d->lt_workspace_size), "cublasSetWorkspace");
    if (st == TD_OK) st = cu_memory_init(d);
    return st;
}

cu_dev *cu_get(int dev) {
    if (dev < 0 || dev >= n_devices) {
        td_error_set(TD_ERR_UNAVAILABLE, "cuda:%d does not exist (%d device%s)", dev, n_devices,
                     n_devices == 1 ? "" : "s");
        return NULL;
    }
    cu_dev *d = &devices[dev];
    if (!d->created) {
        pthread_mutex_lock(&create_lock);
        if (!d->created) {
            td_status st = create(d);
            if (st != TD_OK) {
                d->failed = st;
                snprintf(d->fail_msg, sizeof d->fail_msg, "%s", td_last_error());
            }
            __atomic_store_n(&d->created, true, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&create_lock);
    }
    if (d->failed) {
        td_error_set(d->failed, "cuda:%d (%s) could not be initialized: %s", dev, d->prop.name, d->fail_msg);
        return NULL;
    }
    /* the runtime's current device is per thread; kernels and cuBLAS calls use it */
    int cur = -1;
    if (cudaGetDevice(&cur) != cudaSuccess || cur != d->ordinal) cudaSetDevice(d->ordinal);
    return d;
}

td_status cu_device_info(int dev, td_device_info *out) {
    memset(out, 0, sizeof *out);
    if (dev < 0 || dev >= n_devices)
        return td_error_set(TD_ERR_UNAVAILABLE, "cuda:%d does not exist (%d devices)", dev, n_devices);
    cu_dev *d = &devices[dev];
    const struct cudaDeviceProp *p = &d->prop;
    int drv = 0, rt = 0;
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    snprintf(out->name, sizeof out->name, "%s", p->name);
    snprintf(out->driver, sizeof out->driver, "CUDA driver %d.%d, runtime %d.%d", drv / 1000, drv % 1000 / 10,
             rt / 1000, rt % 1000 / 10);
    size_t free_b = 0, total_b = p->totalGlobalMem;
    int cur = -1;
    if (cudaGetDevice(&cur) == cudaSuccess && cudaSetDevice(d->ordinal) == cudaSuccess) {
        if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) free_b = 0;
        if (cur >= 0) cudaSetDevice(cur);
    }
    out->total_memory = total_b;
    out->free_memory = free_b;
    out->compute_units = d->sm_count;
    out->subgroup_size = p->warpSize;
    out->arch = 10 * d->cc_major + d->cc_minor;
    out->fp16 = d->cc_major >= 6;
    out->bf16 = out->tf32 = d->cc_major >= 8;
    out->int8 = d->cc_major >= 6;
    out->cooperative_matrix = d->cc_major >= 7;
    out->timestamps = true;
    out->unified_memory = false;
    out->emulated = false;
    snprintf(out->features, sizeof out->features,
             "sm_%d%d smem_optin=%zu l2=%d MiB mem_bus=%d bit pci=%04x:%02x:%02x.0 ordinal=%d", d->cc_major,
             d->cc_minor, (size_t)p->sharedMemPerBlockOptin, p->l2CacheSize >> 20, p->memoryBusWidth, p->pciDomainID,
             p->pciBusID, p->pciDeviceID, d->ordinal);
    return TD_OK;
}

void *cu_native_stream(int dev) {
    cu_dev *d = cu_get(dev);
    return d ? (void *)d->stream : NULL;
}

td_status cu_synchronize(int dev) {
    cu_dev *d = cu_get(dev);
    if (!d) return td_last_status();
    if (d->capturing)
        return td_error_set(TD_ERR_STATE, "cuda:%d is capturing a graph: synchronize after td_capture_end", dev);
    return cu_status(cudaStreamSynchronize(d->stream), "synchronize");
}
