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

/* An op is covered by a backend when it supports it for some dtype of its class. */
static bool covered(const td_backend *be, td_op_kind k) {
    static const td_dtype try_dt[] = {TD_F32, TD_I64, TD_BOOL};
    const td_op_meta *m = td_op_info(k);
    for (size_t d = 0; d < sizeof try_dt / sizeof try_dt[0]; d++) {
        td_operand views[8];
        memset(views, 0, sizeof views);
        for (int i = 0; i < 8; i++) {
            views[i].dtype = try_dt[d];
            views[i].ndim = 1;
            views[i].shape[0] = 1;
            views[i].strides[0] = 1;
        }
        if (k == TD_OP_WHERE) views[0].dtype = TD_BOOL;
        int n_in = m->n_in < 0 ? 2 : m->n_in;
        td_op op = {.kind = k, .n_in = n_in, .n_out = m->n_out, .in = views, .out = views + 4};
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
