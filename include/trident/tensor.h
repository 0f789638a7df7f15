/*
** Trident tensors: dtypes, devices, creation, views, scopes.
**
** A td_tensor is an opaque, refcounted handle onto a refcounted storage.
** Views (reshape, permute, slice, expand, ...) share the storage of their base.
**
** Ownership: functions marked CONSTRUCTOR return a +1 reference. Inside a
** scope (td_scope_begin) that reference belongs to the scope and is released by
** td_scope_end() unless td_keep() was called on it. Outside any scope the caller
** must td_release() it. Functions marked GETTER return borrowed values.
**
** Errors: a CONSTRUCTOR returns NULL on failure and sets td_last_error().
** Given a NULL tensor argument it returns NULL and keeps the first error; a
** released tensor argument gives TD_ERR_STATE.
**
** Threads: td_retain/td_release are atomic, and the error, scopes and grad
** mode are per thread. Other uses of one tensor from several threads at once
** must not write it (td_copy_, in-place updates) while another thread reads.
*/
#ifndef TRIDENT_TENSOR_H
#define TRIDENT_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TD_MAX_DIMS 8

/* X(NAME, name, bytes, is_float, is_signed) */
#define TD_DTYPE_LIST(X)                                                                                               \
    X(F32, "float32", 4, 1, 1)                                                                                         \
    X(F64, "float64", 8, 1, 1)                                                                                         \
    X(F16, "float16", 2, 1, 1)                                                                                         \
    X(BF16, "bfloat16", 2, 1, 1)                                                                                       \
    X(I32, "int32", 4, 0, 1)                                                                                           \
    X(I64, "int64", 8, 0, 1)                                                                                           \
    X(U8, "uint8", 1, 0, 0)                                                                                            \
    X(BOOL, "bool", 1, 0, 0)

typedef enum td_dtype {
#define TD_DTYPE_ENUM_(N, s, b, f, sg) TD_##N,
    TD_DTYPE_LIST(TD_DTYPE_ENUM_)
#undef TD_DTYPE_ENUM_
        TD_DTYPE_COUNT
} td_dtype;

/* GETTERS of a dtype; thread-safe; an invalid dt sets no error. */
TD_API const char *td_dtype_name(td_dtype dt); /* "float32"; "?" if invalid */
TD_API size_t td_dtype_size(td_dtype dt);      /* bytes per element; 0 if invalid */
TD_API bool td_dtype_is_float(td_dtype dt);    /* f32, f64, f16, bf16 */

/* METHOD. Result dtype of a binary op, by PyTorch's promotion rules on tensors:
** bool < integer < floating, and within a class the wider type wins
** (u8 with a signed int gives the signed one; f16 with bf16 gives f32). */
TD_API td_dtype td_dtype_promote(td_dtype a, td_dtype b);

/* ---- Devices ---------------------------------------------------------- */

typedef enum td_device_type {
    TD_DEVICE_CPU = 0,
    TD_DEVICE_CUDA = 1,
    TD_DEVICE_VULKAN = 2,
    TD_DEVICE_TYPE_COUNT
} td_device_type;

typedef struct td_device {
    int type;  /* td_device_type */
    int index; /* ordinal within that backend */
} td_device;

#define TD_CPU       ((td_device){TD_DEVICE_CPU, 0})
#define TD_CUDA(i)   ((td_device){TD_DEVICE_CUDA, (i)})
#define TD_VULKAN(i) ((td_device){TD_DEVICE_VULKAN, (i)})

/* METHOD. Whether a and b are the same device (type and index). */
TD_API bool td_device_equal(td_device a, td_device b);

/* METHOD. Write "cpu", "cuda:0", "vulkan:1" into buf (always NUL-terminated).
** Returns buf. */
TD_API const char *td_device_str(td_device d, char *buf, size_t n);

