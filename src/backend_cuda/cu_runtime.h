/*
** The CUDA backend's runtime entry points, as the vtable in cu_backend.c
** needs them (devices, memory, events, capture, NVRTC).
** defines: the prototypes of cu_device.c, cu_memory.c, cu_event.c,
** cu_capture.c and cu_nvrtc.c.
*/
#ifndef TRIDENT_CU_RUNTIME_H
#define TRIDENT_CU_RUNTIME_H

#include "cu.h"

/* cu_device.c */
td_status cu_init(char *why, size_t why_size);
int cu_device_count(void);
td_status cu_device_info(int dev, td_device_info *out);
void *cu_native_stream(int dev);
td_status cu_synchronize(int dev);

/* cu_memory.c */
td_status cu_memory_init(cu_dev *d);
td_status cu_buffer_alloc(int dev, size_t nbytes, td_buffer **out);
void cu_buffer_free(td_buffer *b);
uint64_t cu_buffer_address(td_buffer *b);
td_status cu_buffer_import(int dev, uint64_t address, size_t nbytes, void (*deleter)(void *), void *ctx,
                           td_buffer **out);
td_status cu_write(td_buffer *dst, size_t offset, const void *src, size_t n);
td_status cu_read(td_buffer *src, size_t offset, void *dst, size_t n);
td_status cu_copy(td_buffer *src, size_t so, td_buffer *dst, size_t dof, size_t n);
td_status cu_memset(td_buffer *dst, size_t offset, uint8_t byte, size_t n);
td_status cu_memory_stats(int dev, bool reset_peak, td_memory_stats *out);
td_status cu_empty_cache(int dev);
/* Capture pools: blocks allocated or freed while capturing stay with the graph. */
td_status cu_pool_begin(cu_dev *d);
struct cu_pool *cu_pool_end(cu_dev *d); /* the pool, now the graph's */
void cu_pool_release(cu_dev *d, struct cu_pool *p);
/* Runs the deleters of released foreign buffers whose work has finished. */
void cu_foreign_poll(cu_dev *d, bool wait);

/* cu_event.c */
td_status cu_event_create(int dev, td_event **out);
td_status cu_event_record(td_event *ev);
td_status cu_event_elapsed_ms(td_event *start, td_event *end, double *ms);
void cu_event_free(td_event *ev);
td_status cu_event_wait(int dev, td_event *ev);
td_status cu_event_wait_native(void *stream, td_event *ev);

/* cu_capture.c */
td_status cu_capture_begin(int dev);
td_status cu_capture_end(int dev, td_graph **out);
td_status cu_graph_replay(td_graph *g);
void cu_graph_free(td_graph *g);

/* cu_nvrtc.c */
td_status cu_kernel_compile(int dev, int lang, const char *source, const char *entry, const td_kernel_options *opts,
                            td_kernel **out, char *log, size_t log_size);
td_status cu_kernel_check_block(const td_kernel *k, const uint32_t block[3]);
td_status cu_kernel_launch(td_kernel *k, const uint32_t grid[3], const uint32_t block[3], size_t shared_bytes,
                           int n_views, const td_operand *views, const void *push, size_t push_size);
void cu_kernel_free(td_kernel *k);

#endif /* TRIDENT_CU_RUNTIME_H */
