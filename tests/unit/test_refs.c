/* Where a file sits in a training run (tf_ckpt_path_parse), and the
 * reference each tensor gets through the real writer: the same tensor of
 * the nearest earlier checkpoint of its run, in whichever file of that
 * checkpoint it lies, seen through wrapper prefixes and temporary names,
 * or the tensors of the parent the caller names. A file newer than its
 * run's others is stored as keyframes and its reference re-encoded
 * against it (reverse references), so a tensor and its reference are
 * linked by a delta in one direction or the other. Every archive
 * written reads back byte for byte. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testlib.h"

#include "codec/codec.h"
#include "common/dtype.h"
#include "common/hash.h"
#include "store/archive.h"
#include "store/ckpt_path.h"
#include "store/natsort.h"
#include "store/reader.h"
#include "store/refs.h"
#include "store/writer.h"

/* ======================================================================== */
/* Paths                                                                    */
/* ======================================================================== */

static const struct {
    const char *path, *run, *step, *role; /* step NULL: none */
} path_cases[] = {
    { "step-000400.safetensors", "step-#.safetensors", "step-000400.safetensors", "" },
    { "step-000400.optim.safetensors", "step-#.optim.safetensors", "step-000400.optim.safetensors", "" },
    { "out/checkpoint-400/model-00001-of-00003.safetensors", "out/checkpoint-#", "checkpoint-400",
      "model-#-of-#.safetensors" },
    { "out/tmp-checkpoint-400/model-00002-of-00003.safetensors", "out/checkpoint-#", "checkpoint-400",
      "model-#-of-#.safetensors" },
    { "step-400.safetensors.tmp", "step-#.safetensors", "step-400.safetensors", "" },
    { ".step-400.safetensors.AbC123", "step-#.safetensors", "step-400.safetensors", "" },
    { "step-400.safetensors.part", "step-#.safetensors", "step-400.safetensors", "" },
    { "run1/step-5.safetensors", "run1/step-#.safetensors", "step-5.safetensors", "" },
    { "run2/step-5.safetensors", "run2/step-#.safetensors", "step-5.safetensors", "" },
    /* The rank's digits are no step, and tell the ranks' files apart. */
    { "global_step40/mp_rank_00_model_states.pt", "global_step#", "global_step40",
      "mp_rank_00_model_states.pt" },
    { "bf16/step-2.safetensors", "bf16/step-#.safetensors", "step-2.safetensors", "" },
    { "model.safetensors", "", NULL, "model.safetensors" },
    { "lightning_logs/version_0/checkpoints/epoch=1-step=200.ckpt",
      "lightning_logs/version_0/checkpoints/epoch=#-step=#.ckpt", "epoch=1-step=200.ckpt", "" },
    { "run/step-10/model.safetensors", "run/step-#", "step-10", "model.safetensors" },
    { "out/checkpoint-400/optimizer.pt", "out/checkpoint-#", "checkpoint-400", "optimizer.pt" },
};

START_TEST(ckpt_path_parses_run_step_role)
{
    tf_ckpt_path p;
    ck_assert_int_eq(tf_ckpt_path_parse(path_cases[_i].path, &p), 0);
    ck_assert_msg(strcmp(p.run, path_cases[_i].run) == 0, "%s: run \"%s\", expected \"%s\"",
                  path_cases[_i].path, p.run, path_cases[_i].run);
    if (path_cases[_i].step)
        ck_assert_msg(p.step && strcmp(p.step, path_cases[_i].step) == 0,
                      "%s: step \"%s\", expected \"%s\"", path_cases[_i].path,
                      p.step ? p.step : "(none)", path_cases[_i].step);
    else
        ck_assert_msg(p.step == NULL, "%s: step \"%s\", expected none", path_cases[_i].path, p.step);
    ck_assert_msg(strcmp(p.role, path_cases[_i].role) == 0, "%s: role \"%s\", expected \"%s\"",
                  path_cases[_i].path, p.role, path_cases[_i].role);
    tf_ckpt_path_free(&p);
    ck_assert_ptr_null(p.run);
}
END_TEST

/* Pairs of paths: checkpoints of one run or not, and their order. */
static const struct {
    const char *a, *b;
    int same_run;
    int order; /* sign of tf_natcmp(a's step, b's step) in one run */
} pair_cases[] = {
    { "out/checkpoint-400/model-00001-of-00003.safetensors",
      "out/tmp-checkpoint-400/model-00002-of-00003.safetensors", 1, 0 },
    { "out/checkpoint-400/model-00001-of-00003.safetensors",
      "out/checkpoint-1000/model-00003-of-00003.safetensors", 1, -1 },
    { "step-400.safetensors", "step-400.safetensors.tmp", 1, 0 },
    { "step-000400.safetensors", ".step-500.safetensors.AbC123", 1, -1 },
    { "step-900.safetensors", "step-1000.safetensors", 1, -1 },
    { "step-000400.safetensors", "step-000400.optim.safetensors", 0, 0 },
    { "run1/step-5.safetensors", "run2/step-5.safetensors", 0, 0 },
    { "run/step-1/model.safetensors", "run/step-2/model.safetensors", 1, -1 },
    { "global_step40/mp_rank_00_model_states.pt", "global_step80/mp_rank_01_model_states.pt", 1, -1 },
    { "lightning_logs/version_0/checkpoints/epoch=1-step=200.ckpt",
      "lightning_logs/version_0/checkpoints/epoch=2-step=400.ckpt", 1, -1 },
    { "lightning_logs/version_0/checkpoints/epoch=1-step=200.ckpt",
      "lightning_logs/version_1/checkpoints/epoch=1-step=200.ckpt", 0, 0 },
};

