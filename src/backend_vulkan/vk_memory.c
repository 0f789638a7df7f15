/*
** Device memory: a caching sub-allocator, and host <-> device transfers.
**
** Blocks: large VkDeviceMemory allocations, each with one VkBuffer over all of
** it. A request is rounded up to a size class (256 B * {1, 1.25, 1.5, 1.75, 2, ...})
** and served from that class's free list, else bump-allocated from a block.
** Requests above half a block get a dedicated block of their size (rounded to
** 64 KiB), cached on a best-fit list that reuses one at most 25% larger.
** Requests past one allocation (maxMemoryAllocationSize) are segmented: a chain
** of dedicated blocks of the largest power of two that one allocation holds
** (vk.h, td_buffer), cached on the same best-fit list.
** Freed buffers are never handed back to the driver, except when an
** allocation fails: then the cached dedicated blocks are released and it
** retries once.
** Reusing memory that queued work still reads is safe: the recorder orders
** every dispatch against earlier ones on the same ranges (vk_exec.c).
**
** Host buffers (vk_host_buffer_alloc): a block of their own in the staging
** memory type, which copies read and write on the queue and the host through
** the mapping, after a fence (vk_exec.c): DDP's reads and writes of gradient
** buckets without host waits on the training thread.
**
** Transfers: when blocks are host-visible and coherent (lavapipe, ReBAR GPUs)
** and the device is idle, write/memset touch the mapping directly; otherwise
** the data goes through a host-visible staging buffer and a recorded copy, so
** it stays ordered with queued work without waiting. read() waits. A copy
** between two devices waits for the source and writes its bytes to the
** destination as write() does (no host tensor in between).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk.h"

#define STAGING_SIZE ((VkDeviceSize)16 << 20)

/* 256 B * {1, 1.25, 1.5, 1.75, 2, 2.5, ...}: 4 classes per power of two, so at most a fifth of a buffer unused */
static VkDeviceSize class_size(int c) {
    VkDeviceSize base = (VkDeviceSize)VK_ALIGN << (c / 4);
    return base + base / 4 * (VkDeviceSize)(c % 4);
}

static int class_of(VkDeviceSize n) {
    int c = 0;
    while (c < VK_N_CLASSES - 1 && class_size(c) < n) c++;
    return c;
}

static int find_type(vk_dev *d, uint32_t bits, VkMemoryPropertyFlags want, VkMemoryPropertyFlags avoid) {
    for (uint32_t i = 0; i < d->memprops.memoryTypeCount; i++) {
        VkMemoryPropertyFlags f = d->memprops.memoryTypes[i].propertyFlags;
        if ((bits & (1u << i)) && (f & want) == want && !(f & avoid)) return (int)i;
    }
    return -1;
}

static VkDeviceSize heap_size(vk_dev *d, uint32_t type) {
    return d->memprops.memoryHeaps[d->memprops.memoryTypes[type].heapIndex].size;
}

/* VK_EXT_memory_budget: what the heap of type may still take (the heap size without the extension). */
static VkDeviceSize heap_room(vk_dev *d, uint32_t type) {
    uint32_t h = d->memprops.memoryTypes[type].heapIndex;
    if (!d->caps.memory_budget) return heap_size(d, type);
    VkPhysicalDeviceMemoryBudgetPropertiesEXT budget = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
    VkPhysicalDeviceMemoryProperties2 mp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2,
                                            .pNext = &budget};
    vkGetPhysicalDeviceMemoryProperties2(d->phys, &mp);
    return budget.heapBudget[h] > budget.heapUsage[h] ? budget.heapBudget[h] - budget.heapUsage[h] : 0;
}

