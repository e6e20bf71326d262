/* backend_table.h: the backend table every engine fills in (included by
 * cnn.h, whose types it uses).
 *
 * Each op's signature is written once, here, as a function type
 * (cnn_conv2d_forward_fn ...); the tables hold pointers of those types, and
 * every engine declares its functions with them (cpu.h, cuda_ops.h:
 * `cnn_conv2d_forward_fn cpu_conv2d_forward;`), so a signature that changes
 * changes here only and the compiler checks every definition against it.
 *
 * Two tables: cnn_backend, the ops every engine has (the Net runs a network
 * with them alone), and cnn_fused_ops, the optional fused ops an engine may
 * add (be->fused, NULL for none; each entry NULL where the engine lacks it),
 * each the bits of the core ops it replaces (softmax_loss_forward_backward
 * alone says otherwise). A fusion is one entry here, its
 * kernel, and one planning rule in csrc/net/plan.c that uses it where the
 * entry exists and its switch is on.
 *
 * Every pointer that names a buffer is memory of the backend (host memory
 * for cpu, device memory for cuda); `host` pointers are named so. Every op
 * returns CNN_OK or a status with a message recorded. */
#ifndef CNN_BACKEND_TABLE_H
#define CNN_BACKEND_TABLE_H

typedef struct cnn_backend cnn_backend;
typedef struct cnn_fused_ops cnn_fused_ops;

/* A backend's working state (streams, handles, scratch): made by ctx_create,
 * impl is the backend's own. */
typedef struct cnn_ctx {
    const cnn_backend *backend;
    int num_threads;
    int device;     /* GPU engines: the CUDA device the context lives on */
    int precision;  /* cnn_precision, set by the Net from its spec: cudnn (cuDNN, cuBLAS) and cuda (its wide SGEMM) read it */
    void *impl;
} cnn_ctx;

/* ------------------------------------------------------- the signatures */

/* lifetime: num_threads is the thread count (1 for cpu); device the GPU
 * engines' CUDA device index (0 for the host engines) */
typedef cnn_status cnn_ctx_create_fn(cnn_ctx **out, int num_threads, int device);
typedef void cnn_ctx_destroy_fn(cnn_ctx *ctx);
/* a call on the context alone: activate, synchronize, capture_begin */
typedef cnn_status cnn_ctx_call_fn(cnn_ctx *ctx);

/* memory */
typedef cnn_status cnn_alloc_fn(cnn_ctx *ctx, void **p, size_t bytes);
typedef void cnn_free_fn(cnn_ctx *ctx, void *p);
/* bytes from src to dst: upload (host src), download (host dst), copy */
typedef cnn_status cnn_copy_fn(cnn_ctx *ctx, void *dst, const void *src, size_t bytes);
typedef cnn_status cnn_zero_fn(cnn_ctx *ctx, void *p, size_t bytes);

/* layouts: x (n, h, w, c) <-> y (n, c, h, w) */
typedef cnn_status cnn_layout_fn(cnn_ctx *ctx, int n, int h, int w, int c, const float *x,
                                 float *y);
typedef cnn_status cnn_upload_samples_fn(cnn_ctx *ctx, float *dst, const cnn_host_array *a,
                                         long n, int h, int w, int c, int transpose);

/* convolution */
typedef size_t cnn_conv2d_workspace_fn(const cnn_conv_desc *d);
typedef cnn_status cnn_conv2d_forward_fn(cnn_ctx *ctx, const cnn_conv_desc *d,
                                         const float *x,  /* (n, c, h, w) */
                                         const float *w,  /* (f, c, kh, kw) */
                                         const float *b,  /* (f) or NULL */
                                         float *y,        /* (n, f, oh, ow) */
                                         void *ws);
typedef cnn_status cnn_conv2d_backward_data_fn(cnn_ctx *ctx, const cnn_conv_desc *d,
                                               const float *dy, /* (n, f, oh, ow) */
                                               const float *w,  /* (f, c, kh, kw) */
                                               float *dx,       /* (n, c, h, w) */
                                               void *ws);
typedef cnn_status cnn_conv2d_backward_filter_fn(cnn_ctx *ctx, const cnn_conv_desc *d,
                                                 const float *x,  /* (n, c, h, w) */
                                                 const float *dy, /* (n, f, oh, ow) */
                                                 float *dw, /* (f, c, kh, kw), overwritten */
                                                 float *db, /* (f), overwritten, or NULL */
                                                 void *ws);

/* pooling */
typedef cnn_status cnn_pool_forward_fn(cnn_ctx *ctx, const cnn_pool_desc *d,
                                       const float *x, /* (n, c, h, w) */
                                       float *y,       /* (n, c, oh, ow) */
                                       int32_t *argmax);
