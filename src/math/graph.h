/*
** A math block as a DAG (internal to src/math/).
**
** The parser builds it untyped from the source; td_math_graph_specialize gives
** every node a dtype and a shape for one set of bound inputs; the autodiff pass
** builds the backward as another graph of the same kind; the fuser cuts a
** typed graph into steps: fused elementwise regions (one generated kernel per
** backend, at most one reduction at the end) and single nodes that call the
** table ops (matmul, row ops, cross-entropy, layer norm).
**
** Nodes are kept in topological order: a node's args always have smaller ids.
** td_math_add shares identical nodes (common sub-expressions), so a node id is
** its value.
*/
#ifndef TRIDENT_MATH_GRAPH_H
#define TRIDENT_MATH_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "trident/tensor.h"

/* Elementwise ops: X(NAME, arity, spelling). The spelling is the language's
** function name, or the operator for those written as one ("" for ops the
** language has no name for: they appear only in derived backward graphs). */
#define TD_MATH_EW_LIST(X)                                                                                             \
    X(NEG, 1, "-")                                                                                                     \
    X(ABS, 1, "abs")                                                                                                   \
    X(EXP, 1, "exp")                                                                                                   \
    X(LOG, 1, "log")                                                                                                   \
    X(SQRT, 1, "sqrt")                                                                                                 \
    X(RSQRT, 1, "rsqrt")                                                                                               \
    X(SIN, 1, "sin")                                                                                                   \
    X(COS, 1, "cos")                                                                                                   \
    X(TANH, 1, "tanh")                                                                                                 \
    X(SIGMOID, 1, "sigmoid")                                                                                           \
    X(RELU, 1, "relu")                                                                                                 \
    X(GELU, 1, "gelu") /* x * Phi(x), erf form */                                                                      \
    X(SILU, 1, "silu")                                                                                                 \
    X(SOFTPLUS, 1, "softplus") /* log(1 + exp(x)), torch's threshold 20 */                                             \
    X(ERF, 1, "")              /* backward of gelu */                                                                  \
    X(SIGN, 1, "")             /* backward of abs: -1, 0, 1 */                                                         \
    X(CAST, 1, "")             /* to the node's dtype */                                                               \
    X(ADD, 2, "+")                                                                                                     \
    X(SUB, 2, "-")                                                                                                     \
    X(MUL, 2, "*")                                                                                                     \
    X(DIV, 2, "/")                                                                                                     \
    X(POW, 2, "^")                                                                                                     \
    X(MIN, 2, "min")                                                                                                   \
    X(MAX, 2, "max")                                                                                                   \
    X(LT, 2, "<")                                                                                                      \
    X(LE, 2, "<=")                                                                                                     \
    X(GT, 2, ">")                                                                                                      \
    X(GE, 2, ">=")                                                                                                     \
    X(EQ, 2, "==")                                                                                                     \
    X(NE, 2, "!=")                                                                                                     \
    X(WHERE, 3, "where") /* args[0] ? args[1] : args[2]; also `c ? a : b` */                                           \
    X(CLAMP, 3, "clamp") /* min(max(args[0], args[1]), args[2]) */

typedef enum td_math_ew {
#define TD_MATH_EW_ENUM_(N, a, s) TD_MEW_##N,
    TD_MATH_EW_LIST(TD_MATH_EW_ENUM_)
#undef TD_MATH_EW_ENUM_
        TD_MEW_COUNT
} td_math_ew;

/* Reductions over a set of dims. */
typedef enum td_math_red {
    TD_MRED_SUM,
    TD_MRED_MEAN,
    TD_MRED_AMAX,
    TD_MRED_AMIN,
    TD_MRED_VAR,
    TD_MRED_LOGSUMEXP
} td_math_red;

typedef enum td_math_kind {
    TD_MK_INPUT,         /* bound tensor or scalar number `input` (a scalar binds as a 0-d tensor) */
    TD_MK_CONST,         /* numeric literal `value`, a 0-d tensor of the weakest dtype that holds it */
    TD_MK_EW,            /* elementwise `ew` over args[0..arity), broadcast and promoted as torch */
    TD_MK_REDUCE,        /* `red` of args[0] over the dims in `dims` (bit d: dim d; 0: all), keepdim, correction */
    TD_MK_SOFTMAX,       /* softmax of args[0] along `dim` */
    TD_MK_LOG_SOFTMAX,   /* log_softmax of args[0] along `dim` */
    TD_MK_MATMUL,        /* args[0] @ args[1], torch.matmul's broadcasting */
    TD_MK_TRANSPOSE,     /* args[0] with its last two dims swapped (postfix ') */
    TD_MK_EXPAND,        /* args[0] broadcast to `shape` (derived graphs: backward of reductions) */
    TD_MK_RESHAPE,       /* args[0]'s elements as `shape` (derived graphs) */
    TD_MK_ONE_HOT,       /* int64 args[0] as one-hot rows of `classes` columns in `dtype` (derived graphs) */
    TD_MK_CROSS_ENTROPY, /* mean cross-entropy of logits args[0] [N, C] and int64 targets args[1] [N] */
    TD_MK_LAYER_NORM,    /* layer norm of args[0] over its last dim; args[1] weight, args[2] bias, or -1 */
    TD_MK_COUNT
} td_math_kind;

#define TD_MATH_MAX_ARGS 3

