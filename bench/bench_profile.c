/*
** trident bench --profile: after a training workload's timed steps, three more
** steps run under the profiler (trident/profile.h), with the device's roofline
** from the session's roof rows. Each writes a Chrome trace,
** trident-profile-<workload>-<device>.json, prints the profiler's summary, and
** keeps where its step goes by op (the BENCH_PROFILE_OPS heaviest, then the
** rest, then the time outside ops) for trident-profile.svg: one panel per
** workload, one bar per device, 100% = the profiled step.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum { PROFILE_STEPS = 3 };

static void file_label(const char *label, char *out, size_t n) {
    size_t k = 0;
    for (; *label && k + 1 < n; label++)
        if (*label != ':') out[k++] = *label;
    out[k] = 0;
}

td_status bench_profile_steps(bench_session *s, int device, const char *workload, bench_fn fn, void *arg) {
    if (!s->opt.profile || s->n_profiles == BENCH_MAX_PROFILES) return TD_OK;
    bench_device *bd = &s->devices[device];
    if (bd->copy_gbps > 0 && bd->gemm_gflops[TD_F32] > 0)
        td_profile_set_roofline(bd->dev, bd->gemm_gflops[TD_F32], bd->copy_gbps);
    char dev[16], path[160];
    file_label(bd->label, dev, sizeof dev);
    snprintf(path, sizeof path, "trident-profile-%s-%s.json", workload, dev);
    td_status st = td_profile_begin();
    for (int i = 0; i < PROFILE_STEPS && st == TD_OK; i++) {
        td_scope_begin();
        st = fn(arg, 0);
        td_scope_end();
        if (st == TD_OK) st = td_profile_step();
    }
    td_status end = td_profile_end(path);
    if (st == TD_OK) st = end;
    if (st != TD_OK) return st;
    printf("\n[profile] %s on %s (%d steps; trace %s)\n", workload, bd->label, PROFILE_STEPS, path);
    td_profile_print(stdout, 10);
    fflush(stdout);
    /* by op, summed over modules and phases */
    bench_profile *p = &s->profiles[s->n_profiles++];
    memset(p, 0, sizeof *p);
    char label[sizeof p->device];
    memcpy(label, bd->label, sizeof label); /* both live in s */
    label[sizeof label - 1] = 0;
    snprintf(p->workload, sizeof p->workload, "%s", workload);
    snprintf(p->device, sizeof p->device, "%s", label);
    int steps = 0;
    p->step_ms = td_profile_step_ms(&steps);
    int n = td_profile_rows(NULL, 0);
    td_profile_row *rows = calloc((size_t)n + 1, sizeof *rows);
    if (!rows) return TD_ERR_OOM;
    td_profile_rows(rows, n);
    struct {
        const char *op;
        double ms;
    } by[128];
    int nb = 0;
    double ops = 0;
    for (int i = 0; i < n; i++) {
        int j = 0;
        while (j < nb && strcmp(by[j].op, rows[i].op)) j++;
        if (j == nb && nb < 128) by[nb++].op = rows[i].op, by[j].ms = 0;
        if (j < nb) by[j].ms += rows[i].total_ms / (steps ? steps : 1);
        ops += rows[i].total_ms / (steps ? steps : 1);
    }
    free(rows);
    for (int i = 1; i < nb; i++)
        for (int j = i; j > 0 && by[j].ms > by[j - 1].ms; j--) {
            const char *o = by[j].op;
            double m = by[j].ms;
            by[j] = by[j - 1], by[j - 1].op = o, by[j - 1].ms = m;
        }
    for (int i = 0; i < nb; i++) {
        int k = i < BENCH_PROFILE_OPS ? i : BENCH_PROFILE_OPS;
        if (i <= BENCH_PROFILE_OPS)
            snprintf(p->op[k], sizeof p->op[k], "%s", i < BENCH_PROFILE_OPS ? by[i].op : "other ops");
        p->ms[k] += by[i].ms;
    }
    p->n_ops = nb < BENCH_PROFILE_OPS ? nb : BENCH_PROFILE_OPS + 1;
    p->outside_ms = p->step_ms > ops ? p->step_ms - ops : 0;
    return TD_OK;
}

/* ---- the SVG ---- */

