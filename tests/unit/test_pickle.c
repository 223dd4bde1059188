/* Unit tests of the restricted pickle interpreter (format/pickle.h): real
 * torch.save pickles (tests/fuzz/pickle_samples.c), every opcode it runs
 * in hand-assembled pickles, and every way it refuses one. Each accepted
 * pickle is also cut at every byte, and each cut must be refused. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#include "pickle_samples.h"
#include "common/buf.h"
#include "common/dtype.h"
#include "format/pickle.h"

/* ---- a pickle assembler ---- */

enum {
    MARK = '(', STOP = '.', POP = '0', POP_MARK = '1', INT = 'I', LONG = 'L', BININT = 'J',
    BININT1 = 'K', BININT2 = 'M', NONE = 'N', BINFLOAT = 'G', BINPERSID = 'Q', REDUCE = 'R',
    BUILD = 'b', GLOBAL = 'c', BINUNICODE = 'X', BINBYTES = 'B', SHORT_BINBYTES = 'C',
    EMPTY_LIST = ']', APPEND = 'a', APPENDS = 'e', EMPTY_DICT = '}', SETITEM = 's',
    SETITEMS = 'u', EMPTY_TUPLE = ')', TUPLE = 't', BINGET = 'h', LONG_BINGET = 'j',
    BINPUT = 'q', LONG_BINPUT = 'r', PROTO = 0x80, TUPLE1 = 0x85, TUPLE2 = 0x86, TUPLE3 = 0x87,
    NEWTRUE = 0x88, NEWFALSE = 0x89, LONG1 = 0x8a, LONG4 = 0x8b, SHORT_BINUNICODE = 0x8c,
    BINUNICODE8 = 0x8d, BINBYTES8 = 0x8e, STACK_GLOBAL = 0x93, MEMOIZE = 0x94, FRAME = 0x95,
};

static tf_buf pk; /* the pickle a test assembles */

static void free_pickle(void)
{
    tf_buf_free(&pk);
}

static void bytes(const void *p, size_t n)
{
    ck_assert_int_eq(tf_buf_put(&pk, p, n), 0);
}

static void op(uint8_t c)
{
    bytes(&c, 1);
}

/* Opcodes without arguments, in a row. */
#define OPS(...) bytes((const uint8_t[]){ __VA_ARGS__ }, sizeof((const uint8_t[]){ __VA_ARGS__ }))

/* An opcode and its little-endian argument of size bytes. */
static void op_le(uint8_t c, uint64_t v, unsigned size)
{
    uint8_t b[8];
    op(c);
    tf_le_put(b, v, size);
    bytes(b, size);
}

static void start(unsigned proto)
{
    pk.len = 0;
    if (proto >= 2)
        op_le(PROTO, proto, 1);
}

static void str_n(const void *s, size_t n)
{
    op_le(BINUNICODE, n, 4);
    bytes(s, n);
}

static void str(const char *s)
{
    str_n(s, strlen(s));
}

static void line(const char *s)
{
    bytes(s, strlen(s));
    op('\n');
}

static void global(const char *module, const char *name)
{
    op(GLOBAL);
    line(module);
    line(name);
}

static void binint(int64_t v)
{
    op_le(BININT, (uint32_t)v, 4);
}

/* ('storage', torch.CLS, key, 'cpu', numel) BINPERSID */
static void storage_id(const char *cls, const char *key, int64_t numel)
{
    op(MARK);
    str("storage");
    global("torch", cls);
    str(key);
    str("cpu");
    binint(numel);
    OPS(TUPLE, BINPERSID);
}

static void ordered_dict(void)
{
    global("collections", "OrderedDict");
    OPS(EMPTY_TUPLE, REDUCE);
}

/* The arguments after the storage: 0, (numel,), (1,), False, OrderedDict() */
static void tensor_args(int64_t numel)
{
    binint(0);
    binint(numel);
    op(TUPLE1);
    binint(1);
    OPS(TUPLE1, NEWFALSE);
    ordered_dict();
}

/* _rebuild_tensor_v2 of a 1-d tensor of the whole storage. */
static void tensor(const char *cls, const char *key, int64_t numel)
{
    global("torch._utils", "_rebuild_tensor_v2");
    op(MARK);
    storage_id(cls, key, numel);
    tensor_args(numel);
    OPS(TUPLE, REDUCE);
}

static void f32(const char *key)
{
    tensor("FloatStorage", key, 1);
}

/* _rebuild_tensor_v3 of numel elements of torch.DTYPE over an untyped
 * storage of nbytes. */
static void tensor_v3(const char *dtype, const char *key, int64_t nbytes, int64_t numel)
{
    global("torch._utils", "_rebuild_tensor_v3");
    op(MARK);
    storage_id("UntypedStorage", key, nbytes);
    tensor_args(numel);
    global("torch", dtype);
    OPS(TUPLE, REDUCE);
}

/* ---- checks ---- */

typedef struct {
    const char *key;
    unsigned dtype;
    uint64_t numel;
    const char *path;
} want;

static void check_storages(const tf_pickle_storages *s, const want *w, size_t n)
{
    ck_assert_uint_eq(s->n, n);
    for (size_t i = 0; i < n; i++) {
        ck_assert_str_eq(s->v[i].key, w[i].key);
        ck_assert_uint_eq(s->v[i].dtype, w[i].dtype);
        ck_assert_uint_eq(s->v[i].numel, w[i].numel);
        ck_assert_str_eq(s->v[i].path, w[i].path);
    }
}

/* Runs the interpreter on an exact heap copy of p[0..len). */
static int run(const uint8_t *p, size_t len, tf_pickle_storages *s, tf_error *e)
{
    uint8_t *c = exact_copy(p, len);
    *s = (tf_pickle_storages){ .n = 99 };
    *e = (tf_error){ .msg = "" };
    int rc = tf_pickle_torch_storages(c, len, s, e);
    free(c);
    return rc;
}

static void expect_refused(const uint8_t *p, size_t len, const char *phrase)
{
    tf_pickle_storages s;
    tf_error e;
    ck_assert_msg(run(p, len, &s, &e) == -1, "accepted a pickle that should fail with \"%s\"",
                  phrase);
    ck_assert_int_eq(e.errnum, EINVAL);
    ck_assert_msg(strncmp(e.msg, "pickle offset ", 14) == 0, "message without offset: %s", e.msg);
    ck_assert_msg(strstr(e.msg, phrase) != NULL, "message \"%s\" lacks \"%s\"", e.msg, phrase);
    ck_assert_uint_eq(s.n, 0);
    ck_assert_ptr_null(s.v);
}

