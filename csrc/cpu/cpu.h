/* cpu.h: the CPU engines' kernels, one file per op, and their context.
 * Every cpu_* function is an entry of the cpu backend table (backend_cpu.c)
 * and of the omp table (backend_omp.c); the shapes of every argument are
 * documented on the table in cnn.h. A kernel cuts its work with
 * cnn_cpu_parallel into as many parts as the context's threads allow (one on
 * the cpu engine: no parallel region is entered) and never lets two parts
 * write the same output, so results do not depend on the thread count. */
#ifndef CNN_CPU_H
#define CNN_CPU_H

#include "../cnn.h"
#include "gemm.h"

/* The context's impl, shared by the cpu and omp tables: the thread count
 * (1 for cpu) and one set of GEMM packing scratch per thread, made once.
 * chunked_filter says whether the convolution workspace has room for the
 * fixed-order filter-gradient partials (omp; see conv2d.c). */
typedef struct cnn_cpu_impl {
    int threads;
    int chunked_filter;
    cnn_gemm_pack *packs; /* threads of them */
} cnn_cpu_impl;

static inline cnn_cpu_impl *cnn_cpu_get(cnn_ctx *ctx)
{
    return (cnn_cpu_impl *)ctx->impl;
}

/* ------------------------------------------------------------ parallel.c
 * One parallel loop for every kernel. fn(arg, lo, hi, slot) runs on the
 * contiguous ranges of [0, count) cut as evenly as possible into `parts`
 * (at most count); range t is [count*t/parts, count*(t+1)/parts) and gets
 * slot t, the index of the per-thread scratch it may use, on thread t of a
 * team of all the context's threads (those past `parts` idle through the
 * region). With one part fn runs on the calling thread and no parallel
 * region is entered: that is all the cpu engine ever does. Ranges never
 * share an output, so a result does not depend on `parts`. fn must not
 * record errors (the message is per thread): it reports failures through
 * arg. */
typedef void cnn_range_fn(void *arg, long lo, long hi, int slot);
void cnn_cpu_parallel(cnn_ctx *ctx, int parts, long count, cnn_range_fn *fn, void *arg);
/* Whether this process was forked after OpenMP had run in its parent:
 * cnn_cpu_parallel then runs the parts one after another (parallel.c). */
int cnn_cpu_threads_lost_to_fork(void);

/* The number of parts for `count` items of `cost` units each on this
 * context: at most its threads, and none smaller than `grain` units of work
 * (a part below that costs more to hand out than it saves). */
int cnn_cpu_parts(cnn_ctx *ctx, long count, double cost, double grain);

/* Work grains, in floats touched (elementwise ops) and multiply-adds (GEMM).
 * (The scaling benchmark's CNNCUDA_OMP_GRAIN, a multiplier of both, was
 * retired on 2026-11-26: BENCHMARKS.md keeps what it measured.) */
#define CNN_GRAIN_ELEMENTS 16384.0
#define CNN_GRAIN_MACS 65536.0

/* C = alpha op(A) op(B) + beta C (gemm.h) over up to `parts` threads, C cut
 * into blocks of whole micro-tiles, each computed by cnn_sgemm with that
 * thread's packing scratch: bit-identical to cnn_sgemm for any parts. */
void cnn_sgemm_parallel(cnn_ctx *ctx, int parts, int trans_a, int trans_b, int m, int n, int k,
                        float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                        float *c, int ldc);
/* The GEMM on a context: threaded where the product is large enough. */
void cnn_cpu_sgemm(cnn_ctx *ctx, int trans_a, int trans_b, int m, int n, int k, float alpha,
                   const float *a, int lda, const float *b, int ldb, float beta, float *c,
                   int ldc);

/* The context of both tables: threads GEMM packs. */
cnn_status cnn_cpu_ctx_create(const cnn_backend *table, int threads, int chunked_filter,
                              cnn_ctx **out);
void cnn_cpu_ctx_destroy(cnn_ctx *ctx);

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

/* backend_cpu.c, backend_omp.c: the tables. Both hold the same kernels;
 * omp's context has N threads and its convolution workspace room for the
 * filter-gradient partials. */
/* The entries the cpu and omp tables share (designated initializers):
 * every entry but the name, ctx_create and conv2d_workspace, which each
 * table gives as its own (backend_cpu.c, backend_omp.c). */
