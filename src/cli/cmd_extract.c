/* trajpack extract: writes entries of an archive below a directory, or one
 * file to stdout. Paths are checked when the archive is read, but the
 * writing side does not rely on it: every component is opened with
 * openat(O_NOFOLLOW) from the target directory and "." / ".." are refused,
 * so nothing (not even a symlink extracted earlier) can lead outside it. */
#include "cli/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/hint.h"
#include "cli/progress.h"
#include "common/cpus.h"
#include "common/full_io.h"
#include "store/prefetch.h"
#include "store/read_order.h"
#include "store/reader.h"

#define BLOCK_BYTES (4u << 20)    /* one tf_reader_pread / write */
#define CACHE_BYTES (256u << 20)  /* reconstructed chunks kept for deltas */
/* Chunks decoded ahead of the copy, on every core (store/prefetch.h). */
#define PREFETCH_BYTES (32u << 20)

static const char extract_usage[] =
    "Usage: trajpack extract [OPTIONS] ARCHIVE [PATH...]\n"
    "Write the files, directories and symbolic links of ARCHIVE (or only the\n"
    "entries PATH... and everything below them) with their modes and\n"
    "modification times. Missing parent directories are created. Existing\n"
    "files are not replaced unless --force is given; existing directories\n"
    "are reused. Nothing is ever written outside the target directory.\n"
    "\nOptions:\n"
    "  -C, --directory DIR  extract below DIR (which must exist) instead of\n"
    "                       the current directory\n"
    "  -O, --stdout         write the content of the single file PATH to\n"
    "                       standard output\n"
    "  -f, --force          replace existing files and symbolic links\n"
    "  -q, --quiet          no progress bar\n"
    "  -h, --help           show this help\n";

static const struct option extract_longopts[] = {
    { "directory", required_argument, NULL, 'C' },
    { "stdout", no_argument, NULL, 'O' },
    { "force", no_argument, NULL, 'f' },
    { "quiet", no_argument, NULL, 'q' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
};

typedef struct {
    tf_archive *ar;
    tf_reader_ctx *reader;
    tf_prefetch *prefetch;
    uint8_t *buf; /* BLOCK_BYTES */
    const uint64_t *blobs; /* the blobs of the files extracted, in the order read */
    size_t nblobs;
    cli_hint hint;   /* over blobs: their bytes stand for the files' */
    uint64_t copied; /* bytes of the files extracted so far */
    cli_progress *bar;
    bool force;
    int root_fd;        /* the target directory */
    const char *prefix; /* "DIR/" or "" in messages */
} extractor;

/* Copies the content of a file entry to fd. On failure prints the error
 * (naming the file and, for a bad tensor, the tensor) and returns -1. */
static int copy_content(extractor *ex, const tf_entry *ent, int fd)
{
    tf_error e;
    tf_prefetch_cursor ahead = { 0 };
    for (uint64_t off = 0; off < ent->size;) {
        uint64_t left = ent->size - off;
        size_t want = left < BLOCK_BYTES ? (size_t)left : BLOCK_BYTES;
        cli_hint_until(&ex->hint, ex->reader, ex->ar, ex->blobs, ex->nblobs,
                       ex->copied + want + CLI_HINT_WINDOW);
        tf_prefetch_read(ex->prefetch, ent, &ahead, off, want);
        ssize_t n = tf_reader_pread(ex->reader, ent, off, want, ex->buf, &e);
        if (n < 0) {
            cli_file_error(ent->path, e.msg);
            return -1;
        }
        if (n == 0) {
            cli_error("%s: the archive ends the file after %llu of %llu bytes",
                      ent->path, (unsigned long long)off,
                      (unsigned long long)ent->size);
            return -1;
        }
        if (tf_write_full(fd, ex->buf, (size_t)n) < 0) {
            cli_error("%s%s: %s", ex->prefix, ent->path, strerror(errno));
            return -1;
        }
        cli_progress_add(ex->bar, (uint64_t)n);
        off += (uint64_t)n;
        ex->copied += (uint64_t)n;
    }
    return 0;
}

static bool is_safe_component(const char *s, size_t len)
{
    return len > 0 && !(len == 1 && s[0] == '.') &&
           !(len == 2 && s[0] == '.' && s[1] == '.');
}

/* Opens the directory that holds path, creating missing directories, and
 * points *name at path's last component. Returns the fd or -1 (errno). */
static int open_parent(int root_fd, const char *path, const char **name)
{
    int fd = dup(root_fd);
    for (const char *p = path; fd >= 0;) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        if (!is_safe_component(p, len) || len > TF_NAME_MAX) {
            close(fd);
            errno = EINVAL;
            return -1;
        }
        if (!slash) {
            *name = p;
            return fd;
        }
        char comp[TF_NAME_MAX + 1];
        memcpy(comp, p, len);
        comp[len] = '\0';
        int next = -1;
        if (mkdirat(fd, comp, 0755) == 0 || errno == EEXIST)
            next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int err = errno;
        close(fd);
        errno = err;
        fd = next;
        p = slash + 1;
    }
    return -1;
}

