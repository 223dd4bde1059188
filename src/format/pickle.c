/* The interpreter of pickle.h: a machine (pickle_machine.h) that runs the
 * opcodes up to STOP; pickle_paths.c then names the storages it met. */
#include "format/pickle.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/dtype.h"
#include "format/pickle_machine.h"

/* ---- opcodes ---- */

/* The opcodes the interpreter runs (pickle.h lists them). */
enum {
    OP_MARK = '(', OP_STOP = '.', OP_POP = '0', OP_POP_MARK = '1',
    OP_INT = 'I', OP_LONG = 'L', OP_BININT = 'J', OP_BININT1 = 'K', OP_BININT2 = 'M',
    OP_NONE = 'N', OP_BINFLOAT = 'G', OP_BINPERSID = 'Q', OP_REDUCE = 'R', OP_BUILD = 'b',
    OP_GLOBAL = 'c', OP_BINUNICODE = 'X', OP_BINBYTES = 'B', OP_SHORT_BINBYTES = 'C',
    OP_EMPTY_LIST = ']', OP_APPEND = 'a', OP_APPENDS = 'e',
    OP_EMPTY_DICT = '}', OP_SETITEM = 's', OP_SETITEMS = 'u',
    OP_EMPTY_TUPLE = ')', OP_TUPLE = 't',
    OP_BINGET = 'h', OP_LONG_BINGET = 'j', OP_BINPUT = 'q', OP_LONG_BINPUT = 'r',
    OP_PROTO = 0x80, OP_TUPLE1 = 0x85, OP_TUPLE2 = 0x86, OP_TUPLE3 = 0x87,
    OP_NEWTRUE = 0x88, OP_NEWFALSE = 0x89, OP_LONG1 = 0x8a, OP_LONG4 = 0x8b,
    OP_SHORT_BINUNICODE = 0x8c, OP_BINUNICODE8 = 0x8d, OP_BINBYTES8 = 0x8e,
    OP_STACK_GLOBAL = 0x93, OP_MEMOIZE = 0x94, OP_FRAME = 0x95,
};

/* Every opcode of pickle protocols 0 to 5, for messages. */
static const char *const op_names[256] = {
    ['('] = "MARK", ['.'] = "STOP", ['0'] = "POP", ['1'] = "POP_MARK", ['2'] = "DUP",
    ['F'] = "FLOAT", ['I'] = "INT", ['J'] = "BININT", ['K'] = "BININT1", ['L'] = "LONG",
    ['M'] = "BININT2", ['N'] = "NONE", ['P'] = "PERSID", ['Q'] = "BINPERSID", ['R'] = "REDUCE",
    ['S'] = "STRING", ['T'] = "BINSTRING", ['U'] = "SHORT_BINSTRING", ['V'] = "UNICODE",
    ['X'] = "BINUNICODE", ['a'] = "APPEND", ['b'] = "BUILD", ['c'] = "GLOBAL", ['d'] = "DICT",
    ['}'] = "EMPTY_DICT", ['e'] = "APPENDS", ['g'] = "GET", ['h'] = "BINGET", ['i'] = "INST",
    ['j'] = "LONG_BINGET", ['l'] = "LIST", [']'] = "EMPTY_LIST", ['o'] = "OBJ", ['p'] = "PUT",
    ['q'] = "BINPUT", ['r'] = "LONG_BINPUT", ['s'] = "SETITEM", ['t'] = "TUPLE",
    [')'] = "EMPTY_TUPLE", ['u'] = "SETITEMS", ['G'] = "BINFLOAT", ['B'] = "BINBYTES",
    ['C'] = "SHORT_BINBYTES", [0x80] = "PROTO", [0x81] = "NEWOBJ", [0x82] = "EXT1",
    [0x83] = "EXT2", [0x84] = "EXT4", [0x85] = "TUPLE1", [0x86] = "TUPLE2", [0x87] = "TUPLE3",
    [0x88] = "NEWTRUE", [0x89] = "NEWFALSE", [0x8a] = "LONG1", [0x8b] = "LONG4",
    [0x8c] = "SHORT_BINUNICODE", [0x8d] = "BINUNICODE8", [0x8e] = "BINBYTES8",
    [0x8f] = "EMPTY_SET", [0x90] = "ADDITEMS", [0x91] = "FROZENSET", [0x92] = "NEWOBJ_EX",
    [0x93] = "STACK_GLOBAL", [0x94] = "MEMOIZE", [0x95] = "FRAME", [0x96] = "BYTEARRAY8",
    [0x97] = "NEXT_BUFFER", [0x98] = "READONLY_BUFFER",
};

/* ---- values ---- */

/* Of each kind (pickle_machine.h), for messages. */
static const char *const kind_names[] = {
    "None", "a bool", "an int", "an int beyond 64 bits", "a float", "a str", "bytes",
    "a tuple", "a list", "a dict", "a global", "a storage", "a tensor",
};