static td_status block_new(vk_dev *d, VkDeviceSize size, uint32_t type, VkBufferUsageFlags usage, vk_block **out) {
    *out = NULL;
    if (size > d->caps.max_alloc || size > heap_size(d, type))
        return td_error_set(TD_ERR_OOM,
                            "vulkan: %llu bytes is more than one allocation may hold on %s "
                            "(maxMemoryAllocationSize %llu, heap %llu)",
                            (unsigned long long)size, d->props.deviceName, (unsigned long long)d->caps.max_alloc,
                            (unsigned long long)heap_size(d, type));
    VkDeviceSize room = heap_room(d, type);
    if (size > room)
        return td_error_set(TD_ERR_OOM, "vulkan: %llu bytes would exceed the memory budget of %s (%llu bytes left%s)",
                            (unsigned long long)size, d->props.deviceName, (unsigned long long)room,
                            d->caps.memory_budget ? ", VK_EXT_memory_budget" : "");
    vk_block *b = calloc(1, sizeof *b);
    if (!b) return td_error_set(TD_ERR_OOM, "vulkan: out of host memory");
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                             .size = size,
                             .usage = usage,
                             .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VkResult r = vkCreateBuffer(d->dev, &bi, NULL, &b->buf);
    if (r != VK_SUCCESS) {
        free(b);
        return vk_fail(r, "vkCreateBuffer");
    }
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(d->dev, b->buf, &req);
    /* blocks of storage buffers carry device addresses when the device has them (td_tensor_device_address) */
    VkMemoryAllocateFlagsInfo fi = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
                                    .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT};
    bool address = (usage & VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT) != 0;
    VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                               .pNext = address ? &fi : NULL,
                               .allocationSize = req.size,
                               .memoryTypeIndex = type};
    r = vkAllocateMemory(d->dev, &ai, NULL, &b->mem);
    if (r == VK_SUCCESS) r = vkBindBufferMemory(d->dev, b->buf, b->mem, 0);
    if (r == VK_SUCCESS && (d->memprops.memoryTypes[type].propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT))
        r = vkMapMemory(d->dev, b->mem, 0, VK_WHOLE_SIZE, 0, &b->map);
    if (r != VK_SUCCESS) {
        if (b->mem) vkFreeMemory(d->dev, b->mem, NULL);
        vkDestroyBuffer(d->dev, b->buf, NULL);
        free(b);
        if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
            return td_error_set(TD_ERR_OOM, "vulkan: out of device memory allocating %llu bytes on %s (%s)",
                                (unsigned long long)size, d->props.deviceName, vk_result_str(r));
        return vk_fail(r, "vkAllocateMemory");
    }
    b->size = size;
    d->bytes_reserved += size;
    *out = b;
    return TD_OK;
}

static void block_destroy(vk_dev *d, vk_block *b) {
    if (b->map) vkUnmapMemory(d->dev, b->mem);
    vkDestroyBuffer(d->dev, b->buf, NULL);
    vkFreeMemory(d->dev, b->mem, NULL);
    d->bytes_reserved -= b->size;
    free(b);
}

/* td_buffer.size_class of a host buffer (vk_host_buffer_alloc): its own block, destroyed when freed */
#define HOST_CLASS (-2)

static const VkBufferUsageFlags USAGE =
    VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
#define STORAGE_USAGE(d) (USAGE | ((d)->caps.bda ? VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT : 0))

td_status vk_memory_init(vk_dev *d) {
    /* memoryTypeBits of a storage buffer */
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = 4096, .usage = USAGE};
    VkBuffer probe;
    VkResult r = vkCreateBuffer(d->dev, &bi, NULL, &probe);
    if (r != VK_SUCCESS) return vk_fail(r, "vkCreateBuffer");
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(d->dev, probe, &req);
    vkDestroyBuffer(d->dev, probe, NULL);
    const VkMemoryPropertyFlags DL = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
                                HV = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                                HC = VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
    int dev_only = find_type(d, req.memoryTypeBits, DL, 0);
    if (dev_only < 0) dev_only = find_type(d, req.memoryTypeBits, 0, 0);
    if (dev_only < 0) return td_error_set(TD_ERR_DEVICE, "vulkan: no memory type for storage buffers");
    /* device-local + host-visible, when its heap is (nearly) all of device memory: ReBAR or unified */
    int mapped = find_type(d, req.memoryTypeBits, DL | HV | HC, 0);
    if (mapped < 0) mapped = find_type(d, req.memoryTypeBits, DL | HV, 0);
    d->mt_device = (uint32_t)dev_only;
    if (mapped >= 0 && heap_size(d, (uint32_t)mapped) >= heap_size(d, (uint32_t)dev_only) / 10 * 9) {
        d->mt_device = (uint32_t)mapped;
        d->direct = true;
        d->direct_read = (d->memprops.memoryTypes[mapped].propertyFlags & HC) != 0;
    }
    int st = find_type(d, req.memoryTypeBits, HV | HC, 0);
    if (st < 0) st = find_type(d, req.memoryTypeBits, HV, 0);
    if (st < 0) return td_error_set(TD_ERR_DEVICE, "vulkan: no host-visible memory type for staging");
    d->mt_staging = (uint32_t)st;
    bool cpu = d->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    d->block_size = (VkDeviceSize)(cpu ? 64 : 256) << 20;
    if (d->block_size > d->caps.max_alloc) d->block_size = d->caps.max_alloc / VK_ALIGN * VK_ALIGN;
    td_status s = block_new(d, STAGING_SIZE < d->block_size ? STAGING_SIZE : d->block_size, d->mt_staging,
                            VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT, &d->staging);
    if (s != TD_OK) return s;
    return vk_alloc(d, 256, &d->dummy);
}

