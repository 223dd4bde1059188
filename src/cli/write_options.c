#include "cli/write_options.h"

#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"

/* Sets the writer setting given as option opt (value NULL for a flag). */
static int set(const char *verb, tf_write_opts *o, const char *setting, const char *opt,
               const char *value)
{
    tf_error e;
    if (tf_write_opts_set(o, setting, value, &e) < 0) {
        cli_usage_error(verb, "%s: %s", opt, e.msg);
        return -1;
    }
    return 1;
}

/* Sets the setting of option c with its argument arg: 1 when c is a
 * setting's option, 0 when it is not, -1 after a usage error of verb. */
static int write_option(const char *verb, tf_write_opts *o, int c, const char *arg)
{
    switch (c) {
    case 'T':
        return set(verb, o, "threads", "--threads", arg);
    case CLI_OPT_MAX_CHAIN:
        return set(verb, o, "max_chain", "--max-chain", arg);
    case CLI_OPT_BUDGET:
        return set(verb, o, "prog_budget", "--budget", arg);
    case CLI_OPT_SEARCH:
        return set(verb, o, "search", "--search", NULL);
    case CLI_OPT_ALL_PROGRAMS:
        return set(verb, o, "all_programs", "--all-programs", NULL);
    default:
        return 0;
    }
}

/* The --help text: head, the settings (tf_write_opts_help), tail. NULL
 * when out of memory. */
static char *usage_text(const char *head, const char *tail)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    fputs(head, f);
    tf_write_opts_help(f, TF_WRITE_OPTS_OPTIONS);
    fputs(tail, f);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

int cli_parse_write_options(int argc, char **argv, const cli_write_cmd *wc, tf_write_opts *o)
{
    char *usage = usage_text(wc->head, wc->tail);
    if (!usage) {
        cli_error("out of memory");
        return CLI_EXIT_FAIL;
    }
    const cli_cmd cmd = { .verb = wc->verb, .usage = usage, .shortopts = wc->shortopts,
                          .longopts = wc->longopts };
    int c, status = -1;
    while (status < 0 && (c = cli_getopt(argc, argv, &cmd)) != -1) {
        int setting = c >= 0 ? write_option(wc->verb, o, c, optarg) : 0;
        if (c == CLI_OPT_HELP)
            status = CLI_EXIT_OK;
        else if (c == CLI_OPT_BAD || setting < 0 || (!setting && wc->own_option(wc->arg, c) < 0))
            status = CLI_EXIT_USAGE;
    }
    free(usage); /* cli_getopt is done with it */
    return status;
}
