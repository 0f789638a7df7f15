/*
** Ops on operands wider than one binding (maxStorageBufferRange, lowered by
** TRIDENT_VULKAN_MAX_BINDING) or crossing a segment of a tensor larger than one
** allocation (maxMemoryAllocationSize, TRIDENT_VULKAN_MAX_ALLOC; vk_memory.c):
** the op runs on parts, recursively, until every operand of every part fits.
**   MATMUL, CONV2D*, the reductions and the row-wise ops below, where their
**   too-wide operands each fit one allocation (a part that
**   straddles a segment boundary, a strided view): those operands are copied
**   into contiguous temporaries (outputs in and back out) and the op runs on
**   them (gathered);
**   MATMUL a[..., M, K] @ b[..., K, N] -> out[..., M, N] (out contiguous):
**     1. halves of the outermost batch dim > 1 that a wide operand has;
**     2. then tiles of out (matmul_tiles): as many rows of a, and columns of
**        b, as one temporary holds, each block gathered once; or, where those
**        tiles would be thin (long K) and an accumulator for out fits one
**        temporary, slices of K (matmul_ksplit), summed in f32 (f64 for f64);
**   so the parts number about (a's bytes / limit) * (b's bytes / limit), or
**   (a's + b's bytes) / limit with K slices; an out part that is not
**   contiguous is computed into a temporary and copied into place;
**   CONV2D, CONV2D_BACKWARD_INPUT: halves of the batch (x and y, dy and dx);
**   CONV2D_BACKWARD_WEIGHT dw = sum over the batch: the first half into dw,
**     the second into a temporary, then ADD dw += it.
**   the reductions, by halves of the outermost dim longer than 1: kept, halves
**     of in and out; reduced (SUM, MAX, MIN), the first half into out, the
**     second into a temporary, then ADD / MAXIMUM / MINIMUM into out; an f32
**     or f64 MEAN as that SUM, then MUL by 1 / n (mean_parts);
**   the row-wise ops (softmax and its backward, layer_norm, group_norm,
**     embedding, cross_entropy without a reduction and its backward): halves
**     of the leading dim of the operands that hold rows (rows_of).
** The weights (conv, embedding) and ops not listed are never split:
** an operand too wide along them alone reaches the encoder, whose binding fails
** naming the limit.
*/
#include <stdlib.h>

#include "vk.h"

static void halve(td_operand *v, int dim, int half, int64_t h) {
    if (half) v->offset += h * v->strides[dim];
    v->shape[dim] = half ? v->shape[dim] - h : h;
}

static void set_contiguous(td_operand *v) {
    int64_t s = 1;
    for (int i = v->ndim - 1; i >= 0; i--) v->strides[i] = s, s *= v->shape[i];
}

/* A contiguous temporary shaped like v (its buffer in tmp->buf; NULL when it could not be made). */
static td_status temporary(vk_dev *d, const td_operand *v, td_operand *tmp) {
    *tmp = *v;
    tmp->offset = 0;
    tmp->buf = NULL;
    set_contiguous(tmp);
    td_status st = vk_alloc(d, (size_t)td_operand_numel(tmp) * td_dtype_size(v->dtype), &tmp->buf);
    if (st != TD_OK) tmp->buf = NULL;
    return st;
}

/* A part still too wide that is not contiguous (the columns of a row-major matrix span nearly all
** of it) is copied into a contiguous temporary, whose halves then shrink; *tmp is that buffer. */
static td_status compact(vk_dev *d, const vk_op_fn *enc, td_operand *v, td_buffer **tmp) {
    *tmp = NULL;
    if (!vk_view_too_wide(d, v) || td_operand_is_contiguous(v) || vk_fits_one(d, v)) return TD_OK;
    td_operand t;
    td_status st = temporary(d, v, &t);
    if (st != TD_OK) return st;
    td_op copy = {.kind = TD_OP_COPY, .n_in = 1, .n_out = 1, .in = v, .out = &t};
    st = enc[TD_OP_COPY](d, &copy);
    *v = t;
    *tmp = t.buf;
    return st;
}

