/*
** trident._C: the CPython extension under the trident package (python/trident).
**
** Built on the stable ABI (Py_LIMITED_API, Python >= 3.11), so one
** _C.abi3.so serves every later Python. A tensor is a PyCapsule named
** "trident.tensor" that owns one reference (released when the capsule dies);
** the Python class trident.Tensor holds it as `_h`.
**
** The functions of tensor.h, ops.h, autograd.h, device.h and nn.h are generated from
** those headers (gen_ops.py -> gen_ops.h, included below); this file has the
** argument converters they use and what a generator cannot write: DLPack
** capsules, permute, the gradient functions, kernels, streams and devices.
** Every failure raises trident.TridentError with Trident's message; nothing
** here aborts the interpreter.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include <trident/trident.h>

static PyObject *TridentError;
static PyObject *str_h; /* "_h", interned: trident.Tensor's handle attribute */

/* ---- results ---- */

/* The C library's advice in Python's words: (C phrase, Python phrase), then any other "td_" prefix dropped. */
static const char *const python_words[][2] = {
    {"move them with td_to", "move them with .to(device), e.g. .to('vulkan:0')"},
    {"use td_reshape", "use .reshape()"},
    {"td_ne(cond, zero)", "cond != 0"},
    {"cat: xs[", "cat: tensors["},
    {"] but xs[0] is", "] but tensors[0] is"},
    {"does not match xs[0]", "does not match tensors[0]"},
    {"index_select: idx must", "index_select: index must"},
    {"td_", ""},
};

/* Raise TridentError(message) with .status (the status name, "shape mismatch") and, when given, .log. */
static PyObject *raise_error(const char *msg, td_status st, const char *log) {
    PyObject *text = PyUnicode_DecodeUTF8(msg, (Py_ssize_t)strlen(msg), "replace");
    for (size_t i = 0; text && i < sizeof python_words / sizeof *python_words; i++) {
        PyObject *from = PyUnicode_FromString(python_words[i][0]), *to = PyUnicode_FromString(python_words[i][1]);
        PyObject *r = from && to ? PyUnicode_Replace(text, from, to, -1) : NULL;
        Py_XDECREF(from);
        Py_XDECREF(to);
        Py_DECREF(text);
        text = r;
    }
    PyObject *e = text ? PyObject_CallFunctionObjArgs(TridentError, text, NULL) : NULL;
    Py_XDECREF(text);
    if (!e) return NULL;
    PyObject *s = PyUnicode_FromString(td_status_str(st == TD_OK ? TD_ERR_MISUSE : st));
    PyObject *lg = log ? PyUnicode_DecodeUTF8(log, (Py_ssize_t)strlen(log), "replace") : Py_NewRef(Py_None);
    if (s && lg && !PyObject_SetAttrString(e, "status", s) && !PyObject_SetAttrString(e, "log", lg))
        PyErr_SetObject(TridentError, e);
    Py_XDECREF(s);
    Py_XDECREF(lg);
    Py_DECREF(e);
    return NULL;
}

/* Raise Trident's last error. */
static PyObject *raise_last(void) { return raise_error(td_last_error(), td_last_status(), NULL); }

static void tensor_capsule_free(PyObject *cap) { td_release(PyCapsule_GetPointer(cap, "trident.tensor")); }

/* A +1 tensor into a capsule that owns it; NULL raises Trident's error. */
static PyObject *ret_tensor(td_tensor *t) {
    if (!t) return raise_last();
    PyObject *cap = PyCapsule_New(t, "trident.tensor", tensor_capsule_free);
    if (!cap) td_release(t);
    return cap;
}

static void module_capsule_free(PyObject *cap) { td_module_free(PyCapsule_GetPointer(cap, "trident.module")); }

/* A new module (a td_*_new constructor's) into a capsule that frees it; NULL raises Trident's error. */
static PyObject *ret_module(td_module *m) {
    if (!m) return raise_last();
    PyObject *cap = PyCapsule_New(m, "trident.module", module_capsule_free);
    if (!cap) td_module_free(m);
    return cap;
}

static PyObject *ret_status(td_status st) { return st == TD_OK ? Py_NewRef(Py_None) : raise_last(); }

/* ---- arguments: each returns 0, or -1 with a Python exception naming the function and parameter ---- */

static int bad_arg(const char *fn, const char *name, const char *want, PyObject *o) {
    PyObject *type = PyObject_Type(o);
    PyObject *tname = type ? PyObject_GetAttrString(type, "__name__") : NULL;
    const char *s = tname ? PyUnicode_AsUTF8AndSize(tname, NULL) : NULL;
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "%s(): argument '%s' must be %s, not %s", fn, name, want, s ? s : "?");
    Py_XDECREF(tname);
    Py_XDECREF(type);
    return -1;
}

/* A trident.Tensor (its _h), a tensor capsule, or None (NULL: an optional input). */
static int arg_tensor(PyObject *o, const char *fn, const char *name, td_tensor **out) {
    *out = NULL;
    if (o == Py_None) return 0;
    if (PyCapsule_IsValid(o, "trident.tensor")) {
        *out = PyCapsule_GetPointer(o, "trident.tensor");
        return 0;
    }
    PyObject *h = PyObject_GetAttr(o, str_h);
    if (h && PyCapsule_IsValid(h, "trident.tensor")) {
        *out = PyCapsule_GetPointer(h, "trident.tensor");
        Py_DECREF(h); /* o keeps it */
        return 0;
    }
    Py_XDECREF(h);
    PyErr_Clear();
    return bad_arg(fn, name, "a trident.Tensor", o);
}

/* A module capsule (trident.nn's views of the C layers hold one as `_cm`). */
static int arg_module(PyObject *o, const char *fn, const char *name, td_module **out) {
    *out = PyCapsule_IsValid(o, "trident.module") ? PyCapsule_GetPointer(o, "trident.module") : NULL;
    return *out ? 0 : bad_arg(fn, name, "a C module (a trident.nn layer's _cm)", o);
}

