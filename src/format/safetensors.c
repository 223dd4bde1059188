#include "format/safetensors.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/full_io.h"
#include "format/json.h"
#include "format/tensor_format.h"

#define METADATA_KEY "__metadata__"
#define QUOTED_MAX 96     /* a name quoted for a message, NUL included */
#define SHAPE_TEXT_MAX 96 /* "[2, 3, 4]" for a message, NUL included */

/* Where an error happened: the file, and the tensor or section within it
 * (empty for the header as a whole). */
typedef struct {
    const char *fname;
    char subject[QUOTED_MAX + 16];
    tf_error *e;
} context;

static int fail(const context *c, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(const context *c, int errnum, const char *fmt, ...)
{
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (c->subject[0])
        return tf_fail(c->e, errnum, "%s: %s: %s", c->fname, c->subject, what);
    return tf_fail(c->e, errnum, "%s: %s", c->fname, what);
}

static size_t utf8_lead_len(uint8_t c)
{
    return c < 0xC0 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
}

/* Writes s as "s" for a message: control bytes become \xNN (a name may hold
 * a newline) and a long name is cut at a character boundary, ending in "...". */
static const char *quote(const char *s, size_t len, char out[QUOTED_MAX])
{
    const size_t room = QUOTED_MAX - sizeof "...\"";
    size_t o = 0, i = 0;
    out[o++] = '"';
    while (i < len) {
        uint8_t c = (uint8_t)s[i];
        bool control = c < 0x20 || c == 0x7f;
        size_t in = control ? 1 : utf8_lead_len(c);
        in = in < len - i ? in : len - i;
        size_t shown = control ? 4 : in;
        if (o + shown > room) {
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        if (control)
            snprintf(out + o, 5, "\\x%02x", c);
        else
            memcpy(out + o, s + i, in);
        o += shown;
        i += in;
    }
    out[o++] = '"';
    out[o] = '\0';
    return out;
}

static void set_subject(context *c, const char *kind, const char *name, size_t len)
{
    char quoted[QUOTED_MAX];
    snprintf(c->subject, sizeof c->subject, "%s %s", kind, quote(name, len, quoted));
}

static const char *json_type_name(tf_json_type t)
{
    static const char *const names[] = {
        [TF_JSON_NULL] = "null",        [TF_JSON_BOOL] = "a boolean",
        [TF_JSON_NUMBER] = "a number",  [TF_JSON_STRING] = "a string",
        [TF_JSON_ARRAY] = "an array",   [TF_JSON_OBJECT] = "an object",
    };
    return names[t];
}

static bool string_is(const tf_json_string *s, const char *lit)
{
    return s->len == strlen(lit) && memcmp(s->bytes, lit, s->len) == 0;
}

static char *copy_string(const tf_json_string *s)
{
    char *copy = malloc(s->len + 1);
    if (copy)
        memcpy(copy, s->bytes, s->len + 1);
    return copy;
}

static int out_of_memory(const context *c)
{
    return fail(c, ENOMEM, "out of memory");
}

/* ---- one tensor entry ---- */

static void format_shape(const uint64_t *shape, uint32_t ndim, char out[SHAPE_TEXT_MAX])
{
    size_t o = 0;
    out[o++] = '[';
    for (uint32_t i = 0; i < ndim; i++) {
        char dim[32];
        int n = snprintf(dim, sizeof dim, "%s%" PRIu64, i ? ", " : "", shape[i]);
        if (o + (size_t)n + sizeof ", ...]" > SHAPE_TEXT_MAX) {
            memcpy(out + o, ", ...", 5);
            o += 5;
            break;
        }
        memcpy(out + o, dim, (size_t)n);
        o += (size_t)n;
    }
    out[o++] = ']';
    out[o] = '\0';
}

/* what names the value in messages, e.g. "shape[2]". */
static int read_u64(const context *c, const tf_json_value *v, const char *what, uint64_t *out)
{
    if (v->type == TF_JSON_NUMBER && v->u.number.kind == TF_JSON_NUM_OVERFLOW)
        return fail(c, EINVAL, "%s is larger than 2^64-1", what);
    if (v->type != TF_JSON_NUMBER || v->u.number.kind != TF_JSON_NUM_U64)
        return fail(c, EINVAL, "%s is not a non-negative integer", what);
    *out = v->u.number.u64;
    return 0;
}

/* Only dtype, shape and data_offsets, each once. */
static int check_entry_keys(const context *c, const tf_json_value *entry)
{
    static const char *const required[] = { "dtype", "shape", "data_offsets" };
    char quoted[QUOTED_MAX];
    const tf_json_member *dup;
    for (size_t i = 0; i < entry->u.object.count; i++) {
        const tf_json_string *key = &entry->u.object.members[i].key;
        if (!string_is(key, "dtype") && !string_is(key, "shape") &&
            !string_is(key, "data_offsets"))
            return fail(c, EINVAL, "unexpected key %s (allowed: dtype, shape, data_offsets)",
                        quote(key->bytes, key->len, quoted));
    }
    if (tf_json_find_duplicate(entry, &dup, c->e) < 0)
        return -1;
    if (dup)
        return fail(c, EINVAL, "duplicate key %s", quote(dup->key.bytes, dup->key.len, quoted));
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        if (!tf_json_get(entry, required[i]))
            return fail(c, EINVAL, "missing \"%s\"", required[i]);
    return 0;
}

static int parse_dtype(const context *c, const tf_json_value *v, tf_st_tensor *t)
{
    char quoted[QUOTED_MAX], known[256] = "";
    if (v->type != TF_JSON_STRING)
        return fail(c, EINVAL, "dtype is not a string (it is %s)", json_type_name(v->type));
    t->dtype = tf_dtype_from_name(v->u.string.bytes, v->u.string.len);
    if (t->dtype != TF_DT_NONE)
        return 0;
    for (unsigned dt = TF_DT_BOOL; dt < TF_DT_COUNT; dt++) {
        strcat(known, dt == TF_DT_BOOL ? "" : ", ");
        strcat(known, tf_dtype_get(dt)->name);
    }
    return fail(c, EINVAL, "unknown dtype %s (known: %s)",
                quote(v->u.string.bytes, v->u.string.len, quoted), known);
}

static int parse_shape(const context *c, const tf_json_value *v, tf_st_tensor *t)
{
    if (v->type != TF_JSON_ARRAY)
        return fail(c, EINVAL, "shape is not an array (it is %s)", json_type_name(v->type));
    if (v->u.array.count > UINT32_MAX)
        return fail(c, EINVAL, "shape has more than 2^32-1 dimensions");
    t->ndim = (uint32_t)v->u.array.count;
    if (t->ndim == 0)
        return 0;
    t->shape = malloc(t->ndim * sizeof *t->shape);
    if (!t->shape)
        return out_of_memory(c);
    for (uint32_t i = 0; i < t->ndim; i++) {
        char what[32];
        snprintf(what, sizeof what, "shape[%" PRIu32 "]", i);
        if (read_u64(c, &v->u.array.items[i], what, &t->shape[i]) < 0)
            return -1;
    }
    return 0;
}

/* Sets nelem and *nbytes. Strict beyond the arithmetic: the product of the
 * non-zero dimensions (times the element size) must fit in 64 bits even
 * when another dimension is 0, so that any stride computed from the shape
 * later fits too. */
static int count_elements(const context *c, tf_st_tensor *t, uint64_t *nbytes)
{
    char shape[SHAPE_TEXT_MAX];
    uint64_t product = 1, size = tf_dtype_get(t->dtype)->size;
    bool any_zero = false;
    for (uint32_t i = 0; i < t->ndim; i++) {
        uint64_t d = t->shape[i];
        any_zero |= d == 0;
        if (d != 0 && product > UINT64_MAX / d) {
            format_shape(t->shape, t->ndim, shape);
            return fail(c, EINVAL, "element count of shape %s overflows 64 bits", shape);
        }
        product *= d ? d : 1;
    }
    if (product > UINT64_MAX / size) {
        format_shape(t->shape, t->ndim, shape);
        return fail(c, EINVAL, "byte size of dtype %s x shape %s overflows 64 bits",
                    tf_dtype_get(t->dtype)->name, shape);
    }
    t->nelem = any_zero ? 0 : product;
    *nbytes = t->nelem * size;
    return 0;
}

static int parse_data_offsets(const context *c, const tf_json_value *v, tf_st_tensor *t)
{
    if (v->type != TF_JSON_ARRAY || v->u.array.count != 2)
        return fail(c, EINVAL, "data_offsets is not an array of 2 integers");
    if (read_u64(c, &v->u.array.items[0], "data_offsets[0]", &t->begin) < 0 ||
        read_u64(c, &v->u.array.items[1], "data_offsets[1]", &t->end) < 0)
        return -1;
    if (t->begin > t->end)
        return fail(c, EINVAL, "data_offsets [%" PRIu64 ", %" PRIu64 "]: begin is after end",
                    t->begin, t->end);
    return 0;
}

static int check_size_matches(const context *c, const tf_st_tensor *t, uint64_t nbytes)
{
    char shape[SHAPE_TEXT_MAX];
    if (t->end - t->begin == nbytes)
        return 0;
    format_shape(t->shape, t->ndim, shape);
    return fail(c, EINVAL,
                "data_offsets [%" PRIu64 ", %" PRIu64 "] do not match dtype %s x shape %s (%" PRIu64
                " bytes)",
                t->begin, t->end, tf_dtype_get(t->dtype)->name, shape, nbytes);
}

static int parse_entry(const context *c, const tf_json_value *entry, tf_st_tensor *t)
{
    uint64_t nbytes = 0;
    if (entry->type != TF_JSON_OBJECT)
        return fail(c, EINVAL, "entry is not a JSON object (it is %s)",
                    json_type_name(entry->type));
    if (check_entry_keys(c, entry) < 0 || parse_dtype(c, tf_json_get(entry, "dtype"), t) < 0 ||
        parse_shape(c, tf_json_get(entry, "shape"), t) < 0 ||
        count_elements(c, t, &nbytes) < 0 ||
        parse_data_offsets(c, tf_json_get(entry, "data_offsets"), t) < 0)
        return -1;
    return check_size_matches(c, t, nbytes);
}

/* Fills *t from one member of the header; on failure *t holds nothing. */
static int parse_tensor(context *c, const tf_json_member *m, tf_st_tensor *t)
{
    *t = (tf_st_tensor){ 0 };
    set_subject(c, "tensor", m->key.bytes, m->key.len);
    if (memchr(m->key.bytes, '\0', m->key.len))
        return fail(c, EINVAL, "name contains a NUL character");
    if (parse_entry(c, &m->value, t) < 0)
        goto fail;
    t->name = copy_string(&m->key);
    if (!t->name) {
        out_of_memory(c);
        goto fail;
    }
    return 0;
fail:
    free(t->shape);
    *t = (tf_st_tensor){ 0 };
    return -1;
}

/* ---- __metadata__ ---- */

static int check_metadata_string(const context *c, const tf_json_member *m)
{
    char quoted[QUOTED_MAX];
    quote(m->key.bytes, m->key.len, quoted);
    if (m->value.type != TF_JSON_STRING)
        return fail(c, EINVAL, "key %s: value is not a string (it is %s)", quoted,
                    json_type_name(m->value.type));
    if (memchr(m->key.bytes, '\0', m->key.len))
        return fail(c, EINVAL, "key %s contains a NUL character", quoted);
    if (memchr(m->value.u.string.bytes, '\0', m->value.u.string.len))
        return fail(c, EINVAL, "key %s: value contains a NUL character", quoted);
    return 0;
}

static int copy_metadata_entry(const context *c, const tf_json_member *m, tf_st_header *h)
{
    char *key = copy_string(&m->key), *value = copy_string(&m->value.u.string);
    if (!key || !value) {
        free(key);
        free(value);
        return out_of_memory(c);
    }
    h->meta_keys[h->nmeta] = key;
    h->meta_values[h->nmeta] = value;
    h->nmeta++;
    return 0;
}

static int parse_metadata(context *c, const tf_json_value *v, tf_st_header *h)
{
    char quoted[QUOTED_MAX];
    const tf_json_member *dup;
    snprintf(c->subject, sizeof c->subject, "%s", METADATA_KEY);
    if (v->type != TF_JSON_OBJECT)
        return fail(c, EINVAL, "not a JSON object (it is %s)", json_type_name(v->type));
    if (tf_json_find_duplicate(v, &dup, c->e) < 0)
        return -1;
    if (dup)
        return fail(c, EINVAL, "duplicate key %s", quote(dup->key.bytes, dup->key.len, quoted));
    size_t n = v->u.object.count;
    h->meta_keys = calloc(n ? n : 1, sizeof *h->meta_keys);
    h->meta_values = calloc(n ? n : 1, sizeof *h->meta_values);
    if (!h->meta_keys || !h->meta_values)
        return out_of_memory(c);
    for (size_t i = 0; i < n; i++)
        if (check_metadata_string(c, &v->u.object.members[i]) < 0 ||
            copy_metadata_entry(c, &v->u.object.members[i], h) < 0)
            return -1;
    return 0;
}

/* ---- the header as a whole ---- */

static int check_no_duplicate_names(const context *c, const tf_json_value *root)
{
    char quoted[QUOTED_MAX];
    const tf_json_member *dup;
    if (tf_json_find_duplicate(root, &dup, c->e) < 0)
        return -1;
    if (!dup)
        return 0;
    if (string_is(&dup->key, METADATA_KEY))
        return fail(c, EINVAL, "duplicate " METADATA_KEY);
    return fail(c, EINVAL, "duplicate tensor name %s", quote(dup->key.bytes, dup->key.len, quoted));
}

static int parse_members(context *c, const tf_json_value *root, tf_st_header *h)
{
    if (root->type != TF_JSON_OBJECT)
        return fail(c, EINVAL, "header is not a JSON object (it is %s)",
                    json_type_name(root->type));
    if (check_no_duplicate_names(c, root) < 0)
        return -1;
    h->tensors = calloc(root->u.object.count ? root->u.object.count : 1, sizeof *h->tensors);
    if (!h->tensors)
        return out_of_memory(c);
    for (size_t i = 0; i < root->u.object.count; i++) {
        const tf_json_member *m = &root->u.object.members[i];
        if (string_is(&m->key, METADATA_KEY)) {
            if (parse_metadata(c, &m->value, h) < 0)
                return -1;
        } else {
            if (parse_tensor(c, m, &h->tensors[h->ntensors]) < 0)
                return -1;
            h->ntensors++;
        }
    }
    c->subject[0] = '\0';
    return 0;
}

/* By (begin, end), then header order: the tensors sit in one array, so their
 * addresses are their header order. */
static int compare_by_offset(const void *pa, const void *pb)
{
    const tf_st_tensor *a = *(const tf_st_tensor *const *)pa;
    const tf_st_tensor *b = *(const tf_st_tensor *const *)pb;
    if (a->begin != b->begin)
        return a->begin < b->begin ? -1 : 1;
    if (a->end != b->end)
        return a->end < b->end ? -1 : 1;
    return (a > b) - (a < b);
}

static int sort_by_offset(const context *c, tf_st_header *h)
{
    size_t n = h->ntensors;
    const tf_st_tensor **order = malloc((n ? n : 1) * sizeof *order);
    tf_st_tensor *sorted = malloc((n ? n : 1) * sizeof *sorted);
    if (!order || !sorted) {
        free(order);
        free(sorted);
        return out_of_memory(c);
    }
    for (size_t i = 0; i < n; i++)
        order[i] = &h->tensors[i];
    qsort(order, n, sizeof *order, compare_by_offset);
    for (size_t i = 0; i < n; i++)
        sorted[i] = *order[i];
    free(order);
    free(h->tensors);
    h->tensors = sorted;
    return 0;
}

/* The tensors, in data order, must cover [0, data_len) exactly once. */
static int check_tiling(context *c, const tf_st_header *h)
{
    char quoted[QUOTED_MAX];
    uint64_t covered = 0;
    for (size_t i = 0; i < h->ntensors; i++) {
        const tf_st_tensor *t = &h->tensors[i], *prev = i ? &h->tensors[i - 1] : NULL;
        set_subject(c, "tensor", t->name, strlen(t->name));
        if (t->end > h->data_len)
            return fail(c, EINVAL,
                        "data_offsets [%" PRIu64 ", %" PRIu64 "] extend past the end of the "
                        "data section (%" PRIu64 " bytes; truncated file?)",
                        t->begin, t->end, h->data_len);
        if (t->begin < covered)
            return fail(c, EINVAL,
                        "data_offsets [%" PRIu64 ", %" PRIu64 "] overlap tensor %s [%" PRIu64
                        ", %" PRIu64 "]",
                        t->begin, t->end, quote(prev->name, strlen(prev->name), quoted),
                        prev->begin, prev->end);
        if (t->begin > covered && !prev)
            return fail(c, EINVAL,
                        "gap of %" PRIu64 " bytes at the start of the data section "
                        "(data_offsets [%" PRIu64 ", %" PRIu64 "])",
                        t->begin, t->begin, t->end);
        if (t->begin > covered)
            return fail(c, EINVAL,
                        "gap of %" PRIu64 " bytes after tensor %s, which ends at %" PRIu64
                        " (data_offsets [%" PRIu64 ", %" PRIu64 "])",
                        t->begin - covered, quote(prev->name, strlen(prev->name), quoted),
                        covered, t->begin, t->end);
        covered = t->end;
    }
    c->subject[0] = '\0';
    if (covered < h->data_len)
        return fail(c, EINVAL,
                    "%" PRIu64 " trailing bytes after the last tensor (the data section is %" PRIu64
                    " bytes, the tensors cover %" PRIu64 ")",
                    h->data_len - covered, h->data_len, covered);
    return 0;
}

static int check_file_size(const context *c, uint64_t file_size)
{
    if (file_size < 8)
        return fail(c, EINVAL, "file is shorter than 8 bytes (%" PRIu64 " bytes)", file_size);
    return 0;
}

static int check_header_fits(const context *c, uint64_t header_len, uint64_t file_size)
{
    if (check_file_size(c, file_size) < 0)
        return -1;
    if (header_len > file_size - 8)
        return fail(c, EINVAL,
                    "header length %" PRIu64 " exceeds the file size %" PRIu64
                    " minus 8 (truncated file?)",
                    header_len, file_size);
    return 0;
}

static int parse_json(const context *c, const uint8_t *json, size_t len, tf_json_value *root)
{
    tf_error json_error = { .msg = "" };
    if (tf_json_parse(json, len, root, &json_error) == 0)
        return 0;
    if (json_error.errnum == ENOMEM)
        return fail(c, ENOMEM, "%s", json_error.msg);
    return fail(c, EINVAL, "invalid JSON header: %s", json_error.msg);
}

int tf_st_parse(const uint8_t *json, size_t json_len, uint64_t file_size, const char *fname,
                tf_st_header *h, tf_error *e)
{
    context c = { .fname = fname, .subject = "", .e = e };
    tf_json_value root;
    *h = (tf_st_header){ 0 };
    if (check_header_fits(&c, json_len, file_size) < 0 || parse_json(&c, json, json_len, &root) < 0)
        return -1;
    h->header_len = json_len;
    h->data_len = file_size - 8 - json_len;
    int rc = parse_members(&c, &root, h);
    tf_json_free(&root);
    if (rc == 0)
        rc = sort_by_offset(&c, h);
    if (rc == 0)
        rc = check_tiling(&c, h);
    if (rc < 0)
        tf_st_free(h);
    return rc;
}

/* ---- reading from a file ---- */

int tf_st_read_source(const tf_file_source *src, uint8_t **json_out, tf_st_header *h, tf_error *e)
{
    context c = { .fname = src->name, .subject = "", .e = e };
    uint8_t prefix[8];
    *json_out = NULL;
    *h = (tf_st_header){ 0 };
    if (check_file_size(&c, src->size) < 0 || src->read(src->arg, 0, prefix, sizeof prefix, e) < 0)
        return -1;
    uint64_t header_len = tf_le64_get(prefix);
    if (header_len > TF_ST_MAX_HEADER)
        return fail(&c, EINVAL, "header length %" PRIu64 " exceeds the limit of %u bytes",
                    header_len, TF_ST_MAX_HEADER);
    if (check_header_fits(&c, header_len, src->size) < 0)
        return -1;
    uint8_t *json = malloc(header_len ? header_len : 1);
    if (!json)
        return out_of_memory(&c);
    if (src->read(src->arg, 8, json, header_len, e) < 0 ||
        tf_st_parse(json, header_len, src->size, src->name, h, e) < 0) {
        free(json);
        return -1;
    }
    *json_out = json;
    return 0;
}

typedef struct {
    int fd;
    const char *fname;
} fd_source;

static int read_fd(void *arg, uint64_t off, void *buf, size_t n, tf_error *e)
{
    const fd_source *f = arg;
    context c = { .fname = f->fname, .subject = "", .e = e };
    ssize_t got = tf_pread_full(f->fd, buf, n, off);
    if (got < 0)
        return fail(&c, errno, "read error: %s", strerror(errno));
    if ((size_t)got < n)
        return fail(&c, EIO, "unexpected end of file (did it shrink while being read?)");
    return 0;
}

int tf_st_read(int fd, uint64_t file_size, const char *fname, uint8_t **json_out,
               tf_st_header *h, tf_error *e)
{
    fd_source f = { .fd = fd, .fname = fname };
    tf_file_source src = { .name = fname, .size = file_size, .read = read_fd, .arg = &f };
    return tf_st_read_source(&src, json_out, h, e);
}

/* ---- the tensor-file format ---- */

static bool recognise(const uint8_t *head, size_t head_len, uint64_t size)
{
    if (head_len < 9 || size < 9)
        return false;
    uint64_t n = tf_le64_get(head);
    return n >= 2 && n <= TF_ST_MAX_HEADER && n <= size - 8 && head[8] == '{';
}

/* The header (with its length prefix) is one verbatim piece, each tensor
 * a piece, in data order; the parser checked that they tile the data. */
static int parse(const tf_file_source *src, tf_entry *ent, tf_error *e)
{
    uint8_t *json;
    tf_st_header h;
    if (tf_st_read_source(src, &json, &h, e) < 0)
        return -1;
    free(json);
    context c = { .fname = src->name, .subject = "", .e = e };
    tf_buf names = { 0 };
    ent->npieces = h.ntensors + 1;
    ent->ntensors = h.ntensors;
    ent->pieces = calloc(ent->npieces, sizeof *ent->pieces);
    ent->tensors = calloc(h.ntensors ? h.ntensors : 1, sizeof *ent->tensors);
    int rc = ent->pieces && ent->tensors ? 0 : out_of_memory(&c);
    if (rc == 0)
        ent->pieces[0] = (tf_piece){ .len = 8 + h.header_len, .tensor = TF_PIECE_VERBATIM };
    for (size_t t = 0; rc == 0 && t < h.ntensors; t++) {
        const tf_st_tensor *st = &h.tensors[t];
        if (strlen(st->name) > TF_TENSOR_NAME_MAX) {
            rc = fail(&c, EINVAL, "tensor name of %zu bytes is longer than %d", strlen(st->name),
                      TF_TENSOR_NAME_MAX);
            break;
        }
        ent->pieces[t + 1] = (tf_piece){ .len = st->end - st->begin, .tensor = t };
        ent->tensors[t] = (tf_tensor_span){ .dtype = (uint8_t)st->dtype, .nbytes = st->end - st->begin,
                                            .name_off = names.len };
        if (tf_buf_put(&names, st->name, strlen(st->name) + 1) < 0)
            rc = out_of_memory(&c);
    }
    ent->names = (char *)names.data;
    ent->names_len = names.len;
    tf_st_free(&h);
    return rc;
}

/* 8 bytes, the header, and the data its tensors tile (the header's
 * checks but the tiling's, which need the size). */
static int implied_size(const tf_file_source *src, uint64_t *size, tf_error *e)
{
    context c = { .fname = src->name, .subject = "", .e = e };
    uint8_t prefix[8];
    if (src->read(src->arg, 0, prefix, sizeof prefix, e) < 0)
        return -1;
    uint64_t n = tf_le64_get(prefix);
    if (n > TF_ST_MAX_HEADER)
        return fail(&c, EINVAL, "header length %" PRIu64 " exceeds the limit of %u bytes", n,
                    TF_ST_MAX_HEADER);
    uint8_t *json = malloc(n ? n : 1);
    if (!json)
        return out_of_memory(&c);
    tf_json_value root;
    tf_st_header h = { 0 };
    int rc = src->read(src->arg, 8, json, n, e);
    if (rc == 0 && (rc = parse_json(&c, json, n, &root)) == 0) {
        rc = parse_members(&c, &root, &h);
        tf_json_free(&root);
    }
    uint64_t end = 0;
    for (size_t i = 0; rc == 0 && i < h.ntensors; i++)
        end = h.tensors[i].end > end ? h.tensors[i].end : end;
    if (rc == 0 && end > UINT64_MAX - 8 - n)
        rc = fail(&c, EINVAL, "data_offsets end past 64 bits");
    *size = 8 + n + end;
    tf_st_free(&h);
    free(json);
    return rc;
}

const tf_tensor_format tf_safetensors_format = {
    .id = TF_FORMAT_SAFETENSORS,
    .name = "safetensors",
    .suffix = ".safetensors",
    .recognise = recognise,
    .parse = parse,
    .implied_size = implied_size,
};

void tf_st_free(tf_st_header *h)
{
    for (size_t i = 0; i < h->ntensors; i++) {
        free(h->tensors[i].name);
        free(h->tensors[i].shape);
    }
    free(h->tensors);
    for (size_t i = 0; i < h->nmeta; i++) {
        free(h->meta_keys[i]);
        free(h->meta_values[i]);
    }
    free(h->meta_keys);
    free(h->meta_values);
    *h = (tf_st_header){ 0 };
}

const tf_st_tensor *tf_st_find(const tf_st_header *h, const char *name)
{
    for (size_t i = 0; i < h->ntensors; i++)
        if (strcmp(h->tensors[i].name, name) == 0)
            return &h->tensors[i];
    return NULL;
}
