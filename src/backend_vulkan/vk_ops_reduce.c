/*
** Reductions: SUM, MEAN, MAX, MIN, VAR, LOGSUMEXP, ARGMAX, ARGMIN
** (shaders/reduce.comp). in is any view; p.reduce.dims has bit k set for each
** reduced dim; out is contiguous with in's ndim (reduced dims of size 1).
** Integer SUM accumulates into int64 (reduce_sum_<dt>).
** Three shapes of problem, three strategies:
** - many outputs that are short or that lie next to each other in memory
**   (a sum over leading dims, short rows): shaders/reduce_tile.comp, a tile of
**   TX outputs per workgroup (tile_of);
** - few long rows: a two-pass split (split_of);
** - column sums over many rows (a bias or layer-norm gradient, [B*T, C]
**   over dim 0) with few column tiles: reduce_tile.comp twice, over C
**   chunks of the rows into a scratch [C, n_out], then over the scratch
**   (rows_split_of), so that many workgroups share the rows;
** - otherwise one workgroup per output (reduce.comp).
*/
#include <string.h>

#include "vk_ops.h"

#define WG 256

/* GLSL: shaders/reduce.comp, block PC. */
typedef struct vk_pc_reduce {
    uint32_t n_out, n_red, in_off, out_off;
    uint32_t kdim, rdim;
    int32_t correction;
    uint32_t n_mean; /* reduce_tile.comp's mean divides by it where nonzero, else by n_red */
    uint32_t kshape[4], kstride[4];
    uint32_t rshape[8], rstride[8];
} vk_pc_reduce;
static_assert(sizeof(vk_pc_reduce) == 128, "vk_pc_reduce must match shaders/reduce.comp");

enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_VAR, R_LSE, R_ARGMAX, R_ARGMIN };
enum { IO_TILE = 4 }; /* reduce_pass */

/* A reduction problem: kept dims (output order) and reduced dims, as merged lists. */
typedef struct red_plan {
    int nk, nr;
    int64_t ks[TD_MAX_DIMS + 1], kst[TD_MAX_DIMS + 1], rs[TD_MAX_DIMS], rst[TD_MAX_DIMS];
    int64_t n_red;
} red_plan;

/* Outputs per workgroup for reduce_tile.comp, or 0 for one workgroup per
** output: tiles when the outputs are many (256 or more) and short (128
** elements or fewer: most of a workgroup of 256 would idle), or when neighbouring outputs are neighbours
** in memory and the reduced elements are not (the innermost kept dim has
** stride 1, the innermost reduced dim does not), where a tile reads a row of
** TX outputs in one access. TX is 32, halved down to 8 while that leaves
** fewer than 128 workgroups. Sum and mean of integers (into int64) stay on
** reduce.comp, and so do var, logsumexp and arg*. */
static uint32_t tile_of(const red_plan *pl, int64_t n_out, uint32_t code, td_dtype dt) {
    bool ok = code == R_MAX || code == R_MIN || ((code == R_SUM || code == R_MEAN) && vk_is_float(dt));
    bool cols = pl->nk > 0 && pl->kst[pl->nk - 1] == 1 && pl->rst[pl->nr - 1] != 1;
    if (!ok || n_out < 2 || !((pl->n_red <= 128 && n_out >= 256) || (cols && n_out >= 32))) return 0;
    uint32_t tx = 32;
    while (tx > 8 && n_out / tx < 128) tx /= 2;
    return tx;
}

