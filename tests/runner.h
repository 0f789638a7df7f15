/*
** A small test runner in the style of libuv's: each test file lists its cases
** with an X-macro, and every case runs in its own forked process with a
** timeout, so a crash or hang fails that case alone.
**
**   #define TESTS(X) X(add_broadcast) X(bad_shape)
**   TEST(add_broadcast) { ... ASSERT_EQ_INT(td_ndim(t), 2); ... }
**   TEST_MAIN(TESTS)
**
** Usage: test_x [case ...]   (no case: run all); test_x --list prints the
** case names, one a line. Exit status is 1 when any case fails, 77 when every
** chosen case skipped, else 0. The last line reads "N passed, N failed, N
** skipped". TEST_SKIP("why") marks a case skipped (for an absent device).
** Under AddressSanitizer a case that returns is also checked for leaks
** (LeakSanitizer, in its own process) and fails when it leaked.
*/
#ifndef TRIDENT_TEST_RUNNER_H
#define TRIDENT_TEST_RUNNER_H

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "trident/backend.h"
#include "trident/trident.h"

#if defined(__SANITIZE_ADDRESS__)
#define TEST_LEAK_CHECK_ 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_LEAK_CHECK_ 1
#endif
#endif
#ifdef TEST_LEAK_CHECK_
#include <sanitizer/lsan_interface.h>
#endif

#define TEST_SKIP_CODE 77

typedef struct test_case {
    const char *name;
    void (*fn)(void);
} test_case;

#define TEST(name)        static void test_##name(void)
#define TEST_ENTRY_(name) {#name, test_##name},
#define TEST_MAIN(LIST)                                                                                                \
    LIST(TEST_DECLARE_)                                                                                                \
    int main(int argc, char **argv) {                                                                                  \
        static const test_case cases[] = {LIST(TEST_ENTRY_)};                                                          \
        return test_run(cases, (int)(sizeof cases / sizeof cases[0]), argc, argv);                                     \
    }
#define TEST_DECLARE_(name) static void test_##name(void);

#define TEST_FAIL_(...)                                                                                                \
    do {                                                                                                               \
        fprintf(stderr, "  %s:%d: ", __FILE__, __LINE__);                                                              \
        fprintf(stderr, __VA_ARGS__);                                                                                  \
        fprintf(stderr, "\n  last error: %s\n", td_last_error());                                                      \
        fflush(stderr);                                                                                                \
        _exit(1);                                                                                                      \
    } while (0)

