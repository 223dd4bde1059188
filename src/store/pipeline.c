#include "store/pipeline.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "common/dtype.h"
#include "common/pool.h"
#include "store/encode.h"
#include "store/shared_model.h"

/* Chunks are worked on in groups of up to this many bytes (or one
 * chunk): a read and a job for each chunk of 2^10 elements cost more
 * than coding it. */
#define GROUP_BYTES ((size_t)64 << 10)

/* A chunk of the file, from its read to its store. */
typedef struct {
    size_t span;
    uint64_t index; /* within its span */
    uint64_t off;   /* within its span's bytes */
    size_t len;
    uint8_t *data;  /* its bytes, from its read until the sink is done */
    tf_blob_id id;
    bool hashed;
    bool stored;    /* its content is in the archive already */
    uint64_t ref_blob; /* parent's chunk blob + 1 when encoded against it */
    uint8_t *ref_data; /* the parent's chunk, read ahead for a shared model */
    tf_chunk_job job;
    tf_model_blob model; /* job's model, ready to store (raw_len 0: none) */
    /* The reference's keyframe chunk (slot + 1, or 0), superseded by
     * this one: re-encoded in rev as a delta against the chunk before it
     * (rev_ref, its blob + 1: a forward delta) or against this chunk
     * (rev_ref 0: a reverse delta). */
    uint64_t rev_slot, rev_ref;
    /* The keyframe's bytes and those its delta is against (NULL: this
     * chunk's), from encode_chunk until encode_superseded_group. */
    uint8_t *rev_src, *rev_against;
    tf_chunk_job rev;
    tf_model_blob rev_model;
    uint64_t blob;  /* the blob that holds it */
} chunk;

typedef struct {
    const tf_write_opts *opts;
    tf_commit *c;
    const tf_source *src;
    tf_reader_ctx *reader;
    tf_seeds *seeds;
    tf_span *spans;
    size_t nspans;
    chunk *chunks;
    size_t nchunks;
    /* The jobs: group g is chunks [groups[g], groups[g + 1]). */
    size_t *groups;
    size_t ngroups;
    size_t largest_group; /* its bytes */
    unsigned chunk_shift;
    tf_pool *pool;         /* the encoder's threads; NULL: the calling one */
    /* The deltas of superseded keyframes, encoded, stored once their
     * buffers take tf_write_opts_held_bytes or the file ends
     * (flush_superseded). */
    struct pending_delta {
        uint64_t slot, ref; /* the slot redirected; its reference */
        uint8_t codec;
        tf_buf out;
        tf_model_blob model;
    } *deltas;
    size_t ndeltas, deltas_cap;
    size_t deltas_bytes;
    /* By codec id, for the codecs with a search: the options of every
     * fit (sampled without opts->search; with it, the prior learned from
     * the file's tensors, freed with the file). */
    tf_search_opts search_opts[TF_CODEC_COUNT];
} file_job;

static void report_progress(const tf_write_opts *o, uint64_t bytes)
{
    if (o->progress)
        o->progress(o->progress_arg, bytes);
}

static unsigned elem_size(const tf_span *s)
{
    return tf_dtype_get(s->dtype)->size;
}

/* ---- reading ---- */

/* len bytes at off of the span's bytes into out. */
static int read_span(const file_job *f, const tf_span *s, uint64_t off, size_t len,
                     uint8_t *out, tf_error *e)
{
    if (!s->verbatim)
        return tf_source_read(f->src, s->file_off + off, out, len, e);
    const tf_entry *ent = s->verbatim;
    for (uint64_t i = 0; i < ent->npieces && len; i++) {
        const tf_piece *p = &ent->pieces[i];
        if (p->tensor != TF_PIECE_VERBATIM || off >= p->verbatim_off + p->len)
            continue;
        uint64_t in = off - p->verbatim_off;
        size_t n = p->len - in < len ? (size_t)(p->len - in) : len;
        if (tf_source_read(f->src, p->file_off + in, out, n, e) < 0)
            return -1;
        out += n;
        off += n;
        len -= n;
    }
    return len ? tf_fail(e, EIO, "%s: verbatim pieces end early", f->src->name) : 0;
}

/* Chunk ch's id, the first time its bytes are read. */
static void identify(file_job *f, chunk *ch)
{
    if (ch->hashed)
        return;
    ch->id = tf_blob_id_of(ch->data, ch->len);
    /* The archive does not change while a file is encoded: its blobs may
     * be looked up from any thread. */
    ch->stored = tf_archive_find_blob(f->c->ar, &ch->id) >= 0;
    ch->hashed = true;
}

/* A new buffer for chunk ch's bytes, from the heap, which the blocks
 * freed by the chunks done (or by the cache, evicting the last file's)
 * come back to: a block reused costs no page faults. */
static int alloc_chunk(chunk *ch, tf_error *e)
{
    if (!(ch->data = malloc(ch->len ? ch->len : 1)))
        return tf_fail(e, ENOMEM, "out of memory for a chunk of %zu bytes", ch->len);
    return 0;
}

