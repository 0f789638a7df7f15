/*
** trident bench, end to end: runs the CLI on the CPU with --quick sizes and checks
** its JSON (with jansson, recomputing the medians and rates from the raw samples),
** the training rows (W1-W3, W5) with their step and epoch figures and host waits, the
** peak memory of each workload, the dispatch row, the captured W2 step where the
** device captures (lavapipe), the mapping of a stand-in PyTorch twin's lines,
** --compare on a planted 2x slowdown, the PyTorch-missing path, and the SVG as
** rendered by headless Chromium (tests/bench_svg_check.py reads the pixels).
*/
#include <jansson.h>
#include <libgen.h>
#include <limits.h>

#include "runner.h"
#include "test_util.h"

#define BENCH_TEST_DEVS 2

#define TESTS(X)                                                                                                       \
    X(json_fields_and_samples)                                                                                         \
    X(cpu_and_vulkan)                                                                                                  \
    X(training_torch_mapping)                                                                                          \
    X(compare_flags_slowdown) X(torch_missing_says_so) X(bad_backend) X(svg_renders_bars) X(profile_bars)

static char bin[PATH_MAX], dir[64];

/* The CLI beside this test (build/tests/test_bench -> build/bin/trident) and a fresh temp dir. */
static void setup(void) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    ASSERT(n > 0);
    exe[n] = 0;
    snprintf(bin, sizeof bin, "%s/../bin/trident", dirname(exe));
    ASSERT(access(bin, X_OK) == 0);
    snprintf(dir, sizeof dir, "/tmp/td_bench_XXXXXX");
    ASSERT(mkdtemp(dir));
}

