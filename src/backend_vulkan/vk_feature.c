/*
** The device feature mask: TRIDENT_VULKAN_DISABLE=subgroup,fp16,... (or "all")
** makes the backend run as on a device without those features, so that every
** path a device of another vendor takes runs and is tested here (lavapipe, NVIDIA).
** The mask only ever clears capabilities found by probe(); what takes over for
** each is in docs/vulkan.md:
**   subgroup         generic shader variants (shared-memory trees; vk_pipeline.c)
**   fp16, coopmat    the tiled matmul instead of cooperative matrices
**   push_descriptor  descriptor sets from a pool per batch (vk_exec.c)
**   timestamps       events timed on the host after a queue wait (vk_event.c)
**   memory_budget    the heap size as the budget (vk_memory.c)
**   atomic_float     max-pool backward gathers instead of scattering (vk_ops_pool.c)
**   int8, int16, bda nothing uses them; only reported
**   fp64, int64, storage16, storage8  their dtypes become unsupported (not in "all")
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk.h"

static const char *const names[] = {
#define VK_FEATURE_NAME_(N, s) s,
    VK_FEATURES(VK_FEATURE_NAME_)
#undef VK_FEATURE_NAME_
};
#define N_FEATURES ((int)(sizeof names / sizeof names[0]))

td_status vk_feature_mask(uint32_t *mask) {
    *mask = 0;
    const char *env = getenv("TRIDENT_VULKAN_DISABLE");
    if (!env) return TD_OK;
    for (const char *p = env; *p;) {
        size_t len = strcspn(p, ", ");
        bool found = len == 0;
        if (len == 3 && !strncmp(p, "all", 3)) *mask |= VK_F_ALL_FALLBACK, found = true;
        for (int i = 0; i < N_FEATURES && !found; i++)
            if (strlen(names[i]) == len && !strncmp(p, names[i], len)) *mask |= 1u << i, found = true;
        if (!found) {
            char known[512];
            size_t at = 0;
            for (int i = 0; i < N_FEATURES; i++) at += (size_t)snprintf(known + at, sizeof known - at, ",%s", names[i]);
            return td_error_set(TD_ERR_MISUSE, "TRIDENT_VULKAN_DISABLE: unknown feature '%.*s' (known: all%s)",
                                (int)len, p, known);
        }
        p += len;
        p += strspn(p, ", ");
    }
    return TD_OK;
}

void vk_feature_apply(vk_caps *c, uint32_t m) {
    if (m & VK_F(SUBGROUP)) c->subgroup_arith = false;
    if (m & VK_F(FP16)) c->fp16_arith = false;
    if (m & VK_F(INT8)) c->int8_arith = false;
    if (m & VK_F(INT16)) c->int16 = false;
    if (m & VK_F(PUSH_DESCRIPTOR)) c->push_descriptor = false;
    if (m & VK_F(BDA)) c->bda = false;
    if (m & VK_F(COOPMAT)) c->coopmat_nv = c->coopmat_khr = false;
    if (m & VK_F(TIMESTAMPS)) c->timestamps = false;
    if (m & VK_F(MEMORY_BUDGET)) c->memory_budget = false;
    if (m & VK_F(ATOMIC_FLOAT)) c->atomic_float = c->atomic_float_add = false;
    if (m & VK_F(FP64)) c->fp64 = false;
    if (m & VK_F(INT64)) c->int64 = false;
    if (m & VK_F(STORAGE16)) c->storage16 = false;
    if (m & VK_F(STORAGE8)) c->storage8 = false;
}

void vk_feature_names(uint32_t mask, char *out, size_t n) {
    size_t at = 0;
    out[0] = 0;
    if ((mask & VK_F_ALL_FALLBACK) == VK_F_ALL_FALLBACK) {
        at = (size_t)snprintf(out, n, "all");
        mask &= ~VK_F_ALL_FALLBACK;
    }
    for (int i = 0; i < N_FEATURES; i++)
        if (mask & (1u << i) && at < n) at += (size_t)snprintf(out + at, n - at, "%s%s", at ? "," : "", names[i]);
}