/* p must give the storages w, and every prefix of it must be refused. */
static void expect_accepted(const uint8_t *p, size_t len, const want *w, size_t n)
{
    tf_pickle_storages s;
    tf_error e;
    ck_assert_msg(run(p, len, &s, &e) == 0, "refused: %s", e.msg);
    check_storages(&s, w, n);
    tf_pickle_storages_free(&s);
    ck_assert_uint_eq(s.n, 0);
    for (size_t cut = 0; cut < len; cut++)
        expect_refused(p, cut, "");
}

static void accepted(const want *w, size_t n)
{
    expect_accepted(pk.data, pk.len, w, n);
}

static void refused(const char *phrase)
{
    expect_refused(pk.data, pk.len, phrase);
}

/* The sample by that name. */
static const pickle_sample *sample(const char *name)
{
    for (size_t i = 0; i < N_PICKLE_SAMPLES; i++)
        if (strcmp(pickle_samples[i].name, name) == 0)
            return &pickle_samples[i];
    ck_abort_msg("no sample %s", name);
    return NULL;
}

/* ---- real torch.save pickles ---- */

static const struct {
    const char *sample;
    size_t n;
    want w[6];
} real[] = {
    { "adamw", 6, { { "0", TF_DT_F32, 1, "state.0.step" },
                    { "1", TF_DT_F32, 2, "state.0.exp_avg" },
                    { "2", TF_DT_F32, 2, "state.0.exp_avg_sq" },
                    { "3", TF_DT_F32, 1, "state.1.step" },
                    { "4", TF_DT_F32, 1, "state.1.exp_avg" },
                    { "5", TF_DT_F32, 1, "state.1.exp_avg_sq" } } },
    /* The head's weight is the embedding's: one storage; the view and the
     * whole tensor share one too, the view first. */
    { "tied", 4, { { "0", TF_DT_F32, 6, "model.emb.weight" },
                   { "1", TF_DT_F32, 6, "view" },
                   { "2", TF_DT_F32, 1, "scalar" },
                   { "3", TF_DT_F32, 0, "empty" } } },
    { "proto4", 2, { { "0", TF_DT_F32, 2, "weight" }, { "1", TF_DT_F32, 1, "bias" } } },
    { "bf16", 2, { { "0", TF_DT_BF16, 2, "weight" }, { "1", TF_DT_BF16, 1, "bias" } } },
    { "lightning", 4, { { "0", TF_DT_F32, 1, "state_dict.model.weight" },
                        { "1", TF_DT_F32, 1, "optimizer_states.0.state.0.step" },
                        { "2", TF_DT_F32, 1, "optimizer_states.0.state.0.exp_avg" },
                        { "3", TF_DT_F32, 1, "optimizer_states.0.state.0.exp_avg_sq" } } },
    { "proto1", 2, { { "0", TF_DT_F64, 2, "w" }, { "1", TF_DT_I64, 1, "steps" } } },
};

START_TEST(real_pickle_is_read_exactly)
{
    const pickle_sample *p = sample(real[_i].sample);
    expect_accepted(p->data, p->len, real[_i].w, real[_i].n);
}
END_TEST

START_TEST(real_pickle_with_bytes_after_stop_is_refused)
{
    const pickle_sample *p = sample(real[_i].sample);
    start(0);
    bytes(p->data, p->len);
    op(NONE);
    refused("1 bytes after STOP");
}
END_TEST

/* ---- every opcode ---- */

START_TEST(scalars_are_values)
{
    const uint8_t float_bits[8] = { 0x3f, 0xf8 }, long4[2] = { 1, 2 };
    start(2);
    OPS(EMPTY_DICT, MARK);
    str("none");
    op(NONE);
    str("true");
    op(NEWTRUE);
    str("false");
    op(NEWFALSE);
    str("binint");
    binint(-7);
    str("binint1");
    op_le(BININT1, 200, 1);
    str("binint2");
    op_le(BININT2, 60000, 2);
    str("long1");
    op_le(LONG1, 1, 1);
    op(0xff);
    str("long4");
    op_le(LONG4, 2, 4);
    bytes(long4, 2);
    str("float");
    op(BINFLOAT);
    bytes(float_bits, 8);
    str("short_binunicode");
    op_le(SHORT_BINUNICODE, 2, 1);
    bytes("ab", 2);
    str("binunicode8");
    op_le(BINUNICODE8, 1, 8);
    bytes("c", 1);
    str("short_binbytes");
    op_le(SHORT_BINBYTES, 1, 1);
    bytes("\0", 1);
    str("binbytes");
    op_le(BINBYTES, 0, 4);
    str("binbytes8");
    op_le(BINBYTES8, 3, 8);
    bytes("xyz", 3);
    str("t");
    f32("0");
    OPS(SETITEMS, STOP);
    const want w[] = { { "0", TF_DT_F32, 1, "t" } };
    accepted(w, ARRAY_LEN(w));
}
END_TEST

/* A str key is itself, an int key its decimal, any other key the index
 * of its item. */
START_TEST(dict_keys_become_path_components)
{
    const uint8_t two_to_40[6] = { 0, 0, 0, 0, 0, 1 }, two_to_64[9] = { [8] = 1 },
                  int64_min[8] = { [7] = 0x80 }, minus_one[9] = { 0xff, 0xff, 0xff, 0xff, 0xff,
                                                                  0xff, 0xff, 0xff, 0xff };
    start(2);
    OPS(EMPTY_DICT, MARK);
    str("a");
    f32("k0");
    binint(-5);
    f32("k1");
    op_le(LONG1, 6, 1);
    bytes(two_to_40, 6);
    f32("k2");
    op_le(LONG1, 9, 1);
    bytes(two_to_64, 9);
    f32("k3");
    op(NEWTRUE);
    f32("k4");
    op(EMPTY_TUPLE);
    f32("k5");
    op(NONE);
    f32("k6");
    str("");
    f32("k7");
    op(INT);
    line("12");
    f32("k8");
    op(LONG);
    line("-3L");
    f32("k9");
    op_le(LONG1, 8, 1);
    bytes(int64_min, 8);
    f32("k10");
    op_le(LONG4, 9, 4);
    bytes(minus_one, 9);
    f32("k11");
    op(INT);
    line("99999999999999999999");
    f32("k12");
    OPS(SETITEMS, STOP);
    const want w[] = {
        { "k0", TF_DT_F32, 1, "a" },      { "k1", TF_DT_F32, 1, "-5" },
        { "k2", TF_DT_F32, 1, "1099511627776" },
        { "k3", TF_DT_F32, 1, "3" },      { "k4", TF_DT_F32, 1, "4" },
        { "k5", TF_DT_F32, 1, "5" },      { "k6", TF_DT_F32, 1, "6" },
        { "k7", TF_DT_F32, 1, "" },       { "k8", TF_DT_F32, 1, "12" },
        { "k9", TF_DT_F32, 1, "-3" },     { "k10", TF_DT_F32, 1, "-9223372036854775808" },
        { "k11", TF_DT_F32, 1, "-1" },    { "k12", TF_DT_F32, 1, "12" },
    };
    accepted(w, ARRAY_LEN(w));
}
END_TEST

