/*
** libFuzzer: the checkpoint resume path. td_train_state_load against a small
** model's state dict (Linear 4-3, Adam), then, as a resume does, the model's
** td_module_load_state_dict and the optimizer's td_optimizer_load_state_dict.
** TD_FUZZ_SEED_OUT=path writes a valid checkpoint of that model after one
** step (the seed in corpus/checkpoint/) and exits.
*/
#include "fuzz_util.h"

static td_module *model;
static td_optimizer *opt;
static td_named_tensors *expected;

/* One step of the model on a fixed batch, then its checkpoint at path. */
static void write_seed(const char *path) {
    td_scope_begin();
    td_tensor *x = td_rand(2, (int64_t[]){2, 4}, 1, 0, TD_F32, TD_CPU);
    td_tensor *l = td_sum(td_module_forward(model, x), 0, NULL, false);
    td_train_state ck = {.model = expected, .step = 1, .epoch = 0};
    snprintf(ck.model_name, sizeof ck.model_name, "tiny");
    if (l && td_backward(l, NULL, false) == TD_OK && td_optimizer_step(opt) == TD_OK)
        ck.optim = td_optimizer_state_dict(opt);
    ck.rng = td_rng_get_state();
    if (!ck.optim || td_train_state_save(path, &ck) != TD_OK) {
        fprintf(stderr, "fuzz_checkpoint: cannot write the seed: %s\n", td_last_error());
        exit(1);
    }
    td_named_tensors_free(ck.optim);
    td_scope_end();
    exit(0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_setup();
    td_manual_seed(1);
    model = td_linear_new(4, 3, true);
    td_tensor *params[2];
    int n = model ? td_module_parameters(model, params, 2) : 0;
    td_optim_options o = td_adam_defaults(1e-3);
    opt = n == 2 ? td_adam_new(n, params, &o) : NULL;
    expected = model ? td_module_state_dict(model) : NULL;
    if (!opt || !expected) {
        fprintf(stderr, "fuzz_checkpoint: setup failed: %s\n", td_last_error());
        exit(1);
    }
    const char *seed = getenv("TD_FUZZ_SEED_OUT");
    if (seed) write_seed(seed);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    td_train_state ck = {0};
    if (td_train_state_load(fuzz_file(data, n), TD_CPU, "tiny", expected, &ck) != TD_OK) return 0;
    if (td_module_load_state_dict(model, ck.model, true) == TD_OK) td_optimizer_load_state_dict(opt, ck.optim);
    td_train_state_clear(&ck);
    return 0;
}
