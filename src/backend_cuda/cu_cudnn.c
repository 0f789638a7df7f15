/*
** cuDNN's backend (graph) C API, loaded at first use: dlopen("libcudnn.so.9") (else libcudnn_graph.so.9), the
** dozen entry points resolved with dlsym, one cudnnHandle_t per device, and a graph builder over
** cudnnBackendCreateDescriptor / SetAttribute / Finalize in which every call checks its status and the first failure
** is kept as one line: "<call> <attribute>: CUDNN_STATUS_X: <cudnnGetLastErrorString>". A graph becomes a plan
** through the engine heuristics (CUDNN_HEUR_MODE_A): the configs are tried in order, the first that finalizes wins.
** Used by cu_attention_cudnn.c (the fused attention graphs); declared in cu_cudnn.h.
*/
#ifdef TRIDENT_HAVE_CUDNN
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu_cudnn.h"

/* ---- loader ---- */
static cu_dnn_api api;
static const char *load_why = "not loaded";
static char load_msg[512];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load(void) {
    static const char *names[] = {"libcudnn.so.9", "libcudnn_graph.so.9"};
    void *lib = NULL;
    const char *first_err = NULL;
    char err0[256] = "";
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !lib; i++) {
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!lib && !first_err) {
            snprintf(err0, sizeof err0, "%s", dlerror());
            first_err = err0;
        }
    }
    if (!lib) {
        snprintf(load_msg, sizeof load_msg, "dlopen libcudnn.so.9: %s", first_err ? first_err : "?");
        load_why = load_msg;
        return;
    }
    /* each entry point by name; a missing one makes the library unusable */
    struct {
        void **slot;
        const char *name;
        bool optional;
    } syms[] = {
        {(void **)&api.create, "cudnnCreate", false},
        {(void **)&api.set_stream, "cudnnSetStream", false},
        {(void **)&api.create_desc, "cudnnBackendCreateDescriptor", false},
        {(void **)&api.destroy_desc, "cudnnBackendDestroyDescriptor", false},
        {(void **)&api.finalize, "cudnnBackendFinalize", false},
        {(void **)&api.set_attr, "cudnnBackendSetAttribute", false},
        {(void **)&api.get_attr, "cudnnBackendGetAttribute", false},
        {(void **)&api.execute, "cudnnBackendExecute", false},
        {(void **)&api.error_string, "cudnnGetErrorString", false},
        {(void **)&api.last_error, "cudnnGetLastErrorString", true},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].slot = dlsym(lib, syms[i].name);
        if (!*syms[i].slot && !syms[i].optional) {
            snprintf(load_msg, sizeof load_msg, "cuDNN has no symbol %s", syms[i].name);
            load_why = load_msg;
            return; /* the library stays loaded: dlclose of cuDNN at run time is not worth the risk */
        }
    }
    size_t (*get_version)(void) = (size_t(*)(void))dlsym(lib, "cudnnGetVersion");
    api.version = get_version ? get_version() : 0;
    if (api.version < 90000) {
        snprintf(load_msg, sizeof load_msg, "cuDNN version %zu is older than 9.0", api.version);
        load_why = load_msg;
        return;
    }
    load_why = NULL;
}

const cu_dnn_api *cu_dnn_load(const char **why) {
    pthread_once(&load_once, load);
    if (why) *why = load_why;
    return load_why ? NULL : &api;
}

void cu_dnn_describe(cudnnStatus_t s, const char *what, char *buf, size_t n) {
    char last[256] = "";
    if (api.last_error) api.last_error(last, sizeof last);
    snprintf(buf, n, "%s: %s%s%s", what, api.error_string ? api.error_string(s) : "?", last[0] ? ": " : "", last);
}

/* ---- handles ---- */
static cudnnHandle_t handles[CU_MAX_DEVICES];
static pthread_mutex_t handle_lock = PTHREAD_MUTEX_INITIALIZER;

