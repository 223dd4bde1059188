/* The open files of a mount (fs/handles.h): handle numbers, the writer's
 * view of a file (its most recently changed write handle), what a write
 * handle has to commit and how renames and removals change that, and the
 * versions of files that left the tree. */
#include <check.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

#include "fs/handles.h"
#include "fs/spool.h"

static fs_handles t;
static int spool_dir;

static void setup(void)
{
    test_dir_make();
    fs_handles_init(&t);
    spool_dir = open(test_dir, O_RDONLY | O_DIRECTORY);
    ck_assert_int_ge(spool_dir, 0);
}

static void teardown(void)
{
    fs_handles_destroy(&t);
    close(spool_dir);
    test_dir_remove();
}

/* A write handle of inode ino named name in directory 1, in the table;
 * its fh in *fh. */
static fs_handle *add_writer(uint64_t ino, const char *name, bool dirty, uint64_t *fh)
{
    int spool = fs_spool_create(spool_dir);
    ck_assert_int_ge(spool, 0);
    fs_write_attrs a = { .ino = ino, .parent = 1, .mode = 0644 };
    fs_handle *h = fs_handle_new_write(&a, name, spool, dirty);
    ck_assert_ptr_nonnull(h);
    *fh = fs_handles_add(&t, h);
    ck_assert_uint_ne(*fh, 0);
    return h;
}

static tf_entry file_entry(uint64_t size)
{
    return (tf_entry){ .kind = TF_ENTRY_FILE, .path = (char *)"f", .mode = 0600, .size = size,
                       .mtime_sec = 7 };
}

START_TEST(handles_by_number_and_inode)
{
    tf_entry ent = file_entry(3);
    fs_handle *r = fs_handle_new_read(5, &ent, true);
    uint64_t fh = fs_handles_add(&t, r);
    ck_assert_ptr_eq(fs_handles_get(&t, fh, 5), r);
    ck_assert_ptr_null(fs_handles_get(&t, fh, 6)); /* another inode's number */
    ck_assert_ptr_null(fs_handles_get(&t, fh + 1, 5));
    ck_assert_ptr_null(fs_handles_get(&t, 0, 5));
    ck_assert_ptr_eq(fs_handles_take(&t, fh), r);
    ck_assert_ptr_null(fs_handles_get(&t, fh, 5));
    fs_handle_free(r);
}
END_TEST

START_TEST(writes_reach_the_spool_and_the_attributes)
{
    uint64_t fh;
    fs_handle *h = add_writer(5, "f", false, &fh);
    fs_write_attrs a, pending;
    char name[TF_NAME_MAX + 1];
    ck_assert(!fs_handles_pending_commit(&t, h, false, &pending, name)); /* clean */
    ck_assert_int_eq(fs_handle_write(&t, h, "abcdef", 6, 10), 0);
    ck_assert(fs_handles_attrs(&t, 5, &a));
    ck_assert_uint_eq(a.size, 16);
    ck_assert_int_eq(fs_handle_truncate(&t, h, 12), 0);
    char buf[32];
    size_t got;
    ck_assert_int_eq(fs_handle_read(h, buf, sizeof buf, 8, &got), 0);
    ck_assert_uint_eq(got, 4);
    ck_assert_mem_eq(buf, "\0\0ab", 4);
    ck_assert(fs_handles_pending_commit(&t, h, false, &pending, name));
    ck_assert_uint_eq(pending.size, 12);
    ck_assert_str_eq(name, "f");
    fs_handles_committed(&t, h, true);
    ck_assert(!fs_handles_pending_commit(&t, h, false, &pending, name));
}
END_TEST

START_TEST(a_failed_commit_is_reported_once)
{
    uint64_t fh;
    fs_handle *h = add_writer(5, "f", true, &fh);
    fs_write_attrs a;
    char name[TF_NAME_MAX + 1];
    fs_handles_committed(&t, h, false);
    ck_assert(fs_handles_pending_commit(&t, h, false, &a, name));
    ck_assert(!fs_handles_pending_commit(&t, h, true, &a, name));
    ck_assert_uint_eq(fs_handles_destroy(&t), 0); /* told already: not lost */
    fs_handles_init(&t);
}
END_TEST

START_TEST(the_writers_view_is_the_latest_change)
{
    uint64_t fh1, fh2;
    fs_handle *h1 = add_writer(5, "f", false, &fh1);
    fs_handle *h2 = add_writer(5, "f", false, &fh2);
    fs_write_attrs a;
    ck_assert_int_eq(fs_handle_write(&t, h2, "x", 1, 99), 0);
    ck_assert(fs_handles_attrs(&t, 5, &a));
    ck_assert_uint_eq(a.size, 100);
    ck_assert_int_eq(fs_handle_write(&t, h1, "x", 1, 9), 0);
    ck_assert(fs_handles_attrs(&t, 5, &a));
    ck_assert_uint_eq(a.size, 10);
    uint32_t mode = 0600;
    fs_handles_set_attrs(&t, 5, &mode, NULL);
    ck_assert(fs_handles_attrs(&t, 5, &a));
    ck_assert_uint_eq(a.mode, 0600);
    ck_assert(!fs_handles_attrs(&t, 6, &a));
}
END_TEST

