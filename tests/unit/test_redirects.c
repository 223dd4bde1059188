/* Redirects (format/catalog.h) through a whole archive: segments built
 * by hand and committed as real archives. A valid redirect serves its
 * slot by the new blob, from the open and from a refresh of a view
 * opened before it; redirects no writer makes (another content, a slot
 * not earlier, a loop through redirects, a chain past TF_CHAIN_MAX, a
 * slot redirected twice, a model's slot or a slot serving another) are
 * refused with EIO and a message, by an open and by a refresh, which
 * then leaves the view as it was. test_catalog.c checks the segment
 * decoder alone. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

#include "codec/codec.h"
#include "common/dtype.h"
#include "common/hash.h"
#include "format/catalog.h"
#include "format/container.h"
#include "store/archive.h"
#include "store/reader.h"

#define SHIFT 8                       /* 256 elements per chunk */
#define CHUNK 512                     /* one BF16 chunk */
#define PAYLOAD_AT TF_SUPERBLOCK_SIZE /* the first appended byte */

static char archive_path[TEST_PATH_MAX];

/* Two checkpoints' chunk, A and B (B a few ULPs from A), and the ULP
 * deltas of each against the other with their models, laid out one
 * after the other in `payload`, appended before the first commit. */
static uint8_t chunk_a[CHUNK], chunk_b[CHUNK];
static tf_buf payload;
static size_t at_a, at_b, at_model_a, at_delta_a, at_model_b, at_delta_b;
static size_t len_model_a, len_delta_a, len_model_b, len_delta_b;

static size_t put(const void *p, size_t len)
{
    size_t at = payload.len;
    ck_assert_int_eq(tf_buf_put(&payload, p, len), 0);
    return at;
}

/* Appends the ULP delta of src against ref and its model. */
static void put_delta(const uint8_t *src, const uint8_t *ref, size_t *at_model, size_t *len_model,
                      size_t *at_delta, size_t *len_delta)
{
    const tf_codec *ulp = tf_codec_get(TF_CODEC_ULP);
    tf_codec_ctx ctx = { .dtype = TF_DT_BF16, .ref = ref, .ref_len = CHUNK };
    tf_buf model = { 0 }, out = { 0 };
    tf_error e = { 0 };
    ck_assert_msg(ulp->fit(src, CHUNK, &ctx, &model, &e) == 0, "%s", e.msg);
    ctx.model = model.data;
    ctx.model_len = model.len;
    ck_assert_msg(ulp->encode(src, CHUNK, &ctx, &out, &e) == 0, "%s", e.msg);
    *at_model = put(model.data, model.len);
    *len_model = model.len;
    *at_delta = put(out.data, out.len);
    *len_delta = out.len;
    tf_buf_free(&model);
    tf_buf_free(&out);
}

static void setup(void)
{
    test_dir_make();
    test_path("a.traj", archive_path);
    rng_state = 0x7ed1ec75ull;
    for (size_t i = 0; i < CHUNK; i += 2) {
        uint16_t a = (uint16_t)(0x3c00 + rng_next() % 0x400), b = (uint16_t)(a + rng_next() % 5 - 2);
        memcpy(chunk_a + i, &a, 2);
        memcpy(chunk_b + i, &b, 2);
    }
    payload.len = 0;
    at_a = put(chunk_a, CHUNK);
    at_b = put(chunk_b, CHUNK);
    put_delta(chunk_a, chunk_b, &at_model_a, &len_model_a, &at_delta_a, &len_delta_a);
    put_delta(chunk_b, chunk_a, &at_model_b, &len_model_b, &at_delta_b, &len_delta_b);
}

static void teardown(void)
{
    tf_buf_free(&payload);
    test_dir_remove();
}

/* ---- blobs ---- */

