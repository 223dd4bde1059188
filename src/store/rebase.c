#include "store/rebase.h"

#include <errno.h>
#include <stdlib.h>

#include "common/dtype.h"
#include "common/pool.h"
#include "store/encode.h"
#include "store/liveness.h"
#include "store/shared_model.h"
#include "store/writer_impl.h"

/* One chunk to re-encode: its slot and the slot's record, the new
 * reference (slot + 1, 0 for none), and the tensor of a live file it is
 * a chunk of (+ 1; 0 for none found). */
typedef struct {
    uint64_t slot;
    tf_blob blob;
    uint64_t ref;
    uint64_t tensor;
} rebased;

/* The encodings of a run of chunks in flight: the chunks of one tensor
 * that share a model (tf_shared_model), or one chunk. */
typedef struct {
    size_t n;
    tf_chunk_job *jobs;
    tf_model_blob *models; /* a chunk's own model, where it has one */
    tf_shared_model shared;
} run_state;

typedef struct {
    tf_archive *ar;
    tf_reader_ctx *reader;
    tf_commit *c;
    rebased *items;
    size_t n;
    size_t *runs; /* run r: items runs[r] to runs[r + 1] */
    size_t nruns;
    /* Run r's encodings are inflight[r % window] (the pool starts a run
     * at most window ahead of the one being stored). */
    run_state *inflight;
    size_t window;
    const tf_write_opts *opts; /* its rebasing and progress hooks */
    tf_rebase_stats st;
} rebase;

/* The nearest slot down a reference chain from ref (+ 1) that a live
 * file has as a chunk (+ 1), or 0 when the chain has none, in *near. */
static int nearest_live(const tf_archive *ar, const uint8_t *live, uint64_t ref, uint64_t *near,
                        tf_error *e)
{
    *near = 0;
    for (unsigned steps = 0; ref && steps <= TF_CHAIN_MAX; steps++) {
        if (live[ref - 1] & TF_LIVE_CHUNK) {
            *near = ref;
            return 0;
        }
        tf_blob b;
        if (tf_archive_blob(ar, ref - 1, &b, e) < 0)
            return -1;
        ref = b.ref;
    }
    return 0;
}

/* 1 when slot s, whose record is *b, is a live file's chunk, a delta
 * against a slot that is no live file's chunk, and may be redirected; 0
 * when not; -1 with the reason. */
static int needs_rebase(const tf_archive *ar, const uint8_t *live, uint64_t s, tf_blob *b,
                        tf_error *e)
{
    if (!(live[s] & TF_LIVE_CHUNK))
        return 0;
    if (tf_archive_blob(ar, s, b, e) < 0)
        return -1;
    bool again;
    return b->ref && !(live[b->ref - 1] & TF_LIVE_CHUNK) && tf_archive_may_redirect(ar, s, &again);
}

/* The keyframe slot at the bottom of slot s's reference chain, in *root. */
static int chain_root(const tf_archive *ar, uint64_t s, uint64_t *root, tf_error *e)
{
    for (unsigned steps = 0; steps <= TF_CHAIN_MAX; steps++) {
        tf_blob b;
        if (tf_archive_blob(ar, s, &b, e) < 0)
            return -1;
        if (!b.ref)
            break;
        s = b.ref - 1;
    }
    *root = s;
    return 0;
}

typedef struct {
    uint64_t root;
    size_t item;
} orphan;

/* Orphans by root, and within a root newest first (items are newest
 * slot first). */
static int orphan_cmp(const void *a, const void *b)
{
    const orphan *x = a, *y = b;
    if (x->root != y->root)
        return x->root < y->root ? -1 : 1;
    return x->item < y->item ? -1 : x->item > y->item;
}

/* Chunks left with no live chunk down their chain (orphans) lost their
 * keyframe: a removed checkpoint that a reverse chain ended at and a
 * forward one started from leaves a kept checkpoint on each side with
 * none. Of the orphans of one keyframe the newest becomes the keyframe
 * and the others deltas against it, as the kept files added afresh
 * would be stored, rather than a keyframe each. No chain grows: an
 * orphan was a delta, at least one step from its keyframe, and is one
 * step from its new one. */
