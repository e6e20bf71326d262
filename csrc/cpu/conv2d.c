/* conv2d.c: 2-D convolution for the cpu and omp engines, by im2col + SGEMM.
 *
 * With K = c*kh*kw and P = oh*ow, image i's column matrix col_i (K, P) holds
 * at row (ch*kh + ki)*kw + kj, column r*ow + s the input
 * x[i, ch, r*sh - pad_top + ki, s*sw - pad_left + kj] (zero outside the
 * image). Then, per image:
 *   forward          y_i (f, P) = W (f, K) col_i (K, P) + b
 *   backward filter  dW (f, K) = sum_i dy_i (f, P) col_i^T
 *   backward data    dcol_i (K, P) = W^T dy_i, scattered back by col2im.
 *
 * The workspace holds the column matrices of the whole batch (n K P floats):
 * the forward writes them and the backward filter, which the Net calls next
 * for the same batch (cnn.h), reads them instead of building them again; the
 * backward data then reuses image i's matrix for dcol_i. A 1x1, stride 1,
 * unpadded convolution uses the image itself as its column matrix.
 *
 * Threads (omp): images are independent in the forward and the backward
 * data, so a batch is cut into ranges of images, each on one thread with its
 * own GEMM packing scratch. The filter gradient sums over images: the cpu
 * engine accumulates image after image into dW; the omp engine cuts the batch
 * into filter_chunks(n) fixed chunks (a rule of n and the layer's shape only,
 * never of the thread count), accumulates each chunk into its own partial in
 * the workspace, and sums the partials in chunk order, so its dW has the same
 * bits for any thread count. A batch of fewer images than threads runs image
 * after image with the GEMM itself threaded (bit-identical to the serial
 * GEMM). */
#include <string.h>

#include "cpu.h"

/* Filter-gradient partials: at most this many chunks, and at most this many
 * floats for all of them. */
#define CONV_CHUNKS_MAX 32
#define CONV_PARTIAL_FLOATS (4L << 20)

/* Whether the image itself is its column matrix (c, h*w). */
static int is_pointwise(const cnn_conv_desc *d)
{
    return d->kh == 1 && d->kw == 1 && d->sh == 1 && d->sw == 1 && d->pad_top == 0 &&
           d->pad_left == 0 && d->oh == d->h && d->ow == d->w;
}

/* Floats of one image's column matrix (0 when the image is its own). */
static size_t col_floats(const cnn_conv_desc *d)
{
    if (is_pointwise(d)) return 0;
    return (size_t)d->c * d->kh * d->kw * (size_t)d->oh * d->ow;
}

/* The number of chunks the omp engine cuts a batch of n into for the filter
 * gradient: chunk j is images [j*n/C, (j+1)*n/C). */
static int filter_chunks(const cnn_conv_desc *d, int n)
{
    const long fk = (long)d->f * d->c * d->kh * d->kw;
    long chunks = n < CONV_CHUNKS_MAX ? n : CONV_CHUNKS_MAX;
    const long by_memory = CONV_PARTIAL_FLOATS / (fk > 0 ? fk : 1);
    if (chunks > by_memory) chunks = by_memory;
    return chunks < 1 ? 1 : (int)chunks;
}

size_t cpu_conv2d_workspace(const cnn_conv_desc *d)
{
    if (d->n <= 0 || d->c <= 0 || d->kh <= 0 || d->kw <= 0 || d->oh <= 0 || d->ow <= 0) return 0;
    return (size_t)d->n * col_floats(d) * sizeof(float);
}

