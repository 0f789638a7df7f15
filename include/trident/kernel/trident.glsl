/*
** trident.glsl: the Trident header for GLSL kernels of custom ops
** (include/trident/kernel.h). A kernel writes `#include <trident.glsl>` after
** its #version line; td_kernel_compile puts this text in its place.
**
** Defines (each overridable by a define of the compile options):
**   TD_BLOCK   invocations per workgroup (the custom op's block, default 256)
**   scalar_t   the compute type (float; double when the op runs in f64)
** Declares, unless TD_NO_ARGS is defined, the push-constant block `td` that
** a custom op passes (C mirror: td_custom_args in kernel.h):
**   td.n      elements of output 0      td.rows, td.cols  input 0 as [rows, cols]
**   td.n_params, td.p[8]                the float parameters of the call
** Helpers: td_offset (strided indexing), f16/bf16 <-> f32, Philox4x32-10 and
** the uniform of Trident's random streams (docs/ARCHITECTURE.md, RNG).
*/
#ifndef TRIDENT_GLSL
#define TRIDENT_GLSL

#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_arithmetic : enable
#extension GL_KHR_shader_subgroup_shuffle : enable

#ifndef TD_BLOCK
#define TD_BLOCK 256
#endif
#ifndef scalar_t
#define scalar_t float
#endif

#ifndef TD_NO_ARGS
layout(push_constant) uniform td_custom_args {
    uint n;
    uint rows;
    uint cols;
    uint n_params;
    float p[8];
} td;
#endif

/* The invocation's element (TD_GRID_ELEMENTS) and row (TD_GRID_ROWS): a grid
** of more than 65535 blocks comes as 2-D, which these fold back. */
uint td_global_id() { return (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * TD_BLOCK + gl_LocalInvocationID.x; }
uint td_row_id() { return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; }

/* Element offset of linear (row-major) index i in a tensor of up to 4 dims
** given as shape and strides (in elements, innermost last; pad with 1 / 0). */
uint td_offset(uint i, uvec4 shape, uvec4 strides) {
    uint off = 0;
    for (int d = 3; d >= 0; d--) {
        off += (i % shape[d]) * strides[d];
        i /= shape[d];
    }
    return off;
}

/* f16 and bf16 as the low 16 bits of a uint (round to nearest even, as the CPU). */
float td_f16_to_f32(uint h) { return unpackHalf2x16(h & 0xFFFFu).x; }
uint td_f32_to_f16(float f) { return packHalf2x16(vec2(f, 0.0)) & 0xFFFFu; }
float td_bf16_to_f32(uint h) { return uintBitsToFloat((h & 0xFFFFu) << 16); }
uint td_f32_to_bf16(float f) {
    uint u = floatBitsToUint(f);
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x7FFFFFu) != 0u) return (u >> 16) | 0x40u; /* NaN stays NaN */
    return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}

/* Philox4x32-10 of (seed = key.x | key.y << 32, counter = ctr.x | ctr.y << 32), as src/core/philox.c. */
uvec4 td_philox(uvec2 key, uvec2 ctr) {
    uvec4 c = uvec4(ctr, 0u, 0u);
    for (int r = 0; r < 10; r++) {
        uint hi0, lo0, hi1, lo1;
        umulExtended(0xD2511F53u, c.x, hi0, lo0);
        umulExtended(0xCD9E8D57u, c.z, hi1, lo1);
        c = uvec4(hi1 ^ c.y ^ key.x, lo1, hi0 ^ c.w ^ key.y, lo0);
        key += uvec2(0x9E3779B9u, 0xBB67AE85u);
    }
    return c;
}
/* Uniform in [0, 1) from one Philox word: element i of stream (seed, offset) is
** word i % 4 of td_philox(seed, offset + i / 4). */
float td_uniform(uint w) { return float(w >> 8) * (1.0 / 16777216.0); }

#endif
