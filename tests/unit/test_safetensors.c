/* Unit tests for the strict JSON parser, the safetensors header parser
 * and safetensors as a tensor-file format (format/tensor_format.h). */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory_source.h"
#include "testlib.h"

#include "common/buf.h"
#include "common/dtype.h"
#include "common/error.h"
#include "format/json.h"
#include "format/safetensors.h"
#include "format/tensor_format.h"
#include "format/torch_save.h"

#define FNAME "t.safetensors"

/* ---- helpers ---- */

/* Parses json[0..len) as the header of a file with data_len data bytes. */
static int parse_bytes(const char *json, size_t len, uint64_t data_len, tf_st_header *h,
                       tf_error *e)
{
    return tf_st_parse((const uint8_t *)json, len, 8 + len + data_len, FNAME, h, e);
}

static int parse(const char *json, uint64_t data_len, tf_st_header *h, tf_error *e)
{
    return parse_bytes(json, strlen(json), data_len, h, e);
}

static void expect_failure(const char *json, size_t len, uint64_t data_len, const char *phrase)
{
    tf_st_header h;
    tf_error e = { .msg = "" };
    int rc = parse_bytes(json, len, data_len, &h, &e);
    ck_assert_msg(rc == -1, "accepted %s", json);
    ck_assert_msg(strstr(e.msg, phrase) != NULL, "message \"%s\" lacks \"%s\"", e.msg, phrase);
    ck_assert_msg(strncmp(e.msg, FNAME ": ", strlen(FNAME ": ")) == 0,
                  "message \"%s\" does not start with the file name", e.msg);
    ck_assert_ptr_null(h.tensors);
    ck_assert_uint_eq(h.ntensors, 0);
    ck_assert_uint_eq(h.nmeta, 0);
}

static void parse_ok(const char *json, uint64_t data_len, tf_st_header *h)
{
    tf_error e = { .msg = "" };
    int rc = parse(json, data_len, h, &e);
    ck_assert_msg(rc == 0, "rejected %s: %s", json, e.msg);
}

static void parse_json_ok(const char *text, tf_json_value *v)
{
    tf_error e = { .msg = "" };
    int rc = tf_json_parse((const uint8_t *)text, strlen(text), v, &e);
    ck_assert_msg(rc == 0, "rejected %s: %s", text, e.msg);
}

static void expect_json_failure(const char *text, size_t len, const char *phrase)
{
    tf_json_value v;
    tf_error e = { .msg = "" };
    ck_assert_int_eq(tf_json_parse((const uint8_t *)text, len, &v, &e), -1);
    ck_assert_msg(strstr(e.msg, phrase) != NULL, "message \"%s\" lacks \"%s\"", e.msg, phrase);
}

/* ---- valid headers ---- */

START_TEST(test_every_dtype)
{
    char json[4096];
    size_t o = 0;
    uint64_t offset = 0;
    o += (size_t)snprintf(json + o, sizeof json - o, "{");
    for (unsigned dt = TF_DT_BOOL; dt < TF_DT_COUNT; dt++) {
        uint64_t nbytes = 3 * 5 * (uint64_t)tf_dtype_get(dt)->size;
        o += (size_t)snprintf(json + o, sizeof json - o,
                              "%s\"t.%s\":{\"dtype\":\"%s\",\"shape\":[3,5],"
                              "\"data_offsets\":[%llu,%llu]}",
                              dt == TF_DT_BOOL ? "" : ",", tf_dtype_get(dt)->name,
                              tf_dtype_get(dt)->name, (unsigned long long)offset,
                              (unsigned long long)(offset + nbytes));
        offset += nbytes;
    }
    snprintf(json + o, sizeof json - o, "}");

    tf_st_header h;
    parse_ok(json, offset, &h);
    ck_assert_uint_eq(h.ntensors, TF_DT_COUNT - 1);
    ck_assert_uint_eq(h.header_len, strlen(json));
    ck_assert_uint_eq(h.data_len, offset);
    for (unsigned dt = TF_DT_BOOL; dt < TF_DT_COUNT; dt++) {
        char name[32];
        snprintf(name, sizeof name, "t.%s", tf_dtype_get(dt)->name);
        const tf_st_tensor *t = tf_st_find(&h, name);
        ck_assert_ptr_nonnull(t);
        ck_assert_int_eq(t->dtype, dt);
        ck_assert_uint_eq(t->ndim, 2);
        ck_assert_uint_eq(t->shape[0], 3);
        ck_assert_uint_eq(t->shape[1], 5);
        ck_assert_uint_eq(t->nelem, 15);
        ck_assert_uint_eq(t->end - t->begin, 15 * tf_dtype_get(dt)->size);
        ck_assert_uint_eq(tf_st_data_offset(&h, t), 8 + h.header_len + t->begin);
    }
    ck_assert_ptr_null(tf_st_find(&h, "t.F4"));
    tf_st_free(&h);
    ck_assert_ptr_null(h.tensors);
}
END_TEST

START_TEST(test_scalar)
{
    tf_st_header h;
    parse_ok("{\"s\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[0,8]}}", 8, &h);
    ck_assert_uint_eq(h.ntensors, 1);
    ck_assert_uint_eq(h.tensors[0].ndim, 0);
    ck_assert_ptr_null(h.tensors[0].shape);
    ck_assert_uint_eq(h.tensors[0].nelem, 1);
    ck_assert_str_eq(h.tensors[0].name, "s");
    tf_st_free(&h);
}
END_TEST

START_TEST(test_empty_tensors)
{
    /* Zero-length tensors at the start, between and after real ones, two
     * of them at the same offset; ties keep header order. */
    const char *json = "{"
                       "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[8,12]},"
                       "\"z_empty\":{\"dtype\":\"F32\",\"shape\":[0,7],\"data_offsets\":[8,8]},"
                       "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                       "\"a_empty\":{\"dtype\":\"BF16\",\"shape\":[0],\"data_offsets\":[8,8]},"
                       "\"first\":{\"dtype\":\"I64\",\"shape\":[3,0],\"data_offsets\":[0,0]},"
                       "\"last\":{\"dtype\":\"I8\",\"shape\":[0],\"data_offsets\":[12,12]}"
                       "}";
    const char *order[] = { "first", "a", "z_empty", "a_empty", "b", "last" };
    tf_st_header h;
    parse_ok(json, 12, &h);
    ck_assert_uint_eq(h.ntensors, 6);
    for (size_t i = 0; i < 6; i++)
        ck_assert_str_eq(h.tensors[i].name, order[i]);
    ck_assert_uint_eq(h.tensors[0].nelem, 0);
    ck_assert_uint_eq(h.tensors[2].nelem, 0);
    ck_assert_uint_eq(h.tensors[2].shape[1], 7);
    tf_st_free(&h);
}
END_TEST

