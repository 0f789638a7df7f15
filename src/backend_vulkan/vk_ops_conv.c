/*
** CONV2D and both backward passes (pooling is in vk_ops_pool.c). All operands
** are contiguous NCHW. Few channels per group (depthwise) take direct kernels
** over shared-memory tiles (shaders/conv2d_grouped.comp). Other convolutions
** run as implicit GEMMs on the tiled matmul machinery (shaders/conv2d_gemm.comp);
** the weight gradient splits its long K (batch x pixels) into chunks summed by
** a SUM reduction. Products whose grid would pass the device's limits take
** the direct kernels of shaders/conv2d.comp. Backward passes gather instead of
** scattering, so results are deterministic and need no float atomics.
*/
#include <stdlib.h>
#include <string.h>

#include "vk_ops.h"

#define WG 256

/* GLSL: shaders/conv2d.comp, block PC. */
typedef struct vk_pc_conv {
    uint32_t N, C, H, W;
    uint32_t O, Ho, Wo, G;
    uint32_t KH, KW, s0, s1;
    int32_t p0, p1, d0, d1;
    uint32_t a_off, b_off, bias_off, o_off;
    uint32_t has_b;
} vk_pc_conv;
static_assert(sizeof(vk_pc_conv) == 84, "vk_pc_conv must match shaders/conv2d.comp");

/* GLSL: shaders/conv2d_gemm.comp, block PC. */
typedef struct vk_pc_convmm {
    uint32_t M, N, K, G;
    uint32_t Nb, C, H, W;
    uint32_t O, Ho, Wo, KH;
    uint32_t KW, s0, s1, kchunk;
    int32_t p0, p1, d0, d1;
    uint32_t x_off, y_off, bias_off, o_off;
    uint32_t has_b;
} vk_pc_convmm;
static_assert(sizeof(vk_pc_convmm) == 100, "vk_pc_convmm must match shaders/conv2d_gemm.comp");

/* GLSL: shaders/conv2d_grouped.comp, block PC. */
typedef struct vk_pc_convg {
    vk_pc_conv c;
    uint32_t R, IH, IW, tiles_w, slab;
} vk_pc_convg;
static_assert(sizeof(vk_pc_convg) == 104, "vk_pc_convg must match shaders/conv2d_grouped.comp");

enum { CONV_FWD, CONV_DX, CONV_DW };

/* TRIDENT_VK_CONV: "gemm" keeps every convolution on the plain implicit GEMM
** (the grouped kernels and the strided input gradient's phases off: the
** kernels before them), "phases" the GEMM with phases, "grouped" sends every
** geometry the grouped kernels take there (tests), unset or "auto" takes them
** for few channels per group and the GEMM with phases elsewhere. */
enum { CONV_PICK_AUTO, CONV_PICK_GEMM, CONV_PICK_PHASES, CONV_PICK_GROUPED };
static int conv_pick(void) {
    const char *e = getenv("TRIDENT_VK_CONV");
    if (e && !strcmp(e, "gemm")) return CONV_PICK_GEMM;
    if (e && !strcmp(e, "phases")) return CONV_PICK_PHASES;
    if (e && !strcmp(e, "grouped")) return CONV_PICK_GROUPED;
    return CONV_PICK_AUTO;
}

/* out = the sum over q of scratch[q, :] (parts of out's numel each) */
static td_status conv_sum_parts(vk_dev *d, td_buffer *scratch, uint64_t parts_n, td_dtype dt, const td_operand *out) {
    int64_t per = td_operand_numel(out);
    td_operand parts = {.buf = scratch, .dtype = dt, .ndim = 2, .shape = {(int64_t)parts_n, per}, .strides = {per, 1}};
    td_operand sum = {
        .buf = out->buf, .offset = out->offset, .dtype = dt, .ndim = 2, .shape = {1, per}, .strides = {per, 1}};
    td_op red = {.kind = TD_OP_SUM, .n_in = 1, .n_out = 1, .in = &parts, .out = &sum, .p.reduce.dims = 1};
    return vk_op_SUM(d, &red);
}

