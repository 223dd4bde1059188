/* What a prune selects (store/prune.h): step numbers, patterns, and the
 * files of the checkpoints each rule removes, in layouts where numbered
 * directories hold other numbered files: a checkpoint's numbered files
 * go with it, a numbered run's own files are never touched, a nested
 * directory of the same step is part of its checkpoint. Removal through
 * the writer (tf_writer_remove_paths) takes all paths or none. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

#include "store/archive.h"
#include "store/ckpt_path.h"
#include "store/prune.h"
#include "store/writer.h"

/* ---- step numbers and patterns ---- */

static const struct {
    const char *step, *number; /* NULL: none */
} number_cases[] = {
    { "checkpoint-1000", "1000" },
    { "step-000400.safetensors", "000400" },
    { "global_step40", "40" },
    { "epoch=1-step=200.ckpt", "200" },
    { "step100_fp16.pt", "100" },
    { "model-00001-of-00003.safetensors", NULL },
    { "mp_rank_00", NULL },
    { "config.json", NULL },
};

START_TEST(step_numbers)
{
    const char *d = NULL;
    size_t len = 0;
    bool found = tf_ckpt_step_number(number_cases[_i].step, &d, &len);
    if (!number_cases[_i].number) {
        ck_assert_msg(!found, "%s: found a number", number_cases[_i].step);
        return;
    }
    ck_assert_msg(found, "%s: no number", number_cases[_i].step);
    ck_assert_uint_eq(len, strlen(number_cases[_i].number));
    ck_assert(memcmp(d, number_cases[_i].number, len) == 0);
}
END_TEST

static const struct {
    const char *pattern, *path;
    bool match;
} match_cases[] = {
    { "optimizer.pt", "out/checkpoint-2/optimizer.pt", true },
    { "optimizer.pt", "out/checkpoint-2/optimizer.pt.bak", false },
    { "*.optim.safetensors", "run/step-2.optim.safetensors", true },
    { "*.optim.safetensors", "run/step-2.safetensors", false },
    { "checkpoint-10", "out/checkpoint-10/model.safetensors", true },
    { "checkpoint-10", "out/checkpoint-100/model.safetensors", false },
    { "out/checkpoint-10", "out/checkpoint-10/model.safetensors", true },
    { "ut/checkpoint-10", "out/checkpoint-10/model.safetensors", false },
    { "rng_state_*", "out/checkpoint-10/rng_state_3.pth", true },
    { "step-[0-9].*", "step-7.safetensors", true },
    { "step-[0-9].*", "step-17.safetensors", false },
};

START_TEST(patterns_match)
{
    ck_assert_msg(tf_prune_match(match_cases[_i].pattern, match_cases[_i].path) ==
                      match_cases[_i].match,
                  "%s against %s", match_cases[_i].pattern, match_cases[_i].path);
}
END_TEST

/* ---- plans ---- */

typedef struct {
    const char *path;
    size_t size;
} file_spec;

static char archive[TEST_PATH_MAX];

/* An archive of opaque files of the given sizes at the given paths. */
static tf_archive *make_archive(const file_spec *files, size_t n)
{
    test_path("a.traj", archive);
    unlink(archive);
    tf_writer *w = test_open_writer(archive, true, 16, 1, 16);
    char src[TEST_PATH_MAX];
    test_path("src", src);
    for (size_t i = 0; i < n; i++) {
        uint8_t *data = malloc(files[i].size + 1);
        ck_assert_ptr_nonnull(data);
        fill_random(data, files[i].size);
        test_write_file(src, data, files[i].size);
        free(data);
        test_add(w, src, files[i].path);
    }
    tf_writer_close(w);
    tf_archive *ar;
    tf_error e;
    ck_assert_msg(tf_archive_open(archive, NULL, &ar, &e) == 0, "%s", e.msg);
    return ar;
}

/* The paths the plan drops, each followed by '\n' (directories with a
 * trailing '/'), in archive order. */
