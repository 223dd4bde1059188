/* stress_read MOUNT LIST SECONDS READERS [SEED]: READERS threads read
 * files through a mount for SECONDS seconds and compare every byte they
 * read with the file's original.
 *
 * LIST names the files that may be read, one per line, "PATH<TAB>ORIGINAL"
 * with PATH relative to MOUNT. It may grow while the threads run (a
 * writer appends each file whose close() succeeded) and is read again as
 * it does. Each step of a thread opens a random file of the list and its
 * original, checks that fstat gives the original's size, and then either
 * reads the whole file front to back with reads of random sizes up to
 * 1 MiB (the last one must return 0 at the end), or reads 1 to 8 windows
 * of random offset and length with pread (a window past the end must come
 * back short by exactly that much). Every read's length and bytes must be
 * the original's.
 *
 * Prints one line, "stress_read: R readers, S s: N files opened, W read
 * whole, P windows, B bytes verified", and exits 0; exits 1 at the first
 * difference or error, naming the file, the offset and the call. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* getline, O_CLOEXEC */
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_IO ((size_t)1 << 20)
#define MAX_READERS 256

typedef struct {
    char *path;     /* below the mount */
    char *original;
} file_pair;

static struct {
    const char *mount;
    const char *list_path;
    pthread_mutex_t lock; /* guards files, nfiles, cap, consumed */
    file_pair *files;
    size_t nfiles, cap;
    long consumed; /* bytes of LIST read so far (whole lines only) */
    atomic_bool stop, failed;
    atomic_ullong opened, whole, windows, bytes;
} g = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void failf(const char *fmt, ...)
{
    static pthread_mutex_t out = PTHREAD_MUTEX_INITIALIZER;
    va_list ap;
    pthread_mutex_lock(&out);
    if (!atomic_exchange(&g.failed, true)) { /* the first failure only */
        fputs("stress_read: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
    }
    pthread_mutex_unlock(&out);
    atomic_store(&g.stop, true);
}

/* Adds the lines appended to LIST since the last call; returns -1 when
 * LIST cannot be read or a line is malformed. */
static int reload_list(void)
{
    FILE *f = fopen(g.list_path, "r");
    if (!f) {
        failf("%s: %s", g.list_path, strerror(errno));
        return -1;
    }
    pthread_mutex_lock(&g.lock);
    int rc = 0;
    char *line = NULL;
    size_t linecap = 0;
    ssize_t n;
    if (fseek(f, g.consumed, SEEK_SET) != 0)
        rc = -1;
    while (rc == 0 && (n = getline(&line, &linecap, f)) > 0) {
        if (line[n - 1] != '\n')
            break; /* being written: next time */
        line[n - 1] = '\0';
        char *tab = strchr(line, '\t');
        if (!tab || tab == line || !tab[1]) {
            failf("%s: a line without PATH<TAB>ORIGINAL: %s", g.list_path, line);
            rc = -1;
            break;
        }
        *tab = '\0';
        if (g.nfiles == g.cap) {
            size_t cap = g.cap ? g.cap * 2 : 64;
            file_pair *p = realloc(g.files, cap * sizeof *p);
            if (!p) {
                failf("out of memory");
                rc = -1;
                break;
            }
            g.files = p;
            g.cap = cap;
        }
        file_pair *fp = &g.files[g.nfiles];
        fp->path = strdup(line);
        fp->original = strdup(tab + 1);
        if (!fp->path || !fp->original) {
            failf("out of memory");
            rc = -1;
            break;
        }
        g.nfiles++;
        g.consumed += (long)n;
    }
    pthread_mutex_unlock(&g.lock);
    free(line);
    fclose(f);
    return rc;
}

static uint64_t next_rand(uint64_t *s)
{
    /* xorshift64* */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}

/* pread that goes on after a short count; returns the bytes read or -1. */
static ssize_t pread_full(int fd, uint8_t *buf, size_t len, off_t off)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(fd, buf + got, len - got, off + (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

/* Compares len bytes read from the mount at off with the original's. */
static bool same(const file_pair *fp, const uint8_t *got, const uint8_t *want, size_t len,
                 uint64_t off, const char *call)
{
    if (memcmp(got, want, len) == 0)
        return true;
    size_t i = 0;
    while (got[i] == want[i])
        i++;
    failf("%s: %s at %llu (%zu bytes): byte %llu is 0x%02x, not 0x%02x", fp->path, call,
          (unsigned long long)off, len, (unsigned long long)(off + i), got[i], want[i]);
    return false;
}

/* Reads the whole file front to back with reads of random sizes. */
static bool read_whole(const file_pair *fp, int fd, int ofd, uint64_t size, uint8_t *buf,
                       uint8_t *want, uint64_t *rng)
{
    uint64_t off = 0;
    for (;;) {
        size_t len = 1 + (size_t)(next_rand(rng) % MAX_IO);
        ssize_t n = read(fd, buf, len);
        if (n < 0) {
            failf("%s: read of %zu bytes at %llu: %s", fp->path, len, (unsigned long long)off,
                  strerror(errno));
            return false;
        }
        if (n == 0)
            break;
        if ((uint64_t)n > size - off) {
            failf("%s: read past its size %llu", fp->path, (unsigned long long)size);
            return false;
        }
        if (pread_full(ofd, want, (size_t)n, (off_t)off) != n) {
            failf("%s: cannot read %zu bytes of the original at %llu", fp->original, (size_t)n,
                  (unsigned long long)off);
            return false;
        }
        if (!same(fp, buf, want, (size_t)n, off, "read"))
            return false;
        off += (uint64_t)n;
        atomic_fetch_add(&g.bytes, (unsigned long long)n);
    }
    if (off != size) {
        failf("%s: read ended at %llu of %llu bytes", fp->path, (unsigned long long)off,
              (unsigned long long)size);
        return false;
    }
    atomic_fetch_add(&g.whole, 1);
    return true;
}

/* Reads 1 to 8 windows at random offsets with pread. */
static bool read_windows(const file_pair *fp, int fd, int ofd, uint64_t size, uint8_t *buf,
                         uint8_t *want, uint64_t *rng)
{
    unsigned count = 1 + (unsigned)(next_rand(rng) % 8);
    for (unsigned k = 0; k < count && !atomic_load(&g.stop); k++) {
        uint64_t off = size ? next_rand(rng) % (size + 1) : 0;
        size_t len = 1 + (size_t)(next_rand(rng) % MAX_IO);
        size_t expect = size - off < len ? (size_t)(size - off) : len;
        ssize_t n = pread_full(fd, buf, len, (off_t)off);
        if (n < 0) {
            failf("%s: pread of %zu bytes at %llu: %s", fp->path, len, (unsigned long long)off,
                  strerror(errno));
            return false;
        }
        if ((size_t)n != expect) {
            failf("%s: pread of %zu bytes at %llu of %llu returned %zd, not %zu", fp->path, len,
                  (unsigned long long)off, (unsigned long long)size, n, expect);
            return false;
        }
        if (pread_full(ofd, want, expect, (off_t)off) != (ssize_t)expect) {
            failf("%s: cannot read the original at %llu", fp->original, (unsigned long long)off);
            return false;
        }
        if (!same(fp, buf, want, expect, off, "pread"))
            return false;
        atomic_fetch_add(&g.bytes, (unsigned long long)expect);
        atomic_fetch_add(&g.windows, 1);
    }
    return true;
}

static bool one_step(uint8_t *buf, uint8_t *want, uint64_t *rng)
{
    pthread_mutex_lock(&g.lock);
    file_pair fp = g.files[next_rand(rng) % g.nfiles]; /* never freed while threads run */
    pthread_mutex_unlock(&g.lock);
    char path[4096];
    if (snprintf(path, sizeof path, "%s/%s", g.mount, fp.path) >= (int)sizeof path) {
        failf("%s: path too long", fp.path);
        return false;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        failf("%s: open: %s", path, strerror(errno));
        return false;
    }
    int ofd = open(fp.original, O_RDONLY | O_CLOEXEC);
    if (ofd < 0) {
        failf("%s: open: %s", fp.original, strerror(errno));
        close(fd);
        return false;
    }
    atomic_fetch_add(&g.opened, 1);
    struct stat st, ost;
    bool ok = true;
    if (fstat(fd, &st) < 0 || fstat(ofd, &ost) < 0) {
        failf("%s: fstat: %s", path, strerror(errno));
        ok = false;
    } else if (st.st_size != ost.st_size) {
        failf("%s: size %lld, not the original's %lld", path, (long long)st.st_size,
              (long long)ost.st_size);
        ok = false;
    } else if (next_rand(rng) % 4 == 0) {
        ok = read_whole(&fp, fd, ofd, (uint64_t)st.st_size, buf, want, rng);
    } else {
        ok = read_windows(&fp, fd, ofd, (uint64_t)st.st_size, buf, want, rng);
    }
    if (close(fd) < 0 && ok) {
        failf("%s: close: %s", path, strerror(errno));
        ok = false;
    }
    close(ofd);
    return ok;
}

static void *reader(void *arg)
{
    uint64_t rng = (uint64_t)(uintptr_t)arg * 0x9E3779B97F4A7C15ULL + 1;
    uint8_t *buf = malloc(MAX_IO), *want = malloc(MAX_IO);
    if (!buf || !want)
        failf("out of memory");
    while (buf && want && !atomic_load(&g.stop) && one_step(buf, want, &rng))
        ;
    free(buf);
    free(want);
    return NULL;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: stress_read MOUNT LIST SECONDS READERS [SEED]\n");
        return 2;
    }
    g.mount = argv[1];
    g.list_path = argv[2];
    double seconds = atof(argv[3]);
    long readers = atol(argv[4]);
    uint64_t seed = argc == 6 ? strtoull(argv[5], NULL, 10) : 1;
    if (seconds <= 0 || readers < 1 || readers > MAX_READERS) {
        fprintf(stderr, "stress_read: SECONDS > 0 and 1 <= READERS <= %d\n", MAX_READERS);
        return 2;
    }
    if (reload_list() < 0)
        return 1;
    if (g.nfiles == 0) {
        fprintf(stderr, "stress_read: %s lists no file\n", g.list_path);
        return 1;
    }
    pthread_t threads[MAX_READERS];
    long started = 0;
    for (; started < readers; started++) {
        uintptr_t arg = (uintptr_t)(seed * MAX_READERS + (uint64_t)started);
        if (pthread_create(&threads[started], NULL, reader, (void *)arg) != 0) {
            failf("cannot start reader %ld", started);
            break;
        }
    }
    double start = now(), end = start + seconds;
    while (!atomic_load(&g.stop) && now() < end) {
        struct timespec nap = { 0, 100 * 1000 * 1000 };
        nanosleep(&nap, NULL);
        reload_list();
    }
    atomic_store(&g.stop, true);
    for (long i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    if (!atomic_load(&g.failed))
        printf("stress_read: %ld readers, %.0f s: %llu files opened (%zu listed), %llu read whole, "
               "%llu windows, %llu bytes verified\n",
               readers, now() - start, (unsigned long long)atomic_load(&g.opened), g.nfiles,
               (unsigned long long)atomic_load(&g.whole),
               (unsigned long long)atomic_load(&g.windows),
               (unsigned long long)atomic_load(&g.bytes));
    for (size_t i = 0; i < g.nfiles; i++) {
        free(g.files[i].path);
        free(g.files[i].original);
    }
    free(g.files);
    return atomic_load(&g.failed) ? 1 : 0;
}
