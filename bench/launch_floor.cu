/*
** launch_floor: the CUDA runtime's own cost per kernel launch on this machine, the floor under trident
** bench's dispatch row (issue 22). It times, on the host clock, N back-to-back launches and one synchronize:
**   empty      an empty kernel <<<1, 32>>>
**   add        out[0] = a[0] + b[0] on device memory, <<<1, 128>>> (the dispatch row's 1-element add)
**   add+alloc  the same, with cudaMallocAsync/cudaFreeAsync of the output around each launch
**   graph      the add launches captured once in a CUDA graph, then the graph replayed
** and prints microseconds per launch (median of 7 rounds of N = 10000).
** Usage: launch_floor [N]
*/
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_clock.h"

__global__ void empty_kernel(void) {}

/* out = a + b, one element */
__global__ void add1_kernel(float *out, const float *a, const float *b) {
    if (threadIdx.x == 0) out[0] = a[0] + b[0];
}

#define CHECK(x)                                                                                                       \
    do {                                                                                                               \
        cudaError_t e_ = (x);                                                                                          \
        if (e_ != cudaSuccess) {                                                                                       \
            fprintf(stderr, "launch_floor: %s: %s\n", #x, cudaGetErrorString(e_));                                     \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

enum { ROUNDS = 7 };

typedef struct {
    int n;
    cudaStream_t s;
    float *out, *a, *b;
    cudaGraphExec_t graph;
} floor_ctx;

static void run_empty(floor_ctx *c) {
    for (int i = 0; i < c->n; i++) empty_kernel<<<1, 32, 0, c->s>>>();
}

static void run_add(floor_ctx *c) {
    for (int i = 0; i < c->n; i++) add1_kernel<<<1, 128, 0, c->s>>>(c->out, c->a, c->b);
}

static void run_add_alloc(floor_ctx *c) {
    for (int i = 0; i < c->n; i++) {
        float *o;
        CHECK(cudaMallocAsync((void **)&o, 256, c->s));
        add1_kernel<<<1, 128, 0, c->s>>>(o, c->a, c->b);
        CHECK(cudaFreeAsync(o, c->s));
    }
}

static void run_graph(floor_ctx *c) { CHECK(cudaGraphLaunch(c->graph, c->s)); }

/* Median microseconds per launch of f over ROUNDS rounds, each ended by a synchronize. */
static double time_us(floor_ctx *c, void (*f)(floor_ctx *)) {
    double t[ROUNDS];
    f(c); /* warm-up */
    CHECK(cudaStreamSynchronize(c->s));
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = bench_now_s();
        f(c);
        CHECK(cudaStreamSynchronize(c->s));
        t[r] = (bench_now_s() - t0) * 1e6 / c->n;
    }
    return bench_median_inplace(t, ROUNDS);
}

int main(int argc, char **argv) {
    floor_ctx c = {};
    c.n = argc > 1 ? atoi(argv[1]) : 10000;
    if (c.n <= 0) {
        fprintf(stderr, "launch_floor: N must be a positive count, got '%s'\n", argv[1]);
        return 2;
    }
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    CHECK(cudaStreamCreateWithFlags(&c.s, cudaStreamNonBlocking));
    CHECK(cudaMalloc((void **)&c.out, 256));
    CHECK(cudaMalloc((void **)&c.a, 256));
    CHECK(cudaMalloc((void **)&c.b, 256));
    CHECK(cudaMemsetAsync(c.a, 0, 256, c.s));
    CHECK(cudaMemsetAsync(c.b, 0, 256, c.s));

    cudaGraph_t g;
    CHECK(cudaStreamBeginCapture(c.s, cudaStreamCaptureModeThreadLocal));
    run_add(&c);
    CHECK(cudaStreamEndCapture(c.s, &g));
    CHECK(cudaGraphInstantiate(&c.graph, g, 0));

    printf("launch_floor on %s, %d launches a round, host clock, median of %d rounds (us per launch)\n", prop.name,
           c.n, ROUNDS);
    printf("  empty      %.2f\n", time_us(&c, run_empty));
    printf("  add        %.2f\n", time_us(&c, run_add));
    printf("  add+alloc  %.2f\n", time_us(&c, run_add_alloc));
    printf("  graph      %.2f\n", time_us(&c, run_graph));
    CHECK(cudaGraphExecDestroy(c.graph));
    CHECK(cudaGraphDestroy(g));
    return 0;
}
