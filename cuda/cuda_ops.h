/* cuda_ops.h: the cuda engine's entries, one .cu file per op. Every
 * function here is an entry of the cuda backend table (backend_cuda.cu); the
 * shapes of every argument are documented on the table in cnn.h. All
 * pointers are device memory; every kernel runs on the context's stream. */
#ifndef CNN_CUDA_OPS_H
#define CNN_CUDA_OPS_H

#include "cnn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* backend_cuda.cu: the table */
extern const cnn_backend cnn_backend_cuda;

/* backend_cuda.cu: the context's device made current (both GPU tables) */
cnn_status cuda_activate(cnn_ctx *ctx);

/* backend_cuda.cu: memory on the context's stream */
cnn_status cuda_alloc(cnn_ctx *ctx, void **p, size_t bytes);
void cuda_free(cnn_ctx *ctx, void *p);
cnn_status cuda_upload(cnn_ctx *ctx, void *dst, const void *host_src, size_t bytes);
cnn_status cuda_download(cnn_ctx *ctx, void *host_dst, const void *src, size_t bytes);
cnn_status cuda_zero(cnn_ctx *ctx, void *p, size_t bytes);
cnn_status cuda_synchronize(cnn_ctx *ctx);
cnn_status cuda_copy(cnn_ctx *ctx, void *dst, const void *src, size_t bytes);

/* upload_samples.cu */
cnn_status cuda_upload_samples(cnn_ctx *ctx, float *dst, const cnn_host_array *a, long n, int h,
                               int w, int c, int transpose);

/* layout.cu */
cnn_status cuda_nchw_from_nhwc(cnn_ctx *ctx, int n, int h, int w, int c, const float *x, float *y);
cnn_status cuda_nhwc_from_nchw(cnn_ctx *ctx, int n, int h, int w, int c, const float *x, float *y);

/* conv2d.cu */
size_t cuda_conv2d_workspace(const cnn_conv_desc *d);
cnn_status cuda_conv2d_forward(cnn_ctx *ctx, const cnn_conv_desc *d, const float *x,
                              const float *w, const float *b, float *y, void *ws);
cnn_status cuda_conv2d_forward_relu(cnn_ctx *ctx, const cnn_conv_desc *d, const float *x,
                                   const float *w, const float *b, float *y, void *ws);
cnn_status cuda_conv2d_backward_data(cnn_ctx *ctx, const cnn_conv_desc *d, const float *dy,
                                    const float *w, float *dx, void *ws);
cnn_status cuda_conv2d_backward_filter(cnn_ctx *ctx, const cnn_conv_desc *d, const float *x,
                                      const float *dy, float *dw, float *db, void *ws);
cnn_status cuda_conv2d_forward_col(cnn_ctx *ctx, const cnn_conv_desc *d, int relu,
                                   const float *x, const float *w, const float *b, float *y,
                                   void *ws);
cnn_status cuda_conv2d_backward_filter_from_x(cnn_ctx *ctx, const cnn_conv_desc *d,
                                              const float *x, const float *dy, float *dw,
                                              float *db, void *ws);

/* conv2d_pool_backward.cu */
cnn_status cuda_conv2d_backward_data_pool(cnn_ctx *ctx, const cnn_conv_desc *d,
                                          const cnn_pool_desc *p, const float *dy,
                                          const float *w, const int32_t *argmax, const float *y,
                                          float *dx, void *ws);

/* gather_im2col.cu */
cnn_status cuda_gather_batch_im2col(cnn_ctx *ctx, const int32_t *order, int64_t *counters,
                                    int count, long rows, size_t x_row_bytes, const void *src_x,
                                    void *dst_x, size_t t_row_bytes, const void *src_t,
                                    void *dst_t, const cnn_conv_desc *d, void *ws);

/* pool.cu */
cnn_status cuda_pool_forward(cnn_ctx *ctx, const cnn_pool_desc *d, const float *x, float *y,
                            int32_t *argmax);
cnn_status cuda_pool_backward(cnn_ctx *ctx, const cnn_pool_desc *d, const float *dy,
                             const int32_t *argmax, float *dx);
cnn_status cuda_pool_backward_relu(cnn_ctx *ctx, const cnn_pool_desc *d, const float *dy,
                                   const int32_t *argmax, const float *y, float *dx);

/* dense.cu */
cnn_status cuda_dense_forward(cnn_ctx *ctx, int n, int in, int out, const float *x,
                             const float *w, const float *b, float *y);
