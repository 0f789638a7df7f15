// variants: all
#version 450
#extension GL_GOOGLE_include_directive : require
// WHERE: out = cond ? a : b. cond (binding 0) bool, a (1) and b (2) and out (3)
// of dtype A_DT; all of out's shape (inputs broadcast). Variants where_<dt>.
#include "types.glsl"
#include "elem.glsl"

layout(binding = 0) readonly buffer BC { uint8_t c[]; };
layout(binding = 1) readonly buffer BA { ST(A_DT) a[]; };
layout(binding = 2) readonly buffer BB { ST(A_DT) b[]; };
layout(binding = 3) writeonly buffer BO { ST(A_DT) o[]; };

void main() {
    FOR_EACH_ELEMENT(i) {
        uvec4 off = elem_offsets(i);
        if (uint(c[off.x]) != 0u) o[off.w] = a[off.y];
        else o[off.w] = b[off.z];
    }
}
