/*
** W1 (MLP), W2 (CNN) and W3 (GPT-mini) of WORKLOADS.md, built as their
** PyTorch twins in ../shared/anchors/torch_workloads.py, with one training
** step and one evaluation pass each. See workloads.h.
**
** Shapes in this file: N batch, T sequence (<= context), C = d_model,
** H heads, D = C / H per head, V vocabulary.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workloads.h"

workload_gpt_config workload_gpt_config_default(void) {
    return (workload_gpt_config){.vocab = 256, .d_model = 384, .heads = 6, .layers = 6, .context = 256};
}

workload_gpt_config workload_lstm_config_default(void) {
    return (workload_gpt_config){.vocab = 256, .d_model = 512, .heads = 1, .layers = 2, .context = 256};
}

td_module *workload_mlp_new(void) {
    return td_sequential_new(5, (td_module *[]){td_linear_new(784, 256, true), td_relu_new(),
                                                td_linear_new(256, 256, true), td_relu_new(),
                                                td_linear_new(256, 10, true)});
}

td_module *workload_cnn_new(void) {
    const int k[2] = {3, 3}, pad[2] = {1, 1}, two[2] = {2, 2};
    return td_sequential_new(
        11, (td_module *[]){td_unflatten_new(1, 3, (int64_t[]){1, 28, 28}),
                            td_conv2d_new(1, 32, k, NULL, pad, NULL, 1, true), td_relu_new(),
                            td_max_pool2d_new(two, NULL, NULL), td_conv2d_new(32, 64, k, NULL, pad, NULL, 1, true),
                            td_relu_new(), td_max_pool2d_new(two, NULL, NULL), td_flatten_new(1, -1),
                            td_linear_new(3136, 128, true), td_relu_new(), td_linear_new(128, 10, true)});
}

/* ---- W3: the transformer block ----------------------------------------------
** Block.forward of the twin (pre-LayerNorm, no dropout):
**   q, k, v = qkv(ln1(x)).split(C)                     x [N, T, C]
**   y = softmax(q k^T / sqrt(D) + causal) v per head   [N, H, T, D] (use_fused_attention)
**   x = x + proj(y merged back to [N, T, C])
**   x = x + out(gelu(fc(ln2(x))))                      fc C -> 4C, out 4C -> C
** The second line's ln2 and the residual add before it run as one fused
** ADD_LAYER_NORM (td_add_layer_norm), which keeps the sum for the next add;
** fc and the GELU are one LinearGELU layer (the fused LINEAR_GELU op), whose
** parameters are the twin's fc.weight and fc.bias; TRIDENT_LINEAR_GELU=composed
** makes fc a Linear followed by td_gelu instead (the unfused baseline).
** Children are borrowed pointers into the block (modules never move). */
typedef struct gpt_block {
    int64_t heads;
    bool fused_mlp; /* fc is a LinearGELU (else a Linear, and the GELU is applied after it) */
    bool gelu_tanh; /* GPT-2's GELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    td_module *ln1, *ln2, *qkv, *proj, *fc, *out;
    td_tensor *mask; /* kept [T, T] additive causal mask for the last T and device */
} gpt_block;

static void gpt_block_free(void *p) {
    gpt_block *b = p;
    td_release(b->mask);
    free(b);
}

/* The additive mask: 0 where key j <= query i, -inf above the diagonal. */
static td_tensor *causal_mask(gpt_block *b, int64_t t, td_device dev) {
    if (b->mask && td_size(b->mask, 0) == t && td_device_equal(td_tensor_device(b->mask), dev)) return b->mask;
    float *m = malloc((size_t)(t * t) * sizeof *m);
    if (!m) return NULL;
    for (int64_t i = 0; i < t; i++)
        for (int64_t j = 0; j < t; j++) m[i * t + j] = j > i ? -INFINITY : 0.0f;
    td_tensor *mask = td_from_data(m, 2, (int64_t[]){t, t}, TD_F32, dev);
    free(m);
    if (!mask) return NULL;
    td_release(b->mask);
    b->mask = td_keep(mask);
    return mask;
}

