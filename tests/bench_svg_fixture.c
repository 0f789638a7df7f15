/*
** A fixed set of bench results drawn by bench_write_svg (bench/bench_svg.c):
** four devices in 250 px panels, training rows whose step times under the
** bars are wide ("1234.5 ms/step"), bandwidth rows with their roof, and
** W2-cold-start rows. tests/bench_svg_labels.py checks the chart it writes.
**
** Usage: bench_svg_fixture OUT.svg
*/
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static void add_row(bench_session *s, const char *workload, const char *variant, int device, bench_unit unit,
                    double median_ms, double rate, int64_t params, double roof) {
    bench_row *r = &s->rows[s->n_rows++];
    memset(r, 0, sizeof *r);
    snprintf(r->workload, sizeof r->workload, "%s", workload);
    snprintf(r->variant, sizeof r->variant, "%s", variant);
    snprintf(r->size, sizeof r->size, "fixed");
    r->device = device, r->unit = unit, r->median_ms = median_ms, r->rate = rate, r->params = params;
    r->roof = roof, r->roof_pct = roof > 0 ? 100 * rate / roof : 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: bench_svg_fixture OUT.svg\n");
        return 2;
    }
    bench_session *s = calloc(1, sizeof *s);
    if (!s) return 1;
    snprintf(s->date, sizeof s->date, "2026-11-27T00:00:00Z");
    static const char *labels[] = {"cpu", "vulkan:0", "vulkan:1", "cuda:0"};
    s->n_devices = 4;
    for (int d = 0; d < 4; d++) {
        snprintf(s->devices[d].label, sizeof s->devices[d].label, "%s", labels[d]);
        snprintf(s->devices[d].info.name, sizeof s->devices[d].info.name, "device %d", d);
        s->devices[d].timer = "host clock";
        s->devices[d].torch_device = d ? "cuda" : "cpu";
        s->devices[d].copy_gbps = 100.0 * (d + 1);
    }
    static const double step_ms[] = {1234.5, 289.1, 312.7, 48.25};
    for (int d = 0; d < 4; d++) /* W1: 128 samples a step */
        add_row(s, "W1-mlp", "float32", d, BENCH_UNIT_SAMPLES, step_ms[d], 128e3 / step_ms[d], 269322, 0);
    for (int d = 0; d < 4; d++)
        add_row(s, "W3-gpt-mini", "float32", d, BENCH_UNIT_TOKENS, step_ms[d] * 3, 4096e3 / (step_ms[d] * 3), 1234567,
                0);
    for (int d = 0; d < 4; d++) /* bandwidth rows over a roof */
        add_row(s, "W4-add", "float32", d, BENCH_UNIT_GBPS, 1.5, 95.0 * (d + 1), 0, 100.0 * (d + 1));
    static const double cold_s[] = {0.42, 3.4, 5.25, 11.9};
    for (int d = 0; d < 4; d++) {
        add_row(s, "W2-cold-start", "empty-cache", d, BENCH_UNIT_OPS, cold_s[d] * 1e3, 1 / cold_s[d], 0, 0);
        add_row(s, "W2-cold-start", "warm-cache", d, BENCH_UNIT_OPS, cold_s[d] * 300, 1 / (cold_s[d] * 0.3), 0, 0);
    }
    int rc = bench_write_svg(s, argv[1]);
    free(s);
    return rc ? 1 : 0;
}
