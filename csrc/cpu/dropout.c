/* dropout.c: inverted dropout for the cpu engine.
 * Element (i, ch, r, s) of an NCHW tensor is kept when
 * cnn_uniform(key, ((i*h + r)*w + s)*c + ch) >= rate (its index in Keras's
 * NHWC order), and kept values are multiplied by the float 1 / (1 - rate).
 * The backward draws the same mask again from the key. x and y (and dy and
 * dx) may be the same buffer. */
#include <string.h>

#include "cpu.h"

static cnn_status check_args(const char *what, int n, int c, int h, int w, float rate)
{
    if (n < 0 || c < 0 || h < 0 || w < 0)
        return cnn_set_error(CNN_ERR_VALUE, "%s: negative shape (%d, %d, %d, %d)", what, n, c,
                             h, w);
    if (!(rate >= 0.0f && rate < 1.0f))
        return cnn_set_error(CNN_ERR_VALUE, "%s: rate %g is not in [0, 1)", what, (double)rate);
    return CNN_OK;
}

/* out (n, c, h, w) = in * mask * scale; in and out may be the same buffer. */
static void apply_mask(int n, int c, int h, int w, float rate, uint64_t key, const float *in,
                       float *out)
{
    const size_t count = (size_t)n * c * h * w;
    if (rate == 0.0f) {
        if (in != out && count) memmove(out, in, count * sizeof(float));
        return;
    }
    const float scale = 1.0f / (1.0f - rate);
    const size_t plane = (size_t)h * w;
    for (int i = 0; i < n; ++i) {
        for (int ch = 0; ch < c; ++ch) {
            const size_t at = ((size_t)i * c + ch) * plane;
            const float *src = in + at;
            float *dst = out + at;
            /* NHWC index of (i, ch, 0, 0); it advances by c per pixel */
            const uint64_t base = (uint64_t)i * plane * (uint64_t)c + (uint64_t)ch;
            for (size_t p = 0; p < plane; ++p) {
                const int keep = cnn_uniform(key, base + (uint64_t)p * (uint64_t)c) >= rate;
                dst[p] = keep ? src[p] * scale : 0.0f;
            }
        }
    }
}

/* x (n, c, h, w) -> y (n, c, h, w) */
cnn_status cpu_dropout_forward(cnn_ctx *ctx, int n, int c, int h, int w, float rate,
                               uint64_t key, const float *x, float *y)
{
    (void)ctx;
    CNN_TRY(check_args("dropout_forward", n, c, h, w, rate));
    apply_mask(n, c, h, w, rate, key, x, y);
    return CNN_OK;
}

/* dy (n, c, h, w) -> dx (n, c, h, w), with the forward's mask and scale */
cnn_status cpu_dropout_backward(cnn_ctx *ctx, int n, int c, int h, int w, float rate,
                                uint64_t key, const float *dy, float *dx)
{
    (void)ctx;
    CNN_TRY(check_args("dropout_backward", n, c, h, w, rate));
    apply_mask(n, c, h, w, rate, key, dy, dx);
    return CNN_OK;
}
