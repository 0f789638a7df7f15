/*
** Trident I/O: named-tensor lists, safetensors files and training checkpoints.
**
** safetensors is the format Hugging Face and PyTorch load
** (https://github.com/huggingface/safetensors):
**
**     8 bytes   N, the header length, unsigned 64-bit little-endian
**     N bytes   a JSON object, UTF-8, padded with spaces to a multiple of 8:
**               {"__metadata__": {"key": "value", ...},
**                "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
**     rest      the byte buffer; tensor data is row-major and little-endian,
**               data_offsets are relative to the buffer start
**
** dtype strings: F32 F64 F16 BF16 I32 I64 U8 BOOL (Trident's dtypes). The
** other safetensors dtypes (I8, I16, U16, U32, U64, F8_*) are reported as
** TD_ERR_UNSUPPORTED.
**
** Thread safety: a td_named_tensors list may be read from several threads at
** once but must not be changed concurrently. The file functions share no state.
*/
#ifndef TRIDENT_IO_H
#define TRIDENT_IO_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Named-tensor lists ---------------------------------------------------
** An ordered list of (name, tensor) pairs with unique names, plus string
** metadata (key -> value, unique keys, in insertion order). It is the common
** currency of state dicts, optimizer state and files. The list holds one
** reference to each of its tensors. */
typedef struct td_named_tensors td_named_tensors;

/* CONSTRUCTOR. An empty list, or NULL with TD_ERR_OOM. Free it with
** td_named_tensors_free(). */
TD_API td_named_tensors *td_named_tensors_new(void);

/* DESTRUCTOR. Release every tensor of the list and free it. NULL is a no-op. */
TD_API void td_named_tensors_free(td_named_tensors *list);

/* METHOD. Append (name, t). The list retains t (the caller keeps its own
** reference) and copies name.
** IN list, name: a non-empty string; t: a live tensor on any device.
** Returns TD_ERR_MISUSE for a NULL/empty argument or a name already in the
** list (the message names it), TD_ERR_STATE for a released tensor, TD_ERR_OOM. */
TD_API td_status td_named_tensors_add(td_named_tensors *list, const char *name, td_tensor *t);

/* GETTERS. Number of entries (-1 for NULL); the name and the tensor of entry
** i in insertion order (borrowed; NULL with TD_ERR_INDEX out of range). */
TD_API int64_t td_named_tensors_len(const td_named_tensors *list);
TD_API const char *td_named_tensors_name(const td_named_tensors *list, int64_t i);
TD_API td_tensor *td_named_tensors_at(const td_named_tensors *list, int64_t i);

/* GETTER. The tensor called name (borrowed), or NULL when absent. A missing
** name is not an error and leaves td_last_error() unchanged. */
TD_API td_tensor *td_named_tensors_get(const td_named_tensors *list, const char *name);

/* METHOD. Remove the entry called name, releasing its tensor (del sd[name]).
** TD_ERR_MISUSE when the list has no such entry or an argument is NULL. */
TD_API td_status td_named_tensors_remove(td_named_tensors *list, const char *name);

/* METHOD. Rename entry from to to, in place. TD_ERR_MISUSE when from is
** absent, to is empty or another entry's name; TD_ERR_OOM. */
TD_API td_status td_named_tensors_rename(td_named_tensors *list, const char *from, const char *to);

/* Predicate of td_named_tensors_filter: true keeps the entry. */
typedef bool (*td_name_filter_fn)(const char *name, td_tensor *t, void *ctx);
/* Name map of td_named_tensors_map_names and td_module_load_state_dict_ext:
** returns the new name for name, either name itself or a string written into
** buf (size bytes), or NULL to drop the entry. */
typedef const char *(*td_name_map_fn)(const char *name, void *ctx, char *buf, size_t size);

