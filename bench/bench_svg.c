/*
** The SVG chart: one panel per workload (and variant), one bar per device in
** the device's colour, PyTorch's rate as a dashed reference line per torch
** device. Training rows (W1-W3) show samples/s or tokens/s, with the step time
** under each bar. Each panel has its own linear axis from 0, in the row's unit.
** Self-contained (no scripts, fonts or links), so it opens in any browser.
**
** Bars are <rect class="bar" data-device=".." data-workload=".."> with their
** fill set; tests/bench_svg_check.py finds them by that class and checks the
** rendered pixels.
*/
#include <math.h>
#include <string.h>

#include "bench.h"

#define PANEL_W     250
#define PANEL_H     230
#define MAX_COLS    4
#define LEGEND_LINE 20

static const char *palette[BENCH_MAX_DEVICES] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759",
                                                 "#b07aa1", "#76b7b2", "#edc948", "#9c755f"};

void bench_xml_text(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '&')
            fputs("&amp;", f);
        else if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '"')
            fputs("&quot;", f);
        else
            fputc(*s, f);
    }
}

/* The smallest 1, 2, 2.5 or 5 times a power of ten that is >= x. */
static double nice_ceil(double x) {
    if (x <= 0) return 1;
    double p = pow(10, floor(log10(x)));
    static const double steps[] = {1, 2, 2.5, 5, 10};
    for (int i = 0; i < 5; i++)
        if (steps[i] * p >= x) return steps[i] * p;
    return 10 * p;
}

static void fmt_rate(char *buf, size_t n, double v) {
    snprintf(buf, n, v >= 100 ? "%.0f" : v >= 10 ? "%.1f" : "%.2f", v);
}

/* A panel's y axis: linear from 0 to hi, or log10 from decade lo to decade hi. */
typedef struct axis {
    bool log;
    double lo, hi;
} axis;

/* Where v sits on the axis, from 0 (the base line) to 1 (the top). */
static double axis_frac(const axis *a, double v) {
    if (!a->log) return v / a->hi;
    double t = (log10(v) - a->lo) / (a->hi - a->lo);
    return t < 0 ? 0 : t;
}

/* Linear unless the values span more than LOG_SPAN: then bars of a slow backend would vanish. */
#define LOG_SPAN 30
static axis axis_for(double vmin, double vmax) {
    if (vmin > 0 && vmax / vmin > LOG_SPAN) {
        axis a = {true, floor(log10(vmin)), ceil(log10(vmax * 1.08))};
        return a;
    }
    return (axis){false, 0, nice_ceil(vmax * 1.08)};
}

/* The width of s in px at font size px in a sans-serif face: per-character
** advance widths in em (Helvetica's, which Arial and DejaVu Sans Condensed
** match within ~10%; DejaVu Sans is wider, hence the 1.1). */
static double bench_text_width(const char *s, double px) {
    double w = 0;
    for (; *s; s++) {
        char c = *s;
        double em = c >= '0' && c <= '9' ? 0.556
                    : c == ' ' || c == '.' || c == ',' || c == ':' || c == '/' || c == 'i' || c == 'l' || c == 'j' ||
                            c == 'f' || c == 't' || c == 'I' || c == '(' || c == ')'
                        ? 0.278
                    : c == 'm' || c == 'w' || c == 'M' || c == 'W' || c == '%' ? 0.889
                    : c == 'r'                                                 ? 0.333
                    : c >= 'A' && c <= 'Z'                                     ? 0.667
                                                                               : 0.556;
        w += em * px * 1.1;
    }
    return w;
}

/* One line of labels centred at cx[0..n) (NULL entries skipped), each given
** at most slot px: the font shrinks from px to 8 until the widest fits, and
** if even 8 does not, every other label moves a line down (dir 1) or up (dir
** -1), so that neighbours on a line are two slots apart. Each carries its
** font size in its style, which tests/bench_svg_labels.py reads. */
static void label_line(FILE *f, const char *const *text, const double *cx, int n, double slot, double y, double px,
                       const char *cls, int dir) {
    double widest = 0;
    for (int i = 0; i < n; i++)
        if (text[i]) widest = fmax(widest, bench_text_width(text[i], 1));
    double room = slot - 4, size = px;
    while (size > 8 && widest * size > room) size -= 0.5;
    bool stagger = widest * size > room;
    for (int i = 0; i < n; i++) {
        if (!text[i]) continue;
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"%s label\" style=\"font-size:%.1fpx\" text-anchor=\"middle\">",
                cx[i], y + (stagger && i % 2 ? dir * (size + 2) : 0), cls, size);
        bench_xml_text(f, text[i]);
        fprintf(f, "</text>\n");
    }
}

/* W2-cold-start rows are drawn in seconds (their median), lower is better. */
static bool in_seconds(const bench_row *r) {
    return r->unit == BENCH_UNIT_OPS && !strcmp(r->workload, "W2-cold-start");
}

static double value_of(const bench_row *r) { return in_seconds(r) ? r->median_ms * 1e-3 : r->rate; }

