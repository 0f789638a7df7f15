/*
** ONNX export (src/io/onnx_export.c, protobuf_writer.c): the protobuf writer's
** bytes against hand-checked encodings; W1 (MLP), W2 (CNN) and W3 (a small
** GPT) with random weights exported and run in onnxruntime
** (tests/test_onnx_check.py; skipped when it is not installed), whose outputs
** must equal Trident's within 1e-5 (fp32, relative plus absolute); LSTM, GRU
** and RNN layers as ONNX's recurrent operators the same way; and the
** one-line error for an op with no ONNX mapping.
*/
#include "../src/io/protobuf_writer.h"
#include "runner.h"
#include "test_util.h"
#include "workloads/workloads.h"

#define TESTS(X) X(protobuf_bytes) X(mlp) X(cnn) X(gpt) X(recurrent) X(unsupported_op) X(cli)

/* ---- the protobuf writer ---- */

TEST(protobuf_bytes) {
    td__pb b = {0};
    td__pb_int(&b, 1, 150);          /* key 1<<3|0 = 08; 150 = 0x96 0x01 */
    td__pb_string(&b, 2, "testing"); /* key 12, length 07, the bytes */
    size_t at = td__pb_begin(&b, 3); /* key 1a, length 03, then field 1 = 150 */
    td__pb_int(&b, 1, 150);
    td__pb_end(&b, at);
    td__pb_int(&b, 4, -1);     /* key 20, ten bytes of two's complement */
    td__pb_float(&b, 5, 1.0f); /* key 2d, 1.0f little-endian */
    at = td__pb_begin(&b, 16); /* key 16<<3|2 = 130 = 0x82 0x01; an empty message: length 00 */
    td__pb_end(&b, at);
    static const unsigned char want[] = {0x08, 0x96, 0x01, 0x12, 0x07, 't',  'e',  's',  't',  'i',  'n',  'g',
                                         0x1a, 0x03, 0x08, 0x96, 0x01, 0x20, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                         0xff, 0xff, 0xff, 0x01, 0x2d, 0x00, 0x00, 0x80, 0x3f, 0x82, 0x01, 0x00};
    ASSERT(!b.failed);
    ASSERT_EQ_INT(b.len, sizeof want);
    for (size_t i = 0; i < sizeof want; i++)
        if (b.data[i] != want[i]) TEST_FAIL_("byte %zu: 0x%02x, expected 0x%02x", i, b.data[i], want[i]);
    /* a body of 300 bytes: its length takes two bytes (0xac 0x02), the body moves up by them */
    td__pb c = {0};
    char s[301];
    memset(s, 'x', 300), s[300] = 0;
    at = td__pb_begin(&c, 1);
    td__pb_raw(&c, s, 300);
    td__pb_end(&c, at);
    ASSERT_EQ_INT(c.len, 303);
    ASSERT(c.data[0] == 0x0a && c.data[1] == 0xac && c.data[2] == 0x02 && c.data[3] == 'x' && c.data[302] == 'x');
    td__pb_free(&b);
    td__pb_free(&c);
}

/* ---- round trips through onnxruntime ---- */

