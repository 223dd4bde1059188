/* trajpack list: paths in natural order; with -l sizes, stored sizes, the
 * share of delta-coded tensor bytes and the codec mix; with --blobs a
 * debugging listing of where each blob lies and who uses it. */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "store/catalog_query.h"

static const char list_usage[] =
    "Usage: trajpack list [OPTIONS] ARCHIVE [PATH...]\n"
    "List the entries of ARCHIVE, or only PATH... and everything below them,\n"
    "one path per line in natural order (step-20 before step-100), each\n"
    "directory before its contents; directories end in '/'.\n"
    "\nOptions:\n"
    "  -l, --long   also show mode, size, stored size, compression ratio, the\n"
    "               share of a tensor file's tensor bytes stored as deltas\n"
    "               (e.g. \"delta 93%\") and the codecs of the stored bytes,\n"
    "               and a total line with the archive's size and the bytes\n"
    "               its disk holds (allocated: less where the file has\n"
    "               holes). A file's stored size counts the blobs that no\n"
    "               file committed before it uses: a fully deduplicated file\n"
    "               stores 0 bytes.\n"
    "      --blobs  debugging listing, one tab-separated line per use of a\n"
    "               stored blob: blob index, payload offset, encoded and raw\n"
    "               length, codec, reference and model blob, file, tensor and\n"
    "               chunk; then the blobs no file uses directly\n"
    "  -h, --help   show this help\n";

enum { OPT_BLOBS = 256 };

static const struct option list_longopts[] = {
    { "long", no_argument, NULL, 'l' },
    { "blobs", no_argument, NULL, OPT_BLOBS },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
};

/* Slots of the codec mix: one per known codec and one for unknown ids. */
#define MIX_SLOTS (TF_CODEC_COUNT + 1)

/* ---- plain and long listing -------------------------------------------- */

typedef struct {
    uint64_t stored;
    uint64_t by_codec[MIX_SLOTS]; /* stored bytes per codec */
} file_cost;

/* How many bytes of a tensor file's tensors are in chunks stored as a
 * delta against another blob (whoever stored them: a deduplicated file
 * shows how its bytes are coded). */
typedef struct {
    uint64_t tensor_bytes, delta_bytes;
} delta_share;

/* The share of ent's tensor bytes stored as deltas into *d; false (after
 * a message) when a blob's record cannot be read. */
static bool measure_deltas(const tf_archive *ar, const tf_entry *ent, delta_share *d)
{
    *d = (delta_share){ 0, 0 };
    for (uint64_t t = 0; t < ent->ntensors; t++) {
        const tf_tensor_span *ts = &ent->tensors[t];
        uint64_t n = tf_tensor_nchunks(ar, ent, t), chunk_bytes = tf_tensor_chunk_bytes(ar, ts);
        d->tensor_bytes += ts->nbytes;
        for (uint64_t k = 0; k < n; k++) {
            tf_blob b;
            tf_error e;
            if (tf_archive_blob(ar, ent->chunks[ts->first_chunk + k], &b, &e) < 0) {
                cli_error("%s: %s", ent->path, e.msg);
                return false;
            }
            if (!b.ref)
                continue;
            uint64_t at = k * chunk_bytes;
            d->delta_bytes += ts->nbytes - at < chunk_bytes ? ts->nbytes - at : chunk_bytes;
        }
    }
    return true;
}

/* Stored bytes charged to each entry (see tf_archive_blob_owners). */
static file_cost *charge_entries(const tf_archive *ar)
{
    size_t n = tf_archive_nentries(ar);
    tf_error e;
    uint64_t *owners = tf_archive_blob_owners(ar, &e);
    file_cost *cost = owners ? calloc(n ? n : 1, sizeof *cost) : NULL;
    if (!cost) {
        cli_error("%s", owners ? "out of memory" : e.msg);
        free(owners);
        return NULL;
    }
    for (uint64_t b = 0; b < tf_archive_nblobs(ar); b++) {
        tf_blob blob;
        if (!owners[b])
            continue;
        if (tf_archive_blob(ar, b, &blob, &e) < 0) {
            cli_error("%s", e.msg);
            free(owners);
            free(cost);
            return NULL;
        }
        file_cost *fc = &cost[owners[b] - 1];
        fc->stored += blob.enc_len;
        fc->by_codec[blob.codec < TF_CODEC_COUNT ? blob.codec : TF_CODEC_COUNT] += blob.enc_len;
    }
    free(owners);
    return cost;
}

