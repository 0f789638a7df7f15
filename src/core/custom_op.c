/*
** Custom ops (include/trident/kernel.h): a registry of user-defined ops, each
** with a kernel per backend, and the kernel-running half of a call; the other
** half, td_custom_op_call recording calls on the autograd tape, is
** src/autograd/custom_function.c.
**
** A call: check the inputs (one device), pick the device type's impl, run the
** shape function, then forward: inputs made contiguous in the compute dtype,
** outputs allocated (float outputs in the compute dtype), the kernel launched
** (GPU: td_kernel_launch with td_custom_args as push data; CPU: the C function
** on host pointers), float outputs cast to the dtype the shape function gave.
**
** Kernels are compiled on first use per (device, compute dtype) and kept by
** the op; the backends cache them by source and options, on disk too.
*/
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "profile_rec.h"
#include "trident/autograd.h"

#define CUSTOM_MAX_OPS     256
#define CUSTOM_MAX_IN      TD__CUSTOM_MAX_IN
#define CUSTOM_MAX_OUT     TD__CUSTOM_MAX_OUT
#define CUSTOM_MAX_DEFINES 32

typedef struct custom_kernel {
    td_device dev;
    td_dtype dtype;
    td_user_kernel *k;
} custom_kernel;

struct td_custom_op {
    td_custom_op_def def;
    char name[48];
    pthread_mutex_t lock; /* guards kernels */
    custom_kernel *kernels;
    int n_kernels;
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static td_custom_op *registry[CUSTOM_MAX_OPS];
static int n_registered;

static const char *const type_names[TD_DEVICE_TYPE_COUNT] = {"cpu", "cuda", "vulkan"};

static const td_custom_impl *impl_for(const td_custom_op *op, int type) {
    const td_custom_impl *im = type == TD_DEVICE_CPU    ? &op->def.cpu
                               : type == TD_DEVICE_CUDA ? &op->def.cuda
                                                        : &op->def.vulkan;
    return im->source || im->cpu ? im : NULL;
}

static bool valid_name(const char *s) {
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n >= 48) return false;
    for (size_t i = 0; i < n; i++)
        if (!(s[i] == '_' || s[i] == '.' || (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'z') ||
              (s[i] >= 'A' && s[i] <= 'Z')))
            return false;
    return true;
}

td_status td_custom_op_register(const td_custom_op_def *def, td_custom_op **out) {
    if (!out) return TD_ERR(TD_ERR_MISUSE, "td_custom_op_register: out is NULL");
    *out = NULL;
    if (!def) return TD_ERR(TD_ERR_MISUSE, "td_custom_op_register: def is NULL");
    if (!valid_name(def->name))
        return TD_ERR(TD_ERR_MISUSE, "td_custom_op_register: name %s is not 1-47 of [A-Za-z0-9_.]",
                      def->name ? TD_QUOTE(def->name) : "NULL");
    const char *name = def->name;
    if (def->n_in < 1 || def->n_in > CUSTOM_MAX_IN || def->n_out < 1 || def->n_out > CUSTOM_MAX_OUT)
        return TD_ERR(TD_ERR_MISUSE, "%s: needs 1..%d inputs and 1..%d outputs (got %d and %d)", name, CUSTOM_MAX_IN,
                      CUSTOM_MAX_OUT, def->n_in, def->n_out);
    if (def->cpu.source) return TD_ERR(TD_ERR_MISUSE, "%s: the cpu impl takes a C function, not source", name);
    for (int t = TD_DEVICE_CUDA; t < TD_DEVICE_TYPE_COUNT; t++) {
        const td_custom_impl *im = t == TD_DEVICE_CUDA ? &def->cuda : &def->vulkan;
        if (im->cpu)
            return TD_ERR(TD_ERR_MISUSE, "%s: the %s impl takes source, not a C function", name, type_names[t]);
        if (im->source && t == TD_DEVICE_CUDA && !im->entry)
            return TD_ERR(TD_ERR_MISUSE, "%s: the cuda impl needs an entry (the __global__ function's name)", name);
    }
    for (int t = 0; t < TD_DEVICE_TYPE_COUNT; t++) {
        const td_custom_impl *im = t == TD_DEVICE_CPU ? &def->cpu : t == TD_DEVICE_CUDA ? &def->cuda : &def->vulkan;
        if (im->grid != TD_GRID_ELEMENTS && im->grid != TD_GRID_ROWS)
            return TD_ERR(TD_ERR_MISUSE, "%s: the %s impl's grid %d is not TD_GRID_ELEMENTS or TD_GRID_ROWS", name,
                          type_names[t], im->grid);
        if (im->block > 1024)
            return TD_ERR(TD_ERR_MISUSE, "%s: the %s impl's block %u is over 1024", name, type_names[t], im->block);
        if (im->n_defines < 0 || im->n_defines > CUSTOM_MAX_DEFINES || (im->n_defines && !im->defines))
            return TD_ERR(TD_ERR_MISUSE, "%s: the %s impl's defines: %d with list %p", name, type_names[t],
                          im->n_defines, (const void *)im->defines);
    }
    td_custom_op *op = calloc(1, sizeof *op);
    if (!op) return TD_ERR(TD_ERR_OOM, "%s: out of host memory", name);
    op->def = *def;
    snprintf(op->name, sizeof op->name, "%s", name);
    op->def.name = op->name;
    pthread_mutex_init(&op->lock, NULL);
    td_status st = TD_OK;
    pthread_mutex_lock(&registry_lock);
    for (int i = 0; i < n_registered && st == TD_OK; i++)
        if (!strcmp(registry[i]->name, name))
            st = TD_ERR(TD_ERR_STATE, "%s: a custom op of that name is registered already", name);
    if (st == TD_OK && n_registered == CUSTOM_MAX_OPS)
        st = TD_ERR(TD_ERR_STATE, "%s: %d custom ops are registered already", name, CUSTOM_MAX_OPS);
    if (st == TD_OK) registry[n_registered++] = op;
    pthread_mutex_unlock(&registry_lock);
    if (st != TD_OK) {
        pthread_mutex_destroy(&op->lock);
        free(op);
        return st;
    }
    *out = op;
    return TD_OK;
}