static bool any_wide(vk_dev *d, const td_op *op, bool *all_fit) {
    bool wide = false;
    *all_fit = true;
    for (int i = 0; i < op->n_in + op->n_out; i++) {
        const td_operand *v = i < op->n_in ? &op->in[i] : &op->out[i - op->n_in];
        bool w = vk_view_too_wide(d, v);
        wide |= w;
        if (w && !vk_fits_one(d, v)) *all_fit = false;
    }
    return wide;
}

#define MAX_OPERANDS 8

/* op with each too-wide operand copied into a contiguous temporary (outputs copied in first, as
** an op may read them, and back after). */
static td_status gathered(vk_dev *d, const td_op *op, const vk_op_fn *enc) {
    int n = op->n_in + op->n_out;
    if (n > MAX_OPERANDS) return enc[op->kind](d, op);
    td_operand v[MAX_OPERANDS];
    bool moved[MAX_OPERANDS] = {false};
    td_status st = TD_OK;
    for (int i = 0; i < n && st == TD_OK; i++) {
        const td_operand *src = i < op->n_in ? &op->in[i] : &op->out[i - op->n_in];
        v[i] = *src;
        if (!vk_view_too_wide(d, src)) continue;
        if ((st = temporary(d, src, &v[i])) != TD_OK) break;
        moved[i] = true;
        td_op copy = {.kind = TD_OP_COPY, .n_in = 1, .n_out = 1, .in = (td_operand *)src, .out = &v[i]};
        st = enc[TD_OP_COPY](d, &copy);
    }
    td_op part = *op;
    part.in = v;
    part.out = v + op->n_in;
    if (st == TD_OK) st = enc[op->kind](d, &part);
    for (int i = op->n_in; i < n && st == TD_OK; i++) {
        if (!moved[i]) continue;
        td_op copy = {.kind = TD_OP_COPY, .n_in = 1, .n_out = 1, .in = &v[i], .out = &op->out[i - op->n_in]};
        st = enc[TD_OP_COPY](d, &copy);
    }
    for (int i = 0; i < n; i++)
        if (moved[i] && v[i].buf) vk_free(v[i].buf);
    return st;
}

static td_status matmul_parts(vk_dev *d, const td_op *op, const vk_op_fn *enc);

/* One part: a and b compacted where needed; out through a contiguous temporary when its part is not
** contiguous (columns), then copied into place. */
static td_status matmul_part(vk_dev *d, const td_op *op, const vk_op_fn *enc, td_operand a, td_operand b,
                             td_operand o) {
    td_buffer *ta = NULL, *tb = NULL, *to = NULL;
    td_operand in[2] = {a, b}, po = o;
    td_status st = compact(d, enc, &in[0], &ta);
    if (st == TD_OK) st = compact(d, enc, &in[1], &tb);
    if (st == TD_OK && !td_operand_is_contiguous(&o) && (st = temporary(d, &o, &po)) == TD_OK) to = po.buf;
    td_op part = *op;
    part.in = in;
    part.out = &po;
    if (st == TD_OK) st = matmul_parts(d, &part, enc);
    td_op copy = {.kind = TD_OP_COPY, .n_in = 1, .n_out = 1, .in = &po, .out = &o};
    if (st == TD_OK && to) st = enc[TD_OP_COPY](d, &copy);
    if (ta) vk_free(ta);
    if (tb) vk_free(tb);
    if (to) vk_free(to);
    return st;
}

/* The most bytes one contiguous temporary can hold and bind whole (vk_fits_one). */
static VkDeviceSize one_limit(vk_dev *d) {
    VkDeviceSize r = d->caps.max_storage_range - d->caps.min_storage_align;
    return d->caps.max_alloc < r ? d->caps.max_alloc : r;
}

/* v, or a contiguous copy of it where v is too wide (*tmp is then its buffer, else NULL). */
static td_status gather_one(vk_dev *d, const vk_op_fn *enc, td_operand *v, td_buffer **tmp) {
    *tmp = NULL;
    if (!vk_view_too_wide(d, v)) return TD_OK;
    td_operand t;
    td_status st = temporary(d, v, &t);
    if (st != TD_OK) return st;
    td_op copy = {.kind = TD_OP_COPY, .n_in = 1, .n_out = 1, .in = v, .out = &t};
    st = enc[TD_OP_COPY](d, &copy);
    *v = t;
    *tmp = t.buf;
    return st;
}

