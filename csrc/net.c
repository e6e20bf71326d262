/* net.c: a Sequential network on one backend.
 *
 * The Net owns every buffer for its life, sized once for max_batch: one flat
 * block of parameters, one of gradients, the optimizer's moments, a block of
 * non-trainable state (batchnorm moving statistics), every layer's output,
 * two ping-pong gradient buffers, the convolution workspace, and staging for
 * inputs, outputs and targets. Nothing is allocated per step.
 *
 * Activations are NCHW (images) or (N, F) inside; the Net converts the
 * user's NHWC input at the start of a forward and converts outputs and
 * weights back to Keras layouts at the edges.
 *
 * RNG streams under the Net's seed: layer i's kernel initializer uses stream
 * 2i, layer i's dropout stream 2i + 1 (keyed again by the training-forward
 * count), as docs/semantics.md says.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cnn.h"
#include "comm.h"
#include "switches.h"

#define NO_OFFSET SIZE_MAX

typedef struct layer {
    cnn_layer_spec spec;
    int in_rank, out_rank; /* 4 (c, h, w) or 2 (c features, h = w = 1) */
    int in_c, in_h, in_w;
    int out_c, out_h, out_w;
    size_t in_count, out_count; /* per sample */
    cnn_conv_desc conv;         /* .n set per call */
    cnn_pool_desc pool;
    cnn_bn_desc bn;
    size_t w_off, b_off;        /* in params and grads */
    size_t gamma_off, beta_off; /* in params and grads */
    size_t mean_off, var_off;   /* in state */
    float *y;                   /* output (max_batch, out_count) */
    void *ws;                   /* convolution: this layer's workspace */
    int32_t *argmax;            /* max pooling: (max_batch, out_count) */
    float *save_mean, *save_invstd; /* batchnorm: (c) */
    uint64_t dropout_key;
    /* flatten before a dense layer: a no-op whose y is its input's buffer
     * (not allocated); the dense layer reads the NCHW features as they are */
    int alias_in;
    /* dense after such a flatten of (rows_c, rows_hw) images, both > 1: its
     * kernel's rows are stored in NCHW feature order (row ch*rows_hw + s),
     * exchanged in Keras's NHWC order (row s*rows_c + ch); 0 otherwise */
    int rows_c, rows_hw;
    /* convolution after a pooling layer: its data gradient and the pool's
     * backward in one call (plan_pool_col) */
    int pool_col;
    /* pooling layer before a convolution: its forward also writes that
     * convolution's column matrix, from which the convolution's forward
     * starts (plan_pool_im2col) */
    int pool_im2col;
} layer;

/* One step of a plan (plan_steps): one call of the engine over layers
 * [layer, last] going forward (last >= layer) or backward (last <= layer). */
typedef enum step_kind {
    /* forward */
    STEP_CONV_FORWARD, STEP_CONV_FORWARD_RELU, STEP_CONV_FORWARD_COL,
    STEP_CONV_FORWARD_COL_RELU, STEP_POOL_FORWARD, STEP_POOL_FORWARD_IM2COL,
    STEP_FLATTEN_FORWARD, STEP_DENSE_FORWARD, STEP_DENSE_FORWARD_RELU,
    STEP_ACTIVATION_FORWARD, STEP_DROPOUT_FORWARD, STEP_BATCHNORM_FORWARD,
    /* a training step's loss, its gradient into grad_a */
    STEP_LOSS, STEP_SOFTMAX_LOSS, STEP_DENSE_LOSS_HEAD,
    /* backward */
    STEP_CONV_BACKWARD_FILTER, STEP_CONV_BACKWARD_DATA, STEP_CONV_BACKWARD_DATA_POOL,
    STEP_CONV_BACKWARD_DATA_POOL_RELU, STEP_POOL_BACKWARD, STEP_POOL_BACKWARD_RELU,
    STEP_FLATTEN_BACKWARD, STEP_DENSE_BACKWARD_FILTER, STEP_DENSE_BACKWARD_DATA,
    STEP_ACTIVATION_BACKWARD, STEP_ACTIVATION_BACKWARD_BIAS, STEP_DROPOUT_BACKWARD,
    STEP_BATCHNORM_BACKWARD,
} step_kind;

typedef struct step {
    step_kind kind;
    int layer, last;
    int with_db; /* a backward_filter writes the bias gradient */
    int swap;    /* backward: dy and dx change places after it */
    char name[48]; /* "conv2d_0.forward+relu" */
} step;

typedef struct step_plan {
    int n;
    step *steps; /* (2 * n_layers + 1), host memory */
} step_plan;

/* The plans a Net makes at creation (plan_steps). */
typedef enum plan_kind {
    PLAN_FORWARD,                /* every layer: predict, evaluate, forward */
    PLAN_TRAIN_FORWARD,          /* a training step's forward and loss */
    PLAN_TRAIN_FORWARD_GATHERED, /* the same after gather_batch (fit) */
    PLAN_TRAIN_BACKWARD,         /* a training step's backward */
    PLAN_BACKWARD,               /* cnn_net_backward, no input gradient */
    PLAN_BACKWARD_DX,            /* cnn_net_backward with the input gradient */
    PLAN_COUNT
} plan_kind;

/* What one run of a forward plan is given (run_forward). */
typedef struct run_args {
    int n;        /* samples */
    int training; /* a training forward (dropout on, batchnorm's batch statistics) */
    int counted;  /* the step's gather_batch moved the forward counter on */
    int scale_n;  /* the loss's gradient is that of the mean over scale_n samples */
    float *sums;  /* the loss's sums (2) */
} run_args;

struct cnn_net {
    const cnn_backend *be;
    cnn_ctx *ctx;
    int n_layers;
    layer *layers;
    int in_rank, in_h, in_w, in_c;
    size_t in_count, out_count;
    int max_batch;
    cnn_loss_desc loss;
    cnn_optimizer_desc opt;
    uint64_t seed;

    size_t n_params, n_state;
    float *params, *grads, *opt_m, *opt_v, *state;
    float *x_stage;  /* (max_batch, in_count), the user's layout */
    float *x;        /* (max_batch, in_count), NCHW; == x_stage for (N, F) */
    int transpose_in; /* the input's NHWC and NCHW differ (images of more than
                         one channel and pixel): x_stage is transposed into x */
    float *y_stage;  /* (max_batch, max of in/out count), Keras layout */
    float *grad_a, *grad_b; /* (max_batch, largest activation) */
    int32_t *labels; /* (max_batch) */
    float *targets;  /* (max_batch, k) */
    float *sums;     /* (2): loss sum, correct of one call */
    float *run_sums; /* (2): running sums of train_range, read by read_sums */

    /* resident training data (set_data) and an epoch's order (set_order) */
    long data_n, order_n;
    float *data_x;         /* (data_n, in_count), NCHW (the layout inside, so
                              that a step gathers straight into x) */
    int32_t *data_labels;  /* (data_n) for sparse losses */
    float *data_targets;   /* (data_n, k) otherwise */
    int32_t *order;        /* (order_n) indices into the data */
    /* validation data resident for a fit call (set_validation), and its
     * batches' loss sums (evaluate_validation) */
    long val_n;
    float *val_x;          /* (val_n, in_count), NCHW */
    int32_t *val_labels;   /* (val_n) for sparse losses */
    float *val_targets;    /* (val_n, k) otherwise */
    float *val_sums;       /* (2 per batch of max_batch) */

    long steps;          /* optimizer steps taken */
    long train_forwards; /* training forwards run: keys dropout */
    int last_n;          /* batch of the last training forward, 0 if none */
    /* (CNN_COUNTERS) the engine's copy of the counters, which a step reads
     * (cnn.h): steps and train_forwards above are the host's, kept equal */
    int64_t *counters;
    /* (CNN_HYPERS) the engine's copy of opt's hyperparameters, which a
     * step reads (cnn.h); cnn_net_set_optimizer changes both */
    float *hyper;
    /* the engine's CNN_COUNT_POSITION as the host knows it, so that a range
     * moves it with advance_counters (a launch) rather than an upload (a
     * copy from host memory, which may wait for the engine); -1: unknown */
    long position;

    /* GPU engines: one training step of train_range recorded (a CUDA
     * graph) for batch `recorded_batch`, replayed for every full batch */
    void *recording;
    int recorded_batch;
    int timed; /* a train_range was timed: timer_elapsed has a value */

    int n_weights;
    cnn_weight_info *weights;

    /* data parallel (cnn_net_set_comm): this net is replica comm->rank of
     * comm->world; NULL when alone. row0 is the number, in the whole batch,
     * of the first row this net holds (dropout numbers its masks by it). */
    struct cnn_comm *comm;
    int64_t row0;

    /* the fusion switches, read once, at creation (plan_switches); each
     * planning rule below says what its switch turns on:
     *   fuse: the ReLU fusions (fusable_relu);
     *   fuse_dense: a ReLU after a dense layer in its GEMM (dense_relu_fused),
     *     a dense layer's bias gradient in the backward of the activation
     *     after it (dense_bias_in_activation) or in the training head above
     *     it (head_db_below); the same bits either way;
     *   fuse_softmax: the last layer's softmax inside the loss
     *     (fused_softmax_loss); not the same bits as apart: the gradient is
     *     formed in one expression;
     *   fuse_flatten: a Flatten before a Dense layer costs nothing
     *     (layer.alias_in); not the same bits as a transposing Flatten: the
     *     dense product sums its inputs in NCHW order;
     *   fuse_head: dense_loss_head (plan_head);
     *   fuse_pool_col2im: conv2d_backward_data_pool (plan_pool_col);
     *   fuse_gather_im2col: gather_batch_im2col (gather_im2col below). */
    cnn_switches sw;
    /* CNNCUDA_FUSE_POOL_IM2COL: pool_forward_im2col (plan_pool_im2col) */
    int fuse_pool_im2col;

    /* dense_loss_head where the engine has it (plan_head): the index of the
     * last dense layer, or -1; whether a softmax layer follows it; whether
     * the layer before it is a ReLU whose backward the head runs; its
     * workspace. CNNCUDA_FUSE_HEAD=0 turns it off (CNNCUDA_FUSE=0 only
     * leaves the ReLU's backward to its own layer: the head computes the
     * same bits either way, so the ReLU fusions compare bit for bit). */
    int head, head_softmax, head_relu;
    /* the layer below the head's (and its ReLU's) is a dense layer with a
     * bias whose bias gradient the head sums (fuse_dense) */
    int head_db_below;
    void *head_ws;

    /* gather_batch_im2col and conv2d_forward_col where the engine has them
     * and the first layer is a convolution (set in cnn_net_create): a step of
     * train_range gathers its batch straight into that convolution's column
     * matrix. Under sw.fuse_gather_im2col (1-3% faster at batch 32 on an
     * H100); the same bits */
    int gather_im2col;

    step_plan plans[PLAN_COUNT]; /* plan_steps */

    int counting;   /* net_alloc only adds up bytes in planned (cnn_net_create) */
    size_t planned;
};

/* ------------------------------------------------------------ shapes */

/* In 64 bits: a kernel or stride near INT_MAX must not overflow. */
static int out_size(int in, int k, int s, int same, int *pad_before)
{
    if (same) {
        int64_t out = ((int64_t)in + s - 1) / s;
        int64_t total = (out - 1) * s + k - in;
        if (total < 0) total = 0;
        *pad_before = (int)(total / 2);
        return (int)out;
    }
    *pad_before = 0;
    return in < k ? 0 : (in - k) / s + 1;
}

/* Every weight, and a convolution's column height c*kh*kw, must fit the
 * kernels' int sizes. Counted in double: the product of three ints can
 * overflow 64 bits. */
#define CNN_MAX_COUNT ((double)INT32_MAX)

static const char *kind_name(int kind)
{
    static const char *names[] = {"conv2d",     "maxpool", "avgpool",  "flatten",
                                  "dense",      "activation", "dropout", "batchnorm"};
    return (kind >= 0 && kind <= CNN_LAYER_BATCHNORM) ? names[kind] : "unknown";
}