typedef cnn_status cnn_pool_backward_fn(cnn_ctx *ctx, const cnn_pool_desc *d,
                                        const float *dy,       /* (n, c, oh, ow) */
                                        const int32_t *argmax, /* (n, c, oh, ow) */
                                        float *dx);            /* (n, c, h, w), overwritten */

/* dense: y = x w + b */
typedef cnn_status cnn_dense_forward_fn(cnn_ctx *ctx, int n, int in, int out,
                                        const float *x, /* (n, in) */
                                        const float *w, /* (in, out) */
                                        const float *b, /* (out) or NULL */
                                        float *y);      /* (n, out) */
typedef cnn_status cnn_dense_backward_data_fn(cnn_ctx *ctx, int n, int in, int out,
                                              const float *dy, /* (n, out) */
                                              const float *w,  /* (in, out) */
                                              float *dx);      /* (n, in) */
typedef cnn_status cnn_dense_backward_filter_fn(cnn_ctx *ctx, int n, int in, int out,
                                                const float *x,  /* (n, in) */
                                                const float *dy, /* (n, out) */
                                                float *dw, /* (in, out), overwritten */
                                                float *db); /* (out), overwritten, or NULL */

/* activations over x (rows, cols); softmax is over cols. The backward
 * takes the forward's output y. */
typedef cnn_status cnn_activation_forward_fn(cnn_ctx *ctx, int act, int rows, int cols,
                                             const float *x, float *y);
typedef cnn_status cnn_activation_backward_fn(cnn_ctx *ctx, int act, int rows, int cols,
                                              const float *y, const float *dy, float *dx);

/* The elementwise activations from CNN_ACT_ELU on (cnn.h: d->act and its
 * parameters) over count values. The backward reads the forward's input x
 * and output y (each formula uses the one it needs); dx may be dy. */
typedef cnn_status cnn_elementwise_forward_fn(cnn_ctx *ctx, const cnn_act_desc *d, long count,
                                              const float *x, /* (count) */
                                              float *y);      /* (count) */
typedef cnn_status cnn_elementwise_backward_fn(cnn_ctx *ctx, const cnn_act_desc *d, long count,
                                               const float *x,  /* (count): the input */
                                               const float *y,  /* (count): the output */
                                               const float *dy, /* (count) */
                                               float *dx);      /* (count), overwritten */

/* PReLU (cnn.h cnn_prelu_desc). The backward overwrites dx (may be dy, or NULL:
 * not wanted) and dalpha, the sum over the batch and the shared axes of
 * dy x where x < 0, in a fixed order. */
typedef cnn_status cnn_prelu_forward_fn(cnn_ctx *ctx, const cnn_prelu_desc *d,
                                        const float *x,     /* (n, c, h, w) */
                                        const float *alpha, /* (ac, ah, aw) */
                                        float *y);          /* (n, c, h, w) */
typedef cnn_status cnn_prelu_backward_fn(cnn_ctx *ctx, const cnn_prelu_desc *d,
                                         const float *x,     /* (n, c, h, w) */
                                         const float *alpha, /* (ac, ah, aw) */
                                         const float *dy,    /* (n, c, h, w) */
                                         float *dx,          /* (n, c, h, w), or NULL */
                                         float *dalpha);     /* (ac, ah, aw), overwritten */

/* the sum of two tensors of count values per sample: y = a + b over n
 * samples (y may be a or b) */
typedef cnn_status cnn_add_fn(cnn_ctx *ctx, int n, int count,
                              const float *a, const float *b, /* (n, count) */
                              float *y);                      /* (n, count) */

/* a tensor's place in a concatenation along the channels: concat_forward
 * copies x (n, c, hw) into channels [offset, offset + c) of y (n, c_total,
 * hw); concat_backward copies those channels of dy (n, c_total, hw) into
 * dx (n, c, hw) */
typedef cnn_status cnn_concat_fn(cnn_ctx *ctx, int n, int c, int hw, int c_total, int offset,
                                 const float *in, float *out);

/* one input of a network of several inputs (CNN_LAYER_INPUT_SLICE): for
 * each of n samples of x (n, row), its values [offset, offset + h w c), an
 * (h, w, c) NHWC image or (1, 1, c) row, into y (n, c, h, w) (NCHW) */
typedef cnn_status cnn_input_slice_fn(cnn_ctx *ctx, int n, int row, int offset, int h, int w,
                                      int c, const float *x, float *y);

/* a network of several outputs: count labels staged as floats (a packed
 * target row's) into int32 for the sparse cross-entropy, labels[i] =
 * (int32) x[i], clamped into [0, k) (the Python layer refuses labels out
 * of range first; the clamp keeps the loss inside its rows) */
typedef cnn_status cnn_labels_from_floats_fn(cnn_ctx *ctx, long count, int k, const float *x,
                                             int32_t *labels);

