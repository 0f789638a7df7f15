/*
** MATMUL (shaders/matmul.comp), LINEAR (a MATMUL, then ADD's shader), LINEAR_GELU (a MATMUL, then
** shaders/bias_gelu.comp; see its section) and
** LINEAR_WGRAD (a MATMUL and a SUM, at the end): a [..., M, K]
*@ b [..., K, N] -> out [..., M, N].
** a and b have any strides (row- or column-major matrices, stride-0 batch dims
** for broadcast, fewer batch dims than out aligned from the right); out is
** contiguous. Batch dims are merged where strides allow, at most 3 go to the
** shader, and grids past 65535 batch entries are split.
**
** Split-K (split_k_of): one product with few output tiles and a long K (a
** weight gradient a^T dy with K = B*T, as autograd folds Linear's; an LSTM
** step's dh = dgates [32, 4H] @ W_hh [4H, H]) would run on a handful of
** workgroups, each looping over all of K. It runs instead as S products over
** K/S-long slices, the slices a batch dim of the shader, into a scratch
** [S, M, N], which a SUM over dim 0 (reduce_tile.comp) adds into out in slice
** order: the same bits on every run.
**
** Skinny tiles: a product of at most 32 rows (an LSTM step's [32, K] @ [K, 4H])
** takes 32-row tiles (SKINNY64/32), not 64-row ones half empty; each output's
** sum runs over k in the same order in every tile shape, so the bits are the same.
**
** Knobs of the tiled kernel (split-K: f32 and f64; skinny tiles: every dtype
** there; the bf16 tensor-core split keeps K >= 4096, slices >= 512, 256
** workgroups), read on each product; a bad value is a one-line TD_ERR_MISUSE;
** scripts/vk-skinny-sweep measures them (the defaults are its best on an H100, 2026-11-27: W6 with the
** per-step GEMMs 91.2 -> 22.0 ms, W3 fp32 53.5 -> 49.2, W2 1.10 -> 0.85):
**   TRIDENT_VK_SPLITK_MIN_K   split K from this length (default 512; 4096 with
**                             SLICE 512 and SKINNY 0 is the rule before these)
**   TRIDENT_VK_SPLITK_SLICE   shortest slice (default 64)
**   TRIDENT_VK_SPLITK_GROUPS  most workgroups a split makes (default 384); the
**                             products of GROUPS / 2 tiles or more are not split
**   TRIDENT_VK_GEMM_SKINNY    0: 64 x 64 tiles for few rows too; 1: 32 x 64
**                             tiles of 128 threads; 2 (default): 32 x 32 of 64
**
** f16 uses tensor cores (shaders/matmul_coopmat.comp) where the device has KHR
** or NV cooperative matrices (vk_coopmat.c picks one), after a self-test on first use: seven products (every
** staging layout: row-major operands, a, b and both transposed, with 16-byte runs and with odd sizes) must
** match a double-precision host reference within f16 rounding and f32 accumulation
** error, else that device keeps the tiled kernel (and says so on stderr).
** A column-major operand (a weight gradient's dy^T, Linear's W^T) is staged transposed, read in 16-byte
** runs along its unit stride. Knobs of both cooperative-matrix kernels (f16, bf16), read on each product
** (scripts/vk-coop-sweep times them; a bad value, or a tile the device cannot run, is a TD_ERR_MISUSE):
**   TRIDENT_VK_COOP_TILE   index into COOP_TILES (workgroup BM x BN, K step BK, subgroup blocks WM x WN,
**                          shared stages; default: COOP_WIDE's rule, 7 or 0): 0 128x128x32 / 64 x
**                          subgroup size, 2 stages; 1 the same with 64x64 blocks; 2 128x256x32 / 64x64,
**                          1 stage; 3 256x128x32 / 64x64, 1;
**                          4 128x128x64 / 64 x sg, 1; 5 128x128x64 / 64x64, 1; 6 tile 0 with 1 stage;
**                          7 128x256x32 / 64 x sg (512 invocations), 1; 8 128x256x16 / 64x64, 2; 9 256x128x16 /
**                          64x64, 2 (8 and 9: tile 7's and 3's work in two stages, half as deep; all within 48
**                          KiB of shared memory, NVIDIA's maxComputeSharedMemorySize, which Vulkan cannot raise)
**   TRIDENT_VK_COOP_PIPE   tiles in flight in registers (shaders/matmul_coopmat_kloop.glsl): 0 (default) the
**                          next tile, loaded while the current one is multiplied and stored right after; 1..3
**                          that many, tile k + 1 stored before tile k is multiplied (one stage: tile k), so that
**                          each load has that many steps to arrive in; the same sums in the same order, so the
**                          same bits as 0 (test_vulkan_bf16mm's pipeline)
**   TRIDENT_VK_COOP_TRANS  0: column-major operands take the row-major staging (8 strided loads per run),
**                          the rule before the transposed staging; 1 (default): staged transposed
**   TRIDENT_VK_COOP_SPLITK f16 and native bf16: 1 (default) splits K of a single product with few output tiles
**                          as scaled bf16 does (split_k_of's tensor-core rule: K >= 4096, slices >= 512, 256
**                          workgroups; a weight gradient [768, 16384] @ [16384, 2304] in 2), the slices' f32 sums
**                          added in order and rounded once (matmul_f16_split; that gradient 112 -> 158 TFLOP/s on
**                          an H100, the other W5 shapes unchanged); 0: no split
**
** bf16 (a, b and out) runs natively where the device has bf16 cooperative matrices (caps.coopmat_bf16_native,
** vk_coopmat.c): the f16 kernel itself (its BF16_BITS variant, whose f32 result is rounded to bf16 bits) with its
** SPIR-V retyped to bf16 (variant matmul_coopmat_native_bf16, vk_spirv_bf16.c), launched as for f16 (tile rule,
** TRIDENT_VK_COOP_SPLITK's split rounding once to bf16), with no pre-pass and no scratch, after its own first-use
** self-test (coopmat_selftest on that path; bf16_native). TRIDENT_VK_BF16=native|scaled (read on each product)
** forces a path. Elsewhere, or scaled, bf16 runs on the f16 tensor cores (shaders/matmul_coopmat_bf16.comp): a
** pre-pass (shaders/matmul_bf16_keys.comp) takes the largest finite |x| of each row of a
** and column of b into a scratch buffer on the device (no host read); each bf16 is staged
** as the f16 of x times a power of two of its row (column), exact within 2^28 of that
** max, and the kernel undoes the scales on the f32 result (the bound and the inf/NaN
** rules are in the shader). The conversion runs ahead of the kernel by default
** (shaders/matmul_bf16_scale.comp writes scaled f16 copies of a and b, (M K + K N) 2 bytes
** per batch entry, freed after the product; the kernel then stages them as loaded, out of
** its K loop); TRIDENT_VK_BF16_PRESCALE=0 (read on each product) converts inside the
** K loop as before: the same f16 in shared memory, the same bits out (test_vulkan_bf16mm's
** prescale). TRIDENT_VULKAN_COOPMAT_BF16=emulated runs the kernel's emulated variant on any
** device (lavapipe), for the tests. Where the device has cooperative matrices, unless
** TRIDENT_VULKAN_COOPMAT_BF16=0, after its own self-test (rows and columns scaled
** 2^-30 .. 2^30); products of more than 3 merged batch dims, or more than 2^19 rows
** in a pre-pass grid, take the tiled kernel. A weight gradient's few output tiles over a long K
** split K there too (split_k_of), the slices' f32 sums added in order, rounded once.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_ops.h"

#define WG 256 /* the bias_gelu pass */