/* The grouped kernels (shaders/conv2d_grouped.comp) for conv()'s push block c
** and bindings; *done stays false where they do not fit (a tile's input past
** shared memory, a grid past the device's limits) or, under auto, where the
** groups are wide enough for the GEMM. */
#define CG_TW   32   /* output tile width */
#define CG_SH   4096 /* shared tile elements */
#define CG_TAPS 16   /* weight-gradient taps per workgroup */
static td_status conv_grouped(vk_dev *d, uint32_t code, const vk_pc_conv *c, const vk_bind *bind, td_dtype dt,
                              const td_operand *out, bool *done) {
    *done = false;
    uint32_t Cg = c->C / c->G, Og = c->O / c->G, taps = Cg * c->KH * c->KW;
    int pick = conv_pick();
    if (pick == CONV_PICK_GEMM || pick == CONV_PICK_PHASES || (pick == CONV_PICK_AUTO && (Cg > 4 || Og > 4)))
        return TD_OK;
    size_t acc = dt == TD_F64 ? 8 : 4;
    if (d->caps.shared_mem < CG_SH * acc) return TD_OK;
    vk_pc_convg pc = {.c = *c};
    if (code == CONV_DW) pc.c.a_off = c->b_off, pc.c.b_off = c->a_off; /* conv() binds dy first, x second */
    vk_bind b[4] = {bind[0], bind[1], bind[2], bind[3]};
    if (code == CONV_DW) b[0] = bind[1], b[1] = bind[0];
    uint64_t gx, gy, gz = 1;
    td_buffer *scratch = NULL;
    uint64_t slabs = 1;
    if (code == CONV_DW) {
        /* slabs of pixels so that about 2048 workgroups run, each at least 1024 pixels */
        uint64_t pix = (uint64_t)c->N * c->Ho * c->Wo, chunks = (taps + CG_TAPS - 1) / CG_TAPS;
        slabs = (2048 + c->O * chunks - 1) / (c->O * chunks);
        if (slabs > pix / 1024) slabs = pix / 1024 > 0 ? pix / 1024 : 1;
        uint64_t slab = (pix + slabs - 1) / slabs;
        slabs = (pix + slab - 1) / slab;
        pc.slab = (uint32_t)slab, gx = slabs, gy = c->O, gz = chunks;
    } else {
        uint32_t rows = code == CONV_FWD ? c->Ho : c->H, cols = code == CONV_FWD ? c->Wo : c->W, R = 4;
        for (; R >= 1; R /= 2) {
            uint32_t TH = 8 * R;
            if (code == CONV_FWD)
                pc.IH = (TH - 1) * c->s0 + (c->KH - 1) * c->d0 + 1,
                pc.IW = (CG_TW - 1) * c->s1 + (c->KW - 1) * c->d1 + 1;
            else
                pc.IH = (TH - 1 + (c->KH - 1) * c->d0) / c->s0 + 2,
                pc.IW = (CG_TW - 1 + (c->KW - 1) * c->d1) / c->s1 + 2;
            if ((uint64_t)pc.IH * pc.IW <= CG_SH && (R == 1 || rows > 8 * R / 2)) break;
        }
        if (R == 0) return TD_OK;
        pc.R = R, pc.tiles_w = (cols + CG_TW - 1) / CG_TW;
        gx = (uint64_t)pc.tiles_w * ((rows + 8 * R - 1) / (8 * R)),
        gy = (uint64_t)c->N * (code == CONV_FWD ? c->O : c->C);
    }
    if (gx > d->caps.max_groups[0] || gy > d->caps.max_groups[1] || gz > d->caps.max_groups[2] ||
        (uint64_t)td_operand_numel(out) * slabs > UINT32_MAX || (uint64_t)c->N * c->C * c->H * c->W > UINT32_MAX ||
        (uint64_t)c->N * c->O * c->Ho * c->Wo > UINT32_MAX)
        return TD_OK;
    td_status st = TD_OK;
    if (slabs > 1) { /* slab q writes scratch[q, :], then dw = sum over q */
        st = vk_alloc(d, (size_t)(slabs * td_operand_numel(out)) * td_dtype_size(dt), &scratch);
        if (st != TD_OK) return st;
        b[3] = vk_bind_buffer(scratch, true), pc.c.o_off = 0;
    }
    uint32_t spec[1] = {code};
    st = vk_dispatch(d, VK_DT_SHADER(VK_SHADER_conv2d_grouped_f32, dt), spec, 1, 4, b, &pc, sizeof pc, (uint32_t)gx,
                     (uint32_t)gy, (uint32_t)gz);
    if (st == TD_OK && scratch) st = conv_sum_parts(d, scratch, slabs, dt, out);
    if (scratch) vk_free(scratch);
    *done = st == TD_OK;
    return st;
}

/* tile configs {WG, BK, BM, BN, TM, TN} as in vk_ops_matmul.c, and 32 x 128 for
** few channels (W2's first layer); shared memory <= 17 KiB */
static const uint32_t CSMALL[6] = {256, 16, 64, 64, 4, 4}, CLARGE[6] = {256, 16, 128, 128, 8, 8},
                      CLARGE64[6] = {256, 8, 128, 128, 8, 8}, CTHIN[6] = {256, 16, 32, 128, 4, 4};

