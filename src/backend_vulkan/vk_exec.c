/*
** Recording and submission.
**
** Work is recorded into the current batch (a command buffer). A batch is
** submitted when VK_BATCH_DISPATCHES commands are in it, or when the host must
** wait (read, synchronize, event timing); the host blocks only then. Up to
** VK_N_BATCHES batches are in flight, each with a fence.
**
** Barriers: the recorder keeps the buffer ranges touched since the last
** barrier. A command that writes a range someone touched, or reads a range
** someone wrote, gets one global memory barrier (compute|transfer ->
** compute|transfer) first; independent dispatches run back to back. Every
** batch starts with one barrier, which orders it after earlier batches.
**
** Descriptors: pushed (VK_KHR_push_descriptor) when the device has it, else
** allocated from the batch's descriptor pool, which is reset when the batch is
** reused (a captured graph has its own pool).
**
** Fences (vk_fence_record, vk_fence_wait): host staging's wait for the copies
** into host buffers, from any thread (DDP's worker), without the device lock.
**
** Capture (vk_capture.c): while d->capturing is set, commands go into the
** graph's command buffer instead of a batch and nothing is submitted.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vk.h"

#define POOL_SETS 1024

td_status vk_new_dpool(vk_dev *d, VkDescriptorPool *out) {
    VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, POOL_SETS * VK_MAX_BINDINGS};
    VkDescriptorPoolCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                     .maxSets = POOL_SETS,
                                     .poolSizeCount = 1,
                                     .pPoolSizes = &ps};
    VkResult r = vkCreateDescriptorPool(d->dev, &ci, NULL, out);
    return r == VK_SUCCESS ? TD_OK : vk_fail(r, "vkCreateDescriptorPool");
}

td_status vk_exec_init(vk_dev *d) {
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                   .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                   .queueFamilyIndex = d->qfam};
    VkResult r = vkCreateCommandPool(d->dev, &pci, NULL, &d->pool);
    if (r != VK_SUCCESS) return vk_fail(r, "vkCreateCommandPool");
    for (int i = 0; i < VK_N_BATCHES; i++) {
        vk_batch *b = &d->batches[i];
        VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                          .commandPool = d->pool,
                                          .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                          .commandBufferCount = 1};
        r = vkAllocateCommandBuffers(d->dev, &ai, &b->cb);
        if (r != VK_SUCCESS) return vk_fail(r, "vkAllocateCommandBuffers");
        VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        r = vkCreateFence(d->dev, &fi, NULL, &b->fence);
        if (r != VK_SUCCESS) return vk_fail(r, "vkCreateFence");
        if (!d->push_descriptor) {
            td_status st = vk_new_dpool(d, &b->dpool);
            if (st != TD_OK) return st;
        }
    }
    if (d->caps.timestamps) {
        VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                    .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                    .queryCount = VK_QUERY_COUNT};
        r = vkCreateQueryPool(d->dev, &qi, NULL, &d->qpool);
        if (r != VK_SUCCESS) d->caps.timestamps = false;
    }
    d->cur = -1;
    return TD_OK;
}

void vk_exec_destroy(vk_dev *d) {
    vk_finish(d);
    for (int i = 0; i < VK_N_BATCHES; i++) {
        vkDestroyFence(d->dev, d->batches[i].fence, NULL);
        if (d->batches[i].dpool) vkDestroyDescriptorPool(d->dev, d->batches[i].dpool, NULL);
    }
    if (d->qpool) vkDestroyQueryPool(d->dev, d->qpool, NULL);
    vkDestroyCommandPool(d->dev, d->pool, NULL);
}

static td_status wait_batch(vk_dev *d, vk_batch *b) {
    if (!b->pending) return TD_OK;
    VkResult r = vkWaitForFences(d->dev, 1, &b->fence, VK_TRUE, UINT64_MAX);
    if (r != VK_SUCCESS) return vk_fail(r, "vkWaitForFences");
    vkResetFences(d->dev, 1, &b->fence);
    b->pending = false;
    if (b->serial > d->done_serial) d->done_serial = b->serial;
    return TD_OK;
}

/* The command buffer being recorded (begins a batch if none). */
static td_status recording(vk_dev *d, VkCommandBuffer *cb) {
    if (d->capturing) {
        *cb = d->capturing->cb;
        return TD_OK;
    }
    if (d->cur >= 0) {
        *cb = d->batches[d->cur].cb;
        return TD_OK;
    }
    /* reuse the batch submitted longest ago */
    int pick = 0;
    for (int i = 1; i < VK_N_BATCHES; i++)
        if (d->batches[i].serial < d->batches[pick].serial) pick = i;
    vk_batch *b = &d->batches[pick];
    td_status st = wait_batch(d, b);
    if (st != TD_OK) return st;
    VkResult r = vkResetCommandBuffer(b->cb, 0);
    if (r != VK_SUCCESS) return vk_fail(r, "vkResetCommandBuffer");
    if (b->dpool) vkResetDescriptorPool(d->dev, b->dpool, 0);
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    r = vkBeginCommandBuffer(b->cb, &bi);
    if (r != VK_SUCCESS) return vk_fail(r, "vkBeginCommandBuffer");
    b->recording = true;
    b->n_cmds = 0;
    d->cur = pick;
    d->n_hazards = 0;
    d->batch_fresh = true;
    *cb = b->cb;
    return TD_OK;
}