/* Attention: the fused td_scaled_dot_product_attention in f16/bf16 (q's dtype, or autocast's) on CUDA, whose
** kernels (cuDNN's, else our mma.sync ones) beat the composed matmul-softmax-matmul there (bench/RESULTS.md) and keep
** no [N, H, T, T] buffer; the composed one elsewhere. f32 on CUDA with head dim 64 or 128 too: the 3xTF32 mma.sync
** kernels run W3 fp32 in 33.4 ms where the composed one takes 52.5 (H100); TRIDENT_ATTENTION_F32=composed keeps it.
** On Vulkan TRIDENT_ATTENTION_VK=fused takes the fused op (tensor cores for f16, vk_ops_attention.c), unset or
** composed keeps the composed one (until measured). TRIDENT_ATTENTION=fused or composed forces either everywhere. */
static bool use_fused_attention(td_tensor *q) {
    const char *e = getenv("TRIDENT_ATTENTION");
    if (e && !strcmp(e, "fused")) return true;
    if (e && !strcmp(e, "composed")) return false;
    td_dtype dt = td_tensor_dtype(q);
    if (td_tensor_device(q).type == TD_DEVICE_VULKAN) {
        const char *f = getenv("TRIDENT_ATTENTION_VK");
        if (f && *f) return !strcmp(f, "fused");
        /* by default the cooperative-matrix kernels (f16/bf16, head dim 64 or 128) where the device has them: on an
        ** H100 fwd+bwd at 0.43-0.50x the composed attention's time; elsewhere the composed ops (the scalar shader
        ** is 16-31x slower) */
        td_dtype amp;
        if (td_autocast_enabled(TD_DEVICE_VULKAN, &amp)) dt = amp;
        td_device_info in;
        return (dt == TD_F16 || dt == TD_BF16) && (td_size(q, 3) == 64 || td_size(q, 3) == 128) &&
               td_device_get_info(td_tensor_device(q), &in) == TD_OK && in.cooperative_matrix &&
               !strstr(in.features, "coopmat=none");
    }
    if (td_tensor_device(q).type != TD_DEVICE_CUDA) return false;
    td_dtype amp;
    if (td_autocast_enabled(TD_DEVICE_CUDA, &amp)) dt = amp; /* ATTENTION runs in autocast's dtype */
    if (dt == TD_F32) {
        const char *f = getenv("TRIDENT_ATTENTION_F32");
        return !(f && !strcmp(f, "composed")) && (td_size(q, 3) == 64 || td_size(q, 3) == 128);
    }
    return dt == TD_F16 || dt == TD_BF16;
}

/* r + lin(a) as one LINEAR_RESIDUAL (td_linear_residual): lin's bias and the residual are added in the GEMM, with
** no pass of their own, and under autocast y stays in r's float32 without a bf16 rounding (its backward: dr = g,
** dx = g W, dW and db from one LINEAR_WGRAD). Autocast casts the leaf W (once, cached), so its gradient reaches W
** contiguous. */
static td_tensor *linear_residual(td_module *lin, td_tensor *a, td_tensor *r) {
    return td_linear_residual(a, td_module_get(lin, "weight"), td_module_get(lin, "bias"), r);
}

/* The fused MLP as one td_mlp_gelu node (issue 22: its backward runs fc2's input gradient and the GELU's as one
** LINEAR_DGELU, on CUDA one GEMM with gelu' in its epilogue); TRIDENT_MLP_NODE=0 keeps the LinearGELU layer and
** linear_residual's ops. Read per call, so one process can compare both. */
static bool mlp_node(void) {
    const char *e = getenv("TRIDENT_MLP_NODE");
    return !e || strcmp(e, "0") != 0;
}

/* TRIDENT_LN_AMP=composed: layer norms as td_layer_norm and td_add_layer_norm, whose f32 outputs the Linears
** cast, and whose residual autocast casts to f32 (the baseline: the same numbers, three more passes a block) */
static bool ln_composed(void) {
    const char *e = getenv("TRIDENT_LN_AMP");
    return e && !strcmp(e, "composed");
}

