/* Giving space back: punching holes (tf_container_punch) where an
 * archive holds bytes that no committed state from its newest commit on
 * reads, once that commit is durable: payloads retired by redirects, and
 * payloads of slots no live file needs any more (store/liveness.h).
 * Readers whose view is older may find zeros there; the payload's
 * checksum tells them, and applying the new commits serves them again
 * (trajfs(5)). Storage that cannot punch, or fails to, keeps the space. */
#ifndef TRAJFS_STORE_GIVE_BACK_H
#define TRAJFS_STORE_GIVE_BACK_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "store/archive.h"

/* Punches the n ranges in r (sorted or not; r is reordered). With live
 * (a liveness of the archive as it is now), each is widened to the whole
 * gap between the bytes around it that are read: the payloads of the
 * needed slots, the catalog segments and trailers, the superblock; so
 * that blocks shared with payloads that died earlier, and the padding
 * between, go too. Without, ranges that touch are merged. Whole blocks
 * only. -1 with the first failure in e (the rest are still tried, but
 * for ENOTSUP). */
int tf_give_back(tf_archive *ar, const uint8_t *live, tf_archive_range *r, size_t n,
                 tf_error *e);

/* Punches every gap between the bytes that live (a liveness of the
 * archive as it is now) says are read: what any commit left unread,
 * also by a writer that died before it gave it back, or by a release
 * that did not. */
int tf_give_back_all(tf_archive *ar, const uint8_t *live, tf_error *e);

#endif
