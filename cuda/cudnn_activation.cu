// cudnn_activation.cu: relu, sigmoid, tanh and softmax through cuDNN.
// The table's backward gets the forward's output y, not its input; cuDNN's
// activation backward reads y for sigmoid and tanh, and for relu x > 0
// exactly where y > 0, so y is passed in x's place.
#include "cudnn_common.cuh"

namespace {

cnn_status describe(cudnnTensorDescriptor_t t, int rows, int cols)
{
    CNN_CUDNN_TRY(cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, rows, cols,
                                             1, 1),
                  "activation descriptor");
    return CNN_OK;
}

cnn_status set_mode(cnn_ctx *ctx, int act)
{
    cudnnActivationMode_t mode = act == CNN_ACT_RELU      ? CUDNN_ACTIVATION_RELU
                                 : act == CNN_ACT_SIGMOID ? CUDNN_ACTIVATION_SIGMOID
                                                          : CUDNN_ACTIVATION_TANH;
    CNN_CUDNN_TRY(cudnnSetActivationDescriptor(cnn_cudnn(ctx)->act, mode, CUDNN_NOT_PROPAGATE_NAN,
                                               0.0),
                  "activation mode");
    return CNN_OK;
}

} // namespace

cnn_status cudnn_activation_forward(cnn_ctx *ctx, int act, int rows, int cols, const float *x,
                                    float *y)
{
    if (act < CNN_ACT_LINEAR || act > CNN_ACT_SOFTMAX)
        return cnn_set_error(CNN_ERR_VALUE, "activation_forward: unknown activation %d", act);
    if (rows <= 0 || cols <= 0) return CNN_OK;
    if (act == CNN_ACT_LINEAR) {
        CNN_CUDA_TRY(cudaMemcpyAsync(y, x, (size_t)rows * cols * sizeof(float),
                                     cudaMemcpyDeviceToDevice, cnn_stream(ctx)),
                     "linear activation");
        return CNN_OK;
    }
    cnn_cudnn_impl *impl = cnn_cudnn(ctx);
    const float one = 1.0f, zero = 0.0f;
    CNN_TRY(describe(impl->t0, rows, cols));
    if (act == CNN_ACT_SOFTMAX) {
        CNN_CUDNN_TRY(cudnnSoftmaxForward(impl->cudnn, CUDNN_SOFTMAX_ACCURATE,
                                          CUDNN_SOFTMAX_MODE_INSTANCE, &one, impl->t0, x, &zero,
                                          impl->t0, y),
                      "cudnnSoftmaxForward");
        return CNN_OK;
    }
    CNN_TRY(set_mode(ctx, act));
    CNN_CUDNN_TRY(cudnnActivationForward(impl->cudnn, impl->act, &one, impl->t0, x, &zero,
                                         impl->t0, y),
                  "cudnnActivationForward");
    return CNN_OK;
}

cnn_status cudnn_activation_backward(cnn_ctx *ctx, int act, int rows, int cols, const float *y,
                                     const float *dy, float *dx)
{
    if (act < CNN_ACT_LINEAR || act > CNN_ACT_SOFTMAX)
        return cnn_set_error(CNN_ERR_VALUE, "activation_backward: unknown activation %d", act);
    if (rows <= 0 || cols <= 0) return CNN_OK;
    if (act == CNN_ACT_LINEAR) {
        CNN_CUDA_TRY(cudaMemcpyAsync(dx, dy, (size_t)rows * cols * sizeof(float),
                                     cudaMemcpyDeviceToDevice, cnn_stream(ctx)),
                     "linear activation");
        return CNN_OK;
    }
    cnn_cudnn_impl *impl = cnn_cudnn(ctx);
    const float one = 1.0f, zero = 0.0f;
    CNN_TRY(describe(impl->t0, rows, cols));
    if (act == CNN_ACT_SOFTMAX) {
        CNN_CUDNN_TRY(cudnnSoftmaxBackward(impl->cudnn, CUDNN_SOFTMAX_ACCURATE,
                                           CUDNN_SOFTMAX_MODE_INSTANCE, &one, impl->t0, y,
                                           impl->t0, dy, &zero, impl->t0, dx),
                      "cudnnSoftmaxBackward");
        return CNN_OK;
    }
    CNN_TRY(set_mode(ctx, act));
    CNN_CUDNN_TRY(cudnnActivationBackward(impl->cudnn, impl->act, &one, impl->t0, y, impl->t0, dy,
                                          impl->t0, y, &zero, impl->t0, dx),
                  "cudnnActivationBackward");
    return CNN_OK;
}
