/*
** trident --version / trident version: the library's version and commit, where
** it was loaded from, each backend (built in, or its plugin: loaded with its
** devices, or why not), and the other plugins found next to the library.
*/
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trident/trident.h"
#include "trident_build_info.h"

/* The file that holds the code at addr ("unknown" if the loader cannot say). */
static const char *file_of(const void *addr) {
    Dl_info info;
    return dladdr(addr, &info) && info.dli_fname ? info.dli_fname : "unknown";
}

int cmd_version(int argc, char **argv) {
    (void)argc, (void)argv;
    static const char *const types[TD_DEVICE_TYPE_COUNT] = {"cpu", "cuda", "vulkan"};
    printf("trident %s (commit %s)\n", TRIDENT_VERSION, TRIDENT_GIT_COMMIT);
    const char *lib = file_of((const void *)&td_backend_unavailable_reason);
    printf("library: %s\n", lib);
    printf("backends:\n");
    for (int type = 0; type < TD_DEVICE_TYPE_COUNT; type++) {
        const char *why = td_backend_unavailable_reason(type);
        if (why) {
            printf("  %-7s unavailable: %s\n", types[type], why);
            continue;
        }
        int n = 0;
        while (td_device_available((td_device){type, n})) n++;
        const char *from = type == TD_DEVICE_CPU ? "built in" : file_of(td_backend_symbol(type, "td_backend_plugin"));
        printf("  %-7s loaded (%s), %d device%s\n", types[type], from, n, n == 1 ? "" : "s");
    }
    td_clear_error();
    /* every libtrident-*.so next to the library: backends load on first use, transports with --ddp */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", lib);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    const char *env = getenv("TRIDENT_PLUGIN_DIR");
    const char *pdir = env && *env ? env : slash ? dir : ".";
    printf("plugins in %s:", pdir);
    DIR *d = opendir(pdir);
    int found = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (!strncmp(e->d_name, "libtrident-", 11) && n > 14 && !strcmp(e->d_name + n - 3, ".so") &&
            strcmp(e->d_name, "libtrident-ompenv.so"))
            printf(" %.*s", (int)(n - 14), e->d_name + 11), found++;
    }
    if (d) closedir(d);
    printf("%s\n", found ? "" : " none");
    return 0;
}