/* Works out layer i's output shape and parameter counts from its input. */
static cnn_status plan_layer(cnn_net *net, int i, size_t *n_params, size_t *n_state)
{
    layer *L = &net->layers[i];
    const cnn_layer_spec *s = &L->spec;
    const char *name = kind_name(s->kind);
    L->out_rank = L->in_rank;
    L->out_c = L->in_c;
    L->out_h = L->in_h;
    L->out_w = L->in_w;
    L->w_off = L->b_off = L->gamma_off = L->beta_off = L->mean_off = L->var_off = NO_OFFSET;

    switch (s->kind) {
    case CNN_LAYER_CONV2D:
    case CNN_LAYER_MAXPOOL:
    case CNN_LAYER_AVGPOOL: {
        if (L->in_rank != 4)
            return cnn_set_error(CNN_ERR_VALUE,
                                 "layer %d (%s) expects an image input (batch, height, width, "
                                 "channels), got a (batch, %d) input",
                                 i, name, L->in_c);
        if (s->kh < 1 || s->kw < 1 || s->sh < 1 || s->sw < 1)
            return cnn_set_error(CNN_ERR_VALUE,
                                 "layer %d (%s): kernel size and strides must be >= 1, got "
                                 "kernel %dx%d strides %dx%d",
                                 i, name, s->kh, s->kw, s->sh, s->sw);
        int pt, pl;
        int oh = out_size(L->in_h, s->kh, s->sh, s->same, &pt);
        int ow = out_size(L->in_w, s->kw, s->sw, s->same, &pl);
        if (oh < 1 || ow < 1)
            return cnn_set_error(CNN_ERR_VALUE,
                                 "layer %d (%s): kernel %dx%d does not fit the %dx%d input "
                                 "with padding '%s'",
                                 i, name, s->kh, s->kw, L->in_h, L->in_w,
                                 s->same ? "same" : "valid");
        L->out_h = oh;
        L->out_w = ow;
        if (s->kind == CNN_LAYER_CONV2D) {
            if (s->units < 1)
                return cnn_set_error(CNN_ERR_VALUE, "layer %d (conv2d): filters must be >= 1, got %d",
                                     i, s->units);
            if ((double)s->units * L->in_c * s->kh * s->kw > CNN_MAX_COUNT)
                return cnn_set_error(CNN_ERR_VALUE,
                                     "layer %d (conv2d): a %dx%d kernel over %d channels with %d "
                                     "filters has %.0f weights, more than %d",
                                     i, s->kh, s->kw, L->in_c, s->units,
                                     (double)s->units * L->in_c * s->kh * s->kw, INT32_MAX);
            L->out_c = s->units;
            L->conv = (cnn_conv_desc){.c = L->in_c, .h = L->in_h, .w = L->in_w, .f = s->units,
                                      .kh = s->kh, .kw = s->kw, .sh = s->sh, .sw = s->sw,
                                      .pad_top = pt, .pad_left = pl, .oh = oh, .ow = ow};
            L->w_off = *n_params;
            *n_params += (size_t)s->units * L->in_c * s->kh * s->kw;
            if (s->use_bias) {
                L->b_off = *n_params;
                *n_params += (size_t)s->units;
            }
        } else {
            L->pool = (cnn_pool_desc){.mode = s->kind == CNN_LAYER_MAXPOOL ? CNN_POOL_MAX
                                                                          : CNN_POOL_AVG,
                                      .c = L->in_c, .h = L->in_h, .w = L->in_w, .ph = s->kh,
                                      .pw = s->kw, .sh = s->sh, .sw = s->sw, .pad_top = pt,
                                      .pad_left = pl, .oh = oh, .ow = ow};
        }
        break;
    }
    case CNN_LAYER_FLATTEN:
        L->out_rank = 2;
        L->out_c = L->in_c * L->in_h * L->in_w;
        L->out_h = L->out_w = 1;
        break;
    case CNN_LAYER_DENSE:
        if (L->in_rank != 2)
            return cnn_set_error(CNN_ERR_VALUE,
                                 "layer %d (dense) expects a (batch, features) input, got an "
                                 "image (batch, %d, %d, %d): add a Flatten layer before it",
                                 i, L->in_h, L->in_w, L->in_c);
        if (s->units < 1)
            return cnn_set_error(CNN_ERR_VALUE, "layer %d (dense): units must be >= 1, got %d", i,
                                 s->units);
        if ((double)L->in_c * s->units > CNN_MAX_COUNT)
            return cnn_set_error(CNN_ERR_VALUE,
                                 "layer %d (dense): %d inputs times %d units is %.0f weights, "
                                 "more than %d",
                                 i, L->in_c, s->units, (double)L->in_c * s->units, INT32_MAX);
        L->out_c = s->units;
        L->w_off = *n_params;
        *n_params += (size_t)L->in_c * s->units;
        if (s->use_bias) {
            L->b_off = *n_params;
            *n_params += (size_t)s->units;
        }
        break;
    case CNN_LAYER_ACTIVATION:
        if (s->activation < CNN_ACT_LINEAR || s->activation > CNN_ACT_SOFTMAX)
            return cnn_set_error(CNN_ERR_VALUE, "layer %d (activation): unknown activation %d", i,
                                 s->activation);
        if (s->activation == CNN_ACT_SOFTMAX && L->in_rank != 2)
            return cnn_set_error(CNN_ERR_VALUE,
                                 "layer %d (activation): softmax needs a (batch, features) "
                                 "input, got an image: add a Flatten layer before it",
                                 i);
        break;
    case CNN_LAYER_DROPOUT:
        if (!(s->rate >= 0.0f && s->rate < 1.0f))
            return cnn_set_error(CNN_ERR_VALUE,
                                 "layer %d (dropout): rate must be in [0, 1), got %g", i,
                                 (double)s->rate);
        L->dropout_key = cnn_rng_key(net->seed, 2 * (uint64_t)i + 1);
        break;
    case CNN_LAYER_BATCHNORM:
        if (!(s->epsilon > 0.0f) || !(s->momentum >= 0.0f && s->momentum <= 1.0f))
            return cnn_set_error(CNN_ERR_VALUE,
                                 "layer %d (batchnorm): momentum must be in [0, 1] and epsilon "
                                 "> 0, got momentum %g epsilon %g",
                                 i, (double)s->momentum, (double)s->epsilon);
        L->bn = (cnn_bn_desc){.c = L->in_c, .spatial = L->in_h * L->in_w,
                              .momentum = s->momentum, .epsilon = s->epsilon};
        L->gamma_off = *n_params;
        L->beta_off = *n_params + L->in_c;
        *n_params += 2 * (size_t)L->in_c;
        L->mean_off = *n_state;
        L->var_off = *n_state + L->in_c;
        *n_state += 2 * (size_t)L->in_c;
        break;
    default:
        return cnn_set_error(CNN_ERR_VALUE, "layer %d: unknown layer kind %d", i, s->kind);
    }
    L->in_count = (size_t)L->in_c * L->in_h * L->in_w;
    L->out_count = (size_t)L->out_c * L->out_h * L->out_w;
    return CNN_OK;
}

/* ----------------------------------------------------------- weights */

static void add_weight(cnn_net *net, int layer_index, int role, int trainable, int rank,
                       int d0, int d1, int d2, int d3)
{
    cnn_weight_info *w = &net->weights[net->n_weights++];
    int dims[4] = {d0, d1, d2, d3};
    w->layer = layer_index;
    w->role = role;
    w->trainable = trainable;
    w->rank = rank;
    w->count = 1;
    for (int k = 0; k < 4; k++) {
        w->dims[k] = k < rank ? dims[k] : 0;
        if (k < rank) w->count *= (size_t)dims[k];
    }
}

static void list_weights(cnn_net *net)
{
    for (int i = 0; i < net->n_layers; i++) {
        const layer *L = &net->layers[i];
        const cnn_layer_spec *s = &L->spec;
        if (s->kind == CNN_LAYER_CONV2D) {
            add_weight(net, i, 0, 1, 4, s->kh, s->kw, L->in_c, s->units);
            if (s->use_bias) add_weight(net, i, 1, 1, 1, s->units, 0, 0, 0);
        } else if (s->kind == CNN_LAYER_DENSE) {
            add_weight(net, i, 0, 1, 2, L->in_c, s->units, 0, 0);
            if (s->use_bias) add_weight(net, i, 1, 1, 1, s->units, 0, 0, 0);
        } else if (s->kind == CNN_LAYER_BATCHNORM) {
            for (int role = 2; role <= 5; role++)
                add_weight(net, i, role, role <= 3, 1, L->in_c, 0, 0, 0);
        }
    }
}

/* How a weight is stored against Keras's layout. */
enum { LAYOUT_KERAS = 0, LAYOUT_CONV = 1 /* (F, C, KH, KW) for (KH, KW, C, F) */,
       LAYOUT_NCHW_ROWS = 2 /* a dense kernel's rows in NCHW feature order (layer.rows_c) */ };

/* Where weight i lives: the block, its offset, and its layout. */
static float *weight_place(cnn_net *net, float *trainable_block, int i, int *layout)
{
    const cnn_weight_info *w = &net->weights[i];
    const layer *L = &net->layers[w->layer];
    *layout = w->role != 0 ? LAYOUT_KERAS
              : L->spec.kind == CNN_LAYER_CONV2D ? LAYOUT_CONV
              : L->rows_c ? LAYOUT_NCHW_ROWS : LAYOUT_KERAS;
    switch (w->role) {
    case 0: return trainable_block + L->w_off;
    case 1: return trainable_block + L->b_off;
    case 2: return trainable_block + L->gamma_off;
    case 3: return trainable_block + L->beta_off;
    case 4: return net->state + L->mean_off;
    default: return net->state + L->var_off;
    }
}

/* (KH, KW, C, F) <-> (F, C, KH, KW) on the host. */
static void keras_to_fckk(const float *k, float *o, int kh, int kw, int c, int f)
{
    for (int a = 0; a < kh; a++)
        for (int b = 0; b < kw; b++)
            for (int ch = 0; ch < c; ch++)
                for (int fi = 0; fi < f; fi++)
                    o[(((size_t)fi * c + ch) * kh + a) * kw + b] =
                        k[(((size_t)a * kw + b) * c + ch) * f + fi];
}

static void fckk_to_keras(const float *o, float *k, int kh, int kw, int c, int f)
{
    for (int a = 0; a < kh; a++)
        for (int b = 0; b < kw; b++)
            for (int ch = 0; ch < c; ch++)
                for (int fi = 0; fi < f; fi++)
                    k[(((size_t)a * kw + b) * c + ch) * f + fi] =
                        o[(((size_t)fi * c + ch) * kh + a) * kw + b];
}

/* A dense kernel (c*hw, out) after a Flatten of (c, hw) images: Keras's
 * row s*c + ch <-> our row ch*hw + s (to_keras 0: Keras's k to our o). */
static void permute_rows(const float *from, float *to, int c, int hw, int out, int to_keras)
{
    const size_t row = (size_t)out * sizeof(float);
    for (int s = 0; s < hw; s++)
        for (int ch = 0; ch < c; ch++) {
            const size_t keras = ((size_t)s * c + ch) * out, ours = ((size_t)ch * hw + s) * out;
            memcpy(to + (to_keras ? keras : ours), from + (to_keras ? ours : keras), row);
        }
}

static cnn_status copy_weight_out(cnn_net *net, float *block, int i, float *host)
{
    int layout;
    const cnn_weight_info *w = &net->weights[i];
    float *src = weight_place(net, block, i, &layout);
    if (layout == LAYOUT_KERAS)
        return net->be->download(net->ctx, host, src, w->count * sizeof(float));
    float *tmp = malloc(w->count * sizeof(float));
    if (!tmp) return cnn_set_error(CNN_ERR_MEMORY, "out of host memory reading a weight");
    cnn_status st = net->be->download(net->ctx, tmp, src, w->count * sizeof(float));
    if (st == CNN_OK && layout == LAYOUT_CONV)
        fckk_to_keras(tmp, host, w->dims[0], w->dims[1], w->dims[2], w->dims[3]);
    if (st == CNN_OK && layout == LAYOUT_NCHW_ROWS) {
        const layer *L = &net->layers[w->layer];
        permute_rows(tmp, host, L->rows_c, L->rows_hw, w->dims[1], 1);
    }
    free(tmp);
    return st;
}

int cnn_net_weight_count(const cnn_net *net) { return net->n_weights; }

const cnn_weight_info *cnn_net_weight(const cnn_net *net, int i)
{
    return (i >= 0 && i < net->n_weights) ? &net->weights[i] : NULL;
}

static cnn_status check_weight_index(const cnn_net *net, int i)
{
    if (i < 0 || i >= net->n_weights)
        return cnn_set_error(CNN_ERR_VALUE, "weight index must be in [0, %d), got %d",
                             net->n_weights, i);
    return CNN_OK;
}

cnn_status cnn_net_get_weight(cnn_net *net, int i, float *host)
{
    CNN_TRY(check_weight_index(net, i));
    return copy_weight_out(net, net->params, i, host);
}

cnn_status cnn_net_get_gradient(cnn_net *net, int i, float *host)
{
    CNN_TRY(check_weight_index(net, i));
    if (!net->weights[i].trainable)
        return cnn_set_error(CNN_ERR_VALUE, "weight %d is not trainable and has no gradient", i);
    return copy_weight_out(net, net->grads, i, host);
}

static cnn_status copy_weight_in(cnn_net *net, float *block, int i, const float *host)
{
    int layout;
    const cnn_weight_info *w = &net->weights[i];
    float *dst = weight_place(net, block, i, &layout);
    if (layout == LAYOUT_KERAS)
        return net->be->upload(net->ctx, dst, host, w->count * sizeof(float));
    float *tmp = malloc(w->count * sizeof(float));
    if (!tmp) return cnn_set_error(CNN_ERR_MEMORY, "out of host memory writing a weight");
    if (layout == LAYOUT_CONV) {
        keras_to_fckk(host, tmp, w->dims[0], w->dims[1], w->dims[2], w->dims[3]);
    } else {
        const layer *L = &net->layers[w->layer];
        permute_rows(host, tmp, L->rows_c, L->rows_hw, w->dims[1], 0);
    }
    cnn_status st = net->be->upload(net->ctx, dst, tmp, w->count * sizeof(float));
    free(tmp);
    return st;
}

cnn_status cnn_net_set_weight(cnn_net *net, int i, const float *host)
{
    CNN_TRY(check_weight_index(net, i));
    return copy_weight_in(net, net->params, i, host);
}

int cnn_net_optimizer_slots(const cnn_net *net)
{
    if (net->opt.kind == CNN_OPT_ADAM) return 2;
    return net->opt_m ? 1 : 0;
}

/* The optimizer block of slot `slot` for trainable weight i, or NULL with
 * the error recorded. */
static float *slot_block(cnn_net *net, int i, int slot)
{
    if (check_weight_index(net, i) != CNN_OK) return NULL;
    if (!net->weights[i].trainable) {
        cnn_set_error(CNN_ERR_VALUE, "weight %d is not trainable and has no optimizer state", i);
        return NULL;
    }
    if (slot < 0 || slot >= cnn_net_optimizer_slots(net)) {
        cnn_set_error(CNN_ERR_VALUE, "optimizer slot must be in [0, %d), got %d",
                      cnn_net_optimizer_slots(net), slot);
        return NULL;
    }
    return slot == 0 ? net->opt_m : net->opt_v;
}

cnn_status cnn_net_get_slot(cnn_net *net, int i, int slot, float *host)
{
    float *block = slot_block(net, i, slot);
    return block ? copy_weight_out(net, block, i, host) : CNN_ERR_VALUE;
}

cnn_status cnn_net_set_slot(cnn_net *net, int i, int slot, const float *host)
{
    float *block = slot_block(net, i, slot);
    return block ? copy_weight_in(net, block, i, host) : CNN_ERR_VALUE;
}

long cnn_net_train_forward_count(const cnn_net *net) { return net->train_forwards; }

cnn_status cnn_net_set_counters(cnn_net *net, long steps, long train_forwards)
{
    if (steps < 0 || train_forwards < 0)
        return cnn_set_error(CNN_ERR_VALUE, "counters must be >= 0, got steps %ld, training "
                             "forwards %ld", steps, train_forwards);
    int64_t c[CNN_COUNTERS] = {0};
    c[CNN_COUNT_FORWARDS] = train_forwards;
    c[CNN_COUNT_MASK] = train_forwards > 0 ? train_forwards - 1 : 0;
    c[CNN_COUNT_STEPS] = steps;
    CNN_TRY(net->be->upload(net->ctx, net->counters, c, sizeof c));
    net->position = 0;
    net->steps = steps;
    net->train_forwards = train_forwards;
    net->last_n = 0; /* the mask of a pending backward is no longer known */
    return CNN_OK;
}

