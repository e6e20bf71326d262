// reduce.cu: the sums behind bias gradients. Each output is summed by one
// block or one thread in a fixed order, so results are deterministic.
#include "cuda_common.cuh"

namespace {

// One block per row r: out[r] = sum_j x[r * cols + j] (reads coalesced).
__global__ void row_sums_kernel(int cols, const float *__restrict__ x, float *__restrict__ out)
{
    __shared__ float partial[CNN_THREADS];
    const float *row = x + (size_t)blockIdx.x * cols;
    float sum = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) sum += row[j];
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}

// One thread per column j: out[j] = sum_r x[r * cols + j] (a warp reads
// consecutive columns of one row at a time).
__global__ void column_sums_kernel(int rows, int cols, const float *__restrict__ x,
                                   float *__restrict__ out)
{
    CNN_GRID_LOOP(j, cols) {
        float sum = 0.0f;
        for (int r = 0; r < rows; ++r) sum += x[(size_t)r * cols + j];
        out[j] = sum;
    }
}

} // namespace

cnn_status cnn_cuda_row_sums(cnn_ctx *ctx, int rows, int cols, const float *x, float *out)
{
    if (rows <= 0) return CNN_OK;
    row_sums_kernel<<<rows, CNN_THREADS, 0, cnn_stream(ctx)>>>(cols, x, out);
    CNN_CUDA_LAUNCHED("row_sums");
    return CNN_OK;
}

cnn_status cnn_cuda_column_sums(cnn_ctx *ctx, int rows, int cols, const float *x, float *out)
{
    if (cols <= 0) return CNN_OK;
    column_sums_kernel<<<cnn_blocks(cols, 128), 128, 0, cnn_stream(ctx)>>>(rows, cols, x, out);
    CNN_CUDA_LAUNCHED("column_sums");
    return CNN_OK;
}