/* The dtype a layer norm feeding a Linear writes: autocast's (the Linear would cast the f32 output to it, so
** td_layer_norm_to rounds it in the LN kernel instead of a separate pass; f64 stays), else x's. */
static td_dtype ln_out_dtype(td_tensor *x) {
    td_dtype amp, dt = x ? td_tensor_dtype(x) : TD_F32;
    return x && dt != TD_F64 && td_autocast_enabled(td_tensor_device(x).type, &amp) ? amp : dt;
}

/* ln (a LayerNorm child over the last dim, eps torch's default) of x for a Linear: in ln_out_dtype(x) */
static td_tensor *ln_for_linear(td_module *ln, td_tensor *x) {
    td_tensor *w = td_module_get(ln, "weight"), *b = td_module_get(ln, "bias");
    return ln_composed() ? td_layer_norm(x, 1, w, b, 1e-5) : td_layer_norm_to(x, 1, w, b, 1e-5, ln_out_dtype(x));
}

/* ln of x + r for a Linear (ADD_LAYER_NORM), the sum in *s: r (proj's autocast output) read as it is */
static td_tensor *add_ln_for_linear(td_module *ln, td_tensor *x, td_tensor *r, td_tensor **s) {
    td_tensor *w = td_module_get(ln, "weight"), *b = td_module_get(ln, "bias");
    return ln_composed() ? td_add_layer_norm(x, r, 1, w, b, 1e-5, s)
                         : td_add_layer_norm_to(x, r, 1, w, b, 1e-5, ln_out_dtype(x), s);
}

/* [N, T, C] (a slice of the qkv output) -> [N, H, T, D] */
static td_tensor *split_heads(td_tensor *x, int64_t h) {
    static const int perm[4] = {0, 2, 1, 3};
    return td_permute(td_reshape(x, 4, (int64_t[]){td_size(x, 0), td_size(x, 1), h, td_size(x, 2) / h}), perm);
}

static td_tensor *gpt_block_forward(td_module *self, td_tensor *x) {
    gpt_block *b = td_module_user(self);
    int64_t n = td_size(x, 0), t = td_size(x, 1), c = td_size(x, 2), d = c / b->heads;
    td_tensor *qkv = td_module_forward(b->qkv, ln_for_linear(b->ln1, x)); /* [N, T, 3C] */
    td_tensor *parts[3] = {NULL, NULL, NULL}; /* one split: its gradient is one concatenation */
    if (qkv) td_split(qkv, 3, (int64_t[]){c, c, c}, 2, parts);
    td_tensor *q = split_heads(parts[0], b->heads), *k = split_heads(parts[1], b->heads);
    td_tensor *v = split_heads(parts[2], b->heads);
    td_tensor *o; /* [N, H, T, D] */
    if (use_fused_attention(q)) {
        o = td_scaled_dot_product_attention(q, k, v, NULL, 0, true, NAN);
    } else {
        td_tensor *att = td_matmul(td_mul_scalar(q, 1.0 / sqrt((double)d)), td_transpose(k, -2, -1)); /* [N,H,T,T] */
        o = td_matmul(td_softmax(td_add(att, causal_mask(b, t, td_tensor_device(x))), -1), v);
    }
    static const int perm[4] = {0, 2, 1, 3};
    td_tensor *y = td_reshape(td_permute(o, perm), 3, (int64_t[]){n, t, c});
    /* the residual add and ln2 in one fused op (ADD_LAYER_NORM; ln2's eps is torch's default) */
    td_tensor *s = NULL;
    td_tensor *h = add_ln_for_linear(b->ln2, x, td_module_forward(b->proj, y), &s);
    if (b->fused_mlp && mlp_node()) /* fc, the GELU, out and the residual add: one node */
        return td_mlp_gelu(h, td_module_get(b->fc, "weight"), td_module_get(b->fc, "bias"),
                           td_module_get(b->out, "weight"), td_module_get(b->out, "bias"), s, b->gelu_tanh);
    td_tensor *mlp = td_module_forward(b->fc, h);
    td_tensor *a = b->fused_mlp ? mlp : td_gelu(mlp, b->gelu_tanh);
    return linear_residual(b->out, a, s);
}

/* Register child under name in m, remembering it in *slot. */
static td_status add_child(td_module *m, const char *name, td_module *child, td_module **slot) {
    td_status st = td_module_register_module(m, name, child);
    *slot = st == TD_OK ? child : NULL;
    return st;
}

