#include "store/rebase.h"

#include <errno.h>
#include <stdlib.h>

#include "common/pool.h"
#include "store/encode.h"
#include "store/liveness.h"
#include "store/writer_impl.h"

/* One chunk to re-encode: its slot, and the new reference (slot + 1, 0
 * for none). */
typedef struct {
    uint64_t slot;
    uint64_t ref;
} rebased;

typedef struct {
    tf_archive *ar;
    tf_reader_ctx *reader;
    tf_commit *c;
    rebased *items;
    size_t n;
    /* The encodings in flight: chunk i's is jobs[i % window] (the pool
     * starts a chunk at most window ahead of the one being stored). */
    tf_chunk_job *jobs;
    size_t window;
    const tf_write_opts *opts; /* its rebasing and progress hooks */
    tf_rebase_stats st;
} rebase;

/* The nearest slot down a reference chain from ref (+ 1) that a live
 * file has as a chunk (+ 1), or 0 when the chain has none. */
static uint64_t nearest_live(const tf_archive *ar, const uint8_t *live, uint64_t ref)
{
    for (unsigned steps = 0; ref && steps <= TF_CHAIN_MAX; steps++) {
        if (live[ref - 1] & TF_LIVE_CHUNK)
            return ref;
        ref = tf_archive_blob(ar, ref - 1)->ref;
    }
    return 0;
}

/* Whether slot s is a live file's chunk, a delta against a slot that is
 * no live file's chunk, and may be redirected. */
static bool needs_rebase(const tf_archive *ar, const uint8_t *live, uint64_t s)
{
    if (!(live[s] & TF_LIVE_CHUNK))
        return false;
    uint64_t ref = tf_archive_blob(ar, s)->ref;
    bool again;
    return ref && !(live[ref - 1] & TF_LIVE_CHUNK) && tf_archive_may_redirect(ar, s, &again);
}

/* The chunks to re-encode, newest slot first: a chunk's old chain then
 * runs through chunks just decoded, which the reader's cache holds. */
static int find_chunks(rebase *rb, tf_error *e)
{
    uint8_t *live = tf_liveness(rb->ar, NULL, e);
    if (!live)
        return -1;
    uint64_t nblobs = tf_archive_nblobs(rb->ar), n = 0;
    for (uint64_t s = 0; s < nblobs; s++)
        n += needs_rebase(rb->ar, live, s);
    if (n && !(rb->items = calloc(n, sizeof *rb->items))) {
        free(live);
        return tf_fail(e, ENOMEM, "out of memory for %llu chunks to rebase",
                       (unsigned long long)n);
    }
    for (uint64_t s = nblobs; s-- > 0;)
        if (needs_rebase(rb->ar, live, s))
            rb->items[rb->n++] = (rebased){
                .slot = s, .ref = nearest_live(rb->ar, live, tf_archive_blob(rb->ar, s)->ref) };
    free(live);
    return 0;
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

/* Encodes chunk i as a writer stores an earlier checkpoint's chunk once
 * a later one came (store/pipeline.h): a ULP delta against the new
 * reference, or, where that is no smaller, a keyframe. */
static int encode_rebased(tf_chunk_job *job, const uint8_t *src, const uint8_t *ref, size_t len,
                          unsigned dtype, tf_error *e)
{
    tf_chunk_job key = { .src = src, .len = len, .dtype = dtype };
    if (tf_encode_newest_keyframe(&key, e) < 0)
        return -1;
    *job = (tf_chunk_job){ .src = src, .len = len, .dtype = dtype, .ref = ref };
    if (ref && tf_encode_chunk_as(job, TF_CODEC_ULP, NULL) == 0 &&
        job->out.len + job->model.len < key.out.len + key.model.len) {
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

static int rebase_work(void *arg, size_t i, tf_error *e)
{
    rebase *rb = arg;
    rebased *it = &rb->items[i];
    const tf_blob *b = tf_archive_blob(rb->ar, it->slot);
    size_t len = (size_t)b->raw_len;
    uint8_t *src = reconstruct(rb, it->slot, len, e);
    uint8_t *ref = src && it->ref ? reconstruct(rb, it->ref - 1, len, e) : NULL;
    int rc = src && (ref || !it->ref)
                 ? encode_rebased(&rb->jobs[i % rb->window], src, ref, len, b->dtype, e)
                 : -1;
    free(src);
    free(ref);
    return rc;
}

/* Stores chunk i's encoding, and its model, and redirects its slot. */
static int rebase_sink(void *arg, size_t i, tf_error *e)
{
    rebase *rb = arg;
    const rebased *it = &rb->items[i];
    const tf_blob *old = tf_archive_blob(rb->ar, it->slot);
    tf_chunk_job *job = &rb->jobs[i % rb->window];
    int64_t model = job->model.len ? tf_commit_store_rebased_model(rb->c, &job->model, e) : -1;
    int rc = job->model.len && model < 0 ? -1 : 0;
    uint64_t ref = tf_codec_get(job->codec)->delta ? it->ref : 0;
    if (rc == 0)
        rc = tf_commit_redirect(rb->c, it->slot, &job->out, job->codec, ref,
                                (uint64_t)(model + 1), e);
    if (rc == 0) {
        rb->st.chunks++;
        rb->st.bytes_before += old->enc_len;
        rb->st.bytes_after += job->out.len + job->model.len;
        if (rb->opts->rebasing && rb->opts->progress)
            rb->opts->progress(rb->opts->progress_arg, old->raw_len);
    }
    tf_buf_free(&job->out);
    tf_buf_free(&job->model);
    return rc;
}

/* Encodes the chunks found, in one commit, on the writer's threads. */
static int rebase_commit(tf_writer *w, rebase *rb, tf_error *e)
{
    rb->window = TF_PIPELINE_WINDOW * (size_t)w->opts.threads;
    tf_pool *pool = NULL;
    if (!(rb->jobs = calloc(rb->window, sizeof *rb->jobs)))
        return tf_fail(e, ENOMEM, "out of memory");
    if (rb->n > 1 && tf_writer_encoders(w, &pool, e) < 0)
        return -1;
    tf_commit c;
    rb->c = &c;
    tf_writer_begin_commit(w, &c);
    int rc = tf_pool_run_ordered(pool, rb->n, rb->window, rebase_work, rebase_sink, rb, e);
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
            bytes += tf_archive_blob(rb.ar, rb.items[i].slot)->raw_len;
        w->opts.rebasing(w->opts.progress_arg, rb.n, bytes);
    }
    if (rc == 0 && rb.n)
        rc = rebase_commit(w, &rb, e);
    for (size_t i = 0; rb.jobs && i < rb.window; i++) {
        tf_buf_free(&rb.jobs[i].out);
        tf_buf_free(&rb.jobs[i].model);
    }
    free(rb.jobs);
    free(rb.items);
    if (st)
        *st = rb.st;
    return rc;
}
