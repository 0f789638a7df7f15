/*
** Activation modules: ReLU, GELU (erf or tanh), SiLU, Tanh, Sigmoid, and
** Softmax/LogSoftmax over any dim (td_softmax takes any dim).
*/
#include "nn_internal.h"

typedef struct act_ctx {
    int dim;          /* Softmax, LogSoftmax */
    bool tanh_approx; /* GELU */
} act_ctx;

td_tensor *td__softmax_dim(td_tensor *x, int dim, bool log) {
    return log ? td_log_softmax(x, dim) : td_softmax(x, dim);
}

static td_tensor *relu_forward(td_module *m, td_tensor *x) { return (void)m, td_relu(x); }
static td_tensor *silu_forward(td_module *m, td_tensor *x) { return (void)m, td_silu(x); }
static td_tensor *tanh_forward(td_module *m, td_tensor *x) { return (void)m, td_tanh(x); }
static td_tensor *sigmoid_forward(td_module *m, td_tensor *x) { return (void)m, td_sigmoid(x); }
static td_tensor *gelu_forward(td_module *m, td_tensor *x) { return td_gelu(x, ((act_ctx *)m->ctx)->tanh_approx); }
static td_tensor *softmax_forward(td_module *m, td_tensor *x) {
    return td__softmax_dim(x, ((act_ctx *)m->ctx)->dim, false);
}
static td_tensor *log_softmax_forward(td_module *m, td_tensor *x) {
    return td__softmax_dim(x, ((act_ctx *)m->ctx)->dim, true);
}

static const td_module_i relu_iface = {.type = "ReLU", .forward = relu_forward, .free_ctx = NULL};
static const td_module_i gelu_iface = {.type = "GELU", .forward = gelu_forward, .free_ctx = NULL};
static const td_module_i silu_iface = {.type = "SiLU", .forward = silu_forward, .free_ctx = NULL};
static const td_module_i tanh_iface = {.type = "Tanh", .forward = tanh_forward, .free_ctx = NULL};
static const td_module_i sigmoid_iface = {.type = "Sigmoid", .forward = sigmoid_forward, .free_ctx = NULL};
static const td_module_i softmax_iface = {.type = "Softmax", .forward = softmax_forward, .free_ctx = NULL};
static const td_module_i log_softmax_iface = {.type = "LogSoftmax", .forward = log_softmax_forward, .free_ctx = NULL};

static td_module *act_new(const td_module_i *iface, int dim, bool tanh_approx) {
    td_module *m = td__module_alloc(iface, sizeof(act_ctx));
    if (m) *(act_ctx *)m->ctx = (act_ctx){dim, tanh_approx};
    return m;
}

td_module *td_relu_new(void) { return act_new(&relu_iface, 0, false); }
td_module *td_gelu_new(bool tanh_approx) { return act_new(&gelu_iface, 0, tanh_approx); }
td_module *td_silu_new(void) { return act_new(&silu_iface, 0, false); }
td_module *td_tanh_new(void) { return act_new(&tanh_iface, 0, false); }
td_module *td_sigmoid_new(void) { return act_new(&sigmoid_iface, 0, false); }
td_module *td_softmax_new(int dim) { return act_new(&softmax_iface, dim, false); }
td_module *td_log_softmax_new(int dim) { return act_new(&log_softmax_iface, dim, true); }
