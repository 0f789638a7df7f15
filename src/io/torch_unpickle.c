/*
** A weights-only unpickler for torch.save's data.pkl: a stack machine over
** the pickle opcodes torch writes (protocol 2, plus the few of protocols 3-4
** other writers use) that builds plain values (numbers, strings, tuples,
** lists, dicts) and, from an allow-list of four kinds of global, storages and
** tensors. It never runs code: GLOBAL resolves only
**   collections.OrderedDict            -> an empty dict (REDUCE with ())
**   torch._utils._rebuild_tensor_v2    -> a tensor view of a storage
**   torch._utils._rebuild_parameter    -> the tensor it wraps
**   torch.<Type>Storage                -> a storage class for persistent_load
** and refuses every other global by name. BINPERSID takes only
** ('storage', <Type>Storage, key, location, numel).
**
** Limits: data.pkl up to TP_MAX_PICKLE bytes, TP_MAX_VALUES objects,
** TP_MAX_MEMO memo ids; nesting is bounded where the result is walked
** (torch_load.c, TP_MAX_DEPTH), which also stops cycles made through the memo.
** Every object lives in the arena until tp_free.
*/
#include <stdlib.h>
#include <string.h>

#include "torch_format.h"

#define BAD(...) TD_ERR(TD_ERR_FORMAT, __VA_ARGS__)

struct tp_arena {
    tp_value **all; /* every object made, freed by tp_free */
    int64_t n, cap;
};

typedef struct unpickler {
    const uint8_t *p, *end, *start;
    const char *path;
    tp_arena *a;
    tp_value **stack;
    int64_t sp, scap;
    tp_value **memo;
    int64_t nmemo, nset; /* memo slots; ids set (MEMOIZE's next id) */
    tp_value mark;       /* the MARK sentinel pushed on the stack */
} unpickler;

static int64_t at(const unpickler *u) { return (int64_t)(u->p - u->start); }

static tp_value *make(unpickler *u, tp_kind kind) {
    tp_arena *a = u->a;
    if (a->n >= TP_MAX_VALUES)
        return BAD("torch: %s: the pickle makes more than %d objects", u->path, TP_MAX_VALUES), NULL;
    if (a->n == a->cap) {
        int64_t c = a->cap ? a->cap * 2 : 256;
        tp_value **g = realloc(a->all, (size_t)c * sizeof *g);
        if (!g) return TD_ERR(TD_ERR_OOM, "torch: out of host memory unpickling %s", u->path), NULL;
        a->all = g, a->cap = c;
    }
    tp_value *v = calloc(1, sizeof *v);
    if (!v) return TD_ERR(TD_ERR_OOM, "torch: out of host memory unpickling %s", u->path), NULL;
    v->kind = kind;
    a->all[a->n++] = v;
    return v;
}

static td_status push(unpickler *u, tp_value *v) {
    if (!v) return td_last_status();
    if (u->sp == u->scap) {
        int64_t c = u->scap ? u->scap * 2 : 64;
        tp_value **g = realloc(u->stack, (size_t)c * sizeof *g);
        if (!g) return TD_ERR(TD_ERR_OOM, "torch: out of host memory unpickling %s", u->path);
        u->stack = g, u->scap = c;
    }
    u->stack[u->sp++] = v;
    return TD_OK;
}

/* Pop one value (never the MARK). */
static tp_value *pop(unpickler *u, const char *op) {
    if (u->sp == 0 || u->stack[u->sp - 1]->kind == TP_MARK)
        return BAD("torch: %s: pickle opcode %s at byte %lld pops an empty stack", u->path, op, (long long)at(u)), NULL;
    return u->stack[--u->sp];
}

/* The stack index just above the topmost MARK, or -1 with an error. */
static int64_t find_mark(unpickler *u, const char *op) {
    for (int64_t i = u->sp - 1; i >= 0; i--)
        if (u->stack[i]->kind == TP_MARK) return i + 1;
    BAD("torch: %s: pickle opcode %s at byte %lld has no MARK", u->path, op, (long long)at(u));
    return -1;
}

