/* The fuzz targets as plain functions, so that libFuzzer (fuzz_main.c,
 * built by build.sh) and the regression unit test (tests/unit/
 * test_regressions.c) run an input through the very same code.
 *
 * Each takes untrusted bytes and returns 0 when the library accepted
 * them, or -1 with the library's message in *e when it refused them (a
 * clean error). A crash, a sanitizer report, a hang or an abort() from a
 * violated invariant is a bug. */
#ifndef TRAJFS_TESTS_FUZZ_TARGETS_H
#define TRAJFS_TESTS_FUZZ_TARGETS_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

/* A whole archive file: open it, reconstruct every blob, read every file
 * and check each tensor file's layout against its bytes (what `trajpack
 * verify` and a mount do with a damaged archive). */
int tf_fuzz_archive(const uint8_t *data, size_t size, tf_error *e);
/* The commits of an archive, which the target writes as a valid archive
 * (checksums of superblock, trailers, catalogs and blob payloads right)
 * before doing what tf_fuzz_archive does, so that mutations reach what
 * the checksums guard: u8 chunk shift - 8, then per commit
 * u32 n | n blob bytes | u32 m | m bytes of catalog segment (uncompressed). */
int tf_fuzz_commits(const uint8_t *data, size_t size, tf_error *e);
/* What both do once the archive is a file: open, reconstruct, read. */
int tf_fuzz_read_archive(const char *path, tf_error *e);
/* u8 chunk shift selector | u16 first blob | one catalog segment
 * (uncompressed): tf_segment_decode, and encode/decode of what it
 * accepted must be stable. */
int tf_fuzz_catalog(const uint8_t *data, size_t size, tf_error *e);
/* u64 data section length | safetensors JSON header: tf_st_parse, and
 * what it accepted must tile the data section. */
int tf_fuzz_safetensors(const uint8_t *data, size_t size, tf_error *e);
/* A whole file parsed as torch.save (zip directory, restricted pickle):
 * what it accepted must tile the file with its pieces. */
int tf_fuzz_torch_save(const uint8_t *data, size_t size, tf_error *e);
/* A codec input (codec_input.h): decode, and a re-encoding of what
 * decoded must decode to the same bytes. */
int tf_fuzz_codec(const uint8_t *data, size_t size, tf_error *e);
/* The data.pkl of a torch.save file: tf_pickle_torch_storages, and what
 * it accepted must name each storage once, with a dtype and a path. */
int tf_fuzz_pickle(const uint8_t *data, size_t size, tf_error *e);

#endif