/* Stored as it is: the payload bytes [at, at + len). */
static tf_blob raw_blob(size_t at, size_t len, uint8_t dtype)
{
    return (tf_blob){ .id = tf_blob_id_of(payload.data + at, len), .offset = PAYLOAD_AT + at,
                      .enc_len = len, .raw_len = len,
                      .enc_hash = tf_hash64(payload.data + at, len),
                      .codec = TF_CODEC_RAW, .dtype = dtype };
}

/* The content `of` (a chunk) as a ULP delta: its payload at `at`, the
 * reference and the model slots given. */
static tf_blob delta_blob(const uint8_t *of, size_t at, size_t len, uint64_t ref_slot,
                          uint64_t model_slot)
{
    tf_blob b = raw_blob(at, len, TF_DT_BF16);
    b.id = tf_blob_id_of(of, CHUNK);
    b.raw_len = CHUNK;
    b.codec = TF_CODEC_ULP;
    b.ref = ref_slot + 1;
    b.model = model_slot + 1;
    return b;
}

/* ---- a history of commits ---- */

/* Commit 1: slot 0 = A and slot 1 = B, keyframes. Commit 2 re-encodes A
 * as a delta against B: slot 2 = its model, slot 3 = the delta, and
 * slot 0 redirected to slot 3. A third commit, where a case adds one. */
typedef struct {
    tf_segment seg[3];
    tf_blob blobs[3][4];
    tf_redirect redirects[3][2];
    size_t nsegs;
} history;

static void make_history(history *h)
{
    *h = (history){ .nsegs = 2 };
    h->blobs[0][0] = raw_blob(at_a, CHUNK, TF_DT_BF16);
    h->blobs[0][1] = raw_blob(at_b, CHUNK, TF_DT_BF16);
    h->seg[0] = (tf_segment){ .first_blob = 0, .nblobs = 2, .blobs = h->blobs[0] };
    h->blobs[1][0] = raw_blob(at_model_a, len_model_a, TF_DT_NONE);
    h->blobs[1][1] = delta_blob(chunk_a, at_delta_a, len_delta_a, 1, 2);
    h->redirects[1][0] = (tf_redirect){ 0, 3 };
    h->seg[1] = (tf_segment){ .first_blob = 2, .nblobs = 2, .blobs = h->blobs[1],
                              .nredirects = 1, .redirects = h->redirects[1] };
}

/* Adds a third commit of one blob, b, and the redirect of slot to it. */
static void third_commit(history *h, tf_blob b, uint64_t slot)
{
    h->blobs[2][0] = b;
    h->redirects[2][0] = (tf_redirect){ slot, 4 };
    h->seg[2] = (tf_segment){ .first_blob = 4, .nblobs = 1, .blobs = h->blobs[2],
                              .nredirects = 1, .redirects = h->redirects[2] };
    h->nsegs = 3;
}

/* Commits segs[from..to) through c. */
static void commit_through(tf_container *c, const tf_segment *segs, size_t from, size_t to)
{
    tf_error e = { 0 };
    tf_buf enc = { 0 };
    for (size_t k = from; k < to; k++) {
        enc.len = 0;
        ck_assert_int_eq(tf_segment_encode(&segs[k], &enc, NULL), 0);
        ck_assert_msg(tf_container_commit(c, enc.data, enc.len, segs[k].first_blob + segs[k].nblobs,
                                          TF_COMMIT_DURABLE, NULL, &e) == 0,
                      "%s", e.msg);
    }
    tf_buf_free(&enc);
}

static void open_writable(tf_container *c)
{
    tf_error e = { 0 };
    tf_open_opts writable = { .writable = true };
    ck_assert_msg(tf_container_open(c, archive_path, &writable, &e) == 0, "%s", e.msg);
}

/* Commits segs[from..to) to the archive, which exists. */
static void commit_segments(const tf_segment *segs, size_t from, size_t to)
{
    tf_container c;
    open_writable(&c);
    commit_through(&c, segs, from, to);
    tf_container_close(&c);
}

/* A new archive of the payload (appended before the first commit) and
 * the first n segments. */
