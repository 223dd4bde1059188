#include "store/writer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codec/codec.h"
#include "codec/prog/prog.h"
#include "common/idmap.h"
#include "format/dtype.h"
#include "format/safetensors.h"
#include "store/commit.h"
#include "store/encode.h"
#include "store/natsort.h"
#include "store/reader.h"

/* Cache for reconstructing the tensors of a parent that is not the file
 * added just before. */
#define WRITER_CACHE_BYTES ((size_t)256 << 20)

/* A file's bytes: the one being added, or the last one added. When
 * checkpoints are added in order the last one is the next one's parent,
 * and its bytes are exactly what the archive would reconstruct, so no
 * decoding is needed. */
typedef struct {
    char *path; /* archive path */
    uint8_t *data;
    uint64_t size;
    bool mapped; /* data maps the file rather than holding a copy */
    tf_st_header hdr;
} loaded_file;

struct tf_writer {
    tf_archive *ar;
    tf_write_opts opts;
    tf_reader_ctx *reader;
    loaded_file last;
    _Atomic uint64_t next_ino;
};

static void loaded_file_clear(loaded_file *f)
{
    free(f->path);
    if (f->mapped)
        munmap(f->data, f->size);
    else
        free(f->data);
    tf_st_free(&f->hdr);
    *f = (loaded_file){ 0 };
}

int tf_writer_open(const char *archive, bool create, unsigned chunk_shift,
                   const tf_write_opts *opts, tf_writer **out, tf_error *e)
{
    if (create && tf_container_create(archive, chunk_shift, e) < 0)
        return -1;
    tf_writer *w = calloc(1, sizeof *w);
    if (!w)
        return tf_fail(e, ENOMEM, "out of memory");
    if (opts)
        w->opts = *opts;
    else
        tf_write_opts_default(&w->opts);
    if (w->opts.threads < 1)
        w->opts.threads = 1;
    if (tf_archive_open(archive, true, &w->ar, e) < 0) {
        free(w);
        return -1;
    }
    atomic_init(&w->next_ino, tf_archive_next_ino(w->ar));
    w->reader = tf_reader_new(w->ar, w->opts.cache_bytes ? w->opts.cache_bytes : WRITER_CACHE_BYTES);
    if (!w->reader) {
        tf_archive_close(w->ar);
        free(w);
        return tf_fail(e, ENOMEM, "out of memory");
    }
    *out = w;
    return 0;
}

void tf_writer_close(tf_writer *w)
{
    if (!w)
        return;
    loaded_file_clear(&w->last);
    tf_reader_free(w->reader);
    tf_archive_close(w->ar);
    free(w);
}

tf_archive *tf_writer_archive(tf_writer *w)
{
    return w->ar;
}

tf_reader_ctx *tf_writer_reader(tf_writer *w)
{
    return w->reader;
}

uint64_t tf_writer_new_ino(tf_writer *w)
{
    return atomic_fetch_add(&w->next_ino, 1);
}

static void begin_commit(tf_writer *w, tf_commit *c)
{
    tf_commit_begin(c, w->ar, &w->opts, &w->next_ino);
}

/* Commits when the entries went in (rc 0), else drops what was appended. */
static int end_commit(tf_commit *c, int rc, tf_error *e)
{
    if (rc == 0)
        return tf_commit_finish(c, e);
    tf_commit_abort(c);
    return -1;
}

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

/* ---- chunked content ---- */

/* One tensor (or an opaque file) being encoded. */
typedef struct {
    const uint8_t *src;
    uint64_t nbytes;
    unsigned dtype;
    const uint8_t *ref;       /* the parent's tensor bytes, or NULL */
    const uint64_t *ref_blobs; /* the parent's chunk blobs */
    tf_buf model;
    bool fitted;
    int64_t model_blob; /* -1 until stored */
    bool has_jobs;      /* some chunk is new content, to be encoded */
    bool wants_program; /* a program is a candidate for some of its chunks */
    tf_buf program;     /* program template */
    bool programmed;
} span_job;

