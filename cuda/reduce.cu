// reduce.cu: the sums behind bias gradients. Each output is summed by one
// block or one thread in a fixed order, so results are deterministic.
#include "cuda_common.cuh"

namespace {

constexpr int ROW_CHUNK = 2048; // columns one block sums in the first pass

// Block (b, r) sums x[r, b * chunk + [0, chunk)) of x (rows, cols) (reads
// coalesced) into out[r * gridDim.x + b].
__global__ void row_chunk_sums_kernel(int cols, const float *__restrict__ x,
                                      float *__restrict__ out, int chunk)
{
    cnn_kernel_begin();
    __shared__ float partial[CNN_THREADS];
    const float *row = x + (size_t)blockIdx.y * cols;
    const int end = min(cols, (int)(blockIdx.x + 1) * chunk);
    float sum = 0.0f;
    for (int j = blockIdx.x * chunk + threadIdx.x; j < end; j += blockDim.x) sum += row[j];
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[(size_t)blockIdx.y * gridDim.x + blockIdx.x] = partial[0];
}

// One thread per column j: out[j] = sum_r x[r * cols + j] (a warp reads
// consecutive columns of one row at a time).
__global__ void column_sums_kernel(int rows, int cols, const float *__restrict__ x,
                                   float *__restrict__ out)
{
    cnn_kernel_begin();
    CNN_GRID_LOOP(j, cols) {
        float sum = 0.0f;
        for (int r = 0; r < rows; ++r) sum += x[(size_t)r * cols + j];
        out[j] = sum;
    }
}

} // namespace

// Rows longer than one chunk are summed in two passes, chunk sums into the
// context's scratch and then those sums in order: enough blocks to fill the
// GPU for 32 rows of 28,800, and still deterministic.
cnn_status cnn_cuda_row_sums(cnn_ctx *ctx, int rows, int cols, const float *x, float *out)
{
    if (rows <= 0) return CNN_OK;
    const cnn_cuda_impl *impl = (const cnn_cuda_impl *)ctx->impl;
    const int chunks = cols > ROW_CHUNK ? (cols + ROW_CHUNK - 1) / ROW_CHUNK : 1;
    if (chunks == 1 || (size_t)rows * chunks > impl->scratch_floats) {
        // one block per row: gridDim.x == 1 makes the first chunk the whole row
        row_chunk_sums_kernel<<<dim3(1, rows), CNN_THREADS, 0, cnn_stream(ctx)>>>(cols, x, out,
                                                                                 cols);
        CNN_CUDA_LAUNCHED("row_sums");
        return CNN_OK;
    }
    row_chunk_sums_kernel<<<dim3(chunks, rows), CNN_THREADS, 0, cnn_stream(ctx)>>>(
        cols, x, impl->scratch, ROW_CHUNK);
    CNN_CUDA_LAUNCHED("row_sums pass 1");
    row_chunk_sums_kernel<<<dim3(1, rows), CNN_THREADS, 0, cnn_stream(ctx)>>>(
        chunks, impl->scratch, out, chunks);
    CNN_CUDA_LAUNCHED("row_sums pass 2");
    return CNN_OK;
}

cnn_status cnn_cuda_column_sums(cnn_ctx *ctx, int rows, int cols, const float *x, float *out)
{
    if (cols <= 0) return CNN_OK;
    column_sums_kernel<<<cnn_blocks(cols, 128), 128, 0, cnn_stream(ctx)>>>(rows, cols, x, out);
    CNN_CUDA_LAUNCHED("column_sums");
    return CNN_OK;
}
