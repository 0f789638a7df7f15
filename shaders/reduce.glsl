// Workgroup reductions for one value per workgroup: subgroup arithmetic
// first, then one partial per subgroup through shared memory. Never assumes a
// subgroup size (lavapipe has 4 or 8, NVIDIA 32, AMD 64). 64-bit integers take a
// shared-memory tree instead (subgroup ops on them need an extra feature), and so
// does everything in the generic variants (-DTD_NO_SUBGROUP, for devices without
// subgroup arithmetic: shaders.cmake builds them, vk_pipeline.c picks them).
// Before including: ACC (the value type), WG (the workgroup size constant),
// and ACC_NO_SUBGROUP for 64-bit integers.
#ifndef REDUCE_GLSL
#define REDUCE_GLSL

#ifndef TD_NO_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

#define R_ADD 0u
#define R_MAX 1u
#define R_MIN 2u

shared ACC red_sh[WG];
shared uint red_shu[WG];

ACC combine(ACC a, ACC b, uint kind) { return kind == R_ADD ? a + b : kind == R_MAX ? max(a, b) : min(a, b); }

#if defined(ACC_NO_SUBGROUP) || defined(TD_NO_SUBGROUP)
// tree over the WG slots (any WG): slot t takes slot t + h while n slots remain, h = ceil(n / 2)
ACC wg_reduce(ACC v, uint kind) {
    uint t = gl_LocalInvocationID.x;
    red_sh[t] = v;
    barrier();
    for (uint n = WG; n > 1u; n = (n + 1u) / 2u) {
        uint h = (n + 1u) / 2u;
        if (t < n - h) red_sh[t] = combine(red_sh[t], red_sh[t + h], kind);
        barrier();
    }
    ACC r = red_sh[0];
    barrier();
    return r;
}
#else
ACC sg_reduce(ACC v, uint kind) {
    return kind == R_ADD ? subgroupAdd(v) : kind == R_MAX ? subgroupMax(v) : subgroupMin(v);
}

// Every invocation of the workgroup must call it (uniform control flow).
ACC wg_reduce(ACC v, uint kind) {
    v = sg_reduce(v, kind);
    if (subgroupElect()) red_sh[gl_SubgroupID] = v;
    barrier();
    if (gl_SubgroupID == 0u) {
        ACC w = kind == R_ADD ? ACC(0) : red_sh[0]; // max/min are idempotent
        for (uint i = gl_SubgroupInvocationID; i < gl_NumSubgroups; i += gl_SubgroupSize) w = combine(w, red_sh[i], kind);
        w = sg_reduce(w, kind);
        if (subgroupElect()) red_sh[0] = w;
    }
    barrier();
    ACC r = red_sh[0];
    barrier();
    return r;
}
#endif

// min over the workgroup of a uint (argmax tie-breaking)
#ifdef TD_NO_SUBGROUP
uint wg_min_u(uint v) {
    uint t = gl_LocalInvocationID.x;
    red_shu[t] = v;
    barrier();
    for (uint n = WG; n > 1u; n = (n + 1u) / 2u) {
        uint h = (n + 1u) / 2u;
        if (t < n - h) red_shu[t] = min(red_shu[t], red_shu[t + h]);
        barrier();
    }
    uint r = red_shu[0];
    barrier();
    return r;
}
#else
uint wg_min_u(uint v) {
    v = subgroupMin(v);
    if (subgroupElect()) red_shu[gl_SubgroupID] = v;
    barrier();
    if (gl_SubgroupID == 0u) {
        uint w = 0xFFFFFFFFu;
        for (uint i = gl_SubgroupInvocationID; i < gl_NumSubgroups; i += gl_SubgroupSize) w = min(w, red_shu[i]);
        w = subgroupMin(w);
        if (subgroupElect()) red_shu[0] = w;
    }
    barrier();
    uint r = red_shu[0];
    barrier();
    return r;
}
#endif

#endif