/* v as a contiguous temporary of dtype dt (a COPY, which casts); *tmp is its buffer. */
static td_status gather_as(vk_dev *d, const vk_op_fn *enc, td_operand *v, td_dtype dt, td_buffer **tmp) {
    td_operand t;
    td_status st = temporary(d, v, &t);
    if (st == TD_OK && dt != v->dtype) { /* the temporary was sized for v's dtype */
        vk_free(t.buf);
        t.dtype = dt;
        st = vk_alloc(d, (size_t)td_operand_numel(&t) * td_dtype_size(dt), &t.buf);
        if (st != TD_OK) t.buf = NULL;
    }
    td_op copy = {.kind = TD_OP_COPY, .n_in = 1, .n_out = 1, .in = v, .out = &t};
    if (st == TD_OK) st = enc[TD_OP_COPY](d, &copy);
    *v = t;
    *tmp = t.buf;
    return st;
}

/* out o[..., M, N] = sum over slices of K of a[..., :, slice] @ b[..., slice, :], each slice of a and b
** gathered (cast) into temporaries of the accumulator's dtype (f64 for f64, else f32) as long as one
** temporary holds, the products added into an accumulator acc (first slice: into acc; then into p,
** acc += p), acc copied (cast) into o at the end. Only the order of the f32 sums changes; f16 and
** bf16 still round once, as the unsplit kernel's f32 accumulator does. */
static td_status matmul_ksplit(vk_dev *d, const td_op *op, const vk_op_fn *enc, td_operand a, td_operand b,
                               td_operand o, VkDeviceSize lim) {
    td_dtype acc_dt = o.dtype == TD_F64 ? TD_F64 : TD_F32;
    size_t es = td_dtype_size(acc_dt);
    int ka = a.ndim - 1, kb = b.ndim - 2;
    int64_t K = a.shape[ka];
    VkDeviceSize sa = (VkDeviceSize)(td_operand_numel(&a) / K) * es, sb = (VkDeviceSize)(td_operand_numel(&b) / K) * es;
    int64_t Kc = (int64_t)(lim / (sa > sb ? sa : sb));
    if (Kc < 1) Kc = 1;
    td_operand acc, p = {0};
    td_status st = temporary(d, &o, &acc);
    if (st == TD_OK) { /* sized for o's dtype; the accumulator's is at least as wide */
        vk_free(acc.buf);
        acc.dtype = acc_dt;
        st = vk_alloc(d, (size_t)td_operand_numel(&acc) * es, &acc.buf);
        if (st != TD_OK) acc.buf = NULL;
    }
    if (st == TD_OK) p = acc, p.buf = NULL, st = vk_alloc(d, (size_t)td_operand_numel(&acc) * es, &p.buf);
    for (int64_t k0 = 0; k0 < K && st == TD_OK; k0 += Kc) {
        td_operand in[2] = {a, b};
        td_buffer *ta = NULL, *tb = NULL;
        int64_t kc = K - k0 < Kc ? K - k0 : Kc;
        in[0].offset += k0 * a.strides[ka], in[0].shape[ka] = kc;
        in[1].offset += k0 * b.strides[kb], in[1].shape[kb] = kc;
        st = gather_as(d, enc, &in[0], acc_dt, &ta);
        if (st == TD_OK) st = gather_as(d, enc, &in[1], acc_dt, &tb);
        td_op part = *op;
        part.in = in, part.out = k0 ? &p : &acc;
        if (st == TD_OK) st = enc[TD_OP_MATMUL](d, &part);
        td_operand both[2] = {acc, p};
        td_op add = {.kind = TD_OP_ADD, .n_in = 2, .n_out = 1, .in = both, .out = &acc};
        if (st == TD_OK && k0) st = enc[TD_OP_ADD](d, &add);
        if (ta) vk_free(ta);
        if (tb) vk_free(tb);
    }
    td_op copy = {.kind = TD_OP_COPY, .n_in = 1, .n_out = 1, .in = &acc, .out = &o};
    if (st == TD_OK) st = enc[TD_OP_COPY](d, &copy);
    if (acc.buf) vk_free(acc.buf);
    if (p.buf) vk_free(p.buf);
    return st;
}