static cnn_status validate_optimizer(const cnn_optimizer_desc *o);

/* net->opt's hyperparameters to the engine's copy that steps read */
static cnn_status upload_hyper(cnn_net *net)
{
    float h[CNN_HYPERS] = {0};
    h[CNN_HYPER_LR] = net->opt.lr;
    h[CNN_HYPER_BETA_1] = net->opt.beta_1;
    h[CNN_HYPER_BETA_2] = net->opt.beta_2;
    h[CNN_HYPER_EPSILON] = net->opt.epsilon;
    h[CNN_HYPER_MOMENTUM] = net->opt.momentum;
    h[CNN_HYPER_NESTEROV] = net->opt.nesterov ? 1.0f : 0.0f;
    return net->be->upload(net->ctx, net->hyper, h, sizeof h);
}

cnn_status cnn_net_set_optimizer(cnn_net *net, const cnn_optimizer_desc *o)
{
    static const char *const kinds[] = {"adam", "sgd"};
    if (o->kind != net->opt.kind)
        return cnn_set_error(CNN_ERR_VALUE, "optimizer: this network was built for %s, got %s "
                             "(a new kind of optimizer needs a new network)",
                             kinds[net->opt.kind],
                             o->kind == CNN_OPT_ADAM || o->kind == CNN_OPT_SGD ? kinds[o->kind]
                                                                               : "an unknown kind");
    CNN_TRY(validate_optimizer(o));
    if (o->kind == CNN_OPT_SGD && o->momentum != 0.0f && !net->opt_m)
        return cnn_set_error(CNN_ERR_VALUE, "sgd momentum: this network was built without "
                             "momentum (it keeps no velocity), got momentum %g",
                             (double)o->momentum);
    cnn_optimizer_desc old = net->opt;
    net->opt = *o;
    cnn_status st = upload_hyper(net);
    if (st != CNN_OK) net->opt = old;
    return st;
}

/* Keras defaults: glorot_uniform kernels, zero biases, gamma 1, beta 0,
 * moving mean 0, moving variance 1. */
static cnn_status initialize_weights(cnn_net *net)
{
    size_t largest = 0;
    for (int i = 0; i < net->n_weights; i++)
        if (net->weights[i].count > largest) largest = net->weights[i].count;
    float *host = malloc((largest ? largest : 1) * sizeof(float));
    if (!host) return cnn_set_error(CNN_ERR_MEMORY, "out of host memory initializing weights");
    cnn_status st = CNN_OK;
    for (int i = 0; i < net->n_weights && st == CNN_OK; i++) {
        const cnn_weight_info *w = &net->weights[i];
        if (w->role == 0) {
            const layer *L = &net->layers[w->layer];
            size_t fan_in, fan_out;
            if (L->spec.kind == CNN_LAYER_CONV2D) {
                fan_in = (size_t)w->dims[0] * w->dims[1] * w->dims[2];
                fan_out = (size_t)w->dims[0] * w->dims[1] * w->dims[3];
            } else {
                fan_in = (size_t)w->dims[0];
                fan_out = (size_t)w->dims[1];
            }
            float limit = sqrtf(6.0f / (float)(fan_in + fan_out));
            uint64_t key = cnn_rng_key(net->seed, 2 * (uint64_t)w->layer);
            for (size_t j = 0; j < w->count; j++)
                host[j] = (2.0f * cnn_uniform(key, j) - 1.0f) * limit;
        } else {
            float value = (w->role == 2 || w->role == 5) ? 1.0f : 0.0f;
            for (size_t j = 0; j < w->count; j++) host[j] = value;
        }
        st = cnn_net_set_weight(net, i, host);
    }
    free(host);
    return st;
}

/* ------------------------------------------------------- create, destroy */

static cnn_status net_alloc(cnn_net *net, void *pp, size_t bytes)
{
    void **p = pp;
    if (net->counting) {
        size_t add = bytes ? bytes : 4;
        net->planned = add > SIZE_MAX - net->planned ? SIZE_MAX : net->planned + add;
        return CNN_OK;
    }
    CNN_TRY(net->be->alloc(net->ctx, p, bytes ? bytes : 4));
    return net->be->zero(net->ctx, *p, bytes ? bytes : 4);
}

void cnn_net_destroy(cnn_net *net)
{
    if (!net) return;
    if (net->ctx) {
        const cnn_backend *be = net->be;
        cnn_ctx *ctx = net->ctx;
        if (net->recording) be->recording_free(ctx, net->recording);
        for (int i = 0; net->layers && i < net->n_layers; i++) {
            layer *L = &net->layers[i];
            if (L->y && !L->alias_in) be->free(ctx, L->y);
            if (L->ws) be->free(ctx, L->ws);
            if (L->argmax) be->free(ctx, L->argmax);
            if (L->save_mean) be->free(ctx, L->save_mean);
            if (L->save_invstd) be->free(ctx, L->save_invstd);
        }
        void *blocks[] = {net->params, net->grads,  net->opt_m,  net->opt_v,   net->state,
                          net->x_stage, net->y_stage, net->grad_a, net->grad_b,
                          net->labels, net->targets, net->sums, net->run_sums,
                          net->counters, net->data_x, net->data_labels, net->data_targets, net->order,
                          net->val_x, net->val_labels, net->val_targets, net->val_sums,
                          net->head_ws};
        for (size_t k = 0; k < sizeof blocks / sizeof blocks[0]; k++)
            if (blocks[k]) be->free(ctx, blocks[k]);
        if (net->x && net->x != net->x_stage) be->free(ctx, net->x);
        if (net->hyper) be->free(ctx, net->hyper);
        be->ctx_destroy(ctx);
    }
    for (int k = 0; k < PLAN_COUNT; k++) free(net->plans[k].steps);
    free(net->layers);
    free(net->weights);
    free(net);
}

static void plan_head(cnn_net *net);
static void plan_pool_col(cnn_net *net);
static void plan_pool_im2col(cnn_net *net);
static cnn_status plan_steps(cnn_net *net);

static cnn_status validate_spec(const cnn_net_spec *spec)
{
    if (spec->max_batch < 1)
        return cnn_set_error(CNN_ERR_VALUE, "max_batch must be >= 1, got %d", spec->max_batch);
    if (spec->n_layers < 1 || !spec->layers)
        return cnn_set_error(CNN_ERR_VALUE, "a network needs at least one layer, got %d",
                             spec->n_layers);
    if (spec->in_c < 1 || spec->in_h < 0 || spec->in_w < 0 || (spec->in_h == 0) != (spec->in_w == 0))
        return cnn_set_error(CNN_ERR_VALUE,
                             "input shape must be (height, width, channels) or (features,) "
                             "with every size >= 1, got (%d, %d, %d)",
                             spec->in_h, spec->in_w, spec->in_c);
    const cnn_loss_desc *l = &spec->loss;
    if (l->kind < CNN_LOSS_SPARSE_CE || l->kind > CNN_LOSS_BINARY_CE)
        return cnn_set_error(CNN_ERR_VALUE, "unknown loss kind %d", l->kind);
    return validate_optimizer(&spec->optimizer);
}

static cnn_status validate_optimizer(const cnn_optimizer_desc *o)
{
    if (o->kind != CNN_OPT_ADAM && o->kind != CNN_OPT_SGD)
        return cnn_set_error(CNN_ERR_VALUE, "unknown optimizer kind %d", o->kind);
    if (!(o->lr >= 0.0f) || !isfinite(o->lr))
        return cnn_set_error(CNN_ERR_VALUE, "learning_rate must be a finite number >= 0, got %g",
                             (double)o->lr);
    if (o->kind == CNN_OPT_ADAM &&
        !(o->beta_1 >= 0.0f && o->beta_1 < 1.0f && o->beta_2 >= 0.0f && o->beta_2 < 1.0f &&
          o->epsilon >= 0.0f))
        return cnn_set_error(CNN_ERR_VALUE,
                             "adam needs beta_1 and beta_2 in [0, 1) and epsilon >= 0, got "
                             "beta_1 %g beta_2 %g epsilon %g",
                             (double)o->beta_1, (double)o->beta_2, (double)o->epsilon);
    if (o->kind == CNN_OPT_SGD && !(o->momentum >= 0.0f && o->momentum <= 1.0f))
        return cnn_set_error(CNN_ERR_VALUE, "sgd momentum must be in [0, 1], got %g",
                             (double)o->momentum);
    return CNN_OK;
}

/* Every buffer of the net, once; while net->counting, only adds up their
 * bytes in net->planned. */
static cnn_status alloc_buffers(cnn_net *net, size_t largest)
{
    cnn_status st;
    size_t mb = (size_t)net->max_batch;
    const size_t F = sizeof(float);
#define ALLOC(ptr, bytes) \
    if ((st = net_alloc(net, &(ptr), (bytes))) != CNN_OK) return st
    ALLOC(net->params, net->n_params * F);
    ALLOC(net->grads, net->n_params * F);
    if (net->opt.kind == CNN_OPT_ADAM) {
        ALLOC(net->opt_m, net->n_params * F);
        ALLOC(net->opt_v, net->n_params * F);
    } else if (net->opt.momentum > 0.0f) {
        ALLOC(net->opt_m, net->n_params * F);
    }
    ALLOC(net->state, net->n_state * F);
    ALLOC(net->x_stage, mb * net->in_count * F);
    if (net->transpose_in) {
        ALLOC(net->x, mb * net->in_count * F);
    } else {
        net->x = net->x_stage; /* the same bytes in either layout */
    }
    ALLOC(net->y_stage, mb * largest * F);
    ALLOC(net->grad_a, mb * largest * F);
    ALLOC(net->grad_b, mb * largest * F);
    ALLOC(net->labels, mb * sizeof(int32_t));
    ALLOC(net->targets, mb * (size_t)net->loss.k * F);
    ALLOC(net->sums, 2 * F);
    ALLOC(net->run_sums, 2 * F);
    ALLOC(net->counters, CNN_COUNTERS * sizeof(int64_t));
    ALLOC(net->hyper, CNN_HYPERS * F);
    if (net->head >= 0) ALLOC(net->head_ws, CNN_HEAD_WS_BYTES(mb, net->loss.k));
    for (int i = 0; i < net->n_layers; i++) {
        layer *L = &net->layers[i];
        if (L->alias_in) {
            L->y = i ? net->layers[i - 1].y : net->x; /* NULL while counting */
        } else {
            ALLOC(L->y, mb * L->out_count * F);
        }
        if (L->spec.kind == CNN_LAYER_CONV2D) {
            cnn_conv_desc d = L->conv;
            d.n = net->max_batch;
            ALLOC(L->ws, net->be->conv2d_workspace(&d));
        }
        if (L->spec.kind == CNN_LAYER_MAXPOOL) ALLOC(L->argmax, mb * L->out_count * sizeof(int32_t));
        if (L->spec.kind == CNN_LAYER_BATCHNORM) {
            ALLOC(L->save_mean, (size_t)L->in_c * F);
            ALLOC(L->save_invstd, (size_t)L->in_c * F);
        }
    }
#undef ALLOC
    return CNN_OK;
}

/* The machine's physical memory in bytes when `be` keeps its buffers in
 * host memory (cpu, omp), else 0 (a GPU engine's cudaMalloc fails cleanly). */
static size_t host_memory_bytes(const cnn_backend *be)
{
    if (strcmp(be->name, "cpu") != 0 && strcmp(be->name, "omp") != 0) return 0;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
}

/* A fusion switch read from the environment at creation: on unless the
 * variable is "0". */
static int switch_on(const char *name)
{
    const char *v = getenv(name);
    return !(v && strcmp(v, "0") == 0);
}

/* The fusion switches of a Net being made, the one place the planning
 * rules' switches are read (CNNCUDA_GRAPHS, which the recording of a step
 * reads, and the engines' own are not planning switches). Every fusion is
 * on unless its variable is "0"; CNNCUDA_FUSE=0 also turns the dense
 * fusions off. CNNCUDA_FUSE_POOL_IM2COL, off unless "1", is no member of
 * cnn_switches: *pool_im2col. */
static void plan_switches(cnn_switches *sw, int *pool_im2col)
{
    *sw = (cnn_switches){
        .fuse = switch_on("CNNCUDA_FUSE"),
        .fuse_softmax = switch_on("CNNCUDA_FUSE_SOFTMAX"),
        .fuse_flatten = switch_on("CNNCUDA_FUSE_FLATTEN"),
        .fuse_head = switch_on("CNNCUDA_FUSE_HEAD"),
        .fuse_pool_col2im = switch_on("CNNCUDA_FUSE_POOL_COL2IM"),
        .fuse_gather_im2col = switch_on("CNNCUDA_FUSE_GATHER_IM2COL"),
    };
    sw->fuse_dense = sw->fuse && switch_on("CNNCUDA_FUSE_DENSE");
    const char *v = getenv("CNNCUDA_FUSE_POOL_IM2COL");
    *pool_im2col = v && strcmp(v, "1") == 0;
}

