/*
** Compute pipelines, created on first use and cached.
**
** Every pipeline shares one layout: set 0 holds VK_MAX_BINDINGS storage
** buffers (shaders use bindings 0..n-1) and VK_PUSH_MAX bytes of push
** constants. A pipeline is keyed by (shader variant, specialization constants);
** constant 0 is always the workgroup size. A variant that uses subgroup
** operations has a generic twin (shaders.cmake), which runs instead where the
** device has no subgroup arithmetic (or TRIDENT_VULKAN_DISABLE=subgroup).
**
** The VkPipelineCache is loaded from and saved to
** $XDG_CACHE_HOME/trident (else ~/.cache/trident), one file per device
** (vendor, device id and pipeline-cache UUID in the name); saving happens
** after new pipelines were made, at the next host wait. A cache written by
** another driver is rejected by the driver itself (its header is checked).
** TRIDENT_VULKAN_PIPELINE_CACHE=0 turns the disk cache off. The self-test's
** record of variants that failed on this driver lies beside it (vk_selftest.c):
** such a variant runs as its generic twin.
*/
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vk.h"
#include "vk_spirv_bf16.h"

bool vk_cache_dir(char *dir, size_t n) { return td_kernel_cache_dir("TRIDENT_VULKAN_PIPELINE_CACHE", dir, n); }

static bool cache_path(vk_dev *d, char *path, size_t n) {
    char dir[3072];
    if (!vk_cache_dir(dir, sizeof dir)) return false;
    char uuid[2 * VK_UUID_SIZE + 1];
    for (unsigned i = 0; i < VK_UUID_SIZE; i++) snprintf(uuid + 2 * i, 3, "%02x", d->props.pipelineCacheUUID[i]);
    snprintf(path, n, "%s/vulkan-%04x-%04x-%s.bin", dir, d->props.vendorID, d->props.deviceID, uuid);
    return true;
}

static void *load_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    void *data = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long len = ftell(f);
        if (len > 0 && len < (1L << 30) && fseek(f, 0, SEEK_SET) == 0 && (data = malloc((size_t)len))) {
            if (fread(data, 1, (size_t)len, f) != (size_t)len) {
                free(data);
                data = NULL;
            } else {
                *size = (size_t)len;
            }
        }
    }
    fclose(f);
    return data;
}

void vk_pipeline_cache_save(vk_dev *d) {
    d->cache_dirty = false;
    char dir[3072], path[4096];
    if (!vk_cache_dir(dir, sizeof dir)) return; /* made here, before the pre-warm list goes there too */
    vk_prewarm_save(d);
    if (!d->cache || !cache_path(d, path, sizeof path)) return;
    size_t size = 0;
    /* pipelines that were in the loaded cache add nothing: the same size is the same cache */
    if (vkGetPipelineCacheData(d->dev, d->cache, &size, NULL) != VK_SUCCESS || !size || size == d->cache_saved) return;
    void *data = malloc(size);
    if (!data) return;
    if (vkGetPipelineCacheData(d->dev, d->cache, &size, data) == VK_SUCCESS) {
        char tmp[4200];
        snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
        FILE *f = fopen(tmp, "wb");
        bool ok = f && fwrite(data, 1, size, f) == size;
        if (f) ok = fclose(f) == 0 && ok;
        if (ok) ok = rename(tmp, path) == 0;
        if (!ok) unlink(tmp);
        if (ok) d->cache_saved = size;
    }
    free(data);
}

