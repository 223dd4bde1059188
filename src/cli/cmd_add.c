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
#include "codec/prog/prog.h"
#include "common/cpus.h"
#include "format/container.h"
#include "store/writer.h"

#define STR_(x) #x
#define STR(x) STR_(x)

#define MAX_THREADS 1024

#define COMMON_OPTIONS \
    "  -T, --threads N      encoder threads (default: the number of online CPUs)\n" \
    "      --max-chain N    longest chain of deltas before a keyframe, 0 to " \
    STR(TF_CHAIN_MAX) "\n" \
    "                       (default " STR(TF_MAX_CHAIN_DEFAULT) ")\n" \
    "      --budget N       search budget of the prog codec: expansions per\n" \
    "                       tensor, 1 to " STR(TF_PROG_BUDGET_MAX) " (default " \
    STR(TF_PROG_DEFAULT_BUDGET) ")\n" \
    "      --all-programs   search a program for every tensor, also one with a\n" \
    "                       reference (float32 optimizer state about 1% smaller,\n" \
    "                       writing about 5x slower)\n" \
    "      --as NAME        store the single PATH as archive path NAME\n" \
    "      --parent APATH   encode the single file PATH as a delta against the\n" \
    "                       archive file APATH (default: the previous checkpoint\n" \
    "                       of its series in natural order)\n" \
    "  -q, --quiet          no progress bar\n" \
    "  -h, --help           show this help\n"

#define WALK_TEXT \
    "Each PATH is stored under its base name (like cp and tar); directories\n" \
    "are added recursively, names in natural order (step-900 before\n" \
    "step-1000), each directory before its contents. Every file is its own\n" \
    "commit: after an error, the files added before it stay in the archive.\n"

static const char create_usage[] =
    "Usage: trajpack create [OPTIONS] ARCHIVE PATH...\n"
    "Create ARCHIVE, which must not exist, from files and directories.\n"
    WALK_TEXT
    "\nOptions:\n"
    "      --chunk-shift N  tensor chunks of 2^N elements, " STR(TF_CHUNK_SHIFT_MIN)
    " to " STR(TF_CHUNK_SHIFT_MAX) " (default " STR(TF_CHUNK_SHIFT_DEFAULT) ")\n"
    COMMON_OPTIONS;

static const char add_usage[] =
    "Usage: trajpack add [OPTIONS] ARCHIVE PATH...\n"
    "Append files and directories to an existing ARCHIVE.\n"
    WALK_TEXT
    "\nOptions:\n"
    COMMON_OPTIONS;

enum { OPT_MAX_CHAIN = 256, OPT_BUDGET, OPT_ALL_PROGRAMS, OPT_CHUNK_SHIFT, OPT_AS, OPT_PARENT };

static const struct option add_longopts[] = {
    { "threads", required_argument, NULL, 'T' },
    { "max-chain", required_argument, NULL, OPT_MAX_CHAIN },
    { "budget", required_argument, NULL, OPT_BUDGET },
    { "all-programs", no_argument, NULL, OPT_ALL_PROGRAMS },
    { "chunk-shift", required_argument, NULL, OPT_CHUNK_SHIFT },
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

static int parse_option(add_args *a, int c)
{
    switch (c) {
    case 'T':
        return cli_parse_uint(a->verb, "--threads", optarg, 1, MAX_THREADS,
                              &a->wopts.threads);
    case OPT_MAX_CHAIN:
        return cli_parse_uint(a->verb, "--max-chain", optarg, 0, TF_CHAIN_MAX,
                              &a->wopts.max_chain);
    case OPT_BUDGET:
        return cli_parse_uint(a->verb, "--budget", optarg, 1, TF_PROG_BUDGET_MAX,
                              &a->wopts.prog_budget);
    case OPT_ALL_PROGRAMS:
        a->wopts.all_programs = true;
        return 0;
    case OPT_CHUNK_SHIFT:
        if (!a->create) {
            cli_usage_error(a->verb, "--chunk-shift is only for create: an archive's "
                            "chunk size is fixed when it is created");
            return -1;
        }
        return cli_parse_uint(a->verb, "--chunk-shift", optarg, TF_CHUNK_SHIFT_MIN,
                              TF_CHUNK_SHIFT_MAX, &a->chunk_shift);
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
    const cli_cmd cmd = {
        .verb = a->verb,
        .usage = a->create ? create_usage : add_usage,
        .shortopts = "T:qh",
        .longopts = add_longopts,
    };
    int c;
    while ((c = cli_getopt(argc, argv, &cmd)) != -1) {
        if (c == CLI_OPT_HELP)
            return CLI_EXIT_OK;
        if (c == CLI_OPT_BAD || parse_option(a, c) < 0)
            return CLI_EXIT_USAGE;
    }
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

static int add_inputs(const add_args *a, const cli_input_list *list)
{
    tf_writer *w;
    tf_error e;
    tf_write_opts wopts = a->wopts;
    cli_progress *bar = cli_progress_start(a->create ? "create" : "add",
                                           list->total_bytes, a->quiet);
    wopts.progress = bar ? on_progress : NULL;
    wopts.progress_arg = bar;
    if (tf_writer_open(a->archive, a->create, a->chunk_shift, &wopts, &w, &e) < 0) {
        cli_progress_end(bar);
        cli_file_error(a->archive, e.msg);
        return CLI_EXIT_FAIL;
    }
    int status = CLI_EXIT_OK;
    for (size_t i = 0; i < list->count; i++) {
        const cli_input *in = &list->items[i];
        if (tf_writer_add(w, in->src, in->dest, a->parent, &e) < 0) {
            cli_file_error(in->src, e.msg);
            status = CLI_EXIT_FAIL;
            break;
        }
    }
    tf_writer_close(w);
    cli_progress_end(bar);
    return status;
}

static int check_and_add(const add_args *a, cli_input_list *list)
{
    struct stat st;
    if (a->create && lstat(a->archive, &st) == 0) {
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
    unsigned cpus = tf_online_cpus();
    tf_write_opts_default(&a.wopts);
    a.wopts.threads = cpus < MAX_THREADS ? cpus : MAX_THREADS;
    a.wopts.max_chain = TF_MAX_CHAIN_DEFAULT;

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