/*
** CONSTRUCTORS. A new list holding, in order, the entries of list that keep
** accepts (filter), or every entry under the name map gives it (map_names;
** "module.0.weight" -> "0.weight" strips DataParallel's prefix); entries
** dropped by NULL are left out. The tensors are shared (retained), the
** metadata copied; list is unchanged. NULL on failure: TD_ERR_MISUSE for a
** NULL argument or two entries mapped to one name (naming both), TD_ERR_OOM.
** Free the result with td_named_tensors_free().
*/
TD_API td_named_tensors *td_named_tensors_filter(const td_named_tensors *list, td_name_filter_fn keep, void *ctx);
TD_API td_named_tensors *td_named_tensors_map_names(const td_named_tensors *list, td_name_map_fn map, void *ctx);

/* METHOD. Set metadata key to value (both copied; an existing key is
** replaced). Returns TD_ERR_MISUSE for NULL arguments or an empty key,
** TD_ERR_OOM. */
TD_API td_status td_named_tensors_set_meta(td_named_tensors *list, const char *key, const char *value);

/* GETTERS. Metadata value of key (borrowed, NULL when absent); the number of
** metadata entries; the key of entry i (borrowed, insertion order). */
TD_API const char *td_named_tensors_meta(const td_named_tensors *list, const char *key);
TD_API int64_t td_named_tensors_meta_len(const td_named_tensors *list);
TD_API const char *td_named_tensors_meta_key(const td_named_tensors *list, int64_t i);

/* ---- safetensors ---------------------------------------------------------- */

/* METHOD. Write list to path in the safetensors format, as the reference
** writer lays it out: tensors sorted by descending dtype alignment, then by
** name; offsets contiguous from 0; the JSON compact with "__metadata__" first
** (omitted when the list has no metadata) and padded with spaces to a multiple
** of 8 bytes. Tensors may be on any device and have any strides (they are
** copied to the host in row-major order).
**
** The write is atomic: the bytes go to a temporary file in the directory of
** path, which is fsync'd and renamed over path, and the directory is fsync'd.
** A crash leaves either the old file or the new one, never a mix.
**
** Returns TD_OK; TD_ERR_MISUSE for NULL arguments; TD_ERR_IO (naming the path
** and the system error) when a file step fails, in which case the temporary
** file is removed and path is untouched; TD_ERR_OOM. Thread-safe for distinct
** paths. */
TD_API td_status td_safetensors_save(const char *path, const td_named_tensors *list);

/* CONSTRUCTOR. Read the safetensors file at path into a new list whose
** tensors live on dev, in the order of their data offsets, with the
** "__metadata__" entries as metadata. On success *out owns a list the caller
** frees with td_named_tensors_free(); on failure *out is NULL.
**
** The reader enforces the reference rules; each violation is TD_ERR_FORMAT
** with a message naming the file and the problem:
**   - the file holds at least the 8-byte length, and N <= 100,000,000;
**   - the header fits in the file, is valid UTF-8 JSON and starts with '{';
**   - no duplicate names; every entry has a known dtype, a shape of at most
**     TD_MAX_DIMS non-negative integers and two integer data_offsets;
**   - sorted by begin, the offsets start at 0 and each begins where the last
**     ended (no gap, no overlap), with begin <= end;
**   - end - begin == numel * dtype size, computed with overflow checks;
**   - 8 + N + the last end == the file size exactly.
** __metadata__ values must be strings.
** Also TD_ERR_IO when the file cannot be opened or read (naming it and the
** system error), TD_ERR_UNSUPPORTED for a valid safetensors dtype Trident has
** no type for, TD_ERR_UNAVAILABLE for an absent dev, TD_ERR_OOM. */
TD_API td_status td_safetensors_load(const char *path, td_device dev, td_named_tensors **out);

/* ---- torch.save files -----------------------------------------------------
** The zip format torch.save writes since torch 1.6 (.pt, .pth,
** pytorch_model.bin): <dir>/data.pkl, a pickle, and <dir>/data/<key>, each
** storage's little-endian bytes. The pickle is read by a weights-only
** unpickler that runs no code: it accepts tensors
** (torch._utils._rebuild_tensor_v2, _rebuild_parameter) over storages of
** float32/64, float16, bfloat16, int64, int32, uint8 and bool, and dicts,
** OrderedDicts, lists, tuples, numbers, strings, bools and None. Any other
** global or call is refused naming it. */