/* dir/name; four calls may be live at once. */
static const char *at(const char *name) {
    static char buf[4][PATH_MAX];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static json_t *load(const char *path) {
    json_error_t err;
    json_t *j = json_load_file(path, 0, &err);
    if (!j) TEST_FAIL_("%s:%d: %s", path, err.line, err.text);
    return j;
}

static const char *get_str(json_t *o, const char *key) {
    const char *s = json_string_value(json_object_get(o, key));
    if (!s) TEST_FAIL_("JSON field \"%s\" missing or not a string", key);
    return s;
}

static double get_num(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    if (!json_is_number(v)) TEST_FAIL_("JSON field \"%s\" missing or not a number", key);
    return json_number_value(v);
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static bool file_has(const char *path, const char *needle) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return strstr(buf, needle) != NULL;
}

/* fails naming the first of the n needles that the file `name` of the run's folder lacks */
static void assert_file_has(const char *name, int n, const char *const *needles) {
    for (int i = 0; i < n; i++)
        if (!file_has(at(name), needles[i])) TEST_FAIL_("%s lacks \"%s\"", name, needles[i]);
}

/* The fields only training rows have: a whole step per sample, its batch as work;
** no host wait inside a step (the loss is not read). */
static void check_training_row(json_t *r, const char *w, double med) {
    bool images = w[1] == '1' || w[1] == '2'; /* W3, W5: tokens */
    ASSERT(!strcmp(get_str(r, "unit"), images ? "samples/s" : "tokens/s"));
    ASSERT_NEAR(get_num(r, "work"), images ? 16 : 4 * 32, 0); /* --quick: batch 16; gpt 4 x 32 tokens */
    ASSERT_NEAR(get_num(r, "ms_per_step"), med, 1e-9 * med);
    ASSERT(get_num(r, "params") > 1000);
    ASSERT(strlen(get_str(r, "note")) > 0);
    ASSERT_NEAR(get_num(r, "roof"), 0, 0);
    ASSERT_NEAR(get_num(r, "host_waits_per_step"), 0, 0);
    if (images) {
        ASSERT_NEAR(get_num(r, "steps_per_epoch"), 3750, 0); /* 60000 / 16 */
        ASSERT_NEAR(get_num(r, "epoch_s"), med * 3750e-3, 1e-9 * med);
    }
    if (!strcmp(w, "W1-mlp")) ASSERT_NEAR(get_num(r, "params"), 784 * 256 + 256 + 256 * 256 + 256 + 2570, 0);
}

/* The peak memory of a row's workload: numbers where the device keeps statistics
** (the CPU does), null elsewhere; roofline rows belong to no workload. */
static void check_peak(json_t *r, const char *w, const char *dev) {
    json_t *peak = json_object_get(r, "peak_bytes"), *base = json_object_get(r, "base_bytes");
    if (!peak || !base) TEST_FAIL_("row %s on %s lacks peak_bytes or base_bytes", w, dev);
    if (!strncmp(w, "roof-", 5) || (!json_is_number(peak) && strcmp(dev, "cpu"))) {
        ASSERT(json_is_null(peak) && json_is_null(base));
        return;
    }
    double p = get_num(r, "peak_bytes"), b = get_num(r, "base_bytes");
    if (!(p >= b && p > 0)) TEST_FAIL_("row %s on %s: peak %.0f bytes, base %.0f", w, dev, p, b);
    /* the workload's own inputs are on the device at its peak: add 2 x 2^20 f32, matmul 2 x 256^2 */
    if (!strcmp(w, "W4-add")) ASSERT(p - b >= 8.0 * (1 << 20));
    if (!strcmp(w, "W4-matmul")) ASSERT(p - b >= 8.0 * 256 * 256);
}

/* dispatch: 10k ops per sample, rate in ops/s, us_per_op from the median. */
static void check_dispatch_row(json_t *r, double med) {
    ASSERT(!strcmp(get_str(r, "unit"), "ops/s"));
    ASSERT_NEAR(get_num(r, "work"), 10000, 0);
    ASSERT_NEAR(get_num(r, "us_per_op"), med * 1e3 / 10000, 1e-9 * med);
    ASSERT(!json_object_get(r, "host_waits_per_step")); /* training rows only */
}

/* A captured row beside its eager row (W2-captured: W2-cnn, W3-captured: W3-gpt-mini, W5-captured:
** W5-gpt2-small) on the same device and
** variant: the eager step and the speedup. */
static void check_captured_row(json_t *rows, json_t *r, const char *dev, double med) {
    size_t i;
    json_t *e;
    double eager = 0;
    const char *w = get_str(r, "workload");
    const char *of = !strcmp(w, "W2-captured") ? "W2-cnn" : !strcmp(w, "W3-captured") ? "W3-gpt-mini" : "W5-gpt2-small";
    json_array_foreach(rows, i, e) if (!strcmp(get_str(e, "workload"), of) && !strcmp(get_str(e, "device"), dev) &&
                                       !strcmp(get_str(e, "variant"), get_str(r, "variant"))) eager =
        get_num(e, "median_ms");
    ASSERT(eager > 0);
    ASSERT_NEAR(get_num(r, "eager_ms_per_step"), eager, 1e-9 * eager);
    ASSERT_NEAR(get_num(r, "speedup"), eager / med, 1e-9 * eager / med);
    ASSERT(strstr(get_str(r, "note"), "captured"));
}

#define N_WANT 14

/* Check a --quick --reps 4 JSON of the devices in devs[]: every field, every W1-W4, dispatch and
** roofline row on every device without error, W2-, W3- and W5-captured exactly on the devices that capture
** (captures[d]), and the medians and rates recomputed from the raw samples. */
static void check_json(const char *path, int n_dev, const char *const *devs, const bool *captures,
                       bool allow_unsupported) {
    json_t *j = load(path);
    ASSERT_EQ_INT(json_integer_value(json_object_get(j, "trident_bench")), 2);
    ASSERT(strlen(get_str(j, "date")) == 20); /* 2026-11-26T01:02:03Z */
    get_str(j, "commit");
    ASSERT(json_is_true(json_object_get(j, "quick")));
    json_t *jd = json_object_get(j, "devices");
    ASSERT_EQ_INT(json_array_size(jd), n_dev);
    for (int d = 0; d < n_dev; d++) {
        json_t *dev = json_array_get(jd, (size_t)d);
        ASSERT(!strcmp(get_str(dev, "device"), devs[d]));
        ASSERT(strlen(get_str(dev, "name")) > 0);
        get_str(dev, "driver");
        const char *timer = get_str(dev, "timer");
        if (!strcmp(devs[d], "cpu"))
            ASSERT(strstr(timer, "synchronous backend"));
        else
            ASSERT(strstr(timer, "device events") || strstr(timer, "synchronize + host clock"));
        ASSERT(get_num(dev, "copy_gbps") > 0);
        ASSERT(get_num(json_object_get(dev, "gemm_gflops"), "float32") > 0);
    }
    ASSERT(!strcmp(get_str(json_object_get(j, "torch"), "status"), "not requested"));

    static const char *want[N_WANT] = {"roof-copy",    "roof-gemm",     "W4-matmul", "W4-add",  "W4-softmax",
                                       "W4-layernorm", "W4-sum",        "W4-adam",   "W1-mlp",  "W2-cnn",
                                       "W3-gpt-mini",  "W5-gpt2-small", "W6-lstm",   "dispatch"};
    int found[BENCH_TEST_DEVS][N_WANT] = {{0}}, captured[BENCH_TEST_DEVS] = {0};
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(j, "rows"), i, r) {
        const char *w = get_str(r, "workload"), *dev = get_str(r, "device");
        int d = 0;
        while (d < n_dev && strcmp(dev, devs[d])) d++;
        if (d == n_dev) TEST_FAIL_("row %s on unknown device %s", w, dev);
        for (int k = 0; k < N_WANT; k++) found[d][k] += !strcmp(w, want[k]);
        captured[d] += !strcmp(w, "W2-captured") + !strcmp(w, "W3-captured") + !strcmp(w, "W5-captured");
        if (json_object_get(r, "error")) {
            const char *why = get_str(r, "error");
            if (!allow_unsupported || !strstr(why, "not supported")) TEST_FAIL_("row %s on %s failed: %s", w, dev, why);
            fprintf(stderr, "  note: %s on %s: %s\n", w, dev, why);
            continue;
        }
        const char *variant = get_str(r, "variant");
        ASSERT(!strcmp(variant, "float32") || strstr(w, "matmul") || strstr(w, "gemm") || !strcmp(w, "W2-cold-start") ||
               !strcmp(w, "W4-colsum"));
        get_str(r, "size");
        const char *unit = get_str(r, "unit");
        bool training = w[0] == 'W' && ((w[1] >= '1' && w[1] <= '3') || w[1] == '5' || w[1] == '6'),
             dispatch = !strcmp(w, "dispatch"), unet = !strncmp(w, "W7-", 3); /* W7: images/s, no roof */
        ASSERT(training || dispatch || unet || !strcmp(unit, "GB/s") || !strcmp(unit, "GFLOP/s"));
        if (unet) ASSERT(!strcmp(unit, "samples/s") && get_num(r, "work") == 2); /* --quick: batch 2 */
        check_peak(r, w, dev);
        /* every raw sample is there; median and rate follow from them */
        json_t *s = json_object_get(r, "samples_ms");
        int n = (int)json_array_size(s);
        if (n < 3 || n > 4) TEST_FAIL_("row %s has %d samples, expected 3..4 (--reps 4)", w, n);
        double v[4];
        for (int k = 0; k < n; k++) {
            v[k] = json_number_value(json_array_get(s, k));
            ASSERT(v[k] > 0);
        }
        qsort(v, (size_t)n, sizeof *v, cmp_d);
        double med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
        ASSERT_NEAR(get_num(r, "median_ms"), med, 1e-9 * med);
        double rate = get_num(r, "work") / (med * 1e-3) / (training || dispatch || unet ? 1 : 1e9); /* per s */
        ASSERT_NEAR(get_num(r, "rate"), rate, 1e-9 * rate);
        if (training) check_training_row(r, w, med);
        if (strstr(w, "-captured")) check_captured_row(json_object_get(j, "rows"), r, dev, med);
        if (dispatch)
            check_dispatch_row(r, med);
        else if (!training && !unet)
            ASSERT_NEAR(get_num(r, "roof_pct"), 100 * rate / get_num(r, "roof"), 1e-6);
        double vf = get_num(r, "vs_fastest");
        ASSERT(vf > 0 && vf <= 1 + 1e-12);
        if (n_dev == 1) ASSERT_NEAR(vf, 1, 1e-12); /* one backend: it is the fastest */
        ASSERT(json_is_null(json_object_get(r, "vs_torch")));
        ASSERT(get_num(r, "buffers") >= 1);
        /* add at 2^20 elements: 12 bytes each; matmul 256^3: 2n^3 flop */
        if (!strcmp(w, "W4-add")) ASSERT_NEAR(get_num(r, "work"), 12.0 * (1 << 20), 0);
        if (!strcmp(w, "W4-matmul")) ASSERT_NEAR(get_num(r, "work"), 2.0 * 256 * 256 * 256, 0);
    }
    for (int d = 0; d < n_dev; d++) {
        for (int k = 0; k < N_WANT; k++)
            if (!found[d][k]) TEST_FAIL_("no %s row on %s", want[k], devs[d]);
        if (captured[d] != (captures[d] ? 3 : 0))
            TEST_FAIL_("%d W2-/W3-/W5-captured rows on %s, which %s", captured[d], devs[d],
                       captures[d] ? "captures" : "does not capture");
    }
    json_decref(j);
}

