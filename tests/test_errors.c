/*
** Error messages: each is one line that names the thing and the problem, with
** outside input quoted and escaped (docs/ARCHITECTURE.md, "Errors"; issue 16).
** The first cases assert exact messages, library and CLI; the replay cases run
** the bad-input cases of test_bad_input, the safetensors corruptions
** (test_safetensors bad_*) and the CLI's (test_train.sh --list-errors) from
** their own tables and check every message they give against the rules.
*/
#include <libgen.h>
#include <limits.h>

#include "test_util.h"
#include "trident/io.h"

/* clang-format off */
#define TESTS(X)                                                                                               \
    X(prefix_chain) X(message_from_itself) X(optimizer_step_prefix) X(quote_rules) X(control_bytes_escaped)    \
    X(safetensors_name_escaped) X(safetensors_empty_name_and_key) X(optimizer_state_scalars)                   \
    X(checkpoint_numbers) X(idx_wrong_magic) X(cli_resume_bad_numbers) X(cli_checkpoint_unwritable)           \
    X(cli_argument_escaped) X(cli_bench_compare) X(replay_library) X(replay_cli)
/* clang-format on */

/* The current message is exactly want, and obeys the rules. */
#define ASSERT_MESSAGE(want)                                                                                           \
    do {                                                                                                               \
        const char *m_ = td_last_error(), *why_ = test_message_problem(m_, strlen(m_));                                \
        if (strcmp(m_, (want))) TEST_FAIL_("message\n    \"%s\"\n  expected\n    \"%s\"", m_, (want));                 \
        if (why_) TEST_FAIL_("message \"%s\": %s", m_, why_);                                                          \
    } while (0)

/* Work in this process's scratch directory, so messages name short relative paths. */
static void enter_tmp(void) { ASSERT(chdir(test_tmp_dir()) == 0); }

/* The directory of this test executable (build/tests). */
static const char *exe_dir(void) {
    static char d[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", d, sizeof d - 1);
    ASSERT(n > 0);
    d[n] = 0;
    return dirname(d);
}

/* The CLI beside this test: build/tests/test_errors -> build/bin/trident. */
static const char *cli(void) {
    static char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/../bin/trident", exe_dir());
    if (access(p, X_OK) != 0) TEST_FAIL_("no CLI at %s", p);
    return p;
}

/* Run `trident ARGS` (a shell fragment); it must fail with stderr exactly the
** line want, and nothing else (stdout included: the check comes first). */
static void expect_cli(const char *want, const char *args) {
    ASSERT(test_sh("'%s' %s >out.txt 2>err.txt", cli(), args) != 0);
    size_t n, n_out;
    char *err = (char *)test_read_file("err.txt", &n), *out = (char *)test_read_file("out.txt", &n_out);
    if (n == 0 || err[n - 1] != '\n') TEST_FAIL_("stderr of `trident %s` is not one line: \"%s\"", args, err);
    err[n - 1] = 0;
    const char *why = test_message_problem(err, n - 1);
    if (why) TEST_FAIL_("stderr of `trident %s`: %s", args, why);
    if (strcmp(err, want)) TEST_FAIL_("stderr of `trident %s`\n    \"%s\"\n  expected\n    \"%s\"", args, err, want);
    if (n_out) TEST_FAIL_("`trident %s` printed before failing: \"%s\"", args, out);
    free(err);
    free(out);
}

/* name: an 8-byte length, the JSON header, then ndata bytes of data. */
static void write_safetensors(const char *name, const char *json, size_t ndata) {
    size_t hl = strlen(json), n = 8 + hl + ndata;
    unsigned char *b = calloc(1, n);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, json, hl);
    test_write_file(name, b, n);
    free(b);
}

static td_status load(const char *path) {
    td_named_tensors *l = NULL;
    td_status st = td_safetensors_load(path, TD_CPU, &l);
    td_named_tensors_free(l);
    return st;
}

/* ---- 1. a message that names its context, prefix by prefix ---- */

TEST(prefix_chain) {
    td_error_set(TD_ERR_MISUSE, "steps count from 1");
    ASSERT_EQ_INT(td_error_prefix("adam step, parameter %d", 0), TD_ERR_MISUSE);
    td_error_prefix("step %d", 2);
    ASSERT_EQ_INT(td_error_prefix("trident train"), TD_ERR_MISUSE);
    ASSERT_MESSAGE("trident train: step 2: adam step, parameter 0: steps count from 1");
    ASSERT_EQ_INT(td_last_status(), TD_ERR_MISUSE);
}

