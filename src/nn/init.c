/*
** torch.nn.init: uniform, normal, constant, Kaiming and Xavier fills, drawing
** from the default generator (one Philox counter per four values), and the
** default init of Linear and Conv parameters.
** Reference: torch/nn/init.py (_calculate_fan_in_and_fan_out, calculate_gain).
*/
#include <math.h>

#include "nn_internal.h"

double td_init_calculate_gain(td_nonlinearity nl, double param) {
    switch (nl) {
    case TD_NL_TANH: return 5.0 / 3.0;
    case TD_NL_RELU: return sqrt(2.0);
    case TD_NL_LEAKY_RELU: return sqrt(2.0 / (1.0 + param * param));
    case TD_NL_SELU: return 3.0 / 4.0;
    default: return 1.0;
    }
}

static td_status check_float(td_tensor *t, const char *fn) {
    TD_CHECK_ARG_ST(t, fn);
    if (!td_dtype_is_float(td_tensor_dtype(t)))
        return TD_ERR(TD_ERR_DTYPE, "%s: tensor of dtype %s is not floating", fn, td_dtype_name(td_tensor_dtype(t)));
    return TD_OK;
}

/* t = scale * r + shift with r ~ U[0,1) (normal false) or N(0,1) (normal true),
** written in place without recording. */
static td_status fill_random(td_tensor *t, bool normal, double scale, double shift, const char *fn) {
    td_status st = check_float(t, fn);
    if (st != TD_OK) return st;
    int64_t n = td_numel(t);
    td_rng_state r = td_rng_reserve((uint64_t)n);
    td_scope_begin();
    td_no_grad_begin();
    td_tensor *(*draw)(int, const int64_t *, uint64_t, uint64_t, td_dtype, td_device) = normal ? td_randn : td_rand;
    td_tensor *v = draw(td_ndim(t), td_shape(t), r.seed, r.offset, td_tensor_dtype(t), td_tensor_device(t));
    v = td_add_scalar(td_mul_scalar(v, scale), shift);
    st = v ? td_copy_(t, v) : td_last_status();
    td_no_grad_end();
    td_scope_end();
    if (st != TD_OK) td_error_prefix("%s", fn);
    return st;
}

td_status td_init_uniform_(td_tensor *t, double lo, double hi) {
    if (!(lo <= hi)) return TD_ERR(TD_ERR_MISUSE, "init_uniform_: lo %g is above hi %g", lo, hi);
    return fill_random(t, false, hi - lo, lo, "init_uniform_");
}

td_status td_init_normal_(td_tensor *t, double mean, double std) {
    if (!(std >= 0)) return TD_ERR(TD_ERR_MISUSE, "init_normal_: std %g is negative", std);
    return fill_random(t, true, std, mean, "init_normal_");
}

td_status td_init_constant_(td_tensor *t, double value) {
    td_status st = check_float(t, "init_constant_");
    if (st != TD_OK) return st;
    td_scope_begin();
    td_no_grad_begin();
    st = td_copy_(t, td_scalar(value, td_tensor_dtype(t), td_tensor_device(t)));
    td_no_grad_end();
    td_scope_end();
    return st;
}

/* fan_in = size(1) * receptive field, fan_out = size(0) * receptive field. */
static td_status fans(td_tensor *t, const char *fn, double *fan_in, double *fan_out) {
    td_status st = check_float(t, fn);
    if (st != TD_OK) return st;
    int nd = td_ndim(t);
    if (nd < 2) return TD_ERR(TD_ERR_SHAPE, "%s: fan in and fan out need a tensor of 2 or more dims, got %d", fn, nd);
    double receptive = 1;
    for (int i = 2; i < nd; i++) receptive *= (double)td_size(t, i);
    *fan_in = (double)td_size(t, 1) * receptive;
    *fan_out = (double)td_size(t, 0) * receptive;
    if (*fan_in == 0 || *fan_out == 0) return TD_ERR(TD_ERR_SHAPE, "%s: cannot initialize a tensor with zero fan", fn);
    return TD_OK;
}

static td_status kaiming(td_tensor *t, double a, td_fan_mode mode, td_nonlinearity nl, bool normal, const char *fn) {
    double fin, fout;
    td_status st = fans(t, fn, &fin, &fout);
    if (st != TD_OK) return st;
    double std = td_init_calculate_gain(nl, a) / sqrt(mode == TD_FAN_OUT ? fout : fin);
    if (normal) return fill_random(t, true, std, 0, fn);
    double bound = sqrt(3.0) * std;
    return fill_random(t, false, 2 * bound, -bound, fn);
}

td_status td_init_kaiming_uniform_(td_tensor *t, double a, td_fan_mode mode, td_nonlinearity nl) {
    return kaiming(t, a, mode, nl, false, "init_kaiming_uniform_");
}

td_status td_init_kaiming_normal_(td_tensor *t, double a, td_fan_mode mode, td_nonlinearity nl) {
    return kaiming(t, a, mode, nl, true, "init_kaiming_normal_");
}

static td_status xavier(td_tensor *t, double gain, bool normal, const char *fn) {
    double fin, fout;
    td_status st = fans(t, fn, &fin, &fout);
    if (st != TD_OK) return st;
    double std = gain * sqrt(2.0 / (fin + fout));
    if (normal) return fill_random(t, true, std, 0, fn);
    double bound = sqrt(3.0) * std;
    return fill_random(t, false, 2 * bound, -bound, fn);
}

td_status td_init_xavier_uniform_(td_tensor *t, double gain) { return xavier(t, gain, false, "init_xavier_uniform_"); }
td_status td_init_xavier_normal_(td_tensor *t, double gain) { return xavier(t, gain, true, "init_xavier_normal_"); }

td_status td__init_linear_like(td_tensor *weight, td_tensor *bias) {
    /* kaiming_uniform(a=sqrt(5)) gives the bound 1/sqrt(fan_in), as does the bias. */
    td_status st = td_init_kaiming_uniform_(weight, sqrt(5.0), TD_FAN_IN, TD_NL_LEAKY_RELU);
    if (st != TD_OK || !bias) return st;
    double fin, fout;
    st = fans(weight, "linear init", &fin, &fout);
    if (st != TD_OK) return st;
    double bound = 1.0 / sqrt(fin);
    return td_init_uniform_(bias, -bound, bound);
}

td_module *td__with_linear_params(td_module *m, int wnd, const int64_t *wshape, bool bias) {
    td_status st = td__module_add_param(m, "weight", td__new_param(wnd, wshape));
    if (st == TD_OK && bias) st = td__module_add_param(m, "bias", td__new_param(1, &wshape[0]));
    if (st == TD_OK) st = td__init_linear_like(td__param(m, 0), bias ? td__param(m, 1) : NULL);
    if (st != TD_OK) {
        td_module_free(m);
        return NULL;
    }
    return m;
}
