/* The text of elements in an XML response from a server (S3's
 * listings, upload ids, errors): just enough XML for those, and strict.
 * The document is untrusted: tf_xml_check accepts only tags that are
 * closed, balanced and at most TF_XML_DEPTH_MAX deep, with no DOCTYPE
 * (no entity definitions to expand), no CDATA and no NUL; every text
 * is decoded within a bound, and whatever is malformed fails (EIO). */
#ifndef TRAJFS_IO_XML_TEXT_H
#define TRAJFS_IO_XML_TEXT_H

#include <stddef.h>

#include "common/error.h"

#define TF_XML_DEPTH_MAX 32

/* A part of the document: an element's content. */
typedef struct {
    const char *p;
    size_t len;
} tf_xml_span;

/* 0 when the document is well formed as said above; -1 (EIO) when not. */
int tf_xml_check(const char *p, size_t len, tf_error *e);

/* The next element named `name` (exactly) that begins at or after *pos
 * in s, at any depth: 1 with the span of its content in *inner and *pos
 * past its end, 0 when there is none, -1 (EIO) when s is malformed. */
int tf_xml_find(tf_xml_span s, size_t *pos, const char *name, tf_xml_span *inner, tf_error *e);

/* The text of s with its entities decoded (&amp; &lt; &gt; &quot;
 * &apos; &#N; &#xN;), into out (cap bytes, NUL-terminated): its length,
 * or -1 (EIO) when s holds markup, a NUL, a bad entity, or more than
 * cap - 1 bytes of text. */
long tf_xml_text(tf_xml_span s, char *out, size_t cap, tf_error *e);

/* tf_xml_text into a malloc'd string of at most max bytes. */
int tf_xml_text_dup(tf_xml_span s, size_t max, char **out, tf_error *e);

/* The text of the first element `name` in s, decoded, into out (cap
 * bytes): 1, 0 when there is none (out ""), -1 (EIO). */
int tf_xml_first(tf_xml_span s, const char *name, char *out, size_t cap, tf_error *e);

#endif
