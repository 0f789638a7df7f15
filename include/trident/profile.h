/*
** The profiler: where a training step goes, op by op.
**
** Between td_profile_begin() and td_profile_end(), every op the dispatcher
** runs is recorded with its backend, device, operand shapes and dtypes, its
** time, the FLOPs and bytes the op table can know, and where it was issued:
** the forward of which module (a dotted path, "blocks.0.qkv") or the backward
** of which autograd node of which module. Times come from the device's own
** timestamps where the backend has events (Vulkan timestamp queries, CUDA
** events: one before and one after each op on its queue), and from the host
** clock around the op on the CPU, whose backend is synchronous.
**
** Outputs: a Chrome trace-event JSON file (chrome://tracing, Perfetto; one
** track per device and queue, plus one per host thread for CPU ops), a
** terminal summary (td_profile_print) and the aggregated rows
** (td_profile_rows) that tools such as `trident bench --profile` draw.
**
** Cost: off, one predictable branch per op and per module forward. On, each
** op on a GPU records two timestamps; every 1024 ops of a device, and at
** td_profile_end, the host waits for that device to read them back, so a
** profiled GPU run loses some overlap of host and device.
**
** Threads: ops of any thread are recorded; begin, step, end, print and rows
** are to be called from one thread while no other thread dispatches.
*/
#ifndef TRIDENT_PROFILE_H
#define TRIDENT_PROFILE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One aggregate of td_profile_rows: every op of one name, phase, module and
** device. Strings are owned by the profiler and valid until the next
** td_profile_begin. */
typedef struct td_profile_row {
    const char *op;     /* op name, "matmul" */
    const char *module; /* module path, "blocks.0.qkv"; "" outside any module */
    const char *node;   /* backward: the autograd node that issued it ("matmul"); else "" */
    bool backward;      /* issued by the backward pass */
    td_device device;
    int64_t count;   /* ops */
    double total_ms; /* sum of the ops' times */
    double flops;    /* sum of the FLOPs known for them (0: unknown) */
    double bytes;    /* sum of the bytes they read and write (operand sizes) */
    double roof_ms;  /* sum of max(flops / peak, bytes / bandwidth), each at most the op's time: their time at
                        the device's roofline (peak: the GEMM rate of the op's dtype for products) */
} td_profile_row;

/* CONSTRUCTOR-like. Starts recording: drops the records of an earlier run and
** waits for every device already in use to finish its queued work, so that
** the run begins idle. Returns TD_ERR_STATE if already recording.
** Not thread-safe (see the top of this header). */
TD_API td_status td_profile_begin(void);

/* METHOD. Marks the end of one step (a trace instant on every track; the
** summary's "% of step" divides by the mean step). Steps are counted from
** td_profile_begin; without any mark the whole run is one step.
** Returns TD_ERR_STATE if not recording. */
TD_API td_status td_profile_step(void);

/* METHOD. Stops recording: waits for the devices, reads the timestamps back
** and, when IN trace_path is not NULL, writes the Chrome trace there. Devices
** without a roofline (td_profile_set_roofline) get one measured now and kept
** for later runs (a copy, an add and a GEMM per dtype its products used, not
** recorded). The records stay for td_profile_print/rows until the next
** td_profile_begin.
** Returns TD_ERR_STATE if not recording, TD_ERR_IO if the file cannot be written,
** or a device's error. */
TD_API td_status td_profile_end(const char *trace_path);

/* METHOD. Prints the summary of the last run to f: the step time, then the top
** `top` (op, phase) groups by total time with count, mean, % of step and the
** achieved fraction of the roofline, then the time per module, forward and
** backward, with its heaviest op. */
TD_API td_status td_profile_print(FILE *f, int top);

/* METHOD. Copies up to cap rows of the last run into OUT rows, by descending
** total time, and returns how many rows there are (may exceed cap). */
TD_API int td_profile_rows(td_profile_row *rows, int cap);

/* METHOD. The step time of the last run in ms (wall time from begin to end,
** over the steps marked) and the number of steps; 0 when none ran. */
TD_API double td_profile_step_ms(int *steps);

/* METHOD. The roofline of dev used for "% roof": IN gflops (peak FLOP rate)
** and IN gbps (memory bandwidth), both > 0. Kept across runs.
** Returns TD_ERR_MISUSE for a non-positive or non-finite rate. */
TD_API td_status td_profile_set_roofline(td_device dev, double gflops, double gbps);

/* METHOD. Names the ops issued until the matching td_profile_pop (for code
** outside modules: "optimizer", "loss"); nests. IN name must outlive the run
** (a literal). td_module_forward does this for every module by itself. */
TD_API void td_profile_push(const char *name);
TD_API void td_profile_pop(void);

#ifdef __cplusplus
}
#endif
#endif
