#include "store/encode.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

/* ---- codec choice ---- */

/* Whether codec competes for the job's chunk: the job has what the codec
 * needs, which goes into *ctx. *charge gets what the chunk pays besides
 * its encoding, its share of a model stored for it. */
static bool competes(const tf_codec *codec, const tf_chunk_job *job, tf_codec_ctx *ctx,
                     size_t *charge)
{
    *ctx = (tf_codec_ctx){ .dtype = job->dtype };
    *charge = 0;
    if (!codec->delta && !codec->fit)
        return codec->standalone_for && codec->standalone_for(job->dtype);
    if (codec->delta) {
        if (!job->ref)
            return false;
        ctx->ref = job->ref;
        ctx->ref_len = job->len;
    }
    if (codec->fit) {
        const tf_chunk_model *m = &job->models[codec->id];
        if (!m->data)
            return false;
        ctx->model = m->data;
        ctx->model_len = m->len;
        *charge = codec->needs_model ? m->share : 0;
    }
    return true;
}

static bool decodes_alone(const tf_codec *codec)
{
    return !codec->delta && !codec->needs_model;
}

/* Whether an encoding of this cost beats the best so far: it is smaller,
 * or as small and decodes alone where the best does not (it is read
 * without decoding a reference, and keeps no reference or model alive). */
static bool beats(size_t cost, const tf_codec *codec, size_t best_cost, const tf_codec *best)
{
    return !best || cost < best_cost ||
           (cost == best_cost && decodes_alone(codec) && !decodes_alone(best));
}

int tf_encode_chunk(tf_chunk_job *job, tf_error *e)
{
    tf_buf best = { 0 }, cand = { 0 };
    const tf_codec *best_codec = NULL;
    size_t best_cost = 0;
    tf_error why = { .msg = "no codec applies" };
    for (unsigned id = 0; id < TF_CODEC_COUNT; id++) {
        const tf_codec *codec = tf_codec_get(id);
        tf_codec_ctx ctx;
        size_t charge;
        if (!codec || !competes(codec, job, &ctx, &charge))
            continue;
        /* A codec that fails does not apply; raw, which competes for every
         * chunk, fails only when memory does. */
        cand.len = 0;
        if (codec->encode(job->src, job->len, &ctx, &cand, &why) < 0)
            continue;
        if (beats(cand.len + charge, codec, best_cost, best_codec)) {
            tf_buf t = best;
            best = cand;
            cand = t;
            best_cost = best.len + charge;
            best_codec = codec;
        }
    }
    tf_buf_free(&cand);
    if (!best_codec) {
        *e = why;
        return -1;
    }
    job->codec = best_codec->id;
    job->out = best;
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

/* ---- ordered parallel execution ---- */

enum { JOB_WAITING, JOB_RUNNING, JOB_DONE, JOB_FAILED };

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    size_t n, window, next, sunk;
    bool stop;
    unsigned char *state;
    tf_error *errors; /* per job */
    int (*work)(void *, size_t, tf_error *);
    void *arg;
} pool;

static void *worker(void *p)
{
    pool *pl = p;
    pthread_mutex_lock(&pl->lock);
    for (;;) {
        while (!pl->stop && pl->next < pl->n && pl->next >= pl->sunk + pl->window)
            pthread_cond_wait(&pl->changed, &pl->lock);
        if (pl->stop || pl->next >= pl->n)
            break;
        size_t i = pl->next++;
        pl->state[i] = JOB_RUNNING;
        pthread_mutex_unlock(&pl->lock);
        int rc = pl->work(pl->arg, i, &pl->errors[i]);
        pthread_mutex_lock(&pl->lock);
        pl->state[i] = rc == 0 ? JOB_DONE : JOB_FAILED;
        pthread_cond_broadcast(&pl->changed);
    }
    pthread_mutex_unlock(&pl->lock);
    return NULL;
}

static int sink_in_order(pool *pl, int (*sink)(void *, size_t, tf_error *), tf_error *e)
{
    for (size_t i = 0; i < pl->n; i++) {
        pthread_mutex_lock(&pl->lock);
        while (pl->state[i] == JOB_WAITING || pl->state[i] == JOB_RUNNING)
            pthread_cond_wait(&pl->changed, &pl->lock);
        bool failed = pl->state[i] == JOB_FAILED;
        pthread_mutex_unlock(&pl->lock);
        if (failed) {
            *e = pl->errors[i];
            return -1;
        }
        if (sink && sink(pl->arg, i, e) < 0)
            return -1;
        pthread_mutex_lock(&pl->lock);
        pl->sunk = i + 1;
        pthread_cond_broadcast(&pl->changed);
        pthread_mutex_unlock(&pl->lock);
    }
    return 0;
}

int tf_run_ordered(size_t n, unsigned threads, size_t window,
                   int (*work)(void *arg, size_t i, tf_error *e),
                   int (*sink)(void *arg, size_t i, tf_error *e), void *arg, tf_error *e)
{
    if (n == 0)
        return 0;
    pool pl = { .n = n, .window = window ? window : 1, .work = work, .arg = arg };
    pl.state = calloc(n, 1);
    pl.errors = calloc(n, sizeof *pl.errors);
    pthread_t *tids = calloc(threads, sizeof *tids);
    if (!pl.state || !pl.errors || !tids) {
        free(pl.state);
        free(pl.errors);
        free(tids);
        return tf_fail(e, ENOMEM, "out of memory");
    }
    pthread_mutex_init(&pl.lock, NULL);
    pthread_cond_init(&pl.changed, NULL);
    unsigned started = 0;
    while (started < threads && pthread_create(&tids[started], NULL, worker, &pl) == 0)
        started++;
    int rc = started ? sink_in_order(&pl, sink, e) : tf_fail(e, EAGAIN, "cannot start threads");
    pthread_mutex_lock(&pl.lock);
    pl.stop = true;
    pthread_cond_broadcast(&pl.changed);
    pthread_mutex_unlock(&pl.lock);
    for (unsigned t = 0; t < started; t++)
        pthread_join(tids[t], NULL);
    pthread_cond_destroy(&pl.changed);
    pthread_mutex_destroy(&pl.lock);
    free(pl.state);
    free(pl.errors);
    free(tids);
    return rc;
}