static td_status append(unpickler *u, tp_value *c, tp_value *item) {
    if (c->n == c->cap) {
        int64_t cap = c->cap ? c->cap * 2 : 4;
        tp_value **g = realloc(c->items, (size_t)cap * sizeof *g);
        if (!g) return TD_ERR(TD_ERR_OOM, "torch: out of host memory unpickling %s", u->path);
        c->items = g, c->cap = cap;
    }
    c->items[c->n++] = item;
    return TD_OK;
}

static const uint8_t *take(unpickler *u, uint64_t n) {
    if ((uint64_t)(u->end - u->p) < n) {
        BAD("torch: %s: the pickle ends inside an opcode's argument at byte %lld", u->path, (long long)at(u));
        return NULL;
    }
    const uint8_t *r = u->p;
    u->p += n;
    return r;
}

static uint64_t le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static td_status push_str(unpickler *u, const uint8_t *s, uint64_t n) {
    if (!s) return td_last_status();
    tp_value *v = make(u, TP_STR);
    if (!v) return td_last_status();
    v->s = malloc((size_t)n + 1);
    if (!v->s) return TD_ERR(TD_ERR_OOM, "torch: out of host memory unpickling %s", u->path);
    memcpy(v->s, s, (size_t)n);
    v->s[n] = 0;
    v->len = (size_t)n;
    return push(u, v);
}

/* The storage classes torch.save names, and their dtypes. */
static const struct {
    const char *name;
    td_dtype dtype;
} storage_types[] = {
    {"FloatStorage", TD_F32},
    {"DoubleStorage", TD_F64},
    {"HalfStorage", TD_F16},
    {"BFloat16Storage", TD_BF16},
    {"LongStorage", TD_I64},
    {"IntStorage", TD_I32},
    {"ByteStorage", TD_U8},
    {"BoolStorage", TD_BOOL},
    {"CharStorage", TD_DTYPE_COUNT},
    {"ShortStorage", TD_DTYPE_COUNT},
    {"ComplexFloatStorage", TD_DTYPE_COUNT},
    {"ComplexDoubleStorage", TD_DTYPE_COUNT},
};
#define N_STORAGE_TYPES ((int)(sizeof storage_types / sizeof storage_types[0]))

static const char *const allowed_calls[] = {"collections OrderedDict", "torch._utils _rebuild_tensor_v2",
                                            "torch._utils _rebuild_parameter"};

/* GLOBAL / STACK_GLOBAL module.name: an allowed global or an error naming it. */
static td_status push_global(unpickler *u, const char *module, size_t mlen, const char *name, size_t nlen) {
    char full[256];
    if (mlen + nlen + 2 > sizeof full || memchr(module, 0, mlen) || memchr(name, 0, nlen))
        return BAD("torch: %s: the pickle names a global with an over-long or malformed name; a weights-only load "
                   "refuses it",
                   u->path);
    memcpy(full, module, mlen);
    full[mlen] = ' ';
    memcpy(full + mlen + 1, name, nlen);
    full[mlen + 1 + nlen] = 0;
    bool ok = false;
    for (size_t i = 0; i < sizeof allowed_calls / sizeof *allowed_calls; i++)
        ok = ok || !strcmp(full, allowed_calls[i]);
    if (mlen == 5 && !memcmp(module, "torch", 5))
        for (int i = 0; i < N_STORAGE_TYPES; i++) ok = ok || !strcmp(full + 6, storage_types[i].name);
    if (!ok) {
        full[mlen] = '.';
        return BAD("torch: %s: the pickle names global %s, which a weights-only load refuses (only tensors, storages, "
                   "dicts, OrderedDict, lists, tuples, numbers and strings are read)",
                   u->path, TD_QUOTE(full));
    }
    tp_value *v = make(u, TP_GLOBAL);
    if (!v || !(v->s = strdup(full))) return v ? TD_ERR(TD_ERR_OOM, "torch: out of host memory") : td_last_status();
    return push(u, v);
}

static td_status op_global(unpickler *u) {
    const uint8_t *m = u->p, *nl1 = memchr(m, '\n', (size_t)(u->end - m));
    const uint8_t *nm = nl1 ? nl1 + 1 : NULL, *nl2 = nm ? memchr(nm, '\n', (size_t)(u->end - nm)) : NULL;
    if (!nl2) return BAD("torch: %s: GLOBAL at byte %lld is not two lines", u->path, (long long)at(u));
    u->p = nl2 + 1;
    return push_global(u, (const char *)m, (size_t)(nl1 - m), (const char *)nm, (size_t)(nl2 - nm));
}

