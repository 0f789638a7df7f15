/*
** The GEMM of MATMUL and LINEAR_GELU on cuBLASLt: out[..., M, N] = a[..., M, K] @ b[..., K, N], batch dims
** broadcast (stride 0) and each matrix row- or column-major (TD_LAYOUT_MATRIX).
**
** cuBLASLt is column-major, so the row-major product C = A B is computed as
** C^T = B^T A^T: Lt's "A" is b, its "B" is a, and its output (N x M, ld N) is
** out. A row-major operand is the transposed column-major one (op N on its
** transpose); a column-major one takes op T.
** Precision: f32 is strict fp32 (CUBLAS_COMPUTE_32F) unless the op carries
** TD_OP_FLAG_TF32 ("high"); f16/bf16 multiply on tensor cores and accumulate in
** fp32; f64 in fp64. An f32 out of f16/bf16 a and b (LINEAR_WGRAD's wide dw)
** is Lt's D in f32 from the same fp32 sums (CUBLAS_COMPUTE_32F), rounded once.
** Batches: the batch dims of (out, a, b) are merged like an elementwise
** iteration; the innermost merged dim is Lt's strided batch, outer ones loop on
** the host. Descriptors and the heuristic's algorithm are cached per shape (a
** shape Lt has no algorithm for is cached as such).
** Autotuning (TRIDENT_CUDA_GEMM_TUNE=1, read once; off by default), as torch's
** cudnn.benchmark: the first call of a shape asks the heuristic for up to
** TUNE_ALGOS algorithms, runs each on the call's own operands (one warm-up,
** then TUNE_REPS timed runs between CUDA events on the device's stream; an
** algorithm Lt refuses at launch or that wants more than the workspace is
** skipped) and caches the fastest (the heuristic's first unless another is 2%
** faster). That first call waits for the device: ONE HOST SYNC PER NEW SHAPE
** (in a loop of fixed shapes, the first step's only; td_host_sync_count does
** not count it). Every candidate is a valid Lt algorithm for the key, so
** results stay correct; as with cudnn.benchmark the choice (and so the low
** bits, split-K orders differing) may change from run to run. While the device
** captures a CUDA graph nothing is timed: the heuristic's first is used, not
** marked tuned, and the shape is tuned at its next eager call; a call whose
** output overlaps an input is not timed either (the reruns would read what
** they wrote). TRIDENT_CUDA_GEMM_TUNE=2 also prints each shape's choice to
** stderr (heuristic #1's and the chosen algorithm's ms).
**
** Epilogues (2-D products only): BIAS and GELU_AUX_BIAS add LINEAR_GELU's
** bias; BGRADB writes LINEAR_WGRAD's bias gradient, the sum of Lt's B (dy^T,
** taken transposed) over the GEMM's k (the rows of dy), to the bias pointer;
** DGELU (LINEAR_DGELU) multiplies the fp32 product by gelu'(aux) before the one
** rounding, aux being the pre-activation h [M, N] that GELU_AUX_BIAS kept.
** Accumulating (cu_lt_matmul_add, LINEAR_RESIDUAL): D = op(A) op(B) + bias + C
** with C an input of D's layout (beta = 1), so a residual add costs no pass of
** its own; C, D and the bias may be f32 for f16/bf16 A and B (a combination Lt
** takes under CUBLAS_COMPUTE_32F), so the fp32 sum is rounded once, to f32.
** Used by MATMUL, LINEAR_GELU, LINEAR_WGRAD, LINEAR_DGELU and LINEAR_RESIDUAL (cu_ops_matmul.cu): cu_lt_matmul and
** cu_lt_matmul_add (cu.h).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu.h"

/* What one Lt call looks like; the cache key. */
typedef struct plan_key {
    td_dtype dt;   /* of Lt's A and B */
    td_dtype dt_c; /* of C and D: dt, or f32 for f16/bf16 dt (cu_lt_matmul_add; LINEAR_WGRAD's f32 sums) */
    int tf32;
    int accum;                     /* C is an input (beta = 1), not D */
    int trans_a, trans_b;          /* Lt's A = b, Lt's B = a */
    int64_t m, n, k;               /* of C = A B in row-major terms */
    int64_t lda, ldb;              /* leading dims of Lt's A and B */
    int64_t batch, sa, sb, sc;     /* strided batch: count and strides of Lt's A, B, C */
    int epi;                       /* CU_EPI_*: what the epilogue adds (LINEAR_GELU) or sums (LINEAR_WGRAD) */
    int align_a, align_b, align_c; /* bytes: 16, 8, 4 or 2 */
    int dev;
} plan_key;