static int sign(int v)
{
    return (v > 0) - (v < 0);
}

START_TEST(ckpt_path_groups_runs)
{
    tf_ckpt_path a, b;
    ck_assert_int_eq(tf_ckpt_path_parse(pair_cases[_i].a, &a), 0);
    ck_assert_int_eq(tf_ckpt_path_parse(pair_cases[_i].b, &b), 0);
    ck_assert_msg((strcmp(a.run, b.run) == 0) == pair_cases[_i].same_run,
                  "\"%s\" and \"%s\": runs \"%s\" and \"%s\"", pair_cases[_i].a, pair_cases[_i].b,
                  a.run, b.run);
    if (pair_cases[_i].same_run) {
        ck_assert_ptr_nonnull(a.step);
        ck_assert_ptr_nonnull(b.step);
        ck_assert_int_eq(sign(tf_natcmp(a.step, b.step)), pair_cases[_i].order);
    }
    tf_ckpt_path_free(&a);
    tf_ckpt_path_free(&b);
}
END_TEST

/* Paths of any shape parse: deep, empty components, markers alone. */
START_TEST(ckpt_path_takes_any_path)
{
    static char deep[TF_DEPTH_MAX * 2 + 8];
    for (int i = 0; i < TF_DEPTH_MAX + 3; i++)
        memcpy(deep + 2 * i, "7/", 2);
    deep[2 * (TF_DEPTH_MAX + 3) - 1] = '\0';
    const char *paths[] = { "", "/", "a//b", "tmp-", ".tmp", "..", ".x.ABCDEF", "123", deep };
    for (size_t k = 0; k < ARRAY_LEN(paths); k++) {
        tf_ckpt_path p;
        ck_assert_msg(tf_ckpt_path_parse(paths[k], &p) == 0, "\"%s\"", paths[k]);
        ck_assert_ptr_nonnull(p.run);
        ck_assert_ptr_nonnull(p.role);
        tf_ckpt_path_free(&p);
    }
}
END_TEST

/* ======================================================================== */
/* References through the writer                                            */
/* ======================================================================== */

#define SHIFT 8    /* chunks of 256 elements */
#define N 600      /* elements per tensor: 3 chunks */
#define MAX_FILES 24

/* A tensor of a checkpoint: its name, dtype, and the key of its values
 * (the name when NULL), so that one weight may change names. */
typedef struct {
    const char *name;
    unsigned dtype; /* TF_DT_F32 or TF_DT_BF16 */
    const char *key;
} tspec;

static char archive_path[TEST_PATH_MAX];
static struct {
    char dest[160];
    uint8_t *bytes;
    size_t len;
} added[MAX_FILES];
static size_t nadded;

static void setup(void)
{
    test_dir_make();
    test_path("a.traj", archive_path);
    nadded = 0;
}

static void teardown(void)
{
    for (size_t i = 0; i < nadded; i++)
        free(added[i].bytes);
    test_dir_remove();
}

/* The elements of weight `key` of `run` at `step`: values of magnitude
 * in [0.25, 1) and random sign, drifting a few ULPs each step, in F32 or
 * BF16 (each drifting on its own, so no chunk repeats). */
static void weight(const char *key, unsigned run, int step, unsigned dtype, uint8_t *out)
{
    rng_state = tf_hash64(key, strlen(key)) ^ ((uint64_t)run << 32);
    uint32_t base[N];
    for (int i = 0; i < N; i++) {
        float v = 0.25f + 0.75f * (float)(rng_next() % 1000000) / 1e6f;
        memcpy(&base[i], &v, 4);
        base[i] |= (uint32_t)(rng_next() & 1) << 31;
    }
    rng_state = tf_hash64(key, strlen(key)) ^ ((uint64_t)run << 32) ^ (uint64_t)step * 0x9e37;
    for (int i = 0; i < N; i++) {
        uint32_t drift = (uint32_t)(step * 4) + (uint32_t)(rng_next() % 3);
        if (dtype == TF_DT_F32)
            test_put_elem(out + 4 * i, 4, base[i] + drift);
        else
            test_put_elem(out + 2 * i, 2, (base[i] >> 16) + drift);
    }
}

/* Writes a safetensors file of the tensors (weights of run at step) and
 * adds it as dest, with parent (NULL: found by identity); the add's
 * result, the file remembered when it succeeds. */
static int try_add_ckpt(tf_writer *w, const char *dest, const tspec *t, size_t n, unsigned run,
                        int step, const char *parent, tf_error *e)
{
    static uint8_t data[8][N * 4];
    test_tensor tt[8];
    ck_assert_uint_le(n, 8);
    for (size_t i = 0; i < n; i++) {
        unsigned size = tf_dtype_get(t[i].dtype)->size;
        weight(t[i].key ? t[i].key : t[i].name, run, step, t[i].dtype, data[i]);
        tt[i] = (test_tensor){ t[i].name, tf_dtype_get(t[i].dtype)->name, "[600]", data[i], N * size };
    }
    char src[TEST_PATH_MAX];
    test_write_safetensors(test_path("src.safetensors", src), tt, n);
    if (tf_writer_add(w, src, dest, parent, e) < 0)
        return -1;
    ck_assert_uint_lt(nadded, MAX_FILES);
    snprintf(added[nadded].dest, sizeof added[nadded].dest, "%s", dest);
    added[nadded].bytes = test_read_whole_file(src, &added[nadded].len);
    nadded++;
    return 0;
}

static void add_ckpt(tf_writer *w, const char *dest, const tspec *t, size_t n, unsigned run,
                     int step, const char *parent)
{
    tf_error e = { 0 };
    ck_assert_msg(try_add_ckpt(w, dest, t, n, run, step, parent, &e) == 0, "adding %s: %s", dest,
                  e.msg);
}

