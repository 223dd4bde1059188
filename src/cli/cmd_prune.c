/* trajpack prune: thins the checkpoints of an archive's runs by rules
 * (store/prune.h), in one commit, and the space comes back. */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>

#include "cli/remove.h"
#include "store/catalog_query.h"
#include "store/prune.h"

static const char prune_usage[] =
    "Usage: trajpack prune [OPTIONS] ARCHIVE\n"
    "Remove old checkpoints from ARCHIVE, or parts of them, by rules, in one\n"
    "durable commit. A checkpoint is a step of a run as trajpack add finds\n"
    "references (see add and prune in trajpack(1)): out/checkpoint-400/ with\n"
    "its files, or step-400.safetensors. Each run is pruned on its own, its\n"
    "checkpoints in natural order of their steps (step-9 before step-10);\n"
    "step-N.safetensors and step-N.optim.safetensors are two runs, and so are\n"
    "run1/checkpoint-N and run2/checkpoint-N. Files without a step\n"
    "(config.json) are never touched.\n"
    "\n"
    "A checkpoint is kept whole when one of --keep-last, --keep-every and\n"
    "--keep holds for it. The others go, with their directories; with --drop,\n"
    "only their files that match a --drop pattern go. At least one rule is\n"
    "needed. A prune that would leave a run none of its files is refused\n"
    "(trajpack rm -r removes a run).\n"
    "The space comes back at once, as with trajpack rm.\n"
    "\nOptions:\n"
    "      --keep-last N    keep the last N checkpoints of each run (N >= 1)\n"
    "      --keep-every K   keep the checkpoints whose step number (the last\n"
    "                       number of the step: checkpoint-1000 is 1000) is a\n"
    "                       multiple of K\n"
    "      --keep PATTERN   keep the checkpoints with a file that matches\n"
    "                       PATTERN (may be repeated)\n"
    "      --drop PATTERN   of the checkpoints not kept, remove only the files\n"
    "                       that match PATTERN (may be repeated)\n"
    "  -n, --dry-run        change nothing: list what would go and what it\n"
    "                       would free\n"
    "  -q, --quiet          list nothing, print no summary and no progress bar\n"
    "  -h, --help           show this help\n"
    "\n"
    "A PATTERN is a glob (fnmatch(3); '*' matches '/' too) matched against\n"
    "the file's archive path and each tail of it after a '/', and a match of\n"
    "a leading directory counts: optimizer.pt, '*.optim.safetensors',\n"
    "checkpoint-1000 and out/checkpoint-1000 all work.\n"
    "\n"
    "Example: keep the last 3 checkpoints and every 1000th step whole, and\n"
    "drop only the optimizer state of the others:\n"
    "  trajpack prune run.traj --keep-last 3 --keep-every 1000 --drop optimizer.pt\n";

enum { OPT_KEEP_LAST = 256, OPT_KEEP_EVERY, OPT_KEEP, OPT_DROP };

