/* A catalog in pages (format version 2) holding more entries than a leaf
 * and a node hold: commits that add, replace and remove entries read
 * back in order, a commit writes again only what it changes, not every
 * leaf, and the leaves stay in few runs of the file however many
 * commits wrote them. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#include "format/paged.h"
#include "store/archive.h"

#define NDIRS 40000

static char path[TEST_PATH_MAX];

static void setup(void)
{
    test_dir_make();
    test_path("a.traj", path);
    ck_assert_int_eq(tf_container_create(path, NULL, 12, TF_FORMAT_PAGES, NULL), 0);
}

/* Directory i's path: long (about 215 bytes), and sharing little with
 * its neighbours', so that the headers fill many leaves and more than
 * one node. */
static char *dir_path(unsigned i)
{
    char p[256];
    int n = snprintf(p, sizeof p, "d%u-", i);
    for (uint64_t h = (i + 1) * 0x9e3779b97f4a7c15u, k = 0; k < 13; k++, h = h * 31 + k)
        n += snprintf(p + n, sizeof p - (size_t)n, "%016llx", (unsigned long long)h);
    char *s = strdup(p);
    ck_assert_ptr_nonnull(s);
    return s;
}

/* Commits, to the writer ar, directories [from, to) (mtime `version`)
 * and tombstones for [gone_from, gone_to), after `pad` bytes that stand
 * for the commit's tensor data; returns the bytes the commit appended. */
static uint64_t commit_to(tf_archive *ar, unsigned from, unsigned to, unsigned gone_from,
                          unsigned gone_to, int64_t version, size_t pad)
{
    tf_error e = { 0 };
    size_t n = (to - from) + (gone_to - gone_from);
    tf_segment seg = { .first_blob = tf_archive_nblobs(ar), .nentries = n,
                       .entries = calloc(n ? n : 1, sizeof(tf_entry)) };
    ck_assert_ptr_nonnull(seg.entries);
    size_t k = 0;
    for (unsigned i = from; i < to; i++)
        seg.entries[k++] = (tf_entry){ .kind = TF_ENTRY_DIR, .ino = 2 + i, .path = dir_path(i),
                                       .mode = 0755, .mtime_sec = version };
    for (unsigned i = gone_from; i < gone_to; i++)
        seg.entries[k++] = (tf_entry){ .kind = TF_ENTRY_TOMBSTONE, .ino = 2 + i,
                                       .path = dir_path(i) };
    uint64_t before = tf_archive_file_size(ar);
    if (pad) {
        void *zeros = calloc(1, pad);
        uint64_t at;
        ck_assert_ptr_nonnull(zeros);
        ck_assert_msg(tf_container_append(tf_archive_container(ar), zeros, pad, &at, &e) == 0,
                      "%s", e.msg);
        free(zeros);
    }
    ck_assert_msg(tf_archive_prepare(ar, &seg, &e) == 0, "%s", e.msg);
    ck_assert_msg(tf_archive_check_segment(ar, &seg, &e) == 0, "%s", e.msg);
    ck_assert_msg(tf_archive_write(ar, &seg, TF_COMMIT_DURABLE, NULL, &e) == 0, "%s", e.msg);
    ck_assert_msg(tf_archive_apply(ar, &seg, &e) == 0, "%s", e.msg);
    return tf_archive_file_size(ar) - before;
}

static tf_archive *open_archive(bool writable)
{
    tf_archive *ar;
    tf_error e = { 0 };
    tf_open_opts o = { .writable = writable, .lazy_bodies = !writable };
    ck_assert_msg(tf_archive_open(path, &o, &ar, &e) == 0, "%s", e.msg);
    return ar;
}

static uint64_t commit_after(unsigned from, unsigned to, unsigned gone_from, unsigned gone_to,
                             int64_t version, size_t pad)
{
    tf_archive *ar = open_archive(true);
    uint64_t bytes = commit_to(ar, from, to, gone_from, gone_to, version, pad);
    tf_archive_close(ar);
    return bytes;
}

