/* Adding a tensor file: its format's pieces become the entry, the
 * verbatim bytes one span of opaque bytes, each tensor a span with the
 * reference found for it (store/refs.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/dtype.h"
#include "store/ckpt_path.h"
#include "store/pipeline.h"
#include "store/writer_impl.h"

/* The verbatim pieces of a file, back to back: what its verbatim span
 * codes. Points into the file when there is one piece. */
static const uint8_t *verbatim_stream(const tf_entry *ent, const uint8_t *data, uint8_t **owned,
                                      tf_error *e)
{
    const tf_piece *only = NULL;
    size_t n = 0;
    for (uint64_t i = 0; i < ent->npieces; i++)
        if (ent->pieces[i].tensor == TF_PIECE_VERBATIM && ent->pieces[i].len) {
            only = &ent->pieces[i];
            n++;
        }
    if (n <= 1)
        return only ? data + only->file_off : data;
    uint8_t *s = malloc((size_t)ent->verbatim_len);
    if (!s) {
        tf_fail(e, ENOMEM, "out of memory");
        return NULL;
    }
    for (uint64_t i = 0; i < ent->npieces; i++)
        if (ent->pieces[i].tensor == TF_PIECE_VERBATIM)
            memcpy(s + ent->pieces[i].stream_off, data + ent->pieces[i].file_off,
                   (size_t)ent->pieces[i].len);
    *owned = s;
    return s;
}

/* The reference of tensor t of ent: in the file at parent when given
 * (by identity within it), else found by identity in its run. */
static tf_tensor_ref find_ref(tf_writer *w, const tf_entry *parent, const tf_ckpt_path *at,
                              const tf_entry *ent, uint64_t t)
{
    const tf_tensor_span *ts = &ent->tensors[t];
    if (!parent)
        return tf_ref_find(w->refs, at, tf_tensor_name(ent, t), ts->dtype, ts->nbytes,
                           w->opts.max_chain);
    for (uint64_t i = 0; i < parent->ntensors; i++)
        if (parent->tensors[i].dtype == ts->dtype && parent->tensors[i].nbytes == ts->nbytes &&
            strcmp(tf_tensor_name(parent, i), tf_tensor_name(ent, t)) == 0)
            return (tf_tensor_ref){ .ent = parent, .tensor = i };
    return (tf_tensor_ref){ 0 };
}

/* The reference bytes of a tensor, reconstructed (from the cache, where
 * the previous checkpoint's chunks were put when it was added). */
static uint8_t *ref_bytes(tf_writer *w, tf_tensor_ref ref, tf_error *e)
{
    const tf_tensor_span *rs = &ref.ent->tensors[ref.tensor];
    uint8_t *p = malloc((size_t)rs->nbytes);
    if (!p) {
        tf_fail(e, ENOMEM, "out of memory");
        return NULL;
    }
    if (tf_reader_pread(w->reader, ref.ent, rs->file_off, (size_t)rs->nbytes, p, e) !=
        (ssize_t)rs->nbytes) {
        free(p);
        return NULL;
    }
    return p;
}

static const tf_entry *given_parent(tf_writer *w, const char *parent, tf_error *e)
{
    const tf_entry *p = tf_archive_lookup(w->ar, parent);
    if (!p || !tf_entry_is_tensor_file(p)) {
        tf_fail(e, EINVAL, "parent \"%s\" is not a tensor file in the archive", parent);
        return NULL;
    }
    return p;
}