static tf_writer *new_writer(void)
{
    return test_open_writer(archive_path, true, SHIFT, 1, TF_MAX_CHAIN_DEFAULT);
}

/* Where a file added as `from` now is (moves rename them). */
static void renamed(const char *from, const char *to)
{
    for (size_t i = 0; i < nadded; i++)
        if (strcmp(added[i].dest, from) == 0)
            snprintf(added[i].dest, sizeof added[i].dest, "%s", to);
}

/* Every file added reads back as its bytes: whole, and across the
 * header's end in a short read. */
static tf_archive *open_and_check_bytes(void)
{
    tf_archive *ar = NULL;
    tf_error e = { 0 };
    ck_assert_msg(tf_archive_open(archive_path, NULL, &ar, &e) == 0, "%s", e.msg);
    tf_reader_ctx *r = tf_reader_new(ar, 1 << 20);
    ck_assert_ptr_nonnull(r);
    for (size_t i = 0; i < nadded; i++) {
        const tf_entry *ent = tf_archive_lookup(ar, added[i].dest);
        ck_assert_msg(ent != NULL, "%s is not in the archive", added[i].dest);
        ck_assert_uint_eq(ent->size, added[i].len);
        uint8_t *got = malloc(added[i].len);
        ck_assert_ptr_nonnull(got);
        ssize_t n = tf_reader_pread(r, ent, 0, added[i].len, got, &e);
        ck_assert_msg(n == (ssize_t)added[i].len, "%s: %s", added[i].dest, e.msg);
        ck_assert_msg(memcmp(got, added[i].bytes, added[i].len) == 0, "%s reads back other bytes",
                      added[i].dest);
        uint64_t border = ent->tensors[0].file_off - 3;
        ck_assert_int_eq(tf_reader_pread(r, ent, border, 11, got, &e), 11);
        ck_assert_mem_eq(got, added[i].bytes + border, 11);
        free(got);
    }
    tf_reader_free(r);
    return ar;
}

static const tf_entry *lookup(const tf_archive *ar, const char *path)
{
    const tf_entry *ent = tf_archive_lookup(ar, path);
    ck_assert_msg(ent && tf_entry_is_tensor_file(ent), "%s is no tensor file in the archive", path);
    return ent;
}

static uint64_t tensor_index(const tf_entry *ent, const char *name)
{
    for (uint64_t t = 0; t < ent->ntensors; t++)
        if (strcmp(tf_tensor_name(ent, t), name) == 0)
            return t;
    ck_abort_msg("%s has no tensor \"%s\"", ent->path, name);
    return 0;
}

/* The name of the file whose chunk blob idx is, for messages. */
static const char *file_of_blob(const tf_archive *ar, uint64_t idx)
{
    for (size_t i = 0; i < tf_archive_nentries(ar); i++) {
        const tf_entry *x = tf_archive_entry(ar, i);
        for (uint64_t k = 0; tf_entry_is_tensor_file(x) && k < x->nchunks; k++)
            if (x->chunks[k] == idx)
                return x->path;
    }
    return "no tensor chunk";
}

/* Every chunk of tensor `name` of `path` and the same chunk of tensor
 * `ref_name` of `ref_path` are linked by a delta: one references the
 * other (a reference, or a reverse reference). With `forward`, the first
 * references the second. */
static void expect_link(const tf_archive *ar, const char *path, const char *name,
                        const char *ref_path, const char *ref_name, bool forward)
{
    const tf_entry *ent = lookup(ar, path), *ref = lookup(ar, ref_path);
    const tf_tensor_span *ts = &ent->tensors[tensor_index(ent, name)];
    const tf_tensor_span *rs = &ref->tensors[tensor_index(ref, ref_name)];
    uint64_t chunks = tf_chunk_count(ts->nbytes, tf_dtype_get(ts->dtype)->size, SHIFT);
    ck_assert_uint_eq(chunks, 3);
    for (uint64_t c = 0; c < chunks; c++) {
        uint64_t mine = ent->chunks[ts->first_chunk + c], theirs = ref->chunks[rs->first_chunk + c];
        const tf_blob b_rec = test_blob(ar, mine), *b = &b_rec, r_rec = test_blob(ar, theirs), *r = &r_rec;
        bool there = b->ref == theirs + 1, back = !forward && r->ref == mine + 1;
        ck_assert_msg(!(there || back) || tf_codec_get(there ? b->codec : r->codec)->delta,
                      "%s \"%s\" chunk %llu: a reference without a delta codec", path, name,
                      (unsigned long long)c);
        if (!there && !back)
            ck_abort_msg("%s \"%s\" chunk %llu references blob %llu of %s (and is referenced "
                         "by none of %s \"%s\"): expected a delta between them", path, name,
                         (unsigned long long)c, (unsigned long long)(b->ref - 1),
                         b->ref ? file_of_blob(ar, b->ref - 1) : "none", ref_path, ref_name);
    }
}

static void expect_ref(const tf_archive *ar, const char *path, const char *name,
                       const char *ref_path, const char *ref_name)
{
    expect_link(ar, path, name, ref_path, ref_name, true);
}

static void expect_linked(const tf_archive *ar, const char *path, const char *name,
                          const char *ref_path, const char *ref_name)
{
    expect_link(ar, path, name, ref_path, ref_name, false);
}