static td_module *gpt_block_new(int64_t c, int64_t heads, bool gelu_tanh) {
    gpt_block *b = calloc(1, sizeof *b);
    if (!b) return NULL;
    b->heads = heads;
    b->gelu_tanh = gelu_tanh;
    const char *e = getenv("TRIDENT_LINEAR_GELU");
    b->fused_mlp = !e || strcmp(e, "composed");
    td_module *m = td_module_new("Block", gpt_block_forward, b, gpt_block_free);
    if (!m) {
        free(b);
        return NULL;
    }
    int64_t norm = c;
    /* registration order = the twin's attribute order = state_dict order */
    td_status st = add_child(m, "ln1", td_layer_norm_new(1, &norm, 1e-5, true), &b->ln1);
    if (st == TD_OK) st = add_child(m, "ln2", td_layer_norm_new(1, &norm, 1e-5, true), &b->ln2);
    if (st == TD_OK) st = add_child(m, "qkv", td_linear_new(c, 3 * c, true), &b->qkv);
    if (st == TD_OK) st = add_child(m, "proj", td_linear_new(c, c, true), &b->proj);
    if (st == TD_OK)
        st = add_child(m, "fc",
                       b->fused_mlp ? td_linear_gelu_new(c, 4 * c, true, gelu_tanh) : td_linear_new(c, 4 * c, true),
                       &b->fc);
    if (st == TD_OK) st = add_child(m, "out", td_linear_new(4 * c, c, true), &b->out);
    if (st != TD_OK) {
        td_module_free(m);
        return NULL;
    }
    return m;
}

/* ---- W3: the model ------------------------------------------------------------
** GPT.forward of the twin:
**   x = tok(idx) + pos(arange(T))        idx [N, T] -> [N, T, C]
**   logits = head(ln(blocks(x)))         [N, T, V]
**   (gpt2: logits = ln(blocks(x)) tok.weight^T, the head tied to tok) */
typedef struct gpt_model {
    workload_gpt_config cfg;
    td_module *tok, *pos, *blocks, *ln, *head;
} gpt_model;

static td_tensor *gpt_forward(td_module *self, td_tensor *idx) {
    gpt_model *g = td_module_user(self);
    td_tensor *pos =
        td_arange(0, (double)td_size(idx, 1), 1, TD_I64, td_tensor_device(idx)); /* ids >= context fail in pos */
    td_tensor *x = td_add(td_module_forward(g->tok, idx), td_module_forward(g->pos, pos));
    td_tensor *h = ln_for_linear(g->ln, td_module_forward(g->blocks, x));
    return g->cfg.gpt2 ? td_linear(h, td_module_get(g->tok, "weight"), NULL) : td_module_forward(g->head, h);
}

/* TD_OK, or TD_ERR_MISUSE naming the bad size. */
static td_status gpt_config_check(const workload_gpt_config *c) {
    if (c->vocab < 1 || c->d_model < 1 || c->heads < 1 || c->layers < 1 || c->context < 1)
        return td_error_set(
            TD_ERR_MISUSE,
            "gpt: sizes must be positive (vocab %lld, d_model %lld, heads %lld, layers %lld, context %lld)",
            (long long)c->vocab, (long long)c->d_model, (long long)c->heads, (long long)c->layers,
            (long long)c->context);
    if (c->d_model % c->heads)
        return td_error_set(TD_ERR_MISUSE, "gpt: d_model %lld is not a multiple of heads %lld", (long long)c->d_model,
                            (long long)c->heads);
    return TD_OK;
}

