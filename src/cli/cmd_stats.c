/* trajpack stats: how many bits each weight costs, by dtype, by codec and
 * by checkpoint, as text or JSON.
 *
 * Each blob's bytes are charged once, to the first use of it in commit
 * order (the rule of `list -l`, see tf_archive_blob_owners); later uses of the
 * same blob (a re-added checkpoint, a tied weight, an unchanged tensor)
 * count their weights at 0 bits. So the bits per weight of a row are the
 * stored bits charged to it divided by all the weights it covers.
 *
 * The bits of ulp chunks are broken down further, per dtype, as in the
 * paper (codec/ulp/ulp_stats.h): b, q1, q2, raw tail, tables (the model blobs
 * charged with them) and framing. That decodes every ulp chunk charged,
 * and its reference first. */
#include "cli/cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "codec/prog/prog.h"
#include "codec/ulp/ulp_stats.h"
#include "common/buf.h"
#include "format/catalog.h"
#include "common/dtype.h"
#include "store/blob_io.h"
#include "store/catalog_query.h"
#include "format/tensor_format.h"
#include "store/entry_check.h"
#include "store/reader.h"

/* Reconstructed chunks kept: the references of the next checkpoint's
 * deltas (one checkpoint of each series), so that each is decoded once. */
#define CACHE_BYTES (256u << 20)
#define FORMAT_SLOTS 4 /* format ids 0-2 (0 unused), then "unknown" */

static const char stats_usage[] =
    "Usage: trajpack stats [OPTIONS] ARCHIVE\n"
    "       trajpack stats --tensors [OPTIONS] ARCHIVE [FILE...]\n"
    "Show the bits per weight (stored bits / tensor elements) of ARCHIVE by\n"
    "dtype, by codec and by checkpoint (safetensors file; in natural order,\n"
    "step-20 before step-100), totals and the compression ratio. Stored\n"
    "bytes are charged to the first file that uses them; weights of data\n"
    "stored before cost 0 bits (row \"dedup\").\n"
    "The bits of ulp deltas are broken down by dtype into the bit length b,\n"
    "the refinement bits q1 and q2, the raw tail, tables and framing.\n"
    "\nOptions:\n"
    "      --tensors  instead, one tab-separated line per tensor of the\n"
    "                 safetensors files FILE... (and those below them; default:\n"
    "                 all): file, tensor name (quoted), dtype, bytes, stored\n"
    "                 bytes (its chunks and their models, shared or not), chunks\n"
    "                 per codec (e.g. prog:1,ulp:3), the program of its first\n"
    "                 prog chunk (e.g. merge_bf16(lit_huff, lit_rans|exp,\n"
    "                 lit_raw)) or \"-\", and its reference: the file and the\n"
    "                 tensor (quoted) that stored the blob its first delta\n"
    "                 chunk is a delta against; \"-\" and \"-\" when no chunk\n"
    "                 is a delta, \"?\" and \"-\" when no file holds that blob\n"
    "      --json     print one JSON object instead of tables\n"
    "  -h, --help     show this help\n";

enum { OPT_JSON = 256, OPT_TENSORS };

static const struct option stats_longopts[] = {
    { "json", no_argument, NULL, OPT_JSON },
    { "tensors", no_argument, NULL, OPT_TENSORS },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
};

#define CODEC_SLOTS (TF_CODEC_COUNT + 1) /* the last one: unknown codec ids */

typedef struct {
    uint64_t weights; /* tensor elements covered */
    uint64_t stored;  /* bytes of blobs charged */
    uint64_t blobs;   /* blobs charged */
} stat_row;

/* Codec-specific breakdowns belong beside by_codec: a field per codec
 * here, filled in account_chunk, printed after the codec's row in
 * print_text and print_json. */
typedef struct {
    stat_row tensors;              /* all tensor data */
    stat_row by_dtype[TF_DT_COUNT];
    stat_row by_codec[CODEC_SLOTS];
    tf_ulp_bits ulp_by_dtype[TF_DT_COUNT]; /* the ulp row, broken down */
    stat_row ulp_undecoded;        /* ulp chunks that failed to decode */
    stat_row dedup;                /* chunks whose blob was charged before */
    stat_row *by_entry;            /* per entry, archive order */
    stat_row other;                /* non-safetensors files (weights: bytes) */
    char **notes;                  /* per entry: why an opaque file that a
                                      format recognises is opaque, or NULL */
    uint64_t n_tensor_files[FORMAT_SLOTS]; /* by format id, unknown ids last */
    uint64_t n_other, n_dirs, n_symlinks;
    uint64_t logical_bytes;        /* all file sizes */
    uint64_t unused_bytes;         /* blobs no live file uses */
} stats;

