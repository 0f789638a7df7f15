/*
** Custom ops under the profiler (issue 27): a forward and backward of the
** example bias_gelu (examples/custom_ops/) on cpu and vulkan:0 (lavapipe in
** CI) shows bias_gelu as a forward op and its backward kernel,
** bias_gelu_backward, as a backward op of the bias_gelu node, in the trace
** and in the printed summary, on the device's track.
*/
#include <jansson.h>

#include "custom_ops.h"
#include "runner.h"

#define TESTS(X) X(custom_cpu) X(custom_vulkan)

static custom_ops ops;

/* Whether a line of text holds a, b and c. */
static bool has_line(const char *text, const char *a, const char *b, const char *c) {
    for (const char *l = text; l && *l;) {
        const char *end = strchr(l, '\n');
        size_t n = end ? (size_t)(end - l) : strlen(l);
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line ? n : sizeof line - 1), l);
        if (strstr(line, a) && strstr(line, b) && strstr(line, c)) return true;
        l = end ? end + 1 : NULL;
    }
    return false;
}

static void check_custom(td_device dev, const char *dname) {
    ASSERT_OK(custom_ops_register(&ops, CUSTOM_OPS_DIR));
    char trace[256];
    snprintf(trace, sizeof trace, "/tmp/td_profile_custom_%d.json", (int)getpid());
    td_scope_begin();
    td_tensor *x = td_randn(2, (int64_t[]){8, 40}, 1, 0, TD_F32, dev);
    td_tensor *b = td_randn(1, (int64_t[]){40}, 2, 0, TD_F32, dev);
    ASSERT(x && b);
    ASSERT_OK(td_set_requires_grad(x, true));
    ASSERT_OK(td_set_requires_grad(b, true));
    ASSERT_TENSOR(bias_gelu(&ops, x, b)); /* warm-up: kernels compiled */
    ASSERT_OK(td_profile_begin());
    td_tensor *y = ASSERT_TENSOR(bias_gelu(&ops, x, b));
    ASSERT_OK(td_backward(td_sum(y, 0, NULL, false), NULL, false));
    ASSERT_OK(td_profile_end(trace));
    /* the trace: bias_gelu forward and bias_gelu_backward backward, issued by the bias_gelu node */
    json_error_t e;
    json_t *j = json_load_file(trace, 0, &e), *ev;
    if (!j) TEST_FAIL_("the trace %s is not JSON: line %d: %s", trace, e.line, e.text);
    size_t i;
    bool fw = false, bw = false;
    json_array_foreach(json_object_get(j, "traceEvents"), i, ev) {
        const char *ph = json_string_value(json_object_get(ev, "ph"));
        if (!ph || strcmp(ph, "X")) continue;
        json_t *args = json_object_get(ev, "args");
        const char *name = json_string_value(json_object_get(ev, "name")),
                   *cat = json_string_value(json_object_get(ev, "cat")),
                   *node = json_string_value(json_object_get(args, "node")),
                   *shapes = json_string_value(json_object_get(args, "shapes"));
        if (!strcmp(name, "bias_gelu") && !strcmp(cat, "forward")) {
            fw = true;
            ASSERT(json_integer_value(json_object_get(ev, "pid")) == 1); /* the one device's track */
            ASSERT(strstr(shapes, "float32[8,40] float32[40] -> float32[8,40]"));
            ASSERT(json_number_value(json_object_get(args, "bytes")) == 4.0 * (8 * 40 * 2 + 40));
        }
        if (!strcmp(name, "bias_gelu_backward") && !strcmp(cat, "backward")) bw = node && !strcmp(node, "bias_gelu");
    }
    json_decref(j);
    remove(trace);
    if (!fw || !bw) TEST_FAIL_("%s: the trace lacks bias_gelu forward (%d) or its backward (%d)", dname, fw, bw);
    /* the summary */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ASSERT(f);
    ASSERT_OK(td_profile_print(f, 50));
    fclose(f);
    printf("%s", text);
    bool ok = has_line(text, "bias_gelu ", "forward", dname) && has_line(text, "bias_gelu_backward", "backward", dname);
    free(text);
    ASSERT(ok);
    td_scope_end();
    custom_ops_free(&ops);
}

TEST(custom_cpu) { check_custom(TD_CPU, "cpu"); }

TEST(custom_vulkan) {
    if (!td_device_available(TD_VULKAN(0))) {
        const char *why = td_backend_unavailable_reason(TD_DEVICE_VULKAN);
        TEST_SKIP("no vulkan:0 (%s)", why ? why : "the backend lists none");
    }
    check_custom(TD_VULKAN(0), "vulkan:0");
}

TEST_MAIN(TESTS)
