/* pool.c: max and average pooling for the cpu and omp engines.
 * Output (r, s) of a plane covers input rows r*sh - pad_top + [0, ph) and
 * columns s*sw - pad_left + [0, pw), clipped to the image: max ignores the
 * padding (the first maximum in row-major window order wins), average divides
 * by the number of in-image elements. Each (image, channel) plane is
 * independent: the omp engine cuts the n*c planes into ranges, one per
 * thread.
 *
 * 2x2 windows at stride 2 inside the image, the seeds' pooling, have their
 * own paths: plain C written to vectorize, and AVX2 for max pooling's
 * forward (its selects and argmax do not auto-vectorize), taken when the
 * GEMM uses AVX2 or AVX-512 (cnn_gemm_path: CPU detection, CNNCUDA_GEMM=portable). Every
 * path gives the same bits as the general code. */
#include <stdatomic.h>
#include <string.h>

#include "cpu.h"

#if defined(__x86_64__) || defined(__i386__)
#define POOL_X86 1
#include <immintrin.h>
#else
#define POOL_X86 0
#endif

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

/* The common case, 2x2 windows at stride 2 that all lie inside the image. */
static int is_full_2x2(const cnn_pool_desc *d)
{
    return d->ph == 2 && d->pw == 2 && d->sh == 2 && d->sw == 2 && d->pad_top == 0 &&
           d->pad_left == 0 && 2 * d->oh <= d->h && 2 * d->ow <= d->w;
}

/* Outputs [s0, ow) of output row r of max_plane for full 2x2 windows: rows
 * x0 (2r) and x1 (2r + 1), the argmax of the pair as flat plane indices. */
static void max_row_2x2(int s0, int ow, int w, int32_t base, const float *restrict x0,
                        const float *restrict x1, float *restrict yr, int32_t *restrict ar)
{
    for (int s = s0; s < ow; ++s) {
        const float a = x0[2 * s], b = x0[2 * s + 1], c = x1[2 * s], e = x1[2 * s + 1];
        const int right_top = b > a, right_bottom = e > c; /* strict: first max wins */
        const float top = right_top ? b : a, bottom = right_bottom ? e : c;
        const int down = bottom > top;
        yr[s] = down ? bottom : top;
        ar[s] = base + 2 * s + (down ? w + right_bottom : right_top);
    }
}

#if POOL_X86
/* Outputs s .. s+7 from x0[2s, 2s + 16) and x1 likewise, x0 and x1 given at
 * 2s; idx0 = the plane index of x0[2s]. The even and odd columns of each
 * input row are split with a shuffle, compared with the same strict > (false
 * for NaN, as in C) and blended; the argmax follows the same selects in
 * integers. */
__attribute__((target("avx2"), always_inline)) static inline void
max8_2x2_avx2(const float *x0, const float *x1, int32_t idx0, int w, float *y, int32_t *am)
{
    const __m256i lane2 = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
    const __m256 t0 = _mm256_loadu_ps(x0), t1 = _mm256_loadu_ps(x0 + 8);
    const __m256 u0 = _mm256_loadu_ps(x1), u1 = _mm256_loadu_ps(x1 + 8);
    /* shuffle gives lanes (0 2 8 10 | 4 6 12 14); the permute puts them in order */
    const __m256 a = _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(t0, t1, 0x88)), 0xD8));
    const __m256 b = _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(t0, t1, 0xDD)), 0xD8));
    const __m256 c = _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(u0, u1, 0x88)), 0xD8));
    const __m256 e = _mm256_castpd_ps(
        _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(u0, u1, 0xDD)), 0xD8));
    const __m256 rt = _mm256_cmp_ps(b, a, _CMP_GT_OQ);
    const __m256 rb = _mm256_cmp_ps(e, c, _CMP_GT_OQ);
    const __m256 top = _mm256_blendv_ps(a, b, rt), bottom = _mm256_blendv_ps(c, e, rb);
    const __m256 down = _mm256_cmp_ps(bottom, top, _CMP_GT_OQ);
    _mm256_storeu_ps(y, _mm256_blendv_ps(top, bottom, down));
    /* index idx0 + 2 lane + (down ? w + rb : rt); a true mask is -1 */
    const __m256i at = _mm256_add_epi32(_mm256_set1_epi32(idx0), lane2);
    const __m256i it = _mm256_sub_epi32(at, _mm256_castps_si256(rt));
    const __m256i ib =
        _mm256_sub_epi32(_mm256_add_epi32(at, _mm256_set1_epi32(w)), _mm256_castps_si256(rb));
    const __m256i idx = _mm256_castps_si256(
        _mm256_blendv_ps(_mm256_castsi256_ps(it), _mm256_castsi256_ps(ib), down));
    _mm256_storeu_si256((__m256i *)am, idx);
}