TEST(json_fields_and_samples) {
    setup();
    ASSERT_EQ_INT(test_sh("%s bench --quick --backends cpu --reps 4 --json %s/b.json --svg %s/b.svg >%s/out.txt", bin,
                          dir, dir, dir),
                  0);
    static const char *const devs[] = {"cpu"};
    static const bool captures[] = {false};
    check_json(at("b.json"), 1, devs, captures, false);
    assert_file_has("out.txt", 6,
                    (const char *const[]){"W4-layernorm", "peak MiB", "dispatch on cpu: ", "host waits/step",
                                          "s/epoch (3750 steps)", "roofline: copy"});
    test_sh("rm -rf %s", dir);
}

/* CI's Vulkan (lavapipe) beside the CPU, as the CI line runs it. */
TEST(cpu_and_vulkan) {
    if (!td_device_available(TD_VULKAN(0))) {
        const char *why = td_backend_unavailable_reason(TD_DEVICE_VULKAN);
        TEST_SKIP("no Vulkan device (%s)", why ? why : "the backend lists none");
    }
    setup();
    /* vulkan:0 by name: a host with several Vulkan devices (two GPUs, or a GPU and lavapipe) runs one */
    ASSERT_EQ_INT(
        test_sh("%s bench --quick --backends cpu,vulkan:0 --reps 4 --json %s/v.json --svg %s/v.svg >/dev/null", bin,
                dir, dir),
        0);
    static const char *const devs[] = {"cpu", "vulkan:0"};
    static const bool captures[] = {false, true};
    check_json(at("v.json"), 2, devs, captures, true); /* an op the backend lacks is a row that says so */
    ASSERT(file_has(at("v.svg"), "data-device=\"vulkan:0\""));
    test_sh("rm -rf %s", dir);
}

