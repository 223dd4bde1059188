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

/* The reference of tensor t of ent: in the file at parent when given
 * (by identity within it), else found by identity in its run. */
static int find_ref(tf_writer *w, const tf_entry *parent, const tf_ckpt_path *at,
                    const tf_entry *ent, uint64_t t, tf_tensor_ref *out, tf_error *e)
{
    const tf_tensor_span *ts = &ent->tensors[t];
    if (!parent)
        return tf_ref_find(w->refs, at, tf_tensor_name(ent, t), ts->dtype, ts->nbytes, out, e);
    *out = (tf_tensor_ref){ 0 };
    for (uint64_t i = 0; i < parent->ntensors; i++)
        if (parent->tensors[i].dtype == ts->dtype && parent->tensors[i].nbytes == ts->nbytes &&
            strcmp(tf_tensor_name(parent, i), tf_tensor_name(ent, t)) == 0) {
            *out = (tf_tensor_ref){ .ent = parent, .tensor = i };
            break;
        }
    return 0;
}

static const uint64_t *tensor_chunks(const tf_entry *ent, uint64_t t)
{
    return ent->chunks + ent->tensors[t].first_chunk;
}

/* The newest checkpoint so far of the series a file's tensors extend,
 * with its path parsed: most of a file's tensors have the same one, whose
 * path is then parsed once. */
typedef struct {
    const tf_entry *ent; /* NULL: none parsed yet */
    tf_ckpt_path at;
} parsed_newest;

/* The chunk blobs of tensor t of newest->ent (set to `ent` first) in the
 * checkpoint before it, against which its keyframes may become forward
 * deltas (store/pipeline.h); NULL where it is the first of its series. */
static int predecessor_chunks(tf_writer *w, parsed_newest *newest, const tf_entry *ent, uint64_t t,
                              const uint64_t **out, tf_error *e)
{
    if (newest->ent != ent) {
        if (newest->ent)
            tf_ckpt_path_free(&newest->at);
        newest->ent = NULL;
        if (tf_ckpt_path_parse(ent->path, &newest->at) < 0)
            return tf_fail(e, ENOMEM, "out of memory");
        newest->ent = ent;
    }
    const tf_tensor_span *ts = &ent->tensors[t];
    tf_tensor_ref ref;
    if (tf_ref_find(w->refs, &newest->at, tf_tensor_name(ent, t), ts->dtype, ts->nbytes, &ref,
                    e) < 0)
        return -1;
    /* Only the nearest earlier checkpoint of its run: nothing later
     * holds the tensor (newest) and the file is not its own. */
    *out = ref.ent && ref.newest && ref.ent != ent ? tensor_chunks(ref.ent, ref.tensor) : NULL;
    return 0;
}

static const tf_entry *given_parent(tf_writer *w, const char *parent, tf_error *e)
{
    const tf_entry *p = tf_archive_lookup(w->ar, parent);
    if (!p || !tf_entry_is_tensor_file(p)) {
        tf_fail(e, EINVAL, "parent \"%s\" is not a tensor file in the archive", parent);
        return NULL;
    }
    return tf_archive_entry_body(w->ar, p, e) < 0 ? NULL : p;
}

/* Fills spans[1..] with ent's tensors and their references. */
static int tensor_spans(tf_writer *w, const tf_entry *ent, const char *series_path,
                        const char *parent_path, tf_span *spans, tf_error *e)
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
    bool keyframes = tf_write_opts_newest_keyframes(&w->opts);
    bool newest_file = keyframes && !parent && !tf_ref_run_has_later(w->refs, &at);
    parsed_newest prev = { 0 };
    int rc = 0;
    for (uint64_t t = 0; t < ent->ntensors; t++) {
        const tf_tensor_span *ts = &ent->tensors[t];
        tf_span *s = &spans[t + 1];
        *s = (tf_span){ .nbytes = ts->nbytes, .dtype = ts->dtype, .file_off = ts->file_off };
        if (!tf_dtype_is_float(ts->dtype) || !ts->nbytes)
            continue;
        rep->tensor_bytes += ts->nbytes;
        tf_tensor_ref ref;
        if ((rc = find_ref(w, parent, &at, ent, t, &ref, e)) < 0)
            break;
        if (!ref.ent) {
            /* The first of its series is the newest too: keyframes that
             * the next checkpoint retires, as it retires any newest's.
             * Out of order, it stays: its codec is chosen as usual. */
            s->newest = newest_file;
            continue;
        }
        rep->referenced_bytes += ts->nbytes;
        if ((rc = tf_archive_use_reference(w->ar, ref.ent, e)) < 0)
            break;
        s->ref_far = ref.other_run;
        s->newest = keyframes && ref.newest;
        s->ref_blobs = tensor_chunks(ref.ent, ref.tensor);
        if (s->newest &&
            (rc = predecessor_chunks(w, &prev, ref.ent, ref.tensor, &s->prev_blobs, e)) < 0)
            break;
    }
    if (prev.ent)
        tf_ckpt_path_free(&prev.at);
    tf_ckpt_path_free(&at);
    return rc;
}

int tf_writer_add_tensor_file(tf_writer *w, tf_commit *c, const tf_tensor_format *f,
                              const char *dest, const char *series_path, const char *parent,
                              const tf_entry_attrs *attrs, const tf_source *src,
                              tf_seeds *seeds, tf_error *e)
{
    tf_entry *ent = tf_commit_entry(c, dest, TF_ENTRY_TENSORS, attrs, e);
    if (!ent)
        return -1;
    ent->size = src->size;
    tf_file_source fs = tf_source_as_file(src);
    if (tf_tensor_format_parse(f, &fs, tf_archive_chunk_shift(w->ar), ent, e) < 0)
        return -1;
    w->report.tensor_file = true;
    size_t n = (size_t)ent->ntensors + 1;
    tf_span *spans = calloc(n, sizeof *spans);
    if (!spans)
        return tf_fail(e, ENOMEM, "out of memory");
    /* The verbatim bytes are coded as the entry's first chunks: spans[0]
     * is empty when the file has no verbatim bytes. */
    spans[0] = (tf_span){ .nbytes = ent->verbatim_len, .dtype = TF_DT_NONE, .verbatim = ent };
    tf_pool *encoders = NULL;
    int rc = tensor_spans(w, ent, series_path, parent, spans, e);
    if (rc == 0)
        rc = tf_writer_encoders(w, &encoders, e);
    if (rc == 0)
        rc = tf_encode_spans(c, &w->opts, encoders, src, w->reader, seeds, ent, spans, n, e);
    free(spans);
    return rc;
}