/* tile configs: {WG, BK, BM, BN, TM, TN, KU} (shaders/matmul.comp); shared memory
** (BM + BN) * BK * 4 = 8 and 16 KiB (f64 accumulates in 8 bytes, so its
** large tiles take BK 8), within every device's 16 KiB minimum. The large
** tiles unroll 4 k's of their 8 x 8 block at a time (KU), not all 16 (NVIDIA's
** compiler took about 30 s over that); the f32 ones unroll 8 (gemm_ku; TRIDENT_VK_GEMM_KU = 4 or 16 picks
** another, scripts/vk-ku-sweep measures them). */
static const uint32_t SMALL[7] = {256, 16, 64, 64, 4, 4, 16}, LARGE[7] = {256, 16, 128, 128, 8, 8, 4},
                      LARGE64[7] = {256, 8, 128, 128, 8, 8, 4};

/* LARGE with the f32 unroll of TRIDENT_VK_GEMM_KU (4, 8 or 16; unset: 8, which runs GEMM 4096^3 at 37.6
** TFLOP/s where 4 gives 32.6, for a first compile 3 s longer; W2 never makes these tiles) in spec, or an error. */
static td_status gemm_ku(uint32_t spec[7]) {
    memcpy(spec, LARGE, sizeof LARGE);
    spec[6] = 8;
    const char *env = getenv("TRIDENT_VK_GEMM_KU");
    if (!env || !*env) return TD_OK;
    if (strcmp(env, "4") && strcmp(env, "8") && strcmp(env, "16"))
        return td_error_set(TD_ERR_MISUSE, "TRIDENT_VK_GEMM_KU=%s: must be 4, 8 or 16", env);
    spec[6] = (uint32_t)atoi(env);
    return TD_OK;
}

/* Skinny tiles for M <= 32 (TRIDENT_VK_GEMM_SKINNY 1, 2): 32 x 64 blocks of 128 threads, 32 x 32 of 64;
** shared memory 6 and 4 KiB (f32), twice that for f64. */
static const uint32_t SKINNY64[7] = {128, 16, 32, 64, 4, 4, 16}, SKINNY32[7] = {64, 16, 32, 32, 4, 4, 16};

/* The tiled kernel's knobs (see the top comment). */
typedef struct gemm_knobs {
    uint32_t min_k, slice, groups, skinny;
} gemm_knobs;

/* The value of environment variable name, an integer in [lo, hi], in *v (unset or empty: def), or an error. */
static td_status env_u32(const char *name, uint32_t lo, uint32_t hi, uint32_t def, uint32_t *v) {
    const char *env = getenv(name);
    *v = def;
    if (!env || !*env) return TD_OK;
    char *end;
    unsigned long x = strtoul(env, &end, 10);
    if (*end || env[0] < '0' || env[0] > '9' || x < lo || x > hi)
        return td_error_set(TD_ERR_MISUSE, "%s=%s: must be an integer from %u to %u", name, env, lo, hi);
    *v = (uint32_t)x;
    return TD_OK;
}

static td_status gemm_knobs_get(gemm_knobs *k) {
    td_status st = env_u32("TRIDENT_VK_SPLITK_MIN_K", 2, 1u << 30, 512, &k->min_k);
    if (st == TD_OK) st = env_u32("TRIDENT_VK_SPLITK_SLICE", 16, 1u << 30, 64, &k->slice);
    if (st == TD_OK) st = env_u32("TRIDENT_VK_SPLITK_GROUPS", 2, 1u << 20, 384, &k->groups);
    if (st == TD_OK) st = env_u32("TRIDENT_VK_GEMM_SKINNY", 0, 2, 2, &k->skinny);
    return st;
}

/* Large tiles from this many workgroups of them: fewer leave a large GPU's cores idle (an H100 has
** 132), where the small tiles' 4x as many workgroups fill it, so a product such as W2's
** [128, 3136] @ [3136, 128] (and its gradients) runs on the small tiles and never makes the large tiles' pipeline. */
#define LARGE_MIN_GROUPS 128

/* GLSL: shaders/matmul.comp, block PC. */
typedef struct vk_pc_matmul {
    uint32_t M, N, K, zbase;
    uint32_t a_off, b_off, o_off, bdim;
    uint32_t a_rs, a_cs, b_rs, b_cs;
    uint32_t bshape[3], a_bs[3], b_bs[3];
} vk_pc_matmul;
static_assert(sizeof(vk_pc_matmul) == 84, "vk_pc_matmul must match shaders/matmul.comp");

/* GLSL: shaders/matmul_coopmat_bf16.comp, block PC: matmul.comp's, then where the keys are. */
typedef struct vk_pc_matmul_bf16 {
    vk_pc_matmul mm;
    uint32_t ka_zs, kb_off, kb_zs;
} vk_pc_matmul_bf16;
static_assert(sizeof(vk_pc_matmul_bf16) == 96, "vk_pc_matmul_bf16 must match shaders/matmul_coopmat_bf16.comp");

/* GLSL: shaders/matmul_bf16_keys.comp, block PC. */
typedef struct vk_pc_bf16_keys {
    uint32_t R, L, rs, es;
    uint32_t x_off, k_off, k_zs, zbase;
    uint32_t bdim, bshape[3], x_bs[3];
} vk_pc_bf16_keys;
static_assert(sizeof(vk_pc_bf16_keys) == 60, "vk_pc_bf16_keys must match shaders/matmul_bf16_keys.comp");

/* GLSL: shaders/matmul_bf16_scale.comp, block PC: the keys' block, then where the f16 copy goes. */
typedef struct vk_pc_bf16_scale {
    vk_pc_bf16_keys k;
    uint32_t o_off, o_zs, inner;
} vk_pc_bf16_scale;
static_assert(sizeof(vk_pc_bf16_scale) == 72, "vk_pc_bf16_scale must match shaders/matmul_bf16_scale.comp");

/* Batch dim i of the nb = max(a, b) - 2 batch dims, right-aligned: its size and
** each operand's stride (0 when absent or broadcast). */
static int64_t batch_dim(const td_operand *a, const td_operand *b, int nb, int i, int64_t *sa, int64_t *sb) {
    int ja = i - (nb + 2 - a->ndim), jb = i - (nb + 2 - b->ndim);
    int64_t na = ja < 0 ? 1 : a->shape[ja], nbb = jb < 0 ? 1 : b->shape[jb];
    *sa = ja < 0 || na == 1 ? 0 : a->strides[ja];
    *sb = jb < 0 || nbb == 1 ? 0 : b->strides[jb];
    return na > nbb ? na : nbb;
}

/* out is contiguous with (batches x M x N) elements; the core may fold batch
** dims into M (a [B*M, K] for out [B, M, N]), so M comes from a, not out. */
bool vk_supports_MATMUL(vk_dev *d, const td_op *op) {
    (void)d;
    const td_operand *a = &op->in[0], *b = &op->in[1], *o = &op->out[0];
    if (a->ndim < 2 || b->ndim < 2 || a->shape[a->ndim - 1] != b->shape[b->ndim - 2] || !td_operand_is_contiguous(o))
        return false;
    int nb = (a->ndim > b->ndim ? a->ndim : b->ndim) - 2;
    int64_t n = a->shape[a->ndim - 2] * b->shape[b->ndim - 1], sa, sb;
    for (int i = 0; i < nb; i++) n *= batch_dim(a, b, nb, i, &sa, &sb);
    return n == td_operand_numel(o);
}

/* The skinny tiles for pc's product under knobs k, or NULL where it takes the 64 x 64 or larger ones. */
static const uint32_t *skinny_of(const vk_pc_matmul *pc, const gemm_knobs *k) {
    return pc->M > 32 || k->skinny == 0 ? NULL : k->skinny == 1 ? SKINNY64 : SKINNY32;
}