/* Record c into cb (a dispatch's pipeline is ready). */
static void record(vk_dev *d, VkCommandBuffer cb, const vk_cmd *c) {
    VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    switch (c->kind) {
    case VK_CMD_DISPATCH:
        vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, c->pipe->pipe);
        if (c->n_bind && d->push_descriptor) {
            VkWriteDescriptorSet w[VK_MAX_BINDINGS];
            for (int i = 0; i < c->n_bind; i++)
                w[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                              .dstBinding = (uint32_t)i,
                                              .descriptorCount = 1,
                                              .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                              .pBufferInfo = &c->info[i]};
            d->push_descriptor(cb, VK_PIPELINE_BIND_POINT_COMPUTE, d->layout, 0, (uint32_t)c->n_bind, w);
        } else if (c->n_bind) {
            vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, d->layout, 0, 1, &c->set, 0, NULL);
        }
        if (c->push_size) vkCmdPushConstants(cb, d->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, c->push_size, c->push);
        vkCmdDispatch(cb, c->groups[0], c->groups[1], c->groups[2]);
        break;
    case VK_CMD_BARRIER: {
        VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                               VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT};
        vkCmdPipelineBarrier(cb, stages, stages, 0, 1, &mb, 0, NULL, 0, NULL);
        break;
    }
    case VK_CMD_HOST_BARRIER: {
        VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
        vkCmdPipelineBarrier(cb, stages, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
        break;
    }
    case VK_CMD_COPY: {
        VkBufferCopy region = {c->src_off, c->dst_off, c->n};
        vkCmdCopyBuffer(cb, c->src, c->dst, 1, &region);
        break;
    }
    case VK_CMD_FILL: vkCmdFillBuffer(cb, c->dst, c->dst_off, c->n, c->word); break;
    case VK_CMD_TIMESTAMP:
        vkCmdResetQueryPool(cb, d->qpool, c->word, 1);
        vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, d->qpool, c->word);
        break;
    }
}

