/* Following an archive that another process appends to
 * (tf_archive_refresh): new commits are applied, one hook pair each,
 * while copies of replaced or removed entries still read their old
 * bytes; a torn tail, whole or in part, changes nothing until its
 * trailer is valid; commits that an open would refuse (no parent
 * directory, a reused inode, a chunk of the wrong size) and an archive
 * rewritten below the last commit change nothing and say why. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testlib.h"

#include "format/container.h"
#include "format/entry_pages.h"
#include "format/paged.h"
#include "store/archive.h"
#include "store/reader.h"
#include "store/writer.h"

#define SHIFT 8

static char archive_path[TEST_PATH_MAX], src_path[TEST_PATH_MAX];

/* Loop tests run once an archive format: _i 0, version 1 (a segment a
 * commit, each applied in turn); 1, version 2 (pages: a refresh reads the
 * newest commit's catalog, one hook pair for all). */
static bool paged(int i)
{
    test_format_version = i ? TF_FORMAT_PAGES : TF_FORMAT_SEGMENTS;
    return i != 0;
}

static void make_dir(void)
{
    test_dir_make();
    test_path("a.traj", archive_path);
    test_path("src", src_path);
}

/* Adds text as dest with a writer of its own, as `trajpack add` would. */
static void add_text(const char *archive, const char *dest, const char *text, bool create)
{
    test_write_file(src_path, text, strlen(text));
    tf_writer *w = test_open_writer(archive, create, SHIFT, 1, 0);
    test_add(w, src_path, dest);
    tf_writer_close(w);
}

static void remove_path(const char *dest)
{
    tf_writer *w = test_open_writer(archive_path, false, SHIFT, 1, 0);
    tf_error e = { 0 };
    ck_assert_msg(tf_writer_remove(w, dest, &e) == 0, "%s", e.msg);
    tf_writer_close(w);
}

static tf_archive *open_reader(void)
{
    tf_archive *ar = NULL;
    tf_error e = { 0 };
    ck_assert_msg(tf_archive_open(archive_path, NULL, &ar, &e) == 0, "%s", e.msg);
    return ar;
}

/* Counts the hooks' calls; begin must see the segment before it is
 * applied, end after. */
typedef struct {
    tf_archive *ar;
    unsigned begins, ends;
    uint64_t entries_in_segments;
} hook_log;

static void on_begin(void *arg, const tf_segment *seg)
{
    hook_log *h = arg;
    ck_assert_uint_eq(h->begins, h->ends);
    ck_assert_uint_eq(seg->first_blob, tf_archive_nblobs(h->ar));
    h->begins++;
    h->entries_in_segments += seg->nentries;
}

static void on_end(void *arg)
{
    hook_log *h = arg;
    h->ends++;
    ck_assert_uint_eq(h->begins, h->ends);
}

/* Refreshes; returns whether it changed the view, failing the test on an
 * error. */
static bool refresh_ok(tf_archive *ar, hook_log *h)
{
    tf_archive_hooks hooks = { on_begin, on_end, h };
    bool changed = true;
    tf_error e = { 0 };
    ck_assert_msg(tf_archive_refresh(ar, &hooks, &changed, &e) == 0, "%s", e.msg);
    return changed;
}

/* Reads all of ent through r and compares it with want. */
static void expect_text(tf_reader_ctx *r, const tf_entry *ent, const char *want)
{
    ck_assert_ptr_nonnull(ent);
    char buf[256] = { 0 };
    tf_error e = { 0 };
    ssize_t got = tf_reader_pread(r, ent, 0, sizeof buf - 1, (uint8_t *)buf, &e);
    ck_assert_msg(got >= 0, "%s", e.msg);
    ck_assert_str_eq(buf, want);
}