/* Tensor `name` of `path` is stored without reference. */
static void expect_standalone(const tf_archive *ar, const char *path, const char *name)
{
    const tf_entry *ent = lookup(ar, path);
    const tf_tensor_span *ts = &ent->tensors[tensor_index(ent, name)];
    uint64_t chunks = tf_chunk_count(ts->nbytes, tf_dtype_get(ts->dtype)->size, SHIFT);
    for (uint64_t c = 0; c < chunks; c++) {
        const tf_blob b_rec = test_blob(ar, ent->chunks[ts->first_chunk + c]), *b = &b_rec;
        ck_assert_msg(b->ref == 0, "%s \"%s\" chunk %llu is a delta", path, name,
                      (unsigned long long)c);
    }
}

/* A checkpoint sharded in two files, its tensors placed differently at
 * each step: each finds itself in an earlier checkpoint, whichever shard
 * holds it there. */
START_TEST(shards_reference_the_shard_holding_the_tensor)
{
    tf_writer *w = new_writer();
    const tspec one_a[] = { { "a", TF_DT_F32, NULL }, { "b", TF_DT_F32, NULL } };
    const tspec one_b[] = { { "c", TF_DT_F32, NULL }, { "d", TF_DT_F32, NULL } };
    const tspec two_a[] = { { "a", TF_DT_F32, NULL }, { "c", TF_DT_F32, NULL } };
    const tspec two_b[] = { { "b", TF_DT_F32, NULL }, { "d", TF_DT_F32, NULL } };
    add_ckpt(w, "out/checkpoint-100/model-00001-of-00002.safetensors", one_a, 2, 0, 1, NULL);
    add_ckpt(w, "out/checkpoint-100/model-00002-of-00002.safetensors", one_b, 2, 0, 1, NULL);
    for (int step = 2; step <= 4; step++) {
        char s1[96], s2[96];
        snprintf(s1, sizeof s1, "out/checkpoint-%d00/model-00001-of-00002.safetensors", step);
        snprintf(s2, sizeof s2, "out/checkpoint-%d00/model-00002-of-00002.safetensors", step);
        add_ckpt(w, s1, two_a, 2, 0, step, NULL);
        add_ckpt(w, s2, two_b, 2, 0, step, NULL);
    }
    tf_writer_close(w);
    tf_archive *ar = open_and_check_bytes();
    const char *c1a = "out/checkpoint-100/model-00001-of-00002.safetensors";
    const char *c1b = "out/checkpoint-100/model-00002-of-00002.safetensors";
    const char *c2a = "out/checkpoint-200/model-00001-of-00002.safetensors";
    const char *c2b = "out/checkpoint-200/model-00002-of-00002.safetensors";
    const char *c3a = "out/checkpoint-300/model-00001-of-00002.safetensors";
    const char *c4a = "out/checkpoint-400/model-00001-of-00002.safetensors";
    expect_standalone(ar, c4a, "a"); /* the newest */
    expect_standalone(ar, c4a, "c");
    expect_linked(ar, c2a, "a", c1a, "a");
    expect_linked(ar, c2a, "c", c1b, "c"); /* in the other shard file */
    expect_linked(ar, c2b, "b", c1a, "b");
    expect_linked(ar, c2b, "d", c1b, "d");
    expect_linked(ar, c3a, "a", c2a, "a");
    expect_linked(ar, c3a, "c", c2a, "c");
    expect_linked(ar, c4a, "a", c3a, "a");
    expect_linked(ar, c4a, "c", c3a, "c");
    tf_archive_close(ar);
}
END_TEST

/* A series whose tensor is F32 and BF16 in turn: the identity holds the
 * dtype, so each is linked to the step two back; a tensor that keeps its
 * dtype to the step before. */
START_TEST(dtype_change_looks_back_two)
{
    tf_writer *w = new_writer();
    for (int step = 1; step <= 4; step++) {
        const tspec t[] = { { "w", step % 2 ? TF_DT_F32 : TF_DT_BF16, NULL }, { "b", TF_DT_F32, NULL } };
        char dest[64];
        snprintf(dest, sizeof dest, "run/step-%d.safetensors", step);
        add_ckpt(w, dest, t, 2, 0, step, NULL);
    }
    tf_writer_close(w);
    tf_archive *ar = open_and_check_bytes();
    expect_linked(ar, "run/step-3.safetensors", "w", "run/step-1.safetensors", "w");
    expect_linked(ar, "run/step-4.safetensors", "w", "run/step-2.safetensors", "w");
    expect_linked(ar, "run/step-4.safetensors", "b", "run/step-3.safetensors", "b");
    tf_archive_close(ar);
}
END_TEST

/* torch.compile's "_orig_mod." and DistributedDataParallel's "module."
 * wrap names; the weight under them is the same. */
START_TEST(wrapper_prefixes_are_seen_through)
{
    tf_writer *w = new_writer();
    const tspec plain[] = { { "layer.w", TF_DT_F32, NULL } };
    const tspec compiled[] = { { "_orig_mod.layer.w", TF_DT_F32, "layer.w" } };
    const tspec both[] = { { "module._orig_mod.layer.w", TF_DT_F32, "layer.w" } };
    add_ckpt(w, "run/step-1.safetensors", plain, 1, 0, 1, NULL);
    add_ckpt(w, "run/step-2.safetensors", compiled, 1, 0, 2, NULL);
    add_ckpt(w, "run/step-3.safetensors", both, 1, 0, 3, NULL);
    add_ckpt(w, "run/step-4.safetensors", plain, 1, 0, 4, NULL);
    tf_writer_close(w);
    tf_archive *ar = open_and_check_bytes();
    expect_linked(ar, "run/step-2.safetensors", "_orig_mod.layer.w", "run/step-1.safetensors", "layer.w");
    expect_linked(ar, "run/step-3.safetensors", "module._orig_mod.layer.w", "run/step-2.safetensors",
                  "_orig_mod.layer.w");
    expect_linked(ar, "run/step-4.safetensors", "layer.w", "run/step-3.safetensors",
                  "module._orig_mod.layer.w");
    tf_archive_close(ar);
}
END_TEST

