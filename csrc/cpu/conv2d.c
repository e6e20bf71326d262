/* conv2d.c: 2-D convolution for the cpu engine, by per-image im2col + SGEMM.
 *
 * With K = c*kh*kw and P = oh*ow, image i's column matrix col (K, P) holds
 * at row (ch*kh + ki)*kw + kj, column r*ow + s the input
 * x[i, ch, r*sh - pad_top + ki, s*sw - pad_left + kj] (zero outside the
 * image). Then, per image:
 *   forward          y_i (f, P) = W (f, K) col (K, P) + b
 *   backward filter  dW (f, K) += dy_i (f, P) col^T
 *   backward data    dcol (K, P) = W^T dy_i, scattered back by col2im.
 * The workspace holds one image's column matrix. A 1x1, stride 1, unpadded
 * convolution uses the image itself as its column matrix. */
#include <string.h>

#include "cpu.h"

size_t cpu_conv2d_workspace(const cnn_conv_desc *d)
{
    if (d->c <= 0 || d->kh <= 0 || d->kw <= 0 || d->oh <= 0 || d->ow <= 0) return 0;
    return (size_t)d->c * d->kh * d->kw * (size_t)d->oh * d->ow * sizeof(float);
}

static cnn_status check_desc(const char *what, const cnn_conv_desc *d)
{
    if (d->n < 0 || d->c < 1 || d->h < 1 || d->w < 1 || d->f < 1 || d->kh < 1 || d->kw < 1 ||
        d->sh < 1 || d->sw < 1 || d->oh < 1 || d->ow < 1)
        return cnn_set_error(CNN_ERR_VALUE,
                             "%s: bad descriptor (n %d, c %d, h %d, w %d, f %d, kernel %dx%d, "
                             "stride %dx%d, out %dx%d)",
                             what, d->n, d->c, d->h, d->w, d->f, d->kh, d->kw, d->sh, d->sw,
                             d->oh, d->ow);
    return CNN_OK;
}

/* Whether the image itself is its column matrix (c, h*w). */
static int is_pointwise(const cnn_conv_desc *d)
{
    return d->kh == 1 && d->kw == 1 && d->sh == 1 && d->sw == 1 && d->pad_top == 0 &&
           d->pad_left == 0 && d->oh == d->h && d->ow == d->w;
}

/* The outputs o in [*lo, *hi) of [0, out) whose input o*stride + off lies in
 * [0, in). */