/* Record c, or log it when the batch waits for a pipeline (a pending dispatch starts that). */
static td_status issue(vk_dev *d, const vk_cmd *c) {
    VkCommandBuffer cb = VK_NULL_HANDLE;
    td_status st = recording(d, &cb);
    if (st != TD_OK) return st;
    bool pending = c->kind == VK_CMD_DISPATCH && !c->pipe->ready;
    if (d->capturing || (!d->n_log && !pending)) {
        record(d, cb, c);
        return TD_OK;
    }
    if (d->n_log == d->log_cap) {
        int cap = d->log_cap ? 2 * d->log_cap : VK_BATCH_DISPATCHES;
        vk_cmd *more = realloc(d->log, (size_t)cap * sizeof *more);
        if (!more) return td_error_set(TD_ERR_OOM, "vulkan: out of host memory");
        d->log = more;
        d->log_cap = cap;
    }
    d->log[d->n_log++] = *c;
    return TD_OK;
}

static bool overlaps(const vk_range *a, const vk_range *b) {
    return a->buf == b->buf && a->lo < b->hi && b->lo < a->hi;
}

/* A barrier first when these ranges need one; counts a command of the batch. */
static td_status hazard(vk_dev *d, int n, const vk_range *r) {
    bool need = d->batch_fresh || d->n_hazards + n > VK_MAX_HAZARDS;
    for (int i = 0; i < n && !need; i++)
        for (int j = 0; j < d->n_hazards && !need; j++)
            need = (r[i].write || d->hazards[j].write) && overlaps(&r[i], &d->hazards[j]);
    if (need) {
        td_status st = issue(d, &(vk_cmd){.kind = VK_CMD_BARRIER});
        if (st != TD_OK) return st;
        d->n_hazards = 0;
        d->batch_fresh = false;
    }
    for (int i = 0; i < n; i++) d->hazards[d->n_hazards++] = r[i];
    if (d->cur >= 0) d->batches[d->cur].n_cmds++;
    return TD_OK;
}

/* Submit the batch when it is full. */
static td_status counted(vk_dev *d) {
    return !d->capturing && d->cur >= 0 && d->batches[d->cur].n_cmds >= VK_BATCH_DISPATCHES ? vk_flush(d) : TD_OK;
}

td_status vk_cmd_copy(vk_dev *d, VkBuffer src, VkDeviceSize src_off, VkBuffer dst, VkDeviceSize dst_off,
                      VkDeviceSize n) {
    VkCommandBuffer cb;
    td_status st = recording(d, &cb);
    vk_range r[2] = {{src, src_off, src_off + n, false}, {dst, dst_off, dst_off + n, true}};
    if (st == TD_OK) st = hazard(d, 2, r);
    if (st == TD_OK)
        st = issue(
            d, &(vk_cmd){.kind = VK_CMD_COPY, .src = src, .src_off = src_off, .dst = dst, .dst_off = dst_off, .n = n});
    return st == TD_OK ? counted(d) : st;
}

td_status vk_cmd_fill(vk_dev *d, VkBuffer dst, VkDeviceSize off, VkDeviceSize n, uint32_t word) {
    VkCommandBuffer cb;
    td_status st = recording(d, &cb);
    vk_range r = {dst, off, off + n, true};
    if (st == TD_OK) st = hazard(d, 1, &r);
    if (st == TD_OK) st = issue(d, &(vk_cmd){.kind = VK_CMD_FILL, .dst = dst, .dst_off = off, .n = n, .word = word});
    return st == TD_OK ? counted(d) : st;
}

td_status vk_cmd_host_barrier(vk_dev *d) { return issue(d, &(vk_cmd){.kind = VK_CMD_HOST_BARRIER}); }

td_status vk_cmd_timestamp(vk_dev *d, uint32_t query) {
    return issue(d, &(vk_cmd){.kind = VK_CMD_TIMESTAMP, .word = query});
}