START_TEST(test_only_empty_tensors)
{
    tf_st_header h;
    parse_ok("{\"e\":{\"dtype\":\"F16\",\"shape\":[0],\"data_offsets\":[0,0]},"
             "\"f\":{\"dtype\":\"F16\",\"shape\":[5,0],\"data_offsets\":[0,0]}}",
             0, &h);
    ck_assert_uint_eq(h.ntensors, 2);
    ck_assert_str_eq(h.tensors[0].name, "e");
    tf_st_free(&h);
}
END_TEST

START_TEST(test_no_tensors)
{
    tf_st_header h;
    parse_ok("{}", 0, &h);
    ck_assert_uint_eq(h.ntensors, 0);
    ck_assert_uint_eq(h.nmeta, 0);
    ck_assert_uint_eq(h.data_len, 0);
    tf_st_free(&h);
    parse_ok("{\"__metadata__\":{}}", 0, &h);
    ck_assert_uint_eq(h.ntensors, 0);
    ck_assert_uint_eq(h.nmeta, 0);
    tf_st_free(&h);
    parse_ok("{\"__metadata__\":{\"format\":\"pt\"}}", 0, &h);
    ck_assert_uint_eq(h.nmeta, 1);
    tf_st_free(&h);
}
END_TEST

START_TEST(test_metadata)
{
    const char *json = "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                       "\"__metadata__\":{\"format\":\"pt\",\"zeta\":\"caf\\u00e9\\n\","
                       "\"alpha\":\"\"}}";
    tf_st_header h;
    parse_ok(json, 1, &h);
    ck_assert_uint_eq(h.ntensors, 1);
    ck_assert_uint_eq(h.nmeta, 3);
    ck_assert_str_eq(h.meta_keys[0], "format");
    ck_assert_str_eq(h.meta_values[0], "pt");
    ck_assert_str_eq(h.meta_keys[1], "zeta");
    ck_assert_str_eq(h.meta_values[1], "caf\xc3\xa9\n");
    ck_assert_str_eq(h.meta_keys[2], "alpha");
    ck_assert_str_eq(h.meta_values[2], "");
    tf_st_free(&h);
}
END_TEST

START_TEST(test_padding)
{
    const char *paddings[] = { "", " ", "       ", "\t\r\n " };
    for (size_t i = 0; i < sizeof paddings / sizeof paddings[0]; i++) {
        char json[256];
        snprintf(json, sizeof json,
                 "{\"x\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]}}%s",
                 paddings[i]);
        tf_st_header h;
        parse_ok(json, 8, &h);
        ck_assert_uint_eq(h.header_len, strlen(json));
        ck_assert_uint_eq(h.data_len, 8);
        tf_st_free(&h);
    }
    expect_failure("{}  x", 5, 0, "unexpected data after the top-level value");
    expect_failure("{}\0\0", 4, 0, "unexpected data after the top-level value");
    expect_failure("{}{}", 4, 0, "unexpected data after the top-level value");
}
END_TEST

START_TEST(test_unicode_names)
{
    const char *json =
        "{\"caf\\u00e9.\\ud83d\\ude00\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
        "\"h\xc3\xa9llo \xf0\x9f\x98\x80\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]},"
        "\"q\\\"b\\\\s\\/\\t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[2,3]},"
        "\"\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[3,4]}}";
    tf_st_header h;
    parse_ok(json, 4, &h);
    ck_assert_uint_eq(h.ntensors, 4);
    ck_assert_str_eq(h.tensors[0].name, "caf\xc3\xa9.\xf0\x9f\x98\x80");
    ck_assert_str_eq(h.tensors[1].name, "h\xc3\xa9llo \xf0\x9f\x98\x80");
    ck_assert_str_eq(h.tensors[2].name, "q\"b\\s/\t");
    ck_assert_str_eq(h.tensors[3].name, "");
    ck_assert_ptr_eq(tf_st_find(&h, "q\"b\\s/\t"), &h.tensors[2]);
    tf_st_free(&h);
}
END_TEST

START_TEST(test_exact_mismatch_message)
{
    tf_st_header h;
    tf_error e = { .msg = "" };
    const char *json = "{\"a.weight\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,10]}}";
    ck_assert_int_eq(tf_st_parse((const uint8_t *)json, strlen(json), 8 + strlen(json) + 10,
                                 "step-1.safetensors", &h, &e),
                     -1);
    ck_assert_str_eq(e.msg, "step-1.safetensors: tensor \"a.weight\": data_offsets [0, 10] do "
                            "not match dtype F32 x shape [3] (12 bytes)");
}
END_TEST

START_TEST(test_long_name_in_message)
{
    /* A hostile name is cut and its control characters escaped. */
    char json[2048];
    char name[1200];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    name[0] = '\\';
    name[1] = 'n';
    snprintf(json, sizeof json, "{\"%s\":{\"dtype\":\"F4\",\"shape\":[1],\"data_offsets\":[0,1]}}",
             name);
    tf_st_header h;
    tf_error e = { .msg = "" };
    ck_assert_int_eq(parse(json, 1, &h, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "tensor \"\\x0an"));
    ck_assert_ptr_nonnull(strstr(e.msg, "...\": unknown dtype"));
    ck_assert_uint_lt(strlen(e.msg), sizeof e.msg - 1);
}
END_TEST

/* ---- malformed headers: each must fail with its own message ---- */

