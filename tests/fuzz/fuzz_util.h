/*
** Shared by the libFuzzer harnesses (tests/fuzz/fuzz_*.c): the readers take
** paths, so each input is written to one file per process first.
*/
#ifndef TRIDENT_FUZZ_UTIL_H
#define TRIDENT_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trident/trident.h"

/* data[0..n) as the file <TMPDIR or /tmp>/td_fuzz_<pid><suffix>; its path (static). */
static inline const char *fuzz_file(const uint8_t *data, size_t n, const char *suffix) {
    static char path[512];
    const char *tmp = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/td_fuzz_%d%s", tmp && *tmp ? tmp : "/tmp", (int)getpid(), suffix);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f)) {
        perror(path);
        abort();
    }
    return path;
}

#endif /* TRIDENT_FUZZ_UTIL_H */