/* dropout forward (x -> y) and backward (dy -> dx) */
typedef cnn_status cnn_dropout_fn(cnn_ctx *ctx, int n, int c, int h, int w, float rate,
                                  uint64_t seed, const int64_t *forward, int64_t row0,
                                  const float *in, float *out);

/* an augmentation layer's forward: x (n, c, h, w) -> y (n, c, oh, ow) of
 * descriptor d (augment.h), x and y distinct buffers; training 0 passes x
 * through (random_crop: the centre crop) */
typedef cnn_status cnn_augment_fn(cnn_ctx *ctx, const cnn_aug_desc *d, int training,
                                  const int64_t *forward, int64_t row0, const float *x, float *y);

/* the shape and image layers (Rescaling, Reshape, ZeroPadding2D, Cropping2D,
 * UpSampling2D) */
/* x (n, c, plane) (features: plane 1) -> y = x * scale[ch] + offset[ch]
 * per channel ch, the product rounded before the sum (no fused
 * multiply-add); offset NULL: y = x * scale[ch] (the backward). scale and
 * offset (c) are engine memory; x and y may be the same buffer */
typedef cnn_status cnn_rescale_fn(cnn_ctx *ctx, int n, int c, size_t plane, const float *scale,
                                  const float *offset, const float *x, float *y);
/* x (n, c, h, w) -> y (n, oc, oh, ow), both NCHW, with c*h*w == oc*oh*ow:
 * the values in the same NHWC (Keras) order, so that y is Keras's reshape
 * of x; x and y must not overlap */
typedef cnn_status cnn_reshape_fn(cnn_ctx *ctx, int n, int c, int h, int w, int oc, int oh,
                                  int ow, const float *x, float *y);
/* y (n, c, oh, ow): y[r][s] = x (n, c, h, w)[r - top][s - left] where that
 * is inside x, else 0 (top, left > 0: zero padding; < 0: cropping) */
typedef cnn_status cnn_pad2d_fn(cnn_ctx *ctx, int n, int c, int h, int w, int oh, int ow,
                                int top, int left, const float *x, float *y);
/* nearest upsampling by (sh, sw) of images (n, c, h, w): forward in (n, c,
 * h, w) -> out (n, c, h sh, w sw), out[r][s] = in[r / sh][s / sw]; backward
 * in = dy (n, c, h sh, w sw) -> out = dx (n, c, h, w), each the sum of its
 * sh x sw block of dy in row-major order */
typedef cnn_status cnn_upsample_fn(cnn_ctx *ctx, int n, int c, int h, int w, int sh, int sw,
                                   const float *in, float *out);
/* (upsample_bilinear_forward, _backward: the same shapes; each output pixel
 * the weighted sum of two by two input pixels, cnn_bilinear_source (cnn.h):
 * out = (1 - fy) ((1 - fx) a + fx b) + fy ((1 - fx) c + fx d) in that order,
 * a, b the row i0's pixels j0, j1 and c, d the row i1's; the backward's dx
 * pixel the sum over the output rows r (ascending) of row r's weight times
 * the sum over the columns s (ascending) of column s's weight times dy) */

/* batch normalization */
typedef cnn_status cnn_batchnorm_forward_train_fn(
    cnn_ctx *ctx, const cnn_bn_desc *d,
    const float *x,                          /* (n, c, spatial) */
    const float *gamma, const float *beta,   /* (c) */
    float *moving_mean, float *moving_var,   /* (c) */
    float *y,                                /* like x */
    float *save_mean, float *save_invstd);   /* (c) */
typedef cnn_status cnn_batchnorm_forward_infer_fn(cnn_ctx *ctx, const cnn_bn_desc *d,
                                                  const float *x, const float *gamma,
                                                  const float *beta, const float *moving_mean,
                                                  const float *moving_var, float *y);
typedef cnn_status cnn_batchnorm_backward_fn(cnn_ctx *ctx, const cnn_bn_desc *d,
                                             const float *x, const float *dy,
                                             const float *gamma, const float *save_mean,
                                             const float *save_invstd, float *dx,
                                             float *dgamma, float *dbeta);
/* the backward of the inference-mode normalization (a frozen layer in
 * training): dx = dy gamma / sqrt(moving_var + epsilon), per channel */
typedef cnn_status cnn_batchnorm_backward_infer_fn(cnn_ctx *ctx, const cnn_bn_desc *d,
                                                   const float *dy,         /* (n, c, spatial) */
                                                   const float *gamma,      /* (c) */
                                                   const float *moving_var, /* (c) */
                                                   float *dx);              /* like dy */
/* the inference-mode statistics in the form batchnorm_backward takes them:
 * save_mean = moving_mean, save_invstd = 1 / sqrt(moving_var + epsilon), per
 * channel (a trainable layer run in inference mode in training: its gamma
 * and beta gradients through batchnorm_backward) */