START_TEST(lists_and_tuples_are_indexed)
{
    start(2);
    op(EMPTY_LIST);
    f32("0");
    OPS(APPEND, MARK);
    f32("1");
    OPS(TUPLE1, NONE);
    f32("2");
    OPS(TUPLE2, NONE, NONE);
    f32("3");
    OPS(TUPLE3, MARK, NONE, NONE, NONE);
    f32("4");
    OPS(TUPLE, EMPTY_TUPLE, APPENDS, STOP);
    const want w[] = { { "0", TF_DT_F32, 1, "0" }, { "1", TF_DT_F32, 1, "1.0" },
                       { "2", TF_DT_F32, 1, "2.1" }, { "3", TF_DT_F32, 1, "3.2" },
                       { "4", TF_DT_F32, 1, "4.3" } };
    accepted(w, ARRAY_LEN(w));
}
END_TEST

/* Tensors put into the memo and dropped from the stack come back only
 * through it; storages are listed in order of appearance, each with the
 * path where the walk first meets it. */
START_TEST(memo_keeps_values)
{
    start(4);
    f32("0");
    op_le(BINPUT, 0, 1);
    op(POP);
    f32("1");
    op_le(LONG_BINPUT, 1, 4);
    op(POP);
    f32("2");
    op(MEMOIZE);
    op_le(LONG_BINPUT, 2, 4); /* the same index again */
    OPS(POP, EMPTY_DICT, MARK);
    str("a");
    op_le(LONG_BINGET, 2, 4);
    str("b");
    op_le(BINGET, 0, 1);
    str("c");
    op_le(LONG_BINGET, 1, 4);
    OPS(SETITEMS, STOP);
    const want w[] = { { "0", TF_DT_F32, 1, "b" }, { "1", TF_DT_F32, 1, "c" },
                       { "2", TF_DT_F32, 1, "a" } };
    accepted(w, ARRAY_LEN(w));
}
END_TEST

START_TEST(pop_and_pop_mark_drop_values)
{
    start(2);
    OPS(EMPTY_LIST, MARK, NONE, NONE, POP_MARK, NONE, POP);
    f32("0");
    OPS(APPEND, STOP);
    const want w[] = { { "0", TF_DT_F32, 1, "0" } };
    accepted(w, ARRAY_LEN(w));
}
END_TEST

/* Protocol 4: a frame, names as str on the stack (STACK_GLOBAL). */
START_TEST(frames_and_stack_globals)
{
    start(4);
    op_le(FRAME, 0, 8);
    op_le(SHORT_BINUNICODE, 11, 1);
    bytes("collections", 11);
    op_le(SHORT_BINUNICODE, 11, 1);
    bytes("OrderedDict", 11);
    OPS(STACK_GLOBAL, EMPTY_TUPLE, REDUCE);
    str("w");
    str("torch._utils");
    str("_rebuild_tensor_v2");
    OPS(STACK_GLOBAL, MARK, MARK);
    str("storage");
    str("torch");
    str("HalfStorage");
    op(STACK_GLOBAL);
    str("0");
    str("cuda:0");
    binint(5);
    OPS(TUPLE, BINPERSID);
    tensor_args(5);
    OPS(TUPLE, REDUCE, SETITEM);
    op_le(FRAME, 1, 8);
    op(STOP);
    const want w[] = { { "0", TF_DT_F16, 5, "w" } };
    accepted(w, ARRAY_LEN(w));
}
END_TEST

/* What BUILD gives an OrderedDict is walked at the dict's own path. */
START_TEST(build_state_is_walked_at_the_dict)
{
    start(2);
    op(EMPTY_DICT);
    str("sd");
    ordered_dict();
    str("w");
    f32("0");
    OPS(SETITEM, EMPTY_DICT);
    str("extra");
    f32("1");
    OPS(SETITEM, BUILD, SETITEM, STOP);
    const want w[] = { { "0", TF_DT_F32, 1, "sd.w" }, { "1", TF_DT_F32, 1, "sd.extra" } };
    accepted(w, ARRAY_LEN(w));
}
END_TEST

static const struct {
    const char *name;
    unsigned dtype;
} storage_classes[] = {
    { "FloatStorage", TF_DT_F32 }, { "HalfStorage", TF_DT_F16 },  { "BFloat16Storage", TF_DT_BF16 },
    { "DoubleStorage", TF_DT_F64 }, { "LongStorage", TF_DT_I64 }, { "IntStorage", TF_DT_I32 },
    { "ShortStorage", TF_DT_I16 }, { "CharStorage", TF_DT_I8 },   { "ByteStorage", TF_DT_U8 },
    { "BoolStorage", TF_DT_BOOL },
};

START_TEST(storage_class_gives_the_dtype)
{
    start(2);
    tensor(storage_classes[_i].name, "0", 7);
    op(STOP);
    const want w[] = { { "0", storage_classes[_i].dtype, 7, "" } };
    accepted(w, ARRAY_LEN(w));
}
END_TEST

static const struct {
    const char *name;
    unsigned dtype;
} dtypes[] = {
    { "float32", TF_DT_F32 }, { "float16", TF_DT_F16 },   { "bfloat16", TF_DT_BF16 },
    { "float64", TF_DT_F64 }, { "float8_e4m3fn", TF_DT_F8_E4M3 },
    { "float8_e5m2", TF_DT_F8_E5M2 }, { "int64", TF_DT_I64 }, { "int32", TF_DT_I32 },
    { "int16", TF_DT_I16 },   { "int8", TF_DT_I8 },       { "uint64", TF_DT_U64 },
    { "uint32", TF_DT_U32 },  { "uint16", TF_DT_U16 },    { "uint8", TF_DT_U8 },
    { "bool", TF_DT_BOOL },
};

/* An untyped storage's elements are what _rebuild_tensor_v3 reads it as:
 * its size in bytes / the element size. */
START_TEST(rebuild_v3_gives_an_untyped_storage_its_dtype)
{
    const unsigned size = tf_dtype_get(dtypes[_i].dtype)->size;
    start(2);
    op(EMPTY_LIST);
    tensor_v3(dtypes[_i].name, "u", 6 * size, 6);
    OPS(APPEND, STOP);
    const want w[] = { { "u", dtypes[_i].dtype, 6, "0" } };
    accepted(w, ARRAY_LEN(w));
}
END_TEST

