/* A small strict JSON parser (RFC 8259) producing a DOM.
 *
 * Strict means: UTF-8 input only (overlong forms, encoded surrogates and code
 * points above U+10FFFF are rejected), no unescaped control characters in
 * strings, no lone surrogates in \u escapes, no leading zeros, no trailing
 * commas, nothing but whitespace after the top-level value, nesting bounded
 * by TF_JSON_MAX_DEPTH.
 *
 * Object members keep document order and duplicate keys are kept, so the
 * caller decides what a duplicate means (tf_json_find_duplicate).
 *
 * Numbers are not converted to floating point: the parser only says whether
 * a number is a plain unsigned 64-bit integer, which is all that sizes and
 * offsets need.
 *
 * Memory: strings take at most their encoded length; containers grow by
 * doubling but never beyond what the rest of the input could still fill, so
 * a document of n bytes costs O(n) memory whatever its shape. */
#ifndef TRAJFS_FORMAT_JSON_H
#define TRAJFS_FORMAT_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define TF_JSON_MAX_DEPTH 64 /* arrays and objects nested inside each other */

typedef enum {
    TF_JSON_NULL,
    TF_JSON_BOOL,
    TF_JSON_NUMBER,
    TF_JSON_STRING,
    TF_JSON_ARRAY,
    TF_JSON_OBJECT,
} tf_json_type;

typedef enum {
    TF_JSON_NUM_U64,      /* digits only, <= UINT64_MAX: the value is in u64 */
    TF_JSON_NUM_NOT_U64,  /* has a sign, a fraction or an exponent */
    TF_JSON_NUM_OVERFLOW, /* digits only, but greater than UINT64_MAX */
} tf_json_num_kind;

typedef struct {
    char  *bytes; /* decoded UTF-8 with a NUL after it; may contain NULs (\u0000) */
    size_t len;   /* excluding the terminating NUL */
} tf_json_string;

typedef struct tf_json_value  tf_json_value;
typedef struct tf_json_member tf_json_member;

struct tf_json_value {
    tf_json_type type;
    size_t offset; /* byte offset of the value's first byte in the input */
    union {
        bool boolean;
        struct {
            tf_json_num_kind kind;
            uint64_t u64;
        } number;
        tf_json_string string;
        struct {
            tf_json_value *items;
            size_t count;
        } array;
        struct {
            tf_json_member *members; /* in document order */
            size_t count;
        } object;
    } u;
};

struct tf_json_member {
    tf_json_string key;
    size_t key_offset; /* byte offset of the key's opening quote */
    tf_json_value value;
};

/* Parses exactly one JSON value, optionally surrounded by whitespace, from
 * text[0..len). On error the message gives the byte offset, e.g.
 * "byte 17: expected ':' after an object key", and *root needs no freeing. */
int tf_json_parse(const uint8_t *text, size_t len, tf_json_value *root, tf_error *e);
void tf_json_free(tf_json_value *v);

/* The value of the first member named key (a NUL-terminated string), or
 * NULL when obj is not an object or has no such member. */
const tf_json_value *tf_json_get(const tf_json_value *obj, const char *key);

/* Looks for a key that occurs more than once in the object obj. Sets *dup to
 * the member that repeats a key earliest in document order, or to NULL when
 * all keys are distinct (or obj is not an object). -1 only when out of memory. */
int tf_json_find_duplicate(const tf_json_value *obj, const tf_json_member **dup,
                           tf_error *e);

#endif
