/*
** Reductions over a set of dims: SUM, MEAN, MAX, MIN, ARGMAX, ARGMIN, VAR,
** LOGSUMEXP. in is any strided view of shape S; p.reduce.dims has bit d set
** for each reduced dim; out is contiguous with S's ndim and size 1 on the
** reduced dims. K is the number of reduced elements per output.
**
** Each output's K elements are walked as a cpu_iter over the reduced dims, cut
** into tiles of at most CPU_TILE elements. Every tile yields a partial result
** (racc) computed in double (int64 for integer data), and the partials are
** merged in order, so the result does not depend on the thread count:
**   SUM     s = sum x (f32 rows through AVX2, widened to double)
**   MEAN    s / K                       (K = 0 gives NaN)
**   MAX/MIN extreme value; NaN propagates
**   ARG*    index (row-major over the reduced dims) of the first extreme; NaN
**           counts as the extreme (PyTorch)
**   VAR     two passes per tile over x - x0 (x0 its first element: constant rows
**           give exactly 0): mean, then M2 = sum (x-mean)^2; tiles merged
**           with Chan's formula; result M2 / max(0, K - correction)
**   LOGSUMEXP m + log(sum e^(x-m)) with m = max x, tiles merged by rescaling
**           to the larger max; all -inf gives -inf, +inf gives +inf.
** Integer SUM writes int64 and wraps; MAX/MIN/ARG* compare integers exactly.
*/
#include <stdlib.h>

#include "cpu_ew.h"

/* A partial result over some elements; which fields count depends on the op. */
typedef struct racc {
    bool any;    /* has seen an element */
    double s;    /* SUM/MEAN: sum; VAR: M2; LOGSUMEXP: sum of e^(x-m) */
    double m;    /* MAX/MIN/ARG*: extreme; VAR: mean; LOGSUMEXP: max */
    int64_t i;   /* integer data: SUM sum, MAX/MIN/ARG* extreme */
    int64_t n;   /* VAR: element count */
    int64_t idx; /* ARG*: index of the extreme */
} racc;

static bool is_max(td_op_kind k) { return k == TD_OP_MAX || k == TD_OP_ARGMAX; }

/* ---- one tile: n elements at p with stride st, the first one at reduced index first ---- */

/* floats, computed in double; "better" is > for max and < for min, NaN beating all */
#define FLOAT_TILE_(NAME, T, LD)                                                                                       \
    static racc NAME(td_op_kind k, const T *p, int64_t n, int64_t st, int64_t first) {                                 \
        racc a = {.any = true, .m = LD(p[0]), .idx = first, .n = n};                                                   \
        switch (k) {                                                                                                   \
        case TD_OP_SUM:                                                                                                \
        case TD_OP_MEAN:                                                                                               \
            for (int64_t i = 0; i < n; i++) a.s += LD(p[i * st]);                                                      \
            break;                                                                                                     \
        case TD_OP_MAX:                                                                                                \
        case TD_OP_ARGMAX:                                                                                             \
            for (int64_t i = 1; i < n && a.m == a.m; i++) {                                                            \
                double x = LD(p[i * st]);                                                                              \
                if (x > a.m || x != x) a.m = x, a.idx = first + i;                                                     \
            }                                                                                                          \
            break;                                                                                                     \
        case TD_OP_MIN:                                                                                                \
        case TD_OP_ARGMIN:                                                                                             \
            for (int64_t i = 1; i < n && a.m == a.m; i++) {                                                            \
                double x = LD(p[i * st]);                                                                              \
                if (x < a.m || x != x) a.m = x, a.idx = first + i;                                                     \
            }                                                                                                          \
            break;                                                                                                     \
        case TD_OP_VAR: { /* on data shifted by the first element: exact 0 for constant rows */                        \
            double k0 = LD(p[0]), sum = 0;                                                                             \
            for (int64_t i = 0; i < n; i++) sum += LD(p[i * st]) - k0;                                                 \
            double dm = sum / (double)n;                                                                               \
            a.m = k0 + dm;                                                                                             \
            for (int64_t i = 0; i < n; i++) {                                                                          \
                double d = (LD(p[i * st]) - k0) - dm;                                                                  \
                a.s += d * d;                                                                                          \
            }                                                                                                          \
            break;                                                                                                     \
        }                                                                                                              \
        case TD_OP_LOGSUMEXP:                                                                                          \
            for (int64_t i = 1; i < n && a.m == a.m; i++) {                                                            \
                double x = LD(p[i * st]);                                                                              \
                if (x > a.m || x != x) a.m = x;                                                                        \
            }                                                                                                          \
            if (!isfinite(a.m))                                                                                        \
                a.s = 1; /* the result is m itself: -inf, +inf or NaN */                                               \
            else                                                                                                       \
                for (int64_t i = 0; i < n; i++) a.s += exp(LD(p[i * st]) - a.m);                                       \
            break;                                                                                                     \
        default: break;                                                                                                \
        }                                                                                                              \
        return a;                                                                                                      \
    }