static int arg_str(PyObject *o, const char *fn, const char *name, const char **out) {
    *out = PyUnicode_Check(o) ? PyUnicode_AsUTF8AndSize(o, NULL) : NULL;
    return *out ? 0 : (PyErr_Clear(), bad_arg(fn, name, "a str", o));
}

static int arg_double(PyObject *o, const char *fn, const char *name, double *out) {
    *out = PyFloat_AsDouble(o);
    if (*out == -1.0 && PyErr_Occurred()) return PyErr_Clear(), bad_arg(fn, name, "a number", o);
    return 0;
}

static int arg_i64(PyObject *o, const char *fn, const char *name, int64_t *out) {
    if (PyFloat_Check(o)) return bad_arg(fn, name, "an int", o);
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred()) return PyErr_Clear(), bad_arg(fn, name, "an int (64 bits)", o);
    *out = v;
    return 0;
}

static int arg_u64(PyObject *o, const char *fn, const char *name, uint64_t *out) {
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred())
        return PyErr_Clear(), bad_arg(fn, name, "an int in [0, 2^64)", o);
    *out = v;
    return 0;
}

static int arg_int(PyObject *o, const char *fn, const char *name, int *out) {
    int64_t v = 0;
    if (arg_i64(o, fn, name, &v)) return -1;
    if (v < INT32_MIN || v > INT32_MAX) return bad_arg(fn, name, "an int (32 bits)", o);
    *out = (int)v;
    return 0;
}

static int arg_bool(PyObject *o, const char *fn, const char *name, bool *out) {
    int v = PyObject_IsTrue(o);
    if (v < 0) return PyErr_Clear(), bad_arg(fn, name, "a bool", o);
    *out = v;
    return 0;
}

/* A dtype: its td_dtype value (trident.float32 is an int subclass), its name ("float32"), or a torch or NumPy
** dtype of that name (torch.float32, str "torch.float32"; numpy.float32, __name__ "float32"). */
static int arg_dtype(PyObject *o, const char *fn, const char *name, td_dtype *out) {
    if (!PyLong_Check(o)) {
        PyObject *n = PyUnicode_Check(o) ? Py_NewRef(o)
                      : PyType_Check(o)  ? PyObject_GetAttrString(o, "__name__")
                                         : PyObject_Str(o);
        const char *s = n ? PyUnicode_AsUTF8AndSize(n, NULL) : NULL;
        if (s && !strncmp(s, "torch.", 6)) s += 6;
        if (s && !strcmp(s, "bool_")) s = "bool";
        for (int d = 0; s && d < TD_DTYPE_COUNT; d++)
            if (!strcmp(s, td_dtype_name((td_dtype)d))) return Py_DECREF(n), *out = (td_dtype)d, 0;
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s(): argument '%s': unknown dtype '%s'", fn, name, s ? s : "?");
        Py_XDECREF(n);
        return -1;
    }
    int v;
    if (arg_int(o, fn, name, &v)) return -1;
    if (v < 0 || v >= TD_DTYPE_COUNT) return bad_arg(fn, name, "a trident dtype", o);
    *out = (td_dtype)v;
    return 0;
}

/* A device: "cpu", "cuda:0", "vulkan", "auto", or an object whose str() is one. */
static int arg_device(PyObject *o, const char *fn, const char *name, td_device *out) {
    PyObject *s = PyObject_Str(o);
    const char *c = s ? PyUnicode_AsUTF8AndSize(s, NULL) : NULL;
    if (!c) {
        Py_XDECREF(s);
        return PyErr_Clear(), bad_arg(fn, name, "a device string", o);
    }
    td_status st = td_device_parse(c, out);
    Py_DECREF(s);
    if (st != TD_OK) return raise_last(), -1;
    return 0;
}

/* A sequence of at most TD_MAX_DIMS ints. */
static int arg_i64list(PyObject *o, const char *fn, const char *name, int *n, int64_t *v) {
    PyObject *seq = PySequence_Check(o) ? PySequence_Tuple(o) : NULL;
    if (!seq) return PyErr_Clear(), bad_arg(fn, name, "a sequence of ints", o);
    Py_ssize_t len = PyTuple_Size(seq);
    if (len > TD_MAX_DIMS) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "%s: argument '%s' has %zd entries; at most %d", fn, name, len, TD_MAX_DIMS);
        return -1;
    }
    for (Py_ssize_t i = 0; i < len; i++)
        if (arg_i64(PyTuple_GetItem(seq, i), fn, name, &v[i])) return Py_DECREF(seq), -1;
    *n = (int)len;
    Py_DECREF(seq);
    return 0;
}

static int arg_intlist(PyObject *o, const char *fn, const char *name, int *n, int *v) {
    int64_t w[TD_MAX_DIMS] = {0};
    if (arg_i64list(o, fn, name, n, w)) return -1;
    for (int i = 0; i < *n; i++) {
        if (w[i] < INT32_MIN || w[i] > INT32_MAX) return bad_arg(fn, name, "a sequence of 32-bit ints", o);
        v[i] = (int)w[i];
    }
    return 0;
}

/* An int or a pair of ints. */
static int arg_int2(PyObject *o, const char *fn, const char *name, int *v) {
    if (PyLong_Check(o)) return arg_int(o, fn, name, &v[0]) ? -1 : (v[1] = v[0], 0);
    int n;
    if (arg_intlist(o, fn, name, &n, v)) return -1;
    return n == 2 ? 0 : bad_arg(fn, name, "an int or a pair of ints", o);
}

/* A sequence of tensors into a PyMem array (freed by the caller, also on failure). */
static int arg_tensorlist(PyObject *o, const char *fn, const char *name, int *n, td_tensor ***v) {
    PyObject *seq = PySequence_Check(o) ? PySequence_Tuple(o) : NULL;
    if (!seq) return PyErr_Clear(), bad_arg(fn, name, "a sequence of trident.Tensor", o);
    Py_ssize_t len = PyTuple_Size(seq);
    *n = (int)len;
    *v = PyMem_Calloc(len ? (size_t)len : 1, sizeof **v);
    if (!*v) return Py_DECREF(seq), PyErr_NoMemory(), -1;
    for (Py_ssize_t i = 0; i < len; i++)
        if (arg_tensor(PyTuple_GetItem(seq, i), fn, name, &(*v)[i])) return Py_DECREF(seq), -1;
    Py_DECREF(seq);
    return 0;
}

