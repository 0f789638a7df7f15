/*
** User kernels in GLSL: compiled at run time through glslang's C interface,
** launched with tensors bound in order as storage buffers 0..n-1 of set 0 and
** up to VK_PUSH_MAX bytes of push constants.
**
** The kernel is a GLSL compute shader. entry names its entry function; a name
** other than "main" is mapped to main through a preamble "#define <entry> main".
** #version may be omitted (450 is assumed).
**
** SPIR-V cache: the shared kernel cache (include/trident/backend.h, "Kernel
** cache"), keyed by (entry, source, defines): in memory the most recently used
** TRIDENT_VULKAN_SPIRV_CACHE entries (default 256; a kernel keeps its own copy
** of the words), on disk as spirv-<key>.spv in td_kernel_cache_dir (off with
** TRIDENT_VULKAN_PIPELINE_CACHE=0), since the first glslang compile of a
** process costs 100+ ms. A disk entry whose checksum or SPIR-V structure does
** not check out is deleted and recompiled, never handed to the driver.
**
** Binding rules: each tensor is bound from its first element, which must sit
** at a multiple of minStorageBufferOffsetAlignment (fresh tensors do); the
** number of tensors must equal the shader's binding count (read from the
** SPIR-V's Binding decorations).
*/
#define _GNU_SOURCE
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glslang/Include/glslang_c_interface.h>
#include <glslang/Public/resource_limits_c.h>

#include "vk_ops.h"

struct td_kernel {
    vk_dev *d;
    VkShaderModule mod;
    VkPipeline pipe;  /* with the shader's own local size */
    VkPipeline sized; /* with local_size_x_id 0 = sized_x, built on the first launch that names a block */
    uint32_t sized_x;
    uint32_t local[3]; /* the shader's literal local size */
    bool sizable;      /* local_size_x_id: the launch's block sets the size */
    int n_bindings;
    uint32_t *words; /* its SPIR-V (a copy: the cache may drop its entry) */
    size_t size;
};

#define SPIRV_MAGIC           0x07230203u
#define CACHE_DEFAULT_ENTRIES 256

static pthread_once_t glslang_once = PTHREAD_ONCE_INIT;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t compile_lock = PTHREAD_MUTEX_INITIALIZER; /* one glslang compile at a time, as before */
static td_kernel_cache *cache; /* NULL when it could not be made: every compile then runs glslang */

static void glslang_start(void) { glslang_initialize_process(); }

/* A SPIR-V module's structure: the header (magic, 5 words), then
** instructions whose word counts are nonzero and end inside the module. */
static bool spirv_well_formed(const void *data, size_t size) {
    const uint32_t *w = data;
    size_t n_words = size / 4;
    if (size % 4 || n_words < 5 || w[0] != SPIRV_MAGIC) return false;
    size_t i = 5;
    while (i < n_words) {
        uint32_t len = w[i] >> 16;
        if (len == 0 || len > n_words - i) return false;
        i += len;
    }
    return true;
}

static void cache_start(void) {
    const char *env = getenv("TRIDENT_VULKAN_SPIRV_CACHE");
    long cap = env && *env ? strtol(env, NULL, 10) : CACHE_DEFAULT_ENTRIES;
    td_kernel_cache_config cfg = {.name = "spirv",
                                  .suffix = ".spv",
                                  .version = 1,
                                  .max_entries = cap > 1 ? (size_t)cap : 1,
                                  .disable_env = "TRIDENT_VULKAN_PIPELINE_CACHE",
                                  .validate = spirv_well_formed};
    if (td_kernel_cache_new(&cfg, &cache) != TD_OK) cache = NULL;
}

static void put_log(char *log, size_t log_size, const char *a, const char *b) {
    if (!log || !log_size) return;
    snprintf(log, log_size, "%s%s%s", a ? a : "", a && *a && b && *b ? "\n" : "", b ? b : "");
}