void vk_memory_destroy(vk_dev *d) {
    for (vk_block *b = d->blocks, *next; b; b = next) {
        next = b->next;
        block_destroy(d, b);
    }
    d->blocks = NULL;
    if (d->staging) block_destroy(d, d->staging);
    d->staging = NULL;
}

static void block_unlink(vk_dev *d, vk_block *blk) {
    vk_block **bp = &d->blocks;
    while (*bp != blk) bp = &(*bp)->next;
    *bp = blk->next;
    block_destroy(d, blk);
}

/* Release the cached dedicated blocks and segmented buffers (after an allocation failed). */
static void trim(vk_dev *d) {
    if (vk_finish(d) != TD_OK) return;
    while (d->big_free) {
        td_buffer *b = d->big_free;
        d->big_free = b->next_free;
        if (b->block) block_unlink(d, b->block);
        for (int i = 0; i < b->n_seg; i++) block_unlink(d, b->segs[i]);
        free(b->segs);
        free(b);
    }
}

static td_status dedicated(vk_dev *d, VkDeviceSize size, vk_block **out) {
    td_status st = block_new(d, size, d->mt_device, STORAGE_USAGE(d), out);
    if (st != TD_OK) return st;
    (*out)->dedicated = true;
    (*out)->used = size;
    (*out)->next = d->blocks;
    d->blocks = *out;
    return TD_OK;
}

/* cap bytes as segments of the largest power of two within maxMemoryAllocationSize (at least
** 64 KiB: a segment holds whole elements and aligned bindings); b->segs on success. */
static td_status alloc_segmented(vk_dev *d, VkDeviceSize cap, td_buffer *b) {
    VkDeviceSize room = heap_room(d, d->mt_device); /* at once, rather than after allocating what fits */
    if (cap > room)
        return td_error_set(TD_ERR_OOM, "vulkan: %llu bytes would exceed the memory of %s (%llu bytes left%s)",
                            (unsigned long long)cap, d->props.deviceName, (unsigned long long)room,
                            d->caps.memory_budget ? ", VK_EXT_memory_budget" : "");
    VkDeviceSize seg = 65536;
    while (seg * 2 <= d->caps.max_alloc) seg *= 2;
    int n = (int)((cap + seg - 1) / seg);
    b->segs = calloc((size_t)n, sizeof *b->segs);
    if (!b->segs) return td_error_set(TD_ERR_OOM, "vulkan: out of host memory");
    td_status st = TD_OK;
    for (int i = 0; i < n && st == TD_OK; i++, b->n_seg++)
        st = dedicated(d, i < n - 1 ? seg : cap - seg * (VkDeviceSize)(n - 1), &b->segs[i]);
    if (st != TD_OK) {
        for (int i = 0; i < b->n_seg - 1; i++) block_unlink(d, b->segs[i]);
        free(b->segs);
        b->segs = NULL, b->n_seg = 0;
        return st;
    }
    b->seg = seg;
    b->block = NULL;
    b->offset = 0;
    return TD_OK;
}

static td_status alloc_once(vk_dev *d, VkDeviceSize cap, td_buffer *b) {
    if (b->size_class < 0 && cap > d->caps.max_alloc) return alloc_segmented(d, cap, b);
    if (b->size_class < 0) { /* dedicated */
        b->offset = 0;
        return dedicated(d, cap, &b->block);
    }
    for (vk_block *blk = d->blocks; blk; blk = blk->next) {
        if (blk->dedicated || blk->size - blk->used < cap) continue;
        b->block = blk;
        b->offset = blk->used;
        blk->used += cap;
        return TD_OK;
    }
    vk_block *blk;
    td_status st = block_new(d, d->block_size, d->mt_device, STORAGE_USAGE(d), &blk);
    if (st != TD_OK) return st;
    blk->next = d->blocks;
    d->blocks = blk;
    b->block = blk;
    b->offset = 0;
    blk->used = cap;
    return TD_OK;
}