static void write_archive(const tf_segment *segs, size_t n)
{
    tf_error e = { 0 };
    unlink(archive_path);
    ck_assert_msg(tf_container_create(archive_path, NULL, SHIFT, TF_FORMAT_SEGMENTS, &e) == 0, "%s", e.msg);
    tf_container c;
    open_writable(&c);
    uint64_t off;
    ck_assert_int_eq(tf_container_append(&c, payload.data, payload.len, &off, &e), 0);
    ck_assert_uint_eq(off, PAYLOAD_AT);
    commit_through(&c, segs, 0, n);
    tf_container_close(&c);
}

static tf_archive *open_as(bool writer)
{
    tf_archive *ar = NULL;
    tf_error e = { 0 };
    tf_open_opts o = { .writable = writer };
    ck_assert_msg(tf_archive_open(archive_path, &o, &ar, &e) == 0, "%s", e.msg);
    return ar;
}

static tf_archive *open_ok(void)
{
    return open_as(false);
}

/* Slot idx of ar reads back as the chunk want. */
static void expect_slot(tf_archive *ar, uint64_t idx, const uint8_t *want)
{
    tf_reader_ctx *r = tf_reader_new(ar, 0);
    ck_assert_ptr_nonnull(r);
    uint8_t got[CHUNK];
    tf_error e = { 0 };
    ck_assert_msg(tf_reader_blob(r, idx, got, &e) == 0, "slot %llu: %s",
                  (unsigned long long)idx, e.msg);
    ck_assert_mem_eq(got, want, CHUNK);
    tf_reader_free(r);
}

/* The message is one line of printable text saying `want`, for EIO. */
static void expect_refusal(const tf_error *e, const char *want)
{
    ck_assert_int_eq(e->errnum, EIO);
    ck_assert_msg(strstr(e->msg, want) != NULL, "expected \"%s\" in: %s", want, e->msg);
    for (const char *c = e->msg; *c; c++)
        ck_assert_msg((unsigned char)*c >= 0x20 && *c != 0x7f,
                      "the message holds control character 0x%02x: %s", *c, e->msg);
}

/* The archive of h is refused by an open, with a message naming the
 * archive and saying want; and a view opened before h's last commit
 * refuses it on refresh and stays as it was, reading slot 0 as A. */
static void expect_refused(const history *h, const char *want)
{
    write_archive(h->seg, h->nsegs);
    tf_archive *ar = NULL;
    tf_error e = { 0 };
    int rc = tf_archive_open(archive_path, NULL, &ar, &e);
    if (rc == 0)
        tf_archive_close(ar);
    ck_assert_msg(rc == -1, "opened an archive that should say \"%s\"", want);
    ck_assert_msg(strncmp(e.msg, archive_path, strlen(archive_path)) == 0,
                  "the message does not name the archive: %s", e.msg);
    expect_refusal(&e, want);

    write_archive(h->seg, h->nsegs - 1);
    ar = open_ok();
    uint64_t commits = tf_archive_commits(ar), nblobs = tf_archive_nblobs(ar);
    tf_blob slot0 = test_blob(ar, 0);
    commit_segments(h->seg, h->nsegs - 1, h->nsegs);
    bool changed = true;
    e = (tf_error){ 0 };
    ck_assert_int_eq(tf_archive_refresh(ar, NULL, &changed, &e), -1);
    expect_refusal(&e, want);
    ck_assert(!changed);
    ck_assert_uint_eq(tf_archive_commits(ar), commits);
    ck_assert_uint_eq(tf_archive_nblobs(ar), nblobs);
    ck_assert_uint_eq(test_blob(ar, 0).offset, slot0.offset);
    ck_assert_uint_eq(test_blob(ar, 0).codec, slot0.codec);
    expect_slot(ar, 0, chunk_a);
    tf_archive_close(ar);
}

/* ---- a valid redirect ---- */