/* Reads chunk ch's bytes (and its id, the first time). */
static int read_chunk(file_job *f, chunk *ch, tf_error *e)
{
    if (alloc_chunk(ch, e) < 0 || read_span(f, &f->spans[ch->span], ch->off, ch->len, ch->data, e) < 0)
        return -1;
    identify(f, ch);
    return 0;
}

/* Where chunk ch lies in the file; its span's bytes are not verbatim
 * pieces. */
static uint64_t file_off_of(const file_job *f, const chunk *ch)
{
    return f->spans[ch->span].file_off + ch->off;
}

/* Whether chunk ch may join the group of the chunk before it, grown to
 * group_bytes: both in one span, or at the end and the start of spans
 * that follow each other in the file (tensors, back to back). */
static bool joins_group(const file_job *f, const chunk *ch, size_t group_bytes)
{
    const chunk *prev = ch - 1;
    if (group_bytes + ch->len > GROUP_BYTES)
        return false;
    if (prev->span == ch->span)
        return true;
    return !f->spans[prev->span].verbatim && !f->spans[ch->span].verbatim &&
           file_off_of(f, prev) + prev->len == file_off_of(f, ch);
}

/* Reads the chunks of group g, consecutive bytes of the file or of a
 * span, in one read. */
static int read_group(file_job *f, size_t g, tf_error *e)
{
    chunk *first = &f->chunks[f->groups[g]], *end = &f->chunks[f->groups[g + 1]];
    if (end - first == 1)
        return read_chunk(f, first, e);
    const tf_span *s = &f->spans[first->span];
    size_t len = 0;
    for (const chunk *ch = first; ch < end; ch++)
        len += ch->len;
    uint8_t *bytes = malloc(len);
    if (!bytes)
        return tf_fail(e, ENOMEM, "out of memory for %zu bytes of chunks", len);
    int rc = s->verbatim ? read_span(f, s, first->off, len, bytes, e)
                         : tf_source_read(f->src, file_off_of(f, first), bytes, len, e);
    size_t at = 0;
    for (chunk *ch = first; rc == 0 && ch < end; at += ch->len, ch++)
        if ((rc = alloc_chunk(ch, e)) == 0) {
            memcpy(ch->data, bytes + at, ch->len);
            identify(f, ch);
        }
    free(bytes);
    return rc;
}

/* ---- encoding ---- */

/* The choices of references below take the safe way where a blob's
 * record cannot be read: a keyframe, or no delta; the read that needs
 * the record reports it. */

/* Whether chunk c of span s may be a delta against the parent's chunk:
 * it has one, of its dtype (a chunk deduplicated against equal bytes of
 * another dtype has not), whose chain is short enough to grow by one;
 * otherwise the chunk is a keyframe. */
static bool chunk_has_ref(const file_job *f, const tf_span *s, uint64_t c)
{
    const tf_archive *ar = f->c->ar;
    tf_blob ref;
    tf_error ignored;
    return s->ref_blobs && !s->newest &&
           tf_archive_blob(ar, s->ref_blobs[c], &ref, &ignored) == 0 && ref.dtype == s->dtype &&
           tf_archive_chain_depth(ar, s->ref_blobs[c]) + 1u <= f->opts->max_chain;
}

/* Whether the chain from blob idx down to its keyframe passes slot. */
static bool chain_passes(const tf_archive *ar, uint64_t idx, uint64_t slot)
{
    for (unsigned steps = 0; steps <= TF_CHAIN_MAX; steps++) {
        tf_blob b;
        tf_error ignored;
        if (idx == slot || tf_archive_blob(ar, idx, &b, &ignored) < 0)
            return true;
        if (!b.ref)
            return false;
        idx = b.ref - 1;
    }
    return true; /* longer than any applied chain: never taken */
}

/* Chunk ch of span s is a keyframe of the newest checkpoint; its
 * reference, the newest so far's chunk, is superseded when it is a
 * keyframe of the same dtype and other content. It becomes a delta,
 * within the chain bound N:
 *   forward, against the chunk before it (s->prev_blobs), where that
 *   chunk's chain does not pass the reference (it is no reverse delta
 *   against it) and, grown by the reference and the chains ending at
 *   the reference, keeps within N;
 *   else reverse, against ch, while the chains ending at the reference
 *   grown by one keep within N;
 *   else it stays a keyframe for good.
 * A series thus starts as reverse deltas ending at the newest, as many
 * as N: the one they end at is kept, and after it N forward deltas come,
 * then N reverse ones ending at the next keyframe kept. Past the first
 * N + 1 checkpoints a keyframe is kept every 2N + 1, half as often as
 * reverse deltas alone would keep one for chains as long.
 * Returns the blob the delta references + 1 (forward), 0 for ch
 * (reverse), or -1: none. */
