/*
** The CPU runner of a fused region (kernel_ir.h): no compiler at run time,
** a vectorized interpreter. The domain is cut into blocks of BLK elements; a
** block runs each instruction over all its elements into a scratch array per
** live value (slots, reused once a value dies), so the block's values stay
** in L1 and each instruction is one tight loop the compiler vectorizes.
** A value that is one number over the whole block (a literal, a load that
** broadcasts along the block, an op of such values) stays one number: a
** binary op reads it as a scalar, so most instructions read one array.
** A chain of + - * / whose every value but the last only the next op reads
** (x * 1.5 + 0.5 ...) runs as one pass in registers: 8 vectors of the block
** at a time go through all its steps, so its values are never stored.
** A contiguous bf16 / f16 load is read raw: a chain converts it in registers
** while reading it (backend_cpu/x86/half8_avx2.h), and a chain whose value
** only a store reads writes it straight to its buffer, rounded in registers
** (streamed for large outputs), so such a block is one pass over memory.
** A chain's value is always the result of + - * /, a number or a quiet NaN,
** so its f16 loads and its roundings skip the NaN payload fixups that a
** plain conversion needs (half8_avx2.h: half8_f16_load_op, *_pack16*).
** When a block ran as such chains alone (nothing in scratch: every load read
** in place or raw, every value stored by its chain), the rest of the
** thread's blocks run as one span, without the per-block setup.
** A region of + - * / alone over contiguous loads and literals (a bias add,
** a gradient's chain rule) is compiled once, with the region (td_ki_finish:
** td_ki_cpu_prepare), into a program (prog below) that runs over each
** thread's whole range, its shared values in local tiles of 8 vectors: no
** blocks, no scratch; a launch only binds its buffers. A large run prefetches
** the buffers it reads a few rounds ahead.
** The register runners come for three instruction sets (ISA_ below): the
** portable vectors, AVX2 + F16C (8 lanes), and, for blocks that read or
** write bf16 / f16, AVX-512 with AVX512_BF16 (16 lanes; x86/half16_avx512.h),
** picked by cpuid; TRIDENT_CPU_ISA=scalar|avx2|avx512 caps the choice. They
** give the same bits (AVX-512 and AVX2 exactly; the portable vectors may keep
** the other payload of NaN op NaN).
** Other readers convert it once per block into its f32 slot and other stores
** round once, through the vectorized kernels of backend_cpu/cpu_convert.h.
** Blocks spread over the CPU backend's threads (td_parallel_for).
** A reduction cuts the domain [outer, K, inner] into tasks (o, chunk of K);
** each task accumulates its [inner] partials in double (a row's sum in 8
** lanes, added in a fixed order), and one pass combines the chunks into the
** output. The tasks do not depend on the thread count, so neither do the bits.
*/
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu/cpu.h"
#include "backend_cpu/cpu_convert.h"
#include "math/kernel_ir.h"
#include "trident/kernel.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>

#include "backend_cpu/x86/half16_avx512.h"
#include "backend_cpu/x86/half8_avx2.h"
#define CHAIN_X86_    1              /* chain_run_f32_x86: AVX2 + F16C, half conversions in registers */
#define CHAIN_AVX512_ HALF16_AVX512_ /* and with AVX-512 (16 lanes) for half dtypes */
#else
#define CHAIN_X86_    0
#define CHAIN_AVX512_ 0
#endif

/* The register runners' instruction sets, best last: the portable vectors, AVX2 + F16C, AVX-512 (F, BW, DQ,
** BF16; used for blocks that read or write bf16 / f16, where the conversions are the work). TRIDENT_CPU_ISA
** (scalar, avx2 or avx512) caps it, to compare the paths: each gives the same bits. */
enum { ISA_SCALAR, ISA_AVX2, ISA_AVX512 };

/* the best of them this CPU has (cpuid read once: in a VM each traps to the hypervisor) */
static int isa_cpu(void) {
    static int best = -1;
    int b = __atomic_load_n(&best, __ATOMIC_RELAXED);
    if (b >= 0) return b;
    b = ISA_SCALAR;
#if CHAIN_X86_
    if (cpu_has_avx2() && cpu_has_f16c()) b = ISA_AVX2;
#endif
#if CHAIN_AVX512_
    unsigned a, bx, c, d; /* cpuid leaf 7 sub-leaf 1: eax bit 5 is AVX512_BF16 */
    if (b == ISA_AVX2 && cpu_has_avx512f() && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __get_cpuid_count(7, 1, &a, &bx, &c, &d) && (a & (1u << 5)))
        b = ISA_AVX512;
#endif
    __atomic_store_n(&best, b, __ATOMIC_RELAXED);
    return b;
}

/* the instruction set a run uses: the CPU's best, capped by TRIDENT_CPU_ISA (read each run, so a test can switch) */
static int isa_pick(void) {
    static const char *names[] = {"scalar", "avx2", "avx512"};
    int b = isa_cpu();
    const char *e = getenv("TRIDENT_CPU_ISA");
    if (!e || !*e) return b;
    for (int k = 0; k < 3; k++)
        if (!strcmp(e, names[k])) return k < b ? k : b;
    static _Atomic bool told;
    if (!atomic_exchange(&told, true))
        fprintf(stderr, "trident: TRIDENT_CPU_ISA=%s is not scalar, avx2 or avx512; using %s\n", e, names[b]);
    return b;
}

#define BLK 1024

/* outputs of at least this many bytes as float32 (f32, bf16, f16) are written with non-temporal stores (no read for
** ownership) */
#define STREAM_BYTES ((int64_t)16 << 20)

#if defined(__SSE2__)
#include <emmintrin.h>
/* dst[0..n) = src[0..n) bypassing the cache (dst 16-byte aligned); the caller fences */
static void stream_f32(float *dst, const float *src, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) _mm_stream_ps(dst + i, _mm_loadu_ps(src + i));
    for (; i < n; i++) dst[i] = src[i];
}
static void stream_fence(void) { _mm_sfence(); }
#define CAN_STREAM_ 1
#else
#define CAN_STREAM_ 0
static void stream_f32(float *dst, const float *src, int64_t n) { memcpy(dst, src, sizeof *dst * (size_t)n); }
static void stream_fence(void) {}
#endif

/* The hot loops twice on x86-64, for AVX2 and the baseline, picked at load time (an ifunc). Not under
** ThreadSanitizer: an ifunc resolver runs during relocation, before its runtime starts, and crashes there. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define HOT_ __attribute__((target_clones("avx2", "default")))
#else
#define HOT_
#endif
/* The register runners inline every call (their scalar tails' half conversions): a call into code built for the
** baseline runs legacy SSE instructions while the runner's AVX / AVX-512 registers are dirty, and each such
** transition cost as much as a whole tiny launch (0.6 us on the dev CPU). */
#if defined(__GNUC__)
#define FLAT_ __attribute__((flatten))
#else
#define FLAT_
#endif

/* Element offset of flat domain index i for strides s, as a multi-index walk
** (idx: the index of i, advanced by the caller). */
static void unflatten(const td_kernel_ir *ir, int64_t i, int64_t *idx) {
    for (int d = ir->ndim - 1; d >= 0; d--) {
        idx[d] = i % ir->shape[d];
        i /= ir->shape[d];
    }
}

#define BOOL_IN_(x) ((x) != 0)
/* clamp(x, lo, hi) = min(max(x, lo), hi), NaN x stays NaN */
#define CLAMP_(x, lo, hi) ((x) < (lo) ? ((lo) > (hi) ? (hi) : (lo)) : (x) > (hi) ? (hi) : (x))

/* Convert n elements of dtype dt from src (stride s elements) into dst of T. */
#define CONVERT_IN_(T, dst, src, dt, s, n)                                                                             \
    do {                                                                                                               \
        switch (dt) {                                                                                                  \
        case TD_F32: CONVERT_RUN_(T, dst, (const float *)(src), s, n, (T)); break;                                     \
        case TD_F64: CONVERT_RUN_(T, dst, (const double *)(src), s, n, (T)); break;                                    \
        case TD_F16:                                                                                                   \
        case TD_BF16:                                                                                                  \
            if (sizeof(T) == sizeof(float) && (s) == 1) /* vectorized (cpu_convert.h) */                               \
                cpu_half_to_f32(dt, n, (float *)(dst), (const uint16_t *)(src));                                       \
            else if ((dt) == TD_F16)                                                                                   \
                CONVERT_RUN_(T, dst, (const uint16_t *)(src), s, n, (T)cpu_f16_to_f32);                                \
            else                                                                                                       \
                CONVERT_RUN_(T, dst, (const uint16_t *)(src), s, n, (T)cpu_bf16_to_f32);                               \
            break;                                                                                                     \
        case TD_I32: CONVERT_RUN_(T, dst, (const int32_t *)(src), s, n, (T)); break;                                   \
        case TD_I64: CONVERT_RUN_(T, dst, (const int64_t *)(src), s, n, (T)); break;                                   \
        case TD_U8: CONVERT_RUN_(T, dst, (const uint8_t *)(src), s, n, (T)); break;                                    \
        case TD_BOOL: CONVERT_RUN_(T, dst, (const uint8_t *)(src), s, n, (T)BOOL_IN_); break;                          \
        default: break;                                                                                                \
        }                                                                                                              \
    } while (0)
