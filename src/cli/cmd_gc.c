/* trajpack gc: rewrites an archive without the stored data that no file
 * uses any more (see store/gc.h). */
#include "cli/cli.h"

#include <sys/stat.h>

#include "cli/progress.h"
#include "store/gc.h"

static const char gc_usage[] =
    "Usage: trajpack gc [OPTIONS] ARCHIVE\n"
    "Rewrite ARCHIVE without the stored data that no file uses any more (left\n"
    "behind by files removed or replaced). The new archive is written beside\n"
    "the old one, made durable and renamed over it, under the writer's lock:\n"
    "a crash leaves one or the other, whole. Files keep their inode numbers and\n"
    "their stored bytes.\n"
    "\nOptions:\n"
    "  -q, --quiet  no progress bar\n"
    "  -h, --help   show this help\n";

static const struct option gc_longopts[] = {
    { "quiet", no_argument, NULL, 'q' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
};

static void on_progress(void *arg, uint64_t bytes)
{
    cli_progress_add(arg, bytes);
}

static void print_summary(const tf_gc_stats *st)
{
    char before[CLI_SIZE_LEN], after[CLI_SIZE_LEN];
    cli_format_size(st->bytes_before, before);
    cli_format_size(st->bytes_after, after);
    if (st->bytes_after == st->bytes_before && st->blobs_after == st->blobs_before)
        printf("gc: nothing to collect (%s, %llu blobs)\n", before,
               (unsigned long long)st->blobs_before);
    else
        printf("gc: %s -> %s, %llu of %llu blobs dropped\n", before, after,
               (unsigned long long)(st->blobs_before - st->blobs_after),
               (unsigned long long)st->blobs_before);
}

int cmd_gc(int argc, char **argv)
{
    const cli_cmd cmd = { .verb = argv[0], .usage = gc_usage,
                          .shortopts = "qh", .longopts = gc_longopts };
    const char *archive;
    bool quiet;
    int status = cli_parse_quiet_archive(argc, argv, &cmd, &archive, &quiet);
    if (status >= 0)
        return status;
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
    print_summary(&stats);
    return CLI_EXIT_OK;
}