static int64_t supersede_ref(const file_job *f, const tf_span *s, const chunk *ch)
{
    const tf_archive *ar = f->c->ar;
    if (!s->newest || !s->ref_blobs)
        return -1;
    uint64_t slot = s->ref_blobs[ch->index];
    tf_blob b, p;
    tf_error ignored;
    if (tf_archive_blob(ar, slot, &b, &ignored) < 0 || b.dtype != s->dtype || b.ref ||
        b.raw_len != ch->len || tf_blob_id_eq(&b.id, &ch->id))
        return -1;
    unsigned above = tf_archive_chain_above(ar, slot), max = f->opts->max_chain;
    if (s->prev_blobs) {
        uint64_t prev = s->prev_blobs[ch->index];
        if (tf_archive_blob(ar, prev, &p, &ignored) == 0 && p.dtype == s->dtype &&
            p.raw_len == ch->len && !chain_passes(ar, prev, slot) &&
            tf_archive_chain_depth(ar, prev) + 1u + above <= max)
            return (int64_t)prev + 1;
    }
    return above + 1u <= max ? 0 : -1;
}

/* The models a codec gets for a chunk of span s, as its row says: with
 * opts->search, a searching codec the model its search found for the
 * span (if any); otherwise a fit on the chunk where the codec fits
 * chunks of the span's dtype. */
static void offer_models(const file_job *f, const tf_span *s, tf_chunk_job *job)
{
    for (unsigned id = 0; id < TF_CODEC_COUNT; id++) {
        const tf_codec *codec = tf_codec_get(id);
        if (!codec || !codec->fit)
            continue;
        if (f->opts->search && codec->search) {
            if (s->has_model[id])
                job->models[id] =
                    (tf_chunk_model){ .data = s->model[id].data, .len = s->model[id].len };
        } else if (codec->fits_chunks_of && codec->fits_chunks_of(s->dtype)) {
            job->fit_chunk[id] = true;
            job->fit_opts[id] = codec->search ? &f->search_opts[id] : NULL;
        }
    }
}

/* The bytes chunk ch's delta codes, and those it is against: ch's own
 * against its parent's, or (superseded) the keyframe ch supersedes
 * against the chunk before it or against ch. */
static const uint8_t *delta_src(const chunk *ch, bool superseded)
{
    return superseded ? ch->rev_src : ch->data;
}

static const uint8_t *delta_ref(const chunk *ch, bool superseded)
{
    return !superseded ? ch->ref_data : ch->rev_against ? ch->rev_against : ch->data;
}

/* The delta of the keyframe chunk ch supersedes (supersede_ref): the
 * reference's bytes re-encoded with ULP against the chunk before it or
 * against ch, kept when, with its model, it is smaller than the
 * reference's keyframe. The model is the one fitted on the chunk, or,
 * given shared, the one fitted on its tensor's chunks in the group
 * (shared_blob, stored once), of which the chunk pays its share. ULP
 * alone: the slot needs a delta (a keyframe stays as it is), and ULP's
 * is the delta of float checkpoints. First the job: */
static void superseded_job(const file_job *f, chunk *ch, const tf_chunk_model *shared)
{
    const tf_span *s = &f->spans[ch->span];
    ch->rev = (tf_chunk_job){ .src = delta_src(ch, true), .len = ch->len, .dtype = s->dtype,
                              .ref = delta_ref(ch, true) };
    if (shared)
        ch->rev.models[TF_CODEC_ULP] = *shared;
}

/* ... then, encoded (rc 0) or not, whether the delta is kept; ch's
 * sources go. */
static void keep_superseded(file_job *f, chunk *ch, int rc, const tf_chunk_model *shared,
                            const tf_model_blob *shared_blob)
{
    uint64_t slot = f->spans[ch->span].ref_blobs[ch->index];
    tf_error ignored; /* a delta that cannot be made is not made */
    tf_blob old;
    if (rc == 0 && tf_archive_blob(f->c->ar, slot, &old, &ignored) == 0 &&
        ch->rev.out.len + (shared ? shared->share : ch->rev.model.len) < old.enc_len &&
        (shared ? tf_model_blob_copy(shared_blob, &ch->rev_model, &ignored) == 0
                : !ch->rev.model.len ||
                      tf_model_blob_make(&ch->rev.model, &ch->rev_model, &ignored) == 0))
        ch->rev_slot = slot + 1;
    else
        tf_buf_free(&ch->rev.out); /* the keyframe stays */
    tf_buf_free(&ch->rev.model);
    free(ch->rev_src);
    free(ch->rev_against);
    ch->rev_src = ch->rev_against = NULL;
}

/* Fits m, shared by the n chunks from run on (of one tensor, in one
 * group), on their deltas: those they code, or (superseded) those of the
 * keyframes they supersede. */