typedef struct {
    tf_archive *ar;
    const uint64_t *owners;
    bool *counted; /* per blob: charged already */
    stats *st;
    /* What the ulp breakdown decodes a chunk with; --tensors reads the
     * names of tensors with it. */
    tf_reader_ctx *reader;
    tf_buf payload, ref, model;
    uint64_t model_of; /* blob index + 1 of what `model` holds */
    /* --tensors: which tensor stored each blob. */
    tf_blob_user *users;
} stats_ctx;

/* Bytes that blob b (and the model it needs) add when entry owner_plus1
 * uses it now; 0 when they were charged already. The model's share goes
 * to *model_bytes too. */
static uint64_t charge(stats_ctx *cx, uint64_t b, uint64_t owner_plus1, uint64_t *blobs,
                       uint64_t *model_bytes)
{
    uint64_t nblobs = tf_archive_nblobs(cx->ar), bytes = 0;
    if (b >= nblobs || cx->owners[b] != owner_plus1 || cx->counted[b])
        return 0;
    const tf_blob *blob = tf_archive_blob(cx->ar, b);
    cx->counted[b] = true;
    bytes += blob->enc_len;
    (*blobs)++;
    uint64_t m = blob->model;
    if (m && m - 1 < nblobs && cx->owners[m - 1] == owner_plus1 && !cx->counted[m - 1]) {
        cx->counted[m - 1] = true;
        *model_bytes = tf_archive_blob(cx->ar, m - 1)->enc_len;
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

/* ---- ulp breakdown ---- */

/* Blob idx reconstructed into buf. */
static int reconstruct(stats_ctx *cx, uint64_t idx, tf_buf *buf, tf_error *e)
{
    uint64_t len = tf_archive_blob(cx->ar, idx)->raw_len;
    buf->len = 0;
    uint8_t *p = len <= SIZE_MAX ? tf_buf_reserve(buf, (size_t)len) : NULL;
    if (!p)
        return tf_fail(e, ENOMEM, "out of memory for %llu bytes", (unsigned long long)len);
    if (tf_reader_blob(cx->reader, idx, p, e) < 0)
        return -1;
    tf_buf_commit(buf, (size_t)len);
    return 0;
}

/* The stored bytes of a blob, checked against their checksum. */
static int read_payload(stats_ctx *cx, const tf_blob *blob, tf_error *e)
{
    return tf_blob_read_payload(cx->ar, blob, &cx->payload, e);
}

/* Adds the breakdown of ulp blob b to *bits. The chunks of a tensor share
 * its model, so the last one is kept. */
static int breakdown_blob(stats_ctx *cx, uint64_t b, tf_ulp_bits *bits, tf_error *e)
{
    const tf_blob *blob = tf_archive_blob(cx->ar, b);
    if (!blob->ref || !blob->model)
        return tf_fail(e, EIO, "a ulp blob needs a reference and a model");
    if (cx->model_of != blob->model) {
        cx->model_of = 0;
        if (reconstruct(cx, blob->model - 1, &cx->model, e) < 0)
            return -1;
        cx->model_of = blob->model;
    }
    if (reconstruct(cx, blob->ref - 1, &cx->ref, e) < 0 || read_payload(cx, blob, e) < 0)
        return -1;
    tf_codec_ctx ctx = { .dtype = blob->dtype, .ref = cx->ref.data, .ref_len = cx->ref.len,
                         .model = cx->model.data, .model_len = cx->model.len };
    return tf_ulp_breakdown(cx->payload.data, cx->payload.len, &ctx, (size_t)blob->raw_len,
                            bits, e);
}

/* Breaks down ulp blob b, just charged to entry i with model_bytes of
 * its tensor's model. False (after a message) when it does not decode. */
static bool account_ulp(stats_ctx *cx, size_t i, unsigned dtype, uint64_t b,
                        uint64_t model_bytes)
{
    tf_ulp_bits *bits = &cx->st->ulp_by_dtype[dtype];
    tf_error e;
    if (breakdown_blob(cx, b, bits, &e) < 0) {
        cli_error("%s: blob %llu: %s", tf_archive_entry(cx->ar, i)->path,
                  (unsigned long long)b, e.msg);
        return false;
    }
    bits->tables += 8 * model_bytes;
    return true;
}

static void account_chunk(stats_ctx *cx, size_t i, unsigned dtype, uint64_t b,
                          uint64_t weights)
{
    uint64_t blobs = 0, model_bytes = 0, bytes = charge(cx, b, i + 1, &blobs, &model_bytes);
    stats *st = cx->st;
    add_row(&st->tensors, weights, bytes, blobs);
    add_row(&st->by_dtype[dtype], weights, bytes, blobs);
    add_row(&st->by_entry[i], weights, bytes, blobs);
    if (blobs == 0) {
        add_row(&st->dedup, weights, 0, 0);
    } else {
        unsigned codec = tf_archive_blob(cx->ar, b)->codec;
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
    tf_reader_free(cx->reader);
    free(cx->users);
    tf_buf_free(&cx->payload);
    tf_buf_free(&cx->ref);
    tf_buf_free(&cx->model);
}

static int gather(tf_archive *ar, stats *st)
{
    size_t n = tf_archive_nentries(ar);
    uint64_t nblobs = tf_archive_nblobs(ar);
    stats_ctx cx = { .ar = ar, .st = st };
    cx.owners = tf_archive_blob_owners(ar);
    cx.counted = calloc(nblobs ? nblobs : 1, sizeof *cx.counted);
    cx.reader = tf_reader_new(ar, CACHE_BYTES);
    st->by_entry = calloc(n ? n : 1, sizeof *st->by_entry);
    st->notes = calloc(n ? n : 1, sizeof *st->notes);
    if (!cx.owners || !cx.counted || !cx.reader || !st->by_entry || !st->notes) {
        stats_ctx_free(&cx);
        cli_error("out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        account_entry(&cx, i, tf_archive_entry(ar, i));
    for (uint64_t b = 0; b < nblobs; b++)
        if (!cx.owners[b])
            st->unused_bytes += tf_archive_blob(ar, b)->enc_len;
    stats_ctx_free(&cx);
    return 0;
}

/* ---- output ------------------------------------------------------------ */

static const char *format_name(unsigned id)
{
    const tf_tensor_format *f = id < FORMAT_SLOTS - 1 ? tf_tensor_format_get(id) : NULL;
    return f ? f->name : "unknown format";
}

static const char *dtype_name(unsigned dt)
{
    const tf_dtype_info *info = tf_dtype_get(dt);
    return dt != TF_DT_NONE && info ? info->name : "?";
}

static const char *codec_name(unsigned id)
{
    const tf_codec *c = tf_codec_get(id);
    return c ? c->name : "?";
}

/* Everything in the archive file that is not blob payload: superblock,
 * catalog segments (paths, safetensors headers, blob tables), trailers. */
static uint64_t overhead_bytes(const tf_archive *ar, const stats *st)
{
    uint64_t payload = st->tensors.stored + st->other.stored + st->unused_bytes;
    uint64_t size = tf_archive_file_size(ar);
    return size > payload ? size - payload : 0;
}

static double bits_per_weight(const stat_row *r)
{
    return (double)r->stored * 8 / (double)r->weights;
}

static void text_row(const stat_row *r, const char *label)
{
    char stored[CLI_SIZE_LEN];
    cli_format_size(r->stored, stored);
    if (r->weights)
        printf("  %14llu %10s %9.3f  %s\n", (unsigned long long)r->weights, stored,
               bits_per_weight(r), label);
    else
        printf("  %14llu %10s %9s  %s\n", (unsigned long long)r->weights, stored, "-",
               label);
}

/* The parts of the ulp breakdown, in the paper's order. */
enum { ULP_PARTS = 6 };
static const char *const ulp_part_keys[ULP_PARTS] = { "b", "q1", "q2", "raw", "tables",
                                                      "framing" };
static const char *const ulp_part_labels[ULP_PARTS] = {
    "b (bit length)", "q1", "q2", "raw tail", "tables", "framing",
};

static void ulp_parts(const tf_ulp_bits *x, double bits[ULP_PARTS])
{
    bits[0] = x->b;
    bits[1] = x->q1;
    bits[2] = x->q2;
    bits[3] = (double)x->raw;
    bits[4] = (double)x->tables;
    bits[5] = (double)x->framing;
}

static void text_ulp_part(double bits, uint64_t weights, const char *label)
{
    char stored[CLI_SIZE_LEN];
    cli_format_size((uint64_t)(bits / 8 + 0.5), stored);
    printf("  %14s %10s %9.3f      %s\n", "", stored, bits / (double)weights, label);
}

/* Under the ulp row: per dtype, its total and its parts. */
static void text_ulp_breakdown(const stats *st)
{
    for (unsigned d = 0; d < TF_DT_COUNT; d++) {
        const tf_ulp_bits *x = &st->ulp_by_dtype[d];
        if (!x->weights)
            continue;
        char label[64];
        double bits[ULP_PARTS], total = tf_ulp_bits_total(x);
        stat_row row = { .weights = x->weights, .stored = (uint64_t)(total / 8 + 0.5) };
        snprintf(label, sizeof label, "  %s:", dtype_name(d));
        text_row(&row, label);
        ulp_parts(x, bits);
        for (unsigned p = 0; p < ULP_PARTS; p++)
            text_ulp_part(bits[p], x->weights, ulp_part_labels[p]);
    }
    if (st->ulp_undecoded.blobs)
        text_row(&st->ulp_undecoded, "  not decoded (see errors)");
}

static void print_text(const tf_archive *ar, const size_t *order, const char *archive,
                       const stats *st)
{
    char logical[CLI_SIZE_LEN], size[CLI_SIZE_LEN], other[CLI_SIZE_LEN],
        other_stored[CLI_SIZE_LEN], overhead[CLI_SIZE_LEN], unused[CLI_SIZE_LEN];
    uint64_t archive_bytes = tf_archive_file_size(ar);
    cli_format_size(st->logical_bytes, logical);
    cli_format_size(archive_bytes, size);
    printf("archive %s: %s, %llu commits, chunks of 2^%u elements\n", archive, size,
           (unsigned long long)tf_archive_commits(ar), tf_archive_chunk_shift(ar));
    fputs("files:", stdout);
    for (unsigned f = 1; f < FORMAT_SLOTS; f++)
        if (f < FORMAT_SLOTS - 1 || st->n_tensor_files[f])
            printf(" %llu %s,", (unsigned long long)st->n_tensor_files[f], format_name(f));
    printf(" %llu other; %llu directories, %llu symlinks\n", (unsigned long long)st->n_other,
           (unsigned long long)st->n_dirs, (unsigned long long)st->n_symlinks);
    printf("compression: %s of files in %s: ", logical, size);
    if (archive_bytes)
        printf("%.2fx\n", (double)st->logical_bytes / (double)archive_bytes);
    else
        puts("-");

    printf("\n  %14s %10s %9s\n", "weights", "stored", "bits/wt");
    puts("by dtype:");
    for (unsigned d = 0; d < TF_DT_COUNT; d++)
        if (st->by_dtype[d].weights || st->by_dtype[d].stored)
            text_row(&st->by_dtype[d], dtype_name(d));
    puts("by codec:");
    for (unsigned k = 0; k < CODEC_SLOTS; k++) {
        if (st->by_codec[k].weights || st->by_codec[k].stored)
            text_row(&st->by_codec[k], codec_name(k));
        if (k == TF_CODEC_ULP)
            text_ulp_breakdown(st);
    }
    if (st->dedup.weights)
        text_row(&st->dedup, "dedup");
    puts("by checkpoint:");
    for (size_t k = 0; k < tf_archive_nentries(ar); k++) {
        const tf_entry *ent = tf_archive_entry(ar, order[k]);
        if (tf_entry_is_tensor_file(ent))
            text_row(&st->by_entry[order[k]], ent->path);
    }
    puts("total:");
    text_row(&st->tensors, "all tensors");

    cli_format_size(st->other.weights, other);
    cli_format_size(st->other.stored, other_stored);
    cli_format_size(overhead_bytes(ar, st), overhead);
    cli_format_size(st->unused_bytes, unused);
    printf("\nother files: %s stored in %s\n", other, other_stored);
    printf("catalog and framing: %s; blobs no file uses: %s\n", overhead, unused);
    for (size_t k = 0; k < tf_archive_nentries(ar); k++)
        if (st->notes[order[k]]) {
            fputs("note: ", stdout);
            cli_put_visible(stdout, st->notes[order[k]]);
            putchar('\n');
        }
}

static void json_bpw(const stat_row *r)
{
    if (r->weights)
        printf("%.6f", bits_per_weight(r));
    else
        fputs("null", stdout);
}

/* The fields of a row, without braces. */
static void json_row_fields(const stat_row *r)
{
    printf("\"weights\": %llu, \"stored_bytes\": %llu, \"blobs\": %llu, "
           "\"bits_per_weight\": ",
           (unsigned long long)r->weights, (unsigned long long)r->stored,
           (unsigned long long)r->blobs);
    json_bpw(r);
}

/* One object of a JSON array, {"KEY": "label", ...row..., left open for
 * more fields. */
static void json_row_open(bool *first, const char *key, const char *label, const stat_row *r)
{
    printf("%s\n    {\"%s\": ", *first ? "" : ",", key);
    cli_put_quoted(stdout, label);
    fputs(", ", stdout);
    json_row_fields(r);
    *first = false;
}

static void json_row(bool *first, const char *key, const char *label, const stat_row *r)
{
    json_row_open(first, key, label, r);
    putchar('}');
}

/* {"b": ..., "q1": ..., ...}: the parts in bits, or per weight. */
static void json_ulp_parts(const double bits[ULP_PARTS], double per)
{
    putchar('{');
    for (unsigned p = 0; p < ULP_PARTS; p++)
        printf("%s\"%s\": %.6f", p ? ", " : "", ulp_part_keys[p], bits[p] / per);
    putchar('}');
}

/* The ulp row's extra fields: "breakdown", one object per dtype, and
 * "not_decoded". */
static void json_ulp_breakdown(const stats *st)
{
    bool first = true;
    fputs(",\n     \"breakdown\": [", stdout);
    for (unsigned d = 0; d < TF_DT_COUNT; d++) {
        const tf_ulp_bits *x = &st->ulp_by_dtype[d];
        if (!x->weights)
            continue;
        double bits[ULP_PARTS];
        ulp_parts(x, bits);
        printf("%s\n       {\"dtype\": \"%s\", \"weights\": %llu, \"bits\": ",
               first ? "" : ",", dtype_name(d), (unsigned long long)x->weights);
        json_ulp_parts(bits, 1);
        fputs(", \"bits_per_weight\": ", stdout);
        json_ulp_parts(bits, (double)x->weights);
        putchar('}');
        first = false;
    }
    fputs("],\n     \"not_decoded\": {", stdout);
    json_row_fields(&st->ulp_undecoded);
    putchar('}');
}

static void print_json(const tf_archive *ar, const size_t *order, const char *archive,
                       const stats *st)
{
    bool first;
    uint64_t archive_bytes = tf_archive_file_size(ar);
    fputs("{\n  \"archive\": ", stdout);
    cli_put_quoted(stdout, archive);
    printf(",\n  \"archive_bytes\": %llu,\n  \"commits\": %llu,\n  \"chunk_shift\": %u,\n",
           (unsigned long long)archive_bytes, (unsigned long long)tf_archive_commits(ar),
           tf_archive_chunk_shift(ar));
    fputs("  \"files\": {", stdout);
    for (unsigned f = 1; f < FORMAT_SLOTS; f++)
        if (f < FORMAT_SLOTS - 1 || st->n_tensor_files[f])
            printf("\"%s\": %llu, ", format_name(f), (unsigned long long)st->n_tensor_files[f]);
    printf("\"other\": %llu, \"directories\": %llu, \"symlinks\": %llu},\n",
           (unsigned long long)st->n_other, (unsigned long long)st->n_dirs,
           (unsigned long long)st->n_symlinks);
    fputs("  \"notes\": [", stdout);
    first = true;
    for (size_t k = 0; k < tf_archive_nentries(ar); k++) {
        if (!st->notes[order[k]])
            continue;
        fputs(first ? "\n    {\"path\": " : ",\n    {\"path\": ", stdout);
        cli_put_quoted(stdout, tf_archive_entry(ar, order[k])->path);
        fputs(", \"note\": ", stdout);
        cli_put_quoted(stdout, st->notes[order[k]]);
        fputs("}", stdout);
        first = false;
    }
    fputs(first ? "],\n" : "\n  ],\n", stdout);
    printf("  \"logical_bytes\": %llu,\n  \"compression_ratio\": ",
           (unsigned long long)st->logical_bytes);
    if (archive_bytes)
        printf("%.6f", (double)st->logical_bytes / (double)archive_bytes);
    else
        fputs("null", stdout);
    printf(",\n  \"tensors\": {\"weights\": %llu, \"stored_bytes\": %llu, "
           "\"bits_per_weight\": ",
           (unsigned long long)st->tensors.weights, (unsigned long long)st->tensors.stored);
    json_bpw(&st->tensors);
    fputs("},\n  \"by_dtype\": [", stdout);
    first = true;
    for (unsigned d = 0; d < TF_DT_COUNT; d++)
        if (st->by_dtype[d].weights || st->by_dtype[d].stored)
            json_row(&first, "dtype", dtype_name(d), &st->by_dtype[d]);
    fputs("\n  ],\n  \"by_codec\": [", stdout);
    first = true;
    for (unsigned k = 0; k < CODEC_SLOTS; k++) {
        if (!st->by_codec[k].weights && !st->by_codec[k].stored)
            continue;
        json_row_open(&first, "codec", codec_name(k), &st->by_codec[k]);
        if (k == TF_CODEC_ULP)
            json_ulp_breakdown(st);
        putchar('}');
    }
    printf("\n  ],\n  \"dedup_weights\": %llu,\n  \"checkpoints\": [",
           (unsigned long long)st->dedup.weights);
    first = true;
    for (size_t k = 0; k < tf_archive_nentries(ar); k++) {
        const tf_entry *ent = tf_archive_entry(ar, order[k]);
        if (tf_entry_is_tensor_file(ent))
            json_row(&first, "path", ent->path, &st->by_entry[order[k]]);
    }
    printf("\n  ],\n  \"other_files\": {\"count\": %llu, \"bytes\": %llu, "
           "\"stored_bytes\": %llu},\n",
           (unsigned long long)st->n_other, (unsigned long long)st->other.weights,
           (unsigned long long)st->other.stored);
    printf("  \"unused_blob_bytes\": %llu,\n  \"overhead_bytes\": %llu\n}\n",
           (unsigned long long)st->unused_bytes,
           (unsigned long long)overhead_bytes(ar, st));
}

/* ---- per tensor (--tensors) -------------------------------------------- */

/* Program texts longer than this are cut (a program has at most
 * TF_PROG_MAX_NODES nodes, each a short name). */
#define PROGRAM_TEXT_LEN 4096

/* How one tensor is stored. */
typedef struct {
    uint64_t stored;              /* bytes of its chunk blobs and their models */
    uint64_t chunks[CODEC_SLOTS]; /* chunks per codec */
    uint64_t first_prog;          /* blob + 1 of its first prog chunk, or 0 */
    uint64_t first_ref;           /* the ref (blob + 1) of its first delta chunk, or 0 */
    uint64_t first_ref_at;        /* that chunk's number in the tensor */
} tensor_cost;

static void cost_tensor(const tf_archive *ar, const tf_entry *ent, uint64_t t, tensor_cost *tc)
{
    const tf_tensor_span *ts = &ent->tensors[t];
    uint64_t n = tf_tensor_nchunks(ar, ent, t);
    uint64_t model = 0; /* the chunks of a tensor share one model: count it once */
    *tc = (tensor_cost){ 0 };
    for (uint64_t k = 0; k < n; k++) {
        uint64_t b = ent->chunks[ts->first_chunk + k];
        const tf_blob *blob = tf_archive_blob(ar, b);
        tc->stored += blob->enc_len;
        if (blob->model && blob->model != model) {
            model = blob->model;
            tc->stored += tf_archive_blob(ar, model - 1)->enc_len;
        }
        tc->chunks[blob->codec < TF_CODEC_COUNT ? blob->codec : TF_CODEC_COUNT]++;
        if (blob->codec == TF_CODEC_PROG && !tc->first_prog)
            tc->first_prog = b + 1;
        if (blob->ref && !tc->first_ref) {
            tc->first_ref = blob->ref;
            tc->first_ref_at = k;
        }
    }
}

/* What a tensor's deltas point to. */
typedef struct {
    uint64_t blob;        /* the reference blob + 1 of its first delta chunk; 0: none */
    const tf_entry *ent;  /* the file whose tensor stored that blob first; NULL: none now */
    const char *tensor;   /* that tensor's name ("?" when it cannot be read) */
} tensor_ref;

/* Whether chunk k of tensor t of ent is blob b. */
static bool has_chunk(const tf_archive *ar, const tf_entry *ent, uint64_t t, uint64_t k,
                      uint64_t b)
{
    return t < ent->ntensors && k < tf_tensor_nchunks(ar, ent, t) &&
           ent->chunks[ent->tensors[t].first_chunk + k] == b;
}

/* The reference of tensor t with cost tc. A blob that several tensors of
 * the file that stored it share (tied weights) is named by the tensor in
 * the same place as t when that one holds it, so that a checkpoint's
 * tensors read as deltas against the same tensors of an earlier one. */
static tensor_ref find_reference(stats_ctx *cx, uint64_t t, const tensor_cost *tc)
{
    tensor_ref ref = { .blob = tc->first_ref };
    if (!tc->first_ref)
        return ref;
    uint64_t b = tc->first_ref - 1;
    if (b >= tf_archive_nblobs(cx->ar) || !cx->users[b].entry)
        return ref;
    ref.ent = tf_archive_entry(cx->ar, cx->users[b].entry - 1);
    uint64_t rt = has_chunk(cx->ar, ref.ent, t, tc->first_ref_at, b) ? t : cx->users[b].tensor;
    ref.tensor = tf_tensor_name(ref.ent, rt);
    return ref;
}

/* The text of the program of the tensor's first prog chunk, or "-"; false
 * (after a message) when that chunk cannot be read or parsed. */
static bool describe_program(stats_ctx *cx, const tf_entry *ent, const char *tensor,
                             const tensor_cost *tc, char *out, size_t outsz)
{
    snprintf(out, outsz, "-");
    if (!tc->first_prog)
        return true;
    uint64_t b = tc->first_prog - 1;
    const tf_blob *blob = tf_archive_blob(cx->ar, b);
    tf_error e;
    bool ok = read_payload(cx, blob, &e) == 0;
    if (!ok)
        cli_error("%s: %s: blob %llu: %s", ent->path, tensor, (unsigned long long)b, e.msg);
    else if (tf_prog_describe_chunk(cx->payload.data, cx->payload.len, blob->dtype,
                                    (size_t)blob->raw_len, out, outsz) < 0) {
        cli_error("%s: %s: blob %llu: not a valid program", ent->path, tensor,
                  (unsigned long long)b);
        ok = false;
    }
    if (!ok)
        snprintf(out, outsz, "?");
    return ok;
}

/* The reference of a tensor: two tab-separated columns, file and tensor,
 * or a JSON object (null when no chunk is a delta). */
static void print_reference(const tensor_ref *ref, bool json)
{
    if (!json) {
        if (!ref->blob)
            fputs("\t-\t-", stdout);
        else if (!ref->ent)
            fputs("\t?\t-", stdout);
        else {
            printf("\t%s\t", ref->ent->path);
            cli_put_quoted(stdout, ref->tensor);
        }
        return;
    }
    fputs(", \"reference\": ", stdout);
    if (!ref->blob) {
        fputs("null", stdout);
        return;
    }
    printf("{\"blob\": %llu, \"file\": ", (unsigned long long)(ref->blob - 1));
    if (ref->ent) {
        cli_put_quoted(stdout, ref->ent->path);
        fputs(", \"tensor\": ", stdout);
        cli_put_quoted(stdout, ref->tensor);
    } else {
        fputs("null, \"tensor\": null", stdout);
    }
    putchar('}');
}

/* One tensor: a tab-separated line, or a JSON object after *first. */
static void print_tensor(const tf_entry *ent, const char *tensor, const tf_tensor_span *ts,
                         const tensor_cost *tc, const char *program, const tensor_ref *ref,
                         bool json, bool *first)
{
    if (json) {
        printf("%s\n    {\"file\": ", *first ? "" : ",");
        cli_put_quoted(stdout, ent->path);
        fputs(", \"tensor\": ", stdout);
        cli_put_quoted(stdout, tensor);
        printf(", \"dtype\": \"%s\", \"bytes\": %llu, \"stored_bytes\": %llu, \"chunks\": {",
               dtype_name(ts->dtype), (unsigned long long)ts->nbytes,
               (unsigned long long)tc->stored);
    } else {
        printf("%s\t", ent->path);
        cli_put_quoted(stdout, tensor);
        printf("\t%s\t%llu\t%llu\t", dtype_name(ts->dtype), (unsigned long long)ts->nbytes,
               (unsigned long long)tc->stored);
    }
    bool none = true;
    for (unsigned k = 0; k < CODEC_SLOTS; k++) {
        if (!tc->chunks[k])
            continue;
        printf(json ? "%s\"%s\": %llu" : "%s%s:%llu", none ? "" : json ? ", " : ",",
               codec_name(k), (unsigned long long)tc->chunks[k]);
        none = false;
    }
    if (json) {
        fputs("}, \"program\": ", stdout);
        if (strcmp(program, "-") == 0)
            fputs("null", stdout);
        else
            cli_put_quoted(stdout, program);
        print_reference(ref, json);
        putchar('}');
    } else {
        printf("%s\t%s", none ? "-" : "", program);
        print_reference(ref, json);
        putchar('\n');
    }
    *first = false;
}

/* The per-tensor view of the selected entries; 0, or -1 when a program
 * could not be read (the others are still printed). */
static int print_tensors(tf_archive *ar, const char *archive, const size_t *order,
                         const bool *selected, bool json)
{
    stats_ctx cx = { .ar = ar, .reader = tf_reader_new(ar, CACHE_BYTES),
                     .users = tf_archive_blob_tensors(ar) };
    if (!cx.reader || !cx.users) {
        stats_ctx_free(&cx);
        cli_error("out of memory");
        return -1;
    }
    if (json) {
        fputs("{\n  \"archive\": ", stdout);
        cli_put_quoted(stdout, archive);
        fputs(",\n  \"tensors\": [", stdout);
    }
    int rc = 0;
    bool first = true;
    char program[PROGRAM_TEXT_LEN];
    for (size_t k = 0; k < tf_archive_nentries(ar); k++) {
        const tf_entry *ent = tf_archive_entry(ar, order[k]);
        if (!selected[order[k]] || !tf_entry_is_tensor_file(ent))
            continue;
        for (uint64_t t = 0; t < ent->ntensors; t++) {
            const char *name = tf_tensor_name(ent, t);
            tensor_cost tc;
            cost_tensor(ar, ent, t, &tc);
            if (!describe_program(&cx, ent, name, &tc, program, sizeof program))
                rc = -1;
            tensor_ref ref = find_reference(&cx, t, &tc);
            print_tensor(ent, name, &ent->tensors[t], &tc, program, &ref, json,
                         &first);
        }
    }
    if (json)
        fputs("\n  ]\n}\n", stdout);
    stats_ctx_free(&cx);
    return rc;
}

/* The summary of the whole archive. */
static int print_stats(tf_archive *ar, const char *archive, bool json)
{
    stats st = { 0 };
    int status = CLI_EXIT_FAIL;
    size_t *order = tf_archive_natural_order(ar);
    if (!order) {
        cli_error("out of memory");
    } else if (gather(ar, &st) == 0) {
        if (json)
            print_json(ar, order, archive, &st);
        else
            print_text(ar, order, archive, &st);
        status = st.ulp_undecoded.blobs ? CLI_EXIT_FAIL : CLI_EXIT_OK;
    }
    for (size_t i = 0; st.notes && i < tf_archive_nentries(ar); i++)
        free(st.notes[i]);
    free(st.notes);
    free(st.by_entry);
    free(order);
    return status;
}

/* --tensors: the entries named (all when none is), one line per tensor. */
static int run_tensors(tf_archive *ar, const char *archive, char **args, size_t nargs, bool json)
{
    char **paths = cli_archive_paths(args, nargs);
    size_t n = tf_archive_nentries(ar);
    bool *selected = paths ? malloc((n ? n : 1) * sizeof *selected) : NULL;
    size_t *order = selected ? tf_archive_natural_order(ar) : NULL;
    int status = CLI_EXIT_FAIL;
    if (paths && !order)
        cli_error("out of memory");
    if (order) {
        size_t missing = cli_select_entries(ar, paths, nargs, selected);
        if (print_tensors(ar, archive, order, selected, json) == 0 && !missing)
            status = CLI_EXIT_OK;
    }
    free(order);
    free(selected);
    cli_free_paths(paths, nargs);
    return status;
}

int cmd_stats(int argc, char **argv)
{
    const cli_cmd cmd = { .verb = argv[0], .usage = stats_usage,
                          .shortopts = "h", .longopts = stats_longopts };
    bool json = false, tensors = false;
    int c;
    while ((c = cli_getopt(argc, argv, &cmd)) != -1) {
        switch (c) {
        case OPT_JSON: json = true; break;
        case OPT_TENSORS: tensors = true; break;
        case CLI_OPT_HELP: return CLI_EXIT_OK;
        default: return CLI_EXIT_USAGE;
        }
    }
    if (argc - optind < 1)
        return cli_usage_error(cmd.verb, "expected an ARCHIVE");
    if (!tensors && argc - optind != 1)
        return cli_usage_error(cmd.verb, "FILE arguments are for --tensors");
    const char *archive = argv[optind];
    tf_archive *ar = cli_open_archive(archive);
    if (!ar)
        return CLI_EXIT_FAIL;
    int status = tensors ? run_tensors(ar, archive, argv + optind + 1,
                                       (size_t)(argc - optind - 1), json)
                         : print_stats(ar, archive, json);
    tf_archive_close(ar);
    return status;
}
