// reduce.cu: the column sums behind a dense layer's bias gradient. Each
// output is summed by one thread in a fixed order: deterministic.
#include "cuda_common.cuh"

namespace {

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

cnn_status cnn_cuda_column_sums(cnn_ctx *ctx, int rows, int cols, const float *x, float *out)
{
    if (cols <= 0) return CNN_OK;
    column_sums_kernel<<<cnn_blocks(cols, 128), 128, 0, cnn_stream(ctx)>>>(rows, cols, x, out);
    CNN_CUDA_LAUNCHED("column_sums");
    return CNN_OK;
}
