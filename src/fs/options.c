#include "fs/options.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/size_arg.h"

#define CACHE_MIN ((size_t)64 << 20)
#define CACHE_MAX_DEFAULT ((size_t)4 << 30)
/* With 4 MiB of read-ahead the kernel asks for the next chunks while the
 * current ones are copied out, and they decode side by side: a cold
 * sequential read of a 1.7 GB trajectory took about half the time it
 * takes with the kernel's default 128 KiB (more gained nothing). */
#define READAHEAD_DEFAULT ((size_t)4 << 20)
#define READAHEAD_MAX ((size_t)1 << 30)
/* Chunks of a file read in order are decoded this far ahead of the
 * reader (store/prefetch.h), on every core. With the kernel's default
 * read-ahead (128 KiB: a mount by a user who may not raise it) one
 * request is in flight at a time, and a cold read of one checkpoint of
 * the benchmark trajectory took 0.107 s with it against 0.138 s without
 * (bf16 weights; optimizer state 0.261 against 0.335 s); with the 4 MiB
 * window the kernel's requests alone kept the 2 CPUs busy. A quarter of
 * the cache at most, so that what is decoded ahead is still there when
 * it is read. */
#define PREFETCH_DEFAULT ((size_t)32 << 20)
/* A look at a followed archive is one fstat when nothing was appended. */
#define FOLLOW_DEFAULT 1.0
#define FOLLOW_MAX 86400.0

enum { KEY_RW };

/* The writer's settings are not listed: every option not named here is
 * offered to tf_write_opts_set first (take_writer_setting). */
static const struct fuse_opt trajfs_opts[] = {
    { "cache_size=%s", offsetof(fs_options, cache_size_arg), 0 },
    { "catalog_cache=%s", offsetof(fs_options, catalog_cache_arg), 0 },
    { "readahead=%s", offsetof(fs_options, readahead_arg), 0 },
    { "prefetch=%s", offsetof(fs_options, prefetch_arg), 0 },
    { "direct_io", offsetof(fs_options, direct_io), 1 },
    { "spool_dir=%s", offsetof(fs_options, spool_dir), 0 },
    { "follow=%s", offsetof(fs_options, follow_arg), 0 },
    FUSE_OPT_KEY("rw", KEY_RW),
    FUSE_OPT_END,
};

/* Takes -o NAME[=VALUE] when NAME is a remote archive's or a writer
 * setting: 0 when taken, 1 when it is neither (libfuse's, then), -1
 * after a message. threads=N is the number of request threads too. */
static int take_writer_setting(fs_options *o, const char *arg)
{
    char name[64];
    size_t len = strcspn(arg, "=");
    if (len >= sizeof name)
        return 1;
    memcpy(name, arg, len);
    name[len] = '\0';
    tf_error e;
    const char *value = arg[len] ? arg + len + 1 : NULL;
    if (tf_remote_opts_set(&o->remote, name, value, &e) == 0)
        return 0;
    if (e.errnum != ENOENT) {
        fprintf(stderr, "trajfs: -o %s: %s\n", name, e.msg);
        return -1;
    }
    if (tf_write_opts_set(&o->write, name, value, &e) < 0) {
        if (e.errnum == ENOENT)
            return 1;
        fprintf(stderr, "trajfs: -o %s: %s\n", name, e.msg);
        return -1;
    }
    if (!strcmp(name, "threads"))
        o->threads = o->write.threads;
    return 0;
}

/* Takes the first non-option (the archive) and keeps the second (the
 * mount point, for fuse_parse_cmdline). */
static int take_arg(void *data, const char *arg, int key, struct fuse_args *outargs)
{
    (void)outargs;
    fs_options *o = data;
    if (key == KEY_RW) {
        o->rw = true;
        return 0;
    }
    if (key == FUSE_OPT_KEY_OPT)
        return take_writer_setting(o, arg);
    if (key != FUSE_OPT_KEY_NONOPT || o->archive)
        return 1;
    o->archive = strdup(arg);
    if (!o->archive) {
        fprintf(stderr, "trajfs: out of memory\n");
        return -1;
    }
    return 0;
}

