/* libFuzzer: the IDX reader (td_idx_load, plain and gzip) in each of its modes. */
#include "fuzz_util.h"

FUZZ_INITIALIZE_WITH_SETUP

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    const char *path = fuzz_file(data, n);
    const td_idx_mode modes[3] = {TD_IDX_RAW, TD_IDX_IMAGES_F32, TD_IDX_LABELS_I64};
    for (int m = 0; m < 3; m++) {
        td_tensor *t = NULL;
        if (td_idx_load(path, modes[m], &t) == TD_OK) td_release(t);
    }
    return 0;
}
