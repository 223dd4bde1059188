#include "io/range_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/full_io.h"
#include "common/hash.h"

static const uint8_t ENTRY_MAGIC[8] = { 'T', 'R', 'J', 'R', 'N', 'G', '1', '\n' };
#define HEADER_SIZE 32 /* magic, offset, length, XXH3-64 of the bytes */
/* Eviction brings the total down to this fraction of the bound, so that
 * it does not run again at the next entry. */
#define EVICT_TO_NUM 7
#define EVICT_TO_DEN 8
/* A temporary file this old was left by a process that died. */
#define STALE_TMP_SECONDS 3600

struct tf_range_cache {
    char *root;   /* DIR */
    char *dir;    /* DIR/OBJECT */
    uint64_t max;
    pthread_mutex_t mu;
    uint64_t used; /* bytes of all entries, as last counted plus ours since */
    atomic_uint tmp_seq;
};

static void entry_path(const tf_range_cache *c, uint64_t off, uint64_t len, char *p, size_t cap)
{
    snprintf(p, cap, "%s/%016" PRIx64 "-%016" PRIx64, c->dir, off, len);
}

static bool parse_entry_name(const char *name, uint64_t *off, uint64_t *len)
{
    char *end;
    if (strlen(name) != 33 || name[16] != '-')
        return false;
    *off = strtoull(name, &end, 16);
    if (end != name + 16)
        return false;
    *len = strtoull(name + 17, &end, 16);
    return *end == '\0';
}

typedef struct {
    char *path;
    struct timespec mtime;
    uint64_t size;
} cached_file;

static int older_first(const void *a, const void *b)
{
    const cached_file *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec)
        return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    return (x->mtime.tv_nsec > y->mtime.tv_nsec) - (x->mtime.tv_nsec < y->mtime.tv_nsec);
}

/* Lists the entries of every object under root (removing stale
 * temporary files on the way); returns their total size. */
static uint64_t list_all(const char *root, cached_file **files, size_t *n)
{
    uint64_t total = 0;
    size_t cap = 0, none;
    if (!n)
        n = &none;
    *n = 0;
    if (files)
        *files = NULL;
    DIR *top = opendir(root);
    if (!top)
        return 0;
    time_t now = time(NULL);
    struct dirent *o;
    while ((o = readdir(top))) {
        if (o->d_name[0] == '.')
            continue;
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/%s", root, o->d_name);
        DIR *d = opendir(sub);
        if (!d)
            continue;
        struct dirent *f;
        while ((f = readdir(d))) {
            char path[4096 + 256];
            struct stat st;
            snprintf(path, sizeof path, "%s/%s", sub, f->d_name);
            if (f->d_name[0] == '.' && strncmp(f->d_name, ".tmp-", 5) != 0)
                continue;
            if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode))
                continue;
            if (f->d_name[0] == '.') {
                if (now - st.st_mtime > STALE_TMP_SECONDS)
                    unlink(path);
                continue;
            }
            total += (uint64_t)st.st_size;
            if (!files)
                continue;
            if (*n == cap) {
                size_t ncap = cap ? cap * 2 : 256;
                cached_file *more = realloc(*files, ncap * sizeof *more);
                if (!more)
                    continue;
                *files = more;
                cap = ncap;
            }
            char *copy = strdup(path);
            if (copy)
                (*files)[(*n)++] = (cached_file){ copy, st.st_mtim, (uint64_t)st.st_size };
        }
        closedir(d);
    }
    closedir(top);
    return total;
}

/* Removes the least recently used entries (of any object: the bound is
 * the directory's) until the total is under the bound again. Called
 * with c->mu held. */
static void evict(tf_range_cache *c)
{
    cached_file *files;
    size_t n;
    uint64_t total = list_all(c->root, &files, &n);
    qsort(files, n, sizeof *files, older_first);
    uint64_t goal = c->max / EVICT_TO_DEN * EVICT_TO_NUM;
    for (size_t i = 0; i < n; i++) {
        if (total > goal && unlink(files[i].path) == 0)
            total -= files[i].size;
        free(files[i].path);
    }
    free(files);
    c->used = total;
}

int tf_range_cache_open(const char *dir, const char *object, uint64_t max_bytes,
                        tf_range_cache **out, tf_error *e)
{
    tf_range_cache *c = calloc(1, sizeof *c);
    if (!c)
        return tf_fail(e, ENOMEM, "out of memory");
    pthread_mutex_init(&c->mu, NULL);
    if (!(c->root = strdup(dir)) || asprintf(&c->dir, "%s/%s", dir, object) < 0) {
        c->dir = NULL;
        tf_range_cache_close(c);
        return tf_fail(e, ENOMEM, "out of memory");
    }
    if ((mkdir(dir, 0700) < 0 && errno != EEXIST) || (mkdir(c->dir, 0700) < 0 && errno != EEXIST)) {
        int err = errno;
        tf_fail(e, err, "cache directory %s: %s", c->dir, strerror(err));
        tf_range_cache_close(c);
        return -1;
    }
    c->max = max_bytes;
    c->used = list_all(c->root, NULL, NULL);
    *out = c;
    return 0;
}