typedef cnn_status cnn_batchnorm_infer_stats_fn(cnn_ctx *ctx, const cnn_bn_desc *d,
                                                const float *moving_mean, /* (c) */
                                                const float *moving_var,  /* (c) */
                                                float *save_mean,         /* (c) */
                                                float *save_invstd);      /* (c) */

/* a weight's regularizer (Keras's L1L2) */
typedef cnn_status cnn_regularize_fn(cnn_ctx *ctx, size_t count, float l1, float l2,
                                     float scale,
                                     const float *p, /* (count): the weight */
                                     float *g,       /* (count): its gradient, or NULL */
                                     float *sums);   /* (2): the loss sums, or NULL */

/* the loss */
typedef cnn_status cnn_loss_forward_backward_fn(cnn_ctx *ctx, const cnn_loss_desc *d,
                                                const float *y,
                                                const int32_t *labels, /* (n) or NULL */
                                                const float *targets,  /* (n, k) or NULL */
                                                int scale_n,
                                                float *dy,  /* (n, k) or NULL */
                                                float *sums); /* (2), accumulated */

/* a training step's rows, and the counters */
typedef cnn_status cnn_gather_batch_fn(cnn_ctx *ctx, const int32_t *order, int64_t *counters,
                                       int count, long rows, size_t x_row_bytes,
                                       const void *src_x, void *dst_x, size_t t_row_bytes,
                                       const void *src_t, void *dst_t);
typedef cnn_status cnn_advance_counters_fn(cnn_ctx *ctx, int64_t *counters, int forward,
                                           int steps, long rows);

/* optimizers over a flat block of count parameters; hyper: (CNN_HYPERS) and
 * step (the optimizer steps taken, this one included) in engine memory.
 * Two slot blocks and the step: adam, adamw, adamax, nadam, adadelta (which
 * does not read the step); one slot block (may be NULL where the optimizer
 * keeps none): sgd, adagrad. */
typedef cnn_status cnn_adam_step_fn(cnn_ctx *ctx, const float *hyper, const int64_t *step,
                                    size_t count, float *p, const float *g, float *m,
                                    float *v);
typedef cnn_status cnn_sgd_step_fn(cnn_ctx *ctx, const float *hyper, size_t count, float *p,
                                   const float *g, float *velocity);
typedef cnn_status cnn_rmsprop_step_fn(cnn_ctx *ctx, const float *hyper, size_t count,
                                       float *p, const float *g,
                                       float *velocity, /* (count) */
                                       float *momentum, /* (count) or NULL: built without */
                                       float *average_gradient); /* (count) or NULL: not centered */

/* dynamic loss scaling (cnn.h: CNN_HYPER_SKIP ...; hyper in engine memory,
 * read when the op runs):
 * loss_scale: x[i] *= hyper[LOSS_SCALE] over count values (the loss's
 * gradient);
 * loss_unscale: g[i] /= hyper[LOSS_SCALE] over count values, and
 * hyper[SKIP] = 1 where any g[i] was not finite (else left as it is);
 * loss_scale_update, after the optimizer's step: where hyper[SKIP], S
 * halves, the count of good steps restarts and counters[STEPS] goes back by
 * one (the skipped step is not counted); else the count of good steps grows
 * by one and when it reaches hyper[SCALE_GROWTH] S doubles and it restarts;
 * then hyper[SKIP] = 0. */
typedef cnn_status cnn_loss_scale_fn(cnn_ctx *ctx, const float *hyper, size_t count, float *x);
typedef cnn_status cnn_loss_unscale_fn(cnn_ctx *ctx, float *hyper, size_t count, float *g);
typedef cnn_status cnn_loss_scale_update_fn(cnn_ctx *ctx, float *hyper, int64_t *counters);

/* recording and timing */
typedef cnn_status cnn_capture_end_fn(cnn_ctx *ctx, void **recording);
typedef cnn_status cnn_replay_fn(cnn_ctx *ctx, void *recording, long times);
typedef void cnn_recording_free_fn(cnn_ctx *ctx, void *recording);
/* The engine's clock has CNN_TIMER_MARKS marks: 0 and 1 time a train_range
 * (fit.c), the others a profiled step's planned steps (profile.c). */
#define CNN_TIMER_MARKS 1024
typedef cnn_status cnn_timer_mark_fn(cnn_ctx *ctx, int which);
typedef cnn_status cnn_timer_elapsed_fn(cnn_ctx *ctx, int from, int to, double *seconds);

/* the fused ops' own signatures */
typedef cnn_status cnn_pool_backward_relu_fn(cnn_ctx *ctx, const cnn_pool_desc *d,
                                             const float *dy,       /* (n, c, oh, ow) */
                                             const int32_t *argmax, /* (n, c, oh, ow) */
                                             const float *y,  /* (n, c, h, w): the pool's input */
                                             float *dx);      /* (n, c, h, w), overwritten */
