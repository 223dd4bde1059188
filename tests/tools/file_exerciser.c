/* file_exerciser: random reads, writes, truncations, mapped reads and
 * writes, O_APPEND writes and closes with reopens of one file, each
 * checked against a model of the file in memory, in the manner of fsx.
 * After each operation the descriptor's size (fstat, lseek) must be the
 * model's; at the end the file is closed (committed, on a trajfs mount),
 * reopened and read whole, and the model is written to MODEL so that the
 * caller can compare it with the file after a remount.
 *
 *   file_exerciser [-n OPS] [-s SEED] [-l MAXLEN] [-M] FILE MODEL
 *
 * -M: no mapped reads or writes. Deterministic for a seed, which it
 * prints; on a mismatch it prints the last operations and exits 1. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HISTORY 32

typedef enum { OP_READ, OP_WRITE, OP_TRUNCATE, OP_MAPREAD, OP_MAPWRITE, OP_APPEND, OP_REOPEN,
               OP_COUNT } op_kind;
static const char *const op_names[OP_COUNT] = { "read", "write", "truncate", "mapread",
                                                "mapwrite", "append", "reopen" };

typedef struct {
    op_kind kind;
    uint64_t off, len;
} op;

static const char *path;
static int fd = -1;
static uint8_t *model, *scratch;
static uint64_t size, maxlen = 256 << 10, rng;
static size_t pagesize;
static op history[HISTORY];
static uint64_t nops;

/* SplitMix64. */
static uint64_t next(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t below(uint64_t n)
{
    return n ? next() % n : 0;
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "file_exerciser: operation %" PRIu64 ": ", nops);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (%s)\nlast operations, oldest first:\n", errno ? strerror(errno) : "");
    va_end(ap);
    uint64_t first = nops >= HISTORY ? nops - HISTORY + 1 : 1;
    for (uint64_t i = first; i <= nops; i++) {
        const op *o = &history[i % HISTORY];
        fprintf(stderr, "  %" PRIu64 " %s 0x%" PRIx64 " len 0x%" PRIx64 "\n", i,
                op_names[o->kind], o->off, o->len);
    }
    exit(1);
}

static void open_file(int extra)
{
    errno = 0;
    fd = open(path, O_RDWR | extra);
    if (fd < 0)
        fail("open");
}

static void close_file(void)
{
    errno = 0;
    if (close(fd) < 0)
        fail("close");
    fd = -1;
}

static void fill(uint8_t *p, uint64_t len)
{
    for (uint64_t i = 0; i < len; i++)
        p[i] = (uint8_t)(nops + i * 7 + (i >> 8));
}

static void compare(const uint8_t *got, uint64_t off, uint64_t len, const char *how)
{
    for (uint64_t i = 0; i < len; i++)
        if (got[i] != model[off + i]) {
            errno = 0;
            fail("%s: byte 0x%" PRIx64 " is 0x%02x, not 0x%02x", how, off + i, got[i],
                 model[off + i]);
        }
}

static void check_size(void)
{
    struct stat st;
    errno = 0;
    if (fstat(fd, &st) < 0)
        fail("fstat");
    if ((uint64_t)st.st_size != size)
        fail("fstat: size 0x%" PRIx64 ", not 0x%" PRIx64, (uint64_t)st.st_size, size);
    off_t end = lseek(fd, 0, SEEK_END);
    if (end < 0 || (uint64_t)end != size)
        fail("lseek(SEEK_END): 0x%" PRIx64 ", not 0x%" PRIx64, (uint64_t)end, size);
}

static void set_size(uint64_t n)
{
    if (n > size)
        memset(model + size, 0, n - size);
    size = n;
}

static void do_read(const op *o)
{
    errno = 0;
    ssize_t got = pread(fd, scratch, o->len, (off_t)o->off);
    uint64_t want = o->off >= size ? 0 : (size - o->off < o->len ? size - o->off : o->len);
    if (got < 0 || (uint64_t)got != want)
        fail("pread: %zd bytes, not %" PRIu64, got, want);
    compare(scratch, o->off, want, "pread");
}

static void do_write(const op *o)
{
    fill(scratch, o->len);
    errno = 0;
    if (pwrite(fd, scratch, o->len, (off_t)o->off) != (ssize_t)o->len)
        fail("pwrite");
    if (o->off + o->len > size)
        set_size(o->off + o->len);
    memcpy(model + o->off, scratch, o->len);
}

static void do_truncate(const op *o)
{
    errno = 0;
    if (ftruncate(fd, (off_t)o->off) < 0)
        fail("ftruncate");
    set_size(o->off);
}

/* A mapping of [off, off + len) (off rounded down to a page). */
static uint8_t *map(uint64_t off, uint64_t len, int prot, uint64_t *shift)
{
    *shift = off % pagesize;
    errno = 0;
    void *p = mmap(NULL, len + *shift, prot, MAP_SHARED, fd, (off_t)(off - *shift));
    if (p == MAP_FAILED)
        fail("mmap");
    return p;
}

