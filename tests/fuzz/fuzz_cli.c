/*
** libFuzzer: trident train's argument parser (tools/train.c's parse_args,
** included here, since it is static). The input is split at NUL bytes into
** argv[1..]; -h and --help, which print the usage and exit, are left out.
*/
#include "../../tools/train.c"

#include <stdint.h>

#define FUZZ_MAX_ARGS 32

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    char *buf = malloc(n + 1), *argv[FUZZ_MAX_ARGS + 2] = {"train"};
    if (!buf) return 0;
    memcpy(buf, data, n);
    buf[n] = 0;
    int argc = 1;
    for (char *p = buf; p <= buf + n && argc <= FUZZ_MAX_ARGS; p += strlen(p) + 1) {
        if (!strcmp(p, "-h") || !strcmp(p, "--help")) break;
        argv[argc++] = p;
    }
    argv[argc] = NULL;
    train_opts o;
    parse_args(argc, argv, &o);
    free(buf);
    return 0;
}
