/*
** libtrident-mpi.so: the MPI transport of src/dist (contract in
** src/dist/transport.h), for CPU tensors and for Vulkan tensors that the core
** stages through the host. Every call is blocking MPI on host memory. MPI is
** initialized with MPI_THREAD_SERIALIZED where the library provides it: the
** core then calls DDP's all-reduces from its worker thread (one call at a
** time, MPI_Finalize from init's thread).
**
** Types: f32, f64, i32, i64 and u8 are MPI's own; bool is u8 with MAX for
** both SUM and MAX (logical or of 0/1 bytes); f16 and bf16 travel as
** MPI_UINT16_T with user ops that widen each pair to float, combine, and
** round back to nearest even. AVG is SUM, then a division by the world size
** in the element's own precision (through float for f16/bf16).
*/
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "backend_cpu/cpu.h" /* the f16/bf16 conversions */
#include "dist/transport.h"

static int world_size = 1;
static bool serialized;              /* MPI provides MPI_THREAD_SERIALIZED (or more) */
static MPI_Op op_f16[2], op_bf16[2]; /* [0] sum, [1] max */

static int fail(char *why, const char *what, int code) {
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_Error_string(code, s, &n) != MPI_SUCCESS) snprintf(s, sizeof s, "MPI error %d", code);
    snprintf(why, TD_DIST_WHY, "mpi: %s failed: %.200s", what, s);
    return 1;
}

#define HALF_OP(NAME, TO, FROM, EXPR)                                                                                  \
    static void NAME(void *in, void *inout, int *len, MPI_Datatype *dt) {                                              \
        (void)dt;                                                                                                      \
        const uint16_t *a = in;                                                                                        \
        uint16_t *b = inout;                                                                                           \
        for (int i = 0; i < *len; i++) {                                                                               \
            float x = TO(a[i]), y = TO(b[i]);                                                                          \
            b[i] = FROM(EXPR);                                                                                         \
        }                                                                                                              \
    }
/* max with NaN winning, as the CPU's reductions */
#define MAXF(x, y) (isnan(x) || x > y ? x : y)
HALF_OP(f16_sum, cpu_f16_to_f32, cpu_f32_to_f16, x + y)
HALF_OP(f16_max, cpu_f16_to_f32, cpu_f32_to_f16, MAXF(x, y))
HALF_OP(bf16_sum, cpu_bf16_to_f32, cpu_f32_to_bf16, x + y)
HALF_OP(bf16_max, cpu_bf16_to_f32, cpu_f32_to_bf16, MAXF(x, y))

/* The MPI datatype and op of (dt, op); 0 or a message. */
static int mpi_types(int dt, int op, MPI_Datatype *type, MPI_Op *mop, char *why) {
    int sum = op != TD_DIST_T_MAX;
    switch (dt) {
    case TD_F32: *type = MPI_FLOAT; break;
    case TD_F64: *type = MPI_DOUBLE; break;
    case TD_I32: *type = MPI_INT32_T; break;
    case TD_I64: *type = MPI_INT64_T; break;
    case TD_U8: *type = MPI_UINT8_T; break;
    case TD_BOOL: *type = MPI_UINT8_T, *mop = MPI_MAX; return 0;
    case TD_F16: *type = MPI_UINT16_T, *mop = op_f16[!sum]; return 0;
    case TD_BF16: *type = MPI_UINT16_T, *mop = op_bf16[!sum]; return 0;
    default: snprintf(why, TD_DIST_WHY, "mpi: dtype %d has no MPI type", dt); return 1;
    }
    *mop = sum ? MPI_SUM : MPI_MAX;
    return 0;
}

/* buf[0..count) /= world_size, for AVG (floating dtypes; the core refuses others). */
static void divide(void *buf, size_t count, int dt) {
    for (size_t i = 0; i < count; i++) switch (dt) {
        case TD_F32: ((float *)buf)[i] /= (float)world_size; break;
        case TD_F64: ((double *)buf)[i] /= (double)world_size; break;
        case TD_F16: {
            uint16_t *h = buf;
            h[i] = cpu_f32_to_f16(cpu_f16_to_f32(h[i]) / (float)world_size);
            break;
        }
        case TD_BF16: {
            uint16_t *h = buf;
            h[i] = cpu_f32_to_bf16(cpu_bf16_to_f32(h[i]) / (float)world_size);
            break;
        }
        default: break;
        }
}

static int init(int *rank, int *world, int device, const unsigned char id[TD_DIST_ID_BYTES], char *why) {
    (void)device, (void)id;
    int inited = 0, provided = MPI_THREAD_SINGLE, rc;
    MPI_Initialized(&inited);
    if (!inited && (rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided)) != MPI_SUCCESS)
        return fail(why, "MPI_Init_thread", rc);
    if (inited) MPI_Query_thread(&provided); /* initialized by the application */
    serialized = provided >= MPI_THREAD_SERIALIZED;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, world);
    world_size = *world;
    MPI_Op_create(f16_sum, 1, &op_f16[0]);
    MPI_Op_create(f16_max, 1, &op_f16[1]);
    MPI_Op_create(bf16_sum, 1, &op_bf16[0]);
    MPI_Op_create(bf16_max, 1, &op_bf16[1]);
    return 0;
}

