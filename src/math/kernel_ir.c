/*
** The kernel IR of a fused region (kernel_ir.h): construction, dim merging,
** CPU scratch slots and the readable listing of `trident math --emit c`.
*/
#include "math/kernel_ir.h"

#include <stdlib.h>
#include <string.h>

void td_ki_init(td_kernel_ir *ir, int ndim, const int64_t *shape) {
    memset(ir, 0, sizeof *ir);
    ir->ndim = ndim;
    ir->n = 1;
    for (int d = 0; d < ndim; d++) ir->n *= (ir->shape[d] = shape[d]);
    ir->red_value = -1;
    ir->compute = TD_F32;
}

void td_ki_free(td_kernel_ir *ir) {
    free(ir->insns);
    td_ki_cpu_free(ir->cpu);
    ir->insns = NULL, ir->cpu = NULL;
    ir->n_insns = ir->cap_insns = 0;
}

int td_ki_buffer(td_kernel_ir *ir, int node, td_dtype dt, bool stored) {
    for (int b = 0; b < ir->n_bufs; b++)
        if (ir->buf_node[b] == node && (b >= ir->n_loaded) == stored) return b;
    if (ir->n_bufs == TD_KI_MAX_BUFS) return -1;
    int b = ir->n_bufs++;
    if (!stored) { /* loaded buffers come first: shift the stored ones up */
        for (int s = ir->n_bufs - 1; s > ir->n_loaded; s--) {
            ir->buf_node[s] = ir->buf_node[s - 1];
            ir->buf_dtype[s] = ir->buf_dtype[s - 1];
        }
        for (int s = 0; s < ir->n_stores; s++) ir->store_buf[s]++;
        if (ir->red_value >= 0) ir->red_buf++;
        b = ir->n_loaded++;
    }
    ir->buf_node[b] = node;
    ir->buf_dtype[b] = dt;
    return b;
}

static int push(td_kernel_ir *ir, const td_ki_insn *in) {
    if (ir->n_insns == ir->cap_insns) {
        int cap = ir->cap_insns ? 2 * ir->cap_insns : 32;
        td_ki_insn *p = realloc(ir->insns, (size_t)cap * sizeof *p);
        if (!p) return -1;
        ir->insns = p;
        ir->cap_insns = cap;
    }
    ir->insns[ir->n_insns] = *in;
    return ir->n_insns++;
}

int td_ki_load(td_kernel_ir *ir, int buf, const int64_t *strides, td_dtype dt) {
    for (int v = 0; v < ir->n_insns; v++) { /* the same load twice is one value */
        const td_ki_insn *p = &ir->insns[v];
        if (p->op == TD_KI_LOAD && p->buf == buf && !memcmp(p->strides, strides, sizeof p->strides[0] * ir->ndim))
            return v;
    }
    td_ki_insn in = {.op = TD_KI_LOAD, .buf = buf, .dtype = dt};
    memcpy(in.strides, strides, sizeof in.strides[0] * ir->ndim);
    return push(ir, &in);
}

int td_ki_const(td_kernel_ir *ir, double value, td_dtype dt) {
    for (int v = 0; v < ir->n_insns; v++)
        if (ir->insns[v].op == TD_KI_CONST && ir->insns[v].value == value) return v;
    td_ki_insn in = {.op = TD_KI_CONST, .value = value, .dtype = dt};
    return push(ir, &in);
}

int td_ki_ew(td_kernel_ir *ir, int ew, int n_a, const int *a, td_dtype dt) {
    td_ki_insn in = {.op = TD_KI_EW, .ew = ew, .n_a = n_a, .dtype = dt};
    for (int k = 0; k < n_a; k++) in.a[k] = a[k];
    for (int v = 0; v < ir->n_insns; v++) { /* shared sub-expressions reached through different views */
        const td_ki_insn *p = &ir->insns[v];
        if (p->op == TD_KI_EW && p->ew == ew && p->dtype == dt && !memcmp(p->a, in.a, sizeof in.a[0] * n_a)) return v;
    }
    return push(ir, &in);
}

