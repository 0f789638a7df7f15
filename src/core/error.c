/*
** Thread-local error state: the status of the last failure and its message.
** Every message is stored as one line of printable ASCII (any other byte is
** escaped), and strings from files or the command line are quoted with
** td_error_quote. Set TRIDENT_TRACE_ERRORS=1 to print each error with its
** source line.
*/
#include <stdbool.h>
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

/* One byte of a message as printable ASCII: itself or an escape (\n \r \t
** \xHH); quoting also escapes the backslash and the quote. Returns its length
** (1 to 4); writes that many chars to out (no NUL) unless out is NULL. */
static size_t escape_byte(unsigned char c, bool quoting, char *out) {
    char e[5] = {c, 0};
    if (c == '\n' || c == '\r' || c == '\t' || (quoting && (c == '\\' || c == '\'')))
        e[0] = '\\', e[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' : (char)c;
    else if (c < 0x20 || c >= 0x7f)
        snprintf(e, sizeof e, "\\x%02x", c);
    size_t n = strlen(e);
    if (out) memcpy(out, e, n);
    return n;
}

/* Append the escapes of s[from, to) to buf at *at. */
static void append_escaped(char *buf, size_t *at, const char *s, size_t from, size_t to) {
    for (size_t i = from; i < to; i++) *at += escape_byte((unsigned char)s[i], true, buf + *at);
}

const char *td_error_quote(const char *s, char *buf, size_t size) {
    if (!buf || size < 16) return "'?'";
    if (!s) return snprintf(buf, size, "(null)"), buf;
    size_t n = 0, total = 0, room = size - 3; /* less the quotes and the NUL */
    while (s[n] && total <= room) total += escape_byte((unsigned char)s[n++], true, NULL);
    size_t at = 0;
    buf[at++] = '\'';
    if (total <= room) {
        append_escaped(buf, &at, s, 0, n);
    } else { /* the head and the tail of s around "...", each within half the room */
        size_t half = (room - 3) / 2, head = 0, tail = strlen(s), used = 0;
        while (used + escape_byte((unsigned char)s[head], true, NULL) <= half)
            used += escape_byte((unsigned char)s[head++], true, NULL);
        append_escaped(buf, &at, s, 0, head);
        memcpy(buf + at, "...", 3), at += 3;
        size_t end = tail;
        for (used = 0; used + escape_byte((unsigned char)s[tail - 1], true, NULL) <= room - 3 - half;)
            used += escape_byte((unsigned char)s[--tail], true, NULL);
        append_escaped(buf, &at, s, tail, end);
    }
    buf[at++] = '\'';
    buf[at] = 0;
    return buf;
}

/* Format into a buffer of its own, so an argument may be td_last_error()
** itself, then store it as one line of printable ASCII (the backstop for any
** control byte a caller passed unquoted). */
static td_status error_v(const char *file, int line, td_status s, const char *fmt, va_list ap) {
    char text[sizeof last_message];
    vsnprintf(text, sizeof text, fmt, ap);
    size_t at = 0;
    for (const char *c = text; *c && at + 5 <= sizeof last_message; c++)
        at += escape_byte((unsigned char)*c, false, last_message + at);
    last_message[at] = 0;
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

td_status td_error_prefix(const char *fmt, ...) {
    char prefix[sizeof last_message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    return td__error_at("td_error_prefix", 0, last_status, "%s: %s", prefix, td_last_error());
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
