/* S3 without a server: the XML text parser on good and hostile
 * responses, the parse of a ListObjectsV2 page, and object URLs encoded
 * as SigV4 canonicalizes them. */
#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

#include "common/buf.h"
#include "io/s3.h"
#include "io/s3_ops.h"
#include "io/segments.h"
#include "io/xml_text.h"

static tf_xml_span span_of(const char *s) { return (tf_xml_span){ s, strlen(s) }; }

/* The text of the first element `name` of doc, which the test expects
 * to be well formed; "" when none. */
static int first_text(const char *doc, const char *name, char *out, size_t cap, tf_error *e)
{
    if (tf_xml_check(doc, strlen(doc), e) < 0)
        return -1;
    return tf_xml_first(span_of(doc), name, out, cap, e);
}

/* ---- the XML text parser ---- */

START_TEST(xml_finds_elements_in_order)
{
    const char *doc = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!-- a comment <a> -->"
                      "<R xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\" x='1>2'>"
                      "<Item><Key>one</Key><KeyMarker>no</KeyMarker></Item>"
                      "<Item><Key/></Item><Item>\n  <Key>three</Key>\n</Item></R>";
    tf_error e;
    ck_assert_int_eq(tf_xml_check(doc, strlen(doc), &e), 0);
    tf_xml_span root, item, key;
    size_t pos = 0;
    ck_assert_int_eq(tf_xml_find(span_of(doc), &pos, "R", &root, &e), 1);
    const char *want[] = { "one", "", "three" };
    pos = 0;
    for (size_t i = 0; i < ARRAY_LEN(want); i++) {
        ck_assert_int_eq(tf_xml_find(root, &pos, "Item", &item, &e), 1);
        size_t at = 0;
        ck_assert_int_eq(tf_xml_find(item, &at, "Key", &key, &e), 1);
        char text[16];
        ck_assert_int_eq(tf_xml_text(key, text, sizeof text, &e), (long)strlen(want[i]));
        ck_assert_str_eq(text, want[i]);
    }
    ck_assert_int_eq(tf_xml_find(root, &pos, "Item", &item, &e), 0);
    /* A name is matched whole: <KeyMarker> is no <Key>, <Ke> is none. */
    char text[16];
    ck_assert_int_eq(tf_xml_first(root, "KeyMarker", text, sizeof text, &e), 1);
    ck_assert_str_eq(text, "no");
    ck_assert_int_eq(tf_xml_first(root, "Ke", text, sizeof text, &e), 0);
    ck_assert_str_eq(text, "");
}
END_TEST

START_TEST(xml_decodes_entities)
{
    char text[64];
    tf_error e;
    ck_assert_int_eq(first_text("<K>a &amp; b&lt;c&gt; &quot;&apos;&#65;&#x42;&#x20AC;&#X1F600;</K>", "K",
                                text, sizeof text, &e),
                     -1); /* &#X is not XML's */
    ck_assert_int_eq(first_text("<K>a &amp; b&lt;c&gt; &quot;&apos;&#65;&#x42;&#x20ac;&#x1F600; z</K>", "K",
                                text, sizeof text, &e),
                     1);
    ck_assert_str_eq(text, "a & b<c> \"'AB\xE2\x82\xAC\xF0\x9F\x98\x80 z");
    ck_assert_int_eq(first_text("<K>dir/a b &amp;amp;.trajfs</K>", "K", text, sizeof text, &e), 1);
    ck_assert_str_eq(text, "dir/a b &amp;.trajfs"); /* decoded once */
}
END_TEST

START_TEST(xml_refuses_bad_entities)
{
    const char *bad[] = {
        "<K>&foo;</K>",      "<K>&amp</K>",         "<K>a & b</K>",         "<K>&;</K>",
        "<K>&#;</K>",        "<K>&#x;</K>",         "<K>&#0;</K>",          "<K>&#x1;</K>",
        "<K>&#xD800;</K>",   "<K>&#x110000;</K>",   "<K>&#123456789;</K>",  "<K>&#x0000000041;</K>",
        "<K>&#12a;</K>",     "<K>&#-1;</K>",        "<K>&#xFFFE;</K>",      "<K>&amp;&</K>",
        "<K>&averyveryverylongname;</K>",
    };
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        char text[64];
        tf_error e = { 0 };
        ck_assert_msg(first_text(bad[i], "K", text, sizeof text, &e) == -1, "%s", bad[i]);
        ck_assert_int_eq(e.errnum, EIO);
    }
}
END_TEST

