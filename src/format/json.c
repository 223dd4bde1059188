#include "format/json.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const uint8_t *text;
    size_t len, pos;
    unsigned depth;
    tf_error *e;
} parser;

static int fail_at(parser *p, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail_at(parser *p, size_t at, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return tf_fail(p->e, EINVAL, "byte %zu: %s", at, what);
}

/* "end of input", "'x'" or "byte 0x07": what the parser found at pos. */
static void describe_next(const parser *p, char out[24])
{
    if (p->pos >= p->len)
        snprintf(out, 24, "end of input");
    else if (p->text[p->pos] >= 0x20 && p->text[p->pos] < 0x7f)
        snprintf(out, 24, "'%c'", p->text[p->pos]);
    else
        snprintf(out, 24, "byte 0x%02x", p->text[p->pos]);
}

static int fail_expected(parser *p, const char *expected)
{
    char found[24];
    describe_next(p, found);
    return fail_at(p, p->pos, "expected %s, found %s", expected, found);
}

static void skip_whitespace(parser *p)
{
    while (p->pos < p->len) {
        uint8_t c = p->text[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            return;
        p->pos++;
    }
}

static bool accept(parser *p, uint8_t c)
{
    if (p->pos < p->len && p->text[p->pos] == c) {
        p->pos++;
        return true;
    }
    return false;
}

static bool is_digit_at(const parser *p, size_t at)
{
    return at < p->len && p->text[at] >= '0' && p->text[at] <= '9';
}

/* ---- strings ---- */

/* Length of the well-formed UTF-8 sequence at s (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF), or 0 when it is not one. */
static size_t utf8_sequence_len(const uint8_t *s, size_t avail)
{
    uint8_t c = s[0], lo = 0x80, hi = 0xBF;
    size_t n;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        lo = c == 0xE0 ? 0xA0 : lo;
        hi = c == 0xED ? 0x9F : hi;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        lo = c == 0xF0 ? 0x90 : lo;
        hi = c == 0xF4 ? 0x8F : hi;
    } else {
        return 0;
    }
    if (avail < n || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t k = 2; k < n; k++)
        if ((s[k] & 0xC0) != 0x80)
            return 0;
    return n;
}

static size_t utf8_encode(uint32_t cp, char *out)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Reads the four hex digits of a \u escape starting at *at (just after the
 * 'u'), not reading at or past end. */
static int read_hex4(parser *p, size_t *at, size_t end, uint32_t *cp)
{
    uint32_t v = 0;
    for (int k = 0; k < 4; k++, (*at)++) {
        uint8_t c = *at < end ? p->text[*at] : 0;
        if (c >= '0' && c <= '9')
            v = v << 4 | (uint32_t)(c - '0');
        else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
            v = v << 4 | (uint32_t)((c | 0x20) - 'a' + 10);
        else
            return fail_at(p, *at, "\\u escape needs four hex digits");
    }
    *cp = v;
    return 0;
}

/* Decodes the \u escape whose backslash is at *at, joining a surrogate pair
 * into one code point; advances *at past it. */
static int read_unicode_escape(parser *p, size_t *at, size_t end, uint32_t *cp)
{
    size_t start = *at;
    *at += 2;
    if (read_hex4(p, at, end, cp) < 0)
        return -1;
    if (*cp >= 0xDC00 && *cp <= 0xDFFF)
        return fail_at(p, start, "lone low surrogate \\u%04X", (unsigned)*cp);
    if (*cp < 0xD800 || *cp > 0xDBFF)
        return 0;
    uint32_t low = 0;
    if (*at + 1 >= end || p->text[*at] != '\\' || p->text[*at + 1] != 'u')
        return fail_at(p, start, "lone high surrogate \\u%04X", (unsigned)*cp);
    *at += 2;
    if (read_hex4(p, at, end, &low) < 0)
        return -1;
    if (low < 0xDC00 || low > 0xDFFF)
        return fail_at(p, start, "high surrogate \\u%04X not followed by a low surrogate",
                       (unsigned)*cp);
    *cp = 0x10000 + ((*cp - 0xD800) << 10) + (low - 0xDC00);
    return 0;
}

/* Decodes the escape at *at (a backslash) into out; returns the number of
 * bytes written, or -1. */
static int decode_escape(parser *p, size_t *at, size_t end, char *out)
{
    static const char simple_from[] = "\"\\/bfnrt";
    static const char simple_to[] = "\"\\/\b\f\n\r\t";
    uint8_t c = *at + 1 < end ? p->text[*at + 1] : 0;
    const char *hit = c ? strchr(simple_from, c) : NULL;
    if (hit) {
        *out = simple_to[hit - simple_from];
        *at += 2;
        return 1;
    }
    if (c == 'u') {
        uint32_t cp = 0;
        if (read_unicode_escape(p, at, end, &cp) < 0)
            return -1;
        return (int)utf8_encode(cp, out);
    }
    return fail_at(p, *at, "invalid escape sequence in a string");
}

/* Position of the closing quote of the string whose opening quote is at
 * p->pos, or len when there is none. */
static size_t find_string_end(const parser *p)
{
    size_t at = p->pos + 1;
    while (at < p->len && p->text[at] != '"')
        at += p->text[at] == '\\' ? 2 : 1;
    return at < p->len ? at : p->len;
}

/* Decodes text[from, end) into out, which has room for end - from bytes:
 * escapes and raw UTF-8 never decode to more bytes than they occupy. */
static int decode_string_body(parser *p, size_t from, size_t end, tf_json_string *out)
{
    size_t at = from;
    while (at < end) {
        uint8_t c = p->text[at];
        if (c == '\\') {
            int n = decode_escape(p, &at, end, out->bytes + out->len);
            if (n < 0)
                return -1;
            out->len += (size_t)n;
            continue;
        }
        if (c < 0x20)
            return fail_at(p, at, "unescaped control character 0x%02x in a string", c);
        size_t n = utf8_sequence_len(p->text + at, end - at);
        if (n == 0)
            return fail_at(p, at, "invalid UTF-8 in a string");
        memcpy(out->bytes + out->len, p->text + at, n);
        out->len += n;
        at += n;
    }
    return 0;
}

/* Parses the string whose opening quote is at p->pos. */
static int parse_string(parser *p, tf_json_string *out)
{
    size_t end = find_string_end(p);
    *out = (tf_json_string){ 0 };
    if (end == p->len)
        return fail_at(p, p->pos, "unterminated string");
    out->bytes = malloc(end - p->pos);
    if (!out->bytes)
        return tf_fail(p->e, ENOMEM, "out of memory for a JSON string");
    if (decode_string_body(p, p->pos + 1, end, out) < 0) {
        free(out->bytes);
        *out = (tf_json_string){ 0 };
        return -1;
    }
    out->bytes[out->len] = '\0';
    p->pos = end + 1;
    return 0;
}

/* ---- numbers and literals ---- */

static size_t skip_digits(parser *p)
{
    size_t start = p->pos;
    while (is_digit_at(p, p->pos))
        p->pos++;
    return p->pos - start;
}

/* The integer part: "0" or a non-zero digit followed by digits. Sets
 * *overflow when the value does not fit in 64 bits. */
static int parse_integer_part(parser *p, uint64_t *value, bool *overflow)
{
    *value = 0;
    *overflow = false;
    if (!is_digit_at(p, p->pos))
        return fail_expected(p, "a digit");
    if (accept(p, '0')) {
        if (is_digit_at(p, p->pos))
            return fail_at(p, p->pos - 1, "numbers must not have leading zeros");
        return 0;
    }
    while (is_digit_at(p, p->pos)) {
        unsigned digit = (unsigned)(p->text[p->pos++] - '0');
        if (*value > (UINT64_MAX - digit) / 10)
            *overflow = true;
        else
            *value = *value * 10 + digit;
    }
    return 0;
}

/* Parses the optional fraction and exponent; *present says if either was. */
static int parse_fraction_and_exponent(parser *p, bool *present)
{
    *present = false;
    if (accept(p, '.')) {
        *present = true;
        if (skip_digits(p) == 0)
            return fail_expected(p, "a digit after '.'");
    }
    if (accept(p, 'e') || accept(p, 'E')) {
        *present = true;
        if (!accept(p, '+'))
            accept(p, '-');
        if (skip_digits(p) == 0)
            return fail_expected(p, "a digit in the exponent");
    }
    return 0;
}

static int parse_number(parser *p, tf_json_value *v)
{
    bool negative = accept(p, '-'), overflow, fraction;
    uint64_t value;
    if (parse_integer_part(p, &value, &overflow) < 0 ||
        parse_fraction_and_exponent(p, &fraction) < 0)
        return -1;
    v->type = TF_JSON_NUMBER;
    if (negative || fraction)
        v->u.number.kind = TF_JSON_NUM_NOT_U64;
    else if (overflow)
        v->u.number.kind = TF_JSON_NUM_OVERFLOW;
    else
        v->u.number.kind = TF_JSON_NUM_U64;
    v->u.number.u64 = v->u.number.kind == TF_JSON_NUM_U64 ? value : 0;
    return 0;
}

static int parse_literal(parser *p, const char *word, tf_json_value *v)
{
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->text + p->pos, word, n) != 0)
        return fail_at(p, p->pos, "invalid literal (expected '%s')", word);
    p->pos += n;
    v->type = word[0] == 'n' ? TF_JSON_NULL : TF_JSON_BOOL;
    v->u.boolean = word[0] == 't';
    return 0;
}

