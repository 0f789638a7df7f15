/*
** torch.save's zip format, read without running code: the zip container
** (torch_zip.c) and the weights-only unpickler (torch_unpickle.c), which
** td_torch_load (torch_load.c) joins.
** defines: tz_archive, tz_entry, tz_open, tz_close, tz_find, tz_read;
**          tp_value, tp_kind, tp_unpickle, tp_free.
*/
#ifndef TRIDENT_IO_TORCH_FORMAT_H
#define TRIDENT_IO_TORCH_FORMAT_H

#include "core/internal.h"

/* ---- the zip container --------------------------------------------------- */

typedef struct tz_entry {
    char *name;
    uint64_t data;         /* offset of the entry's bytes in the file (after its local header) */
    uint64_t csize, usize; /* stored and uncompressed sizes */
    uint32_t crc;          /* CRC-32 of the uncompressed bytes */
    int method;            /* 0 stored, 8 deflated */
} tz_entry;

typedef struct tz_archive {
    int fd;
    const char *path; /* quoted, for messages */
    uint64_t size;
    tz_entry *e;
    int64_t n;
} tz_archive;

/* Open path (qpath: its quoted form, kept borrowed for messages) and read its
** central directory; every entry's bounds are checked against the file.
** TD_ERR_IO, TD_ERR_FORMAT (not a zip, malformed), TD_ERR_UNSUPPORTED
** (encrypted entries, methods other than stored and deflate), TD_ERR_OOM. */
td_status tz_open(const char *path, const char *qpath, tz_archive *z);
void tz_close(tz_archive *z);
/* The entry called name, or NULL. */
const tz_entry *tz_find(const tz_archive *z, const char *name);
/* Entry e's usize uncompressed bytes into dst, CRC-checked (TD_ERR_FORMAT on
** a mismatch or a bad deflate stream). */
td_status tz_read(const tz_archive *z, const tz_entry *e, void *dst);

/* ---- the weights-only unpickler -------------------------------------------- */

typedef enum tp_kind {
    TP_NONE,
    TP_BOOL,
    TP_INT,
    TP_FLOAT,
    TP_STR,
    TP_TUPLE,
    TP_LIST,
    TP_DICT,    /* items: key, value, key, value, ... (n counts items) */
    TP_GLOBAL,  /* an allowed global: s is "module name" */
    TP_STORAGE, /* persistent_load('storage', cls, key, location, numel): s is the key */
    TP_TENSOR,  /* torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...) */
    TP_MARK,    /* the stack's MARK (never in a finished value) */
} tp_kind;

typedef struct tp_value {
    tp_kind kind;
    int64_t i; /* bool, int; storage: numel; tensor: storage offset */
    double f;
    char *s; /* str, global, storage key */
    size_t len;
    struct tp_value **items; /* tuple, list, dict */
    int64_t n, cap;
    td_dtype dtype;           /* storage: element type (TD_DTYPE_COUNT: a storage class Trident lacks) */
    const char *storage_type; /* storage: the class name, for messages */
    struct tp_value *storage; /* tensor */
    int ndim;
    int64_t size[TD_MAX_DIMS], stride[TD_MAX_DIMS];
} tp_value;

typedef struct tp_arena tp_arena;

#define TP_MAX_PICKLE (256ull << 20) /* data.pkl larger than this is refused */
#define TP_MAX_VALUES (1 << 22)      /* objects one pickle may make */
#define TP_MAX_MEMO   (1 << 22)      /* memo ids */
#define TP_MAX_DEPTH  64             /* nesting of containers in the result */

/* Unpickle data[0..n) (qpath names the file in messages). Only the opcodes
** torch.save writes (protocol 2, and a few of protocols 3-4) and only the
** globals collections.OrderedDict, torch._utils._rebuild_tensor_v2,
** torch._utils._rebuild_parameter and torch.<Type>Storage are accepted; any
** other global is TD_ERR_FORMAT naming it. On success *root is owned by
** *arena (free both with tp_free). */
td_status tp_unpickle(const uint8_t *data, size_t n, const char *qpath, tp_arena **arena, tp_value **root);
void tp_free(tp_arena *arena);

#endif /* TRIDENT_IO_TORCH_FORMAT_H */
