#include "cli/walk.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "store/natsort.h"

static int push_input(cli_input_list *list, const char *src, const char *dest,
                      const struct stat *st)
{
    if (list->count == list->cap) {
        size_t cap = list->cap ? 2 * list->cap : 64;
        cli_input *items = realloc(list->items, cap * sizeof *items);
        if (!items)
            goto oom;
        list->items = items;
        list->cap = cap;
    }
    cli_input *in = &list->items[list->count];
    in->src = strdup(src);
    in->dest = strdup(dest);
    in->mode = st->st_mode;
    in->size = S_ISREG(st->st_mode) ? (uint64_t)st->st_size : 0;
    if (!in->src || !in->dest) {
        free(in->src);
        free(in->dest);
        goto oom;
    }
    list->count++;
    list->total_bytes += in->size;
    return 0;
oom:
    cli_error("%s: out of memory", src);
    return -1;
}

static char *join_path(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    while (a > 1 && dir[a - 1] == '/') /* "run/" given on the command line */
        a--;
    char *out = malloc(a + b + 2);
    if (out) {
        memcpy(out, dir, a);
        out[a] = '/';
        memcpy(out + a + 1, name, b + 1);
    }
    return out;
}

static int cmp_natural(const void *a, const void *b)
{
    return tf_natcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in directory src (without "." and ".."), in natural order. */
static int read_dir_sorted(const char *src, char ***names_out, size_t *count_out)
{
    DIR *d = opendir(src);
    if (!d) {
        cli_error("%s: %s", src, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t count = 0, cap = 0;
    struct dirent *de;
    errno = 0;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (count == cap) {
            cap = cap ? 2 * cap : 32;
            char **grown = realloc(names, cap * sizeof *names);
            if (!grown)
                goto fail;
            names = grown;
        }
        if (!(names[count] = strdup(de->d_name)))
            goto fail;
        count++;
        errno = 0;
    }
    if (errno)
        goto fail;
    closedir(d);
    if (count) /* an empty directory has no array to sort */
        qsort(names, count, sizeof *names, cmp_natural);
    *names_out = names;
    *count_out = count;
    return 0;
fail:
    cli_error("%s: %s", src, errno ? strerror(errno) : "out of memory");
    for (size_t i = 0; i < count; i++)
        free(names[i]);
    free(names);
    closedir(d);
    return -1;
}

static int walk_dir(const char *src, const char *dest, dev_t skip_dev,
                    ino_t skip_ino, cli_input_list *list)
{
    char **names;
    size_t count;
    int rc = 0;
    if (read_dir_sorted(src, &names, &count) < 0)
        return -1;
    for (size_t i = 0; i < count && rc == 0; i++) {
        char *sub_src = join_path(src, names[i]);
        char *sub_dest = join_path(dest, names[i]);
        if (!sub_src || !sub_dest) {
            cli_error("%s: out of memory", src);
            rc = -1;
        } else {
            rc = cli_walk(sub_src, sub_dest, skip_dev, skip_ino, list);
        }
        free(sub_src);
        free(sub_dest);
    }
    for (size_t i = 0; i < count; i++)
        free(names[i]);
    free(names);
    return rc;
}

int cli_walk(const char *src, const char *dest, dev_t skip_dev, ino_t skip_ino,
             cli_input_list *list)
{
    struct stat st;
    tf_error e;
    if (lstat(src, &st) < 0) {
        cli_error("%s: %s", src, strerror(errno));
        return -1;
    }
    if (st.st_dev == skip_dev && st.st_ino == skip_ino) {
        cli_error("%s: skipped: it is the archive itself", src);
        return 0;
    }
    /* Checking every archive path before anything is written means a bad
     * name (too long, too deep, control characters) fails the whole run
     * up front rather than after some commits. */
    if (tf_path_check(dest, strlen(dest), &e) < 0) {
        cli_error("%s: cannot be stored as \"%s\": %s", src, dest, e.msg);
        return -1;
    }
    if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode) && !S_ISDIR(st.st_mode)) {
        cli_error("%s: skipped: not a regular file, directory or symbolic link", src);
        return 0;
    }
    if (push_input(list, src, dest, &st) < 0)
        return -1;
    return S_ISDIR(st.st_mode) ? walk_dir(src, dest, skip_dev, skip_ino, list) : 0;
}

void cli_input_list_free(cli_input_list *list)
{
    for (size_t i = 0; i < list->count; i++) {
        free(list->items[i].src);
        free(list->items[i].dest);
    }
    free(list->items);
    *list = (cli_input_list){ 0 };
}