/* A stand-in twin (a shell script run as the "python") prints W1, W3 and dispatch lines as the
** real one does and records its arguments: bench must ask for the parts and sizes it runs, and
** map W1's epoch seconds (20 capped steps), W3's tokens/s, compiled run apart, and dispatch's
** ops/s onto its rows. */
TEST(training_torch_mapping) {
    setup();
    const char *twin = at("twin.sh");
    FILE *f = fopen(twin, "w");
    ASSERT(f);
    fprintf(f,
            "echo \"$@\" > %s/args.txt\n"
            "echo '{\"torch\": \"9.9\", \"device\": \"cpu\"}'\n"
            "echo '{\"workload\": \"W1-mlp\", \"device\": \"cpu\", \"epochs\": 2, \"epoch_s\": [0.9, 0.8], "
            "\"best_epoch_s\": 0.8, \"test_acc\": 0.1, \"final_loss\": 2.3, \"steps\": 20, \"batch\": 16}'\n"
            "echo '{\"workload\": \"W3-gpt-mini\", \"device\": \"cpu\", \"compiled\": false, "
            "\"ms_per_step\": 40.0, \"tokens_per_s\": 12800, \"params\": 1}'\n"
            "echo '{\"workload\": \"W3-gpt-mini\", \"device\": \"cpu\", \"compiled\": true, "
            "\"ms_per_step\": 20.0, \"tokens_per_s\": 25600, \"params\": 1}'\n"
            "echo '{\"workload\": \"W3-gpt-mini\", \"device\": \"cpu\", \"compiled\": false, "
            "\"ms_per_step\": 10.0, \"tokens_per_s\": 51200, \"params\": 1, \"dtype\": \"bfloat16-amp\", "
            "\"peak_bytes\": 3145728}'\n"
            "echo '{\"workload\": \"dispatch\", \"device\": \"cpu\", \"ops\": 10000, \"us_per_op\": 4.0, "
            "\"ops_per_s\": 250000}'\n",
            dir);
    fclose(f);
    ASSERT_EQ_INT(
        test_sh(
            "%s bench --quick --backends cpu --only mlp,gpt,dispatch --amp bf16 --reps 3 --torch --python sh --twin %s "
            "--json %s/m.json >%s/m.txt 2>&1",
            bin, twin, dir, dir),
        0);
    assert_file_has("args.txt", 4,
                    (const char *const[]){"--only w1,w3,dispatch ", "--gpt-size 32,2,1,32 --gpt-batch 4",
                                          "--batch 16 --max-steps 20", "--amp bf16"});
    assert_file_has("m.txt", 3, (const char *const[]){"peak 3.0 MiB)", "s/epoch, ours", "(torch 4.00 us/op)"});
    json_t *j = load(at("m.json"));
    ASSERT(!strcmp(get_str(json_object_get(j, "torch"), "status"), "cpu: ok"));
    size_t i;
    json_t *r;
    int rows = 0;
    json_array_foreach(json_object_get(j, "rows"), i, r) {
        const char *w = get_str(r, "workload");
        if (!strcmp(w, "W1-mlp")) {
            /* 20 steps x 16 samples in 0.8 s; a 3750-step epoch at that rate */
            ASSERT_NEAR(get_num(r, "torch_rate"), 20 * 16 / 0.8, 1e-9);
            ASSERT_NEAR(get_num(r, "torch_epoch_s"), 0.8 * 3750 / 20, 1e-9);
            ASSERT_NEAR(get_num(r, "vs_torch"), get_num(r, "torch_epoch_s") / get_num(r, "epoch_s"), 1e-9);
            rows++;
        } else if (!strcmp(w, "W3-gpt-mini") && !strcmp(get_str(r, "variant"), "bfloat16-amp")) {
            /* the autocast row maps onto the twin's torch.autocast line, with its peak memory */
            ASSERT_NEAR(get_num(r, "torch_rate"), 51200, 0);
            ASSERT_NEAR(get_num(r, "torch_peak_bytes"), 3145728, 0);
            ASSERT_NEAR(get_num(r, "host_waits_per_step"), 0, 0);
            rows++;
        } else if (!strcmp(w, "W3-gpt-mini")) {
            ASSERT_NEAR(get_num(r, "torch_rate"), 12800, 0);
            ASSERT_NEAR(get_num(r, "torch_compiled_rate"), 25600, 0);
            ASSERT_NEAR(get_num(r, "torch_ms_per_step"), 4 * 32 / 12800.0 * 1e3, 1e-9); /* at bench's batch */
            ASSERT_NEAR(get_num(r, "torch_compiled_ms_per_step"), 4 * 32 / 25600.0 * 1e3, 1e-9);
            ASSERT_NEAR(get_num(r, "vs_torch"), get_num(r, "rate") / 12800, 1e-9);
            rows++;
        } else if (!strcmp(w, "dispatch")) {
            ASSERT_NEAR(get_num(r, "torch_rate"), 250000, 0);
            ASSERT_NEAR(get_num(r, "vs_torch"), get_num(r, "rate") / 250000, 1e-9);
            rows++;
        } else if (w[0] == 'W')
            TEST_FAIL_("--only mlp,gpt,dispatch ran %s", w);
    }
    ASSERT_EQ_INT(rows, 4);
    json_decref(j);
    test_sh("rm -rf %s", dir);
}

