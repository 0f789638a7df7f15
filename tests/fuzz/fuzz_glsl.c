/*
** libFuzzer: runtime GLSL compilation on vulkan:0 (td_kernel_compile through
** glslang, then the pipeline; lavapipe in CI), the input as the source. The
** on-disk caches are off (TRIDENT_VULKAN_PIPELINE_CACHE=0).
** Without a Vulkan device every input is a no-op (the harness says so once).
*/
#include "fuzz_util.h"

static bool have_vulkan;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    setenv("TRIDENT_VULKAN_PIPELINE_CACHE", "0", 1);
    fuzz_setup();
    have_vulkan = td_device_available(TD_VULKAN(0));
    if (!have_vulkan) fprintf(stderr, "fuzz_glsl: no Vulkan device: nothing is compiled\n");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    if (!have_vulkan) return 0;
    char *src = malloc(n + 1), log[1024];
    if (!src) return 0;
    memcpy(src, data, n);
    src[n] = 0;
    td_user_kernel *k = NULL;
    if (td_kernel_compile(TD_VULKAN(0), TD_KERNEL_GLSL, src, NULL, NULL, &k, log, sizeof log) == TD_OK)
        td_kernel_free(k);
    free(src);
    return 0;
}
