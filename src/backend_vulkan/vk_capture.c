/*
** Capture and replay: between capture_begin and capture_end, ops are recorded
** into one command buffer (with its barriers and pushed descriptors) instead of
** being submitted; graph_replay submits that command buffer again, ordered
** after all work queued before it. A replay waits for the previous replay of
** the same graph. Host transfers (read, write, unaligned memset) are refused
** while capturing, and buffers freed during the capture are held by the graph
** until graph_free, so a replay never writes memory that was reused.
*/
#include <stdlib.h>

#include "vk_ops.h"

td_status vk_capture_begin(int dev) {
    vk_dev *d = vk_get(dev);
    if (!d) return td_last_status();
    vk_lock(d);
    td_status st = TD_OK;
    td_graph *g = NULL;
    if (d->capturing) {
        st = td_error_set(TD_ERR_STATE, "vulkan:%d is already capturing", dev);
        goto done;
    }
    if ((st = vk_flush(d)) != TD_OK) goto done;
    g = calloc(1, sizeof *g);
    if (!g) {
        st = td_error_set(TD_ERR_OOM, "vulkan: out of host memory");
        goto done;
    }
    g->d = d;
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = d->pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    VkResult r = vkAllocateCommandBuffers(d->dev, &ai, &g->cb);
    if (r == VK_SUCCESS) r = vkCreateFence(d->dev, &fi, NULL, &g->fence);
    if (r == VK_SUCCESS) r = vkBeginCommandBuffer(g->cb, &bi);
    if (r != VK_SUCCESS) {
        st = vk_fail(r, "capture_begin");
        goto done;
    }
    if (!d->push_descriptor && (st = vk_new_dpool(d, &g->dpool)) != TD_OK) goto done;
    d->capturing = g;
    d->n_hazards = 0;
    d->batch_fresh = true; /* the first command orders the replay after earlier work */
    g = NULL;
done:
    if (g) {
        if (g->fence) vkDestroyFence(d->dev, g->fence, NULL);
        if (g->cb) vkFreeCommandBuffers(d->dev, d->pool, 1, &g->cb);
        free(g);
    }
    vk_unlock(d);
    return st;
}

td_status vk_capture_end(int dev, td_graph **out) {
    *out = NULL;
    vk_dev *d = vk_get(dev);
    if (!d) return td_last_status();
    vk_lock(d);
    td_graph *g = d->capturing;
    td_status st = TD_OK;
    if (!g) {
        st = td_error_set(TD_ERR_STATE, "vulkan:%d: capture_end without capture_begin", dev);
    } else {
        d->capturing = NULL;
        d->n_hazards = 0;
        VkResult r = vkEndCommandBuffer(g->cb);
        if (r != VK_SUCCESS) {
            st = vk_fail(r, "capture_end");
            vk_unlock(d);
            vk_graph_free(g);
            return st;
        }
        *out = g;
    }
    vk_unlock(d);
    return st;
}

td_status vk_graph_replay(td_graph *g) {
    vk_dev *d = g->d;
    vk_lock(d);
    td_status st = vk_flush(d);
    VkResult r = VK_SUCCESS;
    if (st == TD_OK && g->pending) {
        r = vkWaitForFences(d->dev, 1, &g->fence, VK_TRUE, UINT64_MAX);
        if (r == VK_SUCCESS) r = vkResetFences(d->dev, 1, &g->fence);
        g->pending = false;
    }
    if (st == TD_OK && r == VK_SUCCESS) {
        VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &g->cb};
        r = vkQueueSubmit(d->queue, 1, &si, g->fence);
        g->pending = r == VK_SUCCESS;
        if (g->pending) d->replayed = g;
    }
    if (st == TD_OK && r != VK_SUCCESS) st = vk_fail(r, "graph_replay");
    vk_unlock(d);
    return st;
}

void vk_graph_free(td_graph *g) {
    if (!g) return;
    vk_dev *d = g->d;
    vk_lock(d);
    if (g->pending) vkWaitForFences(d->dev, 1, &g->fence, VK_TRUE, UINT64_MAX);
    if (d->replayed == g) d->replayed = NULL;
    vkDestroyFence(d->dev, g->fence, NULL);
    vkFreeCommandBuffers(d->dev, d->pool, 1, &g->cb);
    if (g->dpool) vkDestroyDescriptorPool(d->dev, g->dpool, NULL);
    while (g->held) {
        td_buffer *b = g->held;
        g->held = b->next_free;
        vk_free(b);
    }
    vk_unlock(d);
    free(g);
}
