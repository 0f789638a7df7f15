/*
** Instance, device selection and capabilities.
**
** init() creates the instance and lists the physical devices that can run
** Trident (Vulkan 1.2, a compute queue, 256 invocations per workgroup), best
** first: discrete, integrated, virtual, then CPU (lavapipe). TRIDENT_VULKAN_DEVICE
** keeps only the devices it names: an index into that list or a case-insensitive
** part of the name ("llvmpipe", "H100"), or several such, comma-separated ("1,0"
** reorders; "0,0" opens device 0 twice, as two logical devices vulkan:0 and
** vulkan:1, which tests use for copies between devices). The logical device of
** each is created on first use.
**
** Validation: TRIDENT_VULKAN_VALIDATION=1 enables VK_LAYER_KHRONOS_validation (if
** installed) and a debug-utils messenger (=sync adds synchronization validation); the messenger also runs when the
*layer
** comes from VK_INSTANCE_LAYERS. Each validation error is printed to stderr and
** counted; td_device_info.features ends with "validation_errors=N", so tests
** can fail on N > 0.
*/
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "vk.h"

VkInstance vk_instance;
static VkDebugUtilsMessengerEXT messenger;
static vk_dev devices[VK_MAX_DEVICES];
static int n_devices;
static uint32_t disabled;                       /* TRIDENT_VULKAN_DISABLE (vk_feature.c) */
static uint64_t max_alloc_env, max_binding_env; /* TRIDENT_VULKAN_MAX_ALLOC, TRIDENT_VULKAN_MAX_BINDING */

/* A byte count with an optional K, M or G suffix (powers of 1024); false when malformed. */
static bool parse_bytes(const char *name, uint64_t *out, char *why, size_t why_size) {
    const char *s = getenv(name);
    *out = 0;
    if (!s || !*s) return true;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    int shift = *end == 'K' || *end == 'k' ? 10 : *end == 'M' || *end == 'm' ? 20 : *end == 'G' || *end == 'g' ? 30 : 0;
    if (shift) end++;
    if (end == s || *end || v == 0 || v > (1ull << 50) >> shift) {
        snprintf(why, why_size, "%s=%s: expected a byte count such as 1048576, 64M or 2G", name, s);
        return false;
    }
    *out = (uint64_t)v << shift;
    return true;
}
static _Atomic int validation_errors;

int vk_validation_errors(void) { return validation_errors; }

const char *vk_result_str(VkResult r) {
    switch (r) {
    case VK_SUCCESS: return "VK_SUCCESS";
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
    case VK_ERROR_INVALID_SHADER_NV: return "VK_ERROR_INVALID_SHADER_NV";
    default: return "VkResult error";
    }
}

td_status vk_fail(VkResult r, const char *what) {
    td_status st = TD_ERR_DEVICE;
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) st = TD_ERR_OOM;
    return td_error_set(st, "vulkan: %s failed: %s (%d)%s", what, vk_result_str(r), (int)r,
                        r == VK_ERROR_DEVICE_LOST ? "; the device was lost and must be recreated" : "");
}

static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT sev,
                                                 VkDebugUtilsMessageTypeFlagsEXT type,
                                                 const VkDebugUtilsMessengerCallbackDataEXT *data, void *user) {
    (void)type, (void)user;
    if (sev & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
        validation_errors++;
        fprintf(stderr, "trident vulkan validation error: %s\n", data->pMessage);
    } else if (sev & VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT && getenv("TRIDENT_VULKAN_VERBOSE")) {
        fprintf(stderr, "trident vulkan validation warning: %s\n", data->pMessage);
    }
    return VK_FALSE;
}

static bool has_ext(const VkExtensionProperties *e, uint32_t n, const char *name) {
    for (uint32_t i = 0; i < n; i++)
        if (!strcmp(e[i].extensionName, name)) return true;
    return false;
}

static bool has_layer(const char *name) {
    uint32_t n = 0;
    vkEnumerateInstanceLayerProperties(&n, NULL);
    VkLayerProperties *l = calloc(n ? n : 1, sizeof *l);
    if (!l) return false;
    vkEnumerateInstanceLayerProperties(&n, l);
    bool found = false;
    for (uint32_t i = 0; i < n && !found; i++) found = !strcmp(l[i].layerName, name);
    free(l);
    return found;
}