typedef cnn_status cnn_activation_backward_bias_fn(cnn_ctx *ctx, int act, int rows, int cols,
                                                   const float *y,  /* (rows, cols) */
                                                   const float *dy, /* (rows, cols) */
                                                   float *dx, /* (rows, cols), overwritten */
                                                   float *db); /* (cols), overwritten */
typedef cnn_status cnn_conv2d_backward_data_pool_fn(
    cnn_ctx *ctx, const cnn_conv_desc *d, const cnn_pool_desc *p,
    const float *dy,       /* (n, f, oh, ow) */
    const float *w,        /* (f, c, kh, kw) */
    const int32_t *argmax, /* (n, c, h, w), max */
    const float *y,        /* (n, c, p->h, p->w) or NULL */
    const float *pool_y,   /* (n, c, p->oh, p->ow) or NULL */
    float *dx,             /* (n, c, p->h, p->w) */
    void *ws);
typedef cnn_status cnn_conv2d_forward_col_fn(cnn_ctx *ctx, const cnn_conv_desc *d, int relu,
                                             const float *x, /* (n, c, h, w) */
                                             const float *w, /* (f, c, kh, kw) */
                                             const float *b, /* (f) or NULL */
                                             float *y,       /* (n, f, oh, ow) */
                                             void *ws);
typedef cnn_status cnn_softmax_loss_forward_backward_fn(
    cnn_ctx *ctx, const cnn_loss_desc *d,
    const float *x,        /* (n, k) logits */
    float *y,              /* (n, k) */
    const int32_t *labels, /* (n) or NULL */
    const float *targets,  /* (n, k) or NULL */
    int scale_n,
    float *dx,             /* (n, k) or NULL */
    float *sums);          /* (2), accumulated */
typedef cnn_status cnn_dense_loss_head_fn(cnn_ctx *ctx, const cnn_loss_desc *d, int in,
                                          int softmax, int relu,
                                          const float *x,        /* (n, in) */
                                          const float *w,        /* (in, k) */
                                          const float *b,        /* (k) or NULL */
                                          const int32_t *labels, /* (n) or NULL */
                                          const float *targets,  /* (n, k) or NULL */
                                          int scale_n,
                                          float *z,        /* (n, k) */
                                          float *p,        /* (n, k), with softmax */
                                          float *dw,       /* (in, k) */
                                          float *db,       /* (k) or NULL */
                                          float *dx,       /* (n, in) or NULL */
                                          float *db_below, /* (in) or NULL */
                                          float *sums,     /* (2), accumulated */
                                          void *ws);
typedef cnn_status cnn_gather_batch_im2col_fn(cnn_ctx *ctx, const int32_t *order,
                                              int64_t *counters, int count, long rows,
                                              size_t x_row_bytes, const void *src_x,
                                              void *dst_x, size_t t_row_bytes,
                                              const void *src_t, void *dst_t,
                                              const cnn_conv_desc *d, void *ws);

/* ------------------------------------------------------ the core ops */

struct cnn_backend {
    const char *name;

    cnn_ctx_create_fn *ctx_create;
    cnn_ctx_destroy_fn *ctx_destroy;
    /* Optional (NULL in the host engines): makes the context's device the
     * calling thread's current one. The binding calls it before every call
     * on a Net, so a Net may be used from any thread. */
    cnn_ctx_call_fn *activate;

    /* memory */
    cnn_alloc_fn *alloc;
    cnn_free_fn *free;
    cnn_copy_fn *upload;   /* src: host memory */
    cnn_copy_fn *download; /* dst: host memory */
    cnn_zero_fn *zero;
    cnn_ctx_call_fn *synchronize;
    /* bytes from src to dst, both engine memory, in the engine's order */
    cnn_copy_fn *copy;

    cnn_layout_fn *nchw_from_nhwc;
    cnn_layout_fn *nhwc_from_nchw;
    /* n samples of `a` ((n, h, w, c) values, or (n, c) rows with h = w =
     * 1) converted to float32 (cnn_to_float32: the same bits on every
     * engine) into dst, engine memory, as (n, c, h, w) when `transpose`,
     * else in a's order. A value that is not finite: cnn_refuse_value for
     * the first one, dst partly written. Done when it returns (a may then be
     * freed). */
    cnn_upload_samples_fn *upload_samples;

    /* convolution; b and db may be NULL. ws holds conv2d_workspace(d) bytes
     * (d.n = the largest batch) and belongs to one convolution layer: the
     * Net calls, for one batch, forward, then backward_filter, then
     * backward_data, all with the same ws and nothing else in between that
     * touches it, so an engine may leave data there for the later calls
     * (the cuda engine keeps the column matrix and the rearranged dy). */
    cnn_conv2d_workspace_fn *conv2d_workspace;
    cnn_conv2d_forward_fn *conv2d_forward;
    cnn_conv2d_backward_data_fn *conv2d_backward_data;
    cnn_conv2d_backward_filter_fn *conv2d_backward_filter;

