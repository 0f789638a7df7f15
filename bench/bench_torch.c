/*
** The PyTorch twin (bench/torch_workloads.py, ../shared/anchors/torch_workloads.py
** with flags that pick its parts and sizes) run in the same invocation:
**     PYTHON TWIN DATA DEVICE --only PARTS --matmul-n N --elems M
**            --epochs 2 --gpt-size D,H,L,T --gpt-batch B [--batch 16 --max-steps 20 --gpt-steps 3 --no-compile]
** PARTS are the twin_part of the selected workloads (ops, w1, w2, w3); DATA is
** the Fashion-MNIST directory W1/W2 use, or "-" for random images; the bracketed
** flags come with --quick. It prints one JSON object per line; each line whose
** "workload" has a torch_key in bench_workloads[] becomes a bench_torch_row
** (W1/W2: samples/s from best_epoch_s; W3: tokens/s, the compiled run as variant
** "float32-compiled"). A missing python or torch leaves the rows without
** numbers and says why in torch_status.
*/
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define EPOCH_STEPS 468 /* the twin's full epoch: 60000 images in batches of 128 */

static const bench_workload *workload_named(const char *name) {
    for (int i = 0; i < bench_n_workloads; i++)
        if (!strcmp(bench_workloads[i].name, name)) return &bench_workloads[i];
    return NULL;
}

static void append_raw(bench_session *s, const char *line) {
    size_t old = s->torch_raw ? strlen(s->torch_raw) : 0, n = strlen(line);
    char *p = realloc(s->torch_raw, old + n + 2);
    if (!p) return;
    memcpy(p + old, line, n);
    p[old + n] = '\n';
    p[old + n + 1] = 0;
    s->torch_raw = p;
}

/* One JSON line of the twin: the version header or a measurement. */
static void parse_line(bench_session *s, const char *line) {
    json_t *j = json_loads(line, 0, NULL);
    if (!json_is_object(j)) {
        json_decref(j);
        return;
    }
    append_raw(s, line);
    const char *version = json_string_value(json_object_get(j, "torch"));
    if (version) snprintf(s->torch_version, sizeof s->torch_version, "%s", version);
    const char *name = json_string_value(json_object_get(j, "workload"));
    const char *device = json_string_value(json_object_get(j, "device"));
    const bench_workload *w = name ? workload_named(name) : NULL;
    json_t *value = w && w->torch_key ? json_object_get(j, w->torch_key) : NULL;
    if (device && json_is_number(value) && s->n_torch < BENCH_MAX_TORCH) {
        bench_torch_row *r = &s->torch[s->n_torch++];
        snprintf(r->workload, sizeof r->workload, "%s", name);
        snprintf(r->device, sizeof r->device, "%s", device);
        const char *dt = json_string_value(json_object_get(j, "dtype")); /* "torch.bfloat16" */
        if (dt && !strncmp(dt, "torch.", 6)) dt += 6;
        snprintf(r->variant, sizeof r->variant, "%s%s", dt ? dt : "float32",
                 json_is_true(json_object_get(j, "tf32")) ? "-tf32" : "");
        size_t used = strlen(r->variant);
        if (json_is_true(json_object_get(j, "compiled")))
            snprintf(r->variant + used, sizeof r->variant - used, "-compiled");
        r->peak_bytes = (int64_t)json_number_value(json_object_get(j, "peak_bytes"));
        double v = json_number_value(value), steps = json_number_value(json_object_get(j, "steps"));
        double batch = json_number_value(json_object_get(j, "batch"));
        if (!w->torch_per_epoch)
            r->rate = v * w->torch_scale;
        else /* seconds per epoch of steps batches; a full epoch of 128 when the line does not say */
            r->rate = v > 0 ? (steps > 0 ? steps : EPOCH_STEPS) * (batch > 0 ? batch : w->torch_scale) / v : 0;
    }
    json_decref(j);
}