void tf_range_cache_close(tf_range_cache *c)
{
    if (!c)
        return;
    pthread_mutex_destroy(&c->mu);
    free(c->root);
    free(c->dir);
    free(c);
}

static bool read_all(int fd, void *buf, size_t len, uint64_t off)
{
    return tf_pread_full(fd, buf, len, off) == (ssize_t)len;
}

static bool write_all(int fd, const void *buf, size_t len)
{
    return tf_write_full(fd, buf, len) == 0;
}

/* Reads an entry file: its header says [off, off + len), len at most
 * cap bytes, into buf; false when it is not whole or its bytes do not
 * have its checksum. */
static bool read_entry(int fd, uint64_t *off, uint64_t *len, void *buf, uint64_t cap)
{
    uint8_t h[HEADER_SIZE];
    struct stat st;
    if (fstat(fd, &st) < 0 || (uint64_t)st.st_size < HEADER_SIZE || !read_all(fd, h, sizeof h, 0) ||
        memcmp(h, ENTRY_MAGIC, 8) != 0)
        return false;
    *off = tf_le64_get(h + 8);
    *len = tf_le64_get(h + 16);
    return *len <= cap && cap <= SIZE_MAX && (uint64_t)st.st_size == HEADER_SIZE + *len &&
           read_all(fd, buf, (size_t)*len, HEADER_SIZE) &&
           tf_hash64(buf, (size_t)*len) == tf_le64_get(h + 24);
}

/* Writes an entry of [off, off + len) to path, whole (by rename) or not
 * at all. */
static bool write_entry(tf_range_cache *c, const char *path, uint64_t off, uint64_t len, const void *buf)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s/.tmp-%ld-%u", c->dir, (long)getpid(), atomic_fetch_add(&c->tmp_seq, 1));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return false;
    uint8_t h[HEADER_SIZE];
    memcpy(h, ENTRY_MAGIC, 8);
    tf_le64_put(h + 8, off);
    tf_le64_put(h + 16, len);
    tf_le64_put(h + 24, tf_hash64(buf, (size_t)len));
    bool ok = write_all(fd, h, sizeof h) && write_all(fd, buf, (size_t)len);
    ok = close(fd) == 0 && ok && rename(tmp, path) == 0;
    if (!ok)
        unlink(tmp);
    return ok;
}

bool tf_range_cache_get(tf_range_cache *c, uint64_t off, uint64_t len, void *buf)
{
    char path[4096];
    entry_path(c, off, len, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    uint64_t o, l;
    bool ok = read_entry(fd, &o, &l, buf, len) && o == off && l == len;
    if (ok)
        (void)futimens(fd, NULL); /* recently used: evicted last */
    close(fd);
    if (!ok)
        unlink(path);
    return ok;
}

void tf_range_cache_put(tf_range_cache *c, uint64_t off, uint64_t len, const void *buf)
{
    if (len > SIZE_MAX - HEADER_SIZE || HEADER_SIZE + len > c->max)
        return;
    char path[4096];
    entry_path(c, off, len, path, sizeof path);
    if (!write_entry(c, path, off, len, buf))
        return;
    pthread_mutex_lock(&c->mu);
    c->used += HEADER_SIZE + len;
    if (c->used > c->max)
        evict(c);
    pthread_mutex_unlock(&c->mu);
}

/* Not an entry (a dot name): neither counted nor evicted. */
static void anchor_path(const tf_range_cache *c, char *p, size_t cap)
{
    snprintf(p, cap, "%s/.anchor", c->dir);
}

bool tf_range_cache_anchor_get(tf_range_cache *c, uint64_t *end, uint8_t *bytes, size_t *n)
{
    char path[4096];
    anchor_path(c, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    uint64_t len;
    bool ok = read_entry(fd, end, &len, bytes, TF_RANGE_ANCHOR_MAX) && len <= *end;
    close(fd);
    *n = (size_t)len;
    return ok;
}

void tf_range_cache_anchor_put(tf_range_cache *c, uint64_t end, const uint8_t *bytes, size_t n)
{
    char path[4096];
    anchor_path(c, path, sizeof path);
    if (n <= TF_RANGE_ANCHOR_MAX)
        (void)write_entry(c, path, end, n, bytes);
}

void tf_range_cache_drop(tf_range_cache *c, uint64_t off, uint64_t len)
{
    DIR *d = opendir(c->dir);
    if (!d)
        return;
    struct dirent *f;
    while ((f = readdir(d))) {
        uint64_t o, l;
        if (parse_entry_name(f->d_name, &o, &l) && o < off + len && off < o + l) {
            char path[4096 + 256];
            snprintf(path, sizeof path, "%s/%s", c->dir, f->d_name);
            unlink(path);
        }
    }
    closedir(d);
}
