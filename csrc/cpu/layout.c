/* layout.c: NHWC <-> NCHW for the cpu and omp engines (omp: images cut into
 * ranges, one per thread).
 * Per image both are a transpose of a row-major matrix: NHWC is (h*w, c) and
 * NCHW is (c, h*w). A tiled transpose keeps reads and writes in cache. */
#include "cpu.h"

#define LAYOUT_TILE 32

/* dst (cols, rows) = transpose of src (rows, cols), both row-major. */
void cnn_cpu_transpose(int rows, int cols, const float *restrict src, float *restrict dst)
{
    for (int r0 = 0; r0 < rows; r0 += LAYOUT_TILE) {
        const int r1 = r0 + LAYOUT_TILE < rows ? r0 + LAYOUT_TILE : rows;
        for (int c0 = 0; c0 < cols; c0 += LAYOUT_TILE) {
            const int c1 = c0 + LAYOUT_TILE < cols ? c0 + LAYOUT_TILE : cols;
            for (int c = c0; c < c1; ++c) {
                float *restrict d = dst + (size_t)c * rows;
                for (int r = r0; r < r1; ++r) d[r] = src[(size_t)r * cols + c];
            }
        }
    }
}

static cnn_status check_dims(const char *what, int n, int h, int w, int c)
{
    if (n < 0 || h < 0 || w < 0 || c < 0)
        return cnn_set_error(CNN_ERR_VALUE, "%s: negative shape (%d, %d, %d, %d)", what, n, h,
                             w, c);
    return CNN_OK;
}

typedef struct layout_job {
    int rows, cols; /* of each image's source matrix */
    const float *x;
    float *y;
} layout_job;

static void transpose_range(void *arg, long lo, long hi, int slot)
{
    (void)slot;
    const layout_job *j = arg;
    const size_t plane = (size_t)j->rows * j->cols;
    for (long i = lo; i < hi; ++i)
        cnn_cpu_transpose(j->rows, j->cols, j->x + i * plane, j->y + i * plane);
}

static void transpose_images(cnn_ctx *ctx, int n, int rows, int cols, const float *x, float *y)
{
    layout_job j = {rows, cols, x, y};
    cnn_cpu_parallel(ctx, cnn_cpu_parts(ctx, n, 2.0 * rows * cols, CNN_GRAIN_ELEMENTS), n,
                     transpose_range, &j);
}

/* x (n, h, w, c) -> y (n, c, h, w); x and y must not overlap. */
cnn_status cpu_nchw_from_nhwc(cnn_ctx *ctx, int n, int h, int w, int c, const float *x, float *y)
{
    CNN_TRY(check_dims("nchw_from_nhwc", n, h, w, c));
    transpose_images(ctx, n, h * w, c, x, y);
    return CNN_OK;
}

/* x (n, c, h, w) -> y (n, h, w, c); x and y must not overlap. */
cnn_status cpu_nhwc_from_nchw(cnn_ctx *ctx, int n, int h, int w, int c, const float *x, float *y)
{
    CNN_TRY(check_dims("nhwc_from_nchw", n, h, w, c));
    transpose_images(ctx, n, c, h * w, x, y);
    return CNN_OK;
}
