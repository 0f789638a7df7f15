"""Generate the Python bindings of Trident's tensor functions from its public headers.

Usage: gen_ops.py OUT.h HEADER.h...   (tensor.h, ops.h, autograd.h, device.h and nn.h)

Every `TD_API td_tensor *td_NAME(...)` prototype (or one returning td_status, void, bool, double, int, int64_t, uint64_t) whose parameters are all of
the kinds below becomes a CPython function `_C.NAME(*args)` in OUT.h, plus the table `gen_methods[]` and the
tuple `_C.OPS` of (name, parameter names, returns-a-tensor). Parameter kinds (C -> Python):

    td_tensor *x                        Tensor, or None (NULL: for optional inputs such as a bias)
    double / int / int64_t / uint64_t / bool / td_dtype   number (td_dtype: its int value)
    td_reduction / td_fan_mode / td_nonlinearity          int (the enum's value)
    td_device dev                       str: "cpu", "cuda:0", ...
    int n, const int64_t *shape         sequence of ints (one Python argument)
    int n_dims, const int *dims         sequence of ints
    const int name[2]                   pair of ints
    int n, td_tensor *const *xs         sequence of Tensors
    td_module *m                        a module capsule (made by a td_*_new constructor, owned by its capsule)
    const char *name                    str

A constructor `TD_API td_module *td_NAME_new(...)` (or `_new_ext`) returns a capsule "trident.module" that frees the module.

A prototype with another parameter kind is left out (and listed in a comment of OUT.h).
"""
import re
import sys

SCALARS = {"double": "double", "int": "int", "int64_t": "i64", "uint64_t": "u64", "bool": "bool", "td_dtype": "dtype",
           "td_device": "device"}

# how emit() takes each kind of parameter, {v} being its variable: the declaration, what the
# arg_<kind> parser writes to, and what the td_ call is passed
ARG_KINDS = {
    "tensor": ("td_tensor *{v} = NULL;", "&{v}", ["{v}"]),
    "i64list": ("int {v}n = 0; int64_t {v}[TD_MAX_DIMS] = {{0}};", "&{v}n, {v}", ["{v}n", "{v}"]),
    "intlist": ("int {v}n = 0; int {v}[TD_MAX_DIMS] = {{0}};", "&{v}n, {v}", ["{v}n", "{v}"]),
    "int2": ("int {v}[2] = {{0, 0}};", "{v}", ["{v}"]),
    "tensorlist": ("int {v}n = 0; td_tensor **{v} = NULL;", "&{v}n, &{v}", ["{v}n", "{v}"]),
    "module": ("td_module *{v} = NULL;", "&{v}", ["{v}"]),
    "str": ("const char *{v} = NULL;", "&{v}", ["{v}"]),
}
ZERO = {"td_dtype": "TD_F32", "td_device": "TD_CPU"}  # a scalar's initial value, where it is not 0
ARG_KINDS.update({kind: (ctype + " {v} = " + ZERO.get(ctype, "0") + ";", "&{v}", ["{v}"])
                  for ctype, kind in SCALARS.items()})
# enums: taken as an int (arg_int) and cast for the call
ENUMS = ("td_reduction", "td_fan_mode", "td_nonlinearity", "td_rnn_nonlinearity")
ARG_KINDS.update({"enum_" + e: ("int {v} = 0;", "&{v}", ["(" + e + "){v}"]) for e in ENUMS})


# the Python objects own their tensors: these stay in C
OWNERSHIP = {"retain", "release", "keep", "scope_begin", "scope_end", "clear_error", "debug_set"}
# a module capsule owns its module: these would free it, or hand it (or a borrowed child) to another owner
OWNERSHIP |= {"module_free", "module_register_module", "sequential_append", "module_child", "module_new"}
BORROWED = {"grad_of", "module_get"}  # return a borrowed tensor or NULL: the Python object takes a reference of its own
RETURNS = {"tensor": "ret_tensor({})", "module": "ret_module({})", "status": "ret_status({})",
           "void": "({}, Py_NewRef(Py_None))",
           "bool": "PyBool_FromLong({})", "double": "PyFloat_FromDouble({})", "int64_t": "PyLong_FromLongLong({})",
           "uint64_t": "PyLong_FromUnsignedLongLong({})",
           "int": "PyLong_FromLong({})"}


