/*
** Reductions: SUM, MEAN, MAX, MIN, VAR, LOGSUMEXP, ARGMAX, ARGMIN
** (shaders/reduce.comp). in is any view; p.reduce.dims has bit k set for each
** reduced dim; out is contiguous with in's ndim (reduced dims of size 1).
** Integer SUM accumulates into int64 (reduce_sum_<dt>).
*/
#include <string.h>

#include "vk_ops.h"

#define WG 256

/* GLSL: shaders/reduce.comp, block PC. */
typedef struct vk_pc_reduce {
    uint32_t n_out, n_red, in_off, out_off;
    uint32_t kdim, rdim;
    int32_t correction;
    uint32_t pad;
    uint32_t kshape[4], kstride[4];
    uint32_t rshape[8], rstride[8];
} vk_pc_reduce;
static_assert(sizeof(vk_pc_reduce) == 128, "vk_pc_reduce must match shaders/reduce.comp");

enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_VAR, R_LSE, R_ARGMAX, R_ARGMIN };

/* Append dim (size, stride) to a list, merging into the last entry when contiguous with it. */
static void push_dim(int64_t *shape, int64_t *stride, int *n, int64_t size, int64_t st) {
    if (size == 1) return;
    if (*n > 0 && stride[*n - 1] == st * size) {
        shape[*n - 1] *= size;
        stride[*n - 1] = st;
        return;
    }
    shape[*n] = size;
    stride[*n] = st;
    (*n)++;
}

static td_status reduce(vk_dev *d, const td_op *op, uint32_t code) {
    const td_operand *in = &op->in[0], *out = &op->out[0];
    int64_t ks[TD_MAX_DIMS], kst[TD_MAX_DIMS], rs[TD_MAX_DIMS], rst[TD_MAX_DIMS];
    int nk = 0, nr = 0;
    int64_t n_red = 1;
    for (int i = 0; i < in->ndim; i++) {
        if (op->p.reduce.dims >> i & 1) {
            push_dim(rs, rst, &nr, in->shape[i], in->strides[i]);
            n_red *= in->shape[i];
        } else {
            push_dim(ks, kst, &nk, in->shape[i], in->strides[i]);
        }
    }
    if (nr == 0) rs[0] = n_red, rst[0] = 0, nr = 1; /* n_red is 0 or 1 */
    if (n_red > UINT32_MAX) return td_error_set(TD_ERR_UNSUPPORTED, "vulkan: reducing %lld elements", (long long)n_red);
    vk_bind b[2];
    uint32_t in_off, out_off;
    td_status st = vk_bind_view(d, in, false, &b[0], &in_off);
    if (st == TD_OK) st = vk_bind_view(d, out, true, &b[1], &out_off);
    if (st != TD_OK) return st;
    vk_pc_reduce pc = {.n_red = (uint32_t)n_red, .rdim = (uint32_t)nr, .correction = op->p.reduce.correction};
    for (int i = 0; i < nr; i++) pc.rshape[i] = (uint32_t)rs[i], pc.rstride[i] = (uint32_t)rst[i];
    int inner = nk < 4 ? nk : 4, outer = nk - inner;
    int64_t per = 1, n_outer = 1;
    for (int i = outer; i < nk; i++) per *= ks[i];
    for (int i = 0; i < outer; i++) n_outer *= ks[i];
    pc.n_out = (uint32_t)per;
    pc.kdim = (uint32_t)inner;
    for (int i = 0; i < inner; i++) pc.kshape[i] = (uint32_t)ks[outer + i], pc.kstride[i] = (uint32_t)kst[outer + i];
    if (inner == 0) pc.kdim = 1, pc.kshape[0] = 1, pc.kstride[0] = 0;
    td_dtype dt = in->dtype;
    int shader = !vk_is_float(dt) && code == R_SUM ? VK_SHADER_reduce_sum_i32 + (int)(dt - TD_I32)
                                                   : VK_DT_SHADER(VK_SHADER_reduce_f32, dt);
    uint32_t spec[2] = {WG, code};
    for (int64_t o = 0; o < n_outer; o++) {
        int64_t rem = o, koff = 0;
        for (int i = outer - 1; i >= 0; i--) {
            koff += rem % ks[i] * kst[i];
            rem /= ks[i];
        }
        pc.in_off = in_off + (uint32_t)koff;
        pc.out_off = out_off + (uint32_t)(o * per);
        st = vk_dispatch(d, shader, spec, 2, 2, b, &pc, sizeof pc, vk_groups(per, 1), 1, 1);
        if (st != TD_OK) return st;
    }
    return TD_OK;
}

static bool reduce_ok(vk_dev *d, const td_op *op, uint32_t code) {
    if (op->n_in != 1 || op->n_out != 1 || op->in[0].ndim != op->out[0].ndim) return false;
    td_dtype dt = op->in[0].dtype, ot = op->out[0].dtype;
    if (dt == TD_BOOL) return false;
    if (code == R_ARGMAX || code == R_ARGMIN) return ot == TD_I64;
    if (!vk_is_float(dt)) {
        if (code == R_SUM) return ot == TD_I64 && d->caps.int64;
        if (code != R_MAX && code != R_MIN) return false;
    }
    if (code == R_LSE && dt == TD_F64) return false; /* no double exp/log in GLSL */
    return ot == dt;
}

#define VK_REDUCE_(NAME, CODE)                                                                                 \
    bool vk_supports_##NAME(vk_dev *d, const td_op *op) { return reduce_ok(d, op, CODE); }                     \
    td_status vk_op_##NAME(vk_dev *d, const td_op *op) { return reduce(d, op, CODE); }

VK_REDUCE_(SUM, R_SUM)
VK_REDUCE_(MEAN, R_MEAN)
VK_REDUCE_(MAX, R_MAX)
VK_REDUCE_(MIN, R_MIN)
VK_REDUCE_(VAR, R_VAR)
VK_REDUCE_(LOGSUMEXP, R_LSE)
VK_REDUCE_(ARGMAX, R_ARGMAX)
VK_REDUCE_(ARGMIN, R_ARGMIN)
