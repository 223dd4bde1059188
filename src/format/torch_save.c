/* torch.save files (PyTorch >= 1.6) as tensor files: a zip archive whose
 * ARCHIVE/data.pkl names the storages and ARCHIVE/data/KEY holds each
 * storage's bytes, stored uncompressed. Each storage is a tensor piece
 * (its dtype from the pickle, its identity the path to its first tensor
 * in the saved object); every other byte (zip headers, the pickle, small
 * records, the central directory) is verbatim. A file that is not this,
 * or not what it claims, is no torch.save file: EINVAL, and the writer
 * stores it as opaque bytes. */
#include "format/torch_save.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dtype.h"
#include "format/pickle.h"
#include "format/zip.h"

#define PICKLE_NAME "/data.pkl"

/* A storage's bytes in the file. */
typedef struct {
    uint64_t off, len;
    size_t storage; /* index in the pickle's storages */
} span;

static int by_offset(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* The pickle entry: the one entry named ARCHIVE/data.pkl with ARCHIVE a
 * single component; *prefix_len is the length of "ARCHIVE/". */
static const tf_zip_entry *find_pickle(const tf_file_source *src, const tf_zip *z,
                                       size_t *prefix_len, tf_error *e)
{
    const tf_zip_entry *found = NULL;
    size_t tail = strlen(PICKLE_NAME);
    for (size_t i = 0; i < z->n; i++) {
        const char *name = z->v[i].name;
        size_t n = strlen(name);
        if (n <= tail || strcmp(name + n - tail, PICKLE_NAME) != 0 ||
            memchr(name, '/', n - tail) != NULL)
            continue;
        if (found) {
            tf_fail(e, EINVAL, "%s: two pickles in one torch.save archive", src->name);
            return NULL;
        }
        found = &z->v[i];
        *prefix_len = n - tail + 1;
    }
    if (!found)
        tf_fail(e, EINVAL, "%s: a zip archive without ARCHIVE/data.pkl", src->name);
    else if (found->method != 0 || found->size != found->raw_size)
        tf_fail(e, EINVAL, "%s: its pickle is compressed", src->name);
    else
        return found;
    return NULL;
}

static int read_pickle(const tf_file_source *src, const tf_zip_entry *pk, tf_pickle_storages *out,
                       tf_error *e)
{
    uint8_t *p = malloc(pk->size ? (size_t)pk->size : 1);
    if (!p) /* like a pickle that takes more memory than there is */
        return tf_fail(e, EINVAL, "%s: out of memory to read its pickle", src->name);
    int rc = src->read(src->arg, pk->data_off, p, (size_t)pk->size, e);
    if (rc == 0 && tf_pickle_torch_storages(p, (size_t)pk->size, out, e) < 0) {
        tf_error_prefix(e, "%s", src->name);
        rc = -1;
    }
    free(p);
    return rc;
}

/* Where each storage's bytes are: its entry ARCHIVE/data/KEY, stored, of
 * exactly numel elements. */
static int locate(const tf_file_source *src, const tf_zip *z, const char *prefix, size_t prefix_len,
                  const tf_pickle_storages *st, span *spans, tf_error *e)
{
    for (size_t i = 0; i < st->n; i++) {
        const tf_pickle_storage *s = &st->v[i];
        size_t n = prefix_len + strlen("data/") + strlen(s->key) + 1;
        char *name = malloc(n);
        if (!name)
            return tf_fail(e, ENOMEM, "out of memory");
        memcpy(name, prefix, prefix_len);
        snprintf(name + prefix_len, n - prefix_len, "data/%s", s->key);
        const tf_zip_entry *ze = tf_zip_find(z, name);
        free(name);
        uint64_t elem = tf_dtype_get(s->dtype)->size;
        if (!ze)
            return tf_fail(e, EINVAL, "%s: storage %s has no entry", src->name, s->key);
        if (ze->method != 0 || ze->size != ze->raw_size)
            return tf_fail(e, EINVAL, "%s: storage %s is compressed", src->name, s->key);
        if (s->numel > UINT64_MAX / elem || ze->size != s->numel * elem)
            return tf_fail(e, EINVAL, "%s: storage %s holds %llu bytes, not %llu elements of %s",
                           src->name, s->key, (unsigned long long)ze->size,
                           (unsigned long long)s->numel, tf_dtype_get(s->dtype)->name);
        spans[i] = (span){ .off = ze->data_off, .len = ze->size, .storage = i };
    }
    return 0;
}

/* Pieces in file order: the storages, and the bytes between them. */
static int make_pieces(const tf_file_source *src, const tf_pickle_storages *st, span *spans,
                       tf_entry *ent, tf_error *e)
{
    qsort(spans, st->n, sizeof *spans, by_offset);
    ent->pieces = calloc(2 * st->n + 1, sizeof *ent->pieces);
    ent->tensors = calloc(st->n ? st->n : 1, sizeof *ent->tensors);
    if (!ent->pieces || !ent->tensors)
        return tf_fail(e, ENOMEM, "out of memory");
    tf_buf names = { 0 };
    uint64_t at = 0;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < st->n; i++) {
        const span *s = &spans[i];
        if (s->off < at) {
            rc = tf_fail(e, EINVAL, "%s: storages %s and %s overlap", src->name,
                         st->v[spans[i - 1].storage].key, st->v[s->storage].key);
            break;
        }
        if (s->off > at)
            ent->pieces[ent->npieces++] = (tf_piece){ .len = s->off - at, .tensor = TF_PIECE_VERBATIM };
        const tf_pickle_storage *ps = &st->v[s->storage];
        ent->pieces[ent->npieces++] = (tf_piece){ .len = s->len, .tensor = i };
        ent->tensors[i] = (tf_tensor_span){ .dtype = ps->dtype, .nbytes = s->len,
                                            .name_off = names.len };
        if (tf_buf_put(&names, ps->path, strlen(ps->path) + 1) < 0)
            rc = tf_fail(e, ENOMEM, "out of memory");
        at = s->off + s->len;
    }
    if (rc == 0 && at < src->size)
        ent->pieces[ent->npieces++] = (tf_piece){ .len = src->size - at, .tensor = TF_PIECE_VERBATIM };
    ent->ntensors = st->n;
    ent->names = (char *)names.data;
    ent->names_len = names.len;
    return rc;
}