def prototypes(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    for m in re.finditer(r"TD_API\s+(td_tensor\s*\*|td_module\s*\*|td_status|void|bool|double|u?int64_t|int)\s*"
                         r"td_(\w+)\s*\(([^)]*)\)\s*;", text):
        ret = m.group(1).replace("td_", "").replace("*", "").strip()
        if ret == "module" and not re.search(r"_new(_ext)?$", m.group(2)):
            continue  # a borrowed module (a child): no capsule may own it
        if m.group(2) in OWNERSHIP:
            continue
        params = [" ".join(p.split()) for p in m.group(3).split(",")]
        yield m.group(2), ret, params


def parse_params(params):
    """[(kind, c names...)] or None when a parameter has no binding."""
    out, i = [], 0
    while i < len(params):
        p = params[i]
        nxt = params[i + 1] if i + 1 < len(params) else ""
        if p == "void":
            i += 1
            continue
        m = re.fullmatch(r"int (\w+)", p)
        if m and re.fullmatch(r"const int64_t \*(\w+)", nxt):
            out.append(("i64list", m.group(1), nxt.split("*")[1]))
            i += 2
            continue
        if m and re.fullmatch(r"const int \*(\w+)", nxt):
            out.append(("intlist", m.group(1), nxt.split("*")[1]))
            i += 2
            continue
        if m and re.fullmatch(r"td_tensor \*const \*(\w+)", nxt):
            out.append(("tensorlist", m.group(1), nxt.split("*")[-1]))
            i += 2
            continue
        m2 = re.fullmatch(r"const int (\w+)\[2\]", p)
        if m2:
            out.append(("int2", m2.group(1)))
            i += 1
            continue
        m5 = re.fullmatch(r"(?:const )?td_module \*(\w+)", p) or re.fullmatch(r"const char \*(\w+)", p)
        if m5:
            out.append(("module" if "td_module" in p else "str", m5.group(1)))
            i += 1
            continue
        m3 = re.fullmatch(r"(?:const )?td_tensor \*(\w+)", p)
        if m3:
            out.append(("tensor", m3.group(1)))
            i += 1
            continue
        m4 = re.fullmatch(r"(\w+) (\w+)", p)
        if m4 and m4.group(1) in SCALARS:
            out.append((SCALARS[m4.group(1)], m4.group(2)))
            i += 1
            continue
        if m4 and m4.group(1) in ENUMS:
            out.append(("enum_" + m4.group(1), m4.group(2)))
            i += 1
            continue
        return None
    return out


def emit(name, ret, params):
    n = len(params)
    py_names = [p[-1] if p[0] in ("i64list", "intlist", "tensorlist") else p[1] for p in params]
    lines = [f"static PyObject *gen_{name}(PyObject *self, PyObject *args) {{", "    (void)self;"]
    if n:
        lines.append(f"    PyObject *o[{n}];")
        unpack = ", ".join(f"&o[{k}]" for k in range(n))
        lines.append(f'    if (!PyArg_UnpackTuple(args, "{name}", {n}, {n}, {unpack})) return NULL;')
    else:
        lines.append(f'    if (!PyArg_UnpackTuple(args, "{name}", 0, 0)) return NULL;')
    call = []
    cleanup = []
    for k, p in enumerate(params):
        kind, v = p[0], f"a{k}"
        where = f'"{name}", "{py_names[k]}"'
        decl, outs, passed = ARG_KINDS[kind]
        lines.append("    " + decl.format(v=v))
        parser = "int" if kind.startswith("enum_") else kind
        lines.append(f"    if (arg_{parser}(o[{k}], {where}, {outs.format(v=v)})) goto fail;")
        call += [c.format(v=v) for c in passed]
        if kind == "tensorlist":
            cleanup.append(f"PyMem_Free({v});")
    # list pointers are declared NULL before the first goto, so fail: frees them either way
    decls = [line for line in lines if line.startswith("    int a") and "td_tensor **" in line]
    body = lines[:2] + decls + [line for line in lines[2:] if line not in decls]
    args_c = ", ".join(call)
    body.append("    td_clear_error();")
    value = f"td_{name}({args_c})"
    if name in BORROWED:  # NULL without an error: None (no gradient yet)
        body.append(f"    td_tensor *t = {value};")
        body.append("    PyObject *r = !t && td_last_status() == TD_OK ? Py_NewRef(Py_None) : ret_tensor(td_retain(t));")
        ret = "done"
    if ret == "done":
        pass
    elif ret in ("tensor", "module", "status", "void"):
        body.append("    PyObject *r = " + RETURNS[ret].format(value) + ";")
    else:  # a value: the error, if the call set one, wins
        ctype = {"bool": "bool", "double": "double", "int64_t": "int64_t", "uint64_t": "uint64_t", "int": "int"}[ret]
        body.append(f"    {ctype} v = {value};")
        body.append("    PyObject *r = td_last_status() != TD_OK ? raise_last() : " + RETURNS[ret].format("v") + ";")
    body += [f"    {c}" for c in cleanup]
    body.append("    return r;")
    if n:
        body.append("fail:")
        body += [f"    {c}" for c in cleanup]
        body.append("    return NULL;")
    body.append("}")
    return "\n".join(body), py_names


def main():
    out_path, headers = sys.argv[1], sys.argv[2:]
    funcs, skipped, seen = [], [], set()
    for h in headers:
        for name, ret, params in prototypes(open(h).read()):
            if name in seen:
                continue
            seen.add(name)
            parsed = parse_params(params)
            if parsed is None:
                skipped.append(name)
                continue
            funcs.append((name, ret, parsed))
    parts = ["/* Generated by python/gen_ops.py from " + ", ".join(h.split("/")[-1] for h in headers) +
             ": do not edit. */", "/* left out (a parameter kind with no binding): " + " ".join(skipped) + " */"]
    table = []
    ops = []
    for name, ret, parsed in funcs:
        code, py_names = emit(name, ret, parsed)
        parts.append(code)
        table.append(f'    {{"{name}", gen_{name}, METH_VARARGS, NULL}},')
        names = ", ".join(f'"{p}"' for p in py_names)
        ops.append(f'    {{"{name}", {{{names}{", " if names else ""}NULL}}, {int(ret == "tensor")}}},')
    parts.append("static PyMethodDef gen_methods[] = {\n" + "\n".join(table) + "\n    {NULL, NULL, 0, NULL}};")
    parts.append("static const struct gen_op {\n    const char *name;\n    const char *params[16];\n"
                 "    int returns_tensor;\n} gen_ops[] = {\n" + "\n".join(ops) + "\n    {NULL, {NULL}, 0}};")
    with open(out_path, "w") as f:
        f.write("\n\n".join(parts) + "\n")


if __name__ == "__main__":
    main()