/* ---- containers ---- */

static int parse_value(parser *p, tf_json_value *v);

static int enter_container(parser *p)
{
    if (p->depth == TF_JSON_MAX_DEPTH)
        return fail_at(p, p->pos, "arrays and objects nested deeper than %d levels",
                       TF_JSON_MAX_DEPTH);
    p->depth++;
    p->pos++; /* the '[' or '{' */
    skip_whitespace(p);
    return 0;
}

/* Makes room for one more element in *items (count == *cap elements of
 * elem_size bytes). Every further element needs at least two more input
 * bytes (a separator and a value), so the capacity never exceeds what the
 * rest of the input could fill: hostile input cannot make us over-allocate. */
static int grow(parser *p, void **items, size_t *cap, size_t elem_size)
{
    size_t most = *cap + (p->len - p->pos) / 2 + 1;
    size_t want = *cap ? *cap : 2;
    want = want <= most / 2 ? want * 2 : most;
    if (want > SIZE_MAX / elem_size)
        return tf_fail(p->e, ENOMEM, "out of memory for a JSON container");
    void *bigger = realloc(*items, want * elem_size);
    if (!bigger)
        return tf_fail(p->e, ENOMEM, "out of memory for a JSON container");
    *items = bigger;
    *cap = want;
    return 0;
}