/* Export m traced on x, run the model in onnxruntime on x, compare with m(x). */
static void round_trip(td_module *m, td_tensor *x, const char *name) {
    td_module_eval(m);
    td_no_grad_begin();
    td_tensor *y = ASSERT_TENSOR(td_module_forward(m, x));
    td_no_grad_end();
    td_module_train(m, true);
    char file[64];
    snprintf(file, sizeof file, "%s.onnx", name);
    const char *model = test_tmp_path(file), *in = test_tmp_path("in.bin"), *out = test_tmp_path("out.bin");
    ASSERT_OK(td_onnx_export(m, 1, &x, model));
    ASSERT(td_module_is_training(m)); /* the flag is restored */
    size_t nx = (size_t)td_numel(x) * td_dtype_size(td_tensor_dtype(x)), ny = (size_t)td_numel(y) * sizeof(float);
    void *hx = malloc(nx), *hy = malloc(ny);
    ASSERT(hx && hy);
    ASSERT_OK(td_copy_to_host(x, hx, nx, td_tensor_dtype(x)));
    ASSERT_OK(td_copy_to_host(y, hy, ny, TD_F32));
    test_write_file(in, hx, nx);
    test_write_file(out, hy, ny);
    free(hx), free(hy);
    char shape[128] = "";
    for (int d = 0; d < td_ndim(x); d++)
        snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", d ? "," : "", (long long)td_size(x, d));
    int rc =
        test_sh("PYTHONPATH=%s/.deps/onnxruntime${PYTHONPATH:+:$PYTHONPATH} %s %s/tests/test_onnx_check.py %s %s %s "
                "%s %s",
                TD_SOURCE_DIR, TD_PYTHON3, TD_SOURCE_DIR, model, in, td_dtype_name(td_tensor_dtype(x)), shape, out);
    if (rc == TEST_SKIP_CODE) TEST_SKIP("onnxruntime is not installed (scripts/install-deps)");
    if (rc == 127) TEST_SKIP("the configured python (%s) is not on this machine", TD_PYTHON3);
    ASSERT_EQ_INT(rc, 0);
}

TEST(mlp) {
    td_scope_begin(); /* the helpers' tensors are scope-owned */
    td_manual_seed(1);
    td_module *m = workload_mlp_new();
    ASSERT(m);
    round_trip(m, test_uniform_tensor(2, (int64_t[]){3, 784}, 0, 1, TD_F32, TD_CPU), "mlp");
    td_scope_end();
    td_module_free(m);
}

TEST(cnn) {
    td_scope_begin(); /* the helpers' tensors are scope-owned */
    td_manual_seed(2);
    td_module *m = workload_cnn_new();
    ASSERT(m);
    round_trip(m, test_uniform_tensor(2, (int64_t[]){2, 784}, 0, 1, TD_F32, TD_CPU), "cnn");
    td_scope_end();
    td_module_free(m);
}

TEST(gpt) {
    td_scope_begin(); /* the helpers' tensors are scope-owned */
    td_manual_seed(3);
    workload_gpt_config cfg = {.vocab = 256, .d_model = 64, .heads = 4, .layers = 2, .context = 16};
    td_module *m = workload_gpt_new(&cfg);
    ASSERT(m);
    int64_t ids[2 * 12];
    for (int i = 0; i < 24; i++) ids[i] = test_int(256);
    round_trip(m, ASSERT_TENSOR(td_from_data(ids, 2, (int64_t[]){2, 12}, TD_I64, TD_CPU)), "gpt");
    td_scope_end();
    td_module_free(m);
}

/* LSTM, GRU and RNN as ONNX's LSTM/GRU/RNN operators (gates reordered, GRU's linear_before_reset): 1 and 2
** layers, one and two directions, batch_first or not, with and without bias, relu RNN; dropout 0.3 is off in
** the eval-mode export. */
TEST(recurrent) {
    struct {
        const char *name;
        int kind, layers; /* kind 0 LSTM, 1 GRU, 2 RNN relu */
        bool bias, batch_first, bidir;
    } cases[] = {{"lstm1", 0, 1, true, false, false},        {"lstm2_bi_bf", 0, 2, true, true, true},
                 {"lstm2_nobias", 0, 2, false, false, true}, {"gru1_bf", 1, 1, true, true, false},
                 {"gru2_bi", 1, 2, true, false, true},       {"rnn_relu2_bi", 2, 2, true, true, true}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        fprintf(stderr, "  %s\n", cases[i].name);
        td_scope_begin(); /* the helpers' tensors are scope-owned */
        td_manual_seed(4 + i);
        int L = cases[i].layers;
        bool b = cases[i].bias, bf = cases[i].batch_first, bi = cases[i].bidir;
        td_module *m = cases[i].kind == 0   ? td_lstm_new(5, 6, L, b, bf, 0.3, bi)
                       : cases[i].kind == 1 ? td_gru_new(5, 6, L, b, bf, 0.3, bi)
                                            : td_rnn_new(5, 6, L, TD_RNN_RELU, b, bf, 0.3, bi);
        ASSERT(m);
        int64_t shape[3] = {bf ? 3 : 7, bf ? 7 : 3, 5};
        round_trip(m, test_uniform_tensor(3, shape, -1, 1, TD_F32, TD_CPU), cases[i].name);
        td_scope_end();
        td_module_free(m);
    }
    /* W6's model (Embedding, 2-layer batch_first LSTM, Linear head), narrower */
    td_scope_begin();
    td_manual_seed(11);
    td_module *w6 = workload_lstm_new(256, 32, 2);
    ASSERT(w6);
    int64_t ids[2 * 9];
    for (int i = 0; i < 18; i++) ids[i] = test_int(256);
    round_trip(w6, ASSERT_TENSOR(td_from_data(ids, 2, (int64_t[]){2, 9}, TD_I64, TD_CPU)), "w6");
    td_scope_end();
    td_module_free(w6);
}

