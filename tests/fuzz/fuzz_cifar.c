/* libFuzzer: the CIFAR-10 reader (td_cifar10_load), as U8 and as F32, and the
** same file twice. */
#include "fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_setup();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    const char *path = fuzz_file(data, n);
    const char *paths[2] = {path, path};
    for (int k = 0; k < 3; k++) {
        td_tensor *x = NULL, *y = NULL;
        if (td_cifar10_load(k == 2 ? 2 : 1, paths, k == 1, &x, &y) == TD_OK) {
            td_release(x);
            td_release(y);
        }
    }
    return 0;
}
