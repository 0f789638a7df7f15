/*
** Distributed training (include/trident/dist.h): the collectives against
** their definitions, DDP against the mean of the ranks' gradients, the
** DistributedSampler against torch's rules, the rendezvous and its errors.
**
** Multi-process cases run this executable again under mpirun as workers
** (`test_dist --worker NAME DEVICE`); a worker exits 0 when its checks pass.
** The seed (TD_SEED, default from the clock) is printed and reaches the
** workers through the environment.
*/
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>

#include "dist/dist_internal.h"
#include "runner.h"

static const char *self_path;

static uint64_t test_seed(void) {
    const char *s = getenv("TD_SEED");
    uint64_t seed = s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL);
    char buf[32];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)seed);
    setenv("TD_SEED", buf, 1);
    return seed;
}

/* Open MPI leaves its components' memory behind at MPI_Finalize (libmpi,
** libopen-pal and the components it dlcloses, which LeakSanitizer cannot
** name), so processes under mpirun run without the leak check; the cases in
** one process (group_of_one, ddp_unused_parameter) check DDP's own memory. */
static void no_leak_check_under_mpi(void) {
    const char *a = getenv("ASAN_OPTIONS");
    char buf[1024];
    snprintf(buf, sizeof buf, "%s%sdetect_leaks=0", a ? a : "", a && *a ? ":" : "");
    setenv("ASAN_OPTIONS", buf, 1);
}

/* Run `mpirun -np n test_dist --worker name device`; its exit status. */
static int run_workers(int n, const char *name, const char *device) {
    if (system("command -v mpirun > /dev/null 2>&1") != 0) TEST_SKIP("mpirun not found (apt-get install openmpi-bin)");
    printf("  seed %s\n", getenv("TD_SEED"));
    fflush(stdout);
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
    setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 0);
    no_leak_check_under_mpi();
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "mpirun -np %d --oversubscribe '%s' --worker %s %s", n, self_path, name, device);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

/* ---- workers (under mpirun) ------------------------------------------------- */

#define WFAIL(...)                                                                                                     \
    do {                                                                                                               \
        fprintf(stderr, "  rank %d: %s:%d: ", td_dist_rank(), __FILE__, __LINE__);                                     \
        fprintf(stderr, __VA_ARGS__);                                                                                  \
        fprintf(stderr, " (last error: %s)\n", td_last_error());                                                       \
        exit(1);                                                                                                       \
    } while (0)
#define WOK(expr)                                                                                                      \
    do {                                                                                                               \
        if ((expr) != TD_OK) WFAIL("%s failed", #expr);                                                                \
    } while (0)

/* Rank r's input element i: an integer in [-20, 20] (exact in every dtype, and
** so are sums over a few ranks), 0/1 for bool, [0, 60) for u8. */
static double input_value(uint64_t seed, int r, int64_t i, td_dtype dt) {
    uint32_t w[4];
    td_philox4x32(seed, ((uint64_t)r << 40) + (uint64_t)i, w);
    if (dt == TD_BOOL) return w[0] & 1;
    if (dt == TD_U8) return w[0] % 60;
    return (double)(w[0] % 41) - 20;
}

static td_tensor *inputs_of(uint64_t seed, int r, int64_t n, td_dtype dt, td_device dev) {
    double *v = malloc(sizeof *v * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) v[i] = input_value(seed, r, i, dt);
    td_tensor *t = td_cast(td_from_data(v, 1, &n, TD_F64, TD_CPU), dt);
    free(v);
    return td_to(t, dev);
}

static double tolerance(td_dtype dt) {
    return dt == TD_F16 ? 1e-3 : dt == TD_BF16 ? 8e-3 : dt == TD_F32 ? 1e-6 : 1e-12;
}

/* got[i] against want[i] (float dtypes: relative tolerance; others exact) */
static void check_values(td_tensor *t, const double *want, int64_t n, td_dtype dt, const char *what) {
    double *got = malloc(sizeof *got * (size_t)(n ? n : 1));
    WOK(td_copy_to_host(t, got, sizeof *got * (size_t)n, TD_F64));
    double tol = td_dtype_is_float(dt) ? tolerance(dt) : 0;
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= tol * fmax(1, fabs(want[i]))))
            WFAIL("%s %s n=%lld: element %lld is %.9g, expected %.9g", what, td_dtype_name(dt), (long long)n,
                  (long long)i, got[i], want[i]);
    free(got);
}