cnn_status cnn_net_create(const cnn_backend *backend, int num_threads, const cnn_net_spec *spec,
                          cnn_net **out)
{
    *out = NULL;
    CNN_TRY(validate_spec(spec));
    cnn_net *net = calloc(1, sizeof *net);
    if (!net) return cnn_set_error(CNN_ERR_MEMORY, "out of host memory creating a network");
    cnn_status st = CNN_OK;
    net->be = backend;
    plan_switches(&net->sw, &net->fuse_pool_im2col);
    net->n_layers = spec->n_layers;
    net->max_batch = spec->max_batch;
    net->loss = spec->loss;
    net->opt = spec->optimizer;
    net->seed = spec->seed;
    net->in_rank = spec->in_h ? 4 : 2;
    net->in_h = spec->in_h ? spec->in_h : 1;
    net->in_w = spec->in_w ? spec->in_w : 1;
    net->in_c = spec->in_c;
    if ((double)spec->max_batch * net->in_h * net->in_w * net->in_c > CNN_MAX_COUNT) {
        st = cnn_set_error(CNN_ERR_VALUE,
                           "input: max_batch %d times %.0f values per sample is too large",
                           spec->max_batch, (double)net->in_h * net->in_w * net->in_c);
        goto fail;
    }
    net->in_count = (size_t)net->in_h * net->in_w * net->in_c;
    net->transpose_in = net->in_rank == 4 && net->in_c > 1 && (size_t)net->in_h * net->in_w > 1;
    net->layers = calloc((size_t)spec->n_layers, sizeof *net->layers);
    net->weights = calloc(4 * (size_t)spec->n_layers, sizeof *net->weights);
    if (!net->layers || !net->weights) {
        st = cnn_set_error(CNN_ERR_MEMORY, "out of host memory creating a network");
        goto fail;
    }

    /* shapes, parameter offsets, the largest activation and workspace */
    size_t n_params = 0, n_state = 0, largest = net->in_count;
    for (int i = 0; i < net->n_layers; i++) {
        layer *L = &net->layers[i];
        L->spec = spec->layers[i];
        const layer *prev = i ? &net->layers[i - 1] : NULL;
        L->in_rank = prev ? prev->out_rank : net->in_rank;
        L->in_c = prev ? prev->out_c : net->in_c;
        L->in_h = prev ? prev->out_h : net->in_h;
        L->in_w = prev ? prev->out_w : net->in_w;
        if ((st = plan_layer(net, i, &n_params, &n_state)) != CNN_OK) goto fail;
        if (L->out_count > largest) largest = L->out_count;
        if ((size_t)spec->max_batch * L->out_count > (size_t)INT32_MAX) {
            st = cnn_set_error(CNN_ERR_VALUE,
                               "layer %d (%s): max_batch %d times %zu outputs per sample is too "
                               "large",
                               i, kind_name(L->spec.kind), spec->max_batch, L->out_count);
            goto fail;
        }
    }
    /* a Flatten followed by a Dense layer: the dense kernel's rows take the
     * NCHW order instead of the Flatten transposing to NHWC */
    for (int i = 0; net->sw.fuse_flatten && i + 1 < net->n_layers; i++) {
        layer *F = &net->layers[i], *D = &net->layers[i + 1];
        if (F->spec.kind != CNN_LAYER_FLATTEN || D->spec.kind != CNN_LAYER_DENSE) continue;
        F->alias_in = 1;
        if (F->in_c > 1 && (size_t)F->in_h * F->in_w > 1) {
            D->rows_c = F->in_c;
            D->rows_hw = F->in_h * F->in_w;
        }
    }
    const layer *last = &net->layers[net->n_layers - 1];
    net->out_count = last->out_count;
    net->loss.k = last->out_rank == 2 ? last->out_c : 0;
    net->n_params = n_params;
    net->n_state = n_state;

    if ((st = backend->ctx_create(&net->ctx, num_threads, spec->device)) != CNN_OK) goto fail;
    net->ctx->allow_tf32 = spec->allow_tf32;

    plan_head(net);
    plan_pool_col(net);
    plan_pool_im2col(net);
    net->gather_im2col = net->sw.fuse_gather_im2col &&
                         backend->gather_batch_im2col && backend->conv2d_forward_col &&
                         net->layers[0].spec.kind == CNN_LAYER_CONV2D;
    if ((st = plan_steps(net)) != CNN_OK) goto fail;

    /* every buffer, once. A first pass adds up the bytes: on a host engine
     * a network larger than the machine's memory is refused before anything
     * is allocated (Linux would hand the memory out, then kill the process
     * when the buffers are zeroed). */
    net->counting = 1;
    st = alloc_buffers(net, largest);
    net->counting = 0;
    if (st != CNN_OK) goto fail;
    size_t memory = host_memory_bytes(backend);
    if (memory && net->planned > memory) {
        st = cnn_set_error(CNN_ERR_MEMORY,
                           "out of memory: this network needs %zu bytes of buffers for "
                           "max_batch %d on the %s engine, more than this machine's %zu bytes",
                           net->planned, net->max_batch, backend->name, memory);
        goto fail;
    }
    if ((st = alloc_buffers(net, largest)) != CNN_OK) goto fail;

    list_weights(net);
    if ((st = upload_hyper(net)) != CNN_OK) goto fail;
    if ((st = initialize_weights(net)) != CNN_OK) goto fail;
    *out = net;
    return CNN_OK;
fail:
    cnn_net_destroy(net);
    return st;
}

void cnn_net_output_shape(const cnn_net *net, int *rank, int dims[3])
{
    const layer *last = &net->layers[net->n_layers - 1];
    *rank = last->out_rank;
    dims[0] = last->out_rank == 4 ? last->out_h : last->out_c;
    dims[1] = last->out_w;
    dims[2] = last->out_c;
}

int cnn_net_max_batch(const cnn_net *net) { return net->max_batch; }
long cnn_net_step_count(const cnn_net *net) { return net->steps; }

/* ------------------------------------------------------ forward, backward */

static cnn_status check_batch(const cnn_net *net, long n)
{
    if (n < 1 || n > net->max_batch)
        return cnn_set_error(CNN_ERR_VALUE,
                             "batch size must be in [1, %d] (the max_batch this network was "
                             "built for), got %ld",
                             net->max_batch, n);
    return CNN_OK;
}

/* Whether layer i exists and is a ReLU activation layer that the engine
 * may fuse into its neighbour (cnn.h: conv2d_forward_relu,
 * pool_backward_relu). A fused ReLU's output is written as usual; only the
 * convolution's own output before it is left unwritten, which no backward
 * reads (the ReLU's backward reads its output). CNNCUDA_FUSE=0 turns fusion
 * off, to compare the two. */
static int fusable_relu(const cnn_net *net, int i)
{
    if (!net->sw.fuse || i < 0 || i >= net->n_layers) return 0;
    const cnn_layer_spec *s = &net->layers[i].spec;
    return s->kind == CNN_LAYER_ACTIVATION && s->activation == CNN_ACT_RELU;
}

/* Whether layer i is a dense layer whose ReLU after it (layer i + 1, run in
 * a forward through layers [0, top)) is applied by the dense layer's GEMM
 * (cnn.h: dense_forward_relu); its own output is left unwritten, as a
 * fused convolution's. */
static int dense_relu_fused(const cnn_net *net, int i, int top)
{
    return net->sw.fuse_dense && net->be->dense_forward_relu && i + 1 < top &&
           net->layers[i].spec.kind == CNN_LAYER_DENSE && fusable_relu(net, i + 1);
}

/* Whether layer i is a dense layer with a bias whose bias gradient another
 * launch writes (cnn.h): that of the backward of activation layer i + 1
 * (activation_backward_bias: ReLU, sigmoid, tanh, softmax) when the
 * backward runs that layer (i + 1 <= top, the first layer it runs). Then
 * its dense_backward_filter gets db NULL. (The training head's db_below is
 * the other: plan_steps says so to plan_backward.) The activation's
 * output has rank 2, so no pooling after it takes its backward
 * (pool_backward_relu). */
static int dense_bias_in_activation(const cnn_net *net, int i, int top)
{
    if (!net->sw.fuse_dense || !net->be->activation_backward_bias || i < 0 || i + 1 > top ||
        i + 1 >= net->n_layers)
        return 0;
    const cnn_layer_spec *d = &net->layers[i].spec, *s = &net->layers[i + 1].spec;
    if (d->kind != CNN_LAYER_DENSE || !d->use_bias || s->kind != CNN_LAYER_ACTIVATION) return 0;
    return s->activation == CNN_ACT_RELU || s->activation == CNN_ACT_SIGMOID ||
           s->activation == CNN_ACT_TANH || s->activation == CNN_ACT_SOFTMAX;
}

/* Whether a training step ends in the engine's dense_loss_head: the last
 * layers are Dense (at most CNN_HEAD_MAX_OUT units) and, with a crossentropy
 * on probabilities, a softmax; the loss is sparse or categorical
 * crossentropy, on logits without the softmax layer. Sets net->head (the
 * dense layer, or -1), head_softmax, head_relu (the layer before the
 * dense one is a ReLU whose backward the head runs) and head_db_below (the
 * layer the backward then starts at is a dense layer with a bias, whose
 * bias gradient the head sums from the input gradient it writes). */
static void plan_head(cnn_net *net)
{
    net->head = -1;
    net->head_softmax = net->head_relu = net->head_db_below = 0;
    if (!net->be->dense_loss_head || !net->sw.fuse_head) return;
    if (net->loss.kind != CNN_LOSS_SPARSE_CE && net->loss.kind != CNN_LOSS_CATEGORICAL_CE) return;
    int h = net->n_layers - 1, softmax = 0;
    const cnn_layer_spec *s = &net->layers[h].spec;
    if (s->kind == CNN_LAYER_ACTIVATION && s->activation == CNN_ACT_SOFTMAX) {
        softmax = 1;
        h--;
    }
    if (h < 0 || net->layers[h].spec.kind != CNN_LAYER_DENSE) return;
    if ((net->loss.from_logits != 0) == softmax) return;
    if (net->layers[h].spec.units > CNN_HEAD_MAX_OUT) return;
    net->head = h;
    net->head_softmax = softmax;
    net->head_relu = fusable_relu(net, h - 1);
    const int below = h - 1 - net->head_relu;
    net->head_db_below = net->sw.fuse_dense && below >= 0 &&
                         net->layers[below].spec.kind == CNN_LAYER_DENSE &&
                         net->layers[below].spec.use_bias;
}

/* Marks the convolutions whose data gradient and the backward of the
 * pooling layer just before them (and of the ReLU before that, where
 * fusable_relu) run in one call, the engine's conv2d_backward_data_pool: a
 * max or average pool whose windows do not overlap (pool no larger than
 * its stride; pads are never negative). CNNCUDA_FUSE_POOL_COL2IM=0: none. */
static void plan_pool_col(cnn_net *net)
{
    for (int i = 1; i < net->n_layers; i++) {
        layer *L = &net->layers[i];
        const layer *P = &net->layers[i - 1];
        const cnn_pool_desc *p = &P->pool;
        L->pool_col = net->sw.fuse_pool_col2im && net->be->conv2d_backward_data_pool &&
                      L->spec.kind == CNN_LAYER_CONV2D &&
                      (P->spec.kind == CNN_LAYER_MAXPOOL || P->spec.kind == CNN_LAYER_AVGPOOL) &&
                      p->ph <= p->sh && p->pw <= p->sw && p->pad_top >= 0 && p->pad_left >= 0;
    }
}

/* Marks the pooling layers whose forward also writes the column matrix of
 * the convolution right after them (the engine's pool_forward_im2col, then
 * conv2d_forward_col): where that convolution reads only inside its input
 * (cnn_conv_reads_inside: no padding to fill). CNNCUDA_FUSE_POOL_IM2COL=1:
 * on; otherwise none. */
static void plan_pool_im2col(cnn_net *net)
{
    for (int i = 0; i + 1 < net->n_layers; i++) {
        layer *P = &net->layers[i];
        const layer *C = &net->layers[i + 1];
        P->pool_im2col = net->fuse_pool_im2col && net->be->pool_forward_im2col &&
                         net->be->conv2d_forward_col &&
                         (P->spec.kind == CNN_LAYER_MAXPOOL || P->spec.kind == CNN_LAYER_AVGPOOL) &&
                         C->spec.kind == CNN_LAYER_CONV2D && cnn_conv_reads_inside(&C->conv);
    }
}

/* Whether the last layer's softmax runs inside the loss of a training step
 * (cnn.h: softmax_loss_forward_backward): a softmax as the last layer, a
 * sparse or categorical cross-entropy from probabilities, and the engine has
 * the entry. The softmax's output is written as usual. CNNCUDA_FUSE_SOFTMAX=0
 * turns it off. */
static int fused_softmax_loss(const cnn_net *net)
{
    const cnn_layer_spec *s = &net->layers[net->n_layers - 1].spec;
    return net->sw.fuse_softmax && net->be->softmax_loss_forward_backward &&
           s->kind == CNN_LAYER_ACTIVATION && s->activation == CNN_ACT_SOFTMAX &&
           !net->loss.from_logits &&
           (net->loss.kind == CNN_LOSS_SPARSE_CE || net->loss.kind == CNN_LOSS_CATEGORICAL_CE);
}

/* ------------------------------------------------------------ step plan
 *
 * A Net plans, once, at creation, the lists of steps its forward and
 * backward passes run (net->plans): each step is one call of the engine (or
 * of a fused entry, over several layers), with the layers it runs and a
 * name such as "conv2d_0.forward+relu". The loops below only execute the
 * lists. A fusion is a planning rule (the predicates above: fusable_relu,
 * dense_relu_fused, dense_bias_in_activation, plan_head, plan_pool_col,
 * plan_pool_im2col, fused_softmax_loss) that puts one step where two would
 * be. */

static const char *step_suffix(step_kind k)
{
    switch (k) {
    case STEP_CONV_FORWARD: return "forward";
    case STEP_CONV_FORWARD_RELU: return "forward+relu";
    case STEP_CONV_FORWARD_COL: return "forward_col";
    case STEP_CONV_FORWARD_COL_RELU: return "forward_col+relu";
    case STEP_POOL_FORWARD: return "forward";
    case STEP_POOL_FORWARD_IM2COL: return "forward+im2col";
    case STEP_FLATTEN_FORWARD: return "forward";
    case STEP_DENSE_FORWARD: return "forward";
    case STEP_DENSE_FORWARD_RELU: return "forward+relu";
    case STEP_ACTIVATION_FORWARD: return "forward";
    case STEP_DROPOUT_FORWARD: return "forward";
    case STEP_BATCHNORM_FORWARD: return "forward";
    case STEP_LOSS: return "loss";
    case STEP_SOFTMAX_LOSS: return "forward+loss";
    case STEP_DENSE_LOSS_HEAD: return "head";
    case STEP_CONV_BACKWARD_FILTER: return "backward_filter";
    case STEP_CONV_BACKWARD_DATA: return "backward_data";
    case STEP_CONV_BACKWARD_DATA_POOL: return "backward_data+pool";
    case STEP_CONV_BACKWARD_DATA_POOL_RELU: return "backward_data+pool+relu";
    case STEP_POOL_BACKWARD: return "backward";
    case STEP_POOL_BACKWARD_RELU: return "backward+relu";
    case STEP_FLATTEN_BACKWARD: return "backward";
    case STEP_DENSE_BACKWARD_FILTER: return "backward_filter";
    case STEP_DENSE_BACKWARD_DATA: return "backward_data";
    case STEP_ACTIVATION_BACKWARD: return "backward";
    case STEP_ACTIVATION_BACKWARD_BIAS: return "backward+bias";
    case STEP_DROPOUT_BACKWARD: return "backward";
    case STEP_BATCHNORM_BACKWARD: return "backward";
    }
    return "unknown";
}