static void format_mode(const tf_entry *ent, char out[11])
{
    static const char rwx[] = "rwxrwxrwx";
    uint32_t m = ent->mode;
    out[0] = ent->kind == TF_ENTRY_DIR ? 'd' : ent->kind == TF_ENTRY_SYMLINK ? 'l' : '-';
    for (int i = 0; i < 9; i++)
        out[1 + i] = m & (1u << (8 - i)) ? rwx[i] : '-';
    if (m & S_ISUID)
        out[3] = out[3] == 'x' ? 's' : 'S';
    if (m & S_ISGID)
        out[6] = out[6] == 'x' ? 's' : 'S';
    if (m & S_ISVTX)
        out[9] = out[9] == 'x' ? 't' : 'T';
    out[10] = '\0';
}

/* "ulp 92% bytegroup 7% raw 1%", largest first; "dedup" when the file's
 * blobs were all stored before; "-" for a file without data. */
static void format_mix(const tf_entry *ent, const file_cost *fc, char *out, size_t outsz)
{
    bool done[MIX_SLOTS] = { false };
    size_t len = 0;
    out[0] = '\0';
    if (fc->stored == 0) {
        snprintf(out, outsz, "%s", ent->nchunks ? "dedup" : "-");
        return;
    }
    for (;;) {
        unsigned best = MIX_SLOTS;
        for (unsigned k = 0; k < MIX_SLOTS; k++)
            if (!done[k] && fc->by_codec[k] &&
                (best == MIX_SLOTS || fc->by_codec[k] > fc->by_codec[best]))
                best = k;
        if (best == MIX_SLOTS || len >= outsz)
            return;
        done[best] = true;
        double pct = 100.0 * (double)fc->by_codec[best] / (double)fc->stored;
        int w = pct < 0.5 ? snprintf(out + len, outsz - len, "%s%s <1%%", len ? " " : "",
                                     tf_codec_name(best))
                          : snprintf(out + len, outsz - len, "%s%s %.0f%%",
                                     len ? " " : "", tf_codec_name(best), pct);
        len += w > 0 ? (size_t)w : 0;
    }
}

/* "delta 93%" for a tensor file: the share of its tensor bytes stored as
 * deltas, never rounded to 0% or 100% unless it is exactly that; "-" for
 * other entries and tensor files without tensor bytes. */
static bool format_delta(const tf_archive *ar, const tf_entry *ent, char *out, size_t outsz)
{
    delta_share d = { 0, 0 };
    if (tf_entry_is_tensor_file(ent) && !measure_deltas(ar, ent, &d)) {
        snprintf(out, outsz, "?");
        return false;
    }
    if (d.tensor_bytes == 0) {
        snprintf(out, outsz, "-");
        return true;
    }
    unsigned pct = (unsigned)(100.0 * (double)d.delta_bytes / (double)d.tensor_bytes + 0.5);
    if (pct == 0 && d.delta_bytes)
        pct = 1;
    if (pct == 100 && d.delta_bytes < d.tensor_bytes)
        pct = 99;
    snprintf(out, outsz, "delta %u%%", pct);
    return true;
}

static void format_ratio(uint64_t size, uint64_t stored, char *out, size_t outsz)
{
    if (stored == 0)
        snprintf(out, outsz, "-");
    else
        snprintf(out, outsz, "%.2fx", (double)size / (double)stored);
}

/* One entry of `list -l`; false (after a message, the line printed with
 * "?" for what could not be read) when a blob's record cannot be read. */
