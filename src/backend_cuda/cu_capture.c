/*
** Capture: td_capture_begin/end record every op enqueued on a device's stream
** into a CUDA graph (relaxed stream capture), and td_graph_replay launches it.
** Memory allocated or freed during the capture stays in the graph's pool
** (cu_memory.c), so a replay writes the same buffers as the capture did and
** eager work never reuses them while the graph lives. Host transfers and
** synchronization are refused while capturing (TD_ERR_STATE).
*/
#include <stdlib.h>

#include "cu.h"
#include "cu_runtime.h"

struct td_graph {
    cu_dev *d;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    struct cu_pool *pool;
};

td_status cu_capture_begin(int dev) {
    cu_dev *d = cu_get(dev);
    if (!d) return td_last_status();
    if (d->capturing) return td_error_set(TD_ERR_STATE, "cuda:%d is already capturing", dev);
    td_status st = cu_pool_begin(d);
    if (st != TD_OK) return st;
    st = cu_status(cudaStreamBeginCapture(d->stream, cudaStreamCaptureModeRelaxed), "capture_begin");
    if (st != TD_OK) {
        cu_pool_release(d, cu_pool_end(d));
        return st;
    }
    d->capturing = true;
    return TD_OK;
}

td_status cu_capture_end(int dev, td_graph **out) {
    *out = NULL;
    cu_dev *d = cu_get(dev);
    if (!d) return td_last_status();
    if (!d->capturing) return td_error_set(TD_ERR_STATE, "cuda:%d: capture_end without capture_begin", dev);
    d->capturing = false;
    struct cu_pool *pool = cu_pool_end(d);
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    /* an op that failed during capture invalidates it: EndCapture reports that */
    td_status st = cu_status(cudaStreamEndCapture(d->stream, &graph), "capture_end");
    if (st == TD_OK) st = cu_status(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
    td_graph *g = st == TD_OK ? calloc(1, sizeof *g) : NULL;
    if (st == TD_OK && !g) st = td_error_set(TD_ERR_OOM, "cuda: out of host memory");
    if (st != TD_OK) {
        if (exec) cudaGraphExecDestroy(exec);
        if (graph) cudaGraphDestroy(graph);
        cu_pool_release(d, pool);
        return st;
    }
    *g = (td_graph){.d = d, .graph = graph, .exec = exec, .pool = pool};
    *out = g;
    return TD_OK;
}

td_status cu_graph_replay(td_graph *g) {
    cu_dev *d = cu_get(g->d->index);
    if (!d) return td_last_status();
    if (d->capturing) return td_error_set(TD_ERR_STATE, "cuda:%d: graph replay during a capture", d->index);
    return cu_status(cudaGraphLaunch(g->exec, d->stream), "cudaGraphLaunch");
}

void cu_graph_free(td_graph *g) {
    if (!g) return;
    cu_dev *d = cu_get(g->d->index);
    if (d) cudaStreamSynchronize(d->stream); /* a queued replay may still use the pool */
    cudaGraphExecDestroy(g->exec);
    cudaGraphDestroy(g->graph);
    if (d) cu_pool_release(d, g->pool);
    free(g);
}