cudnnHandle_t cu_dnn_handle(cu_dev *d, char *why, size_t n) {
    const char *lw;
    const cu_dnn_api *a = cu_dnn_load(&lw);
    if (!a) {
        snprintf(why, n, "%s", lw);
        return NULL;
    }
    pthread_mutex_lock(&handle_lock);
    cudnnHandle_t h = handles[d->index];
    if (!h && d->capturing)
        snprintf(why, n, "no cuDNN handle yet, and none is made while capturing");
    else if (!h) {
        cudnnStatus_t s = a->create(&h); /* d is current on this thread (cu_get) */
        if (s != CUDNN_STATUS_SUCCESS) cu_dnn_describe(s, "cudnnCreate", why, n), h = NULL;
        handles[d->index] = h;
    }
    pthread_mutex_unlock(&handle_lock);
    return h;
}

/* ---- debug log ---- */
bool cu_dnn_debug(void) {
    static int on = -1;
    if (on < 0) on = getenv("TRIDENT_CUDA_ATTN_DEBUG") && strcmp(getenv("TRIDENT_CUDA_ATTN_DEBUG"), "0") != 0;
    return on;
}

void cu_dnn_log(const char *fmt, ...) {
    if (!cu_dnn_debug()) return;
    enum { SEEN = 64 };
    static char seen[SEEN][256];
    static int nseen;
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&lock);
    bool dup = false;
    for (int i = 0; i < nseen && !dup; i++) dup = !strcmp(seen[i], msg);
    if (!dup) {
        fprintf(stderr, "trident cudnn: %s\n", msg);
        if (nseen < SEEN) memcpy(seen[nseen++], msg, sizeof msg);
    }
    pthread_mutex_unlock(&lock);
}

/* ---- graph builder ---- */
static void fail(cu_dnn_graph *g, cudnnStatus_t s, const char *what) {
    g->st = s;
    cu_dnn_describe(s, what, g->err, sizeof g->err);
}

static cudnnBackendDescriptor_t make(cu_dnn_graph *g, cudnnBackendDescriptorType_t type, const char *what) {
    if (g->st != CUDNN_STATUS_SUCCESS) return NULL;
    if (g->ndescs == CU_DNN_MAX_DESCS) {
        g->st = CUDNN_STATUS_NOT_SUPPORTED;
        snprintf(g->err, sizeof g->err, "%s: more than %d descriptors in one graph", what, CU_DNN_MAX_DESCS);
        return NULL;
    }
    cudnnBackendDescriptor_t desc = NULL;
    cudnnStatus_t s = g->api->create_desc(type, &desc);
    if (s != CUDNN_STATUS_SUCCESS) {
        char w[128];
        snprintf(w, sizeof w, "cudnnBackendCreateDescriptor(%s)", what);
        fail(g, s, w);
        return NULL;
    }
    g->descs[g->ndescs++] = desc;
    return desc;
}

/* cudnnBackendSetAttribute, its name in the message */
#define SET(g, desc, attr, type, count, ptr) set_((g), (desc), (attr), (type), (count), (ptr), #attr)
static void set_(cu_dnn_graph *g, cudnnBackendDescriptor_t desc, cudnnBackendAttributeName_t attr,
                 cudnnBackendAttributeType_t type, int64_t count, const void *ptr, const char *name) {
    if (g->st != CUDNN_STATUS_SUCCESS) return;
    cudnnStatus_t s = g->api->set_attr(desc, attr, type, count, ptr);
    if (s != CUDNN_STATUS_SUCCESS) {
        char w[128];
        snprintf(w, sizeof w, "cudnnBackendSetAttribute(%s)", name);
        fail(g, s, w);
    }
}

static void finalize(cu_dnn_graph *g, cudnnBackendDescriptor_t desc, const char *what) {
    if (g->st != CUDNN_STATUS_SUCCESS) return;
    cudnnStatus_t s = g->api->finalize(desc);
    if (s != CUDNN_STATUS_SUCCESS) {
        char w[128];
        snprintf(w, sizeof w, "cudnnBackendFinalize(%s)", what);
        fail(g, s, w);
    }
}

