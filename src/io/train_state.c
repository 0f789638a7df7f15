/*
** Training checkpoints on top of safetensors: model tensors as "model.<name>",
** optimizer state as "optim.<name>", and the run's position (step, epoch, RNG
** state, model name) in __metadata__ as decimal strings. See io.h.
*/
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "trident/io.h"

#define CKPT_FORMAT    "trident-checkpoint-1"
#define CKPT_MAX_COUNT (1ll << 53) /* step and epoch: exact in a double, far from overflow */

/* Copy src's tensors and metadata into dst with "<prefix>." prepended. */
static td_status add_prefixed(td_named_tensors *dst, const char *prefix, const td_named_tensors *src) {
    char name[1024];
    for (int64_t i = 0; src && i < td_named_tensors_len(src); i++) {
        if (snprintf(name, sizeof name, "%s.%s", prefix, td_named_tensors_name(src, i)) >= (int)sizeof name)
            return TD_ERR(TD_ERR_MISUSE, "checkpoint: tensor name %s is too long",
                          TD_QUOTE(td_named_tensors_name(src, i)));
        td_status st = td_named_tensors_add(dst, name, td_named_tensors_at(src, i));
        if (st != TD_OK) return st;
    }
    for (int64_t i = 0; src && i < td_named_tensors_meta_len(src); i++) {
        const char *k = td_named_tensors_meta_key(src, i);
        if (snprintf(name, sizeof name, "%s.%s", prefix, k) >= (int)sizeof name)
            return TD_ERR(TD_ERR_MISUSE, "checkpoint: metadata key %s is too long", TD_QUOTE(k));
        td_status st = td_named_tensors_set_meta(dst, name, td_named_tensors_meta(src, k));
        if (st != TD_OK) return st;
    }
    return TD_OK;
}

td_status td_train_state_save(const char *path, const td_train_state *ck) {
    if (!path || !ck || !ck->model || !ck->model_name[0] || !memchr(ck->model_name, 0, sizeof ck->model_name))
        return TD_ERR(TD_ERR_MISUSE, "checkpoint_save: need a path, a model name and a model state");
    td_named_tensors *all = td_named_tensors_new();
    if (!all) return td_last_status();
    char num[4][32];
    snprintf(num[0], sizeof num[0], "%" PRId64, ck->step);
    snprintf(num[1], sizeof num[1], "%" PRId64, ck->epoch);
    snprintf(num[2], sizeof num[2], "%" PRIu64, ck->rng.seed);
    snprintf(num[3], sizeof num[3], "%" PRIu64, ck->rng.offset);
    const char *meta[6][2] = {{"format", CKPT_FORMAT}, {"model", ck->model_name}, {"step", num[0]},
                              {"epoch", num[1]},       {"rng_seed", num[2]},      {"rng_offset", num[3]}};
    td_status st = TD_OK;
    for (int i = 0; i < 6 && st == TD_OK; i++) st = td_named_tensors_set_meta(all, meta[i][0], meta[i][1]);
    if (st == TD_OK) st = add_prefixed(all, "model", ck->model);
    if (st == TD_OK) st = add_prefixed(all, "optim", ck->optim);
    if (st == TD_OK) st = td_safetensors_save(path, all);
    td_named_tensors_free(all);
    return st;
}

/* Parse a decimal metadata entry into *v: a count (int64_t in [0, 2^53]) or
** any uint64_t. */
static td_status meta_number(const td_named_tensors *l, const char *path, const char *key, bool is_count, void *v) {
    const char *s = td_named_tensors_meta(l, key);
    if (!s) return TD_ERR(TD_ERR_FORMAT, "checkpoint %s lacks metadata '%s'", path, key);
    char *end;
    errno = 0;
    long long c = 0;
    if (is_count)
        c = strtoll(s, &end, 10);
    else
        *(uint64_t *)v = strtoull(s, &end, 10);
    if (errno || end == s || *end || !((s[0] >= '0' && s[0] <= '9') || (is_count && s[0] == '-')))
        return TD_ERR(TD_ERR_FORMAT, "checkpoint %s: metadata '%s' = %s is not a decimal integer", path, key,
                      TD_QUOTE(s));
    if (is_count && (c < 0 || c > CKPT_MAX_COUNT))
        return TD_ERR(TD_ERR_FORMAT, "checkpoint %s: metadata '%s' = %lld is out of range [0, 2^53]", path, key, c);
    if (is_count) *(int64_t *)v = c;
    return TD_OK;
}

