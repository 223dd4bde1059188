/* trajpack: declarations shared by the verbs (one cmd_*.c file each) and
 * their helpers: messages.c, options.c, quote.c, paths.c. */
#ifndef TRAJFS_CLI_CLI_H
#define TRAJFS_CLI_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "cli/size.h" /* cli_format_size, for the verbs' output */
#include "common/error.h"
#include "store/archive.h"

/* Exit statuses, the same for every verb (see trajpack(1)). */
enum {
    CLI_EXIT_OK = 0,
    CLI_EXIT_FAIL = 1,  /* the operation failed or found bad data */
    CLI_EXIT_USAGE = 2, /* bad command line */
};

/* A verb: `trajpack NAME ARGS...` calls run(argc, argv) with argv[0] the
 * verb's name. run returns an exit status. */
typedef struct {
    const char *name;
    const char *summary; /* one line for `trajpack --help` */
    int (*run)(int argc, char **argv);
} cli_verb;

int cmd_create(int argc, char **argv);
int cmd_add(int argc, char **argv);
int cmd_extract(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_gc(int argc, char **argv);
int cmd_repack(int argc, char **argv);
int cmd_rm(int argc, char **argv);
int cmd_prune(int argc, char **argv);
int cmd_push(int argc, char **argv);

/* ---- messages ---------------------------------------------------------- */

/* Writes s with each control character (a newline, an escape sequence
 * from a hostile name) as \xNN: for text from a file system or an
 * archive that is shown on a terminal. */
void cli_put_visible(FILE *f, const char *s);

/* "trajpack: MESSAGE" on stderr (after clearing any progress bar). */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "trajpack: FILE: MESSAGE" for a library error about file; just
 * "trajpack: MESSAGE" when the message names the file already. */
void cli_file_error(const char *file, const char *msg);
/* "trajpack VERB: MESSAGE" and a hint to run --help; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *verb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- option parsing ---------------------------------------------------- */

/* What a verb's command line looks like. */
typedef struct {
    const char *verb;
    const char *usage;            /* the whole --help text */
    const char *shortopts;        /* getopt spelling, without the leading ':' */
    const struct option *longopts; /* ends with a zeroed entry */
} cli_cmd;

#define CLI_OPT_HELP (-2) /* --help was printed: exit 0 */
#define CLI_OPT_BAD (-3)  /* a usage error was printed: exit 2 */

/* getopt_long for a verb: handles -h/--help and reports unknown options
 * and missing arguments itself. Returns the option, -1 at the end, or one
 * of CLI_OPT_HELP / CLI_OPT_BAD. */
int cli_getopt(int argc, char **argv, const cli_cmd *cmd);

/* Parses the arguments of a verb whose only option is -q and that takes
 * exactly one ARCHIVE (its shortopts are "qh"). Returns -1 to go on, with
 * *archive and *quiet set, or the exit status to return. */
int cli_parse_quiet_archive(int argc, char **argv, const cli_cmd *cmd, const char **archive,
                            bool *quiet);

/* Parses a decimal integer in [min, max] given to option opt. Prints a
 * usage error and returns -1 when it is not one. */
int cli_parse_uint(const char *verb, const char *opt, const char *s,
                   unsigned min, unsigned max, unsigned *out);

/* ---- output ------------------------------------------------------------ */

/* Writes s as a JSON string (escaped, between double quotes): for JSON
 * output, and for names that may hold any character (tensor names). */
void cli_put_quoted(FILE *f, const char *s);

/* ---- archive helpers --------------------------------------------------- */

/* What a command reads of an archive's catalog (format version 2; one
 * of version 1 is read whole): */
typedef enum {
    CLI_OPEN_WHOLE,     /* every entry whole */
    CLI_OPEN_HEADERS,   /* the entries' headers: paths, kinds, sizes, times */
    CLI_OPEN_CHECK_ALL, /* every record, checked as a writer checks them */
} cli_open_how;

/* Opens an archive read-only; prints "trajpack: ARCHIVE: why" on failure. */
tf_archive *cli_open_archive(const char *path, cli_open_how how);
/* The settings of the archive path when it is a URL: TRAJFS_REMOTE_OPTIONS
 * over the defaults (freed with tf_remote_opts_free). */
int cli_remote_opts(const char *path, tf_remote_opts *remote, tf_error *e);

/* The bytes the disk holds of a local archive's file (st_blocks: less
 * than its size where the file has holes). False for a remote archive,
 * or when the file system does not say. */
bool cli_archive_allocated(const tf_archive *ar, uint64_t *bytes);

/* Normalizes a path given on the command line into an archive path:
 * drops leading "./" and "/", repeated and trailing slashes. Returns a new
 * string (NULL when out of memory). "" names the root. */
char *cli_archive_path(const char *arg);

/* cli_archive_path of each of args[0..n); NULL (after a message) when
 * out of memory. Freed with cli_free_paths. */
char **cli_archive_paths(char **args, size_t n);
void cli_free_paths(char **paths, size_t n);

/* Marks in selected[] (one flag per entry, archive order) each entry named
 * by paths[] and everything below it; with npaths == 0, all entries. Names
 * that match nothing are reported; returns how many. */
size_t cli_select_entries(const tf_archive *ar, char **paths, size_t npaths,
                          bool *selected);

#endif