size_t fs_default_cache_size(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0)
        return CACHE_MIN;
    uint64_t eighth = (uint64_t)pages * (uint64_t)page / 8;
    if (eighth > CACHE_MAX_DEFAULT)
        return CACHE_MAX_DEFAULT;
    return eighth < CACHE_MIN ? CACHE_MIN : (size_t)eighth;
}

/* Parses -o name=SIZE into *out when given (arg not NULL). */
static int parse_size_option(const char *name, const char *arg, size_t max, size_t *out)
{
    if (!arg)
        return 0;
    if (tf_parse_size(arg, out) < 0 || *out > max) {
        fprintf(stderr, "trajfs: %s=%s: expected bytes up to %zuM, optionally with K, M, G or T\n",
                name, arg, max >> 20);
        return -1;
    }
    return 0;
}

/* The daemon leaves its working directory: a relative cache_dir is
 * taken from where trajfs was started. */
static int absolute_cache_dir(tf_remote_opts *r)
{
    if (r->cache_dir[0] == '/')
        return 0;
    char *cwd = getcwd(NULL, 0), *abs = NULL;
    if (!cwd || asprintf(&abs, "%s/%s", cwd, r->cache_dir) < 0) {
        free(cwd);
        fprintf(stderr, "trajfs: cache_dir=%s: cannot make it absolute\n", r->cache_dir);
        return -1;
    }
    free(cwd);
    free(r->cache_dir);
    r->cache_dir = abs;
    return 0;
}

/* -o follow=SECONDS: off with rw, where the mount is the archive's only
 * writer (it holds the writer's lock: nothing else can append). Off by
 * default for a URL: each look is a request (billed, on object storage),
 * and an archive published there is mostly complete. */
static int parse_follow(fs_options *o)
{
    o->follow = o->rw || (o->archive && tf_io_is_url(o->archive)) ? 0 : FOLLOW_DEFAULT;
    if (!o->follow_arg)
        return 0;
    char *end;
    double v = strtod(o->follow_arg, &end);
    if (end == o->follow_arg || *end || !(v >= 0 && v <= FOLLOW_MAX)) {
        fprintf(stderr, "trajfs: follow=%s: expected seconds from 0 (off) to %.0f\n",
                o->follow_arg, FOLLOW_MAX);
        return -1;
    }
    if (o->rw && v > 0) {
        fprintf(stderr, "trajfs: follow=%s: a rw mount is its archive's only writer: "
                "there are no commits of others to follow\n", o->follow_arg);
        return -1;
    }
    o->follow = v;
    return 0;
}

int fs_options_parse(struct fuse_args *args, fs_options *o)
{
    *o = (fs_options){ 0 };
    tf_write_opts_default(&o->write);
    tf_remote_opts_default(&o->remote);
    if (fuse_opt_parse(args, o, trajfs_opts, take_arg) < 0)
        return -1;
    if (o->remote.cache_dir && absolute_cache_dir(&o->remote) < 0)
        return -1;
    o->cache_size = fs_default_cache_size();
    o->readahead = READAHEAD_DEFAULT;
    o->catalog_cache = TF_CATALOG_CACHE_DEFAULT;
    if (parse_size_option("cache_size", o->cache_size_arg, SIZE_MAX, &o->cache_size) < 0 ||
        parse_size_option("catalog_cache", o->catalog_cache_arg, SIZE_MAX, &o->catalog_cache) < 0 ||
        parse_size_option("readahead", o->readahead_arg, READAHEAD_MAX, &o->readahead) < 0)
        return -1;
    o->prefetch = PREFETCH_DEFAULT < o->cache_size / 4 ? PREFETCH_DEFAULT : o->cache_size / 4;
    if (parse_size_option("prefetch", o->prefetch_arg, SIZE_MAX, &o->prefetch) < 0)
        return -1;
    return parse_follow(o);
}

