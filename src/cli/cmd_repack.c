/* trajpack repack: rewrites an archive with other writer settings (see
 * store/repack.h). */
#include "cli/cli.h"


#include "cli/progress.h"
#include "cli/write_options.h"
#include "store/repack.h"

static const char repack_head[] =
    "Usage: trajpack repack [OPTIONS] ARCHIVE\n"
    "Rewrite ARCHIVE with other writer settings, e.g. long chains for cold\n"
    "storage once training is over (--max-chain 4096). Every file is\n"
    "reconstructed and encoded again as `trajpack create` of the same files\n"
    "would store it: the checkpoints of each run in step order. Files keep\n"
    "their paths, inode numbers, modes and times. The new archive is written\n"
    "beside the old one, made durable and renamed over it, under the\n"
    "writer's lock: a crash leaves one or the other, whole.\n"
    "\nOptions:\n"
    CLI_CHUNK_SHIFT_HELP " (default:\n"
    "                       the archive's)\n";

static const char repack_tail[] =
    "  -q, --quiet          no progress bar\n"
    "  -h, --help           show this help\n";

static const struct option repack_longopts[] = {
    CLI_WRITE_LONGOPTS,
    { "chunk-shift", required_argument, NULL, CLI_OPT_CHUNK_SHIFT },
    { "quiet", no_argument, NULL, 'q' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
};

typedef struct {
    const char *verb, *archive;
    bool quiet;
    unsigned chunk_shift; /* 0: the archive's */
    tf_write_opts wopts;
} repack_args;

/* An option other than the writer's settings. */
static int parse_option(void *arg, int c)
{
    repack_args *a = arg;
    switch (c) {
    case CLI_OPT_CHUNK_SHIFT:
        return cli_parse_uint(a->verb, "--chunk-shift", optarg, TF_CHUNK_SHIFT_MIN,
                              TF_CHUNK_SHIFT_MAX, &a->chunk_shift);
    case 'q':
        a->quiet = true;
        return 0;
    default: /* cli_getopt only returns options of the table */
        return -1;
    }
}

/* Returns -1 to go on, or the exit status when parsing ends the run. */
static int parse_args(repack_args *a, int argc, char **argv)
{
    const cli_write_cmd cmd = { .verb = a->verb, .head = repack_head, .tail = repack_tail,
                                .shortopts = "T:qh", .longopts = repack_longopts,
                                .own_option = parse_option, .arg = a };
    int status = cli_parse_write_options(argc, argv, &cmd, &a->wopts);
    if (status >= 0)
        return status;
    if (argc - optind != 1)
        return cli_usage_error(a->verb, "expected exactly one ARCHIVE");
    a->archive = argv[optind];
    return -1;
}

static void on_progress(void *arg, uint64_t bytes)
{
    cli_progress_add(arg, bytes);
}

/* "repack: 3 files, 12.1 MB -> 9.8 MB (allocated 12.2 MB -> 9.8 MB)" */
static void print_summary(const tf_repack_stats *st)
{
    char before[CLI_SIZE_LEN], after[CLI_SIZE_LEN], alloc_before[CLI_SIZE_LEN],
        alloc_after[CLI_SIZE_LEN];
    cli_format_size(st->bytes_before, before);
    cli_format_size(st->bytes_after, after);
    cli_format_size(st->allocated_before, alloc_before);
    cli_format_size(st->allocated_after, alloc_after);
    printf("repack: %llu files, %s -> %s (allocated %s -> %s)\n",
           (unsigned long long)st->files, before, after, alloc_before, alloc_after);
}

static int repack(const repack_args *a)
{
    tf_repack *rp;
    tf_error e;
    if (tf_repack_open(a->archive, &rp, &e) < 0) {
        cli_file_error(a->archive, e.msg);
        return CLI_EXIT_FAIL;
    }
    tf_write_opts wopts = a->wopts;
    cli_progress *bar = cli_progress_start("repack", tf_repack_file_bytes(rp), a->quiet);
    wopts.progress = bar ? on_progress : NULL;
    wopts.progress_arg = bar;
    tf_repack_stats stats;
    int rc = tf_repack_run(rp, &wopts, a->chunk_shift, &stats, &e);
    cli_progress_end(bar);
    tf_repack_close(rp);
    if (rc < 0) {
        cli_file_error(a->archive, e.msg);
        return CLI_EXIT_FAIL;
    }
    print_summary(&stats);
    return CLI_EXIT_OK;
}

int cmd_repack(int argc, char **argv)
{
    repack_args a = { .verb = argv[0] };
    tf_write_opts_default(&a.wopts);
    int status = parse_args(&a, argc, argv);
    return status >= 0 ? status : repack(&a);
}