/* After an element: returns 1 at the closing bracket, 0 after a comma. */
static int next_element(parser *p, uint8_t close, const char *what)
{
    skip_whitespace(p);
    if (accept(p, close))
        return 1;
    if (accept(p, ','))
        return 0;
    return fail_expected(p, what);
}

/* One "key": value pair; on failure m needs no freeing. */
static int parse_member(parser *p, tf_json_member *m)
{
    skip_whitespace(p);
    m->key_offset = p->pos;
    if (p->pos >= p->len || p->text[p->pos] != '"')
        return fail_expected(p, "a string key");
    if (parse_string(p, &m->key) < 0)
        return -1;
    skip_whitespace(p);
    if (!accept(p, ':')) {
        free(m->key.bytes);
        return fail_expected(p, "':' after an object key");
    }
    if (parse_value(p, &m->value) < 0) {
        free(m->key.bytes);
        return -1;
    }
    return 0;
}

/* Parses an element of a container into `item`: a value of an array, a
 * member of an object. On failure the item needs no freeing. */
typedef int (*parse_item_fn)(parser *p, void *item);

static int parse_array_item(parser *p, void *item)
{
    return parse_value(p, item);
}

static int parse_object_item(parser *p, void *item)
{
    return parse_member(p, item);
}

/* The elements of an array or an object, up to `close`, appended to
 * *items (*count of them, item_size bytes each), where v frees them
 * whatever happens; on failure v is freed. */
static int parse_container(parser *p, tf_json_value *v, uint8_t close, const char *what,
                           void **items, size_t *count, size_t item_size,
                           parse_item_fn parse_item)
{
    size_t cap = 0;
    int done;
    if (enter_container(p) < 0)
        return -1;
    done = accept(p, close);
    while (!done) {
        if (*count == cap && grow(p, items, &cap, item_size) < 0)
            goto fail;
        if (parse_item(p, (char *)*items + *count * item_size) < 0)
            goto fail;
        (*count)++;
        if ((done = next_element(p, close, what)) < 0)
            goto fail;
    }
    p->depth--;
    return 0;
fail:
    tf_json_free(v);
    return -1;
}

static int parse_array(parser *p, tf_json_value *v)
{
    v->type = TF_JSON_ARRAY;
    return parse_container(p, v, ']', "',' or ']' in an array", (void **)&v->u.array.items,
                           &v->u.array.count, sizeof *v->u.array.items, parse_array_item);
}

static int parse_object(parser *p, tf_json_value *v)
{
    v->type = TF_JSON_OBJECT;
    return parse_container(p, v, '}', "',' or '}' in an object",
                           (void **)&v->u.object.members, &v->u.object.count,
                           sizeof *v->u.object.members, parse_object_item);
}

