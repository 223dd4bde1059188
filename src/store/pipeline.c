#include "store/pipeline.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "codec/prog/prog.h"
#include "common/idmap.h"
#include "common/dtype.h"
#include "store/encode.h"

/* A model is stored like opaque bytes: compressed when that is smaller. */
static int64_t store_model(tf_commit *c, const tf_blob_id *id, const tf_buf *model, tf_error *e)
{
    tf_chunk_job job = { .src = model->data, .len = model->len, .dtype = TF_DT_NONE };
    if (tf_encode_chunk(&job, e) < 0)
        return -1;
    int64_t idx = tf_commit_store_blob(c, id, &job.out, model->len, job.codec, TF_DT_NONE, 0, 0, e);
    tf_buf_free(&job.out);
    return idx;
}

typedef struct {
    const tf_write_opts *opts;
    tf_commit *c;
    tf_span *spans;
    size_t nspans;
    tf_chunk_job *chunks;
    size_t *chunk_span;  /* span of each chunk job */
    tf_blob_id *ids;
    uint64_t *ref_blob;  /* per chunk job: parent's chunk blob + 1, or 0 */
    uint64_t *job_blob;  /* per chunk job: the blob it was stored as */
    uint64_t *stored;    /* per chunk of the file: existing blob, when deduplicated */
    size_t *job_of;      /* per chunk of the file: job index, or SIZE_MAX */
    size_t njobs, nchunks;
    unsigned chunk_shift;
    tf_prog_prior *prior;  /* the file's production prior, or NULL */
    tf_prog_fit_opts prog; /* budget and prior of every program search */
} file_job;

static void report_progress(const tf_write_opts *o, uint64_t bytes)
{
    if (o->progress)
        o->progress(o->progress_arg, bytes);
}

/* Whether chunk c of span s may be a delta against the parent's chunk:
 * it has one, of its dtype (a chunk deduplicated against equal bytes of
 * another dtype has not), whose chain is short enough to grow by one;
 * otherwise the chunk is a keyframe. */
static bool chunk_has_ref(const file_job *f, const tf_span *s, uint64_t c)
{
    const tf_archive *ar = f->c->ar;
    return s->ref && tf_archive_blob(ar, s->ref_blobs[c])->dtype == s->dtype &&
           tf_archive_chain_depth(ar, s->ref_blobs[c]) + 1u <= f->opts->max_chain;
}

/* Marks the spans a program is synthesized for, so that the prog codec
 * competes for their chunks: tensors without a reference, those whose
 * reference is another run's (a fork's first checkpoint: such deltas
 * often lose), and those with a keyframe chunk; with opts.all_programs,
 * every one. By default,
 * tensors whose delta loses to standalone coding, as float32 Adam
 * state's does, get none: a program there is about 1% smaller than
 * bytegroup, and the prog encoder (about 25 MB/s a thread on float32)
 * makes writing five times slower. Measured with `trajpack create -T 2`
 * on the whole benchmark trajectory (33 files, 1721.4 MB; 2 loaded
 * cores):
 *   this rule                                          1271.5 MB  10.9 s
 *   + every span with a reference (all_programs)       1258.7 MB  52.9 s
 * and, with the encoder of the time (8 MB/s a thread):
 *   this rule                                          1271.1 MB  16.7 s
 *   + spans with a parent chunk that is not a delta    1256.3 MB  95.3 s
 * and on its steps 25-100, weights and optimizer files (430 MB):
 *   unreferenced spans only                   327531077 B  14.4 s
 *   + every referenced float span             324756616 B  50.0 s
 * with --max-chain 1 (step 75 a keyframe):
 *   unreferenced spans only                   333319596 B  14.5 s
 *   + keyframe spans (this rule)              331738606 B  22.4 s */
static void mark_program_spans(file_job *f)
{
    for (size_t i = 0; i < f->nspans; i++) {
        tf_span *s = &f->spans[i];
        if (s->dtype == TF_DT_NONE || !s->has_jobs)
            continue;
        bool wants = !s->ref || s->ref_far || f->opts->all_programs;
        uint64_t n = tf_chunk_count(s->nbytes, tf_dtype_get(s->dtype)->size, f->chunk_shift);
        for (uint64_t c = 0; !wants && c < n; c++)
            wants = !chunk_has_ref(f, s, c);
        s->wants_program = wants;
    }
}

/* Learns the file's production prior (codec/prog/prog.h) from a deterministic
 * sample of the tensors that get programs; it only orders their
 * searches. */
