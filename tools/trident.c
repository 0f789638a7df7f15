/*
** trident: the command-line tool. Subcommands: devices, train, bench, kernel, launch, version.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trident/trident.h"

int cmd_devices(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_kernel(int argc, char **argv);
int cmd_launch(int argc, char **argv);
int cmd_version(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_math(int argc, char **argv);

static void usage(FILE *f) {
    fprintf(f, "usage: trident <command> [options]\n\n"
               "commands:\n"
               "  devices [--ops] [--load LIB]   list backends, devices, capabilities and op coverage\n"
               "  devices --selftest [--full] [case ...]\n"
               "                    conformance sweep on each GPU device; records kernels that fail per driver\n"
               "  train [options]   train a model (default: the W2 CNN on Fashion-MNIST)\n"
               "  bench [options]   benchmark the backends side by side\n"
               "  kernel check|run|bench|gradcheck FILE ...\n"
               "                    compile, run, time or gradcheck one custom-op kernel (trident kernel --help)\n"
               "  math --emit c|cuda|glsl|--bench 'EXPR' --shape x=AxB ...\n"
               "                    a math block's fused kernels, printed or timed against the separate ops\n"
               "  launch --nproc N -- CMD   run N processes of CMD for data-parallel training (like torchrun)\n"
               "  export --onnx FILE [options]   a trident train checkpoint as an ONNX model\n"
               "  version, --version   library version and commit, backends and plugins (loaded, or why not)\n");
}

int main(int argc, char **argv) {
    if (argc < 2) return usage(stderr), 2;
    if (!strcmp(argv[1], "devices")) return cmd_devices(argc - 1, argv + 1);
    if (!strcmp(argv[1], "train")) return cmd_train(argc - 1, argv + 1);
    if (!strcmp(argv[1], "bench")) return cmd_bench(argc - 1, argv + 1);
    if (!strcmp(argv[1], "kernel")) return cmd_kernel(argc - 1, argv + 1);
    if (!strcmp(argv[1], "launch")) return cmd_launch(argc - 1, argv + 1);
    if (!strcmp(argv[1], "math")) return cmd_math(argc - 1, argv + 1);
    if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version")) return cmd_version(argc - 1, argv + 1);
    if (!strcmp(argv[1], "export")) return cmd_export(argc - 1, argv + 1);
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) return usage(stdout), 0;
    fprintf(stderr, "trident: unknown command %s (see trident --help)\n", TD_QUOTE(argv[1]));
    return 2;
}
