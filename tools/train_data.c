/*
** trident train's data: Fashion-MNIST for mlp and cnn, a text file's bytes for
** gpt (or llm.c's token ids, --tokens), and the held-out evaluation of each.
*/
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>

#include "train.h"

#define TEXT_SEED_MIX     0xD1B54A32D192ED03ull /* the windows' stream, apart from the init stream */
#define EVAL_BATCH        1000                  /* test images per evaluation batch */
#define EVAL_TEXT_BATCHES 4                     /* held-out windows: at most 4 batches */

int train_images_load(train_run *r, const char *dir, int64_t limit) {
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return train_fail("dataset directory %s not found (--data DIR with the Fashion-MNIST *-ubyte.gz files; "
                          "Debian package dataset-fashion-mnist)",
                          TD_QUOTE(dir));
    if (td_mnist_load(dir, true, true, &r->x_train, &r->y_train) != TD_OK ||
        td_mnist_load(dir, false, true, &r->x_test, &r->y_test) != TD_OK)
        return train_fail("%s", td_last_error());
    if (limit > 0 && limit < td_size(r->x_train, 0)) {
        td_tensor *x = td_slice(r->x_train, 0, 0, limit, 1), *y = td_slice(r->y_train, 0, 0, limit, 1);
        td_release(r->x_train);
        td_release(r->y_train);
        r->x_train = x, r->y_train = y;
    }
    td_tensor *xy[2] = {r->x_train, r->y_train};
    if (td_tensor_dataset_new(2, xy, &r->ds) != TD_OK) return train_fail("%s", td_last_error());
    return 0;
}

