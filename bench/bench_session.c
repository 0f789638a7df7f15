/*
** The session: which devices, in which order the workloads run, the peak
** memory of each workload, and the derived columns (roofline %, ratio to the
** fastest backend, ratio to PyTorch, a captured step's speedup).
*/
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bench.h"

const char *bench_unit_name(bench_unit u) {
    static const char *const names[] = {"GFLOP/s", "GB/s", "samples/s", "tokens/s", "ops/s"};
    return names[u];
}

double bench_unit_scale(bench_unit u) { return u == BENCH_UNIT_GFLOPS || u == BENCH_UNIT_GBPS ? 1e9 : 1; }

static bool add_device(bench_session *s, td_device dev, char *err, size_t err_size) {
    for (int i = 0; i < s->n_devices; i++)
        if (td_device_equal(s->devices[i].dev, dev)) return true; /* named twice */
    if (s->n_devices >= BENCH_MAX_DEVICES) {
        snprintf(err, err_size, "more than %d devices", BENCH_MAX_DEVICES);
        return false;
    }
    bench_device *d = &s->devices[s->n_devices];
    memset(d, 0, sizeof *d);
    d->dev = dev;
    td_device_str(dev, d->label, sizeof d->label);
    if (td_device_get_info(dev, &d->info) != TD_OK) {
        snprintf(err, err_size, "%s: %s", d->label, td_last_error());
        return false;
    }
    d->torch_device = dev.type == TD_DEVICE_CPU ? "cpu" : "cuda";
    d->timer = "not run";
    s->n_devices++;
    return true;
}

/* Every device of one type: the software ones (lavapipe) only when the type has
** no other, since at full sizes they take hours. Adds none if the backend is absent. */
static bool add_type(bench_session *s, int type, char *err, size_t err_size) {
    int n = 0, real = 0;
    for (; td_device_available((td_device){type, n}); n++) {
        td_device_info info;
        real += td_device_get_info((td_device){type, n}, &info) == TD_OK && !info.emulated;
    }
    td_clear_error();
    for (int i = 0; i < n; i++) {
        td_device_info info;
        td_device dev = {type, i};
        if (real && (td_device_get_info(dev, &info) != TD_OK || info.emulated)) continue;
        if (!add_device(s, dev, err, err_size)) return false;
    }
    return true;
}

static const char *const type_names[TD_DEVICE_TYPE_COUNT] = {"cpu", "cuda", "vulkan"};

bool bench_select_devices(bench_session *s, const char *list, char *err, size_t err_size) {
    s->n_devices = 0;
    if (!list) {
        for (int type = 0; type < TD_DEVICE_TYPE_COUNT; type++)
            if (!add_type(s, type, err, err_size)) return false;
        return s->n_devices > 0 || (snprintf(err, err_size, "no device available"), false);
    }
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        td_device dev;
        if (td_device_parse(tok, &dev) != TD_OK || !td_device_available(dev)) {
            snprintf(err, err_size, "backend %s: %s", TD_QUOTE(tok), td_last_error());
            return false;
        }
        bool type_only = !strchr(tok, ':') && strcmp(tok, "auto") && !strcmp(tok, type_names[dev.type]);
        if (!(type_only ? add_type(s, dev.type, err, err_size) : add_device(s, dev, err, err_size))) return false;
    }
    return s->n_devices > 0 || (snprintf(err, err_size, "--backends names no device"), false);
}

/* A --only name selects a workload by its full name ("W2-cnn"), the part after
** the dash ("cnn", "gpt-mini"), that part's first word ("gpt"), or its number
** in any case ("w2"; "w4" selects every operator). */
static bool name_matches(const char *tok, const char *name) {
    const char *dash = strchr(name, '-');
    if (!dash) return !strcmp(tok, name);
    const char *rest = dash + 1, *word_end = strchr(rest, '-');
    size_t word = word_end ? (size_t)(word_end - rest) : strlen(rest);
    return !strcmp(tok, name) || !strcmp(tok, rest) || (strlen(tok) == word && !strncmp(tok, rest, word)) ||
           (strlen(tok) == (size_t)(dash - name) && !strncasecmp(tok, name, (size_t)(dash - name)));
}

bool bench_workload_selected(const bench_session *s, const bench_workload *w) {
    if (!s->opt.only) return true;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s->opt.only);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        if (name_matches(tok, w->name)) return true;
    return false;
}

