/*
** A math block typed for one set of inputs with its fused plan beside the
** composed graph (plan.h, td__math_case_*): what `trident math --emit/--bench`
** and tests/test_math_fuse.c drive through the library's exported symbols.
*/
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "math/plan.h"

struct td_math_case {
    td_math_graph g; /* typed */
    td_math_plan *plan;
};

void td__math_case_free(td_math_case *c) {
    if (!c) return;
    td_math_plan_free(c->plan);
    td_math_graph_free(&c->g);
    free(c);
}

/* Type c->g for the inputs named names[0..n_in) and plan it for dev. */
static td_status finish(td_math_case *c, int n_in, const char *const *names, const td_dtype *dtypes, const int *ndims,
                        const int64_t (*shapes)[TD_MAX_DIMS], td_device dev) {
    td_dtype dt[TD_MATH_MAX_INPUTS];
    int nd[TD_MATH_MAX_INPUTS];
    int64_t sh[TD_MATH_MAX_INPUTS][TD_MAX_DIMS];
    for (int k = 0; k < c->g.n_inputs; k++) {
        int f = -1;
        for (int i = 0; i < n_in; i++)
            if (names[i] && !strcmp(names[i], c->g.input_names[k])) f = i;
        if (f < 0) return TD_ERR(TD_ERR_MISUSE, "math block: no shape given for `%s`", c->g.input_names[k]);
        dt[k] = dtypes[f], nd[k] = ndims[f];
        memcpy(sh[k], shapes[f], sizeof sh[k]);
    }
    td_status st = td_math_graph_specialize(&c->g, dt, nd, (const int64_t(*)[TD_MAX_DIMS])sh);
    return st ? st : td_math_plan_build(&c->g, dev, &c->plan);
}

td_status td__math_case_parse(const char *src, int n_in, const char *const *names, const td_dtype *dtypes,
                              const int *ndims, const int64_t (*shapes)[TD_MAX_DIMS], td_device dev,
                              td_math_case **out) {
    if (!out || !src) return TD_ERR(TD_ERR_MISUSE, "td__math_case_parse: NULL argument");
    *out = NULL;
    td_math_case *c = calloc(1, sizeof *c);
    if (!c) return TD_ERR(TD_ERR_OOM, "math block: out of host memory");
    td_status st = td_math_parse(src, &c->g);
    if (!st) st = finish(c, n_in, names, dtypes, ndims, shapes, dev);
    if (st) return td__math_case_free(c), st;
    *out = c;
    return TD_OK;
}

td_status td__math_case_nodes(int n_nodes, const td_math_node *nodes, int n_in, const char *const *names, int n_outputs,
                              const int *outputs, const td_dtype *dtypes, const int *ndims,
                              const int64_t (*shapes)[TD_MAX_DIMS], td_device dev, td_math_case **out) {
    if (!out || n_nodes < 0 || (n_nodes && !nodes) || n_outputs < 1 || n_outputs > TD_MATH_MAX_OUTPUTS)
        return TD_ERR(TD_ERR_MISUSE, "td__math_case_nodes: bad arguments");
    *out = NULL;
    td_math_case *c = calloc(1, sizeof *c);
    int *id = malloc(sizeof *id * (size_t)(n_nodes ? n_nodes : 1));
    if (!c || !id) return free(c), free(id), TD_ERR(TD_ERR_OOM, "math block: out of host memory");
    td_math_graph_init(&c->g);
    td_status st = TD_OK;
    for (int i = 0; i < n_nodes && !st; i++) {
        td_math_node n = nodes[i];
        for (int k = 0; k < n.n_args; k++)
            if (n.args[k] >= i)
                st = TD_ERR(TD_ERR_MISUSE, "td__math_case_nodes: node %d uses a later node", i);
            else if (n.args[k] >= 0)
                n.args[k] = id[n.args[k]];
        if (st) break;
        if (n.kind == TD_MK_INPUT)
            id[i] = n.input >= 0 && n.input < n_in ? td_math_input(&c->g, names[n.input]) : -1;
        else
            id[i] = td_math_add(&c->g, &n);
        if (id[i] < 0) st = TD_ERR(TD_ERR_MISUSE, "td__math_case_nodes: node %d not added", i);
    }
    for (int k = 0; k < n_outputs && !st; k++) {
        if (outputs[k] < 0 || outputs[k] >= n_nodes)
            st = TD_ERR(TD_ERR_MISUSE, "td__math_case_nodes: bad output");
        else
            c->g.outputs[c->g.n_outputs++] = id[outputs[k]];
    }
    free(id);
    if (!st) st = finish(c, n_in, names, dtypes, ndims, shapes, dev);
    if (st) return td__math_case_free(c), st;
    *out = c;
    return TD_OK;
}

td_status td__math_case_run(td_math_case *c, bool fused, td_tensor *const *inputs, td_tensor **outputs) {
    if (!c) return TD_ERR(TD_ERR_MISUSE, "td__math_case_run: NULL case");
    return fused ? td_math_plan_run(c->plan, inputs, outputs) : td_math_graph_eval(&c->g, inputs, outputs);
}

int td__math_case_inputs(const td_math_case *c) { return c ? c->g.n_inputs : 0; }
const char *td__math_case_input_name(const td_math_case *c, int i) {
    return c && i >= 0 && i < c->g.n_inputs ? c->g.input_names[i] : NULL;
}
int td__math_case_outputs(const td_math_case *c) { return c ? c->g.n_outputs : 0; }
int td__math_case_kernels(const td_math_case *c) { return c ? td_math_plan_kernels(c->plan) : 0; }
void td__math_case_print(const td_math_case *c, const char *lang, FILE *f) {
    if (c) td_math_plan_print(c->plan, lang, f);
}
