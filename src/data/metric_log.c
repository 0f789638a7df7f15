/*
** Per-epoch metric logs: CSV (header line, then one row per write) or JSONL
** (one JSON object per line), appended and flushed line by line.
*/
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "trident/data.h"

struct td_metric_log {
    FILE *f;
    char *path;
    td_log_format format;
    char *header; /* CSV: the header line without '\n', or NULL until known */
};

td_status td_metric_log_open(const char *path, td_log_format format, td_metric_log **out) {
    if (!out) return TD_ERR(TD_ERR_MISUSE, "metric_log_open: out is NULL");
    *out = NULL;
    if (!path || (format != TD_LOG_CSV && format != TD_LOG_JSONL))
        return TD_ERR(TD_ERR_MISUSE, "metric_log_open: need a path and format CSV or JSONL");
    td_metric_log *log = calloc(1, sizeof *log);
    if (!log || !(log->path = strdup(path))) {
        free(log);
        return TD_ERR(TD_ERR_OOM, "metric_log_open: out of host memory");
    }
    log->format = format;
    log->f = fopen(path, "a+");
    if (!log->f) {
        td_status st = TD_ERR(TD_ERR_IO, "metric_log: cannot open %s: %s", TD_QUOTE(path), strerror(errno));
        td_metric_log_close(log);
        return st;
    }
    if (format == TD_LOG_CSV) { /* an existing file's first line is its header */
        char line[4096];
        rewind(log->f);
        if (fgets(line, sizeof line, log->f)) {
            line[strcspn(line, "\r\n")] = 0;
            log->header = strdup(line);
        }
        fseek(log->f, 0, SEEK_END);
    }
    *out = log;
    return TD_OK;
}

/* A CSV line of keys (header) into a malloc'd string. */
static char *csv_header(int n, const char *const *keys) {
    size_t len = 1;
    for (int i = 0; i < n; i++) len += strlen(keys[i]) + 1;
    char *h = malloc(len);
    if (!h) return NULL;
    h[0] = 0;
    for (int i = 0; i < n; i++) strcat(strcat(h, i ? "," : ""), keys[i]);
    return h;
}

static td_status write_csv(td_metric_log *log, int n, const char *const *keys, const double *values) {
    for (int i = 0; i < n; i++)
        if (strpbrk(keys[i], ",\"\r\n"))
            return TD_ERR(TD_ERR_MISUSE, "metric_log: CSV key %s contains a comma, quote or newline",
                          TD_QUOTE(keys[i]));
    char *h = csv_header(n, keys);
    if (!h) return TD_ERR(TD_ERR_OOM, "metric_log: out of host memory");
    if (log->header && strcmp(log->header, h)) {
        td_status st = TD_ERR(TD_ERR_MISUSE, "metric_log: keys %s differ from the header %s of %s", TD_QUOTE(h),
                              TD_QUOTE(log->header), TD_QUOTE(log->path));
        free(h);
        return st;
    }
    if (!log->header) {
        fprintf(log->f, "%s\n", h);
        log->header = h;
    } else {
        free(h);
    }
    for (int i = 0; i < n; i++) fprintf(log->f, i ? ",%.17g" : "%.17g", values[i]);
    fputc('\n', log->f);
    return TD_OK;
}

static td_status write_jsonl(td_metric_log *log, int n, const char *const *keys, const double *values) {
    json_t *o = json_object();
    bool ok = o != NULL;
    for (int i = 0; ok && i < n; i++) {
        double v = values[i];
        json_t *j = !isfinite(v)                                      ? json_null()
                    : (v == floor(v) && fabs(v) < 9007199254740992.0) ? json_integer((json_int_t)v)
                                                                      : json_real(v);
        ok = !json_object_set_new(o, keys[i], j);
    }
    char *s = ok ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(o);
    if (!s) return TD_ERR(TD_ERR_MISUSE, "metric_log: cannot encode the line (invalid UTF-8 key or out of memory)");
    fprintf(log->f, "%s\n", s);
    free(s);
    return TD_OK;
}

td_status td_metric_log_write(td_metric_log *log, int n, const char *const *keys, const double *values) {
    if (!log || n < 1 || !keys || !values)
        return TD_ERR(TD_ERR_MISUSE, "metric_log_write: need a log and n >= 1 pairs");
    for (int i = 0; i < n; i++)
        if (!keys[i] || !keys[i][0]) return TD_ERR(TD_ERR_MISUSE, "metric_log_write: key %d is NULL or empty", i);
    td_status st = log->format == TD_LOG_CSV ? write_csv(log, n, keys, values) : write_jsonl(log, n, keys, values);
    if (st == TD_OK && (fflush(log->f) != 0 || ferror(log->f)))
        st = TD_ERR(TD_ERR_IO, "metric_log: cannot write %s: %s", TD_QUOTE(log->path), strerror(errno));
    return st;
}

void td_metric_log_close(td_metric_log *log) {
    if (!log) return;
    if (log->f) fclose(log->f);
    free(log->header);
    free(log->path);
    free(log);
}
