/*
** trident devices: backends, devices, capabilities and the op x backend
** coverage matrix generated from the op table, plus a row per custom op
** registered in the process (--load LIB.so: a library whose constructor
** registers them, as examples/custom_ops/register.c).
**
** The one tool that includes trident/backend.h: the matrix asks each backend's
** supports() slot about every op, and the device list shows why a backend is
** unavailable (td_backend_unavailable_reason); the public device.h has neither.
*/
#include <dlfcn.h>
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
            printf("%s:%d  %s%s\n", type_names[type], i, info.name,
                   info.emulated ? " (software; --device auto skips it)" : "");
            printf("        driver %s; %d compute units; subgroup %d", info.driver, info.compute_units,
                   info.subgroup_size);
            if (info.total_memory) printf("; memory %.1f GiB", (double)info.total_memory / (1 << 30));
            printf("\n        fp16 %s, bf16 %s, int8 %s, coopmat %s, timestamps %s; %s\n", info.fp16 ? "yes" : "no",
                   info.bf16 ? "yes" : "no", info.int8 ? "yes" : "no", info.cooperative_matrix ? "yes" : "no",
                   info.timestamps ? "yes" : "no", info.features);
        }
    }
}

/* ---- coverage: each op asked of each backend on a small, valid invocation ---- */

static char dummy_buffer; /* non-NULL handle: supports() must only look at geometry and dtypes */

static void set_operand(td_operand *v, td_dtype dt, int ndim, const int64_t *shape) {
    memset(v, 0, sizeof *v);
    v->buf = (td_buffer *)&dummy_buffer;
    v->dtype = dt;
    v->ndim = ndim;
    int64_t stride = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        v->shape[i] = shape[i];
        v->strides[i] = stride;
        stride *= shape[i];
    }
}
#define OPERAND(v, dt, ...)                                                                                            \
    set_operand((v), (dt), (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})

