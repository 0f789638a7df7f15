/*
** Hugging Face's GPT-2 layout <-> Trident's gpt (cfg.gpt2) state dict (see
** workloads.h). The map, per block i (C = d_model):
**   h.i.ln_1.{weight,bias}      <-> blocks.i.ln1.{weight,bias}
**   h.i.ln_2.{weight,bias}      <-> blocks.i.ln2.{weight,bias}
**   h.i.attn.c_attn.weight [C,3C]  <-> blocks.i.qkv.weight [3C,C]   transposed
**   h.i.attn.c_proj.weight [C,C]   <-> blocks.i.proj.weight [C,C]   transposed
**   h.i.mlp.c_fc.weight [C,4C]     <-> blocks.i.fc.weight [4C,C]    transposed
**   h.i.mlp.c_proj.weight [4C,C]   <-> blocks.i.out.weight [C,4C]   transposed
**   (biases as they are), wte <-> tok, wpe <-> pos, ln_f <-> ln.
** Conv1D computes x W + b and Linear x W^T + b, so the transposes give the same
** function; q, k, v sit in the same thirds of c_attn's output as of qkv's.
*/
#include <stdio.h>
#include <string.h>

#include "workloads.h"

typedef struct map_entry {
    const char *hf, *td; /* per-block names take the block index for %lld */
    bool transpose;
} map_entry;

static const map_entry top_map[] = {
    {"wte.weight", "tok.weight", false},
    {"wpe.weight", "pos.weight", false},
    {"ln_f.weight", "ln.weight", false},
    {"ln_f.bias", "ln.bias", false},
};
static const map_entry block_map[] = {
    {"h.%lld.ln_1.weight", "blocks.%lld.ln1.weight", false},
    {"h.%lld.ln_1.bias", "blocks.%lld.ln1.bias", false},
    {"h.%lld.ln_2.weight", "blocks.%lld.ln2.weight", false},
    {"h.%lld.ln_2.bias", "blocks.%lld.ln2.bias", false},
    {"h.%lld.attn.c_attn.weight", "blocks.%lld.qkv.weight", true},
    {"h.%lld.attn.c_attn.bias", "blocks.%lld.qkv.bias", false},
    {"h.%lld.attn.c_proj.weight", "blocks.%lld.proj.weight", true},
    {"h.%lld.attn.c_proj.bias", "blocks.%lld.proj.bias", false},
    {"h.%lld.mlp.c_fc.weight", "blocks.%lld.fc.weight", true},
    {"h.%lld.mlp.c_fc.bias", "blocks.%lld.fc.bias", false},
    {"h.%lld.mlp.c_proj.weight", "blocks.%lld.out.weight", true},
    {"h.%lld.mlp.c_proj.bias", "blocks.%lld.out.bias", false},
};
#define N_TOP   ((int)(sizeof top_map / sizeof *top_map))
#define N_BLOCK ((int)(sizeof block_map / sizeof *block_map))

/* hf's tensor called name, with or without the "transformer." prefix; NULL when absent. */
static td_tensor *hf_get(const td_named_tensors *hf, const char *name) {
    char buf[192];
    snprintf(buf, sizeof buf, "transformer.%s", name);
    td_tensor *t = td_named_tensors_get(hf, buf);
    return t ? t : td_named_tensors_get(hf, name);
}

bool workload_gpt2_hf_detect(const td_named_tensors *sd) {
    return hf_get(sd, "wte.weight") && hf_get(sd, "h.0.attn.c_attn.weight");
}

/* src under name dst in out: transposed (a new contiguous tensor) or shared. */
static td_status put(td_named_tensors *out, const char *dst, td_tensor *src, bool transpose) {
    td_scope_begin();
    td_tensor *t = transpose ? td_contiguous(td_transpose(src, 0, 1)) : src;
    td_status st = t ? td_named_tensors_add(out, dst, t) : td_last_status();
    td_scope_end();
    return st;
}

/* One entry of the map, either way (to_hf: td -> "transformer." hf). */
static td_status map_one(const td_named_tensors *in, td_named_tensors *out, const map_entry *e, long long i,
                         bool to_hf) {
    char hf[160], td[160], full[176];
    snprintf(hf, sizeof hf, e->hf, i);
    snprintf(td, sizeof td, e->td, i);
    td_tensor *src = to_hf ? td_named_tensors_get(in, td) : hf_get(in, hf);
    if (!src)
        return td_error_set(TD_ERR_FORMAT, "gpt2: the state dict lacks %s%s", to_hf ? "" : "(transformer.)",
                            to_hf ? td : hf);
    if (e->transpose && td_ndim(src) != 2)
        return td_error_set(TD_ERR_FORMAT, "gpt2: %s is not a matrix", to_hf ? td : hf);
    snprintf(full, sizeof full, "transformer.%s", hf);
    return put(out, to_hf ? full : td, src, e->transpose);
}

