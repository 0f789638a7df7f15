/*
** The terminal table and the JSON file of a session.
**
** JSON layout (version 2):
**   {"trident_bench": 2, "date", "commit", "quick",
**    "devices": [{"device", "name", "driver", "features", "compute_units", "total_memory", "timer",
**                 "torch_device", "torch_status", "copy_gbps", "gemm_gflops": {dtype: rate}}],
**    "torch": {"requested", "status", "version", "lines": [the twin's JSON lines]},
**    "rows": [{"workload", "variant", "device", "size", "unit", "work", "buffers", "samples_ms": [...],
**              "median_ms", "rate", "roof", "roof_pct", "vs_fastest", "torch_rate", "vs_torch", "error",
**              "peak_bytes", "base_bytes" (the device's peak allocated bytes during the row's workload, an
**                "-amp" row's own, and what was allocated when that started; null where the backend keeps no
**                statistics),
**              "torch_peak_bytes" (the twin's torch.cuda.max_memory_allocated for the row; null: none),
**              training rows (W1-W3, W5, W2/W3/W5-captured; variant "float32", or "<dtype>-amp" under --amp) also:
*"note", "params", "ms_per_step" (= median_ms),
**                "host_waits_per_step" (td_host_sync_count over the timed steps / steps), and
**                W1/W2: "steps_per_epoch", "epoch_s" (median step x steps), "torch_epoch_s";
**                W2/W3/W5-captured: "eager_ms_per_step" (W2-cnn's / W3-gpt-mini's / W5-gpt2-small's median on the
*device), "speedup"
**                  (eager / captured; both null without that row);
**                W3, W5: "torch_ms_per_step", "torch_compiled_rate", "torch_compiled_ms_per_step";
**              dispatch also: "us_per_op" (median_ms * 1000 / work)}]}
**   A training row's work is samples (W1/W2) or tokens (W3, W5) per step, its rate per second;
**   its samples are whole steps. The twin's figures are converted to the same batch. The
**   dispatch row's work is its 10k ops, its rate ops/s.
*/
#include <jansson.h>
#include <string.h>
#include <time.h>

#include "bench.h"

#ifndef BENCH_SOURCE_DIR
#define BENCH_SOURCE_DIR "."
#endif

void bench_stamp(bench_session *s) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(s->date, sizeof s->date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    s->commit[0] = 0;
    FILE *p = popen("git -C '" BENCH_SOURCE_DIR "' rev-parse --short=12 HEAD 2>/dev/null", "r");
    if (!p) return;
    if (fgets(s->commit, sizeof s->commit, p)) s->commit[strcspn(s->commit, "\n")] = 0;
    if (pclose(p) != 0) s->commit[0] = 0;
}

/* Milliseconds per step at rate (a training row's work per second). */
static double step_ms(const bench_row *r, double rate) { return rate > 0 ? r->work / rate * 1e3 : 0; }

/* The "vs torch" cell of row r: epoch seconds for W1/W2, ms/step for W3. */
static void torch_cell(const bench_session *s, const bench_row *r, char *buf, size_t n) {
    const bench_device *d = &s->devices[r->device];
    if (r->torch_rate > 0 && r->unit == BENCH_UNIT_OPS)
        snprintf(buf, n, "%.2fx (torch %.2f us/op)", r->rate / r->torch_rate, 1e6 / r->torch_rate);
    else if (r->torch_rate > 0 && r->steps_per_epoch)
        snprintf(buf, n, "%.2fx (torch %.2f s/epoch, ours %.2f)", r->rate / r->torch_rate,
                 step_ms(r, r->torch_rate) * r->steps_per_epoch * 1e-3, r->median_ms * r->steps_per_epoch * 1e-3);
    else if (r->torch_rate > 0 && r->params && r->torch_peak_bytes > 0)
        snprintf(buf, n, "%.2fx (torch %.1f ms/step, peak %.1f MiB)", r->rate / r->torch_rate,
                 step_ms(r, r->torch_rate), (double)r->torch_peak_bytes / (1 << 20));
    else if (r->torch_rate > 0 && r->params)
        snprintf(buf, n, "%.2fx (torch %.1f ms/step)", r->rate / r->torch_rate, step_ms(r, r->torch_rate));
    else if (r->torch_rate > 0)
        snprintf(buf, n, "%.2fx (torch %.1f)", r->rate / r->torch_rate, r->torch_rate);
    else if (!s->opt.torch || !strncmp(r->workload, "roof-", 5))
        snprintf(buf, n, "-");
    else if (strcmp(d->torch_status, "ok"))
        snprintf(buf, n, "%s", d->torch_status);
    else
        snprintf(buf, n, "n/a (not in twin)");
}