static uint64_t commit(unsigned from, unsigned to, unsigned gone_from, unsigned gone_to,
                       int64_t version)
{
    return commit_after(from, to, gone_from, gone_to, version, 0);
}

/* The archive holds exactly the directories i with live[i], read with
 * bodies pending or whole. */
static void expect_dirs(const bool *live, bool lazy)
{
    tf_archive *ar;
    tf_error e = { 0 };
    ck_assert_msg(tf_archive_open(path, &(tf_open_opts){ .lazy_bodies = lazy }, &ar, &e) == 0,
                  "%s", e.msg);
    size_t want = 0;
    for (unsigned i = 0; i < NDIRS + 100; i++) {
        if (!live[i])
            continue;
        want++;
        char *p = dir_path(i);
        const tf_entry *ent = tf_archive_lookup(ar, p);
        ck_assert_msg(ent != NULL, "%s missing", p);
        ck_assert_uint_eq(ent->ino, 2 + i);
        free(p);
    }
    ck_assert_uint_eq(tf_archive_nentries(ar), want);
    tf_archive_close(ar);
}

/* The height of the entries tree of the archive's last commit. */
static unsigned entries_height(void)
{
    tf_container c;
    tf_error e = { 0 };
    ck_assert_int_eq(tf_container_open(&c, path, NULL, &e), 0);
    tf_paged *p;
    tf_entry *ents;
    size_t n;
    ck_assert_msg(tf_paged_open(&c, 1 << 20, true, &p, &ents, &n, &e) == 0, "%s", e.msg);
    unsigned h = tf_paged_root(p)->entries_height;
    for (size_t i = 0; i < n; i++)
        tf_entry_free(&ents[i]);
    free(ents);
    tf_paged_free(p);
    tf_container_close(&c);
    return h;
}

/* The catalog pages of the last commit, as (offset, length) pairs. */
typedef struct {
    uint64_t at[2 * 4096];
    size_t n;
} page_list;

static int note_page(void *arg, uint64_t off, uint64_t len, tf_error *e)
{
    page_list *l = arg;
    (void)e;
    ck_assert_uint_lt(l->n, 4096);
    l->at[2 * l->n] = off;
    l->at[2 * l->n + 1] = len;
    l->n++;
    return 0;
}

