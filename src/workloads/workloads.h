/*
** The reference workloads of WORKLOADS.md, shared by `trident train`,
** `trident bench` (tools/, bench/), bench/soak and the tests, and below them
** all (the trident_workloads library, on the public API only): W1 (MLP), W2 (CNN) and W3 (GPT-mini), each built as its
** PyTorch twin in ../shared/anchors/torch_workloads.py (same layers, same
** parameter names, PyTorch's default initialization), plus one training step
** and one evaluation pass.
**
** Shapes: N batch, T context, V vocabulary (256 bytes).
**   mlp, cnn: x F32 [N, 784] (pixels in [0, 1]), y I64 [N] -> logits [N, 10]
**   gpt:      x I64 [N, T] (byte ids),           y I64 [N, T] (the next bytes)
**             -> logits [N, T, V]
*/
#ifndef TRIDENT_WORKLOADS_H
#define TRIDENT_WORKLOADS_H

#include "trident/trident.h"

/* W3's size. workload_gpt_config_default() gives WORKLOADS.md's 10.9 M
** parameter model: vocab 256, d_model 384, 6 heads, 6 layers, context 256. */
typedef struct workload_gpt_config {
    int64_t vocab, d_model, heads, layers, context;
    bool gpt2; /* GPT-2's own math (Hugging Face's GPT2LMHeadModel): GELU's tanh form, and no head: the
               ** logits are ln(x) tok.weight^T (the tied lm_head) */
} workload_gpt_config;

workload_gpt_config workload_gpt_config_default(void);
/* W6's size in the same struct: vocab 256, d_model 512 (the LSTM's hidden
** size), layers 2, context 256 (the sequence length); heads unused (1). */
workload_gpt_config workload_lstm_config_default(void);

/* METHOD. A named gpt size into *out: "gpt-mini" (W3, the default above) or
** "gpt2-small" (W5: GPT-2 small with a byte vocabulary, vocab 256, d_model
** 768, 12 heads, 12 layers, context 1024: 86 M parameters). TD_ERR_MISUSE
** naming the string and the choices otherwise. */
td_status workload_gpt_preset(const char *name, workload_gpt_config *out);

/* CONSTRUCTORS. The models alone, on the CPU, initialized from the default
** generator (td_manual_seed first for a reproducible model). NULL with
** td_last_error() set on failure (TD_ERR_MISUSE for a gpt size < 1 or a
** d_model that is not a multiple of heads).
**   mlp: Sequential(Linear 784-256, ReLU, Linear 256-256, ReLU, Linear 256-10)
**   cnn: Sequential(Unflatten [1,28,28], Conv 1-32 3x3 p1, ReLU, MaxPool 2,
**        Conv 32-64 3x3 p1, ReLU, MaxPool 2, Flatten, Linear 3136-128, ReLU,
**        Linear 128-10)
**   gpt: "GPT" with tok, pos (Embedding), blocks.<i>.{ln1, ln2, qkv, proj, fc,
**        out}, ln, head: x + attn(ln1(x)), x + out(gelu(fc(ln2(x)))) per block,
**        then head(ln(x)); with cfg->gpt2, no head (ln(x) tok.weight^T) and
**        the tanh GELU. */
td_module *workload_mlp_new(void);
td_module *workload_cnn_new(void);
td_module *workload_gpt_new(const workload_gpt_config *cfg);
/* CONSTRUCTOR. W6, the LSTM language model: "LSTMLM" with emb (Embedding
** vocab x hidden), rnn (LSTM hidden -> hidden, 2 layers, batch_first) and
** head (Linear hidden -> vocab): x I64 [N, T] -> logits [N, T, V]. W6 is
** vocab 256, hidden 512, on W3's bytes with T = the gpt context (256). */
td_module *workload_lstm_new(int64_t vocab, int64_t hidden, int layers);

typedef enum workload_kind { WORKLOAD_MLP = 0, WORKLOAD_CNN = 1, WORKLOAD_GPT = 2, WORKLOAD_LSTM = 3 } workload_kind;

/* Whether kind trains on text windows (gpt, lstm: x and y I64 [N, T] from --text, T = gpt.context). */
static inline bool workload_is_text(workload_kind kind) { return kind == WORKLOAD_GPT || kind == WORKLOAD_LSTM; }

/* A model, its optimizer and its device: everything one training step needs. */
typedef struct workload {
    workload_kind kind;
    const char *name;        /* "mlp", "cnn", "gpt" */
    workload_gpt_config gpt; /* the size, for gpt */
    td_device device;
    td_module *model;
    td_optimizer *opt;
    td_dtype amp;           /* TD_F32: off; TD_BF16/TD_F16: forward and loss under td_autocast_begin */
    td_grad_scaler *scaler; /* with TD_F16: dynamic loss scaling; else NULL */
    double grad_clip;       /* > 0: clip the gradients' total 2-norm to this before each update (device-only) */
} workload;

/* METHOD. Parse "mlp", "cnn", "gpt" or "lstm" into *out (TD_ERR_MISUSE otherwise,
** naming the string and the choices). */
td_status workload_kind_parse(const char *s, workload_kind *out);

