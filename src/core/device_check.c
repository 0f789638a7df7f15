/*
** Checks of tensor values that run on the device (out-of-range class ids,
** probabilities outside [0, 1], ...), so that a GPU training step never waits
** for the host to look at its data.
**
** td__device_check(bad, ...) takes a bool tensor that is true where the input
** was wrong. On the CPU it is read at once and the error is set there. On a
** GPU it is folded into a flag of its own message (flag = max(flag, any(bad)),
** in place, so a captured graph keeps updating the same flag), and the host
** learns of it at its next read of that device: td_copy_to_host (and so
** td_item) and td_synchronize then fail with the check's message, saying that
** an earlier op found it. TRIDENT_SYNC_CHECKS=1 checks at once on GPUs too,
** naming the exact call, at the cost of a wait per check.
*/
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define SLOTS 16

typedef struct check_slot {
    td_device dev;
    td_tensor *flag; /* 0-d u8 on dev; NULL: unused slot */
    td_status code;
    char msg[256];
} check_slot;

static check_slot slots[SLOTS];
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;

static bool sync_checks(void) {
    static int on = -1;
    if (on < 0) {
        const char *e = getenv("TRIDENT_SYNC_CHECKS");
        on = e && *e && strcmp(e, "0");
    }
    return on;
}

/* The slot of (dev, msg), made when new; NULL when all are taken. */
static check_slot *slot_for(td_device dev, td_status code, const char *msg) {
    check_slot *free_slot = NULL;
    for (int i = 0; i < SLOTS; i++) {
        if (slots[i].flag && td_device_equal(slots[i].dev, dev) && !strcmp(slots[i].msg, msg)) return &slots[i];
        if (!slots[i].flag && !free_slot) free_slot = &slots[i];
    }
    if (!free_slot) return NULL;
    td_scope_begin();
    td_tensor *flag = td_keep(td_zeros(0, NULL, TD_U8, dev));
    td_scope_end();
    if (!flag) return NULL;
    *free_slot = (check_slot){.dev = dev, .flag = flag, .code = code};
    snprintf(free_slot->msg, sizeof free_slot->msg, "%s", msg);
    return free_slot;
}

bool td__device_check(td_tensor *bad, td_status code, const char *fmt, ...) {
    if (!bad) return false;
    if (td_numel(bad) == 0) return true; /* nothing to check */
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    td_device dev = td_tensor_device(bad);
    td_scope_begin();
    td_tensor *any = td_amax(td_cast(bad, TD_U8), 0, NULL, false);
    bool ok;
    if (dev.type == TD_DEVICE_CPU || sync_checks()) {
        double v = td_item(any);
        ok = v == 0;
        if (v != 0) td__error_at(__FILE__, __LINE__, code, "%s", msg);
    } else {
        pthread_mutex_lock(&slots_lock);
        check_slot *s = slot_for(dev, code, msg);
        ok = s && td_copy_(s->flag, td_maximum(s->flag, any)) == TD_OK;
        pthread_mutex_unlock(&slots_lock);
        if (!s) TD_ERR(TD_ERR_OOM, "%s: no room to record a device-side check", msg);
    }
    td_scope_end();
    return ok;
}

td_status td__device_check_report(td_device dev) {
    if (dev.type == TD_DEVICE_CPU) return TD_OK;
    td_status st = TD_OK;
    pthread_mutex_lock(&slots_lock);
    for (int i = 0; i < SLOTS && st == TD_OK; i++) {
        check_slot *s = &slots[i];
        if (!s->flag || !td_device_equal(s->dev, dev)) continue;
        const td_storage *fs = s->flag->storage;
        uint8_t v = 0;
        /* the device is idle after the caller's read: this small read adds no wait of its own */
        td_status rs = fs->backend->iface->read(fs->buf, fs->guard + (size_t)s->flag->offset, &v, 1);
        if (rs != TD_OK) {
            st = rs;
        } else if (v) {
            fs->backend->iface->memset(fs->buf, fs->guard + (size_t)s->flag->offset, 0, 1);
            st = TD_ERR(s->code, "%s (found on the device by an earlier op; TRIDENT_SYNC_CHECKS=1 stops at that op)",
                        s->msg);
        }
    }
    pthread_mutex_unlock(&slots_lock);
    return st;
}
