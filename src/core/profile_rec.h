/*
** The profiler's records (profile.c) as the report (src/profile/) reads them:
** one prof_rec per run()/run_many() call, one prof_slot per (backend, device).
*/
#ifndef TRIDENT_CORE_PROFILE_REC_H
#define TRIDENT_CORE_PROFILE_REC_H

#include "internal.h"

enum { TD_PROF_SLOTS = 16, TD_PROF_SHAPES = 160, TD_PROF_STEPS = 4096 };

typedef struct prof_rec {
    int kind, n_ops;  /* n_ops > 1: one run_many call; kind -1: a custom op's kernel */
    const char *name; /* a custom op's name (interned); NULL for table ops */
    int slot, tid;
    const char *module, *node;
    bool backward;
    bool gemm;      /* a product (matmul, convolution): its roof is the GEMM peak of dtype */
    td_dtype dtype; /* input 0's (output 0's without inputs) */
    double flops, bytes;
    int64_t h0, h1;       /* host ns around the call */
    td_event *e0, *e1;    /* device events, or NULL */
    double start_ms, dur; /* from the run's start; filled by harvest (or the host clock) */
    char shapes[TD_PROF_SHAPES];
} prof_rec;

typedef struct prof_slot {
    const td_backend *be;
    td_device dev;
    bool events;
    td_event *base;
    int64_t base_ns;
    int64_t pending; /* first record not yet harvested */
    int n_pending;
} prof_slot;

/* The last run's records, read after td__profile_stop. */
typedef struct td__prof_data {
    const prof_rec *recs;
    int64_t n_recs;
    const prof_slot *slots;
    int n_slots;
    int64_t t_begin, t_end; /* host ns */
    const int64_t *step_ns; /* td_profile_step's marks */
    int n_steps;
    int n_threads; /* host threads that dispatched, tids 1..n_threads */
} td__prof_data;

int64_t td__profile_now_ns(void); /* CLOCK_MONOTONIC */
/* Stop recording: wait for the devices and read their events. false (with
** *st the error) if the profiler was not recording; else *st says whether
** every op was recorded and timed. */
bool td__profile_stop(td_status *st);
td__prof_data td__profile_data(void);
/* Record run(ctx), a custom op's kernel over tensors[0..n_in) -> [n_in..n_in+n_out),
** as op name (custom_op.c calls it while td__profiling is set). */
td_status td__profile_custom(const char *name, int n_in, int n_out, td_tensor *const *tensors, td_status (*run)(void *),
                             void *ctx);
/* The name of r's op: the table's, or the custom op's. */
static inline const char *td__prof_rec_name(const prof_rec *r) { return r->name ? r->name : td_op_name(r->kind); }

#endif /* TRIDENT_CORE_PROFILE_REC_H */