#define ASSERT(cond)                                                                                                   \
    do {                                                                                                               \
        if (!(cond)) TEST_FAIL_("assertion failed: %s", #cond);                                                        \
    } while (0)
#define ASSERT_EQ_INT(a, b)                                                                                            \
    do {                                                                                                               \
        long long a_ = (long long)(a), b_ = (long long)(b);                                                            \
        if (a_ != b_) TEST_FAIL_("%s == %s failed: %lld != %lld", #a, #b, a_, b_);                                     \
    } while (0)
#define ASSERT_NEAR(a, b, tol)                                                                                         \
    do {                                                                                                               \
        double a_ = (double)(a), b_ = (double)(b);                                                                     \
        if (!(fabs(a_ - b_) <= (tol)))                                                                                 \
            TEST_FAIL_("%s ~= %s failed: %.9g vs %.9g (tol %g)", #a, #b, a_, b_, (double)(tol));                       \
    } while (0)
/* expr returns td_status: must be TD_OK */
#define ASSERT_OK(expr)                                                                                                \
    do {                                                                                                               \
        td_status s_ = (expr);                                                                                         \
        if (s_ != TD_OK) TEST_FAIL_("%s returned %s", #expr, td_status_str(s_));                                       \
    } while (0)
/* a tensor-returning expression must succeed */
#define ASSERT_TENSOR(expr)                                                                                            \
    ({                                                                                                                 \
        td_tensor *t_ = (expr);                                                                                        \
        if (!t_) TEST_FAIL_("%s returned NULL", #expr);                                                                \
        t_;                                                                                                            \
    })
/* ---- the message rules (docs/ARCHITECTURE.md, "Errors") ---- */

#define TEST_MESSAGE_MAX 300

/* NULL when the n bytes of msg are one line of printable ASCII shorter than
** TEST_MESSAGE_MAX characters; else what breaks the rules. */
static inline const char *test_message_problem(const char *msg, size_t n) {
    if (n >= TEST_MESSAGE_MAX) return "300 characters or more";
    for (size_t i = 0; i < n; i++) {
        if (msg[i] == '\n') return "more than one line";
        if (msg[i] < 0x20 || msg[i] >= 0x7f) return "a byte outside printable ASCII";
    }
    return n ? NULL : "empty";
}

/* With $TD_TEST_MESSAGES set, append msg and a NUL to that file: tests/test_errors
** replays the bad-input cases this way and checks every message they give. */
static inline void test_message_record(const char *msg) {
    const char *path = getenv("TD_TEST_MESSAGES");
    FILE *f = path ? fopen(path, "ab") : NULL;
    if (!f) return;
    fwrite(msg, 1, strlen(msg) + 1, f);
    fclose(f);
}

/* expr must fail with status st and a message containing substr (recorded, see above) */
#define ASSERT_ERROR(expr, st, substr)                                                                                 \
    do {                                                                                                               \
        td_clear_error();                                                                                              \
        (void)(expr);                                                                                                  \
        if (td_last_status() != (st))                                                                                  \
            TEST_FAIL_("%s: expected %s, got %s", #expr, td_status_str(st), td_status_str(td_last_status()));          \
        if (!strstr(td_last_error(), (substr)))                                                                        \
            TEST_FAIL_("%s: message \"%s\" lacks \"%s\"", #expr, td_last_error(), (substr));                           \
        test_message_record(td_last_error());                                                                          \
        td_clear_error();                                                                                              \
    } while (0)
#define TEST_SKIP(...)                                                                                                 \
    do {                                                                                                               \
        fprintf(stderr, "  skipped: ");                                                                                \
        fprintf(stderr, __VA_ARGS__);                                                                                  \
        fprintf(stderr, "\n");                                                                                         \
        fflush(stderr);                                                                                                \
        _exit(TEST_SKIP_CODE);                                                                                         \
    } while (0)

static int test_run_one(const test_case *c, int timeout_s) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        alarm((unsigned)timeout_s);
        c->fn();
        fflush(stdout);
#ifdef TEST_LEAK_CHECK_
        /* _exit skips LeakSanitizer's check at exit: run it here, so that every
        ** case that passes is also leak-free (ASAN_OPTIONS=detect_leaks=0 turns it off) */
        if (__lsan_do_recoverable_leak_check()) {
            fprintf(stderr, "  %s: LeakSanitizer found leaks (above)\n", c->name);
            _exit(1);
        }
#endif
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    fprintf(stderr, "  %s: killed by signal %d%s\n", c->name, WTERMSIG(status),
            WTERMSIG(status) == SIGALRM ? " (timeout)" : "");
    return 1;
}

static int test_run(const test_case *cases, int n, int argc, char **argv) {
    const char *env = getenv("TD_TEST_TIMEOUT");
    int timeout = env ? atoi(env) : 600;
    if (argc == 2 && !strcmp(argv[1], "--list")) {
        for (int i = 0; i < n; i++) printf("%s\n", cases[i].name);
        return 0;
    }
    int passed = 0, failed = 0, skipped = 0;
    for (int i = 0; i < n; i++) {
        bool chosen = argc <= 1;
        for (int a = 1; a < argc; a++) chosen |= !strcmp(argv[a], cases[i].name);
        if (!chosen) continue;
        int rc = test_run_one(&cases[i], timeout);
        const char *verdict = rc == 0 ? "ok" : rc == TEST_SKIP_CODE ? "skip" : "FAIL";
        printf("%-4s %s\n", verdict, cases[i].name);
        fflush(stdout);
        if (rc == 0)
            passed++;
        else if (rc == TEST_SKIP_CODE)
            skipped++;
        else
            failed++;
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : skipped && !passed ? TEST_SKIP_CODE : 0;
}

#endif /* TRIDENT_TEST_RUNNER_H */