/* What a global is to the interpreter. */
typedef enum {
    G_OTHER, /* recorded by name; calling it is an error */
    G_ORDERED_DICT,
    G_DICT_FACTORY,      /* collections.defaultdict(factory): a dict */
    G_VALUE,             /* a plain value's constructor (torch.Size, set, ...): the
                            call stands for its arguments, a tuple */
    G_REBUILD_V2,        /* (storage, offset, size, stride, requires_grad, hooks[, metadata]) */
    G_REBUILD_V3,        /* the same with dtype before metadata */
    G_PARAMETER,         /* (tensor, requires_grad, hooks) */
    G_PARAMETER_STATE,   /* (tensor, requires_grad, hooks, state) */
    G_STORAGE,           /* a storage class; dtype TF_DT_NONE for UntypedStorage */
    G_DTYPE,
} role;

static const struct {
    const char *module, *name;
    role role;
    tf_dtype dtype;
} known_globals[] = {
    { "collections", "OrderedDict", G_ORDERED_DICT, TF_DT_NONE },
    { "collections", "defaultdict", G_DICT_FACTORY, TF_DT_NONE },
    /* The value constructors torch.load's weights_only unpickler also
     * admits: what they build holds no code and no storage of its own. */
    { "torch", "Size", G_VALUE, TF_DT_NONE },
    { "torch", "device", G_VALUE, TF_DT_NONE },
    { "torch.serialization", "_get_layout", G_VALUE, TF_DT_NONE },
    { "_codecs", "encode", G_VALUE, TF_DT_NONE },
    { "builtins", "set", G_VALUE, TF_DT_NONE },
    { "builtins", "frozenset", G_VALUE, TF_DT_NONE },
    { "builtins", "complex", G_VALUE, TF_DT_NONE },
    { "builtins", "bytearray", G_VALUE, TF_DT_NONE },
    { "builtins", "slice", G_VALUE, TF_DT_NONE },
    /* Protocol 2 names builtins as Python 2 did. */
    { "__builtin__", "set", G_VALUE, TF_DT_NONE },
    { "__builtin__", "frozenset", G_VALUE, TF_DT_NONE },
    { "__builtin__", "complex", G_VALUE, TF_DT_NONE },
    { "__builtin__", "bytearray", G_VALUE, TF_DT_NONE },
    { "__builtin__", "slice", G_VALUE, TF_DT_NONE },
    { "torch._utils", "_rebuild_tensor_v2", G_REBUILD_V2, TF_DT_NONE },
    { "torch._utils", "_rebuild_tensor_v3", G_REBUILD_V3, TF_DT_NONE },
    { "torch._utils", "_rebuild_parameter", G_PARAMETER, TF_DT_NONE },
    { "torch._utils", "_rebuild_parameter_with_state", G_PARAMETER_STATE, TF_DT_NONE },
    { "torch", "UntypedStorage", G_STORAGE, TF_DT_NONE },
    { "torch", "FloatStorage", G_STORAGE, TF_DT_F32 },
    { "torch", "HalfStorage", G_STORAGE, TF_DT_F16 },
    { "torch", "BFloat16Storage", G_STORAGE, TF_DT_BF16 },
    { "torch", "DoubleStorage", G_STORAGE, TF_DT_F64 },
    { "torch", "LongStorage", G_STORAGE, TF_DT_I64 },
    { "torch", "IntStorage", G_STORAGE, TF_DT_I32 },
    { "torch", "ShortStorage", G_STORAGE, TF_DT_I16 },
    { "torch", "CharStorage", G_STORAGE, TF_DT_I8 },
    { "torch", "ByteStorage", G_STORAGE, TF_DT_U8 },
    { "torch", "BoolStorage", G_STORAGE, TF_DT_BOOL },
    /* A dtype pickles as torch.<its name>. */
    { "torch", "float32", G_DTYPE, TF_DT_F32 },
    { "torch", "float16", G_DTYPE, TF_DT_F16 },
    { "torch", "bfloat16", G_DTYPE, TF_DT_BF16 },
    { "torch", "float64", G_DTYPE, TF_DT_F64 },
    { "torch", "float8_e4m3fn", G_DTYPE, TF_DT_F8_E4M3 },
    { "torch", "float8_e5m2", G_DTYPE, TF_DT_F8_E5M2 },
    { "torch", "int64", G_DTYPE, TF_DT_I64 },
    { "torch", "int32", G_DTYPE, TF_DT_I32 },
    { "torch", "int16", G_DTYPE, TF_DT_I16 },
    { "torch", "int8", G_DTYPE, TF_DT_I8 },
    { "torch", "uint64", G_DTYPE, TF_DT_U64 },
    { "torch", "uint32", G_DTYPE, TF_DT_U32 },
    { "torch", "uint16", G_DTYPE, TF_DT_U16 },
    { "torch", "uint8", G_DTYPE, TF_DT_U8 },
    { "torch", "bool", G_DTYPE, TF_DT_BOOL },
};

struct global {
    const uint8_t *module, *name; /* in the pickle */
    size_t module_len, name_len;
    role role;
    tf_dtype dtype; /* G_STORAGE, G_DTYPE */
};

