/*
** The Vulkan backend's self-test hooks, for `trident devices --selftest`
** (tools/devices_selftest.c), which finds them with
** td_backend_symbol(TD_DEVICE_VULKAN, "td_vulkan_selftest").
** defines: td_vulkan_selftest_i.
**
** A kernel variant that uses optional device features has a generic twin
** (shaders.cmake). The self-test runs conformance cases; when one fails, it
** asks which such variants ran (used), replaces them by their twins (deny)
** and runs the case again. save() records the denied variants per (device,
** driver, version) beside the pipeline cache; later processes on that driver
** run the twins instead, with a one-line warning (vk_selftest.c).
*/
#ifndef TRIDENT_VK_SELFTEST_H
#define TRIDENT_VK_SELFTEST_H

#include <stdbool.h>
#include <stddef.h>

#include "trident/status.h"

typedef struct td_vulkan_selftest_i {
    /* Start a sweep on dev: forget the variants the record denies, and which ran. */
    td_status (*begin)(int dev);
    /* Forget which variants ran. */
    void (*mark)(int dev);
    /* The variants with a generic twin that ran since the last mark, at most max; returns how many. */
    int (*used)(int dev, int *ids, int max);
    /* A variant's name ("softmax_f32"). */
    const char *(*name)(int id);
    /* Run variant id's generic twin on dev from now on (deny), or the variant itself again (!deny). */
    void (*deny)(int dev, int id, bool deny);
    /* Write the record of dev's driver (the variants denied since begin, and the summary line);
    ** path gets its file name. */
    td_status (*save)(int dev, const char *summary, char *path, size_t path_size);
} td_vulkan_selftest_i;

#endif /* TRIDENT_VK_SELFTEST_H */