int train_text_load(train_run *r, const char *path, int64_t context) {
    FILE *f = fopen(path, "rb");
    if (!f) return train_fail("cannot open text file %s: %s", TD_QUOTE(path), strerror(errno));
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    for (size_t got = 1; buf && got;) {
        if (n == cap) {
            unsigned char *grown = realloc(buf, cap *= 2);
            if (!grown) free(buf);
            buf = grown;
            if (!buf) break;
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
    }
    bool bad = ferror(f);
    fclose(f);
    if (!buf) return train_fail("out of host memory reading %s", TD_QUOTE(path));
    if (bad) return free(buf), train_fail("cannot read text file %s", TD_QUOTE(path));
    r->text = buf;
    r->n_text = (int64_t)n;
    r->n_train = r->n_text - r->n_text / 10;
    if (r->n_text / 10 < context + 1)
        return train_fail("text file %s has %" PRId64 " bytes; --context %" PRId64 " needs at least %" PRId64
                          " (10%% are held out)",
                          TD_QUOTE(path), r->n_text, context, 10 * (context + 1));
    return 0;
}

int train_tokens_load(train_run *r, const char *path, int64_t context, int64_t vocab) {
    if (td_llmc_tokens_load(path, &r->tokens, &r->n_text) != TD_OK) return train_fail("%s", td_last_error());
    for (int64_t i = 0; i < r->n_text; i++)
        if (r->tokens[i] >= vocab)
            return train_fail("token file %s: token %" PRId64 " is %u, outside the model's vocabulary of %" PRId64
                              " (--vocab)",
                              TD_QUOTE(path), i, r->tokens[i], vocab);
    r->n_train = r->n_text - r->n_text / 10;
    if (r->n_text / 10 < context + 1)
        return train_fail("token file %s has %" PRId64 " tokens; --context %" PRId64 " needs at least %" PRId64
                          " (10%% are held out)",
                          TD_QUOTE(path), r->n_text, context, 10 * (context + 1));
    return 0;
}

/* Id i of the gpt's sequence: a byte of the text, or an llm.c token. */
static int64_t seq_at(const train_run *r, int64_t i) { return r->tokens ? r->tokens[i] : r->text[i]; }

/* Host memory for the token ids and targets of a b x t batch (the options
** bound 2*b*t*8 bytes to int64); TD_ERR_OOM naming the bytes on failure. A
** request beyond RAM + swap is refused without trying: AddressSanitizer's
** allocator aborts on it instead of returning NULL. */
static int64_t *batch_ids_alloc(int64_t b, int64_t t) {
    uint64_t bytes = 2 * (uint64_t)b * (uint64_t)t * sizeof(int64_t);
    struct sysinfo si;
    bool fits = sysinfo(&si) != 0 || bytes <= ((uint64_t)si.totalram + si.totalswap) * si.mem_unit;
    int64_t *ids = fits ? malloc((size_t)bytes) : NULL;
    if (!ids)
        td_error_set(TD_ERR_OOM, "out of host memory: a %" PRId64 "x%" PRId64 " batch needs %" PRIu64 " bytes", b, t,
                     bytes);
    return ids;
}

td_status train_text_batch(const train_run *r, int64_t step, td_tensor **x, td_tensor **y) {
    int64_t b = r->batch, t = r->w.gpt.context, span = r->n_train - t; /* window starts in [0, span) */
    int64_t *ids = batch_ids_alloc(b, t);
    if (!ids) return td_last_status();
    /* data-parallel: this rank's rows [rank * b, (rank + 1) * b) of the step's world * b */
    int64_t first = step * b * r->world + (int64_t)r->rank * b;
    for (int64_t i = 0; i < b; i++) {
        uint32_t w[4];
        td_philox4x32(r->seed ^ TEXT_SEED_MIX, (uint64_t)(first + i), w);
        int64_t start = (int64_t)((((uint64_t)w[1] << 32) | w[0]) % (uint64_t)span);
        for (int64_t j = 0; j < t; j++) {
            ids[i * t + j] = seq_at(r, start + j);
            ids[b * t + i * t + j] = seq_at(r, start + j + 1);
        }
    }
    int64_t shape[2] = {b, t};
    *x = td_from_data(ids, 2, shape, TD_I64, r->w.device);
    *y = td_from_data(ids + b * t, 2, shape, TD_I64, r->w.device);
    free(ids);
    return *x && *y ? TD_OK : td_last_status();
}

/* Held-out windows of the text: context + 1 bytes from n_train + i*context. */
static td_status eval_text(train_run *r, double *loss_sum, int64_t *correct, int64_t *count) {
    int64_t t = r->w.gpt.context, b = r->batch;
    int64_t n_win = (r->n_text - r->n_train - 1) / t;
    if (n_win > EVAL_TEXT_BATCHES * b) n_win = EVAL_TEXT_BATCHES * b;
    int64_t *ids = batch_ids_alloc(b, t);
    if (!ids) return td_last_status();
    td_status st = TD_OK;
    for (int64_t w0 = 0; w0 < n_win && st == TD_OK; w0 += b) {
        int64_t nb = n_win - w0 < b ? n_win - w0 : b;
        for (int64_t i = 0; i < nb; i++)
            for (int64_t j = 0; j < t; j++) {
                int64_t at = r->n_train + (w0 + i) * t + j;
                ids[i * t + j] = seq_at(r, at);
                ids[nb * t + i * t + j] = seq_at(r, at + 1);
            }
        td_scope_begin();
        int64_t shape[2] = {nb, t};
        td_tensor *x = td_from_data(ids, 2, shape, TD_I64, r->w.device);
        td_tensor *y = td_from_data(ids + nb * t, 2, shape, TD_I64, r->w.device);
        st = x && y ? workload_eval_batch(&r->w, x, y, loss_sum, correct, count) : td_last_status();
        td_scope_end();
    }
    free(ids);
    return st;
}

static td_status eval_images(train_run *r, double *loss_sum, int64_t *correct, int64_t *count) {
    td_status st = TD_OK;
    int64_t n = td_size(r->x_test, 0);
    for (int64_t i = 0; i < n && st == TD_OK; i += EVAL_BATCH) {
        td_scope_begin();
        td_tensor *x = td_to(td_slice(r->x_test, 0, i, i + EVAL_BATCH, 1), r->w.device);
        td_tensor *y = td_to(td_slice(r->y_test, 0, i, i + EVAL_BATCH, 1), r->w.device);
        st = x && y ? workload_eval_batch(&r->w, x, y, loss_sum, correct, count) : td_last_status();
        td_scope_end();
    }
    return st;
}

int train_evaluate(train_run *r, double *loss, double *acc) {
    double loss_sum = 0;
    int64_t correct = 0, count = 0;
    td_status st =
        r->text || r->tokens ? eval_text(r, &loss_sum, &correct, &count) : eval_images(r, &loss_sum, &correct, &count);
    if (st != TD_OK) return train_fail("evaluation: %s", td_last_error());
    *loss = count ? loss_sum / (double)count : 0;
    *acc = count ? (double)correct / (double)count : 0;
    return 0;
}

void train_data_free(train_run *r) {
    td_dataloader_free(r->dl);
    td_dataset_free(r->ds);
    td_release(r->x_train);
    td_release(r->y_train);
    td_release(r->x_test);
    td_release(r->y_test);
    free(r->text);
    free(r->tokens);
    r->dl = NULL, r->ds = NULL, r->text = NULL, r->tokens = NULL;
    r->x_train = r->y_train = r->x_test = r->y_test = NULL;
}