FLOAT_TILE_(tile_f64, double, ID_)
FLOAT_TILE_(tile_f32_scalar, float, ID_)
FLOAT_TILE_(tile_f16, uint16_t, F16_IN_)
FLOAT_TILE_(tile_bf16, uint16_t, BF16_IN_)

static racc tile_f32(td_op_kind k, const float *p, int64_t n, int64_t st, int64_t first) {
    if ((k == TD_OP_SUM || k == TD_OP_MEAN) && st == 1 && cpu_has_avx2())
        return (racc){.any = true, .s = cpu_sum_f32_avx2(n, p), .n = n};
    return tile_f32_scalar(k, p, n, st, first);
}

/* integers, exact in int64_t; SUM wraps through uint64_t */
#define INT_TILE_(NAME, T)                                                                                             \
    static racc NAME(td_op_kind k, const T *p, int64_t n, int64_t st, int64_t first) {                                 \
        racc a = {.any = true, .i = p[0], .idx = first, .n = n};                                                       \
        if (k == TD_OP_SUM) {                                                                                          \
            uint64_t s = 0;                                                                                            \
            for (int64_t i = 0; i < n; i++) s += (uint64_t)(int64_t)p[i * st];                                         \
            a.i = (int64_t)s;                                                                                          \
        } else if (is_max(k)) {                                                                                        \
            for (int64_t i = 1; i < n; i++)                                                                            \
                if (p[i * st] > a.i) a.i = p[i * st], a.idx = first + i;                                               \
        } else {                                                                                                       \
            for (int64_t i = 1; i < n; i++)                                                                            \
                if (p[i * st] < a.i) a.i = p[i * st], a.idx = first + i;                                               \
        }                                                                                                              \
        return a;                                                                                                      \
    }
INT_TILE_(tile_i32, int32_t)
INT_TILE_(tile_i64, int64_t)
INT_TILE_(tile_u8, uint8_t)

static racc tile(td_op_kind k, td_dtype dt, const char *p, int64_t n, int64_t st, int64_t first) {
    switch (dt) {
    case TD_F32: return tile_f32(k, (const float *)p, n, st, first);
    case TD_F64: return tile_f64(k, (const double *)p, n, st, first);
    case TD_F16: return tile_f16(k, (const uint16_t *)p, n, st, first);
    case TD_BF16: return tile_bf16(k, (const uint16_t *)p, n, st, first);
    case TD_I32: return tile_i32(k, (const int32_t *)p, n, st, first);
    case TD_I64: return tile_i64(k, (const int64_t *)p, n, st, first);
    case TD_U8: return tile_u8(k, (const uint8_t *)p, n, st, first);
    default: return (racc){0};
    }
}

/* ---- merging: a := a then b (b's elements come after a's) ---- */

static void merge(td_op_kind k, bool is_int, racc *a, const racc *b) {
    if (!b->any) return;
    if (!a->any) {
        *a = *b;
        return;
    }
    switch (k) {
    case TD_OP_SUM:
    case TD_OP_MEAN:
        a->s += b->s;
        a->i = (int64_t)((uint64_t)a->i + (uint64_t)b->i);
        break;
    case TD_OP_MAX:
    case TD_OP_ARGMAX:
    case TD_OP_MIN:
    case TD_OP_ARGMIN: {
        bool better = is_int ? (is_max(k) ? b->i > a->i : b->i < a->i)
                             : a->m == a->m && (b->m != b->m || (is_max(k) ? b->m > a->m : b->m < a->m));
        if (better) a->m = b->m, a->i = b->i, a->idx = b->idx;
        break;
    }
    case TD_OP_VAR: { /* Chan et al.: combine (n, mean, M2) of two disjoint parts */
        double na = (double)a->n, nb = (double)b->n, n = na + nb, d = b->m - a->m;
        a->m += d * nb / n;
        a->s += b->s + d * d * na * nb / n;
        a->n += b->n;
        break;
    }
    case TD_OP_LOGSUMEXP: { /* rescale both sums to the larger max */
        double m = a->m != a->m || b->m != b->m ? NAN : a->m > b->m ? a->m : b->m;
        a->s = isfinite(m) ? a->s * exp(a->m - m) + b->s * exp(b->m - m) : 1;
        a->m = m;
        break;
    }
    default: break;
    }
}

