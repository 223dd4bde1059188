#include "format/catalog.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "format/catalog_v1.h"
#include "common/dtype.h"

/* Version 1: blobs and entries. Version 2 adds the redirect list after
 * the entries; it is written only by commits with redirects, so that
 * archives without them stay readable by earlier releases (which refuse
 * version 2 by its number). Version 3 has the layout of version 2, and
 * its redirects may name slots that earlier commits redirected (a
 * rebase, store/rebase.h); releases before it refuse it by its number. */
#define SEGMENT_VERSION 1
#define SEGMENT_VERSION_REDIRECTS 2
#define SEGMENT_VERSION_REDIRECTS_AGAIN 3
/* Smallest serialized sizes, used to bound counts by the bytes present. */
#define MIN_BLOB_BYTES 31
#define MIN_ENTRY_BYTES 6
#define MIN_REDIRECT_BYTES 2

uint64_t tf_chunk_count(uint64_t nbytes, unsigned elem_size, unsigned chunk_shift)
{
    uint64_t chunk_bytes = (uint64_t)elem_size << chunk_shift;
    return nbytes / chunk_bytes + (nbytes % chunk_bytes != 0);
}

int tf_path_check(const char *path, size_t len, tf_error *e)
{
    if (len == 0)
        return tf_fail(e, EINVAL, "empty path");
    if (len > TF_PATH_MAX)
        return tf_fail(e, ENAMETOOLONG, "path of %zu bytes is longer than %d", len, TF_PATH_MAX);
    /* First, so that no message below echoes a control character (an
     * escape sequence from a hostile archive) to a terminal. */
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)path[i];
        if (c < 0x20 || c == 0x7f)
            return tf_fail(e, EINVAL, "path contains control character 0x%02x", c);
    }
    if (path[0] == '/')
        return tf_fail(e, EINVAL, "absolute path \"%.*s\"", (int)len, path);
    size_t start = 0;
    unsigned depth = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && path[i] != '/')
            continue;
        size_t n = i - start;
        if (n == 0)
            return tf_fail(e, EINVAL, "path \"%.*s\" has an empty component", (int)len, path);
        if ((n == 1 && path[start] == '.') || (n == 2 && path[start] == '.' && path[start + 1] == '.'))
            return tf_fail(e, EINVAL, "path \"%.*s\" has a \".\" or \"..\" component", (int)len, path);
        if (n > TF_NAME_MAX)
            return tf_fail(e, ENAMETOOLONG, "path component of %zu bytes is longer than %d", n, TF_NAME_MAX);
        if (++depth > TF_DEPTH_MAX)
            return tf_fail(e, EINVAL, "path is nested deeper than %d", TF_DEPTH_MAX);
        start = i + 1;
    }
    return 0;
}

/* ---- encoding ---- */

static int put_blob(tf_buf *o, const tf_blob *b)
{
    return tf_buf_put(o, b->id.b, sizeof b->id.b) | tf_buf_varint(o, b->offset) |
           tf_buf_varint(o, b->enc_len) | tf_buf_varint(o, b->raw_len) |
           tf_buf_u64(o, b->enc_hash) | tf_buf_u8(o, b->codec) | tf_buf_u8(o, b->dtype) |
           tf_buf_varint(o, b->ref) | tf_buf_varint(o, b->model);
}

