/*
** libFuzzer: DLPack import and export (td_from_dlpack, td_from_dlpack_legacy,
** td_to_dlpack, td_to_dlpack_legacy) on hostile producer tensors.
**
** Each input describes one producer tensor: the capsule kind (versioned or
** legacy), its version and flags, ndim, dtype, device, byte_offset, shape and
** strides (each a small value, one of a table of edge values, or raw bytes),
** and where data points (NULL, an aligned or a misaligned host buffer).
** When the bytes the tensor claims fit in 64 KiB, the buffer really holds them
** (ASan then catches any read past them); otherwise data points at a small
** buffer and an accepted tensor is only released, never read.
**
** Checked, with abort() (a crash to libFuzzer) when broken:
**   - the producer's deleter runs exactly once after a successful import (when
**     the last tensor goes), never after a refused one;
**   - a refusal sets a one-line error message;
**   - an accepted, readable tensor holds the producer's elements: its
**     td_contiguous copy equals the harness's own walk of shape and strides;
**   - exporting it again (either capsule, shared or copied) and importing that
**     gives the same elements, and every tensor is released in the end.
** One mode bit sends the same tensor through td_from_foreign instead (the
** import both capsules go through), its dtype any td_dtype value or one past;
** there a failure after the import may have run the deleter (once).
*/
#include "fuzz_util.h"
#include "trident/dlpack.h"

#define FUZZ_MAX_BYTES (64 << 10) /* the producer's buffer when the tensor fits */

FUZZ_INITIALIZE_WITH_SETUP

typedef struct reader {
    const uint8_t *p;
    size_t n;
} reader;

static uint8_t next_u8(reader *r) {
    if (!r->n) return 0;
    r->n--;
    return *r->p++;
}

/* a small value, an edge value or 8 raw bytes */
static int64_t next_i64(reader *r) {
    static const int64_t edges[] = {-1,        -2,          INT64_MIN, INT64_MAX, 1ll << 31, 1ll << 32, (1ll << 32) + 1,
                                    1ll << 40, 1ll << 46,   1ll << 48, 1ll << 59, 1ll << 60, 1ll << 62, 1000,
                                    65536,     -(1ll << 40)};
    uint8_t s = next_u8(r);
    if (s < 0x80) return s & 15;
    if (s < 0xf0) return edges[(s - 0x80) % (sizeof edges / sizeof edges[0])];
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | next_u8(r);
    return (int64_t)v;
}

typedef struct producer {
    DLManagedTensorVersioned v;
    DLManagedTensor legacy;
    int deleted;
} producer;

static void producer_delete(DLManagedTensorVersioned *m) { ((producer *)m->manager_ctx)->deleted++; }
static void producer_delete_legacy(DLManagedTensor *m) { ((producer *)m->manager_ctx)->deleted++; }
static void foreign_delete(void *ctx) { ((producer *)ctx)->deleted++; }

static void fail(const char *what) {
    fprintf(stderr, "fuzz_dlpack: %s (last error: %s)\n", what, td_last_error());
    abort();
}

/* Bytes from data + byte_offset that the tensor reaches, when every stride of
** a dim of size > 1 is >= 0 and nothing overflows; else -1. 0 when empty. */
static int64_t reach_bytes(int ndim, const int64_t *shape, const int64_t *strides, int64_t esize) {
    uint64_t span = 1, contig = 1;
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0) return -1;
    for (int i = 0; i < ndim; i++)
        if (shape[i] == 0) return 0;
    for (int i = ndim - 1; i >= 0; i--) {
        int64_t st = strides ? strides[i] : (int64_t)contig;
        if (shape[i] < 0) return -1;
        if (shape[i] > 1) {
            uint64_t add;
            if (st < 0 || __builtin_mul_overflow((uint64_t)(shape[i] - 1), (uint64_t)st, &add) ||
                __builtin_add_overflow(span, add, &span))
                return -1;
        }
        if (!strides && __builtin_mul_overflow(contig, (uint64_t)shape[i], &contig)) return -1;
    }
    uint64_t bytes;
    if (__builtin_mul_overflow(span, (uint64_t)esize, &bytes) || bytes > INT64_MAX) return -1;
    return (int64_t)bytes;
}

