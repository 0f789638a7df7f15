/*
** llm.c's token files (karpathy/llm.c, dev/data/data_common.py write_datafile):
**     256 x int32 little-endian header: [0] magic 20240520, [1] version 1,
**                                       [2] the number of tokens N
**     N x uint16 little-endian token ids (GPT-2's tokenizer: ids < 50257)
** The file must be exactly 1024 + 2N bytes.
*/
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/internal.h"
#include "trident/io.h"

#define LLMC_MAGIC   20240520
#define LLMC_VERSION 1
#define LLMC_HEADER  256

td_status td_llmc_tokens_load(const char *path, uint16_t **tokens, int64_t *n) {
    if (tokens) *tokens = NULL;
    if (n) *n = 0;
    if (!path || !tokens || !n) return TD_ERR(TD_ERR_MISUSE, "llmc_tokens_load: an argument is NULL");
    FILE *f = fopen(path, "rb");
    if (!f) return TD_ERR(TD_ERR_IO, "llm.c tokens: cannot open %s: %s", TD_QUOTE(path), strerror(errno));
    unsigned char h[LLMC_HEADER * 4];
    struct stat sb;
    td_status st = TD_OK;
    if (fstat(fileno(f), &sb) != 0 || fread(h, 1, sizeof h, f) != sizeof h)
        st = TD_ERR(TD_ERR_FORMAT, "llm.c tokens: %s is shorter than the 1024-byte header", TD_QUOTE(path));
    int32_t hdr[3] = {0, 0, 0};
    for (int i = 0; i < 3 && st == TD_OK; i++)
        hdr[i] = (int32_t)((uint32_t)h[4 * i] | (uint32_t)h[4 * i + 1] << 8 | (uint32_t)h[4 * i + 2] << 16 |
                           (uint32_t)h[4 * i + 3] << 24);
    if (st == TD_OK && hdr[0] != LLMC_MAGIC)
        st = TD_ERR(TD_ERR_FORMAT, "llm.c tokens: %s has magic %d, not %d (not an llm.c token file)", TD_QUOTE(path),
                    hdr[0], LLMC_MAGIC);
    else if (st == TD_OK && hdr[1] != LLMC_VERSION)
        st = TD_ERR(TD_ERR_UNSUPPORTED, "llm.c tokens: %s has version %d; only version %d is read", TD_QUOTE(path),
                    hdr[1], LLMC_VERSION);
    else if (st == TD_OK && (hdr[2] < 0 || (int64_t)sb.st_size != (int64_t)sizeof h + 2 * (int64_t)hdr[2]))
        st = TD_ERR(TD_ERR_FORMAT, "llm.c tokens: %s is %lld bytes, but its header counts %d tokens (%lld bytes)",
                    TD_QUOTE(path), (long long)sb.st_size, hdr[2], (long long)sizeof h + 2 * (long long)hdr[2]);
    uint16_t *t = st == TD_OK ? malloc(hdr[2] ? (size_t)hdr[2] * 2 : 1) : NULL;
    if (st == TD_OK && !t) st = TD_ERR(TD_ERR_OOM, "llm.c tokens: no host memory for %d tokens", hdr[2]);
    if (st == TD_OK && fread(t, 2, (size_t)hdr[2], f) != (size_t)hdr[2])
        st = TD_ERR(TD_ERR_IO, "llm.c tokens: cannot read %s", TD_QUOTE(path));
    fclose(f);
    for (int32_t i = 0; st == TD_OK && i < hdr[2]; i++) { /* little-endian on any host */
        unsigned char *b = (unsigned char *)&t[i];
        t[i] = (uint16_t)(b[0] | b[1] << 8);
    }
    if (st != TD_OK) return free(t), st;
    *tokens = t;
    *n = hdr[2];
    return TD_OK;
}
