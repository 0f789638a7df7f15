/*
** nn.RNN, nn.LSTM, nn.GRU and nn.RNNCell, nn.LSTMCell, nn.GRUCell, with
** torch's parameter names, layout, gate order and init.
**
** T steps, B batch, I input, H hidden, L layers, D directions (1 or 2), G gates
** (RNN 1, LSTM 4 as i f g o, GRU 3 as r z n). Per layer and direction:
**   pass 1  gx = x W_ih^T + b for every step at once: one GEMM on [T*B, I]
**           (b = b_ih + b_hh for RNN and LSTM; b_ih for GRU, whose b_hn must
**           stay inside r * (h W_hn^T + b_hn))
**   pass 2  per step t (backwards in time for the reverse direction):
**           gh = h W_hh^T (+ b_hh for GRU), one GEMM, then the cell in one
**           launch: LSTM and GRU the fused custom ops of rnn_cells.c, RNN
**           act(gx_t + gh) with act tanh or relu
**   pass 3  the steps' h concatenated to [T, B, H]; the directions to
**           [T, B, D*H], which feeds the next layer (through dropout in
**           training when dropout > 0)
** On CUDA the whole layer goes to cuDNN instead where it is taken (rnn_cudnn.c);
** on the CPU an LSTM's passes 2 and 3 are one op and one node (rnn_lstm_cpu.c);
** on Vulkan they are one node of one step kernel per step each way (rnn_lstm_seq.c).
** Nothing in the step loop reads device memory back, so it queues without
** host syncs. Autograd records the GEMMs, the cells (one node each) and the
** concatenations; backward is their reverse.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "../io/onnx_internal.h"
#include "rnn_internal.h"

enum { MODE_RNN_TANH, MODE_RNN_RELU, MODE_LSTM, MODE_GRU };

static const char *const mode_names[] = {"RNN", "RNN", "LSTM", "GRU"};
static const char *const cell_names[] = {"RNNCell", "RNNCell", "LSTMCell", "GRUCell"};
static const int mode_gates[] = {1, 1, 4, 3};

typedef struct rnn_ctx {
    int mode;
    int64_t input, hidden;
    int layers, dirs;
    bool bias, batch_first;
    double dropout;
} rnn_ctx;

/* Parameter k (0 weight_ih, 1 weight_hh, 2 bias_ih, 3 bias_hh) of layer l, direction d; NULL for a bias when
** bias is off. Registration order is torch's: per layer, per direction, w_ih, w_hh, b_ih, b_hh. */
static td_tensor *param(td_module *m, int l, int d, int k) {
    const rnn_ctx *c = m->ctx;
    int per = c->bias ? 4 : 2;
    return k < per ? td__param(m, (l * c->dirs + d) * per + k) : NULL;
}

/* The bias that goes into the input projection gx and the one that goes into gh (either may be NULL). */
static void step_biases(const rnn_ctx *c, td_tensor *b_ih, td_tensor *b_hh, td_tensor **bx, td_tensor **bh) {
    *bx = *bh = NULL;
    if (!c->bias) return;
    if (c->mode == MODE_GRU) {
        *bx = b_ih, *bh = b_hh;
    } else {
        *bx = td_add(b_ih, b_hh);
    }
}

/* One step of any cell: gx [B, G*H] -> h' [B, H] (and c' for LSTM into *c). */
static td_tensor *step(const rnn_ctx *c, td_tensor *gx, td_tensor *h, td_tensor **cell, td_tensor *w_hh,
                       td_tensor *bh) {
    td_tensor *gh = td_linear(h, w_hh, bh);
    switch (c->mode) {
    case MODE_LSTM: return td__lstm_cell(*cell, gx, gh, cell);
    case MODE_GRU: return td__gru_cell(h, gx, gh);
    case MODE_RNN_RELU: return td_relu(td_add(gx, gh));
    default: return td_tanh(td_add(gx, gh));
    }
}

/* ---- the multi-layer module ---- */

/* The initial state of (layer, direction) index k from s [L*D, B, H], or zeros [B, H] like x when s is NULL. */
static td_tensor *initial(td_tensor *s, int k, td_tensor *x, int64_t b, int64_t h) {
    if (s) return td_select(s, 0, k);
    int64_t shape[2] = {b, h};
    return td_zeros(2, shape, td_tensor_dtype(x), td_tensor_device(x));
}

