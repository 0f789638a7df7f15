#version 450
#extension GL_GOOGLE_include_directive : require
// The scale keys of a bf16 operand of matmul_coopmat_bf16.comp: for each row r (of R)
// of x[z], keys[k_off + z k_zs + r] = max over its L elements of the finite |x| as
// bf16 magnitude bits (x & 0x7FFF: ordered as |x| is; inf and NaN count as 0), by
// atomicMax into keys, which the host zeroes first. Element (r, l) of batch entry z
// is x[x_off + batch offset + r rs + l es] (the batch dims as in matmul.comp).
// A workgroup takes 512 elements of each of its rows: 8 rows of 32 invocations
// (consecutive l) where es == 1, else 64 rows of 4 (consecutive r, as where x is
// b of a row-major [K, N], whose rows are its columns); grid (ceil(L / 512),
// ceil(R / rows), batch entries).
#extension GL_EXT_control_flow_attributes : require
#include "types.glsl"

layout(constant_id = 0) const uint WG = 256; // the layouts below assume 256
layout(local_size_x_id = 0) in;
layout(push_constant) uniform PC {
    uint R, L, rs, es;
    uint x_off, k_off, k_zs, zbase;
    uint bdim, bshape[3], x_bs[3];
} pc;
layout(binding = 0) readonly buffer BX { uint16_t x[]; };
layout(binding = 1) buffer BK { uint keys[]; };

#define CH 512u
shared uint smax[64];

void main() {
    uint t = gl_LocalInvocationID.x, z = gl_WorkGroupID.z + pc.zbase, kz = pc.k_off + z * pc.k_zs;
    uint xo = pc.x_off;
    for (int d = int(pc.bdim) - 1; d >= 0; d--) {
        xo += (z % pc.bshape[d]) * pc.x_bs[d];
        z /= pc.bshape[d];
    }
    bool along = pc.es == 1u;
    uint rows = along ? 8u : 64u, lanes = 256u / rows;
    uint rl = along ? t / 32u : t % 64u, l0 = gl_WorkGroupID.x * CH + (along ? t % 32u : t / 64u);
    uint r = gl_WorkGroupID.y * rows + rl, m = 0u;
    if (t < 64u) smax[t] = 0u;
    barrier();
    if (r < pc.R)
        for (uint l = l0; l < min(pc.L, gl_WorkGroupID.x * CH + CH); l += lanes) {
            uint ab = uint(x[xo + r * pc.rs + l * pc.es]) & 0x7FFFu;
            m = max(m, ab < 0x7F80u ? ab : 0u);
        }
    if (m != 0u) atomicMax(smax[rl], m);
    barrier();
    if (t < rows && gl_WorkGroupID.y * rows + t < pc.R && smax[t] != 0u)
        atomicMax(keys[kz + gl_WorkGroupID.y * rows + t], smax[t]);
}