#include "gen_ops.h"

/* ---- what the generator cannot write ---- */

/* info(t) -> (shape, strides, dtype, device, storage_offset) */
static PyObject *py_info(PyObject *self, PyObject *o) {
    (void)self;
    td_tensor *t = NULL;
    if (arg_tensor(o, "info", "t", &t)) return NULL;
    if (!t) return bad_arg("info", "t", "a trident.Tensor", o), NULL;
    int nd = td_ndim(t);
    if (nd < 0) return raise_last();
    PyObject *shape = PyTuple_New(nd), *strides = PyTuple_New(nd);
    for (int i = 0; shape && strides && i < nd; i++) {
        PyTuple_SetItem(shape, i, PyLong_FromLongLong(td_shape(t)[i]));
        PyTuple_SetItem(strides, i, PyLong_FromLongLong(td_strides(t)[i]));
    }
    char dev[32];
    td_device_str(td_tensor_device(t), dev, sizeof dev);
    PyObject *r = shape && strides ? Py_BuildValue("(OOisL)", shape, strides, (int)td_tensor_dtype(t), dev,
                                                   (long long)td_storage_offset(t))
                                   : NULL;
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    return r;
}

static PyObject *py_permute(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[2];
    if (!PyArg_UnpackTuple(args, "permute", 2, 2, &o[0], &o[1])) return NULL;
    td_tensor *t = NULL;
    int n, perm[TD_MAX_DIMS];
    if (arg_tensor(o[0], "permute", "t", &t) || arg_intlist(o[1], "permute", "perm", &n, perm)) return NULL;
    if (t && n != td_ndim(t)) {
        PyErr_Format(PyExc_ValueError, "permute: %d dims given for a tensor of %d", n, td_ndim(t));
        return NULL;
    }
    td_clear_error();
    return ret_tensor(td_permute(t, perm));
}

/* grad(outputs, grad_outputs or None, inputs, retain_graph, create_graph) -> list (None: unused input) */
static PyObject *py_grad(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[5];
    if (!PyArg_UnpackTuple(args, "grad", 5, 5, &o[0], &o[1], &o[2], &o[3], &o[4])) return NULL;
    int n_out = 0, n_go = 0, n_in = 0;
    td_tensor **outs = NULL, **gos = NULL, **ins = NULL, **grads = NULL;
    bool retain = false, create = false;
    PyObject *r = NULL;
    if (arg_tensorlist(o[0], "grad", "outputs", &n_out, &outs) ||
        (o[1] != Py_None && arg_tensorlist(o[1], "grad", "grad_outputs", &n_go, &gos)) ||
        arg_tensorlist(o[2], "grad", "inputs", &n_in, &ins) || arg_bool(o[3], "grad", "retain_graph", &retain) ||
        arg_bool(o[4], "grad", "create_graph", &create))
        goto done;
    if (gos && n_go != n_out) {
        PyErr_Format(PyExc_ValueError, "grad: %d grad_outputs for %d outputs", n_go, n_out);
        goto done;
    }
    grads = PyMem_Calloc(n_in ? (size_t)n_in : 1, sizeof *grads);
    if (!grads) {
        PyErr_NoMemory();
        goto done;
    }
    td_clear_error();
    if (td_grad(n_out, outs, gos, n_in, ins, grads, retain, create, true) != TD_OK) {
        raise_last();
        goto done;
    }
    r = PyList_New(n_in);
    for (int i = 0; i < n_in; i++) {
        PyObject *g = grads[i] ? ret_tensor(grads[i]) : Py_NewRef(Py_None);
        grads[i] = NULL;
        if (r && g)
            PyList_SetItem(r, i, g);
        else
            Py_XDECREF(g);
    }
done:
    for (int i = 0; grads && i < n_in; i++) td_release(grads[i]);
    PyMem_Free(outs);
    PyMem_Free(gos);
    PyMem_Free(ins);
    PyMem_Free(grads);
    return r;
}

/* ---- the default generator ---- */

/* rng_state() -> (seed, offset) */
static PyObject *py_rng_state(PyObject *self, PyObject *unused) {
    (void)self, (void)unused;
    td_rng_state r = td_rng_get_state();
    return Py_BuildValue("(KK)", (unsigned long long)r.seed, (unsigned long long)r.offset);
}

/* rng_set_state(seed, offset) */
static PyObject *py_rng_set_state(PyObject *self, PyObject *args) {
    (void)self;
    unsigned long long seed, offset;
    if (!PyArg_ParseTuple(args, "KK:set_rng_state", &seed, &offset)) return NULL;
    td_rng_set_state((td_rng_state){seed, offset});
    return Py_NewRef(Py_None);
}

/* rng_reserve(n) -> (seed, offset): Philox counters for n values, the default generator moved past them */
static PyObject *py_rng_reserve(PyObject *self, PyObject *o) {
    (void)self;
    uint64_t n = 0;
    if (arg_u64(o, "rng_reserve", "n", &n)) return NULL;
    td_rng_state r = td_rng_reserve(n);
    return Py_BuildValue("(KK)", (unsigned long long)r.seed, (unsigned long long)r.offset);
}

/* max_pool2d(x, kernel_size, stride, padding) -> tensor (no indices) */
static PyObject *py_max_pool2d(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[4];
    if (!PyArg_UnpackTuple(args, "max_pool2d", 4, 4, &o[0], &o[1], &o[2], &o[3])) return NULL;
    td_tensor *x = NULL;
    int k[2], s[2], p[2];
    if (arg_tensor(o[0], "max_pool2d", "input", &x) || arg_int2(o[1], "max_pool2d", "kernel_size", k) ||
        arg_int2(o[2], "max_pool2d", "stride", s) || arg_int2(o[3], "max_pool2d", "padding", p))
        return NULL;
    td_clear_error();
    return ret_tensor(td_max_pool2d(x, k, s, p, NULL));
}

