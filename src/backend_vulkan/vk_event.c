/*
** Events: timestamp queries written into the command stream.
** event_record writes a timestamp after all earlier work of the queue
** (bottom of pipe); event_elapsed_ms waits for the later event's batch and
** converts ticks with timestampPeriod (ns per tick).
** Without compute timestamps (or TRIDENT_VULKAN_DISABLE=timestamps), an event
** is timed on the host instead: event_record waits until the queue is idle and
** reads CLOCK_MONOTONIC, which adds the submission and wait to the time.
*/
#include <stdlib.h>
#include <time.h>

#include "vk_ops.h"

struct td_event {
    vk_dev *d;
    uint32_t query;
    bool recorded;
    uint64_t host_ns; /* without timestamps: when the queue was found idle */
};

td_status vk_event_create(int dev, td_event **out) {
    *out = NULL;
    vk_dev *d = vk_get(dev);
    if (!d) return td_last_status();
    td_event *ev = calloc(1, sizeof *ev);
    if (!ev) return td_error_set(TD_ERR_OOM, "vulkan: out of host memory");
    vk_lock(d);
    ev->d = d;
    ev->query = d->next_query++ % VK_QUERY_COUNT; /* events reuse queries after VK_QUERY_COUNT */
    vk_unlock(d);
    *out = ev;
    return TD_OK;
}

td_status vk_event_record(td_event *ev) {
    vk_dev *d = ev->d;
    vk_lock(d);
    if (!d->caps.timestamps) {
        td_status st = vk_finish(d);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ev->host_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
        ev->recorded = st == TD_OK;
        vk_unlock(d);
        return st;
    }
    td_status st = vk_cmd_timestamp(d, ev->query);
    if (st == TD_OK) ev->recorded = true;
    vk_unlock(d);
    return st;
}

td_status vk_event_elapsed_ms(td_event *start, td_event *end, double *ms) {
    *ms = 0;
    vk_dev *d = end->d;
    if (start->d != d) return td_error_set(TD_ERR_DEVICE, "vulkan: events on different devices");
    if (!start->recorded || !end->recorded) return td_error_set(TD_ERR_STATE, "vulkan: event was never recorded");
    if (!d->caps.timestamps) {
        *ms = (double)(int64_t)(end->host_ns - start->host_ns) * 1e-6;
        return TD_OK;
    }
    vk_lock(d);
    td_status st = vk_finish(d);
    uint64_t t[2] = {0, 0};
    if (st == TD_OK) {
        VkResult r = vkGetQueryPoolResults(d->dev, d->qpool, start->query, 1, 8, &t[0], 8,
                                           VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
        if (r == VK_SUCCESS)
            r = vkGetQueryPoolResults(d->dev, d->qpool, end->query, 1, 8, &t[1], 8,
                                      VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
        if (r != VK_SUCCESS) st = vk_fail(r, "vkGetQueryPoolResults");
    }
    vk_unlock(d);
    if (st == TD_OK) *ms = (double)(int64_t)(t[1] - t[0]) * d->caps.timestamp_period * 1e-6;
    return st;
}

/* One queue per device runs its work in submission order, so an event of the
** same device is already behind everything queued; one of another device is
** waited for on the host (Vulkan devices share no semaphores here). */
td_status vk_event_wait(int dev, td_event *ev) {
    vk_dev *d = vk_get(dev);
    if (!d) return td_last_status();
    if (ev->d == d) return TD_OK;
    vk_lock(ev->d);
    td_status st = vk_finish(ev->d);
    vk_unlock(ev->d);
    return st;
}

void vk_event_free(td_event *ev) { free(ev); }