/* torch.save before PyTorch 1.6 (and with _use_new_zipfile_serialization
 * off) writes pickles back to back, the first its magic number as a
 * protocol-2 LONG1: recognised, to be named, but not parsed. */
static const uint8_t legacy_magic[] = { 0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c,
                                        0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19 };

static bool is_legacy(const uint8_t *head, size_t head_len)
{
    return head_len >= sizeof legacy_magic && memcmp(head, legacy_magic, sizeof legacy_magic) == 0;
}

static bool recognise(const uint8_t *head, size_t head_len, uint64_t size)
{
    (void)size;
    return (head_len >= 4 && memcmp(head, "PK\x03\x04", 4) == 0) || is_legacy(head, head_len);
}

static int parse(const tf_file_source *src, tf_entry *ent, tf_error *e)
{
    uint8_t head[sizeof legacy_magic];
    if (src->size >= sizeof head && src->read(src->arg, 0, head, sizeof head, e) == 0 &&
        is_legacy(head, sizeof head))
        return tf_fail(e, EINVAL, "%s: torch.save's format before PyTorch 1.6 (no zip)",
                       src->name);
    tf_zip z;
    if (tf_zip_read(src, &z, e) < 0)
        return -1;
    size_t prefix_len = 0;
    tf_pickle_storages st = { 0 };
    span *spans = NULL;
    const tf_zip_entry *pk = find_pickle(src, &z, &prefix_len, e);
    int rc = pk ? read_pickle(src, pk, &st, e) : -1;
    if (rc == 0 && !(spans = calloc(st.n ? st.n : 1, sizeof *spans)))
        rc = tf_fail(e, ENOMEM, "out of memory");
    if (rc == 0)
        rc = locate(src, &z, pk->name, prefix_len, &st, spans, e);
    if (rc == 0)
        rc = make_pieces(src, &st, spans, ent, e);
    free(spans);
    tf_pickle_storages_free(&st);
    tf_zip_free(&z);
    return rc;
}

/* No name claims the format: a file named *.pt that is not a valid
 * torch.save file is stored as it is, never refused. */
const tf_tensor_format tf_torch_save_format = {
    .id = TF_FORMAT_TORCH_SAVE,
    .name = "torch.save",
    .suffix = NULL,
    .recognise = recognise,
    .parse = parse,
};
