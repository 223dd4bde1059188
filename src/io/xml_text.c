#include "io/xml_text.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MALFORMED "malformed XML response: "
/* Of a name shown in a message, at most this much. */
#define SHOWN_NAME_MAX 64

typedef enum { TAG_OPEN, TAG_CLOSE, TAG_EMPTY, TAG_SKIP } tag_kind;

typedef struct {
    tag_kind kind;
    const char *name;
    size_t name_len;
    size_t next; /* past the '>' */
} tag;

static bool name_char(unsigned char c, bool first)
{
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || c == ':' || c >= 0x80)
        return true;
    return !first && ((c >= '0' && c <= '9') || c == '-' || c == '.');
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* Where the string `end` begins in p[from, len), or len. */
static size_t find_str(const char *p, size_t len, size_t from, const char *end)
{
    size_t k = strlen(end);
    for (size_t i = from; i + k <= len; i++)
        if (memcmp(p + i, end, k) == 0)
            return i;
    return len;
}

/* The markup at p[i] == '<': declarations and comments are skipped;
 * DOCTYPE and CDATA are refused (S3 sends neither). */
static int read_tag(const char *p, size_t len, size_t i, tag *t, tf_error *e)
{
    size_t j = i + 1;
    if (j >= len)
        return tf_fail(e, EIO, MALFORMED "it ends inside a tag");
    if (p[j] == '?' || (len - j >= 3 && memcmp(p + j, "!--", 3) == 0)) {
        const char *end = p[j] == '?' ? "?>" : "-->";
        size_t at = find_str(p, len, j + 1, end);
        if (at == len)
            return tf_fail(e, EIO, MALFORMED "an unterminated declaration or comment");
        *t = (tag){ .kind = TAG_SKIP, .next = at + strlen(end) };
        return 0;
    }
    if (p[j] == '!')
        return tf_fail(e, EIO, MALFORMED "a DOCTYPE or CDATA section");
    bool close = p[j] == '/';
    if (close)
        j++;
    size_t name = j;
    while (j < len && name_char((unsigned char)p[j], j == name))
        j++;
    if (j == name)
        return tf_fail(e, EIO, MALFORMED "a tag without a name");
    *t = (tag){ .kind = close ? TAG_CLOSE : TAG_OPEN, .name = p + name, .name_len = j - name };
    if (j < len && !is_space(p[j]) && p[j] != '>' && p[j] != '/')
        return tf_fail(e, EIO, MALFORMED "a bad character in a tag name");
    /* Attributes, whose quoted values may hold '>'. */
    char quote = 0;
    for (; j < len; j++) {
        char c = p[j];
        if (quote) {
            if (c == quote)
                quote = 0;
            else if (c == '<')
                return tf_fail(e, EIO, MALFORMED "'<' in an attribute");
        } else if (c == '"' || c == '\'') {
            if (close)
                return tf_fail(e, EIO, MALFORMED "an end tag with attributes");
            quote = c;
        } else if (c == '<') {
            return tf_fail(e, EIO, MALFORMED "'<' inside a tag");
        } else if (close && c != '>' && !is_space(c)) {
            return tf_fail(e, EIO, MALFORMED "a bad end tag");
        } else if (c == '>') {
            if (p[j - 1] == '/' && !close)
                t->kind = TAG_EMPTY;
            t->next = j + 1;
            return 0;
        }
    }
    return tf_fail(e, EIO, MALFORMED "it ends inside a tag");
}

static bool tag_is(const tag *t, const char *name)
{
    return t->name_len == strlen(name) && memcmp(t->name, name, t->name_len) == 0;
}

static int shown_len(size_t n) { return (int)(n < SHOWN_NAME_MAX ? n : SHOWN_NAME_MAX); }

