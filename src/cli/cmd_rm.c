/* trajpack rm: removes files and directories from an archive, all in one
 * commit, and the space they alone used comes back. */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>

#include "cli/remove.h"

static const char rm_usage[] =
    "Usage: trajpack rm [OPTIONS] ARCHIVE PATH...\n"
    "Remove files from ARCHIVE, all of them in one durable commit: when a PATH\n"
    "is refused (not in the archive, a directory without -r), nothing is\n"
    "removed. A PATH is a path inside the archive, as trajpack list shows it\n"
    "(a trailing '/' is allowed); a directory goes with everything below it.\n"
    "The space comes back at once: the commit gives back the data no kept\n"
    "file reads, then the chunks of kept files that were deltas against\n"
    "removed ones are re-encoded against the nearest kept one, in a second\n"
    "commit (a crash in between leaves a valid archive, the removal done).\n"
    "\nOptions:\n"
    "  -r, -R, --recursive  remove directories and their contents\n"
    "  -f, --force          a PATH that is not in the archive is no error\n"
    "  -q, --quiet          print no summary and no progress bar\n"
    "  -h, --help           show this help\n";

static const struct option rm_longopts[] = {
    { "recursive", no_argument, NULL, 'r' },
    { "force", no_argument, NULL, 'f' },
    { "quiet", no_argument, NULL, 'q' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
};

typedef struct {
    bool recursive, force, quiet;
    const char *archive;
    char **args;  /* the PATHs as given */
    char **paths; /* normalized */
    size_t npaths;
} rm_args;

/* Returns -1 to go on, or the exit status. */
static int parse_args(rm_args *a, int argc, char **argv)
{
    const cli_cmd cmd = { .verb = argv[0], .usage = rm_usage, .shortopts = "rRfqh",
                          .longopts = rm_longopts };
    int c;
    while ((c = cli_getopt(argc, argv, &cmd)) != -1) {
        switch (c) {
        case 'r':
        case 'R': a->recursive = true; break;
        case 'f': a->force = true; break;
        case 'q': a->quiet = true; break;
        case CLI_OPT_HELP: return CLI_EXIT_OK;
        default: return CLI_EXIT_USAGE;
        }
    }
    if (argc - optind < 2)
        return cli_usage_error(argv[0], "expected an ARCHIVE and at least one PATH");
    a->archive = argv[optind];
    a->args = argv + optind + 1;
    a->npaths = (size_t)(argc - optind - 1);
    return -1;
}

/* What the PATHs name: marks each subtree to remove in gone[] and puts
 * the paths to remove in take[0..*n). Reports every PATH refused;
 * returns how many. */
static size_t check_paths(const rm_args *a, const tf_archive *ar, bool *gone,
                          const char **take, size_t *n)
{
    size_t refused = 0;
    *n = 0;
    for (size_t i = 0; i < a->npaths; i++) {
        const char *p = a->paths[i];
        tf_error e;
        if (!*p) {
            cli_error("'%s' names the archive's root, which rm does not remove", a->args[i]);
            refused++;
            continue;
        }
        if (tf_path_check(p, strlen(p), &e) < 0) {
            cli_error("%s: %s", a->args[i], e.msg);
            refused++;
            continue;
        }
        long at = tf_archive_find(ar, p);
        if (at < 0) {
            if (!a->force) {
                cli_error("%s: no such file or directory in the archive", p);
                refused++;
            }
            continue;
        }
        if (tf_archive_entry(ar, (size_t)at)->kind == TF_ENTRY_DIR && !a->recursive) {
            cli_error("%s: is a directory (-r removes it with its contents)", p);
            refused++;
            continue;
        }
        if (gone[at]) /* given twice, or below a directory given */
            continue;
        size_t len = tf_archive_subtree_len(ar, (size_t)at);
        for (size_t k = (size_t)at; k < (size_t)at + len; k++)
            gone[k] = true;
        take[(*n)++] = p;
    }
    return refused;
}

/* "rm: removed 2 files and 1 directory; allocated 5.1 MB -> 3.2 MB" of
 * the entries gone[] (counted before the commit changes the catalog). */
static void count_gone(const tf_archive *ar, const bool *gone, uint64_t *files, uint64_t *dirs)
{
    *files = *dirs = 0;
    for (size_t i = 0; i < tf_archive_nentries(ar); i++) {
        if (gone[i] && tf_archive_entry(ar, i)->kind == TF_ENTRY_DIR)
            (*dirs)++;
        else if (gone[i])
            (*files)++;
    }
}

static int commit_removal(const rm_args *a, cli_removal *r, const bool *gone,
                          const char *const *take, size_t n)
{
    uint64_t files, dirs;
    count_gone(tf_writer_archive(r->w), gone, &files, &dirs);
    if (cli_removal_commit(r, take, n) < 0)
        return CLI_EXIT_FAIL;
    if (!a->quiet) {
        char bytes[64];
        cli_removal_allocated(r, bytes, sizeof bytes);
        printf("rm: removed %llu file%s and %llu director%s; %s\n", (unsigned long long)files,
               files == 1 ? "" : "s", (unsigned long long)dirs, dirs == 1 ? "y" : "ies",
               bytes);
    }
    return CLI_EXIT_OK;
}

static int remove_paths(const rm_args *a)
{
    cli_removal r;
    if (cli_removal_open(&r, a->archive, a->quiet) < 0)
        return CLI_EXIT_FAIL;
    const tf_archive *ar = tf_writer_archive(r.w);
    size_t nentries = tf_archive_nentries(ar), n = 0;
    bool *gone = calloc(nentries ? nentries : 1, sizeof *gone);
    const char **take = malloc(a->npaths * sizeof *take);
    int status = CLI_EXIT_OK;
    if (!gone || !take) {
        cli_error("out of memory");
        status = CLI_EXIT_FAIL;
    } else if (check_paths(a, ar, gone, take, &n) > 0) {
        cli_error("%s: nothing removed", a->archive);
        status = CLI_EXIT_FAIL;
    } else if (n == 0 && !a->quiet) {
        printf("rm: nothing to remove\n");
    }
    if (status == CLI_EXIT_OK && n > 0)
        status = commit_removal(a, &r, gone, take, n);
    else
        cli_removal_close(&r);
    free(gone);
    free(take);
    return status;
}
int cmd_rm(int argc, char **argv)
{
    rm_args a = { 0 };
    int status = parse_args(&a, argc, argv);
    if (status >= 0)
        return status;
    if (!(a.paths = cli_archive_paths(a.args, a.npaths)))
        return CLI_EXIT_FAIL;
    status = remove_paths(&a);
    cli_free_paths(a.paths, a.npaths);
    return status;
}