/* METHOD. Parse "cpu", "cuda", "cuda:1", "vulkan:0" or "auto" into *out.
** "auto" picks the best available device: cuda, then vulkan, then cpu; a
** software Vulkan device (td_device_info.emulated, e.g. lavapipe) is skipped.
** Returns TD_OK, TD_ERR_MISUSE for an unknown string, or TD_ERR_UNAVAILABLE if
** the named backend or ordinal does not exist (the message says why). */
TD_API td_status td_device_parse(const char *s, td_device *out);

/* METHOD. Whether a device can run ops now (backend loaded, ordinal valid). */
TD_API bool td_device_available(td_device d);

/* ---- Tensors ---------------------------------------------------------- */

typedef struct td_tensor td_tensor;

/* CONSTRUCTOR. Uninitialized tensor of the given shape. ndim may be 0 (a
** scalar); sizes may be 0 (an empty tensor). Fails with TD_ERR_MISUSE for a
** negative size, ndim outside [0, 8] or a NULL shape with ndim > 0,
** TD_ERR_DTYPE for an invalid dtype, TD_ERR_OOM when allocation fails or the
** byte count overflows, TD_ERR_UNAVAILABLE for a device that is not present.
** td_zeros/td_ones/td_full fill the tensor; TD_ERR_UNSUPPORTED when the
** device's backend cannot fill that dtype. */
TD_API td_tensor *td_empty(int ndim, const int64_t *shape, td_dtype dt, td_device dev);
TD_API td_tensor *td_zeros(int ndim, const int64_t *shape, td_dtype dt, td_device dev);
TD_API td_tensor *td_ones(int ndim, const int64_t *shape, td_dtype dt, td_device dev);
TD_API td_tensor *td_full(int ndim, const int64_t *shape, double value, td_dtype dt, td_device dev);
/* CONSTRUCTOR. Same shape, dtype and device as t. */
TD_API td_tensor *td_empty_like(td_tensor *t);
TD_API td_tensor *td_zeros_like(td_tensor *t);
TD_API td_tensor *td_full_like(td_tensor *t, double value);
/* CONSTRUCTOR. 0-d tensor holding value. */
TD_API td_tensor *td_scalar(double value, td_dtype dt, td_device dev);

/* CONSTRUCTOR. Copy numel(shape) elements of dtype dt from host memory into a
** new contiguous tensor on dev. data may be NULL only when numel is 0
** (TD_ERR_MISUSE otherwise); the errors of td_empty otherwise. */
TD_API td_tensor *td_from_data(const void *data, int ndim, const int64_t *shape, td_dtype dt, td_device dev);

/* CONSTRUCTOR. Values start, start+step, ... below end (above for step < 0).
** Fails with TD_ERR_MISUSE when step is 0, a bound is not finite or the count
** is negative, and TD_ERR_OOM for more than 1e15 elements. */
TD_API td_tensor *td_arange(double start, double end, double step, td_dtype dt, td_device dev);

/* CONSTRUCTOR. Uniform [0,1) and standard normal samples from the Philox4x32-10
** stream of (seed, offset); see docs/ARCHITECTURE.md for the exact mapping, which
** every backend reproduces bit for bit. Float dtypes only (TD_ERR_DTYPE). */
TD_API td_tensor *td_rand(int ndim, const int64_t *shape, uint64_t seed, uint64_t offset, td_dtype dt, td_device dev);
TD_API td_tensor *td_randn(int ndim, const int64_t *shape, uint64_t seed, uint64_t offset, td_dtype dt, td_device dev);

/* METHOD. +1 reference. Returns t; NULL passes through. */
TD_API td_tensor *td_retain(td_tensor *t);
/* DESTRUCTOR. -1 reference; the tensor is freed at 0. NULL is a no-op. */
TD_API void td_release(td_tensor *t);