static int worker_collectives(td_device dev) {
    uint64_t seed = strtoull(getenv("TD_SEED"), NULL, 10);
    int world = td_dist_world_size(), rank = td_dist_rank();
    static const int64_t sizes[] = {1, 7, 1001, 300001}; /* the last: tcp's pair exchange, in chunks */
    for (int dt = 0; dt < TD_DTYPE_COUNT; dt++) {
        for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
            int64_t n = sizes[si];
            td_scope_begin();
            double *want = malloc(sizeof *want * (size_t)n * (size_t)world);
            /* all_reduce: sum, avg (floating), max */
            for (int op = TD_DIST_SUM; op <= TD_DIST_MAX; op++) {
                if (op == TD_DIST_AVG && !td_dtype_is_float(dt)) {
                    td_tensor *t = inputs_of(seed, rank, n, dt, dev);
                    if (td_dist_all_reduce(t, TD_DIST_AVG) != TD_ERR_DTYPE)
                        WFAIL("avg of %s accepted", td_dtype_name(dt));
                    continue;
                }
                for (int64_t i = 0; i < n; i++) {
                    double acc = op == TD_DIST_MAX ? -INFINITY : 0;
                    for (int r = 0; r < world; r++) {
                        double v = input_value(seed, r, i, dt);
                        acc = op == TD_DIST_MAX ? fmax(acc, v) : acc + v;
                    }
                    if (dt == TD_BOOL && op == TD_DIST_SUM) acc = acc > 0;
                    want[i] = op == TD_DIST_AVG ? acc / world : acc;
                }
                td_tensor *t = inputs_of(seed, rank, n, dt, dev);
                WOK(td_dist_all_reduce(t, op));
                check_values(t, want, n, dt,
                             op == TD_DIST_SUM   ? "all_reduce sum"
                             : op == TD_DIST_AVG ? "all_reduce avg"
                                                 : "all_reduce max");
            }
            /* broadcast from the last rank */
            td_tensor *b = inputs_of(seed, rank, n, dt, dev);
            WOK(td_dist_broadcast(b, world - 1));
            for (int64_t i = 0; i < n; i++) want[i] = input_value(seed, world - 1, i, dt);
            check_values(b, want, n, dt, "broadcast");
            /* all_gather */
            td_tensor *in = inputs_of(seed, rank, n, dt, dev);
            td_tensor *out = td_empty(1, (int64_t[]){n * world}, dt, dev);
            WOK(td_dist_all_gather(out, in));
            for (int r = 0; r < world; r++)
                for (int64_t i = 0; i < n; i++) want[r * n + i] = input_value(seed, r, i, dt);
            check_values(out, want, n * world, dt, "all_gather");
            /* reduce_scatter (sum; max): rank r's input is [world * n] */
            for (int op = TD_DIST_SUM; op <= TD_DIST_MAX; op += 2) {
                td_tensor *big = inputs_of(seed, rank, n * world, dt, dev);
                td_tensor *mine = td_empty(1, &n, dt, dev);
                WOK(td_dist_reduce_scatter(mine, big, op));
                for (int64_t i = 0; i < n; i++) {
                    double acc = op == TD_DIST_MAX ? -INFINITY : 0;
                    for (int r = 0; r < world; r++) {
                        double v = input_value(seed, r, rank * n + i, dt);
                        acc = op == TD_DIST_MAX ? fmax(acc, v) : acc + v;
                    }
                    want[i] = dt == TD_BOOL ? acc > 0 : acc;
                }
                check_values(mine, want, n, dt, op == TD_DIST_SUM ? "reduce_scatter sum" : "reduce_scatter max");
            }
            free(want);
            td_scope_end();
        }
    }
    WOK(td_dist_barrier());
    /* misuse: a non-contiguous tensor, a wrong all_gather size */
    td_scope_begin();
    td_tensor *m = td_transpose(td_zeros(2, (int64_t[]){3, 4}, TD_F32, dev), 0, 1);
    if (td_dist_all_reduce(m, TD_DIST_SUM) != TD_ERR_MISUSE) WFAIL("non-contiguous tensor accepted");
    td_tensor *small = td_zeros(1, (int64_t[]){5}, TD_F32, dev);
    if (td_dist_all_gather(small, small) != TD_ERR_SHAPE || !strstr(td_last_error(), "expected world size"))
        WFAIL("all_gather of the wrong size accepted");
    td_scope_end();
    if (rank == 0)
        printf("  collectives: %d dtypes x sizes 1, 7, 1001, 300001 on %d ranks agree with their definitions\n",
               TD_DTYPE_COUNT, world);
    return 0;
}

/* W: an MLP 6-16-16-3 (three Linears) from seed s. */
static td_module *small_model(uint64_t s, int64_t hidden) {
    td_manual_seed(s);
    td_module *m[] = {td_linear_new(6, hidden, true), td_tanh_new(), td_linear_new(hidden, 16, true), td_tanh_new(),
                      td_linear_new(16, 3, true)};
    return td_sequential_new(5, m);
}