static const struct option prune_longopts[] = {
    { "keep-last", required_argument, NULL, OPT_KEEP_LAST },
    { "keep-every", required_argument, NULL, OPT_KEEP_EVERY },
    { "keep", required_argument, NULL, OPT_KEEP },
    { "drop", required_argument, NULL, OPT_DROP },
    { "dry-run", no_argument, NULL, 'n' },
    { "quiet", no_argument, NULL, 'q' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
};

typedef struct {
    const char *verb, *archive;
    bool dry_run, quiet;
    tf_prune_rules rules;
    char **keep, **drop; /* normalized patterns, of at most argc each */
    size_t nkeep, ndrop;
} prune_args;

/* A pattern as an archive path is written: no leading "./" or '/', no
 * trailing '/'. NULL after a usage error. */
static char *normalize_pattern(const char *verb, const char *opt, const char *arg)
{
    const char *p = arg;
    for (;;) {
        if (p[0] == '/')
            p++;
        else if (p[0] == '.' && p[1] == '/')
            p += 2;
        else
            break;
    }
    size_t len = strlen(p);
    while (len && p[len - 1] == '/')
        len--;
    if (!len || len > TF_PRUNE_PATTERN_MAX) {
        cli_usage_error(verb, "%s: '%.60s' is no pattern of an archive path", opt, arg);
        return NULL;
    }
    char *out = strndup(p, len);
    if (!out)
        cli_error("out of memory");
    return out;
}

/* Returns -1 to go on, or the exit status. */
static int parse_args(prune_args *a, int argc, char **argv)
{
    const cli_cmd cmd = { .verb = a->verb, .usage = prune_usage, .shortopts = "nqh",
                          .longopts = prune_longopts };
    int c;
    char *pattern;
    while ((c = cli_getopt(argc, argv, &cmd)) != -1) {
        switch (c) {
        case OPT_KEEP_LAST:
            if (cli_parse_uint(a->verb, "--keep-last", optarg, 1, UINT32_MAX,
                               &a->rules.keep_last) < 0)
                return CLI_EXIT_USAGE;
            break;
        case OPT_KEEP_EVERY:
            if (cli_parse_uint(a->verb, "--keep-every", optarg, 1, UINT32_MAX,
                               &a->rules.keep_every) < 0)
                return CLI_EXIT_USAGE;
            break;
        case OPT_KEEP:
        case OPT_DROP:
            pattern = normalize_pattern(a->verb, c == OPT_KEEP ? "--keep" : "--drop", optarg);
            if (!pattern)
                return CLI_EXIT_USAGE;
            if (c == OPT_KEEP)
                a->keep[a->nkeep++] = pattern;
            else
                a->drop[a->ndrop++] = pattern;
            break;
        case 'n': a->dry_run = true; break;
        case 'q': a->quiet = true; break;
        case CLI_OPT_HELP: return CLI_EXIT_OK;
        default: return CLI_EXIT_USAGE;
        }
    }
    if (argc - optind != 1)
        return cli_usage_error(a->verb, "expected exactly one ARCHIVE");
    a->archive = argv[optind];
    if (!a->rules.keep_last && !a->rules.keep_every && !a->nkeep && !a->ndrop)
        return cli_usage_error(a->verb, "no rule given: say which checkpoints to keep "
                               "(--keep-last, --keep-every, --keep) or which of their "
                               "files to drop (--drop)");
    a->rules.keep = (const char *const *)a->keep;
    a->rules.nkeep = a->nkeep;
    a->rules.drop = (const char *const *)a->drop;
    a->rules.ndrop = a->ndrop;
    return -1;
}

/* The plan's verdict before anything is listed: 0 to go on, or the exit
 * status. */
static int check_plan(const prune_args *a, const tf_prune_plan *plan)
{
    for (size_t k = 0; k < a->nkeep; k++)
        if (!plan->keep_matches[k])
            cli_error("warning: --keep '%s' matches no file of a checkpoint", a->keep[k]);
    if (plan->emptied_runs) {
        cli_error("%s: refusing to prune: the run %s%s would keep no file of any of its "
                  "checkpoints (--keep-last 1 keeps the newest of each run; trajpack rm -r "
                  "removes a run); nothing removed", a->archive, plan->emptied_run,
                  plan->emptied_runs > 1 ? " and others" : "");
        return CLI_EXIT_FAIL;
    }
    return 0;
}

/* The entries that go, in natural order (directories with a trailing
 * '/'), as lines to print: a malloc'd array of strings. */
static char **listing(const tf_archive *ar, const tf_prune_plan *plan, size_t *n)
{
    size_t *order = tf_archive_natural_order(ar);
    char **lines = calloc(plan->files + plan->dirs + 1, sizeof *lines);
    *n = 0;
    for (size_t k = 0; order && lines && k < plan->nentries; k++) {
        size_t i = order[k];
        if (!plan->dropped[i])
            continue;
        const tf_entry *ent = tf_archive_entry(ar, i);
        if (asprintf(&lines[*n], "%s%s", ent->path, ent->kind == TF_ENTRY_DIR ? "/" : "") < 0) {
            lines[*n] = NULL;
            break;
        }
        (*n)++;
    }
    free(order);
    if (lines && *n < plan->files + plan->dirs) {
        for (size_t k = 0; k < *n; k++)
            free(lines[k]);
        free(lines);
        lines = NULL;
    }
    if (!lines)
        cli_error("out of memory");
    return lines;
}

static void free_lines(char **lines, size_t n)
{
    for (size_t k = 0; lines && k < n; k++)
        free(lines[k]);
    free(lines);
}

/* "12 files and 3 directories: 3 checkpoints whole and 2 in part, of 8
 * checkpoints in 2 runs" */
static void what_goes(const tf_prune_plan *p, char *out, size_t n)
{
    snprintf(out, n, "%llu file%s and %llu director%s: %llu checkpoint%s whole and %llu in "
             "part, of %llu checkpoint%s in %llu run%s",
             (unsigned long long)p->files, p->files == 1 ? "" : "s",
             (unsigned long long)p->dirs, p->dirs == 1 ? "y" : "ies",
             (unsigned long long)p->whole, p->whole == 1 ? "" : "s",
             (unsigned long long)p->partly, (unsigned long long)p->checkpoints,
             p->checkpoints == 1 ? "" : "s", (unsigned long long)p->runs,
             p->runs == 1 ? "" : "s");
}

static void print_lines(char **lines, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        cli_put_visible(stdout, lines[k]);
        putchar('\n');
    }
}