#define CNN_CPU_ENTRIES \
    .ctx_destroy = cnn_cpu_ctx_destroy, \
    .alloc = cpu_alloc, \
    .free = cpu_free, \
    .upload = cpu_copy, \
    .download = cpu_copy, \
    .zero = cpu_zero, \
    .synchronize = cpu_synchronize, \
    .copy = cpu_copy, \
    .nchw_from_nhwc = cpu_nchw_from_nhwc, \
    .nhwc_from_nchw = cpu_nhwc_from_nchw, \
    .upload_samples = cpu_upload_samples, \
    .conv2d_forward = cpu_conv2d_forward, \
    .conv2d_backward_data = cpu_conv2d_backward_data, \
    .conv2d_backward_filter = cpu_conv2d_backward_filter, \
    .pool_forward = cpu_pool_forward, \
    .pool_backward = cpu_pool_backward, \
    .dense_forward = cpu_dense_forward, \
    .dense_backward_data = cpu_dense_backward_data, \
    .dense_backward_filter = cpu_dense_backward_filter, \
    .activation_forward = cpu_activation_forward, \
    .activation_backward = cpu_activation_backward, \
    .elementwise_forward = cpu_elementwise_forward, \
    .elementwise_backward = cpu_elementwise_backward, \
    .prelu_forward = cpu_prelu_forward, \
    .prelu_backward = cpu_prelu_backward, \
    .add = cpu_add, \
    .concat_forward = cpu_concat_forward, \
    .concat_backward = cpu_concat_backward, \
    .dropout_forward = cpu_dropout_forward, \
    .dropout_backward = cpu_dropout_backward, \
    .random_flip = cpu_random_flip, \
    .random_affine = cpu_random_affine, \
    .random_contrast = cpu_random_contrast, \
    .random_crop = cpu_random_crop, \
    .spatial_dropout_forward = cpu_spatial_dropout_forward, \
    .spatial_dropout_backward = cpu_spatial_dropout_backward, \
    .rescale = cpu_rescale, \
    .reshape = cpu_reshape, \
    .pad2d = cpu_pad2d, \
    .upsample_forward = cpu_upsample_forward, \
    .upsample_backward = cpu_upsample_backward, \
    .upsample_bilinear_forward = cpu_upsample_bilinear_forward, \
    .upsample_bilinear_backward = cpu_upsample_bilinear_backward, \
    .batchnorm_forward_train = cpu_batchnorm_forward_train, \
    .batchnorm_forward_infer = cpu_batchnorm_forward_infer, \
    .batchnorm_backward = cpu_batchnorm_backward, \
    .batchnorm_backward_infer = cpu_batchnorm_backward_infer, \
    .batchnorm_infer_stats = cpu_batchnorm_infer_stats, \
    .regularize = cpu_regularize, \
    .loss_forward_backward = cpu_loss_forward_backward, \
    .regression_loss_forward_backward = cpu_regression_loss_forward_backward, \
    .gather_batch = cpu_gather_batch, \
    .advance_counters = cpu_advance_counters, \
    .adam_step = cpu_adam_step, \
    .sgd_step = cpu_sgd_step, \
    .rmsprop_step = cpu_rmsprop_step, \
    .adagrad_step = cpu_adagrad_step, \
    .adadelta_step = cpu_adadelta_step, \
    .adamax_step = cpu_adamax_step, \
    .nadam_step = cpu_nadam_step, \
    .adamw_step = cpu_adamw_step, \
    .loss_scale = cpu_loss_scale, \
    .loss_unscale = cpu_loss_unscale, \
    .loss_scale_update = cpu_loss_scale_update, \
    .fused = &cnn_cpu_fused, \
    .input_slice = cpu_input_slice, \
    .labels_from_floats = cpu_labels_from_floats

extern const cnn_backend cnn_backend_cpu;
extern const cnn_backend cnn_backend_omp;
/* backend_cpu.c: the fused ops of both tables (the ReLU fusions) */
extern const cnn_fused_ops cnn_cpu_fused;

/* The kernels, declared with the table's signatures (backend_table.h). */

/* backend_cpu.c: host memory, shared by both tables */
cnn_alloc_fn cpu_alloc;
cnn_free_fn cpu_free;
cnn_copy_fn cpu_copy;
cnn_zero_fn cpu_zero;
cnn_ctx_call_fn cpu_synchronize;

/* layout.c */
/* dst (cols, rows) = transpose of src (rows, cols), both row-major. */
void cnn_cpu_transpose(int rows, int cols, const float *restrict src, float *restrict dst);
cnn_layout_fn cpu_nchw_from_nhwc, cpu_nhwc_from_nchw;