/* A JSON from a real run, then a copy where one row's samples and median are doubled. */
TEST(compare_flags_slowdown) {
    setup();
    ASSERT_EQ_INT(
        test_sh("%s bench --quick --backends cpu --only add,sum --reps 3 --json %s/old.json >/dev/null 2>&1", bin, dir),
        0);
    const char *old = at("old.json"), *slow = at("slow.json"), *out = at("cmp.txt");
    json_t *j = load(old);
    size_t i;
    json_t *r;
    int planted = 0;
    json_array_foreach(json_object_get(j, "rows"), i, r) {
        if (strcmp(get_str(r, "workload"), "W4-add")) continue;
        json_object_set_new(r, "median_ms", json_real(2 * get_num(r, "median_ms")));
        size_t k;
        json_t *s;
        json_array_foreach(json_object_get(r, "samples_ms"), k, s) json_real_set(s, 2 * json_real_value(s));
        planted++;
    }
    ASSERT_EQ_INT(planted, 1);
    ASSERT_EQ_INT(json_dump_file(j, slow, JSON_INDENT(1)), 0);
    json_decref(j);

    ASSERT_EQ_INT(test_sh("%s bench --compare %s %s --threshold 5 >%s", bin, old, slow, out), 1);
    ASSERT(file_has(out, "+100.0%  REGRESSION"));
    ASSERT(file_has(out, "1 slower than the 5.0% threshold"));
    /* the same file against itself, and the slow one as the baseline: no regression */
    ASSERT_EQ_INT(test_sh("%s bench --compare %s %s >%s", bin, old, old, out), 0);
    ASSERT(!file_has(out, "REGRESSION"));
    ASSERT_EQ_INT(test_sh("%s bench --compare %s %s >%s", bin, slow, old, out), 0);
    ASSERT(file_has(out, "-50.0%"));
    /* a threshold above the slowdown does not flag it */
    ASSERT_EQ_INT(test_sh("%s bench --compare %s %s --threshold 150 >%s", bin, old, slow, out), 0);
    ASSERT_EQ_INT(test_sh("%s bench --compare %s %s/missing.json >%s 2>&1", bin, old, dir, out), 2);
    test_sh("rm -rf %s", dir);
}