/* ---- an op with no mapping ---- */

static td_tensor *loss_forward(td_module *self, td_tensor *x) {
    (void)self;
    int64_t t[2] = {1, 0};
    td_tensor *target = td_from_data(t, 1, (int64_t[]){2}, TD_I64, TD_CPU);
    return td_cross_entropy_loss(x, target, NULL, -100, 0.0, TD_REDUCE_MEAN);
}

TEST(unsupported_op) {
    td_scope_begin(); /* the helpers' tensors are scope-owned */
    td_module *m = td_module_new("Loss", loss_forward, NULL, NULL);
    ASSERT(m);
    td_tensor *x = test_uniform_tensor(2, (int64_t[]){2, 3}, -1, 1, TD_F32, TD_CPU);
    const char *path = test_tmp_path("loss.onnx");
    ASSERT_EQ_INT(td_onnx_export(m, 1, &x, path), TD_ERR_UNSUPPORTED);
    ASSERT(!strcmp(td_last_error(), "onnx export: op cross_entropy has no ONNX mapping"));
    ASSERT(access(path, F_OK) != 0); /* nothing written */
    ASSERT_EQ_INT(td_onnx_export(m, 2, &x, path), TD_ERR_MISUSE);
    td_scope_end();
    td_module_free(m);
}

/* ---- trident export from a trident train checkpoint ---- */

TEST(cli) {
    const char *text = test_tmp_path("text.txt"), *ck = test_tmp_path("gpt.safetensors"),
               *model = test_tmp_path("cli.onnx");
    char buf[4096];
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (char)('a' + (i * 7) % 26);
    test_write_file(text, buf, sizeof buf);
    const char *size = "--model gpt --layers 1 --d-model 32 --heads 2 --context 8";
    ASSERT_EQ_INT(
        test_sh("%s train %s --text %s --batch 2 --steps 2 --epochs 1 --checkpoint %s --device cpu >/dev/null",
                TD_TRIDENT, size, text, ck),
        0);
    ASSERT_EQ_INT(test_sh("%s export %s --checkpoint %s --onnx %s --batch 2 --seq 8", TD_TRIDENT, size, ck, model), 0);
    size_t n;
    free(test_read_file(model, &n));
    ASSERT(n > 1000);
    /* W6 (--model lstm, its fixed size) the same way */
    const char *ck6 = test_tmp_path("lstm.safetensors");
    ASSERT_EQ_INT(test_sh("%s train --model lstm --context 8 --text %s --batch 2 --steps 1 --epochs 1 --checkpoint %s "
                          "--device cpu >/dev/null",
                          TD_TRIDENT, text, ck6),
                  0);
    ASSERT_EQ_INT(test_sh("%s export --model lstm --context 8 --checkpoint %s --onnx %s --batch 2 >/dev/null",
                          TD_TRIDENT, ck6, model),
                  0);
    free(test_read_file(model, &n));
    ASSERT(n > 4 * 2 * 4 * 512 * 512); /* the two layers' W and R, float32 */
    /* a size other than the checkpoint's: the loader's one-line error, exit 1 */
    ASSERT_EQ_INT(test_sh("%s export --model gpt --layers 2 --d-model 32 --heads 2 --context 8 --checkpoint %s "
                          "--onnx %s 2>&1 | grep -q 'trident export: cannot load'",
                          TD_TRIDENT, ck, model),
                  0);
}

TEST_MAIN(TESTS)