/* glslang's log as one line: "<name>:<line>: <first error>" and how many others there are. Its error lines read
** "ERROR: <string>:<line>: <what>"; "compilation terminated" and the closing count are not errors of their own. */
static td_status compile_error(const char *name, const char *info) {
    const char *first = NULL;
    int others = -1;
    for (const char *p = info ? strstr(info, "ERROR: ") : NULL; p; p = strstr(p + 7, "ERROR: ")) {
        unsigned string, line;
        int skip = 0;
        if (sscanf(p + 7, "%u:%u: %n", &string, &line, &skip) != 2 || !skip) continue;
        if (!strncmp(p + 7 + skip, "'' : compilation terminated", 27)) continue;
        if (!first) first = p;
        others++;
    }
    if (!first) {
        size_t len = info ? strcspn(info, "\n") : 0;
        return td_error_set(TD_ERR_COMPILE, "%s: compile failed%s%.*s", name, len ? ": " : "", (int)len,
                            info ? info : "");
    }
    unsigned string, line;
    int skip = 0;
    sscanf(first + 7, "%u:%u: %n", &string, &line, &skip);
    const char *what = first + 7 + skip;
    size_t len = strcspn(what, "\n");
    while (len && what[len - 1] == ' ') len--;
    char more[96] = "";
    if (others > 0)
        snprintf(more, sizeof more, " (and %d more error%s: TRIDENT_KERNEL_LOG=1 shows them)", others,
                 others == 1 ? "" : "s");
    return td_error_set(TD_ERR_COMPILE, "%s:%u: %.*s%s", name, line, (int)len, what, more);
}

/* Compile source to SPIR-V; on failure TD_ERR_COMPILE (compile_error) with glslang's messages in log. */
static td_status compile(const char *source, const char *entry, const char *defines, const char *name, uint32_t **words,
                         size_t *size, char *log, size_t log_size) {
    pthread_once(&glslang_once, glslang_start);
    char preamble[4096] = "";
    int at = snprintf(preamble, sizeof preamble, "%s", defines);
    if (strcmp(entry, "main") != 0) snprintf(preamble + at, sizeof preamble - (size_t)at, "#define %s main\n", entry);
    glslang_input_t in = {
        .language = GLSLANG_SOURCE_GLSL,
        .stage = GLSLANG_STAGE_COMPUTE,
        .client = GLSLANG_CLIENT_VULKAN,
        .client_version = GLSLANG_TARGET_VULKAN_1_2,
        .target_language = GLSLANG_TARGET_SPV,
        .target_language_version = GLSLANG_TARGET_SPV_1_5,
        .code = source,
        .default_version = 450,
        .default_profile = GLSLANG_NO_PROFILE,
        .force_default_version_and_profile = false,
        .forward_compatible = false,
        .messages = GLSLANG_MSG_DEFAULT_BIT | GLSLANG_MSG_SPV_RULES_BIT | GLSLANG_MSG_VULKAN_RULES_BIT,
        .resource = glslang_default_resource(),
    };
    glslang_shader_t *sh = glslang_shader_create(&in);
    if (!sh) return td_error_set(TD_ERR_OOM, "glsl: out of memory creating a shader");
    if (preamble[0]) glslang_shader_set_preamble(sh, preamble);
    td_status st = TD_OK;
    glslang_program_t *prog = NULL;
    if (!glslang_shader_preprocess(sh, &in) || !glslang_shader_parse(sh, &in)) {
        put_log(log, log_size, glslang_shader_get_info_log(sh), glslang_shader_get_info_debug_log(sh));
        st = compile_error(name, glslang_shader_get_info_log(sh));
    } else {
        prog = glslang_program_create();
        glslang_program_add_shader(prog, sh);
        if (!glslang_program_link(prog, in.messages)) {
            put_log(log, log_size, glslang_program_get_info_log(prog), glslang_program_get_info_debug_log(prog));
            st = compile_error(name, glslang_program_get_info_log(prog));
        } else {
            glslang_program_SPIRV_generate(prog, GLSLANG_STAGE_COMPUTE);
            size_t n = glslang_program_SPIRV_get_size(prog);
            *words = malloc(n * 4);
            if (!*words) {
                st = td_error_set(TD_ERR_OOM, "glsl: out of memory");
            } else {
                glslang_program_SPIRV_get(prog, *words);
                *size = n * 4;
                put_log(log, log_size, glslang_program_SPIRV_get_messages(prog), NULL);
            }
        }
    }
    if (prog) glslang_program_delete(prog);
    glslang_shader_delete(sh);
    return st;
}