static void fit_shared(tf_shared_model *m, const file_job *f, const chunk *run, size_t n,
                       bool superseded)
{
    const uint8_t **src = malloc(n * sizeof *src), **ref = malloc(n * sizeof *ref);
    size_t *len = malloc(n * sizeof *len);
    *m = (tf_shared_model){ 0 };
    if (src && ref && len) {
        for (size_t i = 0; i < n; i++) {
            src[i] = delta_src(&run[i], superseded);
            ref[i] = delta_ref(&run[i], superseded);
            len[i] = run[i].len;
        }
        tf_shared_model_fit(m, f->spans[run->span].dtype, src, ref, len, n);
    }
    free(src);
    free(ref);
    free(len);
}

/* Whether chunk ch supersedes a keyframe whose delta is to be encoded. */
static bool supersedes(const file_job *f, const chunk *ch)
{
    (void)f;
    return ch->rev_src != NULL;
}

/* The end of the run of chunks from run on, before end, that may share a
 * model: run alone unless `in` holds of it; else it and the chunks after
 * it of its tensor of which `in` holds. */
static chunk *run_end(const file_job *f, chunk *run, chunk *end,
                      bool (*in)(const file_job *, const chunk *))
{
    chunk *next = run + 1;
    if (in(f, run))
        while (next < end && next->span == run->span && in(f, next))
            next++;
    return next;
}

/* Encodes the deltas of the keyframes the chunks of group g supersede,
 * those of one tensor with a shared model. */
static void encode_superseded_group(file_job *f, size_t g)
{
    chunk *end = &f->chunks[f->groups[g + 1]];
    for (chunk *run = &f->chunks[f->groups[g]], *next; run < end; run = next) {
        next = run_end(f, run, end, supersedes);
        tf_shared_model m = { 0 };
        if (next - run > 1)
            fit_shared(&m, f, run, (size_t)(next - run), true);
        const tf_chunk_model *shared = m.made ? &m.given : NULL;
        /* two at a time: small chunks' deltas code side by side */
        chunk *waiting = NULL;
        for (chunk *ch = run; ch < next; ch++) {
            if (!ch->rev_src) {
                free(ch->rev_against);
                ch->rev_against = NULL;
                continue;
            }
            superseded_job(f, ch, shared);
            if (!waiting) {
                waiting = ch;
                continue;
            }
            tf_chunk_job *const jobs[2] = { &waiting->rev, &ch->rev };
            int rc[2];
            tf_encode_chunk_pair_as(jobs, TF_CODEC_ULP, rc);
            keep_superseded(f, waiting, rc[0], shared, &m.blob);
            keep_superseded(f, ch, rc[1], shared, &m.blob);
            waiting = NULL;
        }
        if (waiting)
            keep_superseded(f, waiting, tf_encode_chunk_as(&waiting->rev, TF_CODEC_ULP, NULL),
                            shared, &m.blob);
        tf_shared_model_free(&m);
    }
}

/* Reads blob idx, reconstructed, into a new buffer of len bytes. */
static uint8_t *read_blob(file_job *f, uint64_t idx, size_t len, tf_error *e)
{
    uint8_t *data = malloc(len ? len : 1);
    if (!data) {
        tf_fail(e, ENOMEM, "out of memory for a reference chunk");
        return NULL;
    }
    if (tf_reader_blob_once(f->reader, idx, data, e) < 0) {
        free(data);
        return NULL;
    }
    return data;
}

/* Encodes chunk ch (read) with what its span offers: its reference chunk,
 * reconstructed, and the models of offer_models (for ULP, shared where
 * given); a chunk of the newest file of its series becomes a keyframe,
 * and the keyframe it supersedes a delta, once the group's chunks are
 * encoded (rev_src, rev_against: encode_superseded_group). */
static int encode_chunk(file_job *f, chunk *ch, const tf_chunk_model *shared, tf_error *e)
{
    const tf_span *s = &f->spans[ch->span];
    tf_chunk_job *job = &ch->job;
    *job = (tf_chunk_job){ .src = ch->data, .len = ch->len, .dtype = s->dtype,
                           .estimate = !f->opts->search };
    bool forward = chunk_has_ref(f, s, ch->index);
    int64_t supersede = supersede_ref(f, s, ch);
    if (!s->newest)
        offer_models(f, s, job);
    if (shared)
        job->models[TF_CODEC_ULP] = *shared;
    uint8_t *ref = ch->ref_data;
    ch->ref_data = NULL;
    if (!ref && (forward || supersede >= 0) &&
        !(ref = read_blob(f, s->ref_blobs[ch->index], ch->len, e)))
        return -1;
    int rc;
    if (supersede >= 0) {
        uint8_t *before = supersede ? read_blob(f, (uint64_t)supersede - 1, ch->len, e) : NULL;
        rc = supersede && !before ? -1 : tf_encode_newest_keyframe(job, e);
        ch->rev_src = ref;
        ch->rev_against = before;
        ref = NULL;
        ch->rev_ref = (uint64_t)supersede;
    } else if (s->newest) {
        rc = tf_encode_newest_keyframe(job, e);
        /* A chunk the keyframe codec codes in under a bit a byte is
         * structured (a mask, constants) and never changes, usually: it
         * stays, and a program or zstd often codes it in far less. */
        if (rc == 0 && job->out.len * 8 < job->len) {
            offer_models(f, s, job);
            rc = tf_encode_chunk(job, e);
        }
    } else {
        job->ref = ref;
        ch->ref_blob = forward ? s->ref_blobs[ch->index] + 1 : 0;
        rc = tf_encode_chunk(job, e);
        if (rc == 0 && !tf_codec_get(job->codec)->delta)
            ch->ref_blob = 0;
    }
    free(ref);
    return rc;
}