/* Appends a step of kind k over layers [first, last] (last <= first going
 * backward) to plan p. */
static step *add_step(const cnn_net *net, step_plan *p, step_kind k, int first, int last)
{
    step *s = &p->steps[p->n++];
    *s = (step){.kind = k, .layer = first, .last = last};
    const int i = k == STEP_LOSS ? net->n_layers - 1 : first;
    snprintf(s->name, sizeof s->name, "%s_%d.%s", kind_name(net->layers[i].spec.kind), i,
             step_suffix(k));
    return s;
}

/* The forward through layers [0, top): `from_col`, the first convolution
 * starts from its column matrix (gather_batch_im2col wrote it); `loss`, the
 * training step's loss (and the head, where plan_head chose it) follows. */
static void plan_forward(const cnn_net *net, step_plan *p, int top, int from_col, int loss)
{
    const cnn_backend *be = net->be;
    p->n = 0;
    int col_ready = from_col;
    for (int i = 0; i < top; i++) {
        const layer *L = &net->layers[i];
        const int col = col_ready;
        col_ready = 0;
        switch (L->spec.kind) {
        case CNN_LAYER_CONV2D: {
            const int relu = be->conv2d_forward_relu && i + 1 < top && fusable_relu(net, i + 1);
            const step_kind k = col ? (relu ? STEP_CONV_FORWARD_COL_RELU : STEP_CONV_FORWARD_COL)
                                    : (relu ? STEP_CONV_FORWARD_RELU : STEP_CONV_FORWARD);
            add_step(net, p, k, i, i + relu);
            i += relu;
            break;
        }
        case CNN_LAYER_MAXPOOL:
        case CNN_LAYER_AVGPOOL:
            if (L->pool_im2col && i + 1 < top) {
                add_step(net, p, STEP_POOL_FORWARD_IM2COL, i, i);
                col_ready = 1;
            } else {
                add_step(net, p, STEP_POOL_FORWARD, i, i);
            }
            break;
        case CNN_LAYER_FLATTEN:
            if (!L->alias_in) add_step(net, p, STEP_FLATTEN_FORWARD, i, i); /* else: no step */
            break;
        case CNN_LAYER_DENSE:
            if (dense_relu_fused(net, i, top)) {
                add_step(net, p, STEP_DENSE_FORWARD_RELU, i, i + 1);
                i++;
            } else {
                add_step(net, p, STEP_DENSE_FORWARD, i, i);
            }
            break;
        case CNN_LAYER_ACTIVATION: add_step(net, p, STEP_ACTIVATION_FORWARD, i, i); break;
        case CNN_LAYER_DROPOUT: add_step(net, p, STEP_DROPOUT_FORWARD, i, i); break;
        case CNN_LAYER_BATCHNORM: add_step(net, p, STEP_BATCHNORM_FORWARD, i, i); break;
        }
    }
    if (!loss) return;
    if (net->head >= 0)
        add_step(net, p, STEP_DENSE_LOSS_HEAD, net->head, net->n_layers - 1);
    else if (top < net->n_layers) /* fused_softmax_loss */
        add_step(net, p, STEP_SOFTMAX_LOSS, net->n_layers - 1, net->n_layers - 1);
    else
        add_step(net, p, STEP_LOSS, net->n_layers - 1, net->n_layers - 1);
}

/* The backward through layers top, ..., 0 (see run_backward); top_db:
 * layer top is a dense layer whose bias gradient is written already (the
 * head's db_below); want_dx: the input gradient is wanted. */
static void plan_backward(const cnn_net *net, step_plan *p, int top, int top_db, int want_dx)
{
    const cnn_backend *be = net->be;
    p->n = 0;
    for (int i = top; i >= 0; i--) {
        const layer *L = &net->layers[i];
        const cnn_layer_spec *s = &L->spec;
        const int need_dx = i > 0 || want_dx;
        step *st = NULL; /* the step after which dy and dx change places */
        switch (s->kind) {
        case CNN_LAYER_CONV2D: {
            add_step(net, p, STEP_CONV_BACKWARD_FILTER, i, i)->with_db = s->use_bias;
            if (!need_dx) break;
            /* and the backward of the pool before it, in one call, where
             * plan_pool_col chose it and the pool's backward would run (as in
             * the pool's case below: with the ReLU before the pool where fused) */
            const int pool = L->pool_col;
            const int relu = pool && be->pool_backward_relu && fusable_relu(net, i - 2);
            if (pool && (relu || i - 1 > 0 || want_dx)) {
                st = add_step(net, p,
                              relu ? STEP_CONV_BACKWARD_DATA_POOL_RELU
                                   : STEP_CONV_BACKWARD_DATA_POOL,
                              i, i - 1 - relu);
                i -= 1 + relu; /* dx: the pool's input gradient, or the ReLU's */
            } else {
                st = add_step(net, p, STEP_CONV_BACKWARD_DATA, i, i);
            }
            break;
        }
        case CNN_LAYER_MAXPOOL:
        case CNN_LAYER_AVGPOOL:
            if (be->pool_backward_relu && fusable_relu(net, i - 1)) {
                /* the pool's and the ReLU's before it: dx is the ReLU's input gradient */
                st = add_step(net, p, STEP_POOL_BACKWARD_RELU, i, i - 1);
                i--;
            } else if (need_dx) {
                st = add_step(net, p, STEP_POOL_BACKWARD, i, i);
            }
            break;
        case CNN_LAYER_FLATTEN:
            /* an aliased flatten: dx is dy, where it is: no step, no swap */
            if (!L->alias_in && need_dx) st = add_step(net, p, STEP_FLATTEN_BACKWARD, i, i);
            break;
        case CNN_LAYER_DENSE: {
            /* db written by the launch that wrote dy, or to be written by the next one */
            const int db_elsewhere = (i == top && top_db) || dense_bias_in_activation(net, i, top);
            add_step(net, p, STEP_DENSE_BACKWARD_FILTER, i, i)->with_db =
                s->use_bias && !db_elsewhere;
            if (need_dx) st = add_step(net, p, STEP_DENSE_BACKWARD_DATA, i, i);
            break;
        }
        case CNN_LAYER_ACTIVATION:
            if (dense_bias_in_activation(net, i - 1, top)) /* and the dense layer's db */
                st = add_step(net, p, STEP_ACTIVATION_BACKWARD_BIAS, i, i);
            else if (need_dx)
                st = add_step(net, p, STEP_ACTIVATION_BACKWARD, i, i);
            break;
        case CNN_LAYER_DROPOUT:
            if (need_dx) st = add_step(net, p, STEP_DROPOUT_BACKWARD, i, i);
            break;
        case CNN_LAYER_BATCHNORM:
            /* always run: it also writes dgamma and dbeta */
            st = add_step(net, p, STEP_BATCHNORM_BACKWARD, i, i);
            break;
        }
        if (st && need_dx) st->swap = 1;
    }
}

/* Every plan of the Net (plan_kind), once, after the fusion rules have
 * marked the layers; host memory only. */
static cnn_status plan_steps(cnn_net *net)
{
    const int n = net->n_layers;
    const int train_top = net->head >= 0 ? net->head : n - fused_softmax_loss(net);
    /* the layer a training backward starts at: below the head (and its
     * ReLU), else below the forward's top */
    const int train_below = net->head >= 0 ? net->head - 1 - net->head_relu : train_top - 1;
    for (int k = 0; k < PLAN_COUNT; k++) {
        net->plans[k].steps = calloc(2 * (size_t)n + 1, sizeof(step));
        if (!net->plans[k].steps)
            return cnn_set_error(CNN_ERR_MEMORY, "out of host memory creating a network");
    }
    plan_forward(net, &net->plans[PLAN_FORWARD], n, 0, 0);
    plan_forward(net, &net->plans[PLAN_TRAIN_FORWARD], train_top, 0, 1);
    plan_forward(net, &net->plans[PLAN_TRAIN_FORWARD_GATHERED], train_top, net->gather_im2col, 1);
    plan_backward(net, &net->plans[PLAN_TRAIN_BACKWARD], train_below,
                  net->head >= 0 && net->head_db_below, 0);
    plan_backward(net, &net->plans[PLAN_BACKWARD], n - 1, 0, 0);
    plan_backward(net, &net->plans[PLAN_BACKWARD_DX], n - 1, 0, 1);
    return CNN_OK;
}

/* The training step fit runs (train_range): its forward, loss included, or
 * its backward. */
static const step_plan *fit_plan(const cnn_net *net, int backward)
{
    return &net->plans[backward ? PLAN_TRAIN_BACKWARD : PLAN_TRAIN_FORWARD_GATHERED];
}

int cnn_net_plan_length(const cnn_net *net, int backward)
{
    return fit_plan(net, backward)->n;
}

const char *cnn_net_plan_step_name(const cnn_net *net, int backward, int i)
{
    const step_plan *p = fit_plan(net, backward);
    return i >= 0 && i < p->n ? p->steps[i].name : NULL;
}

/* Runs a forward plan on the n samples already in net->x; leaves the
 * output in the last layer's y. r->training: a training forward, which
 * moves the engine's forward counter on unless r->counted (the step's
 * gather_batch has); a plan that ends in the loss adds it to r->sums, its
 * gradient that of the mean over r->scale_n samples, into net->grad_a. */
static cnn_status run_forward(cnn_net *net, plan_kind which, const run_args *r)
{
    const cnn_backend *be = net->be;
    cnn_ctx *ctx = net->ctx;
    const step_plan *p = &net->plans[which];
    const int n = r->n;
    net->last_n = 0; /* the activations a backward needs are being replaced */
    if (r->training && !r->counted) CNN_TRY(be->advance_counters(ctx, net->counters, 1, 0, 0));
    for (int k = 0; k < p->n; k++) {
        const step *st = &p->steps[k];
        const int i = st->layer;
        layer *L = &net->layers[i];
        const cnn_layer_spec *s = &L->spec;
        const float *in = i ? net->layers[i - 1].y : net->x;
        float *y = net->layers[st->last].y; /* the output of the last layer it runs */
        const float *w = L->w_off != NO_OFFSET ? net->params + L->w_off : NULL;
        const float *b = s->use_bias && L->b_off != NO_OFFSET ? net->params + L->b_off : NULL;
        switch (st->kind) {
        case STEP_CONV_FORWARD:
        case STEP_CONV_FORWARD_RELU:
        case STEP_CONV_FORWARD_COL:
        case STEP_CONV_FORWARD_COL_RELU: {
            cnn_conv_desc d = L->conv;
            d.n = n;
            if (st->kind == STEP_CONV_FORWARD_COL || st->kind == STEP_CONV_FORWARD_COL_RELU)
                CNN_TRY(be->conv2d_forward_col(ctx, &d, st->kind == STEP_CONV_FORWARD_COL_RELU,
                                               in, w, b, y, L->ws));
            else if (st->kind == STEP_CONV_FORWARD_RELU)
                CNN_TRY(be->conv2d_forward_relu(ctx, &d, in, w, b, y, L->ws));
            else
                CNN_TRY(be->conv2d_forward(ctx, &d, in, w, b, y, L->ws));
            break;
        }
        case STEP_POOL_FORWARD:
        case STEP_POOL_FORWARD_IM2COL: {
            cnn_pool_desc d = L->pool;
            d.n = n;
            if (st->kind == STEP_POOL_FORWARD_IM2COL) { /* and the next convolution's column matrix */
                const layer *C = &net->layers[i + 1];
                cnn_conv_desc cd = C->conv;
                cd.n = n;
                CNN_TRY(be->pool_forward_im2col(ctx, &d, &cd, in, y, L->argmax, C->ws));
            } else {
                CNN_TRY(be->pool_forward(ctx, &d, in, y, L->argmax));
            }
            break;
        }
        case STEP_FLATTEN_FORWARD:
            CNN_TRY(be->nhwc_from_nchw(ctx, n, L->in_h, L->in_w, L->in_c, in, y));
            break;
        case STEP_DENSE_FORWARD:
            CNN_TRY(be->dense_forward(ctx, n, L->in_c, s->units, in, w, b, y));
            break;
        case STEP_DENSE_FORWARD_RELU: /* and the ReLU after it, into its output */
            CNN_TRY(be->dense_forward_relu(ctx, n, L->in_c, s->units, in, w, b, y));
            break;
        case STEP_ACTIVATION_FORWARD:
            CNN_TRY(be->activation_forward(ctx, s->activation, n, (int)L->in_count, in, y));
            break;
        case STEP_DROPOUT_FORWARD:
            CNN_TRY(be->dropout_forward(ctx, n, L->in_c, L->in_h, L->in_w,
                                        r->training ? s->rate : 0.0f, L->dropout_key,
                                        net->counters + CNN_COUNT_MASK, net->row0, in, y));
            break;
        case STEP_BATCHNORM_FORWARD: {
            cnn_bn_desc d = L->bn;
            d.n = n;
            if (r->training)
                CNN_TRY(be->batchnorm_forward_train(
                    ctx, &d, in, net->params + L->gamma_off, net->params + L->beta_off,
                    net->state + L->mean_off, net->state + L->var_off, y, L->save_mean,
                    L->save_invstd));
            else
                CNN_TRY(be->batchnorm_forward_infer(
                    ctx, &d, in, net->params + L->gamma_off, net->params + L->beta_off,
                    net->state + L->mean_off, net->state + L->var_off, y));
            break;
        }
        case STEP_LOSS:
        case STEP_SOFTMAX_LOSS:
        case STEP_DENSE_LOSS_HEAD: {
            cnn_loss_desc d = net->loss;
            d.n = n;
            const int sparse = d.kind == CNN_LOSS_SPARSE_CE;
            const int32_t *labels = sparse ? net->labels : NULL;
            const float *targets = sparse ? NULL : net->targets;
            float *last_y = net->layers[net->n_layers - 1].y;
            if (st->kind == STEP_DENSE_LOSS_HEAD) {
                /* the last dense layer, softmax and loss in one call */
                const int h = i, below = h - 1 - net->head_relu;
                CNN_TRY(be->dense_loss_head(
                    ctx, &d, L->in_c, net->head_softmax, net->head_relu, in, w, b, labels,
                    targets, r->scale_n, L->y, net->head_softmax ? net->layers[h + 1].y : NULL,
                    net->grads + L->w_off, b ? net->grads + L->b_off : NULL,
                    below >= 0 ? net->grad_a : NULL,
                    net->head_db_below ? net->grads + net->layers[below].b_off : NULL, r->sums,
                    net->head_ws));
            } else if (st->kind == STEP_SOFTMAX_LOSS) {
                CNN_TRY(be->softmax_loss_forward_backward(ctx, &d, in, last_y, labels, targets,
                                                          r->scale_n, net->grad_a, r->sums));
            } else {
                CNN_TRY(be->loss_forward_backward(ctx, &d, last_y, labels, targets, r->scale_n,
                                                  net->grad_a, r->sums));
            }
            break;
        }
        default:
            return cnn_set_error(CNN_ERR_INTERNAL, "step %s: not a forward step", st->name);
        }
    }
    if (r->training) {
        net->train_forwards++;
        net->last_n = n;
    }
    return CNN_OK;
}