static bool print_long(const tf_archive *ar, const tf_entry *ent, const file_cost *fc)
{
    char mode[11], size[CLI_SIZE_LEN], stored[CLI_SIZE_LEN], ratio[32], delta[16], mix[128];
    format_mode(ent, mode);
    bool ok = format_delta(ar, ent, delta, sizeof delta);
    if (tf_entry_is_regular(ent)) {
        cli_format_size(ent->size, size);
        cli_format_size(fc->stored, stored);
        format_ratio(ent->size, fc->stored, ratio, sizeof ratio);
        format_mix(ent, fc, mix, sizeof mix);
    } else {
        snprintf(size, sizeof size, "-");
        snprintf(stored, sizeof stored, "-");
        snprintf(ratio, sizeof ratio, "-");
        snprintf(mix, sizeof mix, "-");
    }
    printf("%s %9s %9s %7s  %-10s  %-30s %s%s", mode, size, stored, ratio, delta, mix,
           ent->path, ent->kind == TF_ENTRY_DIR ? "/" : "");
    if (ent->kind == TF_ENTRY_SYMLINK) {
        /* Paths are checked when the catalog is read; a link target may
         * hold any byte but NUL. */
        fputs(" -> ", stdout);
        cli_put_visible(stdout, ent->target);
    }
    putchar('\n');
    return ok;
}

static void print_total(const tf_archive *ar, const bool *selected, const file_cost *cost)
{
    uint64_t files = 0, size = 0, stored = 0;
    char size_s[CLI_SIZE_LEN], stored_s[CLI_SIZE_LEN], archive_s[CLI_SIZE_LEN],
        allocated_s[CLI_SIZE_LEN], ratio[32];
    for (size_t i = 0; i < tf_archive_nentries(ar); i++) {
        const tf_entry *ent = tf_archive_entry(ar, i);
        if (!selected[i] || !tf_entry_is_regular(ent))
            continue;
        files++;
        size += ent->size;
        stored += cost[i].stored;
    }
    cli_format_size(size, size_s);
    cli_format_size(stored, stored_s);
    cli_format_size(tf_archive_file_size(ar), archive_s);
    format_ratio(size, stored, ratio, sizeof ratio);
    printf("total: %llu files, %s, stored %s (%s); archive %s", (unsigned long long)files,
           size_s, stored_s, ratio, archive_s);
    uint64_t allocated;
    if (cli_archive_allocated(ar, &allocated)) {
        cli_format_size(allocated, allocated_s);
        printf(" (%s allocated)", allocated_s);
    }
    printf(" in %llu commits\n", (unsigned long long)tf_archive_commits(ar));
}