td_status vk_alloc(vk_dev *d, size_t nbytes, td_buffer **out) {
    *out = NULL;
    VkDeviceSize want = nbytes ? (VkDeviceSize)nbytes : 1;
    if (want > ((VkDeviceSize)1 << 50))
        return td_error_set(TD_ERR_OOM, "vulkan: %zu bytes is too large an allocation", nbytes);
    bool big = want > d->block_size / 2;
    int c = big ? -1 : class_of(want);
    if (big) { /* best fit among cached dedicated blocks, wasting at most a quarter */
        td_buffer **best = NULL;
        for (td_buffer **pp = &d->big_free; *pp; pp = &(*pp)->next_free)
            if ((*pp)->cap >= want && (*pp)->cap <= want + want / 4 && (!best || (*pp)->cap < (*best)->cap)) best = pp;
        if (best) {
            td_buffer *b = *best;
            *best = b->next_free;
            b->next_free = NULL;
            b->size = nbytes;
            *out = b;
            d->bytes_allocated += b->cap;
            if (d->bytes_allocated > d->bytes_peak) d->bytes_peak = d->bytes_allocated;
            return TD_OK;
        }
    } else if (d->free_list[c]) {
        td_buffer *b = d->free_list[c];
        d->free_list[c] = b->next_free;
        b->next_free = NULL;
        b->size = nbytes;
        *out = b;
        d->bytes_allocated += b->cap;
        if (d->bytes_allocated > d->bytes_peak) d->bytes_peak = d->bytes_allocated;
        return TD_OK;
    }
    td_buffer *b = calloc(1, sizeof *b);
    if (!b) return td_error_set(TD_ERR_OOM, "vulkan: out of host memory");
    b->dev = d;
    b->size = nbytes;
    b->cap = big ? (want + 65535) & ~(VkDeviceSize)65535 : class_size(c);
    b->size_class = c;
    td_status st = alloc_once(d, b->cap, b);
    if (st == TD_ERR_OOM) {
        trim(d);
        st = alloc_once(d, b->cap, b);
    }
    if (st != TD_OK) {
        free(b);
        return st;
    }
    d->bytes_allocated += b->cap;
    if (d->bytes_allocated > d->bytes_peak) d->bytes_peak = d->bytes_allocated;
    *out = b;
    return TD_OK;
}

void vk_free(td_buffer *b) {
    vk_dev *d = b->dev;
    if (d->capturing) { /* a replay may still use it: the graph keeps it (and frees it again) */
        b->next_free = d->capturing->held;
        d->capturing->held = b;
        return;
    }
    d->bytes_allocated -= b->cap;
    if (b->size_class == HOST_CLASS) { /* after the queued copies that use it */
        vk_finish(d);
        block_destroy(d, b->block);
        free(b);
        return;
    }
    td_buffer **list = b->size_class < 0 ? &d->big_free : &d->free_list[b->size_class];
    b->next_free = *list;
    *list = b;
}

/* ---- the backend slots ---- */

td_status vk_memory_stats(int dev, bool reset_peak, td_memory_stats *out) {
    vk_dev *d = vk_get(dev);
    if (!d) return td_last_status();
    vk_lock(d);
    *out = (td_memory_stats){
        .allocated = d->bytes_allocated, .reserved = d->bytes_reserved, .peak_allocated = d->bytes_peak};
    if (reset_peak) d->bytes_peak = d->bytes_allocated;
    vk_unlock(d);
    return TD_OK;
}

td_status vk_buffer_alloc(int dev, size_t nbytes, td_buffer **out) {
    *out = NULL;
    vk_dev *d = vk_get(dev);
    if (!d) return td_last_status();
    vk_lock(d);
    td_status st = vk_alloc(d, nbytes, out);
    vk_unlock(d);
    return st;
}

void vk_buffer_free(td_buffer *b) {
    if (!b) return;
    vk_dev *d = b->dev; /* a host buffer is gone after vk_free */
    vk_lock(d);
    vk_free(b);
    vk_unlock(d);
}