static bool check_state(const rnn_ctx *c, td_tensor *s, const char *what, int64_t b, bool batched) {
    if (!s) return true;
    if (!td__check_arg(s, mode_names[c->mode], what)) return false;
    int64_t want[3] = {(int64_t)c->layers * c->dirs, b, c->hidden};
    int nd = batched ? 3 : 2;
    bool ok =
        td_ndim(s) == nd && td_size(s, 0) == want[0] && td_size(s, -1) == c->hidden && (!batched || td_size(s, 1) == b);
    if (!ok) {
        char got[96], exp[96];
        if (!batched) want[1] = c->hidden;
        TD_ERR(TD_ERR_SHAPE, "%s: expected %s of shape %s, got %s", mode_names[c->mode], what,
               td__shape_str(nd, want, exp, sizeof exp), td__shape_str(td_ndim(s), td_shape(s), got, sizeof got));
    }
    return ok;
}

/* One direction of one layer over inp [T, B, F]: the outputs [T, B, H]; its last h (and c) in *h_last (*c_last). */
static td_tensor *run_direction(td_module *m, int l, int d, td_tensor *inp, td_tensor *h, td_tensor *cell,
                                td_tensor **h_last, td_tensor **c_last) {
    const rnn_ctx *c = m->ctx;
    int64_t T = td_size(inp, 0), B = td_size(inp, 1), GH = mode_gates[c->mode] * c->hidden;
    td_tensor *bx, *bh;
    step_biases(c, param(m, l, d, 2), param(m, l, d, 3), &bx, &bh);
    /* pass 1: every step's input projection in one GEMM */
    td_tensor *gx = td_linear(inp, param(m, l, d, 0), bx);
    td_dtype dt = td_tensor_dtype(inp);
    if (gx && c->mode == MODE_LSTM && td_tensor_device(inp).type == TD_DEVICE_CPU && (dt == TD_F32 || dt == TD_F64))
        return td__lstm_layer_cpu(gx, h, cell, param(m, l, d, 1), d == 1, h_last, c_last); /* passes 2, 3 in one */
    if (gx && c->mode == MODE_LSTM && td__lstm_layer_seq_takes(gx))
        return td__lstm_layer_seq(gx, h, cell, param(m, l, d, 1), d == 1, h_last, c_last); /* the same on Vulkan */
    td_tensor **steps = calloc((size_t)T * 2, sizeof *steps), **outs = steps + T;
    int64_t *ones = malloc((size_t)T * sizeof *ones);
    td_tensor *out = NULL;
    if (!steps || !ones) {
        TD_ERR(TD_ERR_OOM, "%s: out of host memory", mode_names[c->mode]);
        goto done;
    }
    for (int64_t t = 0; t < T; t++) ones[t] = 1;
    if (!gx || td_split(gx, (int)T, ones, 0, steps) != TD_OK) goto done;
    /* pass 2: the recurrence */
    td_tensor *w_hh = param(m, l, d, 1);
    int64_t gshape[2] = {B, GH};
    for (int64_t s = 0; s < T && h; s++) {
        int64_t t = d ? T - 1 - s : s;
        h = step(c, td_view(steps[t], 2, gshape), h, &cell, w_hh, bh);
        outs[t] = h;
    }
    /* pass 3: [T*B, H] -> [T, B, H] */
    if (h) out = td_view(td_cat((int)T, outs, 0), 3, (int64_t[]){T, B, c->hidden});
    *h_last = h;
    *c_last = cell;
done:
    free(steps);
    free(ones);
    return out;
}

