/*
** llm.c token files (td_llmc_tokens_load) and the gpt batches `trident train
** --tokens` makes from them (tools/train_data.c, linked in): a file written
** here in llm.c's layout, read back by a reference reader of a few lines, must
** give exactly the batches' windows; bad files are refused with one line.
*/
#include <inttypes.h>
#include <stdarg.h>

#include "test_util.h"
#include "train.h"

/* clang-format off */
#define TESTS(X) X(read_back) X(batches_match_reference) X(bad_magic) X(bad_size) X(bad_version) X(token_over_vocab)
/* clang-format on */

#define N_TOK    4000
#define TEXT_MIX 0xD1B54A32D192ED03ull /* train_data.c's TEXT_SEED_MIX: the windows' Philox stream */

int train_fail(const char *fmt, ...) { /* tools/train.c's, which this test does not link */
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 1;
}

/* An llm.c token file: header {magic, version, n}, then n ids (i * 7919 + 13) % 50257. */
static const char *write_tokens(const char *name, int32_t magic, int32_t version, int32_t n, int32_t claimed) {
    int32_t h[256] = {magic, version, claimed};
    uint16_t *t = malloc((size_t)n * 2 + 2);
    for (int32_t i = 0; i < n; i++) t[i] = (uint16_t)(((int64_t)i * 7919 + 13) % 50257);
    const char *p = test_tmp_path(name);
    FILE *f = fopen(p, "wb");
    ASSERT(f && fwrite(h, 4, 256, f) == 256 && fwrite(t, 2, (size_t)n, f) == (size_t)n && !fclose(f));
    free(t);
    return p;
}

/* The reference reader: llm.c's _peek_data_shard / _load_data_shard in C. */
static uint16_t *ref_read(const char *path, int64_t *n) {
    FILE *f = fopen(path, "rb");
    int32_t h[256];
    ASSERT(f && fread(h, 4, 256, f) == 256 && h[0] == 20240520 && h[1] == 1);
    uint16_t *t = malloc((size_t)h[2] * 2);
    ASSERT(fread(t, 2, (size_t)h[2], f) == (size_t)h[2]);
    fclose(f);
    *n = h[2];
    return t;
}

TEST(read_back) {
    const char *p = write_tokens("tok.bin", 20240520, 1, N_TOK, N_TOK);
    uint16_t *t = NULL, *ref;
    int64_t n = 0, nref;
    ASSERT_OK(td_llmc_tokens_load(p, &t, &n));
    ref = ref_read(p, &nref);
    ASSERT_EQ_INT(n, nref);
    ASSERT(!memcmp(t, ref, (size_t)n * 2));
    free(t);
    free(ref);
}

TEST(batches_match_reference) {
    const char *p = write_tokens("tok.bin", 20240520, 1, N_TOK, N_TOK);
    train_run r = {.world = 1, .seed = 5, .batch = 4};
    r.w.gpt = (workload_gpt_config){.vocab = 50257, .d_model = 8, .heads = 2, .layers = 1, .context = 16};
    r.w.device = TD_CPU;
    ASSERT_EQ_INT(train_tokens_load(&r, p, 16, 50257), 0);
    int64_t nref;
    uint16_t *ref = ref_read(p, &nref);
    ASSERT_EQ_INT(r.n_train, nref - nref / 10);
    for (int64_t step = 0; step < 3; step++) {
        td_tensor *x, *y;
        ASSERT_OK(train_text_batch(&r, step, &x, &y));
        int64_t hx[4 * 16], hy[4 * 16];
        ASSERT_OK(td_copy_to_host(x, hx, sizeof hx, TD_I64));
        ASSERT_OK(td_copy_to_host(y, hy, sizeof hy, TD_I64));
        for (int64_t i = 0; i < 4; i++) {
            uint32_t w[4];
            td_philox4x32(r.seed ^ TEXT_MIX, (uint64_t)(step * 4 + i), w);
            int64_t start = (int64_t)((((uint64_t)w[1] << 32) | w[0]) % (uint64_t)(r.n_train - 16));
            for (int64_t j = 0; j < 16; j++) {
                ASSERT_EQ_INT(hx[i * 16 + j], ref[start + j]);
                ASSERT_EQ_INT(hy[i * 16 + j], ref[start + j + 1]);
            }
        }
        td_release(x);
        td_release(y);
    }
    free(ref);
    train_data_free(&r);
}

static void refuse(const char *path, td_status st, const char *substr) {
    uint16_t *t = (uint16_t *)1;
    int64_t n = 5;
    ASSERT_ERROR(td_llmc_tokens_load(path, &t, &n), st, substr);
    ASSERT(t == NULL && n == 0);
}

TEST(bad_magic) { refuse(write_tokens("m.bin", 20240521, 1, 10, 10), TD_ERR_FORMAT, "has magic 20240521"); }
TEST(bad_size) { refuse(write_tokens("s.bin", 20240520, 1, 10, 11), TD_ERR_FORMAT, "header counts 11 tokens"); }
TEST(bad_version) { refuse(write_tokens("v.bin", 20240520, 2, 10, 10), TD_ERR_UNSUPPORTED, "version 2"); }

TEST(token_over_vocab) {
    train_run r = {.world = 1};
    ASSERT_EQ_INT(train_tokens_load(&r, write_tokens("tok.bin", 20240520, 1, 100, 100), 4, 256), 1);
    train_data_free(&r);
}

TEST_MAIN(TESTS)