td_module *workload_gpt_new(const workload_gpt_config *cfg) {
    if (gpt_config_check(cfg) != TD_OK) return NULL;
    gpt_model *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->cfg = *cfg;
    td_module *m = td_module_new("GPT", gpt_forward, g, free);
    if (!m) {
        free(g);
        return NULL;
    }
    int64_t c = cfg->d_model;
    td_status st = add_child(m, "tok", td_embedding_new(cfg->vocab, c), &g->tok);
    if (st == TD_OK) st = add_child(m, "pos", td_embedding_new(cfg->context, c), &g->pos);
    if (st == TD_OK) st = add_child(m, "blocks", td_sequential_new(0, NULL), &g->blocks);
    for (int64_t i = 0; i < cfg->layers && st == TD_OK; i++)
        st = td_sequential_append(g->blocks, gpt_block_new(c, cfg->heads, cfg->gpt2));
    if (st == TD_OK) st = add_child(m, "ln", td_layer_norm_new(1, &c, 1e-5, true), &g->ln);
    if (st == TD_OK && !cfg->gpt2) st = add_child(m, "head", td_linear_new(c, cfg->vocab, true), &g->head);
    if (st != TD_OK) {
        td_module_free(m);
        return NULL;
    }
    return m;
}

/* ---- the workload: model + optimizer ---------------------------------------- */

td_status workload_gpt_preset(const char *name, workload_gpt_config *out) {
    if (name && !strcmp(name, "gpt-mini")) return *out = workload_gpt_config_default(), TD_OK;
    if (name && !strcmp(name, "gpt2-small"))
        return *out = (workload_gpt_config){.vocab = 256, .d_model = 768, .heads = 12, .layers = 12, .context = 1024},
               TD_OK;
    return td_error_set(TD_ERR_MISUSE, "unknown gpt preset %s (gpt-mini, gpt2-small)", TD_QUOTE(name));
}

/* ---- W6: the LSTM language model -------------------------------------------
** LSTMLM.forward of the twin: head(rnn(emb(idx))[0])   idx [N, T] -> [N, T, V] */
typedef struct lstm_model {
    td_module *emb, *rnn, *head;
} lstm_model;

static td_tensor *lstm_lm_forward(td_module *self, td_tensor *idx) {
    lstm_model *g = td_module_user(self);
    return td_module_forward(g->head, td_module_forward(g->rnn, td_module_forward(g->emb, idx)));
}

td_module *workload_lstm_new(int64_t vocab, int64_t hidden, int layers) {
    lstm_model *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    td_module *m = td_module_new("LSTMLM", lstm_lm_forward, g, free);
    if (!m) {
        free(g);
        return NULL;
    }
    td_status st = add_child(m, "emb", td_embedding_new(vocab, hidden), &g->emb);
    if (st == TD_OK) st = add_child(m, "rnn", td_lstm_new(hidden, hidden, layers, true, true, 0, false), &g->rnn);
    if (st == TD_OK) st = add_child(m, "head", td_linear_new(hidden, vocab, true), &g->head);
    if (st != TD_OK) {
        td_module_free(m);
        return NULL;
    }
    return m;
}

static const char *const kind_names[] = {"mlp", "cnn", "gpt", "lstm"};

td_status workload_kind_parse(const char *s, workload_kind *out) {
    for (int k = 0; k < 4; k++)
        if (s && !strcmp(s, kind_names[k])) return *out = (workload_kind)k, TD_OK;
    return td_error_set(TD_ERR_MISUSE, "unknown model %s (mlp, cnn, gpt, lstm)", TD_QUOTE(s));
}

td_status workload_init(workload *w, workload_kind kind, const workload_gpt_config *cfg, td_device dev,
                        const char *optimizer, double lr, bool capturable) {
    return workload_init_ext(w, kind, cfg, dev, optimizer, lr, -1, capturable);
}

