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

/* Tells the kernel that the payload of b will be read soon: it starts
 * reading it into the page cache (a remote archive: fetches it with the
 * next read that fetches, side by side) and returns at once, so that the blobs
 * of a reference chain, scattered over as many commits, are read side by
 * side instead of one dependent read after the other. A hint: failure
 * changes nothing. */
void tf_blob_will_need(tf_archive *ar, const tf_blob *b);

#endif