/* What commit 2 makes of slot 0: A served by the delta, one delta deep,
 * A's keyframe payload retired (its range kept by a writer's archive
 * only); B unchanged. */
static void expect_redirected(tf_archive *ar, bool writer)
{
    ck_assert_uint_eq(tf_archive_nblobs(ar), 4);
    const tf_blob b_rec = test_blob(ar, 0), *b = &b_rec;
    ck_assert_uint_eq(b->codec, TF_CODEC_ULP);
    ck_assert_uint_eq(b->offset, PAYLOAD_AT + at_delta_a);
    ck_assert_uint_eq(tf_archive_chain_depth(ar, 0), 1);
    ck_assert_uint_eq(tf_archive_chain_depth(ar, 1), 0);
    size_t n;
    const tf_archive_range *r = tf_archive_retired(ar, &n);
    ck_assert_uint_eq(n, writer);
    if (writer) {
        ck_assert_uint_eq(r[0].off, PAYLOAD_AT + at_a);
        ck_assert_uint_eq(r[0].len, CHUNK);
    }
    ck_assert_uint_eq(tf_archive_retired_bytes(ar), CHUNK);
    expect_slot(ar, 0, chunk_a);
    expect_slot(ar, 1, chunk_b);
    expect_slot(ar, 3, chunk_a);
}

START_TEST(redirect_serves_the_slot)
{
    history h;
    make_history(&h);
    write_archive(h.seg, 2);
    for (int writer = 0; writer <= 1; writer++) {
        tf_archive *ar = open_as(writer);
        expect_redirected(ar, writer);
        tf_archive_close(ar);
    }
}
END_TEST

/* A view opened before commit 2 reads A from the keyframe, then, once
 * refreshed, from the delta (the keyframe is still there to compare:
 * these archives give nothing back). */
START_TEST(refresh_applies_a_redirect)
{
    history h;
    make_history(&h);
    write_archive(h.seg, 1);
    tf_archive *ar = open_ok();
    ck_assert_uint_eq(test_blob(ar, 0).codec, TF_CODEC_RAW);
    expect_slot(ar, 0, chunk_a);
    commit_segments(h.seg, 1, 2);
    bool changed = false;
    tf_error e = { 0 };
    ck_assert_msg(tf_archive_refresh(ar, NULL, &changed, &e) == 0, "%s", e.msg);
    ck_assert(changed);
    expect_redirected(ar, false);
    tf_archive_close(ar);
}
END_TEST

/* A rebase (version 3) serves slot 0, a delta since commit 2, by a
 * keyframe again: the delta's payload is retired in turn. */