/* The elements of t (CPU, esize bytes each) equal those at base walked by
** shape and strides (NULL: contiguous), in row-major order. */
static void check_elements(td_tensor *t, const uint8_t *base, int ndim, const int64_t *shape, const int64_t *strides,
                           size_t esize) {
    td_tensor *c = td_contiguous(t);
    if (!c) fail("td_contiguous of an accepted import failed");
    const uint8_t *got = (const uint8_t *)(uintptr_t)td_tensor_device_address(c);
    int64_t n = td_numel(c), idx[TD_MAX_DIMS] = {0}, contig[TD_MAX_DIMS];
    for (int64_t i = ndim - 1, s = 1; i >= 0; i--) contig[i] = s, s *= shape[i];
    if (n && !got) fail("no address for a non-empty tensor");
    for (int64_t e = 0; e < n; e++) {
        int64_t off = 0;
        for (int i = 0; i < ndim; i++) off += idx[i] * (strides ? strides[i] : contig[i]);
        if (memcmp(got + e * (int64_t)esize, base + off * (int64_t)esize, esize)) fail("an element differs");
        for (int i = ndim - 1; i >= 0 && ++idx[i] == shape[i]; i--) idx[i] = 0;
    }
}

/* t exported (capsule and flags from the input) and imported back: the same elements as t */
static void round_trip(td_tensor *t, uint8_t how) {
    uint32_t flags = (how & 1 ? TD_DLPACK_COPY : 0) | (how & 2 ? TD_DLPACK_READ_ONLY : 0);
    td_tensor *back = NULL;
    if (how & 4) {
        DLManagedTensor *m = NULL;
        td_status st = td_to_dlpack_legacy(t, flags, NULL, &m);
        if ((st == TD_OK) != !(flags & TD_DLPACK_READ_ONLY) || (st == TD_OK) != (m != NULL))
            fail("legacy export: status and result disagree with the flags");
        if (!m) return;
        back = td_from_dlpack_legacy(m);
        if (!back) m->deleter(m);
    } else {
        DLManagedTensorVersioned *m = NULL;
        if (td_to_dlpack(t, flags, NULL, &m) != TD_OK || !m) fail("export of a CPU tensor failed");
        back = td_from_dlpack(m, flags & TD_DLPACK_READ_ONLY);
        if (!back) m->deleter(m);
    }
    if (!back) fail("importing Trident's own export failed");
    td_tensor *a = td_contiguous(t), *b = td_contiguous(back);
    if (!a || !b || td_numel(a) != td_numel(b) || td_tensor_dtype(a) != td_tensor_dtype(b)) fail("round trip differs");
    size_t bytes = (size_t)td_numel(a) * td_dtype_size(td_tensor_dtype(a));
    if (bytes &&
        memcmp((void *)(uintptr_t)td_tensor_device_address(a), (void *)(uintptr_t)td_tensor_device_address(b), bytes))
        fail("round trip changed the elements");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    reader r = {data, n};
    uint8_t mode = next_u8(&r), how = next_u8(&r);
    bool legacy = mode & 1, import_ro = mode & 2, null_strides = mode & 4, foreign = mode & 32;
    int data_mode = mode >> 3 & 3; /* 0 NULL, 1 aligned, 2 and 3 misaligned */
    uint8_t ver = next_u8(&r), vflags = next_u8(&r);
    int ndim = (int8_t)next_u8(&r);
    uint8_t code = next_u8(&r), bits_sel = next_u8(&r), lanes = next_u8(&r) % 3 == 2 ? 2 : 1;
    static const uint8_t bits_of[] = {8, 16, 32, 64};
    uint8_t bits = bits_sel < 0xf0 ? bits_of[bits_sel & 3] : (uint8_t)(bits_sel << 4);
    static const int devices[] = {kDLCPU, kDLCPU, kDLCUDAHost, kDLCUDA, kDLVulkan, kDLROCM, kDLOneAPI, 0};
    uint8_t dsel = next_u8(&r);
    int dev_type = dsel < 0xf0 ? devices[dsel & 7] : (int)(int8_t)dsel;
    int dev_id = (int8_t)next_u8(&r) % 4;
    uint64_t byte_offset = (uint64_t)next_i64(&r);
    int nd = ndim > 0 ? (ndim < 16 ? ndim : 16) : 0; /* entries the arrays hold: a larger ndim must be refused first */
    int64_t *shape = malloc(sizeof(int64_t) * (size_t)(nd ? nd : 1)), *strides = NULL;
    for (int i = 0; i < nd; i++) shape[i] = next_i64(&r);
    if (!null_strides) {
        strides = malloc(sizeof(int64_t) * (size_t)(nd ? nd : 1));
        for (int i = 0; i < nd; i++) strides[i] = next_i64(&r);
    }

    /* the memory: real when what the tensor claims fits */
    int64_t esize = (bits / 8 ? bits / 8 : 1) * lanes;
    int64_t reach = ndim >= 0 && ndim <= nd ? reach_bytes(ndim, shape, strides, esize) : -1, numel = 1;
    for (int i = 0; reach >= 0 && i < ndim; i++)
        numel = shape[i] <= FUZZ_MAX_BYTES && numel <= FUZZ_MAX_BYTES ? numel * shape[i] : FUZZ_MAX_BYTES + 1;
    size_t mis = data_mode >= 2 ? 1 + (how >> 4) % 7 : 0;
    /* readable: the producer's buffer holds every element, and a contiguous copy is small */
    bool readable = reach >= 0 && byte_offset <= FUZZ_MAX_BYTES && reach <= FUZZ_MAX_BYTES && (data_mode || !reach) &&
                    numel * esize <= FUZZ_MAX_BYTES;
    size_t bufsize = readable ? (size_t)byte_offset + (size_t)reach + mis : 64;
    uint8_t *buf = malloc(bufsize ? bufsize : 1);
    td_dtype foreign_dt = (td_dtype)(code % (TD_DTYPE_COUNT + 1));
    bool is_bool = foreign ? foreign_dt == TD_BOOL : code == kDLBool; /* bools hold 0 or 1 */
    for (size_t i = 0; i < bufsize; i++) buf[i] = is_bool ? (uint8_t)(i * 7 >> 2 & 1) : (uint8_t)(i * 37 & 0x3f);
    void *dptr = data_mode ? buf + mis : NULL;

    producer p = {0};
    DLTensor dl = {dptr, {dev_type, dev_id}, ndim, {code, bits, lanes}, ndim ? shape : NULL, strides, byte_offset};
    p.v = (DLManagedTensorVersioned){{ver & 3, ver >> 2}, &p, producer_delete, vflags & 3, dl};
    p.legacy = (DLManagedTensor){dl, &p, producer_delete_legacy};
    int64_t live = td_debug_live_tensors();

    td_scope_begin();
    td_clear_error();
    td_tensor *t;
    if (foreign) { /* the device as DLPack names it */
        td_device dev = dev_type == kDLCPU ? TD_CPU : TD_CUDA(dev_id);
        t = td_from_foreign(dev, (uint64_t)(uintptr_t)dptr + byte_offset, ndim, ndim ? shape : NULL, strides,
                            foreign_dt, foreign_delete, &p);
        if (t && td_dtype_size(td_tensor_dtype(t)) != (size_t)esize) readable = false; /* the buffer was sized off */
    } else
        t = legacy ? td_from_dlpack_legacy(&p.legacy) : td_from_dlpack(&p.v, import_ro ? TD_DLPACK_READ_ONLY : 0);
    if (!t) {
        const char *msg = td_last_error();
        if (p.deleted > (foreign ? 1 : 0)) fail("a refused import ran the producer's deleter");
        if (!msg[0] || strchr(msg, '\n') || strlen(msg) >= 300) fail("a refused import's message breaks the rules");
    } else if (readable && td_device_equal(td_tensor_device(t), TD_CPU)) {
        if (td_numel(t) > 0)
            check_elements(t, buf + mis + byte_offset, ndim, shape, strides, td_dtype_size(td_tensor_dtype(t)));
        round_trip(t, how);
        if (td_dtype_is_float(td_tensor_dtype(t)) && !td_sum(t, 0, NULL, false)) fail("td_sum of an accepted import");
    }
    td_scope_end();
    if (t ? p.deleted != 1 : p.deleted > (foreign ? 1 : 0)) fail("the producer's deleter did not run exactly once");
    if (td_debug_live_tensors() != live) fail("a tensor outlived its scope");
    td_clear_error();
    free(buf);
    free(shape);
    free(strides);
    return 0;
}
