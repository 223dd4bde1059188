/* Reading a byte range of a file: mapping it onto the file's pieces,
 * verbatim bytes and tensor chunks, and sending their bytes to a sink:
 * copied to a buffer, or recorded as spans where they lie. */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "store/file_map.h"
#include "store/reader_impl.h"

/* Where a read's bytes go: copied to out, or, with spans, recorded where
 * they lie (the cached blobs holding them stay held). */
typedef struct {
    tf_reader_ctx *r;
    uint8_t *out;
    tf_read_spans *spans;
} sink;

static int array_grow(void **p, size_t *cap, size_t want, size_t size)
{
    if (want <= *cap)
        return 0;
    size_t n = *cap ? *cap * 2 : 16;
    void *q = realloc(*p, n * size);
    if (!q)
        return -1;
    *p = q;
    *cap = n;
    return 0;
}

/* Sends n bytes at p to the sink; `it`, the cached blob holding them (or
 * NULL), is the sink's to release. */
static int sink_put(sink *s, tf_cache_item *it, const uint8_t *p, size_t n, tf_error *e)
{
    if (!s->spans) {
        memcpy(s->out, p, n);
        s->out += n;
        if (it)
            tf_cache_release(s->r->cache, it);
        return 0;
    }
    tf_read_spans *v = s->spans;
    bool held = false;
    if (it && v->nheld && v->held[v->nheld - 1] == it) {
        tf_cache_release(s->r->cache, it); /* held once is enough */
        held = true;
    }
    if (v->n && (const uint8_t *)v->iov[v->n - 1].iov_base + v->iov[v->n - 1].iov_len == p) {
        v->iov[v->n - 1].iov_len += n;
    } else if (v->n == TF_READ_SPANS_MAX ||
               array_grow((void **)&v->iov, &v->iov_cap, v->n + 1, sizeof *v->iov) < 0) {
        if (it && !held)
            tf_cache_release(s->r->cache, it);
        return tf_fail(e, v->n == TF_READ_SPANS_MAX ? E2BIG : ENOMEM,
                       "a read of more than %d pieces", TF_READ_SPANS_MAX);
    } else {
        v->iov[v->n++] = (struct iovec){ .iov_base = (void *)p, .iov_len = n };
    }
    if (it && !held) {
        if (array_grow((void **)&v->held, &v->held_cap, v->nheld + 1, sizeof *v->held) < 0) {
            tf_cache_release(s->r->cache, it);
            return tf_fail(e, ENOMEM, "out of memory");
        }
        v->held[v->nheld++] = it;
    }
    return 0;
}

/* Sends bytes [off, off+len) of a chunk run to the sink. */
static int read_chunks(sink *s, const tf_chunk_run *run, uint64_t off, size_t len, tf_error *e)
{
    for (off += run->start; len;) {
        uint64_t in = off % run->chunk_bytes;
        uint64_t k = off / run->chunk_bytes, idx = run->chunks[k];
        uint64_t want = run->stream_len - k * run->chunk_bytes;
        want = want < run->chunk_bytes ? want : run->chunk_bytes;
        tf_cache_item *it = tf_reader_obtain(s->r, idx, e);
        if (!it)
            return -1;
        /* An open of format version 2 does not check every chunk's
         * length against its place in the file: its read does. */
        if (it->len != want) {
            tf_cache_release(s->r->cache, it);
            return tf_fail(e, EIO, "blob %llu has %zu bytes, expected %llu",
                           (unsigned long long)idx, it->len, (unsigned long long)want);
        }
        size_t n = it->len - in < len ? (size_t)(it->len - in) : len;
        if (sink_put(s, it, it->data + in, n, e) < 0)
            return -1;
        off += n;
        len -= n;
    }
    return 0;
}

/* Sends n bytes at `in` of piece p of a tensor file, or of an opaque
 * file (p = 0), to the sink. */
static int read_piece(sink *s, const tf_entry *ent, uint64_t p, uint64_t in, size_t n,
                      tf_error *e)
{
    tf_chunk_run run;
    if (!tf_piece_chunks(ent, p, tf_archive_chunk_shift(s->r->ar), &run))
        return sink_put(s, NULL, ent->verbatim + ent->pieces[p].verbatim_off + in, n, e);
    if (read_chunks(s, &run, in, n, e) == 0)
        return 0;
    if (e && e->errnum == E2BIG)
        return -1;
    if (ent->kind == TF_ENTRY_TENSORS && ent->pieces[p].tensor != TF_PIECE_VERBATIM)
        tf_error_prefix(e, "%s: tensor \"%s\"", ent->path, tf_tensor_name(ent, ent->pieces[p].tensor));
    else
        tf_error_prefix(e, "%s", ent->path);
    return -1;
}

static int read_tensor_file(sink *s, const tf_entry *ent, uint64_t off, size_t len, tf_error *e)
{
    for (uint64_t i = tf_piece_at(ent, off); len; i++) {
        const tf_piece *p = &ent->pieces[i];
        uint64_t in = off - p->file_off;
        if (in >= p->len)
            continue; /* empty pieces */
        size_t n = p->len - in < len ? (size_t)(p->len - in) : len;
        if (read_piece(s, ent, i, in, n, e) < 0)
            return -1;
        off += n;
        len -= n;
    }
    return 0;
}

static ssize_t read_entry_to(sink *s, const tf_entry *ent, uint64_t off, size_t len, tf_error *e)
{
    if (!tf_entry_is_regular(ent))
        return tf_fail(e, EISDIR, "%s: not a regular file", ent->path);
    if (tf_archive_entry_body(s->r->ar, ent, e) < 0)
        return -1;
    if (off >= ent->size)
        return 0;
    if (len > ent->size - off)
        len = (size_t)(ent->size - off);
    if (len > SSIZE_MAX)
        len = SSIZE_MAX;
    int rc = ent->kind == TF_ENTRY_FILE ? read_piece(s, ent, 0, off, len, e)
                                        : read_tensor_file(s, ent, off, len, e);
    return rc < 0 ? -1 : (ssize_t)len;
}

ssize_t tf_reader_pread(tf_reader_ctx *r, const tf_entry *ent, uint64_t off, size_t len,
                        uint8_t *out, tf_error *e)
{
    sink s = { .r = r, .out = out };
    return read_entry_to(&s, ent, off, len, e);
}

ssize_t tf_reader_pread_spans(tf_reader_ctx *r, const tf_entry *ent, uint64_t off, size_t len,
                              tf_read_spans *v, tf_error *e)
{
    v->n = v->nheld = 0;
    sink s = { .r = r, .spans = v };
    ssize_t got = read_entry_to(&s, ent, off, len, e);
    if (got < 0)
        tf_reader_release_spans(r, v);
    return got;
}

void tf_reader_release_spans(tf_reader_ctx *r, tf_read_spans *v)
{
    for (size_t i = 0; i < v->nheld; i++)
        tf_cache_release(r->cache, v->held[i]);
    v->n = v->nheld = 0;
}

void tf_read_spans_free(tf_read_spans *v)
{
    free(v->iov);
    free(v->held);
    *v = (tf_read_spans){ 0 };
}