/* The column matrices, then the partials of filter_chunks(d->n) > 1 chunks. */
size_t omp_conv2d_workspace(const cnn_conv_desc *d)
{
    if (d->n <= 0 || d->c <= 0 || d->f <= 0 || d->kh <= 0 || d->kw <= 0) return 0;
    const int chunks = filter_chunks(d, d->n);
    const size_t fk = (size_t)d->f * d->c * d->kh * d->kw;
    return cpu_conv2d_workspace(d) + (chunks > 1 ? (size_t)chunks * fk * sizeof(float) : 0);
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

/* dst[0, len) = src[0, len), copied 8 floats at a time: when `spare`, the
 * last copy may run up to 7 floats past both ends (the caller has checked
 * that both stay inside their buffers and that what it overwrites in dst is
 * written again later). Rows of a column matrix are short (28 floats for
 * LeNet's first layer, 10 for its second, 13 and 4 for the CIFAR CNN's
 * second and third), so a copy with an exact tail costs more in loop
 * overhead than in data; 8 floats a step made im2col 20-25% faster than 4
 * on the 10..13-float rows (dev machine). */
static inline void copy_row(float *restrict dst, const float *restrict src, int len, int spare)
{
    if (spare) {
        for (int s = 0; s < len; s += 8) memcpy(dst + s, src + s, 8 * sizeof(float));
    } else {
        for (int s = 0; s < len; ++s) dst[s] = src[s];
    }
}

/* x (c, h, w) of one image -> col (K, oh*ow). Written in increasing address
 * order, so a row copy running past its end is overwritten by what follows. */
static void im2col(const cnn_conv_desc *d, const float *restrict x, float *restrict col)
{
    const int oh = d->oh, ow = d->ow, sw = d->sw;
    const size_t p = (size_t)oh * ow;
    const float *x_end = x + (size_t)d->c * d->h * d->w;
    const float *col_end = col + (size_t)d->c * d->kh * d->kw * p;
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
                const int len = s_hi - s_lo, rounded = (len + 7) & ~7;
                if (r_lo > 0) memset(row, 0, (size_t)r_lo * ow * sizeof(float));
                for (int r = r_lo; r < r_hi; ++r) {
                    float *restrict dst = row + (size_t)r * ow;
                    /* input row of output row r; index coff + s*sw is in the image for s
                     * in [s_lo, s_hi) */
                    const float *restrict src = xc + (size_t)(r * d->sh + roff) * d->w;
                    for (int s = 0; s < s_lo; ++s) dst[s] = 0.0f;
                    if (sw == 1) {
                        const float *from = src + s_lo + coff;
                        copy_row(dst + s_lo, from, len,
                                 dst + s_lo + rounded <= col_end && from + rounded <= x_end);
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

/* dst[0, len) += src[0, len), 8 then 4 floats at a time in vectors of the
 * compiler's (GCC and Clang vector extensions; unaligned through memcpy):
 * the rows are short, and the plain loop was vectorized two floats wide.
 * Each element still gets one addition, so the result does not change. */
typedef float v4f __attribute__((vector_size(16)));
typedef float v8f __attribute__((vector_size(32)));

static inline void add_row(float *restrict dst, const float *restrict src, int len)
{
    int s = 0;
    for (; s + 8 <= len; s += 8) {
        v8f a, b;
        memcpy(&a, dst + s, sizeof a);
        memcpy(&b, src + s, sizeof b);
        a += b;
        memcpy(dst + s, &a, sizeof a);
    }
    if (s + 4 <= len) {
        v4f a, b;
        memcpy(&a, dst + s, sizeof a);
        memcpy(&b, src + s, sizeof b);
        a += b;
        memcpy(dst + s, &a, sizeof a);
        s += 4;
    }
    for (; s < len; ++s) dst[s] += src[s];
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
                        add_row(dst + s_lo + coff, src + s_lo, s_hi - s_lo);
                    } else {
                        for (int s = s_lo; s < s_hi; ++s) dst[s * sw + coff] += src[s];
                    }
                }
            }
        }
    }
}

/* ------------------------------------------------------------ the passes */

typedef struct conv_job {
    cnn_ctx *ctx;
    const cnn_conv_desc *d;
    int k, p;                 /* K, P */
    size_t x_img, y_img, col; /* floats per image of x, y, col */
    const float *x, *w, *b, *dy;
    float *y, *dx, *ws, *dw, *db;
    int chunks;               /* filter gradient: chunks of the batch */
    int relu;                 /* forward: y = relu(conv + b) (conv2d_forward_relu) */
} conv_job;

static conv_job make_job(cnn_ctx *ctx, const cnn_conv_desc *d, void *ws)
{
    conv_job j;
    memset(&j, 0, sizeof j);
    j.ctx = ctx;
    j.d = d;
    j.k = d->c * d->kh * d->kw;
    j.p = d->oh * d->ow;
    j.x_img = (size_t)d->c * d->h * d->w;
    j.y_img = (size_t)d->f * j.p;
    j.col = col_floats(d);
    j.ws = ws;
    return j;
}

/* The GEMM of one image: with the scratch of `pack`, or threaded over the
 * context's threads when pack is NULL. */