/* Metadata (the optional last argument) and a typed storage under v3. */
START_TEST(rebuild_functions_take_their_optional_arguments)
{
    start(2);
    op(EMPTY_LIST);
    global("torch._utils", "_rebuild_tensor_v2");
    op(MARK);
    storage_id("FloatStorage", "0", 4);
    tensor_args(4);
    OPS(EMPTY_DICT, TUPLE, REDUCE, APPEND);
    global("torch._utils", "_rebuild_tensor_v3");
    op(MARK);
    storage_id("FloatStorage", "1", 4);
    tensor_args(4);
    global("torch", "float32");
    OPS(EMPTY_DICT, TUPLE, REDUCE, APPEND);
    /* An untyped storage a v3 tensor reads, named again by a typed id. */
    tensor_v3("int16", "2", 8, 4);
    op(APPEND);
    tensor("ShortStorage", "2", 4);
    OPS(APPEND, STOP);
    const want w[] = { { "0", TF_DT_F32, 4, "0" }, { "1", TF_DT_F32, 4, "1" },
                       { "2", TF_DT_I16, 4, "2" } };
    accepted(w, ARRAY_LEN(w));
}
END_TEST

START_TEST(parameters_wrap_tensors)
{
    start(2);
    OPS(EMPTY_DICT, MARK);
    str("p");
    global("torch._utils", "_rebuild_parameter");
    op(MARK);
    f32("0");
    op(NEWTRUE);
    ordered_dict();
    OPS(TUPLE, REDUCE);
    str("q");
    global("torch._utils", "_rebuild_parameter_with_state");
    op(MARK);
    f32("1");
    op(NEWTRUE);
    ordered_dict();
    OPS(EMPTY_DICT, TUPLE, REDUCE, SETITEMS, STOP);
    const want w[] = { { "0", TF_DT_F32, 1, "p" }, { "1", TF_DT_F32, 1, "q" } };
    accepted(w, ARRAY_LEN(w));
}
END_TEST

/* Plain values beside the tensors: DeepSpeed's param_shapes hold
 * torch.Size objects, optimizers' defaults sets and devices; a
 * defaultdict is a dict. Each call stands for its arguments. */
START_TEST(value_constructors_are_values)
{
    start(2);
    OPS(EMPTY_DICT, MARK);
    str("shape");
    global("torch", "Size");
    op(MARK);
    op_le(BININT1, 3, 1);
    op_le(BININT1, 4, 1);
    OPS(TUPLE, TUPLE1, REDUCE);
    str("dev");
    global("torch", "device");
    str("cpu");
    OPS(TUPLE1, REDUCE);
    str("names");
    global("builtins", "set");
    OPS(EMPTY_LIST, TUPLE1, REDUCE);
    str("names2"); /* protocol 2 spells the module as Python 2 did */
    global("__builtin__", "set");
    OPS(EMPTY_LIST, TUPLE1, REDUCE);
    str("d");
    global("collections", "defaultdict");
    global("builtins", "list");
    OPS(TUPLE1, REDUCE);
    str("w");
    f32("0");
    OPS(SETITEM, SETITEMS, STOP);
    const want w[] = { { "0", TF_DT_F32, 1, "d.w" } };
    accepted(w, ARRAY_LEN(w));

    start(2);
    global("collections", "defaultdict");
    global("builtins", "list");
    global("builtins", "list");
    OPS(TUPLE2, REDUCE, STOP);
    refused("collections.defaultdict is called with 2 arguments");
}
END_TEST

/* torch.save(tensor), torch.save(storage), {"s": storage}. */
START_TEST(tensor_or_storage_at_the_root)
{
    const want t[] = { { "0", TF_DT_F32, 1, "" } }, s[] = { { "0", TF_DT_F64, 3, "" } },
               d[] = { { "0", TF_DT_F64, 3, "s" } };
    start(2);
    f32("0");
    op(STOP);
    accepted(t, 1);
    start(2);
    storage_id("DoubleStorage", "0", 3);
    op(STOP);
    accepted(s, 1);
    start(2);
    op(EMPTY_DICT);
    str("s");
    storage_id("DoubleStorage", "0", 3);
    OPS(SETITEM, STOP);
    accepted(d, 1);
}
END_TEST

/* Ids of one key name one storage: a bare untyped one takes the dtype a
 * later typed id gives, and the path of where it appears first. */
START_TEST(key_named_again_is_one_storage)
{
    start(2);
    op(EMPTY_LIST);
    storage_id("UntypedStorage", "s", 8);
    op(APPEND);
    f32("t");
    op(APPEND);
    tensor("FloatStorage", "s", 2);
    OPS(APPEND, STOP);
    const want w[] = { { "s", TF_DT_F32, 2, "0" }, { "t", TF_DT_F32, 1, "1" } };
    accepted(w, ARRAY_LEN(w));
}
END_TEST

/* A list that holds itself, and a container shared twice on each of 40
 * levels (2^40 paths): each container is walked once. */
START_TEST(shared_and_cyclic_containers_are_walked_once)
{
    start(2);
    op(EMPTY_LIST);
    op_le(BINPUT, 0, 1);
    op_le(BINGET, 0, 1);
    op(APPEND);
    f32("0");
    OPS(APPEND, STOP);
    const want cyclic[] = { { "0", TF_DT_F32, 1, "1" } };
    accepted(cyclic, 1);

    start(2);
    f32("0");
    op(TUPLE1);
    op_le(BINPUT, 0, 1);
    for (unsigned level = 1; level <= 40; level++) {
        op_le(BINGET, level - 1, 1);
        op(TUPLE2);
        op_le(BINPUT, level, 1);
        op(POP);
        op_le(BINGET, level, 1);
    }
    op(STOP);
    char path[128] = "0";
    for (unsigned level = 1; level <= 40; level++)
        strcat(path, ".0");
    const want shared[] = { { "0", TF_DT_F32, 1, path } };
    accepted(shared, 1);
}
END_TEST

/* Marks nest up to the limit: tuples in tuples. */
START_TEST(marks_nest_up_to_the_limit)
{
    for (int n = TF_PICKLE_MAX_DEPTH; n <= TF_PICKLE_MAX_DEPTH + 1; n++) {
        start(2);
        for (int i = 0; i < n; i++)
            op(MARK);
        for (int i = 0; i < n; i++)
            op(TUPLE);
        op(STOP);
        if (n == TF_PICKLE_MAX_DEPTH)
            accepted(NULL, 0);
        else
            refused("MARK (0x28): more than 512 marks open");
    }
}
END_TEST

/* Lists nested through the memo, without marks: n deep, a tensor in the
 * innermost. */
static void nested_lists(int n)
{
    start(2);
    op(EMPTY_LIST);
    op_le(LONG_BINPUT, 0, 4);
    for (int i = 1; i < n; i++) {
        op(EMPTY_LIST);
        op_le(LONG_BINPUT, (uint32_t)i, 4);
        OPS(APPEND, POP);
        op_le(LONG_BINGET, (uint32_t)i, 4);
    }
    f32("0");
    OPS(APPEND, POP);
    op_le(LONG_BINGET, 0, 4);
    op(STOP);
}

