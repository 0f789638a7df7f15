/*
** The fuser (internal to src/math/): a typed math graph cut into steps for
** one device. Matmul, row ops (softmax, log_softmax, var, logsumexp),
** cross-entropy, layer norm and one-hot run as single nodes through
** td_math_node_eval; every maximal elementwise region (EW, CONST, INPUT loads
** with broadcasting, EXPAND / TRANSPOSE / RESHAPE as index maps) with at most
** one reduction (sum, mean, amax, amin over a contiguous run of dims) at its
** end is one generated kernel (kernel_ir.h): run by the CPU interpreter,
** CUDA C through NVRTC, or GLSL through the runtime glslang. Values stored by
** a region and read by later steps are materialized once; elementwise values
** used inside one region are recomputed there. A kernel the device cannot take
** (f64 transcendentals in GLSL, a failed compile) runs its nodes composed.
*/
#ifndef TRIDENT_MATH_PLAN_H
#define TRIDENT_MATH_PLAN_H

#include <stdio.h>

#include "math/graph.h"
#include "math/kernel_ir.h"

typedef struct td_math_plan td_math_plan;

/* CONSTRUCTOR. Cut typed (td_math_graph_specialize'd; copied, so it may be
** freed after) into steps for dev, compiling GPU kernels (cached by source
** through the shared kernel cache). OUT *out: the plan, or NULL on failure.
** Returns TD_OK, TD_ERR_MISUSE (an untyped graph), TD_ERR_OOM. */
td_status td_math_plan_build(const td_math_graph *typed, td_device dev, td_math_plan **out);

/* METHOD. Run p on inputs (one per graph input, of the dtypes and shapes it
** was specialized for, on its device) into outputs[0..n_outputs): new
** tensors (+1, also registered with the current scope like an op's results).
** Records no autograd (the caller does). Returns TD_OK, or the error of a
** wrong input or a failed op; outputs are then NULL. */
td_status td_math_plan_run(td_math_plan *p, td_tensor *const *inputs, td_tensor **outputs);

/* DESTRUCTOR. NULL is a no-op. */
void td_math_plan_free(td_math_plan *p);

/* The steps, and each kernel in lang ("c": the interpreter's listing, "cuda",
** "glsl"), for `trident math --emit`. */
void td_math_plan_print(const td_math_plan *p, const char *lang, FILE *f);

/* GETTERS: steps that are fused kernels, and those that run composed. */
int td_math_plan_kernels(const td_math_plan *p);
int td_math_plan_composed(const td_math_plan *p);

/* ---- a block typed for one set of inputs, fused and composed side by side ----
** For `trident math` (tools/math.c) and tests/test_math_fuse.c, which link
** only the library's exported symbols (as td__dispatch is exported for the
** tests); plan_case.c. */
typedef struct td_math_case td_math_case;

/* CONSTRUCTOR. The block src (parsed) or the nodes[0..n_nodes) (added with
** td_math_add in order; INPUT nodes name names[node.input], args are indices
** into nodes; outputs[0..n_outputs) too), typed for inputs i of dtypes[i],
** ndims[i], shapes[i] (in the order of the graph's inputs: src's first use,
** or names'), planned for dev. OUT *out, NULL on failure. Returns TD_OK, or
** the parser's, the specializer's or the fuser's error. */
TD_API td_status td__math_case_parse(const char *src, int n_in, const char *const *names, const td_dtype *dtypes,
                                     const int *ndims, const int64_t (*shapes)[TD_MAX_DIMS], td_device dev,
                                     td_math_case **out);
TD_API td_status td__math_case_nodes(int n_nodes, const td_math_node *nodes, int n_in, const char *const *names,
                                     int n_outputs, const int *outputs, const td_dtype *dtypes, const int *ndims,
                                     const int64_t (*shapes)[TD_MAX_DIMS], td_device dev, td_math_case **out);
/* METHOD. Run the fused plan (fused) or the composed graph (td_math_graph_eval)
** on inputs (the graph's input order) into outputs[0..td__math_case_outputs). */
TD_API td_status td__math_case_run(td_math_case *c, bool fused, td_tensor *const *inputs, td_tensor **outputs);
/* GETTERS: the graph's inputs (in order), their names, dtypes, shapes, and outputs; the plan's kernels. */
TD_API int td__math_case_inputs(const td_math_case *c);
TD_API const char *td__math_case_input_name(const td_math_case *c, int i);
TD_API int td__math_case_outputs(const td_math_case *c);
TD_API int td__math_case_kernels(const td_math_case *c);
/* METHOD. td_math_plan_print of the case's plan. */
TD_API void td__math_case_print(const td_math_case *c, const char *lang, FILE *f);
/* DESTRUCTOR. NULL is a no-op. */
TD_API void td__math_case_free(td_math_case *c);

#endif