typedef struct plan {
    plan_key key;
    bool used, failed; /* failed: Lt had no algorithm for this key */
    bool tuned;        /* algo is the fastest of the timed candidates (TRIDENT_CUDA_GEMM_TUNE) */
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
} plan;

#define PLANS 512
static plan plans[PLANS];
static pthread_mutex_t plans_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t key_hash(const plan_key *k) {
    uint64_t h = 0xCBF29CE484222325ull;
    const unsigned char *p = (const unsigned char *)k;
    for (size_t i = 0; i < sizeof *k; i++) h = (h ^ p[i]) * 0x100000001B3ull;
    return h;
}

static int alignment(const void *p) {
    uintptr_t a = (uintptr_t)p;
    return a % 16 == 0 ? 16 : a % 8 == 0 ? 8 : a % 4 == 0 ? 4 : 2;
}

/* Lt's data type of dt (a float) */
static cudaDataType_t lt_type(td_dtype dt) {
    return dt == TD_F64 ? CUDA_R_64F : dt == TD_F16 ? CUDA_R_16F : dt == TD_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

/* p's descriptor and layouts, from its key. */
static td_status make_plan(plan *p) {
    const plan_key *k = &p->key;
    cudaDataType_t ty = lt_type(k->dt), ty_c = lt_type(k->dt_c);
    cublasComputeType_t ct = k->dt == TD_F64              ? CUBLAS_COMPUTE_64F
                             : k->dt == TD_F32 && k->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                          : CUBLAS_COMPUTE_32F;
    cudaDataType_t scale = k->dt == TD_F64 ? CUDA_R_64F : CUDA_R_32F;
    cublasOperation_t ta = k->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = k->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    td_status st = cu_blas_status(cublasLtMatmulDescCreate(&p->op, ct, scale), "cublasLtMatmulDescCreate");
    if (st != TD_OK) return st;
    cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    if (k->epi != CU_EPI_NONE) { /* bias and aux pointers are set per call (lt_run) */
        cublasLtEpilogue_t e = k->epi == CU_EPI_BIAS     ? CUBLASLT_EPILOGUE_BIAS
                               : k->epi == CU_EPI_BGRADB ? CUBLASLT_EPILOGUE_BGRADB
                               : k->epi == CU_EPI_DGELU  ? CUBLASLT_EPILOGUE_DGELU
                                                         : CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
        int64_t ld_aux = k->n; /* aux is h [M, N]: column-major N x M, ld N */
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e);
        if (k->epi == CU_EPI_GELU_AUX_BIAS || k->epi == CU_EPI_DGELU)
            cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld_aux, sizeof ld_aux);
    }
    /* Lt's A: op(A) is N x K; Lt's B: op(B) is K x M; C is N x M */
    uint64_t ra = k->trans_a ? k->k : k->n, ca = k->trans_a ? k->n : k->k;
    uint64_t rb = k->trans_b ? k->m : k->k, cb = k->trans_b ? k->k : k->m;
    st = cu_blas_status(cublasLtMatrixLayoutCreate(&p->la, ty, ra, ca, k->lda), "layout A");
    if (st == TD_OK) st = cu_blas_status(cublasLtMatrixLayoutCreate(&p->lb, ty, rb, cb, k->ldb), "layout B");
    if (st == TD_OK) st = cu_blas_status(cublasLtMatrixLayoutCreate(&p->lc, ty_c, k->n, k->m, k->n), "layout C");
    if (st != TD_OK) return st;
    if (k->batch > 1) {
        int32_t count = (int32_t)k->batch;
        cublasLtMatrixLayout_t ls[3] = {p->la, p->lb, p->lc};
        int64_t strides[3] = {k->sa, k->sb, k->sc};
        for (int i = 0; i < 3; i++) {
            cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count);
            cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &strides[i],
                                             sizeof strides[i]);
        }
    }
    return TD_OK;
}

/* The operands of one Lt call: Lt's A and B, D, the accumulated C (NULL: none, beta = 0), and the epilogue's bias
** and aux pointers. */
typedef struct lt_call {
    const void *a, *b;
    void *c;
    const void *cin;
    const void *bias;
    void *aux;
} lt_call;

static const float one32 = 1, zero32 = 0;
static const double one64 = 1, zero64 = 0;

