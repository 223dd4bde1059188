/* Space coming back after removals: liveness, the rebase of chunks whose
 * references only removed files had, punched gaps, and that content only
 * a dead blob had is stored again rather than deduplicated against it. */
#include <check.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testlib.h"

#include "common/dtype.h"
#include "store/commit.h"
#include "store/liveness.h"
#include "store/reader.h"
#include "store/reclaim.h"
#include "store/writer.h"

#define CHUNK_SHIFT 14        /* chunks of 16384 elements */
#define N_ELEMS (5 * 16384 + 77) /* six chunks a tensor, the last short */
#define N_STEPS 6

static uint16_t weights[2][N_ELEMS];

/* Checkpoint k of a run: two BF16 tensors, a few ULPs from step k-1. */
static void write_step(int k)
{
    if (k == 1)
        for (int t = 0; t < 2; t++)
            for (int i = 0; i < N_ELEMS; i++)
                weights[t][i] = (uint16_t)(0x3c00 + rng_next() % 0x800 - 0x400);
    else
        for (int t = 0; t < 2; t++)
            for (int i = 0; i < N_ELEMS; i++)
                weights[t][i] = (uint16_t)(weights[t][i] + rng_next() % 7 - 3);
    const test_tensor ts[] = {
        { "a", "BF16", "[" "81997" "]", weights[0], sizeof weights[0] },
        { "b", "BF16", "[" "81997" "]", weights[1], sizeof weights[1] },
    };
    char name[64], path[TEST_PATH_MAX];
    snprintf(name, sizeof name, "step-%d.safetensors", k);
    test_write_safetensors(test_path(name, path), ts, ARRAY_LEN(ts));
}

static const char *archive(void)
{
    static char path[TEST_PATH_MAX];
    return test_path("run.traj", path);
}

/* Writes step k and adds it as run/step-K.safetensors. */
static void add_step(tf_writer *w, int k)
{
    write_step(k);
    char name[64], src[TEST_PATH_MAX], dest[80];
    snprintf(name, sizeof name, "step-%d.safetensors", k);
    snprintf(dest, sizeof dest, "run/%s", name);
    test_add(w, test_path(name, src), dest);
}

/* An archive of steps 1..N_STEPS as run/step-K.safetensors (reverse
 * references: each step a delta against the next, the newest whole). */
static void make_run(void)
{
    rng_state = 0x51ed2701u;
    tf_writer *w = test_open_writer(archive(), true, CHUNK_SHIFT, 2, 16);
    for (int k = 1; k <= N_STEPS; k++)
        add_step(w, k);
    tf_writer_close(w);
}

static uint64_t allocated(void)
{
    struct stat st;
    ck_assert_int_eq(stat(archive(), &st), 0);
    return (uint64_t)st.st_blocks * 512;
}

static void remove_steps(const int *steps, size_t n)
{
    tf_writer *w = test_open_writer(archive(), false, CHUNK_SHIFT, 2, 16);
    for (size_t i = 0; i < n; i++) {
        char dest[80];
        snprintf(dest, sizeof dest, "run/step-%d.safetensors", steps[i]);
        tf_error e = { 0 };
        ck_assert_msg(tf_writer_remove(w, dest, &e) == 0, "%s", e.msg);
    }
    tf_writer_close(w);
}

static tf_archive *open_run(void)
{
    tf_archive *ar = NULL;
    tf_error e = { 0 };
    ck_assert_msg(tf_archive_open(archive(), NULL, &ar, &e) == 0, "%s", e.msg);
    return ar;
}

/* Every file of the archive reads back as its source, byte for byte. */
static void expect_files(tf_archive *ar, size_t nfiles)
{
    tf_reader_ctx *r = tf_reader_new(ar, 0);
    size_t files = 0;
    for (size_t i = 0; i < tf_archive_nentries(ar); i++) {
        const tf_entry *ent = tf_archive_entry(ar, i);
        if (!tf_entry_is_regular(ent))
            continue;
        char path[TEST_PATH_MAX];
        size_t n;
        uint8_t *want = test_read_whole_file(test_path(strrchr(ent->path, '/') + 1, path), &n);
        uint8_t *got = malloc(n ? n : 1);
        tf_error e = { 0 };
        ck_assert_uint_eq(ent->size, n);
        ck_assert_msg(tf_reader_pread(r, ent, 0, n, got, &e) == (ssize_t)n, "%s: %s", ent->path,
                      e.msg);
        ck_assert_msg(memcmp(got, want, n) == 0, "%s differs", ent->path);
        free(got);
        free(want);
        files++;
    }
    ck_assert_uint_eq(files, nfiles);
    tf_reader_free(r);
}