static int learn_prior(file_job *f, tf_error *e)
{
    tf_prog_tensor *t = malloc((f->nspans ? f->nspans : 1) * sizeof *t);
    if (!t)
        return tf_fail(e, ENOMEM, "out of memory");
    size_t n = 0;
    for (size_t i = 0; i < f->nspans; i++)
        if (f->spans[i].wants_program)
            t[n++] = (tf_prog_tensor){ f->spans[i].src, (size_t)f->spans[i].nbytes,
                                       f->spans[i].dtype };
    int rc = n ? tf_prog_prior_learn(t, n, &f->prior, e) : 0;
    free(t);
    f->prog = (tf_prog_fit_opts){ .budget = f->opts->prog_budget, .prior = f->prior };
    return rc;
}

static int fit_work(void *arg, size_t i, tf_error *e)
{
    (void)e;
    file_job *f = arg;
    tf_span *s = &f->spans[i];
    if (!s->has_jobs) /* stored already: nothing to fit */
        return 0;
    if (s->ref && tf_dtype_is_float(s->dtype))
        s->fitted = tf_fit_model(TF_CODEC_ULP, s->src, s->ref, s->nbytes, s->dtype, NULL,
                                 &s->model) == 0;
    /* A tensor the delta codec does not fit is stored standalone. */
    if (s->wants_program || (s->ref && !s->fitted))
        s->programmed = tf_fit_model(TF_CODEC_PROG, s->src, NULL, s->nbytes, s->dtype, &f->prog,
                                     &s->program) == 0;
    return 0;
}

static int chunk_work(void *arg, size_t i, tf_error *e)
{
    return tf_encode_chunk(&((file_job *)arg)->chunks[i], e);
}

/* True when blob idx (stored, or appended by this commit) decodes alone. */
static bool blob_stands_alone(const file_job *f, uint64_t idx)
{
    const tf_segment *seg = &f->c->seg;
    const tf_blob *b = idx >= seg->first_blob ? &seg->blobs[idx - seg->first_blob]
                                              : tf_archive_blob(f->c->ar, idx);
    return !b->ref && !b->model;
}

static int chunk_sink(void *arg, size_t i, tf_error *e)
{
    file_job *f = arg;
    tf_chunk_job *job = &f->chunks[i];
    tf_span *s = &f->spans[f->chunk_span[i]];
    uint64_t ref = 0, model = 0;
    const tf_codec *codec = tf_codec_get(job->codec);
    if (codec->needs_model) {
        if (s->model_blob < 0) {
            tf_blob_id mid = tf_blob_id_of(s->model.data, s->model.len);
            s->model_blob = tf_commit_find_blob(f->c, &mid);
            /* Same bytes stored as a delta cannot serve as a model, which
             * must decode alone. */
            if (s->model_blob >= 0 && !blob_stands_alone(f, (uint64_t)s->model_blob))
                s->model_blob = -1;
            if (s->model_blob < 0)
                s->model_blob = store_model(f->c, &mid, &s->model, e);
            if (s->model_blob < 0)
                return -1;
        }
        model = (uint64_t)s->model_blob + 1;
    }
    if (codec->delta)
        ref = f->ref_blob[i];
    int64_t idx = tf_commit_store_blob(f->c, &f->ids[i], &job->out, job->len, job->codec,
                                       (uint8_t)job->dtype, ref, model, e);
    tf_buf_free(&job->out);
    if (idx < 0)
        return -1;
    f->job_blob[i] = (uint64_t)idx;
    report_progress(f->opts, job->len);
    return 0;
}

/* Splits spans into chunks, deduplicates them by content id, and lists
 * the rest as encoding jobs (before any fitting: a tensor stored already
 * costs no search). */