    /* pooling; argmax (n, c, oh, ow) is written by max forward, read by max
     * backward (flat index into the image plane h*w), unused by average */
    cnn_pool_forward_fn *pool_forward;
    cnn_pool_backward_fn *pool_backward;

    /* dense; b and db may be NULL */
    cnn_dense_forward_fn *dense_forward;
    cnn_dense_backward_data_fn *dense_backward_data;
    cnn_dense_backward_filter_fn *dense_backward_filter;

    cnn_activation_forward_fn *activation_forward;
    cnn_activation_backward_fn *activation_backward;
    /* the activations from CNN_ACT_ELU on, and PReLU */
    cnn_elementwise_forward_fn *elementwise_forward;
    cnn_elementwise_backward_fn *elementwise_backward;
    cnn_prelu_forward_fn *prelu_forward;
    cnn_prelu_backward_fn *prelu_backward;

    /* layers of several inputs: Add's forward (and the sum of the gradients
     * of an output read by several layers), Concatenate's forward and
     * backward */
    cnn_add_fn *add;
    cnn_concat_fn *concat_forward;
    cnn_concat_fn *concat_backward;

    /* inverted dropout over x (n, c, h, w) (h = w = 1 for (n, c)): element
     * (i, ch, r, s) is kept when cnn_uniform(key, (((row0 + i)*h + r)*w + s)*c
     * + ch) >= rate (the Keras NHWC index of row row0 + i of the whole batch,
     * of which x holds rows row0 ...: a data-parallel replica's share), and
     * kept values scale by 1/(1 - rate).
     * key = cnn_rng_key(seed, *forward): forward is backend memory (the
     * Net's CNN_COUNT_MASK counter), read when the op runs. */
    cnn_dropout_fn *dropout_forward;  /* x -> y */
    cnn_dropout_fn *dropout_backward; /* dy -> dx */

    /* the augmentation layers' training forwards (augment.h; docs/semantics.md
     * "Augmentation layers"): sample i of x is row row0 + i of the whole
     * batch, and draws uniform(key_t, 2 (row0 + i) + d), d = 0, 1, with
     * key_t = cnn_rng_key(d->key, *forward) (*forward: backend memory, the
     * Net's CNN_COUNT_MASK counter, read when the op runs). No backward: the
     * Net allows them only before its layers with weights. */
    cnn_augment_fn *random_flip;     /* u0 <= 0.5: the sample flipped on d's axes */
    cnn_augment_fn *random_affine;   /* rotation, zoom, translation: resampled */
    cnn_augment_fn *random_contrast; /* (x - mean) f + mean, clipped, per channel */
    cnn_augment_fn *random_crop;     /* an (oh, ow) window of each sample */

    /* SpatialDropout2D: dropout_forward's and dropout_backward's, except
     * that a whole channel ch of row i is kept or dropped, when
     * cnn_uniform(key, (row0 + i)*c + ch) >= rate */
    cnn_dropout_fn *spatial_dropout_forward;  /* x -> y */
    cnn_dropout_fn *spatial_dropout_backward; /* dy -> dx */

    /* the shape and image layers (their signatures say what each does);
     * each layer's backward is an entry again: Rescaling's is rescale
     * without offsets, Reshape's reshape back, ZeroPadding2D's and Cropping2D's
     * pad2d the other way */
    cnn_rescale_fn *rescale;
    cnn_reshape_fn *reshape;
    cnn_pad2d_fn *pad2d;
    cnn_upsample_fn *upsample_forward;
    cnn_upsample_fn *upsample_backward;
    cnn_upsample_fn *upsample_bilinear_forward;
    cnn_upsample_fn *upsample_bilinear_backward;

    /* batch normalization. Training uses the batch's mean and biased
     * variance and updates moving = moving * momentum + batch * (1 - momentum);
     * it saves mean and 1/sqrt(var + eps) for the backward. */
    cnn_batchnorm_forward_train_fn *batchnorm_forward_train;
    cnn_batchnorm_forward_infer_fn *batchnorm_forward_infer;
    cnn_batchnorm_backward_fn *batchnorm_backward;
    cnn_batchnorm_backward_infer_fn *batchnorm_backward_infer;
    cnn_batchnorm_infer_stats_fn *batchnorm_infer_stats;

    /* a weight's penalty l1 sum|p| + l2 sum p^2 (Keras's L1L2): where g is
     * not NULL, g += l1 sign(p) + (2 l2) p elementwise in float32 (sign(0)
     * = 0; each product rounded, then the sum, then added: no fused
     * multiply-add); where sums is not NULL, sums[0] += (float)(scale *
     * (l1 A + l2 B)), A = sum |p| and B = sum p^2 added in double in an
     * order fixed per engine (the same bits every run) */
    cnn_regularize_fn *regularize;

