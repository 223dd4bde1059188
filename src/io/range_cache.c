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
#include "common/spare_bufs.h"

static const uint8_t ENTRY_MAGIC[8] = { 'T', 'R', 'J', 'R', 'N', 'G', '1', '\n' };
#define HEADER_SIZE 32 /* magic, offset, length, XXH3-64 of the bytes */
/* Eviction brings the total down to this fraction of the bound, so that
 * it does not run again at the next entry. */
#define EVICT_TO_NUM 7
#define EVICT_TO_DEN 8
/* A temporary file this old was left by a process that died. */
#define STALE_TMP_SECONDS 3600

/* An entry is a range that a read asked for, which serves that range,
 * or a segment that a writer kept (tf_range_cache_put_file), a holder:
 * it serves the ranges inside it. A holder's file has the checksum of
 * each block of HOLDER_BLOCK bytes (a table after its header, itself
 * checksummed), so that a read checks the blocks it touches, once a
 * process, not the whole segment. Up to HOLDERS_OPEN holders stay open
 * (the least recently read closed first: checked again when read
 * again). */
static const uint8_t HOLDER_MAGIC[8] = { 'T', 'R', 'J', 'S', 'E', 'G', '1', '\n' };
#define HOLDER_BLOCK ((uint64_t)1 << 20)
#define HOLDERS_OPEN 16

typedef struct {
    uint64_t off, len;
    int fd;           /* its file: -1 until a read needs it */
    uint64_t *sums;   /* with fd: each block's XXH3-64, from its table */
    uint8_t *checked; /* with fd: per block, found to have its sum */
    uint64_t used;    /* when last read (c->clock) */
} holder;

static uint64_t holder_blocks(uint64_t len) { return len / HOLDER_BLOCK + (len % HOLDER_BLOCK != 0); }

/* Where a holder's bytes begin in its file: after the header and table. */
static uint64_t holder_data(uint64_t len) { return HEADER_SIZE + 8 * holder_blocks(len); }

struct tf_range_cache {
    int root_fd; /* DIR */
    int dir_fd;  /* DIR/OBJECT */
    uint64_t max;
    pthread_mutex_t mu; /* of used and of the holders (never held while
                         * a file is read) */
    /* Bytes of all entries, as last counted plus ours since: counted at
     * the first put (listing every entry of every object), which a
     * process that only reads never pays. */
    uint64_t used;
    bool counted;
    atomic_uint tmp_seq;
    tf_spare_bufs spare; /* for the blocks a read checks beyond its range */
    holder *holders; /* of this object, as listed at open and put since */
    size_t nholders, cap_holders, nopen;
    uint64_t clock;
};

/* The names the cache writes, the only ones it reads, counts or
 * removes: OBJECT (32 hex digits) under DIR; in it, entries
 * (OFFSET-LENGTH, 16 hex digits each; OFFSET=LENGTH for a holder),
 * .anchor and .tmp-PID-SEQ. */
#define OBJECT_NAME_LEN 32
#define ENTRY_NAME_LEN 33

static bool hex_digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

static bool is_object_name(const char *s)
{
    return strlen(s) == OBJECT_NAME_LEN && hex_digits(s, OBJECT_NAME_LEN);
}

/* An entry's name: its range, and (holds, when not NULL) whether it is
 * a holder's. */
static bool parse_entry_name(const char *name, uint64_t *off, uint64_t *len, bool *holds)
{
    if (strlen(name) != ENTRY_NAME_LEN || (name[16] != '-' && name[16] != '=') || !hex_digits(name, 16) ||
        !hex_digits(name + 17, 16))
        return false;
    *off = strtoull(name, NULL, 16);
    *len = strtoull(name + 17, NULL, 16);
    if (holds)
        *holds = name[16] == '=';
    return true;
}

static bool is_tmp_name(const char *s)
{
    if (strncmp(s, ".tmp-", 5) != 0)
        return false;
    size_t pid = strspn(s + 5, "0123456789");
    return pid && s[5 + pid] == '-' && s[6 + pid] &&
           strspn(s + 6 + pid, "0123456789") == strlen(s + 6 + pid);
}

