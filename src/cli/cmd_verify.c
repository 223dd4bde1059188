/* trajpack verify: reconstructs every blob that a live file uses (payload
 * checksum, decode against the reference chain, content id of the
 * result), names every tensor or file that uses a bad one or whose stored
 * safetensors header does not describe its tensors, and goes on past
 * errors. */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>

#include "cli/hint.h"
#include "cli/progress.h"
#include "store/catalog_query.h"
#include "store/entry_check.h"
#include "store/read_order.h"
#include "store/reader.h"

#define CACHE_BYTES (256u << 20) /* keeps references of the next step's deltas */
/* No chunk reconstructs to more than 2^TF_CHUNK_SHIFT_MAX elements of 8
 * bytes; a larger raw_len is damage, not an allocation to attempt. */
#define MAX_RAW_BYTES ((uint64_t)8 << TF_CHUNK_SHIFT_MAX)

static const char verify_usage[] =
    "Usage: trajpack verify [OPTIONS] ARCHIVE\n"
    "Reconstruct every blob that a file of ARCHIVE uses: check the checksum of\n"
    "its stored bytes, decode it (its references first) and check the content\n"
    "id of the result. Every tensor or file with bad data is named, and\n"
    "verification goes on past it. Exits 0 when all is good, 1 otherwise.\n"
    "\nOptions:\n"
    "  -q, --quiet  no progress bar\n"
    "  -h, --help   show this help\n";