/* The shader's literal local size (OpExecutionMode = 16, LocalSize = 17) and whether x is the specialization
** constant 0 that sizes it at launch: the WorkgroupSize built-in (OpDecorate = 71, BuiltIn = 11, WorkgroupSize =
** 25) made of spec constants, one with SpecId (1) 0, as layout(local_size_x_id = 0) compiles. */
static void read_local_size(const uint32_t *w, size_t n_words, uint32_t local[3], bool *sizable) {
    bool builtin = false, spec0 = false;
    local[0] = local[1] = local[2] = 1;
    for (size_t i = 5; i < n_words;) {
        uint32_t len = w[i] >> 16, opcode = w[i] & 0xFFFF;
        if (len == 0 || len > n_words - i) break;
        if (opcode == 16 && len >= 6 && w[i + 2] == 17) memcpy(local, w + i + 3, 3 * sizeof *local);
        if (opcode == 71 && len >= 4 && w[i + 2] == 11 && w[i + 3] == 25) builtin = true;
        if (opcode == 71 && len >= 4 && w[i + 2] == 1 && w[i + 3] == 0) spec0 = true;
        i += len;
    }
    *sizable = builtin && spec0;
}

/* Number of storage bindings: 1 + the highest Binding decoration (OpDecorate = 71, Binding = 33).
** The words come from glslang or a checked disk entry; the walk stays in bounds regardless. */
static int count_bindings(const uint32_t *w, size_t n_words) {
    int n = 0;
    for (size_t i = 5; i < n_words;) {
        uint32_t len = w[i] >> 16, opcode = w[i] & 0xFFFF;
        if (len == 0 || len > n_words - i) break;
        if (opcode == 71 && len >= 4 && w[i + 2] == 33 && w[i + 3] >= (uint32_t)n)
            n = w[i + 3] < INT32_MAX ? (int)w[i + 3] + 1 : INT32_MAX;
        i += len;
    }
    return n;
}

static bool valid_identifier(const char *s) {
    if (!s || !(isalpha((unsigned char)*s) || *s == '_')) return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_') return false;
    return true;
}

/* Whether identifier id occurs in source as a whole word. */
static bool has_identifier(const char *source, const char *id) {
    size_t n = strlen(id);
    for (const char *p = strstr(source, id); p; p = strstr(p + 1, id)) {
        bool head = p == source || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
        if (head && !(isalnum((unsigned char)p[n]) || p[n] == '_')) return true;
    }
    return false;
}

/* The options' macros as "#define NAME VALUE" lines; TD_ERR_MISUSE for a bad name. */
static td_status define_lines(const td_kernel_options *opts, char *out, size_t n) {
    size_t at = 0;
    out[0] = 0;
    for (int i = 0; opts && i < opts->n_defines; i++) {
        const char *def = opts->defines[i], *eq = def ? strchr(def, '=') : NULL;
        char name[128];
        size_t len = def ? (eq ? (size_t)(eq - def) : strlen(def)) : 0;
        if (!def || len == 0 || len >= sizeof name)
            return td_error_set(TD_ERR_MISUSE, "glsl: define %d is not NAME or NAME=VALUE", i);
        memcpy(name, def, len);
        name[len] = 0;
        if (!valid_identifier(name)) return td_error_set(TD_ERR_MISUSE, "glsl: define %d is not NAME or NAME=VALUE", i);
        int w = snprintf(out + at, n - at, "#define %s %s\n", name, eq ? eq + 1 : "1");
        if (w < 0 || (size_t)w >= n - at) return td_error_set(TD_ERR_MISUSE, "glsl: defines longer than %zu bytes", n);
        at += (size_t)w;
    }
    return TD_OK;
}

