/*
** GPT-2 in Hugging Face's layout (src/workloads/hf_gpt2.c): a tiny
** GPT2LMHeadModel state dict written by torch 1.13
** (tests/fixtures/make_torch_fixtures.py, 2 layers, C 64, 4 heads, vocab 100,
** 64 positions, tied head) imported into the gpt workload; its logits and one
** SGD step's losses against the fixture's plain-torch reference of HF's math,
** and the export back to HF's layout re-imported bit for bit.
*/
#include <math.h>

#include "test_util.h"
#include "trident/io.h"
#include "workloads.h"

/* clang-format off */
#define TESTS(X) X(config_from_shapes) X(logits_and_step) X(export_roundtrip) X(bad_layout)
/* clang-format on */

#define TOL 1e-4

static const char *fixture(const char *name) {
    static char path[2][1024];
    static int k;
    k ^= 1;
    snprintf(path[k], sizeof path[k], "%s/%s", TD_TORCH_FIXTURES, name);
    return path[k];
}

/* The fixture imported: *cfg and the gpt workload (SGD, lr 0.1) holding its weights. */
static td_named_tensors *import(workload_gpt_config *cfg, workload *w) {
    td_named_tensors *hf = NULL, *sd = NULL;
    ASSERT_OK(td_weights_load(fixture("gpt2_tiny.bin"), TD_CPU, &hf));
    ASSERT(workload_gpt2_hf_detect(hf));
    ASSERT_OK(workload_gpt2_from_hf(hf, 4, cfg, &sd));
    if (w) {
        td_manual_seed(0);
        ASSERT_OK(workload_init(w, WORKLOAD_GPT, cfg, TD_CPU, "sgd", 0.1, false));
        ASSERT_OK(td_module_load_state_dict(w->model, sd, true));
    }
    td_named_tensors_free(sd);
    return hf;
}

TEST(config_from_shapes) {
    workload_gpt_config cfg;
    td_named_tensors *hf = import(&cfg, NULL);
    ASSERT_EQ_INT(cfg.vocab, 100);
    ASSERT_EQ_INT(cfg.d_model, 64);
    ASSERT_EQ_INT(cfg.layers, 2);
    ASSERT_EQ_INT(cfg.context, 64);
    ASSERT_EQ_INT(cfg.heads, 4);
    ASSERT(cfg.gpt2);
    td_named_tensors *sd = NULL;
    ASSERT_OK(workload_gpt2_from_hf(hf, 0, &cfg, &sd)); /* heads unknown: GPT-2's head size 64 */
    ASSERT_EQ_INT(cfg.heads, 1);
    td_named_tensors_free(sd);
    td_named_tensors_free(hf);
}

TEST(logits_and_step) {
    workload_gpt_config cfg;
    workload w;
    td_named_tensors *hf = import(&cfg, &w), *ref = NULL;
    ASSERT_OK(td_safetensors_load(fixture("gpt2_ref.safetensors"), TD_CPU, &ref));
    td_tensor *x = td_named_tensors_get(ref, "x"), *y = td_named_tensors_get(ref, "y");
    int64_t n = td_numel(td_named_tensors_get(ref, "logits"));
    float *got = malloc((size_t)n * sizeof *got), *want = malloc((size_t)n * sizeof *want), loss[2];
    td_scope_begin();
    td_tensor *logits = ASSERT_TENSOR(td_module_forward(w.model, x));
    ASSERT_EQ_INT(td_numel(logits), n);
    ASSERT_OK(td_copy_to_host(logits, got, (size_t)n * sizeof *got, TD_F32));
    td_scope_end();
    ASSERT_OK(td_copy_to_host(td_named_tensors_get(ref, "logits"), want, (size_t)n * sizeof *want, TD_F32));
    ASSERT_OK(td_copy_to_host(td_named_tensors_get(ref, "loss"), loss, sizeof loss, TD_F32));
    double worst = 0;
    for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)got[i] - want[i]));
    printf("  logits: max |trident - reference| = %.3g over %lld\n", worst, (long long)n);
    ASSERT(worst <= TOL);
    double l0, sum = 0;
    int64_t correct = 0, count = 0;
    ASSERT_OK(workload_train_step(&w, x, y, &l0));
    ASSERT_NEAR(l0, loss[0], TOL);
    ASSERT_OK(workload_eval_batch(&w, x, y, &sum, &correct, &count));
    printf("  loss %.6f (reference %.6f), after one SGD step %.6f (reference %.6f)\n", l0, loss[0], sum / count,
           loss[1]);
    ASSERT_NEAR(sum / (double)count, loss[1], TOL);
    ASSERT(sum / (double)count < l0 - 1e-3); /* the step moved the tied weights: a test that can fail */
    free(got);
    free(want);
    workload_free(&w);
    td_named_tensors_free(ref);
    td_named_tensors_free(hf);
}

