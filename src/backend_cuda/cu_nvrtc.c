/*
** User CUDA kernels (include/trident/kernel.h, TD_LANG_CUDA): NVRTC compiles
** the source for the device's architecture (or opts->arch), and the driver API
** loads and launches it. The driver is reached through
** cudaGetDriverEntryPointByVersion, so nothing links libcuda.
**
** Cache: the shared kernel cache (include/trident/backend.h, "Kernel cache")
** keyed by (source, entry, arch, defines): in memory the CACHE_ENTRIES most
** recently used, on disk as cuda-<key>.bin in td_kernel_cache_dir (off with
** TRIDENT_KERNEL_CACHE=0). An entry is the lowered entry name, NUL-padded to a
** multiple of 16 bytes, then the image (cubin or PTX).
** Parameters: one pointer per tensor (its element 0), then the push data as
** the remaining parameters laid out as a C struct; cuFuncGetParamInfo checks
** that the sizes agree before launching.
*/
#include <ctype.h>
#include <cudaTypedefs.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu.h"
#include "cu_runtime.h"

#define PUSH_MAX      4096
#define MAX_VIEWS     64
#define LOWERED_MAX   1024 /* bytes of a lowered entry name with its NUL */
#define CACHE_ENTRIES 256

static struct {
    PFN_cuModuleLoadData_v2000 load;
    PFN_cuModuleUnload_v2000 unload;
    PFN_cuModuleGetFunction_v2000 get_function;
    PFN_cuFuncGetAttribute_v2020 get_attribute;
    PFN_cuFuncSetAttribute_v9000 set_attribute;
    PFN_cuLaunchKernel_v4000 launch;
    PFN_cuGetErrorString_v6000 error_string;
    CUresult (*param_info)(CUfunction, size_t, size_t *, size_t *); /* cuFuncGetParamInfo, CUDA 12.4+ */
    td_status status;
    char why[256];
} drv;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;