/* A sweep: two runs of one model, their checkpoints added interleaved.
 * Each is linked to its own history, the run's checkpoint before, not
 * to the file added just before. */
START_TEST(runs_of_a_sweep_keep_to_their_history)
{
    tf_writer *w = new_writer();
    const tspec t[] = { { "w", TF_DT_F32, NULL }, { "v", TF_DT_BF16, NULL } };
    for (int step = 1; step <= 5; step++)
        for (unsigned run = 1; run <= 2; run++) {
            char dest[64];
            snprintf(dest, sizeof dest, "run%u/step-%d.safetensors", run, step);
            add_ckpt(w, dest, t, 2, run, step, NULL);
        }
    tf_writer_close(w);
    tf_archive *ar = open_and_check_bytes();
    for (int step = 2; step <= 5; step++)
        for (unsigned run = 1; run <= 2; run++) {
            char dest[64], prev[64];
            snprintf(dest, sizeof dest, "run%u/step-%d.safetensors", run, step);
            snprintf(prev, sizeof prev, "run%u/step-%d.safetensors", run, step - 1);
            expect_linked(ar, dest, "w", prev, "w");
            expect_linked(ar, dest, "v", prev, "v");
        }
    tf_archive_close(ar);
}
END_TEST

/* The transformers Trainer writes tmp-checkpoint-N and renames it when
 * done: a file under the temporary name is checkpoint N of the run, and
 * stays in it once moved. */
START_TEST(temporary_checkpoint_is_of_the_run)
{
    tf_writer *w = new_writer();
    const tspec t[] = { { "w", TF_DT_F32, NULL } };
    add_ckpt(w, "out/checkpoint-1/model.safetensors", t, 1, 0, 1, NULL);
    add_ckpt(w, "out/checkpoint-2/model.safetensors", t, 1, 0, 2, NULL);
    add_ckpt(w, "out/tmp-checkpoint-3/model.safetensors", t, 1, 0, 3, NULL);
    tf_error e = { 0 };
    ck_assert_msg(tf_writer_move(w, "out/tmp-checkpoint-3", "out/checkpoint-3", &e) == 0, "%s", e.msg);
    renamed("out/tmp-checkpoint-3/model.safetensors", "out/checkpoint-3/model.safetensors");
    add_ckpt(w, "out/tmp-checkpoint-4/model.safetensors", t, 1, 0, 4, NULL);
    tf_writer_close(w);
    tf_archive *ar = open_and_check_bytes();
    expect_linked(ar, "out/checkpoint-3/model.safetensors", "w", "out/checkpoint-2/model.safetensors", "w");
    expect_linked(ar, "out/tmp-checkpoint-4/model.safetensors", "w", "out/checkpoint-3/model.safetensors",
               "w");
    tf_archive_close(ar);
}
END_TEST

/* Checkpoints added out of order: the nearest earlier one when there is
 * one, else the nearest later one, as a forward delta; only a checkpoint
 * newer than the others makes its reference a reverse delta. */
START_TEST(out_of_order_checkpoints_find_the_nearest)
{
    tf_writer *w = new_writer();
    const tspec t[] = { { "w", TF_DT_F32, NULL } };
    add_ckpt(w, "run/step-30.safetensors", t, 1, 0, 3, NULL);
    add_ckpt(w, "run/step-50.safetensors", t, 1, 0, 5, NULL);
    add_ckpt(w, "run/step-10.safetensors", t, 1, 0, 1, NULL);
    add_ckpt(w, "run/step-20.safetensors", t, 1, 0, 2, NULL);
    tf_writer_close(w);
    tf_archive *ar = open_and_check_bytes();
    expect_standalone(ar, "run/step-50.safetensors", "w");
    expect_ref(ar, "run/step-30.safetensors", "w", "run/step-50.safetensors", "w");
    expect_ref(ar, "run/step-10.safetensors", "w", "run/step-30.safetensors", "w");
    expect_ref(ar, "run/step-20.safetensors", "w", "run/step-10.safetensors", "w");
    tf_archive_close(ar);
}
END_TEST

/* A writer of an archive of format 2 reads the bodies of the files its
 * search weighs, not every file's: with the bodies of the checkpoints
 * far before the one added made unreadable, it adds it against the
 * checkpoint before (before, every body was read at the open, and the
 * first bad one failed it). With the checkpoint before's body
 * unreadable too, the add fails on it and leaves the archive as it was. */