#define CONVERT_RUN_(T, dst, src, s, n, F)                                                                             \
    do {                                                                                                               \
        if ((s) == 1)                                                                                                  \
            for (int64_t j_ = 0; j_ < (n); j_++) (dst)[j_] = F((src)[j_]);                                             \
        else                                                                                                           \
            for (int64_t j_ = 0; j_ < (n); j_++) (dst)[j_] = F((src)[j_ * (s)]);                                       \
    } while (0)

/* Round v to dtype dt (CAST), in T. */
#define ROUND_TO_(T, dt, v)                                                                                            \
    ((dt) == TD_F16    ? (T)cpu_f16_to_f32(cpu_f32_to_f16((float)(v)))                                                 \
     : (dt) == TD_BF16 ? (T)cpu_bf16_to_f32(cpu_f32_to_bf16((float)(v)))                                               \
     : (dt) == TD_F32  ? (T)(float)(v)                                                                                 \
     : (dt) == TD_BOOL ? (T)((v) != 0)                                                                                 \
     : (dt) == TD_F64  ? (T)(v)                                                                                        \
                       : (T)cpu_to_i64((double)(v), -9223372036854775808.0, 9223372036854774784.0))

/* A chain of binary + - * / whose values only the next one reads runs in registers: r = r op b (or b op r when
** the chain's value is the op's right operand) for each step, b an array, one number s, or the raw bits of a half
** load (converted in registers while read). */
#define CHAIN_MAX 32
enum { CHAIN_ADD, CHAIN_SUB, CHAIN_MUL, CHAIN_DIV };
enum { FORM_ARRAY, FORM_ONE, FORM_HALF }; /* an operand: an array of the compute type, one number, half bits */
#define CHAIN_OP_(NAME, RIGHT) (CHAIN_##NAME * 2 + (RIGHT))
/* x = x op b, or b op x for a right op, by CHAIN_OP_ code c: one element (the scalar loops) */
#define CHAIN_APPLY1_(c, x, b)                                                                                         \
    switch (c) {                                                                                                       \
    case CHAIN_OP_(ADD, 0): x = x + b; break;                                                                          \
    case CHAIN_OP_(ADD, 1): x = b + x; break;                                                                          \
    case CHAIN_OP_(SUB, 0): x = x - b; break;                                                                          \
    case CHAIN_OP_(SUB, 1): x = b - x; break;                                                                          \
    case CHAIN_OP_(MUL, 0): x = x * b; break;                                                                          \
    case CHAIN_OP_(MUL, 1): x = b * x; break;                                                                          \
    case CHAIN_OP_(DIV, 0): x = x / b; break;                                                                          \
    default: x = b / x; break;                                                                                         \
    }
#define CHAIN_VECS 8 /* vectors of 32 bytes in registers at a time */
typedef struct chain_step {
    int op;        /* CHAIN_OP_ * 3 + b's FORM_ */
    int v;         /* b's value */
    const void *b; /* b's array or half bits (FORM_ONE: NULL, the number s) */
    double s;
} chain_step;
typedef float f32x8 __attribute__((vector_size(32)));
typedef double f64x4 __attribute__((vector_size(32)));

/* M(k, ...) for each register vector rk, k < CHAIN_VECS. In a runner, LDT(p, j) / LDH(p, j) read the vector at
** element j of an array / of half bits p (typed pointers at the tile), STT(p, j, r, stream) writes one,
** STH(p, j, ra, rb, stream) two as half bits. */
#define CHAIN_EACH_(M, ...)                                                                                            \
    M(0, __VA_ARGS__)                                                                                                  \
    M(1, __VA_ARGS__)                                                                                                  \
    M(2, __VA_ARGS__) M(3, __VA_ARGS__) M(4, __VA_ARGS__) M(5, __VA_ARGS__) M(6, __VA_ARGS__) M(7, __VA_ARGS__)
#define CHAIN_LOAD_(k, LD, p)      r##k = LD(p, k * L);
#define CHAIN_STORE_(k, ST, p, nt) ST(p, k *L, r##k, nt);
/* M(k, k + 1, ...) for each pair of register vectors */
#define CHAIN_PAIRS_(M, ...)            M(0, 1, __VA_ARGS__) M(2, 3, __VA_ARGS__) M(4, 5, __VA_ARGS__) M(6, 7, __VA_ARGS__)
#define CHAIN_STORE2_(k, k1, ST, p, nt) ST(p, k *L, r##k, r##k1, nt);
#define CHAIN_SET_(k, v)                r##k = (v);
#define CHAIN_BL_(k, OP, LD, p)                                                                                        \
    {                                                                                                                  \
        __typeof__(r0) b_ = LD(p, k * L);                                                                              \
        r##k = r##k OP b_;                                                                                             \
    }
#define CHAIN_BR_(k, OP, LD, p)                                                                                        \
    {                                                                                                                  \
        __typeof__(r0) b_ = LD(p, k * L);                                                                              \
        r##k = b_ OP r##k;                                                                                             \
    }
#define CHAIN_SL_(k, OP) r##k = r##k OP bc[t];
#define CHAIN_SR_(k, OP) r##k = bc[t] OP r##k;
/* the switch cases of op NAME (C operator OP): rk op= b (or rk = b op rk), b the step's array, half bits or number */
#define CHAIN_CASES_(NAME, OP, LDT, LDH)                                                                               \
    case CHAIN_OP_(NAME, 0) * 3 + FORM_ARRAY: CHAIN_EACH_(CHAIN_BL_, OP, LDT, bt) break;                               \
    case CHAIN_OP_(NAME, 1) * 3 + FORM_ARRAY: CHAIN_EACH_(CHAIN_BR_, OP, LDT, bt) break;                               \
    case CHAIN_OP_(NAME, 0) * 3 + FORM_ONE: CHAIN_EACH_(CHAIN_SL_, OP) break;                                          \
    case CHAIN_OP_(NAME, 1) * 3 + FORM_ONE: CHAIN_EACH_(CHAIN_SR_, OP) break;                                          \
    case CHAIN_OP_(NAME, 0) * 3 + FORM_HALF: CHAIN_EACH_(CHAIN_BL_, OP, LDH, bh) break;                                \
    case CHAIN_OP_(NAME, 1) * 3 + FORM_HALF: CHAIN_EACH_(CHAIN_BR_, OP, LDH, bh) break;

/* one element of half bits p (dtype h: TD_BF16 or TD_F16) as T, and x rounded into one */
#define LD1H_(T, h, p, i)                                                                                              \
    ((h) == TD_BF16 ? (T)cpu_bf16_to_f32(((const uint16_t *)(p))[i]) : (T)cpu_f16_to_f32(((const uint16_t *)(p))[i]))
#define ST1H_(h, p, i, x)                                                                                              \
    (((uint16_t *)(p))[i] = (h) == TD_BF16 ? cpu_f32_to_bf16((float)(x)) : cpu_f32_to_f16((float)(x)))
/* the portable vectors: T arrays through memcpy, half bits (dtype h) a lane at a time; no streaming */
#define LDT_(p, j)                                                                                                     \
    ({                                                                                                                 \
        __typeof__(r0) v_;                                                                                             \
        memcpy(&v_, (p) + (j), sizeof v_);                                                                             \
        v_;                                                                                                            \
    })
#define LDH_(p, j)                                                                                                     \
    ({                                                                                                                 \
        __typeof__(r0) v_;                                                                                             \
        for (int l_ = 0; l_ < L; l_++) v_[l_] = LD1H_(__typeof__(r0[0]), h, p, (j) + l_);                              \
        v_;                                                                                                            \
    })
#define STT_(p, j, r, stream) memcpy((p) + (j), &(r), sizeof(r))
#define STH_(p, j, ra, rb, stream)                                                                                     \
    do {                                                                                                               \
        for (int l_ = 0; l_ < L; l_++) ST1H_(h, p, (j) + l_, (ra)[l_]), ST1H_(h, p, (j) + L + l_, (rb)[l_]);           \
    } while (0)
#if CHAIN_X86_
/* AVX2 / F16C: bf16 and f16 bits converted in registers (half8_avx2.h); stream: non-temporal, p + i aligned */
#define LDT_X86_(p, j)  ((f32x8)_mm256_loadu_ps((p) + (j)))
#define LDBF_X86_(p, j) ((f32x8)half8_bf16_load((p) + (j)))
#define LDF_X86_(p, j)  ((f32x8)half8_f16_load_op((p) + (j))) /* an op reads it: its NaN may be quiet */
#define STT_X86_(p, j, r, stream)                                                                                      \
    ((stream) ? _mm256_stream_ps((p) + (j), (__m256)(r)) : _mm256_storeu_ps((p) + (j), (__m256)(r)))
#define STH256_X86_(p, j, h, stream)                                                                                   \
    ((stream) ? _mm256_stream_si256((__m256i *)((p) + (j)), (h)) : _mm256_storeu_si256((__m256i *)((p) + (j)), (h)))
#define STBF_X86_(p, j, ra, rb, stream) STH256_X86_(p, j, half8_bf16_pack16_quiet((__m256)(ra), (__m256)(rb)), stream)
#define STF_X86_(p, j, ra, rb, stream)  STH256_X86_(p, j, half8_f16_pack16((__m256)(ra), (__m256)(rb)), stream)
#endif
#if CHAIN_AVX512_
/* AVX-512: 16 lanes (half16_avx512.h); a streamed 64-byte store as two 32-byte ones, so p + j needs the same
** 32-byte alignment as AVX2's */
typedef float f32x16 __attribute__((vector_size(64)));
#define LDT_Z_(p, j)  ((f32x16)_mm512_loadu_ps((p) + (j)))
#define LDBF_Z_(p, j) ((f32x16)half16_bf16_load((p) + (j)))
#define LDF_Z_(p, j)  ((f32x16)half16_f16_load_op((p) + (j)))
#define ST512_Z_(p, v, stream)                                                                                         \
    do {                                                                                                               \
        __m512i v_ = (v);                                                                                              \
        if (stream) {                                                                                                  \
            _mm256_stream_si256((__m256i *)(void *)(p), _mm512_castsi512_si256(v_));                                   \
            _mm256_stream_si256((__m256i *)(void *)(p) + 1, _mm512_extracti64x4_epi64(v_, 1));                         \
        } else                                                                                                         \
            _mm512_storeu_si512((void *)(p), v_);                                                                      \
    } while (0)
