/*
** AMP_UNSCALE, the GradScaler's unscale with its inf/NaN check, in place:
**   out = (grad [n], found_inf [1] f32)
**   found_inf = 1 if any grad[i] is inf or NaN (left as it is otherwise)
**   grad[i] *= inv_scale
** The check reads grad before the product (torch's
** _amp_foreach_non_finite_check_and_unscale_). f32 multiplies in float, f64
** in double, f16/bf16 through float.
*/
#include <math.h>

#include "cpu.h"

td_status td_cpu_AMP_UNSCALE(const td_op *op) {
    int64_t n = td_operand_numel(&op->out[0]);
    void *g = cpu_ptr(&op->out[0]);
    float *found = cpu_ptr(&op->out[1]);
    double inv = op->p.amp.inv_scale;
    td_dtype dt = op->out[0].dtype;
    int bad = 0;
    int nt = cpu_threads_for(n, 16);
    if (dt == TD_F32) {
        float *x = g, s = (float)inv;
#pragma omp parallel for num_threads(nt) reduction(| : bad)
        for (int64_t i = 0; i < n; i++) {
            bad |= !isfinite(x[i]);
            x[i] *= s;
        }
    } else if (dt == TD_F64) {
        double *x = g;
#pragma omp parallel for num_threads(nt) reduction(| : bad)
        for (int64_t i = 0; i < n; i++) {
            bad |= !isfinite(x[i]);
            x[i] *= inv;
        }
    } else if (dt == TD_F16 || dt == TD_BF16) {
        uint16_t *x = g;
        float s = (float)inv;
        bool half = dt == TD_F16;
#pragma omp parallel for num_threads(nt) reduction(| : bad)
        for (int64_t i = 0; i < n; i++) {
            float v = half ? cpu_f16_to_f32(x[i]) : cpu_bf16_to_f32(x[i]);
            bad |= !isfinite(v);
            x[i] = half ? cpu_f32_to_f16(v * s) : cpu_f32_to_bf16(v * s);
        }
    } else {
        return td_error_set(TD_ERR_UNSUPPORTED, "amp_unscale: dtype %s", td_dtype_name(dt));
    }
    if (bad) found[0] = 1.0f;
    return TD_OK;
}