static struct timespec entry_mtime(const tf_entry *ent)
{
    return (struct timespec){ .tv_sec = (time_t)ent->mtime_sec,
                              .tv_nsec = (long)ent->mtime_nsec };
}

static int create_file(extractor *ex, int dir_fd, const char *name, const tf_entry *ent)
{
    const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    int fd = openat(dir_fd, name, flags, 0600);
    if (fd < 0 && errno == EEXIST && ex->force && unlinkat(dir_fd, name, 0) == 0)
        fd = openat(dir_fd, name, flags, 0600);
    if (fd < 0) {
        cli_error("%s%s: %s%s", ex->prefix, ent->path, strerror(errno),
                  errno == EEXIST ? " (use --force to replace it)" : "");
        return -1;
    }
    const struct timespec times[2] = { { .tv_nsec = UTIME_OMIT }, entry_mtime(ent) };
    int rc = copy_content(ex, ent, fd);
    if (rc == 0 && (fchmod(fd, ent->mode & 07777) < 0 || futimens(fd, times) < 0)) {
        cli_error("%s%s: %s", ex->prefix, ent->path, strerror(errno));
        rc = -1;
    }
    if (close(fd) < 0 && rc == 0) {
        cli_error("%s%s: %s", ex->prefix, ent->path, strerror(errno));
        rc = -1;
    }
    if (rc < 0) /* leave no truncated file that looks like the real one */
        unlinkat(dir_fd, name, 0);
    return rc;
}

static int create_symlink(extractor *ex, int dir_fd, const char *name, const tf_entry *ent)
{
    int rc = symlinkat(ent->target, dir_fd, name);
    if (rc < 0 && errno == EEXIST && ex->force && unlinkat(dir_fd, name, 0) == 0)
        rc = symlinkat(ent->target, dir_fd, name);
    const struct timespec times[2] = { { .tv_nsec = UTIME_OMIT }, entry_mtime(ent) };
    if (rc == 0)
        rc = utimensat(dir_fd, name, times, AT_SYMLINK_NOFOLLOW);
    if (rc < 0)
        cli_error("%s%s: %s%s", ex->prefix, ent->path, strerror(errno),
                  errno == EEXIST ? " (use --force to replace it)" : "");
    return rc;
}

/* Directories are made writable for the extraction and get their own
 * mode and mtime afterwards (see finish_directory). */
static int create_directory(extractor *ex, int dir_fd, const char *name,
                            const tf_entry *ent)
{
    struct stat st;
    if (mkdirat(dir_fd, name, 0700) == 0)
        return 0;
    int err = errno;
    if (err == EEXIST && fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISDIR(st.st_mode))
        return 0;
    cli_error("%s%s: %s", ex->prefix, ent->path,
              err == EEXIST ? "exists and is not a directory" : strerror(err));
    return -1;
}