/* Whether chunk ch is coded as a delta against its parent's chunk, by
 * ULP among others (encode_chunk's last case). */
static bool codes_forward(const file_job *f, const chunk *ch)
{
    const tf_span *s = &f->spans[ch->span];
    const tf_codec *ulp = tf_codec_get(TF_CODEC_ULP);
    return !ch->stored && !s->newest && ulp->fits_chunks_of(s->dtype) &&
           chunk_has_ref(f, s, ch->index);
}

/* Encodes the chunks from run to next, forward deltas of one tensor
 * when more than one: they share a ULP model, read ahead their
 * parents' chunks for it. */
static int encode_run(file_job *f, chunk *run, chunk *next, tf_error *e)
{
    tf_shared_model m = { 0 };
    if (next - run > 1) {
        for (chunk *ch = run; ch < next; ch++)
            if (!(ch->ref_data = read_blob(f, f->spans[ch->span].ref_blobs[ch->index], ch->len, e)))
                return -1;
        fit_shared(&m, f, run, (size_t)(next - run), false);
    }
    int rc = 0;
    for (chunk *ch = run; rc == 0 && ch < next; ch++) {
        if (ch->stored)
            continue;
        rc = encode_chunk(f, ch, m.made ? &m.given : NULL, e);
        if (rc == 0 && ch->job.model.len)
            rc = tf_model_blob_make(&ch->job.model, &ch->model, e);
        else if (rc == 0 && tf_shared_model_used(&m, &ch->job))
            rc = tf_model_blob_copy(&m.blob, &ch->model, e);
        tf_buf_free(&ch->job.model);
    }
    tf_shared_model_free(&m);
    return rc;
}

static int chunk_work(void *arg, size_t g, tf_error *e)
{
    file_job *f = arg;
    if (read_group(f, g, e) < 0)
        return -1;
    chunk *end = &f->chunks[f->groups[g + 1]];
    for (chunk *run = &f->chunks[f->groups[g]], *next; run < end; run = next) {
        next = run_end(f, run, end, codes_forward);
        if (encode_run(f, run, next, e) < 0)
            return -1;
    }
    encode_superseded_group(f, g);
    return 0;
}

/* ---- storing ---- */

static int store_chunk(file_job *f, chunk *ch, tf_error *e)
{
    tf_chunk_job *job = &ch->job;
    uint64_t model = 0;
    if (ch->model.raw_len) {
        int64_t m = tf_commit_store_model_blob(f->c, &ch->model, e);
        if (m < 0)
            return -1;
        model = (uint64_t)m + 1;
    }
    /* A newest keyframe whose predecessor's chunk the file retires
     * (rev_slot) is likely to be retired by the next file in turn. */
    int64_t idx =
        f->spans[ch->span].newest && !model
            ? tf_commit_store_keyframe(f->c, &ch->id, &job->out, job->len, job->codec,
                                       (uint8_t)job->dtype, ch->rev_slot != 0, e)
            : tf_commit_store_blob(f->c, &ch->id, &job->out, job->len, job->codec,
                                   (uint8_t)job->dtype, ch->ref_blob, model, e);
    if (idx < 0)
        return -1;
    ch->blob = (uint64_t)idx;
    return 0;
}

/* Keeps a float tensor's chunk for the cache while the budget lasts. */
static void keep_seed(tf_seeds *s, uint64_t blob, uint8_t **data, size_t len)
{
    if (!s || s->bytes + len > s->budget)
        return;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        struct tf_seed *items = realloc(s->items, cap * sizeof *items);
        if (!items)
            return;
        s->items = items;
        s->cap = cap;
    }
    s->items[s->n++] = (struct tf_seed){ blob, *data };
    s->bytes += len;
    *data = NULL;
}

/* The deltas of superseded keyframes (permanent) wait to be stored after
 * the file's keyframes (retired by the file's successor), so that the
 * keyframes lie in runs that give back whole blocks
 * (tf_container_append_retirable): a batch at a time
 * (tf_write_opts_held_bytes), a run's last partial block lost per batch. */

/* Stores the deltas waiting (and their models), each redirecting its
 * slot, after its reference: the keyframe of the chunk it came with, or
 * the chunk before the slot's. */