typedef struct group {
    const char *workload, *variant;
} group;

/* The chart's panels: distinct (workload, variant) of the non-roofline rows, in row order. */
static int collect_groups(const bench_session *s, group *g, int max) {
    int n = 0;
    for (int i = 0; i < s->n_rows; i++) {
        const bench_row *r = &s->rows[i];
        if (!strncmp(r->workload, "roof-", 5)) continue;
        bool seen = false;
        for (int k = 0; k < n && !seen; k++)
            seen = !strcmp(g[k].workload, r->workload) && !strcmp(g[k].variant, r->variant);
        if (!seen && n < max) g[n++] = (group){r->workload, r->variant};
    }
    return n;
}

static const bench_row *row_for(const bench_session *s, const group *g, int device) {
    for (int i = 0; i < s->n_rows; i++) {
        const bench_row *r = &s->rows[i];
        if (r->device == device && !strcmp(r->workload, g->workload) && !strcmp(r->variant, g->variant)) return r;
    }
    return NULL;
}

static void panel(FILE *f, const bench_session *s, const group *g, double px, double py) {
    double x0 = px + 48, x1 = px + PANEL_W - 14, top = py + 50, base = py + PANEL_H - 44;
    double ymax = 0, ymin = INFINITY;
    const char *unit = "", *size = "";
    bool seconds = false;
    /* torch lines: one per torch device, taken from any row of that device class */
    const char *tdev[BENCH_MAX_DEVICES];
    double trate[BENCH_MAX_DEVICES];
    int nt = 0;
    for (int d = 0; d < s->n_devices; d++) {
        const bench_row *r = row_for(s, g, d);
        if (!r || r->error[0]) continue;
        seconds = in_seconds(r);
        unit = seconds ? "seconds, lower is better" : bench_unit_name(r->unit);
        size = r->size;
        ymax = fmax(ymax, value_of(r));
        if (value_of(r) > 0) ymin = fmin(ymin, value_of(r));
        bool seen = false;
        for (int k = 0; k < nt; k++) seen |= !strcmp(tdev[k], s->devices[d].torch_device);
        if (r->torch_rate > 0 && !seen && !seconds) {
            tdev[nt] = s->devices[d].torch_device;
            trate[nt++] = r->torch_rate;
            ymax = fmax(ymax, r->torch_rate);
            ymin = fmin(ymin, r->torch_rate);
        }
    }
    axis ax = axis_for(ymin, ymax);
    fprintf(f, "<g class=\"panel\">\n<text x=\"%.1f\" y=\"%.1f\" class=\"title\">", px + 10, py + 20);
    bench_xml_text(f, g->workload);
    fprintf(f, " ");
    bench_xml_text(f, g->variant);
    fprintf(f, "</text>\n<text x=\"%.1f\" y=\"%.1f\" class=\"small axis-unit\">%s, %s%s</text>\n", px + 10, py + 36,
            unit, seconds ? "the first step" : "size ", seconds ? "" : size);
    if (ax.log) fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"tiny\">log scale</text>\n", x1 - 44, py + 20);
    /* ticks: 0, hi/2, hi; or every decade (every other one past 6) */
    int nticks = ax.log ? (int)(ax.hi - ax.lo) : 2, step = nticks > 6 ? 2 : 1;
    for (int t = 0; t <= nticks; t += step) {
        double v = ax.log ? pow(10, ax.lo + t) : ax.hi * t / 2, y = base - (base - top) * axis_frac(&ax, v);
        char lab[32];
        if (ax.log)
            snprintf(lab, sizeof lab, "%g", v);
        else
            fmt_rate(lab, sizeof lab, v);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\"/>\n", x0, y, x1, y,
                t ? "#e6e6e6" : "#888");
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"small\" text-anchor=\"end\">%s%s</text>\n", x0 - 4, y + 4, lab,
                seconds ? " s" : "");
    }
    double slot = (x1 - x0) / s->n_devices, bw = fmin(slot * 0.6, 48);
    const char *names[BENCH_MAX_DEVICES] = {0}, *under[BENCH_MAX_DEVICES] = {0}, *over[BENCH_MAX_DEVICES] = {0};
    char under_buf[BENCH_MAX_DEVICES][32], over_buf[BENCH_MAX_DEVICES][32];
    double cx[BENCH_MAX_DEVICES], over_y = INFINITY;
    for (int d = 0; d < s->n_devices; d++) {
        const bench_row *r = row_for(s, g, d);
        cx[d] = x0 + slot * (d + 0.5);
        names[d] = s->devices[d].label;
        if (!r) continue;
        if (r->error[0]) {
            fprintf(f,
                    "<text x=\"%.1f\" y=\"%.1f\" class=\"small\" text-anchor=\"middle\" fill=\"#c00\">failed</text>\n",
                    cx[d], base - 6);
            continue;
        }
        double h = (base - top) * axis_frac(&ax, value_of(r));
        fprintf(f, "<rect class=\"bar\" data-device=\"%s\" data-workload=\"", s->devices[d].label);
        bench_xml_text(f, g->workload);
        fprintf(f, "\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n", cx[d] - bw / 2, base - h,
                bw, h, palette[d % BENCH_MAX_DEVICES]);
        fmt_rate(over_buf[d], sizeof over_buf[d], value_of(r));
        if (seconds) strcat(over_buf[d], " s");
        over[d] = over_buf[d];
        /* the value over each bar: one line at the highest bar's top when they would collide */
        over_y = fmin(over_y, base - h - 4);
        if (r->roof > 0)
            snprintf(under_buf[d], sizeof under_buf[d], "%.0f%% roof", r->roof_pct);
        else if (r->params) /* training rows: the step time under the device */
            snprintf(under_buf[d], sizeof under_buf[d], "%.1f ms/step", r->median_ms);
        else
            continue;
        under[d] = under_buf[d];
    }
    /* values over the bars: each at its bar's top where the row fits at 11 px, else all on one staggered line */
    double widest = 0;
    for (int d = 0; d < s->n_devices; d++)
        if (over[d]) widest = fmax(widest, bench_text_width(over[d], 11));
    if (widest <= slot - 4) {
        for (int d = 0; d < s->n_devices; d++) {
            const bench_row *r = row_for(s, g, d);
            if (!over[d]) continue;
            double h = (base - top) * axis_frac(&ax, value_of(r));
            label_line(f, &over[d], &cx[d], 1, slot, base - h - 4, 11, "small", -1);
        }
    } else {
        label_line(f, over, cx, s->n_devices, slot, over_y, 11, "small", -1);
    }
    label_line(f, names, cx, s->n_devices, slot, base + 14, 11, "small", 1);
    label_line(f, under, cx, s->n_devices, slot, base + 27, 10, "tiny", 1);
    for (int k = 0; k < nt; k++) {
        double y = base - (base - top) * axis_frac(&ax, trate[k]);
        char val[32];
        fmt_rate(val, sizeof val, trate[k]);
        fprintf(f,
                "<line class=\"torch\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#222\" "
                "stroke-width=\"2\" stroke-dasharray=\"6 3\"/>\n",
                x0, y, x1, y);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" class=\"tiny\" text-anchor=\"end\">torch %s %s</text>\n", x1, y - 3,
                tdev[k], val);
    }
    fprintf(f, "</g>\n");
}

