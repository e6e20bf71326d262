// activation.cu: elementwise activations and the row softmax for the cuda
// engine. The backward takes the forward's output y. x and y (and dy and dx)
// may be the same buffer: every element is read and written by one thread.
// Elementwise kernels are one thread per element (grid-stride); softmax is
// one warp per row, with the row max subtracted and the sum in double as on
// the cpu engine. Products are written with __fmul_rn where the compiler
// could otherwise fuse them into an FMA the cpu engine does not do.
#include "cuda_common.cuh"
#include "cuda_ops.h"
#include "loss_rows.cuh" // sigmoid_f, softmax_row, softmax_backward_row

#define ACT_WARPS 8 // warps (rows) per softmax block

static cnn_status check_dims(const char *what, int rows, int cols)
{
    if (rows < 0 || cols < 0)
        return cnn_set_error(CNN_ERR_VALUE, "%s: negative shape (%d, %d)", what, rows, cols);
    return CNN_OK;
}

// x (count) -> y (count); ACT is relu, sigmoid or tanh.
template <int ACT>
__global__ void act_forward_kernel(size_t count, const float *x, float *y)
{
    cnn_kernel_begin();
    CNN_GRID_LOOP(i, count) {
        const float v = x[i];
        float r;
        if (ACT == CNN_ACT_RELU)
            r = v < 0.0f ? 0.0f : v;
        else if (ACT == CNN_ACT_SIGMOID)
            r = sigmoid_f(v);
        else
            r = tanhf(v);
        y[i] = r;
    }
}

// y (count) the forward's output, dy (count) -> dx (count)
template <int ACT>
__global__ void act_backward_kernel(size_t count, const float *y, const float *dy, float *dx)
{
    cnn_kernel_begin();
    CNN_GRID_LOOP(i, count) {
        const float yi = y[i], g = dy[i];
        float r;
        if (ACT == CNN_ACT_RELU)
            r = yi > 0.0f ? g : 0.0f;
        else if (ACT == CNN_ACT_SIGMOID)
            r = g * (yi * (1.0f - yi));
        else
            r = g * (1.0f - __fmul_rn(yi, yi));
        dx[i] = r;
    }
}

// x (rows, cols) -> y (rows, cols), softmax over each row: one warp per row;
// lane l owns columns l, l + 32, ... in every phase.
__global__ void softmax_forward_kernel(int rows, int cols, const float *x, float *y)
{
    cnn_kernel_begin();
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    for (int r = blockIdx.x * ACT_WARPS + warp; r < rows; r += gridDim.x * ACT_WARPS)
        softmax_row(x + (size_t)r * cols, y + (size_t)r * cols, cols, lane);
}

// y (rows, cols) the forward's output, dy (rows, cols) -> dx (rows, cols):
// dx_j = y_j (dy_j - sum_k dy_k y_k); one warp per row.
__global__ void softmax_backward_kernel(int rows, int cols, const float *y, const float *dy,
                                        float *dx)
{
    cnn_kernel_begin();
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    for (int r = blockIdx.x * ACT_WARPS + warp; r < rows; r += gridDim.x * ACT_WARPS)
        softmax_backward_row(y + (size_t)r * cols, dy + (size_t)r * cols, dx + (size_t)r * cols,
                             cols, lane);
}

static unsigned softmax_blocks(int rows)
{
    return cnn_blocks((size_t)rows, ACT_WARPS);
}

// x (rows, cols) -> y (rows, cols)
cnn_status cuda_activation_forward(cnn_ctx *ctx, int act, int rows, int cols, const float *x,
                                   float *y)
{
    CNN_TRY(check_dims("activation_forward", rows, cols));
    const size_t count = (size_t)rows * cols;
    cudaStream_t st = cnn_stream(ctx);
    const unsigned blocks = cnn_blocks(count, CNN_THREADS);
    switch (act) {
    case CNN_ACT_LINEAR:
        if (x != y && count)
            CNN_CUDA_TRY(cudaMemcpyAsync(y, x, count * sizeof(float), cudaMemcpyDeviceToDevice, st),
                         "activation_forward (linear)");
        return CNN_OK;
    case CNN_ACT_RELU:
        if (!count) return CNN_OK;
        act_forward_kernel<CNN_ACT_RELU><<<blocks, CNN_THREADS, 0, st>>>(count, x, y);
        CNN_CUDA_LAUNCHED("relu_forward");
        return CNN_OK;
    case CNN_ACT_SIGMOID:
        if (!count) return CNN_OK;
        act_forward_kernel<CNN_ACT_SIGMOID><<<blocks, CNN_THREADS, 0, st>>>(count, x, y);
        CNN_CUDA_LAUNCHED("sigmoid_forward");
        return CNN_OK;
    case CNN_ACT_TANH:
        if (!count) return CNN_OK;
        act_forward_kernel<CNN_ACT_TANH><<<blocks, CNN_THREADS, 0, st>>>(count, x, y);
        CNN_CUDA_LAUNCHED("tanh_forward");
        return CNN_OK;
    case CNN_ACT_SOFTMAX:
        if (!count) return CNN_OK;
        softmax_forward_kernel<<<softmax_blocks(rows), ACT_WARPS * 32, 0, st>>>(rows, cols, x, y);
        CNN_CUDA_LAUNCHED("softmax_forward");
        return CNN_OK;
    default:
        return cnn_set_error(CNN_ERR_VALUE, "activation_forward: unknown activation %d", act);
    }
}

// y (rows, cols) the forward's output, dy (rows, cols) -> dx (rows, cols)
cnn_status cuda_activation_backward(cnn_ctx *ctx, int act, int rows, int cols, const float *y,
                                    const float *dy, float *dx)
{
    CNN_TRY(check_dims("activation_backward", rows, cols));
    const size_t count = (size_t)rows * cols;
    cudaStream_t st = cnn_stream(ctx);
    const unsigned blocks = cnn_blocks(count, CNN_THREADS);
    switch (act) {
    case CNN_ACT_LINEAR:
        if (dy != dx && count)
            CNN_CUDA_TRY(
                cudaMemcpyAsync(dx, dy, count * sizeof(float), cudaMemcpyDeviceToDevice, st),
                "activation_backward (linear)");
        return CNN_OK;
    case CNN_ACT_RELU:
        if (!count) return CNN_OK;
        act_backward_kernel<CNN_ACT_RELU><<<blocks, CNN_THREADS, 0, st>>>(count, y, dy, dx);
        CNN_CUDA_LAUNCHED("relu_backward");
        return CNN_OK;
    case CNN_ACT_SIGMOID:
        if (!count) return CNN_OK;
        act_backward_kernel<CNN_ACT_SIGMOID><<<blocks, CNN_THREADS, 0, st>>>(count, y, dy, dx);
        CNN_CUDA_LAUNCHED("sigmoid_backward");
        return CNN_OK;
    case CNN_ACT_TANH:
        if (!count) return CNN_OK;
        act_backward_kernel<CNN_ACT_TANH><<<blocks, CNN_THREADS, 0, st>>>(count, y, dy, dx);
        CNN_CUDA_LAUNCHED("tanh_backward");
        return CNN_OK;
    case CNN_ACT_SOFTMAX:
        if (!count) return CNN_OK;
        softmax_backward_kernel<<<softmax_blocks(rows), ACT_WARPS * 32, 0, st>>>(rows, cols, y,
                                                                                 dy, dx);
        CNN_CUDA_LAUNCHED("softmax_backward");
        return CNN_OK;
    default:
        return cnn_set_error(CNN_ERR_VALUE, "activation_backward: unknown activation %d", act);
    }
}
