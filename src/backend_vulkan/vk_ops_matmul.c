/*
** MATMUL (shaders/matmul.comp): a [..., M, K] @ b [..., K, N] -> out [..., M, N].
** a and b have any strides (row- or column-major matrices, stride-0 batch dims
** for broadcast, fewer batch dims than out aligned from the right); out is
** contiguous. Batch dims are merged where strides allow, at most 3 go to the
** shader, and grids past 65535 batch entries are split.
*/
#include "vk_ops.h"

/* tile configs: {WG, BK, BM, BN, TM, TN} (shaders/matmul.comp) */
static const uint32_t SMALL[6] = {256, 16, 64, 64, 4, 4}, LARGE[6] = {256, 8, 128, 128, 8, 8};

/* GLSL: shaders/matmul.comp, block PC. */
typedef struct vk_pc_matmul {
    uint32_t M, N, K, zbase;
    uint32_t a_off, b_off, o_off, bdim;
    uint32_t a_rs, a_cs, b_rs, b_cs;
    uint32_t bshape[3], a_bs[3], b_bs[3];
} vk_pc_matmul;
static_assert(sizeof(vk_pc_matmul) == 84, "vk_pc_matmul must match shaders/matmul.comp");

bool vk_supports_MATMUL(vk_dev *d, const td_op *op) {
    (void)d;
    const td_operand *a = &op->in[0], *b = &op->in[1], *o = &op->out[0];
    return op->n_in == 2 && vk_is_float(a->dtype) && a->dtype == b->dtype && o->dtype == a->dtype && a->ndim >= 2 &&
           b->ndim >= 2 && o->ndim >= 2 && a->ndim <= o->ndim && b->ndim <= o->ndim;
}

/* stride of batch dim i (of out's ndim - 2 batch dims) in operand v, 0 when absent or broadcast */
static int64_t batch_stride(const td_operand *v, int out_ndim, int i) {
    int j = i - (out_ndim - v->ndim);
    return j < 0 || v->shape[j] == 1 ? 0 : v->strides[j];
}

td_status vk_op_MATMUL(vk_dev *d, const td_op *op) {
    const td_operand *a = &op->in[0], *b = &op->in[1], *o = &op->out[0];
    int nd = o->ndim;
    vk_pc_matmul pc = {.M = (uint32_t)o->shape[nd - 2], .N = (uint32_t)o->shape[nd - 1],
                       .K = (uint32_t)a->shape[a->ndim - 1]};
    pc.a_rs = (uint32_t)a->strides[a->ndim - 2], pc.a_cs = (uint32_t)a->strides[a->ndim - 1];
    pc.b_rs = (uint32_t)b->strides[b->ndim - 2], pc.b_cs = (uint32_t)b->strides[b->ndim - 1];
    /* merge batch dims (out is contiguous, so merging needs a and b to agree) */
    int64_t bs[TD_MAX_DIMS], as_[TD_MAX_DIMS], bbs[TD_MAX_DIMS];
    int nb = 0;
    for (int i = 0; i < nd - 2; i++) {
        int64_t size = o->shape[i], sa = batch_stride(a, nd, i), sb = batch_stride(b, nd, i);
        if (size == 1) continue;
        if (nb > 0 && as_[nb - 1] == sa * size && bbs[nb - 1] == sb * size) {
            bs[nb - 1] *= size, as_[nb - 1] = sa, bbs[nb - 1] = sb;
        } else {
            bs[nb] = size, as_[nb] = sa, bbs[nb] = sb, nb++;
        }
    }
    if (pc.K == 0) { /* empty sum: zeros */
        td_op fill = {.kind = TD_OP_FILL, .n_out = 1, .out = (td_operand *)o};
        return vk_op_FILL(d, &fill);
    }
    vk_bind bind[3];
    uint32_t off[3];
    td_status st = TD_OK;
    for (int k = 0; k < 3 && st == TD_OK; k++) st = vk_bind_view(d, k < 2 ? &op->in[k] : o, k == 2, &bind[k], &off[k]);
    if (st != TD_OK) return st;
    /* more than 3 merged batch dims: the outer ones loop here */
    int inner = nb < 3 ? nb : 3, outer = nb - inner;
    int64_t per = 1, n_outer = 1;
    for (int i = outer; i < nb; i++) per *= bs[i];
    for (int i = 0; i < outer; i++) n_outer *= bs[i];
    pc.bdim = (uint32_t)inner;
    for (int i = 0; i < inner; i++)
        pc.bshape[i] = (uint32_t)bs[outer + i], pc.a_bs[i] = (uint32_t)as_[outer + i], pc.b_bs[i] = (uint32_t)bbs[outer + i];
    const uint32_t *spec = pc.M >= 128 && pc.N >= 128 ? LARGE : SMALL;
    int shader = VK_DT_SHADER(VK_SHADER_matmul_f32, a->dtype);
    uint32_t gx = (pc.N + spec[3] - 1) / spec[3], gy = (pc.M + spec[2] - 1) / spec[2];
    for (int64_t ob = 0; ob < n_outer && st == TD_OK; ob++) {
        int64_t rem = ob, ao = 0, bo = 0;
        for (int i = outer - 1; i >= 0; i--) {
            int64_t c = rem % bs[i];
            rem /= bs[i];
            ao += c * as_[i], bo += c * bbs[i];
        }
        pc.a_off = off[0] + (uint32_t)ao, pc.b_off = off[1] + (uint32_t)bo;
        pc.o_off = off[2] + (uint32_t)(ob * per * pc.M * pc.N);
        for (int64_t z = 0; z < per && st == TD_OK; z += 65535) {
            pc.zbase = (uint32_t)z;
            uint32_t gz = (uint32_t)(per - z < 65535 ? per - z : 65535);
            st = vk_dispatch(d, shader, spec, 6, 3, bind, &pc, sizeof pc, gx, gy, gz);
        }
    }
    return st;
}