/* One pass: out[r] (from out_off, contiguous) = R over the reduced dims of in at in_off. */
/* io: bits 0-1, reduce_tile.comp's F32_IO (an f32 scratch in or out); IO_TILE, that shader with tiles of
** 32 whatever tile_of says; n_mean: its pc.n_mean. */
static td_status reduce_pass(vk_dev *d, int shader, uint32_t code, td_dtype dt, const vk_bind *b, uint32_t in_off,
                             uint32_t out_off, const red_plan *pl, int correction, uint32_t io, uint32_t n_mean) {
    vk_pc_reduce pc = {
        .n_red = (uint32_t)pl->n_red, .rdim = (uint32_t)pl->nr, .correction = correction, .n_mean = n_mean};
    for (int i = 0; i < pl->nr; i++) pc.rshape[i] = (uint32_t)pl->rs[i], pc.rstride[i] = (uint32_t)pl->rst[i];
    int inner = pl->nk < 4 ? pl->nk : 4, outer = pl->nk - inner;
    int64_t per = 1, n_outer = 1;
    for (int i = outer; i < pl->nk; i++) per *= pl->ks[i];
    for (int i = 0; i < outer; i++) n_outer *= pl->ks[i];
    pc.n_out = (uint32_t)per;
    pc.kdim = (uint32_t)inner;
    for (int i = 0; i < inner; i++)
        pc.kshape[i] = (uint32_t)pl->ks[outer + i], pc.kstride[i] = (uint32_t)pl->kst[outer + i];
    if (inner == 0) pc.kdim = 1, pc.kshape[0] = 1, pc.kstride[0] = 0;
    uint32_t spec[4] = {WG, code, 0, io & 3};
    int n_spec = 2;
    uint32_t groups = vk_groups(per, 1), tx = io & IO_TILE ? 32 : tile_of(pl, per, code, dt);
    if (tx) shader = VK_DT_SHADER(VK_SHADER_reduce_tile_f32, dt), spec[2] = tx, n_spec = 4, groups = vk_groups(per, tx);
    for (int64_t o = 0; o < n_outer; o++) {
        int64_t rem = o, koff = 0;
        for (int i = outer - 1; i >= 0; i--) {
            koff += rem % pl->ks[i] * pl->kst[i];
            rem /= pl->ks[i];
        }
        pc.in_off = in_off + (uint32_t)koff;
        pc.out_off = out_off + (uint32_t)(o * per);
        td_status st = vk_dispatch(d, shader, spec, n_spec, 2, b, &pc, sizeof pc, groups, 1, 1);
        if (st != TD_OK) return st;
    }
    return TD_OK;
}

/* Chunks per row for a two-pass reduction, or 1: few long rows would leave most
** of the GPU idle with one workgroup per row. Needs equal chunks (so that a
** mean of chunk means is the mean) over one merged reduced dim. */
static int64_t split_of(const red_plan *pl, int64_t n_out, uint32_t code, td_dtype dt) {
    if ((code != R_SUM && code != R_MEAN && code != R_MAX && code != R_MIN) || (dt != TD_F32 && dt != TD_F64) ||
        pl->nr != 1 || n_out >= 1024 || pl->n_red < 65536)
        return 1;
    for (int64_t s = 1024; s >= 16; s /= 2)
        if (pl->n_red % s == 0 && pl->n_red / s >= 1024) return s;
    return 1;
}

/* Chunks of rows for a column reduction (the innermost kept dim has stride 1, one reduced dim that
** does not), or 1: reduce_tile.comp alone puts ceil(n_out / TX) workgroups on all the rows, 96 (TX 8) for a
** [16384, 768] bias gradient. C doubles while fewer than 1024 workgroups (tiles of 32) would run and each chunk
** keeps at least 64 rows, then halves while the scratch would not fit one allocation and binding. */
static int64_t rows_split_of(vk_dev *d, const red_plan *pl, int64_t n_out, uint32_t code, td_dtype dt) {
    bool ok = code == R_MAX || code == R_MIN || ((code == R_SUM || code == R_MEAN) && vk_is_float(dt));
    if (!ok || pl->nk == 0 || pl->kst[pl->nk - 1] != 1 || pl->nr != 1 || pl->rst[0] == 1 || n_out < 32 ||
        pl->n_red < 256)
        return 1;
    int64_t tiles = (n_out + 31) / 32, c = 1;
    while (tiles * c < 1024 && pl->n_red / (2 * c) >= 64 && c < 1024) c *= 2;
    VkDeviceSize lim = d->caps.max_storage_range - d->caps.min_storage_align;
    if (d->caps.max_alloc < lim) lim = d->caps.max_alloc;
    while (c > 1 && (VkDeviceSize)((c + 1) * n_out) * 8 > lim) c /= 2; /* (c + 1) rows of at most 8 bytes */
    return c;
}