static const struct option verify_longopts[] = {
    { "quiet", no_argument, NULL, 'q' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
};

typedef enum { BLOB_UNCHECKED = 0, BLOB_GOOD, BLOB_BAD } blob_state;

typedef struct {
    tf_archive *ar;
    tf_reader_ctx *reader;
    uint8_t *buf;       /* the largest raw_len of a used blob */
    blob_state *state;  /* per blob */
    char **why;         /* per bad blob: the error */
    cli_progress *bar;
    uint64_t *order;    /* the blobs in the order they are checked */
    size_t norder;
    cli_hint hint;      /* over order */
    uint64_t raw_checked;
    uint64_t blobs_checked, blobs_bad, headers_bad, files, files_bad, bytes;
} verifier;

/* Reconstructs blob b once; later uses get the remembered verdict. */
static blob_state check_blob(verifier *v, uint64_t b)
{
    if (b >= tf_archive_nblobs(v->ar))
        return BLOB_BAD; /* the catalog decoder rejects this; stay safe */
    if (v->state[b] != BLOB_UNCHECKED)
        return v->state[b];
    tf_blob blob;
    tf_error e;
    v->blobs_checked++;
    cli_hint_until(&v->hint, v->reader, v->ar, v->order, v->norder, v->raw_checked + CLI_HINT_WINDOW);
    int rc = tf_archive_blob(v->ar, b, &blob, &e);
    uint64_t raw = rc == 0 ? blob.raw_len : 0; /* as measure() counted it */
    if (rc == 0) {
        v->raw_checked += raw;
        rc = blob.raw_len > MAX_RAW_BYTES
                 ? tf_fail(&e, 0, "blob %llu: implausible length %llu", (unsigned long long)b,
                           (unsigned long long)blob.raw_len)
                 : tf_reader_blob(v->reader, b, v->buf, &e);
    }
    if (rc < 0) {
        v->state[b] = BLOB_BAD;
        v->why[b] = strdup(e.msg);
        v->blobs_bad++;
    } else {
        v->state[b] = BLOB_GOOD;
    }
    cli_progress_add(v->bar, raw);
    return v->state[b];
}

/* Names the part of ent that chunk c holds, and why it is bad. */
static void report_bad_chunk(verifier *v, const tf_entry *ent, uint64_t c)
{
    uint64_t b = ent->chunks[c];
    const char *why = b < tf_archive_nblobs(v->ar) && v->why[b] ? v->why[b] : "bad data";
    uint64_t t = tf_tensor_of_chunk(v->ar, ent, c);
    cli_progress_hide();
    if (t >= ent->ntensors) { /* an opaque file's bytes, or verbatim ones */
        if (ent->nchunks > 1)
            cli_error("%s: chunk %llu: %s", ent->path, (unsigned long long)c, why);
        else
            cli_error("%s: %s", ent->path, why);
        return;
    }
    fprintf(stderr, "trajpack: %s: tensor ", ent->path);
    cli_put_quoted(stderr, tf_tensor_name(ent, t));
    if (tf_tensor_nchunks(v->ar, ent, t) > 1)
        fprintf(stderr, " chunk %llu",
                (unsigned long long)(c - ent->tensors[t].first_chunk));
    fprintf(stderr, ": %s\n", why);
}

static void verify_file(verifier *v, const tf_entry *ent)
{
    tf_error e;
    bool bad = tf_reader_check_layout(v->reader, ent, &e) < 0;
    if (bad) {
        cli_error("%s", e.msg);
        v->headers_bad++;
    }
    for (uint64_t c = 0; c < ent->nchunks; c++) {
        if (check_blob(v, ent->chunks[c]) == BLOB_BAD) {
            report_bad_chunk(v, ent, c);
            bad = true;
        }
    }
    v->files++;
    v->files_bad += bad;
    v->bytes += ent->size;
}

/* Sizes the work before starting: the raw bytes of the blobs checked
 * (for the progress bar) and the largest one (for the buffer). */
static void measure(const tf_archive *ar, const uint64_t *blobs, size_t n, uint64_t *total,
                    uint64_t *largest)
{
    *total = *largest = 0;
    for (size_t i = 0; i < n; i++) {
        tf_blob b;
        tf_error ignored; /* the check of the blob reports it */
        uint64_t raw = tf_archive_blob(ar, blobs[i], &b, &ignored) == 0 ? b.raw_len : 0;
        *total += raw;
        if (raw <= MAX_RAW_BYTES && raw > *largest)
            *largest = raw;
    }
}

static void print_summary(const verifier *v, const char *archive)
{
    char bytes[CLI_SIZE_LEN];
    uint64_t torn = tf_archive_torn_bytes(v->ar);
    if (torn)
        printf("note: %s: %llu bytes after the last commit are ignored "
               "(an interrupted write)\n", archive, (unsigned long long)torn);
    cli_format_size(v->bytes, bytes);
    printf("verified %llu files, %llu blobs, %s: ", (unsigned long long)v->files,
           (unsigned long long)v->blobs_checked, bytes);
    if (v->blobs_bad == 0 && v->headers_bad == 0)
        puts("OK");
    else if (v->headers_bad == 0)
        printf("%llu bad blobs in %llu files\n", (unsigned long long)v->blobs_bad,
               (unsigned long long)v->files_bad);
    else
        printf("%llu bad blobs, %llu headers unlike their tensors in %llu files\n",
               (unsigned long long)v->blobs_bad, (unsigned long long)v->headers_bad,
               (unsigned long long)v->files_bad);
}

static int verify_archive(tf_archive *ar, const char *archive, bool quiet)
{
    verifier v = { .ar = ar };
    uint64_t total = 0, largest = 0, nblobs = tf_archive_nblobs(ar);
    size_t nfiles;
    size_t *files = tf_read_order(ar, &nfiles); /* references before their deltas */
    if (files && (v.order = cli_blob_order(ar, files, nfiles, &v.norder)))
        measure(ar, v.order, v.norder, &total, &largest);
    v.reader = tf_reader_new(ar, CACHE_BYTES);
    v.buf = malloc(largest ? largest : 1);
    v.state = calloc(nblobs ? nblobs : 1, sizeof *v.state);
    v.why = calloc(nblobs ? nblobs : 1, sizeof *v.why);
    int status = CLI_EXIT_FAIL;
    if (!files || !v.reader || !v.buf || !v.state || !v.why || !v.order) {
        cli_error("out of memory");
    } else {
        v.bar = cli_progress_start("verify", total, quiet);
        for (size_t i = 0; i < nfiles; i++)
            verify_file(&v, tf_archive_entry(ar, files[i]));
        cli_progress_end(v.bar);
        print_summary(&v, archive);
        status = v.blobs_bad || v.headers_bad ? CLI_EXIT_FAIL : CLI_EXIT_OK;
    }
    for (uint64_t b = 0; v.why && b < nblobs; b++)
        free(v.why[b]);
    free(v.why);
    free(v.order);
    free(files);
    free(v.state);
    free(v.buf);
    if (v.reader)
        tf_reader_free(v.reader);
    return status;
}

int cmd_verify(int argc, char **argv)
{
    const cli_cmd cmd = { .verb = argv[0], .usage = verify_usage,
                          .shortopts = "qh", .longopts = verify_longopts };
    const char *archive;
    bool quiet;
    int status = cli_parse_quiet_archive(argc, argv, &cmd, &archive, &quiet);
    if (status >= 0)
        return status;
    tf_archive *ar = cli_open_archive(archive, CLI_OPEN_CHECK_ALL);
    if (!ar)
        return CLI_EXIT_FAIL;
    status = verify_archive(ar, archive, quiet);
    tf_archive_close(ar);
    return status;
}
