/* relu_fusion_check.c: the host engines' fused ReLU entries against the two
 * entries they replace, bit for bit, and their error paths.
 *
 * Built and run by tests/test_relu_fusion.py: csrc/*.c and csrc/cpu/*.c, no
 * Python. For every host engine compiled in (omp at 1, 2 and 3 threads) and
 * shapes with odd sizes, strides, padding, overlapping and clipped windows:
 *   conv2d_forward_relu   == conv2d_forward, then activation_forward(RELU)
 *   pool_backward_relu    == pool_backward, then activation_backward(RELU)
 * on random values with exact zeros, -0 and a NaN among them (ReLU's edge
 * cases). Prints one "ok" line per engine; exits non-zero on a mismatch.
 *
 * usage: relu_fusion_check
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cnn.h"

static int failures;

/* expr must fail with CNN_ERR_VALUE and a message that contains `words` */
#define EXPECT_ERROR(expr, words)                                                      \
    do {                                                                               \
        cnn_status s_ = (expr);                                                        \
        if (s_ != CNN_ERR_VALUE || !strstr(cnn_last_error(), words)) {                 \
            fprintf(stderr, "%s:%d: %s: expected a value error with '%s', got %d '%s'\n", \
                    __FILE__, __LINE__, #expr, words, (int)s_, s_ ? cnn_last_error() : ""); \
            failures++;                                                                \
        }                                                                              \
    } while (0)

static unsigned long long rng_state = 12345;

/* Uniform in [-1, 1), with about one value in eight an exact 0 or -0 and one
 * NaN per buffer when nan is set. */
static void fill(float *p, size_t count, int nan)
{
    for (size_t i = 0; i < count; ++i) {
        rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
        const unsigned r = (unsigned)(rng_state >> 33);
        p[i] = (float)(r % 2000001) / 1000000.0f - 1.0f;
        if (r % 16 == 3) p[i] = 0.0f;
        if (r % 16 == 7) p[i] = -0.0f;
    }
    if (nan && count > 2) p[count / 2] = NAN;
}

static float *floats(size_t count)
{
    float *p = malloc((count ? count : 1) * sizeof(float));
    if (!p) exit(3);
    return p;
}

static void same_bits(const char *what, const char *engine, const float *a, const float *b,
                      size_t count)
{
    if (memcmp(a, b, count * sizeof(float)) != 0) {
        size_t i = 0;
        while (i < count && memcmp(a + i, b + i, sizeof(float)) == 0) ++i;
        fprintf(stderr, "%s on %s: element %zu differs: %g (fused) against %g\n", what, engine,
                i, a[i], b[i]);
        failures++;
    }
}

static int out_size(int in, int k, int s, int pad) { return (in + 2 * pad - k) / s + 1; }

/* conv2d_forward_relu against conv2d_forward + activation_forward, with and
 * without a bias */
static void check_conv(const cnn_backend *be, cnn_ctx *ctx, const char *engine, int n, int c,
                       int h, int w, int f, int k, int stride, int pad)
{
    cnn_conv_desc d = {n, c, h, w, f, k, k, stride, stride, pad, pad,
                       out_size(h, k, stride, pad), out_size(w, k, stride, pad)};
    const size_t xs = (size_t)n * c * h * w, ws_ = (size_t)f * c * k * k,
                 ys = (size_t)n * f * d.oh * d.ow;
    float *x = floats(xs), *wt = floats(ws_), *b = floats(f), *y1 = floats(ys), *y2 = floats(ys);
    void *ws = malloc(be->conv2d_workspace(&d) + 1);
    fill(x, xs, 1);
    fill(wt, ws_, 0);
    fill(b, f, 0);
    for (int bias = 0; bias < 2; ++bias) {
        CHECK(be->fused->conv2d_forward_relu(ctx, &d, x, wt, bias ? b : NULL, y1, ws));
        CHECK(be->conv2d_forward(ctx, &d, x, wt, bias ? b : NULL, y2, ws));
        CHECK(be->activation_forward(ctx, CNN_ACT_RELU, n, (int)(ys / (n ? n : 1)), y2, y2));
        same_bits(bias ? "conv2d_forward_relu" : "conv2d_forward_relu without bias", engine, y1,
                  y2, ys);
    }
    free(x), free(wt), free(b), free(y1), free(y2), free(ws);
}

/* pool_backward_relu against pool_backward + activation_backward; the
 * pool's input is a ReLU's output, so it holds zeros (and a NaN) */
static void check_pool(const cnn_backend *be, cnn_ctx *ctx, const char *engine, int mode, int n,
                       int c, int h, int w, int p, int stride, int pad)
{
    cnn_pool_desc d = {mode, n, c, h, w, p, p, stride, stride, pad, pad,
                       out_size(h, p, stride, pad), out_size(w, p, stride, pad)};
    const size_t xs = (size_t)n * c * h * w, ys = (size_t)n * c * d.oh * d.ow;
    float *x = floats(xs), *relu_y = floats(xs), *py = floats(ys), *dy = floats(ys);
    float *dx1 = floats(xs), *dx2 = floats(xs);
    int32_t *argmax = malloc((ys ? ys : 1) * sizeof(int32_t));
    fill(x, xs, 1);
    fill(dy, ys, 0);
    CHECK(be->activation_forward(ctx, CNN_ACT_RELU, n, (int)(xs / (n ? n : 1)), x, relu_y));
    CHECK(be->pool_forward(ctx, &d, relu_y, py, argmax));
    CHECK(be->fused->pool_backward_relu(ctx, &d, dy, argmax, relu_y, dx1));
    CHECK(be->pool_backward(ctx, &d, dy, argmax, dx2));
    CHECK(be->activation_backward(ctx, CNN_ACT_RELU, n, (int)(xs / (n ? n : 1)), relu_y, dx2,
                                  dx2));
    same_bits(mode == CNN_POOL_MAX ? "pool_backward_relu (max)" : "pool_backward_relu (average)",
              engine, dx1, dx2, xs);
    free(x), free(relu_y), free(py), free(dy), free(dx1), free(dx2), free(argmax);
}

static void check_errors(const cnn_backend *be, cnn_ctx *ctx)
{
    float v[64] = {0};
    int32_t am[16] = {0};
    cnn_conv_desc bad = {1, 0, 4, 4, 2, 3, 3, 1, 1, 0, 0, 2, 2}; /* c = 0 */
    EXPECT_ERROR(be->fused->conv2d_forward_relu(ctx, &bad, v, v, NULL, v, v), "conv2d_forward_relu: bad descriptor");
    cnn_conv_desc conv = {1, 1, 4, 4, 2, 3, 3, 1, 1, 0, 0, 2, 2};
    EXPECT_ERROR(be->fused->conv2d_forward_relu(ctx, &conv, v, v, NULL, v, NULL),
                 "conv2d_forward_relu: no workspace");
    cnn_pool_desc pool = {CNN_POOL_MAX, 1, 1, 4, 4, 2, 2, 2, 2, 0, 0, 2, 2};
    EXPECT_ERROR(be->fused->pool_backward_relu(ctx, &pool, v, NULL, v, v),
                 "pool_backward_relu: max pooling needs an argmax buffer");
    EXPECT_ERROR(be->fused->pool_backward_relu(ctx, &pool, v, am, NULL, v),
                 "pool_backward_relu: the ReLU's output y is NULL");
    am[2] = 99;
    EXPECT_ERROR(be->fused->pool_backward_relu(ctx, &pool, v, am, v, v),
                 "pool_backward_relu: argmax 99 outside a 4x4 plane");
    cnn_pool_desc mode = pool;
    mode.mode = 7;
    EXPECT_ERROR(be->fused->pool_backward_relu(ctx, &mode, v, am, v, v),
                 "pool_backward_relu: unknown pool mode 7");
}

static void check_engine(const char *name, int threads)
{
    cnn_status st;
    const cnn_backend *be = cnn_backend_find(name, &st);
    if (!be) {
        printf("%s: not built\n", name);
        return;
    }
    if (!be->fused || !be->fused->conv2d_forward_relu || !be->fused->pool_backward_relu) {
        fprintf(stderr, "%s: the fused ReLU entries are missing\n", name);
        failures++;
        return;
    }
    cnn_ctx *ctx;
    CHECK(be->ctx_create(&ctx, threads, 0));
    char engine[32];
    snprintf(engine, sizeof engine, "%s:%d", name, threads);
    const int before = failures;
    /* n, c, h, w, f, k, stride, pad: odd sizes; a 1x1 (the image is its own
     * column matrix); a batch of one; the seeds' first CIFAR layer */
    check_conv(be, ctx, engine, 3, 3, 7, 9, 5, 3, 1, 0);
    check_conv(be, ctx, engine, 5, 2, 11, 6, 7, 3, 2, 1);
    check_conv(be, ctx, engine, 4, 3, 5, 5, 3, 1, 1, 0);
    check_conv(be, ctx, engine, 1, 1, 13, 13, 1, 5, 1, 2);
    check_conv(be, ctx, engine, 4, 3, 32, 32, 32, 3, 1, 0);
    check_conv(be, ctx, engine, 0, 3, 7, 7, 5, 3, 1, 0); /* an empty batch */
    for (int mode = CNN_POOL_MAX; mode <= CNN_POOL_AVG; ++mode) {
        /* n, c, h, w, pool, stride, pad: full 2x2 windows (the fast paths),
         * 2x2 over odd sizes (a row and column left over), overlapping 3x3 at
         * stride 2, padded windows clipped to the image, 1x1 */
        check_pool(be, ctx, engine, mode, 3, 5, 8, 12, 2, 2, 0);
        check_pool(be, ctx, engine, mode, 2, 3, 9, 7, 2, 2, 0);
        check_pool(be, ctx, engine, mode, 3, 2, 11, 9, 3, 2, 0);
        check_pool(be, ctx, engine, mode, 2, 3, 7, 7, 3, 2, 1);
        check_pool(be, ctx, engine, mode, 2, 2, 5, 3, 1, 1, 0);
        check_pool(be, ctx, engine, mode, 4, 32, 30, 30, 2, 2, 0);
    }
    check_errors(be, ctx);
    be->ctx_destroy(ctx);
    if (failures == before) printf("%s: ok\n", engine);
}

int main(void)
{
    check_engine("cpu", 1);
    for (int threads = 1; threads <= 3; ++threads) check_engine("omp", threads);
    return failures ? 1 : 0;
}