/* GETTERS. On NULL (TD_ERR_MISUSE) or a released tensor (TD_ERR_STATE) they
** set the error when none is stored (never overwriting an earlier one) and return -1 (ndim, numel, size, stride,
*storage_offset),
** NULL (shape, strides), TD_DTYPE_COUNT (dtype), {-1, -1} (device) or false
** (is_contiguous). A dim out of range gives -1 with TD_ERR_INDEX. */
TD_API int td_ndim(const td_tensor *t);
TD_API int64_t td_size(const td_tensor *t, int dim);   /* dim may be negative */
TD_API int64_t td_stride(const td_tensor *t, int dim); /* in elements */
TD_API const int64_t *td_shape(const td_tensor *t);    /* borrowed, ndim entries */
TD_API const int64_t *td_strides(const td_tensor *t);  /* borrowed, in elements */
TD_API int64_t td_numel(const td_tensor *t);
TD_API td_dtype td_tensor_dtype(const td_tensor *t);
TD_API td_device td_tensor_device(const td_tensor *t);
TD_API bool td_is_contiguous(const td_tensor *t);
TD_API int64_t td_storage_offset(const td_tensor *t); /* in elements */

/* METHOD. Copy the tensor's elements, in row-major order, into host memory
** (dst, OUT) as dtype dt (converting). Waits for pending device work. Fails
** with TD_ERR_MISUSE if nbytes is smaller than numel * td_dtype_size(dt). */
TD_API td_status td_copy_to_host(td_tensor *t, void *dst, size_t nbytes, td_dtype dt);

/* METHOD. Read one element as double (waits for the device). Returns NAN and
** sets the error on failure: td_item TD_ERR_SHAPE when numel is not 1, td_get
** TD_ERR_INDEX for an index out of range and TD_ERR_MISUSE for a NULL idx. */
TD_API double td_item(td_tensor *t);                    /* numel must be 1 */
TD_API double td_get(td_tensor *t, const int64_t *idx); /* idx has ndim entries */

/* METHOD. Copy src into dst elementwise, with broadcasting of src and dtype
** conversion. dst may be a view, so this writes through to its base. */
TD_API td_status td_copy_(td_tensor *dst, td_tensor *src);

/* CONSTRUCTOR. t on device dev. Returns t itself (+1) when already there. */
TD_API td_tensor *td_to(td_tensor *t, td_device dev);
/* CONSTRUCTOR. t converted to dtype dt. Returns t itself (+1) when equal. */
TD_API td_tensor *td_cast(td_tensor *t, td_dtype dt);
/* CONSTRUCTOR. A contiguous tensor with t's values: t itself (+1) when it is
** already contiguous, else a copy. */
TD_API td_tensor *td_contiguous(td_tensor *t);
/* CONSTRUCTOR. A contiguous copy that never shares storage with t. */
TD_API td_tensor *td_clone(td_tensor *t);

/* ---- Views: each shares t's storage and retains it ----------------------
** Negative dims count from the end. Fails with TD_ERR_INDEX for a dim out of
** range and TD_ERR_SHAPE for incompatible sizes, naming both. */

/* CONSTRUCTOR. View with a new shape of the same numel. One entry may be -1.
** td_view needs compatible strides; td_reshape copies when it must. */
TD_API td_tensor *td_view(td_tensor *t, int ndim, const int64_t *shape);
TD_API td_tensor *td_reshape(td_tensor *t, int ndim, const int64_t *shape);
TD_API td_tensor *td_flatten(td_tensor *t, int start_dim, int end_dim);
/* CONSTRUCTOR. perm is a permutation of [0, ndim). */
TD_API td_tensor *td_permute(td_tensor *t, const int *perm);
TD_API td_tensor *td_transpose(td_tensor *t, int dim0, int dim1);
/* CONSTRUCTOR. Elements start, start+step, ... below end along dim, with
** Python's clamping of start/end (negative values count from the end). step > 0. */
TD_API td_tensor *td_slice(td_tensor *t, int dim, int64_t start, int64_t end, int64_t step);
/* CONSTRUCTOR (n of them). torch.split(t, sizes, dim): out[i] (OUT, n entries)
** is the view of the next sizes[i] elements along dim; the sizes are >= 0 and
** sum to t's size there. Autograd records one node for all n, whose backward
** concatenates their gradients (zeros for one without), instead of a zero
** tensor per slice. TD_ERR_MISUSE for n < 1 or NULL arrays, TD_ERR_SHAPE for
** sizes that do not sum to the dim's size, TD_ERR_INDEX for a bad dim or a
** 0-d t; out[] is then all NULL. */
TD_API td_status td_split(td_tensor *t, int n, const int64_t *sizes, int dim, td_tensor **out);
/* CONSTRUCTOR. Drop dim (which must have size 1, else TD_ERR_SHAPE). */
TD_API td_tensor *td_squeeze(td_tensor *t, int dim);
TD_API td_tensor *td_unsqueeze(td_tensor *t, int dim);
/* CONSTRUCTOR. Broadcast to shape (stride 0 on expanded dims). -1 keeps a size. */
TD_API td_tensor *td_expand(td_tensor *t, int ndim, const int64_t *shape);
/* CONSTRUCTOR. Select index along dim, removing that dim. */
TD_API td_tensor *td_select(td_tensor *t, int dim, int64_t index);

