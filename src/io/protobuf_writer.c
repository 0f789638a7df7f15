/*
** The protocol-buffers encoder of protobuf_writer.h. Varint: 7 bits per byte,
** least significant group first, the top bit set on every byte but the last.
*/
#include "protobuf_writer.h"

#include <stdlib.h>
#include <string.h>

/* Room for n more bytes; false (and b->failed) when memory runs out. */
static bool reserve(td__pb *b, size_t n) {
    if (b->failed) return false;
    if (b->len + n <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n) cap *= 2;
    uint8_t *d = realloc(b->data, cap);
    if (!d) return b->failed = true, false;
    b->data = d, b->cap = cap;
    return true;
}

void td__pb_free(td__pb *b) {
    free(b->data);
    *b = (td__pb){0};
}

static size_t varint_size(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) v >>= 7, n++;
    return n;
}

static void put_varint(uint8_t *p, uint64_t v) {
    while (v >= 0x80) *p++ = (uint8_t)(v | 0x80), v >>= 7;
    *p = (uint8_t)v;
}

void td__pb_varint(td__pb *b, uint64_t v) {
    size_t n = varint_size(v);
    if (!reserve(b, n)) return;
    put_varint(b->data + b->len, v);
    b->len += n;
}

void td__pb_key(td__pb *b, int field, int wire) { td__pb_varint(b, (uint64_t)field << 3 | (uint64_t)wire); }

void td__pb_int(td__pb *b, int field, int64_t v) {
    td__pb_key(b, field, TD_PB_VARINT);
    td__pb_varint(b, (uint64_t)v);
}

void td__pb_float(td__pb *b, int field, float v) {
    td__pb_key(b, field, TD_PB_FIXED32);
    uint32_t u;
    memcpy(&u, &v, 4);
    uint8_t le[4] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16), (uint8_t)(u >> 24)};
    td__pb_raw(b, le, 4);
}

void td__pb_raw(td__pb *b, const void *p, size_t n) {
    if (!n || !reserve(b, n)) return;
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

void td__pb_bytes(td__pb *b, int field, const void *p, size_t n) {
    td__pb_key(b, field, TD_PB_LEN);
    td__pb_varint(b, n);
    td__pb_raw(b, p, n);
}

void td__pb_string(td__pb *b, int field, const char *s) { td__pb_bytes(b, field, s, strlen(s)); }

size_t td__pb_begin(td__pb *b, int field) {
    td__pb_key(b, field, TD_PB_LEN);
    return b->len;
}

void td__pb_end(td__pb *b, size_t start) {
    if (b->failed) return;
    size_t n = b->len - start, k = varint_size(n);
    if (!reserve(b, k)) return;
    memmove(b->data + start + k, b->data + start, n); /* the body moves up by its length's size */
    put_varint(b->data + start, n);
    b->len += k;
}