static int type_rank(VkPhysicalDeviceType t) {
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    default: return 4;
    }
}

/* Fill caps from the physical device; returns why it cannot be used, or NULL. */
static const char *probe(vk_dev *d) {
    VkPhysicalDevice p = d->phys;
    vkGetPhysicalDeviceProperties(p, &d->props);
    vkGetPhysicalDeviceMemoryProperties(p, &d->memprops);
    vk_caps *c = &d->caps;
    c->api_version = d->props.apiVersion;
    c->vendor = d->props.vendorID;
    if (VK_API_VERSION_MINOR(c->api_version) < 2 && VK_API_VERSION_MAJOR(c->api_version) == 1)
        return "Vulkan 1.2 is required";
    uint32_t n_ext = 0;
    vkEnumerateDeviceExtensionProperties(p, NULL, &n_ext, NULL);
    VkExtensionProperties *ext = calloc(n_ext ? n_ext : 1, sizeof *ext);
    if (!ext) return "out of host memory";
    vkEnumerateDeviceExtensionProperties(p, NULL, &n_ext, ext);
    c->push_descriptor = has_ext(ext, n_ext, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
    c->memory_budget = has_ext(ext, n_ext, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
    c->coopmat_nv = has_ext(ext, n_ext, "VK_NV_cooperative_matrix");
    c->coopmat_khr = has_ext(ext, n_ext, "VK_KHR_cooperative_matrix");
    bool atomic_float_ext = has_ext(ext, n_ext, "VK_EXT_shader_atomic_float");
    bool bf16_ext = has_ext(ext, n_ext, "VK_KHR_shader_bfloat16");
    free(ext);

    VkPhysicalDeviceSubgroupProperties sub = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sub};
    vkGetPhysicalDeviceProperties2(p, &p2);
    c->subgroup_size = sub.subgroupSize;
    c->subgroup_arith = (sub.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                        (sub.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) &&
                        (sub.supportedOperations & VK_SUBGROUP_FEATURE_BASIC_BIT) &&
                        (sub.supportedOperations & VK_SUBGROUP_FEATURE_VOTE_BIT);

    vk_bf16_feat fbf = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR_};
    VkPhysicalDeviceShaderAtomicFloatFeaturesEXT fat = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT, .pNext = bf16_ext ? &fbf : NULL};
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                            .pNext = atomic_float_ext ? (void *)&fat
                                                     : bf16_ext       ? (void *)&fbf
                                                                      : NULL};
    VkPhysicalDeviceVulkan11Features f11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                            .pNext = &f12};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f11};
    vkGetPhysicalDeviceFeatures2(p, &f2);
    c->storage16 = f11.storageBuffer16BitAccess;
    c->storage8 = f12.storageBuffer8BitAccess;
    c->fp16_arith = f12.shaderFloat16;
    c->int8_arith = f12.shaderInt8;
    c->bda = f12.bufferDeviceAddress;
    c->memory_model = f12.vulkanMemoryModel;
    c->int64 = f2.features.shaderInt64;
    c->fp64 = f2.features.shaderFloat64;
    c->int16 = f2.features.shaderInt16;
    c->atomic_float = atomic_float_ext;
    c->atomic_float_add = atomic_float_ext && fat.shaderBufferFloat32AtomicAdd;
    c->bf16_type = bf16_ext && fbf.shaderBFloat16Type && fbf.shaderBFloat16CooperativeMatrix;

    const VkPhysicalDeviceLimits *lim = &d->props.limits;
    c->timestamps = lim->timestampComputeAndGraphics && lim->timestampPeriod > 0;
    c->timestamp_period = lim->timestampPeriod;
    c->max_storage_range = lim->maxStorageBufferRange;
    c->min_storage_align = lim->minStorageBufferOffsetAlignment;
    c->shared_mem = lim->maxComputeSharedMemorySize;
    for (int i = 0; i < 3; i++) c->max_groups[i] = lim->maxComputeWorkGroupCount[i];
    c->max_wg_invocations = lim->maxComputeWorkGroupInvocations;
    c->max_push = lim->maxPushConstantsSize;
    VkPhysicalDeviceMaintenance3Properties m3 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
    p2.pNext = &m3;
    vkGetPhysicalDeviceProperties2(p, &p2);
    c->max_alloc = m3.maxMemoryAllocationSize;
    c->disabled = disabled;
    vk_feature_apply(c, disabled);
    /* lowered limits, to test what happens past them on any device */
    if (max_alloc_env && max_alloc_env < c->max_alloc) c->max_alloc = max_alloc_env;
    if (max_binding_env && max_binding_env < c->max_storage_range) c->max_storage_range = max_binding_env;

    vk_coopmat_probe(d);
    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(p, &nq, NULL);
    VkQueueFamilyProperties q[32];
    if (nq > 32) nq = 32;
    vkGetPhysicalDeviceQueueFamilyProperties(p, &nq, q);
    /* prefer a compute-only family (async compute), else any with compute */
    int best = -1;
    for (uint32_t i = 0; i < nq; i++) {
        if (!(q[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
        if (best < 0 || !(q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) best = (int)i;
    }
    if (best < 0) return "no compute queue";
    d->qfam = (uint32_t)best;
    if (q[best].timestampValidBits == 0) c->timestamps = false;
    return NULL;
}

static td_status create_instance(char *why, size_t why_size) {
    const char *val = getenv("TRIDENT_VULKAN_VALIDATION");
    const char *env_layers = getenv("VK_INSTANCE_LAYERS");
    bool want_validation = val && *val && strcmp(val, "0") != 0;
    bool layer = want_validation && has_layer("VK_LAYER_KHRONOS_validation");
    if (want_validation && !layer)
        fprintf(stderr, "trident: TRIDENT_VULKAN_VALIDATION is set but VK_LAYER_KHRONOS_validation is not installed\n");
    uint32_t n_ext = 0;
    vkEnumerateInstanceExtensionProperties(NULL, &n_ext, NULL);
    VkExtensionProperties *ext = calloc(n_ext ? n_ext : 1, sizeof *ext);
    if (!ext) return snprintf(why, why_size, "out of host memory"), TD_ERR_UNAVAILABLE;
    vkEnumerateInstanceExtensionProperties(NULL, &n_ext, ext);
    const char *exts[4];
    uint32_t ne = 0;
    bool debug = (want_validation || (env_layers && strstr(env_layers, "validation"))) &&
                 has_ext(ext, n_ext, VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    if (debug) exts[ne++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    bool portability = has_ext(ext, n_ext, "VK_KHR_portability_enumeration");
    if (portability) exts[ne++] = "VK_KHR_portability_enumeration";
    free(ext);
    const char *layers[1] = {"VK_LAYER_KHRONOS_validation"};
    VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                             .pApplicationName = "trident",
                             .pEngineName = "trident",
                             .apiVersion = VK_API_VERSION_1_2};
    VkDebugUtilsMessengerCreateInfoEXT mci = {.sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
                                              .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT |
                                                                 VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT,
                                              .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                                                             VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT,
                                              .pfnUserCallback = on_message};
    /* TRIDENT_VULKAN_VALIDATION=sync also checks barriers (synchronization validation) */
    VkValidationFeatureEnableEXT sync = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
    VkValidationFeaturesEXT vf = {.sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT,
                                  .pNext = &mci,
                                  .enabledValidationFeatureCount = 1,
                                  .pEnabledValidationFeatures = &sync};
    bool want_sync = layer && !strcmp(val, "sync");
    VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                               .pApplicationInfo = &app,
                               .enabledExtensionCount = ne,
                               .ppEnabledExtensionNames = exts,
                               .enabledLayerCount = layer ? 1 : 0,
                               .ppEnabledLayerNames = layers,
                               .flags = portability ? 0x00000001 /* ENUMERATE_PORTABILITY */ : 0,
                               .pNext = want_sync ? (void *)&vf
                                        : debug   ? (void *)&mci
                                                  : NULL};
    VkResult r = vkCreateInstance(&ci, NULL, &vk_instance);
    if (r != VK_SUCCESS) {
        snprintf(why, why_size, "vkCreateInstance failed: %s (no Vulkan driver installed?)", vk_result_str(r));
        return TD_ERR_UNAVAILABLE;
    }
    if (debug) {
        PFN_vkCreateDebugUtilsMessengerEXT create =
            (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(vk_instance, "vkCreateDebugUtilsMessengerEXT");
        if (create) create(vk_instance, &mci, NULL, &messenger);
    }
    return TD_OK;
}

static bool selected(const char *sel, int rank_index, const char *name) {
    if (!sel || !*sel) return true;
    char *end;
    long v = strtol(sel, &end, 10);
    if (end != sel && !*end) return v == rank_index;
    return strcasestr(name, sel) != NULL;
}

td_status vk_init(char *why, size_t why_size) {
    if (vk_feature_mask(&disabled) != TD_OK) {
        snprintf(why, why_size, "%s", td_last_error());
        return TD_ERR_UNAVAILABLE;
    }
    if (!parse_bytes("TRIDENT_VULKAN_MAX_ALLOC", &max_alloc_env, why, why_size) ||
        !parse_bytes("TRIDENT_VULKAN_MAX_BINDING", &max_binding_env, why, why_size))
        return TD_ERR_UNAVAILABLE;
    const char *cm = getenv("TRIDENT_VULKAN_COOPMAT");
    if (cm && *cm && strcmp(cm, "khr") && strcmp(cm, "nv") && strcmp(cm, "off")) {
        snprintf(why, why_size, "TRIDENT_VULKAN_COOPMAT=%s: expected khr, nv or off", cm);
        return TD_ERR_UNAVAILABLE;
    }
    td_status st = create_instance(why, why_size);
    if (st != TD_OK) return st;
    uint32_t n = 0;
    VkResult r = vkEnumeratePhysicalDevices(vk_instance, &n, NULL);
    if (r != VK_SUCCESS || n == 0) {
        snprintf(why, why_size, "no Vulkan physical device (%s)", r ? vk_result_str(r) : "the loader found no driver");
        return TD_ERR_UNAVAILABLE;
    }
    VkPhysicalDevice phys[16];
    if (n > 16) n = 16;
    vkEnumeratePhysicalDevices(vk_instance, &n, phys);
    vk_dev cand[16];
    int nc = 0;
    size_t at = 0;
    why[0] = 0;
    for (uint32_t i = 0; i < n; i++) {
        vk_dev c = {.phys = phys[i]};
        const char *bad = probe(&c);
        if (bad) {
            at += (size_t)snprintf(why + at, at < why_size ? why_size - at : 0, "%s%s: %s", at ? "; " : "",
                                   c.props.deviceName, bad);
            continue;
        }
        cand[nc++] = c;
    }
    /* stable sort by device type rank */
    for (int i = 1; i < nc; i++)
        for (int j = i; j > 0 && type_rank(cand[j].props.deviceType) < type_rank(cand[j - 1].props.deviceType); j--) {
            vk_dev t = cand[j];
            cand[j] = cand[j - 1];
            cand[j - 1] = t;
        }
    /* each entry of the list keeps the devices it names, in its order; one named twice is opened twice */
    const char *sel = getenv("TRIDENT_VULKAN_DEVICE");
    char list[256], *save = NULL;
    snprintf(list, sizeof list, "%s", sel && *sel ? sel : "");
    char *tok = strtok_r(list, ",", &save);
    for (int i = 0; n_devices < VK_MAX_DEVICES; i++) {
        if (i == nc) {
            if (!tok || !(tok = strtok_r(NULL, ",", &save))) break;
            i = -1;
            continue;
        }
        if (!selected(tok, i, cand[i].props.deviceName)) continue;
        vk_dev *d = &devices[n_devices];
        *d = cand[i];
        d->index = n_devices++;
        d->cur = -1;
        d->planted = -1;
        /* recursive: an encoder may call the locked entry points (the matmul self-test does) */
        pthread_mutexattr_t ma;
        pthread_mutexattr_init(&ma);
        pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
        pthread_mutex_init(&d->lock, &ma);
        pthread_mutexattr_destroy(&ma);
    }
    if (n_devices == 0) {
        if (nc > 0)
            snprintf(why, why_size, "TRIDENT_VULKAN_DEVICE=%s matches none of %d device%s (first: %s)", sel, nc,
                     nc == 1 ? "" : "s", cand[0].props.deviceName);
        else if (!why[0])
            snprintf(why, why_size, "no usable Vulkan device");
        return TD_ERR_UNAVAILABLE;
    }
    return TD_OK;
}

/* Create the logical device and its queue, memory, recorder and pipelines. */
static td_status create_device(vk_dev *d) {
    const vk_caps *c = &d->caps;
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                   .queueFamilyIndex = d->qfam,
                                   .queueCount = 1,
                                   .pQueuePriorities = &prio};
    const char *exts[6];
    uint32_t ne = 0;
    if (c->push_descriptor) exts[ne++] = VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME;
    if (c->memory_budget) exts[ne++] = VK_EXT_MEMORY_BUDGET_EXTENSION_NAME;
    if (c->coopmat == VK_COOPMAT_NV) exts[ne++] = "VK_NV_cooperative_matrix";
    if (c->coopmat == VK_COOPMAT_KHR) exts[ne++] = "VK_KHR_cooperative_matrix";
    if (c->atomic_float_add) exts[ne++] = "VK_EXT_shader_atomic_float";
    if (c->coopmat_bf16_native) exts[ne++] = "VK_KHR_shader_bfloat16";
    VkPhysicalDeviceShaderAtomicFloatFeaturesEXT fat = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT,
        .shaderBufferFloat32AtomicAdd = VK_TRUE};
    vk_coopmat_feat fcm;
    vk_bf16_feat fbf;
    void *chain = vk_coopmat_chain(d, &fcm, vk_bf16_chain(d, &fbf, NULL));
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                            .pNext = c->atomic_float_add ? (void *)&fat : NULL,
                                            .storageBuffer8BitAccess = c->storage8,
                                            .shaderFloat16 = c->fp16_arith,
                                            .shaderInt8 = c->int8_arith,
                                            .bufferDeviceAddress = c->bda,
                                            .vulkanMemoryModel = c->coopmat != VK_COOPMAT_NONE};
    VkPhysicalDeviceVulkan11Features f11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                            .pNext = &f12,
                                            .storageBuffer16BitAccess = c->storage16};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f11};
    fat.pNext = chain;
    if (!c->atomic_float_add) f12.pNext = chain;
    f2.features.shaderInt64 = c->int64;
    f2.features.shaderFloat64 = c->fp64;
    f2.features.shaderInt16 = c->int16;
    VkDeviceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                             .pNext = &f2,
                             .queueCreateInfoCount = 1,
                             .pQueueCreateInfos = &qci,
                             .enabledExtensionCount = ne,
                             .ppEnabledExtensionNames = exts};
    VkResult r = vkCreateDevice(d->phys, &ci, NULL, &d->dev);
    if (r != VK_SUCCESS) return vk_fail(r, "vkCreateDevice");
    vkGetDeviceQueue(d->dev, d->qfam, 0, &d->queue);
    d->coopmat_state = c->coopmat != VK_COOPMAT_NONE ? 1 : 0;
    if (c->push_descriptor)
        d->push_descriptor = (PFN_vkCmdPushDescriptorSetKHR)vkGetDeviceProcAddr(d->dev, "vkCmdPushDescriptorSetKHR");
    td_status st = vk_memory_init(d);
    if (st == TD_OK) st = vk_exec_init(d);
    if (st == TD_OK) st = vk_pipeline_init(d);
    if (st == TD_OK) vk_selftest_load(d);
    if (st == TD_OK) vk_prewarm(d);
    return st;
}

