/*
** trident: the command-line tool. Subcommands: devices, train, bench.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trident/trident.h"

int cmd_devices(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_bench(int argc, char **argv);

static void usage(FILE *f) {
    fprintf(f, "usage: trident <command> [options]\n\n"
               "commands:\n"
               "  devices [--ops]   list backends, devices, capabilities and op coverage\n"
               "  train [options]   train a model (default: the W2 CNN on Fashion-MNIST)\n"
               "  bench [options]   benchmark the backends side by side\n");
}

/* libgomp reads OMP_WAIT_POLICY once, when it loads, and by default its idle
** threads spin at every barrier. A training step runs hundreds of small
** parallel regions, and on a machine whose cores are shared a spinning thread
** steals the core a working one needs: W1 ran 4x slower on 2 busy cores. So
** the tool restarts itself once with the passive policy unless the user chose
** one. (Programs linking libtrident set it in their own environment.) */
static void prefer_passive_omp_wait(char **argv) {
    if (getenv("OMP_WAIT_POLICY")) return;
    setenv("OMP_WAIT_POLICY", "passive", 1);
    execv("/proc/self/exe", argv); /* returns only on failure: then run as we are */
}

int main(int argc, char **argv) {
    prefer_passive_omp_wait(argv);
    if (argc < 2) return usage(stderr), 2;
    if (!strcmp(argv[1], "devices")) return cmd_devices(argc - 1, argv + 1);
    if (!strcmp(argv[1], "train")) return cmd_train(argc - 1, argv + 1);
    if (!strcmp(argv[1], "bench")) return cmd_bench(argc - 1, argv + 1);
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) return usage(stdout), 0;
    fprintf(stderr, "trident: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
