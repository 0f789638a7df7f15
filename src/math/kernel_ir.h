/*
** The kernel IR of a fused math region (internal to src/math/): one kernel
** over a domain (a shape of n elements, flat row-major index i) as a list of
** SSA instructions, each a value per domain element:
**   LOAD   buffer `buf` at element offset sum_d idx_d(i) * strides[d]
**          (stride 0: broadcast); converted from the buffer's dtype
**   CONST  `value`
**   EW     td_math_ew `ew` of the values a[0..n_a)
** then stores (value -> buffer, contiguous over the domain) and at most one
** reduction of one value: the domain as [outer, K, inner] (flat i =
** (o * K + k) * inner + j), reduced over k into the contiguous [outer, inner]
** buffer `red_buf`.
** Values compute in `compute` (float32, or float64 when the region has f64)
** without rounding between instructions except CAST, which rounds to its
** dtype. Comparisons give 0 / 1. Buffers are contiguous tensors bound from
** their element 0: the loaded ones first, then the stored ones.
** The emitters (run_cpu.c, emit_cuda.c, emit_glsl.c) read the IR after
** td_ki_finish merged its dims and, for the CPU, gave each value a slot.
*/
#ifndef TRIDENT_MATH_KERNEL_IR_H
#define TRIDENT_MATH_KERNEL_IR_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "math/graph.h"

typedef enum td_ki_op { TD_KI_LOAD, TD_KI_CONST, TD_KI_EW } td_ki_op;

typedef struct td_ki_insn {
    td_ki_op op;
    int ew;                       /* EW: td_math_ew */
    int n_a, a[3];                /* EW: operand values (ids of earlier instructions) */
    int buf;                      /* LOAD: buffer */
    double value;                 /* CONST */
    td_dtype dtype;               /* the value's dtype in the graph (CAST rounds to it) */
    int64_t strides[TD_MAX_DIMS]; /* LOAD: elements per step of each domain dim */
    int slot; /* after td_ki_finish: the CPU's scratch array (-1 for a LOAD read in place; CONST: its own) */
} td_ki_insn;

#define TD_KI_MAX_BUFS 40

typedef struct td_kernel_ir {
    int ndim; /* domain (merged by td_ki_finish) */
    int64_t shape[TD_MAX_DIMS];
    int64_t n;
    td_dtype compute; /* TD_F32 or TD_F64 */
    int n_insns, cap_insns;
    td_ki_insn *insns;
    int n_bufs, n_loaded; /* buffers [0, n_loaded) are loaded, the rest stored */
    td_dtype buf_dtype[TD_KI_MAX_BUFS];
    int buf_node[TD_KI_MAX_BUFS]; /* the graph node whose value the buffer holds */
    int n_stores;
    int store_value[TD_MATH_MAX_OUTPUTS + TD_KI_MAX_BUFS / 2], store_buf[TD_MATH_MAX_OUTPUTS + TD_KI_MAX_BUFS / 2];
    /* reduction (red_value < 0: none) */
    int red_value, red_op, red_buf; /* red_op: td_math_red (SUM, MEAN, AMAX, AMIN) */
    int64_t outer, k, inner;
    int64_t split; /* after td_ki_finish: GPU kernels cut k into split chunks when there are few outputs (then a
                   ** second kernel reduces the chunks' partials, kept in the compute dtype) */
    bool columns;  /* after td_ki_finish: GPU kernels give each thread an output (inner >= 32), not each group */
    int n_slots;   /* after td_ki_finish */
    struct td_ki_cpu *cpu; /* after td_ki_finish: what the CPU's runs read that depends on the IR alone (run_cpu.c) */
} td_kernel_ir;

/* Construction (plan.c builds regions with these). Each returns the new
** value's id, or -1 out of memory / too many buffers. */
void td_ki_init(td_kernel_ir *ir, int ndim, const int64_t *shape);
void td_ki_free(td_kernel_ir *ir);
int td_ki_buffer(td_kernel_ir *ir, int node, td_dtype dt, bool stored); /* existing or new */
int td_ki_load(td_kernel_ir *ir, int buf, const int64_t *strides, td_dtype dt);
int td_ki_const(td_kernel_ir *ir, double value, td_dtype dt);
int td_ki_ew(td_kernel_ir *ir, int ew, int n_a, const int *a, td_dtype dt);

/* Merge domain dims that every load walks as one, pick the compute dtype,
** (CPU) give values scratch slots, reusing dead ones, and build the CPU's
** per-region state (td_ki_cpu_prepare). Returns false out of memory. */
bool td_ki_finish(td_kernel_ir *ir);

/* Whether load p reads its buffer at element i of the domain (row-major over it). */
bool td_ki_contiguous(const td_kernel_ir *ir, const td_ki_insn *p);

/* The region as C-like pseudo code (`trident math --emit c`). */
void td_ki_print(const td_kernel_ir *ir, const td_math_graph *g, FILE *f);

/* Spellings of ops for emitters and listings. */
const char *td_ki_ew_name(int ew);
const char *td_ki_red_name(int red);

/* The CPU's per-region state (the readers of each value, the raw half loads,
** the region as one program), built once by td_ki_finish; NULL out of memory. */
struct td_ki_cpu *td_ki_cpu_prepare(const td_kernel_ir *ir);
void td_ki_cpu_free(struct td_ki_cpu *k);

/* Run on the CPU (after td_ki_finish): bufs[b] is the host address of buffer
** b's element 0. Returns false out of memory. */
bool td_ki_run_cpu(const td_kernel_ir *ir, void *const *bufs);

/* Kernel source for a GPU backend (malloc'd; NULL when the backend cannot take
** the region, e.g. f64 transcendentals in GLSL, or out of memory), its entry
** point "td_math_kernel" (CUDA) or main (GLSL), and the launch: *grid
** workgroups of *block threads. part 0: the region (bindings: the buffers,
** then with split > 1 the partials [outer * inner * split]); part 1 (only
** with split > 1): the partials reduced into the output (bindings: partials,
** output). */
char *td_ki_emit_cuda(const td_kernel_ir *ir, int part, uint32_t *grid, uint32_t *block);
char *td_ki_emit_glsl(const td_kernel_ir *ir, int part, uint32_t *grid, uint32_t *block);

#endif