static uint64_t zigzag64(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static int64_t unzigzag64(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

static int put_chunks(tf_buf *o, const tf_entry *ent)
{
    int rc = 0;
    for (uint64_t i = 0; i < ent->nchunks; i++)
        rc |= tf_buf_varint(o, ent->chunks[i]);
    return rc;
}

/* A tensor file: size, format, flags (bit 0: the verbatim bytes are
 * inline), pieces (length << 1 | is-tensor; a tensor adds its dtype and
 * name), the inline verbatim bytes, the chunks. */
static int put_tensor_file(tf_buf *o, const tf_entry *ent)
{
    int rc = tf_buf_varint(o, ent->size) | tf_buf_u8(o, ent->format) |
             tf_buf_u8(o, ent->verbatim != NULL) | tf_buf_varint(o, ent->npieces);
    for (uint64_t i = 0; i < ent->npieces; i++) {
        const tf_piece *p = &ent->pieces[i];
        bool tensor = p->tensor != TF_PIECE_VERBATIM;
        rc |= tf_buf_varint(o, p->len << 1 | tensor);
        if (tensor) {
            const char *name = tf_tensor_name(ent, p->tensor);
            size_t n = strlen(name);
            rc |= tf_buf_u8(o, ent->tensors[p->tensor].dtype) | tf_buf_varint(o, n) |
                  tf_buf_put(o, name, n);
        }
    }
    if (ent->verbatim)
        rc |= tf_buf_put(o, ent->verbatim, ent->verbatim_len);
    return rc | put_chunks(o, ent);
}

static int put_entry(tf_buf *o, const tf_entry *ent)
{
    size_t plen = strlen(ent->path);
    int rc = tf_buf_u8(o, ent->kind) | tf_buf_varint(o, ent->ino) | tf_buf_varint(o, plen) |
             tf_buf_put(o, ent->path, plen) | tf_buf_varint(o, ent->mode) |
             tf_buf_varint(o, zigzag64(ent->mtime_sec)) | tf_buf_varint(o, ent->mtime_nsec);
    switch (ent->kind) {
    case TF_ENTRY_SYMLINK:
        rc |= tf_buf_varint(o, ent->size) | tf_buf_put(o, ent->target, ent->size);
        break;
    case TF_ENTRY_FILE:
        rc |= tf_buf_varint(o, ent->size) | tf_buf_varint(o, ent->nchunks) | put_chunks(o, ent);
        break;
    case TF_ENTRY_TENSORS:
        rc |= put_tensor_file(o, ent);
        break;
    default:
        break;
    }
    return rc;
}

/* Redirects: the count, then per redirect the slot and the distance
 * from the slot to its blob (blob - slot - 1: the blob is always later). */
static int put_redirects(tf_buf *o, const tf_segment *s)
{
    int rc = tf_buf_varint(o, s->nredirects);
    for (uint64_t i = 0; i < s->nredirects; i++)
        rc |= tf_buf_varint(o, s->redirects[i].slot) |
              tf_buf_varint(o, s->redirects[i].blob - s->redirects[i].slot - 1);
    return rc;
}

int tf_segment_encode(const tf_segment *s, tf_buf *out, tf_error *e)
{
    uint64_t version = !s->nredirects     ? SEGMENT_VERSION
                       : s->redirects_again ? SEGMENT_VERSION_REDIRECTS_AGAIN
                                            : SEGMENT_VERSION_REDIRECTS;
    int rc = tf_buf_varint(out, version) | tf_buf_varint(out, s->nblobs);
    for (uint64_t i = 0; i < s->nblobs; i++)
        rc |= put_blob(out, &s->blobs[i]);
    rc |= tf_buf_varint(out, s->nentries);
    for (uint64_t i = 0; i < s->nentries; i++)
        rc |= put_entry(out, &s->entries[i]);
    if (s->nredirects)
        rc |= put_redirects(out, s);
    return rc ? tf_fail(e, ENOMEM, "catalog: out of memory") : 0;
}

/* ---- decoding ---- */

int tf_blob_check(const tf_blob *b, uint64_t self, unsigned chunk_shift, uint64_t file_end,
                  tf_error *e)
{
    if (b->offset < 32 || b->offset > file_end || b->enc_len > file_end - b->offset)
        return tf_fail(e, EIO, "catalog: blob %llu lies outside the archive",
                       (unsigned long long)self);
    uint64_t raw_max = (uint64_t)8 << chunk_shift;
    if (raw_max < (1u << 24))
        raw_max = 1u << 24;
    if (b->raw_len > raw_max)
        return tf_fail(e, EIO, "catalog: blob %llu claims %llu bytes, more than a chunk",
                       (unsigned long long)self, (unsigned long long)b->raw_len);
    if (!tf_dtype_get(b->dtype))
        return tf_fail(e, EIO, "catalog: blob %llu has unknown dtype %u",
                       (unsigned long long)self, b->dtype);
    return 0;
}

typedef struct {
    tf_cursor r;
    uint64_t first_blob, total_blobs;
    unsigned chunk_shift;
    uint64_t file_end;
    tf_error *e;
} decoder;

static int short_segment(decoder *d)
{
    return tf_fail(d->e, EIO, "catalog: segment truncated at byte %zu", d->r.pos);
}

/* Reads a count of items taking at least min_bytes each, bounded by the
 * bytes left, so a hostile count cannot trigger a huge allocation. */
static int read_count(decoder *d, size_t min_bytes, const char *what, uint64_t *out)
{
    uint64_t n = tf_read_varint(&d->r);
    if (d->r.bad)
        return short_segment(d);
    if (n > tf_cursor_left(&d->r) / min_bytes)
        return tf_fail(d->e, EIO, "catalog: %llu %s cannot fit in %zu bytes",
                       (unsigned long long)n, what, tf_cursor_left(&d->r));
    *out = n;
    return 0;
}

static int check_blob_link(decoder *d, uint64_t link, uint64_t self, const char *what)
{
    if (link > self) /* link - 1 must be < self */
        return tf_fail(d->e, EIO, "catalog: blob %llu has %s %llu that is not an earlier blob",
                       (unsigned long long)self, what, (unsigned long long)(link - 1));
    return 0;
}

static int read_blob(decoder *d, uint64_t self, tf_blob *b)
{
    const uint8_t *id = tf_read_bytes(&d->r, sizeof b->id.b);
    if (id)
        memcpy(b->id.b, id, sizeof b->id.b);
    b->offset = tf_read_varint(&d->r);
    b->enc_len = tf_read_varint(&d->r);
    b->raw_len = tf_read_varint(&d->r);
    b->enc_hash = tf_read_u64(&d->r);
    b->codec = tf_read_u8(&d->r);
    b->dtype = tf_read_u8(&d->r);
    b->ref = tf_read_varint(&d->r);
    b->model = tf_read_varint(&d->r);
    if (d->r.bad)
        return short_segment(d);
    if (tf_blob_check(b, self, d->chunk_shift, d->file_end, d->e) < 0)
        return -1;
    return check_blob_link(d, b->ref, self, "reference") |
           check_blob_link(d, b->model, self, "model");
}

static int read_string(decoder *d, uint64_t len, char **out)
{
    const uint8_t *p = tf_read_bytes(&d->r, len);
    if (!p)
        return short_segment(d);
    char *s = malloc(len + 1);
    if (!s)
        return tf_fail(d->e, ENOMEM, "catalog: out of memory");
    memcpy(s, p, len);
    s[len] = '\0';
    *out = s;
    return 0;
}

static int read_chunks(decoder *d, tf_entry *ent, uint64_t expected)
{
    if (expected > tf_cursor_left(&d->r))
        return tf_fail(d->e, EIO, "catalog: \"%s\" needs %llu chunks, segment too short",
                       ent->path, (unsigned long long)expected);
    ent->nchunks = expected;
    ent->chunks = calloc(expected ? expected : 1, sizeof *ent->chunks);
    if (!ent->chunks)
        return tf_fail(d->e, ENOMEM, "catalog: out of memory");
    for (uint64_t i = 0; i < expected; i++) {
        ent->chunks[i] = tf_read_varint(&d->r);
        if (!d->r.bad && ent->chunks[i] >= d->total_blobs)
            return tf_fail(d->e, EIO, "catalog: \"%s\" names blob %llu of %llu", ent->path,
                           (unsigned long long)ent->chunks[i], (unsigned long long)d->total_blobs);
    }
    return d->r.bad ? short_segment(d) : 0;
}

static int read_file_body(decoder *d, tf_entry *ent)
{
    ent->size = tf_read_varint(&d->r);
    uint64_t n = tf_read_varint(&d->r);
    if (d->r.bad)
        return short_segment(d);
    if (n != tf_chunk_count(ent->size, 1, d->chunk_shift))
        return tf_fail(d->e, EIO, "catalog: \"%s\" has %llu chunks for %llu bytes", ent->path,
                       (unsigned long long)n, (unsigned long long)ent->size);
    return read_chunks(d, ent, n);
}

int tf_entry_layout(tf_entry *ent, unsigned chunk_shift, uint64_t *nchunks, tf_error *e)
{
    uint64_t off = 0, verbatim = 0, next = 0;
    for (uint64_t i = 0; i < ent->npieces; i++) {
        tf_piece *p = &ent->pieces[i];
        /* Below 2^63: the catalog stores a piece's length shifted by one. */
        if (p->len > UINT64_MAX - off || p->len >> 63)
            return tf_fail(e, EIO, "\"%s\": pieces longer than a file can be", ent->path);
        p->file_off = off;
        off += p->len;
        if (p->tensor == TF_PIECE_VERBATIM) {
            p->verbatim_off = verbatim;
            verbatim += p->len;
            continue;
        }
        if (p->tensor != next || next >= ent->ntensors)
            return tf_fail(e, EIO, "\"%s\": piece %llu names tensor %llu out of order", ent->path,
                           (unsigned long long)i, (unsigned long long)p->tensor);
        tf_tensor_span *ts = &ent->tensors[next++];
        const tf_dtype_info *info = tf_dtype_get(ts->dtype);
        if (!info || ts->dtype == TF_DT_NONE || ts->nbytes != p->len || p->len % info->size)
            return tf_fail(e, EIO, "\"%s\": tensor %llu has a bad dtype or size", ent->path,
                           (unsigned long long)p->tensor);
        if (ts->name_off >= ent->names_len)
            return tf_fail(e, EIO, "\"%s\": tensor %llu has no name", ent->path,
                           (unsigned long long)p->tensor);
        ts->file_off = p->file_off;
    }
    if (next != ent->ntensors || off != ent->size)
        return tf_fail(e, EIO, "\"%s\": pieces of %llu bytes and %llu tensors for a file of "
                       "%llu bytes and %llu tensors", ent->path, (unsigned long long)off,
                       (unsigned long long)next, (unsigned long long)ent->size,
                       (unsigned long long)ent->ntensors);
    if (ent->names_len && ent->names[ent->names_len - 1] != '\0')
        return tf_fail(e, EIO, "\"%s\": tensor names are not terminated", ent->path);
    ent->verbatim_len = verbatim;
    ent->verbatim_chunks = ent->verbatim ? 0 : tf_chunk_count(verbatim, 1, chunk_shift);
    uint64_t chunks = ent->verbatim_chunks;
    for (uint64_t t = 0; t < ent->ntensors; t++) {
        tf_tensor_span *ts = &ent->tensors[t];
        ts->first_chunk = chunks;
        chunks += tf_chunk_count(ts->nbytes, tf_dtype_get(ts->dtype)->size, chunk_shift);
    }
    *nchunks = chunks;
    return 0;
}

/* Reads one piece of a tensor file; a tensor's name goes to names. */
static int read_piece(decoder *d, tf_entry *ent, uint64_t i, tf_buf *names)
{
    uint64_t v = tf_read_varint(&d->r);
    tf_piece *p = &ent->pieces[i];
    *p = (tf_piece){ .len = v >> 1, .tensor = TF_PIECE_VERBATIM };
    if (d->r.bad)
        return short_segment(d);
    if (!(v & 1))
        return 0;
    tf_tensor_span *ts = &ent->tensors[ent->ntensors];
    p->tensor = ent->ntensors++;
    *ts = (tf_tensor_span){ .dtype = tf_read_u8(&d->r), .nbytes = p->len, .name_off = names->len };
    uint64_t n = tf_read_varint(&d->r);
    if (d->r.bad)
        return short_segment(d);
    if (n > TF_TENSOR_NAME_MAX)
        return tf_fail(d->e, EIO, "catalog: \"%s\" has a tensor name of %llu bytes", ent->path,
                       (unsigned long long)n);
    const uint8_t *name = tf_read_bytes(&d->r, n);
    if (!name)
        return short_segment(d);
    if (memchr(name, '\0', n))
        return tf_fail(d->e, EIO, "catalog: \"%s\" has a tensor name holding a NUL", ent->path);
    if (tf_buf_put(names, name, n) < 0 || tf_buf_u8(names, 0) < 0)
        return tf_fail(d->e, ENOMEM, "catalog: out of memory");
    return 0;
}

/* The verbatim bytes held in the catalog (entries of release 1). */
static int read_inline_verbatim(decoder *d, tf_entry *ent)
{
    uint64_t len = 0, left = tf_cursor_left(&d->r);
    for (uint64_t i = 0; i < ent->npieces; i++) {
        if (ent->pieces[i].tensor != TF_PIECE_VERBATIM)
            continue;
        if (ent->pieces[i].len > left - len)
            return short_segment(d);
        len += ent->pieces[i].len;
    }
    const uint8_t *v = tf_read_bytes(&d->r, (size_t)len);
    if (!(ent->verbatim = malloc(len ? (size_t)len : 1)))
        return tf_fail(d->e, ENOMEM, "catalog: out of memory");
    memcpy(ent->verbatim, v, (size_t)len);
    return 0;
}

static int read_tensor_file_body(decoder *d, tf_entry *ent)
{
    ent->size = tf_read_varint(&d->r);
    ent->format = tf_read_u8(&d->r);
    uint8_t flags = tf_read_u8(&d->r);
    if (d->r.bad)
        return short_segment(d);
    if (flags > 1)
        return tf_fail(d->e, EIO, "catalog: \"%s\" has unknown flags 0x%02x", ent->path, flags);
    if (read_count(d, 1, "pieces", &ent->npieces) < 0)
        return -1;
    ent->pieces = calloc(ent->npieces ? ent->npieces : 1, sizeof *ent->pieces);
    ent->tensors = calloc(ent->npieces ? ent->npieces : 1, sizeof *ent->tensors);
    if (!ent->pieces || !ent->tensors)
        return tf_fail(d->e, ENOMEM, "catalog: out of memory");
    tf_buf names = { 0 };
    int rc = 0;
    for (uint64_t i = 0; rc == 0 && i < ent->npieces; i++)
        rc = read_piece(d, ent, i, &names);
    ent->names = (char *)names.data;
    ent->names_len = names.len;
    if (rc == 0 && (flags & 1))
        rc = read_inline_verbatim(d, ent);
    uint64_t nchunks;
    if (rc < 0)
        return -1;
    if (tf_entry_layout(ent, d->chunk_shift, &nchunks, d->e) < 0) {
        tf_error_prefix(d->e, "catalog");
        return -1;
    }
    return read_chunks(d, ent, nchunks);
}

static int read_entry(decoder *d, tf_entry *ent)
{
    ent->kind = tf_read_u8(&d->r);
    ent->ino = tf_read_varint(&d->r);
    uint64_t plen = tf_read_varint(&d->r);
    if (d->r.bad)
        return short_segment(d);
    if (plen > TF_PATH_MAX)
        return tf_fail(d->e, EIO, "catalog: path of %llu bytes", (unsigned long long)plen);
    if (read_string(d, plen, &ent->path) < 0)
        return -1;
    if (strlen(ent->path) != plen)
        return tf_fail(d->e, EIO, "catalog: invalid path: it holds a NUL");
    if (tf_path_check(ent->path, plen, d->e) < 0) {
        /* The reason, not the path: it may hold control characters. */
        tf_error_prefix(d->e, "catalog: invalid path");
        if (d->e)
            d->e->errnum = EIO;
        return -1;
    }
    uint64_t mode = tf_read_varint(&d->r);
    ent->mtime_sec = unzigzag64(tf_read_varint(&d->r));
    uint64_t nsec = tf_read_varint(&d->r);
    if (d->r.bad)
        return short_segment(d);
    if (mode > 07777 || nsec >= 1000000000u || ent->ino < 2 || ent->ino > TF_INO_MAX)
        return tf_fail(d->e, EIO, "catalog: \"%s\" has a bad mode, mtime or inode", ent->path);
    ent->mode = (uint32_t)mode;
    ent->mtime_nsec = (uint32_t)nsec;
    switch (ent->kind) {
    case TF_ENTRY_DIR:
    case TF_ENTRY_TOMBSTONE:
        return 0;
    case TF_ENTRY_SYMLINK:
        ent->size = tf_read_varint(&d->r);
        if (d->r.bad || ent->size > TF_PATH_MAX)
            return tf_fail(d->e, EIO, "catalog: \"%s\" has a bad link target", ent->path);
        if (read_string(d, ent->size, &ent->target) < 0)
            return -1;
        return strlen(ent->target) == ent->size ? 0
               : tf_fail(d->e, EIO, "catalog: \"%s\" link target holds a NUL", ent->path);
    case TF_ENTRY_FILE:
        return read_file_body(d, ent);
    case TF_ENTRY_TENSORS:
        return read_tensor_file_body(d, ent);
    case TF_ENTRY_SAFETENSORS:
        return tf_catalog_read_v1_safetensors(&d->r, d->chunk_shift, ent, d->e) < 0
                   ? -1
                   : read_chunks(d, ent, ent->nchunks);
    default:
        return tf_fail(d->e, EIO, "catalog: \"%s\" has unknown kind %u", ent->path, ent->kind);
    }
}

static int cmp_redirect_slot(const void *a, const void *b)
{
    uint64_t x = ((const tf_redirect *)a)->slot, y = ((const tf_redirect *)b)->slot;
    return x < y ? -1 : x > y;
}

/* The redirect list: each from an earlier commit's slot, to a blob of
 * this segment, no slot twice. Sorted by slot (store/archive.c looks
 * slots up by bisection): the writer stores them so, and a list in
 * order is only checked (qsort of each segment's list was a quarter of
 * the instructions of an open of 1,001 commits of 400 redirects). */
static int read_redirects(decoder *d, tf_segment *s)
{
    if (read_count(d, MIN_REDIRECT_BYTES, "redirects", &s->nredirects) < 0)
        return -1;
    if (s->nredirects == 0)
        return tf_fail(d->e, EIO, "catalog: a segment of version %d or %d without redirects",
                       SEGMENT_VERSION_REDIRECTS, SEGMENT_VERSION_REDIRECTS_AGAIN);
    if (!(s->redirects = calloc(s->nredirects, sizeof *s->redirects)))
        return tf_fail(d->e, ENOMEM, "catalog: out of memory");
    for (uint64_t i = 0; i < s->nredirects; i++) {
        tf_redirect *r = &s->redirects[i];
        r->slot = tf_read_varint(&d->r);
        uint64_t gap = tf_read_varint(&d->r);
        if (d->r.bad)
            return short_segment(d);
        if (r->slot >= d->first_blob)
            return tf_fail(d->e, EIO, "catalog: redirect of blob %llu, not an earlier commit's",
                           (unsigned long long)r->slot);
        r->blob = r->slot + 1 + gap;
        if (gap >= d->total_blobs - r->slot - 1 || r->blob < d->first_blob)
            return tf_fail(d->e, EIO, "catalog: blob %llu redirected to a blob not of its segment",
                           (unsigned long long)r->slot);
    }
    uint64_t i = 1;
    while (i < s->nredirects && s->redirects[i - 1].slot < s->redirects[i].slot)
        i++;
    if (i == s->nredirects)
        return 0;
    qsort(s->redirects, s->nredirects, sizeof *s->redirects, cmp_redirect_slot);
    for (i = 1; i < s->nredirects; i++)
        if (s->redirects[i].slot == s->redirects[i - 1].slot)
            return tf_fail(d->e, EIO, "catalog: blob %llu redirected twice",
                           (unsigned long long)s->redirects[i].slot);
    return 0;
}

int tf_segment_decode(const uint8_t *p, size_t len, uint64_t first_blob, unsigned chunk_shift,
                      uint64_t file_end, tf_segment *s, tf_error *e)
{
    decoder d = { .r = tf_cursor_make(p, len), .first_blob = first_blob,
                  .chunk_shift = chunk_shift, .file_end = file_end, .e = e };
    *s = (tf_segment){ .first_blob = first_blob };
    uint64_t version = tf_read_varint(&d.r);
    if (d.r.bad)
        return short_segment(&d);
    if (version != SEGMENT_VERSION && version != SEGMENT_VERSION_REDIRECTS &&
        version != SEGMENT_VERSION_REDIRECTS_AGAIN)
        return tf_fail(e, EIO, "catalog: segment version %llu is not supported",
                       (unsigned long long)version);
    s->redirects_again = version == SEGMENT_VERSION_REDIRECTS_AGAIN;
    if (read_count(&d, MIN_BLOB_BYTES, "blobs", &s->nblobs) < 0)
        goto fail;
    s->blobs = calloc(s->nblobs ? s->nblobs : 1, sizeof *s->blobs);
    if (!s->blobs) {
        tf_fail(e, ENOMEM, "catalog: out of memory");
        goto fail;
    }
    for (uint64_t i = 0; i < s->nblobs; i++)
        if (read_blob(&d, first_blob + i, &s->blobs[i]) < 0)
            goto fail;
    d.total_blobs = first_blob + s->nblobs;
    if (read_count(&d, MIN_ENTRY_BYTES, "entries", &s->nentries) < 0)
        goto fail;
    s->entries = calloc(s->nentries ? s->nentries : 1, sizeof *s->entries);
    if (!s->entries) {
        tf_fail(e, ENOMEM, "catalog: out of memory");
        goto fail;
    }
    for (uint64_t i = 0; i < s->nentries; i++)
        if (read_entry(&d, &s->entries[i]) < 0)
            goto fail;
    if (version != SEGMENT_VERSION && read_redirects(&d, s) < 0)
        goto fail;
    if (tf_cursor_left(&d.r) != 0) {
        tf_fail(e, EIO, "catalog: %zu unexpected bytes after the entries", tf_cursor_left(&d.r));
        goto fail;
    }
    return 0;
fail:
    tf_segment_free(s);
    return -1;
}

int tf_entry_encode(const tf_entry *ent, tf_buf *out, tf_error *e)
{
    return put_entry(out, ent) ? tf_fail(e, ENOMEM, "catalog: out of memory") : 0;
}

int tf_entry_decode(const uint8_t *p, size_t len, uint64_t nblobs, unsigned chunk_shift,
                    tf_entry *ent, tf_error *e)
{
    decoder d = { .r = tf_cursor_make(p, len), .total_blobs = nblobs,
                  .chunk_shift = chunk_shift, .e = e };
    *ent = (tf_entry){ 0 };
    int rc = read_entry(&d, ent);
    if (rc == 0 && tf_cursor_left(&d.r) != 0)
        rc = tf_fail(e, EIO, "catalog: %zu unexpected bytes after \"%s\"", tf_cursor_left(&d.r),
                     ent->path);
    if (rc < 0)
        tf_entry_free(ent);
    return rc;
}

bool tf_entry_same_chunks(const tf_entry *a, const tf_entry *b)
{
    if (a->body.len && a->body.off == b->body.off && a->body.len == b->body.len)
        return true;
    if (atomic_load(&a->body_pending) || atomic_load(&b->body_pending))
        return false; /* two pages: maybe the same chunks, told apart only when read */
    return a->nchunks == b->nchunks &&
           (!a->nchunks || !memcmp(a->chunks, b->chunks, a->nchunks * sizeof *a->chunks));
}

static void *copy_bytes(const void *p, size_t n)
{
    void *q = malloc(n ? n : 1);
    if (q && n)
        memcpy(q, p, n);
    return q;
}

int tf_entry_clone(const tf_entry *src, const char *path, tf_entry *dst, tf_error *e)
{
    /* A pending body may be being read now (tf_archive_entry_body): the
     * copy takes the header, and reads the body from the same page when
     * asked. A body read is never changed again. */
    bool pending = atomic_load_explicit(&src->body_pending, memory_order_acquire);
    if (pending) {
        *dst = (tf_entry){ .kind = src->kind, .ino = src->ino, .mode = src->mode,
                           .mtime_sec = src->mtime_sec, .mtime_nsec = src->mtime_nsec,
                           .size = src->size, .body = src->body };
        atomic_init(&dst->body_pending, true);
    } else {
        *dst = *src;
        /* Each array is copied when the source has one; a copy that
         * failed is NULL where the source's is not. */
        dst->pieces = src->pieces ? copy_bytes(src->pieces, src->npieces * sizeof *src->pieces)
                                  : NULL;
        dst->tensors = src->tensors
                           ? copy_bytes(src->tensors, src->ntensors * sizeof *src->tensors)
                           : NULL;
        dst->names = src->names ? copy_bytes(src->names, src->names_len) : NULL;
        dst->verbatim = src->verbatim ? copy_bytes(src->verbatim, src->verbatim_len) : NULL;
        dst->chunks = src->chunks ? copy_bytes(src->chunks, src->nchunks * sizeof *src->chunks)
                                  : NULL;
    }
    dst->path = strdup(path ? path : src->path);
    dst->target = src->target ? strdup(src->target) : NULL;
    bool lost = !pending && ((src->pieces && !dst->pieces) || (src->tensors && !dst->tensors) ||
                             (src->names && !dst->names) || (src->verbatim && !dst->verbatim) ||
                             (src->chunks && !dst->chunks));
    if (lost || !dst->path || (src->target && !dst->target)) {
        tf_entry_free(dst);
        return tf_fail(e, ENOMEM, "out of memory");
    }
    return 0;
}

void tf_entry_free(tf_entry *ent)
{
    free(ent->path);
    free(ent->pieces);
    free(ent->tensors);
    free(ent->names);
    free(ent->verbatim);
    free(ent->chunks);
    free(ent->target);
    *ent = (tf_entry){ 0 };
}

void tf_entries_free(tf_entry *ents, size_t n)
{
    for (size_t i = 0; ents && i < n; i++)
        tf_entry_free(&ents[i]);
    free(ents);
}

void tf_segment_free(tf_segment *s)
{
    for (uint64_t i = 0; s->entries && i < s->nentries; i++)
        tf_entry_free(&s->entries[i]);
    free(s->entries);
    free(s->blobs);
    free(s->redirects);
    *s = (tf_segment){ 0 };
}
