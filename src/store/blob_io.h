/* A blob's stored bytes (its payload), read from the archive file and
 * checked: the one way the reader, gc and the statistics get them. */
#ifndef TRAJFS_STORE_BLOB_IO_H
#define TRAJFS_STORE_BLOB_IO_H

#include "common/buf.h"
#include "common/error.h"
#include "format/catalog.h"
#include "store/archive.h"

/* Reads the enc_len bytes of blob b at its offset in ar into out (which
 * then holds them alone) and checks them against the blob's checksum
 * (enc_hash): EIO when they are damaged, ENOMEM. The message does not
 * name the blob: the caller prefixes what its users know it by (its
 * index, the file or tensor it belongs to). */
int tf_blob_read_payload(tf_archive *ar, const tf_blob *b, tf_buf *out, tf_error *e);

/* Payloads that will be read soon, gathered to be hinted together
 * (tf_blob_hints_send), so that one hint covers what a commit laid out
 * side by side: a chunk's payload and its model, the chunks of
 * neighbouring tensors. Hinted one by one, the 2,000 payloads of a cold
 * load of step 25's weights took 3,977 system calls, which perf put at
 * 8.8% of the daemon's CPU; in batches, 1,539. */
#define TF_BLOB_HINTS_MAX 64
typedef struct {
    tf_archive_range r[TF_BLOB_HINTS_MAX];
    size_t n;
} tf_blob_hints;

/* Adds b's payload to h, sending what h holds first when it is full. */
void tf_blob_hints_add(tf_archive *ar, tf_blob_hints *h, const tf_blob *b);
/* Tells the kernel that the payloads in h will be read soon, in ranges
 * sorted and, for a local archive, merged where they share a page, and
 * empties h: the kernel starts reading them into the page cache (a
 * remote archive: fetches them with the next read that fetches, side by
 * side) and the call returns at once, so that the blobs of a reference
 * chain, scattered over as many commits, are read side by side instead
 * of one dependent read after the other. A hint: failure changes
 * nothing. */
void tf_blob_hints_send(tf_archive *ar, tf_blob_hints *h);

#endif
