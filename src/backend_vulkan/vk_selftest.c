/*
** The per-driver self-test record and the denylist it feeds.
**
** `trident devices --selftest` runs conformance cases on each device through
** the hooks below (vk_selftest.h). When a case fails, the variants with a
** generic twin that ran in it are replaced by their twins and the case runs
** again; if it then passes, those variants are denied. save() writes them to
**     <cache dir>/vulkan-selftest-<vendor>-<device>-<driverID>-<driverVersion>-<hash of driverInfo>.txt
** beside the pipeline cache (vk_pipeline.c), one "deny <variant>" line each,
** after two comment lines (device and driver; the sweep's summary). Every
** later process on that device and driver version reads the file when it
** creates the device, and runs a denied variant's generic twin instead, with
** one line on stderr the first time. A new driver version has no record: the
** self-test should run again.
**
** Test hook: TRIDENT_VULKAN_PLANT=<variant> makes that variant give wrong
** output on purpose (every output binding filled with NaN bytes after each of
** its dispatches), as a vendor's miscompile would; tests/test_selftest.sh
** plants one on lavapipe and checks that the self-test denies it.
*/
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vk.h"
#include "vk_selftest.h"

/* The record's path for d's driver; false without a cache directory. */
static bool record_path(vk_dev *d, char *path, size_t n, char *driver, size_t driver_size) {
    VkPhysicalDeviceDriverProperties dp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &dp};
    vkGetPhysicalDeviceProperties2(d->phys, &p2);
    if (driver)
        snprintf(driver, driver_size, "%s %s (driver id %d, version 0x%x)", dp.driverName, dp.driverInfo,
                 (int)dp.driverID, d->props.driverVersion);
    /* some drivers (lavapipe) keep driverVersion fixed: their version is in driverInfo */
    uint32_t h = 2166136261u;
    for (const char *p = dp.driverInfo; *p; p++) h = (h ^ (unsigned char)*p) * 16777619u;
    char dir[3072];
    if (!vk_cache_dir(dir, sizeof dir)) return false;
    snprintf(path, n, "%s/vulkan-selftest-%04x-%04x-%d-%08x-%08x.txt", dir, d->props.vendorID, d->props.deviceID,
             (int)dp.driverID, d->props.driverVersion, h);
    return true;
}

void vk_selftest_load(vk_dev *d) {
    const char *plant = getenv("TRIDENT_VULKAN_PLANT");
    d->planted = plant && *plant ? vk_variant_id(plant) : -1;
    if (plant && *plant && d->planted < 0)
        fprintf(stderr, "trident: TRIDENT_VULKAN_PLANT=%s names no kernel variant; nothing planted\n", plant);
    char path[4096];
    if (!record_path(d, path, sizeof path, NULL, 0)) return;
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "deny ", 5)) continue;
        line[strcspn(line, "\r\n")] = 0;
        int id = vk_variant_id(line + 5);
        if (id >= 0 && vk_shader_table[id].generic >= 0) d->denied[id] = true;
    }
    fclose(f);
}

void vk_selftest_warn(vk_dev *d, int shader) {
    if (d->warned[shader]) return;
    d->warned[shader] = true;
    char path[4096] = "";
    record_path(d, path, sizeof path, NULL, 0);
    fprintf(stderr, "trident: vulkan:%d (%s): kernel %s failed this driver's self-test (%s); %s runs instead\n",
            d->index, d->props.deviceName, vk_shader_table[shader].name, path,
            vk_shader_table[vk_shader_table[shader].generic].name);
}

td_status vk_selftest_plant(vk_dev *d, int variant, int n_bind, const vk_bind *binds) {
    if (variant != d->planted) return TD_OK;
    td_status st = TD_OK;
    for (int i = 0; st == TD_OK && i < n_bind; i++) {
        VkDeviceSize size = binds[i].range & ~(VkDeviceSize)3;
        if (!binds[i].write || !size) continue;
        st = vk_cmd_fill(d, binds[i].buf, binds[i].offset, size, 0x7fc07fc0u); /* NaN in f16, bf16, f32, f64 */
    }
    return st;
}

/* ---- hooks ---- */

static vk_dev *hook_dev(int dev) {
    vk_dev *d = vk_get(dev);
    if (d) vk_lock(d);
    return d;
}

static td_status hook_begin(int dev) {
    vk_dev *d = hook_dev(dev);
    if (!d) return td_last_status();
    memset(d->denied, 0, sizeof d->denied);
    memset(d->used, 0, sizeof d->used);
    vk_unlock(d);
    return TD_OK;
}

static void hook_mark(int dev) {
    vk_dev *d = hook_dev(dev);
    if (!d) return;
    memset(d->used, 0, sizeof d->used);
    vk_unlock(d);
}

static int hook_used(int dev, int *ids, int max) {
    vk_dev *d = hook_dev(dev);
    int n = 0;
    if (!d) return 0;
    for (int i = 0; i < VK_SHADER_COUNT && n < max; i++)
        if (d->used[i]) ids[n++] = i;
    vk_unlock(d);
    return n;
}

static const char *hook_name(int id) { return id >= 0 && id < VK_SHADER_COUNT ? vk_shader_table[id].name : "?"; }

static void hook_deny(int dev, int id, bool deny) {
    vk_dev *d = hook_dev(dev);
    if (!d) return;
    if (id >= 0 && id < VK_SHADER_COUNT && vk_shader_table[id].generic >= 0) {
        d->denied[id] = deny;
        d->warned[id] = true; /* the self-test says so itself */
    }
    vk_unlock(d);
}

static td_status hook_save(int dev, const char *summary, char *path, size_t path_size) {
    vk_dev *d = hook_dev(dev);
    if (!d) return td_last_status();
    char driver[768];
    td_status st = TD_OK;
    if (!record_path(d, path, path_size, driver, sizeof driver)) {
        snprintf(path, path_size, "(none)");
        vk_unlock(d);
        return td_error_set(TD_ERR_IO, "vulkan self-test: no cache directory to record in ($XDG_CACHE_HOME, $HOME, "
                                       "or TRIDENT_VULKAN_PIPELINE_CACHE=0)");
    }
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    bool ok = f && fprintf(f, "# trident vulkan self-test: %s, %s\n# %s\n", d->props.deviceName, driver, summary) > 0;
    for (int i = 0; ok && i < VK_SHADER_COUNT; i++)
        if (d->denied[i]) ok = fprintf(f, "deny %s\n", vk_shader_table[i].name) > 0;
    if (f) ok = fclose(f) == 0 && ok;
    if (ok) ok = rename(tmp, path) == 0;
    if (!ok) {
        unlink(tmp);
        st = td_error_set(TD_ERR_IO, "vulkan self-test: cannot write %s", path);
    }
    vk_unlock(d);
    return st;
}

static const td_vulkan_selftest_i hooks = {
    .begin = hook_begin,
    .mark = hook_mark,
    .used = hook_used,
    .name = hook_name,
    .deny = hook_deny,
    .save = hook_save,
};

__attribute__((visibility("default"))) const td_vulkan_selftest_i *td_vulkan_selftest(void) { return &hooks; }