START_TEST(new_commits_are_applied)
{
    bool pages = paged(_i);
    add_text(archive_path, "run/a.txt", "first file\n", true);
    tf_archive *ar = open_reader();
    tf_reader_ctx *r = tf_reader_new(ar, 1 << 20);
    hook_log h = { .ar = ar };
    ck_assert(!refresh_ok(ar, &h));
    ck_assert_uint_eq(h.begins, 0);

    add_text(archive_path, "run/b.txt", "second file\n", false);
    ck_assert(refresh_ok(ar, &h));
    ck_assert_uint_eq(h.begins, 1);
    ck_assert_uint_eq(tf_archive_commits(ar), 2);
    /* The reader made before reads the blobs appended since. */
    expect_text(r, tf_archive_lookup(ar, "run/b.txt"), "second file\n");
    expect_text(r, tf_archive_lookup(ar, "run/a.txt"), "first file\n");

    /* Two commits between refreshes: both, in order, a hook pair each
     * (pages: the newest, one pair). */
    add_text(archive_path, "c.txt", "third\n", false);
    add_text(archive_path, "run/d.txt", "fourth\n", false);
    ck_assert(refresh_ok(ar, &h));
    ck_assert_uint_eq(h.begins, pages ? 2u : 3u);
    ck_assert_uint_eq(tf_archive_commits(ar), 4);
    expect_text(r, tf_archive_lookup(ar, "c.txt"), "third\n");
    expect_text(r, tf_archive_lookup(ar, "run/d.txt"), "fourth\n");
    ck_assert(!refresh_ok(ar, &h));
    ck_assert_uint_eq(tf_archive_file_size(ar), test_file_size(archive_path));

    /* The same view as an open of the archive now. */
    tf_archive *fresh = open_reader();
    ck_assert_uint_eq(tf_archive_nentries(fresh), tf_archive_nentries(ar));
    ck_assert_uint_eq(tf_archive_nblobs(fresh), tf_archive_nblobs(ar));
    ck_assert_uint_eq(tf_archive_next_ino(fresh), tf_archive_next_ino(ar));
    for (size_t i = 0; i < tf_archive_nentries(ar); i++) {
        ck_assert_str_eq(tf_archive_entry(fresh, i)->path, tf_archive_entry(ar, i)->path);
        ck_assert_uint_eq(tf_archive_entry(fresh, i)->ino, tf_archive_entry(ar, i)->ino);
    }
    tf_archive_close(fresh);
    tf_reader_free(r);
    tf_archive_close(ar);
}
END_TEST

START_TEST(copies_of_replaced_entries_read_old_bytes)
{
    bool pages = paged(_i);
    add_text(archive_path, "a.txt", "old a\n", true);
    add_text(archive_path, "b.txt", "old b\n", false);
    tf_archive *ar = open_reader();
    tf_reader_ctx *r = tf_reader_new(ar, 1 << 20);
    tf_entry old_a, old_b;
    ck_assert_int_eq(tf_entry_clone(tf_archive_lookup(ar, "a.txt"), NULL, &old_a, NULL), 0);
    ck_assert_int_eq(tf_entry_clone(tf_archive_lookup(ar, "b.txt"), NULL, &old_b, NULL), 0);

    add_text(archive_path, "a.txt", "the new content of a\n", false);
    remove_path("b.txt");
    hook_log h = { .ar = ar };
    ck_assert(refresh_ok(ar, &h));
    ck_assert_uint_eq(h.begins, pages ? 1u : 2u);
    ck_assert_uint_eq(h.entries_in_segments, 2); /* a.txt new, b.txt gone */
    expect_text(r, tf_archive_lookup(ar, "a.txt"), "the new content of a\n");
    ck_assert_uint_ne(tf_archive_lookup(ar, "a.txt")->ino, old_a.ino);
    ck_assert_ptr_null(tf_archive_lookup(ar, "b.txt"));
    expect_text(r, &old_a, "old a\n");
    expect_text(r, &old_b, "old b\n");
    tf_entry_free(&old_a);
    tf_entry_free(&old_b);
    tf_reader_free(r);
    tf_archive_close(ar);
}
END_TEST