td_status vk_pipeline_init(vk_dev *d) {
    VkDescriptorSetLayoutBinding b[VK_MAX_BINDINGS];
    for (int i = 0; i < VK_MAX_BINDINGS; i++)
        b[i] = (VkDescriptorSetLayoutBinding){.binding = (uint32_t)i,
                                              .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                              .descriptorCount = 1,
                                              .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    VkDescriptorSetLayoutCreateInfo li = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .flags = d->push_descriptor ? VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR : 0,
        .bindingCount = VK_MAX_BINDINGS,
        .pBindings = b};
    VkResult r = vkCreateDescriptorSetLayout(d->dev, &li, NULL, &d->dsl);
    if (r != VK_SUCCESS) return vk_fail(r, "vkCreateDescriptorSetLayout");
    VkPushConstantRange pr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, VK_PUSH_MAX};
    VkPipelineLayoutCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                     .setLayoutCount = 1,
                                     .pSetLayouts = &d->dsl,
                                     .pushConstantRangeCount = 1,
                                     .pPushConstantRanges = &pr};
    r = vkCreatePipelineLayout(d->dev, &pi, NULL, &d->layout);
    if (r != VK_SUCCESS) return vk_fail(r, "vkCreatePipelineLayout");
    char path[4096];
    size_t size = 0;
    void *data = cache_path(d, path, sizeof path) ? load_file(path, &size) : NULL;
    VkPipelineCacheCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO, .initialDataSize = size, .pInitialData = data};
    r = vkCreatePipelineCache(d->dev, &ci, NULL, &d->cache);
    if (r != VK_SUCCESS && data) { /* a damaged file: start empty */
        ci.initialDataSize = 0;
        ci.pInitialData = NULL;
        r = vkCreatePipelineCache(d->dev, &ci, NULL, &d->cache);
    }
    free(data);
    if (r != VK_SUCCESS)
        d->cache = VK_NULL_HANDLE;
    else if (size)
        vkGetPipelineCacheData(d->dev, d->cache, &d->cache_saved, NULL);
    d->verbose = getenv("TRIDENT_VULKAN_VERBOSE") != NULL;
    vk_compile_init(d);
    return TD_OK;
}

void vk_pipeline_destroy(vk_dev *d) {
    vk_compile_stop(d); /* every queued pipeline made */
    free(d->log);
    for (int s = 0; s < VK_SHADER_COUNT; s++) {
        for (vk_pipeline *p = d->pipelines[s], *next; p; p = next) {
            next = p->next;
            if (p->pipe) vkDestroyPipeline(d->dev, p->pipe, NULL);
            free(p);
        }
        if (d->modules[s]) vkDestroyShaderModule(d->dev, d->modules[s], NULL);
    }
    if (d->cache) vkDestroyPipelineCache(d->dev, d->cache, NULL);
    vkDestroyPipelineLayout(d->dev, d->layout, NULL);
    vkDestroyDescriptorSetLayout(d->dev, d->dsl, NULL);
}

/* Thread-safe: the pipeline cache is internally synchronized (the compile threads share it). */
static VkResult create_pipeline(vk_dev *d, VkShaderModule mod, const char *entry, const uint32_t *spec, int n_spec,
                                VkPipeline *out) {
    VkSpecializationMapEntry me[VK_MAX_SPEC];
    for (int i = 0; i < n_spec; i++) me[i] = (VkSpecializationMapEntry){(uint32_t)i, (uint32_t)(4 * i), 4};
    VkSpecializationInfo si = {
        .mapEntryCount = (uint32_t)n_spec, .pMapEntries = me, .dataSize = 4 * (size_t)n_spec, .pData = spec};
    VkComputePipelineCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
                                      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                                                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                                                .module = mod,
                                                .pName = entry,
                                                .pSpecializationInfo = n_spec ? &si : NULL},
                                      .layout = d->layout};
    return vkCreateComputePipelines(d->dev, d->cache, 1, &ci, NULL, out);
}

int vk_pipeline_pick(const vk_dev *d, int shader) {
    int g = vk_shader_table[shader].generic;
    return g >= 0 && (!d->caps.subgroup_arith || d->denied[shader]) ? g : shader;
}

int vk_pipeline_variant(vk_dev *d, int shader) {
    int v = vk_pipeline_pick(d, shader);
    if (v != shader && d->caps.subgroup_arith) vk_selftest_warn(d, shader);
    if (v == shader && vk_shader_table[shader].generic >= 0) d->used[shader] = true;
    return v;
}

int vk_variant_id(const char *name) {
    for (int i = 0; i < VK_SHADER_COUNT; i++)
        if (!strcmp(vk_shader_table[i].name, name)) return i;
    return -1;
}