/* Lt's D = op(A) op(B) (+ C when call has one) with algo and the epilogue's pointers of call; under plans_lock when
** p has an epilogue (the pointers live in the descriptor). */
static cublasStatus_t lt_run(cu_dev *d, plan *p, const cublasLtMatmulAlgo_t *algo, const lt_call *call) {
    bool f64 = p->key.dt == TD_F64;
    if (p->key.epi != CU_EPI_NONE) {
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &call->bias, sizeof call->bias);
        if (p->key.epi == CU_EPI_GELU_AUX_BIAS || p->key.epi == CU_EPI_DGELU)
            cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &call->aux,
                                           sizeof call->aux);
    }
    const void *one = f64 ? (const void *)&one64 : (const void *)&one32;
    const void *beta = call->cin ? one : f64 ? (const void *)&zero64 : (const void *)&zero32;
    return cublasLtMatmul(d->lt, p->op, one, call->a, p->la, call->b, p->lb, beta, call->cin ? call->cin : call->c,
                          p->lc, call->c, p->lc, algo, d->lt_workspace, d->lt_workspace_size, d->stream);
}

/* TRIDENT_CUDA_GEMM_TUNE: 0 (unset) heuristic only, 1 time the candidates, 2 and print each choice; read once, under
** plans_lock */
static int tune_mode(void) {
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("TRIDENT_CUDA_GEMM_TUNE");
        v = !e || !strcmp(e, "0") ? 0 : !strcmp(e, "2") ? 2 : 1;
    }
    return v;
}

enum { TUNE_ALGOS = 8, TUNE_REPS = 5 };

/* Byte range [lo, hi) of a column-major rows x cols operand with leading dim ld, batch of them stride apart. */
static void extent(const void *ptr, int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride, size_t es,
                   uintptr_t r[2]) {
    r[0] = (uintptr_t)ptr;
    r[1] = r[0] + (uintptr_t)(((batch - 1) * (stride > 0 ? stride : 0) + ld * (cols - 1) + rows) * (int64_t)es);
}

/* Whether a rerun of call could read what an earlier run wrote: D (or BGRADB's bias, GELU_AUX_BIAS's aux) overlaps
** an input. */
static bool writes_inputs(const plan_key *k, const lt_call *call) {
    size_t es = td_dtype_size(k->dt), es_c = td_dtype_size(k->dt_c);
    uintptr_t in[5][2], out[3][2];
    int nin = 2, nout = 1;
    extent(call->a, k->trans_a ? k->k : k->n, k->trans_a ? k->n : k->k, k->lda, k->batch, k->sa, es, in[0]);
    extent(call->b, k->trans_b ? k->m : k->k, k->trans_b ? k->k : k->m, k->ldb, k->batch, k->sb, es, in[1]);
    extent(call->c, k->n, k->m, k->n, k->batch, k->sc, es_c, out[0]);
    if (call->cin) extent(call->cin, k->n, k->m, k->n, k->batch, k->sc, es_c, in[nin++]);
    if (k->epi == CU_EPI_DGELU) extent(call->aux, k->n, k->m, k->n, 1, 0, es_c, in[nin++]);
    if (k->epi == CU_EPI_GELU_AUX_BIAS) extent(call->aux, k->n, k->m, k->n, 1, 0, es_c, out[nout++]);
    if (k->epi == CU_EPI_BIAS || k->epi == CU_EPI_GELU_AUX_BIAS)
        extent(call->bias, k->n, 1, k->n, 1, 0, es_c, in[nin++]);
    if (k->epi == CU_EPI_BGRADB) extent(call->bias, k->m, 1, k->m, 1, 0, es_c, out[nout++]);
    for (int i = 0; i < nin; i++)
        for (int j = 0; j < nout; j++)
            if (in[i][0] < out[j][1] && out[j][0] < in[i][1]) return true;
    return false;
}

