/*
** The PyTorch twin (bench/torch_workloads.py, a copy of
** ../shared/anchors/torch_workloads.py) run in the same invocation:
**     PYTHON TWIN - DEVICE --only ops --matmul-n N --elems M
** It prints one JSON object per line; each line whose "workload" has a
** torch_key in bench_workloads[] becomes a bench_torch_row. A missing python or
** torch leaves the rows without numbers and says why in torch_status.
*/
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

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
        r->rate = json_number_value(value) * w->torch_scale;
    }
    json_decref(j);
}

/* Run the twin on one torch device; returns "ok" or why not into status. */
static void run_twin(bench_session *s, const char *device, int64_t elems, char *status, size_t status_size) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' '%s' - %s --only ops --matmul-n %lld --elems %lld 2>&1", s->opt.python, s->opt.twin,
             device, (long long)bench_matmul_n(s), (long long)elems);
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
        run_twin(s, dev, bench_vector_elems(s, d), status, sizeof status);
        fprintf(stderr, "[bench] torch %s: %s\n", dev, status);
        for (int e = d; e < s->n_devices; e++)
            if (!strcmp(s->devices[e].torch_device, dev))
                snprintf(s->devices[e].torch_status, sizeof s->devices[e].torch_status, "%s", status);
        size_t used = strlen(s->torch_status);
        snprintf(s->torch_status + used, sizeof s->torch_status - used, "%s%s: %s", used ? "; " : "", dev, status);
    }
}