/* No live file's chunk is a delta against a slot that no live file has
 * as a chunk: the chains in between were rebased away. */
static void expect_no_dead_references(tf_archive *ar)
{
    tf_error e = { 0 };
    uint8_t *live = tf_liveness(ar, NULL, &e);
    ck_assert_msg(live != NULL, "%s", e.msg);
    for (uint64_t s = 0; s < tf_archive_nblobs(ar); s++) {
        uint64_t ref = test_blob(ar, s).ref;
        if ((live[s] & TF_LIVE_CHUNK) && ref)
            ck_assert_msg(live[ref - 1] & TF_LIVE_CHUNK,
                          "slot %llu is a delta against slot %llu, which no file has",
                          (unsigned long long)s, (unsigned long long)(ref - 1));
    }
    free(live);
}

START_TEST(liveness_follows_references)
{
    make_run();
    tf_archive *ar = open_run();
    tf_error e = { 0 };
    bool *dropped = calloc(tf_archive_nentries(ar), sizeof *dropped);
    long newest = tf_archive_find(ar, "run/step-6.safetensors");
    long oldest = tf_archive_find(ar, "run/step-1.safetensors");
    ck_assert(newest >= 0 && oldest >= 0);
    /* All but the oldest step dropped: its chunks are deltas down a
     * chain to the newest, whose chunks are needed, not kept. */
    for (size_t i = 0; i < tf_archive_nentries(ar); i++)
        dropped[i] = (long)i != oldest;
    uint8_t *live = tf_liveness(ar, dropped, &e);
    ck_assert_msg(live != NULL, "%s", e.msg);
    const tf_entry *o = tf_archive_entry(ar, (size_t)oldest);
    const tf_entry *n = tf_archive_entry(ar, (size_t)newest);
    uint64_t needed_only = 0;
    for (uint64_t c = 0; c < o->nchunks; c++)
        ck_assert_uint_eq(live[o->chunks[c]], TF_LIVE_CHUNK | TF_LIVE_NEEDED);
    for (uint64_t c = 0; c < n->nchunks; c++)
        needed_only += live[n->chunks[c]] == TF_LIVE_NEEDED;
    ck_assert_uint_gt(needed_only, 0);
    /* The newest alone dropped: nothing references it but deltas of the
     * others, which stay, so every slot the others need stays needed. */
    uint64_t before, after;
    ck_assert_int_eq(tf_liveness_payload_bytes(ar, live, &before, &e), 0);
    for (size_t i = 0; i < tf_archive_nentries(ar); i++)
        dropped[i] = false;
    free(live);
    live = tf_liveness(ar, dropped, &e);
    ck_assert_int_eq(tf_liveness_payload_bytes(ar, live, &after, &e), 0);
    ck_assert_uint_gt(after, before);
    free(live);
    free(dropped);
    tf_archive_close(ar);
}
END_TEST

/* The bytes the disk holds of a fresh archive of the steps given. */
static uint64_t fresh_archive(const int *steps, size_t n)
{
    char path[TEST_PATH_MAX];
    test_path("fresh.traj", path);
    tf_writer *w = test_open_writer(path, true, CHUNK_SHIFT, 2, 16);
    for (size_t i = 0; i < n; i++) {
        char name[64], src[TEST_PATH_MAX], dest[80];
        snprintf(name, sizeof name, "step-%d.safetensors", steps[i]);
        snprintf(dest, sizeof dest, "run/%s", name);
        test_add(w, test_path(name, src), dest);
    }
    tf_writer_close(w);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    return (uint64_t)st.st_blocks * 512;
}

/* Whether the archive has a hole (space given back) within the whole
 * blocks of [off, off + len). */
static bool hole_within(uint64_t off, uint64_t len)
{
    uint64_t from = (off + TF_PUNCH_BLOCK - 1) / TF_PUNCH_BLOCK * TF_PUNCH_BLOCK;
    uint64_t to = (off + len) / TF_PUNCH_BLOCK * TF_PUNCH_BLOCK;
    int fd = open(archive(), O_RDONLY);
    ck_assert_int_ge(fd, 0);
    off_t hole = lseek(fd, (off_t)from, SEEK_HOLE);
    close(fd);
    return from < to && hole >= 0 && (uint64_t)hole < to;
}