/* Fills spans[1..] with ent's tensors and their references. */
static int tensor_spans(tf_writer *w, const tf_entry *ent, const char *series_path,
                        const char *parent_path, const uint8_t *data, tf_span *spans,
                        uint8_t **owned, tf_error *e)
{
    const tf_entry *parent = parent_path ? given_parent(w, parent_path, e) : NULL;
    if (parent_path && !parent)
        return -1;
    tf_ckpt_path at;
    if (tf_ref_index_sync(w->refs, w->ar, e) < 0)
        return -1;
    if (tf_ckpt_path_parse(series_path, &at) < 0)
        return tf_fail(e, ENOMEM, "out of memory");
    tf_add_report *rep = &w->report;
    rep->run_files = tf_ref_run_files(w->refs, &at);
    int rc = 0;
    for (uint64_t t = 0; rc == 0 && t < ent->ntensors; t++) {
        const tf_tensor_span *ts = &ent->tensors[t];
        tf_span *s = &spans[t + 1];
        *s = (tf_span){ .src = data + ts->file_off, .nbytes = ts->nbytes, .dtype = ts->dtype };
        if (!tf_dtype_is_float(ts->dtype) || !ts->nbytes)
            continue;
        rep->tensor_bytes += ts->nbytes;
        tf_tensor_ref ref = find_ref(w, parent, &at, ent, t);
        if (!ref.ent)
            continue;
        rep->referenced_bytes += ts->nbytes;
        if (!(owned[t] = ref_bytes(w, ref, e)))
            rc = -1;
        s->ref = owned[t];
        s->ref_far = ref.other_run;
        s->ref_blobs = ref.ent->chunks + ref.ent->tensors[ref.tensor].first_chunk;
    }
    tf_ckpt_path_free(&at);
    return rc;
}

int tf_writer_add_tensor_file(tf_writer *w, tf_commit *c, const tf_tensor_format *f,
                              const char *dest, const char *series_path, const char *parent,
                              const tf_entry_attrs *attrs, tf_source *src, tf_error *e)
{
    tf_entry *ent = tf_commit_entry(c, dest, TF_ENTRY_TENSORS, attrs, e);
    if (!ent)
        return -1;
    ent->size = src->size;
    tf_memory_file mem = { src->data, src->size };
    tf_file_source fs = { .name = src->name, .size = src->size, .read = tf_memory_read, .arg = &mem };
    if (tf_tensor_format_parse(f, &fs, tf_archive_chunk_shift(w->ar), ent, e) < 0)
        return -1;
    w->report.tensor_file = true;
    size_t n = (size_t)ent->ntensors + 1;
    tf_span *spans = calloc(n, sizeof *spans);
    uint8_t **owned = calloc(n, sizeof *owned);
    uint8_t *stream = NULL;
    int rc = spans && owned ? 0 : tf_fail(e, ENOMEM, "out of memory");
    if (rc == 0) {
        const uint8_t *v = verbatim_stream(ent, src->data, &stream, e);
        spans[0] = (tf_span){ .src = v, .nbytes = ent->verbatim_len, .dtype = TF_DT_NONE };
        rc = v ? tensor_spans(w, ent, series_path, parent, src->data, spans, owned, e) : -1;
    }
    /* The verbatim stream is coded as the entry's first chunks: spans[0]
     * is empty when the file has no verbatim bytes. */
    if (rc == 0)
        rc = tf_encode_spans(c, &w->opts, ent, spans, n, e);
    for (size_t t = 0; owned && t < n; t++)
        free(owned[t]);
    free(owned);
    free(stream);
    free(spans);
    return rc;
}

void tf_writer_seed_cache(tf_writer *w, const tf_entry *ent, const uint8_t *data)
{
    unsigned shift = tf_archive_chunk_shift(w->ar);
    for (uint64_t t = 0; t < ent->ntensors; t++) {
        const tf_tensor_span *ts = &ent->tensors[t];
        if (!tf_dtype_is_float(ts->dtype))
            continue;
        uint64_t chunk_bytes = (uint64_t)tf_dtype_get(ts->dtype)->size << shift;
        for (uint64_t off = 0, c = ts->first_chunk; off < ts->nbytes; off += chunk_bytes, c++)
            tf_reader_seed(w->reader, ent->chunks[c], data + ts->file_off + off);
    }
}