/* CONSTRUCTOR. Read the torch.save file at path into a new list whose tensors
** live on dev, contiguous (views with offsets and strides are gathered), in
** the pickle's order. Nested dicts, lists and tuples flatten into dotted
** names: {"model": {"fc.weight": t}} gives "model.fc.weight", a list's items
** ".0", ".1", ...; a lone tensor is named "tensor". Numbers, strings and bools
** become metadata under their dotted name ("epoch" -> "3"); None is skipped.
** On success *out owns the list (free with td_named_tensors_free); on failure
** *out is NULL.
** Returns TD_ERR_FORMAT with a one-line message naming the file and the
** problem: not a zip (the legacy pre-1.6 format is not read), a malformed
** archive or CRC mismatch, a truncated or malformed pickle, a refused global
** or opcode ("the pickle names global 'os.system', which a weights-only load
** refuses"), nesting deeper than 64, a tensor reaching past its storage,
** tensors taking more than 4x the file size + 64 MiB in all (views that
** repeat or expand storages),
** a duplicate flattened name; TD_ERR_UNSUPPORTED for a storage dtype Trident
** lacks (int8, int16, complex) or big-endian storages; TD_ERR_IO,
** TD_ERR_OOM, TD_ERR_MISUSE for NULL arguments. Thread-safe. */
TD_API td_status td_torch_load(const char *path, td_device dev, td_named_tensors **out);

/* CONSTRUCTOR. A state dict from either format, chosen by the file's first
** bytes: a zip (torch.save) goes to td_torch_load, anything else to
** td_safetensors_load. Feed the result to td_module_load_state_dict to load a
** module's parameters by torch's key names. Errors as those two. */
TD_API td_status td_weights_load(const char *path, td_device dev, td_named_tensors **out);

/* ---- llm.c token files ------------------------------------------------------
** CONSTRUCTOR. Read an llm.c token file (.bin: a header of 256 little-endian
** int32, [0] = 20240520, [1] = 1, [2] = N, then N little-endian uint16 token
** ids) into *tokens (N ids, malloc'd: free with free()) and *n. On failure
** *tokens is NULL and *n 0. TD_ERR_FORMAT for a short file, a wrong magic or
** a size that does not match N; TD_ERR_UNSUPPORTED for another version;
** TD_ERR_IO, TD_ERR_OOM, TD_ERR_MISUSE for NULL arguments. Thread-safe. */
TD_API td_status td_llmc_tokens_load(const char *path, uint16_t **tokens, int64_t *n);

/* ---- Checkpoints -----------------------------------------------------------
** A checkpoint is one safetensors file holding:
**   - model tensors, named "model.<name>";
**   - optimizer state tensors, named "optim.<name>";
**   - __metadata__: "format" = "trident-checkpoint-1", "model" = model_name,
**     "step", "epoch", "rng_seed", "rng_offset" as decimal strings, and the
**     metadata of the model and optim lists with keys "model.<key>" and
**     "optim.<key>" (for hyperparameters and scheduler state). */
typedef struct td_train_state {
    char model_name[128];    /* for example "mlp"; checked on load */
    td_named_tensors *model; /* state dict; names without the "model." prefix */
    td_named_tensors *optim; /* optimizer state, or NULL for none */
    int64_t step, epoch;     /* optimizer steps taken; epochs completed */
    td_rng_state rng;        /* the default generator (td_rng_get_state()) */
} td_train_state;

/* METHOD. Write ck to path atomically (see td_safetensors_save).
** IN ck: model_name non-empty; model non-NULL; optim may be NULL.
** Returns TD_ERR_MISUSE for a NULL or incomplete ck, else as
** td_safetensors_save. The lists stay owned by the caller. */
TD_API td_status td_train_state_save(const char *path, const td_train_state *ck);