/* The implicit GEMM for conv()'s push block c and bindings; *done stays false
** when its grid or sizes pass the device's limits (conv() then runs the direct
** kernel). A strided input gradient (dilation 1; a transposed convolution's
** forward) runs one GEMM per stride phase (shader MODE 3), which skips the taps
** that land between dy's pixels: a 2x2 stride-2 one does a quarter of the
** products of the plain gather. */
static td_status conv_gemm(vk_dev *d, uint32_t code, const vk_pc_conv *c, const vk_bind *bind, td_dtype dt,
                           const td_operand *out, bool *done) {
    uint64_t Cg = c->C / c->G, Og = c->O / c->G, KK = (uint64_t)c->KH * c->KW;
    uint64_t m = code == CONV_DX ? Cg : Og, k, n;
    uint64_t phases =
        code == CONV_DX && (c->s0 > 1 || c->s1 > 1) && c->d0 == 1 && c->d1 == 1 && conv_pick() != CONV_PICK_GEMM
            ? (uint64_t)c->s0 * c->s1
            : 1;
    if (code == CONV_FWD)
        k = Cg * KK, n = (uint64_t)c->N * c->Ho * c->Wo;
    else if (phases > 1) /* phase (0, 0), which has the most taps and pixels */
        k = Og * ((c->KH + c->s0 - 1) / c->s0) * ((c->KW + c->s1 - 1) / c->s1),
        n = (uint64_t)c->N * ((c->H + c->s0 - 1) / c->s0) * ((c->W + c->s1 - 1) / c->s1);
    else if (code == CONV_DX)
        k = Og * KK, n = (uint64_t)c->N * c->H * c->W;
    else
        k = (uint64_t)c->N * c->Ho * c->Wo, n = Cg * KK;
    const uint32_t *spec = m <= 32 && n >= 128 ? CTHIN : m < 128 || n < 128 ? CSMALL : dt == TD_F64 ? CLARGE64 : CLARGE;
    uint64_t gx = (n + spec[3] - 1) / spec[3], gy = (m + spec[2] - 1) / spec[2];
    /* weight gradient: split K so that about 1024 workgroups run (not for 16-bit partial sums) */
    uint64_t chunks = 1, tiles = gx * gy * c->G;
    if (code == CONV_DW && td_dtype_size(dt) >= 4 && tiles < 1024) {
        chunks = (1024 + tiles - 1) / tiles;
        if (chunks > k / 256) chunks = k / 256 > 0 ? k / 256 : 1;
    }
    uint64_t kchunk = ((k + chunks - 1) / chunks + spec[1] - 1) / spec[1] * spec[1];
    chunks = (k + kchunk - 1) / kchunk;
    uint64_t elems = (uint64_t)td_operand_numel(out) * chunks, gz = c->G * chunks * phases;
    *done = false;
    if (gx > d->caps.max_groups[0] || gy > d->caps.max_groups[1] || gz > d->caps.max_groups[2] || n > UINT32_MAX ||
        k > UINT32_MAX || elems > UINT32_MAX)
        return TD_OK;
    vk_pc_convmm pc = {.M = (uint32_t)m,
                       .N = (uint32_t)n,
                       .K = (uint32_t)k,
                       .G = c->G,
                       .Nb = c->N,
                       .C = c->C,
                       .H = c->H,
                       .W = c->W,
                       .O = c->O,
                       .Ho = c->Ho,
                       .Wo = c->Wo,
                       .KH = c->KH,
                       .KW = c->KW,
                       .s0 = c->s0,
                       .s1 = c->s1,
                       .kchunk = (uint32_t)(chunks > 1 ? kchunk : k),
                       .p0 = c->p0,
                       .p1 = c->p1,
                       .d0 = c->d0,
                       .d1 = c->d1,
                       .x_off = c->a_off,
                       .y_off = c->b_off,
                       .bias_off = c->bias_off,
                       .o_off = c->o_off,
                       .has_b = c->has_b};
    if (code == CONV_DW) pc.x_off = c->b_off, pc.y_off = c->a_off; /* conv() binds dy first, x second */
    /* square kernels up to 3 x 3 fix their size in the pipeline (its tap decompositions divide by constants) */
    uint32_t ks = c->KH == c->KW && c->KH <= 3 && conv_pick() != CONV_PICK_GEMM ? c->KH : 0;
    uint32_t sp[8] = {spec[0], spec[1], spec[2], spec[3], spec[4], spec[5], phases > 1 ? 3 : code, ks};
    vk_bind b[4] = {bind[0], bind[1], bind[2], bind[3]};
    if (code == CONV_DW) b[0] = bind[1], b[1] = bind[0];
    td_buffer *scratch = NULL;
    td_status st = TD_OK;
    if (chunks > 1) { /* chunk q writes scratch[q, :], then dw = sum over q */
        st = vk_alloc(d, (size_t)elems * td_dtype_size(dt), &scratch);
        if (st != TD_OK) return st;
        b[3] = vk_bind_buffer(scratch, true), pc.o_off = 0;
    }
    st = vk_dispatch(d, VK_DT_SHADER(VK_SHADER_conv2d_gemm_f32, dt), sp, 8, 4, b, &pc, sizeof pc, (uint32_t)gx,
                     (uint32_t)gy, (uint32_t)gz);
    if (st == TD_OK && scratch) st = conv_sum_parts(d, scratch, chunks, dt, out);
    if (scratch) vk_free(scratch);
    *done = st == TD_OK;
    return st;
}