static const struct {
    const char *json;
    size_t len; /* 0: strlen(json) */
    uint64_t data_len;
    const char *phrase;
} malformed[] = {
    /* JSON syntax */
    { "", 0, 0, "invalid JSON header: byte 0: expected a value, found end of input" },
    { "{\"a\":", 0, 0, "invalid JSON header: byte 5: expected a value, found end of input" },
    { "{\"a\" 1}", 0, 0, "expected ':' after an object key" },
    { "{\"a\":1,}", 0, 0, "expected a string key, found '}'" },
    { "{1:2}", 0, 0, "expected a string key" },
    { "{\"a\":[1,]}", 0, 0, "expected a value, found ']'" },
    { "{\"a\":[1 2]}", 0, 0, "expected ',' or ']' in an array" },
    { "{\"a\":1 \"b\":2}", 0, 0, "expected ',' or '}' in an object" },
    { "{\"a\":tru}", 0, 0, "invalid literal (expected 'true')" },
    { "{\"a\":nul", 0, 0, "invalid literal (expected 'null')" },
    { "{\"a\":01}", 0, 0, "leading zeros" },
    { "{\"a\":1.}", 0, 0, "expected a digit after '.'" },
    { "{\"a\":1e}", 0, 0, "expected a digit in the exponent" },
    { "{\"a\":-}", 0, 0, "expected a digit" },
    { "{\"a\":+1}", 0, 0, "expected a value, found '+'" },
    { "{\"a\":\"abc}", 0, 0, "unterminated string" },
    { "{\"a\":\"x\\q\"}", 0, 0, "invalid escape sequence" },
    { "{\"a\":\"\\u12\"}", 0, 0, "four hex digits" },
    { "{\"a\":\"\\u12g4\"}", 0, 0, "four hex digits" },
    { "{\"a\":\"\\ud800\"}", 0, 0, "lone high surrogate \\uD800" },
    { "{\"a\":\"\\ud800x\"}", 0, 0, "lone high surrogate" },
    { "{\"a\":\"\\udc00\"}", 0, 0, "lone low surrogate \\uDC00" },
    { "{\"a\":\"\\ud800\\u0041\"}", 0, 0, "not followed by a low surrogate" },
    { "{\"a\":\"\\ud800\\n\"}", 0, 0, "lone high surrogate" },
    { "{\"a\":\"x\ny\"}", 0, 0, "unescaped control character 0x0a" },
    { "{\"a\":\"x\ty\"}", 0, 0, "unescaped control character 0x09" },
    { "{\"\xff\":1}", 0, 0, "invalid UTF-8" },
    { "{\"\xc0\xaf\":1}", 0, 0, "invalid UTF-8" },       /* overlong '/' */
    { "{\"\xe0\x80\xaf\":1}", 0, 0, "invalid UTF-8" },   /* overlong, 3 bytes */
    { "{\"\xed\xa0\x80\":1}", 0, 0, "invalid UTF-8" },   /* encoded surrogate */
    { "{\"\xf4\x90\x80\x80\":1}", 0, 0, "invalid UTF-8" }, /* above U+10FFFF */
    { "{\"\xe2\x82\":1}", 0, 0, "invalid UTF-8" },       /* cut sequence */
    { "{\"\x80\":1}", 0, 0, "invalid UTF-8" },           /* lone continuation */
    { "{\xc3\xa9:1}", 0, 0, "expected a string key, found byte 0xc3" },
    { "{\"a\":1}\xef\xbb\xbf", 0, 0, "unexpected data after the top-level value" },
    { "\xef\xbb\xbf{}", 0, 0, "expected a value, found byte 0xef" }, /* BOM */
    { "{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
      "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
      0, 0, "nested deeper than 64 levels" },
    /* structure */
    { "[]", 0, 0, "header is not a JSON object (it is an array)" },
    { "\"x\"", 0, 0, "header is not a JSON object (it is a string)" },
    { "null", 0, 0, "header is not a JSON object" },
    { "{\"a\":{},\"b\":{},\"a\":{}}", 0, 0, "duplicate tensor name \"a\"" },
    { "{\"__metadata__\":{},\"__metadata__\":{}}", 0, 0, "duplicate __metadata__" },
    { "{\"a\":[0,1]}", 0, 1, "tensor \"a\": entry is not a JSON object (it is an array)" },
    { "{\"a\":\"F32\"}", 0, 1, "tensor \"a\": entry is not a JSON object (it is a string)" },
    { "{\"a\":{\"shape\":[1],\"data_offsets\":[0,1]}}", 0, 1, "tensor \"a\": missing \"dtype\"" },
    { "{\"a\":{\"dtype\":\"U8\",\"data_offsets\":[0,1]}}", 0, 1,
      "tensor \"a\": missing \"shape\"" },
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[1]}}", 0, 1, "tensor \"a\": missing \"data_offsets\"" },
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"foo\":1}}", 0, 1,
      "tensor \"a\": unexpected key \"foo\"" },
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"dtype\":\"U8\"}}", 0, 1,
      "tensor \"a\": duplicate key \"dtype\"" },
    { "{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 0, 1,
      "tensor \"a\\x00b\": name contains a NUL character" },
    /* dtype */
    { "{\"a\":{\"dtype\":12,\"shape\":[1],\"data_offsets\":[0,1]}}", 0, 1,
      "tensor \"a\": dtype is not a string (it is a number)" },
    { "{\"a\":{\"dtype\":\"F4\",\"shape\":[1],\"data_offsets\":[0,1]}}", 0, 1,
      "tensor \"a\": unknown dtype \"F4\" (known: BOOL, U8, I8, I16, U16, I32, U32, I64, U64, "
      "F16, BF16, F32, F64, F8_E4M3, F8_E5M2)" },
    { "{\"a\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 0, 4,
      "unknown dtype \"f32\"" },
    { "{\"a\":{\"dtype\":\"F32 \",\"shape\":[1],\"data_offsets\":[0,4]}}", 0, 4,
      "unknown dtype \"F32 \"" },
    /* shape */
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":1,\"data_offsets\":[0,1]}}", 0, 1,
      "tensor \"a\": shape is not an array (it is a number)" },
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}", 0, 1,
      "shape[0] is not a non-negative integer" },
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[-0],\"data_offsets\":[0,0]}}", 0, 0,
      "shape[0] is not a non-negative integer" },
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1.0],\"data_offsets\":[0,1]}}", 0, 1,
      "shape[1] is not a non-negative integer" },
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[1e0],\"data_offsets\":[0,1]}}", 0, 1,
      "shape[0] is not a non-negative integer" },
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[1e999999999],\"data_offsets\":[0,1]}}", 0, 1,
      "shape[0] is not a non-negative integer" },
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[\"1\"],\"data_offsets\":[0,1]}}", 0, 1,
      "shape[0] is not a non-negative integer" },
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[null],\"data_offsets\":[0,1]}}", 0, 1,
      "shape[0] is not a non-negative integer" },
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,18446744073709551616],\"data_offsets\":[0,1]}}", 0,
      1, "shape[1] is larger than 2^64-1" },
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[99999999999999999999999999999],\"data_offsets\":[0,1]}}",
      0, 1, "shape[0] is larger than 2^64-1" },
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,1]}}", 0,
      1, "tensor \"a\": element count of shape [4294967296, 4294967296] overflows 64 bits" },
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[0,4294967296,4294967296],\"data_offsets\":[0,0]}}", 0,
      0, "element count of shape [0, 4294967296, 4294967296] overflows 64 bits" },
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[1000,1000,1000,1000,1000,1000,1000,1000,1000,1000,"
      "1000,1000,1000,1000,1000,1000,1000,1000,1000,1000,1000,1000],\"data_offsets\":[0,1]}}",
      0, 1, "element count of shape [1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, "
            "1000, 1000, 1000, 1000, 1000, 1000, ...] overflows 64 bits" },
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[18446744073709551615],"
      "\"data_offsets\":[0,18446744073709551615]}}",
      0, 1, "extend past the end of the data section" },
    { "{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],\"data_offsets\":[0,1]}}", 0, 1,
      "tensor \"a\": byte size of dtype F32 x shape [4611686018427387904] overflows 64 bits" },
    { "{\"a\":{\"dtype\":\"U16\",\"shape\":[0,9223372036854775808],\"data_offsets\":[0,0]}}", 0,
      0, "byte size of dtype U16 x shape [0, 9223372036854775808] overflows 64 bits" },
    /* data_offsets */
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":1}}", 0, 1,
      "tensor \"a\": data_offsets is not an array of 2 integers" },
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1]}}", 0, 1,
      "data_offsets is not an array of 2 integers" },
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1,2]}}", 0, 1,
      "data_offsets is not an array of 2 integers" },
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[-1,0]}}", 0, 1,
      "data_offsets[0] is not a non-negative integer" },
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1.5]}}", 0, 1,
      "data_offsets[1] is not a non-negative integer" },
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,18446744073709551616]}}", 0, 1,
      "data_offsets[1] is larger than 2^64-1" },
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[2,1]}}", 0, 2,
      "tensor \"a\": data_offsets [2, 1]: begin is after end" },
    { "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,15]}}", 0, 15,
      "tensor \"a\": data_offsets [0, 15] do not match dtype F32 x shape [2, 2] (16 bytes)" },
    { "{\"a\":{\"dtype\":\"F16\",\"shape\":[],\"data_offsets\":[0,0]}}", 0, 0,
      "data_offsets [0, 0] do not match dtype F16 x shape [] (2 bytes)" },
    /* tiling */
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]},"
      "\"b\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[4,12]}}",
      0, 12, "tensor \"b\": data_offsets [4, 12] overlap tensor \"a\" [0, 8]" },
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]},"
      "\"b\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]}}",
      0, 8, "tensor \"b\": data_offsets [0, 8] overlap tensor \"a\" [0, 8]" },
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]},"
      "\"z\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,4]}}",
      0, 8, "tensor \"z\": data_offsets [4, 4] overlap tensor \"a\" [0, 8]" },
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
      "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[8,12]}}",
      0, 12, "tensor \"b\": gap of 4 bytes after tensor \"a\", which ends at 4" },
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}", 0, 8,
      "tensor \"a\": gap of 4 bytes at the start of the data section" },
    { "{\"z\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[3,3]}}", 0, 3,
      "tensor \"z\": gap of 3 bytes at the start of the data section" },
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
      "\"z\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[6,6]}}",
      0, 6, "tensor \"z\": gap of 2 bytes after tensor \"a\"" },
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]}}", 0, 4,
      "tensor \"a\": data_offsets [0, 8] extend past the end of the data section (4 bytes" },
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
      "\"z\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[8,8]}}",
      0, 4, "tensor \"z\": data_offsets [8, 8] extend past the end" },
    { "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 0, 9,
      "5 trailing bytes after the last tensor" },
    { "{}", 0, 1, "1 trailing bytes after the last tensor" },
    { "{\"__metadata__\":{\"k\":\"v\"}}", 0, 3, "3 trailing bytes" },
    /* __metadata__ */
    { "{\"__metadata__\":[]}", 0, 0, "__metadata__: not a JSON object (it is an array)" },
    { "{\"__metadata__\":\"x\"}", 0, 0, "__metadata__: not a JSON object (it is a string)" },
    { "{\"__metadata__\":{\"k\":1}}", 0, 0,
      "__metadata__: key \"k\": value is not a string (it is a number)" },
    { "{\"__metadata__\":{\"k\":{}}}", 0, 0, "key \"k\": value is not a string (it is an object)" },
    { "{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}", 0, 0, "__metadata__: duplicate key \"k\"" },
    { "{\"__metadata__\":{\"k\":\"a\\u0000b\"}}", 0, 0,
      "key \"k\": value contains a NUL character" },
    { "{\"__metadata__\":{\"k\\u0000\":\"a\"}}", 0, 0,
      "key \"k\\x00\" contains a NUL character" },
    /* padding must be whitespace */
    { "{}\0", 3, 0, "byte 2: unexpected data after the top-level value" },
};

