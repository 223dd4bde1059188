/* trajpack stats: charging each blob to its first use and adding up the
 * rows, with the breakdown of ulp chunks. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/stats.h"
#include "store/blob_stats.h"
#include "store/catalog_query.h"
#include "store/entry_check.h"
#include "store/reader.h"

/* Reconstructed chunks kept: the references of the next checkpoint's
 * deltas (one checkpoint of each series), so that each is decoded once. */
#define CACHE_BYTES (256u << 20)

typedef struct {
    tf_archive *ar;
    const uint64_t *owners;
    bool *counted; /* per blob: charged already */
    stats *st;
    tf_reader_ctx *reader;
    tf_ulp_blobs *ulp; /* the ulp breakdown, with reader */
    tf_error failed;   /* the first blob record that could not be read */
} stats_ctx;

/* Blob b's record into *out; false (noted in cx->failed, once) when it
 * cannot be read: the figures would be wrong, and stats fails. */
static bool record_of(stats_ctx *cx, uint64_t b, tf_blob *out)
{
    tf_error e;
    if (tf_archive_blob(cx->ar, b, out, &e) == 0)
        return true;
    if (!cx->failed.errnum)
        cx->failed = e;
    return false;
}

/* Bytes that blob b (and the model it needs) add when entry owner_plus1
 * uses it now; 0 when they were charged already. The model's share goes
 * to *model_bytes too. */
static uint64_t charge(stats_ctx *cx, uint64_t b, uint64_t owner_plus1, uint64_t *blobs,
                       uint64_t *model_bytes)
{
    uint64_t nblobs = tf_archive_nblobs(cx->ar), bytes = 0;
    tf_blob blob, model;
    if (b >= nblobs || cx->owners[b] != owner_plus1 || cx->counted[b] || !record_of(cx, b, &blob))
        return 0;
    cx->counted[b] = true;
    bytes += blob.enc_len;
    (*blobs)++;
    uint64_t m = blob.model;
    if (m && m - 1 < nblobs && cx->owners[m - 1] == owner_plus1 && !cx->counted[m - 1] &&
        record_of(cx, m - 1, &model)) {
        cx->counted[m - 1] = true;
        *model_bytes = model.enc_len;
        bytes += *model_bytes;
        (*blobs)++;
    }
    return bytes;
}

static void add_row(stat_row *r, uint64_t weights, uint64_t stored, uint64_t blobs)
{
    r->weights += weights;
    r->stored += stored;
    r->blobs += blobs;
}

/* Breaks down ulp blob b, just charged to entry i with model_bytes of
 * its tensor's model. False (after a message) when it does not decode. */
static bool account_ulp(stats_ctx *cx, size_t i, unsigned dtype, uint64_t b,
                        uint64_t model_bytes)
{
    tf_ulp_bits *bits = &cx->st->ulp_by_dtype[dtype];
    tf_error e;
    if (tf_ulp_blobs_breakdown(cx->ulp, b, bits, &e) < 0) {
        cli_error("%s: blob %llu: %s", tf_archive_entry(cx->ar, i)->path,
                  (unsigned long long)b, e.msg);
        return false;
    }
    bits->tables += 8 * model_bytes;
    return true;
}

/* The chain of tensor chunk blob b, one use of it. */
static void account_chain(stats *st, const tf_archive *ar, uint64_t b)
{
    if (b >= tf_archive_nblobs(ar))
        return;
    unsigned depth = tf_archive_chain_depth(ar, b);
    st->chain_chunks++;
    st->chain_sum += depth;
    st->chain_longest = depth > st->chain_longest ? depth : st->chain_longest;
}

static void account_chunk(stats_ctx *cx, size_t i, unsigned dtype, uint64_t b,
                          uint64_t weights)
{
    uint64_t blobs = 0, model_bytes = 0, bytes = charge(cx, b, i + 1, &blobs, &model_bytes);
    stats *st = cx->st;
    account_chain(st, cx->ar, b);
    add_row(&st->tensors, weights, bytes, blobs);
    add_row(&st->by_dtype[dtype], weights, bytes, blobs);
    add_row(&st->by_entry[i], weights, bytes, blobs);
    tf_blob blob;
    if (blobs == 0) {
        add_row(&st->dedup, weights, 0, 0);
    } else if (record_of(cx, b, &blob)) {
        unsigned codec = blob.codec;
        add_row(&st->by_codec[codec < TF_CODEC_COUNT ? codec : TF_CODEC_COUNT], weights,
                bytes, blobs);
        if (codec == TF_CODEC_ULP && !account_ulp(cx, i, dtype, b, model_bytes))
            add_row(&st->ulp_undecoded, weights, bytes, blobs);
    }
}