void td_custom_op_free(td_custom_op *op) {
    if (!op) return;
    pthread_mutex_lock(&registry_lock);
    for (int i = 0; i < n_registered; i++)
        if (registry[i] == op) {
            memmove(registry + i, registry + i + 1, (size_t)(n_registered - i - 1) * sizeof *registry);
            n_registered--;
            break;
        }
    pthread_mutex_unlock(&registry_lock);
    for (int i = 0; i < op->n_kernels; i++) td_kernel_free(op->kernels[i].k);
    free(op->kernels);
    pthread_mutex_destroy(&op->lock);
    free(op);
}

int td_custom_op_count(void) {
    pthread_mutex_lock(&registry_lock);
    int n = n_registered;
    pthread_mutex_unlock(&registry_lock);
    return n;
}

const td_custom_op *td_custom_op_at(int i) {
    pthread_mutex_lock(&registry_lock);
    const td_custom_op *op = i >= 0 && i < n_registered ? registry[i] : NULL;
    pthread_mutex_unlock(&registry_lock);
    return op;
}

const td_custom_op *td_custom_op_find(const char *name) {
    const td_custom_op *op = NULL;
    pthread_mutex_lock(&registry_lock);
    for (int i = 0; name && i < n_registered && !op; i++)
        if (!strcmp(registry[i]->name, name)) op = registry[i];
    pthread_mutex_unlock(&registry_lock);
    return op;
}

const char *td_custom_op_name(const td_custom_op *op) { return op ? op->name : NULL; }
bool td_custom_op_has_impl(const td_custom_op *op, int type) {
    return op && type >= 0 && type < TD_DEVICE_TYPE_COUNT && impl_for(op, type);
}
bool td_custom_op_has_backward(const td_custom_op *op) { return op && op->def.backward; }
const td_custom_op_def *td__custom_def(const td_custom_op *op) { return &op->def; }