/* x [T, B, I] time-major, h0 and c0 [L*D, B, H] or NULL -> [T, B, D*H]; the final states as [L*D, B, H]. */
static td_tensor *run_layers(td_module *m, td_tensor *x, td_tensor *h0, td_tensor *c0, td_tensor **h_n,
                             td_tensor **c_n) {
    const rnn_ctx *c = m->ctx;
    int n = c->layers * c->dirs;
    int64_t B = td_size(x, 1);
    td_tensor *hs[2 * 64], *cs[2 * 64];
    td_tensor *inp = x;
    for (int l = 0; l < c->layers && inp; l++) {
        td_tensor *outs[2] = {NULL, NULL};
        for (int d = 0; d < c->dirs; d++) {
            int k = l * c->dirs + d;
            td_tensor *cell = c->mode == MODE_LSTM ? initial(c0, k, x, B, c->hidden) : NULL;
            outs[d] = run_direction(m, l, d, inp, initial(h0, k, x, B, c->hidden), cell, &hs[k], &cs[k]);
            if (!outs[d]) return NULL;
        }
        inp = c->dirs == 2 ? td_cat(2, outs, 2) : outs[0];
        if (inp && l + 1 < c->layers && m->training && c->dropout > 0) {
            td_rng_state r = td_rng_reserve((uint64_t)td_numel(inp));
            inp = td_dropout(inp, c->dropout, r.seed, r.offset);
        }
    }
    if (!inp) return NULL;
    int64_t sshape[3] = {n, B, c->hidden};
    *h_n = td_view(td_cat(n, hs, 0), 3, sshape);
    if (c->mode == MODE_LSTM) *c_n = td_view(td_cat(n, cs, 0), 3, sshape);
    return *h_n && (c->mode != MODE_LSTM || *c_n) ? inp : NULL;
}

/* The ONNX export's event for the layer (src/io/onnx_internal.h): x, h0, c0, the parameters; y, h_n, c_n. */
static void trace_layer(td_module *m, td_tensor *x, td_tensor *h0, td_tensor *c0, td_tensor *y, td_tensor *hn,
                        td_tensor *cn) {
    const rnn_ctx *c = m->ctx;
    td_tensor *in[3 + 4 * 2 * 64] = {x, h0, c0};
    int n = 3;
    for (int l = 0; l < c->layers; l++)
        for (int d = 0; d < c->dirs; d++)
            for (int k = 0; k < 4; k++) in[n++] = param(m, l, d, k);
    static const td__tr_rnn_mode modes[] = {TD__RNN_TANH, TD__RNN_RELU, TD__RNN_LSTM, TD__RNN_GRU};
    td__tr_rnn info = {.mode = modes[c->mode], .layers = c->layers, .dirs = c->dirs, .hidden = c->hidden};
    td__trace_rnn_end(&info, n, in, 3, (td_tensor *[]){y, hn, cn});
}

static td_tensor *rnn_body(td_module *m, td_tensor *x, td_tensor *h0, td_tensor *c0, td_tensor **h_n, td_tensor **c_n) {
    const rnn_ctx *c = m->ctx;
    const char *name = mode_names[c->mode];
    int nd = td_ndim(x);
    if ((nd != 2 && nd != 3) || td_size(x, -1) != c->input) {
        char got[96];
        TD_FAIL_NULL(TD_ERR_SHAPE, "%s: expected input [%s, %lld] (or unbatched [T, %lld]), got %s", name,
                     c->batch_first ? "B, T" : "T, B", (long long)c->input, (long long)c->input,
                     td__shape_str(nd, td_shape(x), got, sizeof got));
    }
    if (c0 && c->mode != MODE_LSTM) TD_FAIL_NULL(TD_ERR_MISUSE, "%s: c0 is for LSTM only", name);
    bool batched = nd == 3;
    int64_t B = batched ? td_size(x, c->batch_first ? 0 : 1) : 1;
    if (!check_state(c, h0, "h0", B, batched) || !check_state(c, c0, "c0", B, batched)) return NULL;
    /* time-major [T, B, I] */
    td_tensor *xt = !batched ? td_unsqueeze(x, 1) : c->batch_first ? td_transpose(x, 0, 1) : x;
    if (!batched) {
        if (h0) h0 = td_unsqueeze(h0, 1);
        if (c0) c0 = td_unsqueeze(c0, 1);
    }
    td_tensor *xc = td_contiguous(xt);
    bool traced = td__trace_rnn_begin(); /* an ONNX export records the layer as one event */
    td_tensor *params[4 * 2 * 64];
    for (int i = 0; i < m->params.n; i++) params[i] = td__param(m, i);
    td__rnn_dnn_call dc = {c->mode,    c->layers, c->dirs,     c->bias, m->training,
                           c->dropout, c->hidden, m->params.n, params};
    td_tensor *y = NULL;
    int dnn = td__rnn_cudnn(&dc, xc, h0, c0, &y, h_n, c_n); /* the whole layer on cuDNN, where it is taken */
    if (dnn == 0) y = run_layers(m, xc, h0, c0, h_n, c_n);
    if (traced) trace_layer(m, xc, h0, c0, y, *h_n, *c_n);
    if (!y) return NULL;
    if (!batched) {
        y = td_squeeze(y, 1);
        *h_n = td_squeeze(*h_n, 1);
        if (*c_n) *c_n = td_squeeze(*c_n, 1);
    } else if (c->batch_first) {
        y = td_transpose(y, 0, 1);
    }
    return y;
}