START_TEST(containers_nest_up_to_the_limit)
{
    nested_lists(TF_PICKLE_MAX_DEPTH);
    char path[2 * TF_PICKLE_MAX_DEPTH] = "0";
    for (int i = 1; i < TF_PICKLE_MAX_DEPTH; i++)
        strcat(path, ".0");
    const want w[] = { { "0", TF_DT_F32, 1, path } };
    accepted(w, 1);
    nested_lists(TF_PICKLE_MAX_DEPTH + 1);
    refused("STOP (0x2e): the saved object nests more than 512 containers deep");
}
END_TEST

/* ---- refusals ---- */

static const struct {
    uint8_t op;
    const char *name;
} forbidden_ops[] = {
    { 0x81, "NEWOBJ" },  { 0x92, "NEWOBJ_EX" }, { 'P', "PERSID" },     { '2', "DUP" },
    { 0x82, "EXT1" },    { 'i', "INST" },       { 'o', "OBJ" },        { 'p', "PUT" },
    { 'g', "GET" },      { 'S', "STRING" },     { 'V', "UNICODE" },    { 'F', "FLOAT" },
    { 'd', "DICT" },     { 'l', "LIST" },       { 'T', "BINSTRING" },  { 0x8f, "EMPTY_SET" },
    { 0x90, "ADDITEMS" }, { 0x91, "FROZENSET" }, { 0x96, "BYTEARRAY8" }, { 0x97, "NEXT_BUFFER" },
};

START_TEST(opcode_outside_the_subset_is_refused)
{
    char want_msg[128];
    start(2);
    op(EMPTY_LIST);
    op(forbidden_ops[_i].op);
    op(STOP);
    snprintf(want_msg, sizeof want_msg, "pickle offset 3, %s (0x%02x): not one of the opcodes",
             forbidden_ops[_i].name, forbidden_ops[_i].op);
    refused(want_msg);
}
END_TEST

START_TEST(unknown_opcode_is_refused)
{
    start(2);
    op(0xff);
    refused("pickle offset 2, an unknown opcode (0xff): not a pickle opcode");
    start(0);
    op(0);
    refused("pickle offset 0, an unknown opcode (0x00)");
}
END_TEST

/* Recording a global by name is fine; calling one that is not a rebuild
 * function or OrderedDict is not. */
START_TEST(forbidden_calls_are_refused)
{
    start(2);
    op(EMPTY_DICT);
    str("f");
    global("os", "system");
    OPS(SETITEM, STOP);
    accepted(NULL, 0);

    start(2);
    global("os", "system");
    str("echo hi");
    OPS(TUPLE1, REDUCE, STOP);
    refused("pickle offset 26, REDUCE (0x52): calls os.system, which is neither");

    start(4);
    op_le(SHORT_BINUNICODE, 8, 1);
    bytes("builtins", 8);
    op_le(SHORT_BINUNICODE, 4, 1);
    bytes("eval", 4);
    op(STACK_GLOBAL);
    str("1");
    OPS(TUPLE1, REDUCE);
    refused("calls builtins.eval");

    start(2);
    global("torch", "FloatStorage");
    OPS(EMPTY_TUPLE, REDUCE);
    refused("calls torch.FloatStorage");

    start(2);
    str("os.system");
    OPS(EMPTY_TUPLE, REDUCE);
    refused("calls a str");

    start(2);
    global("collections", "OrderedDict");
    OPS(EMPTY_LIST, REDUCE);
    refused("the arguments of collections.OrderedDict are a list, not a tuple");

    start(2);
    global("collections", "OrderedDict");
    OPS(EMPTY_LIST, TUPLE1, REDUCE);
    refused("collections.OrderedDict is called with arguments");

    /* A name a message shows is cut and made printable. */
    start(2);
    op(GLOBAL);
    bytes("a\x01", 2);
    op('\n');
    for (int i = 0; i < 100; i++)
        op('x');
    op('\n');
    OPS(EMPTY_TUPLE, REDUCE);
    refused("calls a?.xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...,");
}
END_TEST

START_TEST(memo_indices_are_checked)
{
    start(2);
    op(NONE);
    op_le(BINPUT, 1, 1);
    refused("pickle offset 3, BINPUT (0x71): memo index 1 skips past the memo's 0 entries");
    start(2);
    op(NONE);
    op_le(LONG_BINPUT, 0xffffffff, 4);
    refused("memo index 4294967295 skips past");
    start(2);
    op_le(BINGET, 0, 1);
    refused("BINGET (0x68): memo index 0 is not set (the memo has 0 entries)");
    start(2);
    OPS(NONE, MEMOIZE);
    op_le(LONG_BINGET, 0x7fffffff, 4);
    refused("memo index 2147483647 is not set (the memo has 1 entries)");
    start(2);
    op(MEMOIZE);
    refused("MEMOIZE (0x94): stack underflow");
}
END_TEST

START_TEST(stack_is_bounded)
{
    start(2);
    /* Bytes enough that the memory budget holds the stack. */
    static const uint8_t pad[2 << 20];
    op_le(BINBYTES, sizeof pad, 4);
    bytes(pad, sizeof pad);
    op(POP);
    for (size_t i = 0; i <= TF_PICKLE_MAX_STACK; i++)
        op(NONE);
    op(STOP);
    refused("NONE (0x4e): more than 1048576 values on the stack");
}
END_TEST

/* Lengths and counts that claim more than the pickle holds. */
START_TEST(counts_that_lie_are_refused)
{
    start(2);
    op_le(BINUNICODE, 0xffffffff, 4);
    bytes("ab", 2);
    refused("pickle offset 2, BINUNICODE (0x58): truncated: needs 4294967295 bytes, 2 are left");
    start(2);
    op_le(SHORT_BINUNICODE, 200, 1);
    bytes("abc", 3);
    refused("SHORT_BINUNICODE (0x8c): truncated: needs 200 bytes, 3 are left");
    start(2);
    op_le(BINUNICODE8, UINT64_C(1) << 63, 8);
    refused("BINUNICODE8 (0x8d): truncated: needs 9223372036854775808 bytes");
    start(2);
    op_le(BINBYTES8, UINT64_MAX, 8);
    op(STOP);
    refused("BINBYTES8 (0x8e): truncated: needs 18446744073709551615 bytes, 1 are left");
    start(2);
    op_le(BINBYTES, 5, 4);
    refused("BINBYTES (0x42): truncated");
    start(2);
    op_le(SHORT_BINBYTES, 5, 1);
    refused("SHORT_BINBYTES (0x43): truncated");
    start(2);
    op_le(LONG4, 0x7fffffff, 4);
    op(STOP);
    refused("LONG4 (0x8b): truncated");
    start(2);
    op_le(LONG4, 0xffffffff, 4);
    op(STOP);
    refused("LONG4 (0x8b): a negative length");
    start(2);
    op_le(LONG1, 3, 1);
    refused("LONG1 (0x8a): truncated");
    start(4);
    op_le(FRAME, UINT64_C(1) << 40, 8);
    OPS(NONE, STOP);
    refused("pickle offset 2, FRAME (0x95): a frame of 1099511627776 bytes runs past the end");
    start(2);
    op(GLOBAL);
    line("torch");
    bytes("FloatStorage", 12);
    refused("GLOBAL (0x63): truncated: no end of line");
    start(2);
    op(BININT);
    bytes("\0\0", 2);
    refused("BININT (0x4a): truncated: needs 4 bytes, 2 are left");
}
END_TEST