/* p->algo: the fastest of the n candidates res run on call's operands (see the top comment); one host sync. */
static td_status time_algos(cu_dev *d, plan *p, const lt_call *call, const cublasLtMatmulHeuristicResult_t *res,
                            int n) {
    cudaEvent_t ev[2 * TUNE_ALGOS] = {0};
    bool ran[TUNE_ALGOS] = {0};
    float ms[TUNE_ALGOS];
    td_status st = TD_OK;
    for (int i = 0; i < 2 * n && st == TD_OK; i++)
        st = cu_status(cudaEventCreate(&ev[i]), "gemm tune: cudaEventCreate");
    for (int i = 0; i < n && st == TD_OK; i++) {
        /* the warm-up: an algorithm Lt refuses at launch is skipped */
        if (res[i].state != CUBLAS_STATUS_SUCCESS || res[i].workspaceSize > d->lt_workspace_size ||
            lt_run(d, p, &res[i].algo, call) != CUBLAS_STATUS_SUCCESS)
            continue;
        st = cu_status(cudaEventRecord(ev[2 * i], d->stream), "gemm tune: cudaEventRecord");
        bool ok = true;
        for (int r = 0; r < TUNE_REPS && ok && st == TD_OK; r++)
            ok = lt_run(d, p, &res[i].algo, call) == CUBLAS_STATUS_SUCCESS;
        if (st == TD_OK) st = cu_status(cudaEventRecord(ev[2 * i + 1], d->stream), "gemm tune: cudaEventRecord");
        ran[i] = ok;
    }
    if (st == TD_OK) st = cu_status(cudaStreamSynchronize(d->stream), "gemm tune: cudaStreamSynchronize");
    int best = -1;
    for (int i = 0; i < n && st == TD_OK; i++) {
        if (!ran[i]) continue;
        st = cu_status(cudaEventElapsedTime(&ms[i], ev[2 * i], ev[2 * i + 1]), "gemm tune: cudaEventElapsedTime");
        if (best < 0 || ms[i] < ms[best]) best = i;
    }
    for (int i = 0; i < 2 * n; i++)
        if (ev[i]) cudaEventDestroy(ev[i]);
    if (st != TD_OK) return st;
    if (best > 0 && ran[0] && ms[best] > 0.98f * ms[0]) best = 0; /* within noise: keep the heuristic's first */
    if (best >= 0) p->algo = res[best].algo;
    if (tune_mode() == 2) {
        const plan_key *k = &p->key;
        int timed = 0;
        for (int i = 0; i < n; i++) timed += ran[i];
        fprintf(stderr,
                "trident: gemm tune cuda:%d %s m=%lld n=%lld k=%lld batch=%lld op=%c%c epi=%d: heuristic #1 %.4f "
                "ms, chosen #%d %.4f ms (%d of %d timed)\n",
                k->dev, td_dtype_name(k->dt), (long long)k->m, (long long)k->n, (long long)k->k, (long long)k->batch,
                k->trans_a ? 'T' : 'N', k->trans_b ? 'T' : 'N', k->epi, ran[0] ? ms[0] / TUNE_REPS : -1.0, best + 1,
                best >= 0 ? ms[best] / TUNE_REPS : -1.0, timed, n);
    }
    return TD_OK;
}

/* p->algo for p's key: the heuristic's first; when tuning, not capturing and call writes no input, the fastest of
** its first TUNE_ALGOS, timed on call's operands (p->tuned). */
static td_status pick_algo(cu_dev *d, plan *p, const lt_call *call) {
    const plan_key *k = &p->key;
    bool tune = tune_mode() > 0 && !d->capturing && !writes_inputs(k, call);
    cublasLtMatmulPreference_t pref;
    td_status st = cu_blas_status(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    if (st != TD_OK) return st;
    uint64_t ws = d->lt_workspace_size;
    uint32_t al[3] = {(uint32_t)k->align_a, (uint32_t)k->align_b, (uint32_t)k->align_c};
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al[0], 4);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al[1], 4);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al[2], 4);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al[2], 4);
    cublasLtMatmulHeuristicResult_t res[TUNE_ALGOS];
    int found = 0;
    st = cu_blas_status(cublasLtMatmulAlgoGetHeuristic(d->lt, p->op, p->la, p->lb, p->lc, p->lc, pref,
                                                       tune ? TUNE_ALGOS : 1, res, &found),
                        "cublasLtMatmulAlgoGetHeuristic");
    cublasLtMatmulPreferenceDestroy(pref);
    /* an epilogue Lt refuses for these layouts (INVALID_VALUE): unsupported, so the caller falls back */
    if (st == TD_ERR_MISUSE && k->epi != CU_EPI_NONE)
        st = td_error_set(TD_ERR_UNSUPPORTED, "matmul: cuBLASLt refuses epilogue %d for this layout", k->epi);
    if (st == TD_OK && found == 0)
        st = td_error_set(TD_ERR_UNSUPPORTED, "matmul: cuBLASLt has no algorithm for %s [%lld,%lld]x[%lld,%lld]",
                          td_dtype_name(k->dt), (long long)k->m, (long long)k->k, (long long)k->k, (long long)k->n);
    if (st != TD_OK) return st;
    p->algo = res[0].algo;
    p->tuned = tune;
    return tune && found > 1 ? time_algos(d, p, call, res, found) : TD_OK;
}

