/*
** libcustom_ops_example.so: the example custom ops as a library that registers
** them when loaded, e.g. by `trident devices --ops --load LIB` (a row per op)
** or by a program's dlopen. They stay registered until the process ends.
*/
#include <stdio.h>

#include "custom_ops.h"

static custom_ops ops;

__attribute__((constructor)) static void register_example_ops(void) {
    if (custom_ops_register(&ops, CUSTOM_OPS_DIR) != TD_OK)
        fprintf(stderr, "libcustom_ops_example: %s\n", td_last_error());
}