cnn_status cuda_dense_backward_data(cnn_ctx *ctx, int n, int in, int out, const float *dy,
                                   const float *w, float *dx);
cnn_status cuda_dense_backward_filter(cnn_ctx *ctx, int n, int in, int out, const float *x,
                                     const float *dy, float *dw, float *db);
cnn_status cuda_dense_forward_relu(cnn_ctx *ctx, int n, int in, int out, const float *x,
                                   const float *w, const float *b, float *y);

/* activation.cu */
cnn_status cuda_activation_forward(cnn_ctx *ctx, int act, int rows, int cols, const float *x,
                                  float *y);
cnn_status cuda_activation_backward(cnn_ctx *ctx, int act, int rows, int cols, const float *y,
                                   const float *dy, float *dx);
cnn_status cuda_activation_backward_bias(cnn_ctx *ctx, int act, int rows, int cols,
                                         const float *y, const float *dy, float *dx, float *db);

/* dropout.cu */
cnn_status cuda_dropout_forward(cnn_ctx *ctx, int n, int c, int h, int w, float rate,
                               uint64_t seed, const int64_t *forward, int64_t row0,
                               const float *x, float *y);
cnn_status cuda_dropout_backward(cnn_ctx *ctx, int n, int c, int h, int w, float rate,
                                uint64_t seed, const int64_t *forward, int64_t row0,
                                const float *dy, float *dx);

/* batchnorm.cu */
cnn_status cuda_batchnorm_forward_train(cnn_ctx *ctx, const cnn_bn_desc *d, const float *x,
                                       const float *gamma, const float *beta,
                                       float *moving_mean, float *moving_var, float *y,
                                       float *save_mean, float *save_invstd);
cnn_status cuda_batchnorm_forward_infer(cnn_ctx *ctx, const cnn_bn_desc *d, const float *x,
                                       const float *gamma, const float *beta,
                                       const float *moving_mean, const float *moving_var,
                                       float *y);
cnn_status cuda_batchnorm_backward(cnn_ctx *ctx, const cnn_bn_desc *d, const float *x,
                                  const float *dy, const float *gamma, const float *save_mean,
                                  const float *save_invstd, float *dx, float *dgamma,
                                  float *dbeta);

/* loss.cu */
cnn_status cuda_loss_forward_backward(cnn_ctx *ctx, const cnn_loss_desc *d, const float *y,
                                     const int32_t *labels, const float *targets, int scale_n,
                                     float *dy, float *sums);
cnn_status cuda_dense_loss_head(cnn_ctx *ctx, const cnn_loss_desc *d, int in, int softmax,
                                int relu, const float *x, const float *w, const float *b,
                                const int32_t *labels, const float *targets, int scale_n,
                                float *z, float *p, float *dw, float *db, float *dx,
                                float *db_below, float *sums, void *ws);
cnn_status cuda_softmax_loss_forward_backward(cnn_ctx *ctx, const cnn_loss_desc *d,
                                              const float *x, float *y, const int32_t *labels,
                                              const float *targets, int scale_n, float *dx,
                                              float *sums);

/* gather.cu */
cnn_status cuda_gather_batch(cnn_ctx *ctx, const int32_t *order, int64_t *counters, int count,
                             long rows, size_t x_row_bytes, const void *src_x, void *dst_x,
                             size_t t_row_bytes, const void *src_t, void *dst_t);
cnn_status cuda_advance_counters(cnn_ctx *ctx, int64_t *counters, int forward, int steps,
                                 long rows);

/* record.cu: recording a step (CUDA graph capture), replays, event timing */
cnn_status cuda_capture_begin(cnn_ctx *ctx);
cnn_status cuda_capture_end(cnn_ctx *ctx, void **recording);
cnn_status cuda_replay(cnn_ctx *ctx, void *recording, long times);
void cuda_recording_free(cnn_ctx *ctx, void *recording);
cnn_status cuda_timer_mark(cnn_ctx *ctx, int which);
cnn_status cuda_timer_elapsed(cnn_ctx *ctx, double *seconds);

/* adam.cu, sgd.cu */
cnn_status cuda_adam_step(cnn_ctx *ctx, const float *hyper, const int64_t *step,
                         size_t count, float *p, const float *g, float *m, float *v);
cnn_status cuda_sgd_step(cnn_ctx *ctx, const float *hyper, size_t count, float *p,
                        const float *g, float *velocity);

#ifdef __cplusplus
}
#endif

#endif