/* The twin's --only list: the twin_part of each selected workload, once each. */
static void twin_parts(const bench_session *s, char *out, size_t n) {
    out[0] = 0;
    for (int i = 0; i < bench_n_workloads; i++) {
        const char *part = bench_workloads[i].twin_part;
        if (!part || !bench_workload_selected(s, &bench_workloads[i])) continue;
        char padded[64];
        snprintf(padded, sizeof padded, ",%s,", part);
        char have[256];
        snprintf(have, sizeof have, ",%s,", out);
        if (strstr(have, padded)) continue;
        size_t used = strlen(out);
        snprintf(out + used, n - used, "%s%s", used ? "," : "", part);
    }
}

/* Run the twin on one torch device (d: the first device of that class); returns "ok" or why not into status. */
static void run_twin(bench_session *s, int d, char *status, size_t status_size) {
    const char *device = s->devices[d].torch_device, *data = bench_data_dir(s);
    char parts[128];
    twin_parts(s, parts, sizeof parts);
    workload_gpt_config g = bench_gpt_config(s), g5 = bench_gpt2_config(s);
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "'%s' '%s' '%s' %s --only %s --matmul-n %lld --elems %lld --epochs 2 --gpt-size %lld,%lld,%lld,%lld "
             "--gpt-batch %lld --gpt2-size %lld,%lld,%lld,%lld --gpt2-batch %lld --lstm-size %lld,%lld --lstm-batch "
             "%lld --unet-size %lld,%lld%s%s "
             "2>&1",
             s->opt.python, s->opt.twin, data ? data : "-", device, parts[0] ? parts : "ops",
             (long long)bench_matmul_n(s), (long long)bench_vector_elems(s, d), (long long)g.d_model,
             (long long)g.heads, (long long)g.layers, (long long)g.context, (long long)bench_gpt_batch(s, d),
             (long long)g5.d_model, (long long)g5.heads, (long long)g5.layers, (long long)g5.context,
             (long long)bench_gpt2_batch(s), (long long)bench_lstm_config(s).d_model,
             (long long)bench_lstm_config(s).context, (long long)bench_lstm_batch(s), (long long)bench_unet_batch(s),
             (long long)bench_unet_side(s),
             s->opt.amp == TD_BF16  ? " --amp bf16"
             : s->opt.amp == TD_F16 ? " --amp fp16"
                                    : "",
             s->opt.quick ? " --batch 16 --max-steps 20 --gpt-steps 3 --lstm-steps 2 --no-compile" : "");
    fprintf(stderr, "[bench] torch %s: %s\n", device, cmd);
    FILE *p = popen(cmd, "r");
    if (!p) {
        snprintf(status, status_size, "n/a (torch not found)");
        return;
    }
    char line[4096], last[256] = "";
    int measured = s->n_torch;
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = 0;
        if (line[0] == '{')
            parse_line(s, line);
        else if (line[0])
            snprintf(last, sizeof last, "%.255s", line);
    }
    int rc = pclose(p);
    if (strstr(last, "No module named 'torch'") || rc == 127 << 8 || strstr(last, "not found"))
        snprintf(status, status_size, "n/a (torch not found)");
    else if (rc != 0 || s->n_torch == measured)
        snprintf(status, status_size, "n/a (twin failed: %.70s)", last[0] ? last : "no output");
    else
        snprintf(status, status_size, "ok");
}

void bench_torch_run(bench_session *s) {
    s->torch_status[0] = 0;
    const char *done[BENCH_MAX_DEVICES];
    int n_done = 0;
    for (int d = 0; d < s->n_devices; d++) {
        const char *dev = s->devices[d].torch_device;
        bool seen = false;
        for (int i = 0; i < n_done; i++) seen |= !strcmp(done[i], dev);
        if (seen) continue;
        done[n_done++] = dev;
        char status[96];
        run_twin(s, d, status, sizeof status);
        fprintf(stderr, "[bench] torch %s: %s\n", dev, status);
        for (int e = d; e < s->n_devices; e++)
            if (!strcmp(s->devices[e].torch_device, dev))
                snprintf(s->devices[e].torch_status, sizeof s->devices[e].torch_status, "%s", status);
        size_t used = strlen(s->torch_status);
        snprintf(s->torch_status + used, sizeof s->torch_status - used, "%s%s: %s", used ? "; " : "", dev, status);
    }
}
