/*
** The CUDA backend's vtable and plugin entry point: op support and dispatch
** through the per-op tables generated from TD_OP_LIST (every op's launcher
** cu_op_<NAME> is an ordinary symbol, so a missing one fails the link) and
** CU_CHECKED_OPS (the ops with a capability test; the others have none).
*/
#include "cu.h"
#include "cu_optim.h"
#include "cu_runtime.h"

static td_status (*const runs[TD_OP_COUNT])(cu_dev *d, const td_op *op) = {
#define CU_RUN_(N, ...) [TD_OP_##N] = cu_op_##N,
    TD_OP_LIST(CU_RUN_)
#undef CU_RUN_
};

/* NULL: no capability test, every op the dispatcher lets through runs */
static bool (*const supports[TD_OP_COUNT])(cu_dev *d, const td_op *op) = {
#define CU_SUPPORTS_(N) [TD_OP_##N] = cu_supports_##N,
    CU_CHECKED_OPS(CU_SUPPORTS_)
#undef CU_SUPPORTS_
};

static bool cu_supports(int dev, const td_op *op) {
    if ((unsigned)op->kind >= TD_OP_COUNT) return false;
    cu_dev *d = cu_get(dev);
    if (!d) return false;
    for (int i = 0; i < op->n_in; i++) /* every operand of one device: the dispatcher checked the tensors */
        if (op->in[i].buf && op->in[i].buf->dev != dev) return false;
    return !supports[op->kind] || supports[op->kind](d, op);
}

static td_status cu_run(int dev, const td_op *op) {
    cu_dev *d = cu_get(dev);
    return d ? runs[op->kind](d, op) : td_last_status();
}

/* Optimizer steps of many parameters in one multi-tensor launch (cu_optim.h). */
static td_status cu_run_many(int dev, int n, const td_op *ops) {
    cu_dev *d = cu_get(dev);
    if (!d) return td_last_status();
    if (ops[0].kind == TD_OP_ADAM_STEP) return cu_adam_step_multi(d, n, ops);
    if (ops[0].kind == TD_OP_SGD_STEP) return cu_sgd_step_multi(d, n, ops);
    if (ops[0].kind == TD_OP_AMP_UNSCALE) return cu_amp_unscale_multi(d, n, ops);
    td_status st = TD_OK;
    for (int i = 0; i < n && st == TD_OK; i++) st = cu_run(dev, &ops[i]);
    return st;
}

static const td_backend_i cu_iface = {
    .device_count = cu_device_count,
    .device_info = cu_device_info,
    .native_stream = cu_native_stream,
    .buffer_alloc = cu_buffer_alloc,
    .buffer_free = cu_buffer_free,
    .buffer_host_ptr = NULL,
    .buffer_address = cu_buffer_address,
    .buffer_import = cu_buffer_import,
    .write = cu_write,
    .read = cu_read,
    .copy = cu_copy,
    .memset = cu_memset,
    .memory_stats = cu_memory_stats,
    .empty_cache = cu_empty_cache,
    .supports = cu_supports,
    .run = cu_run,
    .run_many = cu_run_many,
    .synchronize = cu_synchronize,
    .event_create = cu_event_create,
    .event_record = cu_event_record,
    .event_elapsed_ms = cu_event_elapsed_ms,
    .event_free = cu_event_free,
    .event_wait = cu_event_wait,
    .event_wait_native = cu_event_wait_native,
    .capture_begin = cu_capture_begin,
    .capture_end = cu_capture_end,
    .graph_replay = cu_graph_replay,
    .graph_free = cu_graph_free,
    .kernel_compile = cu_kernel_compile,
    .kernel_launch = cu_kernel_launch,
    .kernel_check_block = cu_kernel_check_block,
    .kernel_free = cu_kernel_free,
};

static const td_backend cu_backend = {
    .api_version = TD_BACKEND_API_VERSION,
    .name = "cuda",
    .device_type = TD_DEVICE_CUDA,
    .init = cu_init,
    .iface = &cu_iface,
};

__attribute__((visibility("default"))) const td_backend *td_backend_plugin(void) { return &cu_backend; }