static td_tensor *rnn_module_forward(td_module *m, td_tensor *x) {
    td_tensor *h_n = NULL, *c_n = NULL;
    return rnn_body(m, x, NULL, NULL, &h_n, &c_n);
}

static const td_module_i rnn_iface = {.type = "RNN", .forward = rnn_module_forward, .free_ctx = NULL};
static const td_module_i lstm_iface = {.type = "LSTM", .forward = rnn_module_forward, .free_ctx = NULL};
static const td_module_i gru_iface = {.type = "GRU", .forward = rnn_module_forward, .free_ctx = NULL};

/* Hand a result made in the forward scope (kept) to the caller's scope. */
static td_tensor *to_caller(td_tensor *t) { return t ? td__scope_add(t) : NULL; }

td_tensor *td_rnn_forward(td_module *m, td_tensor *x, td_tensor *h0, td_tensor *c0, td_tensor **h_n, td_tensor **c_n) {
    if (h_n) *h_n = NULL;
    if (c_n) *c_n = NULL;
    if (!m || (m->iface != &rnn_iface && m->iface != &lstm_iface && m->iface != &gru_iface)) {
        if (!m && td_last_status() != TD_OK) return NULL;
        TD_FAIL_NULL(TD_ERR_MISUSE, "rnn_forward: module is %s, not an RNN, LSTM or GRU",
                     m ? td_module_type(m) : "NULL");
    }
    TD_CHECK_ARG(x, m->iface->type);
    td_tensor *hn = NULL, *cn = NULL;
    td_scope_begin();
    td_tensor *y = rnn_body(m, x, h0, c0, &hn, &cn);
    if (y) td_keep(hn), td_keep(cn);
    y = td__scope_end_keep(y);
    if (!y) return NULL;
    if (h_n)
        *h_n = to_caller(hn);
    else
        td_release(hn);
    if (c_n)
        *c_n = to_caller(cn);
    else
        td_release(cn);
    return y;
}

/* Register n params U(-1/sqrt(H), 1/sqrt(H)) named name (shape [rows, cols], or [rows] when cols is 0). */
static td_status add_uniform(td_module *m, const char *name, int64_t rows, int64_t cols, int64_t hidden) {
    int64_t shape[2] = {rows, cols};
    td_status st = td__module_add_param(m, name, td__new_param(cols ? 2 : 1, shape));
    double k = 1.0 / sqrt((double)hidden);
    return st == TD_OK ? td_init_uniform_(td__param(m, m->params.n - 1), -k, k) : st;
}

static td_module *rnn_new(const td_module_i *iface, int mode, int64_t input_size, int64_t hidden_size, int num_layers,
                          bool bias, bool batch_first, double dropout, bool bidirectional) {
    const char *name = mode_names[mode];
    if (input_size <= 0 || hidden_size <= 0 || num_layers < 1 || num_layers > 64)
        TD_FAIL_NULL(TD_ERR_MISUSE, "%s: input_size %lld and hidden_size %lld must be positive, num_layers %d in 1..64",
                     name, (long long)input_size, (long long)hidden_size, num_layers);
    if (!(dropout >= 0 && dropout <= 1)) TD_FAIL_NULL(TD_ERR_MISUSE, "%s: dropout %g is outside [0, 1]", name, dropout);
    if (dropout == 1 && num_layers > 1)
        TD_FAIL_NULL(TD_ERR_MISUSE, "%s: dropout 1 would zero every layer's input after the first", name);
    if ((mode == MODE_LSTM || mode == MODE_GRU) && td__rnn_cells_init() != TD_OK) return NULL;
    td_module *m = td__module_alloc(iface, sizeof(rnn_ctx));
    if (!m) return NULL;
    int dirs = bidirectional ? 2 : 1;
    *(rnn_ctx *)m->ctx = (rnn_ctx){mode, input_size, hidden_size, num_layers, dirs, bias, batch_first, dropout};
    int64_t gh = mode_gates[mode] * hidden_size;
    td_status st = TD_OK;
    for (int l = 0; l < num_layers && st == TD_OK; l++)
        for (int d = 0; d < dirs && st == TD_OK; d++) {
            static const char *const kinds[4] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"};
            for (int k = 0; k < (bias ? 4 : 2) && st == TD_OK; k++) {
                char pname[48];
                snprintf(pname, sizeof pname, "%s_l%d%s", kinds[k], l, d ? "_reverse" : "");
                int64_t cols = k == 0 ? (l ? dirs * hidden_size : input_size) : k == 1 ? hidden_size : 0;
                st = add_uniform(m, pname, gh, cols, hidden_size);
            }
        }
    if (st != TD_OK) {
        td_module_free(m);
        return NULL;
    }
    return m;
}

