/*
** Trident status codes and the thread-local error message.
**
** Every fallible function either returns a td_status, or returns a pointer that
** is NULL on failure. In both cases td_last_status() and td_last_error() tell
** what went wrong. Tensor ops given a NULL input return NULL and keep the first
** error, so a long expression can be checked once at the end.
*/
#ifndef TRIDENT_STATUS_H
#define TRIDENT_STATUS_H

#include <stdarg.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define TD_API __declspec(dllexport)
#else
#define TD_API __attribute__((visibility("default")))
#endif

/* X(name, message): one line per code; the enum and td_status_str() are
** generated from this list. */
#define TD_STATUS_LIST(X)                                                                                              \
    X(OK, "ok")                                                                                                        \
    X(ERR_MISUSE, "invalid argument")           /* NULL, bad handle, bad flag */                                       \
    X(ERR_SHAPE, "shape mismatch")              /* shapes do not fit the op */                                         \
    X(ERR_DTYPE, "dtype mismatch")              /* dtype not valid for the op */                                       \
    X(ERR_DEVICE, "device mismatch or failure") /* mixed devices, driver error */                                      \
    X(ERR_INDEX, "index out of range")          /* dim, index or class id */                                           \
    X(ERR_OOM, "out of memory")                 /* host or device allocation */                                        \
    X(ERR_IO, "i/o error")                      /* open, read, write, rename */                                        \
    X(ERR_FORMAT, "corrupt or invalid file")    /* file content is malformed */                                        \
    X(ERR_UNSUPPORTED, "not supported")         /* op/dtype absent on backend */                                       \
    X(ERR_UNAVAILABLE, "backend unavailable")   /* plugin or driver missing */                                         \
    X(ERR_STATE, "invalid state")               /* released tensor, freed graph */                                     \
    X(ERR_BUSY, "resource busy")                /* live objects remain */                                              \
    X(ERR_COMPILE, "kernel compilation failed") /* user kernel did not build */

typedef enum td_status {
#define TD_STATUS_ENUM_(name, msg) TD_##name,
    TD_STATUS_LIST(TD_STATUS_ENUM_)
#undef TD_STATUS_ENUM_
        TD_STATUS_COUNT
} td_status;

/* METHOD. Short fixed description of a status code ("shape mismatch").
** Never NULL; unknown codes give "unknown status". Thread-safe. */
TD_API const char *td_status_str(td_status s);

/* METHOD. The status of the most recent failure on this thread, or TD_OK.
** Does not change the stored error. Thread-local. */
TD_API td_status td_last_status(void);

/* METHOD. Message of the most recent failure on this thread, for example
** "matmul: shapes [2,3] and [4,5] do not align (3 != 4)": one line of
** printable ASCII that names the thing and the problem. Never NULL; owned by
** the library and valid until the next failing td_ call on this thread. Falls
** back to td_status_str() when no message was set. */
TD_API const char *td_last_error(void);

/* METHOD. Reset this thread's error to TD_OK. */
TD_API void td_clear_error(void);

/* METHOD. Record an error message for this thread, as td_last_error() shows it
** (one line: control bytes are escaped). An argument may be td_last_error().
** Returns s. For the library's backends, plugins and tools. */
TD_API td_status td_error_set(td_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* METHOD. Prefix the current message with fmt's text and ": ", keeping the
** status; returns it. Chains: "step 2: adam step, parameter 0: <cause>". */
TD_API td_status td_error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* METHOD. s (IN, from a file, the command line or any other outside source)
** as a quoted string fit for a one-line message: 'a\\nb' for "a\nb". Bytes
** outside printable ASCII become \n, \r, \t or \xHH, and the backslash and
** the quote are escaped. A result that would not fit in size bytes keeps the
** head and the tail of s around "...". Writes buf (OUT, size >= 16) and
** returns it; NULL s gives "(null)". Thread-safe. Every message that names a
** file, a tensor, a key or an option value quotes it this way. */
TD_API const char *td_error_quote(const char *s, char *buf, size_t size);
/* td_error_quote into a temporary buffer that lives to the end of the
** enclosing block: TD_ERR(..., "cannot open %s", TD_QUOTE(path)). */
#define TD_QUOTE_SIZE 96
#define TD_QUOTE(s)   td_error_quote((s), (char[TD_QUOTE_SIZE]){0}, TD_QUOTE_SIZE)

#ifdef __cplusplus
}
#endif
#endif /* TRIDENT_STATUS_H */
