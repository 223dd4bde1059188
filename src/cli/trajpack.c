/* trajpack: works on trajfs archives without FUSE. `trajpack VERB ARGS...`
 * dispatches to one cmd_*.c file per verb. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/malloc_tune.h"

static const cli_verb verbs[] = {
    { "create", "create an archive from files and directories", cmd_create },
    { "add", "append files and directories to an archive", cmd_add },
    { "extract", "write files of an archive to disk or stdout", cmd_extract },
    { "list", "list the files of an archive, sizes and codecs", cmd_list },
    { "verify", "check every stored blob of every file", cmd_verify },
    { "stats", "bits per weight by dtype, codec and checkpoint, or per tensor", cmd_stats },
    { "rm", "remove files from an archive; their space comes back", cmd_rm },
    { "prune", "remove old checkpoints, or parts of them, by rules", cmd_prune },
    { "gc", "give back the space of data no file uses any more", cmd_gc },
    { "repack", "rewrite an archive with other settings, every file encoded again", cmd_repack },
    { "push", "upload the commits a copy in object storage lacks", cmd_push },
};

#define NVERBS (sizeof verbs / sizeof verbs[0])

static void print_help(FILE *f)
{
    fputs("Usage: trajpack VERB [OPTIONS] ARGS...\n"
          "Store a training run's checkpoints in a compressed trajfs archive.\n"
          "\nVerbs:\n", f);
    for (size_t i = 0; i < NVERBS; i++)
        fprintf(f, "  %-8s %s\n", verbs[i].name, verbs[i].summary);
    fputs("\n'trajpack VERB --help' describes a verb's options; see trajpack(1).\n"
          "\nOptions:\n"
          "  -h, --help     show this help\n"
          "  -V, --version  show the version\n", f);
}

int main(int argc, char **argv)
{
    tf_malloc_huge_pages(argv);
    tf_malloc_reuse();
    if (argc < 2) {
        print_help(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *verb = argv[1];
    if (!strcmp(verb, "-h") || !strcmp(verb, "--help")) {
        print_help(stdout);
        return CLI_EXIT_OK;
    }
    if (!strcmp(verb, "-V") || !strcmp(verb, "--version")) {
        printf("trajpack (trajfs) %s\n", PACKAGE_VERSION);
        return CLI_EXIT_OK;
    }
    for (size_t i = 0; i < NVERBS; i++)
        if (!strcmp(verb, verbs[i].name))
            return verbs[i].run(argc - 1, argv + 1);
    fprintf(stderr, "trajpack: unknown verb '%s'\nTry 'trajpack --help'.\n", verb);
    return CLI_EXIT_USAGE;
}
