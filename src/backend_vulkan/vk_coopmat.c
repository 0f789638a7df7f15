/*
** Cooperative matrices (tensor cores): which extension the f16 matmul uses on a
** device, and with which fragment shape.
**
** Two extensions give the same kernel (shaders/matmul_coopmat.comp):
** VK_NV_cooperative_matrix, and the portable VK_KHR_cooperative_matrix, whose
** shader variant exists when the build has it (TRIDENT_VK_COOPMAT_KHR).
** The path is KHR where both work, else NV; TRIDENT_VULKAN_COOPMAT=khr|nv|off forces
** one (a forced path the device or build lacks leaves none, and says why on stderr).
** The KHR variant is in every build: compiled by glslang >= 13, or else taken from
** shaders/spirv/ (src/backend_vulkan/CMakeLists.txt). The shape is the
** largest the driver lists for f16 x f16 -> f32 at subgroup scope that tiles the
** kernel's 64 x subgroup-size x 32 subgroup block; the kernel's shared memory must
** fit maxComputeSharedMemorySize.
**
** bf16 (VK_KHR_shader_bfloat16): where the device has the extension with shaderBFloat16Type and
** shaderBFloat16CooperativeMatrix, the KHR path is chosen and the driver lists bf16 x bf16 -> f32 at the f16
** shape (the retyped kernel's only bf16 matrices are its A and B fragments), caps.coopmat_bf16_native is set and
** the extension and both features are enabled at device creation: bf16 MATMUL then runs the f16 kernel's SPIR-V
** retyped to bf16 (vk_spirv_bf16.c; GL_EXT_bfloat16 itself needs glslang >= 15.3, which the build lacks).
** TRIDENT_VK_BF16=scaled (read on each product, vk_ops_matmul.c) runs bf16 as before all the same.
**
** Debian 12's Vulkan headers (1.3.239) predate VK_KHR_cooperative_matrix, so its
** few structs and enums are declared here.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk.h"

#ifndef VK_KHR_cooperative_matrix
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR ((VkStructureType)1000506000)
#define VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR               ((VkStructureType)1000506001)
typedef struct VkCooperativeMatrixPropertiesKHR {
    VkStructureType sType;
    void *pNext;
    uint32_t MSize, NSize, KSize;
    int32_t AType, BType, CType, ResultType; /* VkComponentTypeKHR */
    VkBool32 saturatingAccumulation;
    int32_t scope; /* VkScopeKHR */
} VkCooperativeMatrixPropertiesKHR;
typedef VkResult(VKAPI_PTR *PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)(VkPhysicalDevice, uint32_t *,
                                                                                   VkCooperativeMatrixPropertiesKHR *);
#endif
/* VkComponentTypeKHR / VkScopeKHR values (the NV enums share the first ones) */
#define CT_FLOAT16     0
#define CT_FLOAT32     1
#define CT_BFLOAT16    1000141000
#define SCOPE_SUBGROUP 3
#define KERNEL_SHARED  (2u * (128u * 40u + 32u * 136u) * 2u) /* matmul_coopmat.comp: two stages of halfs */

/* bf16 shapes listed at subgroup scope: {M, N, K, C type, result type} */
#define MAX_BF16_SHAPES 32
typedef struct bf16_shapes {
    int n;
    int32_t s[MAX_BF16_SHAPES][5];
} bf16_shapes;