/* A whole output row; the last partial group of 8 goes through copies of its
 * inputs (padded with zeros) so that nothing is read past the row. */
__attribute__((target("avx2"))) static void max_row_2x2_avx2(int ow, int w, int32_t base,
                                                            const float *restrict x0,
                                                            const float *restrict x1,
                                                            float *restrict yr,
                                                            int32_t *restrict ar)
{
    int s = 0;
    for (; s + 8 <= ow; s += 8) max8_2x2_avx2(x0 + 2 * s, x1 + 2 * s, base + 2 * s, w, yr + s, ar + s);
    if (s < ow) {
        const int rest = ow - s;
        float t0[16] = {0}, t1[16] = {0}, y[8];
        int32_t am[8];
        memcpy(t0, x0 + 2 * s, (size_t)(2 * rest) * sizeof(float));
        memcpy(t1, x1 + 2 * s, (size_t)(2 * rest) * sizeof(float));
        max8_2x2_avx2(t0, t1, base + 2 * s, w, y, am);
        memcpy(yr + s, y, (size_t)rest * sizeof(float));
        memcpy(ar + s, am, (size_t)rest * sizeof(int32_t));
    }
}
#endif

static void max_plane_2x2(const cnn_pool_desc *d, int avx2, const float *restrict x,
                          float *restrict y, int32_t *restrict argmax)
{
    const int w = d->w;
    for (int r = 0; r < d->oh; ++r) {
        const float *restrict x0 = x + (size_t)(2 * r) * w; /* window rows 2r, 2r + 1 */
        const float *restrict x1 = x0 + w;
        float *restrict yr = y + (size_t)r * d->ow;
        int32_t *restrict ar = argmax + (size_t)r * d->ow;
        const int32_t base = 2 * r * w;
#if POOL_X86
        if (avx2) {
            max_row_2x2_avx2(d->ow, w, base, x0, x1, yr, ar);
            continue;
        }
#else
        (void)avx2;
#endif
        max_row_2x2(0, d->ow, w, base, x0, x1, yr, ar);
    }
}

/* avg_plane for full 2x2 windows: the same sum order, ((a + b) + c) + e, and
 * the same division by 4. */
static void avg_plane_2x2(const cnn_pool_desc *d, const float *restrict x, float *restrict y)
{
    const int w = d->w, ow = d->ow;
    for (int r = 0; r < d->oh; ++r) {
        const float *restrict x0 = x + (size_t)(2 * r) * w;
        const float *restrict x1 = x0 + w;
        float *restrict yr = y + (size_t)r * ow;
        for (int s = 0; s < ow; ++s)
            yr[s] = (((x0[2 * s] + x0[2 * s + 1]) + x1[2 * s]) + x1[2 * s + 1]) / 4.0f;
    }
}

/* The average backward for full 2x2 windows: each input of a window gets
 * a quarter of its gradient; rows and columns past the windows get zero.
 * With relu_y (the plane of the pool's input, a ReLU's output), an input
 * whose relu_y is not > 0 gets zero instead (pool_backward_relu). */
