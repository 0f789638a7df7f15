/*
** trident export: write the model of a `trident train` checkpoint as an ONNX
** file (td_onnx_export, include/trident/io.h), for inference runtimes.
**   trident export --onnx OUT.onnx [--model mlp|cnn|gpt|lstm] [--checkpoint FILE]
**                  [--batch N] [--seq T] [gpt size flags as trident train]
** The model is built as `trident train` builds it (src/workloads), loaded from
** the checkpoint (its names, shapes and dtypes checked), and traced on an input
** of --batch rows: mlp/cnn float32 [N, 784], gpt and lstm (W6, its LSTM as
** ONNX's LSTM operator) int64 token ids [N, T].
*/
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workloads.h"

/* Print "trident export: <fmt>" as one line on stderr; returns 1. */
static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "trident export: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

static void usage(FILE *f) {
    fprintf(f, "usage: trident export --onnx OUT.onnx [options]\n\n"
               "Write the model of a trident train checkpoint as an ONNX model (opset 17, float32).\n\n"
               "  --onnx FILE              the ONNX file to write (required)\n"
               "  --model mlp|cnn|gpt|lstm the model trident train trained (default cnn)\n"
               "  --checkpoint FILE        the checkpoint (default trident-<model>.safetensors, as trident train)\n"
               "  --batch N                the model's batch size (default 1; shapes are static)\n"
               "  --seq T                  gpt, lstm: the sequence length (default the context)\n"
               "  --preset NAME            gpt size: gpt-mini (default) or gpt2-small\n"
               "  --layers N, --d-model N, --heads N, --context N   gpt size, as given to trident train\n");
}

/* A positive integer into *out, or 0 after printing why. */
static int count_arg(const char *flag, const char *val, int64_t *out) {
    char *end = NULL;
    errno = 0;
    long long n = strtoll(val, &end, 10);
    if (end == val || *end || errno || n < 1 || n > ((int64_t)1 << 40))
        return fail("%s expects a positive integer, got %s", flag, TD_QUOTE(val)), 0;
    *out = n;
    return 1;
}

int cmd_export(int argc, char **argv) {
    const char *onnx = NULL, *checkpoint = NULL;
    workload_kind kind = WORKLOAD_CNN;
    workload_gpt_config gpt = workload_gpt_config_default();
    int64_t batch = 1, seq = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(stdout), 0;
        if (i + 1 >= argc) return fail("%s needs a value (see trident export --help)", TD_QUOTE(a));
        const char *v = argv[++i];
        int ok = 1;
        if (!strcmp(a, "--onnx"))
            onnx = v;
        else if (!strcmp(a, "--checkpoint"))
            checkpoint = v;
        else if (!strcmp(a, "--model")) {
            if (workload_kind_parse(v, &kind) != TD_OK)
                return fail("--model: %s is not mlp, cnn, gpt or lstm", TD_QUOTE(v));
        } else if (!strcmp(a, "--preset")) {
            if (workload_gpt_preset(v, &gpt) != TD_OK)
                return fail("--preset: %s is not gpt-mini or gpt2-small", TD_QUOTE(v));
        } else if (!strcmp(a, "--batch"))
            ok = count_arg(a, v, &batch);
        else if (!strcmp(a, "--seq"))
            ok = count_arg(a, v, &seq);
        else if (!strcmp(a, "--layers"))
            ok = count_arg(a, v, &gpt.layers);
        else if (!strcmp(a, "--d-model"))
            ok = count_arg(a, v, &gpt.d_model);
        else if (!strcmp(a, "--heads"))
            ok = count_arg(a, v, &gpt.heads);
        else if (!strcmp(a, "--context"))
            ok = count_arg(a, v, &gpt.context);
        else
            return fail("unknown option %s (see trident export --help)", TD_QUOTE(a));
        if (!ok) return 1;
    }
    if (!onnx) return fail("--onnx OUT.onnx is required (see trident export --help)");
    bool text = workload_is_text(kind);
    if (!text && seq) return fail("--seq is for --model gpt and lstm");
    if (kind == WORKLOAD_LSTM) { /* W6's size, as trident train forces it; --context stays its sequence length */
        workload_gpt_config w6 = workload_lstm_config_default();
        gpt.d_model = w6.d_model, gpt.layers = w6.layers;
    }
    if (!seq) seq = gpt.context;
    if (kind == WORKLOAD_GPT && seq > gpt.context) return fail("--seq is longer than --context");
    static const char *const names[] = {
        [WORKLOAD_MLP] = "mlp", [WORKLOAD_CNN] = "cnn", [WORKLOAD_GPT] = "gpt", [WORKLOAD_LSTM] = "lstm"};
    char ckpt_default[64];
    if (!checkpoint) {
        snprintf(ckpt_default, sizeof ckpt_default, "trident-%s.safetensors", names[kind]);
        checkpoint = ckpt_default;
    }
    td_module *m = kind == WORKLOAD_MLP   ? workload_mlp_new()
                   : kind == WORKLOAD_CNN ? workload_cnn_new()
                   : kind == WORKLOAD_GPT ? workload_gpt_new(&gpt)
                                          : workload_lstm_new(gpt.vocab, gpt.d_model, (int)gpt.layers);
    if (!m) return fail("%s", td_last_error());
    td_named_tensors *expected = td_module_state_dict(m);
    td_train_state ck = {0};
    td_status st = expected ? td_train_state_load(checkpoint, TD_CPU, names[kind], expected, &ck) : td_last_status();
    td_named_tensors_free(expected);
    int rc = 0;
    if (st != TD_OK) rc = fail("cannot load %s: %s", TD_QUOTE(checkpoint), td_last_error());
    if (!rc && td_module_load_state_dict(m, ck.model, true) != TD_OK)
        rc = fail("cannot load %s: %s", TD_QUOTE(checkpoint), td_last_error());
    td_train_state_clear(&ck);
    if (!rc) {
        td_scope_begin();
        td_tensor *x = text ? td_zeros(2, (int64_t[]){batch, seq}, TD_I64, TD_CPU)
                            : td_zeros(2, (int64_t[]){batch, 784}, TD_F32, TD_CPU);
        st = x ? td_onnx_export(m, 1, &x, onnx) : td_last_status();
        if (st != TD_OK)
            rc = fail("%s", td_last_error());
        else
            printf("wrote %s: %s from %s, input [%" PRId64 ", %" PRId64 "]\n", onnx, names[kind], checkpoint, batch,
                   text ? seq : (int64_t)784);
        td_scope_end();
    }
    td_module_free(m);
    return rc;
}