static char *dropped_paths(const tf_archive *ar, const tf_prune_plan *plan)
{
    size_t len = 1;
    for (size_t i = 0; i < plan->nentries; i++)
        if (plan->dropped[i])
            len += strlen(tf_archive_entry(ar, i)->path) + 2;
    char *s = calloc(len, 1);
    ck_assert_ptr_nonnull(s);
    for (size_t i = 0; i < plan->nentries; i++) {
        if (!plan->dropped[i])
            continue;
        const tf_entry *ent = tf_archive_entry(ar, i);
        strcat(s, ent->path);
        strcat(s, ent->kind == TF_ENTRY_DIR ? "/\n" : "\n");
    }
    return s;
}

static void expect_plan(const file_spec *files, size_t n, const tf_prune_rules *rules,
                        const char *want)
{
    tf_archive *ar = make_archive(files, n);
    tf_prune_plan plan;
    tf_error e;
    ck_assert_msg(tf_prune_plan_make(ar, rules, &plan, &e) == 0, "%s", e.msg);
    char *got = dropped_paths(ar, &plan);
    ck_assert_msg(strcmp(got, want) == 0, "dropped:\n%s\nexpected:\n%s", got, want);
    ck_assert_uint_eq(plan.emptied_runs, 0);
    free(got);
    tf_prune_plan_free(&plan);
    tf_archive_close(ar);
}

/* Numbered files of a checkpoint (the ranks' RNG states) go with it, and
 * stay with the kept one. */
static const file_spec trainer[] = {
    { "out/config.json", 20 },
    { "out/checkpoint-100/model.bin", 4000 },
    { "out/checkpoint-100/rng_state_0.pth", 16 },
    { "out/checkpoint-100/rng_state_1.pth", 16 },
    { "out/checkpoint-200/model.bin", 4000 },
    { "out/checkpoint-200/rng_state_0.pth", 16 },
    { "out/checkpoint-200/rng_state_1.pth", 16 },
};

START_TEST(checkpoint_keeps_its_numbered_files)
{
    tf_prune_rules r = { .keep_last = 1 };
    expect_plan(trainer, ARRAY_LEN(trainer), &r,
                "out/checkpoint-100/\n"
                "out/checkpoint-100/model.bin\n"
                "out/checkpoint-100/rng_state_0.pth\n"
                "out/checkpoint-100/rng_state_1.pth\n");
    /* --drop: only the matching files of the checkpoints not kept; the
     * directory keeps the others. */
    const char *drop[] = { "rng_state_*" };
    tf_prune_rules d = { .keep_last = 1, .drop = drop, .ndrop = 1 };
    expect_plan(trainer, ARRAY_LEN(trainer), &d,
                "out/checkpoint-100/rng_state_0.pth\n"
                "out/checkpoint-100/rng_state_1.pth\n");
}
END_TEST

/* A numbered run's own files are no checkpoint's; its checkpoints are
 * pruned in natural order (step-2 before step-10). */
static const file_spec numbered_run[] = {
    { "run2/config.json", 20 },
    { "run2/step-10.st", 2000 },
    { "run2/step-2.st", 2000 },
    { "run2/step-9.st", 2000 },
};

START_TEST(numbered_run_keeps_its_files)
{
    tf_prune_rules r = { .keep_last = 2 };
    expect_plan(numbered_run, ARRAY_LEN(numbered_run), &r, "run2/step-2.st\n");
}
END_TEST

/* A directory of the checkpoint's own step below it is part of it. */
static const file_spec nested[] = {
    { "ds/checkpoint-100/global_step100/states.pt", 3000 },
    { "ds/checkpoint-100/model.bin", 1000 },
    { "ds/checkpoint-200/global_step200/states.pt", 3000 },
    { "ds/checkpoint-200/model.bin", 1000 },
};

START_TEST(nested_step_directory_is_part_of_its_checkpoint)
{
    tf_prune_rules r = { .keep_every = 200 };
    expect_plan(nested, ARRAY_LEN(nested), &r,
                "ds/checkpoint-100/\n"
                "ds/checkpoint-100/global_step100/\n"
                "ds/checkpoint-100/global_step100/states.pt\n"
                "ds/checkpoint-100/model.bin\n");
}
END_TEST

/* Rules that keep nothing of a run say so; files without a step are
 * never touched; --keep counts its matches. */