td_status workload_init_ext(workload *w, workload_kind kind, const workload_gpt_config *cfg, td_device dev,
                            const char *optimizer, double lr, double weight_decay, bool capturable) {
    memset(w, 0, sizeof *w);
    w->kind = kind;
    w->name = kind_names[kind];
    w->gpt = cfg ? *cfg : kind == WORKLOAD_LSTM ? workload_lstm_config_default() : workload_gpt_config_default();
    w->device = dev;
    w->amp = TD_F32;
    w->model = kind == WORKLOAD_MLP    ? workload_mlp_new()
               : kind == WORKLOAD_CNN  ? workload_cnn_new()
               : kind == WORKLOAD_LSTM ? workload_lstm_new(w->gpt.vocab, w->gpt.d_model, (int)w->gpt.layers)
                                       : workload_gpt_new(&w->gpt);
    td_status st = w->model ? td_module_to(w->model, dev) : td_last_status();
    int n = w->model ? td_module_parameters(w->model, NULL, 0) : 0;
    td_tensor **params = calloc((size_t)n + 1, sizeof *params);
    if (st == TD_OK && !params) st = td_error_set(TD_ERR_OOM, "out of host memory");
    if (st == TD_OK) {
        td_module_parameters(w->model, params, n);
        if (!optimizer) optimizer = kind == WORKLOAD_GPT ? "adamw" : "adam";
        if (lr <= 0) lr = kind == WORKLOAD_GPT ? 3e-4 : 1e-3;
        bool adam = !strcmp(optimizer, "adam"), adamw = !strcmp(optimizer, "adamw");
        bool sgd = !strcmp(optimizer, "sgd"), rmsprop = !strcmp(optimizer, "rmsprop");
        td_optim_options o = adam    ? td_adam_defaults(lr)
                             : adamw ? td_adamw_defaults(lr)
                             : sgd   ? td_sgd_defaults(lr)
                                     : td_rmsprop_defaults(lr);
        if (weight_decay >= 0) o.weight_decay = weight_decay;
        o.capturable = capturable && (adam || adamw);
        o.master_weights = true; /* only half parameters have one (workload_params_set) */
        w->opt = adam      ? td_adam_new(n, params, &o)
                 : adamw   ? td_adamw_new(n, params, &o)
                 : sgd     ? td_sgd_new(n, params, &o)
                 : rmsprop ? td_rmsprop_new(n, params, &o)
                           : NULL;
        if (!adam && !adamw && !sgd && !rmsprop)
            st = td_error_set(TD_ERR_MISUSE, "unknown optimizer %s (adam, adamw, sgd, rmsprop)", TD_QUOTE(optimizer));
        if (st == TD_OK && !w->opt) st = td_last_status();
    }
    free(params);
    if (st != TD_OK) workload_free(w);
    return st;
}

td_status workload_amp_set(workload *w, td_dtype amp) {
    if (amp != TD_F32 && amp != TD_BF16 && amp != TD_F16)
        return td_error_set(TD_ERR_MISUSE, "amp: %s is not float32, bfloat16 or float16", td_dtype_name(amp));
    td_grad_scaler_free(w->scaler);
    w->scaler = NULL;
    w->amp = amp;
    if (amp == TD_F16 && !(w->scaler = td_grad_scaler_new(NULL))) return td_last_status();
    return TD_OK;
}

td_status workload_params_set(workload *w, td_dtype dt) {
    if (dt != TD_F32 && dt != TD_BF16)
        return td_error_set(TD_ERR_MISUSE, "parameters: %s is not float32 or bfloat16", td_dtype_name(dt));
    return td_module_to_dtype(w->model, dt);
}

void workload_free(workload *w) {
    if (!w) return;
    td_grad_scaler_free(w->scaler);
    td_optimizer_free(w->opt);
    td_module_free(w->model);
    memset(w, 0, sizeof *w);
}

/* logits [N, 10] or [N, T, V] -> [rows, classes]; y -> [rows] */
static td_tensor *rows(td_tensor *t, int64_t classes) {
    return td_reshape(t, classes ? 2 : 1, (int64_t[]){-1, classes});
}

/* Forward and the loss (reduction red), under autocast when w->amp asks. */
static td_tensor *forward_loss(workload *w, td_tensor *x, td_tensor *y, td_reduction red, td_tensor **logits_out) {
    bool amp = w->amp != TD_F32;
    if (amp && td_autocast_begin(w->device.type, w->amp) != TD_OK) return NULL;
    td_tensor *logits = td_module_forward(w->model, x);
    int64_t classes = logits ? td_size(logits, -1) : 0;
    td_tensor *lg = rows(logits, classes);
    td_profile_push("loss");
    td_tensor *l = td_cross_entropy_loss(lg, rows(y, 0), NULL, -100, 0, red);
    td_profile_pop();
    if (amp) td_autocast_end();
    if (logits_out) *logits_out = lg;
    return l;
}