/* Every tensor of a named in b, with the same shape, dtype and bytes. */
static void assert_bit_equal(const td_named_tensors *a, const td_named_tensors *b) {
    for (int64_t i = 0; i < td_named_tensors_len(a); i++) {
        const char *name = td_named_tensors_name(a, i);
        td_tensor *x = td_named_tensors_at(a, i), *z = td_named_tensors_get(b, name);
        if (!z) TEST_FAIL_("%s is missing", name);
        ASSERT_EQ_INT(td_tensor_dtype(x), td_tensor_dtype(z));
        ASSERT_EQ_INT(td_ndim(x), td_ndim(z));
        for (int d = 0; d < td_ndim(x); d++) ASSERT_EQ_INT(td_size(x, d), td_size(z, d));
        size_t nb = (size_t)td_numel(x) * td_dtype_size(td_tensor_dtype(x));
        char *hx = malloc(nb), *hz = malloc(nb);
        ASSERT_OK(td_copy_to_host(x, hx, nb, td_tensor_dtype(x)));
        ASSERT_OK(td_copy_to_host(z, hz, nb, td_tensor_dtype(z)));
        if (memcmp(hx, hz, nb)) TEST_FAIL_("%s differs", name);
        free(hx);
        free(hz);
    }
}

TEST(export_roundtrip) {
    workload_gpt_config cfg, cfg2;
    workload w;
    td_named_tensors *hf = import(&cfg, &w), *sd = td_module_state_dict(w.model), *out = NULL, *back = NULL,
                     *sd2 = NULL;
    ASSERT_OK(workload_gpt2_to_hf(sd, cfg.layers, &out));
    ASSERT(td_named_tensors_get(out, "transformer.h.1.attn.c_attn.weight") != NULL);
    ASSERT(td_named_tensors_get(out, "lm_head.weight") == NULL); /* tied, as HF's safetensors store it */
    const char *path = test_tmp_path("gpt2_export.safetensors");
    ASSERT_OK(td_safetensors_save(path, out));
    ASSERT_OK(td_weights_load(path, TD_CPU, &back));
    assert_bit_equal(back, hf); /* the export equals the torch file's own tensors */
    ASSERT_OK(workload_gpt2_from_hf(back, 4, &cfg2, &sd2));
    assert_bit_equal(sd2, sd); /* and imports back to the model's */
    ASSERT_EQ_INT(td_named_tensors_len(sd2), td_named_tensors_len(sd));
    td_named_tensors_free(sd);
    td_named_tensors_free(sd2);
    td_named_tensors_free(out);
    td_named_tensors_free(back);
    td_named_tensors_free(hf);
    workload_free(&w);
}

TEST(bad_layout) {
    workload_gpt_config cfg;
    td_named_tensors *hf = import(&cfg, NULL), *sd = (td_named_tensors *)1;
    ASSERT_OK(td_named_tensors_remove(hf, "transformer.h.1.mlp.c_fc.bias"));
    ASSERT_ERROR(workload_gpt2_from_hf(hf, 4, &cfg, &sd), TD_ERR_FORMAT, "lacks (transformer.)h.1.mlp.c_fc.bias");
    ASSERT(sd == NULL);
    ASSERT_ERROR(workload_gpt2_from_hf(hf, 5, &cfg, &sd), TD_ERR_MISUSE, "not a multiple of 5 heads");
    td_named_tensors_free(hf);
}

TEST_MAIN(TESTS)