int bench_write_svg(const bench_session *s, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "trident bench: cannot write %s\n", TD_QUOTE(path));
        return -1;
    }
    group g[BENCH_MAX_ROWS];
    int ng = collect_groups(s, g, BENCH_MAX_ROWS);
    int cols = ng < MAX_COLS ? (ng > 0 ? ng : 1) : MAX_COLS, prow = (ng + cols - 1) / cols;
    int head = 46 + LEGEND_LINE * (s->n_devices + (s->opt.torch ? 1 : 0));
    int w = cols * PANEL_W + 20, h = head + prow * PANEL_H + 10;
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n"
            "<style>text{font-family:sans-serif;font-size:13px;fill:#222}.title{font-weight:bold}"
            ".small{font-size:11px}.tiny{font-size:10px;fill:#555}</style>\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n",
            w, h, w, h);
    fprintf(f, "<text x=\"10\" y=\"22\" class=\"title\">trident bench %s%s, commit %s</text>\n", s->date,
            s->opt.quick ? " (--quick sizes)" : "", s->commit[0] ? s->commit : "unknown");
    for (int d = 0; d < s->n_devices; d++) {
        const bench_device *dv = &s->devices[d];
        double y = 40 + LEGEND_LINE * d;
        fprintf(f, "<rect class=\"legend\" x=\"10\" y=\"%.1f\" width=\"14\" height=\"14\" fill=\"%s\"/>\n", y,
                palette[d % BENCH_MAX_DEVICES]);
        fprintf(f, "<text x=\"30\" y=\"%.1f\">", y + 12);
        bench_xml_text(f, dv->label);
        fprintf(f, ": ");
        bench_xml_text(f, dv->info.name);
        fprintf(f, " (copy %.1f GB/s; timer: ", dv->copy_gbps);
        bench_xml_text(f, dv->timer);
        fprintf(f, ")</text>\n");
    }
    if (s->opt.torch) {
        double y = 40 + LEGEND_LINE * s->n_devices;
        fprintf(f,
                "<line x1=\"10\" y1=\"%.1f\" x2=\"24\" y2=\"%.1f\" stroke=\"#222\" stroke-width=\"2\" "
                "stroke-dasharray=\"6 3\"/>\n<text x=\"30\" y=\"%.1f\">PyTorch %s: ",
                y + 7, y + 7, y + 12, s->torch_version);
        bench_xml_text(f, s->torch_status);
        fprintf(f, "</text>\n");
    }
    for (int i = 0; i < ng; i++) panel(f, s, &g[i], 10 + (i % cols) * PANEL_W, head + (i / cols) * PANEL_H);
    fprintf(f, "</svg>\n");
    return fclose(f) ? -1 : 0;
}