static int64_t int_arg(const tp_value *v, bool *ok) {
    *ok = *ok && v && (v->kind == TP_INT || v->kind == TP_BOOL);
    return *ok ? v->i : 0;
}

/* BINPERSID: ('storage', <Type>Storage, key, location, numel) -> a storage. */
static td_status op_persid(unpickler *u) {
    tp_value *pid = pop(u, "BINPERSID");
    if (!pid) return td_last_status();
    if (pid->kind != TP_TUPLE || pid->n != 5 || pid->items[0]->kind != TP_STR || strcmp(pid->items[0]->s, "storage") ||
        pid->items[1]->kind != TP_GLOBAL || strncmp(pid->items[1]->s, "torch ", 6) || pid->items[2]->kind != TP_STR ||
        pid->items[4]->kind != TP_INT || pid->items[4]->i < 0)
        return BAD("torch: %s: a persistent id at byte %lld is not ('storage', torch.<Type>Storage, key, location, "
                   "numel)",
                   u->path, (long long)at(u));
    tp_value *s = make(u, TP_STORAGE);
    if (!s) return td_last_status();
    const char *cls = pid->items[1]->s + 6;
    s->dtype = TD_DTYPE_COUNT;
    s->storage_type = NULL;
    for (int i = 0; i < N_STORAGE_TYPES; i++)
        if (!strcmp(cls, storage_types[i].name))
            s->dtype = storage_types[i].dtype, s->storage_type = storage_types[i].name;
    if (!s->storage_type) return BAD("torch: %s: persistent id names %s, not a storage class", u->path, TD_QUOTE(cls));
    s->s = pid->items[2]->s;
    s->i = pid->items[4]->i;
    return push(u, s);
}

/* REDUCE: callable(*args) for the allowed callables only. */
static td_status op_reduce(unpickler *u) {
    tp_value *args = pop(u, "REDUCE"), *fn = args ? pop(u, "REDUCE") : NULL;
    if (!fn) return td_last_status();
    if (fn->kind != TP_GLOBAL)
        return BAD("torch: %s: REDUCE at byte %lld calls a value that is not a global", u->path, (long long)at(u));
    if (args->kind != TP_TUPLE)
        return BAD("torch: %s: REDUCE at byte %lld of %s has arguments that are not a tuple", u->path, (long long)at(u),
                   TD_QUOTE(fn->s));
    if (!strcmp(fn->s, "collections OrderedDict")) {
        if (args->n != 0)
            return BAD("torch: %s: OrderedDict at byte %lld is built from arguments; only OrderedDict() is read",
                       u->path, (long long)at(u));
        return push(u, make(u, TP_DICT));
    }
    if (!strcmp(fn->s, "torch._utils _rebuild_parameter")) {
        if (args->n != 3 || args->items[0]->kind != TP_TENSOR)
            return BAD("torch: %s: _rebuild_parameter at byte %lld does not wrap a tensor", u->path, (long long)at(u));
        return push(u, args->items[0]);
    }
    if (strcmp(fn->s, "torch._utils _rebuild_tensor_v2"))
        return BAD("torch: %s: REDUCE at byte %lld calls %s, which a weights-only load refuses", u->path,
                   (long long)at(u), TD_QUOTE(fn->s));
    /* _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata]) */
    tp_value **a = args->items;
    if ((args->n != 6 && args->n != 7) || a[0]->kind != TP_STORAGE || a[2]->kind != TP_TUPLE ||
        a[3]->kind != TP_TUPLE || a[2]->n != a[3]->n)
        return BAD("torch: %s: _rebuild_tensor_v2 at byte %lld needs (storage, offset, size, stride, ...) with as "
                   "many strides as sizes",
                   u->path, (long long)at(u));
    if (a[2]->n > TD_MAX_DIMS)
        return BAD("torch: %s: a tensor at byte %lld has %lld dims, more than %d", u->path, (long long)at(u),
                   (long long)a[2]->n, TD_MAX_DIMS);
    tp_value *t = make(u, TP_TENSOR);
    if (!t) return td_last_status();
    bool ok = true;
    t->storage = a[0];
    t->i = int_arg(a[1], &ok);
    t->ndim = (int)a[2]->n;
    for (int d = 0; d < t->ndim; d++) {
        t->size[d] = int_arg(a[2]->items[d], &ok);
        t->stride[d] = int_arg(a[3]->items[d], &ok);
        ok = ok && t->size[d] >= 0 && t->stride[d] >= 0;
    }
    if (!ok || t->i < 0)
        return BAD("torch: %s: a tensor at byte %lld has an offset, size or stride that is not a non-negative integer",
                   u->path, (long long)at(u));
    return push(u, t);
}