/* One listed shape: keep it in *best when it fits the kernel and beats it; a bf16 one into *b16 (if any). */
static void consider(vk_dev *d, const char *ext, uint32_t m, uint32_t n, uint32_t k, int32_t at, int32_t bt, int32_t ct,
                     int32_t rt, int32_t scope, uint32_t best[3], bool *bf16, bf16_shapes *b16) {
    const vk_caps *c = &d->caps;
    if (getenv("TRIDENT_VULKAN_VERBOSE"))
        fprintf(stderr, "vulkan: %s: %s cooperative matrix %ux%ux%u types %d %d %d %d scope %d\n", d->props.deviceName,
                ext, m, n, k, at, bt, ct, rt, scope);
    if (scope != SCOPE_SUBGROUP) return;
    if (at == CT_BFLOAT16 && bt == CT_BFLOAT16) {
        *bf16 = true;
        if (b16 && b16->n < MAX_BF16_SHAPES) {
            int32_t *e = b16->s[b16->n++];
            e[0] = (int32_t)m, e[1] = (int32_t)n, e[2] = (int32_t)k, e[3] = ct, e[4] = rt;
        }
    }
    /* 64 x WN subgroup blocks (WN = subgroup size), K steps of 32 */
    bool fits = m && n && k && 64 % m == 0 && c->subgroup_size % n == 0 && 32 % k == 0;
    bool types = at == CT_FLOAT16 && bt == CT_FLOAT16 && ct == CT_FLOAT32 && rt == CT_FLOAT32;
    if (fits && types && m * n * k > best[0] * best[1] * best[2]) best[0] = m, best[1] = n, best[2] = k;
}