/* Column reduction in two passes (rows_split_of): pass 1, chunk c of q = n_red / chunks rows into
** scratch row c (the last n_red % chunks rows one more chunk, its own dispatch); pass 2, the same
** reduction over the scratch's rows into out (mean: the sums of pass 1, divided by n_red). The order
** of the additions is fixed, so the result is deterministic. Sums of f16/bf16 keep an f32 scratch. */
static td_status column_split(vk_dev *d, uint32_t code, td_dtype dt, const vk_bind *b, uint32_t in_off,
                              uint32_t out_off, const red_plan *pl, int64_t chunks) {
    int64_t n_out = 1, q = pl->n_red / chunks, rest = pl->n_red - q * chunks, rows = chunks + (rest > 0);
    for (int i = 0; i < pl->nk; i++) n_out *= pl->ks[i];
    bool f32 = (code == R_SUM || code == R_MEAN) && (dt == TD_F16 || dt == TD_BF16);
    uint32_t c1 = code == R_MEAN ? R_SUM : code, io1 = f32 ? 2 : 0, io2 = f32 ? 1 : 0;
    int shader = VK_DT_SHADER(VK_SHADER_reduce_tile_f32, dt);
    td_buffer *scratch;
    td_status st = vk_alloc(d, (size_t)(rows * n_out) * (f32 ? 4 : td_dtype_size(dt)), &scratch);
    if (st != TD_OK) return st;
    /* pass 1: kept dims (chunk, kept...), chunk outermost so that the scratch is [rows, n_out] */
    red_plan p1 = *pl;
    p1.ks[0] = chunks, p1.kst[0] = q * pl->rst[0];
    for (int i = 0; i < pl->nk; i++) p1.ks[i + 1] = pl->ks[i], p1.kst[i + 1] = pl->kst[i];
    p1.nk = pl->nk + 1, p1.rs[0] = q, p1.n_red = q;
    vk_bind b1[2] = {b[0], vk_bind_buffer(scratch, true)};
    st = reduce_pass(d, shader, c1, dt, b1, in_off, 0, &p1, 0, io1 | IO_TILE, 0);
    if (st == TD_OK && rest) {
        red_plan pr = *pl;
        pr.rs[0] = rest, pr.n_red = rest;
        st = reduce_pass(d, shader, c1, dt, b1, in_off + (uint32_t)(chunks * q * pl->rst[0]),
                         (uint32_t)(chunks * n_out), &pr, 0, io1 | IO_TILE, 0);
    }
    /* pass 2: out = R over the scratch's rows */
    red_plan p2 = {.nk = 1, .nr = 1, .ks = {n_out}, .kst = {1}, .rs = {rows}, .rst = {n_out}, .n_red = rows};
    vk_bind b2[2] = {vk_bind_buffer(scratch, false), b[1]};
    if (st == TD_OK)
        st = reduce_pass(d, shader, code, dt, b2, 0, out_off, &p2, 0, io2 | IO_TILE,
                         code == R_MEAN ? (uint32_t)pl->n_red : 0);
    vk_free(scratch);
    return st;
}

td_status vk_sum_f32_rows(vk_dev *d, vk_bind in, vk_bind out, uint32_t out_off, int64_t rows, int64_t n, td_dtype dt) {
    red_plan p = {.nk = 1, .nr = 1, .ks = {n}, .kst = {1}, .rs = {rows}, .rst = {n}, .n_red = rows};
    vk_bind b[2] = {in, out};
    return reduce_pass(d, VK_DT_SHADER(VK_SHADER_reduce_tile_f32, dt), R_SUM, dt, b, 0, out_off, &p, 0, 1 | IO_TILE, 0);
}