START_TEST(malformed_text_integers_are_refused)
{
    const char *bad[] = { "", "-", "1x", " 1", "+1", "0x10", "1.5" };
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        start(0);
        op(INT);
        line(bad[i]);
        op(STOP);
        refused("pickle offset 0, INT (0x49): not a decimal integer");
        start(0);
        op(LONG);
        line(bad[i]);
        op(STOP);
        refused("LONG (0x4c): not a decimal integer");
    }
}
END_TEST

/* A persistent id: ('storage', class, key, location, numel), with one
 * item spoilt by `spoil`. */
static void spoilt_id(int spoil)
{
    start(2);
    op(MARK);
    if (spoil == 0)
        str("storag");
    else
        str("storage");
    if (spoil == 1)
        str("FloatStorage");
    else if (spoil == 2)
        global("os", "system");
    else if (spoil == 3)
        global("torch", "ComplexFloatStorage");
    else
        global("torch", "FloatStorage");
    if (spoil == 4)
        binint(0);
    else if (spoil == 5)
        str_n("a\0b", 3);
    else
        str("0");
    if (spoil == 6)
        op(NONE);
    else
        str("cpu");
    if (spoil == 7)
        binint(-1);
    else if (spoil == 8)
        op(NEWTRUE);
    else
        binint(1);
    OPS(TUPLE, BINPERSID, STOP);
}

START_TEST(malformed_persistent_ids_are_refused)
{
    static const char *const msgs[] = {
        "a persistent id's first item is not 'storage'",
        "a storage class is a str",
        "os.system is not a storage class the archive stores",
        "torch.ComplexFloatStorage is not a storage class the archive stores",
        "a storage's key and location are an int and a str, not two str",
        "a storage key contains NUL",
        "a storage's key and location are a str and None, not two str",
        "storage '0': its size -1 is negative",
        "storage '0': its size is a bool, not an int",
    };
    for (int spoil = 0; spoil < (int)ARRAY_LEN(msgs); spoil++) {
        spoilt_id(spoil);
        refused(msgs[spoil]);
    }
    start(2);
    str("0");
    op(BINPERSID);
    refused("BINPERSID (0x51): a persistent id is a str, not a tuple ('storage', storage class, "
            "key, location, numel)");
    start(2);
    op(MARK);
    str("storage");
    global("torch", "FloatStorage");
    str("0");
    str("cpu");
    OPS(TUPLE, BINPERSID);
    refused("a persistent id of 4 items, not the 5 of");
    /* Keys up to the bound. */
    char key[TF_PICKLE_MAX_KEY + 2];
    memset(key, 'k', sizeof key);
    for (size_t len = TF_PICKLE_MAX_KEY; len <= TF_PICKLE_MAX_KEY + 1; len++) {
        key[len] = '\0';
        start(2);
        storage_id("FloatStorage", key, 1);
        op(STOP);
        if (len == TF_PICKLE_MAX_KEY) {
            const want w[] = { { key, TF_DT_F32, 1, "" } };
            accepted(w, 1);
        } else {
            refused("BINPERSID (0x51): a storage key longer than 256 bytes");
        }
        key[len] = 'k';
    }
    /* 2^62 elements of 8 bytes. */
    const uint8_t two_to_62[8] = { [7] = 0x40 };
    start(2);
    op(MARK);
    str("storage");
    global("torch", "LongStorage");
    str("0");
    str("cpu");
    op_le(LONG1, 8, 1);
    bytes(two_to_62, 8);
    OPS(TUPLE, BINPERSID);
    refused("storage '0': 4611686018427387904 elements overflow");
}
END_TEST

/* [first, second] */
static void pair_of_tensors(void (*first)(void), void (*second)(void))
{
    start(2);
    OPS(EMPTY_LIST, MARK);
    first();
    second();
    OPS(APPENDS, STOP);
}

static void f32_2(void)
{
    tensor("FloatStorage", "0", 2);
}

static void f16_4(void)
{
    tensor("HalfStorage", "0", 4);
}

static void f32_3(void)
{
    tensor("FloatStorage", "0", 3);
}

static void v3_f32(void)
{
    tensor_v3("float32", "0", 8, 2);
}

static void v3_bf16(void)
{
    tensor_v3("bfloat16", "0", 8, 4);
}

START_TEST(one_key_with_two_dtypes_or_sizes_is_refused)
{
    pair_of_tensors(f32_2, f16_4);
    refused("STOP (0x2e): storage '0' is F32 where named at offset 91 and F16 where named at "
            "offset 225");
    pair_of_tensors(f32_2, f32_3);
    refused("storage '0' has 8 bytes where named at offset 91 and 12 where named at offset 226");
    pair_of_tensors(v3_f32, v3_bf16);
    refused("storage '0' is F32 where named at offset 93 and BF16 where named at offset 245");
    pair_of_tensors(f32_2, v3_bf16);
    refused("storage '0' is F32 where named at offset 91 and BF16 where named at offset 228");

    /* One id read as two dtypes. */
    start(2);
    global("torch._utils", "_rebuild_tensor_v3");
    op(MARK);
    storage_id("FloatStorage", "0", 2);
    tensor_args(4);
    global("torch", "float16");
    OPS(TUPLE, REDUCE);
    refused("REDUCE (0x52): storage '0' (named at offset 89) is read as F16 but is F32");
}
END_TEST

START_TEST(storages_without_dtype_path_or_whole_elements_are_refused)
{
    start(2);
    storage_id("UntypedStorage", "u", 8);
    op(STOP);
    refused("pickle offset 58, STOP (0x2e): storage 'u' (named at offset 57) has no dtype");

    start(2);
    tensor_v3("float32", "u", 10, 2);
    op(STOP);
    refused("storage 'u' (named at offset 91) does not hold a whole number of elements");

    start(2);
    op(EMPTY_LIST);
    f32("0");
    OPS(POP, STOP);
    refused("storage '0' (named at offset 90) is not part of the saved object");

    /* A tensor as a dict key is not walked. */
    start(2);
    op(EMPTY_DICT);
    f32("0");
    OPS(NONE, SETITEM, STOP);
    refused("storage '0' (named at offset 90) is not part of the saved object");
}
END_TEST