TEST(message_from_itself) {
    /* the pattern that garbled: the current message as an argument of the next */
    td_error_set(TD_ERR_SHAPE, "shapes [2,3] and [4] do not broadcast");
    td_error_set(td_last_status(), "%s: %s", "add", td_last_error());
    td_error_set(td_last_status(), "%s (%s)", td_last_error(), td_last_error());
    ASSERT_MESSAGE("add: shapes [2,3] and [4] do not broadcast (add: shapes [2,3] and [4] do not broadcast)");
}

TEST(optimizer_step_prefix) {
    /* the CLI printed "step 2: Adam step, parameter 0: Adam step, parameter 0: ut steps count from 1" */
    td_tensor *p = ASSERT_TENSOR(td_zeros(1, (int64_t[]){3}, TD_F32, TD_CPU));
    ASSERT_OK(td_set_requires_grad(p, true));
    /* lr = inf: accepted by td_adam_new (td_optimizer_set_lr refuses it), refused by the update */
    td_optimizer *o =
        td_adam_new(1, &p, &(td_optim_options){.lr = INFINITY, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8});
    ASSERT(o);
    td_tensor *g = ASSERT_TENSOR(td_ones(1, (int64_t[]){3}, TD_F32, TD_CPU));
    test_set_grad(p, g);
    td_release(g);
    ASSERT_EQ_INT(td_optimizer_step(o), TD_ERR_MISUSE);
    td_error_prefix("step %d", 2);
    ASSERT_MESSAGE("step 2: Adam step, parameter 0: adam_update: lr = inf is outside [0, inf)");
    td_optimizer_free(o);
    td_release(p);
}

/* ---- 2. outside strings quoted and escaped, with a length cap ---- */

TEST(quote_rules) {
    char buf[TD_QUOTE_SIZE], want[TD_QUOTE_SIZE];
    ASSERT(!strcmp(td_error_quote("a\nb", buf, sizeof buf), "'a\\nb'"));
    ASSERT(!strcmp(td_error_quote("it's a \\ path", buf, sizeof buf), "'it\\'s a \\\\ path'"));
    ASSERT(!strcmp(td_error_quote("\xc3\xa9\t\x1b[31m\x7f", buf, sizeof buf), "'\\xc3\\xa9\\t\\x1b[31m\\x7f'"));
    ASSERT(!strcmp(td_error_quote("", buf, sizeof buf), "''"));
    ASSERT(!strcmp(td_error_quote(NULL, buf, sizeof buf), "(null)"));
    /* too long: the head and the tail, 45 characters each, around "..." */
    char x[200];
    memset(x, 'x', sizeof x - 1), x[sizeof x - 1] = 0;
    x[0] = 'A', x[198] = 'Z';
    snprintf(want, sizeof want, "'A%.44s...%.44sZ'", x + 1, x + 1);
    ASSERT(!strcmp(td_error_quote(x, buf, sizeof buf), want));
    ASSERT_EQ_INT(strlen(buf), TD_QUOTE_SIZE - 1);
    /* escapes are never cut: 22 "\n" (44 characters) on each side */
    char nl[101];
    memset(nl, '\n', 100), nl[100] = 0;
    char side[45] = "";
    for (int i = 0; i < 22; i++) strcat(side, "\\n");
    snprintf(want, sizeof want, "'%s...%s'", side, side);
    ASSERT(!strcmp(td_error_quote(nl, buf, sizeof buf), want));
    /* two quotes in one message each get a buffer of their own */
    td_error_set(TD_ERR_IO, "cannot rename %s to %s", TD_QUOTE("a\n"), TD_QUOTE("b"));
    ASSERT_MESSAGE("cannot rename 'a\\n' to 'b'");
}

TEST(control_bytes_escaped) {
    /* a caller that forgot to quote still gives one printable line */
    td_error_set(TD_ERR_FORMAT, "name %s is bad", "x\ny\x1b[0m\xff");
    ASSERT_MESSAGE("name x\\ny\\x1b[0m\\xff is bad");
}

