/*
** AVX2 f32 elementwise fast paths: ADD/SUB/MUL/DIV on contiguous rows, one
** operand possibly a broadcast scalar (stride 0), and RELU. The scalar loops in
** cpu_ops_elementwise.c is the reference; these end with a scalar tail.
** With stream set, outputs bypass the cache (non-temporal stores): for outputs
** far larger than the cache this saves the read-for-ownership of each line.
*/
#include <stdint.h>

#include "../cpu_ew.h"
#include "simd_avx2.h"

/* o[i] = A(i) VOP B(i); LA/LB pick a vector load or a broadcast; SOP is the scalar
** operator of the head (up to the alignment streaming needs) and the tail. */
#define BINARY_LOOP_(VOP, SOP, LA, LB)                                                                                 \
    do {                                                                                                               \
        int64_t i = 0;                                                                                                 \
        if (stream) {                                                                                                  \
            for (; i < n && ((uintptr_t)(o + i) % TD_F32_VEC_ALIGN); i++) o[i] = a[i * sa] SOP b[i * sb];              \
            for (; i + 2 * TD_F32_EPR <= n; i += 2 * TD_F32_EPR) {                                                     \
                TD_F32_VEC_STREAM(o + i, VOP(LA(a, i), LB(b, i)));                                                     \
                TD_F32_VEC_STREAM(o + i + TD_F32_EPR, VOP(LA(a, i + TD_F32_EPR), LB(b, i + TD_F32_EPR)));              \
            }                                                                                                          \
            TD_F32_STREAM_FENCE();                                                                                     \
        }                                                                                                              \
        for (; i + 2 * TD_F32_EPR <= n; i += 2 * TD_F32_EPR) {                                                         \
            TD_F32_VEC_STORE(o + i, VOP(LA(a, i), LB(b, i)));                                                          \
            TD_F32_VEC_STORE(o + i + TD_F32_EPR, VOP(LA(a, i + TD_F32_EPR), LB(b, i + TD_F32_EPR)));                   \
        }                                                                                                              \
        for (; i < n; i++) o[i] = a[i * sa] SOP b[i * sb];                                                             \
    } while (0)
#define VEC_(p, i)   TD_F32_VEC_LOAD((p) + (i))
#define BCAST_(p, i) TD_F32_VEC_SET1((p)[0])

#define BINARY_STRIDES_(VOP, SOP)                                                                                      \
    do {                                                                                                               \
        if (sa && sb)                                                                                                  \
            BINARY_LOOP_(VOP, SOP, VEC_, VEC_);                                                                        \
        else if (sa)                                                                                                   \
            BINARY_LOOP_(VOP, SOP, VEC_, BCAST_);                                                                      \
        else if (sb)                                                                                                   \
            BINARY_LOOP_(VOP, SOP, BCAST_, VEC_);                                                                      \
        else                                                                                                           \
            BINARY_LOOP_(VOP, SOP, BCAST_, BCAST_);                                                                    \
    } while (0)

bool cpu_binary_f32_avx2(td_op_kind kind, int64_t n, float *o, const float *a, int64_t sa, const float *b, int64_t sb,
                         bool stream) {
    switch (kind) {
    case TD_OP_ADD: BINARY_STRIDES_(TD_F32_VEC_ADD, +); return true;
    case TD_OP_SUB: BINARY_STRIDES_(TD_F32_VEC_SUB, -); return true;
    case TD_OP_MUL: BINARY_STRIDES_(TD_F32_VEC_MUL, *); return true;
    case TD_OP_DIV: BINARY_STRIDES_(TD_F32_VEC_DIV, /); return true;
    default: return false;
    }
}

void cpu_relu_f32_avx2(int64_t n, float *o, const float *x) {
    int64_t i = 0;
    for (; i + TD_F32_EPR <= n; i += TD_F32_EPR) TD_F32_VEC_STORE(o + i, TD_F32_VEC_RELU(TD_F32_VEC_LOAD(x + i)));
    for (; i < n; i++) o[i] = !(x[i] <= 0) ? x[i] : 0.0f;
}