static td_tensor *batch_x(uint64_t seed, int r, int step, td_device dev) {
    return td_randn(2, (int64_t[]){5, 6}, seed + 7, (uint64_t)(r * 1000 + step) * 64, TD_F32, dev);
}
static td_tensor *loss_of(td_module *m, td_tensor *x) {
    return td_mean(td_mul(td_module_forward(m, x), td_module_forward(m, x)), 0, NULL, false);
}

/* max |a - b| over the parameters of two models */
static double param_diff(td_module *a, td_module *b, bool grads) {
    td_tensor *pa[16], *pb[16];
    int n = td_module_parameters(a, pa, 16);
    td_module_parameters(b, pb, 16);
    double worst = 0;
    td_scope_begin(); /* the temporaries below */
    for (int i = 0; i < n && worst < INFINITY; i++) {
        td_tensor *x = grads ? td_grad_of(pa[i]) : pa[i], *y = grads ? td_grad_of(pb[i]) : pb[i];
        worst = !x || !y
                    ? INFINITY
                    : fmax(worst, td_item(td_amax(td_abs(td_sub(td_to(x, TD_CPU), td_to(y, TD_CPU))), 0, NULL, false)));
    }
    td_scope_end();
    return worst;
}

/* The copy ops of one td_backward of loss (profiled). */
static int64_t backward_copies(td_tensor *loss, td_status *st) {
    td_profile_begin();
    *st = td_backward(loss, NULL, false);
    td_profile_end(NULL);
    td_profile_row rows[64];
    int n = td_profile_rows(rows, 64);
    int64_t copies = 0;
    for (int r = 0; r < n && r < 64; r++) copies += strcmp(rows[r].op, "copy") ? 0 : rows[r].count;
    return copies;
}

static int worker_ddp(td_device dev) {
    uint64_t seed = strtoull(getenv("TD_SEED"), NULL, 10);
    int world = td_dist_world_size(), rank = td_dist_rank();
    td_module *m = small_model(seed + (uint64_t)rank, 16); /* each rank its own init */
    WOK(td_module_to(m, dev));
    td_ddp *d;
    /* tiny buckets: several per backward (each Linear's weight and bias apart) */
    WOK(td_ddp_new(m, &(td_ddp_opts){.bucket_cap_mb = 300.0 / (1 << 20), .broadcast_buffers = true}, &d));
    if (td_ddp_num_buckets(d) < 3) WFAIL("%d buckets, expected at least 3", td_ddp_num_buckets(d));
    /* the reference: rank 0's model, on every rank, without DDP */
    td_module *ref = small_model(seed, 16);
    WOK(td_module_to(ref, dev));
    WOK(td_module_flatten_parameters(ref, dev)); /* backward copies the same into its arena */
    if (param_diff(m, ref, false) != 0) WFAIL("parameters differ from rank 0's after td_ddp_new");
    td_tensor *arena = NULL;
    WOK(td_module_parameter_arena(m, TD_F32, NULL, &arena));
    if (!arena) WFAIL("td_ddp_new did not flatten the module");
    for (int step = 0; step < 3; step++) {
        td_scope_begin();
        td_module_zero_grad(m);
        td_module_zero_grad(ref);
        /* step 1 accumulates two micro-batches, the first under no_sync */
        int micro = step == 1 ? 2 : 1;
        for (int k = 0; k < micro; k++) {
            if (k < micro - 1) td_ddp_no_sync_begin(d);
            td_status st;
            int64_t copies = backward_copies(loss_of(m, batch_x(seed, rank, step * 2 + k, dev)), &st);
            WOK(st);
            if (k < micro - 1) td_ddp_no_sync_end(d);
            /* reference: mean over ranks of each rank's gradient = backward of the mean of the ranks' losses */
            for (int r = 0; r < world; r++) {
                int64_t ref_copies =
                    backward_copies(td_mul_scalar(loss_of(ref, batch_x(seed, r, step * 2 + k, dev)), 1.0 / world), &st);
                WOK(st);
                /* the buckets are slices of the gradient arena: DDP adds no copy op (CPU through MPI, CUDA through
                ** NCCL, in place; Vulkan's host staging on the worker thread is the backend's own copies into
                ** and out of host buffers, not ops: the synchronous staging, without MPI_THREAD_SERIALIZED,
                ** would add one per bucket, the copying path two per parameter) */
                int64_t want = ref_copies;
                if (r == 0 && copies != want)
                    WFAIL("step %d: %lld copies in DDP's backward, expected %lld (%lld without DDP)", step,
                          (long long)copies, (long long)want, (long long)ref_copies);
                if (r == 0 && rank == 0 && step == 0)
                    printf("  ddp on %s: %lld copies per backward, %lld without DDP\n",
                           td_device_str(dev, (char[32]){0}, 32), (long long)copies, (long long)ref_copies);
            }
        }
        WOK(td_ddp_check(d));
        double diff = param_diff(m, ref, true);
        if (!(diff < 1e-6)) WFAIL("step %d: DDP gradient differs from the mean over ranks by %g", step, diff);
        td_scope_end();
    }
    if (rank == 0)
        printf("  ddp: %d buckets, gradients equal the mean over %d ranks (no_sync included)\n", td_ddp_num_buckets(d),
               world);
    td_ddp_free(d);
    td_module_free(m);
    td_module_free(ref);
    return 0;
}

