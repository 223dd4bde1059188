/* trajpack create / add: one implementation, create only differs in
 * making a new archive (and choosing its chunk size). Every file is its
 * own commit, so an error stops the run but keeps what was committed. */
#include "cli/cli.h"

#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/progress.h"
#include "cli/walk.h"
#include "cli/write_options.h"
#include "store/writer.h"

#define WALK_TEXT \
    "Each PATH is stored under its base name, like cp and tar do: a file\n" \
    "/data/run/config.json as config.json, a directory /data/run as run/\n" \
    "with its contents below it (run/step-900/model.safetensors...);\n" \
    "--as NAME stores a single PATH as NAME instead. Directories are added\n" \
    "recursively, names in natural order (step-900 before step-1000), each\n" \
    "directory before its contents. Every file is its own commit: after an\n" \
    "error, the files added before it stay in the archive.\n"

static const char create_head[] =
    "Usage: trajpack create [OPTIONS] ARCHIVE PATH...\n"
    "Create ARCHIVE, which must not exist, from files and directories.\n"
    WALK_TEXT
    "\nOptions:\n"
    CLI_CHUNK_SHIFT_HELP " (default " CLI_STR(TF_CHUNK_SHIFT_DEFAULT) ")\n"
    "      --format-version N  the archive's format: 2, a catalog read by the\n"
    "                       page (default); 1, what releases before it read\n";

static const char add_head[] =
    "Usage: trajpack add [OPTIONS] ARCHIVE PATH...\n"
    "Append files and directories to an existing ARCHIVE.\n"
    WALK_TEXT
    "\nOptions:\n";

/* After the writer's settings (tf_write_opts_help). */
static const char usage_tail[] =
    "      --as NAME        store the single PATH as archive path NAME instead\n"
    "                       of under its base name (a directory's contents\n"
    "                       then land below NAME)\n"
    "      --parent APATH   encode the single file PATH as a delta against the\n"
    "                       archive file APATH, re-encoding nothing (default:\n"
    "                       the newest checkpoint of a series is keyframes,\n"
    "                       the one before it re-encoded as deltas against\n"
    "                       it: trajpack(1), REFERENCE CHAINS)\n"
    "  -q, --quiet          no progress bar\n"
    "  -h, --help           show this help\n";

enum { OPT_AS = CLI_OPT_VERB, OPT_PARENT, OPT_FORMAT_VERSION };

