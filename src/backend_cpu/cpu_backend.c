/*
** The CPU backend's plugin entry: td_cpu_backend, its vtable, and the kernel
** table. Kernels live one op family per file (cpu_ops_<family>.c); device
** facts and threads in cpu_device.c, memory in cpu_memory.c.
*/
#include <cblas.h>

#include "cpu.h"
#include "cpu_gemm.h"
#include "trident/attn_layout.h"

typedef td_status (*cpu_kernel_fn)(const td_op *op);

/* One thread pool owns the cores: the kernels split their GEMMs over OpenMP
** threads themselves (cpu_ops_matmul.c, cpu_ops_conv.c) and call OpenBLAS from inside
** those threads, so OpenBLAS must run each call on its caller's thread. A
** pthreads OpenBLAS (openblas_get_parallel() == 1, Debian's default) is set to
** one thread; its own pool would otherwise compete with OpenMP's for the same
** cores. An OpenMP OpenBLAS (== 2) already runs single-threaded inside a
** parallel region, and its openblas_set_num_threads would also change
** OpenMP's thread count, so it is left alone; a serial one (== 0) needs nothing.
** Then OpenBLAS's GEMMs are checked on this machine (cpu_gemm.c). */
static td_status cpu_init(char *why, size_t why_size) {
    (void)why, (void)why_size;
    if (openblas_get_parallel() == 1) openblas_set_num_threads(1);
    cpu_gemm_init();
    return TD_OK;
}

/* One kernel per op; a kernel that nothing defines fails the link. */
static const cpu_kernel_fn kernels[TD_OP_COUNT] = {
#define CPU_ENTRY_(N, ...) [TD_OP_##N] = cpu_op_##N,
    TD_OP_LIST(CPU_ENTRY_)
#undef CPU_ENTRY_
};

/* Every op, every dtype its signature allows (the core checks the operands against op_list.h first). */
static bool cpu_supports(int dev, const td_op *op) {
    (void)dev;
    bool attn = op->kind == TD_OP_ATTENTION || op->kind == TD_OP_ATTENTION_BACKWARD;
    return (unsigned)op->kind < TD_OP_COUNT && (!attn || td_attn_dense(op)); /* attention reads contiguous views */
}

static td_status cpu_run(int dev, const td_op *op) {
    (void)dev;
    return kernels[op->kind](op);
}

static td_status cpu_synchronize(int dev) {
    (void)dev;
    return TD_OK;
}

static const td_backend_i cpu_iface = {
    .device_count = cpu_device_count,
    .device_info = cpu_device_info,
    .native_stream = NULL,
    .buffer_alloc = cpu_buffer_alloc,
    .buffer_free = cpu_buffer_free,
    .buffer_host_ptr = cpu_buffer_host_ptr,
    .buffer_address = cpu_buffer_address,
    .buffer_import = cpu_buffer_import,
    .write = cpu_write,
    .read = cpu_read,
    .copy = cpu_copy,
    .memset = cpu_memset,
    .memory_stats = cpu_memory_stats,
    .empty_cache = cpu_empty_cache,
    .supports = cpu_supports,
    .run = cpu_run,
    .run_many = NULL,
    .synchronize = cpu_synchronize,
    .event_create = NULL,
    .event_record = NULL,
    .event_elapsed_ms = NULL,
    .event_free = NULL,
    .event_wait = NULL,
    .event_wait_native = NULL,
    .capture_begin = NULL,
    .capture_end = NULL,
    .graph_replay = NULL,
    .graph_free = NULL,
    .kernel_compile = NULL,
    .kernel_launch = NULL,
    .kernel_free = NULL,
    .host_buffer_alloc = NULL, /* CPU memory is host memory: nothing to stage */
    .fence_record = NULL,
    .fence_wait = NULL,
};

const td_backend td_cpu_backend = {
    .api_version = TD_BACKEND_API_VERSION,
    .name = "cpu",
    .device_type = TD_DEVICE_CPU,
    .init = cpu_init,
    .iface = &cpu_iface,
};