/* Runs a backward plan after the last training forward, from the gradient
 * of its top layer's output in net->grad_a (internal layout); fills the
 * gradient block. Returns through *dx_out (if not NULL) the buffer holding
 * the last gradient written: the input gradient where the plan wants it. */
static cnn_status run_backward(cnn_net *net, plan_kind which, float **dx_out)
{
    const cnn_backend *be = net->be;
    cnn_ctx *ctx = net->ctx;
    const step_plan *p = &net->plans[which];
    const int n = net->last_n;
    float *dy = net->grad_a, *dx = net->grad_b;
    for (int k = 0; k < p->n; k++) {
        const step *st = &p->steps[k];
        const int i = st->layer;
        layer *L = &net->layers[i];
        const cnn_layer_spec *s = &L->spec;
        const float *in = i ? net->layers[i - 1].y : net->x;
        switch (st->kind) {
        case STEP_CONV_BACKWARD_FILTER:
        case STEP_CONV_BACKWARD_DATA:
        case STEP_CONV_BACKWARD_DATA_POOL:
        case STEP_CONV_BACKWARD_DATA_POOL_RELU: {
            cnn_conv_desc d = L->conv;
            d.n = n;
            if (st->kind == STEP_CONV_BACKWARD_FILTER) {
                CNN_TRY(be->conv2d_backward_filter(ctx, &d, in, dy, net->grads + L->w_off,
                                                   st->with_db ? net->grads + L->b_off : NULL,
                                                   L->ws));
            } else if (st->kind == STEP_CONV_BACKWARD_DATA) {
                CNN_TRY(be->conv2d_backward_data(ctx, &d, dy, net->params + L->w_off, dx, L->ws));
            } else {
                const layer *P = &net->layers[i - 1];
                const int relu = st->kind == STEP_CONV_BACKWARD_DATA_POOL_RELU;
                cnn_pool_desc pd = P->pool;
                pd.n = n;
                CNN_TRY(be->conv2d_backward_data_pool(ctx, &d, &pd, dy, net->params + L->w_off,
                                                      P->argmax,
                                                      relu ? net->layers[i - 2].y : NULL, dx,
                                                      L->ws));
            }
            break;
        }
        case STEP_POOL_BACKWARD:
        case STEP_POOL_BACKWARD_RELU: {
            cnn_pool_desc d = L->pool;
            d.n = n;
            if (st->kind == STEP_POOL_BACKWARD_RELU)
                /* the pool's and the ReLU's before it: dx is the ReLU's input gradient */
                CNN_TRY(be->pool_backward_relu(ctx, &d, dy, L->argmax, in, dx));
            else
                CNN_TRY(be->pool_backward(ctx, &d, dy, L->argmax, dx));
            break;
        }
        case STEP_FLATTEN_BACKWARD:
            CNN_TRY(be->nchw_from_nhwc(ctx, n, L->in_h, L->in_w, L->in_c, dy, dx));
            break;
        case STEP_DENSE_BACKWARD_FILTER:
            CNN_TRY(be->dense_backward_filter(ctx, n, L->in_c, s->units, in, dy,
                                              net->grads + L->w_off,
                                              st->with_db ? net->grads + L->b_off : NULL));
            break;
        case STEP_DENSE_BACKWARD_DATA:
            CNN_TRY(be->dense_backward_data(ctx, n, L->in_c, s->units, dy,
                                            net->params + L->w_off, dx));
            break;
        case STEP_ACTIVATION_BACKWARD_BIAS: /* and the dense layer's db */
            CNN_TRY(be->activation_backward_bias(ctx, s->activation, n, (int)L->in_count, L->y,
                                                 dy, dx, net->grads + net->layers[i - 1].b_off));
            break;
        case STEP_ACTIVATION_BACKWARD:
            CNN_TRY(be->activation_backward(ctx, s->activation, n, (int)L->in_count, L->y, dy,
                                            dx));
            break;
        case STEP_DROPOUT_BACKWARD:
            CNN_TRY(be->dropout_backward(ctx, n, L->in_c, L->in_h, L->in_w, s->rate,
                                         L->dropout_key, net->counters + CNN_COUNT_MASK,
                                         net->row0, dy, dx));
            break;
        case STEP_BATCHNORM_BACKWARD: {
            cnn_bn_desc d = L->bn;
            d.n = n;
            CNN_TRY(be->batchnorm_backward(ctx, &d, in, dy, net->params + L->gamma_off,
                                           L->save_mean, L->save_invstd, dx,
                                           net->grads + L->gamma_off, net->grads + L->beta_off));
            break;
        }
        default:
            return cnn_set_error(CNN_ERR_INTERNAL, "step %s: not a backward step", st->name);
        }
        if (st->swap) {
            float *t = dy;
            dy = dx;
            dx = t;
        }
    }
    if (dx_out) *dx_out = dy;
    net->last_n = 0; /* a backward consumes its forward: workspaces now hold its gradients */
    return CNN_OK;
}

/* The user's NHWC batch into net->x (NCHW): uploaded and transposed, or
 * uploaded there directly where the two layouts are the same bytes. */
static cnn_status stage_input(cnn_net *net, int n, const float *x_host)
{
    const size_t bytes = (size_t)n * net->in_count * sizeof(float);
    if (!net->transpose_in) return net->be->upload(net->ctx, net->x, x_host, bytes);
    CNN_TRY(net->be->upload(net->ctx, net->x_stage, x_host, bytes));
    return net->be->nchw_from_nhwc(net->ctx, n, net->in_h, net->in_w, net->in_c, net->x_stage,
                                   net->x);
}

static cnn_status stage_targets(cnn_net *net, int n, const int32_t *labels_host,
                                const float *targets_host)
{
    if (net->loss.kind == CNN_LOSS_SPARSE_CE) {
        if (!labels_host)
            return cnn_set_error(CNN_ERR_VALUE, "sparse categorical cross-entropy needs labels");
        return net->be->upload(net->ctx, net->labels, labels_host, (size_t)n * sizeof(int32_t));
    }
    if (!targets_host)
        return cnn_set_error(CNN_ERR_VALUE, "this loss needs (batch, %d) targets", net->loss.k);
    return net->be->upload(net->ctx, net->targets, targets_host,
                           (size_t)n * net->loss.k * sizeof(float));
}

/* The loss needs a (batch, classes) output; a network whose last layer
 * gives images can still run forward and backward (used to test one op). */
static cnn_status check_loss_ready(const cnn_net *net)
{
    const layer *last = &net->layers[net->n_layers - 1];
    if (last->out_rank != 2)
        return cnn_set_error(CNN_ERR_VALUE,
                             "the loss needs a (batch, classes) output, but the last layer gives "
                             "(batch, %d, %d, %d): add Flatten and Dense layers",
                             last->out_h, last->out_w, last->out_c);
    if (net->loss.kind != CNN_LOSS_BINARY_CE && net->loss.k < 2)
        return cnn_set_error(CNN_ERR_VALUE,
                             "categorical cross-entropy needs at least 2 outputs, the last layer "
                             "has %d: use binary cross-entropy",
                             net->loss.k);
    return CNN_OK;
}

/* Loss of the last layer's output against the staged targets, added to
 * sums (2); no gradient (evaluate: training steps go through train_pass). */
static cnn_status loss_device(cnn_net *net, int n, float *sums)
{
    cnn_loss_desc d = net->loss;
    d.n = n;
    int sparse = d.kind == CNN_LOSS_SPARSE_CE;
    return net->be->loss_forward_backward(net->ctx, &d, net->layers[net->n_layers - 1].y,
                                          sparse ? net->labels : NULL,
                                          sparse ? NULL : net->targets, n, NULL, sums);
}

/* A training forward, the loss (added to `sums`, its gradient that of the
 * mean over scale_n samples) and the backward, of the n samples in net->x
 * against the staged targets. `counted`: the step's gather_batch has moved
 * the engine's forward counter on. The last dense layer, softmax and loss in
 * the engine's dense_loss_head where plan_head chose it; else, where the
 * last layer's softmax is fused into the loss, the forward stops before it
 * and the backward starts below it. */
static cnn_status train_pass(cnn_net *net, int n, int scale_n, int counted, float *sums)
{
    const run_args r = {.n = n, .training = 1, .counted = counted, .scale_n = scale_n,
                        .sums = sums};
    CNN_TRY(run_forward(net, counted ? PLAN_TRAIN_FORWARD_GATHERED : PLAN_TRAIN_FORWARD, &r));
    return run_backward(net, PLAN_TRAIN_BACKWARD, NULL);
}

cnn_status cnn_net_forward(cnn_net *net, int n, const float *x_host, int training, float *y_host)
{
    CNN_TRY(check_batch(net, n));
    CNN_TRY(stage_input(net, n, x_host));
    CNN_TRY(run_forward(net, PLAN_FORWARD, &(run_args){.n = n, .training = training}));
    if (!y_host) return CNN_OK;
    const layer *last = &net->layers[net->n_layers - 1];
    const float *y = last->y;
    if (last->out_rank == 4) {
        CNN_TRY(net->be->nhwc_from_nchw(net->ctx, n, last->out_h, last->out_w, last->out_c, y,
                                        net->y_stage));
        y = net->y_stage;
    }
    return net->be->download(net->ctx, y_host, y, (size_t)n * last->out_count * sizeof(float));
}

cnn_status cnn_net_backward(cnn_net *net, int n, const float *dy_host, float *dx_host)
{
    if (net->last_n == 0)
        return cnn_set_error(CNN_ERR_VALUE,
                             "backward needs a training forward first (forward with training=True)");
    if (n != net->last_n)
        return cnn_set_error(CNN_ERR_VALUE,
                             "dy: expected the batch of the last training forward, %d samples, "
                             "got %d",
                             net->last_n, n);
    const layer *last = &net->layers[net->n_layers - 1];
    size_t dy_bytes = (size_t)n * net->out_count * sizeof(float);
    if (last->out_rank == 4) {
        CNN_TRY(net->be->upload(net->ctx, net->y_stage, dy_host, dy_bytes));
        CNN_TRY(net->be->nchw_from_nhwc(net->ctx, n, last->out_h, last->out_w, last->out_c,
                                        net->y_stage, net->grad_a));
    } else {
        CNN_TRY(net->be->upload(net->ctx, net->grad_a, dy_host, dy_bytes));
    }
    float *dx = NULL;
    CNN_TRY(run_backward(net, dx_host ? PLAN_BACKWARD_DX : PLAN_BACKWARD, &dx));
    if (!dx_host) return CNN_OK;
    size_t bytes = (size_t)n * net->in_count * sizeof(float);
    if (net->in_rank == 4) {
        CNN_TRY(net->be->nhwc_from_nchw(net->ctx, n, net->in_h, net->in_w, net->in_c, dx,
                                        net->y_stage));
        dx = net->y_stage;
    }
    return net->be->download(net->ctx, dx_host, dx, bytes);
}

cnn_status cnn_net_compute_gradients(cnn_net *net, int n, const float *x_host,
                                     const int32_t *labels_host, const float *targets_host,
                                     float *loss_sum, float *correct)
{
    CNN_TRY(check_batch(net, n));
    CNN_TRY(check_loss_ready(net));
    CNN_TRY(stage_input(net, n, x_host));
    CNN_TRY(stage_targets(net, n, labels_host, targets_host));
    CNN_TRY(net->be->zero(net->ctx, net->sums, 2 * sizeof(float)));
    CNN_TRY(train_pass(net, n, n, 0, net->sums));
    float sums[2];
    CNN_TRY(net->be->download(net->ctx, sums, net->sums, sizeof sums));
    if (loss_sum) *loss_sum = sums[0];
    if (correct) *correct = sums[1];
    return CNN_OK;
}

/* One optimizer step; also moves the resident-data position on by `rows`,
 * unless `counted` (the step's gather_batch has moved the counters on). */
static cnn_status optimizer_step(cnn_net *net, long rows, int counted)
{
    if (!counted) CNN_TRY(net->be->advance_counters(net->ctx, net->counters, 0, 1, rows));
    net->steps++;
    if (net->opt.kind == CNN_OPT_ADAM)
        return net->be->adam_step(net->ctx, net->hyper, net->counters + CNN_COUNT_STEPS,
                                  net->n_params, net->params, net->grads, net->opt_m,
                                  net->opt_v);
    return net->be->sgd_step(net->ctx, net->hyper, net->n_params, net->params, net->grads,
                             net->opt_m);
}

static cnn_status refuse_replica(const cnn_net *net, const char *what);

cnn_status cnn_net_apply_gradients(cnn_net *net)
{
    if (net->comm) return refuse_replica(net, "apply_gradients");
    return optimizer_step(net, 0, 0);
}

cnn_status cnn_net_train_batch(cnn_net *net, int n, const float *x_host,
                               const int32_t *labels_host, const float *targets_host,
                               float *loss_sum, float *correct)
{
    CNN_TRY(cnn_net_compute_gradients(net, n, x_host, labels_host, targets_host, loss_sum,
                                      correct));
    return cnn_net_apply_gradients(net);
}