static void do_mapread(const op *o)
{
    if (!size)
        return;
    uint64_t off = o->off % size, len = o->len < size - off ? o->len : size - off, shift;
    uint8_t *p = map(off, len, PROT_READ, &shift);
    compare(p + shift, off, len, "mapped read");
    munmap(p, len + shift);
}

static void do_mapwrite(const op *o)
{
    if (o->off + o->len > size) { /* a mapping cannot grow a file */
        errno = 0;
        if (ftruncate(fd, (off_t)(o->off + o->len)) < 0)
            fail("ftruncate before a mapped write");
        set_size(o->off + o->len);
    }
    uint64_t shift;
    uint8_t *p = map(o->off, o->len, PROT_READ | PROT_WRITE, &shift);
    fill(model + o->off, o->len);
    memcpy(p + shift, model + o->off, o->len);
    errno = 0;
    if (msync(p, o->len + shift, MS_SYNC) < 0)
        fail("msync");
    munmap(p, o->len + shift);
}

/* Reopened with O_APPEND: the write lands at the end, wherever it is
 * asked to go. */
static void do_append(const op *o)
{
    close_file();
    open_file(O_APPEND);
    uint64_t len = size + o->len > maxlen ? maxlen - size : o->len;
    fill(scratch, len);
    errno = 0;
    if (pwrite(fd, scratch, len, 0) != (ssize_t)len)
        fail("write with O_APPEND");
    memcpy(model + size, scratch, len);
    size += len;
    check_size();
    close_file();
    open_file(0);
}

static void do_reopen(void)
{
    close_file();
    open_file(0);
}

static op pick(bool mapped)
{
    for (;;) {
        op o = { .kind = (op_kind)below(OP_COUNT) };
        if (!mapped && (o.kind == OP_MAPREAD || o.kind == OP_MAPWRITE))
            continue;
        uint64_t room = maxlen / 4;
        o.off = below(o.kind == OP_READ ? size + 1024 : maxlen);
        o.len = 1 + below(room);
        if (o.kind != OP_READ && o.off + o.len > maxlen) /* reads may pass the end */
            o.len = maxlen - o.off;
        if (!o.len && o.kind != OP_TRUNCATE)
            continue;
        return o;
    }
}

static void run(const op *o)
{
    switch (o->kind) {
    case OP_READ: do_read(o); break;
    case OP_WRITE: do_write(o); break;
    case OP_TRUNCATE: do_truncate(o); break;
    case OP_MAPREAD: do_mapread(o); break;
    case OP_MAPWRITE: do_mapwrite(o); break;
    case OP_APPEND: do_append(o); break;
    case OP_REOPEN: do_reopen(); break;
    case OP_COUNT: break;
    }
    check_size();
}

/* The file as a fresh open reads it: the model. */
static void check_whole(void)
{
    open_file(0);
    check_size();
    op o = { OP_READ, 0, size };
    do_read(&o);
    close_file();
}

static void save_model(const char *to)
{
    FILE *f = fopen(to, "wb");
    errno = 0;
    if (!f || fwrite(model, 1, size, f) != size || fclose(f) != 0)
        fail("writing the model to %s", to);
}

int main(int argc, char **argv)
{
    uint64_t count = 10000;
    bool mapped = true, seeded = false;
    int c;
    while ((c = getopt(argc, argv, "n:s:l:M")) != -1) {
        switch (c) {
        case 'n': count = strtoull(optarg, NULL, 10); break;
        case 's': rng = strtoull(optarg, NULL, 10); seeded = true; break;
        case 'l': maxlen = strtoull(optarg, NULL, 10); break;
        case 'M': mapped = false; break;
        default: goto usage;
        }
    }
    if (argc - optind != 2 || maxlen < 2)
        goto usage;
    if (!seeded)
        rng = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    printf("file_exerciser: seed %" PRIu64 ", %" PRIu64 " operations%s\n", rng, count,
           mapped ? "" : ", no mappings");
    fflush(stdout);
    path = argv[optind];
    pagesize = (size_t)sysconf(_SC_PAGESIZE);
    model = calloc(1, maxlen);
    scratch = malloc(maxlen + 1024);
    if (!model || !scratch)
        return 2;
    open_file(O_CREAT | O_TRUNC);
    for (nops = 1; nops <= count; nops++) {
        history[nops % HISTORY] = pick(mapped);
        run(&history[nops % HISTORY]);
    }
    close_file();
    check_whole();
    save_model(argv[optind + 1]);
    printf("file_exerciser: %" PRIu64 " operations, final size 0x%" PRIx64 ": all as modelled\n",
           count, size);
    return 0;
usage:
    fprintf(stderr, "usage: file_exerciser [-n OPS] [-s SEED] [-l MAXLEN] [-M] FILE MODEL\n");
    return 2;
}
