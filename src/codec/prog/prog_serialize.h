/* Canonical binary forms of prog programs.
 *
 * Instance (a chunk's program), nodes in preorder, children after their
 * parent; widths and lengths of children follow from the parent's:
 *   u8 op, then
 *   LIT     varint body length | body (prog_leaf.h)
 *   CONST   varint v                       v < 2^b, n >= 1
 *   CONCAT  varint k | k-1 x varint ni     2 <= k <= 64, every ni >= 1,
 *                                          the last is n - the others >= 1
 *   REPEAT  varint m                       1 <= m < n; the periods of
 *                                          all repeats and the lags of all
 *                                          lagged scans sum to at most
 *                                          the root's n
 *   MAP     u8 kind | XOR, ADD: varint c < 2^b | ROTL: u8 r, 1 <= r < b
 *   SCAN    u8 kind | varint v0 < 2^b      n >= 2; the child has n - 1
 *           (XOR, ADD)
 *           u8 kind | varint m             1 <= m < n; the child has n
 *           (XOR_LAG, ADD_LAG)             words; counted with the
 *                                          repeats' periods
 *   MERGE   u8 k | k x u8 bi               2 <= k <= 64, bi >= 1,
 *                                          sum bi = b, n >= 1
 * At most TF_PROG_MAX_NODES nodes, TF_PROG_MAX_DEPTH deep. A literal that
 * takes contexts from a sibling must be a child of a merge, and the
 * sibling an earlier child of it.
 *
 * Template (the model: the productions the search chose, without the
 * parameters each chunk derives from its own words):
 *   u8 op, then
 *   LIT     u8 coding | u8 context sibling (0: none, 1 + j)
 *   CONST, REPEAT, CONCAT: nothing (CONCAT and REPEAT have one child: the
 *           template for the segments between constant runs, resp. the
 *           period)
 *   MAP     u8 kind | ROTL: u8 r
 *   SCAN    u8 kind
 *   MERGE   u8 k | k x u8 bi
 * with the same width rules. */
#ifndef TRAJFS_CODEC_PROG_PROG_SERIALIZE_H
#define TRAJFS_CODEC_PROG_PROG_SERIALIZE_H

#include <stddef.h>
#include <stdint.h>

#include "codec/prog/prog_ast.h"
#include "common/buf.h"
#include "common/error.h"

/* The header of instance node i: its op and parameters, and for a
 * literal the length of its body (node->body_len), not the body. */
int tf_prog_write_node_header(const tf_prog *p, unsigned i, tf_buf *out);
/* The whole instance, literal bodies from node->body. */
int tf_prog_write(const tf_prog *p, tf_buf *out, tf_error *e);
/* Parses and validates an instance of type width[n]; literal nodes point
 * into enc. Fails unless the program is exactly enc_len bytes. */
int tf_prog_read(const uint8_t *enc, size_t enc_len, unsigned width, uint64_t n, tf_prog *p,
                 tf_error *e);

int tf_prog_template_write(const tf_prog *p, tf_buf *out, tf_error *e);
/* Parses and validates a template of the given root width from r. */
int tf_prog_template_read(tf_cursor *r, unsigned width, tf_prog *p, tf_error *e);

#endif
