/* libFuzzer: the weights-only torch.save reader (td_torch_load: zip container and unpickler) on any bytes. */
#include "fuzz_util.h"

FUZZ_INITIALIZE_WITH_SETUP

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    td_named_tensors *out = NULL;
    if (td_torch_load(fuzz_file(data, n), TD_CPU, &out) == TD_OK) td_named_tensors_free(out);
    return 0;
}
