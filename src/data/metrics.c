/*
** Classification metrics from a confusion matrix cm[C][C] (row = true class
** t, column = predicted class p), as scikit-learn defines them:
**   TP_k = cm[k][k], FP_k = sum_t cm[t][k] - TP_k, FN_k = sum_p cm[k][p] - TP_k
**   precision_k = TP_k / (TP_k + FP_k), recall_k = TP_k / (TP_k + FN_k),
**   f1_k = 2 P_k R_k / (P_k + R_k), each 0 where its denominator is 0;
**   macro = mean over all C classes; accuracy = sum_k TP_k / n.
*/
#include <stdlib.h>

#include "core/internal.h"
#include "trident/data.h"

td_status td_confusion_update(int64_t *cm, int64_t C, const int64_t *pred, const int64_t *target, int64_t n) {
    if (!cm || C < 1 || n < 0 || (n > 0 && (!pred || !target)))
        return TD_ERR(TD_ERR_MISUSE, "confusion_update: need cm, num_classes >= 1 and n >= 0 labels");
    for (int64_t i = 0; i < n; i++) /* validate all before counting any */
        if (pred[i] < 0 || pred[i] >= C || target[i] < 0 || target[i] >= C)
            return TD_ERR(TD_ERR_INDEX, "confusion_update: %s label %lld at position %lld is outside [0, %lld)",
                          pred[i] < 0 || pred[i] >= C ? "predicted" : "true",
                          (long long)(pred[i] < 0 || pred[i] >= C ? pred[i] : target[i]), (long long)i, (long long)C);
    for (int64_t i = 0; i < n; i++) cm[target[i] * C + pred[i]]++;
    return TD_OK;
}

td_status td_confusion_update_tensors(int64_t *cm, int64_t C, td_tensor *pred, td_tensor *target) {
    TD_CHECK_ARG_ST(pred, "confusion_update_tensors");
    TD_CHECK_ARG_ST(target, "confusion_update_tensors");
    if (td_dtype_is_float(td_tensor_dtype(pred)) || td_dtype_is_float(td_tensor_dtype(target)))
        return TD_ERR(TD_ERR_DTYPE, "confusion_update_tensors: labels must be integers, got %s and %s",
                      td_dtype_name(td_tensor_dtype(pred)), td_dtype_name(td_tensor_dtype(target)));
    int64_t n = td_numel(pred);
    if (td_numel(target) != n)
        return TD_ERR(TD_ERR_SHAPE, "confusion_update_tensors: %lld prediction%s but %lld target%s", (long long)n,
                      n == 1 ? "" : "s", (long long)td_numel(target), td_numel(target) == 1 ? "" : "s");
    int64_t *p = malloc(sizeof(int64_t) * (size_t)(2 * n + 1));
    if (!p) return TD_ERR(TD_ERR_OOM, "confusion_update_tensors: out of host memory");
    td_status st = td_copy_to_host(pred, p, sizeof(int64_t) * (size_t)n, TD_I64);
    if (st == TD_OK) st = td_copy_to_host(target, p + n, sizeof(int64_t) * (size_t)n, TD_I64);
    if (st == TD_OK) st = td_confusion_update(cm, C, p, p + n, n);
    free(p);
    return st;
}

static double ratio(double a, double b) { return b > 0 ? a / b : 0; }

td_status td_metrics_from_confusion(const int64_t *cm, int64_t C, td_metrics *out) {
    if (!cm || !out || C < 1) return TD_ERR(TD_ERR_MISUSE, "metrics_from_confusion: need cm, out and num_classes >= 1");
    int64_t n = 0, correct = 0;
    double sp = 0, sr = 0, sf = 0;
    for (int64_t k = 0; k < C; k++) {
        int64_t tp = cm[k * C + k], col = 0, row = 0;
        for (int64_t j = 0; j < C; j++) col += cm[j * C + k], row += cm[k * C + j];
        double p = ratio((double)tp, (double)col), r = ratio((double)tp, (double)row);
        sp += p, sr += r, sf += ratio(2 * p * r, p + r);
        n += row, correct += tp;
    }
    *out = (td_metrics){.n = n,
                        .accuracy = ratio((double)correct, (double)n),
                        .precision = sp / (double)C,
                        .recall = sr / (double)C,
                        .f1 = sf / (double)C};
    return TD_OK;
}