#define STT_Z_(p, j, r, stream)       ST512_Z_((p) + (j), _mm512_castps_si512((__m512)(r)), stream)
#define STBF_Z_(p, j, ra, rb, stream) ST512_Z_((p) + (j), half16_bf16_pack32_quiet((__m512)(ra), (__m512)(rb)), stream)
#define STF_Z_(p, j, ra, rb, stream)  ST512_Z_((p) + (j), half16_f16_pack32((__m512)(ra), (__m512)(rb)), stream)
#endif

/* NAME(st, ns, a, af, as, o, oh, h, stream, n): o = the chain's value over n elements, r = a (of FORM_ af;
** FORM_ONE: the number as), then each step, in registers (CHAIN_VECS vectors of V at a time), then a scalar tail.
** Half bits (FORM_HALF operands; o when oh) are of dtype h; stream: o 32-byte aligned, non-temporal where ST*
** has it. */
#define CHAIN_RUN_(NAME, T, V, ATTR, LDT, LDH, STT, STH)                                                               \
    ATTR FLAT_ static void NAME(const chain_step *st, int ns, const void *a, int af, T as, void *o, bool oh, int h,    \
                                bool stream, int64_t n) {                                                              \
        enum { L = (int)(sizeof(V) / sizeof(T)) };                                                                     \
        V r0, r1, r2, r3, r4, r5, r6, r7, bc[CHAIN_MAX], ra;                                                           \
        (void)h, (void)stream;                                                                                         \
        for (int t = 0; t < ns; t++)                                                                                   \
            for (int l = 0; l < L; l++) bc[t][l] = (T)st[t].s;                                                         \
        for (int l = 0; l < L; l++) ra[l] = as;                                                                        \
        int64_t i = 0;                                                                                                 \
        for (; i + CHAIN_VECS * L <= n; i += CHAIN_VECS * L) {                                                         \
            if (af == FORM_ARRAY) {                                                                                    \
                CHAIN_EACH_(CHAIN_LOAD_, LDT, (const T *)a + i)                                                        \
            } else if (af == FORM_HALF) {                                                                              \
                CHAIN_EACH_(CHAIN_LOAD_, LDH, (const uint16_t *)a + i)                                                 \
            } else {                                                                                                   \
                CHAIN_EACH_(CHAIN_SET_, ra)                                                                            \
            }                                                                                                          \
            for (int t = 0; t < ns; t++) {                                                                             \
                const T *bt = (const T *)st[t].b + i; /* the step's tile, as an array or as half bits */               \
                const uint16_t *bh = (const uint16_t *)st[t].b + i;                                                    \
                switch (st[t].op) {                                                                                    \
                    CHAIN_CASES_(ADD, +, LDT, LDH)                                                                     \
                    CHAIN_CASES_(SUB, -, LDT, LDH)                                                                     \
                    CHAIN_CASES_(MUL, *, LDT, LDH)                                                                     \
                    CHAIN_CASES_(DIV, /, LDT, LDH)                                                                     \
                }                                                                                                      \
            }                                                                                                          \
            if (oh && stream) {                                                                                        \
                CHAIN_PAIRS_(CHAIN_STORE2_, STH, (uint16_t *)o + i, true)                                              \
            } else if (oh) {                                                                                           \
                CHAIN_PAIRS_(CHAIN_STORE2_, STH, (uint16_t *)o + i, false)                                             \
            } else if (stream) {                                                                                       \
                CHAIN_EACH_(CHAIN_STORE_, STT, (T *)o + i, true)                                                       \
            } else {                                                                                                   \
                CHAIN_EACH_(CHAIN_STORE_, STT, (T *)o + i, false)                                                      \
            }                                                                                                          \
        }                                                                                                              \
        for (; i < n; i++) { /* the tail, one element at a time */                                                     \
            T x = af == FORM_ARRAY ? ((const T *)a)[i] : af == FORM_HALF ? LD1H_(T, h, a, i) : as;                     \
            for (int t = 0; t < ns; t++) {                                                                             \
                int f = st[t].op % 3;                                                                                  \
                T b = f == FORM_ARRAY  ? ((const T *)st[t].b)[i]                                                       \
                      : f == FORM_HALF ? LD1H_(T, h, st[t].b, i)                                                       \
                                       : (T)st[t].s;                                                                   \
                CHAIN_APPLY1_(st[t].op / 3, x, b)                                                                      \
            }                                                                                                          \
            if (oh)                                                                                                    \
                ST1H_(h, o, i, x);                                                                                     \
            else                                                                                                       \
                ((T *)o)[i] = x;                                                                                       \
        }                                                                                                              \
    }
CHAIN_RUN_(chain_run_f32, float, f32x8, HOT_, LDT_, LDH_, STT_, STH_)
CHAIN_RUN_(chain_run_f64, double, f64x4, HOT_, LDT_, LDH_, STT_, STH_)
#if CHAIN_X86_
CHAIN_RUN_(chain_run_bf16_x86, float, f32x8, HALF8_TARGET_, LDT_X86_, LDBF_X86_, STT_X86_, STBF_X86_)
CHAIN_RUN_(chain_run_f16_x86, float, f32x8, HALF8_TARGET_, LDT_X86_, LDF_X86_, STT_X86_, STF_X86_)
#endif
#if CHAIN_AVX512_
CHAIN_RUN_(chain_run_bf16_z, float, f32x16, HALF16_TARGET_, LDT_Z_, LDBF_Z_, STT_Z_, STBF_Z_)
CHAIN_RUN_(chain_run_f16_z, float, f32x16, HALF16_TARGET_, LDT_Z_, LDF_Z_, STT_Z_, STF_Z_)
#endif
/* the chain runner for f32 compute with instruction set isa (ISA_*): AVX-512 when it reads or writes half bits
** (h), AVX2 / F16C */
static void chain_pick_f32(const chain_step *st, int ns, const void *a, int af, float as, void *o, bool oh, int h,
                           bool stream, int64_t n, int isa) {
#if CHAIN_AVX512_
    if (isa >= ISA_AVX512 && h) {
        (h == TD_F16 ? chain_run_f16_z : chain_run_bf16_z)(st, ns, a, af, as, o, oh, h, stream, n);
        return;
    }
#endif
#if CHAIN_X86_
    if (isa >= ISA_AVX2) {
        (h == TD_F16 ? chain_run_f16_x86 : chain_run_bf16_x86)(st, ns, a, af, as, o, oh, h, stream, n);
        return;
    }
#endif
    chain_run_f32(st, ns, a, af, as, o, oh, h, stream, n);
}
static void chain_pick_f64(const chain_step *st, int ns, const void *a, int af, double as, void *o, bool oh, int h,
                           bool stream, int64_t n, int isa) {
    (void)isa;
    chain_run_f64(st, ns, a, af, as, o, oh, h, stream, n);
}

/* A region of + - * / alone over contiguous loads and literals (f32 compute, at most one half dtype h, no
** reduction) runs as one program over each thread's whole range: 8 vectors at a time go through all its steps, a
** value that more than the next op reads is saved to a local tile of 8 vectors (it stays in L1), each store is
** written from the registers; no per-block setup, no scratch. A step: r = b (START), r = r op b / b op r (as a
** chain's, by code CHAIN_OP_ * 4 + b's form), save r (SAVE), write r to a buffer (STORE_*). */
#define PROG_MAX 96
#define PROG_LOC 16
enum { FORM_LOC = 3 };                                                /* an operand in the local tile loc */
enum { PROG_START = 32, PROG_SAVE = 36, PROG_STORE_T, PROG_STORE_H }; /* START + b's form */
typedef struct prog_step {
    int code;
    int buf;       /* b's buffer or the store's (-1: none); td_ki_run_cpu binds b to it */
    const void *b; /* b's buffer (element 0), or the store's */
    float s;       /* FORM_ONE: the number */
    int loc;       /* FORM_LOC and SAVE: the tile */
} prog_step;
#define PROG_PF 8 /* read streams prefetched */
typedef struct prog {
    prog_step st[PROG_MAX];
    int n, h;                /* steps; the half dtype of the raw loads and half stores (0: none) */
    int n_pf;                /* the distinct buffers the steps read (the first PROG_PF) */
    const char *pf[PROG_PF]; /* their element 0 */
    int pf_es[PROG_PF];      /* their element size */
} prog;

/* Large runs (those that stream their stores) prefetch each buffer the program reads this many elements ahead of
** its round: the hardware prefetchers alone keep too few lines in flight when a round's work fills the core's
** window (a block's backward reads two buffers with some 250 instructions per 128 elements; a copy, a few per
** line). */
#define PROG_AHEAD 1024