static int cmp_u64_pair(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* The runs the last commit's catalog pages lie in: pages at most 64
 * KiB apart (what a remote read fetches in one request) are one run. */
static size_t page_runs(void)
{
    tf_archive *ar;
    tf_error e = { 0 };
    ck_assert_msg(tf_archive_open(path, &(tf_open_opts){ .lazy_bodies = true }, &ar, &e) == 0,
                  "%s", e.msg);
    static page_list l;
    l.n = 0;
    ck_assert_msg(tf_archive_pages(ar, note_page, &l, &e) == 0, "%s", e.msg);
    tf_archive_close(ar);
    qsort(l.at, l.n, 2 * sizeof *l.at, cmp_u64_pair);
    size_t runs = 0;
    for (size_t i = 0; i < l.n; i++)
        runs += i == 0 || l.at[2 * i] > l.at[2 * i - 2] + l.at[2 * i - 1] + (64 << 10);
    return runs;
}

START_TEST(leaves_stay_in_few_runs)
{
    /* A long run's directories, a few leaves' worth a commit, each
     * commit after a MiB of data: the leaves each commit fills stay
     * where it wrote them. */
    static bool live[NDIRS + 100];
    for (unsigned k = 0; k < 60; k++) {
        commit_after(k * 300, (k + 1) * 300, 0, 0, 1, (size_t)1 << 20);
        for (unsigned i = k * 300; i < (k + 1) * 300; i++)
            live[i] = true;
        /* The runs kept, and the commit's own pages. */
        ck_assert_uint_le(page_runs(), 6);
    }
    expect_dirs(live, true);
    /* Twenty commits replacing a directory each, all over. */
    for (unsigned k = 0; k < 20; k++) {
        unsigned i = (k * 7919) % (60 * 300);
        commit_after(i, i + 1, 0, 0, 2 + k, (size_t)1 << 20);
        ck_assert_uint_le(page_runs(), 6);
    }
    expect_dirs(live, false);
}
END_TEST

/* Flips every byte of the archive in [from, to). */
static void damage(uint64_t from, uint64_t to)
{
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    uint8_t *buf = malloc(to - from);
    ck_assert_ptr_nonnull(buf);
    ck_assert_int_eq(fseek(f, (long)from, SEEK_SET), 0);
    ck_assert_uint_eq(fread(buf, 1, to - from, f), to - from);
    for (uint64_t i = 0; i < to - from; i++)
        buf[i] ^= 0xff;
    ck_assert_int_eq(fseek(f, (long)from, SEEK_SET), 0);
    ck_assert_uint_eq(fwrite(buf, 1, to - from, f), to - from);
    ck_assert_int_eq(fclose(f), 0);
    free(buf);
}

START_TEST(follow_reads_new_leaves_only)
{
    uint64_t first = commit(0, NDIRS, 0, 0, 1);
    tf_archive *writer = open_archive(true), *reader = open_archive(false);
    /* The first commit's leaves, its nodes and root aside, unreadable:
     * the follower must not read them again, as the commit below keeps
     * all but the last. */
    damage(TF_SUPERBLOCK_SIZE, TF_SUPERBLOCK_SIZE + first - (64 << 10));
    commit_to(writer, NDIRS, NDIRS + 1, 0, 0, 2, 0);
    tf_archive_close(writer);
    bool changed = false;
    tf_error e = { 0 };
    ck_assert_msg(tf_archive_refresh(reader, NULL, &changed, &e) == 0, "%s", e.msg);
    ck_assert(changed);
    ck_assert_uint_eq(tf_archive_nentries(reader), NDIRS + 1);
    for (unsigned i = 0; i < NDIRS; i += 997) {
        char *p = dir_path(i);
        const tf_entry *ent = tf_archive_lookup(reader, p);
        ck_assert_msg(ent != NULL, "%s missing", p);
        free(p);
    }
    char *p = dir_path(NDIRS);
    const tf_entry *ent = tf_archive_lookup(reader, p);
    ck_assert_msg(ent && ent->ino == 2 + NDIRS && ent->mtime_sec == 2, "%s", p);
    free(p);
    tf_archive_close(reader);
}
END_TEST

START_TEST(many_entries_read_back)
{
    static bool live[NDIRS + 100];
    uint64_t first = commit(0, NDIRS, 0, 0, 1);
    for (unsigned i = 0; i < NDIRS; i++)
        live[i] = true;
    ck_assert_uint_ge(entries_height(), 2);
    expect_dirs(live, true);
    expect_dirs(live, false);

    /* Ten new, ten replaced (new mtime), ten removed, spread out. */
    uint64_t second = commit(NDIRS, NDIRS + 10, 0, 0, 2);
    for (unsigned i = NDIRS; i < NDIRS + 10; i++)
        live[i] = true;
    second += commit(5000, 5010, 0, 0, 3);
    second += commit(0, 0, 20000, 20010, 4);
    for (unsigned i = 20000; i < 20010; i++)
        live[i] = false;
    expect_dirs(live, true);
    expect_dirs(live, false);
    /* Three small commits rewrite a few leaves each, and the nodes. */
    ck_assert_msg(second < first / 10, "small commits wrote %llu bytes, the first %llu",
                  (unsigned long long)second, (unsigned long long)first);
}
END_TEST

static Suite *paged_suite(void)
{
    Suite *s = suite_create("paged");
    TCase *tc = tcase_create("entries");
    tcase_add_checked_fixture(tc, setup, test_dir_remove);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, many_entries_read_back);
    tcase_add_test(tc, leaves_stay_in_few_runs);
    tcase_add_test(tc, follow_reads_new_leaves_only);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return run_suite(paged_suite());
}
