/*
** The MLP written as a math block trains on Fashion-MNIST and reaches
** the accuracy of the same MLP built from td_linear modules, from the same
** seed (same initial weights, same batches, one epoch of SGD). The block is the seed's
** example with the batch as columns of x' and the cross-entropy loss:
**   h = relu(W1 @ x' + b1)      W1 [H, 784], b1 [H, 1], x [B, 784]
**   y = W2 @ h + b2             W2 [10, H], b2 [10, 1]
**   loss = cross_entropy(y', target)
** Skipped when the dataset-fashion-mnist package is not installed.
*/
#include <sys/stat.h>

#include "runner.h"

enum { IN = 784, HIDDEN = 64, CLASSES = 10, BATCH = 100, TRAIN = 60000 };
#define FMNIST_DIR "/usr/share/datasets/fashion-mnist"

static const char *train_src = "h = relu(W1 @ x' + b1)\n"
                               "y = W2 @ h + b2\n"
                               "loss = cross_entropy(y', target)";
static const char *logits_src = "(W2 @ relu(W1 @ x' + b1) + b2)'";

typedef struct mlp {
    td_module *net;
    td_tensor *p[4]; /* W1, b1, W2, b2 (borrowed from net) */
    td_optimizer *opt;
} mlp;

static void mlp_new(mlp *m) {
    td_manual_seed(21);
    td_module *layers[] = {td_linear_new(IN, HIDDEN, true), td_relu_new(), td_linear_new(HIDDEN, CLASSES, true)};
    m->net = td_sequential_new(3, layers);
    ASSERT(m->net);
    ASSERT_EQ_INT(td_module_parameters(m->net, m->p, 4), 4);
    td_optim_options o = td_sgd_defaults(0.05);
    o.momentum = 0.9;
    m->opt = td_sgd_new(4, m->p, &o);
    ASSERT(m->opt);
}

static void mlp_free(mlp *m) {
    td_optimizer_free(m->opt);
    td_module_free(m->net);
}

/* The block's bindings: the module's own parameters, the biases as columns
** (views, so the gradients reach the parameters). */
static void bind(const mlp *m, td_tensor *x, td_tensor *target, td_math_binding *bd) {
    bd[0] = (td_math_binding){"W1", m->p[0], 0};
    bd[1] = (td_math_binding){"b1", td_unsqueeze(m->p[1], 1), 0};
    bd[2] = (td_math_binding){"W2", m->p[2], 0};
    bd[3] = (td_math_binding){"b2", td_unsqueeze(m->p[3], 1), 0};
    bd[4] = (td_math_binding){"x", x, 0};
    bd[5] = (td_math_binding){"target", target, 0};
}

/* One epoch over the TRAIN examples in order; returns the mean loss of the first batch. */
static double train(mlp *m, td_math_block *blk, td_tensor *x, td_tensor *y) {
    double first = NAN;
    for (int64_t i = 0; i < TRAIN; i += BATCH) {
        td_scope_begin();
        td_tensor *xb = td_slice(x, 0, i, i + BATCH, 1), *yb = td_slice(y, 0, i, i + BATCH, 1), *loss = NULL;
        if (blk) {
            td_math_binding bd[6];
            bind(m, xb, yb, bd);
            ASSERT_OK(td_math_run(blk, bd, 6, &loss));
        } else {
            loss = td_cross_entropy_loss(td_module_forward(m->net, xb), yb, NULL, -100, 0, TD_REDUCE_MEAN);
        }
        ASSERT(loss);
        if (i == 0) first = td_item(loss);
        td_optimizer_zero_grad(m->opt);
        ASSERT_OK(td_backward(loss, NULL, false));
        ASSERT_OK(td_optimizer_step(m->opt));
        td_scope_end();
    }
    return first;
}

/* The fraction of the test set classified right. */
static double accuracy(mlp *m, td_math_block *blk, td_tensor *x, td_tensor *y) {
    td_scope_begin();
    td_no_grad_begin();
    td_tensor *logits = NULL;
    if (blk) {
        td_math_binding bd[6];
        bind(m, x, y, bd);
        ASSERT_OK(td_math_run(blk, bd, 5, &logits));
    } else {
        logits = td_module_forward(m->net, x);
    }
    td_tensor *right = td_sum(td_cast(td_eq(td_argmax(logits, 1, false), y), TD_F64), 0, NULL, false);
    double acc = td_item(right) / (double)td_size(y, 0);
    td_no_grad_end();
    td_scope_end();
    return acc;
}

TEST(fashion_mnist_block_matches_modules) {
    struct stat sb;
    if (stat(FMNIST_DIR "/train-images-idx3-ubyte.gz", &sb) != 0 ||
        stat(FMNIST_DIR "/t10k-labels-idx1-ubyte.gz", &sb) != 0)
        TEST_SKIP("Fashion-MNIST is not installed in %s (the dataset-fashion-mnist package)", FMNIST_DIR);
    td_tensor *xtr, *ytr, *xte, *yte;
    ASSERT_OK(td_mnist_load(FMNIST_DIR, true, true, &xtr, &ytr));
    ASSERT_OK(td_mnist_load(FMNIST_DIR, false, true, &xte, &yte));
    td_math_block *blk, *lg;
    ASSERT_OK(td_math_compile(train_src, NULL, &blk));
    ASSERT_OK(td_math_compile(logits_src, NULL, &lg));

    mlp mod, mb;
    mlp_new(&mod);
    mlp_new(&mb);
    double acc0 = accuracy(&mb, lg, xte, yte);
    ASSERT_NEAR(acc0, accuracy(&mod, NULL, xte, yte), 1e-12); /* same seed: same weights */
    double l_mod = train(&mod, NULL, xtr, ytr), l_blk = train(&mb, blk, xtr, ytr);
    ASSERT_NEAR(l_blk, l_mod, 1e-5); /* the first step's loss */
    double a_mod = accuracy(&mod, NULL, xte, yte), a_blk = accuracy(&mb, lg, xte, yte);
    printf("  test accuracy: untrained %.4f, modules %.4f, block %.4f\n", acc0, a_mod, a_blk);
    fflush(stdout);
    ASSERT(a_mod > 0.80);
    ASSERT(a_blk > 0.80);
    ASSERT_NEAR(a_blk, a_mod, 0.005);
    /* the weights trained the same way, up to float32 rounding */
    td_scope_begin();
    for (int k = 0; k < 4; k++) {
        double d = td_item(td_amax(td_abs(td_sub(mb.p[k], mod.p[k])), 0, NULL, false));
        double s = td_item(td_amax(td_abs(mod.p[k]), 0, NULL, false));
        if (!(d <= 1e-3 * s)) TEST_FAIL_("parameter %d differs by %g (max |p| %g)", k, d, s);
    }
    td_scope_end();

    mlp_free(&mod);
    mlp_free(&mb);
    td_math_free(blk);
    td_math_free(lg);
    td_release(xtr), td_release(ytr), td_release(xte), td_release(yte);
}

#define TESTS(X) X(fashion_mnist_block_matches_modules)

TEST_MAIN(TESTS)
