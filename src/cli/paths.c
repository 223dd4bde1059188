/* Archives and archive paths named on the command line. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"

/* A URL's settings are those of TRAJFS_REMOTE_OPTIONS over the defaults
 * (not read for a local archive, which has none). */
int cli_remote_opts(const char *path, tf_remote_opts *remote, tf_error *e)
{
    tf_remote_opts_default(remote);
    const char *list = getenv("TRAJFS_REMOTE_OPTIONS");
    if (list && tf_io_is_url(path) && tf_remote_opts_parse(remote, list, e) < 0) {
        tf_error_prefix(e, "TRAJFS_REMOTE_OPTIONS");
        return -1;
    }
    return 0;
}

tf_archive *cli_open_archive(const char *path, cli_open_how how)
{
    tf_archive *ar = NULL;
    tf_error e;
    tf_remote_opts remote;
    if (cli_remote_opts(path, &remote, &e) == 0)
        (void)tf_archive_open(path,
                              &(tf_open_opts){ .remote = &remote,
                                               .lazy_bodies = how == CLI_OPEN_HEADERS,
                                               .check_all = how == CLI_OPEN_CHECK_ALL },
                              &ar, &e);
    tf_remote_opts_free(&remote);
    if (!ar)
        cli_file_error(path, e.msg);
    return ar;
}

bool cli_archive_allocated(const tf_archive *ar, uint64_t *bytes)
{
    struct stat st;
    tf_error e;
    if (tf_archive_is_remote(ar) || tf_archive_stat(ar, &st, &e) < 0)
        return false;
    *bytes = tf_archive_allocated(&st);
    return true;
}

char *cli_archive_path(const char *arg)
{
    size_t n = strlen(arg);
    char *out = malloc(n + 1), *o = out;
    if (!out)
        return NULL;
    const char *p = arg;
    while (*p) {
        while (*p == '/')
            p++;
        const char *end = strchrnul(p, '/');
        size_t len = (size_t)(end - p);
        if (len && !(len == 1 && p[0] == '.')) {
            if (o != out)
                *o++ = '/';
            memcpy(o, p, len);
            o += len;
        }
        p = end;
    }
    *o = '\0';
    return out;
}

char **cli_archive_paths(char **args, size_t n)
{
    char **paths = calloc(n ? n : 1, sizeof *paths);
    for (size_t i = 0; paths && i < n; i++) {
        if (!(paths[i] = cli_archive_path(args[i]))) {
            cli_free_paths(paths, i);
            paths = NULL;
        }
    }
    if (!paths)
        cli_error("out of memory");
    return paths;
}

void cli_free_paths(char **paths, size_t n)
{
    for (size_t i = 0; paths && i < n; i++)
        free(paths[i]);
    free(paths);
}

size_t cli_select_entries(const tf_archive *ar, char **paths, size_t npaths,
                          bool *selected)
{
    size_t n = tf_archive_nentries(ar), missing = 0;
    for (size_t i = 0; i < n; i++)
        selected[i] = npaths == 0;
    for (size_t k = 0; k < npaths; k++) {
        const char *p = paths[k];
        size_t len = strlen(p);
        if (len == 0) { /* the root: everything */
            for (size_t i = 0; i < n; i++)
                selected[i] = true;
            continue;
        }
        long at = tf_archive_find(ar, p);
        if (at < 0) {
            cli_error("%s: not in the archive", p);
            missing++;
            continue;
        }
        /* A directory's subtree follows it contiguously. */
        selected[at] = true;
        for (size_t i = (size_t)at + 1; i < n; i++) {
            const char *q = tf_archive_entry(ar, i)->path;
            if (strncmp(q, p, len) != 0 || q[len] != '/')
                break;
            selected[i] = true;
        }
    }
    return missing;
}