void fs_options_free(fs_options *o)
{
    free(o->archive);
    free(o->cache_size_arg);
    free(o->catalog_cache_arg);
    free(o->readahead_arg);
    free(o->prefetch_arg);
    free(o->spool_dir);
    tf_remote_opts_free(&o->remote);
    free(o->follow_arg);
}

void fs_options_help(void)
{
    printf("trajfs options:\n"
           "    -o cache_size=SIZE     bytes of reconstructed chunks kept in memory, with\n"
           "                           a suffix K, M, G or T (default: 1/8 of RAM, between\n"
           "                           64M and 4G; here %zuM)\n"
           "    -o catalog_cache=SIZE  bytes of the catalog's pages kept in memory, beside\n"
           "                           cache_size (archives of format 2; default 16M)\n"
           "    -o readahead=SIZE      the kernel's read-ahead window for the mount\n"
           "                           (default 4M; 0 keeps the kernel's 128K); needs\n"
           "                           root (it writes /sys/class/bdi), else the\n"
           "                           kernel's 128K stays, with a warning\n"
           "    -o prefetch=SIZE       how far ahead of a file read in order its chunks are\n"
           "                           decoded, on every core (default 32M, at most a\n"
           "                           quarter of cache_size; 0: none)\n"
           "    -o threads=N           at most N threads serve requests (default 10)\n"
           "                           and, with rw, N threads encode commits (default:\n"
           "                           one per online CPU), 1 to 1024\n"
           "    -o direct_io           every read reaches trajfs: no kernel page cache,\n"
           "                           no mmap (for tests and memory-tight hosts)\n"
           "    -o ro                  read-only (the default)\n"
           "    -o rw                  writable: files written are encoded and committed\n"
           "                           when closed (creates a missing ARCHIVE)\n"
           "    -o spool_dir=DIR       with rw: where written bytes wait for their commit\n"
           "                           (default: the archive's directory; for a URL\n"
           "                           TMPDIR, else /var/tmp)\n"
           "    -o follow=SECONDS      read-only: look for commits others append to the\n"
           "                           archive (trajpack add) this often, and show them\n"
           "                           (default 1, for a URL 0; 0: never; with rw off)\n"
           "\nfor an ARCHIVE that is a URL (http://, https://, s3://BUCKET/KEY; read-only\n"
           "but s3://, which rw writes):\n"
           "    -o cache_dir=DIR       keep fetched ranges on disk there, across mounts and\n"
           "                           shared by processes, and with rw the commits written\n"
           "                           (default: none)\n"
           "    -o cache_max=SIZE      bound of cache_dir, all archives together (default 4G)\n"
           "    -o timeout=SECONDS     a transfer that stalls this long fails (default 30)\n"
           "    -o connect_timeout=SECONDS   (default 10)\n"
           "    -o retries=N           retries of a failed fetch, with backoff (default 4)\n"
           "    -o parallel=N          transfers at once (default 16)\n"
           "    -o s3_endpoint=URL     S3 endpoint (default: AWS_ENDPOINT_URL, else AWS)\n"
           "    -o s3_region=NAME      (default: AWS_REGION, AWS_DEFAULT_REGION, us-east-1)\n"
           "    -o s3_unconditional=1  with rw: write to a store that ignores If-None-Match\n"
           "                           (one writer at a time is then yours to ensure)\n"
           "    -o allow_other         (libfuse's, below) other users may use the mount;\n"
           "                           turns on default_permissions: the kernel checks\n"
           "                           each file's mode (needs user_allow_other in\n"
           "                           /etc/fuse.conf unless root)\n"
           "\nwith rw, how commits are encoded (as by trajpack create and add):\n",
           fs_default_cache_size() >> 20);
    tf_write_opts_help(stdout, TF_WRITE_OPTS_MOUNT_OPTIONS);
}
