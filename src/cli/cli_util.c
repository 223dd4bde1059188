/* Helpers shared by the trajpack verbs: messages, option parsing, output
 * formatting, entry selection and order, blob ownership, tensor chunks
 * and the input walk. */
#include "cli/cli.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/progress.h"
#include "format/catalog.h"
#include "io/remote.h"
#include "common/dtype.h"
#include "store/natsort.h"

/* ---- messages ---------------------------------------------------------- */

void cli_put_visible(FILE *f, const char *s)
{
    for (const char *c = s; *c; c++) {
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            fprintf(f, "\\x%02x", (unsigned char)*c);
        else
            fputc(*c, f);
    }
}

/* Messages name files from file systems and archives: written with
 * cli_put_visible, so that a control character in one (an escape
 * sequence) never reaches the terminal and the message stays one line. */
void cli_error(const char *fmt, ...)
{
    va_list ap;
    char *msg = NULL;
    cli_progress_hide();
    va_start(ap, fmt);
    if (vasprintf(&msg, fmt, ap) < 0)
        msg = NULL;
    va_end(ap);
    fputs("trajpack: ", stderr);
    cli_put_visible(stderr, msg ? msg : "out of memory");
    fputc('\n', stderr);
    free(msg);
}

/* Whether msg names file as a word of its own ("cannot open FILE: ..."). */
static bool mentions(const char *msg, const char *file)
{
    size_t n = strlen(file);
    for (const char *p = strstr(msg, file); n && p; p = strstr(p + 1, file)) {
        bool starts = p == msg || p[-1] == ' ' || p[-1] == '"';
        bool ends = !p[n] || strchr(":\" ", p[n]);
        if (starts && ends)
            return true;
    }
    return false;
}

void cli_file_error(const char *file, const char *msg)
{
    char *shown = tf_remote_shown_url(file); /* a URL's secrets stay out */
    if (!shown || mentions(msg, shown))
        cli_error("%s", msg);
    else
        cli_error("%s: %s", shown, msg);
    free(shown);
}

int cli_usage_error(const char *verb, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "trajpack %s: ", verb);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'trajpack %s --help'.\n", verb);
    return CLI_EXIT_USAGE;
}

/* ---- option parsing ---------------------------------------------------- */

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

/* ---- output ------------------------------------------------------------ */

/* Length of the valid UTF-8 sequence at p (1 to 4), or 0 when p does not
 * start one (stray continuation byte, overlong form, surrogate, > U+10FFFF). */
static size_t utf8_sequence(const unsigned char *p)
{
    unsigned char c = p[0];
    size_t len = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
               : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    for (size_t i = 1; i < len; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0) ||
        (c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90))
        return 0;
    return len;
}

static void put_escaped(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        size_t len = utf8_sequence(p);
        if (len == 0) {
            /* File names need not be UTF-8; JSON output must be. */
            fputs("\\ufffd", f);
            p++;
            continue;
        }
        if (len > 1) {
            fwrite(p, 1, len, f);
            p += len;
            continue;
        }
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\t': fputs("\\t", f); break;
        case '\r': fputs("\\r", f); break;
        default:
            if (*p < 0x20 || *p == 0x7f)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
        p++;
    }
}

void cli_put_quoted(FILE *f, const char *s)
{
    fputc('"', f);
    put_escaped(f, s);
    fputc('"', f);
}

/* ---- archive helpers --------------------------------------------------- */

