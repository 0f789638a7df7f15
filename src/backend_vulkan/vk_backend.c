/*
** The backend's plugin entry (td_backend_plugin) and its vtable: op support
** and dispatch, synchronization. The encoder table is generated from
** TD_OP_LIST: an op without a vk_op_<NAME> fails the link. The capability
** table is generated from VK_SUPPORTS_LIST; an op outside it has no check
** (NULL) beyond the device's dtypes.
*/
#include "vk.h"
#include "vk_ops.h"

static const vk_op_fn encoders[TD_OP_COUNT] = {
#define VK_ENTRY_(N, ni, no, g, dts, lay, amp, s) [TD_OP_##N] = vk_op_##N,
    TD_OP_LIST(VK_ENTRY_)
#undef VK_ENTRY_
};

static const vk_supports_fn predicates[TD_OP_COUNT] = {
#define VK_ENTRY_(N) [TD_OP_##N] = vk_supports_##N,
    VK_SUPPORTS_LIST(VK_ENTRY_)
#undef VK_ENTRY_
};

bool vk_dtype_ok(vk_dev *d, td_dtype dt) {
    switch (dt) {
    case TD_F32:
    case TD_I32: return true;
    case TD_F64: return d->caps.fp64;
    case TD_I64: return d->caps.int64;
    case TD_F16:
    case TD_BF16: return d->caps.storage16;
    case TD_U8:
    case TD_BOOL: return d->caps.storage8;
    default: return false;
    }
}

static bool vk_supports(int dev, const td_op *op) {
    if ((unsigned)op->kind >= TD_OP_COUNT) return false;
    vk_dev *d = vk_get(dev);
    if (!d) return false;
    for (int i = 0; i < op->n_in; i++)
        if (op->in[i].buf && !vk_dtype_ok(d, op->in[i].dtype)) return false;
    for (int i = 0; i < op->n_out; i++)
        if (op->out[i].buf && !vk_dtype_ok(d, op->out[i].dtype)) return false;
    return !predicates[op->kind] || predicates[op->kind](d, op);
}

static td_status vk_run(int dev, const td_op *op) {
    vk_dev *d = vk_get(dev);
    if (!d) return td_last_status();
    vk_lock(d);
    td_status st = vk_split_run(d, op, encoders);
    vk_unlock(d);
    return st;
}

static td_status vk_synchronize(int dev) {
    vk_dev *d = vk_get(dev);
    if (!d) return td_last_status();
    vk_lock(d);
    td_status st = vk_finish(d);
    vk_unlock(d);
    return st;
}

static void *vk_native_stream(int dev) {
    vk_dev *d = vk_get(dev);
    return d ? (void *)d->queue : NULL;
}

/* host staging (vk_memory.c, vk_exec.c) */
td_status vk_host_buffer_alloc(int dev, size_t nbytes, td_buffer **out, void **host);
td_status vk_fence_record(int dev, td_fence **out);
td_status vk_fence_wait(td_fence *f);

static const td_backend_i vk_iface = {
    .device_count = vk_device_count,
    .device_info = vk_device_info,
    .native_stream = vk_native_stream,
    .buffer_alloc = vk_buffer_alloc,
    .buffer_free = vk_buffer_free,
    .buffer_host_ptr = NULL,
    .buffer_address = vk_buffer_address,
    .buffer_import = NULL,
    .write = vk_write,
    .read = vk_read,
    .copy = vk_copy,
    .memset = vk_memset,
    .memory_stats = vk_memory_stats,
    .empty_cache = NULL,
    .supports = vk_supports,
    .run = vk_run,
    .run_many = NULL,
    .synchronize = vk_synchronize,
    .event_create = vk_event_create,
    .event_record = vk_event_record,
    .event_elapsed_ms = vk_event_elapsed_ms,
    .event_free = vk_event_free,
    .event_wait = vk_event_wait,
    .event_wait_native = NULL,
    .capture_begin = vk_capture_begin,
    .capture_end = vk_capture_end,
    .graph_replay = vk_graph_replay,
    .graph_free = vk_graph_free,
    .kernel_compile = vk_kernel_compile,
    .kernel_launch = vk_kernel_launch,
    .kernel_check_block = vk_kernel_check_block,
    .kernel_free = vk_kernel_free,
    .host_buffer_alloc = vk_host_buffer_alloc,
    .fence_record = vk_fence_record,
    .fence_wait = vk_fence_wait,
};

static const td_backend vk_backend = {
    .api_version = TD_BACKEND_API_VERSION,
    .name = "vulkan",
    .device_type = TD_DEVICE_VULKAN,
    .init = vk_init,
    .iface = &vk_iface,
};

__attribute__((visibility("default"))) const td_backend *td_backend_plugin(void) { return &vk_backend; }