static int worker_mismatch(td_device dev) {
    int rank = td_dist_rank();
    td_module *m = small_model(1, rank == 1 ? 17 : 16);
    WOK(td_module_to(m, dev));
    td_ddp *d;
    td_status st = td_ddp_new(m, NULL, &d);
    if (st != TD_ERR_SHAPE || !strstr(td_last_error(), "'0.weight'") || !strstr(td_last_error(), "rank 1"))
        WFAIL("td_ddp_new on different models: %s, expected TD_ERR_SHAPE naming 0.weight and rank 1",
              td_status_str(st));
    if (rank == 0) printf("  mismatch: %s\n", td_last_error());
    td_module_free(m);
    return 0;
}

static int worker_main(int argc, char **argv) {
    if (argc < 4) return fprintf(stderr, "usage: test_dist --worker NAME DEVICE\n"), 2;
    td_device dev;
    if (td_device_parse(argv[3], &dev) != TD_OK) return fprintf(stderr, "%s\n", td_last_error()), 1;
    /* "cuda" binds LOCAL_RANK, "vulkan:0" that device on every rank */
    td_dist_opts o = {.device_type = dev.type, .fixed_index = strchr(argv[3], ':') != NULL, .index = dev.index};
    if (td_dist_init(&o) != TD_OK) return fprintf(stderr, "td_dist_init: %s\n", td_last_error()), 1;
    dev = td_dist_device(); /* the device this rank's group is bound to (cuda:LOCAL_RANK) */
    int rc = !strcmp(argv[2], "collectives") ? worker_collectives(dev)
             : !strcmp(argv[2], "ddp")       ? worker_ddp(dev)
             : !strcmp(argv[2], "mismatch")  ? worker_mismatch(dev)
                                             : 2;
    td_dist_destroy();
    return rc;
}