static void account_safetensors(stats_ctx *cx, size_t i, const tf_entry *ent)
{
    unsigned shift = tf_archive_chunk_shift(cx->ar);
    for (uint64_t t = 0; t < ent->ntensors; t++) {
        const tf_tensor_span *ts = &ent->tensors[t];
        const tf_dtype_info *info = tf_dtype_get(ts->dtype);
        unsigned dtype = info ? ts->dtype : TF_DT_NONE;
        uint64_t nelem = ts->nbytes / (info ? info->size : 1);
        uint64_t per_chunk = (uint64_t)1 << shift;
        for (uint64_t k = 0; k * per_chunk < nelem; k++) {
            uint64_t c = ts->first_chunk + k;
            if (c >= ent->nchunks)
                break;
            uint64_t left = nelem - k * per_chunk;
            account_chunk(cx, i, dtype, ent->chunks[c], left < per_chunk ? left : per_chunk);
        }
    }
}

/* Bytes that are not tensors: an opaque file, a tensor file's verbatim
 * pieces (its first nchunks chunks). */
static void account_other(stats_ctx *cx, size_t i, const tf_entry *ent, uint64_t nbytes,
                          uint64_t nchunks)
{
    stats *st = cx->st;
    st->other.weights += nbytes;
    for (uint64_t c = 0; c < nchunks; c++) {
        uint64_t blobs = 0, model_bytes = 0;
        uint64_t bytes = charge(cx, ent->chunks[c], i + 1, &blobs, &model_bytes);
        add_row(&st->other, 0, bytes, blobs);
    }
}

static void note_opaque(stats_ctx *cx, size_t i, const tf_entry *ent)
{
    tf_error why = { 0 };
    if (tf_reader_why_opaque(cx->reader, ent, &why))
        cx->st->notes[i] = strdup(why.msg); /* a note lost to memory is no error */
}

static void account_entry(stats_ctx *cx, size_t i, const tf_entry *ent)
{
    stats *st = cx->st;
    switch (ent->kind) {
    case TF_ENTRY_TENSORS:
        st->n_tensor_files[ent->format < FORMAT_SLOTS - 1 ? ent->format : FORMAT_SLOTS - 1]++;
        st->logical_bytes += ent->size;
        account_other(cx, i, ent, ent->verbatim_len, ent->verbatim_chunks);
        account_safetensors(cx, i, ent);
        break;
    case TF_ENTRY_FILE:
        st->n_other++;
        st->logical_bytes += ent->size;
        account_other(cx, i, ent, ent->size, ent->nchunks);
        note_opaque(cx, i, ent);
        break;
    case TF_ENTRY_DIR:
        st->n_dirs++;
        break;
    case TF_ENTRY_SYMLINK:
        st->n_symlinks++;
        break;
    default:
        break;
    }
}

static void stats_ctx_free(stats_ctx *cx)
{
    free((void *)cx->owners);
    free(cx->counted);
    tf_ulp_blobs_free(cx->ulp);
    tf_reader_free(cx->reader);
}

int stats_gather(tf_archive *ar, stats *st)
{
    size_t n = tf_archive_nentries(ar);
    uint64_t nblobs = tf_archive_nblobs(ar);
    stats_ctx cx = { .ar = ar, .st = st };
    tf_error e;
    if (!(cx.owners = tf_archive_blob_owners(ar, &e))) {
        cli_error("%s", e.msg);
        return -1;
    }
    cx.counted = calloc(nblobs ? nblobs : 1, sizeof *cx.counted);
    cx.reader = tf_reader_new(ar, CACHE_BYTES);
    cx.ulp = cx.reader ? tf_ulp_blobs_new(cx.reader) : NULL;
    st->by_entry = calloc(n ? n : 1, sizeof *st->by_entry);
    st->notes = calloc(n ? n : 1, sizeof *st->notes);
    if (!cx.counted || !cx.ulp || !st->by_entry || !st->notes) {
        stats_ctx_free(&cx);
        cli_error("out of memory");
        return -1;
    }
    st->allocated_known = cli_archive_allocated(ar, &st->allocated_bytes);
    for (size_t i = 0; i < n; i++)
        account_entry(&cx, i, tf_archive_entry(ar, i));
    tf_blob blob;
    for (uint64_t b = 0; b < nblobs; b++)
        if (!cx.owners[b] && !tf_archive_blob_serves_slot(ar, b) && record_of(&cx, b, &blob))
            st->unused_bytes += blob.enc_len;
    stats_ctx_free(&cx);
    if (cx.failed.errnum) {
        cli_error("%s", cx.failed.msg);
        return -1;
    }
    return 0;
}
