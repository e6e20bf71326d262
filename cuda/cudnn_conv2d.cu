// cudnn_conv2d.cu: convolution through cuDNN (legacy convolution API of
// cuDNN 9, with the _v7 heuristic queries).
//
// Keras's 'same' padding can be uneven (the extra row at the bottom); cuDNN
// pads both sides alike, so an uneven shape is handed to the cuda engine's
// own kernels. Each shape's descriptors and algorithms are chosen on first
// use and cached in the context; each direction's algorithm is chosen on
// its first call (cudnn_algo.cu: by default the fastest deterministic one,
// measured on the layer's own buffers) among those whose workspace fits the
// layer's, sized (as the cuda engine's) when the Net was made. Strict float32
// (CUDNN_FMA_MATH) unless the Net asked for another precision (math_type).
#include <string.h>

#include "cuda_ops.h"
#include "cudnn_common.cuh"

namespace {

int even_padding(const cnn_conv_desc *d)
{
    const int ph = (d->oh - 1) * d->sh + d->kh - d->h, pw = (d->ow - 1) * d->sw + d->kw - d->w;
    return (ph <= 0 || ph == 2 * d->pad_top) && (pw <= 0 || pw == 2 * d->pad_left) &&
           (d->pad_top == 0 || ph > 0) && (d->pad_left == 0 || pw > 0);
}

// The math type of a convolution in the Net's precision, its tensors float:
// float32 CUDNN_FMA_MATH (no tensor cores); tf32 CUDNN_TENSOR_OP_MATH (TF32
// tensor cores on float tensors); fp16 CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION
// (cuDNN may convert the float operands to float16 for tensor cores, float
// sums); bf16 CUDNN_TENSOR_OP_MATH: cuDNN 9's legacy API has no mode that
// converts float tensors to bfloat16 (ALLOW_CONVERSION converts to float16,
// whose range is not bfloat16's), so the convolutions of a "bf16" Net run on
// TF32 tensor cores, finer than bfloat16 (docs/semantics.md).
cudnnMathType_t math_type(int precision)
{
    switch (precision) {
    case CNN_PRECISION_TF32:
    case CNN_PRECISION_BF16: return CUDNN_TENSOR_OP_MATH;
    case CNN_PRECISION_FP16: return CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    default: return CUDNN_FMA_MATH;
    }
}

cnn_status make_conv(cnn_ctx *ctx, const cnn_conv_desc *d, cnn_cudnn_conv *c)
{
    memset(c, 0, sizeof *c);
    c->key = *d;
    c->precision = ctx->precision;
    CNN_CUDNN_TRY(cudnnCreateTensorDescriptor(&c->x), "conv descriptors");
    CNN_CUDNN_TRY(cudnnCreateTensorDescriptor(&c->y), "conv descriptors");
    CNN_CUDNN_TRY(cudnnCreateFilterDescriptor(&c->w), "conv descriptors");
    CNN_CUDNN_TRY(cudnnCreateConvolutionDescriptor(&c->conv), "conv descriptors");
    CNN_CUDNN_TRY(cudnnSetTensor4dDescriptor(c->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, d->n,
                                             d->c, d->h, d->w), "conv input descriptor");
    CNN_CUDNN_TRY(cudnnSetTensor4dDescriptor(c->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, d->n,
                                             d->f, d->oh, d->ow), "conv output descriptor");
    CNN_CUDNN_TRY(cudnnSetFilter4dDescriptor(c->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, d->f,
                                             d->c, d->kh, d->kw), "conv filter descriptor");
    CNN_CUDNN_TRY(cudnnSetConvolution2dDescriptor(c->conv, d->pad_top, d->pad_left, d->sh, d->sw,
                                                  1, 1, CUDNN_CROSS_CORRELATION,
                                                  CUDNN_DATA_FLOAT), "conv descriptor");
    CNN_CUDNN_TRY(cudnnSetConvolutionMathType(c->conv, math_type(c->precision)),
                  "conv math type");
    return CNN_OK;
}

// The layer's workspace (cudnn_conv2d_workspace, for the largest batch)
// holds at least this batch's size of it.
size_t layer_workspace(const cnn_conv_desc *d) { return cudnn_conv2d_workspace(d); }

void release_conv(cnn_cudnn_conv *c)
{
    if (c->x) cudnnDestroyTensorDescriptor(c->x);
    if (c->y) cudnnDestroyTensorDescriptor(c->y);
    if (c->w) cudnnDestroyFilterDescriptor(c->w);
    if (c->conv) cudnnDestroyConvolutionDescriptor(c->conv);
}

// The cached entry for d (made now on first use), or NULL with the error set.
cnn_cudnn_conv *find_conv(cnn_ctx *ctx, const cnn_conv_desc *d, cnn_status *st)
{
    cnn_cudnn_impl *impl = cnn_cudnn(ctx);
    for (int i = 0; i < impl->n_convs; ++i)
        if (memcmp(&impl->convs[i].key, d, sizeof *d) == 0 && impl->convs[i].precision == ctx->precision)
            return &impl->convs[i];
    if (impl->n_convs == CNN_CUDNN_MAX_CONVS) {
        *st = cnn_set_error(CNN_ERR_VALUE, "more than %d convolution shapes in one context",
                            CNN_CUDNN_MAX_CONVS);
        return NULL;
    }
    cnn_cudnn_conv *c = &impl->convs[impl->n_convs];
    *st = make_conv(ctx, d, c);
    if (*st != CNN_OK) {
        release_conv(c);
        memset(c, 0, sizeof *c);
        return NULL;
    }
    impl->n_convs++;
    return c;
}

} // namespace