/* Slices of K for a single f32/f64 product under knobs k (coop: a bf16 one on the tensor cores, 128 x 128
** tiles, under the fixed rule K >= 4096, slices >= 512, 256 workgroups) whose output tiles (skinny ones for
** few rows, large ones where M and N reach 128) are fewer than half k's workgroups, so fewer than a large GPU
** has cores (an H100 has 132), with K at least k's MIN_K: the largest power of two up to 64 that divides K,
** keeps slices of k's SLICE or more and the workgroups within k's GROUPS; 1: no split. tiled() then picks the
** tiles of the sliced product. */
static int64_t split_k_of(const vk_pc_matmul *pc, int nb, td_dtype dt, bool coop, const gemm_knobs *k) {
    static const uint32_t COOP[7] = {256, 0, 128, 128};
    static const gemm_knobs COOP_RULE = {4096, 512, 256, 0};
    if (coop) k = &COOP_RULE;
    const uint32_t *sk = coop ? NULL : skinny_of(pc, k);
    const uint32_t *spec = coop ? COOP : sk ? sk : pc->M < 128 || pc->N < 128 ? SMALL : dt == TD_F64 ? LARGE64 : LARGE;
    int64_t tiles = (int64_t)((pc->M + spec[2] - 1) / spec[2]) * ((pc->N + spec[3] - 1) / spec[3]), s = 1;
    if (nb != 0 || (!coop && dt != TD_F32 && dt != TD_F64) || 2 * tiles >= k->groups || pc->K < k->min_k) return 1;
    while (s < 64 && pc->K % (2 * s) == 0 && pc->K / (2 * s) >= k->slice && tiles * 2 * s <= k->groups) s *= 2;
    return s;
}

/* The tiled kernel on pc's product, gz batch entries: skinny tiles for few rows (skinny_of); else large
** tiles from 128 rows and columns where they make LARGE_MIN_GROUPS workgroups (until their pipeline is made,
** small ones, so that a first step with an empty pipeline cache does not wait for it; the sums go in the
** same order, so the results are the same bits). */
static td_status tiled(vk_dev *d, td_dtype dt, const vk_pc_matmul *pc, const vk_bind *bind, uint32_t gz,
                       const gemm_knobs *k) {
    int shader = VK_DT_SHADER(VK_SHADER_matmul_f32, dt);
    const uint32_t *sk = skinny_of(pc, k);
    if (sk)
        return vk_dispatch(d, shader, sk, 7, 3, bind, pc, sizeof *pc, (pc->N + sk[3] - 1) / sk[3],
                           (pc->M + sk[2] - 1) / sk[2], gz);
    uint32_t large[7];
    td_status st = gemm_ku(large);
    if (st != TD_OK) return st;
    const uint32_t *spec = dt == TD_F64 ? LARGE64 : dt == TD_F32 ? large : LARGE;
    uint32_t small_grid[3] = {(pc->N + SMALL[3] - 1) / SMALL[3], (pc->M + SMALL[2] - 1) / SMALL[2], gz};
    uint32_t gx = (pc->N + spec[3] - 1) / spec[3], gy = (pc->M + spec[2] - 1) / spec[2];
    if (pc->M < 128 || pc->N < 128 || (uint64_t)gx * gy * gz < LARGE_MIN_GROUPS)
        return vk_dispatch(d, shader, SMALL, 7, 3, bind, pc, sizeof *pc, small_grid[0], small_grid[1], gz);
    return vk_dispatch_alt(d, shader, spec, SMALL, 7, small_grid, 3, bind, pc, sizeof *pc, gx, gy, gz);
}

/* out[M, N] = sum over s of a[:, s Kc:(s+1) Kc] @ b[s Kc:(s+1) Kc, :]: the
** slices as a batch of S products into scratch, then SUM over the batch. */
static td_status matmul_split_k(vk_dev *d, const td_op *op, vk_pc_matmul pc, const vk_bind *bind, int64_t S,
                                const gemm_knobs *k) {
    const td_operand *o = &op->out[0];
    td_dtype dt = o->dtype;
    uint32_t kc = pc.K / (uint32_t)S;
    td_buffer *scratch;
    td_status st = vk_alloc(d, (size_t)S * pc.M * pc.N * td_dtype_size(dt), &scratch);
    if (st != TD_OK) return st;
    pc.K = kc, pc.bdim = 1, pc.bshape[0] = (uint32_t)S;
    pc.a_bs[0] = kc * pc.a_cs, pc.b_bs[0] = kc * pc.b_rs, pc.o_off = 0, pc.zbase = 0;
    vk_bind b3[3] = {bind[0], bind[1], vk_bind_buffer(scratch, true)};
    st = tiled(d, dt, &pc, b3, (uint32_t)S, k);
    int64_t mn = (int64_t)pc.M * pc.N;
    td_operand parts = {.buf = scratch, .dtype = dt, .ndim = 2, .shape = {S, mn}, .strides = {mn, 1}};
    td_operand sum = {.buf = o->buf, .offset = o->offset, .dtype = dt, .ndim = 2, .shape = {1, mn}, .strides = {mn, 1}};
    td_op red = {.kind = TD_OP_SUM, .n_in = 1, .n_out = 1, .in = &parts, .out = &sum, .p.reduce.dims = 1};
    if (st == TD_OK) st = vk_op_SUM(d, &red);
    vk_free(scratch);
    return st;
}

/* Tiles of the cooperative-matrix kernels (TRIDENT_VK_COOP_TILE picks one by index): {BM, BN, BK, WM, WN,
** STAGES}, the workgroup's BM x BN block of out in K steps of BK, each subgroup's WM x WN block (WN 0: the
** subgroup size, which makes 0 the kernels' first rule: 256 invocations in 128 x 128 tiles), STAGES shared
** stages (one where two would pass 48 KiB, NVIDIA's maxComputeSharedMemorySize). */
static const uint16_t COOP_TILES[][6] = {
    {128, 128, 32, 64, 0, 2},  {128, 128, 32, 64, 64, 2}, {128, 256, 32, 64, 64, 1}, {256, 128, 32, 64, 64, 1},
    {128, 128, 64, 64, 0, 1},  {128, 128, 64, 64, 64, 1}, {128, 128, 32, 64, 0, 1},  {128, 256, 32, 64, 0, 1},
    {128, 256, 16, 64, 64, 2}, {256, 128, 16, 64, 64, 2},
};
#define N_COOP_TILES ((uint32_t)(sizeof COOP_TILES / sizeof COOP_TILES[0]))
/* The default tile: 7 (128 x 256, 512 invocations) for bf16, and for f16 where it makes at least
** COOP_WIDE_MIN_GROUPS workgroups, else 0 (128 x 128). From scripts/vk-coop-sweep on an H100 (RESULTS, seventh
** session): 7 ran W5's bf16 products 1.1-1.7x faster than 0 (all but fc2's 16384x3072x768, 0.89x) and f16
** 4096^3 1.48x, while f16's weight gradient 768x16384x2304 (54 such workgroups) ran 0.78x. */
#define COOP_WIDE            7u
#define COOP_WIDE_MIN_GROUPS 128

/* A cooperative-matrix kernel's launch: its specialization constants (matmul_coopmat*.comp: WG, LM, LN,
** LK, WN, F32_OUT, TILE, SMV; TILE's bit 24 the bf16 kernel's PRESCALED, set by its caller; bits 25-26 PIPE) and
** workgroup tile. */
typedef struct coop_launch {
    uint32_t spec[8], bm, bn;
} coop_launch;

/* Shared memory (bytes) of tile t with A (B) staged transposed where at (bt), the result going out in
** passes of *epi rows (set here: WM, halved while that needs more than the stages, down to 16 rows and
** multiples of lm): the stages of halfs, or *epi rows of BN + 8 (halfs; bf16 (both kernels) or f32 out: floats),
** whichever is more. */
static uint32_t coop_shared(const uint16_t *t, bool at, bool bt, bool bf16, uint32_t lm, uint32_t *epi) {
    uint32_t bm = t[0], bn = t[1], bk = t[2], wm = t[3];
    uint32_t a = at ? bk * (bm + 8) : bm * (bk + 8), b = bt ? bn * (bk + 8) : bk * (bn + 8);
    uint32_t stages = t[5] * (a + b) * 2, row = (bn + 8) * (bf16 ? 4 : 2);
    *epi = wm;
    while (*epi * row > stages && *epi / 2 >= 16 && (*epi / 2) % lm == 0) *epi /= 2;
    return stages > *epi * row ? stages : *epi * row;
}