/* ---- messages ---- */

/* s as a message may show it: printable ASCII, '?' for other bytes, cut
 * after SHOWN_MAX bytes. */
static const char *shown(const uint8_t *s, size_t n, char out[SHOWN_MAX + 4])
{
    size_t k = n < SHOWN_MAX ? n : SHOWN_MAX;
    for (size_t i = 0; i < k; i++)
        out[i] = s[i] >= 0x20 && s[i] < 0x7f ? (char)s[i] : '?';
    strcpy(out + k, n > k ? "..." : "");
    return out;
}

static const char *op_name(uint8_t op)
{
    return op_names[op] ? op_names[op] : "an unknown opcode";
}

int tf_pickle_fail(machine *m, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tf_fail(m->e, EINVAL, "pickle offset %zu, %s (0x%02x): %s", m->op_pos, op_name(m->op),
                   m->op, msg);
}

int tf_pickle_nomem(machine *m)
{
    return tf_fail(m->e, EINVAL, "pickle: out of memory to interpret it");
}

/* "module.name" of g for a message. */
static const char *global_name(const global *g, char out[2 * SHOWN_MAX + 9])
{
    char module[SHOWN_MAX + 4], name[SHOWN_MAX + 4];
    snprintf(out, 2 * SHOWN_MAX + 9, "%s.%s", shown(g->module, g->module_len, module),
             shown(g->name, g->name_len, name));
    return out;
}

/* ---- memory ---- */

int tf_pickle_charge(machine *m, size_t bytes)
{
    const size_t budget = TF_PICKLE_BUDGET(m->len);
    if (bytes > budget - m->spent)
        return tf_pickle_fail(m, "interpreting it would take more than %zu bytes of memory "
                                 "(16 a byte of pickle, and 1 MiB)", budget);
    m->spent += bytes;
    return 0;
}

/* v (of *cap elements of size) with room for `need`: v itself, a larger
 * copy (twice as large, or exactly need when that is more), or NULL (out
 * of budget or memory). */
static void *grow(machine *m, void *v, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return v;
    size_t ncap = *cap && *cap <= SIZE_MAX / 2 && 2 * *cap > need ? 2 * *cap : need;
    if (ncap > SIZE_MAX / size) {
        tf_pickle_nomem(m);
        return NULL;
    }
    if (tf_pickle_charge(m, (ncap - *cap) * size) < 0)
        return NULL;
    void *nv = realloc(v, ncap * size);
    if (!nv) {
        tf_pickle_nomem(m);
        return NULL;
    }
    *cap = ncap;
    return nv;
}

static container *new_container(machine *m)
{
    container **all = grow(m, m->containers, &m->containers_cap, m->ncontainers + 1, sizeof *all);
    if (!all)
        return NULL;
    m->containers = all;
    if (tf_pickle_charge(m, sizeof(container)) < 0)
        return NULL;
    container *c = calloc(1, sizeof *c);
    if (!c) {
        tf_pickle_nomem(m);
        return NULL;
    }
    c->depth = 1;
    all[m->ncontainers++] = c;
    return c;
}

static bool is_container(kind k)
{
    return k == V_TUPLE || k == V_LIST || k == V_DICT;
}

/* c now holds v (an item, or its state): its depth grows with v's,
 * checked as it grows. A container that grows after it was put in
 * another does not deepen that one here: the walk (pickle_paths.c)
 * checks the depth it meets too. */
static int nest(machine *m, container *c, const value *v)
{
    if (!is_container(v->kind) || v->u.c->depth < c->depth)
        return 0;
    if (v->u.c->depth >= TF_PICKLE_MAX_DEPTH)
        return tf_pickle_fail(m, "the saved object nests more than %d containers deep",
                              TF_PICKLE_MAX_DEPTH);
    c->depth = v->u.c->depth + 1;
    return 0;
}

/* Appends the n (> 0) values at v to c. */
static int add_items(machine *m, container *c, const value *v, size_t n)
{
    value *items = grow(m, c->items, &c->cap, c->n + n, sizeof *items);
    if (!items)
        return -1;
    c->items = items;
    for (size_t i = 0; i < n; i++) {
        if (nest(m, c, &v[i]) < 0)
            return -1;
        items[c->n++] = v[i];
    }
    return 0;
}

/* ---- the stack ---- */

/* Values below the last mark are out of reach until it is popped. */
static size_t fence(const machine *m)
{
    return m->nmarks ? m->marks[m->nmarks - 1] : 0;
}

static int push(machine *m, value v)
{
    if (m->sp == TF_PICKLE_MAX_STACK)
        return tf_pickle_fail(m, "more than %u values on the stack", TF_PICKLE_MAX_STACK);
    value *s = grow(m, m->stack, &m->stack_cap, m->sp + 1, sizeof *s);
    if (!s)
        return -1;
    m->stack = s;
    s[m->sp++] = v;
    return 0;
}

static int pop(machine *m, value *v)
{
    if (m->sp == fence(m))
        return tf_pickle_fail(m, "stack underflow");
    *v = m->stack[--m->sp];
    return 0;
}