/* The bytes of path from off to its end. */
static uint8_t *tail_of(const char *path, off_t off, size_t *n)
{
    int fd = open(path, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    struct stat st;
    ck_assert_int_eq(fstat(fd, &st), 0);
    *n = (size_t)(st.st_size - off);
    uint8_t *p = malloc(*n);
    ck_assert_int_eq(pread(fd, p, *n, off), (ssize_t)*n);
    close(fd);
    return p;
}

static void copy_file(const char *from, const char *to)
{
    size_t n;
    uint8_t *p = test_read_whole_file(from, &n);
    test_write_file(to, p, n);
    free(p);
}

START_TEST(torn_tails_wait_for_their_trailer)
{
    paged(_i);
    add_text(archive_path, "a.txt", "committed\n", true);
    off_t committed = (off_t)test_file_size(archive_path);
    /* The next commit, made on a copy: its bytes are what a writer would
     * append here. */
    char other[TEST_PATH_MAX];
    test_path("b.traj", other);
    copy_file(archive_path, other);
    add_text(other, "b.txt", "appended later\n", false);
    size_t n;
    uint8_t *commit = tail_of(other, committed, &n);
    ck_assert_uint_gt(n, TF_TRAILER_SIZE);

    tf_archive *ar = open_reader();
    tf_reader_ctx *r = tf_reader_new(ar, 1 << 20);
    hook_log h = { .ar = ar };
    /* Bytes appended by hand, trailer magic and all, but no valid
     * trailer: ignored. */
    uint8_t junk[100];
    memset(junk, 0x5a, sizeof junk);
    memcpy(junk + 20, "\x89TRJEND\n", 8);
    memcpy(junk + sizeof junk - TF_TRAILER_SIZE, "\x89TRJEND\n", 8);
    test_append_file(archive_path, junk, sizeof junk);
    ck_assert(!refresh_ok(ar, &h));
    ck_assert_uint_eq(tf_archive_commits(ar), 1);
    expect_text(r, tf_archive_lookup(ar, "a.txt"), "committed\n");

    /* A writer cuts the torn tail off and appends its commit: until its
     * last byte is there, nothing changes. */
    ck_assert_int_eq(truncate(archive_path, committed), 0);
    test_append_file(archive_path, commit, n - 1);
    ck_assert(!refresh_ok(ar, &h));
    ck_assert_ptr_null(tf_archive_lookup(ar, "b.txt"));
    test_append_file(archive_path, commit + n - 1, 1);
    ck_assert(refresh_ok(ar, &h));
    ck_assert_uint_eq(h.begins, 1);
    expect_text(r, tf_archive_lookup(ar, "b.txt"), "appended later\n");

    /* A commit followed by a torn tail is applied, the tail left. */
    add_text(other, "c.txt", "and one more\n", false);
    free(commit);
    commit = tail_of(other, committed + (off_t)n, &n);
    test_append_file(archive_path, commit, n);
    test_append_file(archive_path, junk, sizeof junk);
    ck_assert(refresh_ok(ar, &h));
    expect_text(r, tf_archive_lookup(ar, "c.txt"), "and one more\n");
    ck_assert_uint_eq(tf_archive_file_size(ar), test_file_size(archive_path) - sizeof junk);
    free(commit);
    tf_reader_free(r);
    tf_archive_close(ar);
}
END_TEST

/* ---- commits an open would refuse ---- */

/* Commits seg (with no blobs) as it stands, as no writer would. */
static void commit_raw(const tf_segment *seg)
{
    tf_container c;
    tf_error e = { 0 };
    tf_open_opts writable = { .writable = true };
    ck_assert_msg(tf_container_open(&c, archive_path, &writable, &e) == 0, "%s", e.msg);
    tf_buf raw = { 0 };
    ck_assert_int_eq(tf_segment_encode(seg, &raw, NULL), 0);
    ck_assert_msg(tf_container_commit(&c, raw.data, raw.len, seg->first_blob + seg->nblobs,
                                      TF_COMMIT_DURABLE, NULL, &e) == 0,
                  "%s", e.msg);
    tf_buf_free(&raw);
    tf_container_close(&c);
}

typedef struct {
    const char *name;
    tf_entry ent; /* ino 0: that of a.txt; chunk 1: blob 0 */
    const char *want;
} hostile_case;

static uint64_t chunk_zero[1] = { 0 };

static const hostile_case hostile[] = {
    { "no parent directory", { .kind = TF_ENTRY_DIR, .ino = 100, .path = "nodir/sub", .mode = 0755 },
      "\"nodir/sub\" has no parent directory" },
    { "a live inode again", { .kind = TF_ENTRY_DIR, .ino = 0, .path = "b", .mode = 0755 },
      "is used twice" },
    { "a chunk of the wrong size",
      { .kind = TF_ENTRY_FILE, .ino = 100, .path = "c.txt", .mode = 0644, .size = 3, .nchunks = 1,
        .chunks = chunk_zero },
      "has 10 bytes, expected 3" },
};

/* An archive of a.txt, opened with a reader, and hc's entry, its
 * inode that of a.txt where hc names none. */
static tf_entry hostile_setup(const hostile_case *hc, tf_archive **ar, tf_reader_ctx **r)
{
    add_text(archive_path, "a.txt", "committed\n", true);
    *ar = open_reader();
    *r = tf_reader_new(*ar, 1 << 20);
    tf_entry ent = hc->ent;
    if (!ent.ino)
        ent.ino = tf_archive_lookup(*ar, "a.txt")->ino;
    return ent;
}

START_TEST(hostile_commits_change_nothing)
{
    const hostile_case *hc = &hostile[_i];
    paged(0); /* segments made by hand; pages: hostile_pages_are_refused */
    tf_archive *ar;
    tf_reader_ctx *r;
    tf_entry ent = hostile_setup(hc, &ar, &r);
    tf_segment seg = { .first_blob = tf_archive_nblobs(ar), .nentries = 1, .entries = &ent };
    commit_raw(&seg);

    hook_log h = { .ar = ar };
    tf_archive_hooks hooks = { on_begin, on_end, &h };
    bool changed = true;
    tf_error e = { 0 };
    ck_assert_int_eq(tf_archive_refresh(ar, &hooks, &changed, &e), -1);
    ck_assert_msg(strstr(e.msg, hc->want) != NULL, "%s: expected \"%s\" in: %s", hc->name,
                  hc->want, e.msg);
    ck_assert(!changed);
    ck_assert_uint_eq(h.begins, 0);
    ck_assert_uint_eq(tf_archive_commits(ar), 1);
    ck_assert_uint_eq(tf_archive_nentries(ar), 1);
    expect_text(r, tf_archive_lookup(ar, "a.txt"), "committed\n");
    /* Said once: the same tail is not read again. */
    ck_assert(!refresh_ok(ar, &h));
    tf_reader_free(r);
    tf_archive_close(ar);
}
END_TEST

/* Commits the entries of the archive and ent (its body written when it
 * has one), in pages, as no writer would: nothing checks them before. */
static void commit_raw_pages(const tf_entry *ent)
{
    tf_container c;
    tf_error e = { 0 };
    tf_open_opts writable = { .writable = true };
    ck_assert_msg(tf_container_open(&c, archive_path, &writable, &e) == 0, "%s", e.msg);
    tf_paged *p;
    tf_entry *before;
    size_t n;
    ck_assert_msg(tf_paged_open(&c, 1 << 20, false, &p, &before, &n, &e) == 0, "%s", e.msg);
    tf_entry *after = calloc(n + 1, sizeof *after), extra = *ent;
    ck_assert_int_eq(tf_paged_write_bodies(p, &extra, 1, &e), 0);
    size_t k = 0, at = 0;
    while (at < n && tf_path_cmp(before[at].path, extra.path) < 0)
        after[k++] = before[at++];
    after[k++] = extra;
    while (at < n)
        after[k++] = before[at++];
    tf_paged_change ch = { .before = before, .nbefore = n, .after = after, .nafter = k,
                           .next_ino = tf_paged_root(p)->next_ino > extra.ino
                                           ? tf_paged_root(p)->next_ino : extra.ino + 1,
                           .first_blob = tf_paged_root(p)->nblobs };
    tf_buf root = { 0 };
    ck_assert_msg(tf_paged_stage(p, &ch, &root, &e) == 0, "%s", e.msg);
    ck_assert_msg(tf_container_commit(&c, root.data, root.len, tf_paged_root(p)->nblobs,
                                      TF_COMMIT_DURABLE, NULL, &e) == 0, "%s", e.msg);
    tf_buf_free(&root);
    free(after);
    for (size_t i = 0; i < n; i++)
        tf_entry_free(&before[i]);
    free(before);
    tf_paged_free(p);
    tf_container_close(&c);
}

/* The same hostile entries in pages: a tree that is not one is refused
 * by the refresh; a chunk of the wrong size, by the read of its file
 * (an open of pages checks no blob record). */
START_TEST(hostile_pages_are_refused)
{
    const hostile_case *hc = &hostile[_i];
    paged(1);
    tf_archive *ar;
    tf_reader_ctx *r;
    tf_entry ent = hostile_setup(hc, &ar, &r);
    commit_raw_pages(&ent);

    hook_log h = { .ar = ar };
    tf_archive_hooks hooks = { on_begin, on_end, &h };
    bool changed = true;
    tf_error e = { 0 };
    bool read_fails = ent.kind == TF_ENTRY_FILE;
    ck_assert_int_eq(tf_archive_refresh(ar, &hooks, &changed, &e), read_fails ? 0 : -1);
    if (read_fails) {
        uint8_t buf[16];
        const tf_entry *c = tf_archive_lookup(ar, hc->ent.path);
        ck_assert_ptr_nonnull(c);
        ck_assert_int_eq(tf_reader_pread(r, c, 0, sizeof buf, buf, &e), -1);
        ck_assert_int_eq(e.errnum, EIO);
        ck_assert_msg(strstr(e.msg, "has 10 bytes, expected 3") != NULL, "%s", e.msg);
    } else {
        ck_assert_msg(strstr(e.msg, hc->want) != NULL, "%s: expected \"%s\" in: %s",
                      hc->name, hc->want, e.msg);
        ck_assert(!changed);
        ck_assert_uint_eq(h.begins, 0);
        ck_assert_uint_eq(tf_archive_commits(ar), 1);
    }
    expect_text(r, tf_archive_lookup(ar, "a.txt"), "committed\n");
    tf_reader_free(r);
    tf_archive_close(ar);
}
END_TEST

START_TEST(rewritten_archive_is_refused)
{
    paged(_i);
    add_text(archive_path, "a.txt", "one\n", true);
    off_t first = (off_t)test_file_size(archive_path);
    add_text(archive_path, "b.txt", "two\n", false);
    tf_archive *ar = open_reader();
    /* Cut back to the first commit and written anew, longer: the new
     * commits do not follow the one the reader applied last. */
    ck_assert_int_eq(truncate(archive_path, first), 0);
    add_text(archive_path, "c.txt", "a file longer than the one it displaces\n", false);
    add_text(archive_path, "d.txt", "four\n", false);
    hook_log h = { .ar = ar };
    tf_archive_hooks hooks = { on_begin, on_end, &h };
    bool changed = true;
    tf_error e = { 0 };
    ck_assert_int_eq(tf_archive_refresh(ar, &hooks, &changed, &e), -1);
    ck_assert_msg(strstr(e.msg, "does not follow commit 2") != NULL, "%s", e.msg);
    ck_assert(!changed);
    ck_assert_ptr_nonnull(tf_archive_lookup(ar, "b.txt"));
    ck_assert_ptr_null(tf_archive_lookup(ar, "c.txt"));
    tf_archive_close(ar);
}
END_TEST

START_TEST(cut_archive_is_an_error)
{
    paged(_i);
    add_text(archive_path, "a.txt", "one\n", true);
    tf_archive *ar = open_reader();
    ck_assert_int_eq(truncate(archive_path, (off_t)test_file_size(archive_path) - 1), 0);
    bool changed = true;
    tf_error e = { 0 };
    ck_assert_int_eq(tf_archive_refresh(ar, NULL, &changed, &e), -1);
    ck_assert_msg(strstr(e.msg, "inside its commit 1") != NULL, "%s", e.msg);
    ck_assert(!changed);
    tf_archive_close(ar);
}
END_TEST

START_TEST(writer_has_nothing_to_follow)
{
    paged(_i);
    add_text(archive_path, "a.txt", "one\n", true);
    tf_writer *w = test_open_writer(archive_path, false, SHIFT, 1, 0);
    bool changed = true;
    tf_error e = { 0 };
    ck_assert_int_eq(tf_archive_refresh(tf_writer_archive(w), NULL, &changed, &e), -1);
    ck_assert_int_eq(e.errnum, EINVAL);
    ck_assert(!changed);
    tf_writer_close(w);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("refresh");
    TCase *tc = tcase_create("refresh");
    tcase_add_checked_fixture(tc, make_dir, test_dir_remove);
    tcase_add_loop_test(tc, new_commits_are_applied, 0, 2);
    tcase_add_loop_test(tc, copies_of_replaced_entries_read_old_bytes, 0, 2);
    tcase_add_loop_test(tc, torn_tails_wait_for_their_trailer, 0, 2);
    tcase_add_loop_test(tc, hostile_commits_change_nothing, 0, (int)ARRAY_LEN(hostile));
    tcase_add_loop_test(tc, hostile_pages_are_refused, 0, (int)ARRAY_LEN(hostile));
    tcase_add_loop_test(tc, rewritten_archive_is_refused, 0, 2);
    tcase_add_loop_test(tc, cut_archive_is_an_error, 0, 2);
    tcase_add_loop_test(tc, writer_has_nothing_to_follow, 0, 2);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