    /* loss and accuracy of y (n, k) against labels (sparse) or targets
     * (others). Adds the summed per-sample loss to sums[0] and the number of
     * correct samples to sums[1] (binary: the mean over k per sample), each
     * summed in a fixed order (the same bits every run). When
     * dy is not NULL writes the gradient of the MEAN loss over `scale_n`
     * samples into dy (n, k). */
    cnn_loss_forward_backward_fn *loss_forward_backward;

    /* The start of a training step of train_range: for i < count, dst_x
     * row i = src_x row r and dst_t row i = src_t row r with r = order[
     * counters[POSITION] + i] (rows of x_row_bytes and t_row_bytes bytes;
     * src_t may be NULL: no t), read when the op runs; then the counters
     * move on as the step will: a training forward begins
     * (counters[MASK] = counters[FORWARDS]++), one optimizer step
     * (counters[STEPS] += 1), and counters[POSITION] += rows. order and
     * counters are backend memory (the Net checks that the rows exist). */
    cnn_gather_batch_fn *gather_batch;
    /* the Net's counters (backend memory, CNN_COUNTERS of them): when
     * `forward`, counters[MASK] = counters[FORWARDS]++; then counters[STEPS]
     * += steps and counters[POSITION] += rows */
    cnn_advance_counters_fn *advance_counters;

    /* optimizers over a flat block of count parameters. The
     * hyperparameters are hyper[CNN_HYPER_*] and Adam's step t = *step
     * (counting from 1; the Net checks it), all backend memory read when the
     * op runs (nothing of them is baked into a recorded step); Adam's step
     * size is cnn_adam_lr_t. SGD without a velocity buffer (NULL) or with
     * momentum 0 is plain SGD, the velocity left as it is. */
    cnn_adam_step_fn *adam_step;
    cnn_sgd_step_fn *sgd_step;
    cnn_rmsprop_step_fn *rmsprop_step;
    cnn_sgd_step_fn *adagrad_step;      /* velocity: the accumulator */
    cnn_adam_step_fn *adadelta_step;    /* m, v: accumulated_grad, accumulated_delta_var */
    cnn_adam_step_fn *adamax_step;      /* m, v: momentum, norm */
    cnn_adam_step_fn *nadam_step;
    cnn_adam_step_fn *adamw_step;
    /* dynamic loss scaling (LossScaleOptimizer): the three ops above */
    cnn_loss_scale_fn *loss_scale;
    cnn_loss_unscale_fn *loss_unscale;
    cnn_loss_scale_update_fn *loss_scale_update;

    /* Optional (NULL in the host engines). Recording: the work the Net
     * queues between capture_begin and capture_end is not run but recorded
     * (a CUDA graph), then run `times` times over by replay; nothing may
     * read back to the host in between. */
    cnn_ctx_call_fn *capture_begin;
    cnn_capture_end_fn *capture_end; /* ends it even on error */
    cnn_replay_fn *replay;
    cnn_recording_free_fn *recording_free;
    /* Optional (NULL in the host engines, whose work is done when a call
     * returns). Timing on the engine's clock: mark(which) as queued work
     * reaches it, which in [0, CNN_TIMER_MARKS); elapsed waits for mark `to`
     * and gives the seconds from mark `from` to it. */
    cnn_timer_mark_fn *timer_mark;
    cnn_timer_elapsed_fn *timer_elapsed;

    /* The engine's fused ops, or NULL for none. */
    const cnn_fused_ops *fused;

    /* a model of several inputs: one input's values out of the packed
     * network input, in the layout the layers take (no backward) */
    cnn_input_slice_fn *input_slice;
    /* a network of several outputs: a sparse output's labels out of the
     * packed float targets (csrc/net/loss_parts.c) */
    cnn_labels_from_floats_fn *labels_from_floats;
    /* loss_forward_backward for the regression losses (d->kind from
     * CNN_LOSS_MSE on, CNN_LOSS_IS_REGRESSION): y (n, k) against targets
     * (n, k), labels unused. The per-sample loss is the mean over k of
     * csrc/regression_math.h's term, added to sums[0] as loss_forward_backward
     * does; sums[1] += the correct count of Keras's 'accuracy' for such a
     * loss (k == 1: [(y > 0.5) == t], its BinaryAccuracy; k > 1: [argmax y ==
     * argmax t], its CategoricalAccuracy); dy (n, k) or NULL the gradient
     * of the mean loss over scale_n samples. */
    cnn_loss_forward_backward_fn *regression_loss_forward_backward;
};

/* ------------------------------------------------------ the fused ops
 * Each entry may be NULL (the Net then runs the core ops it replaces) and,
 * but for softmax_loss_forward_backward, gives the bits of those ops run one
 * after the other. CNNCUDA_FUSE=0 turns
 * every fusion off; each has its own switch besides (csrc/switches.c). */