#define PROG_BL_(k, OP, LD, p, j) r##k = r##k OP LD(p, (j) + k * L);
#define PROG_BR_(k, OP, LD, p, j) r##k = LD(p, (j) + k * L) OP r##k;
#define PROG_SL_(k, OP)           r##k = r##k OP bc[t];
#define PROG_SR_(k, OP)           r##k = bc[t] OP r##k;
#define PROG_SET_(k, LD, p, j)    r##k = LD(p, (j) + k * L);
/* the switch cases of op NAME (C operator OP) for each form of b */
#define PROG_CASES_(T, NAME, OP, LDT, LDH)                                                                             \
    case CHAIN_OP_(NAME, 0) * 4 + FORM_ARRAY: CHAIN_EACH_(PROG_BL_, OP, LDT, (const T *)q->b, i) break;                \
    case CHAIN_OP_(NAME, 1) * 4 + FORM_ARRAY: CHAIN_EACH_(PROG_BR_, OP, LDT, (const T *)q->b, i) break;                \
    case CHAIN_OP_(NAME, 0) * 4 + FORM_ONE: CHAIN_EACH_(PROG_SL_, OP) break;                                           \
    case CHAIN_OP_(NAME, 1) * 4 + FORM_ONE: CHAIN_EACH_(PROG_SR_, OP) break;                                           \
    case CHAIN_OP_(NAME, 0) * 4 + FORM_HALF: CHAIN_EACH_(PROG_BL_, OP, LDH, (const uint16_t *)q->b, i) break;          \
    case CHAIN_OP_(NAME, 1) * 4 + FORM_HALF: CHAIN_EACH_(PROG_BR_, OP, LDH, (const uint16_t *)q->b, i) break;          \
    case CHAIN_OP_(NAME, 0) * 4 + FORM_LOC: CHAIN_EACH_(PROG_BL_, OP, LDT, loc[q->loc], 0) break;                      \
    case CHAIN_OP_(NAME, 1) * 4 + FORM_LOC: CHAIN_EACH_(PROG_BR_, OP, LDT, loc[q->loc], 0) break;
/* one element's operand b of step q at element i (x: the tail's locals) */
#define PROG_B1_(T, q, i)                                                                                              \
    ((q)->code % 4 == FORM_ARRAY  ? ((const T *)(q)->b)[i]                                                             \
     : (q)->code % 4 == FORM_HALF ? LD1H_(T, pr->h, (q)->b, i)                                                         \
     : (q)->code % 4 == FORM_ONE  ? (T)(q)->s                                                                          \
                                  : xl[(q)->loc])

