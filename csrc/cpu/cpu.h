/* cpu.h: the CPU engine's kernels, one file per op, and its context.
 * Every function here is an entry of the cpu backend table (backend_cpu.c);
 * the shapes of every argument are documented on the table in cnn.h. */
#ifndef CNN_CPU_H
#define CNN_CPU_H

#include "../cnn.h"
#include "gemm.h"

/* The cpu context's impl: scratch the GEMM packs into, made once. */
typedef struct cnn_cpu_impl {
    cnn_gemm_pack pack;
} cnn_cpu_impl;

static inline const cnn_gemm_pack *cnn_cpu_pack(cnn_ctx *ctx)
{
    return &((cnn_cpu_impl *)ctx->impl)->pack;
}

/* The sum of x[0, len) in double, over 4 lanes so that it vectorizes (bias
 * and batchnorm reductions). */
static inline double cnn_cpu_sum(const float *restrict x, size_t len)
{
    double lane[4] = {0.0, 0.0, 0.0, 0.0};
    size_t j = 0;
    for (; j + 4 <= len; j += 4)
        for (int l = 0; l < 4; ++l) lane[l] += (double)x[j + l];
    for (; j < len; ++j) lane[0] += (double)x[j];
    return (lane[0] + lane[1]) + (lane[2] + lane[3]);
}

/* backend_cpu.c: the table */
extern const cnn_backend cnn_backend_cpu;

/* layout.c */
cnn_status cpu_nchw_from_nhwc(cnn_ctx *ctx, int n, int h, int w, int c, const float *x, float *y);
cnn_status cpu_nhwc_from_nchw(cnn_ctx *ctx, int n, int h, int w, int c, const float *x, float *y);

/* conv2d.c */
size_t cpu_conv2d_workspace(const cnn_conv_desc *d);
cnn_status cpu_conv2d_forward(cnn_ctx *ctx, const cnn_conv_desc *d, const float *x,
                              const float *w, const float *b, float *y, void *ws);
cnn_status cpu_conv2d_backward_data(cnn_ctx *ctx, const cnn_conv_desc *d, const float *dy,
                                    const float *w, float *dx, void *ws);
cnn_status cpu_conv2d_backward_filter(cnn_ctx *ctx, const cnn_conv_desc *d, const float *x,
                                      const float *dy, float *dw, float *db, void *ws);

/* pool.c */
cnn_status cpu_pool_forward(cnn_ctx *ctx, const cnn_pool_desc *d, const float *x, float *y,
                            int32_t *argmax);
cnn_status cpu_pool_backward(cnn_ctx *ctx, const cnn_pool_desc *d, const float *dy,
                             const int32_t *argmax, float *dx);

/* dense.c */
cnn_status cpu_dense_forward(cnn_ctx *ctx, int n, int in, int out, const float *x,
                             const float *w, const float *b, float *y);
cnn_status cpu_dense_backward_data(cnn_ctx *ctx, int n, int in, int out, const float *dy,
                                   const float *w, float *dx);
cnn_status cpu_dense_backward_filter(cnn_ctx *ctx, int n, int in, int out, const float *x,
                                     const float *dy, float *dw, float *db);

/* activation.c */
cnn_status cpu_activation_forward(cnn_ctx *ctx, int act, int rows, int cols, const float *x,
                                  float *y);
cnn_status cpu_activation_backward(cnn_ctx *ctx, int act, int rows, int cols, const float *y,
                                   const float *dy, float *dx);

/* dropout.c */
cnn_status cpu_dropout_forward(cnn_ctx *ctx, int n, int c, int h, int w, float rate,
                               uint64_t key, const float *x, float *y);
cnn_status cpu_dropout_backward(cnn_ctx *ctx, int n, int c, int h, int w, float rate,
                                uint64_t key, const float *dy, float *dx);

/* batchnorm.c */
cnn_status cpu_batchnorm_forward_train(cnn_ctx *ctx, const cnn_bn_desc *d, const float *x,
                                       const float *gamma, const float *beta,
                                       float *moving_mean, float *moving_var, float *y,
                                       float *save_mean, float *save_invstd);
cnn_status cpu_batchnorm_forward_infer(cnn_ctx *ctx, const cnn_bn_desc *d, const float *x,
                                       const float *gamma, const float *beta,
                                       const float *moving_mean, const float *moving_var,
                                       float *y);
cnn_status cpu_batchnorm_backward(cnn_ctx *ctx, const cnn_bn_desc *d, const float *x,
                                  const float *dy, const float *gamma, const float *save_mean,
                                  const float *save_invstd, float *dx, float *dgamma,
                                  float *dbeta);

/* loss.c */
cnn_status cpu_loss_forward_backward(cnn_ctx *ctx, const cnn_loss_desc *d, const float *y,
                                     const int32_t *labels, const float *targets, int scale_n,
                                     float *dy, float *sums);

/* gather.c */
cnn_status cpu_gather_rows(cnn_ctx *ctx, const int32_t *idx, int count, size_t row_bytes,
                           const void *src, void *dst);

/* adam.c, sgd.c */
cnn_status cpu_adam_step(cnn_ctx *ctx, const cnn_optimizer_desc *o, long step, size_t count,
                         float *p, const float *g, float *m, float *v);
cnn_status cpu_sgd_step(cnn_ctx *ctx, const cnn_optimizer_desc *o, size_t count, float *p,
                        const float *g, float *velocity);

#endif
