/* trajpack stats (cmd_stats.c): the figures gathered (stats_gather.c),
 * printed as text or JSON (stats_print.c), and the per-tensor lines of
 * --tensors (stats_tensors.c). */
#ifndef TRAJFS_CLI_STATS_H
#define TRAJFS_CLI_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/dtype.h"
#include "store/archive.h"
#include "store/blob_stats.h"
#include "store/catalog_query.h"

#define FORMAT_SLOTS 4 /* format ids 0-2 (0 unused), then "unknown" */
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
    bool allocated_known;          /* a local archive: */
    uint64_t allocated_bytes;      /* what its disk holds (cli_archive_allocated) */
    /* Reference chains of the tensor chunks of live files: deltas
     * decoded to read each (tf_archive_chain_depth). */
    uint64_t chain_chunks, chain_sum;
    unsigned chain_longest;
} stats;

/* Charges every blob of ar to its first use and adds up the rows; 0, or
 * -1 after a message. Its notes and by_entry are the caller's to free. */
int stats_gather(tf_archive *ar, stats *st);

/* The figures of st, entries in order (archive indices). */
void stats_print_text(const tf_archive *ar, const size_t *order, const char *archive,
                      const stats *st);
void stats_print_json(const tf_archive *ar, const size_t *order, const char *archive,
                      const stats *st);

/* The name of a dtype row: "?" for an unknown one. */
const char *stats_dtype_name(unsigned dt);

/* One line (or JSON object) per tensor of the selected entries, in
 * order; 0, or -1 when a program could not be read (the others are
 * still printed). */
int stats_print_tensors(tf_archive *ar, const char *archive, const size_t *order,
                        const bool *selected, bool json);

#endif