/* ---- DLPack capsules ----
** A capsule holds a DLManagedTensorVersioned ("dltensor_versioned") or a
** legacy DLManagedTensor ("dltensor"); a consumer renames it "used_..." once it
** owns the tensor. A capsule that dies unconsumed deletes its tensor. */

static void dl_capsule_free(PyObject *cap) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb); /* a destructor must keep any exception in flight */
    if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
        DLManagedTensorVersioned *m = PyCapsule_GetPointer(cap, "dltensor_versioned");
        if (m->deleter) m->deleter(m);
    } else if (PyCapsule_IsValid(cap, "dltensor")) {
        DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
        if (m->deleter) m->deleter(m);
    }
    PyErr_Clear();
    PyErr_Restore(type, value, tb);
}

/* to_dlpack(t, flags, stream, versioned) -> capsule. stream: an int (a cudaStream_t; -1: none) or None. */
static PyObject *py_to_dlpack(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[4];
    if (!PyArg_UnpackTuple(args, "to_dlpack", 4, 4, &o[0], &o[1], &o[2], &o[3])) return NULL;
    td_tensor *t = NULL;
    int flags = 0;
    int64_t stream = 0;
    bool versioned = false;
    if (arg_tensor(o[0], "to_dlpack", "t", &t) || arg_int(o[1], "to_dlpack", "flags", &flags) ||
        (o[2] != Py_None && arg_i64(o[2], "to_dlpack", "stream", &stream)) ||
        arg_bool(o[3], "to_dlpack", "versioned", &versioned))
        return NULL;
    void *s = (void *)(intptr_t)stream;
    td_clear_error();
    if (versioned) {
        DLManagedTensorVersioned *m;
        if (td_to_dlpack(t, (uint32_t)flags, s, &m) != TD_OK) return raise_last();
        PyObject *cap = PyCapsule_New(m, "dltensor_versioned", dl_capsule_free);
        if (!cap) m->deleter(m);
        return cap;
    }
    DLManagedTensor *m;
    if (td_to_dlpack_legacy(t, (uint32_t)flags, s, &m) != TD_OK) return raise_last();
    PyObject *cap = PyCapsule_New(m, "dltensor", dl_capsule_free);
    if (!cap) m->deleter(m);
    return cap;
}

/* from_dlpack(capsule, flags) -> tensor; renames the capsule "used_..." on success. */
static PyObject *py_from_dlpack(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap;
    int flags;
    if (!PyArg_ParseTuple(args, "Oi:from_dlpack", &cap, &flags)) return NULL;
    if (PyCapsule_IsValid(cap, "used_dltensor_versioned") || PyCapsule_IsValid(cap, "used_dltensor")) {
        PyErr_SetString(PyExc_ValueError, "from_dlpack: this DLPack capsule was already consumed (a capsule is "
                                          "used once: call __dlpack__ again)");
        return NULL;
    }
    td_clear_error();
    if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
        td_tensor *t = td_from_dlpack(PyCapsule_GetPointer(cap, "dltensor_versioned"), (uint32_t)flags);
        if (t && PyCapsule_SetName(cap, "used_dltensor_versioned")) return td_release(t), NULL;
        return ret_tensor(t);
    }
    if (PyCapsule_IsValid(cap, "dltensor")) {
        td_tensor *t = td_from_dlpack_legacy(PyCapsule_GetPointer(cap, "dltensor"));
        if (t && PyCapsule_SetName(cap, "used_dltensor")) return td_release(t), NULL;
        return ret_tensor(t);
    }
    return bad_arg("from_dlpack", "capsule", "a DLPack capsule ('dltensor' or 'dltensor_versioned')", cap), NULL;
}

/* ---- devices and streams ---- */

static PyObject *py_device_parse(PyObject *self, PyObject *o) {
    (void)self;
    td_device d = TD_CPU;
    if (arg_device(o, "device", "s", &d)) return NULL;
    char buf[32];
    return PyUnicode_FromString(td_device_str(d, buf, sizeof buf));
}

/* native_stream(device) -> int (cudaStream_t; 0 for none) */
static PyObject *py_native_stream(PyObject *self, PyObject *o) {
    (void)self;
    td_device d = TD_CPU;
    if (arg_device(o, "native_stream", "device", &d)) return NULL;
    return PyLong_FromLongLong((long long)(intptr_t)td_device_native_stream(d));
}

/* stream_wait(device, native stream): the stream waits for the work queued on device so far (no host wait). */
static PyObject *py_stream_wait(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[2];
    if (!PyArg_UnpackTuple(args, "stream_wait", 2, 2, &o[0], &o[1])) return NULL;
    td_device d = TD_CPU;
    int64_t stream = 0;
    if (arg_device(o[0], "stream_wait", "device", &d) || arg_i64(o[1], "stream_wait", "stream", &stream)) return NULL;
    td_device_event *ev = NULL;
    td_clear_error();
    td_status st = td_event_new(d, &ev);
    if (st == TD_OK) st = td_event_record(ev);
    if (st == TD_OK) st = td_event_wait_native(ev, (void *)(intptr_t)stream);
    td_event_free(ev);
    return ret_status(st);
}

/* ---- kernels ---- */

static void kernel_capsule_free(PyObject *cap) { td_kernel_free(PyCapsule_GetPointer(cap, "trident.kernel")); }

/* kernel_compile(device, lang, source, entry or None, defines, arch or None) -> kernel capsule */
static PyObject *py_kernel_compile(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *dev_o, *defs;
    int lang;
    const char *src, *entry, *arch;
    if (!PyArg_ParseTuple(args, "OizzOz:kernel_compile", &dev_o, &lang, &src, &entry, &defs, &arch)) return NULL;
    td_device d = TD_CPU;
    if (arg_device(dev_o, "kernel.compile", "device", &d)) return NULL;
    PyObject *seq = PySequence_Tuple(defs);
    if (!seq) return NULL;
    Py_ssize_t n = PyTuple_Size(seq);
    const char **dv = PyMem_Calloc(n ? (size_t)n : 1, sizeof *dv);
    for (Py_ssize_t i = 0; dv && i < n; i++)
        if (!(dv[i] = PyUnicode_AsUTF8AndSize(PyTuple_GetItem(seq, i), NULL))) {
            PyMem_Free(dv);
            Py_DECREF(seq);
            return NULL;
        }
    td_kernel_options opts = {.defines = dv, .n_defines = (int)n, .arch = arch};
    td_user_kernel *k = NULL;
    char log[4096] = "";
    td_clear_error();
    td_status st = dv ? td_kernel_compile(d, lang, src, entry, &opts, &k, log, sizeof log) : TD_ERR_OOM;
    PyMem_Free(dv);
    Py_DECREF(seq);
    if (st != TD_OK) return raise_error(td_last_error(), st, log[0] ? log : NULL); /* .log: the compiler's output */
    PyObject *cap = PyCapsule_New(k, "trident.kernel", kernel_capsule_free);
    if (!cap) td_kernel_free(k);
    return cap;
}