/* A tuple of n ones. */
static void int_tuple(int n)
{
    op(MARK);
    for (int i = 0; i < n; i++)
        op_le(BININT1, 1, 1);
    op(TUPLE);
}

START_TEST(malformed_tensors_are_refused)
{
    start(2);
    global("torch._utils", "_rebuild_tensor_v2");
    op(MARK);
    storage_id("FloatStorage", "0", 1);
    binint(0);
    OPS(EMPTY_TUPLE, EMPTY_TUPLE, NEWFALSE, TUPLE, REDUCE);
    refused("torch._utils._rebuild_tensor_v2 takes 6 or 7 arguments, not 5");

    start(2);
    global("torch._utils", "_rebuild_tensor_v3");
    op(MARK);
    storage_id("UntypedStorage", "0", 4);
    tensor_args(1);
    OPS(TUPLE, REDUCE);
    refused("torch._utils._rebuild_tensor_v3 takes 7 or 8 arguments, not 6");

    start(2);
    global("torch._utils", "_rebuild_tensor_v2");
    OPS(MARK, NONE);
    tensor_args(1);
    OPS(TUPLE, REDUCE);
    refused("torch._utils._rebuild_tensor_v2 of None, not a storage");

    /* offset, size, stride, requires_grad: each spoilt in turn. */
    for (int spoil = 0; spoil < 6; spoil++) {
        start(2);
        global("torch._utils", "_rebuild_tensor_v2");
        op(MARK);
        storage_id("FloatStorage", "0", 1);
        binint(spoil == 0 ? -1 : 0);
        if (spoil == 1) {
            op(EMPTY_LIST);
        } else if (spoil == 2) {
            op(BINFLOAT);
            bytes("\0\0\0\0\0\0\0\0", 8);
            op(TUPLE1);
        } else {
            int_tuple(spoil == 5 ? 65 : 2);
        }
        int_tuple(spoil == 5 ? 65 : spoil == 3 ? 1 : 2);
        if (spoil == 4)
            op_le(BININT1, 0, 1);
        else
            op(NEWFALSE);
        ordered_dict();
        OPS(TUPLE, REDUCE);
        refused("_rebuild_tensor_v2: the offset, size, stride or requires_grad is malformed");
    }

    start(2);
    global("torch._utils", "_rebuild_tensor_v3");
    op(MARK);
    storage_id("UntypedStorage", "0", 16);
    tensor_args(2);
    global("torch", "complex64");
    OPS(TUPLE, REDUCE);
    refused("its dtype argument is torch.complex64, not a dtype the archive stores");

    start(2);
    global("torch._utils", "_rebuild_tensor_v3");
    op(MARK);
    storage_id("UntypedStorage", "0", 16);
    tensor_args(2);
    str("float32");
    OPS(TUPLE, REDUCE);
    refused("its dtype argument is a str, not a dtype");

    start(2);
    global("torch._utils", "_rebuild_parameter");
    OPS(MARK, NONE, NEWFALSE);
    ordered_dict();
    OPS(TUPLE, REDUCE);
    refused("torch._utils._rebuild_parameter: malformed arguments");

    start(2);
    global("torch._utils", "_rebuild_parameter_with_state");
    op(MARK);
    f32("0");
    op(NEWFALSE);
    ordered_dict();
    OPS(TUPLE, REDUCE);
    refused("torch._utils._rebuild_parameter_with_state: malformed arguments");
}
END_TEST

START_TEST(stack_misuse_is_refused)
{
    start(2);
    op(REDUCE);
    refused("pickle offset 2, REDUCE (0x52): stack underflow");
    /* A mark hides what is below it. */
    start(2);
    OPS(NONE, MARK, POP);
    refused("POP (0x30): stack underflow");
    start(2);
    OPS(NONE, TUPLE2);
    refused("TUPLE2 (0x86): stack underflow");
    start(2);
    op(POP_MARK);
    refused("POP_MARK (0x31): no MARK is open");
    start(2);
    op(TUPLE);
    refused("TUPLE (0x74): no MARK is open");
    start(2);
    OPS(EMPTY_DICT, NONE, APPEND);
    refused("APPEND (0x61): appends to a dict");
    start(2);
    OPS(EMPTY_LIST, NONE, NONE, SETITEM);
    refused("SETITEM (0x73): sets an item of a list");
    start(2);
    OPS(EMPTY_LIST, NONE, APPENDS);
    refused("APPENDS (0x65): no MARK is open");
    start(2);
    OPS(MARK, NONE, APPENDS);
    refused("APPENDS (0x65): stack underflow");
    start(2);
    OPS(EMPTY_LIST, MARK, NONE, NONE, SETITEMS);
    refused("SETITEMS (0x75): adds items to a list");
    start(2);
    OPS(EMPTY_DICT, MARK, NONE, SETITEMS);
    refused("SETITEMS (0x75): an odd number of keys and values");
    start(2);
    OPS(EMPTY_LIST, EMPTY_DICT, BUILD);
    refused("BUILD (0x62): sets the state of a list");
    start(2);
    ordered_dict();
    OPS(EMPTY_DICT, BUILD, EMPTY_DICT, BUILD);
    refused("sets the state of a dict a second time");
    start(4);
    op(NONE);
    op_le(BININT1, 1, 1);
    op(STACK_GLOBAL);
    refused("STACK_GLOBAL (0x93): module and name are None and an int, not two str");
}
END_TEST

START_TEST(framing_of_the_pickle_is_checked)
{
    start(2);
    op(NONE);
    op_le(PROTO, 2, 1);
    refused("pickle offset 3, PROTO (0x80): PROTO is not the first opcode");
    start(6);
    refused("PROTO (0x80): protocol 6 is not one torch.save writes");
    start(0);
    op_le(PROTO, 1, 1);
    refused("protocol 1 is not one torch.save writes");
    start(0);
    refused("pickle offset 0: truncated: the pickle ends before STOP");
    start(2);
    op(NONE);
    refused("pickle offset 3: truncated: the pickle ends before STOP");
    start(2);
    op(STOP);
    refused("STOP (0x2e): 0 values on the stack, not one");
    start(2);
    OPS(NONE, NONE, STOP);
    refused("STOP (0x2e): 2 values on the stack, not one");
    start(2);
    OPS(NONE, MARK, STOP);
    refused("STOP (0x2e): a MARK is still open");
    start(2);
    OPS(NONE, STOP, STOP);
    refused("pickle offset 3, STOP (0x2e): 1 bytes after STOP");
}
END_TEST