/* BUILD: only the attribute dicts torch attaches to state dicts (_metadata). */
static td_status op_build(unpickler *u) {
    tp_value *state = pop(u, "BUILD"), *obj = state ? pop(u, "BUILD") : NULL;
    if (!obj) return td_last_status();
    if (obj->kind != TP_DICT || (state->kind != TP_DICT && state->kind != TP_NONE))
        return BAD("torch: %s: BUILD at byte %lld sets state on an object other than a dict", u->path,
                   (long long)at(u));
    return push(u, obj);
}

static td_status memo_put(unpickler *u, uint64_t id) {
    if (u->sp == 0 || u->stack[u->sp - 1]->kind == TP_MARK)
        return BAD("torch: %s: memo put at byte %lld with an empty stack", u->path, (long long)at(u));
    if (id >= TP_MAX_MEMO) return BAD("torch: %s: memo id %llu is over the limit", u->path, (unsigned long long)id);
    if ((int64_t)id >= u->nmemo) {
        int64_t n = (int64_t)id + 1 > 2 * u->nmemo ? (int64_t)id + 1 : 2 * u->nmemo;
        tp_value **g = realloc(u->memo, (size_t)n * sizeof *g);
        if (!g) return TD_ERR(TD_ERR_OOM, "torch: out of host memory unpickling %s", u->path);
        memset(g + u->nmemo, 0, (size_t)(n - u->nmemo) * sizeof *g);
        u->memo = g, u->nmemo = n;
    }
    if (!u->memo[id]) u->nset++;
    u->memo[id] = u->stack[u->sp - 1];
    return TD_OK;
}

static td_status memo_get(unpickler *u, uint64_t id) {
    if ((int64_t)id >= u->nmemo || !u->memo[id])
        return BAD("torch: %s: memo get of unset id %llu at byte %lld", u->path, (unsigned long long)id,
                   (long long)at(u));
    return push(u, u->memo[id]);
}

/* TUPLE, LIST, DICT: the items above the topmost MARK into a new container
** of kind, which replaces them and the MARK. */
static td_status collect(unpickler *u, tp_kind kind, const char *op) {
    int64_t m = find_mark(u, op);
    tp_value *c = m < 0 ? NULL : make(u, kind);
    if (!c) return td_last_status();
    if (kind == TP_DICT && (u->sp - m) % 2)
        return BAD("torch: %s: %s at byte %lld has an odd number of items", u->path, op, (long long)at(u));
    for (int64_t i = m; i < u->sp; i++)
        if (append(u, c, u->stack[i]) != TD_OK) return td_last_status();
    u->sp = m - 1;
    return push(u, c);
}

static td_status tuple_n(unpickler *u, int n) {
    tp_value *t = make(u, TP_TUPLE);
    if (!t) return td_last_status();
    if (u->sp < n) return BAD("torch: %s: TUPLE%d at byte %lld pops an empty stack", u->path, n, (long long)at(u));
    for (int i = 0; i < n; i++) {
        tp_value *v = u->stack[u->sp - n + i];
        if (v->kind == TP_MARK) return BAD("torch: %s: TUPLE%d at byte %lld pops a MARK", u->path, n, (long long)at(u));
        if (append(u, t, v) != TD_OK) return td_last_status();
    }
    u->sp -= n;
    return push(u, t);
}

