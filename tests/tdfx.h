/*
** Reader of the TDFX fixture files written by tests/fixtures/gen_nn_fixtures.py
** (see its docstring for the format), for the parity tests.
**   tdfx *f = tdfx_open("nn_parity.tdfx");      path relative to tests/fixtures
**   td_tensor *t = tdfx_tensor(f, "linear.y");   new CPU tensor (f32 or int64), NULL if absent
**   tdfx_free(f);
*/
#ifndef TRIDENT_TEST_TDFX_H
#define TRIDENT_TEST_TDFX_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trident/trident.h"

typedef struct tdfx_entry {
    char name[128];
    int dtype; /* 0 f32, 1 i64, 2 q8 */
    int ndim;
    int64_t shape[TD_MAX_DIMS];
    void *data; /* f32 or i64 values (q8 is expanded to f32 on load) */
} tdfx_entry;

typedef struct tdfx {
    int n;
    tdfx_entry *e;
} tdfx;

static int tdfx_read(FILE *fp, void *dst, size_t n) { return fread(dst, 1, n, fp) == n; }

/* Frees f and its entries; NULL is a no-op. */
static void tdfx_free(tdfx *f) {
    if (!f) return;
    for (int i = 0; i < f->n; i++) free(f->e[i].data);
    free(f->e);
    free(f);
}

/* Opens tests/fixtures/<file> (or $TD_FIXTURES/<file>); NULL with a message on failure. */
static tdfx *tdfx_open(const char *file) {
    char path[1024], dir[900];
    const char *env = getenv("TD_FIXTURES");
    if (env) {
        snprintf(dir, sizeof dir, "%s", env);
    } else { /* this header's directory: CMake compiles with absolute paths */
        snprintf(dir, sizeof dir, "%s", __FILE__);
        char *slash = strrchr(dir, '/');
        if (slash)
            snprintf(slash, sizeof dir - (size_t)(slash - dir), "/fixtures");
        else
            snprintf(dir, sizeof dir, "tests/fixtures");
    }
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fprintf(stderr, "  cannot open fixture %s (regenerate: /usr/bin/python3 tests/fixtures/gen_nn_fixtures.py)\n",
                path);
        return NULL;
    }
    char magic[8];
    uint32_t count = 0;
    tdfx *f = calloc(1, sizeof *f);
    bool ok =
        f && tdfx_read(fp, magic, 8) && !memcmp(magic, "TDFX0001", 8) && tdfx_read(fp, &count, 4) && count < 100000;
    if (ok) f->e = calloc(count ? count : 1, sizeof *f->e);
    ok = ok && f->e;
    for (uint32_t i = 0; ok && i < count; i++) {
        tdfx_entry *e = &f->e[i];
        uint16_t len = 0;
        uint8_t dt = 0, nd = 0;
        ok = tdfx_read(fp, &len, 2) && len < sizeof e->name && tdfx_read(fp, e->name, len) && tdfx_read(fp, &dt, 1) &&
             tdfx_read(fp, &nd, 1) && nd <= TD_MAX_DIMS && dt <= 2 && tdfx_read(fp, e->shape, 8u * nd);
        if (!ok) break;
        e->ndim = nd;
        e->dtype = dt == 1 ? 1 : 0;
        size_t numel = 1;
        for (int d = 0; d < nd; d++) numel *= (size_t)e->shape[d];
        e->data = malloc(numel * 8 + 8);
        ok = e->data != NULL;
        if (ok && dt == 2) {
            float scale;
            int8_t *q = malloc(numel + 1);
            ok = q && tdfx_read(fp, &scale, 4) && tdfx_read(fp, q, numel);
            for (size_t k = 0; ok && k < numel; k++) ((float *)e->data)[k] = (float)q[k] * scale;
            free(q);
        } else if (ok) {
            ok = tdfx_read(fp, e->data, numel * (dt == 1 ? 8 : 4));
        }
        f->n++;
    }
    fclose(fp);
    if (!ok) {
        fprintf(stderr, "  fixture %s is truncated or corrupt\n", path);
        tdfx_free(f);
        return NULL;
    }
    return f;
}

static const tdfx_entry *tdfx_find(const tdfx *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->e[i].name, name)) return &f->e[i];
    return NULL;
}

/* New CPU tensor with the entry's values (f32 or int64); NULL if absent. */
static td_tensor *tdfx_tensor(const tdfx *f, const char *name) {
    const tdfx_entry *e = tdfx_find(f, name);
    if (!e) return NULL;
    return td_from_data(e->data, e->ndim, e->shape, e->dtype == 1 ? TD_I64 : TD_F32, TD_CPU);
}

#endif /* TRIDENT_TEST_TDFX_H */