START_TEST(version_3_redirects_a_slot_again)
{
    history h;
    make_history(&h);
    third_commit(&h, raw_blob(at_a, CHUNK, TF_DT_BF16), 0);
    h.seg[2].redirects_again = true;
    write_archive(h.seg, 3);
    tf_archive *ar = open_as(true);
    ck_assert_uint_eq(test_blob(ar, 0).codec, TF_CODEC_RAW);
    ck_assert_uint_eq(tf_archive_chain_depth(ar, 0), 0);
    size_t n; /* those of the last commit */
    const tf_archive_range *r = tf_archive_retired(ar, &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_uint_eq(r[0].off, PAYLOAD_AT + at_delta_a);
    ck_assert_uint_eq(r[0].len, len_delta_a);
    ck_assert_uint_eq(tf_archive_retired_bytes(ar), CHUNK + len_delta_a);
    expect_slot(ar, 0, chunk_a);
    expect_slot(ar, 1, chunk_b);
    bool again = false;
    ck_assert(tf_archive_may_redirect(ar, 0, &again));
    ck_assert(again);
    ck_assert(!tf_archive_may_redirect(ar, 2, &again)); /* a model */
    ck_assert(!tf_archive_may_redirect(ar, 3, &again)); /* serves slot 0 */
    tf_archive_close(ar);
}
END_TEST

/* ---- redirects no writer makes ---- */

static void other_id(history *h) { h->blobs[1][1].id.b[0] ^= 1; }
static void other_length(history *h)
{
    h->blobs[1][1] = raw_blob(at_a, CHUNK / 2, TF_DT_BF16);
    h->blobs[1][1].id = tf_blob_id_of(chunk_a, CHUNK);
}
static void other_dtype(history *h) { h->blobs[1][1] = raw_blob(at_a, CHUNK, TF_DT_F16); }
static void slot_of_its_own_commit(history *h) { h->redirects[1][0].slot = 2; }
static void to_an_earlier_blob(history *h) { h->redirects[1][0] = (tf_redirect){ 1, 0 }; }
/* The delta of A references A's slot, which the redirect makes it. */
static void loop_of_one(history *h) { h->blobs[1][1].ref = 0 + 1; }
/* A against B and B against A, both redirected. */
static void loop_of_two(history *h)
{
    h->blobs[1][2] = raw_blob(at_model_b, len_model_b, TF_DT_NONE);
    h->blobs[1][3] = delta_blob(chunk_b, at_delta_b, len_delta_b, 0, 4);
    h->seg[1].nblobs = 4;
    h->redirects[1][1] = (tf_redirect){ 1, 5 };
    h->seg[1].nredirects = 2;
}
static void twice_in_one_commit(history *h)
{
    h->blobs[1][2] = h->blobs[1][1];
    h->seg[1].nblobs = 3;
    h->redirects[1][1] = (tf_redirect){ 0, 4 };
    h->seg[1].nredirects = 2;
}
static void again_in_a_later_commit(history *h) { third_commit(h, h->blobs[1][1], 0); }
static void slot_serving_another(history *h) { third_commit(h, h->blobs[1][1], 3); }
static void slot_of_a_model(history *h) { third_commit(h, h->blobs[1][0], 2); }
/* Version 3 redirects a slot again, and nothing else that version 2
 * refuses. */
static void serving_another_in_version_3(history *h)
{
    slot_serving_another(h);
    h->seg[2].redirects_again = true;
}
static void model_in_version_3(history *h)
{
    slot_of_a_model(h);
    h->seg[2].redirects_again = true;
}
/* Commit 2 names A's slot as a model and redirects it (to a raw copy). */
static void slot_named_a_model_by_its_commit(history *h)
{
    h->blobs[1][0] = raw_blob(at_a, CHUNK, TF_DT_BF16);
    h->blobs[1][1] = delta_blob(chunk_b, at_delta_b, len_delta_b, 1, 0);
    h->redirects[1][0] = (tf_redirect){ 0, 2 };
}

static const struct {
    const char *why;
    void (*change)(history *h);
    const char *message;
} cases[] = {
    { "another id", other_id, "blob 0 redirected to a blob of other content" },
    { "another length", other_length, "blob 0 redirected to a blob of other content" },
    { "another dtype", other_dtype, "blob 0 redirected to a blob of other content" },
    { "a slot of its own commit", slot_of_its_own_commit, "not an earlier commit's" },
    { "a redirect to an earlier blob", to_an_earlier_blob, "redirected to a blob not of its segment" },
    { "a loop of one delta", loop_of_one, "reference chain longer than 4096" },
    { "a loop of two deltas", loop_of_two, "reference chain longer than 4096" },
    { "a slot twice in one commit", twice_in_one_commit, "blob 0 redirected twice" },
    { "a slot again in a later commit", again_in_a_later_commit, "blob 0 is a model, serves another or was redirected" },
    { "a slot serving another", slot_serving_another, "blob 3 is a model, serves another or was redirected" },
    { "a model's slot", slot_of_a_model, "blob 2 is a model, serves another or was redirected" },
    { "a slot serving another, in version 3", serving_another_in_version_3,
      "blob 3 is a model, serves another or was redirected" },
    { "a model's slot, in version 3", model_in_version_3,
      "blob 2 is a model, serves another or was redirected" },
    { "a slot its own commit names a model", slot_named_a_model_by_its_commit,
      "blob 0 is a model, serves another or was redirected" },
};

START_TEST(bad_redirect_is_refused)
{
    history h;
    make_history(&h);
    cases[_i].change(&h);
    expect_refused(&h, cases[_i].message);
}
END_TEST

/* ---- chains through a redirect ---- */

/* Commit 1: A, B, and a chain of n deltas on A (empty payloads: opening
 * reads none); commit 2 redirects A to its delta against B, so that the
 * chain's top is n + 1 deltas deep. */
static void write_chain_then_redirect(uint64_t n, bool last_commit)
{
    tf_blob *b = calloc(n + 2, sizeof *b);
    ck_assert_ptr_nonnull(b);
    b[0] = raw_blob(at_a, CHUNK, TF_DT_BF16);
    b[1] = raw_blob(at_b, CHUNK, TF_DT_BF16);
    for (uint64_t i = 0; i < n; i++) {
        b[2 + i] = b[0];
        b[2 + i].codec = TF_CODEC_ULP;
        b[2 + i].enc_len = 0;
        b[2 + i].ref = i ? 2 + i : 1; /* the previous delta, or A */
        b[2 + i].id.b[0] ^= 1;        /* content other than A's */
    }
    tf_blob second[2] = { raw_blob(at_model_a, len_model_a, TF_DT_NONE),
                          delta_blob(chunk_a, at_delta_a, len_delta_a, 1, n + 2) };
    tf_redirect r = { 0, n + 3 };
    tf_segment segs[2] = {
        { .first_blob = 0, .nblobs = n + 2, .blobs = b },
        { .first_blob = n + 2, .nblobs = 2, .blobs = second, .nredirects = 1, .redirects = &r },
    };
    if (last_commit)
        commit_segments(segs, 1, 2);
    else
        write_archive(segs, 1);
    free(b);
}

START_TEST(chain_through_a_redirect_at_the_bound)
{
    write_chain_then_redirect(TF_CHAIN_MAX - 1, false);
    write_chain_then_redirect(TF_CHAIN_MAX - 1, true);
    tf_archive *ar = open_ok();
    ck_assert_uint_eq(tf_archive_chain_depth(ar, TF_CHAIN_MAX), TF_CHAIN_MAX);
    expect_slot(ar, 0, chunk_a);
    tf_archive_close(ar);
}
END_TEST

START_TEST(chain_through_a_redirect_past_the_bound)
{
    const char *want = "makes a reference chain longer than 4096";
    write_chain_then_redirect(TF_CHAIN_MAX, false);
    tf_archive *ar = open_ok(); /* the chain alone is at the bound */
    write_chain_then_redirect(TF_CHAIN_MAX, true);
    bool changed = true;
    tf_error e = { 0 };
    ck_assert_int_eq(tf_archive_refresh(ar, NULL, &changed, &e), -1);
    expect_refusal(&e, want);
    ck_assert(!changed);
    ck_assert_uint_eq(tf_archive_chain_depth(ar, TF_CHAIN_MAX + 1), TF_CHAIN_MAX);
    expect_slot(ar, 0, chunk_a);
    tf_archive_close(ar);
    e = (tf_error){ 0 };
    ck_assert_int_eq(tf_archive_open(archive_path, NULL, &ar, &e), -1);
    expect_refusal(&e, want);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("redirects");
    TCase *tc = tcase_create("redirects");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, redirect_serves_the_slot);
    tcase_add_test(tc, refresh_applies_a_redirect);
    tcase_add_test(tc, version_3_redirects_a_slot_again);
    tcase_add_loop_test(tc, bad_redirect_is_refused, 0, ARRAY_LEN(cases));
    tcase_add_test(tc, chain_through_a_redirect_at_the_bound);
    tcase_add_test(tc, chain_through_a_redirect_past_the_bound);
    suite_add_tcase(s, tc);
    return run_suite(s);
}