static void avg_backward_2x2(const cnn_pool_desc *d, const float *restrict g,
                             const float *restrict relu_y, float *restrict dx)
{
    const int w = d->w, ow = d->ow;
    for (int r = 0; r < d->oh; ++r) {
        float *restrict d0 = dx + (size_t)(2 * r) * w;
        float *restrict d1 = d0 + w;
        const float *restrict gr = g + (size_t)r * ow;
        if (relu_y) {
            const float *restrict y0 = relu_y + (size_t)(2 * r) * w;
            const float *restrict y1 = y0 + w;
            for (int s = 0; s < ow; ++s) {
                const float share = gr[s] / 4.0f + 0.0f;
                d0[2 * s] = y0[2 * s] > 0.0f ? share : 0.0f;
                d0[2 * s + 1] = y0[2 * s + 1] > 0.0f ? share : 0.0f;
                d1[2 * s] = y1[2 * s] > 0.0f ? share : 0.0f;
                d1[2 * s + 1] = y1[2 * s + 1] > 0.0f ? share : 0.0f;
            }
        } else {
            for (int s = 0; s < ow; ++s) {
                const float share = gr[s] / 4.0f + 0.0f; /* as 0 + share: -0 becomes +0 */
                d0[2 * s] = share;
                d0[2 * s + 1] = share;
                d1[2 * s] = share;
                d1[2 * s + 1] = share;
            }
        }
        for (int j = 2 * ow; j < w; ++j) d0[j] = d1[j] = 0.0f;
    }
    if (2 * d->oh < d->h)
        memset(dx + (size_t)(2 * d->oh) * w, 0, (size_t)(d->h - 2 * d->oh) * w * sizeof(float));
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

typedef struct pool_job {
    const cnn_pool_desc *d;
    size_t in_plane, out_plane;
    int full_2x2, avx2;
    const float *x, *dy;
    const float *relu_y; /* pool_backward_relu: the pool's input, a ReLU's output */
    float *y, *dx;
    int32_t *argmax;
    const int32_t *argmax_in;
    atomic_long bad; /* backward: 1 + a bad argmax value, 0 when none */
} pool_job;

static void forward_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    pool_job *j = arg;
    const cnn_pool_desc *d = j->d;
    for (long q = lo; q < hi; ++q) {
        const float *xq = j->x + q * j->in_plane;
        float *yq = j->y + q * j->out_plane;
        if (d->mode == CNN_POOL_MAX && j->full_2x2)
            max_plane_2x2(d, j->avx2, xq, yq, j->argmax + q * j->out_plane);
        else if (d->mode == CNN_POOL_MAX)
            max_plane(d, xq, yq, j->argmax + q * j->out_plane);
        else if (j->full_2x2)
            avg_plane_2x2(d, xq, yq);
        else
            avg_plane(d, xq, yq);
    }
}

/* x (n, c, h, w) -> y (n, c, oh, ow); argmax (n, c, oh, ow) for max (may be
 * NULL for average). */
cnn_status cpu_pool_forward(cnn_ctx *ctx, const cnn_pool_desc *d, const float *x, float *y,
                            int32_t *argmax)
{
    CNN_TRY(check_desc("pool_forward", d));
    if (d->mode == CNN_POOL_MAX && !argmax)
        return cnn_set_error(CNN_ERR_VALUE, "pool_forward: max pooling needs an argmax buffer");
    pool_job j;
    memset(&j, 0, sizeof j);
    j.d = d;
    j.in_plane = (size_t)d->h * d->w;
    j.out_plane = (size_t)d->oh * d->ow;
    j.full_2x2 = is_full_2x2(d);
    j.avx2 = cnn_gemm_path() != CNN_GEMM_PORTABLE; /* AVX2 or AVX-512 */
    j.x = x;
    j.y = y;
    j.argmax = argmax;
    const long planes = (long)d->n * d->c;
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, planes, (double)(j.in_plane + j.out_plane),
                                   CNN_GRAIN_ELEMENTS),
                     planes, forward_range, &j);
    return CNN_OK;
}

