#version 450
#extension GL_GOOGLE_include_directive : require
// FILL: out = value at every element of a strided view (OP 0), and
// ARANGE: out[i] = start + i * step over a contiguous out (OP 1), computed in
// out's value type (float math for f32/f16/bf16, exact for integers).
// out: binding 0. value / start, step come in sc[] as dtype O_DT's bits.
// OP is specialization constant 1. Variants: fill_<dt>, -DO_DT.
#include "types.glsl"
#include "elem.glsl"

layout(constant_id = 1) const uint OP = 0;
layout(binding = 0) writeonly buffer BO { ST(O_DT) o[]; };

void main() {
    VT(O_DT) v = SCALAR(O_DT, 0u), step = SCALAR(O_DT, 1u);
    FOR_EACH_ELEMENT(i) o[elem_offsets(i).x] = SV(O_DT, OP == 0u ? v : v + VT(O_DT)(i) * step);
}
