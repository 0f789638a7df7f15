#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_atomic_float : require
// MAX_POOL2D_BACKWARD when the window geometry is not given: the saved
// indices (int64 into the H*W plane) say where each gradient goes, so
//   dx[plane, idx[k]] += dy[k]   for every output k of the plane
// with float atomics (dx zero-filled first). Sums of overlapping windows land
// in any order; without overlap (the usual stride == kernel) the result is exact.
// Bindings: 0 dy, 1 indices (uint words), 2 dx. f32 only; needs
// shaderBufferFloat32AtomicAdd. C mirror: vk_pc_pool (vk_ops_pool.c).
layout(constant_id = 0) const uint WG = 256;
layout(local_size_x_id = 0) in;

layout(push_constant) uniform PC {
    uint NC, H, W, Ho;
    uint Wo, KH, KW, s0;
    uint s1;
    int p0, p1;
    uint include_pad;
    uint a_off, i_off, o_off;
} pc;

layout(binding = 0) readonly buffer BA { float dy[]; };
layout(binding = 1) readonly buffer BI { uint idx[]; };
layout(binding = 2) buffer BO { float dx[]; };

void main() {
    uint total = pc.NC * pc.Ho * pc.Wo;
    for (uint k = gl_GlobalInvocationID.x; k < total; k += gl_NumWorkGroups.x * WG) {
        uint plane = k / (pc.Ho * pc.Wo), at = idx[2u * (pc.i_off + k)];
        if (at < pc.H * pc.W) atomicAdd(dx[pc.o_off + plane * pc.H * pc.W + at], dy[pc.a_off + k]);
    }
}