tf_archive *cli_open_archive(const char *path)
{
    tf_archive *ar;
    tf_error e;
    if (tf_archive_open(path, false, &ar, &e) < 0) {
        cli_file_error(path, e.msg);
        return NULL;
    }
    return ar;
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

typedef struct {
    uint64_t ino;
    size_t idx;
} ino_order;

static int cmp_ino(const void *a, const void *b)
{
    uint64_t x = ((const ino_order *)a)->ino, y = ((const ino_order *)b)->ino;
    return x < y ? -1 : x > y;
}

/* The indices of the entries in commit order (ascending ino): a malloc'd
 * array of tf_archive_nentries() elements, or NULL when out of memory. */
static size_t *commit_order(const tf_archive *ar)
{
    size_t n = tf_archive_nentries(ar);
    ino_order *by_ino = malloc((n ? n : 1) * sizeof *by_ino);
    size_t *order = malloc((n ? n : 1) * sizeof *order);
    if (by_ino && order) {
        for (size_t i = 0; i < n; i++)
            by_ino[i] = (ino_order){ tf_archive_entry(ar, i)->ino, i };
        qsort(by_ino, n, sizeof *by_ino, cmp_ino);
        for (size_t k = 0; k < n; k++)
            order[k] = by_ino[k].idx;
    } else {
        free(order);
        order = NULL;
    }
    free(by_ino);
    return order;
}

/* Gives blob b (and its model) to owner when nobody has it yet. */
static void claim_blob(const tf_archive *ar, uint64_t *owners, uint64_t b, uint64_t owner)
{
    uint64_t nblobs = tf_archive_nblobs(ar);
    if (b >= nblobs || owners[b])
        return;
    owners[b] = owner;
    uint64_t model = tf_archive_blob(ar, b)->model;
    if (model && model - 1 < nblobs && !owners[model - 1])
        owners[model - 1] = owner;
}

uint64_t *cli_blob_owners(const tf_archive *ar)
{
    uint64_t nblobs = tf_archive_nblobs(ar);
    uint64_t *owners = calloc(nblobs ? nblobs : 1, sizeof *owners);
    size_t *order = commit_order(ar);
    if (!owners || !order) {
        free(owners);
        free(order);
        return NULL;
    }
    for (size_t k = 0; k < tf_archive_nentries(ar); k++) {
        const tf_entry *ent = tf_archive_entry(ar, order[k]);
        if (!tf_entry_is_regular(ent))
            continue;
        for (uint64_t c = 0; c < ent->nchunks; c++)
            claim_blob(ar, owners, ent->chunks[c], order[k] + 1);
    }
    free(order);
    return owners;
}

cli_blob_user *cli_blob_tensors(const tf_archive *ar)
{
    uint64_t nblobs = tf_archive_nblobs(ar);
    cli_blob_user *users = calloc(nblobs ? nblobs : 1, sizeof *users);
    size_t *order = commit_order(ar);
    if (!users || !order) {
        free(users);
        free(order);
        return NULL;
    }
    for (size_t k = 0; k < tf_archive_nentries(ar); k++) {
        const tf_entry *ent = tf_archive_entry(ar, order[k]);
        if (!tf_entry_is_tensor_file(ent))
            continue;
        for (uint64_t t = 0; t < ent->ntensors; t++) {
            uint64_t n = cli_tensor_chunks(ar, ent, t);
            for (uint64_t j = 0; j < n; j++) {
                uint64_t b = ent->chunks[ent->tensors[t].first_chunk + j];
                if (b < nblobs && !users[b].entry)
                    users[b] = (cli_blob_user){ order[k] + 1, t };
            }
        }
    }
    free(order);
    return users;
}

/* Bytes of one element of the tensor; 1 for a dtype this build does not
 * know (the catalog decoder rejects those; stay safe). */
static unsigned element_size(const tf_tensor_span *ts)
{
    const tf_dtype_info *info = tf_dtype_get(ts->dtype);
    return info ? info->size : 1;
}

uint64_t cli_chunk_bytes(const tf_archive *ar, const tf_tensor_span *ts)
{
    return (uint64_t)element_size(ts) << tf_archive_chunk_shift(ar);
}

uint64_t cli_tensor_chunks(const tf_archive *ar, const tf_entry *ent, uint64_t t)
{
    const tf_tensor_span *ts = &ent->tensors[t];
    uint64_t n = tf_chunk_count(ts->nbytes, element_size(ts), tf_archive_chunk_shift(ar));
    uint64_t left = ts->first_chunk < ent->nchunks ? ent->nchunks - ts->first_chunk : 0;
    return n < left ? n : left;
}

uint64_t cli_tensor_of_chunk(const tf_archive *ar, const tf_entry *ent, uint64_t c)
{
    /* The last tensor starting at or before c: tensors without chunks
     * (empty ones) share first_chunk with the tensor after them, which is
     * the one that owns the chunk. */
    uint64_t lo = 0, hi = ent->ntensors;
    if (!tf_entry_is_tensor_file(ent) || hi == 0 || ent->tensors[0].first_chunk > c)
        return ent->ntensors;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (ent->tensors[mid].first_chunk <= c)
            lo = mid;
        else
            hi = mid;
    }
    return c - ent->tensors[lo].first_chunk < cli_tensor_chunks(ar, ent, lo) ? lo
                                                                             : ent->ntensors;
}

typedef struct {
    char *key; /* the path with each '/' as '\1' */
    size_t idx;
} path_key;

static int cmp_path_key(const void *a, const void *b)
{
    return tf_natcmp(((const path_key *)a)->key, ((const path_key *)b)->key);
}

size_t *cli_natural_order(const tf_archive *ar)
{
    /* Paths hold no control characters, so with '/' as '\1' (below every
     * byte a name may hold) tf_natcmp of whole paths orders them component
     * by component: a directory sorts just before its contents, and
     * "run-2/x" before "run-2-b" (a plain '/' would sort after '-'). */
    size_t n = tf_archive_nentries(ar), made = 0;
    path_key *keys = malloc((n ? n : 1) * sizeof *keys);
    size_t *order = malloc((n ? n : 1) * sizeof *order);
    for (; keys && order && made < n; made++) {
        char *key = strdup(tf_archive_entry(ar, made)->path);
        if (!key)
            break;
        for (char *p = strchr(key, '/'); p; p = strchr(p + 1, '/'))
            *p = '\1';
        keys[made] = (path_key){ key, made };
    }
    if (keys && order && made == n) {
        qsort(keys, n, sizeof *keys, cmp_path_key);
        for (size_t k = 0; k < n; k++)
            order[k] = keys[k].idx;
    } else {
        free(order);
        order = NULL;
    }
    for (size_t k = 0; keys && k < made; k++)
        free(keys[k].key);
    free(keys);
    return order;
}

/* ---- the walk of the inputs of create/add ------------------------------ */

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