int tf_xml_check(const char *p, size_t len, tf_error *e)
{
    if (memchr(p, '\0', len))
        return tf_fail(e, EIO, MALFORMED "a NUL byte");
    tag open[TF_XML_DEPTH_MAX];
    size_t depth = 0, elements = 0;
    for (size_t i = 0; i < len;) {
        const char *lt = memchr(p + i, '<', len - i);
        if (!lt)
            break;
        tag t;
        if (read_tag(p, len, (size_t)(lt - p), &t, e) < 0)
            return -1;
        if (t.kind == TAG_OPEN) {
            if (depth == TF_XML_DEPTH_MAX)
                return tf_fail(e, EIO, MALFORMED "elements nested more than %d deep", TF_XML_DEPTH_MAX);
            open[depth++] = t;
            elements++;
        } else if (t.kind == TAG_CLOSE) {
            if (depth == 0 || open[depth - 1].name_len != t.name_len ||
                memcmp(open[depth - 1].name, t.name, t.name_len) != 0)
                return tf_fail(e, EIO, MALFORMED "</%.*s> closes no element open", shown_len(t.name_len),
                               t.name);
            depth--;
        } else if (t.kind == TAG_EMPTY) {
            elements++;
        }
        i = t.next;
    }
    if (depth)
        return tf_fail(e, EIO, MALFORMED "<%.*s> is not closed (the response is cut short?)",
                       shown_len(open[depth - 1].name_len), open[depth - 1].name);
    if (!elements)
        return tf_fail(e, EIO, MALFORMED "no element");
    return 0;
}

int tf_xml_find(tf_xml_span s, size_t *pos, const char *name, tf_xml_span *inner, tf_error *e)
{
    for (size_t i = *pos; i < s.len;) {
        const char *lt = memchr(s.p + i, '<', s.len - i);
        if (!lt)
            break;
        tag t;
        if (read_tag(s.p, s.len, (size_t)(lt - s.p), &t, e) < 0)
            return -1;
        i = t.next;
        if (t.kind == TAG_EMPTY && tag_is(&t, name)) {
            *inner = (tf_xml_span){ s.p + i, 0 };
            *pos = i;
            return 1;
        }
        if (t.kind != TAG_OPEN || !tag_is(&t, name))
            continue;
        /* Its end: the first end tag at its own depth. */
        size_t depth = 0;
        for (size_t j = i; j < s.len;) {
            const char *at = memchr(s.p + j, '<', s.len - j);
            if (!at)
                break;
            tag u;
            if (read_tag(s.p, s.len, (size_t)(at - s.p), &u, e) < 0)
                return -1;
            if (u.kind == TAG_OPEN && ++depth > TF_XML_DEPTH_MAX)
                return tf_fail(e, EIO, MALFORMED "elements nested more than %d deep", TF_XML_DEPTH_MAX);
            if (u.kind == TAG_CLOSE && depth == 0) {
                if (!tag_is(&u, name))
                    return tf_fail(e, EIO, MALFORMED "<%s> closed by </%.*s>", name,
                                   shown_len(u.name_len), u.name);
                *inner = (tf_xml_span){ s.p + i, (size_t)(at - s.p) - i };
                *pos = u.next;
                return 1;
            }
            if (u.kind == TAG_CLOSE)
                depth--;
            j = u.next;
        }
        return tf_fail(e, EIO, MALFORMED "<%s> is not closed", name);
    }
    return 0;
}