/* Samples whose float32 rows an evaluate or predict call holds on the
 * engine at a time (at least one batch): an array larger than this is
 * converted, uploaded and run a part after another. */
#define CNN_EVAL_PART_BYTES ((size_t)256 << 20)

static cnn_status upload_samples(cnn_net *net, float *dst, long n, const cnn_host_array *a);

/* x from its sample `at` on: the same array, its errors' indices kept. */
static cnn_host_array rows_from(const cnn_net *net, const cnn_host_array *x, long at)
{
    cnn_host_array rows = *x;
    const size_t values = (size_t)at * net->in_count;
    rows.data = (const char *)x->data + values * cnn_dtype_bytes(x->dtype);
    rows.index0 = x->index0 + values;
    return rows;
}

static long eval_part_rows(const cnn_net *net, long n)
{
    long part = (long)(CNN_EVAL_PART_BYTES / (net->in_count * sizeof(float)));
    part -= part % net->max_batch;
    if (part < net->max_batch) part = net->max_batch;
    return part < n ? part : n;
}

static long batch_count(const cnn_net *net, long n)
{
    return (n + net->max_batch - 1) / net->max_batch;
}

/* Queues the inference of the n rows of x (engine memory, NCHW) against
 * their targets (engine memory: labels, or targets (n, k)), max_batch at a
 * time, each batch copied into net->x: batch b's float32 loss and correct
 * sums, as the engine adds them, into sums[2b], sums[2b + 1] (zeroed here).
 * Nothing is read back: a GPU engine may record it all. */
static cnn_status queue_evaluation(cnn_net *net, long n, const float *x, const int32_t *labels,
                                   const float *targets, float *sums)
{
    const cnn_backend *be = net->be;
    const int sparse = net->loss.kind == CNN_LOSS_SPARSE_CE;
    const long batches = batch_count(net, n);
    CNN_TRY(be->zero(net->ctx, sums, (size_t)batches * 2 * sizeof(float)));
    for (long b = 0; b < batches; b++) {
        const long start = b * net->max_batch;
        const int m = (int)(n - start < net->max_batch ? n - start : net->max_batch);
        CNN_TRY(be->copy(net->ctx, net->x, x + (size_t)start * net->in_count,
                         (size_t)m * net->in_count * sizeof(float)));
        if (sparse)
            CNN_TRY(be->copy(net->ctx, net->labels, labels + start, (size_t)m * sizeof(int32_t)));
        else
            CNN_TRY(be->copy(net->ctx, net->targets, targets + (size_t)start * net->loss.k,
                             (size_t)m * net->loss.k * sizeof(float)));
        CNN_TRY(run_forward(net, PLAN_FORWARD, &(run_args){.n = m}));
        CNN_TRY(loss_device(net, m, sums + 2 * b));
    }
    return CNN_OK;
}

/* The batch sums of queue_evaluation added into total in double, in batch
 * order (the bits of batches staged from the host one by one): one
 * download. */
static cnn_status add_batch_sums(cnn_net *net, long batches, const float *sums, double total[2])
{
    float *host = malloc((size_t)batches * 2 * sizeof(float));
    if (!host) return cnn_set_error(CNN_ERR_MEMORY, "out of host memory for %ld batch sums", batches);
    cnn_status st = net->be->download(net->ctx, host, sums, (size_t)batches * 2 * sizeof(float));
    for (long b = 0; b < batches && st == CNN_OK; b++) {
        total[0] += host[2 * b];
        total[1] += host[2 * b + 1];
    }
    free(host);
    return st;
}

/* The inference of n resident rows (queue_evaluation), their sums added
 * into total (add_batch_sums). */
static cnn_status evaluate_rows(cnn_net *net, long n, const float *x, const int32_t *labels,
                                const float *targets, double total[2])
{
    const long batches = batch_count(net, n);
    float *sums = NULL;
    cnn_status st = net->be->alloc(net->ctx, (void **)&sums, (size_t)batches * 2 * sizeof(float));
    if (st == CNN_OK) st = queue_evaluation(net, n, x, labels, targets, sums);
    if (st == CNN_OK) st = add_batch_sums(net, batches, sums, total);
    if (sums) net->be->free(net->ctx, sums);
    return st;
}

static size_t target_bytes(const cnn_net *net, long n)
{
    return net->loss.kind == CNN_LOSS_SPARSE_CE ? (size_t)n * sizeof(int32_t)
                                                : (size_t)n * net->loss.k * sizeof(float);
}

/* Engine memory for n resident rows: *x_dev (n, in_count), *t_dev their
 * targets. Either may be set when it fails: the caller frees them. */
static cnn_status alloc_rows(cnn_net *net, long n, float **x_dev, void **t_dev)
{
    CNN_TRY(net->be->alloc(net->ctx, (void **)x_dev, (size_t)n * net->in_count * sizeof(float)));
    return net->be->alloc(net->ctx, t_dev, target_bytes(net, n));
}

/* n samples of x converted and uploaded into x_dev, their targets into
 * t_dev (both from alloc_rows). */
static cnn_status fill_rows(cnn_net *net, long n, const cnn_host_array *x,
                            const int32_t *labels_host, const float *targets_host, float *x_dev,
                            void *t_dev)
{
    const int sparse = net->loss.kind == CNN_LOSS_SPARSE_CE;
    CNN_TRY(upload_samples(net, x_dev, n, x));
    return net->be->upload(net->ctx, t_dev,
                           sparse ? (const void *)labels_host : (const void *)targets_host,
                           target_bytes(net, n));
}

static cnn_status check_targets_given(const cnn_net *net, const char *what,
                                      const int32_t *labels_host, const float *targets_host)
{
    int sparse = net->loss.kind == CNN_LOSS_SPARSE_CE;
    if (sparse ? !labels_host : !targets_host)
        return cnn_set_error(CNN_ERR_VALUE, "%s needs %s", what, sparse ? "labels" : "targets");
    return CNN_OK;
}

cnn_status cnn_net_evaluate(cnn_net *net, long n, const cnn_host_array *x,
                            const int32_t *labels_host, const float *targets_host,
                            double *loss_sum, double *correct)
{
    if (n < 1) return cnn_set_error(CNN_ERR_VALUE, "evaluate needs at least one sample, got %ld", n);
    CNN_TRY(check_loss_ready(net));
    CNN_TRY(check_targets_given(net, "evaluate", labels_host, targets_host));
    const int sparse = net->loss.kind == CNN_LOSS_SPARSE_CE;
    const long part = eval_part_rows(net, n);
    double total[2] = {0.0, 0.0};
    cnn_status st = CNN_OK;
    for (long at = 0; at < n && st == CNN_OK; at += part) {
        const long m = n - at < part ? n - at : part;
        const cnn_host_array rows = rows_from(net, x, at);
        float *x_dev = NULL;
        void *t_dev = NULL;
        st = alloc_rows(net, m, &x_dev, &t_dev);
        if (st == CNN_OK)
            st = fill_rows(net, m, &rows, sparse ? labels_host + at : NULL,
                           sparse ? NULL : targets_host + (size_t)at * net->loss.k, x_dev, t_dev);
        if (st == CNN_OK)
            st = evaluate_rows(net, m, x_dev, sparse ? t_dev : NULL, sparse ? NULL : t_dev, total);
        if (x_dev) net->be->free(net->ctx, x_dev);
        if (t_dev) net->be->free(net->ctx, t_dev);
    }
    CNN_TRY(st);
    *loss_sum = total[0];
    *correct = total[1];
    return CNN_OK;
}

static void drop_validation(cnn_net *net)
{
    void *blocks[] = {net->val_x, net->val_labels, net->val_targets, net->val_sums};
    for (size_t k = 0; k < sizeof blocks / sizeof blocks[0]; k++)
        if (blocks[k]) net->be->free(net->ctx, blocks[k]);
    net->val_x = NULL;
    net->val_labels = NULL;
    net->val_targets = NULL;
    net->val_sums = NULL;
    net->val_n = 0;
}

/* As many samples as the validation data held: the same blocks are filled
 * again, else new ones are made. A failure drops the validation data. */
cnn_status cnn_net_set_validation(cnn_net *net, long n, const cnn_host_array *x,
                                  const int32_t *labels_host, const float *targets_host)
{
    if (n < 0) return cnn_set_error(CNN_ERR_VALUE, "set_validation needs n >= 0, got %ld", n);
    if (n != net->val_n) drop_validation(net);
    if (n == 0) return CNN_OK;
    CNN_TRY(check_loss_ready(net));
    CNN_TRY(check_targets_given(net, "set_validation", labels_host, targets_host));
    const int sparse = net->loss.kind == CNN_LOSS_SPARSE_CE;
    cnn_status st = CNN_OK;
    if (!net->val_x) {
        float *x_dev = NULL;
        void *t_dev = NULL;
        st = alloc_rows(net, n, &x_dev, &t_dev);
        net->val_x = x_dev;
        if (sparse)
            net->val_labels = t_dev;
        else
            net->val_targets = t_dev;
        if (st == CNN_OK)
            st = net->be->alloc(net->ctx, (void **)&net->val_sums,
                                (size_t)batch_count(net, n) * 2 * sizeof(float));
    }
    net->val_n = n;
    if (st == CNN_OK)
        st = fill_rows(net, n, x, labels_host, targets_host, net->val_x,
                       sparse ? (void *)net->val_labels : (void *)net->val_targets);
    if (st == CNN_OK) st = net->be->synchronize(net->ctx);
    if (st != CNN_OK) drop_validation(net);
    return st;
}

cnn_status cnn_net_evaluate_validation(cnn_net *net, double *loss_sum, double *correct)
{
    if (!net->val_n) return cnn_set_error(CNN_ERR_VALUE, "evaluate_validation needs set_validation first");
    double total[2] = {0.0, 0.0};
    /* (recording the whole pass, one launch an epoch, was measured and
     * dropped: on an H100 the replay took 0.022 s against 0.028 queued, and
     * the capture 0.06 s more, paid back only after ten epochs) */
    CNN_TRY(queue_evaluation(net, net->val_n, net->val_x, net->val_labels, net->val_targets,
                             net->val_sums));
    CNN_TRY(add_batch_sums(net, batch_count(net, net->val_n), net->val_sums, total));
    *loss_sum = total[0];
    *correct = total[1];
    return CNN_OK;
}

/* The outputs of the n rows of x (engine memory, NCHW) in inference mode,
 * max_batch at a time, gathered in out (engine memory, (n, out_count) in
 * Keras order), then one download to y_host. */
static cnn_status predict_rows(cnn_net *net, long n, const float *x, float *out, float *y_host)
{
    const cnn_backend *be = net->be;
    const layer *last = &net->layers[net->n_layers - 1];
    for (long start = 0; start < n; start += net->max_batch) {
        const int m = (int)(n - start < net->max_batch ? n - start : net->max_batch);
        float *dst = out + (size_t)start * last->out_count;
        CNN_TRY(be->copy(net->ctx, net->x, x + (size_t)start * net->in_count,
                         (size_t)m * net->in_count * sizeof(float)));
        CNN_TRY(run_forward(net, PLAN_FORWARD, &(run_args){.n = m}));
        if (last->out_rank == 4)
            CNN_TRY(be->nhwc_from_nchw(net->ctx, m, last->out_h, last->out_w, last->out_c,
                                       last->y, dst));
        else
            CNN_TRY(be->copy(net->ctx, dst, last->y, (size_t)m * last->out_count * sizeof(float)));
    }
    return be->download(net->ctx, y_host, out, (size_t)n * last->out_count * sizeof(float));
}

cnn_status cnn_net_predict(cnn_net *net, long n, const cnn_host_array *x, float *y_host)
{
    if (n < 1) return cnn_set_error(CNN_ERR_VALUE, "predict needs at least one sample, got %ld", n);
    const long part = eval_part_rows(net, n);
    const size_t out_count = net->layers[net->n_layers - 1].out_count;
    float *x_dev = NULL, *out = NULL;
    cnn_status st = net->be->alloc(net->ctx, (void **)&x_dev,
                                   (size_t)part * net->in_count * sizeof(float));
    if (st == CNN_OK) st = net->be->alloc(net->ctx, (void **)&out, (size_t)part * out_count * sizeof(float));
    for (long at = 0; at < n && st == CNN_OK; at += part) {
        const long m = n - at < part ? n - at : part;
        const cnn_host_array rows = rows_from(net, x, at);
        st = upload_samples(net, x_dev, m, &rows);
        if (st == CNN_OK) st = predict_rows(net, m, x_dev, out, y_host + (size_t)at * out_count);
    }
    if (x_dev) net->be->free(net->ctx, x_dev);
    if (out) net->be->free(net->ctx, out);
    return st;
}

/* ------------------------------------------------- resident training data */

static void free_recording(cnn_net *net)
{
    if (net->recording) net->be->recording_free(net->ctx, net->recording);
    net->recording = NULL;
    net->recorded_batch = 0;
}

static void free_data(cnn_net *net)
{
    free_recording(net); /* it reads the data blocks */
    void **blocks[] = {(void **)&net->data_x, (void **)&net->data_labels,
                       (void **)&net->data_targets, (void **)&net->order};
    for (size_t k = 0; k < sizeof blocks / sizeof blocks[0]; k++) {
        if (*blocks[k]) net->be->free(net->ctx, *blocks[k]);
        *blocks[k] = NULL;
    }
    net->data_n = net->order_n = 0;
}

/* n samples of a (the user's layout and type) into dst as float32, NCHW
 * (the layout inside), converted and checked by the engine. */
static cnn_status upload_samples(cnn_net *net, float *dst, long n, const cnn_host_array *a)
{
    return net->be->upload_samples(net->ctx, dst, a, n, net->in_h, net->in_w, net->in_c,
                                   net->transpose_in);
}

/* As many samples as the data held: the same blocks are filled again (a
 * recorded step stays valid: it holds addresses, not values), else new ones
 * are made. The order is dropped either way; a failure drops the data. */