/* A shape check of the HF dict: name must be [a] (b < 0) or [a, b]. */
static td_status want(const td_named_tensors *hf, const char *name, int64_t a, int64_t b) {
    td_tensor *t = hf_get(hf, name);
    bool ok = t && td_ndim(t) == (b < 0 ? 1 : 2) && td_size(t, 0) == a && (b < 0 || td_size(t, 1) == b);
    if (ok) return TD_OK;
    return td_error_set(TD_ERR_FORMAT, "gpt2: %s is %s, expected [%lld%s%lld]", name,
                        t ? "of another shape" : "missing", (long long)a, b < 0 ? "" : ", ",
                        b < 0 ? 0LL : (long long)b);
}

td_status workload_gpt2_from_hf(const td_named_tensors *hf, int64_t heads, workload_gpt_config *cfg,
                                td_named_tensors **sd) {
    *sd = NULL;
    td_tensor *wte = hf_get(hf, "wte.weight"), *wpe = hf_get(hf, "wpe.weight");
    if (!wte || !wpe || td_ndim(wte) != 2 || td_ndim(wpe) != 2)
        return td_error_set(TD_ERR_FORMAT, "gpt2: the state dict lacks the matrices wte.weight and wpe.weight");
    workload_gpt_config c = {
        .vocab = td_size(wte, 0), .d_model = td_size(wte, 1), .context = td_size(wpe, 0), .gpt2 = true};
    while (true) { /* layers: the blocks h.0, h.1, ... present */
        char name[64];
        snprintf(name, sizeof name, "h.%lld.attn.c_attn.weight", (long long)c.layers);
        if (!hf_get(hf, name)) break;
        c.layers++;
    }
    c.heads = heads > 0 ? heads : c.d_model / 64 > 0 ? c.d_model / 64 : 1;
    if (c.layers < 1) return td_error_set(TD_ERR_FORMAT, "gpt2: the state dict has no block h.0");
    if (c.d_model % c.heads)
        return td_error_set(TD_ERR_MISUSE, "gpt2: d_model %lld is not a multiple of %lld heads (--heads)",
                            (long long)c.d_model, (long long)c.heads);
    int64_t C = c.d_model;
    td_status st = want(hf, "wpe.weight", c.context, C);
    for (long long i = 0; i < c.layers && st == TD_OK; i++) {
        char n[6][64];
        snprintf(n[0], 64, "h.%lld.attn.c_attn.weight", i);
        snprintf(n[1], 64, "h.%lld.attn.c_proj.weight", i);
        snprintf(n[2], 64, "h.%lld.mlp.c_fc.weight", i);
        snprintf(n[3], 64, "h.%lld.mlp.c_proj.weight", i);
        snprintf(n[4], 64, "h.%lld.ln_1.weight", i);
        snprintf(n[5], 64, "h.%lld.attn.c_attn.bias", i);
        st = want(hf, n[0], C, 3 * C);
        if (st == TD_OK) st = want(hf, n[1], C, C);
        if (st == TD_OK) st = want(hf, n[2], C, 4 * C);
        if (st == TD_OK) st = want(hf, n[3], 4 * C, C);
        if (st == TD_OK) st = want(hf, n[4], C, -1);
        if (st == TD_OK) st = want(hf, n[5], 3 * C, -1);
    }
    td_named_tensors *out = st == TD_OK ? td_named_tensors_new() : NULL;
    if (st == TD_OK && !out) st = td_last_status();
    for (int k = 0; k < N_TOP && st == TD_OK; k++) st = map_one(hf, out, &top_map[k], 0, false);
    for (long long i = 0; i < c.layers && st == TD_OK; i++)
        for (int k = 0; k < N_BLOCK && st == TD_OK; k++) st = map_one(hf, out, &block_map[k], i, false);
    if (st != TD_OK) {
        td_named_tensors_free(out);
        return st;
    }
    *cfg = c;
    *sd = out;
    return TD_OK;
}

td_status workload_gpt2_to_hf(const td_named_tensors *sd, int64_t layers, td_named_tensors **hf) {
    *hf = NULL;
    td_named_tensors *out = td_named_tensors_new();
    td_status st = out ? TD_OK : td_last_status();
    for (int k = 0; k < N_TOP && st == TD_OK; k++) st = map_one(sd, out, &top_map[k], 0, true);
    for (long long i = 0; i < layers && st == TD_OK; i++)
        for (int k = 0; k < N_BLOCK && st == TD_OK; k++) st = map_one(sd, out, &block_map[k], i, true);
    if (st != TD_OK) {
        td_named_tensors_free(out);
        return st;
    }
    *hf = out;
    return TD_OK;
}