TEST(torch_missing_says_so) {
    setup();
    ASSERT_EQ_INT(test_sh("%s bench --quick --backends cpu --only sum --reps 3 --torch --python %s/no-python "
                          "--json %s/t.json >%s/t.txt 2>/dev/null",
                          bin, dir, dir, dir),
                  0);
    ASSERT(file_has(at("t.txt"), "n/a (torch not found)"));
    json_t *j = load(at("t.json"));
    json_t *torch = json_object_get(j, "torch");
    ASSERT(json_is_true(json_object_get(torch, "requested")));
    ASSERT(strstr(get_str(torch, "status"), "n/a (torch not found)"));
    ASSERT(strstr(get_str(json_array_get(json_object_get(j, "devices"), 0), "torch_status"), "torch not found"));
    json_decref(j);
    test_sh("rm -rf %s", dir);
}

/* --profile: the profiler's summary, a trace per training workload and device, and
** trident-profile.svg with a bar segment per op of the step */
TEST(profile_bars) {
    setup();
    ASSERT_EQ_INT(
        test_sh("cd %s && %s bench --quick --backends cpu --only mlp,gpt --reps 2 --profile >t.txt 2>&1", dir, bin), 0);
    ASSERT(file_has(at("t.txt"), "[profile] W3-gpt-mini on cpu"));
    ASSERT(file_has(at("t.txt"), "by module"));
    json_t *j = load(at("trident-profile-W3-gpt-mini-cpu.json"));
    ASSERT(json_array_size(json_object_get(j, "traceEvents")) > 100);
    json_decref(j);
    j = load(at("trident-profile-W1-mlp-cpu.json"));
    json_decref(j);
    assert_file_has("trident-profile.svg", 3, (const char *const[]){"W3-gpt-mini", "<title>matmul ", "outside ops"});
    test_sh("rm -rf %s", dir);
}

TEST(bad_backend) {
    setup();
    const char *out = at("err.txt");
    ASSERT_EQ_INT(test_sh("%s bench --quick --backends cpu,nosuch >/dev/null 2>%s", bin, out), 2);
    ASSERT(file_has(out, "nosuch"));
    ASSERT_EQ_INT(test_sh("%s bench --frobnicate >/dev/null 2>%s", bin, out), 2);
    ASSERT(file_has(out, "unknown option '--frobnicate'"));
    test_sh("rm -rf %s", dir);
}

TEST(svg_renders_bars) {
    if (test_sh("command -v chromium >/dev/null 2>&1"))
        TEST_SKIP("chromium not found (Debian: apt-get install chromium; scripts/install-deps installs it)");
    if (test_sh("command -v python3 >/dev/null 2>&1")) TEST_SKIP("python3 not found");
    setup();
    ASSERT_EQ_INT(
        test_sh("%s bench --quick --backends cpu --only matmul,add,mlp --reps 3 --svg %s/c.svg >/dev/null 2>&1", bin,
                dir),
        0);
    const char *svg = at("c.svg");
    ASSERT(file_has(svg, "class=\"bar\""));
    /* the window is the SVG's own size, read from its root element */
    FILE *f = fopen(svg, "r");
    ASSERT(f);
    char line[512];
    int w = 0, h = 0;
    while (fgets(line, sizeof line, f) && !w) {
        char *p = strstr(line, "<svg ");
        if (p && strstr(p, "width=\"")) sscanf(strstr(p, "width=\""), "width=\"%d\" height=\"%d\"", &w, &h);
    }
    fclose(f);
    ASSERT(w > 100 && h > 100);
    ASSERT_EQ_INT(
        test_sh("chromium --headless --disable-gpu --no-sandbox --hide-scrollbars --force-device-scale-factor=1 "
                "--user-data-dir=%s/chrome --window-size=%d,%d --screenshot=%s/c.png file://%s >%s/chrome.log 2>&1",
                dir, w, h, dir, svg, dir),
        0);
    ASSERT_EQ_INT(test_sh("python3 %s/tests/bench_svg_check.py %s %s/c.png", BENCH_SOURCE_DIR, svg, dir), 0);
    test_sh("rm -rf %s", dir);
}

TEST_MAIN(TESTS)