struct cnn_fused_ops {
    /* conv2d_forward_relu: conv2d_forward, then activation_forward(RELU)
     * into y: y = relu(conv + b), written in the pass that adds the bias.
     * pool_backward_relu: pool_backward of a pool whose input y is a ReLU's
     * output, then that ReLU's activation_backward: dx = (the pool's dx)
     * where y > 0, else 0. (Every engine has these two.) */
    cnn_conv2d_forward_fn *conv2d_forward_relu;
    cnn_pool_backward_relu_fn *pool_backward_relu;

    /* The cuda engine only; CNNCUDA_FUSE_DENSE=0 turns them off.
     * dense_forward_relu: dense_forward, then activation_forward(RELU) into
     * y: y = relu(x w + b), written once (the GEMM applies the ReLU after
     * the bias as it stores y).
     * activation_backward_bias: activation_backward (act RELU, SIGMOID,
     * TANH or SOFTMAX), then the column sums of dx into db: the bias
     * gradient of the dense layer before the activation (the db of its
     * dense_backward_filter, which the Net then calls with db NULL), summed
     * over the rows in order from 0 (as the cuda engine's
     * dense_backward_filter sums db), in the launch that writes dx. */
    cnn_dense_forward_fn *dense_forward_relu;
    cnn_activation_backward_bias_fn *activation_backward_bias;

    /* The cuda engine only: a convolution's data gradient and the backward
     * of the pooling layer whose output is the convolution's input, in one
     * call, the pool's output gradient never written. p: a max or average
     * pool whose windows do not overlap (p->ph <= p->sh, p->pw <= p->sw,
     * pads >= 0) with p->n, p->c, p->oh, p->ow equal to d->n, d->c, d->h,
     * d->w; y: NULL, or the pool's input when it is a ReLU's output whose
     * backward is run too (as pool_backward_relu); pool_y: NULL, or the
     * pool's output (the convolution's input), which with y and a max pool
     * the engine may test instead of y at the argmax (the same value
     * there; a quarter of the reads). The bits of
     * conv2d_backward_data into the pool's output gradient, then
     * pool_backward (or pool_backward_relu). ws: the convolution's, as
     * conv2d_backward_data. */
    cnn_conv2d_backward_data_pool_fn *conv2d_backward_data_pool;

    /* The cuda engine only: conv2d_forward (relu 0) or conv2d_forward_relu
     * (relu 1) of x with the column matrix that gather_batch_im2col (below)
     * left in ws (the engine reads that, not x), the call right after it for
     * the same batch. */
    cnn_conv2d_forward_col_fn *conv2d_forward_col;

    /* A network whose last layer is a softmax, with a sparse or categorical
     * cross-entropy from probabilities (d->from_logits 0), from the
     * softmax's input x (n, k): writes the softmax's output y (n, k), adds
     * to sums what loss_forward_backward would add for that y, and when dx
     * is not NULL writes the gradient of the mean loss over scale_n samples
     * with respect to x (the loss's backward and the softmax's in one: where
     * Keras's clip of q = y / sum(y) cuts the gradient, the same holds):
     * the gradient in one expression, so not the bits of the two apart. The
     * cuda engine only. */
    cnn_softmax_loss_forward_backward_fn *softmax_loss_forward_backward;

    /* The last dense layer of a training step, the softmax after it
     * (softmax = 1) and the loss, with their gradients, in one call. d: the
     * loss (sparse or categorical CE, from_logits == !softmax), d->k the
     * dense layer's units (at most CNN_HEAD_MAX_OUT). Writes z = x w + b
     * and, with softmax, p = softmax(z); adds the loss and correct count to
     * sums as loss_forward_backward does (for z as logits, or for p);
     * overwrites dw and db (may be NULL) with the dense layer's gradients;
     * and when dx is not NULL, dx = the gradient of the mean loss over
     * scale_n samples with respect to x, or with relu, with respect to the
     * input of the ReLU whose output x is (0 where x is not positive); and
     * when db_below is not NULL (dx too), db_below (in) = the column sums of
     * dx, summed over the rows in order from 0 (the bias gradient of a dense
     * layer whose output's gradient dx is: the bits of its
     * dense_backward_filter's db, which the Net then skips). ws:
     * CNN_HEAD_WS_BYTES bytes (the rows' losses and the loss gradient,
     * between its kernels). */
    cnn_dense_loss_head_fn *dense_loss_head;

    /* The cuda engine only, with conv2d_forward_col: gather_batch, except
     * that the images' rows may be left unwritten in dst_x: the column
     * matrix of convolution d over them (the network's first layer; d->n ==
     * count, its input x_row_bytes of floats per row) is written into d's
     * workspace ws instead, as d's conv2d_forward would make it, for the
     * conv2d_forward_col that follows for the same batch. */
    cnn_gather_batch_im2col_fn *gather_batch_im2col;
};

#endif