/* Whether TRIDENT_VULKAN_COOPMAT_BF16=emulated: bf16 products on the bf16 kernel's emulated variant
** (matmul_coopmat_emu_bf16: 16 x 16 x 16 fragments over virtual 32-invocation subgroups, element by element)
** on any device, lavapipe included, without the self-test, so that the tests run the kernel's logic. */
static bool bf16_emu(void) {
    const char *env = getenv("TRIDENT_VULKAN_COOPMAT_BF16");
    return env && !strcmp(env, "emulated");
}

/* The launch of pc's product on d's cooperative-matrix kernel (bf16: matmul_coopmat_bf16.comp; native: the f16
** kernel's BF16_BITS variant retyped, whose result rows are floats; f32_out the kernel's F32_OUT) in *l: the tile
** of TRIDENT_VK_COOP_TILE (index into COOP_TILES; default COOP_WIDE's rule, and tile 0, then 6, where the default
** does not fit the device) with TRIDENT_VK_COOP_PIPE's register tiles in flight, for batch workgroup layers of the
** tile; A staged transposed where a is column-major (a_rs 1: a weight
** gradient's dy^T), B where b is (b_cs not 1, b_rs 1: Linear's W^T), unless TRIDENT_VK_COOP_TRANS=0 or the
** transposed staging would not fit the device's shared memory; a tile the device cannot run is a one-line
** TD_ERR_MISUSE. */
static td_status coop_launch_of(const vk_dev *d, const vk_pc_matmul *pc, int64_t batch, bool bf16, bool native,
                                bool f32_out, coop_launch *l) {
    uint32_t idx, trans, pipe, epi;
    const char *env = getenv("TRIDENT_VK_COOP_TILE");
    bool forced = env && *env;
    int64_t wide_groups = (int64_t)((pc->M + 127) / 128) * ((pc->N + 255) / 256) * batch;
    uint32_t def = d->coop_tile_test                             ? d->coop_tile_test - 1
                   : bf16 || wide_groups >= COOP_WIDE_MIN_GROUPS ? COOP_WIDE
                                                                 : 0;
    td_status st = env_u32("TRIDENT_VK_COOP_TILE", 0, N_COOP_TILES - 1, def, &idx);
    if (st == TD_OK) st = env_u32("TRIDENT_VK_COOP_TRANS", 0, 1, 1, &trans);
    if (st == TD_OK) st = env_u32("TRIDENT_VK_COOP_PIPE", 0, 3, 0, &pipe);
    if (st != TD_OK) return st;
retry:;
    const uint16_t *t = COOP_TILES[idx];
    static const uint32_t EMU_SHAPE[3] = {16, 16, 16};
    bool emu = bf16 && bf16_emu();
    const uint32_t *cs = emu ? EMU_SHAPE : d->caps.coopmat_shape, sg = emu ? 32 : d->caps.subgroup_size;
    uint32_t bm = t[0], bn = t[1], bk = t[2], wm = t[3], wn = t[4] ? t[4] : sg;
    uint32_t wg = bn % wn ? 0 : (bm / wm) * (bn / wn) * sg;
    bool at = trans && pc->a_rs == 1 && pc->a_cs != 1, bt = trans && pc->b_rs == 1 && pc->b_cs != 1;
    bool floats = bf16 || native || f32_out;
    if (coop_shared(t, at, bt, floats, cs[0], &epi) > d->caps.shared_mem) at = bt = false;
    uint32_t shared = coop_shared(t, at, bt, floats, cs[0], &epi);
    /* fragments tile the subgroup block and the result's passes; whole runs per invocation; the bf16 lane
    ** scales' rows (columns) the same in every run (WG a multiple of BM / 8, BN / 8) */
    if (!wg || wm % cs[0] || wn % cs[1] || bk % cs[2] || epi % cs[0] || wg > d->caps.max_wg_invocations ||
        (bm * bk / 8) % wg || (bn * bk / 8) % wg || wg % (bm / 8) || wg % (bn / 8) || shared > d->caps.shared_mem) {
        if (!forced && idx != 6) { /* a default the device cannot run: tile 0, then 6 (one stage) */
            idx = idx == 0 ? 6 : 0;
            goto retry;
        }
        return td_error_set(TD_ERR_MISUSE,
                            "TRIDENT_VK_COOP_TILE=%u (%ux%ux%u, subgroup blocks %ux%u, %u stages): does not fit this "
                            "device (fragments %ux%ux%u, subgroups of %u, %u of %u bytes of shared memory)",
                            idx, bm, bn, bk, wm, wn, t[5], cs[0], cs[1], cs[2], sg, shared,
                            (unsigned)d->caps.shared_mem);
    }
    uint32_t tile = bm / 16 | bn / 16 << 5 | bk / 16 << 10 | wm / 16 << 13 | (uint32_t)at << 17 | (uint32_t)bt << 18 |
                    epi / 16 << 19 | (t[5] - 1u) << 23 | pipe << 25;
    *l = (coop_launch){{wg, cs[0], cs[1], cs[2], wn, f32_out, tile, shared / 16}, bm, bn};
    return TD_OK;
}

/* The bf16 kernel of d's cooperative-matrix path (or the emulated one), or -1 where this build lacks it. */
static int bf16_shader(const vk_dev *d) {
    if (bf16_emu()) return VK_SHADER_matmul_coopmat_emu_bf16;
    return d->caps.coopmat == VK_COOPMAT_KHR ? vk_variant_id("matmul_coopmat_khr_bf16") : VK_SHADER_matmul_coopmat_bf16;
}

/* The keys' push block of x's rows: R long-L runs at strides rs, es (dims), x at x_off, keys at k_off;
** batched: over pc's batch dims (x's strides x_bs), keys k_zs = R apart. */
static vk_pc_bf16_keys keys_pc(const uint32_t dims[4], uint32_t x_off, uint32_t k_off, const vk_pc_matmul *pc,
                               const uint32_t *x_bs, bool batched) {
    vk_pc_bf16_keys kp = {.R = dims[0],
                          .L = dims[1],
                          .rs = dims[2],
                          .es = dims[3],
                          .x_off = x_off,
                          .k_off = k_off,
                          .k_zs = batched ? dims[0] : 0,
                          .bdim = batched ? pc->bdim : 0};
    for (uint32_t i = 0; i < kp.bdim; i++) kp.bshape[i] = pc->bshape[i], kp.x_bs[i] = x_bs[i];
    return kp;
}

/* keys[k_off + z k_zs + r] = the largest finite |x| (bf16 magnitude bits) of row r of x[z], x's
** rows R long-L runs at strides rs, es (keys zeroed before); batched: per entries of pc's batch dims
** (x's strides x_bs), else z = 0 only. */
static td_status bf16_keys(vk_dev *d, vk_bind x, vk_bind keys, const uint32_t dims[4], uint32_t x_off, uint32_t k_off,
                           const vk_pc_matmul *pc, const uint32_t *x_bs, int64_t per) {
    vk_pc_bf16_keys kp = keys_pc(dims, x_off, k_off, pc, x_bs, per > 1);
    uint32_t rows = kp.es == 1 ? 8 : 64, spec[1] = {256};
    vk_bind b[2] = {x, keys};
    td_status st = TD_OK;
    for (int64_t z = 0; z < per && st == TD_OK; z += 65535) {
        kp.zbase = (uint32_t)z;
        st = vk_dispatch(d, VK_SHADER_matmul_bf16_keys, spec, 1, 2, b, &kp, sizeof kp, (kp.L + 511) / 512,
                         (kp.R + rows - 1) / rows, (uint32_t)(per - z < 65535 ? per - z : 65535));
    }
    return st;
}

