/* trajpack stats: the figures as text or JSON. */
#include <stdio.h>

#include "cli/cli.h"
#include "cli/stats.h"

static const char *format_name(unsigned id)
{
    const char *name = id < FORMAT_SLOTS - 1 ? tf_format_name(id) : NULL;
    return name ? name : "unknown format";
}

const char *stats_dtype_name(unsigned dt)
{
    const tf_dtype_info *info = tf_dtype_get(dt);
    return dt != TF_DT_NONE && info ? info->name : "?";
}

/* Everything in the archive file that is not blob payload, live or
 * retired: superblock, catalog segments (paths, safetensors headers,
 * blob tables), trailers. */
static uint64_t overhead_bytes(const tf_archive *ar, const stats *st)
{
    uint64_t payload = st->tensors.stored + st->other.stored + st->unused_bytes +
                       tf_archive_retired_bytes(ar);
    uint64_t size = tf_archive_file_size(ar);
    return size > payload ? size - payload : 0;
}

/* What the archive takes: the bytes the disk holds of a local one (less
 * than its size where space was given back), else its size. */
static uint64_t held_bytes(const tf_archive *ar, const stats *st)
{
    return st->allocated_known ? st->allocated_bytes : tf_archive_file_size(ar);
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
        snprintf(label, sizeof label, "  %s:", stats_dtype_name(d));
        text_row(&row, label);
        ulp_parts(x, bits);
        for (unsigned p = 0; p < ULP_PARTS; p++)
            text_ulp_part(bits[p], x->weights, ulp_part_labels[p]);
    }
    if (st->ulp_undecoded.blobs)
        text_row(&st->ulp_undecoded, "  not decoded (see errors)");
}

void stats_print_text(const tf_archive *ar, const size_t *order, const char *archive,
                      const stats *st)
{
    char logical[CLI_SIZE_LEN], size[CLI_SIZE_LEN], other[CLI_SIZE_LEN],
        other_stored[CLI_SIZE_LEN], overhead[CLI_SIZE_LEN], unused[CLI_SIZE_LEN];
    uint64_t archive_bytes = tf_archive_file_size(ar);
    cli_format_size(st->logical_bytes, logical);
    cli_format_size(archive_bytes, size);
    printf("archive %s: %s", archive, size);
    if (st->allocated_known) {
        char allocated[CLI_SIZE_LEN];
        cli_format_size(st->allocated_bytes, allocated);
        printf(" (%s allocated)", allocated);
    }
    printf(", %llu commits, chunks of 2^%u elements, format %u\n",
           (unsigned long long)tf_archive_commits(ar), tf_archive_chunk_shift(ar),
           tf_archive_format(ar));
    fputs("files:", stdout);
    for (unsigned f = 1; f < FORMAT_SLOTS; f++)
        if (f < FORMAT_SLOTS - 1 || st->n_tensor_files[f])
            printf(" %llu %s,", (unsigned long long)st->n_tensor_files[f], format_name(f));
    printf(" %llu other; %llu directories, %llu symlinks\n", (unsigned long long)st->n_other,
           (unsigned long long)st->n_dirs, (unsigned long long)st->n_symlinks);
    uint64_t held = held_bytes(ar, st);
    char held_size[CLI_SIZE_LEN];
    cli_format_size(held, held_size);
    printf("compression: %s of files in %s%s: ", logical, held_size,
           st->allocated_known ? " on disk" : "");
    if (held)
        printf("%.2fx\n", (double)st->logical_bytes / (double)held);
    else
        puts("-");
    if (st->chain_chunks)
        printf("reference chains: longest %u, mean %.2f deltas over %llu tensor chunks\n",
               st->chain_longest, (double)st->chain_sum / (double)st->chain_chunks,
               (unsigned long long)st->chain_chunks);

    printf("\n  %14s %10s %9s\n", "weights", "stored", "bits/wt");
    puts("by dtype:");
    for (unsigned d = 0; d < TF_DT_COUNT; d++)
        if (st->by_dtype[d].weights || st->by_dtype[d].stored)
            text_row(&st->by_dtype[d], stats_dtype_name(d));
    puts("by codec:");
    for (unsigned k = 0; k < CODEC_SLOTS; k++) {
        if (st->by_codec[k].weights || st->by_codec[k].stored)
            text_row(&st->by_codec[k], tf_codec_name(k));
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
    printf("catalog and framing: %s\n", overhead);
    /* Both are given back by the writer, as holes where the file
     * system can (trajfs(5)): the file's size counts them, its disk
     * blocks do not. */
    if (st->unused_bytes)
        printf("blobs no file uses: %s (given back as holes where the file system can)\n",
               unused);
    if (tf_archive_retired_bytes(ar)) {
        char retired[32];
        cli_format_size(tf_archive_retired_bytes(ar), retired);
        printf("payloads encoded again (superseded keyframes, rebases): %s (given back as holes "
               "where the file system can)\n", retired);
    }
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
               first ? "" : ",", stats_dtype_name(d), (unsigned long long)x->weights);
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

void stats_print_json(const tf_archive *ar, const size_t *order, const char *archive,
                      const stats *st)
{
    bool first;
    uint64_t archive_bytes = tf_archive_file_size(ar);
    fputs("{\n  \"archive\": ", stdout);
    cli_put_quoted(stdout, archive);
    printf(",\n  \"archive_bytes\": %llu,\n  \"allocated_bytes\": ",
           (unsigned long long)archive_bytes);
    if (st->allocated_known)
        printf("%llu", (unsigned long long)st->allocated_bytes);
    else
        fputs("null", stdout);
    printf(",\n  \"commits\": %llu,\n  \"chunk_shift\": %u,\n  \"format\": %u,\n",
           (unsigned long long)tf_archive_commits(ar), tf_archive_chunk_shift(ar),
           tf_archive_format(ar));
    printf("  \"chains\": {\"chunks\": %llu, \"longest\": %u, \"mean\": %.6f},\n",
           (unsigned long long)st->chain_chunks, st->chain_longest,
           st->chain_chunks ? (double)st->chain_sum / (double)st->chain_chunks : 0.0);
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
    if (held_bytes(ar, st))
        printf("%.6f", (double)st->logical_bytes / (double)held_bytes(ar, st));
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
            json_row(&first, "dtype", stats_dtype_name(d), &st->by_dtype[d]);
    fputs("\n  ],\n  \"by_codec\": [", stdout);
    first = true;
    for (unsigned k = 0; k < CODEC_SLOTS; k++) {
        if (!st->by_codec[k].weights && !st->by_codec[k].stored)
            continue;
        json_row_open(&first, "codec", tf_codec_name(k), &st->by_codec[k]);
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
    printf("  \"unused_blob_bytes\": %llu,\n  \"overhead_bytes\": %llu,\n"
           "  \"retired_bytes\": %llu\n}\n",
           (unsigned long long)st->unused_bytes, (unsigned long long)overhead_bytes(ar, st),
           (unsigned long long)tf_archive_retired_bytes(ar));
}