START_TEST(test_malformed)
{
    const char *json = malformed[_i].json;
    size_t len = malformed[_i].len ? malformed[_i].len : strlen(json);
    expect_failure(json, len, malformed[_i].data_len, malformed[_i].phrase);
}
END_TEST

START_TEST(test_header_beyond_file)
{
    tf_st_header h;
    tf_error e = { .msg = "" };
    ck_assert_int_eq(tf_st_parse((const uint8_t *)"{}", 2, 9, FNAME, &h, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "header length 2 exceeds the file size 9 minus 8"));
    ck_assert_int_eq(tf_st_parse((const uint8_t *)"{}", 2, 3, FNAME, &h, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "shorter than 8 bytes (3 bytes)"));
}
END_TEST

START_TEST(test_null_error)
{
    /* Callers that only need a yes or no pass no tf_error. */
    tf_st_header h;
    const char *good = "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}";
    const char *bad[] = {
        "{",
        "[]",
        "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,2]}}",
        "{\"a\":1,\"a\":1}",
        "{\"__metadata__\":{\"k\":1}}",
    };
    ck_assert_int_eq(parse(good, 1, &h, NULL), 0);
    tf_st_free(&h);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_int_eq(parse(bad[i], 1, &h, NULL), -1);
    ck_assert_int_eq(tf_st_parse((const uint8_t *)"{}", 2, 4, FNAME, &h, NULL), -1);
    tf_json_value v;
    ck_assert_int_eq(tf_json_parse((const uint8_t *)"[\"\\ud800\"]", 10, &v, NULL), -1);
}
END_TEST