static value *top(machine *m)
{
    if (m->sp == fence(m)) {
        tf_pickle_fail(m, "stack underflow");
        return NULL;
    }
    return &m->stack[m->sp - 1];
}

/* Pops the last mark: *at is where it was. */
static int pop_mark(machine *m, size_t *at)
{
    if (!m->nmarks)
        return tf_pickle_fail(m, "no MARK is open");
    *at = m->marks[--m->nmarks];
    return 0;
}

static int push_container(machine *m, kind k)
{
    container *c = new_container(m);
    return c ? push(m, (value){ .kind = k, .u.c = c }) : -1;
}

/* Moves the values from stack position `from` up into c. */
static int move_items(machine *m, container *c, size_t from)
{
    if (m->sp > from && add_items(m, c, m->stack + from, m->sp - from) < 0)
        return -1;
    m->sp = from;
    return 0;
}

/* A tuple of the values from stack position `from` up. */
static int make_tuple(machine *m, size_t from)
{
    container *c = new_container(m);
    if (!c || move_items(m, c, from) < 0)
        return -1;
    return push(m, (value){ .kind = V_TUPLE, .u.c = c });
}

/* The container of kind k just below the last mark, for APPENDS and
 * SETITEMS; *from is where the items begin. */
static container *below_mark(machine *m, kind k, size_t *from)
{
    if (pop_mark(m, from) < 0)
        return NULL;
    if (*from == fence(m)) {
        tf_pickle_fail(m, "stack underflow");
        return NULL;
    }
    const value *v = &m->stack[*from - 1];
    if (v->kind != k) {
        tf_pickle_fail(m, "adds items to %s", kind_names[v->kind]);
        return NULL;
    }
    return v->u.c;
}

/* ---- reading the pickle ---- */

/* The next n bytes of the opcode's argument; NULL when the pickle is
 * shorter. */
static const uint8_t *take(machine *m, uint64_t n)
{
    if (n > m->len - m->pos) {
        tf_pickle_fail(m, "truncated: needs %" PRIu64 " bytes, %zu are left", n, m->len - m->pos);
        return NULL;
    }
    const uint8_t *b = m->p + m->pos;
    m->pos += (size_t)n;
    return b;
}

/* An unsigned little-endian argument of `bytes` bytes (1, 2, 4 or 8). */
static int take_uint(machine *m, unsigned bytes, uint64_t *v)
{
    const uint8_t *b = take(m, bytes);
    if (!b)
        return -1;
    *v = tf_le_get(b, bytes);
    return 0;
}

/* A text argument up to '\n' (protocols 0 and 1, and GLOBAL). */
static int take_line(machine *m, const uint8_t **s, size_t *n)
{
    const uint8_t *nl = memchr(m->p + m->pos, '\n', m->len - m->pos);
    if (!nl)
        return tf_pickle_fail(m, "truncated: no end of line");
    *s = m->p + m->pos;
    *n = (size_t)(nl - *s);
    m->pos += *n + 1;
    return 0;
}

static value int_value(int64_t i)
{
    return (value){ .kind = V_INT, .u.i = i };
}

/* A two's complement little-endian integer of n bytes (LONG1, LONG4). */
static value long_value(const uint8_t *b, size_t n)
{
    if (n == 0)
        return int_value(0);
    const uint8_t sign = b[n - 1] & 0x80 ? 0xff : 0;
    for (size_t i = 8; i < n; i++)
        if (b[i] != sign)
            return (value){ .kind = V_BIGINT };
    if (n > 8 && (b[7] & 0x80 ? 0xff : 0) != sign)
        return (value){ .kind = V_BIGINT };
    uint64_t u = sign ? UINT64_MAX : 0;
    for (size_t i = 0; i < n && i < 8; i++)
        u = (u & ~((uint64_t)0xff << 8 * i)) | (uint64_t)b[i] << 8 * i;
    return int_value(u <= INT64_MAX ? (int64_t)u : -(int64_t)(~u) - 1);
}

/* A decimal integer as protocol 1 writes one: -?[0-9]+. */
static int decimal_value(machine *m, const uint8_t *s, size_t n, value *v)
{
    const bool neg = n > 0 && s[0] == '-';
    uint64_t u = 0;
    bool big = false;
    if (n == (size_t)neg)
        return tf_pickle_fail(m, "not a decimal integer");
    for (size_t i = neg; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return tf_pickle_fail(m, "not a decimal integer");
        if (u > (UINT64_MAX - 9) / 10)
            big = true;
        else
            u = 10 * u + (uint64_t)(s[i] - '0');
    }
    if (big || u > (uint64_t)INT64_MAX + neg)
        *v = (value){ .kind = V_BIGINT };
    else
        *v = int_value(!neg ? (int64_t)u : u == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)u);
    return 0;
}

/* A str or bytes whose length is a little-endian `bytes`-byte prefix. */
static int push_string(machine *m, unsigned bytes, kind k)
{
    uint64_t n;
    const uint8_t *s;
    if (take_uint(m, bytes, &n) < 0 || !(s = take(m, n)))
        return -1;
    return push(m, (value){ .kind = k, .len = (size_t)n, .u.s = s });
}