/* NAME(pr, stream, i0, n): the program over elements [i0, i0 + n), then a scalar tail; stream: non-temporal stores
** (the buffers and i0 32-byte aligned) */
#define PROG_RUN_(NAME, T, V, ATTR, LDT, LDH, STT, STH)                                                                \
    ATTR FLAT_ static void NAME(const prog *pr, bool stream, int64_t i0, int64_t n) {                                  \
        enum { L = (int)(sizeof(V) / sizeof(T)) };                                                                     \
        V r0 = {0}, r1 = r0, r2 = r0, r3 = r0, r4 = r0, r5 = r0, r6 = r0, r7 = r0, bc[PROG_MAX]; /* a START first */   \
        T loc[PROG_LOC][CHAIN_VECS * L] __attribute__((aligned(sizeof(V))));                                           \
        int h = pr->h;                                                                                                 \
        (void)h;                                                                                                       \
        for (int t = 0; t < pr->n; t++)                                                                                \
            for (int l = 0; l < L; l++) bc[t][l] = (T)pr->st[t].s;                                                     \
        int64_t i = i0, end = i0 + n;                                                                                  \
        for (; i + CHAIN_VECS * L <= end; i += CHAIN_VECS * L) {                                                       \
            for (int f = 0; stream && f < pr->n_pf; f++) /* the round PROG_AHEAD elements on */                        \
                for (int c = 0; c < CHAIN_VECS * L * pr->pf_es[f]; c += 64)                                            \
                    __builtin_prefetch(pr->pf[f] + (i + PROG_AHEAD) * pr->pf_es[f] + c, 0, 3);                         \
            for (int t = 0; t < pr->n; t++) {                                                                          \
                const prog_step *q = &pr->st[t];                                                                       \
                switch (q->code) {                                                                                     \
                    PROG_CASES_(T, ADD, +, LDT, LDH)                                                                   \
                    PROG_CASES_(T, SUB, -, LDT, LDH)                                                                   \
                    PROG_CASES_(T, MUL, *, LDT, LDH)                                                                   \
                    PROG_CASES_(T, DIV, /, LDT, LDH)                                                                   \
                case PROG_START + FORM_ONE: CHAIN_EACH_(CHAIN_SET_, bc[t]) break;                                      \
                case PROG_START + FORM_ARRAY: CHAIN_EACH_(PROG_SET_, LDT, (const T *)q->b, i) break;                   \
                case PROG_START + FORM_HALF: CHAIN_EACH_(PROG_SET_, LDH, (const uint16_t *)q->b, i) break;             \
                case PROG_START + FORM_LOC: CHAIN_EACH_(PROG_SET_, LDT, loc[q->loc], 0) break;                         \
                case PROG_SAVE: CHAIN_EACH_(CHAIN_STORE_, STT, loc[q->loc], false) break;                              \
                case PROG_STORE_T:                                                                                     \
                    if (stream) {                                                                                      \
                        CHAIN_EACH_(CHAIN_STORE_, STT, (T *)q->b + i, true)                                            \
                    } else {                                                                                           \
                        CHAIN_EACH_(CHAIN_STORE_, STT, (T *)q->b + i, false)                                           \
                    }                                                                                                  \
                    break;                                                                                             \
                case PROG_STORE_H:                                                                                     \
                    if (stream) {                                                                                      \
                        CHAIN_PAIRS_(CHAIN_STORE2_, STH, (uint16_t *)q->b + i, true)                                   \
                    } else {                                                                                           \
                        CHAIN_PAIRS_(CHAIN_STORE2_, STH, (uint16_t *)q->b + i, false)                                  \
                    }                                                                                                  \
                    break;                                                                                             \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
        for (; i < end; i++) { /* the tail, one element at a time */                                                   \
            T x = 0, xl[PROG_LOC];                                                                                     \
            for (int t = 0; t < pr->n; t++) {                                                                          \
                const prog_step *q = &pr->st[t];                                                                       \
                if (q->code == PROG_SAVE)                                                                              \
                    xl[q->loc] = x;                                                                                    \
                else if (q->code == PROG_STORE_T)                                                                      \
                    ((T *)q->b)[i] = x;                                                                                \
                else if (q->code == PROG_STORE_H)                                                                      \
                    ST1H_(pr->h, (uint16_t *)q->b, i, x);                                                              \
                else if (q->code >= PROG_START)                                                                        \
                    x = PROG_B1_(T, q, i);                                                                             \
                else {                                                                                                 \
                    T b = PROG_B1_(T, q, i);                                                                           \
                    CHAIN_APPLY1_(q->code / 4, x, b)                                                                   \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
    }
PROG_RUN_(prog_run_f32, float, f32x8, HOT_, LDT_, LDH_, STT_, STH_)
#if CHAIN_X86_
PROG_RUN_(prog_run_bf16_x86, float, f32x8, HALF8_TARGET_, LDT_X86_, LDBF_X86_, STT_X86_, STBF_X86_)
PROG_RUN_(prog_run_f16_x86, float, f32x8, HALF8_TARGET_, LDT_X86_, LDF_X86_, STT_X86_, STF_X86_)
#endif
#if CHAIN_AVX512_
PROG_RUN_(prog_run_bf16_z, float, f32x16, HALF16_TARGET_, LDT_Z_, LDBF_Z_, STT_Z_, STBF_Z_)
PROG_RUN_(prog_run_f16_z, float, f32x16, HALF16_TARGET_, LDT_Z_, LDF_Z_, STT_Z_, STF_Z_)
#endif
/* the program runner with instruction set isa (ISA_*): AVX-512 when it reads or writes half bits (its whole rounds of
** 8 vectors; the rest, under 128 elements, as AVX2's 8 vectors and tail: the same bits), AVX2 / F16C */
static void prog_run(const prog *pr, bool stream, int64_t i0, int64_t n, int isa) {
#if CHAIN_AVX512_
    if (isa >= ISA_AVX512 && pr->h) {
        int64_t m = n / (CHAIN_VECS * 16) * (CHAIN_VECS * 16);
        if (m) (pr->h == TD_F16 ? prog_run_f16_z : prog_run_bf16_z)(pr, stream, i0, m);
        i0 += m, n -= m;
        if (!n) return;
    }
#endif
#if CHAIN_X86_
    if (isa >= ISA_AVX2) {
        (pr->h == TD_F16 ? prog_run_f16_x86 : prog_run_bf16_x86)(pr, stream, i0, n);
        return;
    }
#endif
    prog_run_f32(pr, stream, i0, n);
}

/* Whether p is a chain's op. */
static bool chain_op(const td_ki_insn *p);

/* The program of region ir (uses / lazy as run_ctx's) into pr, its steps' buffers unbound (b NULL); false when the
** region is not one (see prog above). */
static bool prog_build(const td_kernel_ir *ir, const int *uses, const bool *lazy, prog *pr) {
    int loc_of[256], n_loc = 0, cur = -1;
    pr->n = 0, pr->h = 0;
    if (ir->compute != TD_F32 || ir->red_value >= 0 || ir->n_insns > 256) return false;
    for (int s = 0; s < ir->n_stores; s++) { /* stores of computed values, f32 or the one half dtype */
        td_dtype dt = ir->buf_dtype[ir->store_buf[s]];
        if (ir->insns[ir->store_value[s]].op != TD_KI_EW) return false;
        if (dt == TD_BF16 || dt == TD_F16) {
            if (pr->h && pr->h != (int)dt) return false;
            pr->h = dt;
        } else if (dt != TD_F32)
            return false;
    }
    for (int v = 0; v < ir->n_insns; v++) {
        const td_ki_insn *p = &ir->insns[v];
        loc_of[v] = -1;
        if (p->op == TD_KI_CONST) continue;
        if (p->op == TD_KI_LOAD) {
            td_dtype dt = ir->buf_dtype[p->buf];
            if (lazy[v] && (!pr->h || pr->h == (int)dt))
                pr->h = dt;
            else if (!(p->slot < 0 && dt == TD_F32))
                return false;
            continue;
        }
        if (!chain_op(p)) return false;
        int x = p->a[0], y = p->a[1], right = cur == y && cur != x;
        const td_ki_insn *b[2] = {&ir->insns[x], &ir->insns[y]};
        if (b[0]->op == TD_KI_CONST && b[1]->op == TD_KI_CONST) return false;
        if (pr->n + 4 + ir->n_stores > PROG_MAX) return false;
        for (int k = cur == x || cur == y ? 1 : 0; k < 2; k++) { /* START with x (unless r holds an operand), op */
            int w = k == 0 ? x : right ? x : y;
            const td_ki_insn *q = &ir->insns[w];
            prog_step *st = &pr->st[pr->n++];
            int form = q->op == TD_KI_CONST  ? FORM_ONE
                       : q->op == TD_KI_LOAD ? (lazy[w] ? FORM_HALF : FORM_ARRAY)
                                             : FORM_LOC;
            if (form == FORM_LOC && loc_of[w] < 0) return false;
            int op = p->ew == TD_MEW_ADD   ? CHAIN_ADD
                     : p->ew == TD_MEW_SUB ? CHAIN_SUB
                     : p->ew == TD_MEW_MUL ? CHAIN_MUL
                                           : CHAIN_DIV;
            st->code = k == 0 ? PROG_START + form : (op * 2 + right) * 4 + form;
            st->buf = q->op == TD_KI_LOAD ? q->buf : -1, st->b = NULL;
            st->s = q->op == TD_KI_CONST ? (float)q->value : 0;
            st->loc = form == FORM_LOC ? loc_of[w] : 0;
        }
        cur = v;
        int n_st = 0, next = v + 1;
        for (int s = 0; s < ir->n_stores; s++)
            if (ir->store_value[s] == v) {
                prog_step *st = &pr->st[pr->n++];
                td_dtype dt = ir->buf_dtype[ir->store_buf[s]];
                st->code = dt == TD_F32 ? PROG_STORE_T : PROG_STORE_H;
                st->buf = ir->store_buf[s], st->b = NULL, st->s = 0, st->loc = 0;
                n_st++;
            }
        while (next < ir->n_insns && ir->insns[next].op != TD_KI_EW) next++;
        int readers = uses[v] - n_st; /* the ops that read v */
        bool by_reg = next < ir->n_insns && (ir->insns[next].a[0] == v) != (ir->insns[next].a[1] == v);
        if (readers >= 2 || (readers == 1 && !by_reg)) {
            if (n_loc == PROG_LOC) return false;
            loc_of[v] = n_loc++;
            pr->st[pr->n++] = (prog_step){.code = PROG_SAVE, .buf = -1, .loc = loc_of[v]};
        }
    }
    return pr->n > 0;
}

/* What a thread keeps across its blocks. */
typedef struct run_state {
    const int *uses;  /* per value: the instructions, stores and reduction that read it */
    const bool *lazy; /* per value: a contiguous bf16 / f16 load under f32 compute, read raw */
    int *raw;         /* per value: 0, or the half dtype whose bits vals[v] points to (a lazy load in this block) */
    bool *stored;     /* per store: a chain wrote it straight to its buffer in this block */
    bool stream;      /* large outputs: non-temporal stores */
    int isa;          /* the register runners' instruction set (ISA_*) */
    bool clean;       /* this block ran as chains alone: nothing written to scratch, every store by its chain */
} run_state;

/* Whether p is a chain's op. */
static bool chain_op(const td_ki_insn *p) {
    return p->op == TD_KI_EW && p->n_a == 2 &&
           (p->ew == TD_MEW_ADD || p->ew == TD_MEW_SUB || p->ew == TD_MEW_MUL || p->ew == TD_MEW_DIV);
}

/* st[ns++] = the step of chain op q, the chain's value its right operand when right (in chain_ of a runner) */
#define CHAIN_STEP_(q, right)                                                                                          \
    do {                                                                                                               \
        int b_ = (q)->a[(right) ? 0 : 1];                                                                              \
        st[ns].op = ((q)->ew == TD_MEW_ADD   ? CHAIN_ADD                                                               \
                     : (q)->ew == TD_MEW_SUB ? CHAIN_SUB                                                               \
                     : (q)->ew == TD_MEW_MUL ? CHAIN_MUL                                                               \
                                             : CHAIN_DIV) *                                                            \
                        2 +                                                                                            \
                    ((right) ? 1 : 0);                                                                                 \
        st[ns].op = st[ns].op * 3 + (uni[b_] ? FORM_ONE : rt->raw[b_] ? FORM_HALF : FORM_ARRAY);                       \
        st[ns].v = b_;                                                                                                 \
        st[ns].b = uni[b_] ? NULL : (const void *)vals[b_];                                                            \
        st[ns].s = uni[b_] ? (double)vals[b_][0] : 0;                                                                  \
        ns++;                                                                                                          \
    } while (0)

/* The runner for compute type T (float or double); SUF names its functions. */
#define RUNNER_(T, SUF, V)                                                                                             \
    /* load instruction p over [i0, i0 + n) into dst; returns true, dst[0] only, when that is one number */            \
    HOT_ static bool load_##SUF(const td_kernel_ir *ir, const td_ki_insn *p, const void *base, int64_t i0, int64_t n,  \
                                T *dst) {                                                                              \
        td_dtype dt = ir->buf_dtype[p->buf];                                                                           \
        size_t es = td_dtype_size(dt);                                                                                 \
        int last = ir->ndim - 1;                                                                                       \
        int64_t idx[TD_MAX_DIMS];                                                                                      \
        unflatten(ir, i0, idx);                                                                                        \
        if (p->strides[last] == 0 && idx[last] + n <= ir->shape[last]) { /* broadcast along the whole block */         \
            int64_t off = 0;                                                                                           \
            for (int d = 0; d < last; d++) off += idx[d] * p->strides[d];                                              \
            CONVERT_IN_(T, dst, (const char *)base + off * (int64_t)es, dt, 0, 1);                                     \
            return true;                                                                                               \
        }                                                                                                              \
        while (n > 0) {                                                                                                \
            int64_t off = 0, run = ir->shape[last] - idx[last];                                                        \
            for (int d = 0; d <= last; d++) off += idx[d] * p->strides[d];                                             \
            if (run > n) run = n;                                                                                      \
            const char *src = (const char *)base + off * (int64_t)es;                                                  \
            if (p->strides[last] == 0) {                                                                               \
                T v = 0;                                                                                               \
                CONVERT_IN_(T, &v, src, dt, 0, 1);                                                                     \
                for (int64_t j = 0; j < run; j++) dst[j] = v;                                                          \
            } else                                                                                                     \
                CONVERT_IN_(T, dst, src, dt, p->strides[last], run);                                                   \
            dst += run, n -= run;                                                                                      \
            idx[last] += run;                                                                                          \
            for (int d = last; d > 0 && idx[d] == ir->shape[d]; d--) idx[d] = 0, idx[d - 1]++;                         \
        }                                                                                                              \
        return false;                                                                                                  \
    }                                                                                                                  \
    /* o = ew(x, y, z) over n elements (the math beside each op, as the table ops compute it); a binary op's y         \
    ** (var 1) or x (var 2) may be one value for all n */                                                              \
    HOT_ static void ew_##SUF(int ew, td_dtype dt, int64_t n, T *o, const T *x, const T *y, const T *z, int var) {     \
        switch ((td_math_ew)ew) {                                                                                      \
        case TD_MEW_NEG: EW_(o[i] = -x[i]); break;                                                                     \
        case TD_MEW_ABS: EW_(o[i] = fabs(x[i])); break;                                                                \
        case TD_MEW_EXP: EW_(o[i] = exp(x[i])); break;                                                                 \
        case TD_MEW_LOG: EW_(o[i] = log(x[i])); break;                                                                 \
        case TD_MEW_SQRT: EW_(o[i] = sqrt(x[i])); break;                                                               \
        case TD_MEW_RSQRT: EW_(o[i] = (T)1 / sqrt(x[i])); break;                                                       \
        case TD_MEW_SIN: EW_(o[i] = sin(x[i])); break;                                                                 \
        case TD_MEW_COS: EW_(o[i] = cos(x[i])); break;                                                                 \
        case TD_MEW_TANH: EW_(o[i] = tanh(x[i])); break;                                                               \
        case TD_MEW_SIGMOID: EW_(o[i] = (T)1 / ((T)1 + exp(-x[i]))); break;                                            \
        case TD_MEW_RELU: EW_(o[i] = x[i] < 0 ? (T)0 : x[i]); break; /* NaN stays NaN */                               \
        case TD_MEW_GELU: EW_(o[i] = (T)0.5 * x[i] * ((T)1 + erf(x[i] * (T)M_SQRT1_2))); break;                        \
        case TD_MEW_SILU: EW_(o[i] = x[i] / ((T)1 + exp(-x[i]))); break;                                               \
        case TD_MEW_SOFTPLUS: EW_(o[i] = x[i] > 20 ? x[i] : log1p(exp(x[i]))); break;                                  \
        case TD_MEW_ERF: EW_(o[i] = erf(x[i])); break;                                                                 \
        case TD_MEW_SIGN: EW_(o[i] = x[i] > 0 ? (T)1 : x[i] < 0 ? (T)-1 : x[i]); break;                                \
        case TD_MEW_CAST: EW_(o[i] = ROUND_TO_(T, dt, x[i])); break;                                                   \
        case TD_MEW_ADD: BIN_(T, X_ + Y_); break;                                                                      \
        case TD_MEW_SUB: BIN_(T, X_ - Y_); break;                                                                      \
        case TD_MEW_MUL: BIN_(T, X_ *Y_); break;                                                                       \
        case TD_MEW_DIV: BIN_(T, X_ / Y_); break;                                                                      \
        case TD_MEW_POW: BIN_(T, pow(X_, Y_)); break;                                                                  \
        case TD_MEW_MIN: BIN_(T, X_ != X_ || Y_ != Y_ ? X_ + Y_ : X_ < Y_ ? X_ : Y_); break;                           \
        case TD_MEW_MAX: BIN_(T, X_ != X_ || Y_ != Y_ ? X_ + Y_ : X_ > Y_ ? X_ : Y_); break;                           \
        case TD_MEW_LT: BIN_(T, (T)(X_ < Y_)); break;                                                                  \
        case TD_MEW_LE: BIN_(T, (T)(X_ <= Y_)); break;                                                                 \
        case TD_MEW_GT: BIN_(T, (T)(X_ > Y_)); break;                                                                  \
        case TD_MEW_GE: BIN_(T, (T)(X_ >= Y_)); break;                                                                 \
        case TD_MEW_EQ: BIN_(T, (T)(X_ == Y_)); break;                                                                 \
        case TD_MEW_NE: BIN_(T, (T)(X_ != Y_)); break;                                                                 \
        case TD_MEW_WHERE: EW_(o[i] = x[i] != 0 ? y[i] : z[i]); break;                                                 \
        case TD_MEW_CLAMP: EW_(o[i] = CLAMP_(x[i], y[i], z[i])); break;                                                \
        case TD_MEW_COUNT: break;                                                                                      \
        }                                                                                                              \
    }                                                                                                                  \
    /* store n values of v at element i0 of buffer base of dtype dt */                                                 \
    HOT_ static void store_##SUF(td_dtype dt, void *base, int64_t i0, int64_t n, const T *v, bool stream) {            \
        if (stream && dt == TD_F32 && sizeof(T) == sizeof(float)) {                                                    \
            stream_f32((float *)base + i0, (const float *)v, n);                                                       \
            return;                                                                                                    \
        }                                                                                                              \
        if ((dt == TD_BF16 || dt == TD_F16) && sizeof(T) == sizeof(float)) { /* vectorized (cpu_convert.h) */          \
            cpu_f32_to_half(dt, n, (uint16_t *)base + i0, (const float *)v, stream);                                   \
            return;                                                                                                    \
        }                                                                                                              \
        switch (dt) {                                                                                                  \
        case TD_F32: EW_(((float *)base)[i0 + i] = (float)v[i]); break;                                                \
        case TD_F64: EW_(((double *)base)[i0 + i] = (double)v[i]); break;                                              \
        case TD_F16: EW_(((uint16_t *)base)[i0 + i] = cpu_f32_to_f16((float)v[i])); break;                             \
        case TD_BF16: EW_(((uint16_t *)base)[i0 + i] = cpu_f32_to_bf16((float)v[i])); break;                           \
        default: EW_(cpu_store(base, i0 + i, dt, (double)v[i])); break;                                                \
        }                                                                                                              \
    }                                                                                                                  \
    /* value v, when one number, as n copies of it in its slot */                                                      \
    static void widen_##SUF(const td_kernel_ir *ir, T *scratch, const T **vals, bool *uni, int v, int64_t n) {         \
        if (!uni[v]) return;                                                                                           \
        T *w = scratch + (int64_t)ir->insns[v].slot * BLK;                                                             \
        for (int64_t i = 1; i < n; i++) w[i] = w[0];                                                                   \
        vals[v] = w, uni[v] = false;                                                                                   \
    }                                                                                                                  \
    /* value v, when read raw (a lazy half load), converted into its slot */                                           \
    static void need_##SUF(const td_kernel_ir *ir, T *scratch, const T **vals, run_state *rt, int v, int64_t n) {      \
        if (!rt->raw[v]) return;                                                                                       \
        rt->clean = false;                                                                                             \
        T *w = scratch + (int64_t)ir->insns[v].slot * BLK;                                                             \
        cpu_half_to_f32((td_dtype)rt->raw[v], n, (float *)(void *)w, (const uint16_t *)(const void *)vals[v]);         \
        vals[v] = w, rt->raw[v] = 0;                                                                                   \
    }                                                                                                                  \
    /* acc[j..] op= v[0..n) where j = domain index % inner (j: the first's); returns the j after the last */           \
    HOT_ static int64_t fold_##SUF(int op, double *acc, int64_t inner, int64_t j, const T *v, int64_t n) {             \
        if ((op == TD_MRED_SUM || op == TD_MRED_MEAN) && inner == 1) { /* 8 lanes, then added pairwise */              \
            double l[8] = {0};                                                                                         \
            int64_t i = 0;                                                                                             \
            for (; i + 8 <= n; i += 8)                                                                                 \
                for (int k = 0; k < 8; k++) l[k] += (double)v[i + k];                                                  \
            for (int k = 0; i < n; i++, k++) l[k] += (double)v[i];                                                     \
            acc[0] += ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));                               \
            return 0;                                                                                                  \
        }                                                                                                              \
        if (op == TD_MRED_SUM || op == TD_MRED_MEAN) { /* runs of the output row */                                    \
            for (int64_t i = 0; i < n;) {                                                                              \
                int64_t run = inner - j < n - i ? inner - j : n - i;                                                   \
                for (int64_t t = 0; t < run; t++) acc[j + t] += (double)v[i + t];                                      \
                i += run, j = j + run == inner ? 0 : j + run;                                                          \
            }                                                                                                          \
            return j;                                                                                                  \
        }                                                                                                              \
        for (int64_t i = 0; i < n; i++) {                                                                              \
            double x = (double)v[i], *a = &acc[j];                                                                     \
            if (op == TD_MRED_AMAX ? (x > *a || x != x) : (x < *a || x != x)) *a = *a != *a ? *a : x; /* NaN stays */  \
            if (++j == inner) j = 0;                                                                                   \
        }                                                                                                              \
        return j;                                                                                                      \
    }                                                                                                                  \
    /* instruction v over the block [i0, i0 + n) into vals[v], uni[v] */                                               \
    static void insn_##SUF(const td_kernel_ir *ir, void *const *bufs, T *scratch, const T **vals, bool *uni,           \
                           run_state *rt, int v, int64_t i0, int64_t n) {                                              \
        const td_ki_insn *p = &ir->insns[v];                                                                           \
        uni[v] = false, rt->raw[v] = 0;                                                                                \
        if (rt->lazy[v]) { /* raw half bits, converted by the readers; the next block prefetched */                    \
            const uint16_t *h = (const uint16_t *)bufs[p->buf] + i0;                                                   \
            vals[v] = (const T *)(const void *)h, rt->raw[v] = ir->buf_dtype[p->buf];                                  \
            for (int64_t j = n; j < 2 * n && n <= BLK && i0 + j < ir->n; j += 32) __builtin_prefetch(h + j);           \
            return;                                                                                                    \
        }                                                                                                              \
        if (p->slot < 0) { /* contiguous and of the compute dtype: read in place, the next block prefetched */         \
            vals[v] = (const T *)bufs[p->buf] + i0;                                                                    \
            for (int64_t j = n; j < 2 * n && n <= BLK && i0 + j < ir->n; j += 64 / (int64_t)sizeof(T))                 \
                __builtin_prefetch(vals[v] + j);                                                                       \
            return;                                                                                                    \
        }                                                                                                              \
        T *o = scratch + (int64_t)p->slot * BLK;                                                                       \
        vals[v] = o;                                                                                                   \
        if (p->op != TD_KI_CONST) rt->clean = false; /* a value in scratch */                                          \
        if (p->op == TD_KI_LOAD)                                                                                       \
            uni[v] = load_##SUF(ir, p, bufs[p->buf], i0, n, o);                                                        \
        else if (p->op == TD_KI_CONST)                                                                                 \
            uni[v] = true; /* o[0] holds it */                                                                         \
        else {                                                                                                         \
            int a0 = p->a[0], a1 = p->n_a > 1 ? p->a[1] : a0, a2 = p->n_a > 2 ? p->a[2] : a0, var = 0;                 \
            for (int k = 0; k < p->n_a; k++) need_##SUF(ir, scratch, vals, rt, p->a[k], n);                            \
            if (uni[a0] && uni[a1] && uni[a2]) {                                                                       \
                ew_##SUF(p->ew, p->dtype, 1, o, vals[a0], vals[a1], vals[a2], 0);                                      \
                uni[v] = true;                                                                                         \
                return;                                                                                                \
            }                                                                                                          \
            if (p->n_a == 2 && (uni[a0] || uni[a1]))                                                                   \
                var = uni[a1] ? 1 : 2;                                                                                 \
            else                                                                                                       \
                for (int k = 0; k < p->n_a; k++) widen_##SUF(ir, scratch, vals, uni, p->a[k], n);                      \
            ew_##SUF(p->ew, p->dtype, n, o, vals[a0], vals[a1], vals[a2], var);                                        \
        }                                                                                                              \
    }                                                                                                                  \
    /* Instructions v.. as one chain, when v starts one: binary + - * / each of whose value but the last only the      \
    ** next one reads, literals and in-place or raw loads between them run first. Returns the chain's last             \
    ** instruction, or -1 (nothing ran but literals and in-place or raw loads). */                                     \
    static int chain_##SUF(const td_kernel_ir *ir, void *const *bufs, T *scratch, const T **vals, bool *uni,           \
                           run_state *rt, int v, int64_t i0, int64_t n) {                                              \
        chain_step st[CHAIN_MAX];                                                                                      \
        const td_ki_insn *p = &ir->insns[v];                                                                           \
        if (!chain_op(p) || (uni[p->a[0]] && uni[p->a[1]])) return -1;                                                 \
        int first = p->a[0], ns = 0, last = v;                                                                         \
        CHAIN_STEP_(p, 0);                                                                                             \
        for (int j = v + 1; j < ir->n_insns && ns < CHAIN_MAX && rt->uses[last] == 1; j++) {                           \
            const td_ki_insn *q = &ir->insns[j];                                                                       \
            if (q->op == TD_KI_CONST || (q->op == TD_KI_LOAD && (q->slot < 0 || rt->lazy[j]))) {                       \
                insn_##SUF(ir, bufs, scratch, vals, uni, rt, j, i0, n);                                                \
                continue;                                                                                              \
            }                                                                                                          \
            if (!chain_op(q) || (q->a[0] == last) == (q->a[1] == last)) break;                                         \
            CHAIN_STEP_(q, q->a[1] == last);                                                                           \
            last = j;                                                                                                  \
        }                                                                                                              \
        /* one op gains from the registers only when it converts a raw operand or may write a store */                 \
        if (ns < 2 && !rt->raw[p->a[0]] && !rt->raw[p->a[1]] && rt->uses[last] != 1) return -1;                        \
        /* h: the half dtype whose bits the chain reads raw (the first met); other half operands convert first */      \
        int h = uni[first] ? 0 : rt->raw[first];                                                                       \
        for (int t = 0; t < ns; t++) {                                                                                 \
            int w = st[t].v;                                                                                           \
            if (st[t].op % 3 != FORM_HALF) continue;                                                                   \
            if (!h) h = rt->raw[w];                                                                                    \
            if (rt->raw[w] != h) need_##SUF(ir, scratch, vals, rt, w, n);                                              \
            if (!rt->raw[w]) st[t].b = vals[w], st[t].op += FORM_ARRAY - FORM_HALF; /* converted */                    \
        }                                                                                                              \
        void *o = scratch + (int64_t)ir->insns[last].slot * BLK;                                                       \
        int os = -1;                                                                                                   \
        for (int s = 0; s < ir->n_stores && rt->uses[last] == 1; s++) { /* its one reader a store: straight there */   \
            td_dtype dt = ir->buf_dtype[ir->store_buf[s]];                                                             \
            bool half = sizeof(T) == sizeof(float) && (dt == TD_BF16 || dt == TD_F16) && (!h || (int)dt == h);         \
            if (ir->store_value[s] == last && (half || (td_dtype_size(dt) == sizeof(T) && td_dtype_is_float(dt)))) {   \
                o = (char *)bufs[ir->store_buf[s]] + i0 * (int64_t)td_dtype_size(dt), os = s;                          \
                if (half) h = dt;                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
        bool oh = os >= 0 && ir->buf_dtype[ir->store_buf[os]] != TD_F32 && ir->buf_dtype[ir->store_buf[os]] != TD_F64; \
        bool stream = os >= 0 && rt->stream && !((uintptr_t)o & 31);                                                   \
        int af = uni[first] ? FORM_ONE : rt->raw[first] ? FORM_HALF : FORM_ARRAY;                                      \
        if (af == FORM_HALF && rt->raw[first] != h) { /* a chain writing f16 from bf16 bits (or back) */               \
            need_##SUF(ir, scratch, vals, rt, first, n);                                                               \
            af = FORM_ARRAY;                                                                                           \
        }                                                                                                              \
        const void *a = af == FORM_ONE ? NULL : (const void *)vals[first];                                             \
        chain_pick_##SUF(st, ns, a, af, af == FORM_ONE ? vals[first][0] : 0, o, oh, h, stream, n, rt->isa);            \
        if (os >= 0)                                                                                                   \
            rt->stored[os] = true;                                                                                     \
        else                                                                                                           \
            rt->clean = false; /* its value in scratch */                                                              \
        vals[last] = (const T *)o, uni[last] = false, rt->raw[last] = oh ? h : 0;                                      \
        return last;                                                                                                   \
    }                                                                                                                  \
    /* the block [i0, i0 + n): every instruction, then the stores; vals[v] is value v's array, of one number           \
    ** (vals[v][0]) when uni[v], of raw half bits when rt->raw[v] */                                                   \
    static void block_##SUF(const td_kernel_ir *ir, void *const *bufs, T *scratch, const T **vals, bool *uni,          \
                            run_state *rt, int64_t i0, int64_t n) {                                                    \
        for (int s = 0; s < ir->n_stores; s++) rt->stored[s] = false;                                                  \
        rt->clean = ir->red_value < 0;                                                                                 \
        for (int v = 0; v < ir->n_insns; v++) {                                                                        \
            int end = chain_##SUF(ir, bufs, scratch, vals, uni, rt, v, i0, n);                                         \
            if (end >= 0)                                                                                              \
                v = end;                                                                                               \
            else                                                                                                       \
                insn_##SUF(ir, bufs, scratch, vals, uni, rt, v, i0, n);                                                \
        }                                                                                                              \
        for (int s = 0; s < ir->n_stores; s++) {                                                                       \
            if (rt->stored[s]) continue; /* a chain wrote it */                                                        \
            rt->clean = false;                                                                                         \
            need_##SUF(ir, scratch, vals, rt, ir->store_value[s], n);                                                  \
            widen_##SUF(ir, scratch, vals, uni, ir->store_value[s], n);                                                \
            store_##SUF(ir->buf_dtype[ir->store_buf[s]], bufs[ir->store_buf[s]], i0, n, vals[ir->store_value[s]],      \
                        rt->stream && !((uintptr_t)bufs[ir->store_buf[s]] & 15));                                      \
        }                                                                                                              \
        if (ir->red_value >= 0) {                                                                                      \
            need_##SUF(ir, scratch, vals, rt, ir->red_value, n);                                                       \
            widen_##SUF(ir, scratch, vals, uni, ir->red_value, n);                                                     \
        }                                                                                                              \
    }

