/*
** Shared by the libFuzzer harnesses (tests/fuzz/fuzz_*.c).
**
** fuzz_file: the readers take paths, so each input is written to one
** in-memory file per process (a memfd, which the reader opens as
** /proc/self/fd/N): no file system work per input beyond the reader's own
** open, read and close.
**
** fuzz_setup, called once from LLVMFuzzerInitialize, takes per-process costs
** out of the runs: the CPU backend's OpenBLAS self-test (seconds under
** ASan; no harness multiplies matrices on its inputs) is skipped with
** TRIDENT_CPU_GEMM=builtin, and the queue of released tensor headers (see
** src/core/tensor.c: a header is reused only after DEAD_QUEUE_MIN others were
** released) is filled, so that an input that makes tensors frees as many
** blocks as it allocates. Otherwise libFuzzer takes every such input for a
** possible leak, runs it again and scans the heap.
**
** FUZZ_INITIALIZE_WITH_SETUP defines that LLVMFuzzerInitialize for a harness
** that needs nothing else.
*/
#ifndef TRIDENT_FUZZ_UTIL_H
#define TRIDENT_FUZZ_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create */
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "trident/trident.h"

#define FUZZ_WARM_TENSORS 2048 /* more than src/core/tensor.c's DEAD_QUEUE_MIN */

/* data[0..n) as the process's memfd; its path (static). */
static inline const char *fuzz_file(const uint8_t *data, size_t n) {
    static char path[64];
    static int fd = -1;
    static size_t size; /* the memfd's length */
    if (fd < 0) {
        fd = memfd_create("td_fuzz", MFD_CLOEXEC);
        if (fd < 0) {
            perror("fuzz: memfd_create");
            abort();
        }
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if ((n && pwrite(fd, data, n, 0) != (ssize_t)n) || (n < size && ftruncate(fd, (off_t)n))) {
        perror("fuzz: writing the input to the memfd");
        abort();
    }
    size = n;
    return path;
}

static inline void fuzz_setup(void) {
    setenv("TRIDENT_CPU_GEMM", "builtin", 0);
    for (int i = 0; i < FUZZ_WARM_TENSORS; i++) {
        td_tensor *t = td_scalar(0, TD_F32, TD_CPU);
        if (!t) {
            fprintf(stderr, "fuzz: setup failed: %s\n", td_last_error());
            exit(1);
        }
        td_release(t);
    }
}

#define FUZZ_INITIALIZE_WITH_SETUP                                                                                     \
    int LLVMFuzzerInitialize(int *argc, char ***argv) {                                                                \
        (void)argc, (void)argv;                                                                                        \
        fuzz_setup();                                                                                                  \
        return 0;                                                                                                      \
    }

#endif /* TRIDENT_FUZZ_UTIL_H */
