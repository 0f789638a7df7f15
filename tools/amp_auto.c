/*
** --amp auto (tools/amp_auto.h): bf16, fp16 or fp32 from what td_device_get_info
** says the device runs on tensor cores.
*/
#include "amp_auto.h"

#include <stdio.h>

td_dtype amp_auto_pick(td_device dev, char *why, size_t why_size) {
    td_device_info info;
    if (td_device_get_info(dev, &info) != TD_OK) {
        snprintf(why, why_size, "fp32: no device info (%s)", td_last_error());
        return TD_F32;
    }
    if (dev.type == TD_DEVICE_CUDA && info.arch >= 80) {
        snprintf(why, why_size, "bf16: CUDA sm_%d has bf16 tensor cores", info.arch);
        return TD_BF16;
    }
    if (dev.type == TD_DEVICE_CUDA && info.arch >= 70) {
        snprintf(why, why_size, "fp16 with a GradScaler: CUDA sm_%d has fp16 tensor cores, no bf16 ones", info.arch);
        return TD_F16;
    }
    if (dev.type == TD_DEVICE_VULKAN && info.cooperative_matrix) {
        snprintf(why, why_size, "bf16: %s has cooperative matrices (bf16 runs on its f16 tensor cores)", info.name);
        return TD_BF16;
    }
    snprintf(why, why_size, "fp32: %s has no tensor-core %s", info.name,
             dev.type == TD_DEVICE_CPU      ? "path (cpu)"
             : dev.type == TD_DEVICE_VULKAN ? "path (no cooperative matrices)"
                                            : "bf16 or fp16 (before sm_70)");
    return TD_F32;
}