static void *entry_point(const char *name, unsigned version) {
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion(name, &fn, version, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return fn;
}

static void drv_load(void) {
    drv.load = (PFN_cuModuleLoadData_v2000)entry_point("cuModuleLoadData", 2000);
    drv.unload = (PFN_cuModuleUnload_v2000)entry_point("cuModuleUnload", 2000);
    drv.get_function = (PFN_cuModuleGetFunction_v2000)entry_point("cuModuleGetFunction", 2000);
    drv.get_attribute = (PFN_cuFuncGetAttribute_v2020)entry_point("cuFuncGetAttribute", 2020);
    drv.set_attribute = (PFN_cuFuncSetAttribute_v9000)entry_point("cuFuncSetAttribute", 9000);
    drv.launch = (PFN_cuLaunchKernel_v4000)entry_point("cuLaunchKernel", 4000);
    drv.error_string = (PFN_cuGetErrorString_v6000)entry_point("cuGetErrorString", 6000);
    drv.param_info = (CUresult(*)(CUfunction, size_t, size_t *, size_t *))entry_point("cuFuncGetParamInfo", 12040);
    if (!drv.load || !drv.unload || !drv.get_function || !drv.get_attribute || !drv.set_attribute || !drv.launch ||
        !drv.error_string) {
        drv.status = TD_ERR_UNAVAILABLE;
        snprintf(drv.why, sizeof drv.why, "the CUDA driver lacks the module entry points (driver too old?)");
    }
}

static td_status drv_status(CUresult r, const char *what) {
    if (r == CUDA_SUCCESS) return TD_OK;
    const char *s = "unknown error";
    drv.error_string(r, &s);
    return td_error_set(r == CUDA_ERROR_OUT_OF_MEMORY ? TD_ERR_OOM : TD_ERR_DEVICE, "cuda kernel: %s: %s (%d)", what, s,
                        (int)r);
}

/* ---- the compiled-image cache ---- */

static td_kernel_cache *cache; /* NULL when it could not be made: every compile then runs NVRTC */
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t compile_lock = PTHREAD_MUTEX_INITIALIZER; /* a kernel compiles once */

/* Bytes of an entry before its image: the lowered name with its NUL, rounded up to 16 (the image stays aligned). */
static size_t image_at(size_t name_len) { return (name_len + 1 + 15) & ~(size_t)15; }

/* An entry's structure: a nonempty name of under LOWERED_MAX bytes, then a nonempty image. */
static bool entry_well_formed(const void *data, size_t size) {
    const char *end = memchr(data, 0, size < LOWERED_MAX ? size : LOWERED_MAX);
    return end && end != data && image_at((size_t)(end - (const char *)data)) < size;
}

static void cache_start(void) {
    td_kernel_cache_config cfg = {.name = "cuda",
                                  .suffix = ".bin",
                                  .version = 1,
                                  .max_entries = CACHE_ENTRIES,
                                  .disable_env = "TRIDENT_KERNEL_CACHE",
                                  .validate = entry_well_formed};
    if (td_kernel_cache_new(&cfg, &cache) != TD_OK) cache = NULL;
}

static td_status nvrtc_status(nvrtcResult r, const char *what) {
    if (r == NVRTC_SUCCESS) return TD_OK;
    return td_error_set(r == NVRTC_ERROR_OUT_OF_MEMORY ? TD_ERR_OOM : TD_ERR_DEVICE, "nvrtc: %s: %s", what,
                        nvrtcGetErrorString(r));
}

static bool valid_identifier(const char *s) {
    if (!s || !(isalpha((unsigned char)*s) || *s == '_')) return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_') return false;
    return true;
}

/* NVRTC: source -> a cache entry (the lowered entry name, then the image: cubin for sm_XX, PTX for compute_XX). */
static td_status compile(const char *source, const char *entry, const td_kernel_options *opts, const char *arch,
                         char **data, size_t *data_size, char *log, size_t log_size) {
    nvrtcProgram prog;
    const char *name = opts && opts->name ? opts->name : "cuda";
    td_status st = nvrtc_status(nvrtcCreateProgram(&prog, source, name, 0, NULL, NULL), "nvrtcCreateProgram");
    if (st != TD_OK) return st;
    nvrtcAddNameExpression(prog, entry);
    enum { MAX_OPTS = 72 };
    const char *argv[MAX_OPTS];
    char arch_opt[96], defs[64][160];
    int argc = 0;
    snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s", arch);
    argv[argc++] = arch_opt;
    argv[argc++] = "--std=c++17";
    argv[argc++] = "--device-as-default-execution-space";
    for (int i = 0; opts && i < opts->n_defines && i < 64; i++) {
        snprintf(defs[i], sizeof defs[i], "-D%s", opts->defines[i]);
        argv[argc++] = defs[i];
    }
    nvrtcResult r = nvrtcCompileProgram(prog, argc, argv);
    size_t n = 0;
    nvrtcGetProgramLogSize(prog, &n);
    char *text = malloc(n + 1);
    if (text && nvrtcGetProgramLog(prog, text) == NVRTC_SUCCESS)
        text[n] = 0;
    else if (text)
        text[0] = 0;
    if (log && log_size) snprintf(log, log_size, "%s", text ? text : "");
    if (r != NVRTC_SUCCESS) {
        /* one line: the first error, "<name>(<line>): error: <what>" as "<name>:<line>: error: <what>", and how
        ** many others NVRTC counted ("N errors detected in the compilation of ...") */
        const char *at = text ? strstr(text, ": error") : NULL;
        const char *line = at;
        while (line && line > text && line[-1] != '\n') line--;
        char place[160] = "";
        unsigned n_line = 0, n_errors = 1;
        const char *paren = line ? memchr(line, '(', (size_t)(at - line)) : NULL;
        if (paren && sscanf(paren, "(%u)", &n_line) == 1)
            snprintf(place, sizeof place, "%.*s:%u", (int)(paren - line), line, n_line);
        const char *count = text ? strstr(text, " errors detected") : NULL;
        while (count && count > text && isdigit((unsigned char)count[-1])) count--;
        if (count) sscanf(count, "%u", &n_errors);
        char more[96] = "";
        if (n_errors > 1)
            snprintf(more, sizeof more, " (and %u more error%s: TRIDENT_KERNEL_LOG=1 shows them)", n_errors - 1,
                     n_errors == 2 ? "" : "s");
        char first[320] = "";
        if (at) snprintf(first, sizeof first, "%.*s", (int)strcspn(at + 2, "\n"), at + 2); /* "error: <what>" */
        if (strstr(place, "__nv_name_map") || strstr(first, "__nv_name_map")) /* nvrtcAddNameExpression's entry */
            st = td_error_set(TD_ERR_COMPILE, "cuda kernel: no __global__ function named '%s' in the source", entry);
        else if (at)
            st = td_error_set(TD_ERR_COMPILE, "%s: %s%s", place[0] ? place : name, first, more);
        else
            st = td_error_set(r == NVRTC_ERROR_COMPILATION ? TD_ERR_COMPILE : TD_ERR_MISUSE, "%s: compile failed: %s",
                              name, nvrtcGetErrorString(r));
    }
    free(text);
    const char *lowered = NULL;
    if (st == TD_OK && (nvrtcGetLoweredName(prog, entry, &lowered) != NVRTC_SUCCESS || !lowered))
        st = td_error_set(TD_ERR_COMPILE, "cuda kernel: no __global__ function named '%s' in the source", entry);
    size_t name_len = st == TD_OK ? strlen(lowered) : 0;
    if (st == TD_OK && name_len >= LOWERED_MAX)
        st = td_error_set(TD_ERR_COMPILE, "cuda kernel: the lowered name of '%s' is over %d bytes", entry, LOWERED_MAX);
    if (st == TD_OK) {
        bool ptx = !strncmp(arch, "compute_", 8);
        size_t size = 0, at = image_at(name_len);
        st = nvrtc_status(ptx ? nvrtcGetPTXSize(prog, &size) : nvrtcGetCUBINSize(prog, &size), "image size");
        *data = st == TD_OK ? calloc(1, at + size) : NULL;
        if (st == TD_OK && !*data) st = td_error_set(TD_ERR_OOM, "cuda kernel: out of host memory");
        if (st == TD_OK) {
            memcpy(*data, lowered, name_len);
            st = nvrtc_status(ptx ? nvrtcGetPTX(prog, *data + at) : nvrtcGetCUBIN(prog, *data + at), "image");
        }
        *data_size = at + size;
    }
    nvrtcDestroyProgram(&prog);
    return st;
}

struct td_kernel {
    cu_dev *d;
    CUmodule module;
    CUfunction fn;
    int max_threads;
    size_t n_params, param_bytes; /* the kernel's parameter list (drv.param_info), read once at compile */
    char entry[128];
};

td_status cu_kernel_compile(int dev, int lang, const char *source, const char *entry, const td_kernel_options *opts,
                            td_kernel **out, char *log, size_t log_size) {
    *out = NULL;
    if (log && log_size) log[0] = 0;
    if (lang != TD_LANG_CUDA)
        return td_error_set(TD_ERR_UNSUPPORTED, "cuda kernels are written in CUDA C++ (language %d given)", lang);
    if (!entry) entry = "main";
    if (!valid_identifier(entry) || strlen(entry) >= 128)
        return td_error_set(TD_ERR_MISUSE, "cuda kernel: entry '%.64s' is not a C identifier", entry);
    for (int i = 0; opts && i < opts->n_defines; i++)
        if (!opts->defines[i] || !*opts->defines[i] || strlen(opts->defines[i]) > 150 || opts->defines[i][0] == '=')
            return td_error_set(TD_ERR_MISUSE, "cuda kernel: define %d is not NAME or NAME=VALUE (150 bytes)", i);
    if (opts && opts->n_defines > 64) return td_error_set(TD_ERR_MISUSE, "cuda kernel: more than 64 defines");
    pthread_once(&drv_once, drv_load);
    if (drv.status) return td_error_set(drv.status, "cuda kernel: %s", drv.why);
    cu_dev *d = cu_get(dev);
    if (!d) return td_last_status();
    char arch[32];
    if (opts && opts->arch) {
        if (strlen(opts->arch) > 24 || (strncmp(opts->arch, "sm_", 3) && strncmp(opts->arch, "compute_", 8)))
            return td_error_set(TD_ERR_MISUSE, "cuda kernel: arch '%.32s' is not sm_XX or compute_XX", opts->arch);
        snprintf(arch, sizeof arch, "%s", opts->arch);
    } else {
        snprintf(arch, sizeof arch, "sm_%d%d", d->cc_major, d->cc_minor);
    }
    uint64_t key = td_kernel_cache_hash(TD_KERNEL_CACHE_SEED, source, strlen(source) + 1);
    key = td_kernel_cache_hash(key, entry, strlen(entry) + 1);
    key = td_kernel_cache_hash(key, arch, strlen(arch) + 1);
    for (int i = 0; opts && i < opts->n_defines; i++)
        key = td_kernel_cache_hash(key, opts->defines[i], strlen(opts->defines[i]) + 1);
    pthread_once(&cache_once, cache_start);
    void *data = NULL;
    size_t size = 0;
    td_status st = TD_OK;
    pthread_mutex_lock(&compile_lock);
    if (!td_kernel_cache_get(cache, key, &data, &size)) {
        char *built = NULL;
        st = compile(source, entry, opts, arch, &built, &size, log, log_size);
        if (st == TD_OK && cache) td_kernel_cache_put(cache, key, built, size); /* failed: compiled again later */
        data = built;
    }
    pthread_mutex_unlock(&compile_lock);
    if (st != TD_OK) {
        free(data);
        return st;
    }
    td_kernel *k = calloc(1, sizeof *k);
    if (!k) {
        free(data);
        return td_error_set(TD_ERR_OOM, "cuda kernel: out of host memory");
    }
    k->d = d;
    snprintf(k->entry, sizeof k->entry, "%s", entry);
    const char *lowered = data; /* the module keeps its own copy of the image */
    st = drv_status(drv.load(&k->module, (char *)data + image_at(strlen(lowered))), "cuModuleLoadData");
    if (st == TD_OK) st = drv_status(drv.get_function(&k->fn, k->module, lowered), "cuModuleGetFunction");
    if (st == TD_OK)
        st = drv_status(drv.get_attribute(&k->max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k->fn),
                        "cuFuncGetAttribute");
    for (size_t off = 0, psize = 0;
         st == TD_OK && drv.param_info && drv.param_info(k->fn, k->n_params, &off, &psize) == CUDA_SUCCESS;)
        k->param_bytes = off + psize, k->n_params++;
    free(data);
    if (st != TD_OK) {
        if (k->module) drv.unload(k->module);
        free(k);
        return st;
    }
    *out = k;
    return TD_OK;
}

td_status cu_kernel_check_block(const td_kernel *k, const uint32_t block[3]) {
    if (!block || !block[0] || !block[1] || !block[2])
        return td_error_set(TD_ERR_MISUSE, "cuda kernel %s: launch needs a block size (every dimension >= 1)",
                            k->entry);
    uint64_t threads = (uint64_t)block[0] * block[1] * block[2];
    if (threads > (uint64_t)k->max_threads || block[2] > 64)
        return td_error_set(TD_ERR_MISUSE,
                            "cuda kernel %s: block {%u,%u,%u} has %llu threads; this kernel allows at most %d "
                            "(its __launch_bounds__ or registers; and z <= 64)",
                            k->entry, block[0], block[1], block[2], (unsigned long long)threads, k->max_threads);
    return TD_OK;
}

td_status cu_kernel_launch(td_kernel *k, const uint32_t grid[3], const uint32_t block[3], size_t shared_bytes,
                           int n_views, const td_operand *views, const void *push, size_t push_size) {
    cu_dev *d = cu_get(k->d->index);
    if (!d) return td_last_status();
    td_status st = cu_kernel_check_block(k, block);
    if (st != TD_OK) return st;
    if (grid[1] > 65535 || grid[2] > 65535)
        return td_error_set(TD_ERR_MISUSE, "cuda kernel %s: grid y and z are at most 65535 (got %u, %u)", k->entry,
                            grid[1], grid[2]);
    if (push_size > PUSH_MAX || (push_size && !push))
        return td_error_set(TD_ERR_MISUSE, "cuda kernel %s: %zu bytes of push data (at most %d, not NULL)", k->entry,
                            push_size, PUSH_MAX);
    if (n_views > MAX_VIEWS) return td_error_set(TD_ERR_MISUSE, "cuda kernel: more than %d tensors", MAX_VIEWS);
    if (shared_bytes > d->prop.sharedMemPerBlockOptin)
        return td_error_set(TD_ERR_MISUSE, "cuda kernel %s: %zu bytes of shared memory; %s allows %zu per block",
                            k->entry, shared_bytes, d->prop.name, (size_t)d->prop.sharedMemPerBlockOptin);
    if (shared_bytes > 48 * 1024) {
        st = drv_status(drv.set_attribute(k->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)shared_bytes),
                        "cuFuncSetAttribute");
        if (st != TD_OK) return st;
    }
    /* parameters: the tensors' element pointers, then the push data */
    static _Thread_local unsigned char params[MAX_VIEWS * 8 + PUSH_MAX];
    size_t size = (size_t)n_views * 8 + push_size;
    for (int i = 0; i < n_views; i++) {
        if (views[i].buf && views[i].buf->dev != d->index)
            return td_error_set(TD_ERR_DEVICE, "cuda kernel %s: tensor %d is on another CUDA device", k->entry, i);
        void *p = cu_data(&views[i]);
        memcpy(params + 8 * i, &p, 8);
    }
    if (push_size) memcpy(params + 8 * n_views, push, push_size);
    /* the kernel's own parameter list must take exactly these bytes */
    if (drv.param_info && k->param_bytes != size)
        return td_error_set(TD_ERR_MISUSE,
                            "cuda kernel %s: its %zu parameters take %zu bytes, but %d tensors (8 bytes each) and "
                            "%zu bytes of push data give %zu",
                            k->entry, k->n_params, k->param_bytes, n_views, push_size, size);
    if (!grid[0] || !grid[1] || !grid[2]) return TD_OK;
    void *config[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, params, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
    return drv_status(drv.launch(k->fn, grid[0], grid[1], grid[2], block[0], block[1], block[2], (unsigned)shared_bytes,
                                 (CUstream)d->stream, NULL, size ? config : NULL),
                      "cuLaunchKernel");
}

void cu_kernel_free(td_kernel *k) {
    if (!k) return;
    cu_dev *d = cu_get(k->d->index);
    if (d) cudaStreamSynchronize(d->stream); /* queued launches may still run it */
    drv.unload(k->module);
    free(k);
}