/* Run `trident launch --nproc n --backend nccl -- test_dist --worker name cuda` (torchrun-style, NCCL). */
static int run_nccl_workers(int n, const char *name) {
    int count = 0;
    while (td_device_available(TD_CUDA(count))) count++;
    if (count < n) TEST_SKIP("%d CUDA devices, %d needed", count, n);
    printf("  seed %s\n", getenv("TD_SEED"));
    fflush(stdout);
    no_leak_check_under_mpi(); /* NCCL's, likewise */
    char cmd[8400], dir[4096];
    snprintf(dir, sizeof dir, "%s", self_path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    snprintf(cmd, sizeof cmd, "'%s/../bin/trident' launch --nproc %d --backend nccl -- '%s' --worker %s cuda", dir, n,
             self_path, name);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

/* ---- cases ------------------------------------------------------------------- */

static bool have_vulkan(void) { return td_device_available(TD_VULKAN(0)); }

TEST(collectives_cpu) {
    test_seed();
    ASSERT_EQ_INT(run_workers(2, "collectives", "cpu"), 0);
    ASSERT_EQ_INT(run_workers(3, "collectives", "cpu"), 0);
}

/* two workers of `what` on the first Vulkan device (skipped without one) */
static void two_vulkan_workers(const char *what) {
    if (!have_vulkan()) TEST_SKIP("no Vulkan device");
    test_seed();
    ASSERT_EQ_INT(run_workers(2, what, "vulkan:0"), 0);
}

TEST(collectives_vulkan) { two_vulkan_workers("collectives"); }

TEST(ddp_cpu) {
    test_seed();
    ASSERT_EQ_INT(run_workers(2, "ddp", "cpu"), 0);
}

TEST(ddp_vulkan) { two_vulkan_workers("ddp"); }

/* Host staging (backend.h's host buffers and fences, DDP's Vulkan path): the copy of y into a host buffer is
** queued behind 200 queued adds that make y (200 on lavapipe's queue take far longer than the host's calls),
** and a write of y queued after it must not reach the buffer; a fence waited for on another thread then shows
** exactly the adds' result. The copy back from the host buffer is ordered before a later read of y. */
static void *wait_fence(void *arg) {
    void **a = arg;
    td_status st = ((const td_backend_i *)a[0])->fence_wait(a[1]);
    a[2] = (void *)(uintptr_t)st;
    return NULL;
}

TEST(host_staging_vulkan) {
    if (!have_vulkan()) TEST_SKIP("no Vulkan device");
    const td_backend_i *i = td_backend_for(TD_DEVICE_VULKAN)->iface;
    ASSERT(i->host_buffer_alloc && i->fence_record && i->fence_wait);
    int64_t n = 1 << 20;
    size_t bytes = (size_t)n * sizeof(float);
    td_scope_begin();
    td_tensor *y = td_zeros(1, &n, TD_F32, TD_VULKAN(0));
    for (int k = 0; k < 200; k++) y = td_add_scalar(y, 1.0);
    ASSERT_TENSOR(y);
    td_buffer *hb;
    float *host;
    ASSERT_OK(i->host_buffer_alloc(0, bytes, &hb, (void **)&host));
    for (int64_t k = 0; k < n; k++) host[k] = -1;
    size_t at = y->storage->guard + (size_t)y->offset * sizeof(float);
    ASSERT_OK(i->copy(y->storage->buf, at, hb, 0, bytes));
    td_fence *f;
    ASSERT_OK(i->fence_record(0, &f));
    ASSERT_OK(td_copy_(y, td_full(1, &n, 7.0, TD_F32, TD_VULKAN(0)))); /* queued after the fence */
    void *args[3] = {(void *)i, f, NULL};
    pthread_t th;
    ASSERT(pthread_create(&th, NULL, wait_fence, args) == 0);
    pthread_join(th, NULL);
    ASSERT_EQ_INT((int)(uintptr_t)args[2], TD_OK);
    int64_t bad = 0;
    for (int64_t k = 0; k < n; k++) bad += host[k] != 200.0f;
    ASSERT_EQ_INT((int)bad, 0);
    /* back: host -> y, queued; the read waits for it */
    for (int64_t k = 0; k < n; k++) host[k] = (float)(k % 1000);
    ASSERT_OK(i->copy(hb, 0, y->storage->buf, at, bytes));
    float *got = malloc(bytes);
    ASSERT(got);
    ASSERT_OK(td_copy_to_host(y, got, bytes, TD_F32));
    for (int64_t k = 0; k < n; k++) bad += got[k] != (float)(k % 1000);
    free(got);
    ASSERT_EQ_INT((int)bad, 0);
    i->buffer_free(hb);
    td_scope_end();
}

TEST(collectives_cuda) {
    test_seed();
    ASSERT_EQ_INT(run_nccl_workers(2, "collectives"), 0);
}

TEST(ddp_cuda) {
    test_seed();
    ASSERT_EQ_INT(run_nccl_workers(2, "ddp"), 0);
    ASSERT_EQ_INT(run_nccl_workers(2, "mismatch"), 0);
}

TEST(ddp_shape_mismatch) {
    test_seed();
    ASSERT_EQ_INT(run_workers(2, "mismatch", "cpu"), 0);
}

/* Without a launcher: a group of one, where every collective is the identity. */
TEST(group_of_one) {
    td_scope_begin();
    unsetenv("WORLD_SIZE"), unsetenv("OMPI_COMM_WORLD_SIZE");
    ASSERT_OK(td_dist_init(NULL));
    ASSERT_EQ_INT(td_dist_world_size(), 1);
    ASSERT_ERROR(td_dist_init(NULL), TD_ERR_STATE, "in a group already");
    td_tensor *t = ASSERT_TENSOR(td_arange(0, 5, 1, TD_F32, TD_CPU));
    ASSERT_OK(td_dist_all_reduce(t, TD_DIST_AVG));
    td_tensor *out = ASSERT_TENSOR(td_zeros(1, (int64_t[]){5}, TD_F32, TD_CPU));
    ASSERT_OK(td_dist_all_gather(out, t));
    ASSERT_NEAR(td_get(out, (int64_t[]){4}), 4, 0);
    td_module *m = small_model(3, 16);
    td_ddp *d;
    ASSERT_OK(td_ddp_new(m, NULL, &d));
    ASSERT_EQ_INT(td_ddp_num_buckets(d), 1); /* 25 MiB hold the whole model */
    ASSERT_OK(td_backward(loss_of(m, batch_x(1, 0, 0, TD_CPU)), NULL, false));
    ASSERT_OK(td_ddp_check(d));
    td_ddp_free(d);
    td_module_free(m);
    td_dist_destroy();
    ASSERT(!td_dist_is_initialized());
    ASSERT_ERROR(td_dist_all_reduce(t, TD_DIST_SUM), TD_ERR_STATE, "no process group");
    td_scope_end();
}

/* A post-accumulate hook runs while backward is still going: the last layer's
** fires before the first layer's gradient exists. */
static int hook_calls;
static td_tensor *first_weight;
static td_status early_hook(td_tensor *leaf, void *user) {
    (void)leaf, (void)user;
    if (hook_calls++ == 0 && td_grad_of(first_weight))
        return td_error_set(TD_ERR_STATE, "the first layer's grad was there already");
    return TD_OK;
}

TEST(post_accumulate_hook_overlaps) {
    td_scope_begin();
    td_module *m = small_model(5, 16);
    td_tensor *p[6];
    ASSERT_EQ_INT(td_module_parameters(m, p, 6), 6);
    first_weight = p[0];
    ASSERT_OK(td_register_post_accumulate_hook(p[5], early_hook, NULL)); /* the last Linear's bias */
    ASSERT_OK(td_backward(loss_of(m, batch_x(1, 0, 0, TD_CPU)), NULL, false));
    ASSERT_EQ_INT(hook_calls, 1);
    ASSERT(td_grad_of(first_weight));
    td_module_free(m);
    td_scope_end();
}

/* A single-rank DDP where a parameter gets no gradient. */
TEST(ddp_unused_parameter) {
    td_scope_begin();
    unsetenv("WORLD_SIZE"), unsetenv("OMPI_COMM_WORLD_SIZE");
    ASSERT_OK(td_dist_init(NULL));
    td_module *m = small_model(3, 16), *head = td_linear_new(3, 2, true);
    td_sequential_append(m, td_relu_new());
    ASSERT_OK(td_module_register_module(m, "unused", head));
    td_ddp *d;
    ASSERT_OK(td_ddp_new(m, NULL, &d));
    td_tensor *x = batch_x(1, 0, 0, TD_CPU);
    ASSERT_OK(td_backward(
        td_mean(
            td_module_forward(
                td_module_child(m, "4"),
                td_module_forward(td_module_child(m, "3"),
                                  td_module_forward(td_module_child(m, "2"),
                                                    td_module_forward(td_module_child(m, "1"),
                                                                      td_module_forward(td_module_child(m, "0"), x))))),
            0, NULL, false),
        NULL, false));
    ASSERT_ERROR(td_ddp_check(d), TD_ERR_STATE, "'unused.weight'");
    td_ddp_free(d);
    td_module_free(m);
    td_dist_destroy();
    td_scope_end();
}

/* A single-rank DDP with buckets of one or two parameters: td_ddp_new
** flattens the module, every bucket is a slice of its gradient arena, and a
** backward under DDP runs no more copies than the same backward without it
** (the copying path adds two per parameter); the gradients are unchanged. */
TEST(ddp_bucket_slices_no_copies) {
    td_scope_begin();
    unsetenv("WORLD_SIZE"), unsetenv("OMPI_COMM_WORLD_SIZE");
    ASSERT_OK(td_dist_init(NULL));
    td_module *m = small_model(3, 16), *ref = small_model(3, 16);
    ASSERT_OK(td_module_flatten_parameters(ref, TD_CPU));
    td_ddp *d;
    ASSERT_OK(td_ddp_new(m, &(td_ddp_opts){.bucket_cap_mb = 300.0 / (1 << 20)}, &d));
    ASSERT(td_ddp_num_buckets(d) >= 3);
    td_tensor *arena;
    ASSERT_OK(td_module_parameter_arena(m, TD_F32, NULL, &arena));
    ASSERT(arena);
    for (int step = 0; step < 3; step++) {
        td_module_zero_grad(m), td_module_zero_grad(ref);
        td_status st;
        int64_t copies = backward_copies(loss_of(m, batch_x(1, 0, step, TD_CPU)), &st);
        ASSERT_OK(st);
        int64_t ref_copies = backward_copies(loss_of(ref, batch_x(1, 0, step, TD_CPU)), &st);
        ASSERT_OK(st);
        ASSERT_OK(td_ddp_check(d));
        fprintf(stderr, "  step %d: %lld copies with DDP (%d buckets), %lld without\n", step, (long long)copies,
                td_ddp_num_buckets(d), (long long)ref_copies);
        ASSERT_EQ_INT(copies, ref_copies);
        ASSERT(param_diff(m, ref, true) == 0);
    }
    td_ddp_free(d);
    td_module_free(m), td_module_free(ref);
    td_dist_destroy();
    td_scope_end();
}

/* torch's DistributedSampler, written out: pad (or cut) the order, then stride. */
TEST(sampler_rules) {
    static const int64_t ns[] = {0, 1, 5, 10, 11, 17};
    for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
        for (int world = 1; world <= 4; world++)
            for (int drop = 0; drop < 2; drop++) {
                int64_t n = ns[a], len = td_dist_sampler_len(n, world, drop);
                int64_t total = drop ? (n / world) * world : ((n + world - 1) / world) * world;
                ASSERT_EQ_INT(len * world, total);
                int64_t order[32], padded[64], got[32];
                for (int64_t i = 0; i < n; i++) order[i] = i;
                ASSERT_OK(td_dist_sampler_indices(n, 1, 0, true, 9, 2, false, order)); /* the shuffled order */
                for (int64_t i = 0; i < total; i++) padded[i] = order[i % (n ? n : 1)];
                int64_t count[32] = {0};
                for (int r = 0; r < world; r++) {
                    ASSERT_OK(td_dist_sampler_indices(n, world, r, true, 9, 2, drop, got));
                    for (int64_t k = 0; k < len; k++) {
                        ASSERT_EQ_INT(got[k], padded[r + k * world]);
                        count[got[k]]++;
                    }
                }
                for (int64_t i = 0; i < n && !drop; i++) ASSERT(count[i] >= 1); /* every sample is seen */
            }
    /* epochs differ, seeds repeat */
    int64_t e0[10], e1[10], again[10];
    ASSERT_OK(td_dist_sampler_indices(20, 2, 1, true, 4, 0, false, e0));
    ASSERT_OK(td_dist_sampler_indices(20, 2, 1, true, 4, 1, false, e1));
    ASSERT_OK(td_dist_sampler_indices(20, 2, 1, true, 4, 0, false, again));
    ASSERT(memcmp(e0, e1, sizeof e0) != 0);
    ASSERT(memcmp(e0, again, sizeof e0) == 0);
    ASSERT_ERROR(td_dist_sampler_indices(5, 2, 2, true, 0, 0, false, e0), TD_ERR_MISUSE, "rank 2");
}

/* ---- the rendezvous ------------------------------------------------------------- */

static int free_port(void) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bind(s, (struct sockaddr *)&a, sizeof a);
    socklen_t len = sizeof a;
    getsockname(s, (struct sockaddr *)&a, &len);
    close(s);
    return ntohs(a.sin_port);
}

/* Fork ranks 1..n-1 of a rendezvous (rank r claims world worlds[r]); run rank 0
** here. Returns rank 0's status; *children_ok says whether every child got
** want_child (0: TD_OK). */
static td_status rendezvous(int n, const int *worlds, double timeout, int want_child, bool *children_ok) {
    int port = free_port();
    unsigned char payload[TD_DIST_ID_BYTES];
    for (int i = 0; i < TD_DIST_ID_BYTES; i++) payload[i] = (unsigned char)(i * 7 + 1);
    pid_t kids[8];
    for (int r = 1; r < n; r++) {
        kids[r] = fork();
        if (kids[r] == 0) {
            int fds[1] = {-1};
            unsigned char got[TD_DIST_ID_BYTES] = {0};
            td__rdzv z = {.addr = "127.0.0.1", .port = port, .rank = r, .world = worlds[r], .timeout_s = timeout};
            td_status st = td__rdzv_run(&z, got, fds);
            if (st) fprintf(stderr, "  rank %d: %s\n", r, td_last_error());
            bool ok = (int)st == want_child && (st || !memcmp(got, payload, sizeof got));
            _exit(ok ? 0 : 1);
        }
    }
    int fds[8];
    td__rdzv z = {.addr = "127.0.0.1", .port = port, .rank = 0, .world = worlds[0], .timeout_s = timeout};
    td_status st = td__rdzv_run(&z, payload, fds);
    *children_ok = true;
    for (int r = 1; r < n; r++) {
        int status;
        waitpid(kids[r], &status, 0);
        *children_ok &= WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    return st;
}

TEST(rendezvous_ok) {
    bool kids;
    ASSERT_OK(rendezvous(3, (int[]){3, 3, 3}, 10, TD_OK, &kids));
    ASSERT(kids);
}

TEST(rendezvous_wrong_world_size) {
    bool kids;
    ASSERT_EQ_INT(rendezvous(2, (int[]){2, 3}, 10, TD_ERR_MISUSE, &kids), TD_ERR_MISUSE);
    ASSERT(strstr(td_last_error(), "rank 1 has WORLD_SIZE=3 but rank 0 has WORLD_SIZE=2"));
    ASSERT(kids); /* rank 1 was told too */
}

TEST(rendezvous_missing_rank) {
    bool kids;
    ASSERT_EQ_INT(rendezvous(2, (int[]){3, 3}, 1, TD_OK, &kids), TD_ERR_MISUSE);
    ASSERT(strstr(td_last_error(), "only 2 of 3 ranks joined within 1 s; missing: 2"));
    (void)kids; /* rank 1 got the error reply, not TD_OK */
}

TEST(rendezvous_unreachable) {
    int port = free_port(); /* nobody listens there */
    int fds[1];
    unsigned char got[TD_DIST_ID_BYTES];
    td__rdzv z = {.addr = "127.0.0.1", .port = port, .rank = 1, .world = 2, .timeout_s = 1};
    ASSERT_ERROR(td__rdzv_run(&z, got, fds), TD_ERR_IO, "could not reach rank 0 within 1 s");
    z.addr = "no-such-host.invalid";
    ASSERT_ERROR(td__rdzv_run(&z, got, fds), TD_ERR_IO, "cannot resolve MASTER_ADDR 'no-such-host.invalid'");
}

/* td_dist_init's checks of the environment */
TEST(init_env_errors) {
    unsetenv("OMPI_COMM_WORLD_SIZE");
    setenv("WORLD_SIZE", "2", 1), setenv("RANK", "2", 1);
    ASSERT_ERROR(td_dist_init(NULL), TD_ERR_MISUSE, "RANK=2 is not below WORLD_SIZE=2");
    setenv("WORLD_SIZE", "two", 1);
    ASSERT_ERROR(td_dist_init(NULL), TD_ERR_MISUSE, "WORLD_SIZE='two' is not a non-negative integer");
    setenv("WORLD_SIZE", "2", 1), setenv("RANK", "0", 1);
    ASSERT_ERROR(td_dist_init(NULL), TD_ERR_MISUSE, "needs processes started by mpirun");
    /* a rendezvous address and no mpirun: tcp (rank 1 looks for rank 0 at a port no one listens on) */
    setenv("MASTER_ADDR", "127.0.0.1", 1), setenv("MASTER_PORT", "1", 1), setenv("RANK", "1", 1);
    setenv("TRIDENT_DIST_TIMEOUT", "1", 1);
    ASSERT_ERROR(td_dist_init(NULL), TD_ERR_IO, "could not reach rank 0");
    unsetenv("MASTER_ADDR"), unsetenv("MASTER_PORT"), unsetenv("TRIDENT_DIST_TIMEOUT"), setenv("RANK", "0", 1);
    ASSERT_ERROR(td_dist_init(&(td_dist_opts){.backend = TD_DIST_NCCL}), TD_ERR_MISUSE, "nccl backend needs CUDA");
    setenv("OMPI_COMM_WORLD_SIZE", "3", 1), setenv("OMPI_COMM_WORLD_RANK", "0", 1);
    ASSERT_ERROR(td_dist_init(NULL), TD_ERR_MISUSE, "WORLD_SIZE=2 but mpirun started 3 processes");
    ASSERT(!td_dist_is_initialized());
}

#define TESTS(X)                                                                                                       \
    X(collectives_cpu)                                                                                                 \
    X(collectives_vulkan)                                                                                              \
    X(ddp_cpu)                                                                                                         \
    X(ddp_vulkan)                                                                                                      \
    X(host_staging_vulkan)                                                                                             \
    X(collectives_cuda)                                                                                                \
    X(ddp_cuda)                                                                                                        \
    X(ddp_shape_mismatch)                                                                                              \
    X(group_of_one)                                                                                                    \
    X(post_accumulate_hook_overlaps)                                                                                   \
    X(ddp_unused_parameter)                                                                                            \
    X(ddp_bucket_slices_no_copies)                                                                                     \
    X(sampler_rules)                                                                                                   \
    X(rendezvous_ok)                                                                                                   \
    X(rendezvous_wrong_world_size)                                                                                     \
    X(rendezvous_missing_rank)                                                                                         \
    X(rendezvous_unreachable)                                                                                          \
    X(init_env_errors)

TESTS(TEST_DECLARE_)

int main(int argc, char **argv) {
    self_path = argv[0];
    if (argc > 1 && !strcmp(argv[1], "--worker")) return worker_main(argc, argv);
    static const test_case cases[] = {TESTS(TEST_ENTRY_)};
    return test_run(cases, (int)(sizeof cases / sizeof cases[0]), argc, argv);
}