static int extract_entry(extractor *ex, const tf_entry *ent)
{
    const char *name;
    int dir_fd = open_parent(ex->root_fd, ent->path, &name);
    if (dir_fd < 0) {
        cli_error("%s%s: cannot open its directory: %s", ex->prefix, ent->path,
                  strerror(errno));
        return -1;
    }
    int rc;
    switch (ent->kind) {
    case TF_ENTRY_DIR:
        rc = create_directory(ex, dir_fd, name, ent);
        break;
    case TF_ENTRY_SYMLINK:
        rc = create_symlink(ex, dir_fd, name, ent);
        break;
    case TF_ENTRY_FILE:
    case TF_ENTRY_TENSORS:
        rc = create_file(ex, dir_fd, name, ent);
        break;
    default:
        cli_error("%s: unknown entry kind %u", ent->path, ent->kind);
        rc = -1;
    }
    close(dir_fd);
    return rc;
}

/* Gives an extracted directory its mode and mtime, once nothing more is
 * written into it. */
static int finish_directory(extractor *ex, const tf_entry *ent)
{
    const char *name;
    int dir_fd = open_parent(ex->root_fd, ent->path, &name), fd = -1, rc = -1;
    if (dir_fd >= 0)
        fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    const struct timespec times[2] = { { .tv_nsec = UTIME_OMIT }, entry_mtime(ent) };
    if (fd >= 0 && fchmod(fd, ent->mode & 07777) == 0 && futimens(fd, times) == 0)
        rc = 0;
    else
        cli_error("%s%s: %s", ex->prefix, ent->path, strerror(errno));
    if (fd >= 0)
        close(fd);
    if (dir_fd >= 0)
        close(dir_fd);
    return rc;
}

static int extract_selected(extractor *ex, const bool *selected)
{
    size_t n = tf_archive_nentries(ex->ar);
    int status = CLI_EXIT_OK;
    size_t nfiles = 0, nread;
    size_t *files = tf_read_order(ex->ar, &nread); /* references before their deltas */
    for (size_t i = 0; files && i < nread; i++)
        if (selected[files[i]])
            files[nfiles++] = files[i];
    uint64_t *blobs = files ? cli_blob_order(ex->ar, files, nfiles, &ex->nblobs) : NULL;
    bool *made_dir = calloc(n ? n : 1, sizeof *made_dir);
    if (!made_dir || !blobs) {
        cli_error("out of memory");
        free(made_dir);
        free(blobs);
        free(files);
        return CLI_EXIT_FAIL;
    }
    ex->blobs = blobs;
    /* Directories and links in archive order, then the files. */
    for (size_t i = 0; i < n; i++) {
        const tf_entry *ent = tf_archive_entry(ex->ar, i);
        if (!selected[i] || tf_entry_is_regular(ent))
            continue;
        if (extract_entry(ex, ent) < 0)
            status = CLI_EXIT_FAIL; /* go on: one bad entry spoils nothing else */
        else if (ent->kind == TF_ENTRY_DIR)
            made_dir[i] = true;
    }
    for (size_t i = 0; i < nfiles; i++)
        if (extract_entry(ex, tf_archive_entry(ex->ar, files[i])) < 0)
            status = CLI_EXIT_FAIL;
    free(blobs);
    free(files);
    /* Deepest first, so setting a directory's mtime is not undone by
     * fixing one of its subdirectories. */
    for (size_t i = n; i-- > 0;)
        if (made_dir[i] && finish_directory(ex, tf_archive_entry(ex->ar, i)) < 0)
            status = CLI_EXIT_FAIL;
    free(made_dir);
    return status;
}

static int extract_to_stdout(extractor *ex, const char *path)
{
    const tf_entry *ent = tf_archive_lookup(ex->ar, path);
    if (!ent) {
        cli_error("%s: not in the archive", path);
        return CLI_EXIT_FAIL;
    }
    if (!tf_entry_is_regular(ent)) {
        cli_error("%s: not a regular file (--stdout writes one file)", path);
        return CLI_EXIT_FAIL;
    }
    ex->blobs = ent->chunks;
    ex->nblobs = ent->nchunks;
    if (copy_content(ex, ent, STDOUT_FILENO) < 0)
        return CLI_EXIT_FAIL;
    return CLI_EXIT_OK;
}

static uint64_t selected_bytes(const tf_archive *ar, const bool *selected)
{
    uint64_t total = 0;
    for (size_t i = 0; i < tf_archive_nentries(ar); i++) {
        const tf_entry *ent = tf_archive_entry(ar, i);
        if (selected[i] && tf_entry_is_regular(ent))
            total += ent->size;
    }
    return total;
}