static void valid_range(int in, int off, int stride, int out, int *lo, int *hi)
{
    int l = off >= 0 ? 0 : (-off + stride - 1) / stride;
    int h = in - 1 - off < 0 ? 0 : (in - 1 - off) / stride + 1;
    if (h > out) h = out;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

/* x (c, h, w) of one image -> col (K, oh*ow). */
static void im2col(const cnn_conv_desc *d, const float *restrict x, float *restrict col)
{
    const int oh = d->oh, ow = d->ow, sw = d->sw;
    const size_t p = (size_t)oh * ow;
    for (int ch = 0; ch < d->c; ++ch) {
        const float *restrict xc = x + (size_t)ch * d->h * d->w;
        for (int ki = 0; ki < d->kh; ++ki) {
            int r_lo, r_hi;
            const int roff = ki - d->pad_top;
            valid_range(d->h, roff, d->sh, oh, &r_lo, &r_hi);
            for (int kj = 0; kj < d->kw; ++kj) {
                float *restrict row = col + ((size_t)(ch * d->kh + ki) * d->kw + kj) * p;
                int s_lo, s_hi;
                const int coff = kj - d->pad_left;
                valid_range(d->w, coff, sw, ow, &s_lo, &s_hi);
                if (r_lo > 0) memset(row, 0, (size_t)r_lo * ow * sizeof(float));
                for (int r = r_lo; r < r_hi; ++r) {
                    float *restrict dst = row + (size_t)r * ow;
                    /* input row of output row r; index coff + s*sw is in the image for s
                     * in [s_lo, s_hi) */
                    const float *restrict src = xc + (size_t)(r * d->sh + roff) * d->w;
                    for (int s = 0; s < s_lo; ++s) dst[s] = 0.0f;
                    if (sw == 1) {
                        for (int s = s_lo; s < s_hi; ++s) dst[s] = src[s + coff];
                    } else {
                        for (int s = s_lo; s < s_hi; ++s) dst[s] = src[s * sw + coff];
                    }
                    for (int s = s_hi; s < ow; ++s) dst[s] = 0.0f;
                }
                if (r_hi < oh) memset(row + (size_t)r_hi * ow, 0, (size_t)(oh - r_hi) * ow * sizeof(float));
            }
        }
    }
}

/* col (K, oh*ow) -> dx (c, h, w) of one image, overwriting dx. */
static void col2im(const cnn_conv_desc *d, const float *restrict col, float *restrict dx)
{
    const int ow = d->ow, sw = d->sw;
    const size_t p = (size_t)d->oh * ow;
    memset(dx, 0, (size_t)d->c * d->h * d->w * sizeof(float));
    for (int ch = 0; ch < d->c; ++ch) {
        float *restrict xc = dx + (size_t)ch * d->h * d->w;
        for (int ki = 0; ki < d->kh; ++ki) {
            int r_lo, r_hi;
            const int roff = ki - d->pad_top;
            valid_range(d->h, roff, d->sh, d->oh, &r_lo, &r_hi);
            for (int kj = 0; kj < d->kw; ++kj) {
                const float *restrict row =
                    col + ((size_t)(ch * d->kh + ki) * d->kw + kj) * p;
                int s_lo, s_hi;
                const int coff = kj - d->pad_left;
                valid_range(d->w, coff, sw, ow, &s_lo, &s_hi);
                for (int r = r_lo; r < r_hi; ++r) {
                    const float *restrict src = row + (size_t)r * ow;
                    float *restrict dst = xc + (size_t)(r * d->sh + roff) * d->w;
                    if (sw == 1) {
                        for (int s = s_lo; s < s_hi; ++s) dst[s + coff] += src[s];
                    } else {
                        for (int s = s_lo; s < s_hi; ++s) dst[s * sw + coff] += src[s];
                    }
                }
            }
        }
    }
}

/* x (n, c, h, w), w (f, c, kh, kw), b (f) or NULL -> y (n, f, oh, ow);
 * ws: cpu_conv2d_workspace(d) bytes. */
cnn_status cpu_conv2d_forward(cnn_ctx *ctx, const cnn_conv_desc *d, const float *restrict x,
                              const float *restrict w, const float *restrict b,
                              float *restrict y, void *ws)
{
    CNN_TRY(check_desc("conv2d_forward", d));
    const int pointwise = is_pointwise(d);
    if (!pointwise && !ws) return cnn_set_error(CNN_ERR_VALUE, "conv2d_forward: no workspace");
    const cnn_gemm_pack *pack = cnn_cpu_pack(ctx);
    const int k = d->c * d->kh * d->kw;
    const int p = d->oh * d->ow;
    const size_t x_img = (size_t)d->c * d->h * d->w;
    const size_t y_img = (size_t)d->f * p;
    float *col = ws;
    for (int i = 0; i < d->n; ++i) {
        const float *xi = x + i * x_img;
        float *restrict yi = y + i * y_img;
        const float *ci = xi;
        if (!pointwise) {
            im2col(d, xi, col);
            ci = col;
        }
        /* y_i (f, p) = W (f, k) col (k, p) */
        cnn_sgemm(pack, 0, 0, d->f, p, k, 1.0f, w, k, ci, p, 0.0f, yi, p);
        if (b) {
            for (int f = 0; f < d->f; ++f) {
                const float bf = b[f];
                float *restrict yf = yi + (size_t)f * p;
                for (int j = 0; j < p; ++j) yf[j] += bf;
            }
        }
    }
    return CNN_OK;
}

/* dy (n, f, oh, ow), w (f, c, kh, kw) -> dx (n, c, h, w), overwritten. */
cnn_status cpu_conv2d_backward_data(cnn_ctx *ctx, const cnn_conv_desc *d,
                                    const float *restrict dy, const float *restrict w,
                                    float *restrict dx, void *ws)
{
    CNN_TRY(check_desc("conv2d_backward_data", d));
    const int pointwise = is_pointwise(d);
    if (!pointwise && !ws)
        return cnn_set_error(CNN_ERR_VALUE, "conv2d_backward_data: no workspace");
    const cnn_gemm_pack *pack = cnn_cpu_pack(ctx);
    const int k = d->c * d->kh * d->kw;
    const int p = d->oh * d->ow;
    const size_t x_img = (size_t)d->c * d->h * d->w;
    const size_t y_img = (size_t)d->f * p;
    float *col = ws;
    for (int i = 0; i < d->n; ++i) {
        const float *dyi = dy + i * y_img;
        float *dxi = dx + i * x_img;
        /* dcol (k, p) = W^T (k, f) dy_i (f, p); W is stored (f, k) */
        if (pointwise) {
            cnn_sgemm(pack, 1, 0, k, p, d->f, 1.0f, w, k, dyi, p, 0.0f, dxi, p);
        } else {
            cnn_sgemm(pack, 1, 0, k, p, d->f, 1.0f, w, k, dyi, p, 0.0f, col, p);
            col2im(d, col, dxi);
        }
    }
    return CNN_OK;
}

/* x (n, c, h, w), dy (n, f, oh, ow) -> dw (f, c, kh, kw) and db (f) or NULL,
 * both overwritten. */
cnn_status cpu_conv2d_backward_filter(cnn_ctx *ctx, const cnn_conv_desc *d,
                                      const float *restrict x, const float *restrict dy,
                                      float *restrict dw, float *restrict db, void *ws)
{
    CNN_TRY(check_desc("conv2d_backward_filter", d));
    const int pointwise = is_pointwise(d);
    if (!pointwise && !ws)
        return cnn_set_error(CNN_ERR_VALUE, "conv2d_backward_filter: no workspace");
    const cnn_gemm_pack *pack = cnn_cpu_pack(ctx);
    const int k = d->c * d->kh * d->kw;
    const int p = d->oh * d->ow;
    const size_t x_img = (size_t)d->c * d->h * d->w;
    const size_t y_img = (size_t)d->f * p;
    float *col = ws;
    if (d->n == 0) memset(dw, 0, (size_t)d->f * k * sizeof(float));
    for (int i = 0; i < d->n; ++i) {
        const float *xi = x + i * x_img;
        const float *ci = xi;
        if (!pointwise) {
            im2col(d, xi, col);
            ci = col;
        }
        /* dW (f, k) (+)= dy_i (f, p) col^T, col stored (k, p) */
        cnn_sgemm(pack, 0, 1, d->f, k, p, 1.0f, dy + i * y_img, p, ci, p, i == 0 ? 0.0f : 1.0f,
                  dw, k);
    }
    if (db) {
        for (int f = 0; f < d->f; ++f) {
            double acc = 0.0;
            for (int i = 0; i < d->n; ++i) acc += cnn_cpu_sum(dy + i * y_img + (size_t)f * p, p);
            db[f] = (float)acc;
        }
    }
    return CNN_OK;
}