vk_dev *vk_get(int index) {
    if (index < 0 || index >= n_devices) {
        td_error_set(TD_ERR_UNAVAILABLE, "vulkan:%d does not exist (%d device%s)", index, n_devices,
                     n_devices == 1 ? "" : "s");
        return NULL;
    }
    vk_dev *d = &devices[index];
    pthread_mutex_lock(&d->lock);
    if (!d->created && !d->failed) {
        td_status st = create_device(d);
        if (st != TD_OK) {
            d->failed = st;
            snprintf(d->fail_msg, sizeof d->fail_msg, "%s", td_last_error());
        }
        d->created = true;
    }
    pthread_mutex_unlock(&d->lock);
    if (d->failed) {
        td_error_set(d->failed, "vulkan:%d (%s) could not be initialized: %s", index, d->props.deviceName, d->fail_msg);
        return NULL;
    }
    return d;
}

void vk_lock(vk_dev *d) { pthread_mutex_lock(&d->lock); }
void vk_unlock(vk_dev *d) { pthread_mutex_unlock(&d->lock); }

int vk_device_count(void) { return n_devices; }

td_status vk_device_info(int index, td_device_info *out) {
    memset(out, 0, sizeof *out);
    if (index < 0 || index >= n_devices)
        return td_error_set(TD_ERR_UNAVAILABLE, "vulkan:%d does not exist (%d devices)", index, n_devices);
    vk_dev *d = &devices[index];
    const vk_caps *c = &d->caps;
    snprintf(out->name, sizeof out->name, "%s", d->props.deviceName);
    uint32_t v = d->props.driverVersion;
    snprintf(out->driver, sizeof out->driver, "Vulkan %u.%u.%u, driver 0x%x", VK_API_VERSION_MAJOR(c->api_version),
             VK_API_VERSION_MINOR(c->api_version), VK_API_VERSION_PATCH(c->api_version), v);
    VkPhysicalDeviceMemoryBudgetPropertiesEXT budget = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
    VkPhysicalDeviceMemoryProperties2 mp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2,
                                            .pNext = c->memory_budget ? &budget : NULL};
    vkGetPhysicalDeviceMemoryProperties2(d->phys, &mp);
    for (uint32_t h = 0; h < mp.memoryProperties.memoryHeapCount; h++) {
        if (!(mp.memoryProperties.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)) continue;
        uint64_t size = mp.memoryProperties.memoryHeaps[h].size;
        if (size <= out->total_memory) continue;
        out->total_memory = size;
        out->free_memory = c->memory_budget && budget.heapBudget[h] > budget.heapUsage[h]
                               ? budget.heapBudget[h] - budget.heapUsage[h]
                               : 0;
    }
    out->compute_units = 0; /* Vulkan does not report SM/CU counts */
    out->subgroup_size = (int)c->subgroup_size;
    out->fp16 = c->fp16_arith && c->storage16;
    out->bf16 = false;
    out->int8 = c->int8_arith;
    out->cooperative_matrix = c->coopmat_nv || c->coopmat_khr;
    out->timestamps = c->timestamps;
    out->unified_memory = d->created && !d->failed && d->direct;
    out->emulated = d->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    char off[160];
    vk_feature_names(c->disabled, off, sizeof off);
    snprintf(out->features, sizeof out->features,
             "fp16=%d int8=%d storage16=%d storage8=%d int64=%d fp64=%d coopmat_nv=%d coopmat_khr=%d "
             "coopmat=%s/%d/%ux%ux%u bf16_shapes=%d bf16_native=%d/%d "
             "push_descriptor=%d bda=%d budget=%d max_binding=%llu shared=%llu validation_errors=%d subgroup_arith=%d",
             c->fp16_arith, c->int8_arith, c->storage16, c->storage8, c->int64, c->fp64, c->coopmat_nv, c->coopmat_khr,
             vk_coopmat_name(c->coopmat), d->coopmat_state, c->coopmat_shape[0], c->coopmat_shape[1],
             c->coopmat_shape[2], c->coopmat_bf16, c->coopmat_bf16_native, d->bf16_native_state, c->push_descriptor,
             c->bda, c->memory_budget, (unsigned long long)c->max_storage_range, (unsigned long long)c->shared_mem,
             vk_validation_errors(), c->subgroup_arith);
    /* last, so that a long list is what gets cut */
    size_t at = strlen(out->features);
    if (c->disabled) snprintf(out->features + at, sizeof out->features - at, " disabled=%s", off);
    return TD_OK;
}
