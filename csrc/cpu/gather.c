/* gather.c: batch gathering from resident training data for the cpu engine. */
#include <string.h>

#include "cpu.h"

/* idx (count) rows of src, each row_bytes long -> dst (count rows) */
cnn_status cpu_gather_rows(cnn_ctx *ctx, const int32_t *idx, int count, size_t row_bytes,
                           const void *src, void *dst)
{
    (void)ctx;
    const char *s = src;
    char *d = dst;
    for (int i = 0; i < count; ++i) memcpy(d + (size_t)i * row_bytes, s + (size_t)idx[i] * row_bytes, row_bytes);
    return CNN_OK;
}
