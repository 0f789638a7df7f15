/*
** trident devices --selftest [--full] [case ...]: a short conformance sweep on
** every GPU device, with the case table of tests/test_conformance.c (compiled
** in here with CONF_TABLE_ONLY; the method is in tests/conformance.h): each
** case's variants in every dtype of its class, tiny shapes (--full: the test
** shapes), seed TD_SEED (default 1), against the CPU float64 reference;
** TD_BACKENDS=vulkan:0,... keeps only the devices it lists.
**
** On a Vulkan device a failed check is run again with the kernel variants it
** used replaced by their generic twins; when that passes, those variants are
** denied, and the record of the device's driver (vk_selftest.c) lists them,
** so that later processes on that driver run the twins. Exit status 1 when a
** failure remains.
*/
#pragma GCC diagnostic ignored "-Wunused-function" /* the runner's functions, which the CLI does not use */
#define CONF_TABLE_ONLY
#include "../tests/test_conformance.c"
#include "backend_vulkan/vk_selftest.h"

#define MAX_USED 32

typedef struct sweep_count {
    int passed, failed, fixed, unsupported;
} sweep_count;

static bool chosen(const char *name, int n_names, char **names) {
    bool yes = n_names == 0;
    for (int i = 0; i < n_names; i++) yes |= !strcmp(names[i], name);
    return yes;
}

/* One check; on a failure on Vulkan, the variants it used are replaced by their twins and it runs again. */
static void check(const conf_case *cc, const conf_env *e, td_dtype dt, int v, const td_vulkan_selftest_i *h,
                  sweep_count *n, int *end) {
    td_device dev = e->devs[0];
    double worst = 0;
    char msg[1024] = "", dname[32];
    td_device_str(dev, dname, sizeof dname);
    if (h) h->mark(dev.index);
    int r = conf_run_variant(cc, e, dev, dt, v, &worst, msg, sizeof msg);
    *end = r == CONF_END;
    if (r == CONF_END) return;
    if (r == CONF_PASS || r == CONF_UNSUPPORTED) {
        r == CONF_PASS ? n->passed++ : n->unsupported++;
        return;
    }
    int ids[MAX_USED], n_used = h ? h->used(dev.index, ids, MAX_USED) : 0;
    printf("  FAIL %s %s %s\n", cc->name, conf_dt_short(dt), msg);
    if (!n_used) {
        n->failed++;
        return;
    }
    char names[512] = "";
    size_t at = 0;
    for (int i = 0; i < n_used; i++) {
        h->deny(dev.index, ids[i], true);
        at += (size_t)snprintf(names + at, at < sizeof names ? sizeof names - at : 0, "%s%s", i ? ", " : "",
                               h->name(ids[i]));
    }
    if (conf_run_variant(cc, e, dev, dt, v, &worst, msg, sizeof msg) == CONF_PASS) {
        n->fixed++;
        printf("       passes with the generic variant of %s: denied on this driver\n", names);
        return;
    }
    for (int i = 0; i < n_used; i++) h->deny(dev.index, ids[i], false);
    n->failed++;
    printf("       fails with the generic variant of %s too: %s\n", names, msg);
}

/* The sweep on one device; false when a failure remains. */
static bool sweep(td_device dev, bool full, uint64_t seed, int n_names, char **names) {
    const td_vulkan_selftest_i *(*hooks)(void) = NULL;
    if (dev.type == TD_DEVICE_VULKAN) *(void **)&hooks = td_backend_symbol(TD_DEVICE_VULKAN, "td_vulkan_selftest");
    const td_vulkan_selftest_i *h = hooks ? hooks() : NULL;
    char dname[32];
    td_device_str(dev, dname, sizeof dname);
    if (h && h->begin(dev.index) != TD_OK) {
        printf("%s: self-test not run: %s\n", dname, td_last_error());
        return false;
    }
    conf_env e = {.seed = seed, .tiny = !full, .threads = 2, .n_dev = 1, .devs = {dev}};
    td_debug_set(TD_DEBUG_POISON | TD_DEBUG_GUARDS);
    sweep_count n = {0};
    for (int i = 0; i < N_CASES; i++) {
        const conf_case *cc = &conf_cases[i];
        if (!chosen(cc->name, n_names, names)) continue;
        unsigned mask = cc->dtypes ? cc->dtypes : conf_class_mask(cc->kind);
        for (int dt = 0; dt < TD_DTYPE_COUNT; dt++) {
            int end = 0;
            for (int v = 0; mask & (1u << dt) && v < 64 && !end; v++) check(cc, &e, (td_dtype)dt, v, h, &n, &end);
        }
    }
    td_debug_set(0);
    char summary[256], path[4096] = "";
    snprintf(summary, sizeof summary,
             "%d checks passed, %d failed, %d passed with generic variants, %d unsupported (%s shapes, seed %llu)",
             n.passed, n.failed, n.fixed, n.unsupported, full ? "test" : "tiny", (unsigned long long)seed);
    printf("%s: self-test: %s\n", dname, summary);
    if (h && h->save(dev.index, summary, path, sizeof path) != TD_OK)
        printf("  not recorded: %s\n", td_last_error());
    else if (h)
        printf("  recorded in %s\n", path);
    fflush(stdout);
    return n.failed == 0;
}

/* Whether name is an entry of the comma list. */
static bool listed(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += n)
        if ((p == list || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return true;
    return false;
}

int devices_selftest(int argc, char **argv) {
    bool full = false;
    int n_names = 0;
    char **names = argv;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--full"))
            full = true;
        else
            names[n_names++] = argv[i];
    }
    for (int i = 0; i < n_names; i++) {
        bool known = false;
        for (int k = 0; k < N_CASES && !known; k++) known = !strcmp(conf_cases[k].name, names[i]);
        if (!known) {
            fprintf(stderr, "trident devices --selftest: no conformance case %s\n", TD_QUOTE(names[i]));
            return 2;
        }
    }
    const char *s = getenv("TD_SEED"), *only = getenv("TD_BACKENDS");
    uint64_t seed = s && *s ? strtoull(s, NULL, 0) : 1;
    bool ok = true;
    int n_dev = 0;
    for (int type = TD_DEVICE_CUDA; type < TD_DEVICE_TYPE_COUNT; type++) {
        const td_backend *be = td_backend_unavailable_reason(type) ? NULL : td_backend_for(type);
        for (int i = 0; be && i < be->iface->device_count(); i++) {
            td_device dev = {.type = type, .index = i};
            char dname[32];
            if (only && *only && !listed(only, td_device_str(dev, dname, sizeof dname))) continue;
            ok &= sweep(dev, full, seed, n_names, names);
            n_dev++;
        }
    }
    td_clear_error();
    if (!n_dev) printf("self-test: no GPU device\n");
    return ok ? 0 : 1;
}