/* A retyped variant's module (VK_RETYPE_BF16) is made from its words rewritten by vk_spirv_bf16, on the
** device that has the bf16 features (vk_coopmat.c) only. */
td_status vk_pipeline_module(vk_dev *d, int shader) {
    if (d->modules[shader]) return TD_OK;
    const vk_shader_code *c = &vk_shader_table[shader];
    uint32_t *words = NULL;
    size_t n = c->size / 4;
    if (c->retype == VK_RETYPE_BF16) {
        char why[256];
        if (!d->caps.coopmat_bf16_native)
            return td_error_set(TD_ERR_UNAVAILABLE,
                                "vulkan: shader %s needs VK_KHR_shader_bfloat16's cooperative matrices, which "
                                "vulkan:%d lacks",
                                c->name, d->index);
        if (vk_spirv_bf16(c->code, c->size / 4, &words, &n, why, sizeof why))
            return td_error_set(TD_ERR_DEVICE, "vulkan: shader %s: cannot retype to bf16: %s", c->name, why);
    }
    VkShaderModuleCreateInfo mi = {
        .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = 4 * n, .pCode = words ? words : c->code};
    VkResult r = vkCreateShaderModule(d->dev, &mi, NULL, &d->modules[shader]);
    free(words);
    return r == VK_SUCCESS ? TD_OK : vk_fail(r, "vkCreateShaderModule");
}

VkResult vk_pipeline_create(vk_dev *d, int shader, const uint32_t *spec, int n_spec, VkPipeline *out) {
    return create_pipeline(d, d->modules[shader], "main", spec, n_spec, out);
}

vk_pipeline *vk_pipeline_add(vk_dev *d, int shader, const uint32_t *spec, int n_spec) {
    vk_pipeline *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->shader = shader;
    memcpy(p->spec, spec, 4 * (size_t)n_spec);
    p->n_spec = n_spec;
    p->next = d->pipelines[shader];
    d->pipelines[shader] = p;
    d->cache_dirty = true;
    return p;
}

td_status vk_pipeline_ready(vk_dev *d, vk_pipeline *p, VkPipeline *out) {
    if (!p->ready) {
        int state = vk_compile_state(d, p, true);
        /* a failed pre-warm or compile-thread job is tried once more here, where its error is reported */
        if (state == VK_PIPE_FAILED && vk_compile_now(d, p) != VK_SUCCESS) {
            vk_fail(p->result, "vkCreateComputePipelines");
            return td_error_prefix("vulkan: shader %s", vk_shader_table[p->shader].name);
        }
        p->ready = true;
    }
    *out = p->pipe;
    return TD_OK;
}

td_status vk_pipeline_find(vk_dev *d, int shader, const uint32_t *spec, int n_spec, bool wait, vk_pipeline **out) {
    if (shader < 0 || shader >= VK_SHADER_COUNT || n_spec > VK_MAX_SPEC)
        return td_error_set(TD_ERR_MISUSE, "vulkan: bad shader id %d", shader);
    shader = vk_pipeline_variant(d, shader);
    vk_pipeline *p = d->pipelines[shader];
    while (p && (p->n_spec != n_spec || memcmp(p->spec, spec, 4 * (size_t)n_spec))) p = p->next;
    if (!p) {
        td_status st = vk_pipeline_module(d, shader);
        if (st != TD_OK) return st;
        if (!(p = vk_pipeline_add(d, shader, spec, n_spec)))
            return td_error_set(TD_ERR_OOM, "vulkan: out of host memory");
        if (vk_compile_async(d) && !wait) {
            vk_compile_submit(d, p);
        } else if (vk_compile_now(d, p) != VK_SUCCESS) {
            p->ready = false; /* state FAILED: vk_pipeline_ready tries again and reports it */
        } else {
            p->ready = true;
        }
    }
    *out = p;
    if (p->ready) return TD_OK;
    if (!wait && vk_compile_state(d, p, false) == VK_PIPE_PENDING) return TD_OK;
    VkPipeline pipe;
    return vk_pipeline_ready(d, p, &pipe);
}

td_status vk_pipeline_from_spirv(vk_dev *d, const uint32_t *code, size_t size, const char *entry, uint32_t wg,
                                 VkShaderModule *mod, VkPipeline *out) {
    VkShaderModuleCreateInfo mi = {
        .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = size, .pCode = code};
    VkResult r = vkCreateShaderModule(d->dev, &mi, NULL, mod);
    if (r != VK_SUCCESS) return vk_fail(r, "vkCreateShaderModule");
    r = create_pipeline(d, *mod, entry, &wg, wg ? 1 : 0, out);
    if (r != VK_SUCCESS) {
        vkDestroyShaderModule(d->dev, *mod, NULL);
        *mod = VK_NULL_HANDLE;
        return vk_fail(r, "vkCreateComputePipelines");
    }
    d->cache_dirty = true;
    return TD_OK;
}