/* The scaled f16 copy of x (shaders/matmul_bf16_scale.comp; rows, keys and batch as bf16_keys') into out at
** o_off, per entry a contiguous block: [R, L], or [L, R] where x has unit stride along its rows (dims[2] 1,
** dims[3] not: a column-major a, a row-major b), so that the kernel stages the copy as it would stage x. The
** copy's strides (of a row, along L) in rs_es. */
static td_status bf16_scale(vk_dev *d, vk_bind x, vk_bind keys, vk_bind out, const uint32_t dims[4], uint32_t x_off,
                            uint32_t k_off, uint32_t o_off, const vk_pc_matmul *pc, const uint32_t *x_bs, int64_t per,
                            uint32_t rs_es[2]) {
    vk_pc_bf16_scale sp = {.k = keys_pc(dims, x_off, k_off, pc, x_bs, per > 1),
                           .o_off = o_off,
                           .o_zs = per > 1 ? dims[0] * dims[1] : 0,
                           .inner = dims[2] == 1 && dims[3] != 1};
    rs_es[0] = sp.inner ? 1 : dims[1], rs_es[1] = sp.inner ? dims[0] : 1;
    uint64_t runs = (uint64_t)(sp.inner ? dims[1] : dims[0]) * (((sp.inner ? dims[0] : dims[1]) + 7u) / 8u);
    uint32_t gx = runs / 256 >= 1024 ? 1024 : (uint32_t)(runs / 256) + 1, spec[1] = {256};
    vk_bind b[3] = {x, keys, out};
    td_status st = TD_OK;
    for (int64_t z = 0; z < per && st == TD_OK; z += 65535) {
        sp.k.zbase = (uint32_t)z;
        st = vk_dispatch(d, VK_SHADER_matmul_bf16_scale, spec, 1, 3, b, &sp, sizeof sp, gx,
                         (uint32_t)(per - z < 65535 ? per - z : 65535), 1);
    }
    return st;
}

/* Whether pc's bf16 product (inner batch dims, per entries) fits the pre-pass: grids within 65535
** and every key index within 32 bits. */
static bool bf16_fits(const vk_pc_matmul *pc, int64_t per) {
    return pc->M <= 8 * 65535u && pc->N <= 8 * 65535u && (int64_t)per * (pc->M + (int64_t)pc->N) < (1ll << 31) &&
           pc->K / 512 < 65535;
}

/* pc's bf16 product (inner batch dims only) on the tensor cores: keys of a's rows then b's
** columns into a scratch buffer; then (TRIDENT_VK_BF16_PRESCALE=1, the default, where the copies' indices fit
** 31 bits and one binding) the scaled f16 copies of a and b into a second scratch, which the kernel
** (PRESCALED) stages as they are, else the kernel converting in its K loop: the same f16 in shared memory,
** the same bits out. S > 1 (one product, split_k_of): the kernel on S slices
** of K (the keys of the whole rows and columns), unrounded into an f32 scratch [S, M, N], which
** vk_sum_f32_rows adds in slice order into out, rounding once to bf16. */
static td_status matmul_bf16(vk_dev *d, const vk_pc_matmul *pc, const vk_bind *bind, int64_t per, int64_t S) {
    uint32_t pre;
    td_status st = env_u32("TRIDENT_VK_BF16_PRESCALE", 0, 1, 1, &pre);
    if (st != TD_OK) return st;
    bool a_batched = false, b_batched = false;
    for (uint32_t i = 0; i < pc->bdim; i++) a_batched |= pc->a_bs[i] != 0, b_batched |= pc->b_bs[i] != 0;
    int64_t na = (a_batched ? per : 1) * pc->M, nb = (b_batched ? per : 1) * pc->N;
    int64_t ea = na * pc->K, eb = nb * pc->K, eb_off = (ea + 7) / 8 * 8; /* the copies' elements, b's offset */
    uint64_t f16_bytes = (uint64_t)(eb_off + eb) * 2;
    bool prescale =
        pre && eb_off + eb < (1ll << 31) && f16_bytes <= d->caps.max_storage_range && f16_bytes <= d->caps.max_alloc;
    td_buffer *keys, *f16 = NULL;
    if ((st = vk_alloc(d, (size_t)(na + nb) * 4, &keys)) != TD_OK) return st;
    vk_bind kw = vk_bind_buffer(keys, true), kr = vk_bind_buffer(keys, false);
    st = vk_cmd_fill(d, kw.buf, kw.offset, (VkDeviceSize)(na + nb) * 4, 0);
    const uint32_t adims[4] = {pc->M, pc->K, pc->a_rs, pc->a_cs}, bdims[4] = {pc->N, pc->K, pc->b_cs, pc->b_rs};
    if (st == TD_OK) st = bf16_keys(d, bind[0], kw, adims, pc->a_off, 0, pc, pc->a_bs, a_batched ? per : 1);
    if (st == TD_OK) st = bf16_keys(d, bind[1], kw, bdims, pc->b_off, (uint32_t)na, pc, pc->b_bs, b_batched ? per : 1);
    vk_pc_matmul q = *pc; /* the product as the kernel reads it */
    vk_bind b4[4] = {bind[0], bind[1], bind[2], kr};
    if (st == TD_OK && prescale) { /* per entry a copy [M, K] or [K, M], b [K, N] or [N, K]; flat batch */
        uint32_t ars[2], brs[2];
        if ((st = vk_alloc(d, (size_t)f16_bytes, &f16)) == TD_OK) {
            vk_bind fw = vk_bind_buffer(f16, true);
            st = bf16_scale(d, bind[0], kr, fw, adims, pc->a_off, 0, 0, pc, pc->a_bs, a_batched ? per : 1, ars);
            if (st == TD_OK)
                st = bf16_scale(d, bind[1], kr, fw, bdims, pc->b_off, (uint32_t)na, (uint32_t)eb_off, pc, pc->b_bs,
                                b_batched ? per : 1, brs);
        }
        if (st == TD_OK) {
            q.a_off = 0, q.b_off = (uint32_t)eb_off, q.a_rs = ars[0], q.a_cs = ars[1], q.b_cs = brs[0], q.b_rs = brs[1];
            q.bdim = per > 1, q.bshape[0] = (uint32_t)per;
            q.a_bs[0] = a_batched ? pc->M * pc->K : 0, q.b_bs[0] = b_batched ? pc->K * pc->N : 0;
            b4[0] = b4[1] = vk_bind_buffer(f16, false);
        }
    }
    vk_pc_matmul_bf16 p = {
        .mm = q, .ka_zs = a_batched ? pc->M : 0, .kb_off = (uint32_t)na, .kb_zs = b_batched ? pc->N : 0};
    coop_launch l;
    if (st == TD_OK && (st = coop_launch_of(d, &q, S > 1 ? S : per, true, false, S > 1, &l)) == TD_OK)
        l.spec[6] |= (uint32_t)(f16 != NULL) << 24; /* PRESCALED */
    td_buffer *parts = NULL;
    if (S > 1 && st == TD_OK) { /* the slices as a batch dim of S entries; every slice reads the same keys */
        uint32_t kc = pc->K / (uint32_t)S;
        p.mm.K = kc, p.mm.bdim = 1, p.mm.bshape[0] = (uint32_t)S, p.mm.a_bs[0] = kc * q.a_cs;
        p.mm.b_bs[0] = kc * q.b_rs, p.mm.o_off = 0, per = S;
        st = vk_alloc(d, (size_t)S * pc->M * pc->N * 4, &parts);
        if (st == TD_OK) b4[2] = vk_bind_buffer(parts, true);
    }
    for (int64_t z = 0; z < per && st == TD_OK; z += 65535) {
        p.mm.zbase = (uint32_t)z;
        st = vk_dispatch(d, bf16_shader(d), l.spec, 8, 4, b4, &p, sizeof p, (pc->N + l.bn - 1) / l.bn,
                         (pc->M + l.bm - 1) / l.bm, (uint32_t)(per - z < 65535 ? per - z : 65535));
    }
    if (parts && st == TD_OK)
        st = vk_sum_f32_rows(d, vk_bind_buffer(parts, false), bind[2], pc->o_off, S, (int64_t)pc->M * pc->N, TD_BF16);
    if (parts) vk_free(parts);
    if (f16) vk_free(f16);
    vk_free(keys);
    return st;
}