static const struct option add_longopts[] = {
    CLI_WRITE_LONGOPTS,
    { "chunk-shift", required_argument, NULL, CLI_OPT_CHUNK_SHIFT },
    { "format-version", required_argument, NULL, OPT_FORMAT_VERSION },
    { "as", required_argument, NULL, OPT_AS },
    { "parent", required_argument, NULL, OPT_PARENT },
    { "quiet", no_argument, NULL, 'q' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
};

typedef struct {
    const char *verb;
    bool create;
    bool quiet;
    unsigned chunk_shift;
    tf_write_opts wopts;
    char *as_name;     /* normalized --as, or NULL */
    char *parent;      /* normalized --parent, or NULL */
    const char *archive;
    char **paths;
    size_t npaths;
} add_args;

/* An archive path given as an option value; "" is not a file name. */
static int parse_archive_path(const char *verb, const char *opt, const char *arg,
                              char **out)
{
    free(*out);
    *out = cli_archive_path(arg);
    if (!*out || !**out) {
        cli_usage_error(verb, "%s: '%s' is not a path inside the archive", opt, arg);
        return -1;
    }
    return 0;
}

/* An option of create or add other than the writer's settings. */
static int parse_option(void *arg, int c)
{
    add_args *a = arg;
    switch (c) {
    case CLI_OPT_CHUNK_SHIFT:
        if (!a->create) {
            cli_usage_error(a->verb, "--chunk-shift is only for create: an archive's "
                            "chunk size is fixed when it is created (repack changes it)");
            return -1;
        }
        return cli_parse_uint(a->verb, "--chunk-shift", optarg, TF_CHUNK_SHIFT_MIN,
                              TF_CHUNK_SHIFT_MAX, &a->chunk_shift);
    case OPT_FORMAT_VERSION:
        if (!a->create) {
            cli_usage_error(a->verb, "--format-version is only for create: an archive's "
                            "format is fixed when it is created (repack rewrites it in the "
                            "newest)");
            return -1;
        }
        return cli_parse_uint(a->verb, "--format-version", optarg, TF_FORMAT_SEGMENTS,
                              TF_FORMAT_PAGES, &a->wopts.format_version);
    case OPT_AS:
        return parse_archive_path(a->verb, "--as", optarg, &a->as_name);
    case OPT_PARENT:
        return parse_archive_path(a->verb, "--parent", optarg, &a->parent);
    case 'q':
        a->quiet = true;
        return 0;
    default: /* cli_getopt only returns options of the table */
        return -1;
    }
}

/* Returns -1 to go on, or the exit status when parsing ends the run. */
static int parse_args(add_args *a, int argc, char **argv)
{
    const cli_write_cmd cmd = { .verb = a->verb, .head = a->create ? create_head : add_head,
                                .tail = usage_tail, .shortopts = "T:qh",
                                .longopts = add_longopts, .own_option = parse_option, .arg = a };
    int status = cli_parse_write_options(argc, argv, &cmd, &a->wopts);
    if (status >= 0)
        return status;
    if (argc - optind < 2)
        return cli_usage_error(a->verb, "expected an ARCHIVE and at least one PATH");
    a->archive = argv[optind];
    a->paths = argv + optind + 1;
    a->npaths = (size_t)(argc - optind - 1);
    if ((a->as_name || a->parent) && a->npaths != 1)
        return cli_usage_error(a->verb, "--as and --parent need exactly one PATH");
    return -1;
}

/* The archive name of a PATH given on the command line: its last
 * component, like cp and tar; "." and ".." name the directory they
 * resolve to. */
static char *top_name(const char *path)
{
    char *copy = strdup(path), *real = NULL, *name = NULL;
    if (!copy)
        return NULL;
    const char *base = basename(copy); /* POSIX basename drops trailing '/' */
    if (!strcmp(base, ".") || !strcmp(base, "..") || !strcmp(base, "/")) {
        real = realpath(path, NULL);
        base = real ? basename(real) : "/";
    }
    if (strcmp(base, "/") != 0)
        name = strdup(base);
    else
        cli_error("%s: has no name to store it under: use --as NAME", path);
    free(real);
    free(copy);
    return name;
}

/* Lists every input of the run, checked and named, before anything is
 * written. */
static int collect_inputs(const add_args *a, cli_input_list *list)
{
    struct stat st;
    dev_t skip_dev = 0;
    ino_t skip_ino = 0;
    if (stat(a->archive, &st) == 0) {
        skip_dev = st.st_dev;
        skip_ino = st.st_ino;
    }
    for (size_t i = 0; i < a->npaths; i++) {
        char *name = a->as_name ? a->as_name : top_name(a->paths[i]);
        if (!name)
            return -1;
        int rc = cli_walk(a->paths[i], name, skip_dev, skip_ino, list);
        if (name != a->as_name)
            free(name);
        if (rc < 0)
            return -1;
    }
    return 0;
}

static void on_progress(void *arg, uint64_t bytes)
{
    cli_progress_add(arg, bytes);
}

/* A checkpoint that found references for little of its bytes, where its
 * run has checkpoints: a warning, not an error (it is stored). */
static void warn_unmatched(const tf_writer *w, const char *dest)
{
    const tf_add_report *r = tf_writer_last_report(w);
    if (!tf_add_report_unmatched(r))
        return;
    char why[256];
    tf_add_report_warning(r, why, sizeof why);
    cli_error("warning: %s: %s", dest, why);
}

static int add_inputs(const add_args *a, const cli_input_list *list)
{
    tf_writer *w;
    tf_error e;
    tf_write_opts wopts = a->wopts;
    cli_progress *bar = cli_progress_start(a->create ? "create" : "add",
                                           list->total_bytes, a->quiet);
    wopts.progress = bar ? on_progress : NULL;
    wopts.progress_arg = bar;
    /* Each file is its own commit, written and made durable behind the
     * encoding of the next; tf_writer_settle waits for the last. */
    wopts.commit_behind = true;
    tf_remote_opts remote;
    wopts.remote = &remote;
    if (cli_remote_opts(a->archive, &remote, &e) < 0 ||
        tf_writer_open(a->archive, a->create, a->chunk_shift, &wopts, &w, &e) < 0) {
        tf_remote_opts_free(&remote);
        cli_progress_end(bar);
        cli_file_error(a->archive, e.msg);
        return CLI_EXIT_FAIL;
    }
    /* The chunks of the last regular file will be no one's reference. */
    size_t last_file = list->count;
    for (size_t i = 0; i < list->count; i++)
        if (S_ISREG(list->items[i].mode))
            last_file = i;
    int status = CLI_EXIT_OK;
    for (size_t i = 0; i < list->count; i++) {
        const cli_input *in = &list->items[i];
        if (i == last_file)
            tf_writer_keep_references(w, false);
        if (tf_writer_add(w, in->src, in->dest, a->parent, &e) < 0) {
            cli_file_error(in->src, e.msg);
            status = CLI_EXIT_FAIL;
            break;
        }
        warn_unmatched(w, in->dest);
    }
    if (tf_writer_settle(w, &e) < 0) {
        cli_file_error(a->archive, e.msg);
        status = CLI_EXIT_FAIL;
    }
    tf_writer_close(w);
    tf_remote_opts_free(&remote);
    cli_progress_end(bar);
    return status;
}

static int check_and_add(const add_args *a, cli_input_list *list)
{
    struct stat st;
    if (a->create && !tf_io_is_url(a->archive) && lstat(a->archive, &st) == 0) {
        cli_error("%s: already exists (create makes a new archive; add appends)",
                  a->archive);
        return CLI_EXIT_FAIL;
    }
    if (collect_inputs(a, list) < 0)
        return CLI_EXIT_FAIL;
    if (a->parent && !(list->count == 1 && S_ISREG(list->items[0].mode)))
        return cli_usage_error(a->verb, "--parent needs a single regular file PATH");
    return add_inputs(a, list);
}

static int run_add(int argc, char **argv, bool create)
{
    add_args a = {
        .verb = argv[0],
        .create = create,
        .chunk_shift = TF_CHUNK_SHIFT_DEFAULT,
    };
    tf_write_opts_default(&a.wopts);

    cli_input_list list = { 0 };
    int status = parse_args(&a, argc, argv);
    if (status < 0)
        status = check_and_add(&a, &list);
    cli_input_list_free(&list);
    free(a.as_name);
    free(a.parent);
    return status;
}

int cmd_create(int argc, char **argv)
{
    return run_add(argc, argv, true);
}

int cmd_add(int argc, char **argv)
{
    return run_add(argc, argv, false);
}
