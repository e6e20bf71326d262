/* pool.c: max and average pooling for the cpu engine.
 * Output (r, s) of a plane covers input rows r*sh - pad_top + [0, ph) and
 * columns s*sw - pad_left + [0, pw), clipped to the image: max ignores the
 * padding (the first maximum in row-major window order wins), average divides
 * by the number of in-image elements. Each (image, channel) plane is
 * independent. */
#include <string.h>

#include "cpu.h"

static cnn_status check_desc(const char *what, const cnn_pool_desc *d)
{
    if (d->mode != CNN_POOL_MAX && d->mode != CNN_POOL_AVG)
        return cnn_set_error(CNN_ERR_VALUE, "%s: unknown pool mode %d", what, d->mode);
    if (d->n < 0 || d->c < 1 || d->h < 1 || d->w < 1 || d->ph < 1 || d->pw < 1 || d->sh < 1 ||
        d->sw < 1 || d->oh < 1 || d->ow < 1)
        return cnn_set_error(CNN_ERR_VALUE,
                             "%s: bad descriptor (n %d, c %d, h %d, w %d, pool %dx%d, "
                             "stride %dx%d, out %dx%d)",
                             what, d->n, d->c, d->h, d->w, d->ph, d->pw, d->sh, d->sw, d->oh,
                             d->ow);
    return CNN_OK;
}

/* The window [*lo, *hi) of output o along an axis of length in. */
static inline void window(int o, int stride, int pad, int k, int in, int *lo, int *hi)
{
    const int start = o * stride - pad;
    *lo = start < 0 ? 0 : start;
    *hi = start + k > in ? in : start + k;
}

/* One plane: x (h, w) -> y (oh, ow), argmax (oh, ow) into x's plane (-1 for
 * an empty window, whose output is 0). The comparisons are written as
 * selects, not branches: on real data the maximum's position is random, and
 * mispredicted branches cost more than the loads. */
static void max_plane(const cnn_pool_desc *d, const float *restrict x, float *restrict y,
                      int32_t *restrict argmax)
{
    for (int r = 0; r < d->oh; ++r) {
        int r0, r1;
        window(r, d->sh, d->pad_top, d->ph, d->h, &r0, &r1);
        for (int s = 0; s < d->ow; ++s) {
            int c0, c1;
            window(s, d->sw, d->pad_left, d->pw, d->w, &c0, &c1);
            if (r0 >= r1 || c0 >= c1) {
                y[r * d->ow + s] = 0.0f;
                argmax[r * d->ow + s] = -1;
                continue;
            }
            int32_t at = (int32_t)(r0 * d->w + c0);
            float best = x[at];
            for (int i = r0; i < r1; ++i) {
                const float *restrict xr = x + (size_t)i * d->w;
                for (int j = c0; j < c1; ++j) {
                    const float v = xr[j];
                    const int32_t idx = (int32_t)(i * d->w + j);
                    const int greater = v > best; /* strict: the first maximum wins */
                    best = greater ? v : best;
                    at = greater ? idx : at;
                }
            }
            y[r * d->ow + s] = best;
            argmax[r * d->ow + s] = at;
        }
    }
}

/* The common case, 2x2 windows at stride 2 that all lie inside the image:
 * the same result as max_plane, written so the compiler vectorizes it. */
static int is_full_2x2(const cnn_pool_desc *d)
{
    return d->ph == 2 && d->pw == 2 && d->sh == 2 && d->sw == 2 && d->pad_top == 0 &&
           d->pad_left == 0 && 2 * d->oh <= d->h && 2 * d->ow <= d->w;
}

static void max_plane_2x2(const cnn_pool_desc *d, const float *restrict x, float *restrict y,
                          int32_t *restrict argmax)
{
    const int w = d->w;
    for (int r = 0; r < d->oh; ++r) {
        const float *restrict x0 = x + (size_t)(2 * r) * w; /* window rows 2r, 2r + 1 */
        const float *restrict x1 = x0 + w;
        float *restrict yr = y + (size_t)r * d->ow;
        int32_t *restrict ar = argmax + (size_t)r * d->ow;
        const int32_t base = 2 * r * w;
        for (int s = 0; s < d->ow; ++s) {
            const float a = x0[2 * s], b = x0[2 * s + 1], c = x1[2 * s], e = x1[2 * s + 1];
            const int right_top = b > a, right_bottom = e > c; /* strict: first max wins */
            const float top = right_top ? b : a, bottom = right_bottom ? e : c;
            const int down = bottom > top;
            yr[s] = down ? bottom : top;
            ar[s] = base + 2 * s + (down ? w + right_bottom : right_top);
        }
    }
}