/* ---- globals ---- */

static int push_global(machine *m, const uint8_t *module, size_t module_len, const uint8_t *name,
                       size_t name_len)
{
    global *gs = grow(m, m->globals, &m->globals_cap, m->nglobals + 1, sizeof *gs);
    if (!gs)
        return -1;
    m->globals = gs;
    global *g = &gs[m->nglobals];
    *g = (global){ module, name, module_len, name_len, G_OTHER, TF_DT_NONE };
    for (size_t i = 0; i < sizeof known_globals / sizeof known_globals[0]; i++)
        if (strlen(known_globals[i].module) == module_len &&
            memcmp(known_globals[i].module, module, module_len) == 0 &&
            strlen(known_globals[i].name) == name_len &&
            memcmp(known_globals[i].name, name, name_len) == 0) {
            g->role = known_globals[i].role;
            g->dtype = known_globals[i].dtype;
        }
    return push(m, (value){ .kind = V_GLOBAL, .u.index = m->nglobals++ });
}

static int op_global(machine *m)
{
    const uint8_t *module, *name;
    size_t module_len, name_len;
    if (take_line(m, &module, &module_len) < 0 || take_line(m, &name, &name_len) < 0)
        return -1;
    return push_global(m, module, module_len, name, name_len);
}

static int op_stack_global(machine *m)
{
    value module, name;
    if (pop(m, &name) < 0 || pop(m, &module) < 0)
        return -1;
    if (module.kind != V_STR || name.kind != V_STR)
        return tf_pickle_fail(m, "module and name are %s and %s, not two str",
                              kind_names[module.kind], kind_names[name.kind]);
    return push_global(m, module.u.s, module.len, name.u.s, name.len);
}

/* ---- storages ---- */

const char *tf_pickle_storage_key(const storage *s, char out[SHOWN_MAX + 4])
{
    return shown(s->key, s->key_len, out);
}

/* Records that a tensor reads storage s as elements of dt. */
static int set_dtype(machine *m, storage *s, tf_dtype dt)
{
    char key[SHOWN_MAX + 4];
    if (s->dtype != TF_DT_NONE && s->dtype != dt)
        return tf_pickle_fail(m, "storage '%s' (named at offset %zu) is read as %s but is %s",
                              tf_pickle_storage_key(s, key), s->offset, tf_dtype_get(dt)->name,
                              tf_dtype_get(s->dtype)->name);
    s->dtype = dt;
    return 0;
}

static bool is_str(const value *v, const char *s)
{
    return v->kind == V_STR && v->len == strlen(s) && memcmp(v->u.s, s, v->len) == 0;
}

/* BINPERSID of ('storage', storage class, key, location, numel). */
static int op_binpersid(machine *m)
{
    value pid;
    char name[2 * SHOWN_MAX + 9], key[SHOWN_MAX + 4];
    if (pop(m, &pid) < 0)
        return -1;
    if (pid.kind != V_TUPLE)
        return tf_pickle_fail(m, "a persistent id is %s, not a tuple ('storage', storage class, "
                                 "key, location, numel)", kind_names[pid.kind]);
    if (pid.u.c->n != 5)
        return tf_pickle_fail(m, "a persistent id of %zu items, not the 5 of ('storage', "
                                 "storage class, key, location, numel)", pid.u.c->n);
    const value *f = pid.u.c->items;
    if (!is_str(&f[0], "storage"))
        return tf_pickle_fail(m, "a persistent id's first item is not 'storage'");
    if (f[1].kind != V_GLOBAL)
        return tf_pickle_fail(m, "a storage class is %s", kind_names[f[1].kind]);
    const global *cls = &m->globals[f[1].u.index];
    if (cls->role != G_STORAGE)
        return tf_pickle_fail(m, "%s is not a storage class the archive stores",
                              global_name(cls, name));
    if (f[2].kind != V_STR || f[3].kind != V_STR)
        return tf_pickle_fail(m, "a storage's key and location are %s and %s, not two str",
                              kind_names[f[2].kind], kind_names[f[3].kind]);
    /* Keys are compared when storages are grouped: the bound keeps a key
     * that many ids share (through the memo) from costing more than its
     * bytes. */
    if (f[2].len > TF_PICKLE_MAX_KEY)
        return tf_pickle_fail(m, "a storage key longer than %d bytes", TF_PICKLE_MAX_KEY);
    if (memchr(f[2].u.s, 0, f[2].len))
        return tf_pickle_fail(m, "a storage key contains NUL");
    if (f[4].kind != V_INT)
        return tf_pickle_fail(m, "storage '%s': its size is %s, not an int",
                              shown(f[2].u.s, f[2].len, key), kind_names[f[4].kind]);
    if (f[4].u.i < 0)
        return tf_pickle_fail(m, "storage '%s': its size %" PRId64 " is negative",
                              shown(f[2].u.s, f[2].len, key), f[4].u.i);
    uint64_t size = cls->dtype == TF_DT_NONE ? 1 : tf_dtype_get(cls->dtype)->size;
    if ((uint64_t)f[4].u.i > UINT64_MAX / size)
        return tf_pickle_fail(m, "storage '%s': %" PRId64 " elements overflow",
                              shown(f[2].u.s, f[2].len, key), f[4].u.i);
    storage *ss = grow(m, m->storages, &m->storages_cap, m->nstorages + 1, sizeof *ss);
    if (!ss)
        return -1;
    m->storages = ss;
    ss[m->nstorages] = (storage){ .key = f[2].u.s, .key_len = f[2].len,
                                  .nbytes = (uint64_t)f[4].u.i * size, .dtype = cls->dtype,
                                  .offset = m->op_pos };
    return push(m, (value){ .kind = V_STORAGE, .u.index = m->nstorages++ });
}