TEST(safetensors_name_escaped) {
    enter_tmp();
    write_safetensors("esc.safetensors",
                      "{\"a\\nb\\u001b[31m\":{\"dtype\":\"F31\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
    ASSERT_EQ_INT(load("esc.safetensors"), TD_ERR_FORMAT);
    ASSERT_MESSAGE("safetensors: 'esc.safetensors': tensor 'a\\nb\\x1b[31m' has unknown dtype 'F31'");
    write_safetensors("meta.safetensors", "{\"__metadata__\":{\"k\\r\\n\":1}}", 0);
    ASSERT_EQ_INT(load("meta.safetensors"), TD_ERR_FORMAT);
    ASSERT_MESSAGE("safetensors: 'meta.safetensors': __metadata__ value of 'k\\r\\n' is not a string");
    /* a file name from the command line is quoted too */
    ASSERT_EQ_INT(load("no\nsuch.safetensors"), TD_ERR_IO);
    ASSERT_MESSAGE("safetensors: cannot open 'no\\nsuch.safetensors': No such file or directory");
}

/* ---- 4. messages that name the file ---- */

TEST(safetensors_empty_name_and_key) {
    enter_tmp();
    write_safetensors("empty.safetensors", "{\"\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
    ASSERT_EQ_INT(load("empty.safetensors"), TD_ERR_FORMAT);
    ASSERT_MESSAGE("safetensors: 'empty.safetensors': a tensor has an empty name");
    write_safetensors("key.safetensors", "{\"__metadata__\":{\"\":\"v\"}}", 0);
    ASSERT_EQ_INT(load("key.safetensors"), TD_ERR_FORMAT);
    ASSERT_MESSAGE("safetensors: 'key.safetensors': __metadata__ has an empty key");
}

TEST(idx_wrong_magic) {
    enter_tmp();
    td_tensor *t;
    unsigned char labels[12] = {0, 0, 8, 1, 0, 0, 0, 4, 1, 2, 3, 4}; /* 4 labels */
    labels[2] = 7;
    test_write_file("bad.idx", labels, sizeof labels);
    ASSERT_EQ_INT(td_idx_load("bad.idx", TD_IDX_LABELS_I64, &t), TD_ERR_FORMAT);
    ASSERT_MESSAGE("idx: 'bad.idx' has magic number 0x00000701, not an IDX one: expected 0x0000TTNN with type TT in "
                   "08..0E and NN in 1..8 dims (0x00000801 labels, 0x00000803 images)");
    labels[2] = 8, labels[3] = 2; /* an image header over label bytes */
    test_write_file("bad.idx", labels, sizeof labels);
    ASSERT_EQ_INT(td_idx_load("bad.idx", TD_IDX_LABELS_I64, &t), TD_ERR_FORMAT);
    ASSERT_MESSAGE("idx: 'bad.idx' has magic number 0x00000802 (2-D u8), not a label file's 0x00000801 (1-D u8)");
    labels[3] = 1, labels[7] = 0; /* a header that describes no bytes, before 4 of them */
    test_write_file("bad.idx", labels, sizeof labels);
    ASSERT_EQ_INT(td_idx_load("bad.idx", TD_IDX_LABELS_I64, &t), TD_ERR_FORMAT);
    ASSERT_MESSAGE("idx: 'bad.idx' has more bytes than the 0 its header (magic number 0x00000801, u8 [0]) describes");
}

/* ---- 3. numbers from checkpoints, checked as they load ---- */

/* An Adam state dict for one parameter [3], with `key` holding the scalar v of dtype dt. */
static td_status load_optim_scalar(const char *key, double v, td_dtype dt) {
    td_tensor *p = ASSERT_TENSOR(td_zeros(1, (int64_t[]){3}, TD_F32, TD_CPU));
    ASSERT_OK(td_set_requires_grad(p, true));
    td_optimizer *o = td_adam_new(1, &p, &(td_optim_options){.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8});
    td_named_tensors *sd = td_named_tensors_new();
    int64_t big = INT64_MAX; /* not representable as a double: made exactly */
    td_tensor *t = dt == TD_I64 && v == (double)INT64_MAX ? td_from_data(&big, 0, NULL, TD_I64, TD_CPU)
                                                          : td_full(0, NULL, v, dt, TD_CPU);
    ASSERT_OK(td_named_tensors_add(sd, key, ASSERT_TENSOR(t)));
    td_release(t); /* the list holds it */
    td_status st = td_optimizer_load_state_dict(o, sd);
    td_named_tensors_free(sd);
    td_optimizer_free(o);
    td_release(p);
    return st;
}

TEST(optimizer_state_scalars) {
    const char *fn = "optimizer_load_state_dict";
    char want[256];
    static const struct {
        const char *key;
        double v;
        td_dtype dt;
        const char *shown;
    } bad[] = {
        {"state.0.step", NAN, TD_F64, "nan"},
        {"state.0.step", 1e300, TD_F64, "1.0000000000000001e+300"},
        {"state.0.step", (double)INT64_MAX, TD_I64, "9.2233720368547758e+18"}, /* INT64_MAX, see below */
        {"state.0.step", -1, TD_I64, "-1"},
        {"state.0.step", 2.5, TD_F64, "2.5"},
        {"param_groups.0.lr", NAN, TD_F64, "nan"},
        {"param_groups.0.lr", -1, TD_F64, "-1"},
        {"param_groups.0.lr", INFINITY, TD_F32, "inf"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ASSERT_EQ_INT(load_optim_scalar(bad[i].key, bad[i].v, bad[i].dt), TD_ERR_MISUSE);
        snprintf(want, sizeof want, "%s: '%s' = %s is not %s", fn, bad[i].key, bad[i].shown,
                 bad[i].key[0] == 's' ? "an integer in [0, 2^53]" : "a finite learning rate >= 0");
        ASSERT_MESSAGE(want);
    }
    ASSERT_OK(load_optim_scalar("state.0.step", 9007199254740992.0, TD_I64));
    ASSERT_OK(load_optim_scalar("param_groups.0.lr", 0.5, TD_F64));
}

/* A checkpoint holding one model tensor, whose metadata `key` is value. */
static const char *checkpoint_with(const char *name, const char *key, const char *value) {
    td_train_state ck = {.model_name = "gpt", .step = 3, .epoch = 1};
    ck.model = td_named_tensors_new();
    td_tensor *w = ASSERT_TENSOR(td_zeros(1, (int64_t[]){2}, TD_F32, TD_CPU));
    ASSERT_OK(td_named_tensors_add(ck.model, "w", w));
    td_release(w); /* the list holds it */
    ASSERT_OK(td_train_state_save(name, &ck));
    td_train_state_clear(&ck);
    td_named_tensors *all = NULL;
    ASSERT_OK(td_safetensors_load(name, TD_CPU, &all));
    ASSERT_OK(td_named_tensors_set_meta(all, key, value));
    ASSERT_OK(td_safetensors_save(name, all));
    td_named_tensors_free(all);
    return name;
}

TEST(checkpoint_numbers) {
    enter_tmp();
    td_train_state back;
    static const char *const cases[][3] = {
        {"epoch", "-2", "checkpoint 'ck.safetensors': metadata 'epoch' = -2 is out of range [0, 2^53]"},
        {"step", "9223372036854775807",
         "checkpoint 'ck.safetensors': metadata 'step' = 9223372036854775807 is out of range [0, 2^53]"},
        {"step", "1e3", "checkpoint 'ck.safetensors': metadata 'step' = '1e3' is not a decimal integer"},
        {"step", " 7", "checkpoint 'ck.safetensors': metadata 'step' = ' 7' is not a decimal integer"},
        {"rng_seed", "-1", "checkpoint 'ck.safetensors': metadata 'rng_seed' = '-1' is not a decimal integer"},
        {"model", "g\npt", "checkpoint 'ck.safetensors': model 'gpt' expected, checkpoint holds 'g\\npt'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        checkpoint_with("ck.safetensors", cases[i][0], cases[i][1]);
        ASSERT_EQ_INT(td_train_state_load("ck.safetensors", TD_CPU, "gpt", NULL, &back), TD_ERR_FORMAT);
        ASSERT_MESSAGE(cases[i][2]);
    }
}

/* ---- the CLI ---- */

/* A text file for a tiny gpt, and the flags that train it. */
#define GPT_FLAGS "--model gpt --device cpu --text t.txt --layers 1 --heads 2 --d-model 16 --context 8 --batch 2"

static void write_text(void) {
    char text[2000];
    for (size_t i = 0; i < sizeof text; i++) text[i] = (char)('a' + i * 7 % 26);
    test_write_file("t.txt", text, sizeof text);
}

/* Copy checkpoint src to dst with the tensor `name` replaced by v (F64 scalar)
** or, when name is NULL, the metadata `key` set to value. */
static void rewrite(const char *src, const char *dst, const char *name, double v, const char *key, const char *value) {
    td_named_tensors *all = NULL, *out = td_named_tensors_new();
    ASSERT_OK(td_safetensors_load(src, TD_CPU, &all));
    for (int64_t i = 0; i < td_named_tensors_len(all); i++) {
        const char *n = td_named_tensors_name(all, i);
        bool replaced = name && !strcmp(n, name);
        td_tensor *t = replaced ? ASSERT_TENSOR(td_full(0, NULL, v, TD_F64, TD_CPU)) : td_named_tensors_at(all, i);
        ASSERT_OK(td_named_tensors_add(out, n, t));
        if (replaced) td_release(t); /* the list holds it */
    }
    for (int64_t i = 0; i < td_named_tensors_meta_len(all); i++) {
        const char *k = td_named_tensors_meta_key(all, i);
        ASSERT_OK(td_named_tensors_set_meta(out, k, key && !strcmp(k, key) ? value : td_named_tensors_meta(all, k)));
    }
    ASSERT_OK(td_safetensors_save(dst, out));
    td_named_tensors_free(all);
    td_named_tensors_free(out);
}

TEST(cli_resume_bad_numbers) {
    enter_tmp();
    write_text();
    ASSERT_EQ_INT(
        test_sh("'%s' train " GPT_FLAGS " --steps 2 --epochs 1 --checkpoint g.safetensors >/dev/null 2>&1", cli()), 0);
    rewrite("g.safetensors", "e.safetensors", NULL, 0, "epoch", "-2");
    expect_cli("trident train: cannot resume: checkpoint 'e.safetensors': metadata 'epoch' = -2 is out of range "
               "[0, 2^53]",
               "train " GPT_FLAGS " --resume --checkpoint e.safetensors");
    rewrite("g.safetensors", "l.safetensors", NULL, 0, "model.loss_sum", "nan");
    expect_cli("trident train: checkpoint 'l.safetensors': metadata model.loss_sum = 'nan' is not a finite number >= 0",
               "train " GPT_FLAGS " --resume --checkpoint l.safetensors");
    rewrite("g.safetensors", "l.safetensors", NULL, 0, "model.loss_sum", "1.5x");
    expect_cli(
        "trident train: checkpoint 'l.safetensors': metadata model.loss_sum = '1.5x' is not a finite number >= 0",
        "train " GPT_FLAGS " --resume --checkpoint l.safetensors");
    rewrite("g.safetensors", "b.safetensors", NULL, 0, "model.batch", "-1");
    expect_cli("trident train: checkpoint 'b.safetensors': metadata model.batch = '-1' is not an integer in [0, "
               "9007199254740992]",
               "train " GPT_FLAGS " --resume --checkpoint b.safetensors");
    rewrite("g.safetensors", "s.safetensors", "optim.state.0.step", NAN, NULL, NULL);
    expect_cli("trident train: cannot resume from 's.safetensors': optimizer_load_state_dict: 'state.0.step' = nan is "
               "not an integer in [0, 2^53]",
               "train " GPT_FLAGS " --resume --checkpoint s.safetensors");
    rewrite("g.safetensors", "r.safetensors", "optim.param_groups.0.lr", -1, NULL, NULL);
    expect_cli("trident train: cannot resume from 'r.safetensors': optimizer_load_state_dict: 'param_groups.0.lr' = -1 "
               "is not a finite learning rate >= 0",
               "train " GPT_FLAGS " --resume --checkpoint r.safetensors");
}

TEST(cli_checkpoint_unwritable) {
    enter_tmp();
    write_text();
    /* found before any data is read or any step is taken (expect_cli: nothing on stdout) */
    expect_cli("trident train: --checkpoint 'none/c.safetensors' cannot be written: No such file or directory",
               "train " GPT_FLAGS " --checkpoint none/c.safetensors");
}

TEST(cli_argument_escaped) {
    enter_tmp();
    expect_cli("trident train: unknown option '--\\x1b[2J' (see trident train --help)",
               "train \"$(printf '\\055-\\033[2J')\"");
}

TEST(cli_bench_compare) {
    enter_tmp();
    expect_cli("trident bench: --compare needs two files, OLD.json NEW.json; got 1", "bench --compare a.json");
    expect_cli("trident bench: --threshold expects a number in [0, 1e+06], got 'nan'",
               "bench --compare a.json b.json --threshold nan");
    expect_cli("trident bench: --reps expects an integer in [1, 1e+06], got '2.5'", "bench --reps 2.5");
    test_write_file("a.json", "{\"rows\":\n[}", 11);
    expect_cli("trident bench --compare: 'a.json', line 2: unexpected token near '}'", "bench --compare a.json a.json");
}

/* ---- replays: every message of the shared bad-input cases obeys the rules ---- */

/* Check the NUL-separated messages in path (one trailing newline each allowed);
** returns their count and deletes the file. */
static int check_recorded(const char *path, const char *source) {
    size_t n;
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    fclose(f);
    char *b = (char *)test_read_file(path, &n);
    int count = 0;
    for (size_t at = 0; at < n; count++) {
        size_t len = strlen(b + at), end = at + len;
        if (len && b[end - 1] == '\n') len--; /* the line's own end, from stderr */
        const char *why = test_message_problem(b + at, len);
        if (why) TEST_FAIL_("%s: message \"%.*s\": %s", source, (int)len, b + at, why);
        at = end + 1;
    }
    free(b);
    unlink(path);
    return count;
}

/* Run every case that `list_cmd` prints and whose name starts with prefix
** through `run_fmt` (with %s the case) with $TD_TEST_MESSAGES set; each case must
** pass or skip (exit 77, or a runner's "1 skipped"), and one that passes must
** record at least one message. */
static void replay(const char *what, const char *list_cmd, const char *prefix, const char *run_fmt) {
    char log[512], out[512]; /* test_tmp_path's results are reused */
    snprintf(log, sizeof log, "%s", test_tmp_path("messages.bin"));
    snprintf(out, sizeof out, "%s", test_tmp_path("replay.txt"));
    setenv("TD_TEST_MESSAGES", log, 1);
    FILE *p = popen(list_cmd, "r");
    ASSERT(p);
    char name[128], cmd[4096];
    int cases = 0, messages = 0;
    while (fgets(name, sizeof name, p)) {
        name[strcspn(name, "\n")] = 0;
        if (!*name || strncmp(name, prefix, strlen(prefix))) continue;
        unlink(log);
        snprintf(cmd, sizeof cmd, run_fmt, name);
        int rc = test_sh("%s >'%s' 2>&1", cmd, out);
        size_t n;
        char *text = (char *)test_read_file(out, &n);
        bool skipped = rc == TEST_SKIP_CODE || strstr(text, "1 skipped"); /* a script, or a runner's case */
        free(text);
        if (skipped) continue;
        if (rc != 0) TEST_FAIL_("%s %s failed (exit %d): %s", what, name, rc, cmd);
        char source[256];
        snprintf(source, sizeof source, "%s %s", what, name);
        int got = check_recorded(log, source);
        if (got == 0) TEST_FAIL_("%s gave no message", source);
        cases++, messages += got;
    }
    pclose(p);
    printf("%s: %d cases, %d messages, each one printable line under %d characters\n", what, cases, messages,
           TEST_MESSAGE_MAX);
    ASSERT(cases > 0);
}

TEST(replay_library) {
    char list[PATH_MAX + 32], run[PATH_MAX + 32];
    snprintf(list, sizeof list, "'%s/test_bad_input' --list", exe_dir());
    snprintf(run, sizeof run, "'%s/test_bad_input' %%s", exe_dir());
    replay("test_bad_input", list, "", run);
    snprintf(list, sizeof list, "'%s/test_safetensors' --list", exe_dir());
    snprintf(run, sizeof run, "'%s/test_safetensors' %%s", exe_dir());
    replay("test_safetensors", list, "bad_", run);
}

/* tests/test_train.sh, beside this source file (or in $TD_TEST_SOURCE_DIR). */
static const char *train_script(void) {
    static char p[PATH_MAX];
    const char *env = getenv("TD_TEST_SOURCE_DIR");
    if (env)
        snprintf(p, sizeof p, "%s/test_train.sh", env);
    else {
        char src[PATH_MAX];
        snprintf(src, sizeof src, "%s", __FILE__);
        snprintf(p, sizeof p, "%s/test_train.sh", dirname(src));
    }
    return p;
}

TEST(replay_cli) {
    if (access(train_script(), R_OK) != 0) TEST_SKIP("cannot find %s (set TD_TEST_SOURCE_DIR)", train_script());
    char list[PATH_MAX + 32], run[2 * PATH_MAX + 32];
    snprintf(list, sizeof list, "sh '%s' - --list-errors", train_script());
    snprintf(run, sizeof run, "sh '%s' '%s' %%s", train_script(), cli());
    replay("test_train.sh", list, "", run);
}

TEST_MAIN(TESTS)