/* --grad-clip: torch.nn.utils.clip_grad_norm_(params, max_norm) without the
** host read of the norm (td_clip_grad_norm_ returns it as a double):
**   total = sqrt(sum_p sum(g_p^2))  (f32, or f64 for f64 gradients)
**   coef  = min(max_norm / (total + 1e-6), 1);  every g_p *= coef
** torch's foreach form multiplies by the clamped coef always, as here. With a
** GradScaler the gradients are unscaled first (torch's recipe). */
static td_status clip_grads(workload *w) {
    if (w->scaler) {
        td_status st = td_grad_scaler_unscale_(w->scaler, w->opt);
        if (st != TD_OK) return st;
    }
    int n = td_module_parameters(w->model, NULL, 0);
    td_tensor **ps = calloc((size_t)n + 1, sizeof *ps);
    if (!ps) return td_error_set(TD_ERR_OOM, "out of host memory");
    td_module_parameters(w->model, ps, n);
    td_status st = TD_OK;
    td_no_grad_begin();
    td_tensor *sq = NULL;
    for (int i = 0; i < n; i++) {
        td_tensor *g = td_grad_of(ps[i]);
        if (!g) continue;
        td_tensor *g32 = td_tensor_dtype(g) == TD_F64 ? g : td_cast(g, TD_F32);
        td_tensor *part = td_sum(td_mul(g32, g32), 0, NULL, false);
        sq = sq ? td_add(sq, td_cast(part, td_tensor_dtype(sq))) : part;
        if (!sq) {
            st = td_last_status();
            break;
        }
    }
    td_tensor *coef =
        sq ? td_clamp(td_div(td_scalar(w->grad_clip, td_tensor_dtype(sq), w->device), td_add_scalar(td_sqrt(sq), 1e-6)),
                      0, 1)
           : NULL;
    if (st == TD_OK && sq && !coef) st = td_last_status();
    for (int i = 0; i < n && coef && st == TD_OK; i++) {
        td_tensor *g = td_grad_of(ps[i]);
        if (g) st = td_copy_(g, td_mul(g, td_cast(coef, td_tensor_dtype(g))));
    }
    td_no_grad_end();
    free(ps);
    return st;
}

td_tensor *workload_loss_step(workload *w, td_tensor *x, td_tensor *y) {
    td_tensor *l = forward_loss(w, x, y, TD_REDUCE_MEAN, NULL);
    td_optimizer_zero_grad(w->opt);
    td_tensor *scaled = w->scaler && l ? td_grad_scaler_scale(w->scaler, l) : l;
    td_status st = scaled ? td_backward(scaled, NULL, false) : td_last_status();
    if (st == TD_OK && w->grad_clip > 0) st = clip_grads(w);
    if (st == TD_OK) st = w->scaler ? td_grad_scaler_step(w->scaler, w->opt, NULL) : td_optimizer_step(w->opt);
    if (st == TD_OK && w->scaler) st = td_grad_scaler_update(w->scaler);
    return st == TD_OK ? l : NULL;
}

td_status workload_train_step(workload *w, td_tensor *x, td_tensor *y, double *loss) {
    td_scope_begin();
    td_tensor *l = workload_loss_step(w, x, y);
    td_status st = l ? TD_OK : td_last_status();
    if (st == TD_OK && loss) *loss = td_item(l);
    td_scope_end();
    return st;
}

td_status workload_eval_batch(workload *w, td_tensor *x, td_tensor *y, double *loss_sum, int64_t *correct,
                              int64_t *count) {
    td_module_eval(w->model);
    td_no_grad_begin();
    td_scope_begin();
    td_tensor *lg = NULL, *yr = rows(y, 0);
    td_tensor *l = forward_loss(w, x, y, TD_REDUCE_SUM, &lg);
    td_tensor *hits = td_sum(td_cast(td_eq(td_argmax(lg, 1, false), yr), TD_I64), 0, NULL, false);
    td_status st = l && hits ? TD_OK : td_last_status();
    if (st == TD_OK) {
        *loss_sum += td_item(l);
        *correct += (int64_t)td_item(hits);
        *count += td_numel(yr);
    }
    td_scope_end();
    td_no_grad_end();
    td_module_train(w->model, true);
    return st;
}