/* The 2-D core of matmul_parts: out o[..., M, N] (contiguous) in tiles of Mt rows and Nt columns, Mt
** as many rows of a as one temporary holds where a is too wide (else M), Nt likewise for the
** columns of b, both shrunk while a too-wide out tile would not fit one. Each a block is gathered
** once; the b blocks are gathered on the first row of tiles and kept (their temporaries add up to
** b's size); a tile of out that is not contiguous or too wide runs into a temporary, copied into
** place. So the parts are (a's bytes / limit) * (b's bytes / limit), none smaller than needed. */
static td_status matmul_tiles(vk_dev *d, const td_op *op, const vk_op_fn *enc, td_operand a, td_operand b,
                              td_operand o) {
    int ra = a.ndim - 2, cb = b.ndim - 1, ro = o.ndim - 2;
    int64_t M = o.shape[ro], N = o.shape[ro + 1], Mt = M, Nt = N;
    td_operand in[2] = {a, b};
    td_op part = *op;
    part.in = in, part.out = &o;
    if (M == 0 || N == 0) return enc[TD_OP_MATMUL](d, &part);
    size_t es = td_dtype_size(a.dtype);
    VkDeviceSize lim = one_limit(d), row_a = (VkDeviceSize)(td_operand_numel(&a) / M) * es,
                 col_b = (VkDeviceSize)(td_operand_numel(&b) / N) * es,
                 el_o = (VkDeviceSize)(td_operand_numel(&o) / (M * N)) * td_dtype_size(o.dtype);
    bool wa = vk_view_too_wide(d, &a), wb = vk_view_too_wide(d, &b), wo = vk_view_too_wide(d, &o);
    if (wa) Mt = row_a > lim ? 1 : (int64_t)(lim / row_a) < M ? (int64_t)(lim / row_a) : M;
    if (wb) Nt = col_b > lim ? 1 : (int64_t)(lim / col_b) < N ? (int64_t)(lim / col_b) : N;
    /* thin tiles (a few long rows of a or columns of b) waste most of each kernel tile: split K instead
    ** where an accumulator for all of out fits one temporary */
    bool thin = (wa && Mt < M && Mt < 64) || (wb && Nt < N && Nt < 64);
    if (thin && a.shape[ra + 1] > 1 && (VkDeviceSize)(td_operand_numel(&o) * 8) <= lim)
        return matmul_ksplit(d, op, enc, a, b, o, lim);
    while (wo && (VkDeviceSize)(Mt * Nt) * el_o > lim && Mt * Nt > 1) {
        if (Mt >= Nt)
            Mt = (Mt + 1) / 2;
        else
            Nt = (Nt + 1) / 2;
    }
    int64_t nbn = (N + Nt - 1) / Nt;
    td_operand *bs = calloc((size_t)nbn, sizeof *bs);
    td_buffer **tbs = calloc((size_t)nbn, sizeof *tbs);
    td_status st = bs && tbs ? TD_OK : td_error_set(TD_ERR_OOM, "vulkan: matmul parts");
    for (int64_t m0 = 0; m0 < M && st == TD_OK; m0 += Mt) {
        int64_t mt = M - m0 < Mt ? M - m0 : Mt;
        td_operand po;
        td_buffer *ta = NULL, *to = NULL;
        in[0] = a;
        in[0].offset += m0 * a.strides[ra], in[0].shape[ra] = mt;
        st = gather_one(d, enc, &in[0], &ta);
        for (int64_t j = 0; j < nbn && st == TD_OK; j++) {
            int64_t n0 = j * Nt, nt = N - n0 < Nt ? N - n0 : Nt;
            if (m0 == 0) {
                bs[j] = b;
                bs[j].offset += n0 * b.strides[cb], bs[j].shape[cb] = nt;
                if ((st = gather_one(d, enc, &bs[j], &tbs[j])) != TD_OK) break;
            }
            in[1] = bs[j];
            td_operand ot = o;
            ot.offset += m0 * o.strides[ro] + n0 * o.strides[ro + 1], ot.shape[ro] = mt, ot.shape[ro + 1] = nt;
            po = ot;
            if ((!td_operand_is_contiguous(&ot) || vk_view_too_wide(d, &ot)) && (st = temporary(d, &ot, &po)) == TD_OK)
                to = po.buf;
            part.out = &po;
            if (st == TD_OK) st = enc[TD_OP_MATMUL](d, &part);
            td_op copy = {.kind = TD_OP_COPY, .n_in = 1, .n_out = 1, .in = &po, .out = &ot};
            if (st == TD_OK && to) st = enc[TD_OP_COPY](d, &copy);
            if (to) vk_free(to), to = NULL;
        }
        if (ta) vk_free(ta);
    }
    for (int64_t j = 0; tbs && j < nbn; j++)
        if (tbs[j]) vk_free(tbs[j]);
    free(bs);
    free(tbs);
    return st;
}

