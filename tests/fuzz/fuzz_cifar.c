/* libFuzzer: the CIFAR-10 reader (td_cifar10_load): the input twice (two files,
** one tensor) as U8, then once as F32. Between them they reach every line a
** single U8 load does, with one load fewer per input. */
#include "fuzz_util.h"

FUZZ_INITIALIZE_WITH_SETUP

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    const char *path = fuzz_file(data, n);
    const char *paths[2] = {path, path};
    for (int k = 0; k < 2; k++) {
        td_tensor *x = NULL, *y = NULL;
        if (td_cifar10_load(k == 0 ? 2 : 1, paths, k == 1, &x, &y) == TD_OK) {
            td_release(x);
            td_release(y);
        }
    }
    return 0;
}
