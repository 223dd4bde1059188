/* The writer's settings as options of the verbs that write (create, add,
 * repack): one spelling, one parser, one help text. */
#ifndef TRAJFS_CLI_WRITE_OPTIONS_H
#define TRAJFS_CLI_WRITE_OPTIONS_H

#include <getopt.h>

#include "store/write_opts.h"

/* Option values of the long-only options; a verb's own start at
 * CLI_OPT_VERB. */
enum { CLI_OPT_MAX_CHAIN = 256, CLI_OPT_BUDGET, CLI_OPT_SEARCH, CLI_OPT_ALL_PROGRAMS,
       CLI_OPT_CHUNK_SHIFT, CLI_OPT_VERB };

/* The entries of a verb's option table for the settings (-T is short
 * option 'T'). */
#define CLI_WRITE_LONGOPTS                                           \
    { "threads", required_argument, NULL, 'T' },                     \
    { "max-chain", required_argument, NULL, CLI_OPT_MAX_CHAIN },     \
    { "budget", required_argument, NULL, CLI_OPT_BUDGET },           \
    { "search", no_argument, NULL, CLI_OPT_SEARCH },                 \
    { "all-programs", no_argument, NULL, CLI_OPT_ALL_PROGRAMS }

/* The command line of a verb that writes. */
typedef struct {
    const char *verb;
    const char *head, *tail; /* its --help text, around the settings' */
    const char *shortopts;   /* "T:" and the verb's own, without ':' first */
    const struct option *longopts; /* CLI_WRITE_LONGOPTS and the verb's own */
    /* Takes the verb's own option c (its argument in optarg): 0, or -1
     * after a usage error. */
    int (*own_option)(void *arg, int c);
    void *arg;
} cli_write_cmd;

/* Parses the options of such a verb, the settings into *o. Returns -1 to
 * go on (optind at the first operand), or the exit status when parsing
 * ends the run (--help, a usage error). */
int cli_parse_write_options(int argc, char **argv, const cli_write_cmd *wc, tf_write_opts *o);

/* How the --chunk-shift line of a verb's help starts (its default
 * follows). */
#define CLI_CHUNK_SHIFT_HELP                                                          \
    "      --chunk-shift N  tensor chunks of 2^N elements, " CLI_STR(TF_CHUNK_SHIFT_MIN) \
    " to " CLI_STR(TF_CHUNK_SHIFT_MAX)
#define CLI_STR_(x) #x
#define CLI_STR(x) CLI_STR_(x)

#endif