/* On failure *v needs no freeing. */
static int parse_value(parser *p, tf_json_value *v)
{
    skip_whitespace(p);
    *v = (tf_json_value){ .type = TF_JSON_NULL, .offset = p->pos };
    uint8_t c = p->pos < p->len ? p->text[p->pos] : 0;
    switch (c) {
    case '{':
        return parse_object(p, v);
    case '[':
        return parse_array(p, v);
    case '"':
        if (parse_string(p, &v->u.string) < 0)
            return -1;
        v->type = TF_JSON_STRING;
        return 0;
    case 't':
        return parse_literal(p, "true", v);
    case 'f':
        return parse_literal(p, "false", v);
    case 'n':
        return parse_literal(p, "null", v);
    default:
        if (c == '-' || (c >= '0' && c <= '9'))
            return parse_number(p, v);
        return fail_expected(p, "a value");
    }
}

int tf_json_parse(const uint8_t *text, size_t len, tf_json_value *root, tf_error *e)
{
    parser p = { .text = text, .len = len, .e = e };
    if (parse_value(&p, root) < 0)
        return -1;
    skip_whitespace(&p);
    if (p.pos != len) {
        tf_json_free(root);
        return fail_at(&p, p.pos, "unexpected data after the top-level value");
    }
    return 0;
}

void tf_json_free(tf_json_value *v)
{
    if (v->type == TF_JSON_STRING) {
        free(v->u.string.bytes);
    } else if (v->type == TF_JSON_ARRAY) {
        for (size_t i = 0; i < v->u.array.count; i++)
            tf_json_free(&v->u.array.items[i]);
        free(v->u.array.items);
    } else if (v->type == TF_JSON_OBJECT) {
        for (size_t i = 0; i < v->u.object.count; i++) {
            free(v->u.object.members[i].key.bytes);
            tf_json_free(&v->u.object.members[i].value);
        }
        free(v->u.object.members);
    }
    *v = (tf_json_value){ .type = TF_JSON_NULL };
}

/* ---- lookups ---- */

static bool key_equals(const tf_json_string *key, const char *s, size_t len)
{
    return key->len == len && memcmp(key->bytes, s, len) == 0;
}

const tf_json_value *tf_json_get(const tf_json_value *obj, const char *key)
{
    if (obj->type != TF_JSON_OBJECT)
        return NULL;
    size_t len = strlen(key);
    for (size_t i = 0; i < obj->u.object.count; i++)
        if (key_equals(&obj->u.object.members[i].key, key, len))
            return &obj->u.object.members[i].value;
    return NULL;
}

static int compare_keys(const tf_json_string *a, const tf_json_string *b)
{
    int c = memcmp(a->bytes, b->bytes, a->len < b->len ? a->len : b->len);
    if (c != 0)
        return c;
    return (a->len > b->len) - (a->len < b->len);
}

/* Orders members by key, then by position: the members live in one array,
 * so their addresses are their document order. */
static int compare_members(const void *pa, const void *pb)
{
    const tf_json_member *a = *(const tf_json_member *const *)pa;
    const tf_json_member *b = *(const tf_json_member *const *)pb;
    int c = compare_keys(&a->key, &b->key);
    return c != 0 ? c : (a > b) - (a < b);
}

int tf_json_find_duplicate(const tf_json_value *obj, const tf_json_member **dup, tf_error *e)
{
    *dup = NULL;
    if (obj->type != TF_JSON_OBJECT || obj->u.object.count < 2)
        return 0;
    size_t n = obj->u.object.count;
    const tf_json_member **sorted = malloc(n * sizeof *sorted);
    if (!sorted)
        return tf_fail(e, ENOMEM, "out of memory checking for duplicate JSON keys");
    for (size_t i = 0; i < n; i++)
        sorted[i] = &obj->u.object.members[i];
    qsort(sorted, n, sizeof *sorted, compare_members);
    /* In a run of equal keys the second entry is that key's first repeat;
     * the earliest of those in the document is the one to report. */
    for (size_t i = 1; i < n; i++)
        if (compare_keys(&sorted[i - 1]->key, &sorted[i]->key) == 0 &&
            (i < 2 || compare_keys(&sorted[i - 2]->key, &sorted[i]->key) != 0) &&
            (!*dup || sorted[i] < *dup))
            *dup = sorted[i];
    free(sorted);
    return 0;
}
