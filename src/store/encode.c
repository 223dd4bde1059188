#include "store/encode.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "codec/sample.h"
#include "common/dtype.h"

typedef struct {
    const tf_codec *codec;
    tf_codec_ctx ctx;
    size_t charge;   /* what the chunk pays besides its encoding: its share
                        of a tensor model stored for it */
    bool fit_encode; /* fits a model it needs on the chunk as it encodes */
    tf_buf model;    /* a model fitted on the chunk */
    size_t estimate;
} candidate;

/* Whether codec competes for the job's chunk: the job has what the codec
 * needs, which goes into c->ctx. A codec that fits the chunk itself for a
 * model that only guides its encoding fits it here. */
static bool competes(const tf_codec *codec, const tf_chunk_job *job, candidate *c)
{
    *c = (candidate){ .codec = codec, .ctx = { .dtype = job->dtype }, .estimate = SIZE_MAX };
    if (!codec->delta && !codec->fit)
        return codec->standalone_for && codec->standalone_for(job->dtype);
    if (codec->delta) {
        if (!job->ref)
            return false;
        c->ctx.ref = job->ref;
        c->ctx.ref_len = job->len;
    }
    if (!codec->fit)
        return true;
    const tf_chunk_model *m = &job->models[codec->id];
    if (m->data) {
        c->ctx.model = m->data;
        c->ctx.model_len = m->len;
        c->ctx.prepared = m->prepared;
        c->charge = codec->needs_model ? m->share : 0;
        return true;
    }
    if (!job->fit_chunk[codec->id])
        return false;
    c->ctx.fit_opts = job->fit_opts[codec->id];
    if (codec->needs_model) {
        c->fit_encode = true;
        return true;
    }
    /* A codec that does not fit this chunk does not apply to it. */
    if (codec->fit(job->src, job->len, &c->ctx, &c->model, NULL) < 0)
        return false;
    c->ctx.model = c->model.data;
    c->ctx.model_len = c->model.len;
    return true;
}

static bool decodes_alone(const candidate *c)
{
    return !c->codec->delta && !c->codec->needs_model;
}

/* Whether an encoding of this cost beats the best so far: it is smaller,
 * or as small and decodes alone where the best does not (it is read
 * without decoding a reference, and keeps no reference or model alive). */
static bool beats(size_t cost, const candidate *c, size_t best_cost, const candidate *best)
{
    return !best || cost < best_cost ||
           (cost == best_cost && decodes_alone(c) && !decodes_alone(best));
}

/* Encodes the chunk with candidate c into out (and the model it fits on
 * the chunk into model); its cost in *cost. */
static int encode_with(candidate *c, const tf_chunk_job *job, tf_buf *out, tf_buf *model,
                       size_t *cost, tf_error *e)
{
    const tf_codec *codec = c->codec;
    out->len = 0;
    model->len = 0;
    int rc;
    if (!c->fit_encode) {
        rc = codec->encode(job->src, job->len, &c->ctx, out, e);
    } else if (codec->fit_encode) {
        rc = codec->fit_encode(job->src, job->len, &c->ctx, model, out, e);
    } else {
        tf_codec_ctx with = c->ctx;
        rc = codec->fit(job->src, job->len, &c->ctx, model, e);
        with.model = model->data;
        with.model_len = model->len;
        if (rc == 0)
            rc = codec->encode(job->src, job->len, &with, out, e);
    }
    *cost = out->len + c->charge + (c->fit_encode ? model->len : 0);
    return rc;
}

/* Whether the chunk is chosen for by estimates: asked for, and larger
 * than its sample (a smaller one costs about as little to encode as to
 * estimate). */
static bool estimating(const tf_chunk_job *job)
{
    const tf_dtype_info *d = tf_dtype_get(job->dtype);
    return job->estimate && d && job->len / d->size > TF_SAMPLE_MAX;
}

/* Leaves the candidates worth encoding, those whose estimates are close
 * to the least or unknown, in increasing estimate: returns how many. */
static unsigned prune(const tf_chunk_job *job, candidate *cand, unsigned n)
{
    size_t least = SIZE_MAX;
    for (unsigned i = 0; i < n; i++) {
        const tf_codec *codec = cand[i].codec;
        if (codec->estimate) {
            size_t est = codec->estimate(job->src, job->len, &cand[i].ctx);
            cand[i].estimate = est == SIZE_MAX || est > SIZE_MAX - cand[i].charge
                                   ? SIZE_MAX : est + cand[i].charge;
        }
        least = cand[i].estimate < least ? cand[i].estimate : least;
    }
    unsigned kept = 0;
    for (unsigned i = 0; i < n; i++) {
        bool close = cand[i].estimate == SIZE_MAX ||
                     cand[i].estimate - least <= least / TF_ESTIMATE_SLACK;
        if (close)
            cand[kept++] = cand[i];
        else
            tf_buf_free(&cand[i].model);
    }
    for (unsigned i = 1; i < kept; i++) /* by estimate, ties by codec id */
        for (unsigned j = i; j > 0 && cand[j].estimate < cand[j - 1].estimate; j--) {
            candidate t = cand[j];
            cand[j] = cand[j - 1];
            cand[j - 1] = t;
        }
    return kept;
}