/* upload_samples.c */
cnn_upload_samples_fn cpu_upload_samples;

/* conv2d.c */
cnn_conv2d_workspace_fn cpu_conv2d_workspace, omp_conv2d_workspace;
cnn_conv2d_forward_fn cpu_conv2d_forward, cpu_conv2d_forward_relu;
cnn_conv2d_backward_data_fn cpu_conv2d_backward_data;
cnn_conv2d_backward_filter_fn cpu_conv2d_backward_filter;

/* pool.c */
cnn_pool_forward_fn cpu_pool_forward;
cnn_pool_backward_fn cpu_pool_backward;
cnn_pool_backward_relu_fn cpu_pool_backward_relu;

/* dense.c */
cnn_dense_forward_fn cpu_dense_forward;
cnn_dense_backward_data_fn cpu_dense_backward_data;
cnn_dense_backward_filter_fn cpu_dense_backward_filter;

/* activation.c */
cnn_activation_forward_fn cpu_activation_forward;
cnn_activation_backward_fn cpu_activation_backward;
/* elementwise.c */
cnn_elementwise_forward_fn cpu_elementwise_forward;
cnn_elementwise_backward_fn cpu_elementwise_backward;
/* prelu.c */
cnn_prelu_forward_fn cpu_prelu_forward;
cnn_prelu_backward_fn cpu_prelu_backward;

/* add.c, concat.c */
cnn_add_fn cpu_add;
cnn_concat_fn cpu_concat_forward, cpu_concat_backward;

/* input_slice.c */
cnn_input_slice_fn cpu_input_slice;

/* labels.c */
cnn_labels_from_floats_fn cpu_labels_from_floats;

/* dropout.c */
cnn_dropout_fn cpu_dropout_forward, cpu_dropout_backward;

/* random_flip.c, random_affine.c, random_contrast.c, random_crop.c */
cnn_augment_fn cpu_random_flip, cpu_random_affine, cpu_random_contrast, cpu_random_crop;

/* spatial_dropout.c */
cnn_dropout_fn cpu_spatial_dropout_forward, cpu_spatial_dropout_backward;

/* rescale.c, reshape.c, pad2d.c, upsample.c: the shape and image layers */
cnn_rescale_fn cpu_rescale;
cnn_reshape_fn cpu_reshape;
cnn_pad2d_fn cpu_pad2d;
cnn_upsample_fn cpu_upsample_forward, cpu_upsample_backward;
/* upsample_bilinear.c */
cnn_upsample_fn cpu_upsample_bilinear_forward, cpu_upsample_bilinear_backward;

/* batchnorm.c */
cnn_batchnorm_forward_train_fn cpu_batchnorm_forward_train;
cnn_batchnorm_forward_infer_fn cpu_batchnorm_forward_infer;
cnn_batchnorm_backward_fn cpu_batchnorm_backward;

/* batchnorm_backward_infer.c */
cnn_batchnorm_backward_infer_fn cpu_batchnorm_backward_infer;

/* batchnorm_infer_stats.c */
cnn_batchnorm_infer_stats_fn cpu_batchnorm_infer_stats;

/* regularize.c */
cnn_regularize_fn cpu_regularize;

/* loss.c */
cnn_loss_forward_backward_fn cpu_loss_forward_backward;
cnn_loss_forward_backward_fn cpu_regression_loss_forward_backward;

/* gather.c */
cnn_gather_batch_fn cpu_gather_batch;
cnn_advance_counters_fn cpu_advance_counters;

/* adam.c, sgd.c, rmsprop.c, adagrad.c, adadelta.c, adamax.c, nadam.c, adamw.c */
cnn_adam_step_fn cpu_adam_step;
cnn_sgd_step_fn cpu_sgd_step;
cnn_rmsprop_step_fn cpu_rmsprop_step;
cnn_sgd_step_fn cpu_adagrad_step;
cnn_adam_step_fn cpu_adadelta_step;
cnn_adam_step_fn cpu_adamax_step;
cnn_adam_step_fn cpu_nadam_step;
cnn_adam_step_fn cpu_adamw_step;

/* loss_scale.c */
cnn_loss_scale_fn cpu_loss_scale;
cnn_loss_unscale_fn cpu_loss_unscale;
cnn_loss_scale_update_fn cpu_loss_scale_update;

#endif