td_status vk_kernel_compile(int dev, int lang, const char *source, const char *entry, const td_kernel_options *opts,
                            td_kernel **out, char *log, size_t log_size) {
    *out = NULL;
    if (log && log_size) log[0] = 0;
    if (lang != TD_LANG_GLSL)
        return td_error_set(TD_ERR_UNSUPPORTED, "vulkan kernels are written in GLSL (language %d given)", lang);
    if (!source) return td_error_set(TD_ERR_MISUSE, "glsl: source is NULL");
    if (!entry) entry = "main";
    if (!valid_identifier(entry) || strlen(entry) > 100)
        return td_error_set(TD_ERR_MISUSE, "glsl: entry '%s' is not a GLSL identifier", entry);
    if (strcmp(entry, "main") != 0 && !has_identifier(source, entry))
        return td_error_set(TD_ERR_MISUSE, "glsl: no function named '%s' in the source (the entry point)", entry);
    char defines[3072];
    td_status st = define_lines(opts, defines, sizeof defines);
    if (st != TD_OK) return st;
    vk_dev *d = vk_get(dev);
    if (!d) return td_last_status();
    uint64_t key = td_kernel_cache_hash(TD_KERNEL_CACHE_SEED, entry, strlen(entry) + 1);
    key = td_kernel_cache_hash(td_kernel_cache_hash(key, source, strlen(source)), defines, strlen(defines));
    td_kernel *k = calloc(1, sizeof *k);
    if (!k) return td_error_set(TD_ERR_OOM, "glsl: out of host memory");
    pthread_once(&cache_once, cache_start);
    void *data = NULL;
    if (td_kernel_cache_get(cache, key, &data, &k->size)) {
        k->words = data; /* the kernel's own copy: the cache may drop its entry */
    } else {
        pthread_mutex_lock(&compile_lock);
        st = compile(source, entry, defines, opts && opts->name ? opts->name : "glsl", &k->words, &k->size, log,
                     log_size);
        pthread_mutex_unlock(&compile_lock);
        if (st == TD_OK && cache) td_kernel_cache_put(cache, key, k->words, k->size); /* failed: compiled again later */
    }
    if (st == TD_OK) {
        k->d = d;
        k->n_bindings = count_bindings(k->words, k->size / 4);
        read_local_size(k->words, k->size / 4, k->local, &k->sizable);
        if (k->n_bindings > VK_MAX_BINDINGS)
            st = td_error_set(TD_ERR_UNSUPPORTED, "glsl: the kernel declares %d bindings; at most %d are supported",
                              k->n_bindings, VK_MAX_BINDINGS);
    }
    if (st == TD_OK) {
        vk_lock(d);
        st = vk_pipeline_from_spirv(d, k->words, k->size, "main", 0, &k->mod, &k->pipe);
        vk_unlock(d);
    }
    if (st != TD_OK) {
        free(k->words);
        free(k);
        return st;
    }
    *out = k;
    return TD_OK;
}

td_status vk_kernel_check_block(const td_kernel *k, const uint32_t block[3]) {
    if (!block || (!block[0] && !block[1] && !block[2])) return TD_OK;
    if (!block[0] || block[1] > 1 || block[2] > 1)
        return td_error_set(TD_ERR_MISUSE,
                            "glsl kernel: block {%u,%u,%u}: GLSL kernels take a 1-D block, sized "
                            "through layout(local_size_x_id = 0)",
                            block[0], block[1], block[2]);
    if (block[0] > k->d->caps.max_wg_invocations)
        return td_error_set(TD_ERR_MISUSE, "glsl kernel: block of %u invocations exceeds the device's %u", block[0],
                            k->d->caps.max_wg_invocations);
    if (!k->sizable && (k->local[0] != block[0] || k->local[1] != 1 || k->local[2] != 1))
        return td_error_set(TD_ERR_MISUSE,
                            "glsl kernel: the shader fixes its local size to {%u,%u,%u} but is launched with a block "
                            "of %u; write layout(local_size_x = TD_BLOCK) (custom ops) or layout(local_size_x_id = 0)",
                            k->local[0], k->local[1], k->local[2], block[0]);
    return TD_OK;
}

