/*
** A plugin that the loader must refuse, for test_bad_input: built as
** tests/fake_plugins/<variant>/libtrident-vulkan.so, it declares the CPU device
** type (FAKE_WRONG_TYPE) or another backend API version (FAKE_WRONG_API).
*/
#include "trident/backend.h"

static const td_backend fake = {
#ifdef FAKE_WRONG_API
    .api_version = TD_BACKEND_API_VERSION + 1,
    .device_type = TD_DEVICE_VULKAN,
#else
    .api_version = TD_BACKEND_API_VERSION,
    .device_type = TD_DEVICE_CPU,
#endif
    .name = "fake",
};

TD_API const td_backend *td_backend_plugin(void) { return &fake; }
