/*
** The zip container of torch.save files (PKWARE APPNOTE 6.3): the end of
** central directory record (and its zip64 form, which torch always writes),
** the central directory, and each entry's local header. torch stores its
** entries uncompressed, padding the local headers' extra fields so that the
** data/ entries start 64-byte aligned; deflated entries (a re-zipped file)
** are inflated with zlib. Every offset and size is checked against the file
** before it is used.
*/
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "torch_format.h"

#define BAD(...)        TD_ERR(TD_ERR_FORMAT, __VA_ARGS__)
#define SIG_LOCAL       0x04034b50u
#define SIG_CENTRAL     0x02014b50u
#define SIG_EOCD        0x06054b50u
#define SIG_EOCD64      0x06064b50u
#define SIG_EOCD64_LOC  0x07064b50u
#define EOCD_LEN        22
#define MAX_COMMENT     65535
#define MAX_ENTRIES     (1 << 20)
#define DEFLATE_MAX_RAT 1032 /* deflate's largest expansion: 258 bytes from 2 bits */

static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t le64(const uint8_t *p) { return le32(p) | (uint64_t)le32(p + 4) << 32; }

static td_status read_at(const tz_archive *z, void *dst, size_t n, uint64_t off) {
    if (off > z->size || n > z->size - off)
        return BAD("torch: %s: a read of %zu bytes at %llu runs past the end of the %llu-byte file", z->path, n,
                   (unsigned long long)off, (unsigned long long)z->size);
    uint8_t *c = dst;
    while (n) {
        ssize_t r = pread(z->fd, c, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return TD_ERR(TD_ERR_IO, "torch: cannot read %s: %s", z->path, strerror(errno));
        if (r == 0) return BAD("torch: %s ended early at byte %llu", z->path, (unsigned long long)off);
        c += r, n -= (size_t)r, off += (uint64_t)r;
    }
    return TD_OK;
}

/* The central directory's offset, size and entry count, from the end records. */
static td_status find_directory(tz_archive *z, uint64_t *cd_off, uint64_t *cd_size, uint64_t *count) {
    size_t tail = z->size < EOCD_LEN + MAX_COMMENT ? (size_t)z->size : EOCD_LEN + MAX_COMMENT;
    if (tail < EOCD_LEN)
        return BAD("torch: %s is %llu bytes, too short for a zip file", z->path, (unsigned long long)z->size);
    uint8_t *buf = malloc(tail);
    if (!buf) return TD_ERR(TD_ERR_OOM, "torch: out of host memory");
    td_status st = read_at(z, buf, tail, z->size - tail);
    int64_t at = -1;
    for (int64_t i = (int64_t)tail - EOCD_LEN; st == TD_OK && i >= 0 && at < 0; i--)
        if (le32(buf + i) == SIG_EOCD && i + EOCD_LEN + le16(buf + i + 20) == (int64_t)tail) at = i;
    if (st == TD_OK && at < 0)
        st = BAD("torch: %s is not a zip file (no end of central directory; torch.save's legacy format from "
                 "before torch 1.6 is not read: save it again with a newer torch)",
                 z->path);
    if (st != TD_OK) return free(buf), st;
    const uint8_t *e = buf + at;
    *count = le16(e + 10), *cd_size = le32(e + 12), *cd_off = le32(e + 16);
    uint64_t eocd = z->size - tail + (uint64_t)at;
    free(buf);
    if (*count != 0xffff && *cd_size != 0xffffffffu && *cd_off != 0xffffffffu) return TD_OK;
    /* zip64: the locator sits just before the end record and points at the zip64 end record */
    uint8_t loc[20], rec[56];
    if (eocd < sizeof loc) return BAD("torch: %s: zip64 fields without a zip64 locator", z->path);
    st = read_at(z, loc, sizeof loc, eocd - sizeof loc);
    if (st == TD_OK && le32(loc) != SIG_EOCD64_LOC)
        st = BAD("torch: %s: zip64 fields without a zip64 locator", z->path);
    if (st == TD_OK) st = read_at(z, rec, sizeof rec, le64(loc + 8));
    if (st == TD_OK && le32(rec) != SIG_EOCD64)
        st = BAD("torch: %s: the zip64 locator points at no zip64 record", z->path);
    if (st != TD_OK) return st;
    *count = le64(rec + 32), *cd_size = le64(rec + 40), *cd_off = le64(rec + 48);
    return TD_OK;
}

/* The zip64 extra field (id 1) of a central entry: the sizes and offset whose
** 32-bit fields are all ones, in that order. */
static td_status zip64_extra(const tz_archive *z, const uint8_t *x, size_t len, uint64_t *usize, uint64_t *csize,
                             uint64_t *local) {
    uint64_t *want[3] = {*usize == 0xffffffffu ? usize : NULL, *csize == 0xffffffffu ? csize : NULL,
                         *local == 0xffffffffu ? local : NULL};
    for (size_t i = 0; i + 4 <= len;) {
        uint16_t id = le16(x + i), sz = le16(x + i + 2);
        if (i + 4 + sz > len) break;
        if (id == 1) {
            size_t at = i + 4;
            for (int k = 0; k < 3; k++) {
                if (!want[k]) continue;
                if (at + 8 > i + 4 + (size_t)sz) return BAD("torch: %s: a zip64 extra field is too short", z->path);
                *want[k] = le64(x + at), at += 8;
            }
            return TD_OK;
        }
        i += 4 + sz;
    }
    if (want[0] || want[1] || want[2]) return BAD("torch: %s: an entry lacks its zip64 extra field", z->path);
    return TD_OK;
}

/* Central entry at p (avail bytes left) into e; *len gets its length. */
static td_status parse_central(tz_archive *z, const uint8_t *p, uint64_t avail, tz_entry *e, uint64_t *len) {
    if (avail < 46 || le32(p) != SIG_CENTRAL) return BAD("torch: %s: malformed zip central directory", z->path);
    uint16_t flags = le16(p + 8), nlen = le16(p + 28), xlen = le16(p + 30), clen = le16(p + 32);
    *len = 46ull + nlen + xlen + clen;
    if (*len > avail) return BAD("torch: %s: a zip central directory entry runs past its end", z->path);
    e->method = le16(p + 10), e->crc = le32(p + 16), e->csize = le32(p + 20), e->usize = le32(p + 24);
    uint64_t local = le32(p + 42);
    e->name = malloc((size_t)nlen + 1);
    if (!e->name) return TD_ERR(TD_ERR_OOM, "torch: out of host memory");
    memcpy(e->name, p + 46, nlen);
    e->name[nlen] = 0;
    if (memchr(e->name, 0, nlen)) return BAD("torch: %s: a zip entry name holds a NUL byte", z->path);
    if (flags & 1)
        return TD_ERR(TD_ERR_UNSUPPORTED, "torch: %s: zip entry %s is encrypted", z->path, TD_QUOTE(e->name));
    if (e->method != 0 && e->method != 8)
        return TD_ERR(TD_ERR_UNSUPPORTED,
                      "torch: %s: zip entry %s uses compression method %d (only stored and deflate)", z->path,
                      TD_QUOTE(e->name), e->method);
    td_status st = zip64_extra(z, p + 46 + nlen, xlen, &e->usize, &e->csize, &local);
    if (st != TD_OK) return st;
    /* the local header: its own name and extra lengths place the data */
    uint8_t lh[30];
    st = read_at(z, lh, sizeof lh, local);
    if (st == TD_OK && le32(lh) != SIG_LOCAL)
        st = BAD("torch: %s: zip entry %s has no local header at byte %llu", z->path, TD_QUOTE(e->name),
                 (unsigned long long)local);
    if (st != TD_OK) return st;
    e->data = local + 30 + le16(lh + 26) + le16(lh + 28);
    if (e->data > z->size || e->csize > z->size - e->data)
        return BAD("torch: %s: zip entry %s (%llu bytes at %llu) runs past the end of the file", z->path,
                   TD_QUOTE(e->name), (unsigned long long)e->csize, (unsigned long long)e->data);
    if (e->method == 0 && e->usize != e->csize)
        return BAD("torch: %s: stored zip entry %s has sizes %llu and %llu", z->path, TD_QUOTE(e->name),
                   (unsigned long long)e->csize, (unsigned long long)e->usize);
    if (e->method == 8 && e->usize / DEFLATE_MAX_RAT > e->csize + 1)
        return BAD("torch: %s: deflated zip entry %s claims %llu bytes from %llu, more than deflate can expand",
                   z->path, TD_QUOTE(e->name), (unsigned long long)e->usize, (unsigned long long)e->csize);
    return TD_OK;
}

td_status tz_open(const char *path, const char *qpath, tz_archive *z) {
    memset(z, 0, sizeof *z);
    z->path = qpath;
    z->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (z->fd < 0) return TD_ERR(TD_ERR_IO, "torch: cannot open %s: %s", qpath, strerror(errno));
    struct stat sb;
    if (fstat(z->fd, &sb) != 0) return TD_ERR(TD_ERR_IO, "torch: cannot stat %s: %s", qpath, strerror(errno));
    z->size = (uint64_t)sb.st_size;
    uint64_t cd_off = 0, cd_size = 0, count = 0;
    td_status st = find_directory(z, &cd_off, &cd_size, &count);
    if (st != TD_OK) return st;
    if (cd_off > z->size || cd_size > z->size - cd_off)
        return BAD("torch: %s: the zip central directory (%llu bytes at %llu) runs past the end of the file", qpath,
                   (unsigned long long)cd_size, (unsigned long long)cd_off);
    if (count > MAX_ENTRIES || count > cd_size / 46)
        return BAD("torch: %s: the zip directory claims %llu entries in %llu bytes", qpath, (unsigned long long)count,
                   (unsigned long long)cd_size);
    uint8_t *cd = malloc(cd_size ? (size_t)cd_size : 1);
    z->e = calloc(count ? (size_t)count : 1, sizeof *z->e);
    if (!cd || !z->e) return free(cd), TD_ERR(TD_ERR_OOM, "torch: out of host memory");
    st = read_at(z, cd, (size_t)cd_size, cd_off);
    uint64_t at = 0;
    for (uint64_t i = 0; i < count && st == TD_OK; i++) {
        uint64_t len = 0;
        z->n++;
        st = parse_central(z, cd + at, cd_size - at, &z->e[i], &len);
        at += len;
    }
    free(cd);
    return st;
}

void tz_close(tz_archive *z) {
    for (int64_t i = 0; i < z->n; i++) free(z->e[i].name);
    free(z->e);
    if (z->fd >= 0) close(z->fd);
    memset(z, 0, sizeof *z);
    z->fd = -1;
}

const tz_entry *tz_find(const tz_archive *z, const char *name) {
    for (int64_t i = 0; i < z->n; i++)
        if (!strcmp(z->e[i].name, name)) return &z->e[i];
    return NULL;
}

/* Inflate the raw deflate stream src[0..n) into dst[0..usize) exactly. */
static td_status inflate_all(const tz_archive *z, const tz_entry *e, const uint8_t *src, void *dst) {
    z_stream s = {0};
    if (inflateInit2(&s, -MAX_WBITS) != Z_OK) return TD_ERR(TD_ERR_OOM, "torch: cannot start zlib");
    s.next_in = (Bytef *)src;
    s.next_out = dst;
    int rc = Z_OK;
    for (uint64_t in_left = e->csize, out_left = e->usize; rc == Z_OK;) {
        uInt ci = in_left > UINT32_MAX ? UINT32_MAX : (uInt)in_left,
             co = out_left > UINT32_MAX ? UINT32_MAX : (uInt)out_left;
        s.avail_in = ci, s.avail_out = co;
        rc = inflate(&s, Z_NO_FLUSH);
        in_left -= ci - s.avail_in, out_left -= co - s.avail_out;
        if (rc == Z_OK && ci == s.avail_in && co == s.avail_out) rc = Z_BUF_ERROR; /* no progress */
    }
    uint64_t out = (uint64_t)((uint8_t *)s.next_out - (uint8_t *)dst);
    inflateEnd(&s);
    if (rc != Z_STREAM_END || out != e->usize)
        return BAD("torch: %s: zip entry %s is not a valid deflate stream of %llu bytes", z->path, TD_QUOTE(e->name),
                   (unsigned long long)e->usize);
    return TD_OK;
}

td_status tz_read(const tz_archive *z, const tz_entry *e, void *dst) {
    td_status st;
    if (e->method == 0) {
        st = read_at(z, dst, (size_t)e->usize, e->data);
    } else {
        uint8_t *src = malloc(e->csize ? (size_t)e->csize : 1);
        if (!src) return TD_ERR(TD_ERR_OOM, "torch: out of host memory for zip entry %s", TD_QUOTE(e->name));
        st = read_at(z, src, (size_t)e->csize, e->data);
        if (st == TD_OK) st = inflate_all(z, e, src, dst);
        free(src);
    }
    if (st != TD_OK) return st;
    uLong crc = crc32(0, Z_NULL, 0);
    for (uint64_t at = 0; at < e->usize;) {
        uInt n = e->usize - at > UINT32_MAX ? UINT32_MAX : (uInt)(e->usize - at);
        crc = crc32(crc, (const Bytef *)dst + at, n);
        at += n;
    }
    if ((uint32_t)crc != e->crc)
        return BAD("torch: %s: zip entry %s fails its CRC-32 check (the file is corrupt)", z->path, TD_QUOTE(e->name));
    return TD_OK;
}
