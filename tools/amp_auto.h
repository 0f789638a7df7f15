/*
** --amp auto for `trident train` and `trident bench`: the low precision a
** device runs fast (tools/amp_auto.c).
*/
#ifndef TRIDENT_TOOLS_AMP_AUTO_H
#define TRIDENT_TOOLS_AMP_AUTO_H

#include <stddef.h>

#include <trident/trident.h>

/* The autocast dtype for dev: TD_BF16 where it has a fast bf16 path (CUDA sm_80+: bf16 tensor cores;
** Vulkan with cooperative matrices: bf16 on the f16 tensor cores), else TD_F16 where fp16 is fast (CUDA
** sm_70 and sm_75 tensor cores), else TD_F32 (no autocast); why gets the reason, one line without a
** newline ("bf16: CUDA sm_90 has bf16 tensor cores"). */
td_dtype amp_auto_pick(td_device dev, char *why, size_t why_size);

#endif /* TRIDENT_TOOLS_AMP_AUTO_H */