/* pc's single f16 product (dt f16; bf16 on the retyped kernel) on the tensor cores over S slices of K
** (split_k_of; TRIDENT_VK_COOP_SPLITK=1): the slices a batch dim of the kernel, each unrounded (F32_OUT) into an
** f32 scratch [S, M, N], which vk_sum_f32_rows adds in slice order into out, rounding once to dt. */
static td_status matmul_f16_split(vk_dev *d, const vk_pc_matmul *pc, const vk_bind *bind, int shader, int64_t S,
                                  td_dtype dt) {
    coop_launch l;
    td_status st = coop_launch_of(d, pc, S, false, dt == TD_BF16, true, &l);
    if (st != TD_OK) return st;
    uint32_t kc = pc->K / (uint32_t)S;
    vk_pc_matmul q = *pc;
    q.K = kc, q.bdim = 1, q.bshape[0] = (uint32_t)S, q.a_bs[0] = kc * pc->a_cs, q.b_bs[0] = kc * pc->b_rs;
    q.o_off = 0, q.zbase = 0;
    td_buffer *parts;
    if ((st = vk_alloc(d, (size_t)S * pc->M * pc->N * 4, &parts)) != TD_OK) return st;
    vk_bind b3[3] = {bind[0], bind[1], vk_bind_buffer(parts, true)};
    st = vk_dispatch(d, shader, l.spec, 8, 3, b3, &q, sizeof q, (pc->N + l.bn - 1) / l.bn, (pc->M + l.bm - 1) / l.bm,
                     (uint32_t)S);
    if (st == TD_OK)
        st = vk_sum_f32_rows(d, vk_bind_buffer(parts, false), bind[2], pc->o_off, S, (int64_t)pc->M * pc->N, dt);
    vk_free(parts);
    return st;
}

/* op on the tiled kernel, or (coop) on the cooperative-matrix kernels: f16's, bf16's scaled one, or with native
** (bf16 only) the f16 kernel retyped to bf16 (matmul_coopmat_native_bf16), which runs bf16 as the f16 kernel runs
** f16: no keys, no copies. */
static td_status matmul(vk_dev *d, const td_op *op, bool coop, bool native) {
    const td_operand *a = &op->in[0], *b = &op->in[1], *o = &op->out[0];
    int nd = (a->ndim > b->ndim ? a->ndim : b->ndim);
    vk_pc_matmul pc = {.M = (uint32_t)a->shape[a->ndim - 2],
                       .N = (uint32_t)b->shape[b->ndim - 1],
                       .K = (uint32_t)a->shape[a->ndim - 1]};
    pc.a_rs = (uint32_t)a->strides[a->ndim - 2], pc.a_cs = (uint32_t)a->strides[a->ndim - 1];
    pc.b_rs = (uint32_t)b->strides[b->ndim - 2], pc.b_cs = (uint32_t)b->strides[b->ndim - 1];
    /* merge batch dims (out is contiguous, so merging needs a and b to agree) */
    int64_t bs[TD_MAX_DIMS], as_[TD_MAX_DIMS], bbs[TD_MAX_DIMS];
    int nb = 0;
    for (int i = 0; i < nd - 2; i++) {
        int64_t sa, sb, size = batch_dim(a, b, nd - 2, i, &sa, &sb);
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
        pc.bshape[i] = (uint32_t)bs[outer + i], pc.a_bs[i] = (uint32_t)as_[outer + i],
        pc.b_bs[i] = (uint32_t)bbs[outer + i];
    gemm_knobs knobs;
    if ((st = gemm_knobs_get(&knobs)) != TD_OK) return st;
    if (coop && a->dtype == TD_BF16 && !native) {
        if (outer == 0 && bf16_fits(&pc, per)) {
            pc.a_off = off[0], pc.b_off = off[1], pc.o_off = off[2];
            return matmul_bf16(d, &pc, bind, per, split_k_of(&pc, nb, TD_BF16, true, &knobs));
        }
        coop = false;
    }
    int64_t split = coop || n_outer != 1 ? 1 : split_k_of(&pc, nb, a->dtype, false, &knobs);
    if (split > 1) {
        pc.a_off = off[0], pc.b_off = off[1];
        return matmul_split_k(d, op, pc, bind, split, &knobs);
    }
    /* the tile of TRIDENT_VK_COOP_TILE, the device's fragment shape */
    coop_launch l;
    if (coop && (st = coop_launch_of(d, &pc, per * n_outer, false, native, false, &l)) != TD_OK) return st;
    int shader = VK_SHADER_matmul_coopmat_f16;
#ifdef TRIDENT_VK_COOPMAT_KHR
    if (d->caps.coopmat == VK_COOPMAT_KHR) shader = VK_SHADER_matmul_coopmat_khr_f16;
    if (native) shader = VK_SHADER_matmul_coopmat_native_bf16;
#endif
    uint32_t coop_split = 0;
    if (coop && (st = env_u32("TRIDENT_VK_COOP_SPLITK", 0, 1, 1, &coop_split)) != TD_OK) return st;
    if (coop && coop_split && n_outer == 1 && per == 1 && (split = split_k_of(&pc, nb, TD_F16, true, &knobs)) > 1) {
        pc.a_off = off[0], pc.b_off = off[1], pc.o_off = off[2];
        return matmul_f16_split(d, &pc, bind, shader, split, a->dtype);
    }
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
            st = coop ? vk_dispatch(d, shader, l.spec, 8, 3, bind, &pc, sizeof pc, (pc.N + l.bn - 1) / l.bn,
                                    (pc.M + l.bm - 1) / l.bm, gz)
                      : tiled(d, a->dtype, &pc, bind, gz, &knobs);
        }
    }
    return st;
}

/* The f16 bits of f, which must be 0 or a normal f16 value exactly (the
** self-test's multiples of 1/16): re-biased exponent, top 10 mantissa bits.
** (Written out: clang 14 has no _Float16 on x86.) */
static uint16_t half_bits(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000, ax = x & 0x7FFFFFFFu;
    return (uint16_t)(ax ? sign | ((ax - 0x38000000u) >> 13) : sign);
}

/* The value of f16 bits u: (-1)^s 2^(e-25) (1024 + m), subnormals 2^-24 m. */
static float half_value(uint16_t u) {
    int e = (u >> 10) & 31, m = u & 1023;
    float v = e == 31 ? (m ? NAN : INFINITY) : e ? ldexpf((float)(m | 1024), e - 25) : ldexpf((float)m, -24);
    return u & 0x8000 ? -v : v;
}

/* dt's bits of f (f16: see half_bits; bf16: f must fit 8 significant bits) and their value. */
static uint16_t dt_bits(float f, td_dtype dt) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return dt == TD_BF16 ? (uint16_t)(x >> 16) : half_bits(f);
}
static float dt_value(uint16_t u, td_dtype dt) {
    uint32_t x = (uint32_t)u << 16;
    float f;
    memcpy(&f, &x, sizeof f);
    return dt == TD_BF16 ? f : half_value(u);
}