/* The compiled kernel of impl im for (dev, dt), compiling it on first use. */
static td_status kernel_for(td_custom_op *op, const td_custom_impl *im, td_device dev, td_dtype dt,
                            td_user_kernel **out) {
    pthread_mutex_lock(&op->lock);
    for (int i = 0; i < op->n_kernels; i++)
        if (td_device_equal(op->kernels[i].dev, dev) && op->kernels[i].dtype == dt) {
            *out = op->kernels[i].k;
            pthread_mutex_unlock(&op->lock);
            return TD_OK;
        }
    char block[32];
    snprintf(block, sizeof block, "TD_BLOCK=%u", im->block ? im->block : 256);
    const char *defs[CUSTOM_MAX_DEFINES + 3] = {block, dt == TD_F64 ? "scalar_t=double" : "scalar_t=float"};
    int n = 2;
    if (dt == TD_F64) defs[n++] = "TD_F64";
    for (int i = 0; i < im->n_defines; i++) defs[n++] = im->defines[i];
    int lang = dev.type == TD_DEVICE_CUDA ? TD_KERNEL_CUDA : TD_KERNEL_GLSL;
    char name[64]; /* compile errors read "<op>.comp:12: ..." */
    snprintf(name, sizeof name, "%s%s", op->def.name, lang == TD_KERNEL_CUDA ? ".cu" : ".comp");
    td_kernel_options opts = {.defines = defs, .n_defines = n, .name = name};
    td_user_kernel *k = NULL;
    td_status st = td_kernel_compile(dev, lang, im->source, im->entry, &opts, &k, NULL, 0);
    uint32_t threads[3] = {im->block ? im->block : 256, 1, 1};
    if (st == TD_OK && (st = td_kernel_check_block(k, threads)) != TD_OK) td_kernel_free(k), k = NULL;
    custom_kernel *grown = st == TD_OK ? realloc(op->kernels, (size_t)(op->n_kernels + 1) * sizeof *grown) : NULL;
    if (st == TD_OK && !grown) {
        td_kernel_free(k);
        st = TD_ERR(TD_ERR_OOM, "out of host memory");
    }
    if (st == TD_OK) {
        op->kernels = grown;
        op->kernels[op->n_kernels++] = (custom_kernel){dev, dt, k};
        *out = k;
    }
    pthread_mutex_unlock(&op->lock);
    return st;
}

/* Launch op's kernel for c (inputs and outputs contiguous, in c->dtype or an integer dtype). */
static td_status launch(td__custom_state *s, const td_custom_impl *im, const td_custom_call *c) {
    if (c->args.n == 0 || (im->grid == TD_GRID_ROWS && c->args.rows == 0)) return TD_OK;
    if (c->device.type == TD_DEVICE_CPU) {
        const void *in[CUSTOM_MAX_IN];
        void *out[CUSTOM_MAX_OUT];
        for (int i = 0; i < c->n_in; i++) in[i] = td__host_data(c->inputs[i]);
        for (int j = 0; j < c->n_out; j++) out[j] = td__host_data(c->outputs[j]);
        return im->cpu(c, in, out);
    }
    td_user_kernel *k;
    td_status st = kernel_for(s->op, im, c->device, c->dtype, &k);
    if (st != TD_OK) return st;
    uint32_t block = im->block ? im->block : 256;
    uint64_t blocks = im->grid == TD_GRID_ROWS ? c->args.rows : (c->args.n + (uint64_t)block - 1) / block;
    /* past 65535 blocks the grid turns 2-D: the kernels' td_global_id/td_row_id fold it back */
    uint32_t grid[3] = {(uint32_t)(blocks < 65535 ? blocks : 65535), (uint32_t)((blocks + 65534) / 65535), 1};
    uint32_t threads[3] = {block, 1, 1};
    td_tensor *all[CUSTOM_MAX_IN + CUSTOM_MAX_OUT];
    for (int i = 0; i < c->n_in; i++) all[i] = c->inputs[i];
    for (int j = 0; j < c->n_out; j++) all[c->n_in + j] = c->outputs[j];
    return td__kernel_launch(k, grid, c->device.type == TD_DEVICE_CUDA ? threads : NULL, 0, c->n_in + c->n_out, all,
                             &c->args, sizeof c->args);
}

typedef struct profiled_launch {
    td__custom_state *s;
    const td_custom_impl *im;
    const td_custom_call *c;
} profiled_launch;

static td_status run_profiled(void *ctx) {
    const profiled_launch *p = ctx;
    return launch(p->s, p->im, p->c);
}