typedef struct td_math_node {
    td_math_kind kind;
    int op;                     /* td_math_ew (EW) or td_math_red (REDUCE) */
    int n_args;                 /* arguments used in args */
    int args[TD_MATH_MAX_ARGS]; /* node ids (< this node's id), or -1 for an absent optional operand */
    int input;                  /* INPUT: index into the graph's input names */
    double value;               /* CONST: the literal; LAYER_NORM: eps */
    uint32_t dims;              /* REDUCE: bit mask of reduced dims, after specialization non-negative (0: all) */
    int dim;                    /* SOFTMAX, LOG_SOFTMAX: the dim as written (may be negative) */
    bool keepdim;               /* REDUCE */
    int correction;             /* REDUCE VAR: torch's correction (default 1) */
    int64_t classes;            /* ONE_HOT */
    int n_wdims;                /* REDUCE: dims as written (may be negative; 0 of them: all), turned into dims by */
    int wdims[TD_MAX_DIMS];     /* td_math_graph_specialize; derived nodes give dims directly and n_wdims 0 */
    /* where the node was written: byte offset and length of its sub-expression in the source (errors point here) */
    int src_off, src_len;
    /* set by td_math_graph_specialize (and given for derived nodes: EXPAND, RESHAPE use ndim/shape as their target) */
    td_dtype dtype;
    int ndim;
    int64_t shape[TD_MAX_DIMS];
    int prio; /* set by specialize: torch's promotion priority, 2 a tensor with dims, 1 a 0-d tensor, 0 a literal */
} td_math_node;

/* limits of a graph; derived (backward) graphs need the room: inputs, upstream grads and saved values in,
** one gradient per input out. The language allows TD_MATH_MAX_NAMES bound names and 8 returned values. */
#define TD_MATH_MAX_INPUTS  64
#define TD_MATH_MAX_OUTPUTS 64
#define TD_MATH_MAX_NAMES   32

typedef struct td_math_graph {
    td_math_node *nodes; /* n_nodes of them, in topological order */
    int n_nodes, cap_nodes;
    int n_inputs;                          /* bound names, in order of first use */
    char *input_names[TD_MATH_MAX_INPUTS]; /* owned */
    int input_src_off[TD_MATH_MAX_INPUTS]; /* where each input is first used (parsed graphs; errors point there) */
    int input_src_len[TD_MATH_MAX_INPUTS];
    uint64_t weak_inputs; /* bit i: input i is a bound number, weak in promotion (as torch's Python numbers) */
    int n_outputs;        /* the last statement, or `return a, b, ...` */
    int outputs[TD_MATH_MAX_OUTPUTS]; /* node ids */
    char *source;                     /* owned copy of the block's source (NULL for derived graphs) */
    bool typed;                       /* every node has dtype and shape */
} td_math_graph;

/* Construction (graph.c). td_math_add appends n, or returns the id of an
** identical existing node (same kind, op, args and attributes; source spans
** are not compared), or -1 out of memory. */
void td_math_graph_init(td_math_graph *g);
void td_math_graph_free(td_math_graph *g);
int td_math_add(td_math_graph *g, const td_math_node *n);
int td_math_input(td_math_graph *g, const char *name); /* the INPUT node of name, added on first use; -1 too many */

/* Parse src (parse.c) into g (initialized here; freed by the caller even on
** failure): the untyped graph, g->source a copy of src. Errors (TD_ERR_COMPILE
** for syntax, an unknown function, a wrong argument count or a bad keyword;
** TD_ERR_OOM) carry the caret message of td_math_error. */
td_status td_math_parse(const char *src, td_math_graph *g);

/* Types and shapes for inputs of the given dtypes and shapes (scalars bound as
** 0-d), as torch would compute them. On error returns TD_ERR_SHAPE or
** TD_ERR_DTYPE with a message that names the sub-expression and its line and
** column (td_math_error), e.g.
**   "math block line 2, column 5: shapes [4, 3] and [5] do not broadcast in `x + b`". */
td_status td_math_graph_specialize(td_math_graph *g, const td_dtype *dtypes, const int *ndims,
                                   const int64_t (*shapes)[TD_MAX_DIMS]);

/* Evaluate one typed node with the table ops (composed; records autograd as
** the ops do). args are the node's argument values in order (NULL for an
** absent optional one); the inputs' values for INPUT nodes. Returns a new
** tensor, or NULL with the error set. */
td_tensor *td_math_node_eval(const td_math_graph *g, int node, td_tensor *const *args);

/* Evaluate the whole typed graph with the table ops (compose.c): inputs[i] is
** the value of input i (borrowed); outputs[k] (OUT) receive new tensors in the
** current scope, as ops return them. On failure every output is NULL and the
** error is set. */
td_status td_math_graph_eval(const td_math_graph *g, td_tensor *const *inputs, td_tensor **outputs);

/* Set error s with a one-line message pointing at [src_off, src_len) of g's
** source: "math block line L, column C: <fmt...>", with ", at `<the spot>`"
** added when fmt quotes nothing; the line and a caret line under the spot go
** to td_math_error_excerpt. Without a source (derived graphs) the message is
** "math block (derived): <fmt...>". Returns s. */
td_status td_math_error(const td_math_graph *g, int src_off, int src_len, td_status s, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Type node n (not yet in g; its args typed) as specialize would and add it
** (CSE against typed nodes): for building derived graphs. Returns its id, or
** -1 with the error set. INPUT nodes must come typed. */
int td_math_add_typed(td_math_graph *g, td_math_node *n);

/* The dtype torch's result_type gives for args (node ids) of g, already typed. */
td_dtype td_math_result_type(const td_math_graph *g, int n, const int *args);

#endif