cnn_status cnn_net_set_data(cnn_net *net, long n, const cnn_host_array *x_host,
                            const int32_t *labels_host, const float *targets_host)
{
    if (n < 1) return cnn_set_error(CNN_ERR_VALUE, "set_data needs at least one sample, got %ld", n);
    CNN_TRY(check_loss_ready(net));
    CNN_TRY(check_targets_given(net, "set_data", labels_host, targets_host));
    const int sparse = net->loss.kind == CNN_LOSS_SPARSE_CE;
    cnn_status st = CNN_OK;
    if (net->data_x && net->data_n == n) {
        net->order_n = 0;
    } else {
        free_data(net);
        float *x = NULL;
        void *t = NULL;
        st = alloc_rows(net, n, &x, &t);
        net->data_x = x;
        if (sparse)
            net->data_labels = t;
        else
            net->data_targets = t;
        if (st == CNN_OK) st = net->be->alloc(net->ctx, (void **)&net->order, (size_t)n * sizeof(int32_t));
    }
    net->data_n = n;
    if (st == CNN_OK)
        st = fill_rows(net, n, x_host, labels_host, targets_host, net->data_x,
                       sparse ? (void *)net->data_labels : (void *)net->data_targets);
    if (st != CNN_OK) free_data(net);
    return st;
}

cnn_status cnn_net_set_order(cnn_net *net, const int32_t *order_host)
{
    if (!net->data_x) return cnn_set_error(CNN_ERR_VALUE, "set_order needs set_data first");
    for (long i = 0; i < net->data_n; i++)
        if (order_host[i] < 0 || order_host[i] >= net->data_n)
            return cnn_set_error(CNN_ERR_VALUE,
                                 "order: expected indices in [0, %ld), got %d at position %ld",
                                 net->data_n, (int)order_host[i], i);
    CNN_TRY(net->be->upload(net->ctx, net->order, order_host, (size_t)net->data_n * sizeof(int32_t)));
    net->order_n = net->data_n;
    return CNN_OK;
}

/* This net's share of a batch of m rows: `rows` rows from row `row0` of
 * the batch. Alone, all of it; as replica r of w, the batch cut into w
 * consecutive parts whose sizes differ by at most one, the larger first. */
static void batch_share(const cnn_net *net, int m, int *rows, int64_t *row0)
{
    const int w = net->comm ? net->comm->world : 1, r = net->comm ? net->comm->rank : 0;
    const int part = m / w, extra = m % w;
    *rows = part + (r < extra);
    *row0 = (int64_t)r * part + (r < extra ? r : extra);
}

/* The gradient block summed over the replicas (each holds its share's sum
 * over the whole batch's mean), and the batchnorm moving statistics, which
 * each replica updated from its own share, averaged. Alone: nothing. */
static cnn_status reduce_gradients(cnn_net *net)
{
    cnn_comm *c = net->comm;
    if (!c || c->world == 1) return CNN_OK;
    CNN_TRY(c->allreduce(c, net->ctx, net->grads, net->n_params, CNN_REDUCE_SUM));
    if (net->n_state) CNN_TRY(c->allreduce(c, net->ctx, net->state, net->n_state, CNN_REDUCE_MEAN));
    return CNN_OK;
}

/* One training step of train_range on m rows from the order's current
 * position (the engine's CNN_COUNT_POSITION counter), which it moves on. A
 * replica of a data-parallel group takes its share of the m rows, scales
 * its loss's gradient by the whole batch (so the summed gradients are those
 * of the whole batch's mean) and adds up the gradients with the others. */
static cnn_status range_step(cnn_net *net, int m)
{
    const cnn_backend *be = net->be;
    int sparse = net->loss.kind == CNN_LOSS_SPARSE_CE;
    int mine;
    batch_share(net, m, &mine, &net->row0);
    const int32_t *order = net->order + net->row0;
    if (mine == 0) {
        /* fewer rows than replicas: this one adds nothing, but takes the
         * step with the others (its forward count moves on as theirs do) */
        CNN_TRY(be->zero(net->ctx, net->grads, net->n_params * sizeof(float)));
        CNN_TRY(be->advance_counters(net->ctx, net->counters, 1, 0, 0));
        net->train_forwards++;
        net->last_n = 0;
    } else {
        /* the rows (already NCHW) and their targets, and the counters moved
         * on for the whole step: one launch on a GPU (with gather_im2col,
         * the rows as the first convolution's column matrix) */
        const size_t t_bytes = sparse ? sizeof(int32_t) : (size_t)net->loss.k * sizeof(float);
        const void *src_t = sparse ? (const void *)net->data_labels
                                   : (const void *)net->data_targets;
        void *dst_t = sparse ? (void *)net->labels : (void *)net->targets;
        if (net->gather_im2col) {
            cnn_conv_desc d = net->layers[0].conv;
            d.n = mine;
            CNN_TRY(be->gather_batch_im2col(net->ctx, order, net->counters, mine, m,
                                            net->in_count * sizeof(float), net->data_x, net->x,
                                            t_bytes, src_t, dst_t, &d, net->layers[0].ws));
        } else {
            CNN_TRY(be->gather_batch(net->ctx, order, net->counters, mine, m,
                                     net->in_count * sizeof(float), net->data_x, net->x,
                                     t_bytes, src_t, dst_t));
        }
        CNN_TRY(train_pass(net, mine, m, 1, net->run_sums));
    }
    net->row0 = 0;
    CNN_TRY(reduce_gradients(net));
    return optimizer_step(net, m, mine > 0);
}

/* CNNCUDA_GRAPHS=0 in the environment turns recording off (every step is
 * then queued one kernel at a time, as before it existed). */
static int recording_wanted(const cnn_net *net)
{
    if (!net->be->capture_begin) return 0;
    const char *env = getenv("CNNCUDA_GRAPHS");
    return !(env && strcmp(env, "0") == 0);
}

/* Records one step of `batch` rows: the step is queued on the engine's
 * stream in capture mode, so nothing runs; the host's counters are put back
 * as they were. */
static cnn_status record_step(cnn_net *net, int batch)
{
    free_recording(net);
    long steps = net->steps, forwards = net->train_forwards;
    CNN_TRY(net->be->capture_begin(net->ctx));
    cnn_status st = range_step(net, batch);
    void *rec = NULL;
    cnn_status end = net->be->capture_end(net->ctx, &rec);
    net->steps = steps;
    net->train_forwards = forwards;
    net->last_n = 0;
    if (st != CNN_OK) {
        if (rec) net->be->recording_free(net->ctx, rec);
        return st;
    }
    CNN_TRY(end);
    net->recording = rec;
    net->recorded_batch = batch;
    return CNN_OK;
}

static cnn_status train_range(cnn_net *net, long start, long count, int batch);

/* A replica whose range fails tells the others (they would wait for its
 * gradients forever), keeping its own error as the one reported. */
cnn_status cnn_net_train_range(cnn_net *net, long start, long count, int batch)
{
    cnn_status st = train_range(net, start, count, batch);
    if (st != CNN_OK && net->comm) {
        char why[400];
        snprintf(why, sizeof why, "rank %d failed: %s", net->comm->rank, cnn_last_error());
        char mine[1024];
        snprintf(mine, sizeof mine, "%s", cnn_last_error());
        net->comm->abort(net->comm, why);
        cnn_set_error(st, "%s", mine);
    }
    return st;
}

static cnn_status train_range(cnn_net *net, long start, long count, int batch)
{
    if (!net->order_n) return cnn_set_error(CNN_ERR_VALUE, "train_range needs set_data and set_order first");
    if (net->comm && batch >= 1) {
        const int w = net->comm->world;
        if ((batch + w - 1) / w > net->max_batch)
            return cnn_set_error(CNN_ERR_VALUE,
                                 "batch size %d over %d replicas needs %d samples per replica, "
                                 "more than the max_batch %d this replica was built for",
                                 batch, w, (batch + w - 1) / w, net->max_batch);
    } else {
        CNN_TRY(check_batch(net, batch));
    }
    /* count > order_n - start, not start + count > order_n: that may overflow */
    if (start < 0 || count < 1 || count > net->order_n - start)
        return cnn_set_error(CNN_ERR_VALUE,
                             "train_range: expected 0 <= start and 1 <= count with start + count "
                             "<= %ld, got start %ld count %ld",
                             net->order_n, start, count);
    const cnn_backend *be = net->be;
    if (net->position < 0) {
        int64_t zero = 0;
        CNN_TRY(be->upload(net->ctx, net->counters + CNN_COUNT_POSITION, &zero, sizeof zero));
        net->position = 0;
    }
    CNN_TRY(be->advance_counters(net->ctx, net->counters, 0, 0, start - net->position));
    net->position = -1; /* until the range is queued whole */
    int timed = be->timer_mark != NULL;
    net->timed = 0;
    if (timed) CNN_TRY(be->timer_mark(net->ctx, 0));
    long full = count / batch;
    if (full >= 2 && recording_wanted(net)) {
        /* the first step runs as usual (an engine may choose algorithms or
         * set things up on first use, which a recording must not contain),
         * the rest are replays of one recorded step */
        if (net->recorded_batch != batch) {
            CNN_TRY(range_step(net, batch));
            full--;
            CNN_TRY(record_step(net, batch));
        }
        CNN_TRY(be->replay(net->ctx, net->recording, full));
        net->steps += full;
        net->train_forwards += full;
        full = 0;
    }
    for (long i = 0; i < full; i++) CNN_TRY(range_step(net, batch));
    if (count % batch) CNN_TRY(range_step(net, (int)(count % batch)));
    net->position = start + count;
    if (timed) {
        CNN_TRY(be->timer_mark(net->ctx, 1));
        net->timed = 1;
    }
    return CNN_OK;
}

/* Seconds the engine spent on the last train_range, on its own clock; -1
 * where the engine has no clock or no range was timed. */
cnn_status cnn_net_range_seconds(cnn_net *net, double *seconds)
{
    *seconds = -1.0;
    if (!net->timed || !net->be->timer_elapsed) return CNN_OK;
    return net->be->timer_elapsed(net->ctx, seconds);
}

/* Bytes of engine memory this network holds: its buffers (workspaces
 * included) and the resident training and validation data. */
size_t cnn_net_memory_bytes(const cnn_net *net)
{
    const size_t row = net->in_count * sizeof(float) +
                       (net->loss.kind == CNN_LOSS_SPARSE_CE ? sizeof(int32_t)
                                                             : (size_t)net->loss.k * sizeof(float));
    size_t data = (size_t)net->data_n * (row + sizeof(int32_t));
    if (net->val_n) data += (size_t)net->val_n * row + (size_t)batch_count(net, net->val_n) * 2 * sizeof(float);
    return net->planned + data;
}

cnn_status cnn_net_read_sums(cnn_net *net, int reset, double *loss_sum, double *correct)
{
    float sums[2];
    /* a replica's engine may be waiting for a peer: wait in a way that an
     * abort or the timeout ends */
    if (net->comm) CNN_TRY(net->comm->wait(net->comm, net->ctx));
    CNN_TRY(net->be->download(net->ctx, sums, net->run_sums, sizeof sums));
    *loss_sum = sums[0];
    *correct = sums[1];
    if (reset) CNN_TRY(net->be->zero(net->ctx, net->run_sums, 2 * sizeof(float)));
    return CNN_OK;
}

/* ------------------------------------------------------- data parallel */

static cnn_status refuse_replica(const cnn_net *net, const char *what)
{
    return cnn_set_error(CNN_ERR_VALUE,
                         "%s: this network is replica %d of %d of a data-parallel group; it "
                         "trains with train_range (fit), on every replica at once",
                         what, net->comm->rank, net->comm->world);
}

cnn_status cnn_net_set_comm(cnn_net *net, cnn_comm *comm)
{
    free_recording(net); /* a recorded step holds the old group's calls, or none */
    if (!comm) {
        net->comm = NULL;
        return CNN_OK;
    }
    const int host_engine = net->be->activate == NULL;
    const int host_comm = strcmp(comm->kind, "host") == 0;
    if (host_engine != host_comm)
        return cnn_set_error(CNN_ERR_VALUE,
                             "comm: the %s engine's replicas need %s communicator, got a '%s' "
                             "one",
                             net->be->name, host_engine ? "a 'host'" : "an 'nccl'", comm->kind);
    if (!host_comm && comm->device != net->ctx->device)
        return cnn_set_error(CNN_ERR_VALUE,
                             "comm: expected a communicator on this network's CUDA device %d, "
                             "got one on device %d",
                             net->ctx->device, comm->device);
    /* First a barrier that checks every rank built a network of the same
     * sizes (the broadcasts below, and NCCL's all-reduces, need that): the
     * sizes mod 65521 summed over at most 256 ranks stay exact in float. */
    if (comm->world > 256)
        return cnn_set_error(CNN_ERR_VALUE, "comm: at most 256 replicas, got %d", comm->world);
    const float check[2] = {(float)(net->n_params % 65521), (float)(net->n_state % 65521)};
    float sum[2];
    CNN_TRY(net->be->upload(net->ctx, net->sums, check, sizeof check));
    CNN_TRY(comm->allreduce(comm, net->ctx, net->sums, 2, CNN_REDUCE_SUM));
    CNN_TRY(comm->wait(comm, net->ctx));
    CNN_TRY(net->be->download(net->ctx, sum, net->sums, sizeof sum));
    if (sum[0] != check[0] * (float)comm->world || sum[1] != check[1] * (float)comm->world) {
        comm->abort(comm, "the ranks built networks of different sizes");
        return cnn_set_error(CNN_ERR_VALUE,
                             "comm: the ranks built networks of different sizes (this one: %zu "
                             "parameters, %zu state values): are all ranks training the same "
                             "model?",
                             net->n_params, net->n_state);
    }
    /* every replica starts from rank 0's weights, state and optimizer moments */
    float *blocks[] = {net->params, net->state, net->opt_m, net->opt_v};
    size_t counts[] = {net->n_params, net->n_state, net->n_params, net->n_params};
    for (int k = 0; k < 4; k++)
        if (blocks[k] && counts[k])
            CNN_TRY(comm->broadcast(comm, net->ctx, blocks[k], counts[k]));
    CNN_TRY(comm->wait(comm, net->ctx));
    net->comm = comm;
    return CNN_OK;
}

cnn_status cnn_net_reduce_sums(cnn_net *net)
{
    if (!net->comm) return CNN_OK;
    return net->comm->allreduce(net->comm, net->ctx, net->run_sums, 2, CNN_REDUCE_SUM);
}

cnn_status cnn_net_activate(cnn_net *net)
{
    return net->be->activate ? net->be->activate(net->ctx) : CNN_OK;
}
