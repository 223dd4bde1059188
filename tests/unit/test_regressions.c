/* Inputs that once crashed a fuzz target, or that a fix was made for,
 * fed through the very target function (tests/fuzz/fuzz_*.c) that found
 * them. tests/fuzz/regressions/EXPECT lists them, one a line:
 *
 *   TARGET/NAME <TAB> substring of the message it must now be refused with
 *
 * where the input is tests/fuzz/regressions/TARGET/NAME and a substring
 * of "-" means it must be accepted. Each must come back as a clean error
 * (or success): a crash, a sanitizer report or an abort() fails the test.
 * run.sh also replays these directories while fuzzing. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#include "fuzz_targets.h"

#define MAX_CASES 256

static const struct {
    const char *name;
    int (*run)(const uint8_t *data, size_t size, tf_error *e);
} targets[] = {
    { "archive", tf_fuzz_archive },
    { "commits", tf_fuzz_commits },
    { "catalog", tf_fuzz_catalog },
    { "safetensors", tf_fuzz_safetensors },
    { "codec", tf_fuzz_codec },
    { "pickle", tf_fuzz_pickle },
    { "torch_save", tf_fuzz_torch_save },
};

static char regress_dir[4096];
static struct {
    char input[512];
    char want[512];
} cases[MAX_CASES];
static int ncases;

static void load_cases(void)
{
    const char *top = getenv("top_srcdir");
    snprintf(regress_dir, sizeof regress_dir, "%s/tests/fuzz/regressions", top ? top : ".");
    char path[4200], line[512];
    snprintf(path, sizeof path, "%s/EXPECT", regress_dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "test_regressions: cannot open %s (set top_srcdir)\n", path);
        exit(EXIT_FAILURE);
    }
    while (fgets(line, sizeof line, f) && ncases < MAX_CASES) {
        line[strcspn(line, "\n")] = '\0';
        char *tab = strchr(line, '\t');
        if (line[0] == '#' || !tab)
            continue;
        *tab = '\0';
        snprintf(cases[ncases].input, sizeof cases[ncases].input, "%s", line);
        snprintf(cases[ncases].want, sizeof cases[ncases].want, "%s", tab + 1);
        ncases++;
    }
    fclose(f);
}

static uint8_t *read_input(const char *name, size_t *size)
{
    char path[4700];
    snprintf(path, sizeof path, "%s/%s", regress_dir, name);
    return test_read_whole_file(path, size);
}

START_TEST(regression_input_is_handled)
{
    const char *input = cases[_i].input, *want = cases[_i].want;
    size_t tlen = strcspn(input, "/");
    int t = 0;
    while (t < (int)(sizeof targets / sizeof targets[0]) &&
           (strlen(targets[t].name) != tlen || strncmp(targets[t].name, input, tlen) != 0))
        t++;
    ck_assert_msg(t < (int)(sizeof targets / sizeof targets[0]), "%s: unknown target", input);
    size_t size;
    uint8_t *data = read_input(input, &size);
    tf_error e = { 0 };
    int rc = targets[t].run(data, size, &e);
    if (strcmp(want, "-") == 0) {
        ck_assert_msg(rc == 0, "%s: refused: %s", input, e.msg);
    } else {
        ck_assert_msg(rc == -1, "%s: accepted, expected \"%s\"", input, want);
        ck_assert_msg(strstr(e.msg, want) != NULL, "%s: expected \"%s\" in: %s", input, want, e.msg);
    }
    free(data);
}
END_TEST

int main(void)
{
    load_cases();
    Suite *s = suite_create("regressions");
    TCase *tc = tcase_create("fuzz");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, regression_input_is_handled, 0, ncases);
    suite_add_tcase(s, tc);
    int status = run_suite(s);
    printf("%d regression inputs\n", ncases);
    return status;
}