/* ---- calls ---- */

/* Tensors have a few dimensions; the bound keeps a size tuple that many
 * REDUCEs share (through the memo) from costing more than its bytes. */
#define MAX_DIMS 64

static bool is_int_tuple(const value *v)
{
    if (v->kind != V_TUPLE || v->u.c->n > MAX_DIMS)
        return false;
    for (size_t i = 0; i < v->u.c->n; i++)
        if (v->u.c->items[i].kind != V_INT)
            return false;
    return true;
}

/* _rebuild_tensor_v2 / _v3(storage, storage_offset, size, stride,
 * requires_grad, backward_hooks[, dtype (v3)][, metadata]). */
static int rebuild_tensor(machine *m, const global *f, const container *args)
{
    char name[2 * SHOWN_MAX + 9];
    const bool v3 = f->role == G_REBUILD_V3;
    const value *a = args->items;
    if (args->n != 6u + v3 && args->n != 7u + v3)
        return tf_pickle_fail(m, "%s takes %d or %d arguments, not %zu", global_name(f, name),
                              6 + v3, 7 + v3, args->n);
    if (a[0].kind != V_STORAGE)
        return tf_pickle_fail(m, "%s of %s, not a storage", global_name(f, name),
                              kind_names[a[0].kind]);
    if (a[1].kind != V_INT || a[1].u.i < 0 || !is_int_tuple(&a[2]) || !is_int_tuple(&a[3]) ||
        a[2].u.c->n != a[3].u.c->n || a[4].kind != V_BOOL)
        return tf_pickle_fail(m, "%s: the offset, size, stride or requires_grad is malformed",
                              global_name(f, name));
    if (v3) {
        const global *dt = a[6].kind == V_GLOBAL ? &m->globals[a[6].u.index] : NULL;
        char dt_name[2 * SHOWN_MAX + 9];
        if (!dt || dt->role != G_DTYPE)
            return tf_pickle_fail(m, "%s: its dtype argument is %s, not a dtype the archive stores",
                                  global_name(f, name),
                                  dt ? global_name(dt, dt_name) : kind_names[a[6].kind]);
        if (set_dtype(m, &m->storages[a[0].u.index], dt->dtype) < 0)
            return -1;
    }
    return push(m, (value){ .kind = V_TENSOR, .u.index = a[0].u.index });
}

/* REDUCE: only OrderedDict(), defaultdict(factory), the tensor rebuild
 * functions and the value constructors of known_globals are called. */
static int op_reduce(machine *m)
{
    value args, f;
    char name[2 * SHOWN_MAX + 9];
    if (pop(m, &args) < 0 || pop(m, &f) < 0)
        return -1;
    if (f.kind != V_GLOBAL)
        return tf_pickle_fail(m, "calls %s", kind_names[f.kind]);
    const global *g = &m->globals[f.u.index];
    if (args.kind != V_TUPLE)
        return tf_pickle_fail(m, "the arguments of %s are %s, not a tuple", global_name(g, name),
                              kind_names[args.kind]);
    const container *a = args.u.c;
    switch (g->role) {
    case G_ORDERED_DICT:
        if (a->n)
            return tf_pickle_fail(m, "collections.OrderedDict is called with arguments");
        return push_container(m, V_DICT);
    case G_DICT_FACTORY:
        if (a->n > 1)
            return tf_pickle_fail(m, "collections.defaultdict is called with %zu arguments", a->n);
        return push_container(m, V_DICT);
    case G_VALUE:
        return push(m, args);
    case G_REBUILD_V2:
    case G_REBUILD_V3:
        return rebuild_tensor(m, g, a);
    case G_PARAMETER:
    case G_PARAMETER_STATE:
        if (a->n != (g->role == G_PARAMETER ? 3u : 4u) || a->items[0].kind != V_TENSOR)
            return tf_pickle_fail(m, "%s: malformed arguments", global_name(g, name));
        return push(m, a->items[0]);
    default:
        return tf_pickle_fail(m, "calls %s, which is neither a tensor rebuild function nor a "
                                 "plain value's constructor", global_name(g, name));
    }
}

/* ---- the other opcodes ---- */

