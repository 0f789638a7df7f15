/*
** Devices and the backend registry. The CPU backend is built in; GPU backends
** are plugins (libtrident-cuda.so, libtrident-vulkan.so) loaded on first use
** from the directory that holds libtrident.so, or from TRIDENT_PLUGIN_DIR.
*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const char *type_names[TD_DEVICE_TYPE_COUNT] = {"cpu", "cuda", "vulkan"};

typedef struct backend_slot {
    const td_backend *backend; /* NULL when unavailable */
    void *lib;                 /* the plugin's dlopen handle */
    char why[4608];            /* reason when unavailable */
} backend_slot;

static backend_slot slots[TD_DEVICE_TYPE_COUNT];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void plugin_dir(char *dir, size_t n) {
    const char *env = getenv("TRIDENT_PLUGIN_DIR");
    if (env && *env) {
        snprintf(dir, n, "%s", env);
        return;
    }
    Dl_info info;
    if (dladdr((void *)&plugin_dir, &info) && info.dli_fname) {
        snprintf(dir, n, "%s", info.dli_fname);
        char *slash = strrchr(dir, '/');
        if (slash) {
            *slash = 0;
            return;
        }
    }
    snprintf(dir, n, ".");
}

static void load_plugin(int type) {
    backend_slot *s = &slots[type];
    char dir[4096], path[4200];
    plugin_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/libtrident-%s.so", dir, type_names[type]);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(s->why, sizeof s->why, "plugin not loaded: %s", dlerror());
        return;
    }
    td_backend_plugin_fn entry = (td_backend_plugin_fn)dlsym(lib, "td_backend_plugin");
    const td_backend *be = entry ? entry() : NULL;
    if (!be) {
        snprintf(s->why, sizeof s->why, "%s has no td_backend_plugin entry point", path);
        return;
    }
    if (be->api_version != TD_BACKEND_API_VERSION) {
        snprintf(s->why, sizeof s->why,
                 "%s: backend API version %u, expected %u (rebuild the plugin with this version's headers)", path,
                 be->api_version, TD_BACKEND_API_VERSION);
        return;
    }
    if (be->device_type != type) {
        snprintf(s->why, sizeof s->why, "%s: a backend for device type %d, expected %d (%s)", path, be->device_type,
                 type, type_names[type]);
        return;
    }
    if (be->init && be->init(s->why, sizeof s->why) != TD_OK) return;
    if (be->iface->device_count() <= 0) {
        snprintf(s->why, sizeof s->why, "%s backend found no devices", type_names[type]);
        return;
    }
    s->backend = be;
    s->lib = lib;
}

static void load_all(void) {
    slots[TD_DEVICE_CPU].backend = &td_cpu_backend;
    td_cpu_backend.init(slots[TD_DEVICE_CPU].why, sizeof slots[0].why); /* never fails */
    if (!getenv("TRIDENT_NO_CUDA"))
        load_plugin(TD_DEVICE_CUDA);
    else
        snprintf(slots[TD_DEVICE_CUDA].why, sizeof slots[0].why, "disabled by TRIDENT_NO_CUDA");
    if (!getenv("TRIDENT_NO_VULKAN"))
        load_plugin(TD_DEVICE_VULKAN);
    else
        snprintf(slots[TD_DEVICE_VULKAN].why, sizeof slots[0].why, "disabled by TRIDENT_NO_VULKAN");
}

const td_backend *td_backend_for(int device_type) {
    if (device_type < 0 || device_type >= TD_DEVICE_TYPE_COUNT) {
        TD_ERR(TD_ERR_MISUSE, "device type %d does not exist", device_type);
        return NULL;
    }
    pthread_once(&load_once, load_all);
    const backend_slot *s = &slots[device_type];
    if (!s->backend) TD_ERR(TD_ERR_UNAVAILABLE, "%s backend unavailable: %s", type_names[device_type], s->why);
    return s->backend;
}

