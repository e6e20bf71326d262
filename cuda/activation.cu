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

// The input gradient of one element from the forward's output yi and the
// output gradient g. The products are rounded on their own (__fmul_rn: the
// same bits as a plain product here, and never fused into an FMA with a
// sum that reads them, as activation_backward_bias's column sums).
template <int ACT>
static __device__ __forceinline__ float act_grad(float yi, float g)
{
    if (ACT == CNN_ACT_RELU) return yi > 0.0f ? g : 0.0f;
    if (ACT == CNN_ACT_SIGMOID) return __fmul_rn(g, __fmul_rn(yi, 1.0f - yi));
    return __fmul_rn(g, 1.0f - __fmul_rn(yi, yi));
}

// y (count) the forward's output, dy (count) -> dx (count)
template <int ACT>
__global__ void act_backward_kernel(size_t count, const float *y, const float *dy, float *dx)
{
    cnn_kernel_begin();
    CNN_GRID_LOOP(i, count) dx[i] = act_grad<ACT>(y[i], dy[i]);
}

// activation_backward_bias: the kernel above over y, dy, dx (rows, cols),
// then db[j] = the sum of dx's column j, in one launch. A block of BIAS_COLS
// x BIAS_GROUPS threads takes BIAS_COLS consecutive columns, the rows in
// chunks of BIAS_CHUNK: thread (j, g) writes dx at rows g, g + BIAS_GROUPS,
// ... of the chunk (all its loads first; each element is read and then
// written by the one thread, so dx may be dy) and the same values to the
// block's copy of the chunk; after the barrier thread (j, 0) adds column j
// of the chunk in row order onto its sum, which starts at 0.0f: the order
// of cnn_cuda_column_sums (reduce.cu), so the bits of activation_backward
// followed by that sum. Deterministic.
constexpr int BIAS_COLS = 32, BIAS_GROUPS = 8, BIAS_AHEAD = 4;
constexpr int BIAS_CHUNK = BIAS_GROUPS * BIAS_AHEAD;

template <int ACT>
__global__ void __launch_bounds__(BIAS_COLS * BIAS_GROUPS)
act_backward_bias_kernel(int rows, int cols, const float *y, const float *dy, float *dx,
                         float *__restrict__ db)
{
    cnn_kernel_begin();
    __shared__ float chunk[BIAS_CHUNK][BIAS_COLS];
    const int j = blockIdx.x * BIAS_COLS + threadIdx.x; // the grid covers the columns once
    const bool in = j < cols;
    float sum = 0.0f;
    for (int r0 = 0; r0 < rows; r0 += BIAS_CHUNK) { // the same r0 in every thread
        if (in) {
            float yv[BIAS_AHEAD], gv[BIAS_AHEAD];
#pragma unroll
            for (int u = 0; u < BIAS_AHEAD; ++u) {
                const int r = r0 + threadIdx.y + u * BIAS_GROUPS;
                if (r < rows) {
                    yv[u] = y[(size_t)r * cols + j];
                    gv[u] = dy[(size_t)r * cols + j];
                }
            }
#pragma unroll
            for (int u = 0; u < BIAS_AHEAD; ++u) {
                const int q = threadIdx.y + u * BIAS_GROUPS, r = r0 + q;
                if (r < rows) {
                    const float v = act_grad<ACT>(yv[u], gv[u]);
                    dx[(size_t)r * cols + j] = v;
                    chunk[q][threadIdx.x] = v;
                }
            }
        }
        __syncthreads();
        if (threadIdx.y == 0 && in) {
            const int end = min(BIAS_CHUNK, rows - r0);
#pragma unroll 8
            for (int q = 0; q < end; ++q) sum += chunk[q][threadIdx.x];
        }
        __syncthreads(); // the chunk is read before the next one is written
    }
    if (threadIdx.y == 0 && in) db[j] = sum;
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

// activation_backward_bias for the softmax, for at most SOFTMAX_BIAS_ROWS
// rows (a training batch; more take the two kernels, with the same bits):
// one block, a warp per row as above; after the barrier (which makes the
// block's writes to dx visible to the block), thread j adds column j of dx
// in row order from 0.0f (cnn_cuda_column_sums's order).
constexpr int SOFTMAX_BIAS_WARPS = 32, SOFTMAX_BIAS_ROWS = 2 * SOFTMAX_BIAS_WARPS;

__global__ void __launch_bounds__(SOFTMAX_BIAS_WARPS * 32)
softmax_backward_bias_kernel(int rows, int cols, const float *y, const float *dy, float *dx,
                             float *__restrict__ db)
{
    cnn_kernel_begin();
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    for (int r = warp; r < rows; r += SOFTMAX_BIAS_WARPS)
        softmax_backward_row(y + (size_t)r * cols, dy + (size_t)r * cols, dx + (size_t)r * cols,
                             cols, lane);
    __syncthreads();
    for (int j = threadIdx.x; j < cols; j += blockDim.x) {
        float sum = 0.0f;
#pragma unroll 16 // the loads ahead, the adds in order
        for (int r = 0; r < rows; ++r) sum += dx[(size_t)r * cols + j];
        db[j] = sum;
    }
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

// activation_backward (RELU, SIGMOID, TANH, SOFTMAX), then db (cols) = the
// column sums of dx: the bias gradient of a dense layer before the
// activation (cnn.h), in one launch (the softmax's over more rows than a
// training batch: its two)
cnn_status cuda_activation_backward_bias(cnn_ctx *ctx, int act, int rows, int cols,
                                         const float *y, const float *dy, float *dx, float *db)
{
    CNN_TRY(check_dims("activation_backward_bias", rows, cols));
    if (act != CNN_ACT_RELU && act != CNN_ACT_SIGMOID && act != CNN_ACT_TANH &&
        act != CNN_ACT_SOFTMAX)
        return cnn_set_error(CNN_ERR_VALUE,
                             "activation_backward_bias: activation %d is not relu, sigmoid, "
                             "tanh or softmax",
                             act);
    if (!db) return cnn_set_error(CNN_ERR_VALUE, "activation_backward_bias: db is NULL");
    if (!cols) return CNN_OK;
    cudaStream_t st = cnn_stream(ctx);
    if (act == CNN_ACT_SOFTMAX) {
        if (rows > SOFTMAX_BIAS_ROWS) {
            CNN_TRY(cuda_activation_backward(ctx, act, rows, cols, y, dy, dx));
            return cnn_cuda_column_sums(ctx, rows, cols, dx, db);
        }
        softmax_backward_bias_kernel<<<1, SOFTMAX_BIAS_WARPS * 32, 0, st>>>(rows, cols, y, dy,
                                                                            dx, db);
        CNN_CUDA_LAUNCHED("softmax_backward_bias");
        return CNN_OK;
    }
    const dim3 block(BIAS_COLS, BIAS_GROUPS);
    const unsigned blocks = (unsigned)((cols - 1) / BIAS_COLS + 1); // cols >= 1
    if (act == CNN_ACT_RELU)
        act_backward_bias_kernel<CNN_ACT_RELU><<<blocks, block, 0, st>>>(rows, cols, y, dy, dx, db);
    else if (act == CNN_ACT_SIGMOID)
        act_backward_bias_kernel<CNN_ACT_SIGMOID><<<blocks, block, 0, st>>>(rows, cols, y, dy, dx,
                                                                            db);
    else
        act_backward_bias_kernel<CNN_ACT_TANH><<<blocks, block, 0, st>>>(rows, cols, y, dy, dx, db);
    CNN_CUDA_LAUNCHED("activation_backward_bias");
    return CNN_OK;
}