/* APPEND, SETITEM (one: the top 1 or 2 values) and APPENDS, SETITEMS (the
** values above the topmost MARK) into the list or dict below them. */
static td_status add_items(unpickler *u, tp_kind kind, const char *op, bool one) {
    int per = kind == TP_DICT ? 2 : 1;
    int64_t m = one ? u->sp - per : find_mark(u, op); /* first item */
    if (!one && m < 0) return td_last_status();
    int64_t below = one ? m - 1 : m - 2; /* the container */
    if (below < 0 || (u->sp - m) % per)
        return BAD("torch: %s: %s at byte %lld has no container below its items", u->path, op, (long long)at(u));
    tp_value *c = u->stack[below];
    if (c->kind != kind)
        return BAD("torch: %s: %s at byte %lld adds items to a %s", u->path, op, (long long)at(u),
                   c->kind == TP_MARK ? "MARK" : "value of another type");
    for (int64_t i = m; i < u->sp; i++) {
        if (u->stack[i]->kind == TP_MARK)
            return BAD("torch: %s: %s at byte %lld: a MARK among its items", u->path, op, (long long)at(u));
        if (append(u, c, u->stack[i]) != TD_OK) return td_last_status();
    }
    u->sp = below + 1;
    return TD_OK;
}

static td_status push_int(unpickler *u, int64_t i) {
    tp_value *v = make(u, TP_INT);
    if (v) v->i = i;
    return push(u, v);
}

/* One opcode; *done at STOP. */
static td_status step(unpickler *u, bool *done) {
    const uint8_t *a;
    uint8_t op = *u->p++;
    switch (op) {
    case 0x80: /* PROTO */
        if (!(a = take(u, 1))) return td_last_status();
        if (*a > 5) return BAD("torch: %s: pickle protocol %d is unknown", u->path, *a);
        return TD_OK;
    case 0x95: return take(u, 8) ? TD_OK : td_last_status(); /* FRAME: a hint only */
    case '.': *done = true; return TD_OK;                    /* STOP */
    case '(': return push(u, &u->mark);                      /* MARK */
    case '0': return pop(u, "POP") ? TD_OK : td_last_status();
    case '1': { /* POP_MARK */
        int64_t m = find_mark(u, "POP_MARK");
        if (m < 0) return td_last_status();
        u->sp = m - 1;
        return TD_OK;
    }
    case '2': { /* DUP */
        tp_value *v = pop(u, "DUP");
        return v ? (push(u, v) == TD_OK ? push(u, v) : td_last_status()) : td_last_status();
    }
    case 'N': return push(u, make(u, TP_NONE));
    case 0x88:
    case 0x89: {
        tp_value *v = make(u, TP_BOOL);
        if (v) v->i = op == 0x88;
        return push(u, v);
    }
    case 'J': return (a = take(u, 4)) ? push_int(u, (int32_t)(uint32_t)le(a, 4)) : td_last_status();
    case 'K': return (a = take(u, 1)) ? push_int(u, a[0]) : td_last_status();
    case 'M': return (a = take(u, 2)) ? push_int(u, (int64_t)le(a, 2)) : td_last_status();
    case 0x8a: { /* LONG1: n bytes of little-endian two's complement */
        if (!(a = take(u, 1))) return td_last_status();
        int n = a[0];
        if (n > 8) return BAD("torch: %s: an integer at byte %lld does not fit 64 bits", u->path, (long long)at(u));
        if (!(a = take(u, (uint64_t)n))) return td_last_status();
        uint64_t v = le(a, n);
        if (n > 0 && n < 8 && (a[n - 1] & 0x80)) v |= ~0ull << (8 * n);
        return push_int(u, (int64_t)v);
    }
    case 'G': { /* BINFLOAT: big-endian double */
        if (!(a = take(u, 8))) return td_last_status();
        uint64_t bits = 0;
        for (int i = 0; i < 8; i++) bits = bits << 8 | a[i];
        tp_value *v = make(u, TP_FLOAT);
        if (v) memcpy(&v->f, &bits, 8);
        return push(u, v);
    }
    case 'X':   /* BINUNICODE */
    case 'T':   /* BINSTRING */
    case 'B': { /* BINBYTES */
        if (!(a = take(u, 4))) return td_last_status();
        uint64_t n = le(a, 4);
        return push_str(u, take(u, n), n);
    }
    case 0x8c:  /* SHORT_BINUNICODE */
    case 'U':   /* SHORT_BINSTRING */
    case 'C': { /* SHORT_BINBYTES */
        if (!(a = take(u, 1))) return td_last_status();
        return push_str(u, take(u, a[0]), a[0]);
    }
    case 0x8d: { /* BINUNICODE8 */
        if (!(a = take(u, 8))) return td_last_status();
        uint64_t n = le(a, 8);
        return push_str(u, take(u, n), n);
    }
    case ')': return push(u, make(u, TP_TUPLE));
    case 't': return collect(u, TP_TUPLE, "TUPLE");
    case 0x85: return tuple_n(u, 1);
    case 0x86: return tuple_n(u, 2);
    case 0x87: return tuple_n(u, 3);
    case ']': return push(u, make(u, TP_LIST));
    case 'l': return collect(u, TP_LIST, "LIST");
    case 'a': return add_items(u, TP_LIST, "APPEND", true);
    case 'e': return add_items(u, TP_LIST, "APPENDS", false);
    case '}': return push(u, make(u, TP_DICT));
    case 'd': return collect(u, TP_DICT, "DICT");
    case 's': return add_items(u, TP_DICT, "SETITEM", true);
    case 'u': return add_items(u, TP_DICT, "SETITEMS", false);
    case 'c': return op_global(u);
    case 0x93: { /* STACK_GLOBAL */
        tp_value *name = pop(u, "STACK_GLOBAL"), *mod = name ? pop(u, "STACK_GLOBAL") : NULL;
        if (!mod) return td_last_status();
        if (mod->kind != TP_STR || name->kind != TP_STR)
            return BAD("torch: %s: STACK_GLOBAL at byte %lld takes two strings", u->path, (long long)at(u));
        return push_global(u, mod->s, mod->len, name->s, name->len);
    }
    case 'R': return op_reduce(u);
    case 'b': return op_build(u);
    case 'Q': return op_persid(u);
    case 'q': return (a = take(u, 1)) ? memo_put(u, a[0]) : td_last_status();
    case 'r': return (a = take(u, 4)) ? memo_put(u, le(a, 4)) : td_last_status();
    case 0x94: return memo_put(u, (uint64_t)u->nset); /* MEMOIZE: the next id */
    case 'h': return (a = take(u, 1)) ? memo_get(u, a[0]) : td_last_status();
    case 'j': return (a = take(u, 4)) ? memo_get(u, le(a, 4)) : td_last_status();
    case 0x81:
    case 0x92:
        return BAD("torch: %s: the pickle builds an object (NEWOBJ) at byte %lld, which a weights-only load refuses",
                   u->path, (long long)at(u) - 1);
    default:
        return BAD("torch: %s: pickle opcode 0x%02x at byte %lld is not read by the weights-only loader", u->path, op,
                   (long long)at(u) - 1);
    }
}