/* A dispatch of p (pending or ready; alt on alt_groups where p is still pending at submission). */
static td_status dispatch(vk_dev *d, vk_pipeline *p, vk_pipeline *alt, const uint32_t *alt_groups, int n_bind,
                          const vk_bind *binds, const void *push, size_t push_size, uint32_t gx, uint32_t gy,
                          uint32_t gz) {
    VkCommandBuffer cb;
    td_status st = recording(d, &cb);
    if (st != TD_OK) return st;
    vk_cmd c = {.kind = VK_CMD_DISPATCH,
                .pipe = p,
                .alt = alt,
                .n_bind = n_bind,
                .push_size = (uint32_t)push_size,
                .groups = {gx, gy, gz}};
    if (alt) memcpy(c.alt_groups, alt_groups, sizeof c.alt_groups);
    vk_range r[VK_MAX_BINDINGS] = {{0}};
    for (int i = 0; i < n_bind; i++) {
        r[i] = (vk_range){binds[i].buf, binds[i].offset, binds[i].offset + binds[i].range, binds[i].write};
        c.info[i] = (VkDescriptorBufferInfo){binds[i].buf, binds[i].offset, binds[i].range};
    }
    if (push_size) memcpy(c.push, push, push_size);
    if (n_bind && !d->push_descriptor) {
        VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                          .descriptorPool = vk_current_dpool(d),
                                          .descriptorSetCount = 1,
                                          .pSetLayouts = &d->dsl};
        VkResult vr = vkAllocateDescriptorSets(d->dev, &ai, &c.set);
        if ((vr == VK_ERROR_OUT_OF_POOL_MEMORY || vr == VK_ERROR_FRAGMENTED_POOL) && !d->capturing) {
            /* pool exhausted: submit this batch and record into a fresh one */
            if ((st = vk_flush(d)) != TD_OK) return st;
            return dispatch(d, p, alt, alt_groups, n_bind, binds, push, push_size, gx, gy, gz);
        }
        if (vr != VK_SUCCESS) return vk_fail(vr, "vkAllocateDescriptorSets");
        VkWriteDescriptorSet w[VK_MAX_BINDINGS];
        for (int i = 0; i < n_bind; i++)
            w[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                          .dstSet = c.set,
                                          .dstBinding = (uint32_t)i,
                                          .descriptorCount = 1,
                                          .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                          .pBufferInfo = &c.info[i]};
        vkUpdateDescriptorSets(d->dev, (uint32_t)n_bind, w, 0, NULL);
    }
    if ((st = hazard(d, n_bind, r)) != TD_OK || (st = issue(d, &c)) != TD_OK) return st;
    return counted(d);
}

td_status vk_dispatch_alt(vk_dev *d, int shader, const uint32_t *spec, const uint32_t *alt_spec, int n_spec,
                          const uint32_t alt_groups[3], int n_bind, const vk_bind *binds, const void *push,
                          size_t push_size, uint32_t gx, uint32_t gy, uint32_t gz) {
    if (gx == 0 || gy == 0 || gz == 0) return TD_OK;
    if (n_bind > VK_MAX_BINDINGS || push_size > VK_PUSH_MAX || push_size % 4)
        return td_error_set(TD_ERR_MISUSE, "vulkan: %d bindings / %zu push bytes exceed the limits (%d / %d)", n_bind,
                            push_size, VK_MAX_BINDINGS, VK_PUSH_MAX);
    if (gx > d->caps.max_groups[0] || gy > d->caps.max_groups[1] || gz > d->caps.max_groups[2])
        return td_error_set(TD_ERR_UNSUPPORTED, "vulkan: grid %ux%ux%u exceeds maxComputeWorkGroupCount %ux%ux%u", gx,
                            gy, gz, d->caps.max_groups[0], d->caps.max_groups[1], d->caps.max_groups[2]);
    vk_pipeline *p, *alt = NULL;
    td_status st = vk_pipeline_find(d, shader, spec, n_spec, d->capturing != NULL, &p);
    if (st == TD_OK && alt_spec && !p->ready) st = vk_pipeline_find(d, shader, alt_spec, n_spec, false, &alt);
    if (st == TD_OK) st = dispatch(d, p, alt, alt_groups, n_bind, binds, push, push_size, gx, gy, gz);
    if (st == TD_OK && d->planted >= 0) st = vk_selftest_plant(d, vk_pipeline_variant(d, shader), n_bind, binds);
    return st;
}

