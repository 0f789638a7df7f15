/*
** Events of the CUDA backend: cudaEvents recorded on a device's stream. They
** time work (elapsed_ms waits for the later one) and order other streams'
** work after it without a host wait (event_wait: cudaStreamWaitEvent, across
** devices too; event_wait_native: onto a stream the caller owns).
*/
#include <stdlib.h>

#include "cu.h"
#include "cu_runtime.h"

struct td_event {
    cu_dev *d;
    cudaEvent_t ev;
    bool recorded;
};

td_status cu_event_create(int dev, td_event **out) {
    *out = NULL;
    cu_dev *d = cu_get(dev);
    if (!d) return td_last_status();
    td_event *e = calloc(1, sizeof *e);
    if (!e) return td_error_set(TD_ERR_OOM, "cuda: out of host memory");
    td_status st = cu_status(cudaEventCreate(&e->ev), "cudaEventCreate");
    if (st != TD_OK) {
        free(e);
        return st;
    }
    e->d = d;
    *out = e;
    return TD_OK;
}

td_status cu_event_record(td_event *e) {
    if (!cu_get(e->d->index)) return td_last_status();
    td_status st = cu_status(cudaEventRecord(e->ev, e->d->stream), "cudaEventRecord");
    if (st == TD_OK) e->recorded = true;
    return st;
}

td_status cu_event_elapsed_ms(td_event *start, td_event *end, double *ms) {
    *ms = 0;
    if (!start->recorded || !end->recorded) return td_error_set(TD_ERR_STATE, "cuda: event was never recorded");
    CU_TRY(cudaEventSynchronize(end->ev)); /* the caller's visible wait */
    float f = 0;
    CU_TRY(cudaEventElapsedTime(&f, start->ev, end->ev));
    *ms = f;
    return TD_OK;
}

td_status cu_event_wait(int dev, td_event *e) {
    cu_dev *d = cu_get(dev);
    if (!d) return td_last_status();
    if (!e->recorded) return td_error_set(TD_ERR_STATE, "cuda: event_wait on an event that was never recorded");
    return cu_status(cudaStreamWaitEvent(d->stream, e->ev, 0), "cudaStreamWaitEvent");
}

td_status cu_event_wait_native(void *stream, td_event *e) {
    if (!cu_get(e->d->index)) return td_last_status();
    if (!e->recorded) return td_error_set(TD_ERR_STATE, "cuda: event_wait_native on an event that was never recorded");
    return cu_status(cudaStreamWaitEvent((cudaStream_t)stream, e->ev, 0), "cudaStreamWaitEvent (a foreign stream)");
}

void cu_event_free(td_event *e) {
    if (!e) return;
    cudaEventDestroy(e->ev);
    free(e);
}