td_module *td_rnn_new(int64_t input_size, int64_t hidden_size, int num_layers, td_rnn_nonlinearity nonlinearity,
                      bool bias, bool batch_first, double dropout, bool bidirectional) {
    if (nonlinearity != TD_RNN_TANH && nonlinearity != TD_RNN_RELU)
        TD_FAIL_NULL(TD_ERR_MISUSE, "RNN: nonlinearity %d is not TD_RNN_TANH or TD_RNN_RELU", (int)nonlinearity);
    return rnn_new(&rnn_iface, nonlinearity == TD_RNN_RELU ? MODE_RNN_RELU : MODE_RNN_TANH, input_size, hidden_size,
                   num_layers, bias, batch_first, dropout, bidirectional);
}

td_module *td_lstm_new(int64_t input_size, int64_t hidden_size, int num_layers, bool bias, bool batch_first,
                       double dropout, bool bidirectional) {
    return rnn_new(&lstm_iface, MODE_LSTM, input_size, hidden_size, num_layers, bias, batch_first, dropout,
                   bidirectional);
}

td_module *td_gru_new(int64_t input_size, int64_t hidden_size, int num_layers, bool bias, bool batch_first,
                      double dropout, bool bidirectional) {
    return rnn_new(&gru_iface, MODE_GRU, input_size, hidden_size, num_layers, bias, batch_first, dropout,
                   bidirectional);
}

/* ---- the cells ---- */

/* x [B, I] or [I], h and c [B, H] or [H] (NULL: zeros) -> h' (and c' in *c_n for LSTMCell). */
static td_tensor *cell_body(td_module *m, td_tensor *x, td_tensor *h, td_tensor *cst, td_tensor **c_n) {
    const rnn_ctx *c = m->ctx;
    const char *name = cell_names[c->mode];
    int nd = td_ndim(x);
    if ((nd != 1 && nd != 2) || td_size(x, -1) != c->input) {
        char got[96];
        TD_FAIL_NULL(TD_ERR_SHAPE, "%s: expected input [B, %lld] or [%lld], got %s", name, (long long)c->input,
                     (long long)c->input, td__shape_str(nd, td_shape(x), got, sizeof got));
    }
    if (cst && c->mode != MODE_LSTM) TD_FAIL_NULL(TD_ERR_MISUSE, "%s: c is for LSTMCell only", name);
    int64_t B = nd == 2 ? td_size(x, 0) : 1;
    td_tensor *states[2] = {h, cst};
    for (int i = 0; i < 2; i++) {
        td_tensor *s = states[i];
        if (!s) continue;
        if (!td__check_arg(s, name, i ? "c" : "h")) return NULL;
        if (td_ndim(s) != nd || td_size(s, -1) != c->hidden || (nd == 2 && td_size(s, 0) != B)) {
            char got[96];
            TD_FAIL_NULL(TD_ERR_SHAPE, "%s: expected %s of shape [%lld, %lld] (or [%lld] unbatched), got %s", name,
                         i ? "c" : "h", (long long)B, (long long)c->hidden, (long long)c->hidden,
                         td__shape_str(td_ndim(s), td_shape(s), got, sizeof got));
        }
    }
    td_tensor *x2 = nd == 1 ? td_unsqueeze(x, 0) : x;
    h = h ? (nd == 1 ? td_unsqueeze(h, 0) : h) : initial(NULL, 0, x, B, c->hidden);
    if (c->mode == MODE_LSTM) cst = cst ? (nd == 1 ? td_unsqueeze(cst, 0) : cst) : initial(NULL, 0, x, B, c->hidden);
    td_tensor *bx, *bh;
    step_biases(c, param(m, 0, 0, 2), param(m, 0, 0, 3), &bx, &bh);
    td_tensor *hn = step(c, td_linear(x2, param(m, 0, 0, 0), bx), h, &cst, param(m, 0, 0, 1), bh);
    if (nd == 1) {
        hn = td_squeeze(hn, 0);
        if (c->mode == MODE_LSTM) cst = td_squeeze(cst, 0);
    }
    if (c->mode == MODE_LSTM) *c_n = cst;
    return hn && (c->mode != MODE_LSTM || cst) ? hn : NULL;
}

