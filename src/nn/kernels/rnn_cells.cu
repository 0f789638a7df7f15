// Fused LSTM and GRU cells for the CUDA backend: the custom ops of src/nn/rnn_cells.c (compiled by NVRTC).
// B batch, H hidden; one thread per (b, j) of [B, H]; scalar_t is float or double. Gate order is torch's.
//   LSTM: gx, gh are [B, 4H] (chunks i, f, g, o), c, c' (cn), h' (hn) are [B, H]
//     i, f, o = sigmoid(gx + gh), g = tanh(gx + gh);  c' = f * c + i * g;  h' = o * tanh(c')
//   GRU: gx = x W_ih^T + b_ih, gh = h W_hh^T + b_hh are [B, 3H] (chunks r, z, n), h, h' are [B, H]
//     r, z = sigmoid(gx + gh);  n = tanh(gx_n + r * gh_n);  h' = (1 - z) * n + z * h
#include <trident.cuh>

__device__ inline scalar_t sig(scalar_t x) { return (scalar_t)1 / ((scalar_t)1 + exp(-x)); }

extern "C" __global__ void lstm_cell(const scalar_t *c, const scalar_t *gx, const scalar_t *gh, scalar_t *hn,
                                     scalar_t *cn, td_args a) {
    unsigned t = td_global_id();
    if (t >= a.n) return;
    unsigned H = a.cols, b = t / H, j = t % H, k = b * 4 * H + j;
    scalar_t i = sig(gx[k] + gh[k]), f = sig(gx[k + H] + gh[k + H]);
    scalar_t g = tanh(gx[k + 2 * H] + gh[k + 2 * H]), o = sig(gx[k + 3 * H] + gh[k + 3 * H]);
    scalar_t cc = f * c[t] + i * g;
    cn[t] = cc;
    hn[t] = o * tanh(cc);
}

// Backward of lstm_cell, inputs c, gx, gh, dh' (dhn), dc' (dcn); outputs dc [B, H], dgates [B, 4H] (d of gx + gh):
//   dc_total = dc' + dh' * o * (1 - tanh(c')^2)
//   d_i = dc_total * g * i (1 - i),  d_f = dc_total * c * f (1 - f),  d_g = dc_total * i * (1 - g^2),
//   d_o = dh' * tanh(c') * o (1 - o),  dc = dc_total * f
extern "C" __global__ void lstm_cell_backward(const scalar_t *c, const scalar_t *gx, const scalar_t *gh,
                                              const scalar_t *dhn, const scalar_t *dcn, scalar_t *dc,
                                              scalar_t *dgates, td_args a) {
    unsigned t = td_global_id();
    if (t >= a.n) return;
    unsigned H = a.cols, b = t / H, j = t % H, k = b * 4 * H + j;
    scalar_t i = sig(gx[k] + gh[k]), f = sig(gx[k + H] + gh[k + H]);
    scalar_t g = tanh(gx[k + 2 * H] + gh[k + 2 * H]), o = sig(gx[k + 3 * H] + gh[k + 3 * H]);
    scalar_t tc = tanh(f * c[t] + i * g);
    scalar_t dct = dcn[t] + dhn[t] * o * ((scalar_t)1 - tc * tc);
    dgates[k] = dct * g * i * ((scalar_t)1 - i);
    dgates[k + H] = dct * c[t] * f * ((scalar_t)1 - f);
    dgates[k + 2 * H] = dct * i * ((scalar_t)1 - g * g);
    dgates[k + 3 * H] = dhn[t] * tc * o * ((scalar_t)1 - o);
    dc[t] = dct * f;
}

extern "C" __global__ void gru_cell(const scalar_t *h, const scalar_t *gx, const scalar_t *gh, scalar_t *hn,
                                    td_args a) {
    unsigned t = td_global_id();
    if (t >= a.n) return;
    unsigned H = a.cols, b = t / H, j = t % H, k = b * 3 * H + j;
    scalar_t r = sig(gx[k] + gh[k]), z = sig(gx[k + H] + gh[k + H]);
    scalar_t n = tanh(gx[k + 2 * H] + r * gh[k + 2 * H]);
    hn[t] = ((scalar_t)1 - z) * n + z * h[t];
}

// Backward of gru_cell, inputs h, gx, gh, dh' (dhn); outputs dh [B, H] (the direct path), dgx, dgh [B, 3H]:
//   d_n = dh' (1 - z) (1 - n^2) -> dgx_n = d_n, dgh_n = d_n * r
//   d_r = d_n * gh_n * r (1 - r),  d_z = dh' (h - n) z (1 - z) -> dgx_r = dgh_r = d_r, dgx_z = dgh_z = d_z
//   dh = dh' * z
extern "C" __global__ void gru_cell_backward(const scalar_t *h, const scalar_t *gx, const scalar_t *gh,
                                             const scalar_t *dhn, scalar_t *dh, scalar_t *dgx, scalar_t *dgh,
                                             td_args a) {
    unsigned t = td_global_id();
    if (t >= a.n) return;
    unsigned H = a.cols, b = t / H, j = t % H, k = b * 3 * H + j;
    scalar_t r = sig(gx[k] + gh[k]), z = sig(gx[k + H] + gh[k + H]);
    scalar_t n = tanh(gx[k + 2 * H] + r * gh[k + 2 * H]);
    scalar_t dn = dhn[t] * ((scalar_t)1 - z) * ((scalar_t)1 - n * n);
    scalar_t dr = dn * gh[k + 2 * H] * r * ((scalar_t)1 - r);
    scalar_t dz = dhn[t] * (h[t] - n) * z * ((scalar_t)1 - z);
    dgx[k] = dgh[k] = dr;
    dgx[k + H] = dgh[k + H] = dz;
    dgx[k + 2 * H] = dn;
    dgh[k + 2 * H] = dn * r;
    dh[t] = dhn[t] * z;
}