/* ---- the result of one output ---- */

static void store_result(const td_op *op, int64_t o, const racc *a, int64_t K) {
    const td_operand *out = &op->out[0];
    void *dst = cpu_ptr(out);
    bool int_out = !td_dtype_is_float(out->dtype);
    double v = NAN;
    int64_t iv = 0;
    switch (op->kind) {
    case TD_OP_SUM: v = a->s, iv = a->i; break;
    case TD_OP_MEAN: v = a->s / (double)K; break;
    case TD_OP_MAX:
    case TD_OP_MIN: v = a->m, iv = a->i; break;
    case TD_OP_ARGMAX:
    case TD_OP_ARGMIN: iv = a->idx; break;
    case TD_OP_VAR: {
        double dof = (double)K - op->p.reduce.correction;
        v = a->any ? a->s / (dof > 0 ? dof : 0) : NAN;
        break;
    }
    case TD_OP_LOGSUMEXP: v = !a->any ? -INFINITY : isfinite(a->m) ? a->m + log(a->s) : a->m; break;
    default: break;
    }
    if (!int_out)
        cpu_store(dst, o, out->dtype, v);
    else if (out->dtype == TD_I64)
        ((int64_t *)dst)[o] = iv;
    else if (out->dtype == TD_I32)
        ((int32_t *)dst)[o] = (int32_t)iv;
    else
        ((uint8_t *)dst)[o] = (uint8_t)iv;
}

/* ---- driver ---- */

typedef struct reduce_plan {
    const td_op *op;
    td_operand kept; /* the kept dims of in, with in's strides: one entry per output */
    cpu_iter red;    /* the reduced dims of one output */
    int64_t tiles, per_row, K;
    const char *base;
    size_t esize;
    bool is_int;
} reduce_plan;

/* Address of output o's first input element. */
static const char *out_base(const reduce_plan *pl, int64_t o) {
    int64_t off = 0;
    for (int d = pl->kept.ndim - 1; d >= 0; d--) {
        off += (o % pl->kept.shape[d]) * pl->kept.strides[d];
        o /= pl->kept.shape[d];
    }
    return pl->base + off * (int64_t)pl->esize;
}

static racc tile_of(const reduce_plan *pl, const char *base, int64_t t) {
    int64_t off[1];
    int64_t n = cpu_iter_tile(&pl->red, t, off);
    int64_t first = t / pl->per_row * pl->red.inner + t % pl->per_row * CPU_TILE;
    return tile(pl->op->kind, pl->op->in[0].dtype, base + off[0] * (int64_t)pl->esize, n, pl->red.inner_strides[0],
                first);
}

/* SUM/MEAN of f32/f64 whose kept dims are one contiguous run and whose K
** reduced elements form a single tile (a bias gradient: [B*T, out] summed over
** the rows). The sums are tile_of's: out[j] = ((0 + x_0[j]) + x_1[j]) + ... in
** double, in the reduced dims' row-major order, so the bits are the same; but
** the walk goes row by row over a block of 256 neighbouring outputs, reading
** memory once in order instead of one strided pass per output. Threads take
** whole blocks. false: not this shape. */
static bool sum_columns(const td_op *op, const reduce_plan *pl, const td_operand *red, int64_t M) {
    td_dtype dt = op->in[0].dtype;
    if ((op->kind != TD_OP_SUM && op->kind != TD_OP_MEAN) || (dt != TD_F32 && dt != TD_F64) || pl->tiles != 1 ||
        pl->K == 0 || M < 16)
        return false;
    for (int64_t d = pl->kept.ndim - 1, want = 1; d >= 0; want *= pl->kept.shape[d], d--)
        if (pl->kept.shape[d] != 1 && pl->kept.strides[d] != want) return false;
    enum { BLOCK = 256 };
    int64_t nb = (M + BLOCK - 1) / BLOCK;
    int nt = cpu_threads_for(M * pl->K, 1);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t b = 0; b < nb; b++) {
        int64_t j0 = b * BLOCK, n = M - j0 < BLOCK ? M - j0 : BLOCK, idx[TD_MAX_DIMS] = {0}, off = 0;
        double acc[BLOCK] = {0};
        for (int64_t r = 0; r < pl->K; r++) {
            if (dt == TD_F32) {
                const float *x = (const float *)pl->base + off + j0;
                for (int64_t j = 0; j < n; j++) acc[j] += x[j];
            } else {
                const double *x = (const double *)pl->base + off + j0;
                for (int64_t j = 0; j < n; j++) acc[j] += x[j];
            }
            for (int d = red->ndim - 1; d >= 0; d--) { /* next reduced element, row-major */
                off += red->strides[d];
                if (++idx[d] < red->shape[d]) break;
                off -= red->strides[d] * red->shape[d], idx[d] = 0;
            }
        }
        for (int64_t j = 0; j < n; j++) {
            racc a = {.any = true, .s = acc[j], .n = pl->K};
            store_result(op, j0 + j, &a, pl->K);
        }
    }
    return true;
}

