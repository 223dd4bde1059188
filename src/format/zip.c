#include "format/zip.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"

#define EOCD_SIG 0x06054b50u
#define EOCD_LEN 22
#define LOCATOR_SIG 0x07064b50u
#define LOCATOR_LEN 20
#define EOCD64_SIG 0x06064b50u
#define EOCD64_LEN 56
#define CENTRAL_SIG 0x02014b50u
#define CENTRAL_LEN 46
#define LOCAL_SIG 0x04034b50u
#define LOCAL_LEN 30
#define ZIP64_EXTRA 0x0001
#define TAIL_MAX (EOCD_LEN + 0xffff) /* the record and the longest comment */

static int invalid(const tf_file_source *src, tf_error *e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int invalid(const tf_file_source *src, tf_error *e, const char *fmt, ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return tf_fail(e, EINVAL, "%s: not a valid zip archive: %s", src->name, why);
}

/* Where the directory is, from the end records. */
typedef struct {
    uint64_t count, cd_off, cd_size;
    uint64_t end; /* offset of the first end record: the directory ends there */
} directory;

static int read_zip64_end(const tf_file_source *src, uint64_t eocd, directory *d, tf_error *e)
{
    uint8_t loc[LOCATOR_LEN], rec[EOCD64_LEN];
    if (eocd < LOCATOR_LEN || src->read(src->arg, eocd - LOCATOR_LEN, loc, sizeof loc, e) < 0)
        return eocd < LOCATOR_LEN ? invalid(src, e, "zip64 end locator missing") : -1;
    uint64_t at = tf_le64_get(loc + 8);
    if (tf_le32_get(loc) != LOCATOR_SIG || at > eocd - LOCATOR_LEN ||
        eocd - LOCATOR_LEN - at < EOCD64_LEN)
        return invalid(src, e, "zip64 end locator missing or out of place");
    if (src->read(src->arg, at, rec, sizeof rec, e) < 0)
        return -1;
    if (tf_le32_get(rec) != EOCD64_SIG || tf_le64_get(rec + 24) != tf_le64_get(rec + 32))
        return invalid(src, e, "bad zip64 end record");
    d->count = tf_le64_get(rec + 32);
    d->cd_size = tf_le64_get(rec + 40);
    d->cd_off = tf_le64_get(rec + 48);
    d->end = at;
    return 0;
}

/* The end-of-central-directory record is the last 22 bytes but for a
 * comment of up to 64 KiB: found where its comment length reaches the
 * end of the file exactly. */
static int read_end(const tf_file_source *src, directory *d, tf_error *e)
{
    if (src->size < EOCD_LEN)
        return invalid(src, e, "%llu bytes is too short", (unsigned long long)src->size);
    size_t tail = src->size < TAIL_MAX ? (size_t)src->size : TAIL_MAX;
    uint8_t *t = malloc(tail);
    if (!t)
        return tf_fail(e, ENOMEM, "out of memory");
    int rc = src->read(src->arg, src->size - tail, t, tail, e);
    size_t at = tail - EOCD_LEN + 1;
    while (rc == 0 && at-- > 0)
        if (tf_le32_get(t + at) == EOCD_SIG && tf_le16_get(t + at + 20) == tail - at - EOCD_LEN)
            break;
    if (rc == 0 && at == SIZE_MAX)
        rc = invalid(src, e, "no end of central directory record");
    if (rc < 0) {
        free(t);
        return -1;
    }
    const uint8_t *r = t + at;
    uint64_t eocd = src->size - tail + at;
    *d = (directory){ .count = tf_le16_get(r + 10), .cd_size = tf_le32_get(r + 12),
                      .cd_off = tf_le32_get(r + 16), .end = eocd };
    bool disks = tf_le16_get(r + 4) != 0 || tf_le16_get(r + 6) != 0;
    bool split = tf_le16_get(r + 8) != tf_le16_get(r + 10);
    bool zip64 = d->count == 0xffff || d->cd_size == 0xffffffffu || d->cd_off == 0xffffffffu;
    free(t);
    if (zip64)
        return read_zip64_end(src, eocd, d, e);
    return disks || split ? invalid(src, e, "spans several disks") : 0;
}

/* The zip64 extra field gives the 64-bit values of the fields whose
 * 32-bit values are all ones, in this order. */
static int zip64_sizes(const uint8_t *x, size_t n, uint64_t *raw, uint64_t *size, uint64_t *local)
{
    while (n >= 4) {
        unsigned id = tf_le16_get(x), len = tf_le16_get(x + 2);
        if (len > n - 4)
            return -1;
        if (id == ZIP64_EXTRA) {
            uint64_t *fields[3] = { raw, size, local };
            size_t at = 4;
            for (int i = 0; i < 3; i++) {
                if (*fields[i] != 0xffffffffu)
                    continue;
                if (at + 8 > 4 + (size_t)len)
                    return -1;
                *fields[i] = tf_le64_get(x + at);
                at += 8;
            }
            return 0;
        }
        x += 4 + len;
        n -= 4 + len;
    }
    return *raw == 0xffffffffu || *size == 0xffffffffu || *local == 0xffffffffu ? -1 : 0;
}

/* Checks an entry's local header (its name must be the central one) and
 * finds where its data starts. */
static int read_local(const tf_file_source *src, uint64_t local, tf_zip_entry *z, uint64_t cd_off,
                      tf_error *e)
{
    uint8_t h[LOCAL_LEN];
    if (local > cd_off || cd_off - local < LOCAL_LEN)
        return invalid(src, e, "entry \"%s\": local header outside the archive", z->name);
    if (src->read(src->arg, local, h, sizeof h, e) < 0)
        return -1;
    size_t nlen = tf_le16_get(h + 26), xlen = tf_le16_get(h + 28);
    if (tf_le32_get(h) != LOCAL_SIG || nlen != strlen(z->name))
        return invalid(src, e, "entry \"%s\": bad local header", z->name);
    char name[0xffff];
    if (src->read(src->arg, local + LOCAL_LEN, name, nlen, e) < 0)
        return -1;
    if (memcmp(name, z->name, nlen) != 0)
        return invalid(src, e, "entry \"%s\": its local header names another", z->name);
    z->data_off = local + LOCAL_LEN + nlen + xlen;
    if (z->data_off > cd_off || cd_off - z->data_off < z->size)
        return invalid(src, e, "entry \"%s\": data outside the archive", z->name);
    return 0;
}

/* Parses one central-directory header at p (left bytes of the
 * directory) into z; *used is its length. */
static int read_central(const tf_file_source *src, const uint8_t *p, size_t left, uint64_t cd_off,
                        tf_zip_entry *z, size_t *used, tf_error *e)
{
    if (left < CENTRAL_LEN || tf_le32_get(p) != CENTRAL_SIG)
        return invalid(src, e, "bad central directory header");
    size_t nlen = tf_le16_get(p + 28), xlen = tf_le16_get(p + 30), clen = tf_le16_get(p + 32);
    if (left - CENTRAL_LEN < nlen + xlen + clen)
        return invalid(src, e, "central directory header longer than the directory");
    const uint8_t *name = p + CENTRAL_LEN;
    if (nlen == 0 || memchr(name, '\0', nlen))
        return invalid(src, e, "an entry has an empty name or one holding NUL");
    if (!(z->name = malloc(nlen + 1)))
        return tf_fail(e, ENOMEM, "out of memory");
    memcpy(z->name, name, nlen);
    z->name[nlen] = '\0';
    z->method = tf_le16_get(p + 10);
    z->size = tf_le32_get(p + 20);
    z->raw_size = tf_le32_get(p + 24);
    uint64_t local = tf_le32_get(p + 42);
    if (zip64_sizes(name + nlen, xlen, &z->raw_size, &z->size, &local) < 0)
        return invalid(src, e, "entry \"%s\": bad zip64 extra field", z->name);
    *used = CENTRAL_LEN + nlen + xlen + clen;
    return read_local(src, local, z, cd_off, e);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const tf_zip_entry *)a)->name, ((const tf_zip_entry *)b)->name);
}

