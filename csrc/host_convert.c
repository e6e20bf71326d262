/* host_convert.c: the user's samples (float32, float64 or uint8) to float32,
 * checked finite in the same pass.
 *
 * fit, evaluate and predict hand the core the array the user holds; every
 * engine converts it here, a chunk at a time (the GPU engines from several
 * threads, into pinned buffers whose copies to the device overlap the next
 * chunk's conversion). One read of the source, one write of float32.
 *
 * The check rides on the conversion: a block's largest |bits| (sign masked
 * off) is a max-reduction the compiler vectorises, and a value is NaN or
 * infinite in float32 exactly when its exponent bits are all ones, i.e. its
 * masked bits are >= 0x7f800000. Converting first catches what is finite in
 * float64 but not in float32 (1e300) with the same test. Only a block that
 * holds such a value is scanned again, for the first one.
 */
#include <stdio.h>
#include <string.h>

#include "cnn.h"

#define CONVERT_BLOCK 4096
#define F32_EXP_ALL_ONES 0x7f800000u

static inline uint32_t magnitude_bits(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u & 0x7fffffffu;
}

/* dst[i] = (float)src[i] for i < m; the largest magnitude_bits seen. */
static uint32_t from_f32(float *restrict dst, const float *restrict src, size_t m)
{
    uint32_t worst = 0;
    for (size_t i = 0; i < m; i++) {
        const float v = src[i];
        dst[i] = v;
        const uint32_t b = magnitude_bits(v);
        worst = b > worst ? b : worst;
    }
    return worst;
}

static uint32_t from_f64(float *restrict dst, const double *restrict src, size_t m)
{
    uint32_t worst = 0;
    for (size_t i = 0; i < m; i++) {
        const float v = (float)src[i];
        dst[i] = v;
        const uint32_t b = magnitude_bits(v);
        worst = b > worst ? b : worst;
    }
    return worst;
}

static void from_u8(float *restrict dst, const uint8_t *restrict src, size_t m)
{
    for (size_t i = 0; i < m; i++) dst[i] = (float)src[i];
}

size_t cnn_dtype_bytes(cnn_dtype dtype)
{
    return dtype == CNN_DTYPE_F64 ? 8 : dtype == CNN_DTYPE_U8 ? 1 : 4;
}

int64_t cnn_to_float32(float *dst, const cnn_host_array *a, size_t first, size_t count)
{
    for (size_t at = 0; at < count; at += CONVERT_BLOCK) {
        const size_t m = count - at < CONVERT_BLOCK ? count - at : CONVERT_BLOCK;
        const size_t from = first + at;
        uint32_t worst = 0;
        switch (a->dtype) {
        case CNN_DTYPE_F32: worst = from_f32(dst + at, (const float *)a->data + from, m); break;
        case CNN_DTYPE_F64: worst = from_f64(dst + at, (const double *)a->data + from, m); break;
        case CNN_DTYPE_U8: from_u8(dst + at, (const uint8_t *)a->data + from, m); break;
        }
        if (worst < F32_EXP_ALL_ONES) continue;
        for (size_t i = 0; i < m; i++)
            if (magnitude_bits(dst[at + i]) >= F32_EXP_ALL_ONES) return (int64_t)(from + i);
    }
    return -1;
}

cnn_status cnn_refuse_value(const cnn_host_array *a, size_t index)
{
    double v = 0.0;
    switch (a->dtype) {
    case CNN_DTYPE_F32: v = ((const float *)a->data)[index]; break;
    case CNN_DTYPE_F64: v = ((const double *)a->data)[index]; break;
    case CNN_DTYPE_U8: v = ((const uint8_t *)a->data)[index]; break;
    }
    char what[64];
    if (isnan(v))
        snprintf(what, sizeof what, "NaN");
    else if (isinf(v))
        snprintf(what, sizeof what, "infinity");
    else
        snprintf(what, sizeof what, "%g (infinity in float32)", v);
    return cnn_set_error(CNN_ERR_VALUE, "%s: expected finite values, got %s at flat index %zu",
                         a->arg ? a->arg : "x", what, a->index0 + index);
}
