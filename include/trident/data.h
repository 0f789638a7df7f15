/*
** Trident data: datasets, the DataLoader, file readers (IDX, CIFAR-10),
** transforms, classification metrics, early stopping and metric logs.
**
** Everything here runs on the host: datasets produce CPU tensors, and the
** DataLoader moves each batch to its device when it hands it out.
**
** Randomness (shuffling, crops, flips) comes from Philox4x32-10 keyed by a
** seed, so a run is reproducible from its seed alone, whatever the number of
** worker threads.
*/
#ifndef TRIDENT_DATA_H
#define TRIDENT_DATA_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Datasets --------------------------------------------------------------
** A dataset is n samples; each sample is n_fields tensors (for example an
** image and its label). Every sample has the same field shapes and dtypes.
** The interface below is what a custom dataset implements. */

#define TD_DATA_MAX_FIELDS 8

typedef struct td_dataset_i {
    /* Number of samples. */
    int64_t (*len)(void *ctx);
    /* Number of tensors per sample, 1..TD_DATA_MAX_FIELDS. */
    int (*num_fields)(void *ctx);
    /* Sample i (0 <= i < len) into fields[0..num_fields): CPU tensors made by
    ** CONSTRUCTORs (the caller runs this inside a scope and keeps what it
    ** needs). Return TD_OK or an error with td_last_error() set. Called from
    ** worker threads when a DataLoader has workers: must be thread-safe. */
    td_status (*get)(void *ctx, int64_t i, td_tensor **fields);
    /* (optional) Samples idx[0..n) stacked along a new dim 0, so field k is
    ** [n, ...sample shape]. NULL: the loader calls get() for each sample and
    ** stacks them. Same ownership and threading rules as get. */
    td_status (*get_batch)(void *ctx, int64_t n, const int64_t *idx, td_tensor **fields);
    /* (optional) Free ctx when the dataset is freed. NULL: ctx is not freed. */
    void (*free_ctx)(void *ctx);
} td_dataset_i;

typedef struct td_dataset td_dataset;

/* CONSTRUCTOR. A dataset over a user interface. iface is copied; ctx is
** borrowed (or freed by iface->free_ctx with the dataset).
** Returns TD_ERR_MISUSE when iface lacks len, num_fields or get, TD_ERR_OOM.
** *out is NULL on failure. */
TD_API td_status td_dataset_new(const td_dataset_i *iface, void *ctx, td_dataset **out);

/* CONSTRUCTOR. The in-memory dataset: sample i is (tensors[0][i], ...,
** tensors[n-1][i]) -- for example x [N, 1, 28, 28] and y [N]. Every tensor
** must have the same size N along dim 0 (TD_ERR_SHAPE otherwise, naming both
** sizes) and at least one dim. The dataset holds contiguous CPU copies (or
** references, when the tensors already are contiguous CPU tensors); batches
** are gathered rows. */
TD_API td_status td_tensor_dataset_new(int n_tensors, td_tensor *const *tensors, td_dataset **out);

/* DESTRUCTOR. Free a dataset (and its ctx, see free_ctx). NULL is a no-op.
** No DataLoader may still use it. */
TD_API void td_dataset_free(td_dataset *ds);

/* GETTERS. Number of samples and of fields; -1 for NULL. */
TD_API int64_t td_dataset_len(td_dataset *ds);
TD_API int td_dataset_num_fields(td_dataset *ds);

/* CONSTRUCTOR. Samples idx[0..n) as num_fields stacked CPU tensors (+1 each,
** scope-owned as usual) written to fields. Fails with TD_ERR_INDEX for an
** index outside [0, len), TD_ERR_SHAPE when samples differ in shape or dtype
** (naming the sample), or the dataset's own error. fields are NULL on failure.
** Thread-safe when the dataset's get/get_batch are. */
TD_API td_status td_dataset_get_batch(td_dataset *ds, int64_t n, const int64_t *idx, td_tensor **fields);