static int dry_run(const prune_args *a, const tf_archive *ar, const tf_prune_plan *plan)
{
    tf_prune_frees f;
    tf_error e;
    if (tf_prune_frees_of(ar, plan->dropped, &f, &e) < 0) {
        cli_file_error(a->archive, e.msg);
        return CLI_EXIT_FAIL;
    }
    if (a->quiet)
        return CLI_EXIT_OK;
    size_t n;
    char **lines = listing(ar, plan, &n);
    if (!lines)
        return CLI_EXIT_FAIL;
    print_lines(lines, n);
    free_lines(lines, n);
    char what[256], now[CLI_SIZE_LEN], later[CLI_SIZE_LEN];
    what_goes(plan, what, sizeof what);
    cli_format_size(f.now, now);
    cli_format_size(f.later, later);
    printf("prune: would remove %s; frees %s now (data no kept file reads) and up to %s more "
           "once %llu chunk%s %s re-encoded\n", what, now, later,
           (unsigned long long)f.rebase_chunks, f.rebase_chunks == 1 ? "" : "s",
           f.rebase_chunks == 1 ? "is" : "are");
    return CLI_EXIT_OK;
}

/* The dropped entries whose parent stays: a directory's tombstone takes
 * the entries below it. */
static char **removals(const tf_archive *ar, const tf_prune_plan *plan, size_t *n)
{
    char **paths = calloc(plan->files + plan->dirs + 1, sizeof *paths);
    *n = 0;
    for (size_t i = 0; paths && i < plan->nentries;) {
        if (!plan->dropped[i]) {
            i++;
            continue;
        }
        if (!(paths[(*n)++] = strdup(tf_archive_entry(ar, i)->path))) {
            free_lines(paths, *n);
            paths = NULL;
            break;
        }
        i += tf_archive_subtree_len(ar, i);
    }
    if (!paths)
        cli_error("out of memory");
    return paths;
}

static int prune(const prune_args *a, cli_removal *r, const tf_prune_plan *plan)
{
    const tf_archive *ar = tf_writer_archive(r->w);
    size_t nlines = 0, npaths = 0;
    /* Listed before the commit changes the catalog, printed once it is
     * made. */
    char **lines = a->quiet ? NULL : listing(ar, plan, &nlines);
    char **paths = (a->quiet || lines) ? removals(ar, plan, &npaths) : NULL;
    char what[256];
    what_goes(plan, what, sizeof what);
    int status = CLI_EXIT_FAIL;
    if (!paths)
        cli_removal_close(r);
    else if (cli_removal_commit(r, (const char *const *)paths, npaths) == 0)
        status = CLI_EXIT_OK;
    if (status == CLI_EXIT_OK && !a->quiet) {
        char bytes[64];
        cli_removal_allocated(r, bytes, sizeof bytes);
        print_lines(lines, nlines);
        printf("prune: removed %s; %s\n", what, bytes);
    }
    free_lines(lines, nlines);
    free_lines(paths, npaths);
    return status;
}

static int run(const prune_args *a)
{
    cli_removal r = { 0 };
    tf_archive *ro = NULL;
    if (a->dry_run ? !(ro = cli_open_archive(a->archive, CLI_OPEN_WHOLE)) : cli_removal_open(&r, a->archive, a->quiet) < 0)
        return CLI_EXIT_FAIL;
    const tf_archive *ar = ro ? ro : tf_writer_archive(r.w);
    tf_prune_plan plan;
    tf_error e;
    int status = CLI_EXIT_OK;
    if (tf_prune_plan_make(ar, &a->rules, &plan, &e) < 0) {
        cli_file_error(a->archive, e.msg);
        status = CLI_EXIT_FAIL;
    } else if ((status = check_plan(a, &plan)) != 0) {
        /* refused */
    } else if (plan.files == 0) {
        if (!a->quiet)
            printf("prune: nothing to remove (%llu checkpoint%s in %llu run%s kept)\n",
                   (unsigned long long)plan.checkpoints, plan.checkpoints == 1 ? "" : "s",
                   (unsigned long long)plan.runs, plan.runs == 1 ? "" : "s");
    } else if (ro) {
        status = dry_run(a, ar, &plan);
    } else {
        status = prune(a, &r, &plan);
    }
    tf_prune_plan_free(&plan);
    if (ro)
        tf_archive_close(ro);
    else if (r.w)
        cli_removal_close(&r);
    return status;
}

int cmd_prune(int argc, char **argv)
{
    size_t most = argc > 0 ? (size_t)argc : 1;
    prune_args a = { .verb = argv[0], .keep = calloc(most, sizeof *a.keep),
                     .drop = calloc(most, sizeof *a.drop) };
    int status;
    if (!a.keep || !a.drop) {
        cli_error("out of memory");
        status = CLI_EXIT_FAIL;
    } else if ((status = parse_args(&a, argc, argv)) < 0) {
        status = run(&a);
    }
    for (size_t k = 0; k < a.nkeep; k++)
        free(a.keep[k]);
    for (size_t k = 0; k < a.ndrop; k++)
        free(a.drop[k]);
    free(a.keep);
    free(a.drop);
    return status;
}