START_TEST(xml_refuses_malformed_documents)
{
    const char *bad[] = {
        "",
        "just text",
        "<a><b>x</b>",                    /* cut short */
        "<a><b>x</b></a",                 /* inside an end tag */
        "<a><b",                          /* inside a tag */
        "<a></b>",                        /* closes what is not open */
        "</a>",
        "<a></a></a>",
        "<a x=\"1></a>",                  /* an unterminated attribute */
        "<a><!DOCTYPE a [<!ENTITY e \"x\">]></a>",
        "<a><![CDATA[x]]></a>",
        "<a><!-- unterminated </a>",
        "<?xml version=\"1.0\"",
        "<a>< b></ b></a>",               /* a tag without a name */
        "<a><1b></1b></a>",
        "<a></a x=\"1\">",
        "<a></a/>",
        "<a><b></b><c><</c></a>",
    };
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        tf_error e = { 0 };
        ck_assert_msg(tf_xml_check(bad[i], strlen(bad[i]), &e) == -1, "%s", bad[i]);
        ck_assert_int_eq(e.errnum, EIO);
    }
    /* A NUL inside. */
    tf_error e;
    ck_assert_int_eq(tf_xml_check("<a>x\0y</a>", 10, &e), -1);
    /* Found elements that do not close fail too, checked or not. */
    size_t pos = 0;
    tf_xml_span inner;
    ck_assert_int_eq(tf_xml_find(span_of("<a><b>x</a>"), &pos, "b", &inner, &e), -1);
    pos = 0;
    ck_assert_int_eq(tf_xml_find(span_of("<a><b>x"), &pos, "b", &inner, &e), -1);
    /* The text of an element with elements inside is no text. */
    char text[16];
    ck_assert_int_eq(first_text("<a><b>x</b></a>", "a", text, sizeof text, &e), -1);
}
END_TEST

/* Nested depth: TF_XML_DEPTH_MAX deep is accepted, one more refused
 * (the check keeps a stack of that many). */
START_TEST(xml_bounds_nesting_and_text)
{
    tf_buf b = { 0 };
    for (int i = 0; i < TF_XML_DEPTH_MAX; i++)
        tf_buf_put(&b, "<d>", 3);
    for (int i = 0; i < TF_XML_DEPTH_MAX; i++)
        tf_buf_put(&b, "</d>", 4);
    tf_error e;
    ck_assert_int_eq(tf_xml_check((const char *)b.data, b.len, &e), 0);
    b.len = 0;
    for (int i = 0; i <= TF_XML_DEPTH_MAX; i++)
        tf_buf_put(&b, "<d>", 3);
    for (int i = 0; i <= TF_XML_DEPTH_MAX; i++)
        tf_buf_put(&b, "</d>", 4);
    ck_assert_int_eq(tf_xml_check((const char *)b.data, b.len, &e), -1);
    ck_assert_int_eq(e.errnum, EIO);
    tf_buf_free(&b);

    /* A text is bounded: one byte too many fails, and so does an entity
     * whose bytes would not fit. */
    char text[4];
    ck_assert_int_eq(first_text("<K>abc</K>", "K", text, sizeof text, &e), 1);
    ck_assert_int_eq(first_text("<K>abcd</K>", "K", text, sizeof text, &e), -1);
    ck_assert_int_eq(e.errnum, EIO);
    ck_assert_int_eq(first_text("<K>a&#x20AC;</K>", "K", text, sizeof text, &e), -1);
    char *dup = NULL;
    ck_assert_int_eq(tf_xml_text_dup(span_of("abcd"), 3, &dup, &e), -1);
    ck_assert_ptr_null(dup);
    ck_assert_int_eq(tf_xml_text_dup(span_of("a&amp;b"), 3, &dup, &e), 0);
    ck_assert_str_eq(dup, "a&b");
    free(dup);
}
END_TEST

/* ---- ListObjectsV2 pages ---- */

#define LIST_HEAD "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" \
                  "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">" \
                  "<Name>bucket</Name><Prefix>dir/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>"

