/*
** A minimal protocol-buffers encoder (https://protobuf.dev/programming-guides/encoding/):
** only what the ONNX export writes, with no dependency. A message is a string of
** fields, each a key varint (field << 3 | wire type) and a value:
**     wire 0  varint         int32/int64/enum/bool (negatives as 10-byte two's complement)
**     wire 2  length-delim.  varint byte count, then the bytes: strings, bytes, nested messages
**     wire 5  fixed32        float, little-endian
** Repeated fields are the field written once per element (proto2's unpacked
** form, which onnx.proto declares). Nested messages are written in place:
** td__pb_begin writes the key and td__pb_end moves the body up to insert its
** length, so the output is the canonical (shortest) encoding.
** defines: td__pb and its writers.
*/
#ifndef TRIDENT_IO_PROTOBUF_WRITER_H
#define TRIDENT_IO_PROTOBUF_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A growing byte buffer; failed is set (and stays set) when memory runs out,
** after which the writers do nothing: check it once at the end. */
typedef struct td__pb {
    uint8_t *data;
    size_t len, cap;
    bool failed;
} td__pb;

enum { TD_PB_VARINT = 0, TD_PB_LEN = 2, TD_PB_FIXED32 = 5 };

void td__pb_free(td__pb *b);               /* frees data and zeroes b */
void td__pb_varint(td__pb *b, uint64_t v); /* a bare varint */
void td__pb_key(td__pb *b, int field, int wire);
void td__pb_int(td__pb *b, int field, int64_t v); /* wire 0 */
void td__pb_float(td__pb *b, int field, float v); /* wire 5 */
void td__pb_bytes(td__pb *b, int field, const void *p, size_t n);
void td__pb_string(td__pb *b, int field, const char *s);
/* Append n bytes already encoded (fields of the same message). */
void td__pb_raw(td__pb *b, const void *p, size_t n);
/* A nested message in field: begin returns the body's start for end. */
size_t td__pb_begin(td__pb *b, int field);
void td__pb_end(td__pb *b, size_t start);

#endif /* TRIDENT_IO_PROTOBUF_WRITER_H */