/* One self-test product a [M, K] @ b [K, N] in dt (f16 or bf16) on the cooperative-matrix
** kernel, a row-major or transposed (column-major: stored [K, M]), b row-major or transposed
** (stored [N, K]); inputs are multiples of 1/16 in [-1, 1], for bf16 times 2^-30 .. 2^30 by
** row of a and 2^-24 .. 2^24 by column of b (the kernel's scaling). Each output must be within
** 2^-10 |ref| (bf16: 2^-7 |ref|) + 2^-12 sum|a b| of the double reference (output rounding plus
** f32 accumulation). */
static bool coopmat_case(vk_dev *d, int M, int K, int N, bool a_trans, bool b_trans, td_dtype dt, bool native) {
    size_t na = (size_t)M * K, nb = (size_t)K * N, no = (size_t)M * N;
    uint16_t *ha = malloc(2 * (na + nb + no)), *hb = ha + na, *ho = hb + nb;
    if (!ha) return false;
    for (size_t i = 0; i < na + nb; i++) {
        size_t row = i < na ? (a_trans ? i % M : i / K) : b_trans ? (i - na) / K : (i - na) % N; /* a's m, b's n */
        int e = dt != TD_BF16 ? 0 : i < na ? ((int)(row * 5 % 11) - 5) * 6 : ((int)(row * 3 % 7) - 3) * 8;
        ha[i] = dt_bits(ldexpf((float)((int)((i * 2654435761u) >> 7) % 33 - 16) / 16.0f, e), dt);
    }
    td_operand v[3] = {{.dtype = dt, .ndim = 2, .shape = {M, K}, .strides = {a_trans ? 1 : K, a_trans ? M : 1}},
                       {.dtype = dt, .ndim = 2, .shape = {K, N}, .strides = {b_trans ? 1 : N, b_trans ? K : 1}},
                       {.dtype = dt, .ndim = 2, .shape = {M, N}, .strides = {N, 1}}};
    size_t bytes[3] = {2 * na, 2 * nb, 2 * no};
    bool ok = true;
    for (int i = 0; i < 3; i++) ok = ok && vk_alloc(d, bytes[i], &v[i].buf) == TD_OK;
    ok = ok && vk_write(v[0].buf, 0, ha, bytes[0]) == TD_OK && vk_write(v[1].buf, 0, hb, bytes[1]) == TD_OK;
    td_op op = {.kind = TD_OP_MATMUL, .n_in = 2, .n_out = 1, .in = v, .out = &v[2]};
    ok = ok && matmul(d, &op, true, native) == TD_OK && vk_read(v[2].buf, 0, ho, bytes[2]) == TD_OK;
    double rel = dt == TD_BF16 ? 1.0 / 128 : 1.0 / 1024;
    for (int m = 0; ok && m < M; m++)
        for (int n = 0; ok && n < N; n++) {
            double ref = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                double x = dt_value(ha[a_trans ? (size_t)k * M + m : (size_t)m * K + k], dt);
                double p = x * dt_value(hb[b_trans ? (size_t)n * K + k : (size_t)k * N + n], dt);
                ref += p, mag += fabs(p);
            }
            double got = dt_value(ho[(size_t)m * N + n], dt);
            ok = fabs(got - ref) <= fabs(ref) * rel + mag / 4096;
            if (!ok)
                td_error_set(TD_ERR_DEVICE, "%s [%d, %d] @ [%d, %d]%s%s: out[%d, %d] = %g, want %g", td_dtype_name(dt),
                             M, K, K, N, a_trans ? " (a transposed)" : "", b_trans ? " (b transposed)" : "", m, n, got,
                             ref);
        }
    for (int i = 0; i < 3; i++)
        if (v[i].buf) vk_free(v[i].buf);
    free(ha);
    return ok;
}

/* Every layout the kernels stage, under each tile the default rule may pick (COOP_WIDE where the device runs
** it, and 0) or the one of TRIDENT_VK_COOP_TILE: row-major operands; a, b and both transposed with 16-byte runs
** (sizes multiples of 8; more than one 256-wide tile); a, b and both transposed with odd sizes (8 strided
** loads per run). K spans several steps of BK = 64. */
static bool coopmat_selftest(vk_dev *d, td_dtype dt, bool native) {
    static const int CASES[][5] = {{150, 72, 136, 0, 0},  {136, 200, 264, 1, 0}, {264, 136, 150, 0, 1},
                                   {136, 208, 264, 1, 1}, {70, 40, 90, 1, 0},    {70, 44, 90, 0, 1},
                                   {70, 36, 90, 1, 1}};
    static const uint32_t TILES[2] = {COOP_WIDE, 0};
    bool ok = true;
    for (int k = 0; ok && k < 2; k++) {
        d->coop_tile_test = TILES[k] + 1;
        for (size_t i = 0; ok && i < sizeof CASES / sizeof CASES[0]; i++)
            ok = coopmat_case(d, CASES[i][0], CASES[i][1], CASES[i][2], CASES[i][3], CASES[i][4], dt, native);
    }
    d->coop_tile_test = 0;
    return ok;
}

/* A bf16 path's self-test (coopmat_selftest; native: the retyped kernel), run once: *state 0 -> 1 passed, -1 failed,
** which is said on stderr with what failed and the path used instead. */
static void selftest_once(vk_dev *d, int *state, bool native, const char *what, const char *instead) {
    if (*state != 0) return;
    td_clear_error();
    *state = coopmat_selftest(d, TD_BF16, native) ? 1 : -1;
    if (*state < 0)
        fprintf(stderr, "trident: vulkan:%d: %s failed its self-test (%s); using %s\n", d->index, what, td_last_error(),
                instead);
    td_clear_error();
}

/* Whether op is a bf16 product for the tensor cores: where d has them, unless
** TRIDENT_VULKAN_COOPMAT_BF16=0, with the kernel of d's path in this build, once its
** self-test passed (run on first use; a failure is said on stderr); under =emulated, always. */
static bool bf16_coop(vk_dev *d, const td_op *op) {
    if (op->in[0].dtype != TD_BF16 || op->in[1].dtype != TD_BF16 || op->out[0].dtype != TD_BF16) return false;
    if (bf16_emu()) return true;
    if (d->coopmat_state == 0 || bf16_shader(d) < 0) return false;
    const char *env = getenv("TRIDENT_VULKAN_COOPMAT_BF16");
    if (env && !strcmp(env, "0")) return false;
    selftest_once(d, &d->coopmat_bf16_state, false, "bf16 matmul on cooperative matrices", "the tiled kernel");
    return d->coopmat_bf16_state > 0;
}

/* Whether op, a bf16 product (what "matmul"), runs natively (bf16 cooperative matrices, the retyped f16 kernel) in
** *native: the environment variable var (TRIDENT_VK_BF16; read on each product) native, scaled, or unset: native
** where the device has the path (caps.coopmat_bf16_native, the f16 kernel not failed) and its self-test passed (run
** on first use, selftest_once; a failure is said on stderr and leaves the scaled path), not under
** TRIDENT_VULKAN_COOPMAT_BF16=0 or =emulated. =native where the path is missing or failed is a one-line
** TD_ERR_UNAVAILABLE, so that a comparison never measures the other path unawares. bf16 attention asks the same
** (vk_ops_attention.c: its native kernels are the f16 ones' BF16_BITS variants, retyped alike; what "attention",
** var TRIDENT_VK_ATTN_BF16 where that is set). */
td_status vk_bf16_native(vk_dev *d, const char *var, const char *what, bool *native) {
    *native = false;
    const char *env = getenv(var), *off = getenv("TRIDENT_VULKAN_COOPMAT_BF16");
    bool force = env && !strcmp(env, "native");
    if (env && *env && !force && strcmp(env, "scaled"))
        return td_error_set(TD_ERR_MISUSE, "%s=%s: must be native or scaled", var, env);
    if (env && !strcmp(env, "scaled")) return TD_OK;
    const char *why = NULL;
#ifdef TRIDENT_VK_COOPMAT_KHR
    if (off && (!strcmp(off, "0") || !strcmp(off, "emulated")))
        why = "TRIDENT_VULKAN_COOPMAT_BF16 turns it off";
    else if (!d->caps.coopmat_bf16_native)
        why = "the device lacks VK_KHR_shader_bfloat16 with bf16 x bf16 -> f32 cooperative matrices at the f16 "
              "kernel's shape on the KHR path";
    else if (d->coopmat_state < 0)
        why = "the f16 cooperative-matrix kernel failed its self-test";
    if (!why)
        selftest_once(d, &d->bf16_native_state, true,
                      "bf16 matmul on bf16 cooperative matrices (the retyped f16 kernel)", "the scaled f16 path");
    if (!why && d->bf16_native_state < 0) why = "its self-test failed (said on stderr)";
#else
    (void)off;
    why = "this build has no KHR cooperative-matrix shader";
#endif
    if (why && force)
        return td_error_set(TD_ERR_UNAVAILABLE, "%s=native: vulkan:%d has no native bf16 %s: %s", var, d->index, what,
                            why);
    *native = !why;
    return TD_OK;
}

