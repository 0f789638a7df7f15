/*
** MATMUL and convolutions on operands wider than one binding
** (maxStorageBufferRange, lowered by TRIDENT_VULKAN_MAX_BINDING): the op runs
** on parts, recursively, until every operand of every part fits.
**   MATMUL a[..., M, K] @ b[..., K, N] -> out[..., M, N] (out contiguous):
**     1. halves of the outermost batch dim > 1 that a wide operand has;
**     2. b (or out) wide: halves of N (columns of b and out);
**     3. a or out wide: halves of M (rows of a and out);
**   a part that is still too wide and not contiguous (the columns of a
**   row-major b span nearly all of it) is first copied into a contiguous
**   temporary (COPY splits itself); an out part that is not contiguous is
**   computed into a temporary and copied into place;
**   CONV2D, CONV2D_BACKWARD_INPUT: halves of the batch (x and y, dy and dx);
**   CONV2D_BACKWARD_WEIGHT dw = sum over the batch: the first half into dw,
**     the second into a temporary, then ADD dw += it.
** K (matmul) and the weights (conv) are never split: an operand wide along
** them alone reaches the encoder, whose binding fails naming the limit.
*/
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
    if (!vk_view_too_wide(d, v) || td_operand_is_contiguous(v)) return TD_OK;
    td_operand t;
    td_status st = temporary(d, v, &t);
    if (st != TD_OK) return st;
    td_op copy = {.kind = TD_OP_COPY, .n_in = 1, .n_out = 1, .in = v, .out = &t};
    st = enc[TD_OP_COPY](d, &copy);
    *v = t;
    *tmp = t.buf;
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

static td_status matmul_parts(vk_dev *d, const td_op *op, const vk_op_fn *enc) {
    const td_operand *a = &op->in[0], *b = &op->in[1];
    bool wa = vk_view_too_wide(d, a), wb = vk_view_too_wide(d, b), wo = vk_view_too_wide(d, &op->out[0]);
    if (!wa && !wb && !wo) return enc[TD_OP_MATMUL](d, op);
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
    int64_t M = o.shape[nb], N = o.shape[nb + 1];
    bool by_n = (wb || (wo && M == 1)) && N > 1, by_m = (wa || wo) && M > 1;
    if (!by_n && !by_m) return enc[TD_OP_MATMUL](d, op); /* nothing left to split: the binding names the limit */
    int64_t h = (by_n ? N : M) / 2;
    for (int half = 0; half < 2; half++) {
        td_operand pa = *a, pb = *b, po = o;
        halve(by_n ? &pb : &pa, by_n ? b->ndim - 1 : a->ndim - 2, half, h);
        halve(&po, by_n ? nb + 1 : nb, half, h);
        td_status st = matmul_part(d, op, enc, pa, pb, po);
        if (st != TD_OK) return st;
    }
    return TD_OK;
}

static td_status conv_parts(vk_dev *d, const td_op *op, const vk_op_fn *enc) {
    bool wide = false;
    for (int i = 0; i < op->n_in; i++) wide |= vk_view_too_wide(d, &op->in[i]);
    for (int i = 0; i < op->n_out; i++) wide |= vk_view_too_wide(d, &op->out[i]);
    int64_t n = op->in[0].shape[0], h = n / 2;
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

td_status vk_split_run(vk_dev *d, const td_op *op, const vk_op_fn *enc) {
    switch (op->kind) {
    case TD_OP_MATMUL: return matmul_parts(d, op, enc);
    case TD_OP_CONV2D:
    case TD_OP_CONV2D_BACKWARD_INPUT:
    case TD_OP_CONV2D_BACKWARD_WEIGHT: return conv_parts(d, op, enc);
    default: return enc[op->kind](d, op);
    }
}