static int plan_chunks(file_job *f, tf_error *e)
{
    for (size_t s = 0; s < f->nspans; s++)
        f->nchunks += tf_chunk_count(f->spans[s].nbytes, tf_dtype_get(f->spans[s].dtype)->size,
                                     f->chunk_shift);
    size_t n = f->nchunks ? f->nchunks : 1;
    f->chunks = calloc(n, sizeof *f->chunks);
    f->chunk_span = calloc(n, sizeof *f->chunk_span);
    f->ids = calloc(n, sizeof *f->ids);
    f->ref_blob = calloc(n, sizeof *f->ref_blob);
    f->job_blob = calloc(n, sizeof *f->job_blob);
    f->stored = calloc(n, sizeof *f->stored);
    f->job_of = calloc(n, sizeof *f->job_of);
    if (!f->chunks || !f->chunk_span || !f->ids || !f->ref_blob || !f->job_blob || !f->stored ||
        !f->job_of)
        return tf_fail(e, ENOMEM, "out of memory");
    tf_idmap in_file = { 0 }; /* first job of each new content */
    size_t k = 0;
    for (size_t s = 0; s < f->nspans; s++) {
        tf_span *sp = &f->spans[s];
        uint64_t cb = (uint64_t)tf_dtype_get(sp->dtype)->size << f->chunk_shift;
        for (uint64_t off = 0; off < sp->nbytes; off += cb, k++) {
            size_t len = (size_t)(sp->nbytes - off < cb ? sp->nbytes - off : cb);
            tf_blob_id id = tf_blob_id_of(sp->src + off, len);
            int64_t have = tf_commit_find_blob(f->c, &id);
            uint64_t first;
            if (have >= 0) {
                f->stored[k] = (uint64_t)have;
                f->job_of[k] = SIZE_MAX;
                report_progress(f->opts, len);
                continue;
            }
            if (tf_idmap_get(&in_file, &id, &first)) { /* same content earlier in this file */
                f->job_of[k] = first;
                continue;
            }
            size_t j = f->njobs++;
            if (tf_idmap_put(&in_file, &id, j) < 0) {
                tf_idmap_free(&in_file);
                return tf_fail(e, ENOMEM, "out of memory");
            }
            f->job_of[k] = j;
            f->ids[j] = id;
            f->chunk_span[j] = s;
            f->chunks[j] = (tf_chunk_job){ .src = sp->src + off, .len = len, .dtype = sp->dtype };
            sp->has_jobs = true;
        }
    }
    tf_idmap_free(&in_file);
    return 0;
}

/* Gives each encoding job what its span's fits found: the program
 * template, and the delta model and reference where the chunk has one. */
static void attach_fits(file_job *f)
{
    for (size_t j = 0; j < f->njobs; j++) {
        tf_chunk_job *job = &f->chunks[j];
        const tf_span *sp = &f->spans[f->chunk_span[j]];
        size_t off = (size_t)(job->src - sp->src);
        uint64_t n = tf_chunk_count(sp->nbytes, tf_dtype_get(sp->dtype)->size, f->chunk_shift);
        uint64_t c = off / ((size_t)tf_dtype_get(sp->dtype)->size << f->chunk_shift);
        if (sp->programmed)
            job->models[TF_CODEC_PROG] =
                (tf_chunk_model){ sp->program.data, sp->program.len, sp->program.len / (size_t)n };
        if (sp->fitted && chunk_has_ref(f, sp, c)) {
            job->ref = sp->ref + off;
            job->models[TF_CODEC_ULP] =
                (tf_chunk_model){ sp->model.data, sp->model.len, sp->model.len / (size_t)n };
            f->ref_blob[j] = sp->ref_blobs[c] + 1;
        }
    }
}

static void file_job_free(file_job *f)
{
    for (size_t j = 0; j < f->njobs; j++)
        tf_buf_free(&f->chunks[j].out);
    for (size_t s = 0; s < f->nspans; s++) {
        tf_buf_free(&f->spans[s].model);
        tf_buf_free(&f->spans[s].program);
    }
    free(f->chunks);
    free(f->chunk_span);
    free(f->ids);
    free(f->ref_blob);
    free(f->job_blob);
    free(f->stored);
    free(f->job_of);
    tf_prog_prior_free(f->prior);
}

int tf_encode_spans(tf_commit *c, const tf_write_opts *opts, tf_entry *ent, tf_span *spans,
                    size_t nspans, tf_error *e)
{
    for (size_t i = 0; i < nspans; i++)
        spans[i].model_blob = -1;
    file_job f = { .opts = opts, .c = c, .spans = spans, .nspans = nspans,
                   .chunk_shift = tf_archive_chunk_shift(c->ar) };
    unsigned t = opts->threads;
    int rc = plan_chunks(&f, e);
    if (rc == 0) {
        mark_program_spans(&f);
        rc = learn_prior(&f, e);
    }
    if (rc == 0)
        rc = tf_run_ordered(nspans, t, nspans, fit_work, NULL, &f, e);
    if (rc == 0)
        attach_fits(&f);
    /* Window: enough jobs in flight to keep every thread busy, few enough
     * that finished chunks waiting for the writer stay small. */
    if (rc == 0)
        rc = tf_run_ordered(f.njobs, t, 4 * (size_t)t, chunk_work, chunk_sink, &f, e);
    if (rc == 0) {
        ent->nchunks = f.nchunks;
        ent->chunks = malloc((f.nchunks ? f.nchunks : 1) * sizeof *ent->chunks);
        if (!ent->chunks)
            rc = tf_fail(e, ENOMEM, "out of memory");
        for (size_t k = 0; rc == 0 && k < f.nchunks; k++)
            ent->chunks[k] = f.job_of[k] == SIZE_MAX ? f.stored[k] : f.job_blob[f.job_of[k]];
    }
    file_job_free(&f);
    return rc;
}