/* ---- reading from a file ---- */

static FILE *file_with(const void *bytes, size_t len)
{
    FILE *f = tmpfile();
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(bytes, 1, len, f), len);
    ck_assert_int_eq(fflush(f), 0);
    return f;
}

static FILE *safetensors_file(uint64_t declared_len, const char *json, size_t data_len,
                              size_t *file_len)
{
    uint8_t file[512] = { 0 };
    size_t json_len = strlen(json);
    tf_le64_put(file, declared_len);
    memcpy(file + 8, json, json_len);
    for (size_t i = 0; i < data_len; i++)
        file[8 + json_len + i] = (uint8_t)i;
    *file_len = 8 + json_len + data_len;
    return file_with(file, *file_len);
}

START_TEST(test_read_file)
{
    const char *json = "{\"a\":{\"dtype\":\"U16\",\"shape\":[3],\"data_offsets\":[0,6]}}  ";
    size_t file_len;
    FILE *f = safetensors_file(strlen(json), json, 6, &file_len);
    uint8_t *header = NULL;
    tf_st_header h;
    tf_error e = { .msg = "" };
    int rc = tf_st_read(fileno(f), file_len, FNAME, &header, &h, &e);
    ck_assert_msg(rc == 0, "%s", e.msg);
    ck_assert_mem_eq(header, json, strlen(json));
    ck_assert_uint_eq(h.header_len, strlen(json));
    ck_assert_uint_eq(h.data_len, 6);
    ck_assert_uint_eq(tf_st_data_offset(&h, &h.tensors[0]), 8 + strlen(json));
    free(header);
    tf_st_free(&h);
    fclose(f);
}
END_TEST

static void expect_read_failure(FILE *f, uint64_t file_size, const char *phrase)
{
    uint8_t *header = (uint8_t *)"not touched";
    tf_st_header h;
    tf_error e = { .msg = "" };
    ck_assert_int_eq(tf_st_read(fileno(f), file_size, FNAME, &header, &h, &e), -1);
    ck_assert_msg(strstr(e.msg, phrase) != NULL, "message \"%s\" lacks \"%s\"", e.msg, phrase);
    ck_assert_ptr_null(header);
    ck_assert_ptr_null(h.tensors);
    fclose(f);
}

START_TEST(test_read_failures)
{
    size_t len;
    FILE *f = file_with("\x02\0\0\0\0", 5);
    expect_read_failure(f, 5, FNAME ": file is shorter than 8 bytes (5 bytes)");

    f = safetensors_file(200u << 20, "{}", 0, &len);
    expect_read_failure(f, len, "header length 209715200 exceeds the limit of 104857600 bytes");

    f = safetensors_file((uint64_t)TF_ST_MAX_HEADER + 1, "{}", 0, &len);
    expect_read_failure(f, len, "exceeds the limit");

    f = safetensors_file(UINT64_MAX, "{}", 0, &len);
    expect_read_failure(f, len, "exceeds the limit");

    f = safetensors_file(3, "{}", 0, &len);
    expect_read_failure(f, len, "header length 3 exceeds the file size 10 minus 8 (truncated");

    /* The caller's size is stale: the file is shorter than it says. */
    f = safetensors_file(100, "{}", 0, &len);
    expect_read_failure(f, 200, "unexpected end of file");

    f = safetensors_file(2, "{]", 0, &len);
    expect_read_failure(f, len, "invalid JSON header");

    f = safetensors_file(2, "{}", 4, &len);
    expect_read_failure(f, len, "4 trailing bytes");
}
END_TEST

/* ---- safetensors as a tensor-file format ---- */

/* 8-byte length, json, data_len bytes of data: into buf, its length. */
static size_t make_file(uint8_t *buf, size_t cap, const char *json, size_t data_len)
{
    size_t json_len = strlen(json);
    ck_assert_uint_le(8 + json_len + data_len, cap);
    tf_le64_put(buf, json_len);
    memcpy(buf + 8, json, json_len);
    for (size_t i = 0; i < data_len; i++)
        buf[8 + json_len + i] = (uint8_t)(i * 13);
    return 8 + json_len + data_len;
}

static const tf_tensor_format *detect(const uint8_t *p, size_t len, const char *name, bool *claimed)
{
    return tf_tensor_format_detect(p, len < TF_FORMAT_HEAD_BYTES ? len : TF_FORMAT_HEAD_BYTES,
                                   len, name, claimed);
}

START_TEST(test_format_table)
{
    ck_assert_ptr_eq(tf_tensor_format_get(TF_FORMAT_SAFETENSORS), &tf_safetensors_format);
    ck_assert_ptr_null(tf_tensor_format_get(0));
    ck_assert_ptr_eq(tf_tensor_format_get(TF_FORMAT_TORCH_SAVE), &tf_torch_save_format);
    ck_assert_ptr_null(tf_tensor_format_get(TF_FORMAT_TORCH_SAVE + 1));
    ck_assert_str_eq(tf_safetensors_format.name, "safetensors");
    ck_assert_str_eq(tf_torch_save_format.name, "torch.save");
}
END_TEST