/* Forward: kernel inputs in the compute dtype, outputs allocated, launched, cast to their dtype. */
td_status td__custom_forward(td__custom_state *s, td_tensor *const *inputs, td_tensor **outputs) {
    const td_custom_call *c0 = &s->call;
    const td_custom_impl *im = impl_for(s->op, c0->device.type);
    td_dtype cdt = im->dtypes & (1u << c0->dtype) ? c0->dtype : TD_F32;
    td_tensor *kin[CUSTOM_MAX_IN], *kout[CUSTOM_MAX_OUT];
    for (int i = 0; i < c0->n_in; i++) {
        td_tensor *x = inputs[i];
        if (td_dtype_is_float(td_tensor_dtype(x)) && td_tensor_dtype(x) != cdt) x = td_cast(x, cdt);
        x = td_contiguous(x);
        if (x && td_storage_offset(x) != 0) x = td_clone(x); /* kernels bind from element 0 */
        if (!x) return td_last_status();
        kin[i] = x;
    }
    for (int j = 0; j < c0->n_out; j++) {
        const td_custom_meta *m = &s->meta[j];
        kout[j] = td_empty(m->ndim, m->shape, td_dtype_is_float(m->dtype) ? cdt : m->dtype, c0->device);
        if (!kout[j]) return td_last_status();
    }
    td_custom_call c = *c0;
    c.dtype = cdt;
    c.inputs = kin;
    c.outputs = kout;
    td_status st;
    if (__builtin_expect(td__profiling, 0)) { /* recorded as the op, like a table op */
        td_tensor *all[CUSTOM_MAX_IN + CUSTOM_MAX_OUT];
        for (int i = 0; i < c.n_in; i++) all[i] = kin[i];
        for (int j = 0; j < c.n_out; j++) all[c.n_in + j] = kout[j];
        profiled_launch p = {s, im, &c};
        td_user_kernel *k; /* compiled before the clock starts */
        st = c.device.type == TD_DEVICE_CPU ? TD_OK : kernel_for(s->op, im, c.device, c.dtype, &k);
        if (st == TD_OK) st = td__profile_custom(s->op->name, c.n_in, c.n_out, all, run_profiled, &p);
    } else {
        st = launch(s, im, &c);
    }
    if (st != TD_OK) return st;
    for (int j = 0; j < c0->n_out; j++) {
        outputs[j] = td_tensor_dtype(kout[j]) == s->meta[j].dtype ? kout[j] : td_cast(kout[j], s->meta[j].dtype);
        if (!outputs[j]) return td_last_status();
    }
    return TD_OK;
}

/* Fill s->meta from the shape function (or input 0) and check it. */
static td_status run_shape(td__custom_state *s) {
    const td_custom_call *c = &s->call;
    const char *name = s->op->name;
    if (!s->op->def.shape) {
        for (int j = 0; j < c->n_out; j++) {
            s->meta[j].dtype = c->dtype;
            s->meta[j].ndim = td_ndim(c->inputs[0]);
            memcpy(s->meta[j].shape, td_shape(c->inputs[0]), sizeof(int64_t) * (size_t)s->meta[j].ndim);
        }
        return TD_OK;
    }
    for (int j = 0; j < c->n_out; j++) s->meta[j] = (td_custom_meta){.dtype = c->dtype, .ndim = -1};
    td_clear_error();
    td_status st = s->op->def.shape(c, s->meta);
    if (st != TD_OK) {
        if (td_last_status() != st) td_error_set(st, "the shape function returned %s", td_status_str(st));
        return td_error_prefix("%s", name);
    }
    for (int j = 0; j < c->n_out; j++) {
        const td_custom_meta *m = &s->meta[j];
        if (m->ndim < 0 || m->ndim > TD_MAX_DIMS || (int)m->dtype < 0 || m->dtype >= TD_DTYPE_COUNT)
            return TD_ERR(TD_ERR_SHAPE, "%s: the shape function gave output %d ndim %d, dtype %d", name, j, m->ndim,
                          (int)m->dtype);
        for (int d = 0; d < m->ndim; d++)
            if (m->shape[d] < 0)
                return TD_ERR(TD_ERR_SHAPE, "%s: the shape function gave output %d a negative size %lld", name, j,
                              (long long)m->shape[d]);
    }
    return TD_OK;
}