/* Merge dims d, d+1 where every load steps through them as one dim; drop size-1 dims. */
static void merge_dims(td_kernel_ir *ir) {
    int nd = 0;
    int64_t shape[TD_MAX_DIMS];
    for (int d = 0; d < ir->ndim; d++) {
        if (ir->shape[d] == 1) continue;
        bool merge = nd > 0;
        for (int v = 0; merge && v < ir->n_insns; v++) {
            const td_ki_insn *p = &ir->insns[v];
            /* the previous kept dim sits at strides[nd - 1] after compaction */
            if (p->op == TD_KI_LOAD && p->strides[nd - 1] != p->strides[d] * ir->shape[d]) merge = false;
        }
        for (int v = 0; v < ir->n_insns; v++) {
            td_ki_insn *p = &ir->insns[v];
            if (p->op != TD_KI_LOAD) continue;
            if (merge)
                p->strides[nd - 1] = p->strides[d];
            else
                p->strides[nd] = p->strides[d];
        }
        if (merge)
            shape[nd - 1] *= ir->shape[d];
        else
            shape[nd++] = ir->shape[d];
    }
    if (nd == 0) { /* one element */
        shape[nd++] = 1;
        for (int v = 0; v < ir->n_insns; v++) ir->insns[v].strides[0] = 0;
    }
    ir->ndim = nd;
    memcpy(ir->shape, shape, sizeof shape[0] * nd);
}

bool td_ki_contiguous(const td_kernel_ir *ir, const td_ki_insn *p) {
    int64_t s = 1;
    for (int d = ir->ndim - 1; d >= 0; s *= ir->shape[d--])
        if (p->strides[d] != s && ir->shape[d] != 1) return false;
    return true;
}

bool td_ki_finish(td_kernel_ir *ir) {
    merge_dims(ir);
    /* GPU reductions: a thread per output column where the reduced dims are not the innermost (coalesced),
    ** else a group per output; either cuts k into chunks where that leaves too few groups (~1024 wanted) */
    int64_t outputs = ir->outer * ir->inner;
    ir->split = 1;
    ir->columns = ir->red_value >= 0 && ir->inner >= 32;
    if (ir->columns) {
        int64_t groups = ir->outer * ((ir->inner + 255) / 256), by_k = (ir->k + 63) / 64;
        int64_t want = (1024 + groups - 1) / groups;
        ir->split = by_k < want ? by_k : want;
    } else if (ir->red_value >= 0 && outputs < 256 && ir->k >= 8192) {
        int64_t by_k = (ir->k + 4095) / 4096, by_groups = (1024 + outputs - 1) / outputs;
        ir->split = by_k < by_groups ? by_k : by_groups;
    }
    if (ir->split < 1) ir->split = 1;
    ir->compute = TD_F32;
    for (int b = 0; b < ir->n_bufs; b++)
        if (ir->buf_dtype[b] == TD_F64) ir->compute = TD_F64;
    for (int v = 0; v < ir->n_insns; v++) /* literals are weak: a float32 tensor times 0.5 stays float32 */
        if (ir->insns[v].dtype == TD_F64 && ir->insns[v].op != TD_KI_CONST) ir->compute = TD_F64;
    /* last use of each value; stored and reduced ones live to the end */
    int n = ir->n_insns;
    int *last = malloc(sizeof *last * (size_t)(n ? n : 1)), *free_slots = malloc(sizeof *free_slots * (size_t)(n + 1));
    if (!last || !free_slots) {
        free(last), free(free_slots);
        return false;
    }
    for (int v = 0; v < n; v++) last[v] = v;
    for (int v = 0; v < n; v++)
        for (int k = 0; k < ir->insns[v].n_a; k++) last[ir->insns[v].a[k]] = v;
    for (int s = 0; s < ir->n_stores; s++) last[ir->store_value[s]] = n;
    if (ir->red_value >= 0) last[ir->red_value] = n;
    int n_free = 0;
    ir->n_slots = 0;
    for (int v = 0; v < n; v++) /* literals first, in slots of their own: filled once per thread, never reused */
        if (ir->insns[v].op == TD_KI_CONST) ir->insns[v].slot = ir->n_slots++;
    for (int v = 0; v < n; v++) {
        td_ki_insn *p = &ir->insns[v];
        if (p->op == TD_KI_CONST) continue;
        if (p->op == TD_KI_LOAD && td_ki_contiguous(ir, p) && ir->buf_dtype[p->buf] == ir->compute)
            p->slot = -1; /* read in place */
        else
            p->slot = n_free ? free_slots[--n_free] : ir->n_slots++;
        /* operands dying here give their slots back after the result took one: never in place, so the
        ** compiler's overlap check lets each op's loop run vectorized */
        for (int k = 0; k < p->n_a; k++)
            if (last[p->a[k]] == v && ir->insns[p->a[k]].slot >= 0 && ir->insns[p->a[k]].op != TD_KI_CONST) {
                bool dup = false;
                for (int j = 0; j < k; j++) dup |= p->a[j] == p->a[k];
                if (!dup) free_slots[n_free++] = ir->insns[p->a[k]].slot;
            }
        if (last[v] == v && p->slot >= 0) free_slots[n_free++] = p->slot; /* unused value */
    }
    free(last), free(free_slots);
    td_ki_cpu_free(ir->cpu);
    ir->cpu = td_ki_cpu_prepare(ir);
    return ir->cpu != NULL;
}

