/* The writer's settings (store/write_opts.h): defaults, parsing, refusals,
 * help. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#include "common/cpus.h"
#include "store/write_opts.h"

START_TEST(write_opts_default_is_one_thread_per_cpu)
{
    tf_write_opts o;
    tf_write_opts_default(&o);
    unsigned cpus = tf_online_cpus();
    ck_assert_uint_eq(o.threads, cpus < TF_WRITE_THREADS_MAX ? cpus : TF_WRITE_THREADS_MAX);
    ck_assert_uint_eq(o.max_chain, TF_MAX_CHAIN_DEFAULT);
    ck_assert_uint_eq(o.prog_budget, 0);
    ck_assert(!o.search);
    ck_assert(!o.all_programs);
    ck_assert_ptr_null(o.progress);
    ck_assert_uint_eq(o.cache_bytes, 0);
}
END_TEST

START_TEST(write_opts_set_takes_each_setting)
{
    tf_write_opts o;
    tf_write_opts_default(&o);
    tf_error e = { 0 };
    ck_assert_msg(tf_write_opts_set(&o, "threads", "3", &e) == 0, "%s", e.msg);
    ck_assert_msg(tf_write_opts_set(&o, "max_chain", "0", &e) == 0, "%s", e.msg);
    ck_assert_msg(tf_write_opts_set(&o, "prog_budget", "4096", &e) == 0, "%s", e.msg);
    ck_assert_msg(tf_write_opts_set(&o, "search", NULL, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(o.threads, 3);
    ck_assert_uint_eq(o.max_chain, 0);
    ck_assert_uint_eq(o.prog_budget, 4096);
    ck_assert(o.search && !o.all_programs);
    /* all programs are searched programs */
    tf_write_opts_default(&o);
    ck_assert_msg(tf_write_opts_set(&o, "all_programs", NULL, &e) == 0, "%s", e.msg);
    ck_assert(o.search && o.all_programs);
}
END_TEST

static const struct {
    const char *name, *value, *msg;
    int errnum;
} bad_settings[] = {
    { "threads", "0", "expected a whole number from 1 to 1024, got '0'", EINVAL },
    { "threads", "1025", "expected a whole number from 1 to 1024, got '1025'", EINVAL },
    { "threads", "-1", "expected a whole number from 1 to 1024, got '-1'", EINVAL },
    { "threads", " 2", "expected a whole number from 1 to 1024, got ' 2'", EINVAL },
    { "max_chain", "4097", "expected a whole number from 0 to 4096, got '4097'", EINVAL },
    { "max_chain", "2x", "expected a whole number from 0 to 4096, got '2x'", EINVAL },
    { "max_chain", "99999999999999999999",
      "expected a whole number from 0 to 4096, got '99999999999999999999'", EINVAL },
    { "max_chain", NULL, "expected a whole number from 0 to 4096", EINVAL },
    { "prog_budget", "", "expected a whole number from 1 to 4096, got ''", EINVAL },
    { "all_programs", "1", "takes no value, got '1'", EINVAL },
    { "search", "", "takes no value, got ''", EINVAL },
    { "budget", "4", "not a writer setting", ENOENT }, /* trajpack's spelling */
    { "cache_size", "1G", "not a writer setting", ENOENT },
};

START_TEST(write_opts_set_refuses_bad_values)
{
    tf_write_opts o, before;
    tf_write_opts_default(&o);
    before = o;
    tf_error e = { 0 };
    ck_assert_int_eq(tf_write_opts_set(&o, bad_settings[_i].name, bad_settings[_i].value, &e), -1);
    ck_assert_str_eq(e.msg, bad_settings[_i].msg);
    ck_assert_int_eq(e.errnum, bad_settings[_i].errnum);
    ck_assert_uint_eq(o.threads, before.threads);
    ck_assert_uint_eq(o.max_chain, before.max_chain);
    ck_assert_uint_eq(o.prog_budget, before.prog_budget);
    ck_assert(o.search == before.search);
    ck_assert(o.all_programs == before.all_programs);
}
END_TEST

/* The help text of each spelling, written to a string. */
static char *write_opts_help_text(tf_write_opts_spelling spelling)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ck_assert_ptr_nonnull(f);
    tf_write_opts_help(f, spelling);
    ck_assert_int_eq(fclose(f), 0);
    return text;
}

START_TEST(write_opts_help_spells_every_setting)
{
    char *options = write_opts_help_text(TF_WRITE_OPTS_OPTIONS);
    char *mount = write_opts_help_text(TF_WRITE_OPTS_MOUNT_OPTIONS);
    /* trajfs lists threads=N itself, with its request threads. */
    ck_assert_msg(strstr(options, "  -T, --threads N      encoder threads"), "no -T in:\n%s", options);
    ck_assert_msg(!strstr(mount, "threads="), "threads= in:\n%s", mount);
    static const char *const spelled[][2] = {
        { "      --max-chain N    longest chain", "    -o max_chain=N         longest chain" },
        { "      --budget N       search budget", "    -o prog_budget=N       search budget" },
        { "      --search         search programs", "    -o search              search programs" },
        { "      --all-programs   the search, and", "    -o all_programs        the search, and" },
    };
    for (size_t i = 0; i < ARRAY_LEN(spelled); i++) {
        ck_assert_msg(strstr(options, spelled[i][0]), "no '%s' in:\n%s", spelled[i][0], options);
        ck_assert_msg(strstr(mount, spelled[i][1]), "no '%s' in:\n%s", spelled[i][1], mount);
    }
    /* A description's next lines start in its column. */
    ck_assert_ptr_nonnull(strstr(options, "\n                       4096 (default 16)\n"));
    ck_assert_ptr_nonnull(strstr(mount, "\n                           4096 (default 16)\n"));
    free(options);
    free(mount);
}
END_TEST

/* ---- suite --------------------------------------------------------------- */

static Suite *write_opts_suite(void)
{
    Suite *s = suite_create("write_opts");
    TCase *wopts = tcase_create("writer settings");
    tcase_add_test(wopts, write_opts_default_is_one_thread_per_cpu);
    tcase_add_test(wopts, write_opts_set_takes_each_setting);
    tcase_add_loop_test(wopts, write_opts_set_refuses_bad_values, 0, ARRAY_LEN(bad_settings));
    tcase_add_test(wopts, write_opts_help_spells_every_setting);
    suite_add_tcase(s, wopts);
    return s;
}

int main(void)
{
    return run_suite(write_opts_suite());
}