static int pair_orphans(rebase *rb, tf_error *e)
{
    size_t n = 0;
    for (size_t i = 0; i < rb->n; i++)
        n += !rb->items[i].ref;
    if (n < 2)
        return 0;
    orphan *o = malloc(n * sizeof *o);
    if (!o)
        return tf_fail(e, ENOMEM, "out of memory for %zu chunks to rebase", n);
    n = 0;
    for (size_t i = 0; i < rb->n; i++)
        if (!rb->items[i].ref) {
            o[n] = (orphan){ .item = i };
            if (chain_root(rb->ar, rb->items[i].slot, &o[n++].root, e) < 0) {
                free(o);
                return -1;
            }
        }
    qsort(o, n, sizeof *o, orphan_cmp);
    for (size_t first = 0, k; first < n; first = k) {
        const rebased *key = &rb->items[o[first].item];
        for (k = first + 1; k < n && o[k].root == o[first].root; k++) {
            rebased *it = &rb->items[o[k].item];
            if (key->blob.dtype == it->blob.dtype && key->blob.raw_len == it->blob.raw_len)
                it->ref = key->slot + 1;
        }
    }
    free(o);
    return 0;
}

/* The item of slot s, or NULL (items are newest slot first). */
static rebased *item_of(rebase *rb, uint64_t s)
{
    size_t lo = 0, hi = rb->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (rb->items[mid].slot == s)
            return &rb->items[mid];
        if (rb->items[mid].slot > s)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* Tells each item the tensor of a live file it is a chunk of: where two
 * chunks of a tensor can share a model, a whole chunk (of one-byte
 * elements at least) and another within TF_SHARED_MODEL_BYTES. */
static void find_tensors(rebase *rb)
{
    uint64_t tensor = 0;
    unsigned shift = tf_archive_chunk_shift(rb->ar);
    if (((size_t)1 << shift) >= TF_SHARED_MODEL_BYTES)
        return;
    for (size_t i = 0; rb->n && i < tf_archive_nentries(rb->ar); i++) {
        const tf_entry *ent = tf_archive_entry(rb->ar, i);
        if (!tf_entry_is_tensor_file(ent))
            continue;
        for (uint64_t t = 0; t < ent->ntensors; t++) {
            const tf_tensor_span *span = &ent->tensors[t];
            uint64_t n = tf_chunk_count(span->nbytes, tf_dtype_get(span->dtype)->size, shift);
            tensor++;
            for (uint64_t c = span->first_chunk; c < span->first_chunk + n && c < ent->nchunks; c++) {
                rebased *it = item_of(rb, ent->chunks[c]);
                if (it && !it->tensor)
                    it->tensor = tensor;
            }
        }
    }
}

/* Whether item i joins the run of the item before it, of `bytes` so far:
 * deltas both, of one tensor. */
static bool joins_run(const rebase *rb, size_t i, size_t bytes)
{
    const rebased *it = &rb->items[i], *prev = it - 1;
    return it->tensor && it->tensor == prev->tensor && it->ref && prev->ref &&
           bytes + it->blob.raw_len <= TF_SHARED_MODEL_BYTES;
}

/* Splits the items into runs. */
static int make_runs(rebase *rb)
{
    if (!(rb->runs = malloc((rb->n + 1) * sizeof *rb->runs)))
        return -1;
    size_t bytes = 0;
    for (size_t i = 0; i < rb->n; i++) {
        if (!i || !joins_run(rb, i, bytes)) {
            rb->runs[rb->nruns++] = i;
            bytes = 0;
        }
        bytes += rb->items[i].blob.raw_len;
    }
    rb->runs[rb->nruns] = rb->n;
    return 0;
}

/* The chunks to re-encode, newest slot first: a chunk's old chain then
 * runs through chunks just decoded, which the reader's cache holds. */
static int find_chunks(rebase *rb, tf_error *e)
{
    uint8_t *live = tf_liveness(rb->ar, NULL, e);
    if (!live)
        return -1;
    uint64_t nblobs = tf_archive_nblobs(rb->ar), n = 0;
    int rc = 0;
    tf_blob b;
    for (uint64_t s = 0; rc >= 0 && s < nblobs; s++) {
        rc = needs_rebase(rb->ar, live, s, &b, e);
        n += rc > 0;
    }
    if (rc >= 0 && n && !(rb->items = calloc(n, sizeof *rb->items)))
        rc = tf_fail(e, ENOMEM, "out of memory for %llu chunks to rebase", (unsigned long long)n);
    for (uint64_t s = nblobs; rc >= 0 && rb->n < n && s-- > 0;) {
        rebased *it = &rb->items[rb->n];
        if ((rc = needs_rebase(rb->ar, live, s, &b, e)) > 0) {
            *it = (rebased){ .slot = s, .blob = b };
            rc = nearest_live(rb->ar, live, b.ref, &it->ref, e);
            rb->n++;
        }
    }
    free(live);
    if (rc < 0 || pair_orphans(rb, e) < 0)
        return -1;
    find_tensors(rb);
    return make_runs(rb) < 0 ? tf_fail(e, ENOMEM, "out of memory for %zu chunks to rebase", rb->n)
                             : 0;
}

/* Reconstructs slot (a blob of len bytes) into a new buffer. */
static uint8_t *reconstruct(rebase *rb, uint64_t slot, size_t len, tf_error *e)
{
    uint8_t *out = malloc(len ? len : 1);
    if (!out) {
        tf_fail(e, ENOMEM, "out of memory for a chunk of %zu bytes", len);
        return NULL;
    }
    if (tf_reader_blob(rb->reader, slot, out, e) < 0) {
        free(out);
        return NULL;
    }
    return out;
}

/* Encodes a chunk as a writer stores an earlier checkpoint's chunk once
 * a later one came (store/pipeline.h): a ULP delta against the new
 * reference (with the model shared, where given), or, where that is no
 * smaller, a keyframe. */
static int encode_rebased(tf_chunk_job *job, const uint8_t *src, const uint8_t *ref, size_t len,
                          unsigned dtype, const tf_chunk_model *shared, tf_error *e)
{
    tf_chunk_job key = { .src = src, .len = len, .dtype = dtype };
    if (tf_encode_newest_keyframe(&key, e) < 0)
        return -1;
    *job = (tf_chunk_job){ .src = src, .len = len, .dtype = dtype, .ref = ref };
    if (shared)
        job->models[TF_CODEC_ULP] = *shared;
    if (ref && tf_encode_chunk_as(job, TF_CODEC_ULP, NULL) == 0 &&
        job->out.len + (shared ? shared->share : job->model.len) <
            key.out.len + key.model.len) {
        tf_buf_free(&key.out);
        tf_buf_free(&key.model);
    } else {
        tf_buf_free(&job->out);
        tf_buf_free(&job->model);
        *job = key;
    }
    job->src = job->ref = NULL;
    return 0;
}

static void run_state_clear(run_state *rs)
{
    for (size_t k = 0; rs->jobs && k < rs->n; k++) {
        tf_buf_free(&rs->jobs[k].out);
        tf_buf_free(&rs->jobs[k].model);
    }
    for (size_t k = 0; rs->models && k < rs->n; k++)
        tf_model_blob_free(&rs->models[k]);
    free(rs->jobs);
    free(rs->models);
    tf_shared_model_free(&rs->shared);
    *rs = (run_state){ 0 };
}

/* Reconstructs a run's chunks and their new references, then encodes
 * them: the deltas of one tensor with a model they share. */
static int encode_run(rebase *rb, run_state *rs, const rebased *items, uint8_t **src,
                      uint8_t **ref, size_t *len, tf_error *e)
{
    unsigned dtype = items[0].blob.dtype;
    for (size_t k = 0; k < rs->n; k++) {
        len[k] = (size_t)items[k].blob.raw_len;
        if (!(src[k] = reconstruct(rb, items[k].slot, len[k], e)) ||
            (items[k].ref && !(ref[k] = reconstruct(rb, items[k].ref - 1, len[k], e))))
            return -1;
    }
    if (rs->n > 1)
        tf_shared_model_fit(&rs->shared, dtype, (const uint8_t *const *)src,
                            (const uint8_t *const *)ref, len, rs->n);
    for (size_t k = 0; k < rs->n; k++) {
        tf_chunk_job *job = &rs->jobs[k];
        if (encode_rebased(job, src[k], ref[k], len[k], dtype,
                           rs->shared.made ? &rs->shared.given : NULL, e) < 0 ||
            (job->model.len && tf_model_blob_make(&job->model, &rs->models[k], e) < 0))
            return -1;
        tf_buf_free(&job->model);
    }
    return 0;
}

static int rebase_work(void *arg, size_t g, tf_error *e)
{
    rebase *rb = arg;
    run_state *rs = &rb->inflight[g % rb->window];
    size_t n = rb->runs[g + 1] - rb->runs[g];
    uint8_t **src = calloc(n, sizeof *src), **ref = calloc(n, sizeof *ref);
    size_t *len = calloc(n, sizeof *len);
    *rs = (run_state){ .n = n, .jobs = calloc(n, sizeof *rs->jobs),
                       .models = calloc(n, sizeof *rs->models) };
    int rc = src && ref && len && rs->jobs && rs->models
                 ? encode_run(rb, rs, &rb->items[rb->runs[g]], src, ref, len, e)
                 : tf_fail(e, ENOMEM, "out of memory for %zu chunks to rebase", n);
    for (size_t k = 0; k < n && src && ref; k++) {
        free(src[k]);
        free(ref[k]);
    }
    free(src);
    free(ref);
    free(len);
    return rc;
}

/* Stores a chunk's encoding, and its model (its own, or the run's
 * shared one, stored with the first chunk that uses it: *shared), and
 * redirects its slot. */
static int store_rebased(rebase *rb, run_state *rs, size_t k, const rebased *it,
                         int64_t *shared, tf_error *e)
{
    const tf_blob *old = &it->blob;
    tf_chunk_job *job = &rs->jobs[k];
    const tf_model_blob *own = rs->models[k].out.len ? &rs->models[k] : NULL;
    bool uses_shared = tf_shared_model_used(&rs->shared, job);
    int64_t model = -1;
    if (own)
        model = tf_commit_store_rebased_model(rb->c, own, e);
    else if (uses_shared && *shared < 0 &&
             (*shared = tf_commit_store_rebased_model(rb->c, &rs->shared.blob, e)) >= 0)
        rb->st.bytes_after += rs->shared.blob.out.len;
    if (uses_shared)
        model = *shared;
    if ((own || uses_shared) && model < 0)
        return -1;
    uint64_t ref = tf_codec_get(job->codec)->delta ? it->ref : 0;
    if (tf_commit_redirect(rb->c, it->slot, &job->out, job->codec, ref, (uint64_t)(model + 1),
                           e) < 0)
        return -1;
    rb->st.chunks++;
    rb->st.bytes_before += old->enc_len;
    rb->st.bytes_after += job->out.len + (own ? own->out.len : 0);
    if (rb->opts->rebasing && rb->opts->progress)
        rb->opts->progress(rb->opts->progress_arg, old->raw_len);
    return 0;
}

static int rebase_sink(void *arg, size_t g, tf_error *e)
{
    rebase *rb = arg;
    run_state *rs = &rb->inflight[g % rb->window];
    int64_t shared = -1;
    int rc = 0;
    for (size_t k = 0; rc == 0 && k < rs->n; k++)
        rc = store_rebased(rb, rs, k, &rb->items[rb->runs[g] + k], &shared, e);
    run_state_clear(rs);
    return rc;
}

/* Encodes the chunks found, in one commit, on the writer's threads. */
static int rebase_commit(tf_writer *w, rebase *rb, tf_error *e)
{
    rb->window = TF_PIPELINE_WINDOW * (size_t)w->opts.threads;
    tf_pool *pool = NULL;
    if (!(rb->inflight = calloc(rb->window, sizeof *rb->inflight)))
        return tf_fail(e, ENOMEM, "out of memory");
    if (rb->nruns > 1 && tf_writer_encoders(w, &pool, e) < 0)
        return -1;
    tf_commit c;
    rb->c = &c;
    tf_writer_begin_commit(w, &c);
    int rc = tf_pool_run_ordered(pool, rb->nruns, rb->window, rebase_work, rebase_sink, rb, e);
    if (rc < 0) {
        tf_commit_abort(&c);
        return -1;
    }
    rc = tf_commit_finish(&c, e);
    tf_writer_note_give_back(w, &c.give_back);
    if (c.kept_open)
        atomic_store(&w->give_back_owed, true);
    return rc;
}

int tf_writer_rebase(tf_writer *w, tf_rebase_stats *st, tf_error *e)
{
    rebase rb = { .ar = w->ar, .reader = w->reader, .opts = &w->opts };
    int rc = find_chunks(&rb, e);
    if (rc == 0 && rb.n && w->opts.rebasing) {
        uint64_t bytes = 0;
        for (size_t i = 0; i < rb.n; i++)
            bytes += rb.items[i].blob.raw_len;
        w->opts.rebasing(w->opts.progress_arg, rb.n, bytes);
    }
    if (rc == 0 && rb.n)
        rc = rebase_commit(w, &rb, e);
    for (size_t i = 0; rb.inflight && i < rb.window; i++)
        run_state_clear(&rb.inflight[i]);
    free(rb.inflight);
    free(rb.runs);
    free(rb.items);
    if (st)
        *st = rb.st;
    return rc;
}
