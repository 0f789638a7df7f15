// Elementwise iteration shared by fill, copy, unary, binary and where.
// Operand k is binding k; the output is the last binding. Dims are merged on
// the host (vk_elementwise) to at most 4, innermost last.
// C mirror: vk_pc_elem in src/backend_vulkan/vk.h (static_assert on 120 bytes).
#ifndef ELEM_GLSL
#define ELEM_GLSL

layout(constant_id = 0) const uint WG = 256;
layout(local_size_x_id = 0) in;

layout(push_constant) uniform PC {
    uint n;          // elements
    uint ndim;       // 1..4
    uint shape[4];
    uint off[4];     // first element of operand k
    uint stride[16]; // stride[4k + d], elements
    uint sc[4];      // scalars: 32-bit dtypes use sc[k], 64-bit ones sc[2k], sc[2k+1]
} pc;

// Element offsets of operands 0..3 for flat index i of the (merged) shape.
uvec4 elem_offsets(uint i) {
    uvec4 o = uvec4(pc.off[0], pc.off[1], pc.off[2], pc.off[3]);
    if (pc.ndim == 1u) return o + i * uvec4(pc.stride[0], pc.stride[4], pc.stride[8], pc.stride[12]); // no division
    for (int d = int(pc.ndim) - 1; d >= 0; d--) {
        uint c = i % pc.shape[d];
        i /= pc.shape[d];
        o += c * uvec4(pc.stride[d], pc.stride[4 + d], pc.stride[8 + d], pc.stride[12 + d]);
    }
    return o;
}

// Scalar k of the push block as value type of dtype dt.
float sc_f32(uint k) { return uintBitsToFloat(pc.sc[k]); }
double sc_f64(uint k) { return packDouble2x32(uvec2(pc.sc[2u * k], pc.sc[2u * k + 1u])); }
int sc_i32(uint k) { return int(pc.sc[k]); }
int64_t sc_i64(uint k) { return int64_t(pc.sc[2u * k]) | (int64_t(pc.sc[2u * k + 1u]) << 32); }
uint sc_u32(uint k) { return pc.sc[k]; }
#define SCV_0(k) sc_f32(k)
#define SCV_1(k) sc_f64(k)
#define SCV_2(k) sc_f32(k)
#define SCV_3(k) sc_f32(k)
#define SCV_4(k) sc_i32(k)
#define SCV_5(k) sc_i64(k)
#define SCV_6(k) sc_u32(k)
#define SCV_7(k) sc_u32(k)
#define SCALAR(dt, k) CAT(SCV_, dt)(k)

// Grid-stride loop over the n elements.
#define FOR_EACH_ELEMENT(i) for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += gl_NumWorkGroups.x * WG)

#endif