/* {"a": {KEY: tensor}} */
static void keyed_tensor(const void *key, size_t len)
{
    start(2);
    op(EMPTY_DICT);
    str("a");
    op(EMPTY_DICT);
    str_n(key, len);
    f32("0");
    OPS(SETITEM, SETITEM, STOP);
}

START_TEST(paths_are_bounded_and_without_nul)
{
    char *key = malloc(TF_PICKLE_MAX_PATH + 10), *path = malloc(TF_PICKLE_MAX_PATH + 10);
    ck_assert_ptr_nonnull(key);
    ck_assert_ptr_nonnull(path);
    memset(key, 'k', TF_PICKLE_MAX_PATH + 10);
    const size_t fits = TF_PICKLE_MAX_PATH - 2; /* "a." + key */
    keyed_tensor(key, fits);
    snprintf(path, TF_PICKLE_MAX_PATH + 1, "a.%.*s", (int)fits, key);
    const want w[] = { { "0", TF_DT_F32, 1, path } };
    accepted(w, 1);
    keyed_tensor(key, fits + 1);
    refused("storage '0' (named at offset 4197) has no path: it is longer than 4096 bytes");
    keyed_tensor("a\0b", 3);
    refused("storage '0' (named at offset 105) has no path: a key on it contains NUL");

    /* Keys that cannot be paths harm only what lies under them. */
    start(2);
    OPS(EMPTY_DICT, MARK);
    str_n(key, TF_PICKLE_MAX_PATH + 10);
    op(EMPTY_DICT);
    str_n("\0", 1);
    OPS(NONE, SETITEM);
    str_n("\0", 1);
    op(EMPTY_LIST);
    str("b");
    f32("0");
    OPS(SETITEMS, STOP);
    const want b[] = { { "0", TF_DT_F32, 1, "b" } };
    accepted(b, 1);
    free(key);
    free(path);
}
END_TEST

/* 1000 storages under a key of 4000 bytes: 4 MB of paths from a pickle
 * of 60 KB. */
START_TEST(paths_together_are_bounded)
{
    char key[4001];
    memset(key, 'k', 4000);
    key[4000] = '\0';
    start(2);
    op(EMPTY_DICT);
    str(key);
    OPS(EMPTY_DICT, MARK);
    for (int i = 0; i < 1000; i++) {
        char k[16];
        snprintf(k, sizeof k, "%d", i);
        str(k);
        storage_id("FloatStorage", k, 1);
    }
    OPS(SETITEMS, SETITEM, STOP);
    ck_assert_uint_gt(1000 * 4000, TF_PICKLE_BUDGET(pk.len));
    refused("STOP (0x2e): interpreting it would take more than");
}
END_TEST

/* PROTO, NONE and a long run of TUPLE1, each tuple holding the last:
 * refused where the nesting passes the bound, not at the end. */
START_TEST(nesting_is_checked_as_it_grows)
{
    start(2);
    op(NONE);
    for (int i = 0; i < 4 * TF_PICKLE_MAX_DEPTH; i++)
        op(TUPLE1);
    char at[128];
    snprintf(at, sizeof at, "pickle offset %d, TUPLE1 (0x85): the saved object nests more than",
             3 + TF_PICKLE_MAX_DEPTH);
    refused(at);
}
END_TEST

/* Values of one byte each, all on the stack at once: more than 16
 * bytes of memory a byte of pickle. */
START_TEST(memory_is_bounded_by_the_pickle_length)
{
    start(2);
    op(MARK);
    for (int i = 0; i < 900000; i++)
        op(NONE);
    OPS(TUPLE, STOP);
    refused("interpreting it would take more than");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pickle");
    TCase *tc = tcase_create("real");
    tcase_add_checked_fixture(tc, NULL, free_pickle);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, real_pickle_is_read_exactly, 0, ARRAY_LEN(real));
    tcase_add_loop_test(tc, real_pickle_with_bytes_after_stop_is_refused, 0, ARRAY_LEN(real));
    suite_add_tcase(s, tc);

    tc = tcase_create("opcodes");
    tcase_add_checked_fixture(tc, NULL, free_pickle);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, scalars_are_values);
    tcase_add_test(tc, dict_keys_become_path_components);
    tcase_add_test(tc, lists_and_tuples_are_indexed);
    tcase_add_test(tc, memo_keeps_values);
    tcase_add_test(tc, pop_and_pop_mark_drop_values);
    tcase_add_test(tc, frames_and_stack_globals);
    tcase_add_test(tc, build_state_is_walked_at_the_dict);
    tcase_add_loop_test(tc, storage_class_gives_the_dtype, 0, ARRAY_LEN(storage_classes));
    tcase_add_loop_test(tc, rebuild_v3_gives_an_untyped_storage_its_dtype, 0, ARRAY_LEN(dtypes));
    tcase_add_test(tc, rebuild_functions_take_their_optional_arguments);
    tcase_add_test(tc, parameters_wrap_tensors);
    tcase_add_test(tc, tensor_or_storage_at_the_root);
    tcase_add_test(tc, key_named_again_is_one_storage);
    tcase_add_test(tc, shared_and_cyclic_containers_are_walked_once);
    tcase_add_test(tc, marks_nest_up_to_the_limit);
    tcase_add_test(tc, containers_nest_up_to_the_limit);
    tcase_add_test(tc, nesting_is_checked_as_it_grows);
    suite_add_tcase(s, tc);

    tc = tcase_create("refusals");
    tcase_add_checked_fixture(tc, NULL, free_pickle);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, opcode_outside_the_subset_is_refused, 0, ARRAY_LEN(forbidden_ops));
    tcase_add_test(tc, unknown_opcode_is_refused);
    tcase_add_test(tc, forbidden_calls_are_refused);
    tcase_add_test(tc, value_constructors_are_values);
    tcase_add_test(tc, memo_indices_are_checked);
    tcase_add_test(tc, stack_is_bounded);
    tcase_add_test(tc, counts_that_lie_are_refused);
    tcase_add_test(tc, malformed_text_integers_are_refused);
    tcase_add_test(tc, malformed_persistent_ids_are_refused);
    tcase_add_test(tc, one_key_with_two_dtypes_or_sizes_is_refused);
    tcase_add_test(tc, storages_without_dtype_path_or_whole_elements_are_refused);
    tcase_add_test(tc, malformed_tensors_are_refused);
    tcase_add_test(tc, stack_misuse_is_refused);
    tcase_add_test(tc, framing_of_the_pickle_is_checked);
    tcase_add_test(tc, paths_are_bounded_and_without_nul);
    tcase_add_test(tc, paths_together_are_bounded);
    tcase_add_test(tc, memory_is_bounded_by_the_pickle_length);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
