/*
** Derivatives of the reductions. The op's output y keeps x's ndim with the
** reduced dims R of size 1, so dy broadcasts against x; N = numel(x)/numel(y)
** is the number of elements each output reduces.
*/
#include "autograd_internal.h"

#define IN(i)  td__saved_input(n, i)
#define OUT(j) td__saved_output(n, j)

static double reduced_count(const td_node *n) {
    int64_t nx = td__numel(n->in_meta[0].ndim, n->in_meta[0].shape);
    int64_t ny = td__numel(n->out_meta[0].ndim, n->out_meta[0].shape);
    return ny ? (double)nx / (double)ny : 0;
}

/* y = sum_R x: dx = dy broadcast to x */
td_status td__bw_sum(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    gx[0] = td_expand(gy[0], n->in_meta[0].ndim, n->in_meta[0].shape);
    return td__done(n, gx);
}

/* y = sum_R x / N: dx = dy / N broadcast */
td_status td__bw_mean(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    gx[0] = td_expand(td_div_scalar(gy[0], reduced_count(n)), n->in_meta[0].ndim, n->in_meta[0].shape);
    return td__done(n, gx);
}

/* y = max_R x (amax): dx = dy at the positions equal to the max, split evenly
** among ties: dx = dy * (x == y) / count_R(x == y) */
td_status td__bw_extremum(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    td_tensor *y = OUT(0);
    td_tensor *hit = td__mask_as(td_eq(IN(0), y), gy[0]);
    td_tensor *count = td__sum_to(hit, n->out_meta[0].ndim, n->out_meta[0].shape);
    gx[0] = td_mul(td_div(gy[0], count), hit);
    return td__done(n, gx);
}

/* y = sum_R (x - mean_R x)^2 / (N - correction): dx = dy * 2 (x - mean) / (N - correction) */
td_status td__bw_var(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    td_tensor *x = IN(0);
    double N = reduced_count(n);
    td_tensor *mean = td_div_scalar(td__sum_to(x, n->out_meta[0].ndim, n->out_meta[0].shape), N);
    gx[0] = td_mul(td_mul_scalar(gy[0], 2.0 / (N - n->p.reduce.correction)), td_sub(x, mean));
    return td__done(n, gx);
}

/* y = log sum_R e^x: dx = dy * e^(x - y) (the softmax over R) */
td_status td__bw_logsumexp(td_node *n, td_tensor *const *gy, td_tensor **gx) {
    gx[0] = td_mul(gy[0], td_exp(td_sub(IN(0), OUT(0))));
    return td__done(n, gx);
}
