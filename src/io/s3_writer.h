/* The single writer of an archive in object storage (s3://BUCKET/KEY,
 * written in segments: io/segments.h), as the bytes of an archive
 * (io/io.h).
 *
 * Reads of what is published go to a remote reader of the segments
 * (io/remote.h); what is appended is staged in a spool file on local
 * disk (unlinked from its creation: a killed writer leaves nothing
 * there) and read back from it. A commit's bytes upload as they come:
 * in parts of a multipart upload (8 MiB, then 64 MiB after the
 * thousandth; up to UPLOADS_MAX at once, each part retried as a read
 * is), or in one PUT when the commit is smaller than a part. publish
 * makes them the segment at the archive's end, by a request that
 * creates it only where no object is (If-None-Match: *): one whole
 * commit, seen by readers at once, or nothing; of two writers on the
 * same tail, the second one's publish fails (EBUSY) and leaves the
 * archive as the first made it. A publish whose response was lost and
 * whose retry finds the segment there checks that the segment is its
 * own (its size and last bytes).
 *
 * A store that ignores If-None-Match (s3rver; stores before 2024) would
 * let a second writer overwrite a published commit: lock finds out (a
 * conditional create of KEY/writer-check, twice) and refuses to write
 * there, unless the setting s3_unconditional says that one writer at a
 * time is the user's to ensure.
 *
 * For trajpack gc (store/regenerate.h), seal creates the seal after the
 * generation's last segment (io/segments.h): from then on no commit is
 * made there (EBUSY when one came first; a seal there already is an
 * interrupted gc's, which this one finishes); replace uploads a whole
 * archive as the next generation, in one object, created only where
 * none is, then deletes every object of the older generations. A
 * sealed generation takes no commit: the first append says so.
 *
 * Garbage: a killed writer's multipart upload stays in the bucket until
 * aborted. lock aborts those whose segment lies inside the archive
 * (their tail was published by another commit, so they can never
 * complete): at most the uploads on the newest tail are ever left. */
#ifndef TRAJFS_IO_S3_WRITER_H
#define TRAJFS_IO_S3_WRITER_H

#include <stddef.h>

#include "common/error.h"
#include "io/io.h"
#include "io/remote_opts.h"

/* Opens the archive at url (s3://) for writing; o NULL: the defaults. */
int tf_s3_writer_open(const char *url, const tf_remote_opts *o, tf_io **out, tf_error *e);

/* Creates the archive at url holding the len bytes (its superblock) as
 * its first segment: EEXIST when an archive (in segments, or one object
 * at the key) is there. */
int tf_s3_writer_create(const char *url, const tf_remote_opts *o, const void *bytes, size_t len,
                        tf_error *e);

#endif