#define EW_(stmt)                                                                                                      \
    for (int64_t i = 0; i < n; i++) stmt
/* o[i] = e(X_, Y_) with X_ = x[i] or x[0] (var 2), Y_ = y[i] or y[0] (var 1) */
#define BIN_(T, e)                                                                                                     \
    do {                                                                                                               \
        if (var == 1) {                                                                                                \
            const T Y_ = y[0];                                                                                         \
            for (int64_t i = 0; i < n; i++) {                                                                          \
                const T X_ = x[i];                                                                                     \
                o[i] = (e);                                                                                            \
            }                                                                                                          \
        } else if (var == 2) {                                                                                         \
            const T X_ = x[0];                                                                                         \
            for (int64_t i = 0; i < n; i++) {                                                                          \
                const T Y_ = y[i];                                                                                     \
                o[i] = (e);                                                                                            \
            }                                                                                                          \
        } else                                                                                                         \
            for (int64_t i = 0; i < n; i++) {                                                                          \
                const T X_ = x[i], Y_ = y[i];                                                                          \
                o[i] = (e);                                                                                            \
            }                                                                                                          \
    } while (0)

RUNNER_(float, f32, f32x8)
RUNNER_(double, f64, f64x4)

typedef struct run_ctx {
    const td_kernel_ir *ir;
    void *const *bufs;
    int64_t chunks, chunk; /* reduction: K cut into chunks of chunk */
    double *partials;      /* [outer * chunks, inner] */
    const int *uses;       /* per value: the instructions, stores and reduction that read it */
    const bool *lazy;      /* per value: a load read raw (run_state) */
    const prog *pr;        /* the region as one program, or NULL */
    int isa;               /* the register runners' instruction set (ISA_*) */
    _Atomic bool oom;      /* a worker found no memory for its scratch */
} run_ctx;