/* A host buffer: a block of its own in the staging memory type (host-visible, coherent, cached where the
** device has it), which copies take as src or dst and the host reads through its mapping. */
td_status vk_host_buffer_alloc(int dev, size_t nbytes, td_buffer **out, void **host) {
    *out = NULL, *host = NULL;
    vk_dev *d = vk_get(dev);
    if (!d) return td_last_status();
    td_buffer *b = calloc(1, sizeof *b);
    if (!b) return td_error_set(TD_ERR_OOM, "vulkan: out of host memory");
    VkDeviceSize cap = ((VkDeviceSize)(nbytes ? nbytes : 1) + VK_ALIGN - 1) / VK_ALIGN * VK_ALIGN;
    vk_block *blk = NULL;
    vk_lock(d);
    td_status st =
        block_new(d, cap, d->mt_staging, VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT, &blk);
    if (st == TD_OK && !blk->map) {
        block_destroy(d, blk);
        st = td_error_set(TD_ERR_DEVICE, "vulkan: the staging memory type of %s is not mapped", d->props.deviceName);
    }
    if (st == TD_OK) {
        blk->used = cap;
        d->bytes_allocated += cap;
        if (d->bytes_allocated > d->bytes_peak) d->bytes_peak = d->bytes_allocated;
    }
    vk_unlock(d);
    if (st != TD_OK) {
        free(b);
        return st;
    }
    *b = (td_buffer){.dev = d, .block = blk, .size = nbytes, .cap = cap, .size_class = HOST_CLASS};
    *out = b;
    *host = blk->map;
    return TD_OK;
}

static td_status check_range(const td_buffer *b, size_t offset, size_t n, const char *what) {
    if (offset > b->cap || n > b->cap - offset)
        return td_error_set(TD_ERR_MISUSE, "vulkan %s: bytes [%zu, %zu) outside a %zu-byte buffer", what, offset,
                            offset + n, (size_t)b->size);
    return TD_OK;
}

/* Room in the staging buffer for the next chunk of a transfer with `left` bytes to go: *chunk bytes
** (left, at most the buffer's size) at *at; waits for the device when the buffer is full. */
static td_status staging_take(vk_dev *d, size_t left, size_t *chunk, VkDeviceSize *at) {
    *chunk = left < d->staging->size ? left : (size_t)d->staging->size;
    VkDeviceSize n = (*chunk + 15) & ~(VkDeviceSize)15;
    if (d->staging_used + n > d->staging->size) {
        td_status st = vk_finish(d);
        if (st != TD_OK) return st;
    }
    *at = d->staging_used;
    d->staging_used += n;
    return TD_OK;
}

static td_status not_capturing(vk_dev *d, const char *what) {
    if (!d->capturing) return TD_OK;
    return td_error_set(TD_ERR_STATE, "vulkan %s: host transfers cannot be captured (end the capture first)", what);
}

/* Lock d for a host transfer; on failure (a capture is running) d is left unlocked. */
static td_status lock_for_host(vk_dev *d, const char *what) {
    vk_lock(d);
    td_status st = not_capturing(d, what);
    if (st != TD_OK) vk_unlock(d);
    return st;
}

/* One part of a write: through the mapping or the staging buffer. */
static td_status write_piece(vk_dev *d, VkBuffer buf, VkDeviceSize at, char *map, const char *src, size_t n) {
    td_status st = TD_OK;
    if (d->direct && map && vk_idle(d)) {
        memcpy(map, src, n);
        return TD_OK;
    }
    for (size_t done = 0, chunk; done < n && st == TD_OK; done += chunk) {
        VkDeviceSize s;
        st = staging_take(d, n - done, &chunk, &s);
        if (st != TD_OK) break;
        memcpy((char *)d->staging->map + s, src + done, chunk);
        st = vk_cmd_copy(d, d->staging->buf, s, buf, at + done, chunk);
    }
    return st;
}

td_status vk_write(td_buffer *b, size_t offset, const void *src, size_t n) {
    vk_dev *d = b->dev;
    td_status st = check_range(b, offset, n, "write");
    if (st != TD_OK || n == 0) return st;
    if ((st = lock_for_host(d, "write")) != TD_OK) return st;
    for (VkDeviceSize done = 0, len; done < n; done += len) {
        VkBuffer buf;
        VkDeviceSize at;
        char *map;
        len = vk_buffer_piece(b, offset + done, n - done, &buf, &at, &map);
        if (st == TD_OK) st = write_piece(d, buf, at, map, (const char *)src + done, len);
    }
    vk_unlock(d);
    return st;
}