/* kernel_launch(kernel, grid, block or None, shared_bytes, tensors, push bytes) */
static PyObject *py_kernel_launch(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *kc, *grid_o, *block_o, *ts;
    Py_ssize_t shared;
    const char *push;
    Py_ssize_t push_size;
    if (!PyArg_ParseTuple(args, "OOOnOy#:kernel_launch", &kc, &grid_o, &block_o, &shared, &ts, &push, &push_size))
        return NULL;
    td_user_kernel *k = PyCapsule_GetPointer(kc, "trident.kernel");
    if (!k) return NULL;
    int ng = 0, nb = 3, g[TD_MAX_DIMS] = {1, 1, 1}, b[TD_MAX_DIMS] = {0, 0, 0};
    if (arg_intlist(grid_o, "launch", "grid", &ng, g)) return NULL;
    if (block_o != Py_None && arg_intlist(block_o, "launch", "block", &nb, b)) return NULL;
    if (ng < 1 || ng > 3 || nb < 1 || nb > 3) {
        PyErr_SetString(PyExc_ValueError, "launch: grid and block take 1 to 3 sizes");
        return NULL;
    }
    uint32_t grid[3] = {1, 1, 1}, block[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++) {
        if ((i < ng && g[i] < 1) || (i < nb && b[i] < 0)) {
            PyErr_SetString(PyExc_ValueError, "launch: grid sizes must be >= 1 and block sizes >= 0");
            return NULL;
        }
        if (i < ng) grid[i] = (uint32_t)g[i];
        if (i < nb) block[i] = (uint32_t)b[i];
    }
    if (block_o != Py_None)
        for (int i = nb; i < 3; i++) block[i] = 1;
    int n;
    td_tensor **tv = NULL;
    if (arg_tensorlist(ts, "launch", "tensors", &n, &tv)) return PyMem_Free(tv), NULL;
    td_clear_error();
    td_status st =
        td_kernel_launch(k, grid, block_o == Py_None ? NULL : block, (size_t)shared, n, tv, push, (size_t)push_size);
    PyMem_Free(tv);
    return ret_status(st);
}

/* ---- math blocks (math.h) ---- */

static void math_capsule_free(PyObject *cap) { td_math_free(PyCapsule_GetPointer(cap, "trident.math")); }

/* math_compile(src, checkpoint) -> (block capsule, (input names...), n_outputs) */
static PyObject *py_math_compile(PyObject *self, PyObject *args) {
    (void)self;
    const char *src;
    int checkpoint;
    if (!PyArg_ParseTuple(args, "sp:math_compile", &src, &checkpoint)) return NULL;
    td_math_options opts = {.checkpoint = checkpoint};
    td_math_block *b = NULL;
    td_clear_error();
    if (td_math_compile(src, &opts, &b) != TD_OK) return raise_last();
    PyObject *cap = PyCapsule_New(b, "trident.math", math_capsule_free);
    if (!cap) return td_math_free(b), NULL;
    int n = td_math_n_inputs(b);
    PyObject *names = PyTuple_New(n);
    for (int i = 0; names && i < n; i++) PyTuple_SetItem(names, i, PyUnicode_FromString(td_math_input_name(b, i)));
    if (!names || PyErr_Occurred()) return Py_XDECREF(names), Py_DECREF(cap), NULL;
    return Py_BuildValue("(NNi)", cap, names, td_math_n_outputs(b));
}

/* The bindings of (names, values): a value is a trident.Tensor or capsule, or a number. */
static int math_bindings(PyObject *names, PyObject *values, td_math_binding **out, int *n) {
    *out = NULL;
    *n = (int)PyTuple_Size(names);
    if (*n < 0 || PyTuple_Size(values) != *n) return PyErr_SetString(PyExc_ValueError, "math: names and values"), -1;
    td_math_binding *b = PyMem_Calloc(*n ? (size_t)*n : 1, sizeof *b);
    if (!b) return PyErr_NoMemory(), -1;
    for (int i = 0; i < *n; i++) {
        PyObject *v = PyTuple_GetItem(values, i);
        if (!(b[i].name = PyUnicode_AsUTF8AndSize(PyTuple_GetItem(names, i), NULL))) return PyMem_Free(b), -1;
        if (PyLong_Check(v) || PyFloat_Check(v)) {
            if (arg_double(v, "m", b[i].name, &b[i].scalar)) return PyMem_Free(b), -1;
        } else if (arg_tensor(v, "m", b[i].name, &b[i].tensor) || !b[i].tensor) {
            PyErr_Clear();
            bad_arg("m", b[i].name, "a tensor or a number", v);
            return PyMem_Free(b), -1;
        }
    }
    *out = b;
    return 0;
}

