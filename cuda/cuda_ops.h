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

/* The entries, declared with the table's signatures (backend_table.h). */

/* backend_cuda.cu: the context's device made current (both GPU tables) */
cnn_ctx_call_fn cuda_activate;

/* backend_cuda.cu: memory on the context's stream */
cnn_alloc_fn cuda_alloc;
cnn_free_fn cuda_free;
cnn_copy_fn cuda_upload, cuda_download, cuda_copy;
cnn_zero_fn cuda_zero;
cnn_ctx_call_fn cuda_synchronize;

/* upload_samples.cu */
cnn_upload_samples_fn cuda_upload_samples;

/* layout.cu */
cnn_layout_fn cuda_nchw_from_nhwc, cuda_nhwc_from_nchw;

/* conv2d.cu */
cnn_conv2d_workspace_fn cuda_conv2d_workspace;
cnn_conv2d_forward_fn cuda_conv2d_forward, cuda_conv2d_forward_relu;
cnn_conv2d_backward_data_fn cuda_conv2d_backward_data;
cnn_conv2d_backward_filter_fn cuda_conv2d_backward_filter;
cnn_conv2d_forward_col_fn cuda_conv2d_forward_col;
/* the backward filter from x, for the cudnn engine's own filter gradients */
cnn_conv2d_backward_filter_fn cuda_conv2d_backward_filter_from_x;

/* conv2d_pool_backward.cu */
cnn_conv2d_backward_data_pool_fn cuda_conv2d_backward_data_pool;

/* gather_im2col.cu */
cnn_gather_batch_im2col_fn cuda_gather_batch_im2col;

/* pool.cu */
cnn_pool_forward_fn cuda_pool_forward;
cnn_pool_backward_fn cuda_pool_backward;
cnn_pool_backward_relu_fn cuda_pool_backward_relu;

/* dense.cu */
cnn_dense_forward_fn cuda_dense_forward, cuda_dense_forward_relu;
cnn_dense_backward_data_fn cuda_dense_backward_data;
cnn_dense_backward_filter_fn cuda_dense_backward_filter;

/* add.cu, concat.cu */
cnn_add_fn cuda_add;
cnn_concat_fn cuda_concat_forward, cuda_concat_backward;
/* input_slice.cu */
cnn_input_slice_fn cuda_input_slice;

/* labels.cu */
cnn_labels_from_floats_fn cuda_labels_from_floats;

/* activation.cu */
cnn_activation_forward_fn cuda_activation_forward;
cnn_activation_backward_fn cuda_activation_backward;
cnn_activation_backward_bias_fn cuda_activation_backward_bias;
/* elementwise.cu */
cnn_elementwise_forward_fn cuda_elementwise_forward;
cnn_elementwise_backward_fn cuda_elementwise_backward;
/* prelu.cu */
cnn_prelu_forward_fn cuda_prelu_forward;
cnn_prelu_backward_fn cuda_prelu_backward;

/* dropout.cu */
cnn_dropout_fn cuda_dropout_forward, cuda_dropout_backward;

/* random_flip.cu, random_affine.cu, random_contrast.cu, random_crop.cu */
cnn_augment_fn cuda_random_flip, cuda_random_affine, cuda_random_contrast, cuda_random_crop;

/* spatial_dropout.cu */
cnn_dropout_fn cuda_spatial_dropout_forward, cuda_spatial_dropout_backward;

/* rescale.cu, reshape.cu, pad2d.cu, upsample.cu: the shape and image layers */
cnn_rescale_fn cuda_rescale;
cnn_reshape_fn cuda_reshape;
cnn_pad2d_fn cuda_pad2d;
cnn_upsample_fn cuda_upsample_forward, cuda_upsample_backward;
/* upsample_bilinear.cu */
cnn_upsample_fn cuda_upsample_bilinear_forward, cuda_upsample_bilinear_backward;

/* batchnorm.cu */
cnn_batchnorm_forward_train_fn cuda_batchnorm_forward_train;
cnn_batchnorm_forward_infer_fn cuda_batchnorm_forward_infer;
cnn_batchnorm_backward_fn cuda_batchnorm_backward;

/* batchnorm_backward_infer.cu */
cnn_batchnorm_backward_infer_fn cuda_batchnorm_backward_infer;

/* batchnorm_infer_stats.cu */
cnn_batchnorm_infer_stats_fn cuda_batchnorm_infer_stats;

/* regularize.cu */
cnn_regularize_fn cuda_regularize;

/* loss.cu, dense_head.cu */
cnn_loss_forward_backward_fn cuda_loss_forward_backward;
cnn_loss_forward_backward_fn cuda_regression_loss_forward_backward;
cnn_softmax_loss_forward_backward_fn cuda_softmax_loss_forward_backward;
cnn_dense_loss_head_fn cuda_dense_loss_head;

/* gather.cu */
cnn_gather_batch_fn cuda_gather_batch;
cnn_advance_counters_fn cuda_advance_counters;

/* record.cu: recording a step (CUDA graph capture), replays, event timing */
cnn_ctx_call_fn cuda_capture_begin;
cnn_capture_end_fn cuda_capture_end;
cnn_replay_fn cuda_replay;
cnn_recording_free_fn cuda_recording_free;
cnn_timer_mark_fn cuda_timer_mark;
cnn_timer_elapsed_fn cuda_timer_elapsed;

/* adam.cu, sgd.cu, rmsprop.cu, adagrad.cu, adadelta.cu, adamax.cu, nadam.cu, adamw.cu */
cnn_adam_step_fn cuda_adam_step;
cnn_sgd_step_fn cuda_sgd_step;
cnn_rmsprop_step_fn cuda_rmsprop_step;
cnn_sgd_step_fn cuda_adagrad_step;
cnn_adam_step_fn cuda_adadelta_step;
cnn_adam_step_fn cuda_adamax_step;
cnn_adam_step_fn cuda_nadam_step;
cnn_adam_step_fn cuda_adamw_step;

// loss_scale.cu
cnn_loss_scale_fn cuda_loss_scale;
cnn_loss_unscale_fn cuda_loss_unscale;
cnn_loss_scale_update_fn cuda_loss_scale_update;

#ifdef __cplusplus
}
#endif

#endif