static int op_memo_put(machine *m, uint64_t index)
{
    const value *v = top(m);
    if (!v)
        return -1;
    /* Picklers number memo entries in order: an index past the end is
     * never written, and refusing it bounds the memo by the puts. */
    if (index > m->nmemo)
        return tf_pickle_fail(m, "memo index %" PRIu64 " skips past the memo's %zu entries", index,
                              m->nmemo);
    if (index == m->nmemo) {
        if (m->nmemo == TF_PICKLE_MAX_MEMO)
            return tf_pickle_fail(m, "more than %u memo entries", TF_PICKLE_MAX_MEMO);
        value *memo = grow(m, m->memo, &m->memo_cap, m->nmemo + 1, sizeof *memo);
        if (!memo)
            return -1;
        m->memo = memo;
        m->nmemo++;
    }
    m->memo[index] = *v;
    return 0;
}

static int op_memo_get(machine *m, unsigned bytes)
{
    uint64_t index;
    if (take_uint(m, bytes, &index) < 0)
        return -1;
    if (index >= m->nmemo)
        return tf_pickle_fail(m, "memo index %" PRIu64 " is not set (the memo has %zu entries)",
                              index, m->nmemo);
    return push(m, m->memo[index]);
}

static int op_proto(machine *m)
{
    uint64_t version;
    if (take_uint(m, 1, &version) < 0)
        return -1;
    if (m->op_pos != 0)
        return tf_pickle_fail(m, "PROTO is not the first opcode");
    if (version < 2 || version > 5)
        return tf_pickle_fail(m, "protocol %" PRIu64 " is not one torch.save writes", version);
    return 0;
}

static int op_frame(machine *m)
{
    uint64_t n;
    if (take_uint(m, 8, &n) < 0)
        return -1;
    if (n > m->len - m->pos)
        return tf_pickle_fail(m, "a frame of %" PRIu64 " bytes runs past the end", n);
    return 0;
}

static int op_int(machine *m, bool text_bool)
{
    const uint8_t *s;
    size_t n;
    value v;
    if (take_line(m, &s, &n) < 0)
        return -1;
    /* Protocol 1 writes False and True as INT 00 and 01, and LONG as
     * digits and an 'L'. */
    if (text_bool && n == 2 && s[0] == '0' && (s[1] == '0' || s[1] == '1'))
        return push(m, (value){ .kind = V_BOOL, .u.i = s[1] == '1' });
    if (!text_bool && n > 0 && s[n - 1] == 'L')
        n--;
    return decimal_value(m, s, n, &v) < 0 ? -1 : push(m, v);
}

static int op_long(machine *m, unsigned bytes)
{
    uint64_t n;
    const uint8_t *b;
    if (take_uint(m, bytes, &n) < 0)
        return -1;
    if (bytes == 4 && n > INT32_MAX)
        return tf_pickle_fail(m, "a negative length");
    return (b = take(m, n)) ? push(m, long_value(b, (size_t)n)) : -1;
}

static int op_binint(machine *m, unsigned bytes)
{
    uint64_t u;
    if (take_uint(m, bytes, &u) < 0)
        return -1;
    /* BININT is signed, BININT1 and BININT2 unsigned. */
    return push(m, int_value(bytes == 4 && u > INT32_MAX ? (int64_t)u - ((int64_t)1 << 32)
                                                        : (int64_t)u));
}

static int op_fixed_tuple(machine *m, size_t n)
{
    if (m->sp - fence(m) < n)
        return tf_pickle_fail(m, "stack underflow");
    return make_tuple(m, m->sp - n);
}

static int op_append(machine *m)
{
    value v;
    const value *list;
    if (pop(m, &v) < 0 || !(list = top(m)))
        return -1;
    if (list->kind != V_LIST)
        return tf_pickle_fail(m, "appends to %s", kind_names[list->kind]);
    return add_items(m, list->u.c, &v, 1);
}

static int op_setitem(machine *m)
{
    value k, v;
    const value *dict;
    if (pop(m, &v) < 0 || pop(m, &k) < 0 || !(dict = top(m)))
        return -1;
    if (dict->kind != V_DICT)
        return tf_pickle_fail(m, "sets an item of %s", kind_names[dict->kind]);
    return add_items(m, dict->u.c, (value[]){ k, v }, 2);
}

static int op_appends(machine *m)
{
    size_t from;
    container *list = below_mark(m, V_LIST, &from);
    return list ? move_items(m, list, from) : -1;
}

static int op_setitems(machine *m)
{
    size_t from;
    container *dict = below_mark(m, V_DICT, &from);
    if (!dict)
        return -1;
    if ((m->sp - from) % 2)
        return tf_pickle_fail(m, "an odd number of keys and values");
    return move_items(m, dict, from);
}

/* BUILD of a dict: torch.save's OrderedDicts carry attributes (a
 * state_dict's _metadata) that way. */