int tf_zip_read(const tf_file_source *src, tf_zip *z, tf_error *e)
{
    *z = (tf_zip){ 0 };
    directory d = { 0 };
    if (read_end(src, &d, e) < 0)
        return -1;
    if (d.cd_off > d.end || d.end - d.cd_off < d.cd_size)
        return invalid(src, e, "central directory outside the archive");
    if (d.count > d.cd_size / CENTRAL_LEN)
        return invalid(src, e, "%llu entries cannot fit in a directory of %llu bytes",
                       (unsigned long long)d.count, (unsigned long long)d.cd_size);
    uint8_t *cd = malloc(d.cd_size ? (size_t)d.cd_size : 1);
    z->v = calloc(d.count ? (size_t)d.count : 1, sizeof *z->v);
    if (!cd || !z->v) {
        free(cd);
        tf_zip_free(z);
        return tf_fail(e, ENOMEM, "out of memory");
    }
    int rc = src->read(src->arg, d.cd_off, cd, (size_t)d.cd_size, e);
    size_t at = 0;
    /* An entry that fails is counted too: its name is freed with the
     * others. */
    for (; rc == 0 && z->n < d.count; z->n++) {
        size_t used = 0;
        rc = read_central(src, cd + at, (size_t)d.cd_size - at, d.cd_off, &z->v[z->n], &used, e);
        at += used;
    }
    free(cd);
    if (rc == 0) {
        qsort(z->v, z->n, sizeof *z->v, by_name);
        for (size_t i = 1; rc == 0 && i < z->n; i++)
            if (strcmp(z->v[i - 1].name, z->v[i].name) == 0)
                rc = invalid(src, e, "two entries named \"%s\"", z->v[i].name);
    }
    if (rc < 0)
        tf_zip_free(z);
    return rc;
}

void tf_zip_free(tf_zip *z)
{
    for (size_t i = 0; i < z->n; i++)
        free(z->v[i].name);
    free(z->v);
    *z = (tf_zip){ 0 };
}

const tf_zip_entry *tf_zip_find(const tf_zip *z, const char *name)
{
    tf_zip_entry key = { .name = (char *)name };
    return z->n ? bsearch(&key, z->v, z->n, sizeof *z->v, by_name) : NULL;
}