typedef struct {
    const char *archive;
    const char *dir;
    bool to_stdout, force, quiet;
    char **paths; /* normalized archive paths */
    size_t npaths;
} extract_args;

/* Runs the extraction once the archive, reader and buffer are ready. */
static int run_extraction(extractor *ex, const extract_args *a)
{
    if (a->to_stdout)
        return extract_to_stdout(ex, a->paths[0]);

    size_t n = tf_archive_nentries(ex->ar);
    bool *selected = malloc((n ? n : 1) * sizeof *selected);
    if (!selected) {
        cli_error("out of memory");
        return CLI_EXIT_FAIL;
    }
    int status = CLI_EXIT_OK;
    if (cli_select_entries(ex->ar, a->paths, a->npaths, selected) > 0)
        status = CLI_EXIT_FAIL;
    ex->bar = cli_progress_start("extract", selected_bytes(ex->ar, selected), a->quiet);
    if (extract_selected(ex, selected) != CLI_EXIT_OK)
        status = CLI_EXIT_FAIL;
    cli_progress_end(ex->bar);
    free(selected);
    return status;
}

static int open_and_extract(const extract_args *a)
{
    extractor ex = { .force = a->force, .root_fd = -1, .prefix = "" };
    char *prefix = NULL;
    int status = CLI_EXIT_FAIL;

    if (!a->to_stdout) {
        const char *dir = a->dir ? a->dir : ".";
        ex.root_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (ex.root_fd < 0) {
            cli_error("%s: %s", dir, strerror(errno));
            return CLI_EXIT_FAIL;
        }
        if (a->dir && asprintf(&prefix, "%s/", a->dir) >= 0)
            ex.prefix = prefix;
    }
    if (!(ex.ar = cli_open_archive(a->archive, CLI_OPEN_WHOLE)))
        goto out;
    ex.reader = tf_reader_new(ex.ar, CACHE_BYTES);
    ex.buf = malloc(BLOCK_BYTES);
    if (ex.reader)
        ex.prefetch = tf_prefetch_new(ex.ar, ex.reader, tf_online_cpus(), PREFETCH_BYTES, NULL);
    if (!ex.reader || !ex.buf || !ex.prefetch)
        cli_error("out of memory");
    else
        status = run_extraction(&ex, a);
out:
    tf_prefetch_free(ex.prefetch);
    free(ex.buf);
    if (ex.reader)
        tf_reader_free(ex.reader);
    if (ex.ar)
        tf_archive_close(ex.ar);
    if (ex.root_fd >= 0)
        close(ex.root_fd);
    free(prefix);
    return status;
}

static int parse_args(extract_args *a, int argc, char **argv)
{
    const cli_cmd cmd = { .verb = argv[0], .usage = extract_usage,
                          .shortopts = "C:Ofqh", .longopts = extract_longopts };
    int c;
    while ((c = cli_getopt(argc, argv, &cmd)) != -1) {
        switch (c) {
        case 'C': a->dir = optarg; break;
        case 'O': a->to_stdout = true; break;
        case 'f': a->force = true; break;
        case 'q': a->quiet = true; break;
        case CLI_OPT_HELP: return CLI_EXIT_OK;
        default: return CLI_EXIT_USAGE;
        }
    }
    if (optind >= argc)
        return cli_usage_error(cmd.verb, "expected an ARCHIVE");
    a->archive = argv[optind];
    a->npaths = (size_t)(argc - optind - 1);
    if (a->to_stdout && (a->npaths != 1 || a->dir))
        return cli_usage_error(cmd.verb, "--stdout needs exactly one PATH and no -C");
    return -1;
}

int cmd_extract(int argc, char **argv)
{
    extract_args a = { 0 };
    int status = parse_args(&a, argc, argv);
    if (status >= 0)
        return status;
    if (!(a.paths = cli_archive_paths(argv + optind + 1, a.npaths)))
        return CLI_EXIT_FAIL;
    status = open_and_extract(&a);
    cli_free_paths(a.paths, a.npaths);
    return status;
}