void bench_print_table(const bench_session *s, FILE *f) {
    fprintf(f, "\ntrident bench  %s%s  commit %s\n", s->date, s->opt.quick ? "  (--quick sizes)" : "",
            s->commit[0] ? s->commit : "unknown");
    for (int i = 0; i < s->n_devices; i++) {
        const bench_device *d = &s->devices[i];
        fprintf(f, "  %-9s %s; %s; timer: %s\n", d->label, d->info.name, d->info.driver, d->timer);
        fprintf(f, "            roofline: copy %.1f GB/s", d->copy_gbps);
        for (int dt = 0; dt < TD_DTYPE_COUNT; dt++)
            if (d->gemm_gflops[dt] > 0)
                fprintf(f, "; GEMM %s %.1f GFLOP/s", td_dtype_name((td_dtype)dt), d->gemm_gflops[dt]);
        fprintf(f, "\n");
    }
    if (s->opt.torch) fprintf(f, "  PyTorch %s: %s\n", s->torch_version[0] ? s->torch_version : "?", s->torch_status);
    fprintf(f, "\n%-13s %-9s %-9s %-16s %11s %18s %7s %8s %9s  %s\n", "workload", "variant", "device", "size",
            "median ms", "rate", "roof%", "vs best", "peak MiB", "vs torch");
    for (int i = 0; i < s->n_rows; i++) {
        const bench_row *r = &s->rows[i];
        const char *dev = s->devices[r->device].label;
        if (r->error[0]) {
            fprintf(f, "%-13s %-9s %-9s failed: %s\n", r->workload, r->variant, dev, r->error);
            continue;
        }
        char rate[32], roof[16], peak[24], torch[128];
        snprintf(rate, sizeof rate, "%.1f %s", r->rate, bench_unit_name(r->unit));
        if (r->roof > 0)
            snprintf(roof, sizeof roof, "%.0f%%", r->roof_pct);
        else
            snprintf(roof, sizeof roof, "-");
        if (r->has_peak)
            snprintf(peak, sizeof peak, "%.1f", (double)r->peak_bytes / (1 << 20));
        else
            snprintf(peak, sizeof peak, "-");
        torch_cell(s, r, torch, sizeof torch);
        fprintf(f, "%-13s %-9s %-9s %-16s %11.3f %18s %7s %7.2fx %9s  %s\n", r->workload, r->variant, dev, r->size,
                r->median_ms, rate, roof, r->vs_fastest, peak, torch);
    }
    for (int i = 0; i < s->n_rows; i++) {
        const bench_row *r = &s->rows[i];
        if (r->error[0] || !r->params) continue;
        fprintf(f, "  %s on %s: %.3f ms/step", r->workload, s->devices[r->device].label, r->median_ms);
        if (r->steps_per_epoch)
            fprintf(f, ", %.2f s/epoch (%d step%s)", r->median_ms * r->steps_per_epoch * 1e-3, r->steps_per_epoch,
                    r->steps_per_epoch == 1 ? "" : "s");
        if (r->eager_ms > 0) fprintf(f, ", %.2fx the eager step (%.3f ms)", r->eager_ms / r->median_ms, r->eager_ms);
        fprintf(f, ", %.0f %s; %.2f host waits/step; %.2f M params; %s\n", r->rate, bench_unit_name(r->unit),
                r->host_waits, r->params * 1e-6, r->note);
    }
    for (int i = 0; i < s->n_rows; i++) {
        const bench_row *r = &s->rows[i];
        if (!r->error[0] && r->unit == BENCH_UNIT_OPS && !strcmp(r->workload, "W2-cold-start"))
            fprintf(f, "  W2-cold-start on %s: %.2f s from process start to exit, two W2 steps, %s\n",
                    s->devices[r->device].label, r->median_ms * 1e-3, r->variant);
        else if (!r->error[0] && r->unit == BENCH_UNIT_OPS)
            fprintf(f, "  dispatch on %s: %.2f us per op (%s adds and one synchronize, host clock)\n",
                    s->devices[r->device].label, r->median_ms * 1e3 / r->work, r->size);
    }
    fprintf(
        f,
        "\nmedian of 3 to %d samples after 2 warm-up calls (training rows: whole steps after %d warm-up step%s);\n"
        "roof%%: of the device's bandwidth (GB/s rows: the faster of its copy and its fastest GB/s row) or the\n"
        "best GEMM rate of the dtype (GFLOP/s rows) measured on the same device, so at most 100%%; vs best: rate /\n"
        "fastest backend's rate; vs torch: rate / PyTorch's rate on the same device class (> 1: Trident is\n"
        "faster; W1/W2 as epoch times, W3 as ms/step); peak MiB: the device's highest allocation during the\n"
        "workload, an -amp row's during that row (-: the backend keeps no statistics).\n",
        s->opt.max_reps, s->opt.quick ? 1 : 3, s->opt.quick ? "" : "s");
}

static json_t *device_json(const bench_device *d) {
    json_t *gemm = json_object();
    for (int dt = 0; dt < TD_DTYPE_COUNT; dt++)
        if (d->gemm_gflops[dt] > 0)
            json_object_set_new(gemm, td_dtype_name((td_dtype)dt), json_real(d->gemm_gflops[dt]));
    return json_pack("{s:s, s:s, s:s, s:s, s:i, s:I, s:s, s:s, s:s, s:f, s:I, s:o}", "device", d->label, "name",
                     d->info.name, "driver", d->info.driver, "features", d->info.features, "compute_units",
                     d->info.compute_units, "total_memory", (json_int_t)d->info.total_memory, "timer", d->timer,
                     "torch_device", d->torch_device, "torch_status", d->torch_status, "copy_gbps", d->copy_gbps,
                     "copy_elems", (json_int_t)d->copy_elems, "gemm_gflops", gemm);
}