static td_status matmul_parts(vk_dev *d, const td_op *op, const vk_op_fn *enc) {
    const td_operand *a = &op->in[0], *b = &op->in[1];
    bool wa = vk_view_too_wide(d, a), wb = vk_view_too_wide(d, b), wo = vk_view_too_wide(d, &op->out[0]), fit;
    if (!wa && !wb && !wo) return enc[TD_OP_MATMUL](d, op);
    any_wide(d, op, &fit);
    if (fit) return gathered(d, op, enc);
    /* out as [batch..., M, N] with the batch dims of a and b (the core may have folded batches into M) */
    int nb = (a->ndim > b->ndim ? a->ndim : b->ndim) - 2;
    td_operand o = op->out[0];
    o.ndim = nb + 2;
    for (int i = 0; i < nb; i++) {
        int ja = i - (nb + 2 - a->ndim), jb = i - (nb + 2 - b->ndim);
        int64_t na = ja < 0 ? 1 : a->shape[ja], nbb = jb < 0 ? 1 : b->shape[jb];
        o.shape[i] = na > nbb ? na : nbb;
    }
    o.shape[nb] = a->shape[a->ndim - 2];
    o.shape[nb + 1] = b->shape[b->ndim - 1];
    set_contiguous(&o);
    for (int i = 0; i < nb; i++) {
        int ja = i - (nb + 2 - a->ndim), jb = i - (nb + 2 - b->ndim);
        bool sa = ja >= 0 && a->shape[ja] > 1, sb = jb >= 0 && b->shape[jb] > 1;
        if (o.shape[i] < 2 || !(wo || (wa && sa) || (wb && sb))) continue;
        int64_t h = o.shape[i] / 2;
        for (int half = 0; half < 2; half++) {
            td_operand pa = *a, pb = *b, po = o;
            if (sa) halve(&pa, ja, half, h);
            if (sb) halve(&pb, jb, half, h);
            halve(&po, i, half, h);
            td_status st = matmul_part(d, op, enc, pa, pb, po);
            if (st != TD_OK) return st;
        }
        return TD_OK;
    }
    return matmul_tiles(d, op, enc, *a, *b, o);
}

static td_status conv_parts(vk_dev *d, const td_op *op, const vk_op_fn *enc) {
    bool fit, wide = any_wide(d, op, &fit);
    int64_t n = op->in[0].shape[0], h = n / 2;
    if (wide && fit) return gathered(d, op, enc);
    if (!wide || n < 2) return enc[op->kind](d, op);
    bool weight = op->kind == TD_OP_CONV2D_BACKWARD_WEIGHT;
    td_operand in[3], out = op->out[0], tmp = {0};
    td_op part = *op;
    part.in = in;
    part.out = &out;
    td_status st = TD_OK;
    for (int half = 0; half < 2 && st == TD_OK; half++) {
        for (int i = 0; i < op->n_in && i < 3; i++) in[i] = op->in[i];
        halve(&in[0], 0, half, h); /* x, dy */
        if (weight) {
            halve(&in[1], 0, half, h); /* x */
            if (half) st = temporary(d, &op->out[0], &tmp);
            out = half ? tmp : op->out[0];
        } else {
            out = op->out[0];
            halve(&out, 0, half, h); /* y, dx */
        }
        if (st == TD_OK) st = conv_parts(d, &part, enc);
    }
    if (weight && st == TD_OK) {
        td_operand sum_in[2] = {op->out[0], tmp};
        td_op add = {.kind = TD_OP_ADD, .n_in = 2, .n_out = 1, .in = sum_in, .out = &op->out[0]};
        st = enc[TD_OP_ADD](d, &add);
    }
    if (tmp.buf) vk_free(tmp.buf);
    return st;
}