/* Code point v as UTF-8 into out: its length. */
static size_t utf8_put(uint32_t v, char *out)
{
    if (v < 0x80) {
        out[0] = (char)v;
        return 1;
    }
    if (v < 0x800) {
        out[0] = (char)(0xC0 | v >> 6);
        out[1] = (char)(0x80 | (v & 0x3F));
        return 2;
    }
    if (v < 0x10000) {
        out[0] = (char)(0xE0 | v >> 12);
        out[1] = (char)(0x80 | ((v >> 6) & 0x3F));
        out[2] = (char)(0x80 | (v & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | v >> 18);
    out[1] = (char)(0x80 | ((v >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((v >> 6) & 0x3F));
    out[3] = (char)(0x80 | (v & 0x3F));
    return 4;
}

/* The entity p[0, n) (between '&' and ';') into out: its length, or 0
 * when it is not one XML defines or a character XML allows. */
static size_t entity(const char *p, size_t n, char *out)
{
    static const struct {
        const char *name;
        char c;
    } named[] = { { "amp", '&' }, { "lt", '<' }, { "gt", '>' }, { "quot", '"' }, { "apos", '\'' } };
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        if (n == strlen(named[i].name) && memcmp(p, named[i].name, n) == 0) {
            out[0] = named[i].c;
            return 1;
        }
    if (n < 2 || p[0] != '#')
        return 0;
    bool hex = p[1] == 'x';
    size_t first = hex ? 2 : 1;
    if (n == first || n - first > 8) /* 8 digits hold every code point, and no overflow */
        return 0;
    uint32_t v = 0;
    for (size_t i = first; i < n; i++) {
        char c = p[i];
        unsigned d;
        if (c >= '0' && c <= '9')
            d = (unsigned)(c - '0');
        else if (hex && c >= 'a' && c <= 'f')
            d = (unsigned)(c - 'a' + 10);
        else if (hex && c >= 'A' && c <= 'F')
            d = (unsigned)(c - 'A' + 10);
        else
            return 0;
        v = v * (hex ? 16 : 10) + d;
    }
    /* XML's characters: no NUL, no other control but tab and newlines,
     * no surrogate, nothing past Unicode. */
    bool allowed = v == 0x9 || v == 0xA || v == 0xD || (v >= 0x20 && v <= 0xD7FF) ||
                   (v >= 0xE000 && v <= 0xFFFD) || (v >= 0x10000 && v <= 0x10FFFF);
    return allowed ? utf8_put(v, out) : 0;
}

long tf_xml_text(tf_xml_span s, char *out, size_t cap, tf_error *e)
{
    size_t n = 0;
    for (size_t i = 0; i < s.len;) {
        char one[4];
        size_t k = 1;
        one[0] = s.p[i];
        if (s.p[i] == '<')
            return tf_fail(e, EIO, MALFORMED "markup where text was expected");
        if (s.p[i] == '\0')
            return tf_fail(e, EIO, MALFORMED "a NUL byte");
        if (s.p[i] == '&') {
            size_t left = s.len - i - 1 < 12 ? s.len - i - 1 : 12;
            const char *semi = memchr(s.p + i + 1, ';', left);
            if (!semi || !(k = entity(s.p + i + 1, (size_t)(semi - s.p) - i - 1, one)))
                return tf_fail(e, EIO, MALFORMED "a bad entity");
            i = (size_t)(semi - s.p) + 1;
        } else {
            i++;
        }
        if (k >= cap - n)
            return tf_fail(e, EIO, MALFORMED "a text longer than %zu bytes", cap ? cap - 1 : 0);
        memcpy(out + n, one, k);
        n += k;
    }
    if (cap == 0)
        return tf_fail(e, EIO, MALFORMED "no room for a text");
    out[n] = '\0';
    return (long)n;
}

int tf_xml_text_dup(tf_xml_span s, size_t max, char **out, tf_error *e)
{
    /* Decoding never lengthens a text: every entity is longer than what
     * it stands for. */
    size_t cap = (s.len < max ? s.len : max) + 1;
    char *p = malloc(cap);
    if (!p)
        return tf_fail(e, ENOMEM, "out of memory");
    if (tf_xml_text(s, p, cap, e) < 0) {
        free(p);
        return -1;
    }
    *out = p;
    return 0;
}

int tf_xml_first(tf_xml_span s, const char *name, char *out, size_t cap, tf_error *e)
{
    size_t pos = 0;
    tf_xml_span inner;
    int found = tf_xml_find(s, &pos, name, &inner, e);
    if (found <= 0) {
        if (cap)
            out[0] = '\0';
        return found;
    }
    return tf_xml_text(inner, out, cap, e) < 0 ? -1 : 1;
}