/* A representative invocation of op k with value dtype dt: shapes that satisfy
** the op's rules, int64 index operands, bool masks, absent optional operands. */
static void probe_op(td_op_kind k, td_dtype dt, td_op *op, td_operand *in, td_operand *out) {
    const td_op_meta *m = td_op_info(k);
    *op = (td_op){.kind = k, .n_in = m->n_in < 0 ? 2 : m->n_in, .n_out = m->n_out, .in = in, .out = out};
    for (int i = 0; i < 8; i++) OPERAND(&in[i], dt, 2, 3);
    for (int i = 0; i < 4; i++) OPERAND(&out[i], dt, 2, 3);
    op->p.reduce.dims = 1;
    switch (k) {
    case TD_OP_EQ:
    case TD_OP_NE:
    case TD_OP_LT:
    case TD_OP_LE:
    case TD_OP_GT:
    case TD_OP_GE: OPERAND(&out[0], TD_BOOL, 2, 3); break;
    case TD_OP_WHERE: OPERAND(&in[0], TD_BOOL, 2, 3); break;
    case TD_OP_SUM:
    case TD_OP_MEAN:
    case TD_OP_MAX:
    case TD_OP_MIN:
    case TD_OP_VAR:
    case TD_OP_LOGSUMEXP: OPERAND(&out[0], k == TD_OP_SUM && !td_dtype_is_float(dt) ? TD_I64 : dt, 1, 3); break;
    case TD_OP_ARGMAX:
    case TD_OP_ARGMIN: OPERAND(&out[0], TD_I64, 1, 3); break;
    case TD_OP_MATMUL:
        OPERAND(&in[1], dt, 3, 4);
        OPERAND(&out[0], dt, 2, 4);
        break;
    case TD_OP_LINEAR_GELU: /* x [2, 3], w [4, 3], b [4] -> y, h [2, 4] */
        OPERAND(&in[0], dt, 2, 3);
        OPERAND(&in[1], dt, 4, 3);
        OPERAND(&in[2], dt, 4);
        OPERAND(&out[0], dt, 2, 4);
        OPERAND(&out[1], dt, 2, 4);
        break;
    case TD_OP_LAYER_NORM:
        OPERAND(&in[1], dt, 3);
        OPERAND(&in[2], dt, 3);
        OPERAND(&out[1], dt, 2);
        OPERAND(&out[2], dt, 2);
        op->p.norm.eps = 1e-5;
        break;
    case TD_OP_CROSS_ENTROPY:
        OPERAND(&in[1], TD_I64, 2);
        in[2].buf = NULL;
        set_operand(&out[0], dt, 0, NULL);
        op->p.xent.ignore_index = -100;
        op->p.xent.reduction = TD_REDUCTION_MEAN;
        break;
    case TD_OP_CROSS_ENTROPY_BACKWARD:
        set_operand(&in[0], dt, 0, NULL);
        OPERAND(&in[2], TD_I64, 2);
        in[3].buf = NULL;
        op->p.xent.ignore_index = -100;
        op->p.xent.reduction = TD_REDUCTION_MEAN;
        break;
    case TD_OP_CONV2D:
    case TD_OP_CONV2D_BACKWARD_INPUT:
    case TD_OP_CONV2D_BACKWARD_WEIGHT: {
        td_operand x, w, y;
        OPERAND(&x, dt, 1, 2, 4, 4);
        OPERAND(&w, dt, 3, 2, 3, 3);
        OPERAND(&y, dt, 1, 3, 2, 2);
        if (k == TD_OP_CONV2D)
            in[0] = x, in[1] = w, OPERAND(&in[2], dt, 3), out[0] = y;
        else if (k == TD_OP_CONV2D_BACKWARD_INPUT)
            in[0] = y, in[1] = w, out[0] = x;
        else
            in[0] = y, in[1] = x, out[0] = w;
        op->p.conv = (typeof(op->p.conv)){{1, 1}, {0, 0}, {1, 1}, 1};
        break;
    }
    case TD_OP_MAX_POOL2D:
    case TD_OP_MAX_POOL2D_BACKWARD:
    case TD_OP_AVG_POOL2D:
    case TD_OP_AVG_POOL2D_BACKWARD: {
        td_operand x, y, idx;
        OPERAND(&x, dt, 1, 2, 4, 4);
        OPERAND(&y, dt, 1, 2, 2, 2);
        OPERAND(&idx, TD_I64, 1, 2, 2, 2);
        if (k == TD_OP_MAX_POOL2D)
            in[0] = x, out[0] = y, out[1] = idx;
        else if (k == TD_OP_MAX_POOL2D_BACKWARD)
            in[0] = y, in[1] = idx, out[0] = x;
        else if (k == TD_OP_AVG_POOL2D)
            in[0] = x, out[0] = y;
        else
            in[0] = y, out[0] = x;
        op->p.pool = (typeof(op->p.pool)){{2, 2}, {2, 2}, {0, 0}, true};
        break;
    }
    case TD_OP_EMBEDDING:
        OPERAND(&in[0], dt, 5, 3);
        OPERAND(&in[1], TD_I64, 2);
        break;
    case TD_OP_EMBEDDING_BACKWARD:
        OPERAND(&in[1], TD_I64, 2);
        OPERAND(&out[0], dt, 5, 3);
        op->p.embedding.padding_idx = -1;
        break;
    case TD_OP_INDEX_SELECT:
        OPERAND(&in[0], dt, 4, 3);
        OPERAND(&in[1], TD_I64, 2);
        break;
    case TD_OP_GATHER:
        OPERAND(&in[0], dt, 4, 3);
        OPERAND(&in[1], TD_I64, 2, 3);
        break;
    case TD_OP_SCATTER_ADD:
        OPERAND(&in[0], dt, 4, 3);
        OPERAND(&in[1], TD_I64, 2, 3);
        OPERAND(&out[0], dt, 4, 3);
        break;
    case TD_OP_CAT:
        OPERAND(&out[0], dt, 4, 3);
        op->p.axis.dim = 0;
        break;
    case TD_OP_ONE_HOT:
        OPERAND(&in[0], dt, 2);
        OPERAND(&out[0], TD_I64, 2, 5);
        op->p.one_hot.num_classes = 5;
        break;
    case TD_OP_DROPOUT: op->p.rng.p = 0.5; break;
    case TD_OP_ATTENTION:
    case TD_OP_ATTENTION_BACKWARD: { /* q, k, v [1,2,3,4]; lse f32 (f64 for f64) [1,2,3]; no mask */
        td_operand *qkv = k == TD_OP_ATTENTION ? in : in + 1, *res = k == TD_OP_ATTENTION ? out : in + 5;
        td_dtype lse_dt = dt == TD_F64 ? TD_F64 : TD_F32;
        for (int i = 0; i < 3; i++) OPERAND(&qkv[i], dt, 1, 2, 3, 4);
        qkv[3].buf = NULL;
        OPERAND(&res[0], dt, 1, 2, 3, 4);
        OPERAND(&res[1], lse_dt, 1, 2, 3);
        if (k == TD_OP_ATTENTION_BACKWARD) {
            OPERAND(&in[0], dt, 1, 2, 3, 4);
            for (int i = 0; i < 3; i++) OPERAND(&out[i], dt, 1, 2, 3, 4);
        }
        op->p.attn.scale = 0.5;
        break;
    }
    case TD_OP_ADAM_STEP:
        out[3].buf = NULL;
        op->p.adam = (typeof(op->p.adam)){.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .step = 1};
        break;
    case TD_OP_SGD_STEP:
        out[1].buf = NULL;
        op->p.sgd.lr = 0.1;
        break;
    case TD_OP_AMP_UNSCALE: /* out = (grad, found_inf f32 [1]) */
        OPERAND(&out[1], TD_F32, 1);
        op->p.amp.inv_scale = 1.0 / 1024;
        break;
    case TD_OP_RMSPROP_STEP:
        out[2].buf = out[3].buf = NULL;
        op->p.rmsprop = (typeof(op->p.rmsprop)){.lr = 1e-2, .alpha = 0.99, .eps = 1e-8};
        break;
    default: break;
    }
}

