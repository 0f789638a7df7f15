/*
** The example custom ops of examples/custom_ops/ (see README.md there):
**   bias_gelu(x [R, C], b [C]) -> gelu_tanh(x + b)          GLSL, CUDA, C; backward kernels
**   rmsnorm(x [R, C], w [C]; eps) -> x * w / rms(x)          GLSL, CUDA, C; backward in ops
**   top1(x [R, C]) -> (max over C [R], its index [R] int32)  GLSL, CUDA, C; not differentiable
** and their composed references, made of ordinary ops.
*/
#ifndef CUSTOM_OPS_H
#define CUSTOM_OPS_H

#include <trident/trident.h>

typedef struct custom_ops {
    td_custom_op *bias_gelu, *bias_gelu_backward, *rmsnorm, *top1;
    char *sources[8]; /* the kernel files' text, owned */
} custom_ops;

/* METHOD. Read the kernels from dir (examples/custom_ops) and register the ops. */
td_status custom_ops_register(custom_ops *ops, const char *dir);
/* DESTRUCTOR. Unregister them and free the sources. */
void custom_ops_free(custom_ops *ops);

/* The ops, called like any op (NULL on failure, td_last_error says why). */
td_tensor *bias_gelu(const custom_ops *ops, td_tensor *x, td_tensor *b);
td_tensor *rmsnorm(const custom_ops *ops, td_tensor *x, td_tensor *w, float eps);
td_status top1(const custom_ops *ops, td_tensor *x, td_tensor **val, td_tensor **idx);
/* bias_gelu(in[0], in[1]) and rmsnorm(in[0], in[1], 1e-5) as a td_multi_fn for td_gradcheck; user is the
** custom_ops. */
td_tensor *bias_gelu_fn(void *ops, int n, td_tensor *const *in);
td_tensor *rmsnorm_fn(void *ops, int n, td_tensor *const *in);

/* Their references in ordinary ops. */
td_tensor *bias_gelu_ref(td_tensor *x, td_tensor *b);
td_tensor *rmsnorm_ref(td_tensor *x, td_tensor *w, float eps);

/* METHOD. Train the W1 MLP with GELU (784-256-256-10, Adam lr 1e-3, batches of
** one batch of 16 random images from seed, labelled by the brightest of
** their first 10 pixels, fitted) for steps steps on dev, its hidden
** layers fused (bias_gelu) when ops is non-NULL and composed (td_linear +
** td_gelu) otherwise; losses[step] gets each step's loss. */
td_status mlp_train(const custom_ops *ops, td_device dev, int steps, uint64_t seed, double *losses);

#endif