static void plan_destroy(plan *p) {
    if (p->op) cublasLtMatmulDescDestroy(p->op);
    if (p->la) cublasLtMatrixLayoutDestroy(p->la);
    if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
    if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
    memset(p, 0, sizeof *p);
}

/* The cached plan of key, made on first use (and tuned there, or at the first use that may tune, on call's
** operands). */
static td_status get_plan(cu_dev *d, const plan_key *key, const lt_call *call, plan **out) {
    pthread_mutex_lock(&plans_lock);
    uint64_t h = key_hash(key);
    plan *slot = NULL;
    for (int i = 0; i < 8 && !slot; i++) {
        plan *p = &plans[(h + (uint64_t)i) % PLANS];
        if (p->used && !memcmp(&p->key, key, sizeof *key)) {
            *out = p;
            td_status st = p->failed
                               ? td_error_set(TD_ERR_UNSUPPORTED, "matmul: cuBLASLt has no algorithm for this shape")
                               : TD_OK;
            /* made while capturing (or on overlapping operands) with tuning on: tuned now */
            if (st == TD_OK && tune_mode() > 0 && !p->tuned && !d->capturing && !writes_inputs(key, call))
                st = pick_algo(d, p, call);
            pthread_mutex_unlock(&plans_lock);
            return st;
        }
        if (!p->used) slot = p;
    }
    if (!slot) { /* all 8 probes taken: replace the first */
        slot = &plans[h % PLANS];
        plan_destroy(slot);
    }
    slot->key = *key;
    td_status st = make_plan(slot);
    if (st == TD_OK) st = pick_algo(d, slot, call);
    if (st != TD_OK) {
        plan_destroy(slot);
        if (st == TD_ERR_UNSUPPORTED) /* remembered, so the heuristic is not asked again */
            slot->key = *key, slot->used = slot->failed = true;
    } else
        slot->used = true, *out = slot;
    pthread_mutex_unlock(&plans_lock);
    return st;
}

/* Leading dimension and transpose of a matrix operand [rows, cols] with strides
** (rs, cs) as a column-major Lt operand of its transpose (cols x rows). */
static bool lt_operand(int64_t rows, int64_t cols, int64_t rs, int64_t cs, int *trans, int64_t *ld) {
    if (cs == 1 || cols == 1) { /* row-major: its transpose is column-major with ld = rs */
        *trans = 0;
        *ld = rows == 1 || rs < cols ? (cols > 1 ? cols : 1) : rs;
        return rows == 1 || rs >= cols;
    }
    if (rs == 1 || rows == 1) { /* column-major: Lt takes it transposed, ld = cs */
        *trans = 1;
        *ld = cols == 1 || cs < rows ? rows : cs;
        return cols == 1 || cs >= rows;
    }
    return false;
}