START_TEST(test_format_detect)
{
    uint8_t buf[256];
    size_t len = make_file(buf, sizeof buf, "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2);
    bool claimed = true;
    /* The content decides, whatever the name; the name says whether it claims it. */
    ck_assert_ptr_eq(detect(buf, len, "x.safetensors", &claimed), &tf_safetensors_format);
    ck_assert(claimed);
    ck_assert_ptr_eq(detect(buf, len, "x.safetensors.tmp", &claimed), &tf_safetensors_format);
    ck_assert(!claimed);
    /* Not the content of one: the name alone claims it (to be parsed and
     * refused with a message), or nothing does. */
    static const struct { const char *bytes; size_t len; } not_one[] = {
        { "plain text, not a tensor file", 29 },
        { "\x01\0\0\0\0\0\0\0{", 9 },             /* a header of 1 byte */
        { "\x10\0\0\0\0\0\0\0{\"a\"", 12 },        /* longer than the file */
        { "\x02\0\0\0\0\0\0\0[]", 10 },            /* no object */
        { "\x02\0\0\0\0\0\0\0", 8 },               /* 8 bytes */
        { "", 0 },
    };
    for (size_t k = 0; k < sizeof not_one / sizeof not_one[0]; k++) {
        const uint8_t *p = (const uint8_t *)not_one[k].bytes;
        claimed = false;
        ck_assert_ptr_eq(detect(p, not_one[k].len, "m.safetensors", &claimed), &tf_safetensors_format);
        ck_assert(claimed);
        claimed = true;
        ck_assert_msg(detect(p, not_one[k].len, "m.bin", &claimed) == NULL, "case %zu", k);
        ck_assert(!claimed);
    }
    /* The smallest one: "{}" and no data. */
    len = make_file(buf, sizeof buf, "{}", 0);
    ck_assert_ptr_eq(detect(buf, len, "m.bin", &claimed), &tf_safetensors_format);
}
END_TEST

START_TEST(test_format_parses_pieces)
{
    /* Header order is not data order; a zero-length tensor is a piece. */
    const char *json = "{\"__metadata__\":{\"k\":\"v\"},"
                       "\"b\":{\"dtype\":\"BF16\",\"shape\":[300],\"data_offsets\":[8,608]},"
                       "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[608,608]},"
                       "\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}   ";
    static uint8_t buf[1024];
    size_t len = make_file(buf, sizeof buf, json, 608);
    tf_memory_file m = { buf, len };
    tf_file_source src = { .name = FNAME, .size = len, .read = tf_memory_read, .arg = &m };
    tf_entry ent = { .kind = TF_ENTRY_TENSORS, .path = FNAME, .size = len };
    tf_error e = { .msg = "" };
    ck_assert_msg(tf_tensor_format_parse(&tf_safetensors_format, &src, 8, &ent, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(ent.format, TF_FORMAT_SAFETENSORS);
    ck_assert_uint_eq(ent.npieces, 4);
    ck_assert_uint_eq(ent.pieces[0].tensor, TF_PIECE_VERBATIM);
    ck_assert_uint_eq(ent.pieces[0].len, 8 + strlen(json));
    ck_assert_uint_eq(ent.verbatim_len, 8 + strlen(json));
    ck_assert_ptr_null(ent.verbatim);
    ck_assert_uint_eq(ent.ntensors, 3);
    static const struct { const char *name; unsigned dtype; uint64_t begin, nbytes; } want[] = {
        { "a", TF_DT_F64, 0, 8 }, { "b", TF_DT_BF16, 8, 600 }, { "e", TF_DT_F32, 608, 0 },
    };
    uint64_t chunk = 1; /* the header's */
    for (uint64_t t = 0; t < 3; t++) {
        ck_assert_uint_eq(ent.pieces[t + 1].tensor, t);
        ck_assert_str_eq(tf_tensor_name(&ent, t), want[t].name);
        ck_assert_uint_eq(ent.tensors[t].dtype, want[t].dtype);
        ck_assert_uint_eq(ent.tensors[t].nbytes, want[t].nbytes);
        ck_assert_uint_eq(ent.tensors[t].file_off, 8 + strlen(json) + want[t].begin);
        ck_assert_uint_eq(ent.tensors[t].first_chunk, chunk);
        chunk += tf_chunk_count(want[t].nbytes, tf_dtype_get(want[t].dtype)->size, 8);
    }
    ck_assert_uint_eq(ent.nchunks, chunk); /* 1 + 1 + 2 + 0 */
    ck_assert_uint_eq(chunk, 4);
    ent.path = NULL;
    tf_entry_free(&ent);
}
END_TEST

START_TEST(test_format_refuses_what_is_not_one)
{
    static uint8_t buf[8 + TF_TENSOR_NAME_MAX + 128];
    static char json[TF_TENSOR_NAME_MAX + 128];
    /* A tensor name the catalog cannot hold, and a file that is no
     * valid one. */
    int n = snprintf(json, sizeof json, "{\"%0*d\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
                     TF_TENSOR_NAME_MAX + 1, 0);
    ck_assert_int_lt(n, (int)sizeof json);
    const struct { const char *json; size_t data_len; const char *want; } cases[] = {
        { json, 1, "tensor name of 4097 bytes is longer than 4096" },
        { "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 2, "1 trailing bytes" },
        { "{\"a\":1}", 0, "tensor \"a\"" },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        size_t len = make_file(buf, sizeof buf, cases[k].json, cases[k].data_len);
        tf_memory_file m = { buf, len };
        tf_file_source src = { .name = FNAME, .size = len, .read = tf_memory_read, .arg = &m };
        tf_entry ent = { .kind = TF_ENTRY_TENSORS, .path = FNAME, .size = len };
        tf_error e = { .msg = "" };
        ck_assert_int_eq(tf_tensor_format_parse(&tf_safetensors_format, &src, 8, &ent, &e), -1);
        ck_assert_int_eq(e.errnum, EINVAL);
        ck_assert_msg(strstr(e.msg, cases[k].want) && strstr(e.msg, FNAME), "case %zu: %s", k, e.msg);
        ent.path = NULL;
        tf_entry_free(&ent);
    }
}
END_TEST

/* ---- the JSON parser on its own ---- */

START_TEST(test_json_values)
{
    tf_json_value v;
    parse_json_ok(" [null, true, false, 0, 18446744073709551615, 18446744073709551616, -0, 1.5,"
                  " 1E+3, -2e-2, \"x\", {}, [], {\"k\": [1]}] ",
                  &v);
    ck_assert_int_eq(v.type, TF_JSON_ARRAY);
    ck_assert_uint_eq(v.u.array.count, 14);
    const tf_json_value *it = v.u.array.items;
    ck_assert_int_eq(it[0].type, TF_JSON_NULL);
    ck_assert_int_eq(it[1].type, TF_JSON_BOOL);
    ck_assert(it[1].u.boolean);
    ck_assert(!it[2].u.boolean);
    ck_assert_int_eq(it[3].u.number.kind, TF_JSON_NUM_U64);
    ck_assert_uint_eq(it[3].u.number.u64, 0);
    ck_assert_int_eq(it[4].u.number.kind, TF_JSON_NUM_U64);
    ck_assert_uint_eq(it[4].u.number.u64, UINT64_MAX);
    ck_assert_int_eq(it[5].u.number.kind, TF_JSON_NUM_OVERFLOW);
    for (int i = 6; i <= 9; i++)
        ck_assert_int_eq(it[i].u.number.kind, TF_JSON_NUM_NOT_U64);
    ck_assert_int_eq(it[10].type, TF_JSON_STRING);
    ck_assert_int_eq(it[11].type, TF_JSON_OBJECT);
    ck_assert_uint_eq(it[11].u.object.count, 0);
    ck_assert_int_eq(it[12].type, TF_JSON_ARRAY);
    ck_assert_ptr_nonnull(tf_json_get(&it[13], "k"));
    ck_assert_ptr_null(tf_json_get(&it[13], "K"));
    ck_assert_ptr_null(tf_json_get(&it[12], "k"));
    ck_assert_uint_eq(it[1].offset, 8);
    tf_json_free(&v);
    ck_assert_int_eq(v.type, TF_JSON_NULL);
}
END_TEST

START_TEST(test_json_strings)
{
    tf_json_value v;
    parse_json_ok("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u0041\\u00e9\\u20AC\\ud83d\\ude00\\udbff\\udfff"
                  "\\u0000\xe2\x82\xac\x7f\"",
                  &v);
    const char expect[] = "\"\\/\b\f\n\r\tA\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf"
                          "\0\xe2\x82\xac\x7f";
    ck_assert_uint_eq(v.u.string.len, sizeof expect - 1);
    ck_assert_mem_eq(v.u.string.bytes, expect, sizeof expect);
    tf_json_free(&v);
}
END_TEST

START_TEST(test_json_depth)
{
    char text[2 * (TF_JSON_MAX_DEPTH + 1) + 1];
    for (int depth = TF_JSON_MAX_DEPTH; depth <= TF_JSON_MAX_DEPTH + 1; depth++) {
        memset(text, '[', (size_t)depth);
        memset(text + depth, ']', (size_t)depth);
        text[2 * depth] = '\0';
        tf_json_value v;
        tf_error e = { .msg = "" };
        int rc = tf_json_parse((const uint8_t *)text, strlen(text), &v, &e);
        if (depth == TF_JSON_MAX_DEPTH) {
            ck_assert_msg(rc == 0, "%s", e.msg);
            tf_json_free(&v);
        } else {
            ck_assert_int_eq(rc, -1);
            ck_assert_str_eq(e.msg, "byte 64: arrays and objects nested deeper than 64 levels");
        }
    }
    /* Deep unclosed input fails early, without deep recursion. */
    static char deep[100000];
    memset(deep, '{', sizeof deep);
    expect_json_failure(deep, sizeof deep, "expected a string key");
    memset(deep, '[', sizeof deep);
    expect_json_failure(deep, sizeof deep, "nested deeper than 64 levels");
}
END_TEST

START_TEST(test_json_large_flat)
{
    /* Many elements: containers grow by doubling, capped by the input left. */
    enum { N = 200000 };
    char *text = malloc(2 * N + 2);
    ck_assert_ptr_nonnull(text);
    text[0] = '[';
    for (size_t i = 0; i < N; i++) {
        text[1 + 2 * i] = (char)('0' + i % 10);
        text[2 + 2 * i] = i + 1 < N ? ',' : ']';
    }
    tf_json_value v;
    tf_error e = { .msg = "" };
    ck_assert_int_eq(tf_json_parse((const uint8_t *)text, 2 * N + 1, &v, &e), 0);
    ck_assert_uint_eq(v.u.array.count, N);
    ck_assert_uint_eq(v.u.array.items[N - 1].u.number.u64, (N - 1) % 10);
    tf_json_free(&v);
    free(text);
}
END_TEST

START_TEST(test_json_duplicates)
{
    tf_json_value v;
    const tf_json_member *dup;
    tf_error e = { .msg = "" };
    parse_json_ok("{\"b\":1,\"c\":2,\"a\":3,\"c\":4,\"b\":5,\"a\":6}", &v);
    ck_assert_int_eq(tf_json_find_duplicate(&v, &dup, &e), 0);
    ck_assert_ptr_eq(dup, &v.u.object.members[3]); /* the second "c" */
    tf_json_free(&v);

    parse_json_ok("{\"a\":1,\"ab\":2,\"a\\u0000\":3,\"\":4}", &v);
    ck_assert_int_eq(tf_json_find_duplicate(&v, &dup, &e), 0);
    ck_assert_ptr_null(dup);
    tf_json_free(&v);

    parse_json_ok("{\"\\u00e9\":1,\"\xc3\xa9\":2}", &v);
    ck_assert_int_eq(tf_json_find_duplicate(&v, &dup, &e), 0);
    ck_assert_ptr_eq(dup, &v.u.object.members[1]);
    tf_json_free(&v);

    parse_json_ok("[1,1]", &v);
    ck_assert_int_eq(tf_json_find_duplicate(&v, &dup, &e), 0);
    ck_assert_ptr_null(dup);
    tf_json_free(&v);
}
END_TEST

START_TEST(test_json_error_offsets)
{
    expect_json_failure("[1, 2, x]", 9, "byte 7: expected a value, found 'x'");
    expect_json_failure("\"ab\\u00zz\"", 10, "byte 7: \\u escape needs four hex digits");
    expect_json_failure("\"a\xc3\"", 4, "byte 2: invalid UTF-8");
    expect_json_failure("  \"abc", 6, "byte 2: unterminated string");
    expect_json_failure("\"\\", 2, "byte 0: unterminated string");
    expect_json_failure("\"\\u", 3, "byte 0: unterminated string");
    expect_json_failure("\"\\u\"", 4, "byte 3: \\u escape needs four hex digits");
    expect_json_failure("\"\\ud83d\\u\"", 10, "byte 9: \\u escape needs four hex digits");
    expect_json_failure("\"\x01\"", 3, "byte 1: unescaped control character 0x01");
    expect_json_failure("{\"a\":1}\x01", 8, "byte 7: unexpected data after the top-level value");
    expect_json_failure("-01", 3, "byte 1: numbers must not have leading zeros");
}
END_TEST

/* ---- fuzz: random mutations of a valid header never crash ---- */

static const char fuzz_base[] =
    "{\"__metadata__\":{\"format\":\"pt\",\"note\":\"caf\\u00e9 \\ud83d\\ude00\"},"
    "\"model.embed\":{\"dtype\":\"BF16\",\"shape\":[4,3],\"data_offsets\":[0,24]},"
    "\"model.empty\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[24,24]},"
    "\"h\xc3\xa9.scalar\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[24,32]},"
    "\"mask\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[32,35]},"
    "\"q\\\"x\":{\"dtype\":\"F8_E4M3\",\"shape\":[1,1,1],\"data_offsets\":[35,36]}}   ";
enum { FUZZ_DATA_LEN = 36 };

static void check_invariants(const tf_st_header *h)
{
    uint64_t covered = 0;
    for (size_t i = 0; i < h->ntensors; i++) {
        const tf_st_tensor *t = &h->tensors[i];
        uint64_t nelem = 1;
        for (uint32_t d = 0; d < t->ndim; d++)
            nelem *= t->shape[d];
        ck_assert_uint_eq(t->nelem, nelem);
        ck_assert_uint_eq(t->begin, covered);
        ck_assert_uint_eq(t->end - t->begin, t->nelem * tf_dtype_get(t->dtype)->size);
        ck_assert_ptr_eq(tf_st_find(h, t->name), t);
        covered = t->end;
    }
    ck_assert_uint_eq(covered, h->data_len);
}

/* One random edit: overwrite, insert or delete a byte, or copy a span. */
static size_t mutate(uint8_t *buf, size_t len, size_t cap)
{
    static const char interesting[] = "{}[]\",:\\u0123456789-.eE tfn_";
    size_t at = len ? (size_t)(rng_next() % len) : 0;
    uint8_t byte = rng_next() % 2 ? (uint8_t)interesting[rng_next() % (sizeof interesting - 1)]
                                  : (uint8_t)rng_next();
    switch (rng_next() % 4) {
    case 0:
        if (len)
            buf[at] = byte;
        return len;
    case 1:
        if (len == cap)
            return len;
        memmove(buf + at + 1, buf + at, len - at);
        buf[at] = byte;
        return len + 1;
    case 2:
        if (!len)
            return len;
        memmove(buf + at, buf + at + 1, len - at - 1);
        return len - 1;
    default: {
        size_t from = len ? (size_t)(rng_next() % len) : 0;
        size_t n = (size_t)(rng_next() % 16);
        n = n < len - from ? n : len - from;
        n = n < cap - len ? n : cap - len;
        memmove(buf + at + n, buf + at, len - at);
        memmove(buf + at, buf + (from < at ? from : from + n), n);
        return len + n;
    }
    }
}

START_TEST(test_fuzz)
{
    enum { CAP = 1024, ITERATIONS = 5000 };
    uint8_t *buf = malloc(CAP);
    ck_assert_ptr_nonnull(buf);
    int accepted = 0;
    rng_state = 1; /* the same inputs on every run, so that failures reproduce */
    for (int iter = 0; iter < ITERATIONS; iter++) {
        size_t len = sizeof fuzz_base - 1;
        memcpy(buf, fuzz_base, len);
        int edits = 1 + (int)(rng_next() % 4);
        for (int k = 0; k < edits; k++)
            len = mutate(buf, len, CAP);
        /* A heap copy of exactly len bytes, so that ASan catches any read past the end. */
        uint8_t *exact = malloc(len ? len : 1);
        ck_assert_ptr_nonnull(exact);
        memcpy(exact, buf, len);
        uint64_t data_len = rng_next() % 8 ? FUZZ_DATA_LEN : rng_next() % 64;
        tf_st_header h;
        tf_error e = { .msg = "" };
        if (tf_st_parse(exact, len, 8 + len + data_len, FNAME, &h, &e) == 0) {
            check_invariants(&h);
            tf_st_free(&h);
            accepted++;
        } else {
            ck_assert_msg(strncmp(e.msg, FNAME ": ", strlen(FNAME ": ")) == 0, "%s", e.msg);
            ck_assert_ptr_null(h.tensors);
        }
        tf_json_value v;
        if (tf_json_parse(exact, len, &v, &e) == 0)
            tf_json_free(&v);
        free(exact);
    }
    /* Some mutations (in padding, metadata, digits of a name) keep it valid. */
    ck_assert_int_gt(accepted, 0);
    ck_assert_int_lt(accepted, ITERATIONS);
    free(buf);
}
END_TEST

static Suite *safetensors_suite(void)
{
    Suite *s = suite_create("safetensors");
    TCase *valid = tcase_create("valid");
    tcase_add_test(valid, test_every_dtype);
    tcase_add_test(valid, test_scalar);
    tcase_add_test(valid, test_empty_tensors);
    tcase_add_test(valid, test_only_empty_tensors);
    tcase_add_test(valid, test_no_tensors);
    tcase_add_test(valid, test_metadata);
    tcase_add_test(valid, test_padding);
    tcase_add_test(valid, test_unicode_names);
    suite_add_tcase(s, valid);

    TCase *invalid = tcase_create("malformed");
    tcase_add_test(invalid, test_exact_mismatch_message);
    tcase_add_test(invalid, test_long_name_in_message);
    tcase_add_loop_test(invalid, test_malformed, 0, sizeof malformed / sizeof malformed[0]);
    tcase_add_test(invalid, test_header_beyond_file);
    tcase_add_test(invalid, test_null_error);
    suite_add_tcase(s, invalid);

    TCase *file = tcase_create("file");
    tcase_add_test(file, test_read_file);
    tcase_add_test(file, test_read_failures);
    suite_add_tcase(s, file);

    TCase *format = tcase_create("format");
    tcase_add_test(format, test_format_table);
    tcase_add_test(format, test_format_detect);
    tcase_add_test(format, test_format_parses_pieces);
    tcase_add_test(format, test_format_refuses_what_is_not_one);
    suite_add_tcase(s, format);

    TCase *json = tcase_create("json");
    tcase_add_test(json, test_json_values);
    tcase_add_test(json, test_json_strings);
    tcase_add_test(json, test_json_depth);
    tcase_add_test(json, test_json_large_flat);
    tcase_add_test(json, test_json_duplicates);
    tcase_add_test(json, test_json_error_offsets);
    suite_add_tcase(s, json);

    TCase *fuzz = tcase_create("fuzz");
    tcase_add_test(fuzz, test_fuzz);
    tcase_set_timeout(fuzz, 120);
    suite_add_tcase(s, fuzz);
    return s;
}

int main(void)
{
    return run_suite(safetensors_suite());
}