/* math_run(block, names, values) -> [outputs] */
static PyObject *py_math_run(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap, *names, *values;
    if (!PyArg_ParseTuple(args, "OO!O!:math_run", &cap, &PyTuple_Type, &names, &PyTuple_Type, &values)) return NULL;
    td_math_block *blk = PyCapsule_GetPointer(cap, "trident.math");
    td_math_binding *b;
    int n;
    if (!blk || math_bindings(names, values, &b, &n)) return NULL;
    int n_out = td_math_n_outputs(blk);
    td_tensor **outs = PyMem_Calloc((size_t)n_out + 1, sizeof *outs);
    if (!outs) return PyMem_Free(b), PyErr_NoMemory();
    td_clear_error();
    td_status st = td_math_run(blk, b, n, outs);
    PyMem_Free(b);
    PyObject *r = st == TD_OK ? PyList_New(n_out) : raise_last();
    for (int i = 0; i < n_out; i++) {
        PyObject *t = r ? ret_tensor(outs[i]) : (td_release(outs[i]), NULL);
        if (t) PyList_SetItem(r, i, t);
    }
    PyMem_Free(outs);
    if (r && PyErr_Occurred()) Py_CLEAR(r);
    return r;
}

/* math_value_and_grad(block, names, values, wrt names) -> (value, [grads]) */
static PyObject *py_math_value_and_grad(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap, *names, *values, *wrt_o;
    if (!PyArg_ParseTuple(args, "OO!O!O!:math_value_and_grad", &cap, &PyTuple_Type, &names, &PyTuple_Type, &values,
                          &PyTuple_Type, &wrt_o))
        return NULL;
    td_math_block *blk = PyCapsule_GetPointer(cap, "trident.math");
    td_math_binding *b;
    int n, n_wrt = (int)PyTuple_Size(wrt_o);
    if (!blk || math_bindings(names, values, &b, &n)) return NULL;
    const char **wrt = PyMem_Calloc((size_t)n_wrt + 1, sizeof *wrt);
    td_tensor **grads = PyMem_Calloc((size_t)n_wrt + 1, sizeof *grads);
    PyObject *r = NULL;
    td_tensor *value = NULL;
    if (!wrt || !grads) {
        PyErr_NoMemory();
        goto done;
    }
    for (int i = 0; i < n_wrt; i++)
        if (!(wrt[i] = PyUnicode_AsUTF8AndSize(PyTuple_GetItem(wrt_o, i), NULL))) goto done;
    td_clear_error();
    if (td_math_value_and_grad(blk, b, n, n_wrt, wrt, &value, grads) != TD_OK) {
        raise_last();
        goto done;
    }
    PyObject *gl = PyList_New(n_wrt);
    for (int i = 0; gl && i < n_wrt; i++) {
        PyList_SetItem(gl, i, ret_tensor(grads[i]));
        grads[i] = NULL;
    }
    PyObject *v = ret_tensor(value);
    value = NULL;
    if (gl && v && !PyErr_Occurred()) {
        r = Py_BuildValue("(NN)", v, gl);
    } else {
        Py_XDECREF(v);
        Py_XDECREF(gl);
    }
done:
    for (int i = 0; grads && i < n_wrt; i++) td_release(grads[i]);
    td_release(value);
    PyMem_Free(grads);
    PyMem_Free(wrt);
    PyMem_Free(b);
    return r;
}

/* ---- data (data.h) ---- */

/* mnist_load(dir, train) -> (x F32 [N, 784] in [0, 1], y I64 [N]) */
static PyObject *py_mnist_load(PyObject *self, PyObject *args) {
    (void)self;
    const char *dir;
    int train;
    if (!PyArg_ParseTuple(args, "sp:mnist_load", &dir, &train)) return NULL;
    td_tensor *x = NULL, *y = NULL;
    td_clear_error();
    if (td_mnist_load(dir, train, true, &x, &y) != TD_OK) return raise_last();
    PyObject *xo = ret_tensor(x), *yo = ret_tensor(y);
    if (!xo || !yo) return Py_XDECREF(xo), Py_XDECREF(yo), NULL;
    return Py_BuildValue("(NN)", xo, yo);
}

/* ---- recurrent layers (nn.h): forwards with more than one result ---- */

/* A +1 tensor or NULL (an absent result) as a new reference: the tensor's capsule, or None. */
static PyObject *ret_optional(td_tensor *t) { return t ? ret_tensor(t) : Py_NewRef(Py_None); }

/* rnn_forward(m, x, h0 or None, c0 or None) -> (output, h_n, c_n or None) */
static PyObject *py_rnn_forward(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[4];
    td_module *m;
    td_tensor *x, *h0, *c0, *h_n = NULL, *c_n = NULL;
    if (!PyArg_UnpackTuple(args, "rnn_forward", 4, 4, &o[0], &o[1], &o[2], &o[3]) ||
        arg_module(o[0], "forward", "self", &m) || arg_tensor(o[1], "forward", "input", &x) ||
        arg_tensor(o[2], "forward", "hx", &h0) || arg_tensor(o[3], "forward", "hx", &c0))
        return NULL;
    td_clear_error();
    td_tensor *y = td_rnn_forward(m, x, h0, c0, &h_n, &c_n);
    if (!y) return raise_last();
    PyObject *yo = ret_tensor(y), *ho = ret_optional(h_n), *co = ret_optional(c_n);
    if (!yo || !ho || !co) return Py_XDECREF(yo), Py_XDECREF(ho), Py_XDECREF(co), NULL;
    return Py_BuildValue("(NNN)", yo, ho, co);
}

/* rnn_cell_forward(m, x, h or None, c or None) -> (h', c' or None) */
static PyObject *py_rnn_cell_forward(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *o[4];
    td_module *m;
    td_tensor *x, *h, *c, *c_n = NULL;
    if (!PyArg_UnpackTuple(args, "rnn_cell_forward", 4, 4, &o[0], &o[1], &o[2], &o[3]) ||
        arg_module(o[0], "forward", "self", &m) || arg_tensor(o[1], "forward", "input", &x) ||
        arg_tensor(o[2], "forward", "hx", &h) || arg_tensor(o[3], "forward", "hx", &c))
        return NULL;
    td_clear_error();
    td_tensor *y = td_rnn_cell_forward(m, x, h, c, &c_n);
    if (!y) return raise_last();
    PyObject *yo = ret_tensor(y), *co = ret_optional(c_n);
    if (!yo || !co) return Py_XDECREF(yo), Py_XDECREF(co), NULL;
    return Py_BuildValue("(NN)", yo, co);
}

