/*
** Layer norm's backward as one math block (norm_fused.h). With xhat = (x -
** mean) rstd and g = dy w:
**   dx = rstd (g - mean_D(g) - xhat mean_D(g xhat)),  dw = sum_R(dy xhat),  db = sum_R(dy)
** The composed formula (formulas_nn.c, norm_grads) launches 13 passes over
** [R, D] (sub, mul, mul, mean, mul, mean, mul, sub, sub, mul, mul, sum, sum);
** the block's plan is 5 fused kernels, one per reduction and one for dx, each
** recomputing xhat and g where it reads them.
*/
#include "autograd/norm_fused.h"

#include "core/math_fuse.h"

#define LN_DX                                                                                                          \
    "xh = (x - mean) * rstd\n"                                                                                         \
    "dx = rstd * (g - mean(g, 1, keepdim=true) - xh * mean(g * xh, 1, keepdim=true))\n"

static td__math_once ln_wb = TD_MATH_ONCE("g = dy * w\n" LN_DX "return dx, sum(dy * xh, 0), sum(dy, 0)");
static td__math_once ln_w = TD_MATH_ONCE("g = dy * w\n" LN_DX "return dx, sum(dy * xh, 0)");
static td__math_once ln_b = TD_MATH_ONCE("g = dy\n" LN_DX "return dx, sum(dy, 0)");
static td__math_once ln_x = TD_MATH_ONCE("g = dy\n" LN_DX "dx");

/* measured (W3 on an H100, bench/RESULTS.md): the hand op everywhere, since its Vulkan shader reads the rows once
** (W3 fp32 57.5 ms against the block's 61.1, bf16 54.1 against 57.6), on CUDA (W5 bf16 34.3 against the block's
** 36.4 ms) and on the CPU (1 op against the interpreter's passes) */
bool td__layer_norm_block_on(td_tensor *x) { return x && td__math_fuse(false); }

bool td__layer_norm_grads_fused(td_tensor *x, td_tensor *dy, td_tensor *w, td_tensor *mean, td_tensor *rstd,
                                bool want_w, bool want_b, td_tensor **dx, td_tensor **dw, td_tensor **db) {
    if (!td__layer_norm_block_on(x) || !dy || !mean || !rstd || (want_w && !w)) return false;
    /* with a weight, dw comes along even when unwanted (the engine's scope frees it) */
    td__math_once *o = w ? (want_b ? &ln_wb : &ln_w) : want_b ? &ln_b : &ln_x;
    td_math_binding bind[5] = {{.name = "x", .tensor = x},
                               {.name = "dy", .tensor = dy},
                               {.name = "mean", .tensor = mean},
                               {.name = "rstd", .tensor = rstd},
                               {.name = "w", .tensor = w}};
    td_tensor *out[3] = {NULL, NULL, NULL};
    if (td__math_once_run(o, bind, w ? 5 : 4, out) != TD_OK) {
        td_clear_error();
        return false;
    }
    *dx = out[0];
    if (want_w) *dw = out[1];
    if (want_b) *db = out[w ? 2 : 1];
    return true;
}