void cnn_cudnn_release_convs(cnn_cudnn_impl *impl)
{
    for (int i = 0; i < impl->n_convs; ++i) release_conv(&impl->convs[i]);
    impl->n_convs = 0;
}

// The cuda engine's column matrix (our filter gradient's candidate) and a
// (f, n*oh*ow) region beyond it: the budget cuDNN's algorithms are chosen
// within (it was the cuda engine's own rule until 2026-11-27; kept so that
// the choices, measured and heuristic, stay what they were).
size_t cudnn_conv2d_workspace(const cnn_conv_desc *d)
{
    const size_t col = cuda_conv2d_workspace(d);
    return col ? col + (size_t)d->f * d->n * d->oh * d->ow * sizeof(float) : 0;
}

namespace {

// The convolution, then its bias (and the ReLU after it, where relu).
cnn_status forward(cnn_ctx *ctx, const cnn_conv_desc *d, const float *x, const float *w,
                   const float *b, float *y, void *ws, bool relu)
{
    if (!even_padding(d) || d->n == 0) {
        CNN_TRY(cuda_conv2d_forward(ctx, d, x, w, b, y, ws));
        if (relu) CNN_TRY(cnn_cuda_add_channel_bias_relu(ctx, d->n, d->f, d->oh * d->ow, NULL, y));
        return CNN_OK;
    }
    cnn_status st;
    cnn_cudnn_conv *c = find_conv(ctx, d, &st);
    if (!c) return st;
    if (!(c->chosen & (1 << CNN_CUDNN_FWD)))
        CNN_TRY(cnn_cudnn_choose(ctx, c, CNN_CUDNN_FWD, x, w, y, ws, layer_workspace(d)));
    const float one = 1.0f, zero = 0.0f;
    cudnnHandle_t h = cnn_cudnn(ctx)->cudnn;
    CNN_CUDNN_TRY(cudnnConvolutionForward(h, &one, c->x, x, c->w, w, c->conv, c->fwd, ws,
                                          c->ws_fwd, &zero, c->y, y),
                  "cudnnConvolutionForward");
    if (relu) return cnn_cuda_add_channel_bias_relu(ctx, d->n, d->f, d->oh * d->ow, b, y);
    if (b) CNN_TRY(cnn_cuda_add_channel_bias(ctx, d->n, d->f, d->oh * d->ow, b, y));
    return CNN_OK;
}

} // namespace

cnn_status cudnn_conv2d_forward(cnn_ctx *ctx, const cnn_conv_desc *d, const float *x,
                                const float *w, const float *b, float *y, void *ws)
{
    return forward(ctx, d, x, w, b, y, ws, false);
}

// The table's conv2d_forward_relu: y = relu(conv + b), the ReLU in the bias
// pass (the bits of conv2d_forward and then the ReLU).
cnn_status cudnn_conv2d_forward_relu(cnn_ctx *ctx, const cnn_conv_desc *d, const float *x,
                                     const float *w, const float *b, float *y, void *ws)
{
    return forward(ctx, d, x, w, b, y, ws, true);
}

cnn_status cudnn_conv2d_backward_filter(cnn_ctx *ctx, const cnn_conv_desc *d, const float *x,
                                        const float *dy, float *dw, float *db, void *ws)
{
    if (!even_padding(d) || d->n == 0) return cuda_conv2d_backward_filter(ctx, d, x, dy, dw, db, ws);
    cnn_status st;
    cnn_cudnn_conv *c = find_conv(ctx, d, &st);
    if (!c) return st;
    if (!(c->chosen & (1 << CNN_CUDNN_BWD_FILTER)))
        CNN_TRY(cnn_cudnn_choose(ctx, c, CNN_CUDNN_BWD_FILTER, x, dy, dw, ws, layer_workspace(d)));
    const float one = 1.0f, zero = 0.0f;
    cudnnHandle_t h = cnn_cudnn(ctx)->cudnn;
    if (c->filter_ours)
        CNN_TRY(cuda_conv2d_backward_filter_from_x(ctx, d, x, dy, dw, NULL, ws));
    else
        CNN_CUDNN_TRY(cudnnConvolutionBackwardFilter(h, &one, c->x, x, c->y, dy, c->conv,
                                                     c->bwd_filter, ws, c->ws_bwd_filter, &zero,
                                                     c->w, dw),
                      "cudnnConvolutionBackwardFilter");
    if (db) CNN_TRY(cnn_cuda_channel_sums(ctx, d->n, d->f, d->oh * d->ow, dy, db));
    return CNN_OK;
}

cnn_status cudnn_conv2d_backward_data(cnn_ctx *ctx, const cnn_conv_desc *d, const float *dy,
                                      const float *w, float *dx, void *ws)
{
    if (!even_padding(d) || d->n == 0) return cuda_conv2d_backward_data(ctx, d, dy, w, dx, ws);
    cnn_status st;
    cnn_cudnn_conv *c = find_conv(ctx, d, &st);
    if (!c) return st;
    if (!(c->chosen & (1 << CNN_CUDNN_BWD_DATA)))
        CNN_TRY(cnn_cudnn_choose(ctx, c, CNN_CUDNN_BWD_DATA, w, dy, dx, ws, layer_workspace(d)));
    const float one = 1.0f, zero = 0.0f;
    CNN_CUDNN_TRY(cudnnConvolutionBackwardData(cnn_cudnn(ctx)->cudnn, &one, c->w, w, c->y, dy,
                                               c->conv, c->bwd_data, ws, c->ws_bwd_data, &zero,
                                               c->x, dx),
                  "cudnnConvolutionBackwardData");
    return CNN_OK;
}
