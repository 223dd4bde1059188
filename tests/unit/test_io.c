/* io/: whole reads and writes on a descriptor (after signals and short
 * counts), the local file behind the I/O interface (bounds, append,
 * sync, truncate, the writer's lock, the size poll), what the interface
 * does for a storage without the optional operations, the disk cache
 * of remote ranges (whole segments serving the ranges inside them), and
 * of remote archives what needs no server: URLs, their names, their
 * settings. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "testlib.h"

#include "common/full_io.h"
#include "io/io.h"
#include "io/range_cache.h"
#include "io/remote_opts.h"

/* ---- the disk cache of remote ranges ---- */

#define OBJECT "0123456789abcdef0123456789abcdef"
#define SEGMENT ((size_t)3 << 20)

static tf_range_cache *open_cache(uint64_t max)
{
    char dir[TEST_PATH_MAX];
    tf_range_cache *c;
    tf_error e;
    ck_assert_msg(tf_range_cache_open(test_path("cache", dir), OBJECT, max, &c, &e) == 0, "%s", e.msg);
    return c;
}

/* A file of SEGMENT patterned bytes, open to read; its bytes in *bytes. */
static int segment_file(uint8_t **bytes)
{
    char path[TEST_PATH_MAX];
    *bytes = malloc(SEGMENT);
    ck_assert_ptr_nonnull(*bytes);
    for (size_t i = 0; i < SEGMENT; i++)
        (*bytes)[i] = (uint8_t)(i * 2654435761u >> 13);
    test_write_file(test_path("segment", path), *bytes, SEGMENT);
    int fd = open(path, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    return fd;
}

START_TEST(range_cache_serves_exact_ranges)
{
    tf_range_cache *c = open_cache(1 << 30);
    char buf[16];
    tf_range_cache_put(c, 100, 10, "0123456789");
    ck_assert(tf_range_cache_get(c, 100, 10, buf));
    ck_assert_mem_eq(buf, "0123456789", 10);
    ck_assert(!tf_range_cache_get(c, 102, 4, buf)); /* a read's range serves that range only */
    ck_assert(!tf_range_cache_get(c, 100, 11, buf));
    tf_range_cache_close(c);
}
END_TEST

START_TEST(range_cache_segment_serves_ranges_inside)
{
    uint8_t *bytes, *buf = malloc(SEGMENT + 1);
    int fd = segment_file(&bytes);
    const uint64_t at = 5000;
    tf_range_cache *c = open_cache(1 << 30);
    tf_range_cache_put_file(c, at, SEGMENT, fd);
    const uint64_t reads[][2] = { { at, SEGMENT }, { at, 1 }, { at + 12345, 70000 },
                                  { at + SEGMENT - 9, 9 } };
    for (size_t i = 0; i < sizeof reads / sizeof *reads; i++) {
        memset(buf, 0, SEGMENT);
        ck_assert(tf_range_cache_get(c, reads[i][0], reads[i][1], buf));
        ck_assert_mem_eq(buf, bytes + (reads[i][0] - at), reads[i][1]);
    }
    ck_assert(!tf_range_cache_get(c, at - 1, 2, buf)); /* across either end: not held */
    ck_assert(!tf_range_cache_get(c, at + SEGMENT - 1, 2, buf));
    ck_assert(tf_range_cache_will_need(c, at, SEGMENT) && tf_range_cache_will_need(c, at + 12345, 70000));
    ck_assert(!tf_range_cache_will_need(c, at - 1, 2) && !tf_range_cache_will_need(c, at + SEGMENT - 1, 2));
    /* A range entry has its own range only. */
    tf_range_cache_put(c, 100, 10, "0123456789");
    ck_assert(tf_range_cache_will_need(c, 100, 10));
    ck_assert(!tf_range_cache_will_need(c, 100, 9) && !tf_range_cache_will_need(c, 101, 9));
    /* A range that the segment holds is not kept again. */
    char entry[TEST_PATH_MAX * 2];
    snprintf(entry, sizeof entry, "%s/cache/" OBJECT "/%016llx-%016x", test_dir,
             (unsigned long long)at + 10, 5);
    tf_range_cache_put(c, at + 10, 5, "abcde");
    ck_assert_int_eq(access(entry, F_OK), -1);
    ck_assert(tf_range_cache_get(c, at + 10, 5, buf));
    ck_assert_mem_eq(buf, bytes + 10, 5);
    tf_range_cache_close(c);
    /* Listed by a later open (another process's). */
    c = open_cache(1 << 30);
    ck_assert(tf_range_cache_get(c, at + 777, 4096, buf));
    ck_assert_mem_eq(buf, bytes + 777, 4096);
    tf_range_cache_drop(c, at + SEGMENT - 1, 1); /* touched: dropped whole */
    ck_assert(!tf_range_cache_get(c, at, 4096, buf));
    tf_range_cache_close(c);
    c = open_cache(1 << 30);
    ck_assert(!tf_range_cache_get(c, at, 4096, buf));
    tf_range_cache_close(c);
    /* Over the bound: not kept. */
    c = open_cache(SEGMENT);
    tf_range_cache_put_file(c, at, SEGMENT, fd);
    ck_assert(!tf_range_cache_get(c, at, 4096, buf));
    tf_range_cache_close(c);
    close(fd);
    free(bytes), free(buf);
}
END_TEST

/* Flips the byte at `at` of the file path. */
static void flip_byte(const char *path, off_t at)
{
    int w = open(path, O_RDWR);
    ck_assert_int_ge(w, 0);
    uint8_t b;
    ck_assert_int_eq(pread(w, &b, 1, at), 1);
    b ^= 0xff;
    ck_assert_int_eq(pwrite(w, &b, 1, at), 1);
    close(w);
}

START_TEST(range_cache_damaged_segment_is_never_served)
{
    uint8_t *bytes, *buf = malloc(SEGMENT);
    int fd = segment_file(&bytes);
    tf_range_cache *c = open_cache(1 << 30);
    tf_range_cache_put_file(c, 0, SEGMENT, fd);
    tf_range_cache_close(c);
    /* The file: a 32-byte header, the sums of its three blocks of 1 MiB,
     * its bytes. One byte changed in the last block: a read of the first
     * is served, one of the last is not, and the segment is removed. */
    char entry[TEST_PATH_MAX * 2];
    snprintf(entry, sizeof entry, "%s/cache/" OBJECT "/%016x=%016zx", test_dir, 0, SEGMENT);
    const off_t data = 32 + 3 * 8;
    flip_byte(entry, data + (off_t)SEGMENT - 1);
    c = open_cache(1 << 30);
    ck_assert(tf_range_cache_get(c, 0, 4096, buf));
    ck_assert_mem_eq(buf, bytes, 4096);
    ck_assert(!tf_range_cache_get(c, SEGMENT - 10, 10, buf));
    ck_assert_int_eq(access(entry, F_OK), -1); /* removed */
    ck_assert(!tf_range_cache_get(c, 0, 4096, buf));
    tf_range_cache_close(c);
    /* A sum changed in the table, or the header: nothing served. */
    const off_t damage[] = { 32 + 8, 12 };
    for (size_t k = 0; k < sizeof damage / sizeof *damage; k++) {
        c = open_cache(1 << 30);
        tf_range_cache_put_file(c, 0, SEGMENT, fd);
        tf_range_cache_close(c);
        flip_byte(entry, damage[k]);
        c = open_cache(1 << 30);
        ck_assert(!tf_range_cache_get(c, 0, 4096, buf));
        ck_assert_int_eq(access(entry, F_OK), -1);
        tf_range_cache_close(c);
    }
    close(fd);
    free(bytes), free(buf);
}
END_TEST

/* Threads reading ranges of more segments than stay open at once: each
 * read gets the segment's bytes while others check segments, close the
 * least recently read and read their own. */
#define READERS 4
#define READS 3000
#define SEGMENTS 24 /* more than the cache keeps open (16) */

typedef struct {
    tf_range_cache *c;
    const uint8_t *bytes;
    uint64_t segments, segment_len;
    unsigned seed;
    unsigned wrong;
} range_reader;

static void *read_ranges(void *arg)
{
    range_reader *r = arg;
    uint8_t buf[8192];
    for (int i = 0; i < READS; i++) {
        uint64_t seg = (uint64_t)rand_r(&r->seed) % r->segments;
        uint64_t len = 1 + (uint64_t)rand_r(&r->seed) % sizeof buf;
        uint64_t off = seg * r->segment_len + (uint64_t)rand_r(&r->seed) % (r->segment_len - len + 1);
        if (!tf_range_cache_get(r->c, off, len, buf) || memcmp(buf, r->bytes + off, len) != 0)
            r->wrong++;
    }
    return NULL;
}

/* Threads reading ranges of n segments of SEGMENT / n bytes each. */
static void read_segments_by_threads(uint64_t n)
{
    uint8_t *bytes;
    int fd = segment_file(&bytes);
    tf_range_cache *c = open_cache(1 << 30);
    char path[TEST_PATH_MAX];
    uint64_t seg_len = SEGMENT / n;
    for (uint64_t k = 0; k < n; k++) { /* each its own file, as a writer keeps them */
        test_write_file(test_path("one", path), bytes + k * seg_len, seg_len);
        int one = open(path, O_RDONLY);
        ck_assert_int_ge(one, 0);
        tf_range_cache_put_file(c, k * seg_len, seg_len, one);
        close(one);
    }
    tf_range_cache_close(c);
    c = open_cache(1 << 30); /* listed, none checked yet */
    range_reader r[READERS];
    pthread_t t[READERS];
    for (unsigned i = 0; i < READERS; i++) {
        r[i] = (range_reader){ c, bytes, n, seg_len, 1234 + i, 0 };
        ck_assert_int_eq(pthread_create(&t[i], NULL, read_ranges, &r[i]), 0);
    }
    for (unsigned i = 0; i < READERS; i++) {
        pthread_join(t[i], NULL);
        ck_assert_uint_eq(r[i].wrong, 0);
    }
    tf_range_cache_close(c);
    close(fd);
    free(bytes);
}

START_TEST(range_cache_segments_read_by_threads)
{
    read_segments_by_threads(SEGMENTS);
}
END_TEST

/* One segment of three blocks: the threads' reads check its blocks for
 * the first time side by side, some across two blocks. */
START_TEST(range_cache_segment_blocks_read_by_threads)
{
    read_segments_by_threads(1);
}
END_TEST

/* ---- whole reads and writes ---- */

START_TEST(pread_full_reads_all_and_stops_at_the_end)
{
    char path[TEST_PATH_MAX];
    test_write_file(test_path("f", path), "0123456789", 10);
    int fd = open(path, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    char buf[16] = { 0 };
    ck_assert_int_eq(tf_pread_full(fd, buf, 4, 3), 4);
    ck_assert_mem_eq(buf, "3456", 4);
    ck_assert_int_eq(tf_pread_full(fd, buf, sizeof buf, 7), 3); /* short: the end */
    ck_assert_mem_eq(buf, "789", 3);
    ck_assert_int_eq(tf_pread_full(fd, buf, sizeof buf, 10), 0);
    close(fd);
    errno = 0;
    ck_assert_int_eq(tf_pread_full(fd, buf, 1, 0), -1);
    ck_assert_int_eq(errno, EBADF);
}
END_TEST

START_TEST(pwrite_full_writes_at_the_offset)
{
    char path[TEST_PATH_MAX];
    test_write_file(test_path("f", path), "..........", 10);
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(tf_pwrite_full(fd, "abc", 3, 8), 0);
    ck_assert_int_eq(tf_write_full(fd, "XY", 2), 0); /* at the position: 0 */
    close(fd);
    size_t n;
    uint8_t *got = test_read_whole_file(path, &n);
    ck_assert_uint_eq(n, 11);
    ck_assert_mem_eq(got, "XY......abc", 11);
    free(got);
    ck_assert_int_eq(tf_write_full(fd, "z", 1), -1);
    ck_assert_int_eq(errno, EBADF);
}
END_TEST

/* A write into a pipe that a slow reader drains blocks again and again,
 * while a timer's signal (its handler installed without SA_RESTART)
 * interrupts it: it returns short counts and EINTR, and every byte must
 * still arrive once, in order. */
static void on_alarm(int sig) { (void)sig; }

typedef struct {
    int fd;
    uint8_t *got;
    size_t len;
} drain;

static void *drain_slowly(void *arg)
{
    drain *d = arg;
    size_t have = 0;
    while (have < d->len) {
        usleep(200);
        ssize_t n = read(d->fd, d->got + have, d->len - have < 4096 ? d->len - have : 4096);
        if (n <= 0 && !(n < 0 && errno == EINTR))
            break;
        have += n > 0 ? (size_t)n : 0;
    }
    d->len = have;
    return NULL;
}

START_TEST(write_full_survives_signals_and_short_counts)
{
    enum { LEN = 1 << 20 };
    uint8_t *data = malloc(LEN), *got = malloc(LEN);
    ck_assert(data && got);
    rng_state = 29;
    fill_random(data, LEN);
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    struct sigaction sa = { .sa_handler = on_alarm }, old;
    sigemptyset(&sa.sa_mask);
    ck_assert_int_eq(sigaction(SIGALRM, &sa, &old), 0);
    /* The reader thread blocks the signal: it goes to the writer. */
    sigset_t alarm_only, before;
    sigemptyset(&alarm_only);
    sigaddset(&alarm_only, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &alarm_only, &before);
    drain d = { .fd = p[0], .got = got, .len = LEN };
    pthread_t reader;
    ck_assert_int_eq(pthread_create(&reader, NULL, drain_slowly, &d), 0);
    pthread_sigmask(SIG_SETMASK, &before, NULL);
    struct itimerval every_ms = { { 0, 1000 }, { 0, 1000 } }, off = { 0 };
    setitimer(ITIMER_REAL, &every_ms, NULL);
    int rc = tf_write_full(p[1], data, LEN);
    setitimer(ITIMER_REAL, &off, NULL);
    close(p[1]);
    pthread_join(reader, NULL);
    sigaction(SIGALRM, &old, NULL);
    close(p[0]);
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(d.len, LEN);
    ck_assert(memcmp(data, got, LEN) == 0);
    free(data);
    free(got);
}
END_TEST

/* ---- a local file ---- */

static tf_io *open_file(const char *path, bool writable)
{
    tf_io *io;
    tf_error e;
    ck_assert_msg(tf_io_open(path, &(tf_open_opts){ .writable = writable }, &io, &e) == 0, "%s",
                  e.msg);
    return io;
}

START_TEST(file_reads_exactly_what_is_there)
{
    char path[TEST_PATH_MAX];
    test_write_file(test_path("f", path), "0123456789", 10);
    tf_io *io = open_file(path, false);
    ck_assert(tf_io_tears(io));
    ck_assert(!tf_io_is_remote(io));
    char buf[10];
    tf_error e;
    ck_assert_int_eq(tf_io_pread(io, 2, buf, 8, &e), 0);
    ck_assert_mem_eq(buf, "23456789", 8);
    ck_assert_int_eq(tf_io_pread(io, 10, buf, 0, &e), 0);
    ck_assert_int_eq(tf_io_pread(io, 5, buf, 6, &e), -1); /* one byte past the end */
    ck_assert_int_eq(e.errnum, EIO);
    ck_assert_ptr_nonnull(strstr(e.msg, "truncated at 10"));
    ck_assert_int_eq(tf_io_pread(io, UINT64_MAX - 1, buf, 1, &e), -1);
    tf_io_will_need(io, 0, 10); /* a hint: nothing to see */
    tf_io_will_need(io, UINT64_MAX, 10);
    ck_assert(!tf_io_forget(io, 0, 10)); /* no copies: reading again brings the same */
    struct stat st;
    ck_assert_int_eq(tf_io_stat(io, &st, &e), 0);
    ck_assert(S_ISREG(st.st_mode));
    ck_assert_int_eq(st.st_size, 10);
    uint64_t free_bytes = 0;
    ck_assert_int_eq(tf_io_free_space(io, &free_bytes, &e), 0);
    ck_assert_uint_gt(free_bytes, 0);
    tf_io_close(io);
    tf_io_close(NULL);
}
END_TEST

START_TEST(file_open_refuses_what_is_not_a_file)
{
    char path[TEST_PATH_MAX];
    tf_io *io;
    tf_error e;
    ck_assert_int_eq(tf_io_open(test_dir, NULL, &io, &e), -1);
    ck_assert_int_eq(e.errnum, EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "not a regular file"));
    ck_assert_int_eq(tf_io_open(test_path("missing", path), NULL, &io, &e), -1);
    ck_assert_int_eq(e.errnum, ENOENT);
    ck_assert_ptr_nonnull(strstr(e.msg, path));
}
END_TEST

START_TEST(file_appends_syncs_and_truncates)
{
    char path[TEST_PATH_MAX];
    tf_error e;
    ck_assert_int_eq(tf_io_create(test_path("f", path), NULL, "head", 4, &e), 0);
    ck_assert_int_eq(tf_io_create(path, NULL, "again", 5, &e), -1); /* exists: left alone */
    ck_assert_int_eq(e.errnum, EEXIST);
    tf_io *io = open_file(path, true);
    ck_assert_int_eq(tf_io_append(io, "+tail", 5, 4, &e), 0);
    ck_assert_int_eq(tf_io_sync(io, &e), 0);
    char buf[9];
    ck_assert_int_eq(tf_io_pread(io, 0, buf, 9, &e), 0);
    ck_assert_mem_eq(buf, "head+tail", 9);
    uint64_t size;
    bool changed;
    ck_assert_int_eq(tf_io_poll(io, &size, &changed, &e), 0);
    ck_assert_uint_eq(size, 9);
    ck_assert_int_eq(tf_io_truncate(io, 4, &e), 0);
    ck_assert_int_eq(tf_io_poll(io, &size, &changed, &e), 0);
    ck_assert_uint_eq(size, 4);
    ck_assert_int_eq(tf_io_pread(io, 0, buf, 5, &e), -1);
    tf_io_close(io);
    ck_assert_uint_eq(test_file_size(path), 4);
}
END_TEST

START_TEST(file_lock_has_one_holder)
{
    char path[TEST_PATH_MAX];
    test_write_file(test_path("f", path), "x", 1);
    tf_io *first = open_file(path, true), *second = open_file(path, true);
    tf_error e;
    ck_assert_int_eq(tf_io_lock(first, &e), 0);
    ck_assert_int_eq(tf_io_lock(second, &e), -1);
    ck_assert_int_eq(e.errnum, EBUSY);
    ck_assert_ptr_nonnull(strstr(e.msg, "another writer"));
    tf_io *reader = open_file(path, false); /* readers need no lock */
    char c;
    ck_assert_int_eq(tf_io_pread(reader, 0, &c, 1, &e), 0);
    tf_io_close(reader);
    tf_io_close(first); /* the lock goes with it */
    ck_assert_msg(tf_io_lock(second, &e) == 0, "%s", e.msg);
    tf_io_close(second);
}
END_TEST

/* The poll tells the size, and a change of identity (the modification
 * time) once: bytes rewritten in place at the same size. */
START_TEST(file_poll_tells_size_and_identity)
{
    char path[TEST_PATH_MAX];
    test_write_file(test_path("f", path), "abc", 3);
    tf_io *io = open_file(path, false);
    uint64_t size;
    bool changed;
    tf_error e;
    ck_assert_int_eq(tf_io_poll(io, &size, &changed, &e), 0);
    ck_assert_uint_eq(size, 3);
    ck_assert(!changed);
    test_append_file(path, "de", 2);
    ck_assert_int_eq(tf_io_poll(io, &size, &changed, &e), 0);
    ck_assert_uint_eq(size, 5);
    struct timespec long_ago[2] = { { 1000000000, 0 }, { 1000000000, 0 } };
    ck_assert_int_eq(utimensat(AT_FDCWD, path, long_ago, 0), 0);
    ck_assert_int_eq(tf_io_poll(io, &size, &changed, &e), 0);
    ck_assert_uint_eq(size, 5);
    ck_assert(changed);
    ck_assert_int_eq(tf_io_poll(io, &size, &changed, &e), 0);
    ck_assert(!changed);
    tf_io_close(io);
}
END_TEST

/* ---- the interface, for a storage with only what is required ---- */

typedef struct {
    tf_io io;
    const char *bytes;
} bare_storage;

static int bare_pread(tf_io *io, uint64_t off, void *buf, size_t len, tf_error *e)
{
    (void)e;
    memcpy(buf, ((bare_storage *)io)->bytes + off, len);
    return 0;
}

static int bare_poll(tf_io *io, uint64_t *size, bool *changed, tf_error *e)
{
    (void)e;
    *size = strlen(((bare_storage *)io)->bytes);
    *changed = false;
    return 0;
}

static int bare_stat(tf_io *io, struct stat *st, tf_error *e)
{
    (void)io, (void)e;
    *st = (struct stat){ 0 };
    return 0;
}

static void bare_close(tf_io *io) { (void)io; }

START_TEST(optional_operations_default_to_nothing)
{
    static const tf_io_ops ops = { .pread = bare_pread, .poll = bare_poll, .stat = bare_stat,
                                   .close = bare_close };
    bare_storage s = { { &ops }, "bytes" };
    tf_io *io = &s.io;
    tf_error e;
    char buf[5];
    ck_assert_int_eq(tf_io_pread(io, 0, buf, 5, &e), 0);
    tf_io_will_need(io, 0, 5);
    tf_io_anchor(io, 5, (const uint8_t *)"s", 1);
    ck_assert(!tf_io_forget(io, 0, 5));
    uint64_t n;
    ck_assert_int_eq(tf_io_free_space(io, &n, &e), -1);
    ck_assert_int_eq(e.errnum, ENOTSUP);
    ck_assert_int_eq(tf_io_lock(io, &e), -1);
    ck_assert_int_eq(e.errnum, ENOTSUP);
    ck_assert_int_eq(tf_io_append(io, "x", 1, 5, &e), -1);
    ck_assert_int_eq(tf_io_sync(io, &e), -1);
    ck_assert_int_eq(tf_io_truncate(io, 0, &e), -1);
    ck_assert_int_eq(e.errnum, ENOTSUP);
    tf_io_close(io);
}
END_TEST

/* ---- remote archives, without a server ---- */

START_TEST(urls_are_told_from_paths)
{
    ck_assert(tf_io_is_url("http://host/a.trajfs"));
    ck_assert(tf_io_is_url("https://host/a.trajfs?X-Amz-Signature=s"));
    ck_assert(tf_io_is_url("s3://bucket/a.trajfs"));
    ck_assert(!tf_io_is_url("a.trajfs"));
    ck_assert(!tf_io_is_url("/srv/http://a"));
    ck_assert(!tf_io_is_url("ftp://host/a"));
}
END_TEST

START_TEST(display_name_hides_a_query)
{
    char *name = tf_io_display_name("https://host/a.trajfs?X-Amz-Signature=secret#frag");
    ck_assert_str_eq(name, "https://host/a.trajfs");
    free(name);
    char path[TEST_PATH_MAX];
    test_write_file(test_path("f", path), "x", 1);
    char *abs = tf_io_display_name(path), *real = realpath(path, NULL);
    ck_assert_str_eq(abs, real);
    free(abs);
    free(real);
    ck_assert_ptr_null(tf_io_display_name(test_path("missing", path)));
}
END_TEST

START_TEST(remote_archive_is_read_only)
{
    tf_io *io = NULL;
    tf_error e;
    ck_assert_int_eq(tf_io_open("http://127.0.0.1:1/a.trajfs",
                                &(tf_open_opts){ .writable = true }, &io, &e), -1);
    ck_assert_int_eq(e.errnum, EROFS);
    ck_assert_ptr_null(io);
}
END_TEST

/* Nothing listens on port 1: the open fails (or, built without libcurl,
 * is refused) with a message, leaving nothing open. */
START_TEST(remote_open_without_a_server_fails)
{
    tf_remote_opts o;
    tf_remote_opts_default(&o);
    tf_error e;
    ck_assert_int_eq(tf_remote_opts_parse(&o, "retries=0,connect_timeout=2,timeout=2", &e), 0);
    tf_io *io = NULL;
    ck_assert_int_eq(tf_io_open("http://127.0.0.1:1/a.trajfs", &(tf_open_opts){ .remote = &o },
                                &io, &e), -1);
    ck_assert_ptr_null(io);
    ck_assert_ptr_nonnull(strstr(e.msg, "127.0.0.1"));
    tf_remote_opts_free(&o);
}
END_TEST

START_TEST(remote_settings_are_checked)
{
    tf_remote_opts o;
    tf_remote_opts_default(&o);
    tf_error e;
    ck_assert_int_eq(tf_remote_opts_parse(&o, "cache_dir=/tmp/c,parallel=3,timeout=1.5", &e), 0);
    ck_assert_str_eq(o.cache_dir, "/tmp/c");
    ck_assert_uint_eq(o.parallel, 3);
    ck_assert_uint_eq(o.timeout_ms, 1500);
    ck_assert_int_eq(tf_remote_opts_set(&o, "parallel", "0", &e), -1);
    ck_assert_int_eq(e.errnum, EINVAL);
    ck_assert_int_eq(tf_remote_opts_set(&o, "rw", NULL, &e), -1);
    ck_assert_int_eq(e.errnum, ENOENT);
    ck_assert_uint_eq(o.parallel, 3);
    tf_remote_opts_free(&o);
}
END_TEST

static Suite *io_suite(void)
{
    Suite *s = suite_create("io");
    TCase *full = tcase_create("full");
    tcase_add_checked_fixture(full, test_dir_make, test_dir_remove);
    tcase_add_test(full, pread_full_reads_all_and_stops_at_the_end);
    tcase_add_test(full, pwrite_full_writes_at_the_offset);
    tcase_add_test(full, write_full_survives_signals_and_short_counts);
    suite_add_tcase(s, full);

    TCase *file = tcase_create("file");
    tcase_add_checked_fixture(file, test_dir_make, test_dir_remove);
    tcase_add_test(file, file_reads_exactly_what_is_there);
    tcase_add_test(file, file_open_refuses_what_is_not_a_file);
    tcase_add_test(file, file_appends_syncs_and_truncates);
    tcase_add_test(file, file_lock_has_one_holder);
    tcase_add_test(file, file_poll_tells_size_and_identity);
    tcase_add_test(file, optional_operations_default_to_nothing);
    suite_add_tcase(s, file);

    TCase *remote = tcase_create("remote");
    tcase_add_checked_fixture(remote, test_dir_make, test_dir_remove);
    tcase_add_test(remote, range_cache_serves_exact_ranges);
    tcase_add_test(remote, range_cache_segment_serves_ranges_inside);
    tcase_add_test(remote, range_cache_damaged_segment_is_never_served);
    tcase_add_test(remote, range_cache_segments_read_by_threads);
    tcase_add_test(remote, range_cache_segment_blocks_read_by_threads);
    tcase_add_test(remote, urls_are_told_from_paths);
    tcase_add_test(remote, display_name_hides_a_query);
    tcase_add_test(remote, remote_archive_is_read_only);
    tcase_add_test(remote, remote_open_without_a_server_fails);
    tcase_add_test(remote, remote_settings_are_checked);
    suite_add_tcase(s, remote);
    return s;
}

int main(void)
{
    return run_suite(io_suite());
}