/* CONSTRUCTOR. Read the checkpoint at path into *out, with tensors on dev.
** When expected_model is not NULL the file's model name must equal it; when
** expected is not NULL (for example the state dict of the freshly built
** model) the file's model tensors must have exactly its names, shapes and
** dtypes. A mismatch is TD_ERR_FORMAT naming the first difference ("model
** 'mlp' expected, checkpoint holds 'cnn'", "lacks model.fc1.weight",
** "model.fc1.weight has shape [10,784], expected [10,100]"); a dtype
** mismatch is TD_ERR_DTYPE ("model.fc1.weight has dtype bfloat16, expected
** float32").
** On success out->model and out->optim (empty when the file has no optim
** tensors) are new lists the caller releases with td_train_state_clear(); on
** failure they are NULL. Other errors as td_safetensors_load, and
** TD_ERR_FORMAT for missing or malformed checkpoint metadata. */
TD_API td_status td_train_state_load(const char *path, td_device dev, const char *expected_model,
                                     const td_named_tensors *expected, td_train_state *out);

/* DESTRUCTOR. Free ck->model and ck->optim and set them to NULL. NULL is a no-op. */
TD_API void td_train_state_clear(td_train_state *ck);

/* ---- ONNX export -------------------------------------------------------------
** An ONNX model (opset 17, IR version 8) of one forward pass, for inference
** runtimes (onnxruntime, TensorRT, ...). The forward runs once on example
** inputs, in eval mode and without autograd, and every op it runs is recorded
** (a trace, as torch.onnx.export does): the model has the example inputs'
** shapes and dtypes (static shapes; a new batch size needs a new export).
**   graph inputs   "input" (one) or "input.0", "input.1", ... (several)
**   graph output   "output", the forward's result
**   initializers   the parameters and buffers the forward reads, under their
**                  state_dict names; other tensors it reads that no input or
**                  parameter made (masks, position ids, scalars) as
**                  "const.<k>"; ops on constants alone are folded
** Ops map to ONNX operators of the default domain (MatMul, Gemm, Conv,
** MaxPool, AveragePool, LayerNormalization, Softmax, Gather, Reshape,
** Transpose, Slice, Split, Concat, Where, ...); GELU, SiLU, group norm,
** variance and attention become their decompositions. The models are float32
** (float64 also works; float16/bfloat16 are refused: convert first).
*/

/* The forward that td_onnx_export_fn traces: returns the output (a tensor
** in the current scope, or NULL with the error set) of inputs[0..n). */
typedef td_tensor *(*td_onnx_forward_fn)(void *ctx, int n, td_tensor *const *inputs);

typedef struct td_module td_module;

/* METHOD. Write module as an ONNX model to path, traced on example_inputs.
** IN module         a module; it runs in eval mode (its training flag is
**                   restored afterwards); its state_dict names the initializers
** IN n_inputs       1 (td_module_forward takes one tensor)
** IN example_inputs inputs of the shapes and dtypes the model will be fed
** Returns TD_OK; TD_ERR_MISUSE for a NULL argument or n_inputs != 1;
** TD_ERR_UNSUPPORTED naming the op when the forward runs an op with no ONNX
** mapping ("onnx export: op cross_entropy has no ONNX mapping") or reads an
** output ONNX does not compute; TD_ERR_DTYPE for a float16/bfloat16 model;
** the forward's own error (prefixed); TD_ERR_IO naming path; TD_ERR_OOM;
** TD_ERR_BUSY while another thread exports (one export at a time; other
** threads may run ops meanwhile, they are not recorded). */
TD_API td_status td_onnx_export(td_module *module, int n_inputs, td_tensor *const *example_inputs, const char *path);

/* METHOD. The same for any forward function of n_inputs (1..16) inputs.
** params (may be NULL) names the tensors that become named initializers;
** the caller sets eval mode. Errors as td_onnx_export. */
TD_API td_status td_onnx_export_fn(td_onnx_forward_fn forward, void *ctx, int n_inputs, td_tensor *const *inputs,
                                   const td_named_tensors *params, const char *path);

#ifdef __cplusplus
}
#endif
#endif /* TRIDENT_IO_H */