typedef struct {
    tf_writer *w;
    tf_commit *c;
    span_job *spans;
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

static void report_progress(tf_writer *w, uint64_t bytes)
{
    if (w->opts.progress)
        w->opts.progress(w->opts.progress_arg, bytes);
}

/* Whether chunk c of span s may be a delta against the parent's chunk:
 * it has one, of its dtype (a chunk deduplicated against equal bytes of
 * another dtype has not), whose chain is short enough to grow by one;
 * otherwise the chunk is a keyframe. */
static bool chunk_has_ref(const file_job *f, const span_job *s, uint64_t c)
{
    const tf_archive *ar = f->w->ar;
    return s->ref && tf_archive_blob(ar, s->ref_blobs[c])->dtype == s->dtype &&
           tf_archive_chain_depth(ar, s->ref_blobs[c]) + 1u <= f->w->opts.max_chain;
}

/* Marks the spans a program is synthesized for, so that the prog codec
 * competes for their chunks: tensors without a reference, and those with
 * a keyframe chunk; with opts.all_programs, every one. By default,
 * tensors whose delta loses to standalone coding, as float32 Adam
 * state's does, get none: a program there is about 1% smaller than
 * bytegroup, and the prog encoder (about 25 MB/s a thread on float32)
 * makes writing five times slower. Measured with `trajpack create -T 2`
 * on the whole of /work/corpus-data/default (33 files, 1721.4 MB; 2
 * loaded cores):
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
        span_job *s = &f->spans[i];
        if (s->dtype == TF_DT_NONE || !s->has_jobs)
            continue;
        bool wants = !s->ref || f->w->opts.all_programs;
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
    f->prog = (tf_prog_fit_opts){ .budget = f->w->opts.prog_budget, .prior = f->prior };
    return rc;
}

static int fit_work(void *arg, size_t i, tf_error *e)
{
    (void)e;
    file_job *f = arg;
    span_job *s = &f->spans[i];
    if (!s->has_jobs) /* stored already: nothing to fit */
        return 0;
    if (s->ref && tf_dtype_is_float(s->dtype))
        s->fitted = tf_fit_delta_model(s->src, s->ref, s->nbytes, s->dtype, &s->model) == 0;
    /* A tensor the delta codec does not fit is stored standalone. */
    if (s->wants_program || (s->ref && !s->fitted))
        s->programmed = tf_fit_program(s->src, s->nbytes, s->dtype, &f->prog, &s->program) == 0;
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
    span_job *s = &f->spans[f->chunk_span[i]];
    uint64_t ref = 0, model = 0;
    if (job->codec == TF_CODEC_ULP) {
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
        ref = f->ref_blob[i];
        model = (uint64_t)s->model_blob + 1;
    }
    int64_t idx = tf_commit_store_blob(f->c, &f->ids[i], &job->out, job->len, job->codec,
                                       (uint8_t)job->dtype, ref, model, e);
    tf_buf_free(&job->out);
    if (idx < 0)
        return -1;
    f->job_blob[i] = (uint64_t)idx;
    report_progress(f->w, job->len);
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
        span_job *sp = &f->spans[s];
        uint64_t cb = (uint64_t)tf_dtype_get(sp->dtype)->size << f->chunk_shift;
        for (uint64_t off = 0; off < sp->nbytes; off += cb, k++) {
            size_t len = (size_t)(sp->nbytes - off < cb ? sp->nbytes - off : cb);
            tf_blob_id id = tf_blob_id_of(sp->src + off, len);
            int64_t have = tf_commit_find_blob(f->c, &id);
            uint64_t first;
            if (have >= 0) {
                f->stored[k] = (uint64_t)have;
                f->job_of[k] = SIZE_MAX;
                report_progress(f->w, len);
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
        const span_job *sp = &f->spans[f->chunk_span[j]];
        size_t off = (size_t)(job->src - sp->src);
        uint64_t n = tf_chunk_count(sp->nbytes, tf_dtype_get(sp->dtype)->size, f->chunk_shift);
        uint64_t c = off / ((size_t)tf_dtype_get(sp->dtype)->size << f->chunk_shift);
        if (sp->programmed) {
            job->program = sp->program.data;
            job->program_len = sp->program.len;
        }
        if (sp->fitted && chunk_has_ref(f, sp, c)) {
            job->ref = sp->ref + off;
            job->model = sp->model.data;
            job->model_len = sp->model.len;
            job->model_share = sp->model.len / (size_t)n;
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

/* Encodes all spans of a file and fills ent->chunks. */
static int encode_spans(tf_writer *w, tf_commit *c, tf_entry *ent, span_job *spans,
                        size_t nspans, tf_error *e)
{
    file_job f = { .w = w, .c = c, .spans = spans, .nspans = nspans,
                   .chunk_shift = tf_archive_chunk_shift(w->ar) };
    unsigned t = w->opts.threads;
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

/* ---- reading sources ---- */

/* A regular file to add. */
typedef struct {
    const char *name; /* for messages */
    int fd;
    uint64_t size;
    bool map; /* map it rather than read it into memory */
} source;

static int map_all(const source *src, loaded_file *f, tf_error *e)
{
    if (src->size == 0)
        return 0;
    if (src->size > SIZE_MAX)
        return tf_fail(e, EFBIG, "%s: too large to map", src->name);
    void *p = mmap(NULL, (size_t)src->size, PROT_READ, MAP_SHARED, src->fd, 0);
    if (p == MAP_FAILED)
        return tf_fail(e, errno, "%s: cannot map: %s", src->name, strerror(errno));
    f->data = p;
    f->mapped = true;
    return 0;
}

static int read_all(const source *src, loaded_file *f, tf_error *e)
{
    uint64_t size = src->size;
    uint8_t *data = size <= SIZE_MAX ? malloc(size ? (size_t)size : 1) : NULL;
    if (!data)
        return tf_fail(e, ENOMEM, "%s: out of memory for %llu bytes", src->name,
                       (unsigned long long)size);
    uint64_t got = 0;
    while (got < size) {
        ssize_t n = pread(src->fd, data + got, size - got, (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            int err = n < 0 ? errno : EIO;
            free(data);
            return tf_fail(e, err, "%s: %s", src->name,
                           n < 0 ? strerror(err) : "file shrank while reading");
        }
        got += (uint64_t)n;
    }
    f->data = data;
    return 0;
}

/* Makes the bytes of src available in f. */
static int load(const source *src, loaded_file *f, tf_error *e)
{
    f->size = src->size;
    return src->map ? map_all(src, f, e) : read_all(src, f, e);
}

static int add_opaque(tf_writer *w, tf_commit *c, const char *dest, const tf_entry_attrs *attrs,
                      const source *src, tf_error *e)
{
    tf_entry *ent = tf_commit_entry(c, dest, TF_ENTRY_FILE, attrs, e);
    if (!ent)
        return -1;
    ent->size = src->size;
    loaded_file file = { 0 };
    if (load(src, &file, e) < 0)
        return -1;
    span_job span = { .src = file.data, .nbytes = ent->size, .dtype = TF_DT_NONE,
                      .model_blob = -1 };
    int rc = encode_spans(w, c, ent, &span, 1, e);
    loaded_file_clear(&file);
    return rc;
}

/* ---- safetensors ---- */

static bool same_shape(const tf_st_tensor *a, const tf_st_tensor *b)
{
    return a->dtype == b->dtype && a->ndim == b->ndim &&
           (a->ndim == 0 || memcmp(a->shape, b->shape, a->ndim * sizeof *a->shape) == 0);
}

/* The parent checkpoint: the given path, or the file of the same series
 * (same path but for its numbers) that comes last before dest in natural
 * order. */
static const tf_entry *find_parent(tf_archive *ar, const char *dest, const char *given, tf_error *e)
{
    if (given) {
        const tf_entry *p = tf_archive_lookup(ar, given);
        if (!p || p->kind != TF_ENTRY_SAFETENSORS) {
            tf_fail(e, EINVAL, "parent \"%s\" is not a safetensors file in the archive", given);
            return NULL;
        }
        return p;
    }
    char key[TF_PATH_MAX + 1], other[TF_PATH_MAX + 1];
    tf_series_key(dest, key, sizeof key);
    const tf_entry *best = NULL;
    for (size_t i = 0; i < tf_archive_nentries(ar); i++) {
        const tf_entry *ent = tf_archive_entry(ar, i);
        if (ent->kind != TF_ENTRY_SAFETENSORS || tf_natcmp(ent->path, dest) >= 0)
            continue;
        tf_series_key(ent->path, other, sizeof other);
        if (strcmp(key, other) == 0 && (!best || tf_natcmp(ent->path, best->path) > 0))
            best = ent;
    }
    return best;
}

/* Reference bytes of the parent's tensor t: from the last file added when
 * that is the parent, else reconstructed from the archive into *owned. */
static const uint8_t *parent_tensor(tf_writer *w, const tf_entry *parent, const tf_st_header *ph,
                                    size_t t, uint8_t **owned, tf_error *e)
{
    const tf_st_tensor *pt = &ph->tensors[t];
    if (w->last.path && strcmp(w->last.path, parent->path) == 0)
        return w->last.data + tf_st_data_offset(ph, pt);
    uint64_t len = pt->end - pt->begin;
    *owned = malloc(len ? len : 1);
    if (!*owned) {
        tf_fail(e, ENOMEM, "out of memory");
        return NULL;
    }
    if (tf_reader_pread(w->reader, parent, tf_st_data_offset(ph, pt), len, *owned, e) != (ssize_t)len)
        return NULL;
    return *owned;
}

static int encode_safetensors(tf_writer *w, tf_commit *c, tf_entry *ent, loaded_file *file,
                              const tf_entry *parent, tf_error *e)
{
    const tf_st_header *h = &file->hdr;
    tf_st_header ph = { 0 };
    const tf_st_header *parent_hdr = NULL;
    if (parent) {
        if (w->last.path && strcmp(w->last.path, parent->path) == 0)
            parent_hdr = &w->last.hdr;
        else if (tf_st_parse(parent->header, parent->header_len, parent->size, parent->path, &ph, e) == 0)
            parent_hdr = &ph;
        else
            return -1;
    }
    size_t n = h->ntensors;
    span_job *spans = calloc(n ? n : 1, sizeof *spans);
    uint8_t **owned = calloc(n ? n : 1, sizeof *owned);
    int rc = spans && owned ? 0 : tf_fail(e, ENOMEM, "out of memory");
    for (size_t t = 0; rc == 0 && t < n; t++) {
        const tf_st_tensor *st = &h->tensors[t];
        span_job *s = &spans[t];
        *s = (span_job){ .src = file->data + tf_st_data_offset(h, st), .nbytes = st->end - st->begin,
                         .dtype = st->dtype, .model_blob = -1 };
        const tf_st_tensor *pt = parent_hdr ? tf_st_find(parent_hdr, st->name) : NULL;
        if (pt && same_shape(pt, st) && s->nbytes && tf_dtype_is_float(st->dtype)) {
            size_t pi = (size_t)(pt - parent_hdr->tensors);
            s->ref = parent_tensor(w, parent, parent_hdr, pi, &owned[t], e);
            if (!s->ref)
                rc = -1;
            s->ref_blobs = parent->chunks + parent->tensors[pi].first_chunk;
        }
    }
    if (rc == 0)
        rc = encode_spans(w, c, ent, spans, n, e);
    for (size_t t = 0; owned && t < n; t++)
        free(owned[t]);
    free(owned);
    free(spans);
    tf_st_free(&ph);
    return rc;
}

/* Adds the safetensors file src whose header (json, parsed in file->hdr)
 * was read already; takes json. Its parent: the archive path parent_path
 * when given, else the previous checkpoint of series_path's series. */
static int add_safetensors(tf_writer *w, tf_commit *c, const char *dest,
                           const tf_entry_attrs *attrs, const char *parent_path,
                           const char *series_path, const source *src, uint8_t *json,
                           loaded_file *file, tf_error *e)
{
    tf_entry *ent = tf_commit_entry(c, dest, TF_ENTRY_SAFETENSORS, attrs, e);
    if (!ent) {
        free(json);
        return -1;
    }
    ent->size = src->size;
    ent->header = json;
    ent->header_len = file->hdr.header_len;
    ent->ntensors = file->hdr.ntensors;
    ent->tensors = calloc(ent->ntensors ? ent->ntensors : 1, sizeof *ent->tensors);
    if (!ent->tensors)
        return tf_fail(e, ENOMEM, "out of memory");
    uint64_t chunks = 0;
    for (size_t t = 0; t < ent->ntensors; t++) {
        const tf_st_tensor *ts = &file->hdr.tensors[t];
        ent->tensors[t] = (tf_tensor_span){ .dtype = ts->dtype, .nbytes = ts->end - ts->begin,
                                            .data_off = ts->begin, .first_chunk = chunks };
        chunks += tf_chunk_count(ts->end - ts->begin, tf_dtype_get(ts->dtype)->size,
                                 tf_archive_chunk_shift(w->ar));
    }
    if (load(src, file, e) < 0)
        return -1;
    const tf_entry *parent = find_parent(w->ar, series_path, parent_path, e);
    if (!parent && parent_path)
        return -1;
    return encode_safetensors(w, c, ent, file, parent, e);
}

static bool has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* A file from disk: by its name, a safetensors file or opaque bytes. */
static int add_regular(tf_writer *w, tf_commit *c, const char *src_path, const char *dest,
                       const char *parent, const struct stat *st, const tf_entry_attrs *attrs,
                       loaded_file *file, tf_error *e)
{
    int fd = open(src_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return tf_fail(e, errno, "%s: %s", src_path, strerror(errno));
    source src = { .name = src_path, .fd = fd, .size = (uint64_t)st->st_size };
    int rc;
    if (has_suffix(dest, ".safetensors")) {
        uint8_t *json = NULL;
        rc = tf_st_read(fd, src.size, src_path, &json, &file->hdr, e);
        if (rc == 0)
            rc = add_safetensors(w, c, dest, attrs, parent, dest, &src, json, file, e);
    } else {
        rc = add_opaque(w, c, dest, attrs, &src, e);
    }
    close(fd);
    return rc;
}

static int add_entry(tf_writer *w, tf_commit *c, const char *src, const char *dest,
                     const char *parent, const struct stat *st, loaded_file *file, tf_error *e)
{
    tf_entry_attrs attrs = { .mode = st->st_mode & 07777, .mtime = st->st_mtim };
    if (S_ISDIR(st->st_mode))
        return tf_commit_entry(c, dest, TF_ENTRY_DIR, &attrs, e) ? 0 : -1;
    if (S_ISLNK(st->st_mode)) {
        char target[TF_PATH_MAX + 1];
        ssize_t n = readlink(src, target, sizeof target);
        if (n < 0 || n > TF_PATH_MAX)
            return tf_fail(e, n < 0 ? errno : ENAMETOOLONG, "%s: cannot read link", src);
        tf_entry *ent = tf_commit_entry(c, dest, TF_ENTRY_SYMLINK, &attrs, e);
        if (!ent)
            return -1;
        if (!(ent->target = strndup(target, (size_t)n)))
            return tf_fail(e, ENOMEM, "out of memory");
        ent->size = (uint64_t)n;
        return 0;
    }
    if (!S_ISREG(st->st_mode))
        return tf_fail(e, EINVAL, "%s: not a regular file, directory or symlink", src);
    return add_regular(w, c, src, dest, parent, st, &attrs, file, e);
}

int tf_writer_add(tf_writer *w, const char *src, const char *dest, const char *parent, tf_error *e)
{
    struct stat st;
    if (lstat(src, &st) < 0)
        return tf_fail(e, errno, "%s: %s", src, strerror(errno));
    if (tf_path_check(dest, strlen(dest), e) < 0) {
        tf_error_prefix(e, "%s", src);
        return -1;
    }
    tf_commit c;
    begin_commit(w, &c);
    loaded_file file = { 0 };
    int rc = tf_commit_parents(&c, dest, e);
    if (rc == 0)
        rc = add_entry(w, &c, src, dest, parent, &st, &file, e);
    rc = end_commit(&c, rc, e);
    if (rc == 0 && file.data && (file.path = strdup(dest))) {
        loaded_file_clear(&w->last);
        w->last = file;
    } else {
        loaded_file_clear(&file);
    }
    return rc;
}

/* ---- files a mount wrote ---- */

/* A safetensors file by its content; an invalid one is an error only when
 * its name says it is one. */
static int add_by_content(tf_writer *w, tf_commit *c, const char *dest, const char *series_path,
                          const tf_entry_attrs *attrs, const source *src, tf_error *e)
{
    loaded_file file = { 0 };
    uint8_t *json = NULL;
    tf_error why = { 0 };
    if (tf_st_read(src->fd, src->size, dest, &json, &file.hdr, &why) == 0) {
        int rc = add_safetensors(w, c, dest, attrs, NULL, series_path, src, json, &file, e);
        loaded_file_clear(&file);
        return rc;
    }
    bool claims = src->size > 0 && has_suffix(series_path, ".safetensors");
    if (why.errnum != EINVAL || claims) {
        if (e)
            *e = why;
        return -1;
    }
    return add_opaque(w, c, dest, attrs, src, e);
}

int tf_writer_add_fd(tf_writer *w, int fd, const char *dest, const char *series_path,
                     const tf_entry_attrs *attrs, tf_error *e)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return tf_fail(e, errno, "%s: %s", dest, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return tf_fail(e, EINVAL, "%s: not a regular file", dest);
    if (tf_path_check(dest, strlen(dest), e) < 0)
        return -1;
    loaded_file_clear(&w->last); /* it may be the file dest replaces */
    source src = { .name = dest, .fd = fd, .size = (uint64_t)st.st_size, .map = true };
    tf_commit c;
    begin_commit(w, &c);
    int rc = tf_commit_parents(&c, dest, e);
    if (rc == 0)
        rc = add_by_content(w, &c, dest, series_path ? series_path : dest, attrs, &src, e);
    return end_commit(&c, rc, e);
}

/* ---- edits of the tree ---- */

int tf_writer_mkdir(tf_writer *w, const char *path, const tf_entry_attrs *attrs, tf_error *e)
{
    tf_commit c;
    begin_commit(w, &c);
    return end_commit(&c, tf_commit_mkdir(&c, path, attrs, e), e);
}

int tf_writer_symlink(tf_writer *w, const char *path, const char *target,
                      const tf_entry_attrs *attrs, tf_error *e)
{
    tf_commit c;
    begin_commit(w, &c);
    return end_commit(&c, tf_commit_symlink(&c, path, target, attrs, e), e);
}

/* Removing or moving entries may take the last file's path away. */
int tf_writer_remove(tf_writer *w, const char *path, tf_error *e)
{
    loaded_file_clear(&w->last);
    tf_commit c;
    begin_commit(w, &c);
    return end_commit(&c, tf_commit_remove(&c, path, e), e);
}

int tf_writer_move(tf_writer *w, const char *from, const char *to, tf_error *e)
{
    loaded_file_clear(&w->last);
    tf_commit c;
    begin_commit(w, &c);
    return end_commit(&c, tf_commit_move(&c, from, to, e), e);
}

int tf_writer_set_attrs(tf_writer *w, const char *path, uint32_t mode, struct timespec mtime,
                        tf_error *e)
{
    tf_commit c;
    begin_commit(w, &c);
    return end_commit(&c, tf_commit_set_attrs(&c, path, mode, mtime, e), e);
}