/* cifar10_load(paths) -> (x F32 [N, 3, 32, 32] in [0, 1], y I64 [N]) */
static PyObject *py_cifar10_load(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *paths;
    if (!PyArg_ParseTuple(args, "O!:cifar10_load", &PyTuple_Type, &paths)) return NULL;
    int n = (int)PyTuple_Size(paths);
    const char **p = PyMem_Calloc(n ? (size_t)n : 1, sizeof *p);
    if (!p) return PyErr_NoMemory();
    for (int i = 0; i < n; i++)
        if (!(p[i] = PyUnicode_AsUTF8AndSize(PyTuple_GetItem(paths, i), NULL))) return PyMem_Free(p), NULL;
    td_tensor *x = NULL, *y = NULL;
    td_clear_error();
    td_status st = td_cifar10_load(n, p, true, &x, &y);
    PyMem_Free(p);
    if (st != TD_OK) return raise_last();
    PyObject *xo = ret_tensor(x), *yo = ret_tensor(y);
    if (!xo || !yo) return Py_XDECREF(xo), Py_XDECREF(yo), NULL;
    return Py_BuildValue("(NN)", xo, yo);
}

/* ---- the C DataLoader over in-memory tensors (data.h): batches built by worker threads ---- */

typedef struct loader {
    td_dataset *ds;
    td_dataloader *dl;
    int n_fields;
} loader;

static void loader_capsule_free(PyObject *cap) {
    loader *l = PyCapsule_GetPointer(cap, "trident.loader");
    td_dataloader_free(l->dl); /* stops the workers first: they read ds */
    td_dataset_free(l->ds);
    PyMem_Free(l);
}

/* loader_new(tensors, batch_size, shuffle, seed, drop_last, num_workers, device) -> capsule */
static PyObject *py_loader_new(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ts, *dev_o;
    long long batch;
    int shuffle, drop_last, workers;
    unsigned long long seed;
    int n = 0;
    td_tensor **v = NULL;
    td_dataloader_opts o = {0};
    if (!PyArg_ParseTuple(args, "OLpKpiO:loader_new", &ts, &batch, &shuffle, &seed, &drop_last, &workers, &dev_o) ||
        arg_tensorlist(ts, "DataLoader", "dataset", &n, &v) || arg_device(dev_o, "DataLoader", "device", &o.device))
        return PyMem_Free(v), NULL;
    loader *l = PyMem_Calloc(1, sizeof *l);
    if (!l) return PyMem_Free(v), PyErr_NoMemory();
    o.batch_size = batch, o.shuffle = shuffle, o.seed = seed, o.drop_last = drop_last, o.num_workers = workers;
    l->n_fields = n;
    td_clear_error();
    td_status st = td_tensor_dataset_new(n, v, &l->ds);
    PyMem_Free(v);
    if (st == TD_OK) st = td_dataloader_new(l->ds, &o, &l->dl);
    if (st != TD_OK) {
        td_dataset_free(l->ds);
        PyMem_Free(l);
        return raise_last();
    }
    PyObject *cap = PyCapsule_New(l, "trident.loader", loader_capsule_free);
    if (!cap) td_dataloader_free(l->dl), td_dataset_free(l->ds), PyMem_Free(l);
    return cap;
}

/* loader_start(capsule, epoch): begin an epoch (the shuffle is a function of (seed, epoch)) */
static PyObject *py_loader_start(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *cap;
    long long epoch;
    if (!PyArg_ParseTuple(args, "OL:loader_start", &cap, &epoch)) return NULL;
    loader *l = PyCapsule_GetPointer(cap, "trident.loader");
    if (!l) return NULL;
    td_clear_error();
    return ret_status(td_dataloader_start_epoch(l->dl, epoch, 0));
}

/* loader_next(capsule) -> tuple of tensors, or None at the end of the epoch (waits for the workers without the
** GIL) */
static PyObject *py_loader_next(PyObject *self, PyObject *cap) {
    (void)self;
    loader *l = PyCapsule_GetPointer(cap, "trident.loader");
    if (!l) return NULL;
    td_tensor *f[16] = {NULL};
    if (l->n_fields > 16) return PyErr_Format(PyExc_ValueError, "DataLoader: at most 16 fields"), NULL;
    td_status st;
    td_clear_error();
    Py_BEGIN_ALLOW_THREADS st = td_dataloader_next(l->dl, f);
    Py_END_ALLOW_THREADS if (st != TD_OK) return raise_last();
    if (!f[0]) return Py_NewRef(Py_None);
    PyObject *r = PyTuple_New(l->n_fields);
    for (int i = 0; i < l->n_fields; i++) {
        PyObject *t = r ? ret_tensor(f[i]) : (td_release(f[i]), NULL);
        if (t) PyTuple_SetItem(r, i, t);
    }
    if (r && PyErr_Occurred()) Py_CLEAR(r);
    return r;
}

/* ---- safetensors (io.h) ---- */

/* safetensors_save(path, names, tensors) */
static PyObject *py_safetensors_save(PyObject *self, PyObject *args) {
    (void)self;
    const char *path;
    PyObject *names, *ts;
    if (!PyArg_ParseTuple(args, "sO!O!:safetensors_save", &path, &PyTuple_Type, &names, &PyTuple_Type, &ts))
        return NULL;
    td_named_tensors *list = td_named_tensors_new();
    if (!list) return raise_last();
    PyObject *r = NULL;
    for (Py_ssize_t i = 0; i < PyTuple_Size(names) && i < PyTuple_Size(ts); i++) {
        const char *n = PyUnicode_AsUTF8AndSize(PyTuple_GetItem(names, i), NULL);
        td_tensor *t = NULL;
        if (!n || arg_tensor(PyTuple_GetItem(ts, i), "save_file", "tensors", &t)) goto done;
        if (!t) {
            bad_arg("save_file", "tensors", "a trident.Tensor", Py_None);
            goto done;
        }
        td_clear_error();
        if (td_named_tensors_add(list, n, t) != TD_OK) {
            raise_last();
            goto done;
        }
    }
    td_clear_error();
    r = ret_status(td_safetensors_save(path, list));
done:
    td_named_tensors_free(list);
    return r;
}