static int parse(const char *xml, const char *prefix, unsigned max, tf_s3_listing *l, tf_error *e)
{
    return tf_s3_list_parse(xml, strlen(xml), prefix, max, l, e);
}

START_TEST(list_page_is_parsed)
{
    const char *xml = LIST_HEAD "<IsTruncated>true</IsTruncated>"
                      "<Contents><Key>dir/a b &amp; c.seg</Key><LastModified>2026-01-01T00:00:00.000Z</LastModified>"
                      "<ETag>&quot;900150983cd24fb0d6963f7d28e17f72&quot;</ETag><Size>18446744073709551615</Size>"
                      "<StorageClass>STANDARD</StorageClass></Contents>"
                      "<Contents><Key>dir/x</Key><Size>0</Size></Contents>"
                      "<NextContinuationToken>t</NextContinuationToken></ListBucketResult>";
    tf_s3_listing l;
    tf_error e;
    ck_assert_int_eq(parse(xml, "dir/", 2, &l, &e), 0);
    ck_assert(l.truncated);
    ck_assert_uint_eq(l.n, 2);
    ck_assert_str_eq(l.v[0].key, "dir/a b & c.seg");
    ck_assert_uint_eq(l.v[0].size, UINT64_MAX);
    ck_assert_str_eq(l.v[0].etag, "\"900150983cd24fb0d6963f7d28e17f72\"");
    ck_assert_str_eq(l.v[1].key, "dir/x");
    ck_assert_uint_eq(l.v[1].size, 0);
    ck_assert_str_eq(l.v[1].etag, "");
    tf_s3_listing_free(&l);
    ck_assert_ptr_null(l.v);

    ck_assert_int_eq(parse(LIST_HEAD "<IsTruncated>false</IsTruncated></ListBucketResult>", "dir/", 1, &l, &e), 0);
    ck_assert(!l.truncated);
    ck_assert_uint_eq(l.n, 0);
    tf_s3_listing_free(&l);
}
END_TEST

START_TEST(list_page_refuses_what_does_not_fit)
{
    const char *bad[] = {
        /* a size past 64 bits, negative, empty, not a number, absent */
        LIST_HEAD "<IsTruncated>false</IsTruncated><Contents><Key>dir/a</Key><Size>18446744073709551616</Size></Contents></ListBucketResult>",
        LIST_HEAD "<IsTruncated>false</IsTruncated><Contents><Key>dir/a</Key><Size>99999999999999999999999</Size></Contents></ListBucketResult>",
        LIST_HEAD "<IsTruncated>false</IsTruncated><Contents><Key>dir/a</Key><Size>-1</Size></Contents></ListBucketResult>",
        LIST_HEAD "<IsTruncated>false</IsTruncated><Contents><Key>dir/a</Key><Size></Size></Contents></ListBucketResult>",
        LIST_HEAD "<IsTruncated>false</IsTruncated><Contents><Key>dir/a</Key><Size>1 </Size></Contents></ListBucketResult>",
        LIST_HEAD "<IsTruncated>false</IsTruncated><Contents><Key>dir/a</Key></Contents></ListBucketResult>",
        /* no key, an empty key, a key outside the prefix */
        LIST_HEAD "<IsTruncated>false</IsTruncated><Contents><Size>1</Size></Contents></ListBucketResult>",
        LIST_HEAD "<IsTruncated>false</IsTruncated><Contents><Key></Key><Size>1</Size></Contents></ListBucketResult>",
        LIST_HEAD "<IsTruncated>false</IsTruncated><Contents><Key>other/a</Key><Size>1</Size></Contents></ListBucketResult>",
        /* IsTruncated absent or neither true nor false */
        LIST_HEAD "<Contents><Key>dir/a</Key><Size>1</Size></Contents></ListBucketResult>",
        LIST_HEAD "<IsTruncated>yes</IsTruncated></ListBucketResult>",
        /* more keys than asked for (2) */
        LIST_HEAD "<IsTruncated>false</IsTruncated><Contents><Key>dir/a</Key><Size>1</Size></Contents>"
                  "<Contents><Key>dir/b</Key><Size>1</Size></Contents><Contents><Key>dir/c</Key><Size>1</Size></Contents></ListBucketResult>",
        /* an ETag longer than kept */
        LIST_HEAD "<IsTruncated>false</IsTruncated><Contents><Key>dir/a</Key><Size>1</Size><ETag>"
                  "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
                  "0123456789012345678901234567890123456789</ETag></Contents></ListBucketResult>",
        /* cut short; not a listing; an error */
        LIST_HEAD "<IsTruncated>false</IsTruncated><Contents><Key>dir/a</Key><Size>1</Size></Contents>",
        "<ListAllMyBucketsResult><IsTruncated>false</IsTruncated></ListAllMyBucketsResult>",
        "<Error><Code>AccessDenied</Code></Error>",
        "",
    };
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        tf_s3_listing l = { .n = 7 };
        tf_error e = { 0 };
        ck_assert_msg(parse(bad[i], "dir/", 2, &l, &e) == -1, "%zu", i);
        ck_assert_int_eq(e.errnum, EIO);
        ck_assert_ptr_null(l.v);
        ck_assert_uint_eq(l.n, 0);
    }
}
END_TEST