static void probe_nv(vk_dev *d, uint32_t best[3]) {
    PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV get =
        (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)vkGetInstanceProcAddr(
            vk_instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV");
    uint32_t n = 0;
    if (!get || get(d->phys, &n, NULL) != VK_SUCCESS || !n) return;
    VkCooperativeMatrixPropertiesNV *cm = calloc(n, sizeof *cm);
    for (uint32_t i = 0; cm && i < n; i++) cm[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
    bool bf16 = false;
    if (cm && get(d->phys, &n, cm) == VK_SUCCESS)
        for (uint32_t i = 0; i < n; i++)
            consider(d, "NV", cm[i].MSize, cm[i].NSize, cm[i].KSize, cm[i].AType, cm[i].BType, cm[i].CType, cm[i].DType,
                     cm[i].scope, best, &bf16, NULL);
    free(cm);
}

static void probe_khr(vk_dev *d, uint32_t best[3], bf16_shapes *b16) {
    PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR get =
        (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)vkGetInstanceProcAddr(
            vk_instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
    uint32_t n = 0;
    if (!get || get(d->phys, &n, NULL) != VK_SUCCESS || !n) return;
    VkCooperativeMatrixPropertiesKHR *cm = calloc(n, sizeof *cm);
    for (uint32_t i = 0; cm && i < n; i++) cm[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR;
    if (cm && get(d->phys, &n, cm) == VK_SUCCESS)
        for (uint32_t i = 0; i < n; i++)
            consider(d, "KHR", cm[i].MSize, cm[i].NSize, cm[i].KSize, cm[i].AType, cm[i].BType, cm[i].CType,
                     cm[i].ResultType, cm[i].scope, best, &d->caps.coopmat_bf16, b16);
    free(cm);
}

/* Why a path forced by TRIDENT_VULKAN_COOPMAT is not taken on d ("" when it is, or none is forced). */
static const char *forced_why(const vk_dev *d, const char *force, bool khr_built, const uint32_t khr[3],
                              const uint32_t nv[3]) {
    const vk_caps *c = &d->caps;
    if (strcmp(force, "khr") && strcmp(force, "nv") && strcmp(force, "off")) return "it is not khr, nv or off";
    if (!strcmp(force, "khr") && !c->coopmat_khr) return "the device lacks VK_KHR_cooperative_matrix";
    if (!strcmp(force, "khr") && !khr_built)
        return "this build has no KHR shader (no glslang >= 13 and no current shaders/spirv/ copy)";
    if (!strcmp(force, "khr") && !khr[0]) return "the driver lists no f16 shape that fits the kernel";
    if (!strcmp(force, "nv") && !c->coopmat_nv) return "the device lacks VK_NV_cooperative_matrix";
    if (!strcmp(force, "nv") && !nv[0]) return "the driver lists no f16 shape that fits the kernel";
    return "";
}

/* Whether b16 lists bf16 x bf16 -> f32 (f32 C) at shape (M, N, K). */
static bool bf16_native_shape(const bf16_shapes *b16, const uint32_t shape[3]) {
    for (int i = 0; i < b16->n; i++) {
        const int32_t *e = b16->s[i];
        if (e[0] == (int32_t)shape[0] && e[1] == (int32_t)shape[1] && e[2] == (int32_t)shape[2] && e[3] == CT_FLOAT32 &&
            e[4] == CT_FLOAT32)
            return true;
    }
    return false;
}

void vk_coopmat_probe(vk_dev *d) {
    vk_caps *c = &d->caps;
    c->coopmat = VK_COOPMAT_NONE;
    const char *force = getenv("TRIDENT_VULKAN_COOPMAT");
    if (force && !*force) force = NULL;
    /* the kernel has 256 invocations in 2, 4 or 8 subgroups and needs f16 arithmetic */
    bool sg = c->subgroup_size == 32 || c->subgroup_size == 64 || c->subgroup_size == 128;
    const char *why = NULL;
    if (!(c->fp16_arith && c->storage16 && c->memory_model && c->subgroup_arith && sg))
        why = "it needs f16 arithmetic and storage, the Vulkan memory model, subgroup arithmetic and subgroups of "
              "32, 64 or 128";
    else if (c->shared_mem < KERNEL_SHARED)
        why = "maxComputeSharedMemorySize is below the kernel's 37 KiB";
    bool want_khr = !force || !strcmp(force, "khr"), want_nv = !force || !strcmp(force, "nv");
    uint32_t khr[3] = {0, 0, 0}, nv[3] = {0, 0, 0};
#ifdef TRIDENT_VK_COOPMAT_KHR
    bool khr_built = true;
#else
    bool khr_built = false;
#endif
    bf16_shapes b16 = {0};
    if (!why && khr_built && c->coopmat_khr && want_khr) probe_khr(d, khr, &b16);
    if (!why && c->coopmat_nv && want_nv) probe_nv(d, nv);
    if (!why && force) why = forced_why(d, force, khr_built, khr, nv);
    if (force && strcmp(force, "off") && why && *why)
        fprintf(stderr, "trident: vulkan: %s: TRIDENT_VULKAN_COOPMAT=%s: no cooperative-matrix path, since %s\n",
                d->props.deviceName, force, why);
    const uint32_t *shape = khr[0] ? khr : nv[0] ? nv : NULL;
    if (!shape) return;
    c->coopmat = khr[0] ? VK_COOPMAT_KHR : VK_COOPMAT_NV;
    memcpy(c->coopmat_shape, shape, sizeof c->coopmat_shape);
    c->coopmat_bf16_native = c->coopmat == VK_COOPMAT_KHR && c->bf16_type && bf16_native_shape(&b16, shape);
}

const char *vk_coopmat_name(int path) { return path == VK_COOPMAT_KHR ? "khr" : path == VK_COOPMAT_NV ? "nv" : "none"; }

void *vk_coopmat_chain(const vk_dev *d, vk_coopmat_feat *f, void *next) {
    if (d->caps.coopmat == VK_COOPMAT_NONE) return next;
    /* VkPhysicalDeviceCooperativeMatrixFeatures{NV,KHR} share this layout */
    *f = (vk_coopmat_feat){.sType = d->caps.coopmat == VK_COOPMAT_KHR
                                        ? VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR
                                        : VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV,
                           .pNext = next,
                           .cooperativeMatrix = VK_TRUE};
    return f;
}

void *vk_bf16_chain(const vk_dev *d, vk_bf16_feat *f, void *next) {
    if (!d->caps.coopmat_bf16_native) return next;
    *f = (vk_bf16_feat){.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR_,
                        .pNext = next,
                        .shaderBFloat16Type = VK_TRUE,
                        .shaderBFloat16CooperativeMatrix = VK_TRUE};
    return f;
}
