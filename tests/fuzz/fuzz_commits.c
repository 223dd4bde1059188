/* The structure-aware archive target: the input is the commits, written
 * here through the container's own writer (so the superblock, trailer
 * and catalog checksums are right) with each blob's payload checksum set
 * to match the bytes it points at. Mutations then reach what the
 * checksums guard in tf_fuzz_archive: applying catalog segments,
 * reference and model links, decoding payloads within the reader. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/hash.h"
#include "format/catalog.h"
#include "format/container.h"
#include "fuzz_targets.h"

static char scratch_dir[200], scratch_file[256];

static void remove_scratch(void)
{
    unlink(scratch_file);
    rmdir(scratch_dir);
}

/* The archive file, in a directory of its own on a file system where
 * fsync costs nothing (/dev/shm), else in TMPDIR; removed at exit. */
static const char *scratch_path(tf_error *e)
{
    if (scratch_file[0])
        return scratch_file;
    const char *tmp = getenv("TMPDIR");
    snprintf(scratch_dir, sizeof scratch_dir, "%s/tf-fuzz-XXXXXX",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : tmp ? tmp : "/tmp");
    if (!mkdtemp(scratch_dir)) {
        tf_fail(e, errno, "mkdtemp: %s", strerror(errno));
        return NULL;
    }
    snprintf(scratch_file, sizeof scratch_file, "%s/a.traj", scratch_dir);
    atexit(remove_scratch);
    return scratch_file;
}

/* Sets the payload checksum of each blob of the segment whose payload
 * lies in the file; the segment is re-encoded into out. -1 when it does
 * not decode (it is then committed as it is). */
static int fix_checksums(tf_container *c, const uint8_t *p, size_t len, uint64_t first_blob,
                         uint64_t file_end, tf_buf *out, uint64_t *nblobs)
{
    tf_segment seg;
    if (tf_segment_decode(p, len, first_blob, c->chunk_shift, file_end, &seg, NULL) < 0)
        return -1;
    tf_buf payload = { 0 };
    for (uint64_t i = 0; i < seg.nblobs; i++) {
        tf_blob *b = &seg.blobs[i];
        payload.len = 0;
        uint8_t *q = tf_buf_reserve(&payload, b->enc_len);
        if (q && tf_container_pread(c, b->offset, q, b->enc_len, NULL) == 0)
            b->enc_hash = tf_hash64(q, b->enc_len);
    }
    out->len = 0;
    int rc = tf_segment_encode(&seg, out, NULL);
    *nblobs = first_blob + seg.nblobs;
    tf_buf_free(&payload);
    tf_segment_free(&seg);
    return rc;
}

/* Appends the commits of the input to the open container. */
static int write_commits(tf_container *c, tf_cursor *in, tf_error *e)
{
    uint64_t nblobs = 0;
    tf_buf fixed = { 0 };
    int rc = 0;
    while (rc == 0 && tf_cursor_left(in) > 0) {
        uint32_t n = tf_read_u32(in);
        const uint8_t *blobs = tf_read_bytes(in, n);
        uint32_t m = tf_read_u32(in);
        const uint8_t *seg = tf_read_bytes(in, m);
        if (!blobs || !seg)
            break; /* a torn last record: the commits so far */
        uint64_t off = c->end, after = nblobs;
        if (n)
            rc = tf_container_append(c, blobs, n, &off, e);
        /* The segment's blobs may lie in what was just appended. */
        bool decoded = rc == 0 && fix_checksums(c, seg, m, nblobs, off + n, &fixed, &after) == 0;
        if (rc == 0)
            rc = decoded ? tf_container_commit(c, fixed.data, fixed.len, after, TF_COMMIT_DURABLE,
                                               NULL, e)
                         : tf_container_commit(c, seg, m, nblobs, TF_COMMIT_DURABLE, NULL, e);
        if (!decoded)
            break; /* opening stops at this commit anyway */
        nblobs = after;
    }
    tf_buf_free(&fixed);
    return rc;
}

int tf_fuzz_commits(const uint8_t *data, size_t size, tf_error *e)
{
    const char *path = scratch_path(e);
    if (!path || size < 1)
        return path ? tf_fail(e, EINVAL, "not a commits input") : -1;
    unsigned shift = TF_CHUNK_SHIFT_MIN + data[0] % (TF_CHUNK_SHIFT_MAX - TF_CHUNK_SHIFT_MIN + 1);
    unlink(path);
    tf_container c;
    tf_open_opts writable = { .writable = true };
    if (tf_container_create(path, NULL, shift, TF_FORMAT_SEGMENTS, e) < 0 || tf_container_open(&c, path, &writable, e) < 0)
        return -1;
    tf_cursor in = tf_cursor_make(data + 1, size - 1);
    int rc = write_commits(&c, &in, e);
    tf_container_close(&c);
    return rc < 0 ? -1 : tf_fuzz_read_archive(path, e);
}