/* ---- DataLoader ------------------------------------------------------------
** Splits a dataset into batches, in order or shuffled.
**
** Shuffling: epoch e uses the permutation made by a Fisher-Yates shuffle of
** [0, N) whose draws come from Philox4x32-10 with key seed and counters
** e * 2^40 + k: draw k picks j = floor(u64 * (i+1) / 2^64), where u64 is words
** 0 and 1 of counter k (low word first). Batch b holds positions
** [b*batch_size, (b+1)*batch_size) of the permutation. So the batches of an
** epoch depend only on (seed, epoch), never on the worker count.
**
** Workers: with num_workers > 0, that many threads build whole batches ahead
** of time into a queue of num_workers * prefetch slots; td_dataloader_next
** hands them out in order. With 0 workers, next builds each batch itself. */

/* Optional per-batch hook, run (in a worker when there are any) after the
** batch is built: it may replace fields[k] with a new tensor made by a
** CONSTRUCTOR (the loader then releases the old one). epoch and batch make a
** random transform reproducible: for example offset = epoch * 2^32 + batch *
** batch_size for td_transform_random_crop. Must be thread-safe. */
typedef td_status (*td_batch_transform_fn)(void *user, td_tensor **fields, int n_fields, int64_t epoch, int64_t batch);

typedef struct td_dataloader_opts {
    int64_t batch_size;              /* >= 1 */
    bool shuffle;                    /* permute each epoch (see above); false: 0, 1, 2, ... */
    uint64_t seed;                   /* key of the shuffle stream */
    bool drop_last;                  /* drop a final batch smaller than batch_size */
    int num_workers;                 /* 0..64 threads; 0 builds batches in td_dataloader_next */
    int prefetch;                    /* queued batches per worker; 0 means 2 */
    td_device device;                /* where batches are handed out; zero-initialized = CPU */
    td_batch_transform_fn transform; /* may be NULL */
    void *transform_user;
} td_dataloader_opts;

typedef struct td_dataloader td_dataloader;

/* CONSTRUCTOR. A loader over ds (borrowed: it must outlive the loader). No
** epoch runs until td_dataloader_start_epoch. Returns TD_ERR_MISUSE for a NULL
** argument, batch_size < 1 or num_workers outside [0, 64], TD_ERR_OOM.
** *out is NULL on failure. */
TD_API td_status td_dataloader_new(td_dataset *ds, const td_dataloader_opts *opts, td_dataloader **out);

/* DESTRUCTOR. Stop the workers (waiting for the batch each is building),
** release every queued batch and free the loader. Safe mid-epoch. NULL is a
** no-op. */
TD_API void td_dataloader_free(td_dataloader *dl);

/* GETTER. Batches per epoch: ceil(N / batch_size), or floor with drop_last; -1
** for NULL. */
TD_API int64_t td_dataloader_num_batches(const td_dataloader *dl);

/* METHOD. Begin epoch (>= 0) at batch first_batch (0 normally; a resumed run
** passes the batches it already did). Ends any epoch in progress (as
** td_dataloader_free does), computes the permutation and starts the workers.
** Returns TD_ERR_MISUSE for a negative epoch or first_batch outside
** [0, num_batches], TD_ERR_OOM, or a thread creation failure as TD_ERR_OOM. */
TD_API td_status td_dataloader_start_epoch(td_dataloader *dl, int64_t epoch, int64_t first_batch);

/* METHOD. The next batch of the epoch: writes num_fields tensors (+1 each,
** scope-owned as CONSTRUCTOR results) on the loader's device into fields, and
** returns TD_OK. At the end of the epoch it writes NULLs and returns TD_OK:
** test fields[0]. An error while building the batch (in a worker or here) is
** returned here with its message, with fields NULL; the epoch then ends.
** TD_ERR_STATE when no epoch was started. Call from one thread at a time. */
TD_API td_status td_dataloader_next(td_dataloader *dl, td_tensor **fields);

/* ---- Readers ---------------------------------------------------------------
** IDX (the MNIST format): magic 0x0000 <type> <ndim>, then ndim big-endian u32
** sizes, then the elements, big-endian. Files ending in .gz and plain files
** are both read (through zlib). The payload size must match the sizes
** exactly: a truncated file, trailing bytes, a bad magic, a zero ndim or a
** corrupt gzip stream are TD_ERR_FORMAT naming the file and the problem; an
** unopenable file is TD_ERR_IO naming it and the system error. */
typedef enum td_idx_mode {
    TD_IDX_RAW,        /* the file's shape; u8 -> U8, i8/i16/i32 -> I32, f32 -> F32, f64 -> F64 */
    TD_IDX_IMAGES_F32, /* u8 data as F32 [N, prod(other dims)] scaled by 1/255 into [0,1] */
    TD_IDX_LABELS_I64, /* 1-D u8 data as I64 [N] */
} td_idx_mode;