/* blocks [b0, b1) of a region that is one program: the program over their elements at once */
static void run_prog_piece(void *user, int64_t b0, int64_t b1) {
    run_ctx *c = user;
    const td_kernel_ir *ir = c->ir;
    bool stream = CAN_STREAM_ && ir->n * (int64_t)sizeof(float) >= STREAM_BYTES;
    for (int t = 0; t < c->pr->n; t++) /* the stores' buffers aligned for 32-byte non-temporal stores */
        if (c->pr->st[t].code >= PROG_STORE_T && ((uintptr_t)c->pr->st[t].b & 31)) stream = false;
    int64_t i0 = b0 * BLK, end = b1 * BLK < ir->n ? b1 * BLK : ir->n;
    prog_run(c->pr, stream, i0, end - i0, c->isa);
    if (stream) stream_fence();
}

static double red_init(int op) { return op == TD_MRED_AMAX ? -INFINITY : op == TD_MRED_AMIN ? INFINITY : 0; }

/* one piece of work: blocks [b0, b1) of the domain, or reduction tasks [b0, b1) */
static void run_piece(void *user, int64_t b0, int64_t b1) {
    run_ctx *c = user;
    const td_kernel_ir *ir = c->ir;
    bool f64 = ir->compute == TD_F64, stream = CAN_STREAM_ && ir->n * (int64_t)sizeof(float) >= STREAM_BYTES;
    size_t es = f64 ? sizeof(double) : sizeof(float), ni = (size_t)(ir->n_insns ? ir->n_insns : 1);
    void *scratch = malloc(es * BLK * (size_t)(ir->n_slots ? ir->n_slots : 1));
    const void **vals = malloc(sizeof *vals * ni);
    bool *uni = malloc(sizeof *uni * ni), *stored = malloc(sizeof *stored * (size_t)(ir->n_stores + 1));
    int *raw = calloc(ni, sizeof *raw);
    run_state rt = {.uses = c->uses, .lazy = c->lazy, .raw = raw, .stored = stored, .stream = stream, .isa = c->isa};
    if (!scratch || !vals || !uni || !stored || !raw) {
        free(scratch), free(vals), free(uni), free(stored), free(raw);
        c->oom = true;
        return;
    }
    for (int v = 0; v < ir->n_insns; v++) /* literals: their slot's element 0, filled once */
        if (ir->insns[v].op == TD_KI_CONST) {
            if (f64)
                ((double *)scratch)[ir->insns[v].slot * BLK] = ir->insns[v].value;
            else
                ((float *)scratch)[ir->insns[v].slot * BLK] = (float)ir->insns[v].value;
        }
    bool span = false; /* the last block ran clean (run_state): the rest of the piece as one block */
    for (int64_t b = b0; b < b1;) {
        int64_t lo, hi, o = 0, nb = 1;
        if (ir->red_value < 0) {
            nb = span ? b1 - b : 1;
            lo = b * BLK, hi = lo + nb * BLK < ir->n ? lo + nb * BLK : ir->n;
        } else {
            o = b / c->chunks;
            int64_t k0 = (b % c->chunks) * c->chunk, k1 = k0 + c->chunk < ir->k ? k0 + c->chunk : ir->k;
            lo = (o * ir->k + k0) * ir->inner, hi = (o * ir->k + k1) * ir->inner;
        }
        double *acc = ir->red_value >= 0 ? c->partials + b * ir->inner : NULL;
        b += nb;
        for (int64_t i0 = lo, j = 0, step = nb > 1 ? hi - lo : BLK; i0 < hi; i0 += step) {
            int64_t n = hi - i0 < step ? hi - i0 : step;
            if (f64)
                block_f64(ir, c->bufs, scratch, (const double **)vals, uni, &rt, i0, n);
            else
                block_f32(ir, c->bufs, scratch, (const float **)vals, uni, &rt, i0, n);
            span = rt.clean;
            if (!acc) continue;
            if (f64)
                j = fold_f64(ir->red_op, acc, ir->inner, j, vals[ir->red_value], n);
            else
                j = fold_f32(ir->red_op, acc, ir->inner, j, vals[ir->red_value], n);
        }
    }
    if (stream) stream_fence();
    free(scratch), free(vals), free(uni), free(stored), free(raw);
}