static td_status reduce(vk_dev *d, const td_op *op, uint32_t code) {
    const td_operand *in = &op->in[0], *out = &op->out[0];
    red_plan pl = {.n_red = 1};
    for (int i = 0; i < in->ndim; i++) {
        if (op->p.reduce.dims >> i & 1) {
            td_dim_fold(pl.rs, pl.rst, &pl.nr, in->shape[i], in->strides[i]);
            pl.n_red *= in->shape[i];
        } else {
            td_dim_fold(pl.ks, pl.kst, &pl.nk, in->shape[i], in->strides[i]);
        }
    }
    if (pl.nr == 0) pl.rs[0] = pl.n_red, pl.rst[0] = 0, pl.nr = 1; /* n_red is 0 or 1 */
    if (pl.n_red > UINT32_MAX)
        return td_error_set(TD_ERR_UNSUPPORTED, "vulkan: reducing %lld elements", (long long)pl.n_red);
    vk_bind b[2];
    uint32_t in_off, out_off;
    td_status st = vk_bind_view(d, in, false, &b[0], &in_off);
    if (st == TD_OK) st = vk_bind_view(d, out, true, &b[1], &out_off);
    if (st != TD_OK) return st;
    td_dtype dt = in->dtype;
    int shader = !vk_is_float(dt) && code == R_SUM ? VK_SHADER_reduce_sum_i32 + (int)(dt - TD_I32)
                                                   : VK_DT_SHADER(VK_SHADER_reduce_f32, dt);
    int64_t n_out = td_operand_numel(out), split = split_of(&pl, n_out, code, dt);
    int64_t chunks = rows_split_of(d, &pl, n_out, code, dt);
    if (chunks > 1) return column_split(d, code, dt, b, in_off, out_off, &pl, chunks);
    if (split == 1) return reduce_pass(d, shader, code, dt, b, in_off, out_off, &pl, op->p.reduce.correction, 0, 0);
    /* pass 1: the reduced dim becomes (split, n_red / split); chunk results go to a scratch [n_out, split] */
    td_buffer *scratch;
    if ((st = vk_alloc(d, (size_t)(n_out * split) * td_dtype_size(dt), &scratch)) != TD_OK) return st;
    red_plan p1 = pl;
    p1.ks[p1.nk] = split, p1.kst[p1.nk] = pl.rst[0] * (pl.n_red / split), p1.nk++;
    p1.rs[0] = pl.n_red / split, p1.n_red = pl.n_red / split;
    vk_bind b1[2] = {b[0], vk_bind_buffer(scratch, true)};
    st = reduce_pass(d, shader, code, dt, b1, in_off, 0, &p1, 0, 0, 0);
    /* pass 2: the same reduction over each row of chunk results */
    red_plan p2 = {.nk = 1, .nr = 1, .ks = {n_out}, .kst = {split}, .rs = {split}, .rst = {1}, .n_red = split};
    vk_bind b2[2] = {vk_bind_buffer(scratch, false), b[1]};
    if (st == TD_OK) st = reduce_pass(d, shader, code, dt, b2, 0, out_off, &p2, 0, 0, 0);
    vk_free(scratch);
    return st;
}

#define VK_REDUCE_(NAME, CODE)                                                                                         \
    td_status vk_op_##NAME(vk_dev *d, const td_op *op) { return reduce(d, op, CODE); }

VK_REDUCE_(SUM, R_SUM)
VK_REDUCE_(MEAN, R_MEAN)
VK_REDUCE_(MAX, R_MAX)
VK_REDUCE_(MIN, R_MIN)
VK_REDUCE_(VAR, R_VAR)
VK_REDUCE_(LOGSUMEXP, R_LSE)
VK_REDUCE_(ARGMAX, R_ARGMAX)
VK_REDUCE_(ARGMIN, R_ARGMIN)
