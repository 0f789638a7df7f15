/* libFuzzer: the safetensors reader (td_safetensors_load) on any bytes. */
#include "fuzz_util.h"

FUZZ_INITIALIZE_WITH_SETUP

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    td_named_tensors *out = NULL;
    if (td_safetensors_load(fuzz_file(data, n), TD_CPU, &out) == TD_OK) td_named_tensors_free(out);
    return 0;
}