static td_status split_parts(vk_dev *d, const td_op *op, const vk_op_fn *enc);

static td_status reduce_parts(vk_dev *d, const td_op *op, const vk_op_fn *enc);

/* MEAN (f32, f64) split along a reduced dim: the SUM in parts, then out *= 1 / n (MUL by a one-element
** buffer FILLed with 1 / n, broadcast with strides 0). */
static td_status mean_parts(vk_dev *d, const td_op *op, const vk_op_fn *enc) {
    td_op sum = *op;
    sum.kind = TD_OP_SUM;
    td_status st = reduce_parts(d, &sum, enc);
    int64_t n = 1;
    for (int i = 0; i < op->in[0].ndim; i++)
        if (op->p.reduce.dims >> i & 1) n *= op->in[0].shape[i];
    td_operand sc = op->out[0];
    sc.offset = 0;
    for (int i = 0; i < sc.ndim; i++) sc.strides[i] = 0;
    if (st == TD_OK)
        st = vk_alloc(d, td_dtype_size(sc.dtype), &sc.buf);
    else
        sc.buf = NULL;
    td_operand one = sc;
    one.ndim = 0;
    td_op fill = {.kind = TD_OP_FILL, .n_in = 0, .n_out = 1, .out = &one, .p.fill.value = 1.0 / (double)n};
    if (st == TD_OK) st = enc[TD_OP_FILL](d, &fill);
    td_operand both[2] = {op->out[0], sc};
    td_op mul = {.kind = TD_OP_MUL, .n_in = 2, .n_out = 1, .in = both, .out = (td_operand *)&op->out[0]};
    if (st == TD_OK) st = enc[TD_OP_MUL](d, &mul);
    if (sc.buf) vk_free(sc.buf);
    return st;
}

/* A reduction by halves of its outermost dim longer than 1 (see the top). */
static td_status reduce_parts(vk_dev *d, const td_op *op, const vk_op_fn *enc) {
    const td_operand *in = &op->in[0];
    int dim = 0;
    while (dim < in->ndim && in->shape[dim] == 1) dim++;
    bool reduced = dim < in->ndim && (op->p.reduce.dims >> dim & 1);
    int combine = op->kind == TD_OP_SUM   ? TD_OP_ADD
                  : op->kind == TD_OP_MAX ? TD_OP_MAXIMUM
                  : op->kind == TD_OP_MIN ? TD_OP_MINIMUM
                                          : -1;
    if (reduced && op->kind == TD_OP_MEAN && (in->dtype == TD_F32 || in->dtype == TD_F64) &&
        in->dtype == op->out[0].dtype)
        return mean_parts(d, op, enc);
    if (dim == in->ndim || (reduced && combine < 0) || in->dtype != op->out[0].dtype) return enc[op->kind](d, op);
    int64_t h = in->shape[dim] / 2;
    td_operand pin, pout, tmp = {0};
    td_op part = *op;
    part.in = &pin, part.out = &pout;
    td_status st = TD_OK;
    for (int half = 0; half < 2 && st == TD_OK; half++) {
        pin = *in, pout = op->out[0];
        halve(&pin, dim, half, h);
        if (!reduced)
            halve(&pout, dim, half, h);
        else if (half && (st = temporary(d, &op->out[0], &tmp)) == TD_OK)
            pout = tmp;
        if (st == TD_OK) st = split_parts(d, &part, enc);
    }
    if (reduced && st == TD_OK) {
        td_operand both[2] = {op->out[0], tmp};
        td_op add = {.kind = combine, .n_in = 2, .n_out = 1, .in = both, .out = &op->out[0]};
        st = enc[combine](d, &add);
    }
    if (tmp.buf) vk_free(tmp.buf);
    return st;
}