/* Make device writes visible to the host, then wait for everything. */
static td_status finish_for_host(vk_dev *d) {
    td_status st = vk_cmd_host_barrier(d);
    return st == TD_OK ? vk_finish(d) : st;
}

static td_status read_piece(vk_dev *d, VkBuffer buf, VkDeviceSize at, const char *map, char *dst, size_t n) {
    td_status st = TD_OK;
    if (d->direct_read && map) {
        st = finish_for_host(d);
        if (st == TD_OK) memcpy(dst, map, n);
        return st;
    }
    for (size_t done = 0, chunk; done < n && st == TD_OK; done += chunk) {
        VkDeviceSize s;
        st = staging_take(d, n - done, &chunk, &s);
        if (st == TD_OK) st = vk_cmd_copy(d, buf, at + done, d->staging->buf, s, chunk);
        if (st == TD_OK) st = finish_for_host(d);
        if (st == TD_OK) memcpy(dst + done, (const char *)d->staging->map + s, chunk);
    }
    return st;
}

td_status vk_read(td_buffer *b, size_t offset, void *dst, size_t n) {
    vk_dev *d = b->dev;
    td_status st = check_range(b, offset, n, "read");
    if (st != TD_OK || n == 0) return st;
    if ((st = lock_for_host(d, "read")) != TD_OK) return st;
    for (VkDeviceSize done = 0, len; done < n; done += len) {
        VkBuffer buf;
        VkDeviceSize at;
        char *map;
        len = vk_buffer_piece(b, offset + done, n - done, &buf, &at, &map);
        if (st == TD_OK) st = read_piece(d, buf, at, map, (char *)dst + done, len);
    }
    vk_unlock(d);
    return st;
}

VkDeviceSize vk_buffer_piece(const td_buffer *b, VkDeviceSize off, VkDeviceSize n, VkBuffer *buf, VkDeviceSize *at,
                             char **map) {
    const vk_block *blk = b->block;
    VkDeviceSize base = b->offset;
    if (b->segs) {
        blk = b->segs[off / b->seg];
        base = 0;
        off %= b->seg;
        if (n > b->seg - off) n = b->seg - off;
    }
    *buf = blk->buf;
    *at = base + off;
    *map = blk->map ? (char *)blk->map + base + off : NULL;
    return n;
}

uint64_t vk_buffer_address(td_buffer *b) {
    if (!b->dev->caps.bda || b->segs) return 0; /* segments have no one address */
    VkBufferDeviceAddressInfo ai = {.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO, .buffer = b->block->buf};
    return (uint64_t)vkGetBufferDeviceAddress(b->dev->dev, &ai) + b->offset;
}

/* Between two devices: src's bytes go from its mapping (host-visible blocks) or through its staging
** buffer, chunk by chunk, into dst's write path (its mapping or staging buffer and a recorded copy),
** ordered after all of src's queued work and before dst's later work. Both devices are locked, in
** index order. */
static td_status copy_between(td_buffer *src, size_t so, td_buffer *dst, size_t dof, size_t n) {
    vk_dev *s = src->dev, *d = dst->dev, *first = s->index < d->index ? s : d;
    vk_lock(first);
    vk_lock(first == s ? d : s);
    td_status st = not_capturing(s, "copy between devices");
    for (VkDeviceSize done = 0, len; done < n; done += len) {
        VkBuffer buf;
        VkDeviceSize at;
        char *map;
        len = vk_buffer_piece(src, so + done, n - done, &buf, &at, &map);
        if (st == TD_OK && s->direct_read && map) {
            st = finish_for_host(s);
            if (st == TD_OK) st = vk_write(dst, dof + done, map, len);
        }
        for (size_t part = 0, chunk; st == TD_OK && !(s->direct_read && map) && part < len; part += chunk) {
            VkDeviceSize sat;
            st = staging_take(s, len - part, &chunk, &sat);
            if (st == TD_OK) st = vk_cmd_copy(s, buf, at + part, s->staging->buf, sat, chunk);
            if (st == TD_OK) st = finish_for_host(s);
            if (st == TD_OK) st = vk_write(dst, dof + done + part, (const char *)s->staging->map + sat, chunk);
        }
    }
    vk_unlock(first == s ? d : s);
    vk_unlock(first);
    return st;
}