static void gemm(const conv_job *j, const cnn_gemm_pack *pack, int ta, int tb, int m, int n,
                 int k, const float *a, int lda, const float *b, int ldb, float beta, float *c,
                 int ldc)
{
    if (pack)
        cnn_sgemm(pack, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
    else
        cnn_cpu_sgemm(j->ctx, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}

/* Runs fn over the n images (or chunks): on ranges of them, one per thread,
 * when there are enough; otherwise one after another with threaded GEMMs
 * (fn gets slot -1). */
static void over_images(const conv_job *j, long count, double macs_each, cnn_range_fn *fn)
{
    const int threads = cnn_cpu_get(j->ctx)->threads;
    if (threads > 1 && 2 * count < threads) {
        fn((void *)j, 0, count, -1);
        return;
    }
    cnn_cpu_parallel(j->ctx, cnn_cpu_parts(j->ctx, count, macs_each, CNN_GRAIN_MACS), count,
                     fn, (void *)j);
}

static const cnn_gemm_pack *slot_pack(const conv_job *j, int slot)
{
    return slot < 0 ? NULL : &cnn_cpu_get(j->ctx)->packs[slot];
}

/* One image's output yi (f, p), just written by the GEMM and still in
 * cache: adds the bias and, for conv2d_forward_relu, applies the ReLU in the
 * same pass, with activation.c's expression (v < 0 ? 0 : v, so -0 and NaN
 * pass as they would there). Without a bias nothing is added (adding 0 would
 * turn -0 into +0). */
static void add_bias_relu(const conv_job *j, float *restrict yi)
{
    for (int f = 0; f < j->d->f; ++f) {
        float *restrict yf = yi + (size_t)f * j->p;
        if (j->b && j->relu) {
            const float bf = j->b[f];
            for (int q = 0; q < j->p; ++q) {
                const float v = yf[q] + bf;
                yf[q] = v < 0.0f ? 0.0f : v;
            }
        } else if (j->b) {
            const float bf = j->b[f];
            for (int q = 0; q < j->p; ++q) yf[q] += bf;
        } else if (j->relu) {
            for (int q = 0; q < j->p; ++q) yf[q] = yf[q] < 0.0f ? 0.0f : yf[q];
        }
    }
}

static void forward_range(void *arg, long lo, long hi, int slot)
{
    const conv_job *j = arg;
    const cnn_conv_desc *d = j->d;
    const cnn_gemm_pack *pack = slot_pack(j, slot);
    for (long i = lo; i < hi; ++i) {
        const float *xi = j->x + i * j->x_img;
        float *restrict yi = j->y + i * j->y_img;
        const float *ci = xi;
        if (j->col) {
            float *col = j->ws + i * j->col;
            im2col(d, xi, col);
            ci = col;
        }
        /* y_i (f, p) = W (f, k) col (k, p) */
        gemm(j, pack, 0, 0, d->f, j->p, j->k, j->w, j->k, ci, j->p, 0.0f, yi, j->p);
        add_bias_relu(j, yi);
    }
}

static cnn_status forward(cnn_ctx *ctx, const char *what, const cnn_conv_desc *d,
                          const float *x, const float *w, const float *b, int relu, float *y,
                          void *ws)
{
    CNN_TRY(check_desc(what, d));
    conv_job j = make_job(ctx, d, ws);
    if (j.col && !ws) return cnn_set_error(CNN_ERR_VALUE, "%s: no workspace", what);
    j.x = x;
    j.w = w;
    j.b = b;
    j.relu = relu;
    j.y = y;
    over_images(&j, d->n, (double)d->f * j.k * j.p, forward_range);
    return CNN_OK;
}

/* x (n, c, h, w), w (f, c, kh, kw), b (f) or NULL -> y (n, f, oh, ow);
 * leaves the column matrices in ws for the backward filter. */
cnn_status cpu_conv2d_forward(cnn_ctx *ctx, const cnn_conv_desc *d, const float *x,
                              const float *w, const float *b, float *y, void *ws)
{
    return forward(ctx, "conv2d_forward", d, x, w, b, 0, y, ws);
}

/* The same with y = relu(conv + b): the ReLU activation layer that follows
 * the convolution, done in the bias pass (cnn.h). */
cnn_status cpu_conv2d_forward_relu(cnn_ctx *ctx, const cnn_conv_desc *d, const float *x,
                                   const float *w, const float *b, float *y, void *ws)
{
    return forward(ctx, "conv2d_forward_relu", d, x, w, b, 1, y, ws);
}

static void backward_data_range(void *arg, long lo, long hi, int slot)
{
    const conv_job *j = arg;
    const cnn_conv_desc *d = j->d;
    const cnn_gemm_pack *pack = slot_pack(j, slot);
    for (long i = lo; i < hi; ++i) {
        const float *dyi = j->dy + i * j->y_img;
        float *dxi = j->dx + i * j->x_img;
        /* dcol (k, p) = W^T (k, f) dy_i (f, p); W is stored (f, k) */
        if (!j->col) {
            gemm(j, pack, 1, 0, j->k, j->p, d->f, j->w, j->k, dyi, j->p, 0.0f, dxi, j->p);
        } else {
            float *col = j->ws + i * j->col;
            gemm(j, pack, 1, 0, j->k, j->p, d->f, j->w, j->k, dyi, j->p, 0.0f, col, j->p);
            col2im(d, col, dxi);
        }
    }
}

/* dy (n, f, oh, ow), w (f, c, kh, kw) -> dx (n, c, h, w), overwritten. */
cnn_status cpu_conv2d_backward_data(cnn_ctx *ctx, const cnn_conv_desc *d, const float *dy,
                                    const float *w, float *dx, void *ws)
{
    CNN_TRY(check_desc("conv2d_backward_data", d));
    conv_job j = make_job(ctx, d, ws);
    if (j.col && !ws) return cnn_set_error(CNN_ERR_VALUE, "conv2d_backward_data: no workspace");
    j.dy = dy;
    j.w = w;
    j.dx = dx;
    over_images(&j, d->n, (double)d->f * j.k * j.p, backward_data_range);
    return CNN_OK;
}

/* Chunk c of the filter gradient: the sum over its images of dy_i col_i^T,
 * accumulated image after image into its partial (dW itself for one chunk). */
static void filter_chunk_range(void *arg, long lo, long hi, int slot)
{
    const conv_job *j = arg;
    const cnn_conv_desc *d = j->d;
    const cnn_gemm_pack *pack = slot_pack(j, slot);
    const size_t fk = (size_t)d->f * j->k;
    for (long c = lo; c < hi; ++c) {
        float *out = j->chunks > 1 ? j->ws + (size_t)d->n * j->col + c * fk : j->dw;
        const long i0 = (long)d->n * c / j->chunks, i1 = (long)d->n * (c + 1) / j->chunks;
        for (long i = i0; i < i1; ++i) {
            const float *ci = j->col ? j->ws + i * j->col : j->x + i * j->x_img;
            /* dW (f, k) (+)= dy_i (f, p) col^T, col stored (k, p) */
            gemm(j, pack, 0, 1, d->f, j->k, j->p, j->dy + i * j->y_img, j->p, ci, j->p,
                 i == i0 ? 0.0f : 1.0f, out, j->k);
        }
    }
}

/* dW[e] = the partials' e-th elements summed in chunk order. */
static void filter_sum_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const conv_job *j = arg;
    const size_t fk = (size_t)j->d->f * j->k;
    const float *part = j->ws + (size_t)j->d->n * j->col;
    float *restrict dw = j->dw;
    memcpy(dw + lo, part + lo, (size_t)(hi - lo) * sizeof(float));
    for (int c = 1; c < j->chunks; ++c) {
        const float *restrict pc = part + c * fk;
        for (long e = lo; e < hi; ++e) dw[e] += pc[e];
    }
}

/* db[f] = the sum of dy over images and pixels, image by image in double. */
static void bias_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const conv_job *j = arg;
    for (long f = lo; f < hi; ++f) {
        double acc = 0.0;
        for (int i = 0; i < j->d->n; ++i)
            acc += cnn_cpu_sum(j->dy + i * j->y_img + (size_t)f * j->p, (size_t)j->p);
        j->db[f] = (float)acc;
    }
}