static int print_entries(const tf_archive *ar, const size_t *order, const bool *selected,
                         bool long_format)
{
    file_cost *cost = NULL;
    if (long_format && !(cost = charge_entries(ar)))
        return CLI_EXIT_FAIL;
    bool ok = true;
    for (size_t k = 0; k < tf_archive_nentries(ar); k++) {
        size_t i = order[k];
        const tf_entry *ent = tf_archive_entry(ar, i);
        if (!selected[i])
            continue;
        if (long_format)
            ok &= print_long(ar, ent, &cost[i]);
        else
            printf("%s%s\n", ent->path, ent->kind == TF_ENTRY_DIR ? "/" : "");
    }
    if (long_format)
        print_total(ar, selected, cost);
    free(cost);
    return ok ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

/* ---- blob listing ------------------------------------------------------ */

static void print_blob_index(uint64_t plus_one)
{
    if (plus_one)
        printf("\t%llu", (unsigned long long)(plus_one - 1));
    else
        fputs("\t-", stdout);
}

/* The columns of blob b; false (after a message) when its record cannot
 * be read. */
static bool print_blob(const tf_archive *ar, uint64_t b)
{
    tf_blob blob;
    tf_error e;
    if (tf_archive_blob(ar, b, &blob, &e) < 0) {
        cli_error("%s", e.msg);
        return false;
    }
    printf("%llu\t%llu\t%llu\t%llu\t%s", (unsigned long long)b, (unsigned long long)blob.offset,
           (unsigned long long)blob.enc_len, (unsigned long long)blob.raw_len,
           tf_codec_name(blob.codec));
    print_blob_index(blob.ref);
    print_blob_index(blob.model);
    return true;
}

static bool print_chunk_uses(const tf_archive *ar, const tf_entry *ent, bool *used)
{
    for (uint64_t c = 0; c < ent->nchunks; c++) {
        uint64_t b = ent->chunks[c];
        if (b >= tf_archive_nblobs(ar))
            continue;
        used[b] = true;
        if (!print_blob(ar, b))
            return false;
        printf("\t%s\t", ent->path);
        uint64_t t = tf_tensor_of_chunk(ar, ent, c);
        if (t < ent->ntensors) {
            cli_put_quoted(stdout, tf_tensor_name(ent, t));
            printf("\t%llu\n", (unsigned long long)(c - ent->tensors[t].first_chunk));
        } else {
            printf("-\t%llu\n", (unsigned long long)c);
        }
    }
    return true;
}

static int print_blobs(tf_archive *ar, const size_t *order, const bool *selected, bool all)
{
    uint64_t nblobs = tf_archive_nblobs(ar);
    bool *used = calloc(nblobs ? nblobs : 1, sizeof *used);
    if (!used) {
        cli_error("out of memory");
        return CLI_EXIT_FAIL;
    }
    puts("#blob\toffset\tenc_len\traw_len\tcodec\tref\tmodel\tpath\ttensor\tchunk");
    bool ok = true;
    for (size_t k = 0; ok && k < tf_archive_nentries(ar); k++) {
        const tf_entry *ent = tf_archive_entry(ar, order[k]);
        if (selected[order[k]] && tf_entry_is_regular(ent))
            ok = print_chunk_uses(ar, ent, used);
    }
    /* Models and references left by replaced files, when listing all. */
    for (uint64_t b = 0; ok && all && b < nblobs; b++) {
        if (!used[b]) {
            ok = print_blob(ar, b);
            if (ok)
                puts("\t-\t-\t-");
        }
    }
    free(used);
    return ok ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

/* ---- the verb ---------------------------------------------------------- */

int cmd_list(int argc, char **argv)
{
    const cli_cmd cmd = { .verb = argv[0], .usage = list_usage,
                          .shortopts = "lh", .longopts = list_longopts };
    bool long_format = false, blobs = false;
    int c;
    while ((c = cli_getopt(argc, argv, &cmd)) != -1) {
        switch (c) {
        case 'l': long_format = true; break;
        case OPT_BLOBS: blobs = true; break;
        case CLI_OPT_HELP: return CLI_EXIT_OK;
        default: return CLI_EXIT_USAGE;
        }
    }
    if (optind >= argc)
        return cli_usage_error(cmd.verb, "expected an ARCHIVE");
    if (long_format && blobs)
        return cli_usage_error(cmd.verb, "--long and --blobs exclude each other");

    size_t npaths = (size_t)(argc - optind - 1);
    char **paths = cli_archive_paths(argv + optind + 1, npaths);
    /* A plain listing reads the entries' headers only. */
    cli_open_how how = long_format || blobs ? CLI_OPEN_WHOLE : CLI_OPEN_HEADERS;
    tf_archive *ar = paths ? cli_open_archive(argv[optind], how) : NULL;
    if (!ar) {
        cli_free_paths(paths, npaths);
        return CLI_EXIT_FAIL;
    }
    size_t n = tf_archive_nentries(ar);
    bool *selected = malloc((n ? n : 1) * sizeof *selected);
    size_t *order = tf_archive_natural_order(ar);
    int status = CLI_EXIT_FAIL;
    if (!selected || !order) {
        cli_error("out of memory");
    } else {
        size_t missing = cli_select_entries(ar, paths, npaths, selected);
        status = blobs ? print_blobs(ar, order, selected, npaths == 0)
                       : print_entries(ar, order, selected, long_format);
        if (missing)
            status = CLI_EXIT_FAIL;
    }
    free(order);
    free(selected);
    tf_archive_close(ar);
    cli_free_paths(paths, npaths);
    return status;
}