bool bench_check_only(const char *only, char *err, size_t err_size) {
    char buf[256];
    if (snprintf(buf, sizeof buf, "%s", only) >= (int)sizeof buf)
        return snprintf(err, err_size, "--only: the list is longer than %zu characters", sizeof buf - 1), false;
    for (const char *tok = buf; *tok;) {
        size_t len = strcspn(tok, ",");
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)len, tok);
        bool known = false;
        for (int i = 0; i < bench_n_workloads && !known; i++)
            known = len && name_matches(name, bench_workloads[i].name);
        if (!known) {
            int n = snprintf(err, err_size, "--only: no workload %s; valid:", len ? TD_QUOTE(name) : "'' (empty)");
            for (int i = 0; i < bench_n_workloads && n > 0 && (size_t)n < err_size; i++)
                n += snprintf(err + n, err_size - (size_t)n, "%s %s", i ? "," : "", bench_workloads[i].name);
            return false;
        }
        tok += len + (tok[len] == ',');
        if (tok[-1] == ',' && !*tok) return snprintf(err, err_size, "--only: the list ends with ','"), false;
    }
    return buf[0] || (snprintf(err, err_size, "--only: empty list"), false);
}

static void progress_rows(const bench_session *s, int from) {
    for (int i = from; i < s->n_rows; i++) {
        const bench_row *r = &s->rows[i];
        if (r->error[0])
            fprintf(stderr, "  %-12s %-9s failed: %s\n", r->workload, r->variant, r->error);
        else
            fprintf(stderr, "  %-12s %-9s %-16s %10.3f ms %10.1f %s%s%s\n", r->workload, r->variant, r->size,
                    r->median_ms, r->rate, bench_unit_name(r->unit), r->note[0] ? "  " : "", r->note);
    }
}

/* Open a peak window on device d for the rows from the next one (none when its
** backend keeps no statistics). */
static void peak_open(bench_session *s, int d) {
    td_memory_stats m;
    s->peak_on = td_memory_stats_get(s->devices[d].dev, true, &m) == TD_OK;
    if (!s->peak_on) td_clear_error();
    s->peak_base = s->peak_on ? (int64_t)m.allocated : 0;
    s->peak_from = s->n_rows;
}

/* The window's peak onto the rows [peak_from, n_rows). */
static void peak_close(bench_session *s, int d) {
    td_memory_stats m;
    if (!s->peak_on) return;
    s->peak_on = false;
    if (td_memory_stats_get(s->devices[d].dev, false, &m) != TD_OK) {
        td_clear_error();
        return;
    }
    for (int i = s->peak_from; i < s->n_rows; i++) {
        s->rows[i].has_peak = true;
        s->rows[i].peak_bytes = (int64_t)m.peak_allocated;
        s->rows[i].base_bytes = s->peak_base;
    }
}

void bench_peak_split(bench_session *s, int d) {
    peak_close(s, d);
    peak_open(s, d);
}

void bench_run_all(bench_session *s) {
    if (bench_load_data(s) != TD_OK) /* before the peaks: the data set is the session's, not a workload's */
        fprintf(stderr, "[bench] --data %s: %s (W1/W2 will fail)\n", s->opt.data, td_last_error());
    for (int d = 0; d < s->n_devices; d++) {
        bench_device *dev = &s->devices[d];
        fprintf(stderr, "[bench] %s: %s (%s)\n", dev->label, dev->info.name, dev->info.driver);
        int from = s->n_rows;
        fprintf(stderr, "[bench] %s: roofline\n", dev->label);
        bench_roofline(s, d);
        progress_rows(s, from);
        for (int w = 0; w < bench_n_workloads; w++) {
            if (!bench_workload_selected(s, &bench_workloads[w])) continue;
            from = s->n_rows;
            fprintf(stderr, "[bench] %s: %s\n", dev->label, bench_workloads[w].name);
            peak_open(s, d);
            if (bench_workloads[w].run(s, d) != TD_OK && s->n_rows == from)
                bench_fail(s, d, bench_workloads[w].name, "", NULL);
            peak_close(s, d);
            if (s->n_rows == from) fprintf(stderr, "  skipped: %s\n", td_last_error());
            td_clear_error();
            progress_rows(s, from);
        }
        /* the device's cached memory goes back before the next device's rows (cuda:0 and vulkan:0 share a GPU) */
        td_memory_empty_cache(dev->dev);
        td_clear_error();
    }
}