static int bcast_bytes(void *buf, size_t n, char *why) {
    int rc = MPI_Bcast(buf, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : fail(why, "MPI_Bcast", rc);
}

/* MPI counts are int: large buffers go in pieces of at most 2^30 elements. */
#define CHUNK ((size_t)1 << 30)

static size_t elem_size(int dt) {
    return dt == TD_F64 || dt == TD_I64 ? 8 : dt == TD_F32 || dt == TD_I32 ? 4 : dt == TD_F16 || dt == TD_BF16 ? 2 : 1;
}

static int all_reduce(void *buf, size_t count, int dt, int op, void *stream, char *why) {
    (void)stream;
    MPI_Datatype type;
    MPI_Op mop;
    if (mpi_types(dt, op, &type, &mop, why)) return 1;
    for (size_t at = 0; at < count; at += CHUNK) {
        size_t n = count - at < CHUNK ? count - at : CHUNK;
        int rc = MPI_Allreduce(MPI_IN_PLACE, (char *)buf + at * elem_size(dt), (int)n, type, mop, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return fail(why, "MPI_Allreduce", rc);
    }
    if (op == TD_DIST_T_AVG) divide(buf, count, dt);
    return 0;
}

static int reduce(void *buf, size_t count, int dt, int op, int root, void *stream, char *why) {
    (void)stream;
    MPI_Datatype type;
    MPI_Op mop;
    if (mpi_types(dt, op, &type, &mop, why)) return 1;
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (size_t at = 0; at < count; at += CHUNK) {
        size_t n = count - at < CHUNK ? count - at : CHUNK;
        char *p = (char *)buf + at * elem_size(dt);
        int rc = MPI_Reduce(rank == root ? MPI_IN_PLACE : p, rank == root ? p : NULL, (int)n, type, mop, root,
                            MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return fail(why, "MPI_Reduce", rc);
    }
    if (op == TD_DIST_T_AVG && rank == root) divide(buf, count, dt);
    return 0;
}

static int broadcast(void *buf, size_t count, int dt, int root, void *stream, char *why) {
    (void)stream;
    size_t bytes = count * elem_size(dt);
    for (size_t at = 0; at < bytes; at += CHUNK) {
        size_t n = bytes - at < CHUNK ? bytes - at : CHUNK;
        int rc = MPI_Bcast((char *)buf + at, (int)n, MPI_BYTE, root, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return fail(why, "MPI_Bcast", rc);
    }
    return 0;
}

static int all_gather(const void *in, void *out, size_t count, int dt, void *stream, char *why) {
    (void)stream;
    size_t bytes = count * elem_size(dt);
    if (bytes > (size_t)INT32_MAX)
        return snprintf(why, TD_DIST_WHY, "mpi: all_gather of %zu bytes per rank is over 2^31", bytes), 1;
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const void *src = in == (const char *)out + (size_t)rank * bytes ? MPI_IN_PLACE : in;
    int rc = MPI_Allgather(src, (int)bytes, MPI_BYTE, out, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : fail(why, "MPI_Allgather", rc);
}

static int reduce_scatter(const void *in, void *out, size_t count, int dt, int op, void *stream, char *why) {
    (void)stream;
    MPI_Datatype type;
    MPI_Op mop;
    if (mpi_types(dt, op, &type, &mop, why)) return 1;
    if (count > (size_t)INT32_MAX)
        return snprintf(why, TD_DIST_WHY, "mpi: reduce_scatter of %zu elements per rank is over 2^31", count), 1;
    int rc = MPI_Reduce_scatter_block(in, out, (int)count, type, mop, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return fail(why, "MPI_Reduce_scatter_block", rc);
    if (op == TD_DIST_T_AVG) divide(out, count, dt);
    return 0;
}

static int barrier(void *stream, char *why) {
    (void)stream;
    int rc = MPI_Barrier(MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : fail(why, "MPI_Barrier", rc);
}

static int wait_started(void *stream, char *why) {
    (void)stream, (void)why;
    return 0;
}

static void finalize(void) {
    int fin = 0;
    MPI_Finalized(&fin);
    if (fin) return;
    for (int k = 0; k < 2; k++) MPI_Op_free(&op_f16[k]), MPI_Op_free(&op_bf16[k]);
    MPI_Finalize();
}

static bool any_thread(void) { return serialized; }

static const td_dist_transport mpi_transport = {
    .version = TD_DIST_TRANSPORT_VERSION,
    .name = "mpi",
    .make_id = NULL,
    .init = init,
    .bcast_bytes = bcast_bytes,
    .all_reduce = all_reduce,
    .broadcast = broadcast,
    .all_gather = all_gather,
    .reduce_scatter = reduce_scatter,
    .barrier = barrier,
    .all_reduce_start = all_reduce,
    .wait_started = wait_started,
    .reduce_start = reduce,
    .abort = NULL,
    .finalize = finalize,
    .any_thread = any_thread,
};

__attribute__((visibility("default"))) const td_dist_transport *td_dist_transport_plugin(void) {
    return &mpi_transport;
}