/* A full page: 1000 keys, each with entities, in far less than the 2 MiB
 * a response may hold; the same page is refused when fewer were asked
 * for. */
START_TEST(list_page_of_a_thousand_keys)
{
    tf_buf b = { 0 };
    tf_buf_put(&b, LIST_HEAD, strlen(LIST_HEAD));
    tf_buf_put(&b, "<IsTruncated>true</IsTruncated>", 31);
    for (int i = 0; i < 1000; i++) {
        char one[160];
        int n = snprintf(one, sizeof one, "<Contents><Key>dir/k %04d &amp;&#x20;&lt;</Key><Size>%d</Size>"
                                          "<ETag>&quot;e%d&quot;</ETag></Contents>", i, i * 3, i);
        tf_buf_put(&b, one, (size_t)n);
    }
    tf_buf_put(&b, "</ListBucketResult>", 19);
    tf_s3_listing l;
    tf_error e;
    ck_assert_int_eq(tf_s3_list_parse((const char *)b.data, b.len, "dir/", 1000, &l, &e), 0);
    ck_assert_uint_eq(l.n, 1000);
    ck_assert_str_eq(l.v[999].key, "dir/k 0999 & <");
    ck_assert_uint_eq(l.v[999].size, 2997);
    ck_assert_str_eq(l.v[999].etag, "\"e999\"");
    tf_s3_listing_free(&l);
    ck_assert_int_eq(tf_s3_list_parse((const char *)b.data, b.len, "dir/", 999, &l, &e), -1);
    ck_assert_int_eq(e.errnum, EIO);
    tf_buf_free(&b);
}
END_TEST

/* ---- object URLs ---- */

START_TEST(key_urls_are_encoded_as_sigv4_canonicalizes)
{
    tf_s3_request r;
    tf_error e;
    ck_assert_int_eq(tf_s3_resolve("s3://my-bucket/runs/a b+c.trajfs", "http://127.0.0.1:9000/", "us-east-1",
                                   &r, &e), 0);
    ck_assert_str_eq(r.base, "http://127.0.0.1:9000/my-bucket/");
    ck_assert_str_eq(r.key, "runs/a b+c.trajfs");
    ck_assert_str_eq(r.url, "http://127.0.0.1:9000/my-bucket/runs/a%20b%2Bc.trajfs");
    char *url;
    ck_assert_int_eq(tf_s3_key_url(&r, "runs/a b/c&d=e?f%g#h~_.-\xC3\xBC", &url, &e), 0);
    ck_assert_str_eq(url, "http://127.0.0.1:9000/my-bucket/runs/a%20b/c%26d%3De%3Ff%25g%23h~_.-%C3%BC");
    free(url);
    ck_assert_int_eq(tf_s3_key_url(&r, "", &url, &e), -1);
    ck_assert_int_eq(e.errnum, EINVAL);
    ck_assert_ptr_null(url);
    ck_assert_int_eq(tf_s3_key_url(&r, "a\nb", &url, &e), -1);
    ck_assert_int_eq(e.errnum, EINVAL);
    ck_assert_ptr_null(url);
    tf_s3_request_free(&r);
    ck_assert_ptr_null(r.base);
    ck_assert_ptr_null(r.key);

    /* Without an endpoint: virtual-hosted AWS, or path-style for a
     * dotted bucket (the wildcard certificate does not cover it). */
    unsetenv("AWS_ENDPOINT_URL_S3");
    unsetenv("AWS_ENDPOINT_URL");
    ck_assert_int_eq(tf_s3_resolve("s3://my-bucket/k", NULL, "eu-west-1", &r, &e), 0);
    ck_assert_str_eq(r.base, "https://my-bucket.s3.eu-west-1.amazonaws.com/");
    ck_assert_int_eq(tf_s3_key_url(&r, "x y", &url, &e), 0);
    ck_assert_str_eq(url, "https://my-bucket.s3.eu-west-1.amazonaws.com/x%20y");
    free(url);
    tf_s3_request_free(&r);
    ck_assert_int_eq(tf_s3_resolve("s3://my.bucket/k", NULL, "eu-west-1", &r, &e), 0);
    ck_assert_str_eq(r.base, "https://s3.eu-west-1.amazonaws.com/my.bucket/");
    ck_assert_str_eq(r.url, "https://s3.eu-west-1.amazonaws.com/my.bucket/k");
    tf_s3_request_free(&r);
}
END_TEST

