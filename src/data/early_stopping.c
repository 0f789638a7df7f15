/*
** Early stopping, as PyTorch Lightning's EarlyStopping (check_finite on):
** improved = value < best - min_delta (min mode) or value > best + min_delta
** (max mode); wait counts epochs since the last improvement; stop when
** wait >= patience, or at once on a NaN or infinite value.
*/
#include <math.h>

#include "core/internal.h"
#include "trident/data.h"

td_status td_early_stopping_init(td_early_stopping *es, int64_t patience, double min_delta, td_monitor_mode mode) {
    if (!es || patience < 0 || !(min_delta >= 0) || (mode != TD_MODE_MIN && mode != TD_MODE_MAX))
        return TD_ERR(TD_ERR_MISUSE,
                      "early_stopping_init: need es, patience >= 0 (got %lld), min_delta >= 0 (got %g) "
                      "and mode min or max",
                      (long long)patience, min_delta);
    *es = (td_early_stopping){.patience = patience,
                              .min_delta = min_delta,
                              .mode = mode,
                              .best = mode == TD_MODE_MIN ? INFINITY : -INFINITY,
                              .best_epoch = -1};
    return TD_OK;
}

bool td_early_stopping_step(td_early_stopping *es, double value) {
    if (!es) return false;
    int64_t epoch = es->epochs++;
    es->improved = isfinite(value) &&
                   (es->mode == TD_MODE_MIN ? value < es->best - es->min_delta : value > es->best + es->min_delta);
    if (es->improved) {
        es->best = value;
        es->best_epoch = epoch;
        es->wait = 0;
    } else {
        es->wait++;
    }
    if (!isfinite(value) || (!es->improved && es->wait >= es->patience)) es->stop = true;
    return es->stop;
}