static void add_op(cu_dnn_graph *g, cudnnBackendDescriptor_t op, const char *what) {
    finalize(g, op, what);
    if (g->st != CUDNN_STATUS_SUCCESS) return;
    if (g->nops == CU_DNN_MAX_OPS) {
        g->st = CUDNN_STATUS_NOT_SUPPORTED;
        snprintf(g->err, sizeof g->err, "%s: more than %d operations in one graph", what, CU_DNN_MAX_OPS);
        return;
    }
    g->ops[g->nops++] = op;
}

cudnnBackendDescriptor_t cu_dnn_tensor(cu_dnn_graph *g, int64_t uid, cudnnDataType_t dt, const int64_t dims[4],
                                       const int64_t strides[4], bool by_value) {
    cudnnBackendDescriptor_t t = make(g, CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor");
    bool virt = uid == 0;
    int64_t align = 16;
    if (virt) uid = g->next_virtual_uid++;
    SET(g, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
    SET(g, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
    SET(g, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
    SET(g, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    SET(g, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    if (virt) SET(g, t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt);
    if (by_value) SET(g, t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value);
    finalize(g, t, "tensor");
    return g->st == CUDNN_STATUS_SUCCESS ? t : NULL;
}

cudnnBackendDescriptor_t cu_dnn_virtual(cu_dnn_graph *g, cudnnDataType_t dt, const int64_t dims[4],
                                        const int64_t strides[4]) {
    return cu_dnn_tensor(g, 0, dt, dims, strides, false);
}

void cu_dnn_pointwise(cu_dnn_graph *g, cudnnPointwiseMode_t mode, cudnnDataType_t prec, int64_t axis,
                      cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t t,
                      cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t pw = make(g, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "pointwise");
    SET(g, pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    SET(g, pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    if (mode == CUDNN_POINTWISE_GEN_INDEX) SET(g, pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
    finalize(g, pw, "pointwise");
    cudnnBackendDescriptor_t op = make(g, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, "pointwise operation");
    SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw);
    SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    if (b) SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
    if (t) SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t);
    SET(g, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    add_op(g, op, "pointwise operation");
}

void cu_dnn_matmul(cu_dnn_graph *g, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
                   cudnnBackendDescriptor_t c) {
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t mm = make(g, CUDNN_BACKEND_MATMUL_DESCRIPTOR, "matmul");
    SET(g, mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    finalize(g, mm, "matmul");
    cudnnBackendDescriptor_t op = make(g, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "matmul operation");
    SET(g, op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a);
    SET(g, op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
    SET(g, op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c);
    SET(g, op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm);
    add_op(g, op, "matmul operation");
}

void cu_dnn_reduce(cu_dnn_graph *g, cudnnReduceTensorOp_t rop, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t red = make(g, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "reduction");
    SET(g, red, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &rop);
    SET(g, red, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    finalize(g, red, "reduction");
    cudnnBackendDescriptor_t op = make(g, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, "reduction operation");
    SET(g, op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    SET(g, op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    SET(g, op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &red);
    add_op(g, op, "reduction operation");
}

void cu_dnn_reshape(cu_dnn_graph *g, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t op = make(g, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, "reshape operation");
    SET(g, op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    SET(g, op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    add_op(g, op, "reshape operation");
}

/* The handle attributes are deprecated in 9.19's header but required by the 9.x libraries the GPU machines run. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static const cudnnBackendAttributeName_t ATTR_GRAPH_HANDLE = CUDNN_ATTR_OPERATIONGRAPH_HANDLE;
static const cudnnBackendAttributeName_t ATTR_PLAN_HANDLE = CUDNN_ATTR_EXECUTION_PLAN_HANDLE;
#pragma GCC diagnostic pop

cudnnBackendDescriptor_t cu_dnn_plan(cu_dnn_graph *g, cudnnHandle_t h, int64_t *ws) {
    cudnnBackendDescriptor_t graph = make(g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
    SET(g, graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, g->nops, g->ops);
    SET(g, graph, ATTR_GRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
    finalize(g, graph, "operation graph");
    cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    cudnnBackendDescriptor_t heur = make(g, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "engine heuristics");
    SET(g, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
    SET(g, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    finalize(g, heur, "engine heuristics");
    if (g->st != CUDNN_STATUS_SUCCESS) return NULL;
    /* how many configs, then that many engine-config descriptors to receive them */
    int64_t count = 0;
    cudnnStatus_t s =
        g->api->get_attr(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL);
    if (s != CUDNN_STATUS_SUCCESS) return fail(g, s, "cudnnBackendGetAttribute(CUDNN_ATTR_ENGINEHEUR_RESULTS)"), NULL;
    enum { MAX_CFGS = 8 };
    if (count > MAX_CFGS) count = MAX_CFGS;
    if (count <= 0) {
        g->st = CUDNN_STATUS_NOT_SUPPORTED;
        snprintf(g->err, sizeof g->err, "the heuristics (mode A) return no engine config for this graph");
        return NULL;
    }
    cudnnBackendDescriptor_t cfgs[MAX_CFGS];
    for (int64_t i = 0; i < count; i++) cfgs[i] = make(g, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config");
    if (g->st != CUDNN_STATUS_SUCCESS) return NULL;
    int64_t got = 0;
    s = g->api->get_attr(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, cfgs);
    if (s != CUDNN_STATUS_SUCCESS) return fail(g, s, "cudnnBackendGetAttribute(CUDNN_ATTR_ENGINEHEUR_RESULTS)"), NULL;
    char first_err[sizeof g->err] = "";
    for (int64_t i = 0; i < got; i++) {
        cudnnBackendDescriptor_t plan = NULL;
        s = g->api->create_desc(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan);
        if (s != CUDNN_STATUS_SUCCESS) return fail(g, s, "cudnnBackendCreateDescriptor(execution plan)"), NULL;
        const char *what = "cudnnBackendSetAttribute(CUDNN_ATTR_EXECUTION_PLAN_HANDLE)";
        s = g->api->set_attr(plan, ATTR_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
        if (s == CUDNN_STATUS_SUCCESS) {
            what = "cudnnBackendSetAttribute(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG)";
            s = g->api->set_attr(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                 &cfgs[i]);
        }
        if (s == CUDNN_STATUS_SUCCESS) what = "cudnnBackendFinalize(execution plan)", s = g->api->finalize(plan);
        int64_t n = 0, size = 0;
        if (s == CUDNN_STATUS_SUCCESS)
            what = "cudnnBackendGetAttribute(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE)",
            s = g->api->get_attr(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &size);
        if (s == CUDNN_STATUS_SUCCESS) {
            *ws = size;
            return plan;
        }
        if (!first_err[0]) { /* keep the best config's reason; try the next */
            char w[160];
            snprintf(w, sizeof w, "engine config %lld of %lld: %s", (long long)i + 1, (long long)got, what);
            cu_dnn_describe(s, w, first_err, sizeof first_err);
        }
        g->api->destroy_desc(plan);
    }
    g->st = CUDNN_STATUS_NOT_SUPPORTED;
    snprintf(g->err, sizeof g->err, "%s", first_err[0] ? first_err : "no engine config finalizes");
    return NULL;
}

void cu_dnn_graph_free(cu_dnn_graph *g) {
    for (int i = g->ndescs - 1; i >= 0; i--)
        if (g->descs[i]) g->api->destroy_desc(g->descs[i]);
    g->ndescs = g->nops = 0;
}

cudnnStatus_t cu_dnn_execute(const cu_dnn_api *a, cudnnHandle_t h, cudnnBackendDescriptor_t plan, int n,
                             const int64_t *uids, void *const *ptrs, void *ws, char *err, size_t errn) {
    cudnnBackendDescriptor_t pack = NULL;
    const char *what = "cudnnBackendCreateDescriptor(variant pack)";
    cudnnStatus_t s = a->create_desc(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
    if (s == CUDNN_STATUS_SUCCESS)
        what = "cudnnBackendSetAttribute(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS)",
        s = a->set_attr(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids);
    if (s == CUDNN_STATUS_SUCCESS)
        what = "cudnnBackendSetAttribute(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS)",
        s = a->set_attr(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs);
    if (s == CUDNN_STATUS_SUCCESS)
        what = "cudnnBackendSetAttribute(CUDNN_ATTR_VARIANT_PACK_WORKSPACE)",
        s = a->set_attr(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
    if (s == CUDNN_STATUS_SUCCESS) what = "cudnnBackendFinalize(variant pack)", s = a->finalize(pack);
    if (s == CUDNN_STATUS_SUCCESS) what = "cudnnBackendExecute", s = a->execute(h, plan, pack);
    if (s != CUDNN_STATUS_SUCCESS) cu_dnn_describe(s, what, err, errn);
    if (pack) a->destroy_desc(pack);
    return s;
}

/* ---- convolutions and plans that avoid numerical notes (cu_conv_cudnn.c) ---- */
void cu_dnn_convolution(cu_dnn_graph *g, int dir, cudnnDataType_t comp, const int64_t pre[2], const int64_t post[2],
                        const int64_t stride[2], const int64_t dilation[2], cudnnBackendDescriptor_t x,
                        cudnnBackendDescriptor_t w, cudnnBackendDescriptor_t y) {
    int64_t dims = 2;
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    cudnnBackendDescriptor_t cd = make(g, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, "convolution");
    SET(g, cd, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    SET(g, cd, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
    SET(g, cd, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims);
    SET(g, cd, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dilation);
    SET(g, cd, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride);
    SET(g, cd, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pre);
    SET(g, cd, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, post);
    finalize(g, cd, "convolution");
    /* alpha and beta: double for double data, float otherwise */
    bool dbl = comp == CUDNN_DATA_DOUBLE;
    double one_d = 1, zero_d = 0;
    float one_f = 1, zero_f = 0;
    cudnnBackendAttributeType_t st = dbl ? CUDNN_TYPE_DOUBLE : CUDNN_TYPE_FLOAT;
    const void *one = dbl ? (const void *)&one_d : &one_f, *zero = dbl ? (const void *)&zero_d : &zero_f;
    static const cudnnBackendDescriptorType_t types[3] = {
        CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
        CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
        CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR};
    /* per direction: alpha, beta, conv desc, x, w, y */
    static const cudnnBackendAttributeName_t attrs[3][6] = {
        {CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y},
        {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY},
        {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY},
    };
    if (dir < 0 || dir > 2) dir = 0;
    const cudnnBackendAttributeName_t *a = attrs[dir];
    cudnnBackendDescriptor_t op = make(g, types[dir], "convolution operation");
    SET(g, op, a[0], st, 1, one);
    SET(g, op, a[1], st, 1, zero);
    SET(g, op, a[2], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cd);
    SET(g, op, a[3], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    SET(g, op, a[4], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w);
    SET(g, op, a[5], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    add_op(g, op, "convolution operation");
}

/* Whether cfg's engine has a numerical note in avoid (an engine whose notes cannot be read counts as having one). */
static bool has_note(const cu_dnn_api *a, cudnnBackendDescriptor_t cfg, unsigned avoid) {
    cudnnBackendDescriptor_t eng = NULL;
    if (a->create_desc(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng) != CUDNN_STATUS_SUCCESS) return true;
    int64_t n = 0;
    cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    bool hit = a->get_attr(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &eng) !=
                   CUDNN_STATUS_SUCCESS ||
               a->get_attr(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                           CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes) != CUDNN_STATUS_SUCCESS;
    for (int64_t i = 0; i < n && !hit; i++) hit = (unsigned)notes[i] < 32 && (avoid >> notes[i] & 1u);
    a->destroy_desc(eng);
    return hit;
}

/* A finalized plan of cfg on h with its workspace size, or NULL with the reason in err (when err is still empty). */
static cudnnBackendDescriptor_t plan_of(const cu_dnn_api *a, cudnnHandle_t h, cudnnBackendDescriptor_t cfg, int64_t *ws,
                                        char *err, size_t errn) {
    cudnnBackendDescriptor_t plan = NULL;
    const char *what = "cudnnBackendCreateDescriptor(execution plan)";
    cudnnStatus_t s = a->create_desc(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan);
    if (s == CUDNN_STATUS_SUCCESS)
        what = "cudnnBackendSetAttribute(CUDNN_ATTR_EXECUTION_PLAN_HANDLE)",
        s = a->set_attr(plan, ATTR_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
    if (s == CUDNN_STATUS_SUCCESS)
        what = "cudnnBackendSetAttribute(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG)",
        s = a->set_attr(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg);
    if (s == CUDNN_STATUS_SUCCESS) what = "cudnnBackendFinalize(execution plan)", s = a->finalize(plan);
    int64_t n = 0, size = 0;
    if (s == CUDNN_STATUS_SUCCESS)
        what = "cudnnBackendGetAttribute(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE)",
        s = a->get_attr(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &size);
    if (s == CUDNN_STATUS_SUCCESS) return *ws = size, plan;
    if (!err[0]) cu_dnn_describe(s, what, err, errn);
    if (plan) a->destroy_desc(plan);
    return NULL;
}

cudnnBackendDescriptor_t cu_dnn_plan_avoiding(cu_dnn_graph *g, cudnnHandle_t h, unsigned avoid, int64_t *ws) {
    cudnnBackendDescriptor_t graph = make(g, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
    SET(g, graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, g->nops, g->ops);
    SET(g, graph, ATTR_GRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
    finalize(g, graph, "operation graph");
    if (g->st != CUDNN_STATUS_SUCCESS) return NULL;
    enum { MAX_CFGS = 16 };
    char first_err[sizeof g->err] = "";
    int skipped = 0;
    static const cudnnBackendHeurMode_t modes[2] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
    for (int m = 0; m < 2; m++) {
        cudnnBackendDescriptor_t heur = make(g, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "engine heuristics");
        SET(g, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
        SET(g, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &modes[m]);
        finalize(g, heur, "engine heuristics");
        int64_t count = 0;
        if (g->st == CUDNN_STATUS_SUCCESS &&
            g->api->get_attr(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL) !=
                CUDNN_STATUS_SUCCESS)
            count = 0;
        if (count > MAX_CFGS) count = MAX_CFGS;
        cudnnBackendDescriptor_t cfgs[MAX_CFGS];
        for (int64_t i = 0; i < count; i++) cfgs[i] = make(g, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config");
        int64_t got = 0;
        if (g->st == CUDNN_STATUS_SUCCESS && count > 0 &&
            g->api->get_attr(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, cfgs) !=
                CUDNN_STATUS_SUCCESS)
            got = 0;
        for (int64_t i = 0; i < got; i++) {
            if (avoid && has_note(g->api, cfgs[i], avoid)) {
                skipped++;
                continue;
            }
            cudnnBackendDescriptor_t plan = plan_of(g->api, h, cfgs[i], ws, first_err, sizeof first_err);
            if (plan) return plan;
        }
        if (g->st != CUDNN_STATUS_SUCCESS) { /* this mode's heuristics failed: the reason kept, the next mode tried */
            if (!first_err[0]) snprintf(first_err, sizeof first_err, "%s", g->err);
            g->st = CUDNN_STATUS_SUCCESS;
        }
    }
    g->st = CUDNN_STATUS_NOT_SUPPORTED;
    if (first_err[0])
        snprintf(g->err, sizeof g->err, "%s", first_err);
    else
        snprintf(g->err, sizeof g->err, "no engine config finalizes (%d skipped for their numerical notes)", skipped);
    return NULL;
}
#else
typedef int cu_cudnn_unused; /* built without cudnn_graph.h: cu_attention_cudnn.c declines every call */
#endif
