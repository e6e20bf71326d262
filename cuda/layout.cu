// layout.cu: NHWC <-> NCHW for the cuda engine.
// Per image both are a transpose of a row-major matrix: NHWC is (h*w, c) and
// NCHW is (c, h*w). One kernel transposes a batch of matrices through a
// 32x32 shared-memory tile, so reads and writes are both coalesced.
#include "cuda_common.cuh"
#include "cuda_ops.h"

#define LAYOUT_TILE 32
#define LAYOUT_ROWS 8 // threads per tile column: blockDim = (32, 8)

// dst[b] (cols, rows) = transpose of src[b] (rows, cols), b < batch, both
// row-major and contiguous per matrix; src and dst must not overlap. The
// tiles of all matrices are numbered 0 .. batch*tiles_r*tiles_c - 1 and
// the blocks walk them grid-stride (the tile index is uniform per block, so
// the __syncthreads inside the loop are reached by every thread).
__global__ void transpose_batched_kernel(size_t batch, int rows, int cols,
                                         const float *__restrict__ src,
                                         float *__restrict__ dst)
{
    cnn_kernel_begin();
    __shared__ float tile[LAYOUT_TILE][LAYOUT_TILE + 1]; // +1: no bank conflicts
    const size_t tiles_r = ((size_t)rows + LAYOUT_TILE - 1) / LAYOUT_TILE;
    const size_t tiles_c = ((size_t)cols + LAYOUT_TILE - 1) / LAYOUT_TILE;
    const size_t per_matrix = tiles_r * tiles_c;
    const size_t total = batch * per_matrix;
    const size_t matrix = (size_t)rows * cols;
    const int tx = threadIdx.x, ty = threadIdx.y;
    for (size_t t = blockIdx.x; t < total; t += gridDim.x) {
        const size_t b = t / per_matrix;
        const size_t rest = t - b * per_matrix;
        const int r0 = (int)(rest / tiles_c) * LAYOUT_TILE;
        const int c0 = (int)(rest % tiles_c) * LAYOUT_TILE;
        const float *s = src + b * matrix;
        float *d = dst + b * matrix;
        // read tile rows r0 + ty + k*8, column c0 + tx (coalesced along cols)
        for (int k = ty; k < LAYOUT_TILE; k += LAYOUT_ROWS) {
            const int r = r0 + k, c = c0 + tx;
            if (r < rows && c < cols) tile[k][tx] = s[(size_t)r * cols + c];
        }
        __syncthreads();
        // write dst row c0 + k, column r0 + tx (coalesced along rows)
        for (int k = ty; k < LAYOUT_TILE; k += LAYOUT_ROWS) {
            const int c = c0 + k, r = r0 + tx;
            if (r < rows && c < cols) d[(size_t)c * rows + r] = tile[tx][k];
        }
        __syncthreads(); // the tile is reused by the next iteration
    }
}

// The same for matrices of few columns (an image's 1-4 channels), where a
// 32x32 tile would be mostly idle: one thread per element of dst, the
// matrices' columns (b, c) over the grid's y and the rows over x, so the
// writes are coalesced and the reads of a warp span 32 * cols floats.
__global__ void transpose_narrow_kernel(long long batch, int rows, int cols,
                                        const float *__restrict__ src, float *__restrict__ dst)
{
    cnn_kernel_begin();
    const long long lines = batch * cols;
    for (long long bc = blockIdx.y; bc < lines; bc += gridDim.y) {
        const long long b = bc / cols;
        const int c = (int)(bc - b * cols);
        const float *s = src + (size_t)b * rows * cols + c;
        float *d = dst + (size_t)bc * rows;
        for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += blockDim.x * gridDim.x)
            d[r] = s[(size_t)r * cols];
    }
}

#define LAYOUT_NARROW 4 // at most this many columns: transpose_narrow_kernel

static cnn_status check_dims(const char *what, int n, int h, int w, int c)
{
    if (n < 0 || h < 0 || w < 0 || c < 0)
        return cnn_set_error(CNN_ERR_VALUE, "%s: negative shape (%d, %d, %d, %d)", what, n, h,
                             w, c);
    return CNN_OK;
}

// src (batch, rows, cols) -> dst (batch, cols, rows); nothing is launched
// for an empty tensor.
static cnn_status transpose_batched(cudaStream_t stream, const char *what, size_t batch,
                                    size_t rows, size_t cols, const float *src, float *dst)
{
    if (batch == 0 || rows == 0 || cols == 0) return CNN_OK;
    if (rows > 0x7fffffff || cols > 0x7fffffff)
        return cnn_set_error(CNN_ERR_VALUE, "%s: a %zu x %zu image is too large", what, rows,
                             cols);
    if (cols <= LAYOUT_NARROW) {
        const long long lines = (long long)(batch * cols);
        const dim3 grid(cnn_blocks(rows, CNN_THREADS), (unsigned)(lines < 65535 ? lines : 65535));
        transpose_narrow_kernel<<<grid, CNN_THREADS, 0, stream>>>((long long)batch, (int)rows,
                                                                          (int)cols, src, dst);
        CNN_CUDA_LAUNCHED(what);
        return CNN_OK;
    }
    const size_t tiles = batch * ((rows + LAYOUT_TILE - 1) / LAYOUT_TILE) *
                         ((cols + LAYOUT_TILE - 1) / LAYOUT_TILE);
    const unsigned blocks = cnn_blocks(tiles, 1);
    transpose_batched_kernel<<<blocks, dim3(LAYOUT_TILE, LAYOUT_ROWS), 0, stream>>>(
        batch, (int)rows, (int)cols, src, dst);
    CNN_CUDA_LAUNCHED(what);
    return CNN_OK;
}

// x (n, h, w, c) -> y (n, c, h, w) on `stream`; x and y must not overlap.
cnn_status cnn_cuda_nchw_from_nhwc_on(cudaStream_t stream, int n, int h, int w, int c,
                                      const float *x, float *y)
{
    CNN_TRY(check_dims("nchw_from_nhwc", n, h, w, c));
    return transpose_batched(stream, "nchw_from_nhwc", (size_t)n, (size_t)h * (size_t)w,
                             (size_t)c, x, y);
}

cnn_status cuda_nchw_from_nhwc(cnn_ctx *ctx, int n, int h, int w, int c, const float *x, float *y)
{
    return cnn_cuda_nchw_from_nhwc_on(cnn_stream(ctx), n, h, w, c, x, y);
}

// x (n, c, h, w) -> y (n, h, w, c); x and y must not overlap.
cnn_status cuda_nhwc_from_nchw(cnn_ctx *ctx, int n, int h, int w, int c, const float *x, float *y)
{
    CNN_TRY(check_dims("nhwc_from_nchw", n, h, w, c));
    return transpose_batched(cnn_stream(ctx), "nhwc_from_nchw", (size_t)n, (size_t)c,
                             (size_t)h * (size_t)w, x, y);
}