static td_tensor *cell_module_forward(td_module *m, td_tensor *x) {
    td_tensor *c_n = NULL;
    return cell_body(m, x, NULL, NULL, &c_n);
}

static const td_module_i rnn_cell_iface = {.type = "RNNCell", .forward = cell_module_forward, .free_ctx = NULL};
static const td_module_i lstm_cell_iface = {.type = "LSTMCell", .forward = cell_module_forward, .free_ctx = NULL};
static const td_module_i gru_cell_iface = {.type = "GRUCell", .forward = cell_module_forward, .free_ctx = NULL};

td_tensor *td_rnn_cell_forward(td_module *m, td_tensor *x, td_tensor *h, td_tensor *c, td_tensor **c_n) {
    if (c_n) *c_n = NULL;
    if (!m || (m->iface != &rnn_cell_iface && m->iface != &lstm_cell_iface && m->iface != &gru_cell_iface)) {
        if (!m && td_last_status() != TD_OK) return NULL;
        TD_FAIL_NULL(TD_ERR_MISUSE, "rnn_cell_forward: module is %s, not an RNNCell, LSTMCell or GRUCell",
                     m ? td_module_type(m) : "NULL");
    }
    TD_CHECK_ARG(x, m->iface->type);
    td_tensor *cn = NULL;
    td_scope_begin();
    td_tensor *y = cell_body(m, x, h, c, &cn);
    if (y) td_keep(cn);
    y = td__scope_end_keep(y);
    if (!y) return NULL;
    if (c_n)
        *c_n = to_caller(cn);
    else
        td_release(cn);
    return y;
}

static td_module *cell_new(const td_module_i *iface, int mode, int64_t input_size, int64_t hidden_size, bool bias) {
    if (input_size <= 0 || hidden_size <= 0)
        TD_FAIL_NULL(TD_ERR_MISUSE, "%s: input_size %lld and hidden_size %lld must be positive", cell_names[mode],
                     (long long)input_size, (long long)hidden_size);
    if ((mode == MODE_LSTM || mode == MODE_GRU) && td__rnn_cells_init() != TD_OK) return NULL;
    td_module *m = td__module_alloc(iface, sizeof(rnn_ctx));
    if (!m) return NULL;
    *(rnn_ctx *)m->ctx = (rnn_ctx){mode, input_size, hidden_size, 1, 1, bias, false, 0};
    int64_t gh = mode_gates[mode] * hidden_size;
    td_status st = add_uniform(m, "weight_ih", gh, input_size, hidden_size);
    if (st == TD_OK) st = add_uniform(m, "weight_hh", gh, hidden_size, hidden_size);
    if (st == TD_OK && bias) st = add_uniform(m, "bias_ih", gh, 0, hidden_size);
    if (st == TD_OK && bias) st = add_uniform(m, "bias_hh", gh, 0, hidden_size);
    if (st != TD_OK) {
        td_module_free(m);
        return NULL;
    }
    return m;
}

td_module *td_rnn_cell_new(int64_t input_size, int64_t hidden_size, bool bias, td_rnn_nonlinearity nonlinearity) {
    if (nonlinearity != TD_RNN_TANH && nonlinearity != TD_RNN_RELU)
        TD_FAIL_NULL(TD_ERR_MISUSE, "RNNCell: nonlinearity %d is not TD_RNN_TANH or TD_RNN_RELU", (int)nonlinearity);
    return cell_new(&rnn_cell_iface, nonlinearity == TD_RNN_RELU ? MODE_RNN_RELU : MODE_RNN_TANH, input_size,
                    hidden_size, bias);
}

td_module *td_lstm_cell_new(int64_t input_size, int64_t hidden_size, bool bias) {
    return cell_new(&lstm_cell_iface, MODE_LSTM, input_size, hidden_size, bias);
}

td_module *td_gru_cell_new(int64_t input_size, int64_t hidden_size, bool bias) {
    return cell_new(&gru_cell_iface, MODE_GRU, input_size, hidden_size, bias);
}