td_status vk_dispatch(vk_dev *d, int shader, const uint32_t *spec, int n_spec, int n_bind, const vk_bind *binds,
                      const void *push, size_t push_size, uint32_t gx, uint32_t gy, uint32_t gz) {
    return vk_dispatch_alt(d, shader, spec, NULL, n_spec, NULL, n_bind, binds, push, push_size, gx, gy, gz);
}

td_status vk_dispatch_pipeline(vk_dev *d, VkPipeline pipe, int n_bind, const vk_bind *binds, const void *push,
                               size_t push_size, uint32_t gx, uint32_t gy, uint32_t gz) {
    vk_pipeline p = {.pipe = pipe, .ready = true}; /* a logged command points at it: none may be */
    td_status st = TD_OK;
    if (d->n_log && !d->capturing) st = vk_flush(d);
    return st == TD_OK ? dispatch(d, &p, NULL, NULL, n_bind, binds, push, push_size, gx, gy, gz) : st;
}

VkDescriptorPool vk_current_dpool(vk_dev *d) { return d->capturing ? d->capturing->dpool : d->batches[d->cur].dpool; }

/* Record the logged commands: first every pipeline they need is waited for (of a dispatch with an
** alternative, the alternative's), then a dispatch with an alternative takes its own pipeline if
** that is made by now, else the alternative. The first failure's status (the batch still gets the
** other commands). */
static td_status replay(vk_dev *d, VkCommandBuffer cb) {
    td_status st = TD_OK;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int n = d->n_log, n_alt = 0;
    VkPipeline pipe;
    for (int i = 0; i < n; i++) {
        vk_cmd *c = &d->log[i];
        if (c->kind != VK_CMD_DISPATCH) continue;
        td_status ps = vk_pipeline_ready(d, c->alt ? c->alt : c->pipe, &pipe);
        if (ps != TD_OK && st == TD_OK) st = ps;
    }
    for (int i = 0; i < n; i++) {
        vk_cmd *c = &d->log[i];
        if (c->kind == VK_CMD_DISPATCH && c->alt && !c->pipe->ready &&
            !(vk_compile_state(d, c->pipe, false) == VK_PIPE_READY && vk_pipeline_ready(d, c->pipe, &pipe) == TD_OK)) {
            c->pipe = c->alt;
            memcpy(c->groups, c->alt_groups, sizeof c->groups);
            n_alt++;
        }
        if (c->kind != VK_CMD_DISPATCH || c->pipe->ready) record(d, cb, c); /* else it failed: st says so */
    }
    d->n_log = 0;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (d->verbose)
        fprintf(stderr,
                "trident: vulkan:%d: %d logged commands recorded after %.1f ms waiting for their pipelines (%d on "
                "an alternative)\n",
                d->index, n, (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6, n_alt);
    return st;
}

td_status vk_flush(vk_dev *d) {
    if (d->cur < 0) return TD_OK;
    vk_batch *b = &d->batches[d->cur];
    td_status st = d->n_log ? replay(d, b->cb) : TD_OK;
    d->cur = -1;
    b->recording = false;
    VkResult r = vkEndCommandBuffer(b->cb);
    if (r != VK_SUCCESS) return vk_fail(r, "vkEndCommandBuffer");
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &b->cb};
    r = vkQueueSubmit(d->queue, 1, &si, b->fence);
    if (r != VK_SUCCESS) return vk_fail(r, "vkQueueSubmit");
    b->serial = ++d->next_serial;
    b->pending = true;
    return st;
}