static void backward_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    pool_job *j = arg;
    const cnn_pool_desc *d = j->d;
    const size_t in_plane = j->in_plane, out_plane = j->out_plane;
    for (long q = lo; q < hi; ++q) {
        const float *restrict g = j->dy + q * out_plane;
        float *restrict dxq = j->dx + q * in_plane;
        const float *restrict yq = j->relu_y ? j->relu_y + q * in_plane : NULL;
        if (d->mode == CNN_POOL_AVG && j->full_2x2) {
            avg_backward_2x2(d, g, yq, dxq);
            continue;
        }
        memset(dxq, 0, in_plane * sizeof(float));
        if (d->mode == CNN_POOL_MAX) {
            const int32_t *restrict am = j->argmax_in + q * out_plane;
            for (size_t o = 0; o < out_plane; ++o) {
                const int32_t a = am[o];
                if (a < 0) continue; /* empty window */
                if ((size_t)a >= in_plane) {
                    atomic_store(&j->bad, 1L + a);
                    return;
                }
                /* masked where each gradient lands: every one that reaches
                 * input a is masked alike, so the sum is the masked sum */
                dxq[a] += yq && !(yq[a] > 0.0f) ? 0.0f : g[o];
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
                        for (int c = c0; c < c1; ++c) xr[c] += share;
                    }
                }
            }
            /* the ReLU's backward over the plane while it is in cache */
            if (yq)
                for (size_t e = 0; e < in_plane; ++e) dxq[e] = yq[e] > 0.0f ? dxq[e] : 0.0f;
        }
    }
}

static cnn_status backward(cnn_ctx *ctx, const char *what, const cnn_pool_desc *d,
                           const float *dy, const int32_t *argmax, const float *relu_y,
                           float *dx)
{
    CNN_TRY(check_desc(what, d));
    if (d->mode == CNN_POOL_MAX && !argmax)
        return cnn_set_error(CNN_ERR_VALUE, "%s: max pooling needs an argmax buffer", what);
    pool_job j;
    memset(&j, 0, sizeof j);
    j.d = d;
    j.in_plane = (size_t)d->h * d->w;
    j.out_plane = (size_t)d->oh * d->ow;
    j.full_2x2 = is_full_2x2(d);
    j.dy = dy;
    j.dx = dx;
    j.argmax_in = argmax;
    j.relu_y = relu_y;
    atomic_init(&j.bad, 0L);
    const long planes = (long)d->n * d->c;
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, planes, (double)(j.in_plane + j.out_plane),
                                   CNN_GRAIN_ELEMENTS),
                     planes, backward_range, &j);
    const long bad = atomic_load(&j.bad);
    if (bad)
        return cnn_set_error(CNN_ERR_VALUE, "%s: argmax %ld outside a %dx%d plane", what,
                             bad - 1, d->h, d->w);
    return CNN_OK;
}

/* dy (n, c, oh, ow), argmax (n, c, oh, ow) (max only) -> dx (n, c, h, w),
 * overwritten. */
cnn_status cpu_pool_backward(cnn_ctx *ctx, const cnn_pool_desc *d, const float *dy,
                             const int32_t *argmax, float *dx)
{
    return backward(ctx, "pool_backward", d, dy, argmax, NULL, dx);
}

/* The same, then the backward of the ReLU whose output y (n, c, h, w) the
 * pool read: the mask is applied where dx is written, instead of in a pass
 * of its own over y, dy and dx (cnn.h). */
cnn_status cpu_pool_backward_relu(cnn_ctx *ctx, const cnn_pool_desc *d, const float *dy,
                                  const int32_t *argmax, const float *y, float *dx)
{
    if (!y)
        return cnn_set_error(CNN_ERR_VALUE, "pool_backward_relu: the ReLU's output y is NULL");
    return backward(ctx, "pool_backward_relu", d, dy, argmax, y, dx);
}