START_TEST(a_writer_reads_the_nearest_bodies_only)
{
    test_format_version = TF_FORMAT_PAGES;
    tf_writer *w = new_writer();
    const tspec t[] = { { "w", TF_DT_F32, NULL } };
    char dest[64];
    for (int k = 1; k <= 12; k++) {
        snprintf(dest, sizeof dest, "run/step-%d.safetensors", k);
        add_ckpt(w, dest, t, 1, 0, k, NULL);
    }
    tf_writer_close(w);
    /* The bodies of steps 1 to 3 and 12, one byte of each flipped. */
    static const int flipped[] = { 1, 2, 3, 12 };
    tf_archive *ar = open_and_check_bytes();
    uint64_t at[4];
    uint8_t was[4];
    int fd = open(archive_path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    for (int i = 0; i < 4; i++) {
        snprintf(dest, sizeof dest, "run/step-%d.safetensors", flipped[i]);
        const tf_page_ref *body = &lookup(ar, dest)->body;
        ck_assert_uint_gt(body->len, 0);
        at[i] = body->off + body->len / 2;
        ck_assert_int_eq(pread(fd, &was[i], 1, (off_t)at[i]), 1);
        uint8_t bad = was[i] ^ 0x5a;
        ck_assert_int_eq(pwrite(fd, &bad, 1, (off_t)at[i]), 1);
    }
    tf_archive_close(ar);
    struct stat before, after;
    ck_assert_int_eq(fstat(fd, &before), 0);
    w = test_open_writer(archive_path, false, SHIFT, 1, TF_MAX_CHAIN_DEFAULT);
    tf_error e = { 0 };
    ck_assert_int_eq(try_add_ckpt(w, "run/step-13.safetensors", t, 1, 0, 13, NULL, &e), -1);
    ck_assert_msg(strstr(e.msg, "checksum") != NULL, "%s", e.msg);
    tf_writer_close(w);
    ck_assert_int_eq(fstat(fd, &after), 0);
    ck_assert_int_eq(after.st_size, before.st_size);
    /* Step 12 readable again: the add goes through. */
    ck_assert_int_eq(pwrite(fd, &was[3], 1, (off_t)at[3]), 1);
    w = test_open_writer(archive_path, false, SHIFT, 1, TF_MAX_CHAIN_DEFAULT);
    add_ckpt(w, "run/step-13.safetensors", t, 1, 0, 13, NULL);
    tf_writer_close(w);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(pwrite(fd, &was[i], 1, (off_t)at[i]), 1);
    close(fd);
    ar = open_and_check_bytes();
    expect_ref(ar, "run/step-12.safetensors", "w", "run/step-13.safetensors", "w");
    tf_archive_close(ar);
    test_format_version = 0;
}
END_TEST

/* Forgets a file added as dest (removed from the archive). */
static void forget(const char *dest)
{
    for (size_t i = 0; i < nadded; i++)
        if (strcmp(added[i].dest, dest) == 0) {
            free(added[i].bytes);
            added[i] = added[--nadded];
            return;
        }
    ck_abort_msg("%s was not added", dest);
}

/* Overwrites dest with a checkpoint of the tensors t, keeping its inode
 * number, as a writable mount does for a file opened with O_TRUNC. */
static void overwrite_ckpt(tf_writer *w, const char *dest, const tspec *t, size_t n, int step)
{
    uint64_t ino = lookup(tf_writer_archive(w), dest)->ino;
    forget(dest);
    char src[TEST_PATH_MAX];
    add_ckpt(w, "scratch.safetensors", t, n, 0, step, NULL); /* writes src */
    test_path("src.safetensors", src);
    int fd = open(src, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    tf_entry_attrs attrs = { .ino = ino, .mode = 0644 };
    tf_error e = { 0 };
    ck_assert_msg(tf_writer_add_fd(w, fd, dest, NULL, &attrs, &e) == 0, "%s: %s", dest, e.msg);
    close(fd);
    renamed("scratch.safetensors", dest);
    ck_assert_msg(tf_writer_remove(w, "scratch.safetensors", &e) == 0, "%s", e.msg);
}

/* A run thinned, a checkpoint renamed to a later step and two overwritten
 * in place with other tensors (more, then fewer): each tensor added finds
 * the nearest live checkpoint that holds it, where it now is, with its
 * tensors as they now are. */
START_TEST(thinned_moved_and_overwritten_checkpoints_find_the_nearest)
{
    tf_writer *w = new_writer();
    const tspec one[] = { { "w", TF_DT_F32, NULL } };
    const tspec two[] = { { "a", TF_DT_F32, NULL }, { "w", TF_DT_F32, NULL } };
    char dest[64];
    for (int step = 10; step <= 60; step += 10) {
        snprintf(dest, sizeof dest, "run/step-%d.safetensors", step);
        add_ckpt(w, dest, one, 1, 0, step, NULL);
    }
    tf_error e = { 0 };
    for (int step = 30; step <= 40; step += 10) {
        snprintf(dest, sizeof dest, "run/step-%d.safetensors", step);
        ck_assert_msg(tf_writer_remove(w, dest, &e) == 0, "%s", e.msg);
        forget(dest);
    }
    ck_assert_msg(tf_writer_move(w, "run/step-60.safetensors", "run/step-90.safetensors", &e) == 0,
                  "%s", e.msg);
    renamed("run/step-60.safetensors", "run/step-90.safetensors");
    overwrite_ckpt(w, "run/step-50.safetensors", two, 2, 50);
    add_ckpt(w, "run/step-35.safetensors", one, 1, 0, 35, NULL);
    add_ckpt(w, "run/step-70.safetensors", two, 2, 0, 70, NULL);
    overwrite_ckpt(w, "run/step-70.safetensors", one, 1, 70); /* fewer tensors */
    add_ckpt(w, "run/step-80.safetensors", one, 1, 0, 80, NULL);
    add_ckpt(w, "run/step-95.safetensors", one, 1, 0, 95, NULL);
    tf_writer_close(w);
    tf_archive *ar = open_and_check_bytes();
    expect_linked(ar, "run/step-35.safetensors", "w", "run/step-20.safetensors", "w");
    expect_linked(ar, "run/step-70.safetensors", "w", "run/step-50.safetensors", "w");
    expect_linked(ar, "run/step-80.safetensors", "w", "run/step-70.safetensors", "w");
    expect_linked(ar, "run/step-95.safetensors", "w", "run/step-90.safetensors", "w");
    tf_archive_close(ar);
}
END_TEST

/* Ranks' files of one step hold tensors of one name and shape: each
 * rank references its own file of the step before, not the rank added
 * last. */
START_TEST(ranks_reference_their_own_rank)
{
    tf_writer *w = new_writer();
    const tspec t[] = { { "flat", TF_DT_F32, NULL } };
    for (int step = 1; step <= 2; step++)
        for (unsigned rank = 0; rank < 2; rank++) {
            char dest[96];
            snprintf(dest, sizeof dest, "global_step%d/mp_rank_0%u_model_states.safetensors", step, rank);
            add_ckpt(w, dest, t, 1, rank, step, NULL);
        }
    tf_writer_close(w);
    tf_archive *ar = open_and_check_bytes();
    expect_linked(ar, "global_step2/mp_rank_00_model_states.safetensors", "flat",
               "global_step1/mp_rank_00_model_states.safetensors", "flat");
    expect_linked(ar, "global_step2/mp_rank_01_model_states.safetensors", "flat",
               "global_step1/mp_rank_01_model_states.safetensors", "flat");
    tf_archive_close(ar);
}
END_TEST

/* A file of its run whose tensors match nothing stored (renamed, or of
 * another model) is stored standalone, and the report says so; the
 * first file of a run and a matching one are not unmatched. */
START_TEST(unmatched_tensors_are_reported)
{
    tf_writer *w = new_writer();
    const tspec model[] = { { "a", TF_DT_F32, NULL }, { "b", TF_DT_BF16, NULL } };
    const tspec other[] = { { "x", TF_DT_F32, NULL }, { "y", TF_DT_BF16, NULL } };
    const tspec half[] = { { "a", TF_DT_F32, NULL }, { "z", TF_DT_F32, NULL } };
    add_ckpt(w, "run/step-1.safetensors", model, 2, 0, 1, NULL);
    const tf_add_report *r = tf_writer_last_report(w);
    ck_assert(r->tensor_file);
    ck_assert_uint_eq(r->tensor_bytes, N * 4 + N * 2);
    ck_assert_uint_eq(r->referenced_bytes, 0);
    ck_assert_uint_eq(r->run_files, 0);
    ck_assert(!tf_add_report_unmatched(r)); /* nothing to match yet */

    add_ckpt(w, "run/step-2.safetensors", other, 2, 0, 2, NULL);
    r = tf_writer_last_report(w);
    ck_assert_uint_eq(r->run_files, 1);
    ck_assert_uint_eq(r->referenced_bytes, 0);
    ck_assert(tf_add_report_unmatched(r));

    add_ckpt(w, "run/step-3.safetensors", model, 2, 0, 3, NULL);
    r = tf_writer_last_report(w);
    ck_assert_uint_eq(r->run_files, 2);
    ck_assert_uint_eq(r->referenced_bytes, r->tensor_bytes);
    ck_assert(!tf_add_report_unmatched(r));

    /* Half of the float bytes found a reference: not less than half. */
    add_ckpt(w, "run/step-4.safetensors", half, 2, 0, 4, NULL);
    r = tf_writer_last_report(w);
    ck_assert_uint_eq(r->referenced_bytes, N * 4);
    ck_assert_uint_eq(r->tensor_bytes, 2 * N * 4);
    ck_assert(!tf_add_report_unmatched(r));

    /* A file that is no tensor file. */
    char src[TEST_PATH_MAX];
    const char *notes = "lr 3e-4\n";
    test_write_file(test_path("notes.txt", src), notes, strlen(notes));
    test_add(w, src, "run/notes.txt");
    r = tf_writer_last_report(w);
    ck_assert(!r->tensor_file);
    ck_assert(!tf_add_report_unmatched(r));
    tf_writer_close(w);

    tf_archive *ar = open_and_check_bytes();
    expect_standalone(ar, "run/step-2.safetensors", "x");
    expect_standalone(ar, "run/step-2.safetensors", "y");
    expect_linked(ar, "run/step-3.safetensors", "a", "run/step-1.safetensors", "a");
    expect_linked(ar, "run/step-3.safetensors", "b", "run/step-1.safetensors", "b");
    expect_standalone(ar, "run/step-4.safetensors", "z");
    tf_archive_close(ar);
}
END_TEST

/* A parent given: its same-named tensors are the references, whatever
 * the run says; a tensor it lacks has none. */
START_TEST(parent_given_is_the_reference)
{
    tf_writer *w = new_writer();
    const tspec t[] = { { "w", TF_DT_F32, NULL }, { "v", TF_DT_F32, NULL } };
    const tspec t_new[] = { { "w", TF_DT_F32, NULL }, { "new", TF_DT_F32, "v" } };
    /* Weights of runs 1 and 2 in turn: a delta against the other run's
     * would not be chosen. */
    add_ckpt(w, "x/step-1.safetensors", t, 2, 1, 1, NULL);
    add_ckpt(w, "y/step-1.safetensors", t, 2, 2, 1, NULL);
    add_ckpt(w, "z/step-2.safetensors", t, 2, 2, 2, NULL); /* no run history: the latest added */
    add_ckpt(w, "z/step-3.safetensors", t_new, 2, 1, 3, "x/step-1.safetensors");
    add_ckpt(w, "z/step-4.safetensors", t, 2, 2, 4, "z/step-2.safetensors");
    tf_error e = { 0 };
    char src[TEST_PATH_MAX];
    test_path("src.safetensors", src);
    ck_assert_int_eq(tf_writer_add(w, src, "z/bad.safetensors", "x", &e), -1);
    ck_assert_msg(strstr(e.msg, "parent \"x\" is not a tensor file"), "%s", e.msg);
    ck_assert_int_eq(tf_writer_add(w, src, "z/bad.safetensors", "nowhere", &e), -1);
    tf_writer_close(w);
    tf_archive *ar = open_and_check_bytes();
    ck_assert_ptr_null(tf_archive_lookup(ar, "z/bad.safetensors"));
    expect_ref(ar, "z/step-2.safetensors", "w", "y/step-1.safetensors", "w");
    expect_ref(ar, "z/step-3.safetensors", "w", "x/step-1.safetensors", "w");
    expect_standalone(ar, "z/step-3.safetensors", "new");
    /* Not the nearest checkpoint of its run (step 3): the parent. */
    expect_ref(ar, "z/step-4.safetensors", "w", "z/step-2.safetensors", "w");
    expect_ref(ar, "z/step-4.safetensors", "v", "z/step-2.safetensors", "v");
    tf_archive_close(ar);
}
END_TEST

/* ======================================================================== */
/* Reference chains                                                         */
/* ======================================================================== */

/* The chunks of tensor "w" of `path`. */
static void w_chunks(const tf_archive *ar, const char *path, const uint64_t **chunks, uint64_t *n)
{
    const tf_entry *ent = lookup(ar, path);
    const tf_tensor_span *ts = &ent->tensors[tensor_index(ent, "w")];
    *chunks = ent->chunks + ts->first_chunk;
    *n = tf_chunk_count(ts->nbytes, tf_dtype_get(ts->dtype)->size, SHIFT);
}

/* The step that step k of a series of `steps` added in order with
 * max_chain n references (trajpack(1), REFERENCE CHAINS), or 0 for a
 * keyframe: the newest; the first n are reverse deltas against the next;
 * step n + 1 and every 2n + 1'th after it are kept; after each kept one,
 * n forward deltas against the one before, then n reverse ones. */
static int reference_of(int k, int steps, int n)
{
    if (k == steps)
        return 0;
    if (k <= n)
        return k + 1;
    int j = (k - n - 1) % (2 * n + 1); /* place after the last kept one */
    return j == 0 ? 0 : j <= n ? k - 1 : k + 1;
}

/* Checkpoints added in order with max_chain N: after each add, every
 * checkpoint is a keyframe or a delta as reference_of says, so that no
 * chain is longer than N; every file reads back, and a writer opening
 * the archive again carries on alike. */
static void check_chains(unsigned max_chain, int steps)
{
    tf_writer *w = test_open_writer(archive_path, true, SHIFT, 1, max_chain);
    const tspec t[] = { { "w", TF_DT_F32, NULL } };
    for (int step = 1; step <= steps; step++) {
        char dest[64];
        snprintf(dest, sizeof dest, "run/step-%d.safetensors", step);
        add_ckpt(w, dest, t, 1, 0, step, NULL);
        const tf_archive *ar = tf_writer_archive(w);
        for (int k = 1; k <= step; k++) {
            const uint64_t *chunks;
            uint64_t n;
            snprintf(dest, sizeof dest, "run/step-%d.safetensors", k);
            w_chunks(ar, dest, &chunks, &n);
            bool keyframe = reference_of(k, step, (int)max_chain) == 0;
            for (uint64_t c = 0; c < n; c++) {
                unsigned depth = tf_archive_chain_depth(ar, chunks[c]);
                ck_assert_uint_le(depth, max_chain);
                ck_assert_msg((depth == 0) == keyframe, "max_chain %u, %d added: step %d chunk "
                              "%llu has a chain of %u", max_chain, step, k,
                              (unsigned long long)c, depth);
            }
        }
    }
    tf_writer_close(w);
    tf_archive *ar = open_and_check_bytes();
    for (int k = 1; k < steps; k++) {
        int ref = reference_of(k, steps, (int)max_chain);
        char dest[64], refd[64];
        snprintf(dest, sizeof dest, "run/step-%d.safetensors", k);
        snprintf(refd, sizeof refd, "run/step-%d.safetensors", ref);
        if (ref)
            expect_ref(ar, dest, "w", refd, "w");
    }
    tf_archive_close(ar);
}

static const struct {
    unsigned max_chain;
    int steps;
} chain_cases[] = {
    { 1, 3 }, { 1, 8 }, { 2, 17 }, { 16, 20 }, { 16, 3 },
};

START_TEST(chains_are_bounded)
{
    check_chains(chain_cases[_i].max_chain, chain_cases[_i].steps);
}
END_TEST

static Suite *refs_suite(void)
{
    Suite *s = suite_create("refs");
    TCase *paths = tcase_create("paths");
    tcase_add_loop_test(paths, ckpt_path_parses_run_step_role, 0, ARRAY_LEN(path_cases));
    tcase_add_loop_test(paths, ckpt_path_groups_runs, 0, ARRAY_LEN(pair_cases));
    tcase_add_test(paths, ckpt_path_takes_any_path);
    suite_add_tcase(s, paths);


    TCase *w = tcase_create("writer");
    tcase_set_timeout(w, 120);
    tcase_add_checked_fixture(w, setup, teardown);
    tcase_add_test(w, shards_reference_the_shard_holding_the_tensor);
    tcase_add_test(w, dtype_change_looks_back_two);
    tcase_add_test(w, wrapper_prefixes_are_seen_through);
    tcase_add_test(w, runs_of_a_sweep_keep_to_their_history);
    tcase_add_test(w, temporary_checkpoint_is_of_the_run);
    tcase_add_test(w, out_of_order_checkpoints_find_the_nearest);
    tcase_add_test(w, a_writer_reads_the_nearest_bodies_only);
    tcase_add_test(w, thinned_moved_and_overwritten_checkpoints_find_the_nearest);
    tcase_add_test(w, ranks_reference_their_own_rank);
    tcase_add_test(w, unmatched_tensors_are_reported);
    tcase_add_test(w, parent_given_is_the_reference);
    tcase_add_loop_test(w, chains_are_bounded, 0, ARRAY_LEN(chain_cases));
    suite_add_tcase(s, w);
    return s;
}

int main(void)
{
    return run_suite(refs_suite());
}