static td_dtype dtype_of(const char *name) {
    for (int dt = 0; dt < TD_DTYPE_COUNT; dt++)
        if (!strcmp(td_dtype_name((td_dtype)dt), name)) return (td_dtype)dt;
    return TD_DTYPE_COUNT;
}

/* Rows compare across backends by workload and variant; roofline sweep rows also by size. */
const char *bench_captured_eager(const char *workload) {
    return !strcmp(workload, "W2-captured")   ? "W2-cnn"
           : !strcmp(workload, "W3-captured") ? "W3-gpt-mini"
           : !strcmp(workload, "W5-captured") ? "W5-gpt2-small"
                                              : NULL;
}

static bool same_key(const bench_row *a, const bench_row *b) {
    return !strcmp(a->workload, b->workload) && !strcmp(a->variant, b->variant) &&
           (strncmp(a->workload, "roof-", 5) || !strcmp(a->size, b->size));
}

void bench_finalize(bench_session *s) {
    for (int i = 0; i < s->n_rows; i++) {
        bench_row *r = &s->rows[i];
        if (r->error[0]) continue;
        bench_device *d = &s->devices[r->device];
        td_dtype dt = dtype_of(r->variant);
        if (!strcmp(r->workload, "roof-copy") && r->rate > d->copy_gbps) d->copy_gbps = r->rate;
        if (r->unit == BENCH_UNIT_GFLOPS && dt < TD_DTYPE_COUNT && r->rate > d->gemm_gflops[dt])
            d->gemm_gflops[dt] = r->rate;
    }
    for (int i = 0; i < s->n_rows; i++) {
        bench_row *r = &s->rows[i];
        if (r->error[0]) continue;
        const bench_device *d = &s->devices[r->device];
        td_dtype dt = dtype_of(r->variant);
        double bw = d->copy_gbps; /* the bandwidth roof: the copy, or a GB/s row that beat it (issue 27) */
        for (int j = 0; j < s->n_rows; j++)
            if (!s->rows[j].error[0] && s->rows[j].device == r->device && s->rows[j].unit == BENCH_UNIT_GBPS &&
                s->rows[j].rate > bw)
                bw = s->rows[j].rate;
        r->roof = r->unit == BENCH_UNIT_GBPS                            ? bw
                  : r->unit == BENCH_UNIT_GFLOPS && dt < TD_DTYPE_COUNT ? d->gemm_gflops[dt]
                                                                        : 0;
        r->roof_pct = r->roof > 0 ? 100.0 * r->rate / r->roof : 0;
        double best = 0;
        for (int j = 0; j < s->n_rows; j++)
            if (!s->rows[j].error[0] && same_key(r, &s->rows[j]) && s->rows[j].rate > best) best = s->rows[j].rate;
        r->vs_fastest = best > 0 ? r->rate / best : 0;
        r->eager_ms = 0;
        const char *eager = bench_captured_eager(r->workload);
        for (int j = 0; j < s->n_rows && eager; j++)
            if (!s->rows[j].error[0] && s->rows[j].device == r->device && !strcmp(s->rows[j].workload, eager) &&
                !strcmp(s->rows[j].variant, r->variant))
                r->eager_ms = s->rows[j].median_ms;
        r->torch_rate = r->torch_compiled_rate = 0;
        r->torch_peak_bytes = 0;
        char compiled[sizeof r->variant + 16];
        snprintf(compiled, sizeof compiled, "%s-compiled", r->variant);
        for (int t = 0; t < s->n_torch; t++) {
            const bench_torch_row *tr = &s->torch[t];
            if (strcmp(tr->workload, r->workload) || strcmp(tr->device, d->torch_device)) continue;
            if (!strcmp(tr->variant, r->variant)) r->torch_rate = tr->rate, r->torch_peak_bytes = tr->peak_bytes;
            if (!strcmp(tr->variant, compiled)) r->torch_compiled_rate = tr->rate;
        }
    }
}

void bench_session_free(bench_session *s) {
    free(s->torch_raw);
    s->torch_raw = NULL;
    td_release(s->images);
    td_release(s->labels);
    s->images = s->labels = NULL;
}