const char *td_ki_ew_name(int ew) {
    static const char *names[] = {
#define TD_KI_NAME_(N, a, s) #N,
        TD_MATH_EW_LIST(TD_KI_NAME_)
#undef TD_KI_NAME_
    };
    return ew >= 0 && ew < TD_MEW_COUNT ? names[ew] : "?";
}

const char *td_ki_red_name(int red) {
    static const char *names[] = {"sum", "mean", "amax", "amin", "var", "logsumexp"};
    return red >= 0 && red <= TD_MRED_LOGSUMEXP ? names[red] : "?";
}

static void print_buf(const td_kernel_ir *ir, const td_math_graph *g, int b, FILE *f) {
    int node = ir->buf_node[b];
    if (g && node >= 0 && g->nodes[node].kind == TD_MK_INPUT)
        fprintf(f, "%s", g->input_names[g->nodes[node].input]);
    else
        fprintf(f, "t%d", node);
}

void td_ki_print(const td_kernel_ir *ir, const td_math_graph *g, FILE *f) {
    fprintf(f, "kernel over [");
    for (int d = 0; d < ir->ndim; d++) fprintf(f, "%s%lld", d ? ", " : "", (long long)ir->shape[d]);
    fprintf(f, "] (%lld elements, dims merged), computing in %s\n", (long long)ir->n, td_dtype_name(ir->compute));
    for (int b = 0; b < ir->n_bufs; b++) {
        fprintf(f, "  buffer %d: ", b);
        print_buf(ir, g, b, f);
        fprintf(f, " %s (%s)\n", td_dtype_name(ir->buf_dtype[b]), b < ir->n_loaded ? "read" : "written");
    }
    fprintf(f, "for i in [0, %lld):  /* i = (", (long long)ir->n);
    for (int d = 0; d < ir->ndim; d++) fprintf(f, "%si%d", d ? ", " : "", d);
    fprintf(f, ") */\n");
    for (int v = 0; v < ir->n_insns; v++) {
        const td_ki_insn *p = &ir->insns[v];
        fprintf(f, "  v%d = ", v);
        if (p->op == TD_KI_LOAD) {
            print_buf(ir, g, p->buf, f);
            fprintf(f, "[");
            bool any = false;
            if (td_ki_contiguous(ir, p)) {
                fprintf(f, "i]\n");
                continue;
            }
            for (int d = 0; d < ir->ndim; d++)
                if (p->strides[d]) {
                    fprintf(f, "%si%d", any ? " + " : "", d);
                    if (p->strides[d] != 1) fprintf(f, "*%lld", (long long)p->strides[d]);
                    any = true;
                }
            fprintf(f, "%s]", any ? "" : "0");
        } else if (p->op == TD_KI_CONST) {
            fprintf(f, "%.17g", p->value);
        } else {
            fprintf(f, "%s(", td_ki_ew_name(p->ew));
            for (int k = 0; k < p->n_a; k++) fprintf(f, "%sv%d", k ? ", " : "", p->a[k]);
            fprintf(f, ")");
            if (p->ew == TD_MEW_CAST) fprintf(f, " to %s", td_dtype_name(p->dtype));
        }
        fprintf(f, "\n");
    }
    for (int s = 0; s < ir->n_stores; s++) {
        fprintf(f, "  ");
        print_buf(ir, g, ir->store_buf[s], f);
        fprintf(f, "[i] = v%d\n", ir->store_value[s]);
    }
    if (ir->red_value >= 0) {
        fprintf(f, "  ");
        print_buf(ir, g, ir->red_buf, f);
        fprintf(f, "[o*%lld + j] %s= v%d  /* i = (o*%lld + k)*%lld + j, over k in [0, %lld) */\n", (long long)ir->inner,
                td_ki_red_name(ir->red_op), ir->red_value, (long long)ir->k, (long long)ir->inner, (long long)ir->k);
    }
}