int tf_encode_chunk(tf_chunk_job *job, tf_error *e)
{
    candidate cand[TF_CODEC_COUNT];
    unsigned n = 0;
    for (unsigned id = 0; id < TF_CODEC_COUNT; id++) {
        const tf_codec *codec = tf_codec_get(id);
        if (codec && competes(codec, job, &cand[n]))
            n++;
    }
    if (estimating(job))
        n = prune(job, cand, n);
    tf_buf best = { 0 }, best_model = { 0 }, out = { 0 }, model = { 0 };
    const candidate *winner = NULL;
    size_t best_cost = 0;
    tf_error why = { .msg = "no codec applies" };
    for (unsigned i = 0; i < n; i++) {
        size_t cost;
        /* A codec that fails does not apply; raw, which competes for every
         * chunk, fails only when memory does. */
        if (encode_with(&cand[i], job, &out, &model, &cost, &why) < 0 ||
            !beats(cost, &cand[i], best_cost, winner))
            continue;
        tf_buf t = best;
        best = out;
        out = t;
        t = best_model;
        best_model = model;
        model = t;
        best_cost = cost;
        winner = &cand[i];
    }
    tf_buf_free(&out);
    tf_buf_free(&model);
    for (unsigned i = 0; i < n; i++)
        tf_buf_free(&cand[i].model);
    if (!winner) {
        tf_buf_free(&best_model);
        *e = why;
        return -1;
    }
    job->codec = winner->codec->id;
    tf_buf_free(&job->out); /* an earlier encode's (the newest's keyframe) */
    job->out = best;
    if (!winner->fit_encode)
        tf_buf_free(&best_model);
    tf_buf_free(&job->model);
    job->model = best_model;
    return 0;
}

int tf_fit_model(unsigned codec, const uint8_t *src, const uint8_t *ref, size_t len,
                 unsigned dtype, const void *opts, tf_buf *model)
{
    const tf_codec *c = tf_codec_get(codec);
    tf_codec_ctx ctx = { .dtype = dtype, .ref = ref, .ref_len = ref ? len : 0,
                         .fit_opts = opts };
    model->len = 0;
    return c && c->fit ? c->fit(src, len, &ctx, model, NULL) : -1;
}

/* What codec `codec` gets for the job: its reference, and the model it
 * is given (none: data NULL). */
static tf_codec_ctx given_ctx(const tf_chunk_job *job, unsigned codec)
{
    const tf_chunk_model *given = &job->models[codec];
    return (tf_codec_ctx){ .dtype = job->dtype, .ref = job->ref,
                           .ref_len = job->ref ? job->len : 0, .model = given->data,
                           .model_len = given->len, .prepared = given->prepared };
}

int tf_encode_chunk_as(tf_chunk_job *job, unsigned codec, tf_error *e)
{
    const tf_codec *c = tf_codec_get(codec);
    job->out.len = 0;
    job->model.len = 0;
    bool fits = c && c->needs_model && !job->models[codec].data;
    if (!c || c->delta != (job->ref != NULL) || (fits && !c->fit_encode))
        return tf_fail(e, EINVAL, "codec %u does not apply to the chunk", codec);
    tf_codec_ctx ctx = given_ctx(job, codec);
    int rc = fits ? c->fit_encode(job->src, job->len, &ctx, &job->model, &job->out, e)
                  : c->encode(job->src, job->len, &ctx, &job->out, e);
    if (rc < 0)
        return -1;
    job->codec = (uint8_t)codec;
    return 0;
}

void tf_encode_chunk_pair_as(tf_chunk_job *const jobs[2], unsigned codec, int rc[2])
{
    const tf_codec *c = tf_codec_get(codec);
    const tf_chunk_model *m[2] = { c ? &jobs[0]->models[codec] : NULL,
                                   c ? &jobs[1]->models[codec] : NULL };
    if (c && c->encode_pair && c->delta && jobs[0]->ref && jobs[1]->ref && m[0]->data &&
        m[0]->data == m[1]->data && m[0]->prepared == m[1]->prepared &&
        jobs[0]->dtype == jobs[1]->dtype) {
        tf_codec_ctx ctx[2];
        for (unsigned j = 0; j < 2; j++) {
            ctx[j] = given_ctx(jobs[j], codec);
            jobs[j]->out.len = jobs[j]->model.len = 0;
        }
        const uint8_t *const src[2] = { jobs[0]->src, jobs[1]->src };
        const size_t len[2] = { jobs[0]->len, jobs[1]->len };
        const tf_codec_ctx *const cp[2] = { &ctx[0], &ctx[1] };
        tf_buf *const out[2] = { &jobs[0]->out, &jobs[1]->out };
        if (c->encode_pair(src, len, cp, out, NULL) == 0) {
            jobs[0]->codec = jobs[1]->codec = (uint8_t)codec;
            rc[0] = rc[1] = 0;
            return;
        }
    }
    for (unsigned j = 0; j < 2; j++)
        rc[j] = tf_encode_chunk_as(jobs[j], codec, NULL);
}

int tf_encode_newest_keyframe(tf_chunk_job *job, tf_error *e)
{
    const uint8_t *ref = job->ref;
    job->ref = NULL;
    int rc = tf_encode_chunk_as(job, tf_codec_newest_keyframe((uint8_t)job->dtype), NULL);
    if (rc < 0 || job->out.len >= job->len)
        rc = tf_encode_chunk_as(job, TF_CODEC_RAW, e);
    job->ref = ref;
    return rc;
}