static td_status reduce(const td_op *op) {
    const td_operand *in = &op->in[0];
    reduce_plan pl = {
        .op = op, .base = cpu_ptr(in), .esize = td_dtype_size(in->dtype), .is_int = !td_dtype_is_float(in->dtype)};
    td_operand red = {.ndim = 0};
    for (int d = 0; d < in->ndim; d++) {
        td_operand *v = (op->p.reduce.dims >> d & 1) ? &red : &pl.kept;
        td_dim_fold(v->shape, v->strides, &v->ndim, in->shape[d], in->strides[d]);
    }
    int64_t M = td_operand_numel(&pl.kept);
    pl.K = td_operand_numel(&red);
    if (M == 0) return TD_OK;
    const td_operand *rv = &red;
    cpu_iter_init(&pl.red, 1, &rv);
    pl.tiles = cpu_iter_tiles(&pl.red);
    pl.per_row = (pl.red.inner + CPU_TILE - 1) / CPU_TILE;
    if (sum_columns(op, &pl, &red, M)) return TD_OK;
    int nt = cpu_threads_for(M * (pl.K ? pl.K : 1), op->kind == TD_OP_LOGSUMEXP ? 8 : 1);
    if (M >= nt || pl.tiles <= 1) { /* threads take whole outputs */
#pragma omp parallel for num_threads(nt) schedule(static)
        for (int64_t o = 0; o < M; o++) {
            const char *base = out_base(&pl, o);
            racc a = {0};
            for (int64_t t = 0; t < pl.tiles; t++) {
                racc b = tile_of(&pl, base, t);
                merge(op->kind, pl.is_int, &a, &b);
            }
            store_result(op, o, &a, pl.K);
        }
        return TD_OK;
    }
    /* few outputs, many tiles each: threads take tiles, merged in order afterwards */
    racc *part = malloc(sizeof(racc) * (size_t)pl.tiles);
    if (!part)
        return td_error_set(TD_ERR_OOM, "%s: out of memory for %lld partial results", td_op_name(op->kind),
                            (long long)pl.tiles);
    for (int64_t o = 0; o < M; o++) {
        const char *base = out_base(&pl, o);
#pragma omp parallel for num_threads(nt) schedule(static)
        for (int64_t t = 0; t < pl.tiles; t++) part[t] = tile_of(&pl, base, t);
        racc a = {0};
        for (int64_t t = 0; t < pl.tiles; t++) merge(op->kind, pl.is_int, &a, &part[t]);
        store_result(op, o, &a, pl.K);
    }
    free(part);
    return TD_OK;
}

td_status cpu_op_SUM(const td_op *op) { return reduce(op); }
td_status cpu_op_MEAN(const td_op *op) { return reduce(op); }
td_status cpu_op_MAX(const td_op *op) { return reduce(op); }
td_status cpu_op_MIN(const td_op *op) { return reduce(op); }
td_status cpu_op_ARGMAX(const td_op *op) { return reduce(op); }
td_status cpu_op_ARGMIN(const td_op *op) { return reduce(op); }
td_status cpu_op_VAR(const td_op *op) { return reduce(op); }
td_status cpu_op_LOGSUMEXP(const td_op *op) { return reduce(op); }