static void entry_name(uint64_t off, uint64_t len, bool holds, char name[ENTRY_NAME_LEN + 1])
{
    snprintf(name, ENTRY_NAME_LEN + 1, "%016" PRIx64 "%c%016" PRIx64, off, holds ? '=' : '-', len);
}

/* Opens the directory `name` (relative to at), not through a link, and
 * only when it is the user's and no one else may write in it: what
 * another user can write in could feed a mount forged bytes, or point
 * eviction at files that are not the cache's. shown: the name for a
 * message, NULL for none. */
static int open_own_dir(int at, const char *name, const char *shown, tf_error *e)
{
    int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        int err = errno;
        if (fd >= 0)
            close(fd);
        return shown ? tf_fail(e, err, "cache directory %s: %s", shown,
                               err == ELOOP || err == ENOTDIR ? "not a directory (a link?): refused"
                                                              : strerror(err))
                     : -1;
    }
    if (st.st_uid == geteuid() && !(st.st_mode & (S_IWGRP | S_IWOTH)))
        return fd;
    close(fd);
    if (!shown)
        return -1;
    if (st.st_uid != geteuid())
        return tf_fail(e, EPERM, "cache directory %s belongs to uid %u, not to this user (uid %u): "
                       "refused, a cache is trusted and must be its user's alone",
                       shown, (unsigned)st.st_uid, (unsigned)geteuid());
    return tf_fail(e, EPERM, "cache directory %s may be written by others (mode %04o): refused, "
                   "a cache is trusted and must be its user's alone", shown,
                   (unsigned)(st.st_mode & 07777));
}

/* A directory stream of the directory fd (which stays open). */
static DIR *list_dir(int fd)
{
    int d = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *dir = d < 0 ? NULL : fdopendir(d);
    if (!dir && d >= 0)
        close(d);
    return dir;
}