static json_t *row_json(const bench_session *s, const bench_row *r) {
    json_t *samples = json_array();
    for (int i = 0; i < r->n_samples; i++) json_array_append_new(samples, json_real(r->samples_ms[i]));
    json_t *o =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:f, s:i, s:o, s:f, s:f, s:f, s:f, s:f}", "workload", r->workload,
                  "variant", r->variant, "device", s->devices[r->device].label, "size", r->size, "unit",
                  bench_unit_name(r->unit), "work", r->work, "buffers", r->buffers, "samples_ms", samples, "median_ms",
                  r->median_ms, "rate", r->rate, "roof", r->roof, "roof_pct", r->roof_pct, "vs_fastest", r->vs_fastest);
    json_object_set_new(o, "torch_rate", r->torch_rate > 0 ? json_real(r->torch_rate) : json_null());
    json_object_set_new(o, "vs_torch", r->torch_rate > 0 ? json_real(r->rate / r->torch_rate) : json_null());
    if (r->error[0]) json_object_set_new(o, "error", json_string(r->error));
    bool peak = r->has_peak && !r->error[0];
    json_object_set_new(o, "peak_bytes", peak ? json_integer((json_int_t)r->peak_bytes) : json_null());
    json_object_set_new(o, "torch_peak_bytes",
                        r->torch_peak_bytes > 0 ? json_integer((json_int_t)r->torch_peak_bytes) : json_null());
    json_object_set_new(o, "base_bytes", peak ? json_integer((json_int_t)r->base_bytes) : json_null());
    if (r->unit == BENCH_UNIT_OPS && r->work > 0)
        json_object_set_new(o, "us_per_op", json_real(r->median_ms * 1e3 / r->work));
    if (!r->params) return o;
    json_object_set_new(o, "note", json_string(r->note));
    json_object_set_new(o, "params", json_integer((json_int_t)r->params));
    json_object_set_new(o, "ms_per_step", json_real(r->median_ms));
    json_object_set_new(o, "host_waits_per_step", json_real(r->host_waits));
    if (bench_captured_eager(r->workload)) {
        bool eager = r->eager_ms > 0 && r->median_ms > 0;
        json_object_set_new(o, "eager_ms_per_step", eager ? json_real(r->eager_ms) : json_null());
        json_object_set_new(o, "speedup", eager ? json_real(r->eager_ms / r->median_ms) : json_null());
    }
    if (r->steps_per_epoch) {
        json_object_set_new(o, "steps_per_epoch", json_integer(r->steps_per_epoch));
        json_object_set_new(o, "epoch_s", json_real(r->median_ms * r->steps_per_epoch * 1e-3));
        json_object_set_new(o, "torch_epoch_s",
                            r->torch_rate > 0 ? json_real(step_ms(r, r->torch_rate) * r->steps_per_epoch * 1e-3)
                                              : json_null());
    } else {
        json_object_set_new(o, "torch_ms_per_step",
                            r->torch_rate > 0 ? json_real(step_ms(r, r->torch_rate)) : json_null());
        json_object_set_new(o, "torch_compiled_rate",
                            r->torch_compiled_rate > 0 ? json_real(r->torch_compiled_rate) : json_null());
        json_object_set_new(o, "torch_compiled_ms_per_step",
                            r->torch_compiled_rate > 0 ? json_real(step_ms(r, r->torch_compiled_rate)) : json_null());
    }
    return o;
}

int bench_write_json(const bench_session *s, const char *path) {
    json_t *devices = json_array(), *rows = json_array(), *lines = json_array();
    for (int i = 0; i < s->n_devices; i++) json_array_append_new(devices, device_json(&s->devices[i]));
    for (int i = 0; i < s->n_rows; i++) json_array_append_new(rows, row_json(s, &s->rows[i]));
    for (const char *p = s->torch_raw; p && *p;) {
        const char *nl = strchr(p, '\n');
        json_t *line = json_loadb(p, nl ? (size_t)(nl - p) : strlen(p), 0, NULL);
        if (line) json_array_append_new(lines, line);
        p = nl ? nl + 1 : p + strlen(p);
    }
    json_t *torch =
        json_pack("{s:b, s:s, s:s, s:o}", "requested", s->opt.torch, "status",
                  s->opt.torch ? s->torch_status : "not requested", "version", s->torch_version, "lines", lines);
    json_t *root = json_pack("{s:i, s:s, s:s, s:b, s:o, s:o, s:o}", "trident_bench", 2, "date", s->date, "commit",
                             s->commit, "quick", s->opt.quick, "devices", devices, "torch", torch, "rows", rows);
    int rc = root && !json_dump_file(root, path, JSON_INDENT(1)) ? 0 : -1;
    if (rc) fprintf(stderr, "trident bench: cannot write %s\n", TD_QUOTE(path));
    json_decref(root);
    return rc;
}