static int op_build(machine *m)
{
    value state;
    const value *obj;
    if (pop(m, &state) < 0 || !(obj = top(m)))
        return -1;
    if (obj->kind != V_DICT)
        return tf_pickle_fail(m, "sets the state of %s", kind_names[obj->kind]);
    if (obj->u.c->state.kind != V_NONE)
        return tf_pickle_fail(m, "sets the state of a dict a second time");
    if (nest(m, obj->u.c, &state) < 0)
        return -1;
    obj->u.c->state = state;
    return 0;
}

static int op_mark(machine *m)
{
    if (m->nmarks == TF_PICKLE_MAX_DEPTH)
        return tf_pickle_fail(m, "more than %d marks open", TF_PICKLE_MAX_DEPTH);
    m->marks[m->nmarks++] = m->sp;
    return 0;
}

/* Runs the opcode m->op; 1 at STOP. */
static int step(machine *m)
{
    size_t from = 0;
    value v;
    switch (m->op) {
    case OP_PROTO: return op_proto(m);
    case OP_FRAME: return op_frame(m);
    case OP_STOP: return 1;
    case OP_MARK: return op_mark(m);
    case OP_POP: return pop(m, &v);
    case OP_POP_MARK:
        if (pop_mark(m, &from) < 0)
            return -1;
        m->sp = from;
        return 0;
    case OP_BINPUT:
    case OP_LONG_BINPUT: {
        uint64_t index;
        return take_uint(m, m->op == OP_BINPUT ? 1 : 4, &index) < 0 ? -1 : op_memo_put(m, index);
    }
    case OP_MEMOIZE: return op_memo_put(m, m->nmemo);
    case OP_BINGET: return op_memo_get(m, 1);
    case OP_LONG_BINGET: return op_memo_get(m, 4);
    case OP_NONE: return push(m, (value){ .kind = V_NONE });
    case OP_NEWTRUE:
    case OP_NEWFALSE: return push(m, (value){ .kind = V_BOOL, .u.i = m->op == OP_NEWTRUE });
    case OP_INT: return op_int(m, true);
    case OP_LONG: return op_int(m, false);
    case OP_BININT: return op_binint(m, 4);
    case OP_BININT1: return op_binint(m, 1);
    case OP_BININT2: return op_binint(m, 2);
    case OP_LONG1: return op_long(m, 1);
    case OP_LONG4: return op_long(m, 4);
    case OP_BINFLOAT: return take(m, 8) ? push(m, (value){ .kind = V_FLOAT }) : -1;
    case OP_SHORT_BINUNICODE: return push_string(m, 1, V_STR);
    case OP_BINUNICODE: return push_string(m, 4, V_STR);
    case OP_BINUNICODE8: return push_string(m, 8, V_STR);
    case OP_SHORT_BINBYTES: return push_string(m, 1, V_BYTES);
    case OP_BINBYTES: return push_string(m, 4, V_BYTES);
    case OP_BINBYTES8: return push_string(m, 8, V_BYTES);
    case OP_EMPTY_TUPLE: return make_tuple(m, m->sp);
    case OP_TUPLE: return pop_mark(m, &from) < 0 ? -1 : make_tuple(m, from);
    case OP_TUPLE1: return op_fixed_tuple(m, 1);
    case OP_TUPLE2: return op_fixed_tuple(m, 2);
    case OP_TUPLE3: return op_fixed_tuple(m, 3);
    case OP_EMPTY_LIST: return push_container(m, V_LIST);
    case OP_APPEND: return op_append(m);
    case OP_APPENDS: return op_appends(m);
    case OP_EMPTY_DICT: return push_container(m, V_DICT);
    case OP_SETITEM: return op_setitem(m);
    case OP_SETITEMS: return op_setitems(m);
    case OP_GLOBAL: return op_global(m);
    case OP_STACK_GLOBAL: return op_stack_global(m);
    case OP_REDUCE: return op_reduce(m);
    case OP_BUILD: return op_build(m);
    case OP_BINPERSID: return op_binpersid(m);
    default:
        return tf_pickle_fail(m, op_names[m->op] ? "not one of the opcodes torch.save emits at "
                                                   "protocols 1 to 5"
                                                 : "not a pickle opcode");
    }
}

void tf_pickle_machine_free(machine *m)
{
    for (size_t i = 0; i < m->ncontainers; i++) {
        free(m->containers[i]->items);
        free(m->containers[i]);
    }
    for (size_t i = 0; i < m->nstorages; i++)
        free(m->storages[i].path);
    free(m->containers);
    free(m->stack);
    free(m->memo);
    free(m->globals);
    free(m->storages);
    free(m);
}

int tf_pickle_run(machine *m)
{
    int rc = 0;
    while (rc == 0 && m->pos < m->len) {
        m->op_pos = m->pos;
        m->op = m->p[m->pos++];
        rc = step(m);
    }
    if (rc == 0)
        return tf_fail(m->e, EINVAL, "pickle offset %zu: truncated: the pickle ends before STOP",
                       m->len);
    if (rc < 0)
        return -1;
    return m->pos == m->len ? 0 : tf_pickle_fail(m, "%zu bytes after STOP", m->len - m->pos);
}