td_status vk_finish(vk_dev *d) {
    td_status st = vk_flush(d);
    for (int i = 0; i < VK_N_BATCHES && st == TD_OK; i++) st = wait_batch(d, &d->batches[i]);
    if (st != TD_OK) return st;
    d->staging_used = 0;
    if (d->cache_dirty) vk_pipeline_cache_save(d);
    return TD_OK;
}

bool vk_idle(vk_dev *d) {
    if (d->cur >= 0 && d->batches[d->cur].n_cmds > 0) return false;
    if (d->replayed && vkGetFenceStatus(d->dev, d->replayed->fence) != VK_SUCCESS) return false;
    for (int i = 0; i < VK_N_BATCHES; i++) {
        vk_batch *b = &d->batches[i];
        if (!b->pending) continue;
        if (vkGetFenceStatus(d->dev, b->fence) != VK_SUCCESS) return false;
        wait_batch(d, b);
    }
    return true;
}

/* ---- bindings ---- */

vk_bind vk_bind_buffer(td_buffer *b, bool write) {
    assert(!b->segs); /* scratch buffers are made within one allocation (vk_fits_one) */
    return (vk_bind){b->block->buf, b->offset, b->cap, write};
}

/* Bytes [lo, hi) of v's buffer that hold its elements (strides are not negative). */
static void view_window(const td_operand *v, VkDeviceSize *lo, VkDeviceSize *hi) {
    size_t es = td_dtype_size(v->dtype);
    int64_t hi_el = v->offset;
    for (int i = 0; i < v->ndim; i++) hi_el += (v->shape[i] - 1) * v->strides[i];
    *lo = (VkDeviceSize)v->offset * es;
    *hi = (VkDeviceSize)(hi_el + 1) * es;
}

/* Whether v's window crosses a segment boundary of its (segmented) buffer. */
static bool view_straddles(const td_operand *v) {
    if (!v->buf || !v->buf->segs || td_operand_numel(v) == 0) return false;
    VkDeviceSize lo, hi;
    view_window(v, &lo, &hi);
    return lo / v->buf->seg != (hi - 1) / v->buf->seg;
}

td_status vk_bind_view(vk_dev *d, const td_operand *v, bool write, vk_bind *b, uint32_t *elem_off) {
    if (!v || !v->buf || td_operand_numel(v) == 0) {
        *b = vk_bind_buffer(d->dummy, write);
        *elem_off = 0;
        return TD_OK;
    }
    size_t es = td_dtype_size(v->dtype);
    const td_buffer *buf = v->buf;
    VkDeviceSize lo, hi, base = buf->offset;
    view_window(v, &lo, &hi);
    if (view_straddles(v))
        return td_error_set(TD_ERR_UNSUPPORTED,
                            "vulkan: a %s view of bytes [%llu, %llu) crosses a %llu-byte allocation of a tensor larger "
                            "than one allocation may hold on %s (maxMemoryAllocationSize %llu), and this op does not "
                            "run in parts",
                            td_dtype_name(v->dtype), (unsigned long long)lo, (unsigned long long)hi,
                            (unsigned long long)buf->seg, d->props.deviceName, (unsigned long long)d->caps.max_alloc);
    VkBuffer vb;
    if (buf->segs) {
        VkDeviceSize first = lo / buf->seg * buf->seg;
        vb = buf->segs[lo / buf->seg]->buf;
        lo -= first, hi -= first, base = 0;
    } else {
        vb = buf->block->buf;
    }
    lo += base, hi += base;
    VkDeviceSize align = d->caps.min_storage_align > 4 ? d->caps.min_storage_align : 4;
    VkDeviceSize start = lo / align * align;
    if (start < base) start = base;
    if (hi - start > d->caps.max_storage_range)
        return td_error_set(TD_ERR_UNSUPPORTED,
                            "vulkan: a %s view spans %llu bytes, more than one binding may hold on %s "
                            "(maxStorageBufferRange %llu); split the tensor",
                            td_dtype_name(v->dtype), (unsigned long long)(hi - start), d->props.deviceName,
                            (unsigned long long)d->caps.max_storage_range);
    if ((lo - start) / es > UINT32_MAX) return td_error_set(TD_ERR_UNSUPPORTED, "vulkan: view offset too large");
    *b = (vk_bind){vb, start, hi - start, write};
    *elem_off = (uint32_t)((lo - start) / es);
    return TD_OK;
}