static bool dtype_in_class(td_dtype dt, int cls) {
    return cls == TD_DTS_ALL || (cls == TD_DTS_NUM && dt != TD_BOOL) || (cls == TD_DTS_FLOAT && td_dtype_is_float(dt));
}

/* How many dtypes of op k's class the backend supports, out of *of. */
static int coverage(const td_backend *be, td_op_kind k, int *of) {
    int n = 0;
    *of = 0;
    for (int dt = 0; dt < TD_DTYPE_COUNT; dt++) {
        if (!dtype_in_class((td_dtype)dt, td_op_info(k)->dtypes)) continue;
        if (k == TD_OP_ONE_HOT && (td_dtype_is_float((td_dtype)dt) || dt == TD_U8)) continue; /* indices only */
        (*of)++;
        td_operand in[8], out[4];
        td_op op;
        probe_op(k, (td_dtype)dt, &op, in, out);
        n += be->iface->supports(0, &op);
    }
    return n;
}

static void print_ops(void) {
    printf("\ndtypes supported per op (of the op class's dtypes)\n%-24s", "op");
    for (int type = 0; type < TD_DEVICE_TYPE_COUNT; type++) printf("%-8s", type_names[type]);
    printf("\n");
    int total[TD_DEVICE_TYPE_COUNT] = {0};
    for (int k = 0; k < TD_OP_COUNT; k++) {
        printf("%-24s", td_op_name((td_op_kind)k));
        for (int type = 0; type < TD_DEVICE_TYPE_COUNT; type++) {
            const td_backend *be = td_backend_unavailable_reason(type) ? NULL : td_backend_for(type);
            int of = 0, n = be ? coverage(be, (td_op_kind)k, &of) : 0;
            char cell[32];
            snprintf(cell, sizeof cell, "%d/%d", n, of);
            total[type] += n > 0;
            printf("%-8s", !be ? "-" : cell);
        }
        printf("\n");
    }
    printf("%-24s", "ops covered");
    for (int type = 0; type < TD_DEVICE_TYPE_COUNT; type++) printf("%d/%-6d", total[type], TD_OP_COUNT);
    printf("\n");
    /* custom ops (include/trident/kernel.h) registered in this process, e.g. by a --load library */
    for (int i = 0; i < td_custom_op_count(); i++) {
        const td_custom_op *op = td_custom_op_at(i);
        printf("%-24s", td_custom_op_name(op));
        for (int type = 0; type < TD_DEVICE_TYPE_COUNT; type++)
            printf("%-8s", td_backend_unavailable_reason(type) ? "-" : td_custom_op_has_impl(op, type) ? "yes" : "no");
        printf("custom op, %s\n", td_custom_op_has_backward(op) ? "with backward" : "no backward");
    }
    td_clear_error();
}

int devices_selftest(int argc, char **argv); /* devices_selftest.c */

int cmd_devices(int argc, char **argv) {
    bool ops = false;
    if (argc > 1 && !strcmp(argv[1], "--selftest")) return devices_selftest(argc - 2, argv + 2);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ops"))
            ops = true;
        else if (!strcmp(argv[i], "--load") && i + 1 < argc) { /* a library whose constructor registers custom ops */
            if (!dlopen(argv[++i], RTLD_NOW | RTLD_LOCAL)) {
                fprintf(stderr, "trident devices: --load %s: %s\n", TD_QUOTE(argv[i]), dlerror());
                return 1;
            }
        } else {
            fprintf(
                stderr,
                "trident devices: unknown option %s (expected --ops, --load LIB, or --selftest [--full] [case ...])\n",
                TD_QUOTE(argv[i]));
            return 2;
        }
    }
    print_devices();
    if (ops) print_ops();
    return 0;
}