/* With commit_behind a commit is written behind (its trailer durable once
 * the next commit, or settling, has waited for it), and what it retired
 * (the keyframes of the step it superseded) comes back only after: none
 * of it before settling, all of it then. */
START_TEST(space_comes_back_once_a_trailer_is_durable)
{
    rng_state = 0x51ed2701u;
    tf_write_opts o;
    tf_write_opts_default(&o);
    o.commit_behind = true;
    tf_writer *w = NULL;
    tf_error e = { 0 };
    ck_assert_msg(tf_writer_open(archive(), true, CHUNK_SHIFT, &o, &w, &e) == 0, "%s", e.msg);
    const tf_archive *ar = tf_writer_archive(w);
    const tf_container *ct = tf_archive_container(tf_writer_archive(w));
    add_step(w, 1);
    ck_assert(ct->trailer_unsynced);
    add_step(w, 2);
    ck_assert(ct->trailer_unsynced);
    /* the retired payloads, joined where they follow each other: the
     * runs whose whole blocks are given back */
    size_t n, runs = 0;
    const tf_archive_range *retired = tf_archive_retired(ar, &n);
    ck_assert_uint_gt(n, 0);
    tf_archive_range *r = malloc(n * sizeof *r);
    memcpy(r, retired, n * sizeof *r);
    tf_archive_ranges_sort(r, n);
    for (size_t i = 0; i < n; i++) {
        if (runs && r[runs - 1].off + r[runs - 1].len == r[i].off)
            r[runs - 1].len += r[i].len;
        else
            r[runs++] = r[i];
    }
    bool whole_blocks = false;
    for (size_t i = 0; i < runs; i++) {
        ck_assert_msg(!hole_within(r[i].off, r[i].len), "run %zu given back early", i);
        whole_blocks |= r[i].len >= 2 * TF_PUNCH_BLOCK;
    }
    ck_assert(whole_blocks);
    ck_assert_msg(tf_writer_settle(w, &e) == 0, "%s", e.msg);
    ck_assert(!ct->trailer_unsynced);
    for (size_t i = 0; i < runs; i++)
        ck_assert_msg(r[i].len < 2 * TF_PUNCH_BLOCK || hole_within(r[i].off, r[i].len),
                      "run %zu of %llu bytes not given back", i, (unsigned long long)r[i].len);
    free(r);
    tf_writer_close(w);
    tf_archive *reopened = open_run();
    expect_files(reopened, 2);
    tf_archive_close(reopened);
}
END_TEST