START_TEST(plan_reports_emptied_runs_and_keep_matches)
{
    static const file_spec flat[] = {
        { "config.json", 20 },
        { "step-1.st", 500 },
        { "step-2.st", 500 },
        { "step-2.optim.st", 500 },
    };
    tf_archive *ar = make_archive(flat, ARRAY_LEN(flat));
    const char *keep[] = { "step-1.*", "nothing" };
    tf_prune_rules r = { .keep = keep, .nkeep = 2 };
    tf_prune_plan plan;
    tf_error e;
    ck_assert_int_eq(tf_prune_plan_make(ar, &r, &plan, &e), 0);
    ck_assert_uint_eq(plan.runs, 2);
    ck_assert_uint_eq(plan.checkpoints, 3);
    ck_assert_uint_eq(plan.keep_matches[0], 1);
    ck_assert_uint_eq(plan.keep_matches[1], 0);
    /* step-#.optim.st is a run of its own, whose one checkpoint goes. */
    ck_assert_uint_eq(plan.emptied_runs, 1);
    ck_assert_str_eq(plan.emptied_run, "step-#.optim.st");
    ck_assert_uint_eq(plan.files, 2);
    ck_assert(!plan.dropped[tf_archive_find(ar, "config.json")]);
    tf_prune_frees f;
    ck_assert_int_eq(tf_prune_frees_of(ar, plan.dropped, &f, &e), 0);
    ck_assert_uint_gt(f.now, 0);
    tf_prune_plan_free(&plan);
    tf_prune_rules none = { 0 };
    ck_assert_int_eq(tf_prune_plan_make(ar, &none, &plan, &e), -1);
    tf_prune_plan_free(&plan);
    tf_archive_close(ar);
}
END_TEST

/* tf_writer_remove_paths: a missing path refuses all; a path below
 * another, given too, and a trailing '/' are fine. */
START_TEST(remove_paths_all_or_none)
{
    tf_archive *ar = make_archive(trainer, ARRAY_LEN(trainer));
    tf_archive_close(ar);
    tf_writer *w = test_open_writer(archive, false, 16, 1, 16);
    tf_error e;
    const char *bad[] = { "out/checkpoint-100/", "out/nope" };
    ck_assert_int_eq(tf_writer_remove_paths(w, bad, 2, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "out/nope"));
    ck_assert_ptr_nonnull(tf_archive_lookup(tf_writer_archive(w), "out/checkpoint-100/model.bin"));
    const char *invalid[] = { "out/../x" };
    ck_assert_int_eq(tf_writer_remove_paths(w, invalid, 1, &e), -1);
    uint64_t commits = tf_archive_commits(tf_writer_archive(w));
    const char *good[] = { "out/checkpoint-100/rng_state_0.pth", "out/checkpoint-100/",
                           "out/checkpoint-200/model.bin" };
    ck_assert_int_eq(tf_writer_remove_paths(w, good, 3, &e), 0);
    const tf_archive *now = tf_writer_archive(w);
    ck_assert_ptr_null(tf_archive_lookup(now, "out/checkpoint-100"));
    ck_assert_ptr_null(tf_archive_lookup(now, "out/checkpoint-200/model.bin"));
    ck_assert_ptr_nonnull(tf_archive_lookup(now, "out/checkpoint-200/rng_state_0.pth"));
    /* One commit (opaque files: nothing to rebase). */
    ck_assert_uint_eq(tf_archive_commits(now), commits + 1);
    tf_writer_close(w);
}
END_TEST

static Suite *prune_suite(void)
{
    Suite *s = suite_create("prune");
    TCase *names = tcase_create("names");
    tcase_add_loop_test(names, step_numbers, 0, ARRAY_LEN(number_cases));
    tcase_add_loop_test(names, patterns_match, 0, ARRAY_LEN(match_cases));
    suite_add_tcase(s, names);
    TCase *plans = tcase_create("plans");
    tcase_add_checked_fixture(plans, test_dir_make, test_dir_remove);
    tcase_add_test(plans, checkpoint_keeps_its_numbered_files);
    tcase_add_test(plans, numbered_run_keeps_its_files);
    tcase_add_test(plans, nested_step_directory_is_part_of_its_checkpoint);
    tcase_add_test(plans, plan_reports_emptied_runs_and_keep_matches);
    tcase_add_test(plans, remove_paths_all_or_none);
    suite_add_tcase(s, plans);
    return s;
}

int main(void)
{
    return run_suite(prune_suite());
}
