/* Execution of a parsed prog instance (decoding is execution: no search,
 * no prior). The program runs in blocks of words pulled from the root,
 * so that every intermediate stream stays in cache; a literal decodes its
 * payload a block at a time. */
#ifndef TRAJFS_CODEC_PROG_PROG_EXEC_H
#define TRAJFS_CODEC_PROG_PROG_EXEC_H

#include <stdint.h>

#include "codec/prog/prog_ast.h"
#include "common/error.h"

/* Writes the root's n words, each width / 8 bytes little-endian, to dst.
 * The root width must be a whole number of bytes. Every literal is opened
 * (its coding, tables and payload bounds validated) before any word is
 * produced; a payload that proves corrupt while decoding is an error. */
int tf_prog_exec(const tf_prog *p, uint8_t *dst, tf_error *e);
/* The same on the general executor alone, without the fast path for a
 * merge of literals (prog_exec.c): the same bytes, which the tests
 * compare. */
int tf_prog_exec_general(const tf_prog *p, uint8_t *dst, tf_error *e);

#endif