static int flush_superseded(file_job *f, tf_error *e)
{
    int rc = 0;
    for (size_t i = 0; i < f->ndeltas; i++) {
        struct pending_delta *r = &f->deltas[i];
        bool has_model = r->model.raw_len != 0;
        int64_t model = rc == 0 && has_model ? tf_commit_store_model_blob(f->c, &r->model, e) : -1;
        if (rc == 0 && has_model && model < 0)
            rc = -1;
        if (rc == 0)
            rc = tf_commit_redirect(f->c, r->slot, &r->out, r->codec, r->ref + 1,
                                    (uint64_t)(model + 1), e);
        tf_buf_free(&r->out);
        tf_model_blob_free(&r->model);
    }
    f->ndeltas = 0;
    f->deltas_bytes = 0;
    return rc;
}

/* Queues the delta of the keyframe that chunk ch supersedes (its buffers
 * taken), after ch's keyframe, stored as ch->blob. */
static int queue_superseded(file_job *f, chunk *ch, tf_error *e)
{
    if (f->ndeltas == f->deltas_cap) {
        size_t cap = f->deltas_cap ? 2 * f->deltas_cap : 64;
        struct pending_delta *r = realloc(f->deltas, cap * sizeof *r);
        if (!r)
            return tf_fail(e, ENOMEM, "out of memory");
        f->deltas = r;
        f->deltas_cap = cap;
    }
    uint64_t ref = ch->rev_ref ? ch->rev_ref - 1 : ch->blob;
    f->deltas[f->ndeltas++] = (struct pending_delta){
        ch->rev_slot - 1, ref, ch->rev.codec, ch->rev.out, ch->rev_model };
    /* Their buffers' room, not just their length: that is the memory. */
    f->deltas_bytes += ch->rev.out.cap + ch->rev_model.out.cap;
    ch->rev.out = (tf_buf){ 0 };
    ch->rev_model = (tf_model_blob){ 0 };
    return f->deltas_bytes >= tf_write_opts_held_bytes(f->opts) ? flush_superseded(f, e) : 0;
}

static int sink_chunk(file_job *f, chunk *ch, tf_error *e)
{
    /* Content found now was stored before, or by an earlier chunk of
     * this file (the same bytes twice in it). */
    int64_t have = tf_commit_find_blob(f->c, &ch->id);
    int rc = 0;
    if (have >= 0) {
        ch->blob = (uint64_t)have;
    } else {
        rc = store_chunk(f, ch, e);
        if (rc == 0 && ch->rev_slot)
            rc = queue_superseded(f, ch, e);
    }
    tf_buf_free(&ch->rev.out);
    tf_model_blob_free(&ch->rev_model);
    tf_buf_free(&ch->job.out);
    tf_model_blob_free(&ch->model);
    if (rc == 0 && tf_dtype_is_float(f->spans[ch->span].dtype))
        keep_seed(f->seeds, ch->blob, &ch->data, ch->len);
    free(ch->data);
    ch->data = NULL;
    if (rc == 0)
        report_progress(f->opts, ch->len);
    return rc;
}

static int chunk_sink(void *arg, size_t g, tf_error *e)
{
    file_job *f = arg;
    for (size_t k = f->groups[g]; k < f->groups[g + 1]; k++)
        if (sink_chunk(f, &f->chunks[k], e) < 0)
            return -1;
    return 0;
}

void tf_seeds_plant(tf_seeds *s, tf_reader_ctx *r)
{
    for (size_t i = 0; i < s->n; i++) {
        tf_reader_seed_owned(r, s->items[i].blob, s->items[i].data);
        s->items[i].data = NULL;
    }
    tf_seeds_free(s);
}

void tf_seeds_free(tf_seeds *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->items[i].data);
    free(s->items);
    s->items = NULL;
    s->n = s->cap = s->bytes = 0;
}

/* ---- the search (opts->search) ---- */

static int hash_work(void *arg, size_t i, tf_error *e)
{
    file_job *f = arg;
    chunk *ch = &f->chunks[i];
    int rc = read_chunk(f, ch, e);
    free(ch->data);
    ch->data = NULL;
    return rc;
}

/* The codec with id if it has a search (codec/codec.h), else NULL. */
static const tf_codec *searching_codec(unsigned id)
{
    const tf_codec *codec = tf_codec_get(id);
    return codec && codec->search ? codec : NULL;
}

/* Marks the spans the searching codecs fit (a program, for prog), so that
 * they compete for their chunks: tensors without a reference, those whose
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
static void mark_search_spans(file_job *f)
{
    for (size_t k = 0; k < f->nchunks; k++)
        f->spans[f->chunks[k].span].has_jobs |= !f->chunks[k].stored;
    for (size_t i = 0; i < f->nspans; i++) {
        tf_span *s = &f->spans[i];
        if (s->dtype == TF_DT_NONE || !s->has_jobs)
            continue;
        /* The newest checkpoint's keyframes are temporary: no search. */
        if (s->newest)
            continue;
        bool wants = !s->ref_blobs || s->ref_far || f->opts->all_programs;
        uint64_t n = tf_chunk_count(s->nbytes, elem_size(s), f->chunk_shift);
        for (uint64_t c = 0; !wants && c < n; c++)
            wants = !chunk_has_ref(f, s, c);
        s->wants_search = wants;
    }
}