td_status vk_op_MATMUL(vk_dev *d, const td_op *op) {
    bool bf16 = op->in[0].dtype == TD_BF16 && op->in[1].dtype == TD_BF16 && op->out[0].dtype == TD_BF16, native;
    if (bf16) {
        td_status st = vk_bf16_native(d, "TRIDENT_VK_BF16", "matmul", &native);
        if (st != TD_OK) return st;
        if (native) return matmul(d, op, true, true);
    }
    if (op->in[0].dtype == TD_F16 && d->coopmat_state == 1) {
        td_clear_error();
        d->coopmat_state = coopmat_selftest(d, TD_F16, false) ? 2 : -1;
        if (d->coopmat_state < 0)
            fprintf(stderr,
                    "trident: vulkan:%d: cooperative-matrix matmul failed its self-test (%s); using the tiled "
                    "kernel\n",
                    d->index, td_last_error());
        td_clear_error();
    }
    return matmul(d, op, (op->in[0].dtype == TD_F16 && d->coopmat_state == 2) || bf16_coop(d, op), false);
}

/* ---- LINEAR ----
** in = (x [M, K], w [N, K], b [N]?), out = y [M, N], contiguous: the matmul
** encoder writes y = x w^T, then ADD's shader adds b (broadcast over the rows)
** in place: MATMUL then ADD bit for bit. */
bool vk_supports_LINEAR(vk_dev *d, const td_op *op) {
    for (int i = 0; i < 4; i++) {
        const td_operand *v = i < 3 ? &op->in[i] : &op->out[0];
        if (v->buf && vk_view_too_wide(d, v)) return false;
    }
    td_operand mm_in[2];
    td_op mm = td_linear_gelu_matmul(op, mm_in, &op->out[0]);
    return vk_supports_MATMUL(d, &mm);
}

td_status vk_op_LINEAR(vk_dev *d, const td_op *op) {
    const td_operand *b = &op->in[2];
    td_operand *y = &op->out[0];
    int64_t M = op->in[0].shape[0], N = op->in[1].shape[0];
    if (M == 0 || N == 0) return TD_OK;
    td_operand mm_in[2];
    td_op mm = td_linear_gelu_matmul(op, mm_in, y);
    td_status st = vk_op_MATMUL(d, &mm);
    if (st != TD_OK || !b->buf) return st;
    td_operand add_in[2] = {*y, *b};
    add_in[1].ndim = 2;
    add_in[1].shape[0] = M, add_in[1].shape[1] = N;
    add_in[1].strides[0] = 0, add_in[1].strides[1] = 1;
    td_op add = {.kind = TD_OP_ADD, .n_in = 2, .n_out = 1, .in = add_in, .out = y};
    return vk_op_ADD(d, &add);
}

/* ---- LINEAR_GELU ----
** in = (x [M, K], w [N, K], b [N]?), out = (y, h) [M, N], all
** contiguous. The matmul encoder writes h = x w^T (w read as the column-major
** [K, N] it is), then shaders/bias_gelu.comp adds b to h in place and writes
** y = gelu(h) in the same pass: y and h equal MATMUL, ADD and GELU bit for bit.
** Views wider than one binding are not taken (the core composes the ops then).
*/

/* GLSL: shaders/bias_gelu.comp, block PC. */
typedef struct vk_pc_bias_gelu {
    uint32_t n, N, has_b, tanh_form;
    uint32_t h_off, b_off, y_off;
} vk_pc_bias_gelu;
static_assert(sizeof(vk_pc_bias_gelu) == 28, "vk_pc_bias_gelu must match shaders/bias_gelu.comp");

bool vk_supports_LINEAR_GELU(vk_dev *d, const td_op *op) {
    for (int i = 0; i < 5; i++) {
        const td_operand *v = i < 3 ? &op->in[i] : &op->out[i - 3];
        if (v->buf && vk_view_too_wide(d, v)) return false;
    }
    td_operand mm_in[2];
    td_op mm = td_linear_gelu_matmul(op, mm_in, &op->out[1]);
    return vk_supports_MATMUL(d, &mm);
}

td_status vk_op_LINEAR_GELU(vk_dev *d, const td_op *op) {
    int64_t n = td_operand_numel(&op->out[0]);
    if (n == 0) return TD_OK;
    td_operand mm_in[2];
    td_op mm = td_linear_gelu_matmul(op, mm_in, &op->out[1]);
    td_status st = vk_op_MATMUL(d, &mm);
    if (st != TD_OK) return st;
    vk_pc_bias_gelu pc = {.n = (uint32_t)n,
                          .N = (uint32_t)op->in[1].shape[0],
                          .has_b = op->in[2].buf != NULL,
                          .tanh_form = op->p.gelu.approximate == TD_GELU_TANH};
    const td_operand *views[3] = {&op->out[1], &op->in[2], &op->out[0]};
    uint32_t *offs[3] = {&pc.h_off, &pc.b_off, &pc.y_off};
    vk_bind b[3];
    if ((st = vk_bind_views(d, 3, views, 0x5, b, offs)) != TD_OK) return st;
    uint32_t spec[1] = {WG};
    return vk_dispatch(d, VK_DT_SHADER(VK_SHADER_bias_gelu_f32, op->in[0].dtype), spec, 1, 3, b, &pc, sizeof pc,
                       vk_groups(n, WG), 1, 1);
}

/* LINEAR_WGRAD: in = (dy [M, N], x [M, K]), out = (dw [N, K], db? [N]):
**   dw = dy^T x  (MATMUL's shader, dy read transposed in place)
**   db = sum over m of dy  (SUM's shader over dim 0)
** in dy's dtype only: f32 outputs of f16/bf16 dy (the op table's 'a') are
** declined, and the core casts the results of the op run in dy's dtype. */
bool vk_supports_LINEAR_WGRAD(vk_dev *d, const td_op *op) {
    (void)d;
    td_dtype dt = op->in[0].dtype;
    return op->out[0].dtype == dt && (op->n_out < 2 || !op->out[1].buf || op->out[1].dtype == dt);
}

td_status vk_op_LINEAR_WGRAD(vk_dev *d, const td_op *op) {
    const td_operand *dy = &op->in[0], *x = &op->in[1];
    int64_t M = dy->shape[0], N = dy->shape[1];
    td_operand mm_in[2] = {*dy, *x};
    mm_in[0].shape[0] = N, mm_in[0].shape[1] = M; /* dy^T [N, M]: column-major */
    mm_in[0].strides[0] = 1, mm_in[0].strides[1] = N;
    td_op mm = {.kind = TD_OP_MATMUL, .n_in = 2, .n_out = 1, .in = mm_in, .out = &op->out[0], .flags = op->flags};
    td_status st = td_operand_numel(&op->out[0]) ? vk_op_MATMUL(d, &mm) : TD_OK;
    if (st != TD_OK || !op->out[1].buf) return st;
    td_operand sum = op->out[1];
    sum.ndim = 2, sum.shape[0] = 1, sum.shape[1] = N, sum.strides[0] = N, sum.strides[1] = 1;
    td_op red = {.kind = TD_OP_SUM, .n_in = 1, .n_out = 1, .in = dy, .out = &sum, .p.reduce.dims = 1};
    return vk_op_SUM(d, &red);
}
