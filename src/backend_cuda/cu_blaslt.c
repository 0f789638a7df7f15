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
** fp32; f64 in fp64.
** Batches: the batch dims of (out, a, b) are merged like an elementwise
** iteration; the innermost merged dim is Lt's strided batch, outer ones loop on
** the host. Descriptors and the heuristic's algorithm are cached per shape (a
** shape Lt has no algorithm for is cached as such).
**
** Epilogues (2-D products only): BIAS and GELU_AUX_BIAS add LINEAR_GELU's
** bias; BGRADB writes LINEAR_WGRAD's bias gradient, the sum of Lt's B (dy^T,
** taken transposed) over the GEMM's k (the rows of dy), to the bias pointer;
** DGELU (LINEAR_DGELU) multiplies the fp32 product by gelu'(aux) before the one
** rounding, aux being the pre-activation h [M, N] that GELU_AUX_BIAS kept.
** Used by MATMUL, LINEAR_GELU, LINEAR_WGRAD and LINEAR_DGELU (cu_ops_matmul.cu): cu_lt_matmul (cu.h).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu.h"

/* What one Lt call looks like; the cache key. */
typedef struct plan_key {
    td_dtype dt;
    int tf32;
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

static td_status make_plan(cu_dev *d, plan *p) {
    const plan_key *k = &p->key;
    cudaDataType_t ty = k->dt == TD_F64    ? CUDA_R_64F
                        : k->dt == TD_F16  ? CUDA_R_16F
                        : k->dt == TD_BF16 ? CUDA_R_16BF
                                           : CUDA_R_32F;
    cublasComputeType_t ct = k->dt == TD_F64              ? CUBLAS_COMPUTE_64F
                             : k->dt == TD_F32 && k->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                          : CUBLAS_COMPUTE_32F;
    cudaDataType_t scale = k->dt == TD_F64 ? CUDA_R_64F : CUDA_R_32F;
    cublasOperation_t ta = k->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = k->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    td_status st = cu_blas_status(cublasLtMatmulDescCreate(&p->op, ct, scale), "cublasLtMatmulDescCreate");
    if (st != TD_OK) return st;
    cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    if (k->epi != CU_EPI_NONE) { /* bias and aux pointers are set per call (cu_lt_matmul) */
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
    if (st == TD_OK) st = cu_blas_status(cublasLtMatrixLayoutCreate(&p->lc, ty, k->n, k->m, k->n), "layout C");
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
    cublasLtMatmulPreference_t pref;
    st = cu_blas_status(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    if (st != TD_OK) return st;
    uint64_t ws = d->lt_workspace_size;
    uint32_t al[3] = {(uint32_t)k->align_a, (uint32_t)k->align_b, (uint32_t)k->align_c};
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al[0], 4);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al[1], 4);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al[2], 4);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al[2], 4);
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    st = cu_blas_status(cublasLtMatmulAlgoGetHeuristic(d->lt, p->op, p->la, p->lb, p->lc, p->lc, pref, 1, &res, &found),
                        "cublasLtMatmulAlgoGetHeuristic");
    cublasLtMatmulPreferenceDestroy(pref);
    /* an epilogue Lt refuses for these layouts (INVALID_VALUE): unsupported, so the caller falls back */
    if (st == TD_ERR_MISUSE && k->epi != CU_EPI_NONE)
        st = td_error_set(TD_ERR_UNSUPPORTED, "matmul: cuBLASLt refuses epilogue %d for this layout", k->epi);
    if (st == TD_OK && found == 0)
        st = td_error_set(TD_ERR_UNSUPPORTED, "matmul: cuBLASLt has no algorithm for %s [%lld,%lld]x[%lld,%lld]",
                          td_dtype_name(k->dt), (long long)k->m, (long long)k->k, (long long)k->k, (long long)k->n);
    if (st == TD_OK) p->algo = res.algo;
    return st;
}

static void plan_destroy(plan *p) {
    if (p->op) cublasLtMatmulDescDestroy(p->op);
    if (p->la) cublasLtMatrixLayoutDestroy(p->la);
    if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
    if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
    memset(p, 0, sizeof *p);
}

/* The cached plan of key, made on first use. */
static td_status get_plan(cu_dev *d, const plan_key *key, plan **out) {
    pthread_mutex_lock(&plans_lock);
    uint64_t h = key_hash(key);
    plan *slot = NULL;
    for (int i = 0; i < 8 && !slot; i++) {
        plan *p = &plans[(h + (uint64_t)i) % PLANS];
        if (p->used && !memcmp(&p->key, key, sizeof *key)) {
            *out = p;
            pthread_mutex_unlock(&plans_lock);
            return p->failed ? td_error_set(TD_ERR_UNSUPPORTED, "matmul: cuBLASLt has no algorithm for this shape")
                             : TD_OK;
        }
        if (!p->used) slot = p;
    }
    if (!slot) { /* all 8 probes taken: replace the first */
        slot = &plans[h % PLANS];
        plan_destroy(slot);
    }
    slot->key = *key;
    td_status st = make_plan(d, slot);
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

td_status cu_lt_matmul(cu_dev *d, const td_op *op, int epi, const void *bias, void *aux) {
    /* a and b are [batch..., M, K] and [batch..., K, N] views of one rank; out is contiguous with those batch
    ** dims and M, N (a 1-D operand's size-1 dim dropped), which is the same memory as [batch..., M, N] */
    const td_operand *a = &op->in[0], *b = &op->in[1], *c = &op->out[0];
    int nd = a->ndim;
    int64_t m = a->shape[nd - 2], k = a->shape[nd - 1], n = b->shape[nd - 1];
    size_t es = td_dtype_size(c->dtype);
    if (k == 0)
        return cu_status(cudaMemsetAsync(cu_data(c), 0, (size_t)td_operand_numel(c) * es, d->stream), "matmul: K = 0");
    plan_key key;
    memset(&key, 0, sizeof key);
    key.dt = c->dtype;
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
            while (*al[j] > 2 && ((uint64_t)(steps[j] * (int64_t)es) % (uint64_t)*al[j])) *al[j] /= 2;
    }
    plan *p;
    td_status st = get_plan(d, &key, &p);
    if (st != TD_OK) return st;
    float one = 1, zero = 0;
    double one64 = 1, zero64 = 0;
    const void *alpha = c->dtype == TD_F64 ? (const void *)&one64 : (const void *)&one;
    const void *beta = c->dtype == TD_F64 ? (const void *)&zero64 : (const void *)&zero;
    if (epi !=
        CU_EPI_NONE) { /* a 2-D GEMM with an epilogue: one call, under the lock, as the pointers live in the plan */
        pthread_mutex_lock(&plans_lock);
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
        if (epi == CU_EPI_GELU_AUX_BIAS || epi == CU_EPI_DGELU)
            cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux);
        st = cu_blas_status(cublasLtMatmul(d->lt, p->op, alpha, pb, p->la, pa, p->lb, beta, pc, p->lc, pc, p->lc,
                                           &p->algo, d->lt_workspace, d->lt_workspace_size, d->stream),
                            "cublasLtMatmul (epilogue)");
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
        st = cu_blas_status(cublasLtMatmul(d->lt, p->op, alpha, pb + off[2] * (int64_t)es, p->la,
                                           pa + off[1] * (int64_t)es, p->lb, beta, pc + off[0] * (int64_t)es, p->lc,
                                           pc + off[0] * (int64_t)es, p->lc, &p->algo, d->lt_workspace,
                                           d->lt_workspace_size, d->stream),
                            "cublasLtMatmul");
    }
    return st;
}
