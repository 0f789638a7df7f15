/*
** trident devices: backends, devices, capabilities and the op x backend
** coverage matrix generated from the op table's cases, plus a row per custom op
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

#include "../tests/op_cases.h"
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

/* ---- coverage: each op asked of each backend on its case (tests/op_cases.h) ---- */

/* How many dtypes of op k's class the backend supports, out of *of. */
static int coverage(const td_backend *be, td_op_kind k, int *of) {
    int n = 0;
    *of = 0;
    for (int dt = 0; dt < TD_DTYPE_COUNT; dt++) {
        if (!op_case_has_dtype(k, (td_dtype)dt)) continue;
        (*of)++;
        op_case c;
        op_case_make(k, (td_dtype)dt, &c, NULL);
        n += be->iface->supports(0, &c.op);
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