START_TEST(attribute_changes_keep_the_writers_view)
{
    uint64_t fh1, fh2;
    fs_handle *h1 = add_writer(5, "f", false, &fh1);
    fs_handle *h2 = add_writer(5, "f", false, &fh2);
    fs_write_attrs a;
    ck_assert_int_eq(fs_handle_write(&t, h2, "x", 1, 2), 0);
    ck_assert_int_eq(fs_handle_truncate(&t, h1, 5000), 0);
    struct timespec now = { .tv_sec = 9 };
    fs_handles_set_attrs(&t, 5, NULL, &now); /* as the kernel's ftruncate sends */
    ck_assert(fs_handles_attrs(&t, 5, &a));
    ck_assert_uint_eq(a.size, 5000);
    ck_assert_int_eq(a.mtime.tv_sec, 9);
}
END_TEST

static fs_handle *add_reader(uint64_t ino, const tf_entry *ent)
{
    fs_handle *r = fs_handle_new_read(ino, ent, true);
    ck_assert_ptr_nonnull(r);
    ck_assert_uint_ne(fs_handles_add(&t, r), 0);
    return r;
}

START_TEST(other_views_bypass_the_page_cache)
{
    tf_entry v1 = file_entry(3), v2 = file_entry(4);
    ck_assert(!add_reader(5, &v1)->bypass_cache);
    ck_assert(!add_reader(5, &v1)->bypass_cache); /* the same version */
    ck_assert(add_reader(5, &v2)->bypass_cache);
    uint64_t fh;
    ck_assert(add_writer(5, "f", false, &fh)->bypass_cache); /* readers use the cache */
    fs_handle *w = add_writer(6, "g", false, &fh);
    ck_assert(!w->bypass_cache);
    ck_assert(add_reader(6, &v1)->bypass_cache); /* w may have written */
    fs_handles_note_flush(&t, w);                /* closed, nothing to commit */
    ck_assert(!add_reader(6, &v1)->bypass_cache);
}
END_TEST

START_TEST(renames_and_removals_move_the_commit)
{
    uint64_t fh;
    fs_handle *h = add_writer(5, "f", true, &fh);
    fs_write_attrs a;
    char name[TF_NAME_MAX + 1];
    fs_handles_move_ino(&t, 5, 9, "g");
    ck_assert(fs_handles_pending_commit(&t, h, false, &a, name));
    ck_assert_uint_eq(a.parent, 9);
    ck_assert_str_eq(name, "g");
    fs_handles_unlink_ino(&t, 5);
    ck_assert(!fs_handles_pending_commit(&t, h, false, &a, name));
    ck_assert_uint_eq(fs_handles_destroy(&t), 0); /* unlinked: nothing lost */
    fs_handles_init(&t);
}
END_TEST

START_TEST(uncommitted_changes_at_the_end_are_counted)
{
    uint64_t fh;
    add_writer(5, "f", true, &fh);
    add_writer(6, "g", false, &fh);
    ck_assert_uint_eq(fs_handles_destroy(&t), 1);
    fs_handles_init(&t);
}
END_TEST

START_TEST(versions_that_left_the_tree)
{
    tf_entry ent = file_entry(42);
    fs_write_attrs a;
    ck_assert(!fs_handles_read_attrs(&t, 5, &a));
    fs_handles_retire(&t, 5, &ent);
    ck_assert(fs_handles_read_attrs(&t, 5, &a));
    ck_assert_uint_eq(a.size, 42);
    ck_assert_int_eq(a.mtime.tv_sec, 7);
    fs_handle *r = fs_handles_open_retired(&t, 5);
    ck_assert_ptr_nonnull(r);
    ck_assert_uint_eq(r->ent->size, 42);
    fs_handle_free(r);
    /* Only the last FS_RETIRED_MAX are kept. */
    for (uint64_t ino = 100; ino < 100 + FS_RETIRED_MAX; ino++)
        fs_handles_retire(&t, ino, &ent);
    ck_assert_ptr_null(fs_handles_open_retired(&t, 5));
    ck_assert(fs_handles_read_attrs(&t, 100, &a));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fs_handles");
    TCase *tc = tcase_create("handles");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, handles_by_number_and_inode);
    tcase_add_test(tc, writes_reach_the_spool_and_the_attributes);
    tcase_add_test(tc, a_failed_commit_is_reported_once);
    tcase_add_test(tc, the_writers_view_is_the_latest_change);
    tcase_add_test(tc, attribute_changes_keep_the_writers_view);
    tcase_add_test(tc, other_views_bypass_the_page_cache);
    tcase_add_test(tc, renames_and_removals_move_the_commit);
    tcase_add_test(tc, uncommitted_changes_at_the_end_are_counted);
    tcase_add_test(tc, versions_that_left_the_tree);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