/* The operands of a row-wise op whose leading dim holds its rows: bit i for in[i], bit 8 + i for
** out[i]; 0 when op does not run by rows. */
static unsigned rows_of(const td_op *op) {
    switch (op->kind) {
    case TD_OP_SOFTMAX:
    case TD_OP_LOG_SOFTMAX: return 0x101;
    case TD_OP_SOFTMAX_BACKWARD:
    case TD_OP_LOG_SOFTMAX_BACKWARD: return 0x103;
    case TD_OP_LAYER_NORM:
    case TD_OP_GROUP_NORM: return 0x701;
    case TD_OP_ADD_LAYER_NORM: return 0xF03;
    case TD_OP_EMBEDDING: return 0x102;
    case TD_OP_CROSS_ENTROPY: return op->p.xent.reduction == TD_REDUCTION_NONE ? 0x107 : 0;
    case TD_OP_CROSS_ENTROPY_BACKWARD: return op->p.xent.reduction == TD_REDUCTION_NONE ? 0x10F : 0;
    default: return 0;
    }
}

/* A row-wise op by halves of its rows: operand k's leading dim of L_k rows holds L_k / L_0 of
** them per row of the first row operand (a [B*T] mean of an x [B, T, C]). */
static td_status row_parts(vk_dev *d, const td_op *op, const vk_op_fn *enc, unsigned rows) {
    int n = op->n_in + op->n_out, first = -1;
    for (int i = 0; i < n && first < 0; i++)
        if (rows >> (i < op->n_in ? i : 8 + i - op->n_in) & 1) first = i;
    const td_operand *lead = first < op->n_in ? &op->in[first] : &op->out[first - op->n_in];
    int64_t L = lead->ndim ? lead->shape[0] : 1, h = L / 2;
    if (n > MAX_OPERANDS || L < 2) return enc[op->kind](d, op);
    td_operand v[MAX_OPERANDS];
    td_op part = *op;
    part.in = v, part.out = v + op->n_in;
    for (int half = 0; half < 2; half++) {
        for (int i = 0; i < n; i++) {
            v[i] = i < op->n_in ? op->in[i] : op->out[i - op->n_in];
            if (!(rows >> (i < op->n_in ? i : 8 + i - op->n_in) & 1) || !v[i].buf || v[i].ndim == 0) continue;
            if (v[i].shape[0] % L) return enc[op->kind](d, op);
            halve(&v[i], 0, half, h * (v[i].shape[0] / L));
        }
        td_status st = split_parts(d, &part, enc);
        if (st != TD_OK) return st;
    }
    return TD_OK;
}

static td_status split_parts(vk_dev *d, const td_op *op, const vk_op_fn *enc) {
    switch (op->kind) {
    case TD_OP_MATMUL: return matmul_parts(d, op, enc);
    case TD_OP_CONV2D:
    case TD_OP_CONV2D_BACKWARD_INPUT:
    case TD_OP_CONV2D_BACKWARD_WEIGHT: return conv_parts(d, op, enc);
    default: break;
    }
    bool reduction = op->kind == TD_OP_SUM || op->kind == TD_OP_MEAN || op->kind == TD_OP_MAX ||
                     op->kind == TD_OP_MIN || op->kind == TD_OP_VAR || op->kind == TD_OP_LOGSUMEXP ||
                     op->kind == TD_OP_ARGMAX || op->kind == TD_OP_ARGMIN;
    bool listed = reduction || op->kind == TD_OP_CROSS_ENTROPY || op->kind == TD_OP_CROSS_ENTROPY_BACKWARD ||
                  op->kind == TD_OP_EMBEDDING_BACKWARD || rows_of(op);
    bool fit; /* the elementwise ops cut themselves (vk_ops_elementwise.c) */
    if (!listed || !any_wide(d, op, &fit)) return enc[op->kind](d, op);
    if (fit) return gathered(d, op, enc);
    if (reduction) return reduce_parts(d, op, enc);
    unsigned rows = rows_of(op);
    return rows ? row_parts(d, op, enc, rows) : enc[op->kind](d, op);
}

td_status vk_split_run(vk_dev *d, const td_op *op, const vk_op_fn *enc) { return split_parts(d, op, enc); }