/* Split the file's entries by prefix into ck->model and ck->optim. */
static td_status split(const td_named_tensors *all, td_train_state *ck, const char *path) {
    for (int64_t i = 0; i < td_named_tensors_len(all); i++) {
        const char *n = td_named_tensors_name(all, i);
        td_named_tensors *dst = !strncmp(n, "model.", 6) ? ck->model : !strncmp(n, "optim.", 6) ? ck->optim : NULL;
        if (!dst)
            return TD_ERR(TD_ERR_FORMAT, "checkpoint %s: tensor %s is neither model.* nor optim.*", path, TD_QUOTE(n));
        td_status st = td_named_tensors_add(dst, n + 6, td_named_tensors_at(all, i));
        if (st != TD_OK) return st;
    }
    for (int64_t i = 0; i < td_named_tensors_meta_len(all); i++) {
        const char *k = td_named_tensors_meta_key(all, i);
        td_named_tensors *dst = !strncmp(k, "model.", 6) ? ck->model : !strncmp(k, "optim.", 6) ? ck->optim : NULL;
        td_status st = dst ? td_named_tensors_set_meta(dst, k + 6, td_named_tensors_meta(all, k)) : TD_OK;
        if (st != TD_OK) return st;
    }
    return TD_OK;
}

/* The loaded model tensors must have exactly expected's names, shapes, dtypes. */
static td_status check_tensors(const td_named_tensors *got, const td_named_tensors *expected, const char *path) {
    for (int64_t i = 0; i < td_named_tensors_len(expected); i++) {
        const char *n = td_named_tensors_name(expected, i);
        td_tensor *want = td_named_tensors_at(expected, i), *t = td_named_tensors_get(got, n);
        if (!t) return TD_ERR(TD_ERR_FORMAT, "checkpoint %s lacks model.%s (a different model?)", path, n);
        char a[160], b[160];
        td__shape_str(td_ndim(t), td_shape(t), a, sizeof a);
        td__shape_str(td_ndim(want), td_shape(want), b, sizeof b);
        if (strcmp(a, b))
            return TD_ERR(TD_ERR_FORMAT, "checkpoint %s: model.%s has shape %s, expected %s", path, n, a, b);
        if (td_tensor_dtype(t) != td_tensor_dtype(want))
            return TD_ERR(TD_ERR_DTYPE, "checkpoint %s: model.%s has dtype %s, expected %s", path, n,
                          td_dtype_name(td_tensor_dtype(t)), td_dtype_name(td_tensor_dtype(want)));
    }
    for (int64_t i = 0; i < td_named_tensors_len(got); i++)
        if (!td_named_tensors_get(expected, td_named_tensors_name(got, i))) {
            char n[1024];
            snprintf(n, sizeof n, "model.%s", td_named_tensors_name(got, i));
            return TD_ERR(TD_ERR_FORMAT, "checkpoint %s has unexpected tensor %s (a different model?)", path,
                          TD_QUOTE(n));
        }
    return TD_OK;
}

/* path is the file's name, quoted for messages. */
static td_status load_into(const td_named_tensors *all, const char *path, const char *expected_model,
                           const td_named_tensors *expected, td_train_state *ck) {
    const char *fmt = td_named_tensors_meta(all, "format"), *model = td_named_tensors_meta(all, "model");
    if (!fmt || strcmp(fmt, CKPT_FORMAT))
        return TD_ERR(TD_ERR_FORMAT, "checkpoint %s: metadata format is %s, expected '%s'", path,
                      fmt ? TD_QUOTE(fmt) : "missing", CKPT_FORMAT);
    if (!model || strlen(model) >= sizeof ck->model_name)
        return TD_ERR(TD_ERR_FORMAT, "checkpoint %s: missing or overlong model name", path);
    if (expected_model && strcmp(model, expected_model))
        return TD_ERR(TD_ERR_FORMAT, "checkpoint %s: model %s expected, checkpoint holds %s", path,
                      TD_QUOTE(expected_model), TD_QUOTE(model));
    strcpy(ck->model_name, model);
    td_status st = meta_number(all, path, "step", true, &ck->step);
    if (st == TD_OK) st = meta_number(all, path, "epoch", true, &ck->epoch);
    if (st == TD_OK) st = meta_number(all, path, "rng_seed", false, &ck->rng.seed);
    if (st == TD_OK) st = meta_number(all, path, "rng_offset", false, &ck->rng.offset);
    if (st == TD_OK) {
        ck->model = td_named_tensors_new();
        ck->optim = td_named_tensors_new();
        st = ck->model && ck->optim ? split(all, ck, path) : td_last_status();
    }
    if (st == TD_OK && expected) st = check_tensors(ck->model, expected, path);
    return st;
}

td_status td_train_state_load(const char *path, td_device dev, const char *expected_model,
                              const td_named_tensors *expected, td_train_state *out) {
    if (!out) return TD_ERR(TD_ERR_MISUSE, "checkpoint_load: out is NULL");
    memset(out, 0, sizeof *out);
    td_named_tensors *all = NULL;
    td_status st = td_safetensors_load(path, dev, &all);
    if (st == TD_OK) st = load_into(all, TD_QUOTE(path), expected_model, expected, out);
    td_named_tensors_free(all);
    if (st != TD_OK) td_train_state_clear(out);
    return st;
}

void td_train_state_clear(td_train_state *ck) {
    if (!ck) return;
    td_named_tensors_free(ck->model);
    td_named_tensors_free(ck->optim);
    ck->model = ck->optim = NULL;
}