/* One part of a copy on one device, src and dst each within one block. */
static td_status copy_piece(vk_dev *d, VkBuffer sb, VkDeviceSize a, VkBuffer db, VkDeviceSize b, VkDeviceSize n) {
    if (sb != db || a >= b + n || b >= a + n) return vk_cmd_copy(d, sb, a, db, b, n);
    td_buffer *tmp; /* overlapping: through a temporary */
    td_status st = vk_alloc(d, n, &tmp);
    if (st == TD_OK) st = vk_cmd_copy(d, sb, a, tmp->block->buf, tmp->offset, n);
    if (st == TD_OK) st = vk_cmd_copy(d, tmp->block->buf, tmp->offset, db, b, n);
    if (tmp) vk_free(tmp);
    return st;
}

td_status vk_copy(td_buffer *src, size_t so, td_buffer *dst, size_t dof, size_t n) {
    vk_dev *d = dst->dev;
    td_status st = check_range(src, so, n, "copy");
    if (st == TD_OK) st = check_range(dst, dof, n, "copy");
    if (st != TD_OK || n == 0) return st;
    if (src->dev != d) return copy_between(src, so, dst, dof, n);
    vk_lock(d);
    /* parts within one block of src, cut again within one block of dst */
    for (VkDeviceSize done = 0, len; st == TD_OK && done < n; done += len) {
        VkBuffer sbuf;
        VkDeviceSize sat;
        char *smap;
        len = vk_buffer_piece(src, so + done, n - done, &sbuf, &sat, &smap);
        for (VkDeviceSize part = 0, plen; st == TD_OK && part < len; part += plen) {
            VkBuffer dbuf;
            VkDeviceSize dat;
            char *dmap;
            plen = vk_buffer_piece(dst, dof + done + part, len - part, &dbuf, &dat, &dmap);
            st = copy_piece(d, sbuf, sat + part, dbuf, dat, plen);
        }
    }
    vk_unlock(d);
    return st;
}

static td_status memset_piece(vk_dev *d, VkBuffer buf, VkDeviceSize lo, char *map, uint8_t byte, VkDeviceSize n) {
    if (d->direct && map && vk_idle(d) && !d->capturing) {
        memset(map, byte, n);
        return TD_OK;
    }
    /* vkCmdFillBuffer needs 4-byte alignment: fill the aligned middle, write the edges */
    VkDeviceSize hi = lo + n, alo = (lo + 3) & ~(VkDeviceSize)3, ahi = hi & ~(VkDeviceSize)3;
    if (alo >= ahi) alo = ahi = hi; /* too short: all edge */
    td_status st = TD_OK;
    if (ahi > alo) st = vk_cmd_fill(d, buf, alo, ahi - alo, 0x01010101u * byte);
    for (VkDeviceSize at = lo; st == TD_OK && at < hi; at = at == alo ? ahi : at + 1) {
        if (at >= alo && at < ahi) continue;
        char *edge = d->direct && map ? map + (at - lo) : NULL;
        if (edge && vk_idle(d) && !d->capturing) {
            *edge = (char)byte;
            continue;
        }
        VkDeviceSize s;
        size_t one;
        st = staging_take(d, 1, &one, &s);
        if (st == TD_OK) memset((char *)d->staging->map + s, byte, 1);
        if (st == TD_OK) st = vk_cmd_copy(d, d->staging->buf, s, buf, at, 1);
    }
    return st;
}

td_status vk_memset(td_buffer *b, size_t offset, uint8_t byte, size_t n) {
    vk_dev *d = b->dev;
    td_status st = check_range(b, offset, n, "memset");
    if (st != TD_OK || n == 0) return st;
    vk_lock(d);
    if (d->capturing && ((b->offset + offset) % 4 || n % 4 || (b->segs && b->seg % 4))) {
        vk_unlock(d);
        return not_capturing(d, "memset of unaligned bytes");
    }
    for (VkDeviceSize done = 0, len; done < n; done += len) {
        VkBuffer buf;
        VkDeviceSize at;
        char *map;
        len = vk_buffer_piece(b, offset + done, n - done, &buf, &at, &map);
        if (st == TD_OK) st = memset_piece(d, buf, at, map, byte, len);
    }
    vk_unlock(d);
    return st;
}