/* METHOD. Broadcast shapes a and b as NumPy does into out (TD_MAX_DIMS
** entries). Returns TD_ERR_SHAPE with both shapes in the message on failure. */
TD_API td_status td_broadcast_shapes(int na, const int64_t *a, int nb, const int64_t *b, int *nout, int64_t *out);

/* ---- Scopes ------------------------------------------------------------
** td_scope_begin() opens an autorelease scope on this thread; td_scope_end()
** releases every tensor reference created inside it (by CONSTRUCTORs) that was
** not passed to td_keep(). Scopes nest. METHODs; td_scope_end() with no open
** scope sets TD_ERR_MISUSE and does nothing. */
TD_API void td_scope_begin(void);
TD_API void td_scope_end(void);
/* METHOD. Take t out of the innermost scope's care: the caller now owns the
** reference (and must td_release it). Returns t; NULL passes through, and a
** t that no scope holds is returned unchanged. */
TD_API td_tensor *td_keep(td_tensor *t);

/* ---- The default generator: a (seed, offset) pair shared by the process.
** Ops that draw random numbers without an explicit seed (nn.Dropout, init)
** take offsets from it, so td_manual_seed() makes a run reproducible and a
** checkpoint can save and restore the stream. METHODs; thread-safe. */
typedef struct td_rng_state {
    uint64_t seed;
    uint64_t offset; /* next unused Philox counter */
} td_rng_state;
TD_API void td_manual_seed(uint64_t seed); /* seed, offset 0 */
TD_API td_rng_state td_rng_get_state(void);
TD_API void td_rng_set_state(td_rng_state s);
/* METHOD. Reserve counters for n values: returns the seed and the first
** offset to use, and advances the default generator past them. */
TD_API td_rng_state td_rng_reserve(uint64_t n);
/* METHOD. Philox4x32-10, the RNG every backend reproduces (see docs/ARCHITECTURE.md):
** element i of a stream (seed, offset) uses counter (offset + i/4) and word i%4. */
TD_API void td_philox4x32(uint64_t seed, uint64_t counter, uint32_t out[4]);
/* uniform float in [0,1) from a 32-bit word: (w >> 8) * 2^-24 */
static inline float td_philox_uniform(uint32_t w) { return (float)(w >> 8) * (1.0f / 16777216.0f); }

/* ---- Debug aids (used by the conformance tests) ------------------------ */
enum {
    TD_DEBUG_POISON = 1, /* fill new buffers with NaN (0xFF bytes) */
    TD_DEBUG_GUARDS = 2, /* guard bytes around buffers, checked on free */
};
/* METHOD. Set debug flags for buffers allocated from now on (process-wide). */
TD_API void td_debug_set(int flags);
/* METHOD. Number of guard-byte violations seen so far (process-wide). */
TD_API int td_debug_guard_failures(void);
/* METHOD. Number of live tensor handles (process-wide), for leak tests. */
TD_API int64_t td_debug_live_tensors(void);

/* METHOD. Print shape, dtype, device and up to 'max' values to stderr. */
TD_API void td_print(td_tensor *t, const char *name, int max);

#ifdef __cplusplus
}
#endif
#endif /* TRIDENT_TENSOR_H */