static const char *const palette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
                                      "#ff9da7", "#9c755f", "#86bcb6", "#d37295", "#a0cbe8", "#8cd17d", "#f1ce63"};

/* One colour per op name over the whole file, in order of first appearance. */
static const char *colour_of(const char **names, int *n, const char *op) {
    if (!strcmp(op, "other ops")) return "#bab0ac";
    int i = 0;
    while (i < *n && strcmp(names[i], op)) i++;
    if (i == *n && *n < 64) names[(*n)++] = op;
    return palette[i % (int)(sizeof palette / sizeof *palette)];
}

int bench_write_profile_svg(const bench_session *s, const char *path) {
    if (!s->n_profiles) return 0;
    FILE *f = fopen(path, "w");
    if (!f) return fprintf(stderr, "trident bench: cannot write %s\n", TD_QUOTE(path)), 1;
    const int W = 1000, left = 110, bar_w = 560, bar_h = 26, row_h = 34;
    /* panels: one per workload, in the order first profiled */
    const char *wl[BENCH_MAX_PROFILES];
    int nw = 0;
    for (int i = 0; i < s->n_profiles; i++) {
        int j = 0;
        while (j < nw && strcmp(wl[j], s->profiles[i].workload)) j++;
        if (j == nw) wl[nw++] = s->profiles[i].workload;
    }
    int height = 40;
    for (int w = 0; w < nw; w++) {
        int bars = 0, ops = 0;
        for (int i = 0; i < s->n_profiles; i++)
            if (!strcmp(s->profiles[i].workload, wl[w])) bars++, ops += s->profiles[i].n_ops + 1;
        int legend = (ops + 1) * 16;
        height += 40 + (bars * row_h > legend ? bars * row_h : legend);
    }
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
            "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            W, height);
    fprintf(f,
            "<text x=\"10\" y=\"24\" font-size=\"16\">trident bench --profile: where one training step goes "
            "(%s)</text>\n",
            s->date);
    const char *names[64];
    int n_names = 0, y = 50;
    for (int w = 0; w < nw; w++) {
        fprintf(f, "<text x=\"10\" y=\"%d\" font-size=\"14\" font-weight=\"bold\">", y + 14);
        bench_xml_text(f, wl[w]);
        fprintf(f, "</text>\n");
        y += 24;
        int ly = y;
        for (int i = 0; i < s->n_profiles; i++) {
            const bench_profile *p = &s->profiles[i];
            if (strcmp(p->workload, wl[w])) continue;
            fprintf(f, "<text x=\"10\" y=\"%d\">%s</text>\n", y + 17, p->device);
            double x = left, total = p->step_ms > 0 ? p->step_ms : 1;
            for (int k = 0; k <= p->n_ops; k++) {
                const char *op = k < p->n_ops ? p->op[k] : "outside ops";
                double ms = k < p->n_ops ? p->ms[k] : p->outside_ms, wpx = bar_w * ms / total;
                const char *c = k < p->n_ops ? colour_of(names, &n_names, op) : "#eeeeee";
                fprintf(f,
                        "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\" stroke=\"white\" "
                        "stroke-width=\"0.5\"><title>%s %.3f ms (%.1f%%)</title></rect>\n",
                        x, y, wpx, bar_h, c, op, ms, 100 * ms / total);
                if (wpx > 40)
                    fprintf(f, "<text x=\"%.1f\" y=\"%d\" font-size=\"10\" fill=\"black\">%.0f%%</text>\n", x + 3,
                            y + 17, 100 * ms / total);
                x += wpx;
                fprintf(f,
                        "<rect x=\"%d\" y=\"%d\" width=\"10\" height=\"10\" fill=\"%s\"/>"
                        "<text x=\"%d\" y=\"%d\" font-size=\"11\">%s %s %.2f ms</text>\n",
                        left + bar_w + 20, ly, c, left + bar_w + 34, ly + 9, p->device, op, ms);
                ly += 16;
            }
            fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"10\">%.2f ms/step</text>\n", left, y + bar_h + 10,
                    p->step_ms);
            y += row_h;
        }
        y = (ly > y ? ly : y) + 16;
    }
    fprintf(f, "</svg>\n");
    int bad = ferror(f);
    if (fclose(f) || bad) return fprintf(stderr, "trident bench: writing %s failed\n", TD_QUOTE(path)), 1;
    return 0;
}