/* The bytes a search looks at: the span's first `elems` elements. */
static uint8_t *read_head(const file_job *f, const tf_span *s, size_t elems, size_t *len,
                          tf_error *e)
{
    uint64_t max = (uint64_t)elems * elem_size(s);
    *len = (size_t)(s->nbytes < max ? s->nbytes : max);
    uint8_t *head = malloc(*len ? *len : 1);
    if (!head) {
        tf_fail(e, ENOMEM, "out of memory");
        return NULL;
    }
    if (read_span(f, s, 0, *len, head, e) < 0) {
        free(head);
        return NULL;
    }
    return head;
}

/* Learns the prior of a searching codec from a deterministic sample of
 * the spans it searches; a prior only orders the searches. */
static int learn_prior(file_job *f, const tf_codec *codec, tf_error *e)
{
    const tf_codec_search *search = codec->search;
    tf_codec_tensor *t = calloc(f->nspans ? f->nspans : 1, sizeof *t);
    size_t *span_of = calloc(f->nspans ? f->nspans : 1, sizeof *span_of);
    size_t *pick = calloc(search->sample_max ? search->sample_max : 1, sizeof *pick), n = 0;
    int rc = t && span_of && pick ? 0 : tf_fail(e, ENOMEM, "out of memory");
    for (size_t i = 0; rc == 0 && i < f->nspans; i++)
        if (f->spans[i].wants_search) {
            span_of[n] = i;
            t[n++] = (tf_codec_tensor){ NULL, (size_t)f->spans[i].nbytes, f->spans[i].dtype };
        }
    int picked = rc == 0 && n ? search->pick(t, n, pick) : 0;
    if (picked < 0)
        rc = tf_fail(e, ENOMEM, "out of memory");
    for (int k = 0; rc == 0 && k < picked; k++) {
        size_t len;
        uint8_t *head = read_head(f, &f->spans[span_of[pick[k]]], search->head_elems, &len, e);
        t[pick[k]].data = head;
        rc = head ? 0 : -1;
    }
    void *prior = NULL;
    if (rc == 0 && picked > 0)
        rc = search->learn(t, n, &prior, e);
    f->search_opts[codec->id].prior = prior;
    for (int k = 0; k < picked; k++)
        free((void *)t[pick[k]].data);
    free(t);
    free(span_of);
    free(pick);
    return rc;
}

/* Fits span i with each searching codec, on the span's head. */
static int fit_work(void *arg, size_t i, tf_error *e)
{
    file_job *f = arg;
    tf_span *s = &f->spans[i];
    for (unsigned id = 0; s->wants_search && id < TF_CODEC_COUNT; id++) {
        const tf_codec *codec = searching_codec(id);
        if (!codec)
            continue;
        size_t len;
        uint8_t *head = read_head(f, s, codec->search->head_elems, &len, e);
        if (!head)
            return -1;
        s->has_model[id] = tf_fit_model(id, head, NULL, len, s->dtype, &f->search_opts[id],
                                        &s->model[id]) == 0;
        free(head);
    }
    return 0;
}

/* The chunks' ids first, so that a tensor stored already costs no
 * search; then, for each searching codec, its prior and a model for each
 * span it searches. */
static int search_models(file_job *f, tf_error *e)
{
    size_t window = TF_PIPELINE_WINDOW * (size_t)f->opts->threads;
    int rc = tf_pool_run_ordered(f->pool, f->nchunks, window, hash_work, NULL, f, e);
    if (rc == 0)
        mark_search_spans(f);
    for (unsigned id = 0; rc == 0 && id < TF_CODEC_COUNT; id++)
        if (searching_codec(id))
            rc = learn_prior(f, searching_codec(id), e);
    if (rc == 0)
        rc = tf_pool_run_ordered(f->pool, f->nspans, f->nspans, fit_work, NULL, f, e);
    return rc;
}

/* ---- the file ---- */

/* The chunks of the spans, in order, and the groups they are worked on
 * in (joins_group), up to GROUP_BYTES (a bigger chunk alone), so that a
 * job and a read serve many small chunks. */
