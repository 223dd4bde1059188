/* Parsing a verb's command line. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

int cli_parse_quiet_archive(int argc, char **argv, const cli_cmd *cmd, const char **archive,
                            bool *quiet)
{
    int c;
    *quiet = false;
    while ((c = cli_getopt(argc, argv, cmd)) != -1) {
        switch (c) {
        case 'q': *quiet = true; break;
        case CLI_OPT_HELP: return CLI_EXIT_OK;
        default: return CLI_EXIT_USAGE;
        }
    }
    if (argc - optind != 1)
        return cli_usage_error(cmd->verb, "expected exactly one ARCHIVE");
    *archive = argv[optind];
    return -1;
}

/* How the user may have spelled the option with value val: "-T" when it
 * has a short form, else "--name". */
static void option_spelling(const cli_cmd *cmd, int val, char *out, size_t outsz)
{
    if (val > 0 && val < 128 && isgraph(val)) {
        snprintf(out, outsz, "-%c", val);
        return;
    }
    for (const struct option *o = cmd->longopts; o->name; o++) {
        if (o->val == val) {
            snprintf(out, outsz, "--%s", o->name);
            return;
        }
    }
    snprintf(out, outsz, "?");
}

int cli_getopt(int argc, char **argv, const cli_cmd *cmd)
{
    char optstring[64], name[64];
    /* ':' first: a missing argument is reported as ':' rather than '?'. */
    snprintf(optstring, sizeof optstring, ":%s", cmd->shortopts);
    opterr = 0;
    int c = getopt_long(argc, argv, optstring, cmd->longopts, NULL);
    switch (c) {
    case 'h':
        fputs(cmd->usage, stdout);
        return CLI_OPT_HELP;
    case '?':
        /* optopt is 0 for an unknown long option, which then is the whole
         * argument just consumed. */
        if (optopt)
            option_spelling(cmd, optopt, name, sizeof name);
        else
            snprintf(name, sizeof name, "%.60s", argv[optind - 1]);
        cli_usage_error(cmd->verb, "unknown option '%s'", name);
        return CLI_OPT_BAD;
    case ':':
        option_spelling(cmd, optopt, name, sizeof name);
        cli_usage_error(cmd->verb, "option '%s' needs an argument", name);
        return CLI_OPT_BAD;
    default:
        return c;
    }
}

int cli_parse_uint(const char *verb, const char *opt, const char *s,
                   unsigned min, unsigned max, unsigned *out)
{
    char *end;
    errno = 0;
    unsigned long v = isdigit((unsigned char)s[0]) ? strtoul(s, &end, 10) : 0;
    if (!isdigit((unsigned char)s[0]) || *end || errno || v < min || v > max) {
        cli_usage_error(verb, "%s: expected a whole number from %u to %u, got '%s'",
                        opt, min, max, s);
        return -1;
    }
    *out = (unsigned)v;
    return 0;
}