/* A segment's key names its generation and start, inverted, so that
 * the newest sorts first; only exact names are segments. */
START_TEST(segment_names_sort_newest_first)
{
    char *first = tf_segments_key("runs/run 1.traj", 0, 0);
    char *later = tf_segments_key("runs/run 1.traj", 0, 123456789);
    char *prefix = tf_segments_prefix("runs/run 1.traj");
    ck_assert_str_eq(first, "runs/run 1.traj/ffffffff-ffffffffffffffff");
    ck_assert_str_eq(later, "runs/run 1.traj/ffffffff-fffffffff8a432ea");
    ck_assert_str_eq(prefix, "runs/run 1.traj/");
    ck_assert_int_lt(strcmp(later, first), 0);
    uint32_t gen;
    uint64_t start;
    ck_assert(tf_segments_parse(prefix, later, &gen, &start));
    ck_assert_uint_eq(gen, 0);
    ck_assert_uint_eq(start, 123456789);
    ck_assert(tf_segments_parse(prefix, "runs/run 1.traj/fffffffe-fffffffffffffffe", &gen, &start));
    ck_assert_uint_eq(gen, 1);
    ck_assert_uint_eq(start, 1);
    static const char *const not_segments[] = {
        "runs/run 1.traj/writer-check",
        "runs/run 1.traj/ffffffff-ffffffffffffffff0",   /* too long */
        "runs/run 1.traj/ffffffff-fffffffffffffff",     /* too short */
        "runs/run 1.traj/ffffffff_ffffffffffffffff",    /* no dash */
        "runs/run 1.traj/FFFFFFFF-ffffffffffffffff",    /* upper case */
        "runs/run 1.traj/ffffffff-fffffffffffffffg",    /* not hex */
        "runs/run 2.traj/ffffffff-ffffffffffffffff",    /* another archive */
        "runs/run 1.traj/x/ffffffff-ffffffffffffffff",  /* below */
    };
    for (size_t i = 0; i < sizeof not_segments / sizeof *not_segments; i++)
        ck_assert_msg(!tf_segments_parse(prefix, not_segments[i], &gen, &start), "%s", not_segments[i]);
    free(first);
    free(later);
    free(prefix);
}
END_TEST

static Suite *s3_suite(void)
{
    Suite *s = suite_create("s3");
    TCase *xml = tcase_create("xml");
    tcase_add_test(xml, xml_finds_elements_in_order);
    tcase_add_test(xml, xml_decodes_entities);
    tcase_add_test(xml, xml_refuses_bad_entities);
    tcase_add_test(xml, xml_refuses_malformed_documents);
    tcase_add_test(xml, xml_bounds_nesting_and_text);
    suite_add_tcase(s, xml);

    TCase *list = tcase_create("list");
    tcase_add_test(list, list_page_is_parsed);
    tcase_add_test(list, list_page_refuses_what_does_not_fit);
    tcase_add_test(list, list_page_of_a_thousand_keys);
    suite_add_tcase(s, list);

    TCase *urls = tcase_create("urls");
    tcase_add_test(urls, key_urls_are_encoded_as_sigv4_canonicalizes);
    tcase_add_test(urls, segment_names_sort_newest_first);
    suite_add_tcase(s, urls);
    return s;
}

int main(void)
{
    return run_suite(s3_suite());
}