/* One plane: x (h, w) -> y (oh, ow), the mean of each clipped window. */
static void avg_plane(const cnn_pool_desc *d, const float *restrict x, float *restrict y)
{
    for (int r = 0; r < d->oh; ++r) {
        int r0, r1;
        window(r, d->sh, d->pad_top, d->ph, d->h, &r0, &r1);
        for (int s = 0; s < d->ow; ++s) {
            int c0, c1;
            window(s, d->sw, d->pad_left, d->pw, d->w, &c0, &c1);
            float sum = 0.0f;
            for (int i = r0; i < r1; ++i) {
                const float *restrict xr = x + (size_t)i * d->w;
                for (int j = c0; j < c1; ++j) sum += xr[j];
            }
            const int count = (r1 > r0 && c1 > c0) ? (r1 - r0) * (c1 - c0) : 0;
            y[r * d->ow + s] = count ? sum / (float)count : 0.0f;
        }
    }
}

/* x (n, c, h, w) -> y (n, c, oh, ow); argmax (n, c, oh, ow) for max (may be
 * NULL for average). */
cnn_status cpu_pool_forward(cnn_ctx *ctx, const cnn_pool_desc *d, const float *restrict x,
                            float *restrict y, int32_t *restrict argmax)
{
    (void)ctx;
    CNN_TRY(check_desc("pool_forward", d));
    if (d->mode == CNN_POOL_MAX && !argmax)
        return cnn_set_error(CNN_ERR_VALUE, "pool_forward: max pooling needs an argmax buffer");
    const size_t in_plane = (size_t)d->h * d->w;
    const size_t out_plane = (size_t)d->oh * d->ow;
    const long planes = (long)d->n * d->c;
    const int full_2x2 = is_full_2x2(d);
    for (long q = 0; q < planes; ++q) {
        if (d->mode == CNN_POOL_MAX && full_2x2)
            max_plane_2x2(d, x + q * in_plane, y + q * out_plane, argmax + q * out_plane);
        else if (d->mode == CNN_POOL_MAX)
            max_plane(d, x + q * in_plane, y + q * out_plane, argmax + q * out_plane);
        else
            avg_plane(d, x + q * in_plane, y + q * out_plane);
    }
    return CNN_OK;
}

/* dy (n, c, oh, ow), argmax (n, c, oh, ow) (max only) -> dx (n, c, h, w),
 * overwritten. */
cnn_status cpu_pool_backward(cnn_ctx *ctx, const cnn_pool_desc *d, const float *restrict dy,
                             const int32_t *restrict argmax, float *restrict dx)
{
    (void)ctx;
    CNN_TRY(check_desc("pool_backward", d));
    if (d->mode == CNN_POOL_MAX && !argmax)
        return cnn_set_error(CNN_ERR_VALUE, "pool_backward: max pooling needs an argmax buffer");
    const size_t in_plane = (size_t)d->h * d->w;
    const size_t out_plane = (size_t)d->oh * d->ow;
    const long planes = (long)d->n * d->c;
    for (long q = 0; q < planes; ++q) {
        const float *restrict g = dy + q * out_plane;
        float *restrict dxq = dx + q * in_plane;
        memset(dxq, 0, in_plane * sizeof(float));
        if (d->mode == CNN_POOL_MAX) {
            const int32_t *restrict am = argmax + q * out_plane;
            for (size_t o = 0; o < out_plane; ++o) {
                const int32_t a = am[o];
                if (a < 0) continue; /* empty window */
                if ((size_t)a >= in_plane)
                    return cnn_set_error(CNN_ERR_VALUE,
                                         "pool_backward: argmax %d outside a %dx%d plane",
                                         (int)a, d->h, d->w);
                dxq[a] += g[o];
            }
        } else {
            for (int r = 0; r < d->oh; ++r) {
                int r0, r1;
                window(r, d->sh, d->pad_top, d->ph, d->h, &r0, &r1);
                for (int s = 0; s < d->ow; ++s) {
                    int c0, c1;
                    window(s, d->sw, d->pad_left, d->pw, d->w, &c0, &c1);
                    if (r1 <= r0 || c1 <= c0) continue;
                    const float share = g[r * d->ow + s] / (float)((r1 - r0) * (c1 - c0));
                    for (int i = r0; i < r1; ++i) {
                        float *restrict xr = dxq + (size_t)i * d->w;
                        for (int j = c0; j < c1; ++j) xr[j] += share;
                    }
                }
            }
        }
    }
    return CNN_OK;
}
