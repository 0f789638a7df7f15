/*
** td_onnx_export for modules (include/trident/io.h): the module's forward in
** eval mode, traced by td_onnx_export_fn (src/io/onnx_export.c), its
** state_dict naming the initializers. It lives in src/nn because it drives a
** module (src/io sits below src/nn in the layering, tests/layering.cmake).
*/
#include "trident/io.h"
#include "trident/nn.h"

static td_tensor *module_forward(void *ctx, int n, td_tensor *const *inputs) {
    (void)n;
    return td_module_forward(ctx, inputs[0]);
}

td_status td_onnx_export(td_module *module, int n_inputs, td_tensor *const *example_inputs, const char *path) {
    if (!module) return td_error_set(TD_ERR_MISUSE, "onnx export: module is NULL");
    if (n_inputs != 1)
        return td_error_set(TD_ERR_MISUSE, "onnx export: a module's forward takes one input, got %d example inputs",
                            n_inputs);
    td_named_tensors *sd = td_module_state_dict(module);
    if (!sd) return td_last_status();
    bool training = td_module_is_training(module);
    td_module_eval(module); /* dropout off, batch norm on its running statistics */
    td_status st = td_onnx_export_fn(module_forward, module, n_inputs, example_inputs, sd, path);
    td_module_train(module, training);
    td_named_tensors_free(sd);
    return st;
}
