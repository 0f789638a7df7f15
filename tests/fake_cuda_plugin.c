/*
** A CUDA plugin built against a future contract (API version 99), for
** test_cuda plugin_version: the core must refuse it and say why.
*/
#include "trident/backend.h"

static const td_backend future = {.api_version = 99, .name = "cuda", .device_type = TD_DEVICE_CUDA};

__attribute__((visibility("default"))) const td_backend *td_backend_plugin(void) { return &future; }