/* The pipeline for a launch's block (checked): the shader's local size for {0,0,0}, else local_size_x_id 0
** specialized to block[0]. */
static td_status pipeline_for(td_kernel *k, const uint32_t block[3], VkPipeline *out) {
    td_status st = vk_kernel_check_block(k, block);
    if (st != TD_OK) return st;
    if (!block || (!block[0] && !block[1] && !block[2]) || !k->sizable) return *out = k->pipe, TD_OK;
    if (!k->sized || k->sized_x != block[0]) {
        VkShaderModule mod;
        VkPipeline pipe;
        st = vk_pipeline_from_spirv(k->d, k->words, k->size, "main", block[0], &mod, &pipe);
        if (st != TD_OK) return st;
        vkDestroyShaderModule(k->d->dev, mod, NULL);
        if (k->sized) {
            vk_finish(k->d); /* the old pipeline may still be in a queued batch */
            vkDestroyPipeline(k->d->dev, k->sized, NULL);
        }
        k->sized = pipe;
        k->sized_x = block[0];
    }
    return *out = k->sized, TD_OK;
}

td_status vk_kernel_launch(td_kernel *k, const uint32_t grid[3], const uint32_t block[3], size_t shared_bytes,
                           int n_views, const td_operand *views, const void *push, size_t push_size) {
    vk_dev *d = k->d;
    if (shared_bytes)
        return td_error_set(TD_ERR_MISUSE,
                            "glsl kernel: %zu bytes of dynamic shared memory; GLSL declares its "
                            "shared arrays in the shader",
                            shared_bytes);
    if (n_views != k->n_bindings)
        return td_error_set(TD_ERR_MISUSE, "glsl kernel: launched with %d tensors, but the shader has %d bindings",
                            n_views, k->n_bindings);
    if (push_size > VK_PUSH_MAX)
        return td_error_set(TD_ERR_MISUSE, "glsl kernel: %zu bytes of push data, at most %d", push_size, VK_PUSH_MAX);
    if (push_size && !push) return td_error_set(TD_ERR_MISUSE, "glsl kernel: push is NULL");
    for (int i = 0; i < 3; i++)
        if (grid[i] > d->caps.max_groups[i])
            return td_error_set(TD_ERR_MISUSE, "glsl kernel: grid[%d] = %u exceeds maxComputeWorkGroupCount (%u)", i,
                                grid[i], d->caps.max_groups[i]);
    if (!grid[0] || !grid[1] || !grid[2]) return TD_OK;
    uint32_t pushed[VK_PUSH_MAX / 4] = {0};
    if (push_size) memcpy(pushed, push, push_size);
    vk_bind b[VK_MAX_BINDINGS];
    vk_lock(d);
    VkPipeline pipe = VK_NULL_HANDLE;
    td_status st = pipeline_for(k, block, &pipe);
    for (int i = 0; i < n_views && st == TD_OK; i++) {
        uint32_t off;
        if (views[i].buf && views[i].buf->dev != d) {
            st = td_error_set(TD_ERR_DEVICE, "glsl kernel: tensor %d is on another Vulkan device", i);
            break;
        }
        st = vk_bind_view(d, &views[i], true, &b[i], &off);
        if (st == TD_OK && off != 0)
            st = td_error_set(TD_ERR_MISUSE,
                              "glsl kernel: tensor %d starts %u elements past an aligned address "
                              "(minStorageBufferOffsetAlignment %llu); pass a contiguous copy",
                              i, off, (unsigned long long)d->caps.min_storage_align);
    }
    if (st == TD_OK)
        st = vk_dispatch_pipeline(d, pipe, n_views, b, pushed, (push_size + 3) & ~(size_t)3, grid[0], grid[1], grid[2]);
    vk_unlock(d);
    return st;
}

void vk_kernel_free(td_kernel *k) {
    if (!k) return;
    vk_dev *d = k->d;
    vk_lock(d);
    vk_finish(d); /* the pipeline may still be in a queued batch */
    vkDestroyPipeline(d->dev, k->pipe, NULL);
    if (k->sized) vkDestroyPipeline(d->dev, k->sized, NULL);
    vkDestroyShaderModule(d->dev, k->mod, NULL);
    vk_unlock(d);
    free(k->words);
    free(k);
}
