/*
** CIFAR-10 binary reader (https://www.cs.toronto.edu/~kriz/cifar.html):
** each file is a sequence of 3073-byte records, 1 label byte (0..9) then
** 3072 pixel bytes: the 32x32 red plane, then green, then blue, row-major.
** So record r gives y[r] = label and x[r] = pixels as [3,32,32].
*/
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/internal.h"
#include "trident/data.h"

#define CIFAR_PIXELS  3072
#define CIFAR_RECORD  (1 + CIFAR_PIXELS)
#define CIFAR_CLASSES 10

/* Size of path in records, validated. */
static td_status count_records(const char *path, int64_t *n) {
    struct stat sb;
    if (stat(path, &sb) != 0) return TD_ERR(TD_ERR_IO, "cifar10: cannot open %s: %s", TD_QUOTE(path), strerror(errno));
    if (sb.st_size % CIFAR_RECORD)
        return TD_ERR(TD_ERR_FORMAT, "cifar10: %s is %lld bytes, not a multiple of the %d-byte record", TD_QUOTE(path),
                      (long long)sb.st_size, CIFAR_RECORD);
    *n = sb.st_size / CIFAR_RECORD;
    return TD_OK;
}

/* Read n records of path into labels y[0..n) and pixels x[0..n*3072). */
static td_status read_records(const char *path, int64_t n, int64_t *y, uint8_t *x) {
    FILE *f = fopen(path, "rb");
    if (!f) return TD_ERR(TD_ERR_IO, "cifar10: cannot open %s: %s", TD_QUOTE(path), strerror(errno));
    unsigned char rec[CIFAR_RECORD];
    td_status st = TD_OK;
    for (int64_t r = 0; r < n && st == TD_OK; r++) {
        if (fread(rec, 1, CIFAR_RECORD, f) != CIFAR_RECORD)
            st = TD_ERR(TD_ERR_FORMAT, "cifar10: %s is truncated at record %lld", TD_QUOTE(path), (long long)r);
        else if (rec[0] >= CIFAR_CLASSES)
            st = TD_ERR(TD_ERR_FORMAT, "cifar10: %s record %lld has label %d, outside 0..9", TD_QUOTE(path),
                        (long long)r, rec[0]);
        else {
            y[r] = rec[0];
            memcpy(x + (size_t)r * CIFAR_PIXELS, rec + 1, CIFAR_PIXELS);
        }
    }
    fclose(f);
    return st;
}

td_status td_cifar10_load(int n_paths, const char *const *paths, bool as_f32, td_tensor **x, td_tensor **y) {
    if (!x || !y) return TD_ERR(TD_ERR_MISUSE, "cifar10_load: x or y is NULL");
    *x = *y = NULL;
    if (n_paths < 1 || n_paths > 1024 || !paths)
        return TD_ERR(TD_ERR_MISUSE, "cifar10_load: need 1 to 1024 paths, got %d", n_paths);
    int64_t total = 0, counts[n_paths];
    for (int i = 0; i < n_paths; i++) {
        if (!paths[i]) return TD_ERR(TD_ERR_MISUSE, "cifar10_load: path %d is NULL", i);
        td_status st = count_records(paths[i], &counts[i]);
        if (st != TD_OK) return st;
        total += counts[i];
    }
    int64_t xs[4] = {total, 3, 32, 32};
    td_tensor *xt = td__alloc(4, xs, TD_U8, TD_CPU), *yt = td__alloc(1, &total, TD_I64, TD_CPU);
    td_status st = xt && yt ? TD_OK : td_last_status();
    for (int i = 0, at = 0; i < n_paths && st == TD_OK; at += (int)counts[i], i++)
        st = read_records(paths[i], counts[i], (int64_t *)td__host_data(yt) + at,
                          (uint8_t *)td__host_data(xt) + (size_t)at * CIFAR_PIXELS);
    if (st == TD_OK && as_f32) { /* x / 255 into [0, 1] */
        td_tensor *xf = td__alloc(4, xs, TD_F32, TD_CPU);
        if (!xf)
            st = td_last_status();
        else {
            const uint8_t *src = td__host_data(xt);
            float *dst = td__host_data(xf);
            for (int64_t i = 0; i < total * CIFAR_PIXELS; i++) dst[i] = (float)src[i] / 255.0f;
            td_release(xt);
            xt = xf;
        }
    }
    if (st != TD_OK) {
        td_release(xt);
        td_release(yt);
        return st;
    }
    *x = td__scope_add(xt);
    *y = td__scope_add(yt);
    return TD_OK;
}