const char *td_backend_unavailable_reason(int device_type) {
    if (device_type < 0 || device_type >= TD_DEVICE_TYPE_COUNT) return "no such device type";
    pthread_once(&load_once, load_all);
    return slots[device_type].backend ? NULL : slots[device_type].why;
}

void *td_backend_symbol(int device_type, const char *name) {
    if (device_type < 0 || device_type >= TD_DEVICE_TYPE_COUNT || !name) return NULL;
    pthread_once(&load_once, load_all);
    const backend_slot *s = &slots[device_type];
    return s->backend && s->lib ? dlsym(s->lib, name) : NULL;
}

const td_backend *td__backend_of(td_device dev) {
    const td_backend *be = td_backend_for(dev.type);
    if (!be) return NULL;
    int n = be->iface->device_count();
    if (dev.index < 0 || dev.index >= n) {
        char buf[32];
        TD_ERR(TD_ERR_UNAVAILABLE, "device %s does not exist (%s has %d device%s)", td_device_str(dev, buf, sizeof buf),
               be->name, n, n == 1 ? "" : "s");
        return NULL;
    }
    return be;
}

bool td_device_equal(td_device a, td_device b) { return a.type == b.type && a.index == b.index; }

const char *td_device_str(td_device d, char *buf, size_t n) {
    if (d.type < 0 || d.type >= TD_DEVICE_TYPE_COUNT)
        snprintf(buf, n, "?%d:%d", d.type, d.index);
    else if (d.type == TD_DEVICE_CPU)
        snprintf(buf, n, "cpu");
    else
        snprintf(buf, n, "%s:%d", type_names[d.type], d.index);
    return buf;
}

bool td_device_available(td_device d) {
    if (d.type < 0 || d.type >= TD_DEVICE_TYPE_COUNT) return false;
    pthread_once(&load_once, load_all);
    const td_backend *be = slots[d.type].backend;
    return be && d.index >= 0 && d.index < be->iface->device_count();
}

/* The first real GPU: CUDA, then Vulkan. A software Vulkan device (lavapipe)
** is slower than the CPU backend, so "auto" skips it and falls back to cpu. */
static td_device best_device(void) {
    for (int type = TD_DEVICE_CUDA; type < TD_DEVICE_TYPE_COUNT; type++) {
        const td_backend *be = td_backend_unavailable_reason(type) ? NULL : td_backend_for(type);
        int n = be ? be->iface->device_count() : 0;
        for (int i = 0; i < n; i++) {
            td_device_info info;
            if (be->iface->device_info(i, &info) == TD_OK && !info.emulated) return (td_device){type, i};
        }
    }
    return TD_CPU;
}

td_status td_device_parse(const char *s, td_device *out) {
    if (!s || !out) return TD_ERR(TD_ERR_MISUSE, "td_device_parse: NULL argument");
    *out = TD_CPU;
    if (!strcmp(s, "auto")) {
        *out = best_device();
        return TD_OK;
    }
    for (int type = 0; type < TD_DEVICE_TYPE_COUNT; type++) {
        size_t len = strlen(type_names[type]);
        if (strncmp(s, type_names[type], len) != 0) continue;
        const char *rest = s + len;
        int index = 0;
        if (*rest == ':') {
            char *end;
            long v = strtol(rest + 1, &end, 10);
            if (end == rest + 1 || *end || v < 0 || v > 1 << 20)
                return TD_ERR(TD_ERR_MISUSE, "bad device %s: expected %s:N with N >= 0", TD_QUOTE(s), type_names[type]);
            index = (int)v;
        } else if (*rest) {
            continue;
        }
        td_device d = {type, index};
        if (!td__backend_of(d)) return td_last_status();
        *out = d;
        return TD_OK;
    }
    return TD_ERR(TD_ERR_MISUSE, "unknown device %s: expected auto, cpu, cuda[:N] or vulkan[:N]", TD_QUOTE(s));
}
