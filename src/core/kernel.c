/*
** User kernels (include/trident/kernel.h): a thin layer over the backend's
** kernel_compile / kernel_launch / kernel_free slots that checks devices and
** turns tensors into operands.
*/
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "trident/kernel.h"

_Static_assert((int)TD_KERNEL_GLSL == (int)TD_LANG_GLSL && (int)TD_KERNEL_CUDA == (int)TD_LANG_CUDA,
               "kernel.h languages mirror backend.h");

#define KERNEL_MAX_TENSORS 64

/* include/trident/kernel/trident.glsl and trident.cuh (embedded at build time) */
extern const char td_kernel_header_glsl[], td_kernel_header_cuh[];

/* source with its line `#include <trident.glsl>` (GLSL) or `#include <trident.cuh>`
** (CUDA) replaced by the header and a #line that keeps the compiler's line
** numbers those of source. Returns a malloc'd string, or NULL (*oom tells
** whether for lack of memory) when source has no such line. */
static char *expand_header(int lang, const char *source, bool *oom) {
    const char *want = lang == TD_KERNEL_CUDA ? "trident.cuh" : "trident.glsl";
    const char *header = lang == TD_KERNEL_CUDA ? td_kernel_header_cuh : td_kernel_header_glsl;
    *oom = false;
    int line = 1;
    for (const char *p = source; *p; line++) {
        const char *q = p + strspn(p, " \t");
        if (!strncmp(q, "#include", 8)) {
            q += 8 + strspn(q + 8, " \t");
            if ((*q == '<' || *q == '"') && !strncmp(q + 1, want, strlen(want)) &&
                q[1 + strlen(want)] == (*q == '<' ? '>' : '"')) {
                const char *rest = strchr(q, '\n');
                rest = rest ? rest + 1 : q + strlen(q);
                size_t n = (size_t)(p - source) + strlen(header) + 32 + strlen(rest);
                char *out = malloc(n);
                if (!out) return *oom = true, NULL;
                snprintf(out, n, "%.*s%s\n#line %d\n%s", (int)(p - source), source, header, line + 1, rest);
                return out;
            }
        }
        const char *nl = strchr(p, '\n');
        if (!nl) break;
        p = nl + 1;
    }
    return NULL;
}

struct td_user_kernel {
    const td_backend *be;
    td_device dev;
    td_kernel *k;
};

td_status td_kernel_compile(td_device dev, int lang, const char *source, const char *entry,
                            const td_kernel_options *opts, td_user_kernel **out, char *log, size_t log_size) {
    if (log && log_size) log[0] = 0;
    if (!out) return TD_ERR(TD_ERR_MISUSE, "td_kernel_compile: out is NULL");
    *out = NULL;
    if (!source) return TD_ERR(TD_ERR_MISUSE, "td_kernel_compile: source is NULL");
    if (opts && (opts->n_defines < 0 || (opts->n_defines > 0 && !opts->defines)))
        return TD_ERR(TD_ERR_MISUSE, "td_kernel_compile: %d defines with a NULL list", opts->n_defines);
    const td_backend *be = td__backend_of(dev);
    if (!be) return td_last_status();
    if (!be->iface->kernel_compile) {
        char d[32];
        return TD_ERR(TD_ERR_UNSUPPORTED, "td_kernel_compile: %s takes no user kernels",
                      td_device_str(dev, d, sizeof d));
    }
    bool oom;
    char *expanded = expand_header(lang, source, &oom);
    td_user_kernel *uk = oom ? NULL : calloc(1, sizeof *uk);
    if (!uk) {
        free(expanded);
        return TD_ERR(TD_ERR_OOM, "td_kernel_compile: out of host memory");
    }
    /* TRIDENT_KERNEL_LOG=1: the compiler's whole log on stderr, also where the caller takes none */
    const char *env = getenv("TRIDENT_KERNEL_LOG");
    bool print_log = env && *env && strcmp(env, "0") != 0;
    char own_log[16384];
    if (print_log && (!log || !log_size)) log = own_log, log_size = sizeof own_log;
    td_status st =
        be->iface->kernel_compile(dev.index, lang, expanded ? expanded : source, entry, opts, &uk->k, log, log_size);
    free(expanded);
    if (print_log && log[0])
        fprintf(stderr, "trident: the %s compiler's log for %s:\n%s\n", lang == TD_KERNEL_CUDA ? "CUDA" : "GLSL",
                opts && opts->name ? opts->name : "a kernel", log);
    if (st != TD_OK) {
        free(uk);
        return st;
    }
    uk->be = be;
    uk->dev = dev;
    *out = uk;
    return TD_OK;
}

td_status td_kernel_launch(td_user_kernel *k, const uint32_t grid[3], const uint32_t block[3], size_t shared_bytes,
                           int n, td_tensor *const *tensors, const void *push, size_t push_size) {
    td_status st = td__kernel_launch(k, grid, block, shared_bytes, n, tensors, push, push_size);
    for (int i = 0; st == TD_OK && i < n; i++) td__shadow_drop(tensors[i]);
    return st;
}

td_status td__kernel_launch(td_user_kernel *k, const uint32_t grid[3], const uint32_t block[3], size_t shared_bytes,
                            int n, td_tensor *const *tensors, const void *push, size_t push_size) {
    if (!k || !grid || n < 0 || (n > 0 && !tensors))
        return TD_ERR(TD_ERR_MISUSE, "td_kernel_launch: NULL kernel, grid or tensors");
    if (n > KERNEL_MAX_TENSORS)
        return TD_ERR(TD_ERR_MISUSE, "td_kernel_launch: %d tensors is more than %d", n, KERNEL_MAX_TENSORS);
    td_operand views[KERNEL_MAX_TENSORS];
    for (int i = 0; i < n; i++) {
        if (!tensors[i]) return TD_ERR(TD_ERR_MISUSE, "td_kernel_launch: tensor %d is NULL", i);
        if (!td__check_arg(tensors[i], "td_kernel_launch", "tensor")) return td_last_status();
        if (!td_device_equal(tensors[i]->storage->device, k->dev)) {
            char a[32], b[32];
            return TD_ERR(TD_ERR_DEVICE, "td_kernel_launch: tensor %d is on %s, the kernel on %s", i,
                          td_device_str(tensors[i]->storage->device, a, sizeof a), td_device_str(k->dev, b, sizeof b));
        }
        views[i] = td__view_of(tensors[i]);
    }
    static const uint32_t no_block[3] = {0, 0, 0};
    return k->be->iface->kernel_launch(k->k, grid, block ? block : no_block, shared_bytes, n, views, push, push_size);
}

td_status td_kernel_check_block(const td_user_kernel *k, const uint32_t block[3]) {
    if (!k) return TD_ERR(TD_ERR_MISUSE, "td_kernel_check_block: k is NULL");
    return k->be->iface->kernel_check_block ? k->be->iface->kernel_check_block(k->k, block) : TD_OK;
}

void td_kernel_free(td_user_kernel *k) {
    if (!k) return;
    k->be->iface->kernel_free(k->k);
    free(k);
}
