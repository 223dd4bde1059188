/* Entries of release 1: a safetensors file stored as its verbatim JSON
 * header and tensor spans (kind TF_ENTRY_SAFETENSORS). They are read as
 * tensor-file entries whose verbatim bytes, the 8-byte length and the
 * header, are held inline; a commit that moves one writes it in the
 * current form, still inline. */
#include "format/catalog_v1.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/dtype.h"
#include "format/safetensors.h"
#include "format/tensor_format.h"

static int truncated(tf_cursor *r, tf_error *e)
{
    return tf_fail(e, EIO, "catalog: segment truncated at byte %zu", r->pos);
}

/* The tensors' names, from the header when it parses and has as many
 * tensors as the entry; otherwise empty names. Whether the header
 * describes the stored tensors (dtypes, sizes) is `trajpack verify`'s
 * check. */
static int names_from_header(tf_entry *ent, const uint8_t *json, uint64_t json_len)
{
    tf_st_header h;
    bool ok = tf_st_parse(json, (size_t)json_len, ent->size, ent->path, &h, NULL) == 0 &&
              h.ntensors == ent->ntensors;
    tf_buf names = { 0 };
    int rc = 0;
    for (uint64_t t = 0; rc == 0 && t < ent->ntensors; t++) {
        const char *name = ok && strlen(h.tensors[t].name) <= TF_TENSOR_NAME_MAX ? h.tensors[t].name : "";
        ent->tensors[t].name_off = names.len;
        rc = tf_buf_put(&names, name, strlen(name) + 1);
    }
    tf_st_free(&h);
    ent->names = (char *)names.data;
    ent->names_len = names.len;
    return rc;
}

int tf_catalog_read_v1_safetensors(tf_cursor *r, unsigned chunk_shift, tf_entry *ent, tf_error *e)
{
    ent->kind = TF_ENTRY_TENSORS;
    ent->format = TF_FORMAT_SAFETENSORS;
    ent->size = tf_read_varint(r);
    uint64_t json_len = tf_read_varint(r);
    if (r->bad)
        return truncated(r, e);
    if (json_len > tf_cursor_left(r))
        return truncated(r, e);
    const uint8_t *json = tf_read_bytes(r, (size_t)json_len);
    uint64_t n = tf_read_varint(r);
    if (r->bad)
        return truncated(r, e);
    if (n > tf_cursor_left(r) / 2)
        return tf_fail(e, EIO, "catalog: %llu tensors cannot fit in %zu bytes",
                       (unsigned long long)n, tf_cursor_left(r));
    ent->verbatim_len = 8 + json_len;
    ent->verbatim = malloc((size_t)ent->verbatim_len);
    ent->npieces = n + 1;
    ent->pieces = calloc((size_t)ent->npieces, sizeof *ent->pieces);
    ent->ntensors = n;
    ent->tensors = calloc(n ? (size_t)n : 1, sizeof *ent->tensors);
    if (!ent->verbatim || !ent->pieces || !ent->tensors)
        return tf_fail(e, ENOMEM, "catalog: out of memory");
    tf_le64_put(ent->verbatim, json_len);
    memcpy(ent->verbatim + 8, json, (size_t)json_len);
    ent->pieces[0] = (tf_piece){ .len = ent->verbatim_len, .tensor = TF_PIECE_VERBATIM };
    for (uint64_t t = 0; t < n; t++) {
        ent->tensors[t].dtype = tf_read_u8(r);
        ent->tensors[t].nbytes = tf_read_varint(r);
        ent->pieces[t + 1] = (tf_piece){ .len = ent->tensors[t].nbytes, .tensor = t };
    }
    if (r->bad)
        return truncated(r, e);
    if (names_from_header(ent, json, json_len) < 0)
        return tf_fail(e, ENOMEM, "catalog: out of memory");
    if (tf_entry_layout(ent, chunk_shift, &ent->nchunks, e) < 0) {
        tf_error_prefix(e, "catalog");
        return -1;
    }
    return 0;
}