typedef struct {
    char object[OBJECT_NAME_LEN + 1];
    char name[ENTRY_NAME_LEN + 1];
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

/* Lists the entries of one object (removing its stale temporary files
 * on the way) into *files; returns their total size. */
static uint64_t list_object(int root_fd, const char *object, cached_file **files, size_t *n,
                            size_t *cap)
{
    int fd = open_own_dir(root_fd, object, NULL, NULL);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (!d) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    uint64_t total = 0, off, len;
    time_t now = time(NULL);
    struct dirent *f;
    while ((f = readdir(d))) {
        struct stat st;
        bool entry = parse_entry_name(f->d_name, &off, &len, NULL);
        if ((!entry && !is_tmp_name(f->d_name)) ||
            fstatat(fd, f->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
            continue;
        if (!entry) {
            if (now - st.st_mtime > STALE_TMP_SECONDS)
                unlinkat(fd, f->d_name, 0);
            continue;
        }
        total += (uint64_t)st.st_size;
        if (!files)
            continue;
        if (*n == *cap) {
            size_t ncap = *cap ? *cap * 2 : 256;
            cached_file *more = realloc(*files, ncap * sizeof *more);
            if (!more)
                continue;
            *files = more;
            *cap = ncap;
        }
        cached_file *cf = &(*files)[(*n)++];
        *cf = (cached_file){ .mtime = st.st_mtim, .size = (uint64_t)st.st_size };
        memcpy(cf->object, object, sizeof cf->object);
        memcpy(cf->name, f->d_name, sizeof cf->name);
    }
    closedir(d); /* closes fd */
    return total;
}

/* Lists the entries of every object of the cache; returns their total
 * size. */
static uint64_t list_all(const tf_range_cache *c, cached_file **files, size_t *n)
{
    uint64_t total = 0;
    size_t cap = 0;
    *n = 0;
    if (files)
        *files = NULL;
    DIR *top = list_dir(c->root_fd);
    if (!top)
        return 0;
    struct dirent *o;
    while ((o = readdir(top)))
        if (is_object_name(o->d_name))
            total += list_object(c->root_fd, o->d_name, files, n, &cap);
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
    uint64_t total = list_all(c, &files, &n);
    qsort(files, n, sizeof *files, older_first);
    uint64_t goal = c->max / EVICT_TO_DEN * EVICT_TO_NUM;
    for (size_t i = 0; i < n && total > goal; i++) {
        int fd = open_own_dir(c->root_fd, files[i].object, NULL, NULL);
        if (fd >= 0 && unlinkat(fd, files[i].name, 0) == 0)
            total -= files[i].size;
        if (fd >= 0)
            close(fd);
    }
    free(files);
    c->used = total;
}

/* ---- holders (under mu, but at open) ---- */

static void add_holder(tf_range_cache *c, uint64_t off, uint64_t len)
{
    for (size_t i = 0; i < c->nholders; i++)
        if (c->holders[i].off == off && c->holders[i].len == len)
            return;
    if (c->nholders == c->cap_holders) {
        size_t cap = c->cap_holders ? c->cap_holders * 2 : 16;
        holder *more = realloc(c->holders, cap * sizeof *more);
        if (!more)
            return; /* only costs fetches */
        c->holders = more;
        c->cap_holders = cap;
    }
    c->holders[c->nholders++] = (holder){ .off = off, .len = len, .fd = -1 };
}

/* Closes holder h's file (checked again when read again). */
static void close_holder(tf_range_cache *c, holder *h)
{
    if (h->fd < 0)
        return;
    close(h->fd);
    free(h->sums);
    free(h->checked);
    h->fd = -1;
    h->sums = NULL;
    h->checked = NULL;
    c->nopen--;
}

static void remove_holder(tf_range_cache *c, size_t i)
{
    close_holder(c, &c->holders[i]);
    c->holders[i] = c->holders[--c->nholders];
}

static void list_holders(tf_range_cache *c)
{
    DIR *d = list_dir(c->dir_fd);
    if (!d)
        return;
    struct dirent *f;
    uint64_t off, len;
    bool is_holder;
    while ((f = readdir(d)))
        if (parse_entry_name(f->d_name, &off, &len, &is_holder) && is_holder)
            add_holder(c, off, len);
    closedir(d);
}

int tf_range_cache_open(const char *dir, const char *object, uint64_t max_bytes,
                        tf_range_cache **out, tf_error *e)
{
    tf_range_cache *c = calloc(1, sizeof *c);
    if (!c)
        return tf_fail(e, ENOMEM, "out of memory");
    pthread_mutex_init(&c->mu, NULL);
    tf_spare_bufs_init(&c->spare, HOLDERS_OPEN / 4);
    c->root_fd = c->dir_fd = -1;
    char shown[4096];
    snprintf(shown, sizeof shown, "%s/%s", dir, object);
    int err = 0;
    if (!is_object_name(object))
        err = tf_fail(e, EINVAL, "cache: %s is not an object's name", object);
    else if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        err = tf_fail(e, errno, "cache directory %s: %s", dir, strerror(errno));
    else if ((c->root_fd = open_own_dir(AT_FDCWD, dir, dir, e)) < 0)
        err = -1;
    else if (mkdirat(c->root_fd, object, 0700) < 0 && errno != EEXIST)
        err = tf_fail(e, errno, "cache directory %s: %s", shown, strerror(errno));
    else if ((c->dir_fd = open_own_dir(c->root_fd, object, shown, e)) < 0)
        err = -1;
    if (err) {
        tf_range_cache_close(c);
        return -1;
    }
    c->max = max_bytes;
    list_holders(c);
    *out = c;
    return 0;
}

void tf_range_cache_close(tf_range_cache *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->nholders; i++)
        close_holder(c, &c->holders[i]);
    free(c->holders);
    tf_spare_bufs_destroy(&c->spare);
    pthread_mutex_destroy(&c->mu);
    if (c->root_fd >= 0)
        close(c->root_fd);
    if (c->dir_fd >= 0)
        close(c->dir_fd);
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

/* Whether the entry file fd is whole: its header's magic (of a holder
 * where kept, else of a range), and a size that its header's length (at
 * most cap) makes; *off, *len and *hash from the header. */
static bool entry_header(int fd, bool kept, uint64_t *off, uint64_t *len, uint64_t *hash,
                         uint64_t cap)
{
    uint8_t h[HEADER_SIZE];
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size < HEADER_SIZE ||
        !read_all(fd, h, sizeof h, 0) || memcmp(h, kept ? HOLDER_MAGIC : ENTRY_MAGIC, 8) != 0)
        return false;
    *off = tf_le64_get(h + 8);
    *len = tf_le64_get(h + 16);
    *hash = tf_le64_get(h + 24);
    /* len is checked against the size before it sizes anything */
    return *len <= cap && (uint64_t)st.st_size >= *len &&
           (uint64_t)st.st_size - *len == (kept ? holder_data(*len) : HEADER_SIZE);
}

/* The header of an entry (a holder where kept, else a range). */
static void fill_header(uint8_t h[HEADER_SIZE], bool kept, uint64_t off, uint64_t len,
                        uint64_t hash)
{
    memcpy(h, kept ? HOLDER_MAGIC : ENTRY_MAGIC, 8);
    tf_le64_put(h + 8, off);
    tf_le64_put(h + 16, len);
    tf_le64_put(h + 24, hash);
}

/* Reads an entry file: its header says [off, off + len), len at most
 * cap bytes, into buf; false when it is not whole or its bytes do not
 * have its checksum. */
static bool read_entry(int fd, uint64_t *off, uint64_t *len, void *buf, uint64_t cap)
{
    uint64_t hash;
    return entry_header(fd, false, off, len, &hash, cap < SIZE_MAX ? cap : SIZE_MAX) &&
           read_all(fd, buf, (size_t)*len, HEADER_SIZE) && tf_hash64(buf, (size_t)*len) == hash;
}

/* Opens the file `name` of the object's directory to read, never
 * through a link, nor waiting for a writer of a FIFO. */
static int open_to_read(const tf_range_cache *c, const char *name)
{
    return openat(c->dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
}

/* A holder's file from the first len bytes of the file src, written at
 * fd: its bytes, each block checksummed as it is copied, then its
 * table, then its header. */
static bool write_holder(int fd, uint64_t off, uint64_t len, int src)
{
    uint64_t n = holder_blocks(len);
    uint8_t *table = malloc(n ? 8 * n : 1);
    bool ok = table && lseek(fd, (off_t)holder_data(len), SEEK_SET) == (off_t)holder_data(len);
    for (uint64_t k = 0; ok && k < n; k++) {
        uint64_t at = k * HOLDER_BLOCK, sum;
        ok = tf_hash64_file(src, at, len - at < HOLDER_BLOCK ? len - at : HOLDER_BLOCK, fd, &sum);
        tf_le64_put(table + 8 * k, sum);
    }
    uint8_t h[HEADER_SIZE];
    fill_header(h, true, off, len, ok ? tf_hash64(table, 8 * n) : 0);
    ok = ok && tf_pwrite_full(fd, table, 8 * n, HEADER_SIZE) == 0 && tf_pwrite_full(fd, h, sizeof h, 0) == 0;
    free(table);
    return ok;
}

/* Writes an entry of [off, off + len) as `name`, whole (by rename) or
 * not at all: a range of buf's bytes, or with buf NULL a holder of the
 * file src's first len bytes. */
static bool write_entry(tf_range_cache *c, const char *name, uint64_t off, uint64_t len, const void *buf,
                        int src)
{
    char tmp[64];
    snprintf(tmp, sizeof tmp, ".tmp-%ld-%u", (long)getpid(), atomic_fetch_add(&c->tmp_seq, 1));
    int fd = openat(c->dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return false;
    bool ok;
    if (buf) {
        uint8_t h[HEADER_SIZE];
        fill_header(h, false, off, len, tf_hash64(buf, (size_t)len));
        ok = write_all(fd, h, sizeof h) && write_all(fd, buf, (size_t)len);
    } else {
        ok = write_holder(fd, off, len, src);
    }
    ok = close(fd) == 0 && ok && renameat(c->dir_fd, tmp, c->dir_fd, name) == 0;
    if (!ok)
        unlinkat(c->dir_fd, tmp, 0);
    return ok;
}

/* Removes the holder file of [off, off + len): damaged. */
static void unlink_holder(tf_range_cache *c, uint64_t off, uint64_t len)
{
    char name[ENTRY_NAME_LEN + 1];
    entry_name(off, len, true, name);
    unlinkat(c->dir_fd, name, 0);
}

/* Opens the holder of [off, off + len): its fd, its table in *sums
 * (checked against the header's sum), or -1 (the file removed when
 * damaged). */
static int open_holder(tf_range_cache *c, uint64_t off, uint64_t len, uint64_t **sums)
{
    char name[ENTRY_NAME_LEN + 1];
    entry_name(off, len, true, name);
    int fd = open_to_read(c, name);
    if (fd < 0)
        return -1;
    uint64_t o, l, hash, n = holder_blocks(len);
    bool whole = entry_header(fd, true, &o, &l, &hash, UINT64_MAX) && o == off && l == len;
    bool memory = whole && (*sums = malloc(n ? 8 * n : 1));
    /* the table read in place, its little-endian sums then made values */
    uint8_t *table = (uint8_t *)*sums;
    bool ok = memory && read_all(fd, table, 8 * n, HEADER_SIZE) && tf_hash64(table, 8 * n) == hash;
    for (uint64_t k = 0; ok && k < n; k++)
        (*sums)[k] = tf_le64_get(table + 8 * k);
    if (ok) {
        (void)futimens(fd, NULL); /* recently used: evicted last */
        return fd;
    }
    if (memory) {
        free(*sums);
        *sums = NULL;
    }
    close(fd);
    if (!whole || memory) /* damaged, not out of memory */
        unlinkat(c->dir_fd, name, 0);
    return -1;
}

/* Closes the holder read least recently. */
static void close_oldest(tf_range_cache *c)
{
    holder *old = NULL;
    for (size_t i = 0; i < c->nholders; i++)
        if (c->holders[i].fd >= 0 && (!old || c->holders[i].used < old->used))
            old = &c->holders[i];
    if (old)
        close_holder(c, old);
}

static bool holds(const holder *h, uint64_t off, uint64_t len)
{
    return off >= h->off && len <= h->len && off - h->off <= h->len - len;
}

/* The index of the holder of [off, off + len) (exactly so with `exact`),
 * or nholders. */
static size_t find_holder(const tf_range_cache *c, uint64_t off, uint64_t len, bool exact)
{
    size_t i = 0;
    while (i < c->nholders && !(exact ? c->holders[i].off == off && c->holders[i].len == len
                                      : holds(&c->holders[i], off, len)))
        i++;
    return i;
}

/* What a read of a holder needs, taken under the lock: a descriptor of
 * its own (a dup: closing it is the reader's), the holder's range, and
 * the blocks it reads, [first, first + n): sums[k] the sum of block
 * first + k, which needs checking where need[k] (no read has yet). */
typedef struct {
    int fd;
    uint64_t base, len, first, n;
    uint64_t *sums;
    uint8_t *need; /* after sums, in its allocation */
} holder_read;

/* Fills *r for a read of [off, off + len) from holder i, which is open
 * (under the lock): false when out of memory or descriptors. */
static bool begin_read(tf_range_cache *c, size_t i, uint64_t off, uint64_t len, holder_read *r)
{
    holder *h = &c->holders[i];
    h->used = ++c->clock;
    r->base = h->off;
    r->len = h->len;
    r->first = (off - h->off) / HOLDER_BLOCK;
    r->n = len ? (off - h->off + len - 1) / HOLDER_BLOCK + 1 - r->first : 0;
    r->sums = malloc(r->n ? 9 * r->n : 1);
    r->fd = r->sums ? fcntl(h->fd, F_DUPFD_CLOEXEC, 0) : -1;
    if (r->fd < 0) {
        free(r->sums);
        return false;
    }
    r->need = (uint8_t *)(r->sums + r->n);
    for (uint64_t k = 0; k < r->n; k++) {
        r->sums[k] = h->sums[r->first + k];
        r->need[k] = !h->checked[r->first + k];
    }
    return true;
}

/* Opens holder i, of [off, off + len), outside the lock (called and
 * returning with it held); false when it cannot be (then removed). */
static bool open_holder_at(tf_range_cache *c, size_t *i, uint64_t off, uint64_t len)
{
    pthread_mutex_unlock(&c->mu);
    uint64_t *sums = NULL;
    int fd = open_holder(c, off, len, &sums);
    uint8_t *checked = fd >= 0 ? calloc(holder_blocks(len) ? holder_blocks(len) : 1, 1) : NULL;
    pthread_mutex_lock(&c->mu);
    *i = find_holder(c, off, len, true);
    bool found = *i < c->nholders;
    if (found && c->holders[*i].fd < 0 && checked) {
        if (c->nopen == HOLDERS_OPEN)
            close_oldest(c);
        c->holders[*i].fd = fd;
        c->holders[*i].sums = sums;
        c->holders[*i].checked = checked;
        c->nopen++;
        return true;
    }
    bool open = found && c->holders[*i].fd >= 0; /* another thread opened it meanwhile */
    if (found && !open && fd < 0) /* damaged (its file removed) or gone */
        remove_holder(c, *i);
    if (fd >= 0)
        close(fd);
    free(sums);
    free(checked);
    return open;
}

/* Reads [off, off + len) of the holder r reads into buf, and checks
 * the blocks it touches that need it: those inside the range from buf,
 * those it covers in part whole from the file, through a spare buffer
 * (no fresh pages to fault in at each read). 0, or 1 when a block does
 * not have its sum (damaged), -1 when the bytes cannot be read. */
static int read_checked(tf_range_cache *c, const holder_read *r, uint64_t off, uint64_t len,
                        uint8_t *buf)
{
    uint64_t data = holder_data(r->len), rel = off - r->base;
    int rc = read_all(r->fd, buf, (size_t)len, data + rel) ? 0 : -1;
    tf_buf *spare = NULL;
    for (uint64_t k = 0; rc == 0 && k < r->n; k++) {
        if (!r->need[k])
            continue;
        uint64_t at = (r->first + k) * HOLDER_BLOCK;
        uint64_t n = r->len - at < HOLDER_BLOCK ? r->len - at : HOLDER_BLOCK;
        const uint8_t *block = at >= rel && at + n <= rel + len ? buf + (at - rel) : NULL;
        if (!block) {
            uint8_t *p = NULL;
            if (spare || (spare = tf_spare_buf_take(&c->spare))) {
                spare->len = 0;
                p = tf_buf_reserve(spare, (size_t)n);
            }
            if (!p || !read_all(r->fd, p, (size_t)n, data + at))
                rc = -1;
            block = p;
        }
        if (rc == 0 && tf_hash64(block, (size_t)n) != r->sums[k])
            rc = 1;
    }
    tf_spare_buf_give(&c->spare, spare);
    return rc;
}

/* Copies [off, off + len) from a holder of it: false when there is none
 * (or the blocks it reads turn out damaged: the holder is removed).
 * Reads and checks run outside the lock, so that threads reading the
 * cache do not wait on each other; the holders may change meanwhile,
 * so a holder is found again by its range afterwards. */
static bool get_held(tf_range_cache *c, uint64_t off, uint64_t len, void *buf)
{
    pthread_mutex_lock(&c->mu);
    size_t i = find_holder(c, off, len, false);
    holder_read r = { .fd = -1 };
    bool ok = i < c->nholders;
    if (ok && c->holders[i].fd < 0) {
        uint64_t hoff = c->holders[i].off, hlen = c->holders[i].len;
        ok = open_holder_at(c, &i, hoff, hlen);
    }
    ok = ok && begin_read(c, i, off, len, &r);
    pthread_mutex_unlock(&c->mu);
    if (!ok)
        return false;
    int rc = read_checked(c, &r, off, len, buf);
    pthread_mutex_lock(&c->mu);
    i = find_holder(c, r.base, r.len, true);
    if (i < c->nholders && rc == 1) {
        remove_holder(c, i);
        unlink_holder(c, r.base, r.len);
    } else if (i < c->nholders && rc == 0 && c->holders[i].checked) {
        for (uint64_t k = 0; k < r.n; k++)
            c->holders[i].checked[r.first + k] = 1;
    }
    pthread_mutex_unlock(&c->mu);
    close(r.fd);
    free(r.sums);
    return rc == 0;
}

/* Opens the range entry of [off, off + len), named in name: -1 when
 * there is none. */
static int open_entry(const tf_range_cache *c, uint64_t off, uint64_t len, char name[ENTRY_NAME_LEN + 1])
{
    entry_name(off, len, false, name);
    return open_to_read(c, name);
}

bool tf_range_cache_get(tf_range_cache *c, uint64_t off, uint64_t len, void *buf)
{
    if (get_held(c, off, len, buf))
        return true;
    char name[ENTRY_NAME_LEN + 1];
    int fd = open_entry(c, off, len, name);
    if (fd < 0)
        return false;
    uint64_t o, l;
    bool ok = read_entry(fd, &o, &l, buf, len) && o == off && l == len;
    if (ok)
        (void)futimens(fd, NULL); /* recently used: evicted last */
    close(fd);
    if (!ok)
        unlinkat(c->dir_fd, name, 0);
    return ok;
}

/* Whether a holder has [off, off + len). */
static bool held(tf_range_cache *c, uint64_t off, uint64_t len)
{
    pthread_mutex_lock(&c->mu);
    bool found = find_holder(c, off, len, false) < c->nholders;
    pthread_mutex_unlock(&c->mu);
    return found;
}

bool tf_range_cache_will_need(tf_range_cache *c, uint64_t off, uint64_t len)
{
    /* A holder gets no hint: a read of it reads the blocks it checks at
     * once. */
    if (held(c, off, len))
        return true;
    char name[ENTRY_NAME_LEN + 1];
    int fd = open_entry(c, off, len, name);
    if (fd < 0)
        return false;
    if (len <= INT64_MAX - HEADER_SIZE)
        (void)posix_fadvise(fd, 0, (off_t)(HEADER_SIZE + len), POSIX_FADV_WILLNEED);
    close(fd);
    return true;
}

/* Puts an entry of [off, off + len): buf's bytes (a range, unless a
 * holder has it), or src's (a holder). */
static void put(tf_range_cache *c, uint64_t off, uint64_t len, const void *buf, int src)
{
    /* The bytes of its file: a holder's have its table of sums too. */
    uint64_t size = len <= SIZE_MAX / 2 ? (buf ? HEADER_SIZE : holder_data(len)) + len : UINT64_MAX;
    if (size > c->max || (buf && held(c, off, len)))
        return;
    char name[ENTRY_NAME_LEN + 1];
    entry_name(off, len, !buf, name);
    struct stat st; /* an entry is never written again: its bytes are the same */
    if (fstatat(c->dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 || !write_entry(c, name, off, len, buf, src))
        return;
    pthread_mutex_lock(&c->mu);
    if (!buf)
        add_holder(c, off, len);
    if (!c->counted) {
        size_t n;
        c->used = list_all(c, NULL, &n); /* ours included */
        c->counted = true;
    } else {
        c->used += size;
    }
    if (c->used > c->max)
        evict(c);
    pthread_mutex_unlock(&c->mu);
}

void tf_range_cache_put(tf_range_cache *c, uint64_t off, uint64_t len, const void *buf)
{
    put(c, off, len, buf, -1);
}

void tf_range_cache_put_file(tf_range_cache *c, uint64_t off, uint64_t len, int fd)
{
    put(c, off, len, NULL, fd);
}

/* Not an entry (a dot name): neither counted nor evicted. */
#define ANCHOR_NAME ".anchor"

bool tf_range_cache_anchor_get(tf_range_cache *c, uint64_t *end, uint8_t *bytes, size_t *n)
{
    int fd = open_to_read(c, ANCHOR_NAME);
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
    if (n <= TF_RANGE_ANCHOR_MAX)
        (void)write_entry(c, ANCHOR_NAME, end, n, bytes, -1);
}

void tf_range_cache_drop(tf_range_cache *c, uint64_t off, uint64_t len)
{
    pthread_mutex_lock(&c->mu);
    for (size_t i = c->nholders; i-- > 0;)
        if (c->holders[i].off < off + len && off < c->holders[i].off + c->holders[i].len)
            remove_holder(c, i);
    pthread_mutex_unlock(&c->mu);
    DIR *d = list_dir(c->dir_fd);
    if (!d)
        return;
    struct dirent *f;
    while ((f = readdir(d))) {
        uint64_t o, l;
        if (parse_entry_name(f->d_name, &o, &l, NULL) && o < off + len && off < o + l)
            unlinkat(c->dir_fd, f->d_name, 0);
    }
    closedir(d);
}