/* cu_lt_matmul, accumulating onto cin (of out's dtype and layout; NULL: none) when given */
static td_status lt_matmul(cu_dev *d, const td_op *op, int epi, const void *bias, void *aux, const void *cin) {
    /* a and b are [batch..., M, K] and [batch..., K, N] views of one rank; out is contiguous with those batch
    ** dims and M, N (a 1-D operand's size-1 dim dropped), which is the same memory as [batch..., M, N] */
    const td_operand *a = &op->in[0], *b = &op->in[1], *c = &op->out[0];
    int nd = a->ndim;
    int64_t m = a->shape[nd - 2], k = a->shape[nd - 1], n = b->shape[nd - 1];
    size_t es = td_dtype_size(a->dtype), es_c = td_dtype_size(c->dtype);
    if (k == 0 && cin) return td_error_set(TD_ERR_UNSUPPORTED, "matmul: K = 0 with an accumulated C");
    if (k == 0)
        return cu_status(cudaMemsetAsync(cu_data(c), 0, (size_t)td_operand_numel(c) * es_c, d->stream),
                         "matmul: K = 0");
    plan_key key;
    memset(&key, 0, sizeof key);
    key.dt = a->dtype, key.dt_c = c->dtype, key.accum = cin != NULL;
    key.tf32 = (op->flags & TD_OP_FLAG_TF32) != 0;
    key.m = m, key.n = n, key.k = k, key.dev = d->index, key.epi = epi;
    /* Lt's A is b [K, N]; Lt's B is a [M, K] */
    if (!lt_operand(k, n, b->strides[nd - 2], b->strides[nd - 1], &key.trans_a, &key.lda) ||
        !lt_operand(m, k, a->strides[nd - 2], a->strides[nd - 1], &key.trans_b, &key.ldb))
        return td_error_set(TD_ERR_MISUSE, "matmul: an operand is neither row- nor column-major");
    /* batch dims of (c, a, b), merged; c's strides are contiguous ones */
    int nb = 0;
    int64_t bshape[TD_MAX_DIMS], bs[3][TD_MAX_DIMS], cstride = m * n;
    int64_t cs_of[TD_MAX_DIMS];
    for (int i = nd - 3; i >= 0; i--) cs_of[i] = cstride, cstride *= a->shape[i];
    for (int i = 0; i < nd - 2; i++) {
        int64_t size = a->shape[i];
        int64_t s3[3] = {cs_of[i], a->strides[i], b->strides[i]};
        if (size == 1) continue;
        if (nb > 0 && bs[0][nb - 1] == s3[0] * size && bs[1][nb - 1] == s3[1] * size && bs[2][nb - 1] == s3[2] * size) {
            bshape[nb - 1] *= size;
            for (int j = 0; j < 3; j++) bs[j][nb - 1] = s3[j];
        } else {
            bshape[nb] = size;
            for (int j = 0; j < 3; j++) bs[j][nb] = s3[j];
            nb++;
        }
    }
    key.batch = nb ? bshape[nb - 1] : 1;
    key.sc = nb ? bs[0][nb - 1] : 0, key.sb = nb ? bs[1][nb - 1] : 0, key.sa = nb ? bs[2][nb - 1] : 0;
    int64_t outer = 1;
    for (int i = 0; i < nb - 1; i++) outer *= bshape[i];
    char *pa = cu_data(a), *pb = cu_data(b), *pc = cu_data(c);
    key.align_a = alignment(pb), key.align_b = alignment(pa), key.align_c = alignment(pc);
    for (int i = 0; i + 1 < nb; i++) { /* outer batches must keep the alignment */
        int64_t steps[3] = {bs[2][i], bs[1][i], bs[0][i]};
        int *al[3] = {&key.align_a, &key.align_b, &key.align_c};
        for (int j = 0; j < 3; j++)
            while (*al[j] > 2 && ((uint64_t)(steps[j] * (int64_t)(j == 2 ? es_c : es)) % (uint64_t)*al[j])) *al[j] /= 2;
    }
    if (cin && outer > 1) return td_error_set(TD_ERR_UNSUPPORTED, "matmul: an accumulated C with batch dims");
    if (cin && alignment(cin) < key.align_c) key.align_c = alignment(cin); /* C's alignment too */
    plan *p;
    lt_call call = {.a = pb, .b = pa, .c = pc, .cin = cin, .bias = bias, .aux = aux}; /* batch 0's */
    td_status st = get_plan(d, &key, &call, &p);
    if (st != TD_OK) return st;
    if (cin && epi == CU_EPI_NONE) return cu_blas_status(lt_run(d, p, &p->algo, &call), "cublasLtMatmul (C)");
    if (epi !=
        CU_EPI_NONE) { /* a 2-D GEMM with an epilogue: one call, under the lock, as the pointers live in the plan */
        pthread_mutex_lock(&plans_lock);
        st = cu_blas_status(lt_run(d, p, &p->algo, &call), "cublasLtMatmul (epilogue)");
        pthread_mutex_unlock(&plans_lock);
        return st;
    }
    for (int64_t o = 0; o < outer && st == TD_OK; o++) {
        int64_t off[3] = {0, 0, 0}, rest = o; /* element offsets of batch o over the outer merged dims */
        for (int i = nb - 2; i >= 0; i--) {
            int64_t idx = rest % bshape[i];
            rest /= bshape[i];
            for (int j = 0; j < 3; j++) off[j] += idx * bs[j][i];
        }
        lt_call batch = {
            .a = pb + off[2] * (int64_t)es, .b = pa + off[1] * (int64_t)es, .c = pc + off[0] * (int64_t)es_c};
        st = cu_blas_status(lt_run(d, p, &p->algo, &batch), "cublasLtMatmul");
    }
    return st;
}

td_status cu_lt_matmul(cu_dev *d, const td_op *op, int epi, const void *bias, void *aux) {
    return lt_matmul(d, op, epi, bias, aux, NULL);
}

td_status cu_lt_matmul_add(cu_dev *d, const td_op *op, int epi, const void *bias, const void *c) {
    return lt_matmul(d, op, epi, bias, NULL, c);
}