td_status td__custom_prepare(const td_custom_op *cop, int n_in, td_tensor *const *inputs, int n_params,
                             const float *params, int n_out, td_tensor **outputs, td__custom_state *s) {
    if (outputs)
        for (int j = 0; j < n_out && j < CUSTOM_MAX_OUT; j++) outputs[j] = NULL;
    if (!cop) return TD_ERR(TD_ERR_MISUSE, "td_custom_op_call: op is NULL");
    td_custom_op *op = (td_custom_op *)cop;
    const char *name = op->name;
    if (n_in != op->def.n_in || n_out != op->def.n_out || !inputs || !outputs)
        return TD_ERR(TD_ERR_MISUSE, "%s: takes %d input%s and %d output%s (called with %d and %d)", name, op->def.n_in,
                      op->def.n_in == 1 ? "" : "s", op->def.n_out, op->def.n_out == 1 ? "" : "s", n_in, n_out);
    if (n_params < 0 || n_params > TD_CUSTOM_MAX_PARAMS || (n_params && !params))
        return TD_ERR(TD_ERR_MISUSE, "%s: %d parameters (at most %d)", name, n_params, TD_CUSTOM_MAX_PARAMS);
    for (int i = 0; i < n_in; i++)
        if (!td__check_arg(inputs[i], name, "input")) return td_last_status() ? td_last_status() : TD_ERR_MISUSE;
    td_device dev = td_tensor_device(inputs[0]);
    td_dtype dt = TD_F32;
    bool any_float = false;
    for (int i = 0; i < n_in; i++) {
        char a[32], b[32];
        if (!td_device_equal(td_tensor_device(inputs[i]), dev))
            return TD_ERR(TD_ERR_DEVICE, "%s: input %d is on %s, input 0 on %s", name, i,
                          td_device_str(td_tensor_device(inputs[i]), a, sizeof a), td_device_str(dev, b, sizeof b));
        td_dtype t = td_tensor_dtype(inputs[i]);
        if (td_dtype_is_float(t)) dt = any_float ? td_dtype_promote(dt, t) : t, any_float = true;
    }
    const td_custom_impl *im = impl_for(op, dev.type);
    if (!im) {
        char d[32], have[64] = "";
        for (int t = 0; t < TD_DEVICE_TYPE_COUNT; t++)
            if (impl_for(op, t))
                snprintf(have + strlen(have), sizeof have - strlen(have), "%s%s", *have ? ", " : "", type_names[t]);
        return TD_ERR(TD_ERR_UNSUPPORTED, "%s: no implementation for %s (it has %s)", name,
                      td_device_str(dev, d, sizeof d), *have ? have : "none");
    }
    int64_t n0 = td_numel(inputs[0]), nd0 = td_ndim(inputs[0]);
    int64_t cols = nd0 ? td_shape(inputs[0])[nd0 - 1] : 1;
    *s = (td__custom_state){.op = op};
    s->call = (td_custom_call){.op = op,
                               .user = op->def.user,
                               .device = dev,
                               .dtype = dt,
                               .n_in = n_in,
                               .n_out = n_out,
                               .inputs = inputs,
                               .internal = s};
    td_status st = run_shape(s);
    if (st != TD_OK) return st;
    int64_t n = td__numel(s->meta[0].ndim, s->meta[0].shape);
    if (n > UINT32_MAX || n0 > UINT32_MAX)
        return TD_ERR(TD_ERR_UNSUPPORTED, "%s: %lld elements; custom ops take at most 2^32 - 1", name,
                      (long long)(n > n0 ? n : n0));
    s->call.args = (td_custom_args){.n = (uint32_t)n,
                                    .rows = (uint32_t)(cols ? n0 / cols : 0),
                                    .cols = (uint32_t)cols,
                                    .n_params = (uint32_t)n_params};
    for (int i = 0; i < n_params; i++) s->call.args.p[i] = params[i];
    return TD_OK;
}

td_status td__custom_run(td__custom_state *s, td_tensor *const *inputs, td_tensor **outputs) {
    int n_out = s->call.n_out;
    td_no_grad_begin();
    td_scope_begin();
    td_tensor *res[CUSTOM_MAX_OUT] = {0};
    td_status st = td__custom_forward(s, inputs, res);
    for (int j = 0; j < n_out && st == TD_OK; j++) outputs[j] = td_retain(res[j]);
    td_scope_end();
    td_no_grad_end();
    if (st != TD_OK) return td_error_prefix("%s", s->op->name);
    for (int j = 0; j < n_out; j++) td__scope_add(outputs[j]);
    return TD_OK;
}
