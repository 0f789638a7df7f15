/*
** The CTC loss's shared state: the checked host copies of the targets and
** lengths (ctc_loss.c) that both the host recursion (ctc_loss.c, CPU tensors)
** and the composed device recursion (ctc_loss_device.c, every other device)
** read.
** defines: td__ctc_data, td__ctc_data_free, td__ctc_ext_label, td__ctc_nll_device.
*/
#ifndef TRIDENT_NN_CTC_INTERNAL_H
#define TRIDENT_NN_CTC_INTERNAL_H

#include "nn_internal.h"

typedef struct td__ctc_data {
    int64_t T, N, C, blank;
    bool zero_infinity;
    int64_t *il, *tl, *toff; /* input lengths, target lengths, offset of sample b's labels in tg */
    int64_t *tg;             /* the labels */
    double *nll;             /* [N], before zero_infinity (host recursion only) */
} td__ctc_data;

void td__ctc_data_free(void *p);

/* l'(s) of sample b: blank for even s, its label (s - 1) / 2 for odd s */
static inline int64_t td__ctc_ext_label(const td__ctc_data *d, int64_t b, int64_t s) {
    return s % 2 == 0 ? d->blank : d->tg[d->toff[b] + (s - 1) / 2];
}

/* The per-sample nll [N] of lp [T, N, C] (on any device) by the composed
** recursion, zeroed where infinite under zero_infinity, as a node of the graph
** with PyTorch's gradient. Takes d (freed with the node, or here on failure).
** NULL with the error set. */
td_tensor *td__ctc_nll_device(td__ctc_data *d, td_tensor *lp);

#endif /* TRIDENT_NN_CTC_INTERNAL_H */