/* 4-D operands (a 1-D bias) and a geometry the kernels take */
static bool conv_ok(const td_op *op) {
    for (int i = 0; i < op->n_in; i++)
        if (op->in[i].buf && op->in[i].ndim != (i == 2 ? 1 : 4)) return false;
    return op->out[0].ndim == 4 && op->p.conv.groups >= 1 && op->p.conv.stride[0] >= 1 && op->p.conv.stride[1] >= 1;
}

/* x/dy/dx shapes give N, C, H, W, O, Ho, Wo; w gives KH, KW. */
static td_status conv(vk_dev *d, const td_op *op, uint32_t code, const td_operand *x, const td_operand *w,
                      const td_operand *y) {
    const td_operand *a = code == CONV_FWD ? x : y, *b = code == CONV_DW ? x : w,
                     *bias = code == CONV_FWD ? &op->in[2] : NULL;
    const td_operand *out = &op->out[0];
    vk_pc_conv pc = {.N = (uint32_t)x->shape[0],
                     .C = (uint32_t)x->shape[1],
                     .H = (uint32_t)x->shape[2],
                     .W = (uint32_t)x->shape[3],
                     .O = (uint32_t)y->shape[1],
                     .Ho = (uint32_t)y->shape[2],
                     .Wo = (uint32_t)y->shape[3],
                     .G = (uint32_t)op->p.conv.groups,
                     .KH = (uint32_t)w->shape[2],
                     .KW = (uint32_t)w->shape[3],
                     .s0 = (uint32_t)op->p.conv.stride[0],
                     .s1 = (uint32_t)op->p.conv.stride[1],
                     .p0 = op->p.conv.padding[0],
                     .p1 = op->p.conv.padding[1],
                     .d0 = op->p.conv.dilation[0],
                     .d1 = op->p.conv.dilation[1]};
    vk_bind bind[4];
    pc.has_b = bias && bias->buf;
    td_status st = vk_bind_view(d, a, false, &bind[0], &pc.a_off);
    if (st == TD_OK) st = vk_bind_view(d, b, false, &bind[1], &pc.b_off);
    if (st == TD_OK) st = vk_bind_view(d, bias, false, &bind[2], &pc.bias_off);
    if (st == TD_OK) st = vk_bind_view(d, out, true, &bind[3], &pc.o_off);
    if (st != TD_OK) return st;
    bool done;
    if ((st = conv_grouped(d, code, &pc, bind, out->dtype, out, &done)) != TD_OK || done) return st;
    if ((st = conv_gemm(d, code, &pc, bind, out->dtype, out, &done)) != TD_OK || done) return st;
    uint32_t spec[2] = {WG, code};
    int64_t n = td_operand_numel(out);
    uint32_t groups = code == CONV_DW ? vk_groups(n, 1) : vk_groups(n, WG);
    return vk_dispatch(d, VK_DT_SHADER(VK_SHADER_conv2d_f32, out->dtype), spec, 2, 4, bind, &pc, sizeof pc, groups, 1,
                       1);
}

bool vk_supports_CONV2D(vk_dev *d, const td_op *op) { return (void)d, conv_ok(op); }
td_status vk_op_CONV2D(vk_dev *d, const td_op *op) {
    return conv(d, op, CONV_FWD, &op->in[0], &op->in[1], &op->out[0]);
}

/* in = (dy, w), out = dx */
bool vk_supports_CONV2D_BACKWARD_INPUT(vk_dev *d, const td_op *op) { return (void)d, conv_ok(op); }
td_status vk_op_CONV2D_BACKWARD_INPUT(vk_dev *d, const td_op *op) {
    return conv(d, op, CONV_DX, &op->out[0], &op->in[1], &op->in[0]);
}

/* in = (dy, x), out = dw */
bool vk_supports_CONV2D_BACKWARD_WEIGHT(vk_dev *d, const td_op *op) { return (void)d, conv_ok(op); }
td_status vk_op_CONV2D_BACKWARD_WEIGHT(vk_dev *d, const td_op *op) {
    return conv(d, op, CONV_DW, &op->in[1], &op->out[0], &op->in[0]);
}