/* CONSTRUCTOR. Read the IDX file at path into a new CPU tensor *out.
** TD_ERR_FORMAT also when the mode does not fit the file (a LABELS read of a
** 3-D file, an IMAGES read of non-u8 data). *out is NULL on failure. */
TD_API td_status td_idx_load(const char *path, td_idx_mode mode, td_tensor **out);

/* CONSTRUCTOR. MNIST or Fashion-MNIST from dir: the files
** {train,t10k}-{images-idx3,labels-idx1}-ubyte with or without .gz. x is U8
** [N,28,28] (or F32 [N,784] in [0,1] when as_f32), y is I64 [N]. Fails as
** td_idx_load, and with TD_ERR_FORMAT when the image and label counts differ.
** *x and *y are NULL on failure. */
TD_API td_status td_mnist_load(const char *dir, bool train, bool as_f32, td_tensor **x, td_tensor **y);

/* CONSTRUCTOR. CIFAR-10 binary files (data_batch_*.bin, test_batch.bin):
** records of 1 label byte (0..9) and 3072 pixel bytes (3 planes of 32x32,
** R, G, B). Reads every path in order into x U8 [N,3,32,32] (F32 scaled to
** [0,1] when as_f32) and y I64 [N]. A size that is not a multiple of 3073
** bytes, or a label above 9, is TD_ERR_FORMAT naming the file (and record).
** *x and *y are NULL on failure. */
TD_API td_status td_cifar10_load(int n_paths, const char *const *paths, bool as_f32, td_tensor **x, td_tensor **y);

/* ---- Transforms -------------------------------------------------------------
** Images are [C,H,W] or batches [B,C,H,W]; results are new tensors on the
** input's device (computed on the host). A wrong rank is TD_ERR_SHAPE. */

/* CONSTRUCTOR. (x - mean[c]) / std[c] per channel c, as torchvision's
** Normalize. x must be floating (TD_ERR_DTYPE otherwise); n_channels must
** equal C (TD_ERR_SHAPE), and every std nonzero (TD_ERR_MISUSE). */
TD_API td_tensor *td_transform_normalize(td_tensor *x, int n_channels, const double *mean, const double *std);

/* CONSTRUCTOR. torchvision's RandomCrop(size=(out_h, out_w), padding=pad):
** zero-pad by pad on every side, then cut out_h x out_w at a random corner.
** Sample b draws counter offset + b of Philox(seed): top = word0 mod
** (H + 2pad - out_h + 1), left = word1 mod (W + 2pad - out_w + 1). Any dtype.
** TD_ERR_SHAPE when the crop is larger than the padded image. */
TD_API td_tensor *td_transform_random_crop(td_tensor *x, int64_t out_h, int64_t out_w, int64_t pad, uint64_t seed,
                                           uint64_t offset);

/* CONSTRUCTOR. Flip sample b left-right when td_philox_uniform(word2) < p,
** word 2 of counter offset + b of Philox(seed) (so a crop and a flip may share
** the offset). p in [0,1] (TD_ERR_MISUSE otherwise). Any dtype. */
TD_API td_tensor *td_transform_hflip(td_tensor *x, double p, uint64_t seed, uint64_t offset);

/* ---- Metrics -----------------------------------------------------------------
** Classification metrics from integer labels in [0, num_classes). The
** confusion matrix cm is num_classes x num_classes, row = true class,
** column = predicted class (scikit-learn's layout). */

typedef struct td_metrics {
    int64_t n;        /* samples counted */
    double accuracy;  /* correct / n (0 when n == 0) */
    double precision; /* macro: mean over classes of TP / (TP + FP), 0 where TP + FP == 0 */
    double recall;    /* macro: mean over classes of TP / (TP + FN), 0 where TP + FN == 0 */
    double f1;        /* macro: mean over classes of 2PR / (P + R), 0 where P + R == 0 */
} td_metrics;

