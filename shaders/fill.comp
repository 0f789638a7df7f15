#version 450
#extension GL_GOOGLE_include_directive : require
// FILL: out = value at every element of a strided view.
// out: any shape (binding 0). The value comes in sc[] as dtype O_DT's bits.
// Variants: fill_<dt>, -DO_DT.
#include "types.glsl"
#include "elem.glsl"

layout(binding = 0) writeonly buffer BO { ST(O_DT) o[]; };

void main() {
    VT(O_DT) v = SCALAR(O_DT, 0u);
    FOR_EACH_ELEMENT(i) o[elem_offsets(i).x] = SV(O_DT, v);
}