/* safetensors_load(path, device) -> [(name, tensor)] in the file's order */
static PyObject *py_safetensors_load(PyObject *self, PyObject *args) {
    (void)self;
    const char *path;
    PyObject *dev_o;
    td_device dev;
    if (!PyArg_ParseTuple(args, "sO:safetensors_load", &path, &dev_o) || arg_device(dev_o, "load_file", "device", &dev))
        return NULL;
    td_named_tensors *list = NULL;
    td_clear_error();
    if (td_safetensors_load(path, dev, &list) != TD_OK) return raise_last();
    int64_t n = td_named_tensors_len(list);
    PyObject *r = PyList_New((Py_ssize_t)n);
    for (int64_t i = 0; r && i < n; i++) {
        PyObject *item =
            Py_BuildValue("(sN)", td_named_tensors_name(list, i), ret_tensor(td_retain(td_named_tensors_at(list, i))));
        if (!item)
            Py_CLEAR(r);
        else
            PyList_SetItem(r, (Py_ssize_t)i, item);
    }
    td_named_tensors_free(list);
    return r;
}

/* ---- the module ---- */

static PyMethodDef methods[] = {
    {"info", py_info, METH_O, "info(t) -> (shape, strides, dtype, device, storage_offset)"},
    {"permute", py_permute, METH_VARARGS, NULL},
    {"grad", py_grad, METH_VARARGS, NULL},
    {"rng_state", py_rng_state, METH_NOARGS, "rng_state() -> (seed, offset) of the default generator"},
    {"rng_set_state", py_rng_set_state, METH_VARARGS, NULL},
    {"rng_reserve", py_rng_reserve, METH_O, NULL},
    {"max_pool2d", py_max_pool2d, METH_VARARGS, NULL},
    {"to_dlpack", py_to_dlpack, METH_VARARGS, NULL},
    {"from_dlpack", py_from_dlpack, METH_VARARGS, NULL},
    {"device_parse", py_device_parse, METH_O, NULL},
    {"native_stream", py_native_stream, METH_O, NULL},
    {"stream_wait", py_stream_wait, METH_VARARGS, NULL},
    {"kernel_compile", py_kernel_compile, METH_VARARGS, NULL},
    {"kernel_launch", py_kernel_launch, METH_VARARGS, NULL},
    {"math_compile", py_math_compile, METH_VARARGS, "math_compile(src, checkpoint) -> (block, names, n_outputs)"},
    {"math_run", py_math_run, METH_VARARGS, "math_run(block, names, values) -> [outputs]"},
    {"math_value_and_grad", py_math_value_and_grad, METH_VARARGS, NULL},
    {"rnn_forward", py_rnn_forward, METH_VARARGS, "rnn_forward(m, x, h0, c0) -> (output, h_n, c_n or None)"},
    {"rnn_cell_forward", py_rnn_cell_forward, METH_VARARGS, "rnn_cell_forward(m, x, h, c) -> (h', c' or None)"},
    {"cifar10_load", py_cifar10_load, METH_VARARGS, "cifar10_load(paths) -> (x, y)"},
    {"loader_new", py_loader_new, METH_VARARGS, NULL},
    {"loader_start", py_loader_start, METH_VARARGS, NULL},
    {"loader_next", py_loader_next, METH_O, NULL},
    {"safetensors_save", py_safetensors_save, METH_VARARGS, "safetensors_save(path, names, tensors)"},
    {"safetensors_load", py_safetensors_load, METH_VARARGS, "safetensors_load(path, device) -> [(name, tensor)]"},
    {"mnist_load", py_mnist_load, METH_VARARGS, "mnist_load(dir, train) -> (x, y)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "trident._C", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__C(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    str_h = PyUnicode_InternFromString("_h");
    if (!str_h || PyModule_AddStringConstant(m, "__version__", TRIDENT_VERSION) < 0) goto fail;
    TridentError = PyErr_NewException("trident.TridentError", PyExc_RuntimeError, NULL);
    if (!TridentError || PyModule_AddObjectRef(m, "TridentError", TridentError) < 0) goto fail;
    /* the generated functions, and OPS: ((name, (parameter names...), returns_tensor), ...) */
    PyObject *fns = PyModule_GetDict(m);
    PyObject *ops = PyList_New(0);
    if (!ops) goto fail;
    for (const struct gen_op *g = gen_ops; g->name; g++) {
        PyObject *params = PyList_New(0);
        for (int i = 0; params && g->params[i]; i++) {
            PyObject *s = PyUnicode_FromString(g->params[i]);
            if (s) PyList_Append(params, s);
            Py_XDECREF(s);
        }
        PyObject *item = params ? Py_BuildValue("(sNi)", g->name, PyList_AsTuple(params), g->returns_tensor) : NULL;
        Py_XDECREF(params);
        if (!item || PyList_Append(ops, item) < 0) {
            Py_XDECREF(item);
            Py_DECREF(ops);
            goto fail;
        }
        Py_DECREF(item);
    }
    for (PyMethodDef *d = gen_methods; d->ml_name; d++) {
        PyObject *f = PyCFunction_New(d, NULL);
        if (!f || PyDict_SetItemString(fns, d->ml_name, f) < 0) {
            Py_XDECREF(f);
            Py_DECREF(ops);
            goto fail;
        }
        Py_DECREF(f);
    }
    int added = PyModule_AddObjectRef(m, "OPS", ops);
    Py_DECREF(ops);
    if (added < 0) goto fail;
    for (int d = 0; d < TD_DTYPE_COUNT; d++)
        if (PyModule_AddIntConstant(m, td_dtype_name((td_dtype)d), d) < 0) goto fail;
    if (PyModule_AddIntConstant(m, "DLPACK_READ_ONLY", TD_DLPACK_READ_ONLY) < 0 ||
        PyModule_AddIntConstant(m, "DLPACK_COPY", TD_DLPACK_COPY) < 0 ||
        PyModule_AddIntConstant(m, "KERNEL_GLSL", TD_KERNEL_GLSL) < 0 ||
        PyModule_AddIntConstant(m, "KERNEL_CUDA", TD_KERNEL_CUDA) < 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