td_status tp_unpickle(const uint8_t *data, size_t n, const char *qpath, tp_arena **arena, tp_value **root) {
    *root = NULL;
    *arena = calloc(1, sizeof **arena);
    if (!*arena) return TD_ERR(TD_ERR_OOM, "torch: out of host memory");
    if (n > TP_MAX_PICKLE)
        return BAD("torch: %s: data.pkl is %zu bytes, over the %llu-byte limit", qpath, n,
                   (unsigned long long)TP_MAX_PICKLE);
    unpickler u = {.p = data, .start = data, .end = data + n, .path = qpath, .a = *arena};
    u.mark.kind = TP_MARK;
    td_status st = TD_OK;
    bool done = false;
    while (st == TD_OK && !done) {
        if (u.p == u.end)
            st = BAD("torch: %s: the pickle ends without STOP (truncated?)", qpath);
        else
            st = step(&u, &done);
    }
    if (st == TD_OK && (u.sp != 1 || u.stack[0]->kind == TP_MARK))
        st = BAD("torch: %s: the pickle stops with %lld values on its stack, not 1", qpath, (long long)u.sp);
    if (st == TD_OK) *root = u.stack[0];
    free(u.stack);
    free(u.memo);
    return st;
}

void tp_free(tp_arena *a) {
    if (!a) return;
    for (int64_t i = 0; i < a->n; i++) {
        if (a->all[i]->kind != TP_STORAGE) free(a->all[i]->s); /* a storage borrows its key */
        free(a->all[i]->items);
        free(a->all[i]);
    }
    free(a->all);
    free(a);
}
