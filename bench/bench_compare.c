/*
** trident bench --compare OLD.json NEW.json [--threshold PCT]
**
** Rows match by (workload, variant, device, size). The change is of the median
** time: new/old - 1. A row more than PCT percent slower is a regression.
*/
#include <jansson.h>
#include <string.h>

#include "bench.h"

static json_t *load_rows(const char *path) {
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    if (!root) { /* jansson's sentence quotes the file's bytes it names: escape them */
        fprintf(stderr, "trident bench --compare: %s, line %d: ", TD_QUOTE(path), err.line);
        for (const unsigned char *c = (const unsigned char *)err.text; *c; c++)
            fprintf(stderr, *c >= 0x20 && *c < 0x7f ? "%c" : "\\x%02x", *c);
        fputc('\n', stderr);
        return NULL;
    }
    if (!json_is_array(json_object_get(root, "rows"))) {
        fprintf(stderr, "trident bench --compare: %s has no \"rows\" array (not a trident bench JSON)\n",
                TD_QUOTE(path));
        json_decref(root);
        return NULL;
    }
    return root;
}

static const char *str(json_t *row, const char *key) {
    const char *v = json_string_value(json_object_get(row, key));
    return v ? v : "";
}

static bool same_row(json_t *a, json_t *b) {
    static const char *keys[] = {"workload", "variant", "device", "size"};
    for (int i = 0; i < 4; i++)
        if (strcmp(str(a, keys[i]), str(b, keys[i]))) return false;
    return true;
}

static json_t *find_row(json_t *rows, json_t *like) {
    size_t i;
    json_t *r;
    json_array_foreach(rows, i, r) if (same_row(r, like)) return r;
    return NULL;
}

int bench_compare(const char *old_path, const char *new_path, double threshold_pct, FILE *f) {
    json_t *old_root = load_rows(old_path), *new_root = old_root ? load_rows(new_path) : NULL;
    if (!new_root) {
        json_decref(old_root);
        return 2;
    }
    json_t *old_rows = json_object_get(old_root, "rows"), *new_rows = json_object_get(new_root, "rows");
    fprintf(f, "%-13s %-9s %-9s %-16s %11s %11s %9s\n", "workload", "variant", "device", "size", "old ms", "new ms",
            "change");
    int regressions = 0, compared = 0;
    size_t i;
    json_t *r;
    json_array_foreach(new_rows, i, r) {
        json_t *o = find_row(old_rows, r);
        double t_new = json_number_value(json_object_get(r, "median_ms"));
        double t_old = o ? json_number_value(json_object_get(o, "median_ms")) : 0;
        fprintf(f, "%-13s %-9s %-9s %-16s ", str(r, "workload"), str(r, "variant"), str(r, "device"), str(r, "size"));
        if (!o || t_old <= 0 || t_new <= 0) {
            fprintf(f, "%11s %11s %9s\n", o ? "-" : "(new row)", t_new > 0 ? "" : "failed", "");
            continue;
        }
        double change = 100.0 * (t_new / t_old - 1.0);
        bool bad = change > threshold_pct;
        regressions += bad;
        compared++;
        fprintf(f, "%11.3f %11.3f %+8.1f%%%s\n", t_old, t_new, change, bad ? "  REGRESSION" : "");
    }
    json_array_foreach(old_rows, i, r) if (!find_row(new_rows, r))
        fprintf(f, "%-13s %-9s %-9s %-16s %11s\n", str(r, "workload"), str(r, "variant"), str(r, "device"),
                str(r, "size"), "(gone)");
    fprintf(f, "%d rows compared, %d slower than the %.1f%% threshold\n", compared, regressions, threshold_pct);
    json_decref(old_root);
    json_decref(new_root);
    return regressions ? 1 : 0;
}
