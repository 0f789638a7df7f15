/*
** trident devices: backends, devices, capabilities and the op x backend
** coverage matrix generated from the op table.
*/
#include <stdio.h>
#include <string.h>

#include "trident/backend.h"
#include "trident/trident.h"

static const char *type_names[TD_DEVICE_TYPE_COUNT] = {"cpu", "cuda", "vulkan"};

static void print_devices(void) {
    for (int type = 0; type < TD_DEVICE_TYPE_COUNT; type++) {
        const char *why = td_backend_unavailable_reason(type);
        if (why) {
            printf("%-7s unavailable: %s\n", type_names[type], why);
            continue;
        }
        const td_backend *be = td_backend_for(type);
        int n = be->iface->device_count();
        for (int i = 0; i < n; i++) {
            td_device_info info;
            if (be->iface->device_info(i, &info) != TD_OK) {
                printf("%s:%d  info failed: %s\n", type_names[type], i, td_last_error());
                continue;
            }
            printf("%s:%d  %s\n", type_names[type], i, info.name);
            printf("        driver %s; %d compute units; subgroup %d", info.driver, info.compute_units,
                   info.subgroup_size);
            if (info.total_memory) printf("; memory %.1f GiB", (double)info.total_memory / (1 << 30));
            printf("\n        fp16 %s, bf16 %s, int8 %s, coopmat %s, timestamps %s; %s\n", info.fp16 ? "yes" : "no",
                   info.bf16 ? "yes" : "no", info.int8 ? "yes" : "no", info.cooperative_matrix ? "yes" : "no",
                   info.timestamps ? "yes" : "no", info.features);
        }
    }
}

/* The operands an op is really called with, for the coverage probe: index
** inputs are int64, comparisons write bool, argmax int64; matrices, conv and
** pool operands have their rank; views are size 1 in every dim. Their buffer
** is a marker that supports() never dereferences. */
static void probe_operands(td_op_kind k, td_dtype dt, td_operand *in, td_operand *out, td_op_params *p) {
    static char marker;
    int rank = 1;
    switch (k) {
    case TD_OP_MATMUL:
    case TD_OP_CROSS_ENTROPY:
    case TD_OP_EMBEDDING:
    case TD_OP_EMBEDDING_BACKWARD: rank = 2; break;
    case TD_OP_CONV2D:
    case TD_OP_CONV2D_BACKWARD_INPUT:
    case TD_OP_CONV2D_BACKWARD_WEIGHT:
    case TD_OP_MAX_POOL2D:
    case TD_OP_MAX_POOL2D_BACKWARD:
    case TD_OP_AVG_POOL2D:
    case TD_OP_AVG_POOL2D_BACKWARD: rank = 4; break;
    default: break;
    }
    for (int i = 0; i < 8; i++) {
        td_operand *v = i < 4 ? &in[i] : &out[i - 4];
        memset(v, 0, sizeof *v);
        v->buf = (td_buffer *)&marker;
        v->dtype = dt;
        v->ndim = rank;
        for (int d = 0; d < rank; d++) v->shape[d] = 1, v->strides[d] = 1;
    }
    switch (k) {
    case TD_OP_EQ:
    case TD_OP_NE:
    case TD_OP_LT:
    case TD_OP_LE:
    case TD_OP_GT:
    case TD_OP_GE: out[0].dtype = TD_BOOL; break;
    case TD_OP_WHERE: in[0].dtype = TD_BOOL; break;
    case TD_OP_ARGMAX:
    case TD_OP_ARGMIN: out[0].dtype = TD_I64; break;
    case TD_OP_CROSS_ENTROPY: in[1].dtype = TD_I64, in[1].ndim = 1, in[2].ndim = 1, out[0].ndim = 0; break;
    case TD_OP_CROSS_ENTROPY_BACKWARD: in[1].ndim = 2, in[2].dtype = TD_I64, in[3].ndim = 1, out[0].ndim = 2; break;
    case TD_OP_CONV2D: in[2].ndim = 1; break;
    case TD_OP_MAX_POOL2D: out[1].dtype = TD_I64; break;
    case TD_OP_MAX_POOL2D_BACKWARD: in[1].dtype = TD_I64; break;
    case TD_OP_EMBEDDING:
    case TD_OP_EMBEDDING_BACKWARD:
    case TD_OP_INDEX_SELECT:
    case TD_OP_GATHER:
    case TD_OP_SCATTER_ADD: in[1].dtype = TD_I64; break;
    case TD_OP_ONE_HOT: in[0].dtype = out[0].dtype = TD_I64; break;
    default: break;
    }
    memset(p, 0, sizeof *p);
    if (k == TD_OP_CONV2D || k == TD_OP_CONV2D_BACKWARD_INPUT || k == TD_OP_CONV2D_BACKWARD_WEIGHT)
        p->conv.stride[0] = p->conv.stride[1] = p->conv.dilation[0] = p->conv.dilation[1] = p->conv.groups = 1;
    if (k == TD_OP_MAX_POOL2D || k == TD_OP_MAX_POOL2D_BACKWARD || k == TD_OP_AVG_POOL2D ||
        k == TD_OP_AVG_POOL2D_BACKWARD)
        p->pool.kernel[0] = p->pool.kernel[1] = p->pool.stride[0] = p->pool.stride[1] = 1;
}

/* An op is covered by a backend when it supports it for some dtype of its class. */
static bool covered(const td_backend *be, td_op_kind k) {
    static const td_dtype try_dt[] = {TD_F32, TD_I64, TD_BOOL};
    const td_op_meta *m = td_op_info(k);
    for (size_t d = 0; d < sizeof try_dt / sizeof try_dt[0]; d++) {
        td_operand views[8];
        td_op_params p;
        probe_operands(k, try_dt[d], views, views + 4, &p);
        int n_in = m->n_in < 0 ? 2 : m->n_in;
        td_op op = {.kind = k, .n_in = n_in, .n_out = m->n_out, .in = views, .out = views + 4, .p = p};
        if (be->iface->supports(0, &op)) return true;
    }
    return false;
}

static void print_ops(void) {
    printf("\n%-24s", "op");
    for (int type = 0; type < TD_DEVICE_TYPE_COUNT; type++) printf("%-8s", type_names[type]);
    printf("\n");
    int total[TD_DEVICE_TYPE_COUNT] = {0};
    for (int k = 0; k < TD_OP_COUNT; k++) {
        printf("%-24s", td_op_name((td_op_kind)k));
        for (int type = 0; type < TD_DEVICE_TYPE_COUNT; type++) {
            const td_backend *be = td_backend_unavailable_reason(type) ? NULL : td_backend_for(type);
            bool ok = be && covered(be, (td_op_kind)k);
            total[type] += ok;
            printf("%-8s", !be ? "-" : ok ? "yes" : "no");
        }
        printf("\n");
    }
    printf("%-24s", "covered");
    for (int type = 0; type < TD_DEVICE_TYPE_COUNT; type++) printf("%d/%-6d", total[type], TD_OP_COUNT);
    printf("\n");
    td_clear_error();
}

int cmd_devices(int argc, char **argv) {
    bool ops = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ops"))
            ops = true;
        else {
            fprintf(stderr, "trident devices: unknown option '%s' (expected --ops)\n", argv[i]);
            return 2;
        }
    }
    print_devices();
    if (ops) print_ops();
    return 0;
}
