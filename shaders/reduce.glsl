// Workgroup reductions for one value per workgroup: subgroup arithmetic
// first, then one partial per subgroup through shared memory. Never assumes a
// subgroup size (lavapipe has 8, NVIDIA 32, AMD 64). 64-bit integers take a
// shared-memory tree instead (subgroup ops on them need an extra feature).
// Before including: ACC (the value type), WG (the workgroup size constant),
// and ACC_NO_SUBGROUP for 64-bit integers.
#ifndef REDUCE_GLSL
#define REDUCE_GLSL

#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#define R_ADD 0u
#define R_MAX 1u
#define R_MIN 2u

shared ACC red_sh[WG];
shared uint red_shu[WG];

ACC combine(ACC a, ACC b, uint kind) { return kind == R_ADD ? a + b : kind == R_MAX ? max(a, b) : min(a, b); }

#ifdef ACC_NO_SUBGROUP
// tree over WG slots; WG is a power of two
ACC wg_reduce(ACC v, uint kind) {
    uint t = gl_LocalInvocationID.x;
    red_sh[t] = v;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (t < s) red_sh[t] = combine(red_sh[t], red_sh[t + s], kind);
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