START_TEST(removal_rebases_and_gives_back)
{
    make_run();
    uint64_t before = allocated();
    const int middle[] = { 2, 3, 4, 5 }, kept[] = { 1, 6 };
    remove_steps(middle, ARRAY_LEN(middle));
    uint64_t after = allocated(), fresh = fresh_archive(kept, ARRAY_LEN(kept));
    /* About as small as the kept files stored afresh: but for the
     * partial blocks at the edges of what was given back (payloads here
     * are a few blocks each) and the catalogs of 14 commits. */
    ck_assert_msg(after < before && after <= fresh + fresh / 4,
                  "allocated %llu -> %llu bytes; a fresh archive of the kept steps: %llu",
                  (unsigned long long)before, (unsigned long long)after,
                  (unsigned long long)fresh);
    tf_archive *ar = open_run();
    expect_files(ar, 2);
    expect_no_dead_references(ar);
    tf_archive_close(ar);
    /* Nothing left for gc to rebase. */
    tf_reclaim_stats st;
    tf_error e = { 0 };
    ck_assert_msg(tf_reclaim(archive(), NULL, false, &st, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(st.rebase.chunks, 0);
    ck_assert_uint_le(st.allocated_after, after);
    ar = open_run();
    expect_files(ar, 2);
    tf_archive_close(ar);
}
END_TEST

/* With chains of one, step 2 is a keyframe that step 1 (a reverse
 * delta) and step 3 (a forward one) are deltas against. Once it is
 * removed, neither has a live reference: one of them becomes the
 * keyframe, the other a delta against it, not a keyframe each. */
START_TEST(orphans_of_a_removed_keyframe_share_one)
{
    rng_state = 0x51ed2701u;
    tf_writer *w = test_open_writer(archive(), true, CHUNK_SHIFT, 2, 1);
    for (int k = 1; k <= 4; k++)
        add_step(w, k);
    tf_writer_close(w);
    const int keyframe[] = { 2 };
    remove_steps(keyframe, ARRAY_LEN(keyframe));
    tf_archive *ar = open_run();
    expect_files(ar, 3);
    expect_no_dead_references(ar);
    const tf_entry *a = tf_archive_lookup(ar, "run/step-1.safetensors");
    const tf_entry *b = tf_archive_lookup(ar, "run/step-3.safetensors");
    ck_assert(a && b && a->nchunks == b->nchunks);
    uint64_t pairs = 0;
    for (uint64_t c = 0; c < a->nchunks; c++) {
        const tf_blob x_rec = test_blob(ar, a->chunks[c]), *x = &x_rec;
        const tf_blob y_rec = test_blob(ar, b->chunks[c]), *y = &y_rec;
        /* (a tensor's short last chunk is a keyframe in every step) */
        if (x->dtype != TF_DT_BF16 || x->raw_len < 2u << CHUNK_SHIFT)
            continue;
        ck_assert_msg(x->ref == b->chunks[c] + 1 ? !y->ref : y->ref == a->chunks[c] + 1 && !x->ref,
                      "chunk %llu: step 1's references %llu, step 3's %llu",
                      (unsigned long long)c, (unsigned long long)x->ref,
                      (unsigned long long)y->ref);
        ck_assert_uint_le(tf_archive_chain_depth(ar, a->chunks[c]), 1);
        ck_assert_uint_le(tf_archive_chain_depth(ar, b->chunks[c]), 1);
        pairs++;
    }
    ck_assert_uint_eq(pairs, 10); /* five whole chunks of each of two tensors */
    tf_archive_close(ar);
}
END_TEST

/* The rebased chunks of a tensor, as many as make 64 KiB (two here),
 * share one ULP model, as the writer's small chunks of a tensor do: a
 * model each would cost about as much as the small chunks' deltas. */
START_TEST(rebased_chunks_of_a_tensor_share_a_model)
{
    make_run();
    const int middle[] = { 2, 3, 4, 5 };
    remove_steps(middle, ARRAY_LEN(middle));
    tf_archive *ar = open_run();
    expect_files(ar, 2);
    const tf_entry *oldest = tf_archive_lookup(ar, "run/step-1.safetensors");
    ck_assert(oldest);
    uint64_t deltas = 0, models = 0, last_model = 0;
    for (uint64_t c = 0; c < oldest->nchunks; c++) {
        const tf_blob b_rec = test_blob(ar, oldest->chunks[c]), *b = &b_rec;
        if (!b->ref)
            continue;
        ck_assert_uint_ne(b->model, 0);
        deltas++;
        models += b->model != last_model;
        last_model = b->model;
    }
    /* five whole chunks a tensor: runs of two, two and one */
    ck_assert_uint_eq(deltas, 10);
    ck_assert_uint_eq(models, 6);
    tf_archive_close(ar);
}
END_TEST

/* The content of a removed step, added again by the writer that removed
 * it, is stored again: the slots that had it are dead, their bytes given
 * back, and would read as zeros. */
START_TEST(dead_content_is_stored_again)
{
    make_run();
    tf_writer *w = test_open_writer(archive(), false, CHUNK_SHIFT, 2, 16);
    tf_archive *ar = tf_writer_archive(w);
    const tf_entry *old = tf_archive_lookup(ar, "run/step-3.safetensors");
    tf_error e = { 0 };
    /* A writer reads a body when it needs it. */
    ck_assert_msg(tf_archive_entry_body(ar, old, &e) == 0, "%s", e.msg);
    uint64_t nold = old->nchunks, *old_chunks = malloc(nold * sizeof *old_chunks);
    memcpy(old_chunks, old->chunks, nold * sizeof *old_chunks);
    /* The writer looks content up before the removal: its id index is
     * built, and must forget the slots the removal leaves dead. */
    tf_blob old0 = test_blob(ar, old_chunks[0]);
    ck_assert_int_ge(tf_archive_find_blob(ar, &old0.id), 0);
    ck_assert_msg(tf_writer_remove(w, "run/step-3.safetensors", &e) == 0, "%s", e.msg);
    uint8_t *live = tf_liveness(ar, NULL, &e);
    ck_assert_msg(live != NULL, "%s", e.msg);
    uint64_t dead = 0;
    for (uint64_t c = 0; c < nold; c++)
        dead += !(live[old_chunks[c]] & TF_LIVE_NEEDED);
    ck_assert_uint_gt(dead, 0);
    char src[TEST_PATH_MAX];
    test_add(w, test_path("step-3.safetensors", src), "run/step-3.safetensors");
    const tf_entry *ent = tf_archive_lookup(ar, "run/step-3.safetensors");
    ck_assert_ptr_nonnull(ent);
    for (uint64_t c = 0; c < ent->nchunks; c++)
        for (uint64_t k = 0; k < nold; k++)
            ck_assert_msg(ent->chunks[c] != old_chunks[k] || (live[old_chunks[k]] & TF_LIVE_NEEDED),
                          "chunk %llu stored as dead slot %llu", (unsigned long long)c,
                          (unsigned long long)old_chunks[k]);
    free(live);
    free(old_chunks);
    tf_writer_close(w);
    ar = open_run();
    expect_files(ar, N_STEPS);
    tf_archive_close(ar);
}
END_TEST

/* Chains through removed files count no more: with a chain bound of 5,
 * step 6 ends a chain of 5 deltas (steps 1 to 5), so a step 7 would
 * leave it a keyframe; once steps 1 to 4 are gone, step 6 becomes a
 * delta against step 7, as in a fresh archive of steps 5, 6 and 7. */
START_TEST(removed_chains_do_not_bound_new_ones)
{
    make_run();
    tf_writer *w = test_open_writer(archive(), false, CHUNK_SHIFT, 2, 5);
    tf_archive *ar = tf_writer_archive(w);
    const tf_entry *six = tf_archive_lookup(ar, "run/step-6.safetensors");
    tf_error e = { 0 };
    /* A writer counts the chains of the files it encodes against (of
     * the chunks their own commit made: the header chunk is step 1's). */
    ck_assert_msg(tf_archive_use_reference(ar, six, &e) == 0, "%s", e.msg);
    uint64_t top = 0; /* the longest chain ending at one of its tensors' chunks */
    for (uint64_t c = six->verbatim_chunks; c < six->nchunks; c++)
        if (tf_archive_chain_above(ar, six->chunks[c]) > top)
            top = tf_archive_chain_above(ar, six->chunks[c]);
    ck_assert_uint_eq(top, 5);
    for (int k = 1; k <= 4; k++) {
        char dest[80];
        snprintf(dest, sizeof dest, "run/step-%d.safetensors", k);
        ck_assert_msg(tf_writer_remove(w, dest, &e) == 0, "%s", e.msg);
    }
    six = tf_archive_lookup(ar, "run/step-6.safetensors");
    write_step(7);
    char src[TEST_PATH_MAX];
    test_add(w, test_path("step-7.safetensors", src), "run/step-7.safetensors");
    uint64_t deltas = 0;
    for (uint64_t c = 0; c < six->nchunks; c++)
        deltas += test_blob(ar, six->chunks[c]).ref != 0;
    ck_assert_msg(deltas * 2 > six->nchunks, "%llu of %llu chunks of step 6 are deltas",
                  (unsigned long long)deltas, (unsigned long long)six->nchunks);
    tf_writer_close(w);
    ar = open_run();
    expect_files(ar, 3);
    tf_archive_close(ar);
}
END_TEST

/* Removes steps in one commit made below the writer, which rebases
 * nothing (as a writer that died after the commit, or an earlier
 * release, left it). */
static void remove_without_rebase(const int *steps, size_t n)
{
    tf_archive *ar = NULL;
    tf_error e = { 0 };
    ck_assert_msg(tf_archive_open(archive(), &(tf_open_opts){ .writable = true }, &ar, &e) == 0,
                  "%s", e.msg);
    tf_write_opts opts;
    tf_write_opts_default(&opts);
    _Atomic uint64_t next_ino = tf_archive_next_ino(ar);
    tf_commit c;
    tf_commit_begin(&c, ar, &opts, &next_ino);
    for (size_t i = 0; i < n; i++) {
        char dest[80];
        snprintf(dest, sizeof dest, "run/step-%d.safetensors", steps[i]);
        ck_assert_msg(tf_commit_remove(&c, dest, &e) == 0, "%s", e.msg);
    }
    ck_assert_msg(tf_commit_finish(&c, &e) == 0, "%s", e.msg);
    tf_archive_close(ar);
}

/* What a rebase told the write options' hooks. */
typedef struct {
    unsigned starts;
    uint64_t chunks, bytes; /* said when it started */
    uint64_t progress;      /* the bytes of the chunks stored since */
} rebase_seen;

static void seen_rebasing(void *arg, uint64_t chunks, uint64_t bytes)
{
    rebase_seen *s = arg;
    s->starts++;
    s->chunks = chunks;
    s->bytes = bytes;
}

static void seen_progress(void *arg, uint64_t bytes)
{
    ((rebase_seen *)arg)->progress += bytes;
}

START_TEST(gc_rebases_what_a_removal_left)
{
    make_run();
    const int middle[] = { 2, 4 };
    remove_without_rebase(middle, ARRAY_LEN(middle));
    tf_reclaim_stats st;
    tf_error e = { 0 };
    rebase_seen seen = { 0 };
    tf_write_opts o;
    tf_write_opts_default(&o);
    o.rebasing = seen_rebasing;
    o.progress = seen_progress;
    o.progress_arg = &seen;
    ck_assert_msg(tf_reclaim(archive(), &o, false, &st, &e) == 0, "%s", e.msg);
    ck_assert_uint_gt(st.rebase.chunks, 0);
    /* The hooks saw it start once, with what it then stored. */
    ck_assert_uint_eq(seen.starts, 1);
    ck_assert_uint_eq(seen.chunks, st.rebase.chunks);
    ck_assert_uint_gt(seen.bytes, 0);
    ck_assert_uint_eq(seen.progress, seen.bytes);
    ck_assert_uint_lt(st.allocated_after, st.allocated_before);
    tf_archive *ar = open_run();
    expect_files(ar, N_STEPS - 2);
    expect_no_dead_references(ar);
    tf_archive_close(ar);
}
END_TEST

static int by_off_then_len(const void *a, const void *b)
{
    const tf_archive_range *x = a, *y = b;
    if (x->off != y->off)
        return x->off < y->off ? -1 : 1;
    return x->len < y->len ? -1 : x->len > y->len;
}

/* Sorting ranges by offset: in order after, the same ranges, whatever
 * runs in order the input holds (none, one, a few with strays between
 * them as redirects leave, equal offsets). */
START_TEST(ranges_sort_by_offset)
{
    const size_t sizes[] = { 0, 1, 2, 3, 17, 1000, 4099 };
    rng_state = 0x7a11;
    for (size_t k = 0; k < ARRAY_LEN(sizes); k++)
        for (int shape = 0; shape < 5; shape++) {
            size_t n = sizes[k];
            tf_archive_range *r = malloc((n ? n : 1) * sizeof *r);
            tf_archive_range *want = malloc((n ? n : 1) * sizeof *want);
            ck_assert(r && want);
            for (size_t i = 0; i < n; i++) {
                uint64_t off = shape == 0 ? i * 10                      /* in order */
                               : shape == 1 ? (n - i) * 10              /* reversed */
                               : shape == 2 ? rng_next() % 1000000      /* random */
                               : shape == 3 ? (i % 97 ? i * 10 : rng_next() % (10 * n + 1))
                                            : rng_next() % 4;           /* equal offsets */
                r[i] = (tf_archive_range){ off, rng_next() % 100 };
            }
            memcpy(want, r, n * sizeof *r);
            tf_archive_ranges_sort(r, n);
            for (size_t i = 1; i < n; i++)
                ck_assert_msg(r[i - 1].off <= r[i].off, "n %zu, shape %d: out of order at %zu", n,
                              shape, i);
            qsort(want, n, sizeof *want, by_off_then_len);
            qsort(r, n, sizeof *r, by_off_then_len);
            ck_assert_msg(n == 0 || memcmp(r, want, n * sizeof *r) == 0,
                          "n %zu, shape %d: other ranges after sorting", n, shape);
            free(r);
            free(want);
        }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("reclaim");
    TCase *tc = tcase_create("reclaim");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, test_dir_make, test_dir_remove);
    tcase_add_test(tc, ranges_sort_by_offset);
    tcase_add_test(tc, liveness_follows_references);
    tcase_add_test(tc, space_comes_back_once_a_trailer_is_durable);
    tcase_add_test(tc, removal_rebases_and_gives_back);
    tcase_add_test(tc, orphans_of_a_removed_keyframe_share_one);
    tcase_add_test(tc, rebased_chunks_of_a_tensor_share_a_model);
    tcase_add_test(tc, dead_content_is_stored_again);
    tcase_add_test(tc, gc_rebases_what_a_removal_left);
    tcase_add_test(tc, removed_chains_do_not_bound_new_ones);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
