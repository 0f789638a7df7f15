/*
** Thread-local error state: the status of the last failure and its message.
** Set TRIDENT_TRACE_ERRORS=1 to print each error with its source line.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static _Thread_local td_status last_status = TD_OK;
static _Thread_local char last_message[1024];

const char *td_status_str(td_status s) {
    switch (s) {
#define TD_STATUS_CASE_(name, msg)                                                                                     \
    case TD_##name: return msg;
        TD_STATUS_LIST(TD_STATUS_CASE_)
#undef TD_STATUS_CASE_
    default: return "unknown status";
    }
}

td_status td_last_status(void) { return last_status; }

const char *td_last_error(void) { return last_message[0] ? last_message : td_status_str(last_status); }

void td_clear_error(void) {
    last_status = TD_OK;
    last_message[0] = 0;
}

static td_status error_v(const char *file, int line, td_status s, const char *fmt, va_list ap) {
    /* formatted aside first: the arguments may include td_last_error() itself */
    char msg[sizeof last_message];
    vsnprintf(msg, sizeof msg, fmt, ap);
    memcpy(last_message, msg, sizeof msg);
    last_status = s;
    static int trace = -1;
    if (trace < 0) trace = getenv("TRIDENT_TRACE_ERRORS") != NULL;
    if (trace) fprintf(stderr, "trident: %s:%d: %s: %s\n", file, line, td_status_str(s), last_message);
    return s;
}

td_status td__error_at(const char *file, int line, td_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    error_v(file, line, s, fmt, ap);
    va_end(ap);
    return s;
}

td_status td_error_set(td_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    error_v("backend", 0, s, fmt, ap);
    va_end(ap);
    return s;
}

bool td__check_arg(const td_tensor *t, const char *op, const char *arg) {
    if (!t) {
        /* Keep an earlier error so a chain of ops reports its first failure. */
        if (last_status == TD_OK) TD_ERR(TD_ERR_MISUSE, "%s: argument '%s' is NULL", op, arg);
        return false;
    }
    if (t->magic != TD_TENSOR_ALIVE) {
        TD_ERR(TD_ERR_STATE, "%s: argument '%s' is a released tensor", op, arg);
        return false;
    }
    return true;
}