/* x (n, c, h, w), dy (n, f, oh, ow) -> dw (f, c, kh, kw) and db (f) or NULL,
 * both overwritten. The column matrices are those the forward of this batch
 * left in ws. */
cnn_status cpu_conv2d_backward_filter(cnn_ctx *ctx, const cnn_conv_desc *d, const float *x,
                                      const float *dy, float *dw, float *db, void *ws)
{
    CNN_TRY(check_desc("conv2d_backward_filter", d));
    conv_job j = make_job(ctx, d, ws);
    if (j.col && !ws)
        return cnn_set_error(CNN_ERR_VALUE, "conv2d_backward_filter: no workspace");
    j.x = x;
    j.dy = dy;
    j.dw = dw;
    j.db = db;
    const size_t fk = (size_t)d->f * j.k;
    if (d->n == 0) {
        memset(dw, 0, fk * sizeof(float));
        if (db) memset(db, 0, (size_t)d->f * sizeof(float));
        return CNN_OK;
    }
    const double macs = (double)d->f * j.k * j.p;
    if (!cnn_cpu_get(ctx)->chunked_filter) {
        j.chunks = 1; /* cpu: the whole batch is one chunk, summed straight into dW */
        filter_chunk_range(&j, 0, 1, 0);
    } else {
        j.chunks = filter_chunks(d, d->n);
        over_images(&j, j.chunks, macs * d->n / j.chunks, filter_chunk_range);
        if (j.chunks > 1)
            cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, (long)fk, j.chunks, CNN_GRAIN_ELEMENTS),
                             (long)fk, filter_sum_range, &j);
    }
    if (db)
        cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, d->f, (double)d->n * j.p, CNN_GRAIN_ELEMENTS),
                         d->f, bias_range, &j);
    return CNN_OK;
}