static int plan_chunks(file_job *f, tf_error *e)
{
    for (size_t s = 0; s < f->nspans; s++)
        f->nchunks += tf_chunk_count(f->spans[s].nbytes, elem_size(&f->spans[s]), f->chunk_shift);
    f->chunks = calloc(f->nchunks ? f->nchunks : 1, sizeof *f->chunks);
    f->groups = malloc((f->nchunks + 1) * sizeof *f->groups);
    if (!f->chunks || !f->groups)
        return tf_fail(e, ENOMEM, "out of memory");
    size_t k = 0, group_bytes = 0;
    for (size_t s = 0; s < f->nspans; s++) {
        const tf_span *sp = &f->spans[s];
        uint64_t cb = (uint64_t)elem_size(sp) << f->chunk_shift, c = 0;
        for (uint64_t off = 0; off < sp->nbytes; off += cb, c++, k++) {
            f->chunks[k] = (chunk){ .span = s, .index = c, .off = off,
                                    .len = (size_t)(sp->nbytes - off < cb ? sp->nbytes - off : cb) };
            if (!k || !joins_group(f, &f->chunks[k], group_bytes)) {
                f->groups[f->ngroups++] = k;
                group_bytes = 0;
            }
            group_bytes += f->chunks[k].len;
            if (group_bytes > f->largest_group)
                f->largest_group = group_bytes;
        }
    }
    f->groups[f->ngroups] = k;
    return 0;
}

/* A group in flight holds about this many times its bytes: its chunks,
 * their references, the keyframes they supersede, the encodings of both
 * and the codecs' scratch. (Two threads committing a bf16 checkpoint of
 * 2 MiB chunks into a mount: each group more in flight, about 15 MiB
 * more at the peak.) */
#define GROUP_COPIES 8

/* The groups in flight: TF_PIPELINE_WINDOW per thread, fewer where they
 * would hold more than the cache bound the writer was given (a small
 * cache asks for little memory), one per thread at least. A writer given
 * none (trajpack's) keeps them all, whatever its number of threads. */
static size_t pipeline_window(const file_job *f)
{
    size_t threads = f->opts->threads, most = TF_PIPELINE_WINDOW * threads;
    if (!f->opts->cache_bytes)
        return most;
    size_t fits = f->opts->cache_bytes / GROUP_COPIES / (f->largest_group ? f->largest_group : 1);
    return fits < threads ? threads : fits < most ? fits : most;
}

static void file_job_free(file_job *f)
{
    for (size_t k = 0; k < f->nchunks; k++) {
        tf_buf_free(&f->chunks[k].job.out);
        tf_buf_free(&f->chunks[k].rev.out);
        tf_buf_free(&f->chunks[k].rev.model);
        tf_buf_free(&f->chunks[k].job.model);
        tf_model_blob_free(&f->chunks[k].model);
        tf_model_blob_free(&f->chunks[k].rev_model);
        free(f->chunks[k].rev_src);
        free(f->chunks[k].rev_against);
        free(f->chunks[k].ref_data);
        free(f->chunks[k].data);
    }
    for (size_t s = 0; s < f->nspans; s++)
        for (unsigned id = 0; id < TF_CODEC_COUNT; id++)
            tf_buf_free(&f->spans[s].model[id]);
    for (unsigned id = 0; id < TF_CODEC_COUNT; id++)
        if (searching_codec(id) && f->search_opts[id].prior)
            searching_codec(id)->search->prior_free((void *)f->search_opts[id].prior);
    for (size_t i = 0; i < f->ndeltas; i++) {
        tf_buf_free(&f->deltas[i].out);
        tf_model_blob_free(&f->deltas[i].model);
    }
    free(f->deltas);
    free(f->chunks);
    free(f->groups);
}

int tf_encode_spans(tf_commit *c, const tf_write_opts *opts, tf_pool *pool, const tf_source *src,
                    tf_reader_ctx *reader, tf_seeds *seeds, tf_entry *ent, tf_span *spans,
                    size_t nspans, tf_error *e)
{
    file_job f = { .opts = opts, .c = c, .pool = pool, .src = src, .reader = reader,
                   .seeds = seeds, .spans = spans, .nspans = nspans,
                   .chunk_shift = tf_archive_chunk_shift(c->ar) };
    for (unsigned id = 0; id < TF_CODEC_COUNT; id++)
        f.search_opts[id] = (tf_search_opts){ .budget = opts->prog_budget,
                                              .sampled = !opts->search };
    int rc = plan_chunks(&f, e);
    if (rc == 0 && opts->search)
        rc = search_models(&f, e);
    if (rc == 0)
        rc = tf_pool_run_ordered(f.pool, f.ngroups, pipeline_window(&f), chunk_work, chunk_sink,
                                 &f, e);
    if (rc == 0)
        rc = flush_superseded(&f, e);
    if (rc == 0) {
        ent->nchunks = f.nchunks;
        ent->chunks = malloc((f.nchunks ? f.nchunks : 1) * sizeof *ent->chunks);
        if (!ent->chunks)
            rc = tf_fail(e, ENOMEM, "out of memory");
        for (size_t k = 0; rc == 0 && k < f.nchunks; k++)
            ent->chunks[k] = f.chunks[k].blob;
    }
    file_job_free(&f);
    return rc;
}