/* METHOD. Add n (pred, target) pairs into cm (+=, so batches accumulate).
** Returns TD_ERR_MISUSE for NULL arrays or num_classes < 1, TD_ERR_INDEX for a
** label outside [0, num_classes) (naming it and its position; cm is then
** unchanged). Thread-safe for distinct cm. */
TD_API td_status td_confusion_update(int64_t *cm, int64_t num_classes, const int64_t *pred, const int64_t *target,
                                     int64_t n);

/* METHOD. As td_confusion_update, from two integer tensors of equal numel
** on any device. TD_ERR_DTYPE for floating tensors, TD_ERR_SHAPE for a numel
** mismatch. */
TD_API td_status td_confusion_update_tensors(int64_t *cm, int64_t num_classes, td_tensor *pred, td_tensor *target);

/* METHOD. Accuracy and the macro precision, recall and F1 of cm into *out.
** TD_ERR_MISUSE for NULL arguments or num_classes < 1. */
TD_API td_status td_metrics_from_confusion(const int64_t *cm, int64_t num_classes, td_metrics *out);

/* ---- Early stopping ------------------------------------------------------------
** As PyTorch Lightning's EarlyStopping: a value improves when it beats the
** best by more than min_delta (below best - min_delta in min mode, above
** best + min_delta in max mode). After patience consecutive epochs without
** improvement, step returns true. A NaN or infinite value stops at once.
** The struct is plain data so a checkpoint can store it. */
typedef enum td_monitor_mode { TD_MODE_MIN = 0, TD_MODE_MAX = 1 } td_monitor_mode;

typedef struct td_early_stopping {
    int64_t patience;
    double min_delta;
    td_monitor_mode mode;
    double best;        /* best value so far (+inf in min mode, -inf in max mode before any) */
    int64_t best_epoch; /* index of the step that gave best, -1 before any */
    int64_t wait;       /* steps since the last improvement */
    int64_t epochs;     /* steps taken */
    bool improved;      /* whether the last step improved (save a "best" checkpoint) */
    bool stop;          /* whether training should stop */
} td_early_stopping;

/* METHOD. Initialize *es. TD_ERR_MISUSE for NULL, patience < 0, min_delta < 0
** or an unknown mode. */
TD_API td_status td_early_stopping_init(td_early_stopping *es, int64_t patience, double min_delta,
                                        td_monitor_mode mode);

/* METHOD. Record one epoch's value; returns es->stop. */
TD_API bool td_early_stopping_step(td_early_stopping *es, double value);

/* ---- Metric logs -------------------------------------------------------------
** One line per epoch, appended and flushed at once, so a crash loses nothing
** already written. CSV: a header line with the keys, written when the file is
** empty; the keys of every line must then equal the header's. JSONL: one JSON
** object per line ({"epoch":1,"loss":0.25}); non-finite values are null.
** Numbers print with 17 significant digits (integers without a fraction). */
typedef enum td_log_format { TD_LOG_CSV = 0, TD_LOG_JSONL = 1 } td_log_format;

typedef struct td_metric_log td_metric_log;

/* CONSTRUCTOR. Open path for appending (created when absent). For CSV a
** non-empty file's first line is taken as its header. TD_ERR_IO naming the
** path and the system error; TD_ERR_MISUSE for NULL or an unknown format.
** *out is NULL on failure. */
TD_API td_status td_metric_log_open(const char *path, td_log_format format, td_metric_log **out);

/* METHOD. Append one line of n (key, value) pairs and flush it.
** TD_ERR_MISUSE for NULL arguments, n < 1, or (CSV) keys that differ from the
** header (naming the first difference); TD_ERR_IO when the write fails. */
TD_API td_status td_metric_log_write(td_metric_log *log, int n, const char *const *keys, const double *values);

/* DESTRUCTOR. Close the file. NULL is a no-op. */
TD_API void td_metric_log_close(td_metric_log *log);

#ifdef __cplusplus
}
#endif
#endif /* TRIDENT_DATA_H */