/*
** CONSTRUCTOR. Build workload kind on dev with its optimizer into *w.
**   IN cfg        the gpt size (NULL: the default); ignored for mlp and cnn; for
**                 lstm its vocab, d_model (hidden), layers and context (NULL: W6's)
**   IN optimizer  "adam", "adamw", "sgd" or "rmsprop"; NULL: the workload's own
**                 (Adam for mlp and cnn, AdamW with weight decay 0.01 for gpt)
**   IN lr         the learning rate; <= 0: the workload's (1e-3; gpt 3e-4)
**   IN capturable td_optim_options.capturable: Adam keeps its step count on the
**                 device, so that a captured step advances it on every replay
** The optimizer keeps float32 master weights for half parameters
** (td_optim_options.master_weights), so workload_params_set may lower them.
** The model is initialized from the default generator on the CPU, then moved.
** Returns TD_OK, or the error with *w zeroed (TD_ERR_MISUSE for an unknown
** optimizer, and the errors of the constructors). Free with workload_free().
*/
td_status workload_init(workload *w, workload_kind kind, const workload_gpt_config *cfg, td_device dev,
                        const char *optimizer, double lr, bool capturable);
/* CONSTRUCTOR. workload_init with the optimizer's weight decay: >= 0 sets
** td_optim_options.weight_decay (L2 for adam, sgd, rmsprop; decoupled for
** adamw), < 0 keeps the optimizer's default (0; adamw 1e-2). */
td_status workload_init_ext(workload *w, workload_kind kind, const workload_gpt_config *cfg, td_device dev,
                            const char *optimizer, double lr, double weight_decay, bool capturable);

/* METHOD. Mixed precision for the steps of w: TD_F32 (off), TD_BF16, or
** TD_F16 (with a GradScaler of torch's defaults, whose step reads one flag on
** the host). TD_ERR_MISUSE for another dtype. */
td_status workload_amp_set(workload *w, td_dtype amp);

/* METHOD. Keep the parameters of w in dt (TD_F32 or TD_BF16;
** td_module_to_dtype), the optimizer updating their float32 master copies.
** TD_ERR_MISUSE for another dtype (fp16 gradients cannot be unscaled). */
td_status workload_params_set(workload *w, td_dtype dt);

/* DESTRUCTOR. Free the model, the optimizer and the scaler; NULL is a no-op. */
void workload_free(workload *w);

/*
** METHOD. One training step on the batch (x, y), on w's device: forward,
** cross-entropy (mean), zero_grad, backward, optimizer step (forward and loss
** under autocast, and the loss scaled for f16, as workload_amp_set chose),
** all inside a scope
** so nothing leaks. *loss (may be NULL, which skips the wait for the device)
** receives the batch loss before the update. Returns TD_OK or the error.
*/
td_status workload_train_step(workload *w, td_tensor *x, td_tensor *y, double *loss);

/*
** METHOD. The same step without a scope of its own and without a host read:
** returns the loss tensor (scalar, before the update) in the caller's scope, or
** NULL with the error set. This is the step that td_capture_begin/end records:
** keep (td_keep) the loss to read it after each replay.
*/
td_tensor *workload_loss_step(workload *w, td_tensor *x, td_tensor *y);

/*
** METHOD. Evaluate on a batch without recording (eval mode, no_grad): adds the
** summed cross-entropy to *loss_sum, the number of correct argmax predictions
** to *correct and the number of predictions (N, or N*T for gpt) to *count.
** The model is put back into training mode. Returns TD_OK or the error.
*/
td_status workload_eval_batch(workload *w, td_tensor *x, td_tensor *y, double *loss_sum, int64_t *correct,
                              int64_t *count);

/* ---- Hugging Face's GPT-2 layout (hf_gpt2.c) ---------------------------------
** GPT2LMHeadModel's state dict, with or without the "transformer." prefix:
**   wte.weight [V, C], wpe.weight [P, C], ln_f.{weight,bias}, and per block i
**   h.i.ln_1, h.i.ln_2, h.i.attn.c_attn [C, 3C], h.i.attn.c_proj [C, C],
**   h.i.mlp.c_fc [C, 4C], h.i.mlp.c_proj [4C, C] (Conv1D: y = x W + b, so the
**   weights are the transposes of Linear's); lm_head.weight is wte's (tied)
**   and h.i.attn.bias / masked_bias are constant masks: both are ignored.
** Trident's gpt names (workload_gpt_new with cfg.gpt2): tok, pos, ln, and
** blocks.i.{ln1, ln2, qkv, proj, fc, out}. */

/* Whether sd holds HF GPT-2 keys (wte.weight and h.0.attn.c_attn.weight). */
bool workload_gpt2_hf_detect(const td_named_tensors *sd);

/* CONSTRUCTOR. The gpt size of an HF GPT-2 state dict (vocab, d_model,
** layers, context from the shapes; heads as given, or d_model / 64, GPT-2's
** head size, when heads <= 0; gpt2 set) into *cfg, and the state dict in
** Trident's names (Conv1D weights transposed, new tensors on hf's device)
** into *sd (free with td_named_tensors_free). TD_ERR_FORMAT naming the first
** missing key or wrong shape; TD_ERR_MISUSE for a d_model not a multiple of
** heads. */
td_status workload_gpt2_from_hf(const td_named_tensors *hf, int64_t heads, workload_gpt_config *cfg,
                                td_named_tensors **sd);

/* CONSTRUCTOR. A gpt2 model's state dict (Trident's names) in HF's layout,
** "transformer."-prefixed, without lm_head.weight (tied, as HF's own
** safetensors files store it) into *hf. Errors as workload_gpt2_from_hf. */
td_status workload_gpt2_to_hf(const td_named_tensors *sd, int64_t layers, td_named_tensors **hf);

#endif /* TRIDENT_TOOLS_WORKLOADS_H */