td_status vk_bind_views(vk_dev *d, int n, const td_operand *const *views, uint32_t writes, vk_bind *b,
                        uint32_t *const *offs) {
    td_status st = TD_OK;
    for (int k = 0; k < n && st == TD_OK; k++) st = vk_bind_view(d, views[k], (writes >> k) & 1, &b[k], offs[k]);
    return st;
}

bool vk_view_too_wide(vk_dev *d, const td_operand *v) {
    if (!v->buf || td_operand_numel(v) == 0) return false;
    if (view_straddles(v)) return true;
    int64_t hi = 0;
    for (int i = 0; i < v->ndim; i++) hi += (v->shape[i] - 1) * (v->strides[i] < 0 ? -v->strides[i] : v->strides[i]);
    return (VkDeviceSize)(hi + 1) * td_dtype_size(v->dtype) + d->caps.min_storage_align > d->caps.max_storage_range;
}

bool vk_fits_one(vk_dev *d, const td_operand *v) {
    VkDeviceSize n = (VkDeviceSize)td_operand_numel(v) * td_dtype_size(v->dtype);
    return n <= d->caps.max_alloc && n + d->caps.min_storage_align <= d->caps.max_storage_range;
}

uint32_t vk_groups(int64_t n, uint32_t per_group) {
    int64_t g = (n + per_group - 1) / per_group;
    return g < 1 ? 1 : g > 65535 ? 65535 : (uint32_t)g;
}

/* ---- fences for host staging ---- */

/* A fence of its own, signalled by an empty submission after the batch: an
** empty vkQueueSubmit's fence signals once all work submitted before it has
** completed. The batch's fences stay the recording thread's (it resets them
** for reuse); this one is only waited for and destroyed, by whoever waits. */
struct td_fence {
    vk_dev *d;
    VkFence fence;
};

td_status vk_fence_record(int dev, td_fence **out) {
    *out = NULL;
    vk_dev *d = vk_get(dev);
    if (!d) return td_last_status();
    td_fence *f = calloc(1, sizeof *f);
    if (!f) return td_error_set(TD_ERR_OOM, "vulkan: out of host memory");
    f->d = d;
    VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkResult r = vkCreateFence(d->dev, &fi, NULL, &f->fence);
    if (r != VK_SUCCESS) {
        free(f);
        return vk_fail(r, "vkCreateFence");
    }
    vk_lock(d); /* the queue is externally synchronized: every submission holds the device's lock */
    td_status st = d->capturing
                       ? td_error_set(TD_ERR_STATE, "vulkan: a fence cannot be captured (end the capture first)")
                       : vk_cmd_host_barrier(d);
    if (st == TD_OK) st = vk_flush(d);
    if (st == TD_OK && (r = vkQueueSubmit(d->queue, 0, NULL, f->fence)) != VK_SUCCESS) st = vk_fail(r, "vkQueueSubmit");
    vk_unlock(d);
    if (st != TD_OK) {
        vkDestroyFence(d->dev, f->fence, NULL);
        free(f);
        return st;
    }
    *out = f;
    return TD_OK;
}

td_status vk_fence_wait(td_fence *f) {
    if (!f) return TD_OK;
    VkResult r = vkWaitForFences(f->d->dev, 1, &f->fence, VK_TRUE, UINT64_MAX);
    td_status st = r == VK_SUCCESS ? TD_OK : vk_fail(r, "vkWaitForFences");
    vkDestroyFence(f->d->dev, f->fence, NULL);
    free(f);
    return st;
}