/* The region's reductions over their tasks (see the top of the file). */
static bool run_reduction(const td_kernel_ir *ir, void *const *bufs, run_ctx *c, int64_t cost) {
    /* enough tasks for the threads: cut K into chunks when there are few outputs rows */
    int64_t outputs = ir->outer * ir->inner, chunks = 1;
    while (ir->outer * chunks < 64 && ir->k / (chunks * 2) * ir->inner >= BLK && outputs * chunks * 2 <= (1 << 22))
        chunks *= 2;
    c->chunks = chunks;
    c->chunk = (ir->k + chunks - 1) / chunks;
    int64_t tasks = ir->outer * chunks;
    c->partials = malloc(sizeof(double) * (size_t)(tasks * ir->inner > 0 ? tasks * ir->inner : 1));
    if (!c->partials) return false;
    for (int64_t i = 0; i < tasks * ir->inner; i++) c->partials[i] = red_init(ir->red_op);
    if (ir->k > 0) td_parallel_for(tasks, cost * c->chunk * ir->inner, run_piece, c);
    /* combine the chunks of each output row, in chunk order */
    double *row = malloc(sizeof(double) * (size_t)(ir->inner > 0 ? ir->inner : 1));
    if (!row) {
        free(c->partials);
        return false;
    }
    void *out = bufs[ir->red_buf];
    td_dtype dt = ir->buf_dtype[ir->red_buf];
    bool add = ir->red_op == TD_MRED_SUM || ir->red_op == TD_MRED_MEAN;
    for (int64_t o = 0; o < ir->outer; o++) {
        for (int64_t j = 0; j < ir->inner; j++) row[j] = red_init(ir->red_op);
        for (int64_t ch = 0; ch < chunks; ch++) {
            const double *p = c->partials + (o * chunks + ch) * ir->inner;
            if (add)
                for (int64_t j = 0; j < ir->inner; j++) row[j] += p[j];
            else
                for (int64_t j = 0; j < ir->inner; j++) {
                    double v = p[j], *a = &row[j];
                    if (v != v || *a != *a)
                        *a = *a != *a ? *a : v; /* NaN propagates */
                    else if (ir->red_op == TD_MRED_AMAX ? v > *a : v < *a)
                        *a = v;
                }
        }
        for (int64_t j = 0; j < ir->inner; j++)
            cpu_store(out, o * ir->inner + j, dt, ir->red_op == TD_MRED_MEAN ? row[j] / (double)ir->k : row[j]);
    }
    free(row);
    free(c->partials);
    return !c->oom;
}

/* What the runs of a region read that depends on its IR alone, built once (td_ki_finish) rather than per run. */
struct td_ki_cpu {
    int *uses;   /* per value: the instructions, stores and reduction that read it */
    bool *lazy;  /* per value: a contiguous bf16 / f16 load under f32 compute, read raw */
    bool is_one; /* the region is one program: pr, its buffers unbound */
    prog pr;
};

void td_ki_cpu_free(struct td_ki_cpu *k) {
    if (!k) return;
    free(k->uses), free(k->lazy), free(k);
}

struct td_ki_cpu *td_ki_cpu_prepare(const td_kernel_ir *ir) {
    struct td_ki_cpu *k = calloc(1, sizeof *k);
    if (!k) return NULL;
    k->uses = calloc((size_t)(ir->n_insns ? ir->n_insns : 1), sizeof *k->uses);
    k->lazy = calloc((size_t)(ir->n_insns ? ir->n_insns : 1), sizeof *k->lazy);
    if (!k->uses || !k->lazy) return td_ki_cpu_free(k), NULL;
    for (int v = 0; v < ir->n_insns; v++) {
        const td_ki_insn *p = &ir->insns[v];
        td_dtype dt = p->op == TD_KI_LOAD ? ir->buf_dtype[p->buf] : TD_F32;
        k->lazy[v] = ir->compute == TD_F32 && (dt == TD_BF16 || dt == TD_F16) && td_ki_contiguous(ir, p);
    }
    for (int v = 0; v < ir->n_insns; v++)
        if (ir->insns[v].op == TD_KI_EW)
            for (int j = 0; j < ir->insns[v].n_a; j++) k->uses[ir->insns[v].a[j]]++;
    for (int s = 0; s < ir->n_stores; s++) k->uses[ir->store_value[s]]++;
    if (ir->red_value >= 0) k->uses[ir->red_value]++;
    k->is_one = prog_build(ir, k->uses, k->lazy, &k->pr);
    return k;
}

bool td_ki_run_cpu(const td_kernel_ir *ir, void *const *bufs) {
    const struct td_ki_cpu *k = ir->cpu;
    run_ctx c = {.ir = ir, .bufs = bufs, .uses = k->uses, .lazy = k->lazy, .isa = isa_pick()};
    int64_t cost = (int64_t)ir->n_insns + ir->n_stores + 1;
    if (k->is_one) { /* the program with its steps bound to this run's buffers */
        prog pr;
        pr.n = k->pr.n, pr.h = k->pr.h, pr.n_pf = 0;
        for (int t = 0; t < pr.n; t++) {
            prog_step *q = &pr.st[t];
            *q = k->pr.st[t];
            if (q->buf < 0) continue;
            q->b = bufs[q->buf];
            if (q->code >= PROG_SAVE || (q->code % 4 != FORM_ARRAY && q->code % 4 != FORM_HALF)) continue;
            int f = 0;
            while (f < pr.n_pf && pr.pf[f] != (const char *)q->b) f++;
            if (f < pr.n_pf || f == PROG_PF) continue; /* seen, or beyond the streams prefetched */
            pr.pf[f] = q->b, pr.pf_es[f] = q->code % 4 == FORM_HALF ? 2 : (int)sizeof(float), pr.n_pf++;
        }
        c.pr = &pr;
        td_parallel_for((ir->n + BLK - 1) / BLK, cost * BLK, run_prog_piece, &c);
        return true;
    }
    if (ir->red_value < 0) {
        td_parallel_for((ir->n + BLK - 1) / BLK, cost * BLK, run_piece, &c);
        return !c.oom;
    }
    return run_reduction(ir, bufs, &c, cost);
}
