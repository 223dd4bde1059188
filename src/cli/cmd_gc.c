/* trajpack gc: rewrites an archive without the stored data that no file
 * uses any more (see store/gc.h). */
#include "cli/cli.h"

#include <sys/stat.h>

#include "cli/progress.h"
#include "store/gc.h"
#include "store/reclaim.h"
#include "store/regenerate.h"

static const char gc_usage[] =
    "Usage: trajpack gc [OPTIONS] ARCHIVE\n"
    "Give back the space of stored data that no file needs any more (left\n"
    "behind by files removed or replaced), in place: the chunks of kept files\n"
    "that reference removed ones are encoded again against the nearest kept\n"
    "chunk, in one commit, then the bytes no commit reads are punched out of\n"
    "the file (its size stays; the disk holds less). Removals give space back\n"
    "by themselves; gc finishes what a crash or an earlier release left.\n"
    "\nOptions:\n"
    "      --rewrite  then also rewrite the archive whole, without its history:\n"
    "                 one commit, written beside it, made durable and renamed\n"
    "                 over it (needs room for a copy; a crash leaves one or\n"
    "                 the other, whole)\n"
    "An ARCHIVE in object storage (s3://BUCKET/KEY) is always rewritten: as its\n"
    "next generation, from a copy in TMPDIR (else /var/tmp), uploaded whole;\n"
    "the old generation takes no commit from the start, and its objects are\n"
    "deleted once the new one is in place (see trajpack(1)).\n"
    "  -q, --quiet    no progress bar\n"
    "  -h, --help     show this help\n";

enum { OPT_REWRITE = 256 };

static const struct option gc_longopts[] = {
    { "rewrite", no_argument, NULL, OPT_REWRITE },
    { "quiet", no_argument, NULL, 'q' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
};

static void on_progress(void *arg, uint64_t bytes)
{
    cli_progress_add(arg, bytes);
}

static void print_reclaim(const tf_reclaim_stats *st, bool rebase_only)
{
    char before[CLI_SIZE_LEN], after[CLI_SIZE_LEN], was[CLI_SIZE_LEN], now[CLI_SIZE_LEN];
    cli_format_size(st->allocated_before, before);
    cli_format_size(st->allocated_after, after);
    if (st->rebase.chunks) {
        cli_format_size(st->rebase.bytes_before, was);
        cli_format_size(st->rebase.bytes_after, now);
        printf("gc: %llu chunks encoded again against kept ones (%s -> %s)\n",
               (unsigned long long)st->rebase.chunks, was, now);
    }
    if (!rebase_only)
        printf("gc: %s -> %s on disk\n", before, after);
}

static void print_rewrite(const tf_gc_stats *st)
{
    char before[CLI_SIZE_LEN], after[CLI_SIZE_LEN];
    cli_format_size(st->bytes_before, before);
    cli_format_size(st->bytes_after, after);
    if (st->bytes_after == st->bytes_before && st->blobs_after == st->blobs_before)
        printf("gc: nothing to rewrite (%s, %llu blobs)\n", before,
               (unsigned long long)st->blobs_before);
    else
        printf("gc: rewritten, %s -> %s, %llu of %llu blobs dropped\n", before, after,
               (unsigned long long)(st->blobs_before - st->blobs_after),
               (unsigned long long)st->blobs_before);
}

static int rewrite(const char *archive, bool quiet)
{
    struct stat st;
    cli_progress *bar = cli_progress_start("gc", stat(archive, &st) == 0 ? (uint64_t)st.st_size : 0,
                                           quiet);
    tf_gc_stats stats;
    tf_error e;
    int rc = tf_gc(archive, bar ? on_progress : NULL, bar, &stats, &e);
    cli_progress_end(bar);
    if (rc < 0) {
        cli_file_error(archive, e.msg);
        return CLI_EXIT_FAIL;
    }
    print_rewrite(&stats);
    return CLI_EXIT_OK;
}

/* An archive in object storage: written anew (store/regenerate.h). */
static int regenerate(const char *url, bool quiet)
{
    tf_remote_opts remote;
    tf_gc_stats stats;
    tf_error e;
    cli_progress *bar = cli_progress_start("gc", 0, quiet);
    int rc = cli_remote_opts(url, &remote, &e) < 0
                 ? -1
                 : tf_regenerate(url, &remote, bar ? on_progress : NULL, bar, &stats, &e);
    cli_progress_end(bar);
    tf_remote_opts_free(&remote);
    if (rc < 0) {
        cli_file_error(url, e.msg);
        return CLI_EXIT_FAIL;
    }
    print_rewrite(&stats);
    return CLI_EXIT_OK;
}

int cmd_gc(int argc, char **argv)
{
    const cli_cmd cmd = { .verb = argv[0], .usage = gc_usage,
                          .shortopts = "qh", .longopts = gc_longopts };
    bool quiet = false, full = false;
    int c;
    while ((c = cli_getopt(argc, argv, &cmd)) != -1) {
        switch (c) {
        case 'q': quiet = true; break;
        case OPT_REWRITE: full = true; break;
        case CLI_OPT_HELP: return CLI_EXIT_OK;
        default: return CLI_EXIT_USAGE;
        }
    }
    if (argc - optind != 1)
        return cli_usage_error(cmd.verb, "expected exactly one ARCHIVE");
    const char *archive = argv[optind];
    if (tf_io_is_url(archive))
        return regenerate(archive, quiet);
    tf_reclaim_stats stats;
    tf_error e;
    cli_rebase_bar bar = { .label = "gc: rebase", .quiet = quiet };
    tf_write_opts opts;
    tf_write_opts_default(&opts);
    cli_rebase_bar_hook(&bar, &opts);
    int rc = tf_reclaim(archive, &opts, full, &stats, &e);
    cli_rebase_bar_end(&bar);
    if (rc < 0) {
        cli_file_error(archive, e.msg);
        return CLI_EXIT_FAIL;
    }
    if (!full || stats.rebase.chunks)
        print_reclaim(&stats, full);
    return full ? rewrite(archive, quiet) : CLI_EXIT_OK;
}
