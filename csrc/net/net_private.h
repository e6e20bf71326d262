/* net_private.h: the Net (struct cnn_net) and what the files of csrc/net
 * share: its layers, its step plans, and the functions one file gives
 * another. cnn.h is the public side.
 *
 * A Sequential network on one backend.
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
#ifndef CNN_NET_PRIVATE_H
#define CNN_NET_PRIVATE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cnn.h"
#include "comm.h"
#include "switches.h"

/* The engine's fused op `op` (backend_table.h), or NULL where it has none:
 * what a planning rule asks before it plans the op (the steps then call
 * be->fused->op). */
#define FUSED(be, op) ((be)->fused ? (be)->fused->op : NULL)

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
    cnn_prelu_desc prelu;       /* .n set per call */
    cnn_act_desc act;           /* an activation layer's kind and parameters */
    size_t w_off, b_off;        /* in params and grads */
    size_t alpha_off;           /* PReLU: in params and grads */
    size_t gamma_off, beta_off; /* in params and grads */
    size_t mean_off, var_off;   /* in state */
    float *y;                   /* output (max_batch, out_count) */
    void *ws;                   /* convolution: this layer's workspace */
    int32_t *argmax;            /* max pooling: (max_batch, out_count) */
    float *save_mean, *save_invstd; /* batchnorm: (c) */
    float *rescale;             /* rescaling: (2 c) the scales then the offsets per channel */
    uint64_t dropout_key;
    cnn_aug_desc aug;           /* augmentation layers: .n set per call */
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
    /* the layers whose outputs it reads (-1: the network's input): layer
     * i - 1 alone in a chain (cnn_layer_spec.inputs) */
    int n_in;
    int in[CNN_MAX_INPUTS];
    /* a graph's Net (net->graph): the gradient of its output, summed over
     * the layers that read it (graph.c); the last layer's is grad_a */
    float *dy;
} layer;

/* One step of a plan (plan_steps): one call of the engine over layers
 * [layer, last] going forward (last >= layer) or backward (last <= layer). */
typedef enum step_kind {
    /* forward */
    STEP_CONV_FORWARD, STEP_CONV_FORWARD_RELU, STEP_CONV_FORWARD_COL,
    STEP_CONV_FORWARD_COL_RELU, STEP_POOL_FORWARD,
    STEP_FLATTEN_FORWARD, STEP_DENSE_FORWARD, STEP_DENSE_FORWARD_RELU,
    STEP_ACTIVATION_FORWARD, STEP_DROPOUT_FORWARD, STEP_BATCHNORM_FORWARD,
    STEP_AUGMENT_FORWARD, /* an augmentation layer (no backward: see aug_floor) */
    STEP_PRELU_FORWARD,
    STEP_SHAPE_FORWARD, /* a shape or image layer's (cnn.h CNN_LAYER_SHAPE_FIRST ...) */
    STEP_ADD_FORWARD, STEP_CONCAT_FORWARD,
    STEP_INPUT_SLICE, /* an input of several (no backward: see aug_floor) */
    /* a training step's loss, its gradient into grad_a */
    STEP_LOSS, STEP_SOFTMAX_LOSS, STEP_DENSE_LOSS_HEAD,
    /* backward */
    STEP_CONV_BACKWARD_FILTER, STEP_CONV_BACKWARD_DATA, STEP_CONV_BACKWARD_DATA_POOL,
    STEP_CONV_BACKWARD_DATA_POOL_RELU, STEP_POOL_BACKWARD, STEP_POOL_BACKWARD_RELU,
    STEP_FLATTEN_BACKWARD, STEP_DENSE_BACKWARD_FILTER, STEP_DENSE_BACKWARD_DATA,
    STEP_ACTIVATION_BACKWARD, STEP_ACTIVATION_BACKWARD_BIAS, STEP_DROPOUT_BACKWARD,
    STEP_BATCHNORM_BACKWARD, STEP_PRELU_BACKWARD,
    STEP_SHAPE_BACKWARD,
    /* a graph's: the gradient of one input of an Add or a Concatenate */
    STEP_ADD_BACKWARD, STEP_CONCAT_BACKWARD,
} step_kind;

typedef struct step {
    step_kind kind;
    int layer, last;
    int with_db; /* a backward_filter writes the bias gradient */
    int swap;    /* backward: dy and dx change places after it */
    /* a graph's backward (graph.c): the input (0 .. n_in - 1) whose gradient
     * the step writes, and whether a step before it has written that
     * gradient already (another layer reads the same output): then it is
     * written to grad_b and added on */
    int input, acc;
    char name[48]; /* "conv2d_0.forward+relu" */
} step;

typedef struct step_plan {
    int n;
    step *steps; /* ((CNN_MAX_INPUTS + 2) * n_layers + 1), host memory */
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

/* Whether a step's counters (the engine's forward count, step count and
 * data position, cnn.h CNN_COUNT_*) are still to be moved on by the step,
 * or were already, by its gather_batch (one launch for them all). */
typedef enum counters_state { COUNTERS_TO_MOVE = 0, COUNTERS_MOVED = 1 } counters_state;

/* What one run of a forward plan is given (run_forward). */
typedef struct run_args {
    int n;        /* samples */
    int training; /* a training forward (dropout on, batchnorm's batch statistics) */
    counters_state counted;
    int scale_n;  /* the loss's gradient is that of the mean over scale_n samples */
    float *sums;  /* the loss's sums (n_sums: 2, more with several outputs) */
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
    /* the optimizer's slot blocks (n_params each, NULL where it keeps
     * fewer): Adam-like m and v (Adamax: m and u; Adadelta: its two
     * accumulators), SGD's velocity and Adagrad's accumulator in opt_m;
     * RMSprop's velocity, momentum and average gradient in opt_m, opt_v,
     * opt_a */
    float *params, *grads, *opt_m, *opt_v, *opt_a, *state;
    float *x_stage;  /* (max_batch, in_count), the user's layout */
    float *x;        /* (max_batch, in_count), NCHW; == x_stage for (N, F) */
    int transpose_in; /* the input's NHWC and NCHW differ (images of more than
                         one channel and pixel): x_stage is transposed into x */
    float *y_stage;  /* (max_batch, max of in/out count), Keras layout */
    float *grad_a, *grad_b; /* (max_batch, largest activation) */
    int32_t *labels; /* (max_batch, loss positions) */
    float *targets;  /* (max_batch, loss positions, k): NHWC rows */
    float *sums;     /* (n_sums): loss sum, correct of one call */
    float *run_sums; /* (n_sums): running sums of train_range, read by read_sums */

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
    float *val_sums;       /* (n_sums per batch of max_batch) */

    long steps;          /* optimizer steps taken */
    long train_forwards; /* training forwards run: keys dropout */
    int last_n;          /* batch of the last training forward, 0 if none */
    /* (CNN_COUNTERS) the engine's copy of the counters, which a step reads
     * (cnn.h): steps and train_forwards above are the host's, kept equal */
    int64_t *counters;
    /* (CNN_HYPERS) the engine's copy of opt's hyperparameters, which a
     * step reads (cnn.h); cnn_net_set_optimizer changes both; then the
     * dynamic loss scaling's state (CNN_HYPER_SKIP ...) */
    float *hyper;
    /* spec.loss_scale > 0: the loss's gradient is scaled, the gradients
     * checked and unscaled, and a step of gradients not finite skipped, all
     * in the engine (csrc/net/run.c); net->steps is then not the count
     * (counters[STEPS] is: cnn_net_step_count reads it) */
    int loss_scaling;
    /* the engine's CNN_COUNT_POSITION as the host knows it, so that a range
     * moves it with advance_counters (a launch) rather than an upload (a
     * copy from host memory, which may wait for the engine); -1: unknown */
    long position;

    /* GPU engines: one training step of train_range recorded (a CUDA
     * graph) for batch `recorded_batch`, replayed for every full batch */
    void *recording;
    int recorded_batch;
    int timed; /* a train_range was timed: timer_elapsed has a value */
    /* during cnn_net_profile only: the marks of the step being profiled
     * (the plans' loops mark each step while it is set) */
    struct net_profile *prof;

    int n_weights;
    cnn_weight_info *weights;

    /* data parallel (cnn_net_set_comm): this net is replica comm->rank of
     * comm->world; NULL when alone. row0 is the number, in the whole batch,
     * of the first row this net holds (dropout numbers its masks by it). */
    struct cnn_comm *comm;
    int64_t row0;

    /* 1 + the index of the last augmentation layer, 0 without one: the
     * layers below it have no weights (shapes.c refuses an augmentation
     * layer after one), so a backward that does not want the input's
     * gradient stops there (plan_backward), and one that does is refused */
    int aug_floor;

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

    /* the layers form a graph, not a chain (a layer reads another than the
     * one before it, several layers, or an output another reads too): no
     * fusion is planned, and the backward runs graph.c's plan, each layer's
     * gradient in its own buffer (layer.dy); grad_x, (max_batch, in_count),
     * the input's gradient */
    int graph;
    float *grad_x;

    /* several outputs (cnn_net_spec.n_parts > 0; loss_parts.c): each
     * output's loss and the source layer it reads (input j of the last
     * layer, a concatenation), its values' offset in the packed output row
     * and its targets' in the packed target row; net->loss is then a float
     * loss of k = the packed target row's width that nothing computes (the
     * targets' staging, gather and checks take it as any float targets).
     * part_t, part_labels, part_dy: one output's targets, labels and
     * gradient at a time (max_batch rows of the widest); part_scale: each
     * output's loss weight, k times (rescale's per-channel scale). The
     * sums of a call are then n_sums = 2 + 2 n_parts floats: the
     * regularizers' penalty and 0, then each output's loss and correct
     * sums; part_sums those of the last call read back (net_take_sums). */
    int n_parts;
    cnn_loss_part parts[CNN_MAX_OUTPUTS];
    int part_src[CNN_MAX_OUTPUTS];
    size_t part_y_off[CNN_MAX_OUTPUTS], part_t_off[CNN_MAX_OUTPUTS];
    size_t part_scale_off[CNN_MAX_OUTPUTS];
    float *part_t, *part_dy, *part_scale;
    int32_t *part_labels;
    int n_sums;
    double part_sums[2 * CNN_MAX_OUTPUTS];

    int counting;   /* net_alloc only adds up bytes in planned (cnn_net_create) */
    size_t planned;
};

/* Every weight, and a convolution's column height c*kh*kw, must fit the
 * kernels' int sizes. Counted in double: the product of three ints can
 * overflow 64 bits. */
#define CNN_MAX_COUNT ((double)INT32_MAX)

/* shapes.c: layer shapes and parameter counts */
const char *net_kind_name(int kind);
cnn_status net_plan_layer(cnn_net *net, int i, size_t *n_params, size_t *n_state);
/* augment.c: an augmentation layer's checks, shape and descriptor, given
 * the parameters and state of the layers before it */
cnn_status net_plan_augment(cnn_net *net, int i, size_t n_params, size_t n_state);

/* weights.c: the weights, their layouts, the optimizer */
cnn_status net_initialize_weights(cnn_net *net);
void net_list_weights(cnn_net *net);
size_t net_weight_offset(const cnn_net *net, int i);
cnn_status net_regularize(cnn_net *net, float scale, float *grads, float *sums);
cnn_status net_upload_hyper(cnn_net *net);
cnn_status net_loss_unscale(cnn_net *net);

/* create.c: making and destroying a Net */
cnn_status net_validate_optimizer(const cnn_optimizer_desc *o);

/* plan.c: the switches, the planning rules and the step plans */
cnn_status net_plan_switches(cnn_switches *sw);
void net_plan_flatten(cnn_net *net);
cnn_status net_plan(cnn_net *net);

/* shape_steps.c: the forward and backward of the shape and image layers;
 * the rescaling layers' per-channel values, uploaded once when a Net is made */
cnn_status net_shape_upload(cnn_net *net);
cnn_status net_shape_forward(cnn_net *net, const layer *L, int n, int training, const float *x,
                             float *y);
cnn_status net_shape_backward(cnn_net *net, const layer *L, int n, const float *dy, float *dx);

/* run.c: running the plans: forward, backward, a training step */
cnn_status net_check_batch(const cnn_net *net, long n);
cnn_status net_check_loss_ready(const cnn_net *net);
cnn_loss_forward_backward_fn *net_loss_op(const cnn_net *net);
cnn_status net_loss_rows(cnn_net *net, int n, int scale_n, float *dy, float *sums);

/* The target elements of one sample (int32 labels or float targets: 4
 * bytes each): a label or a row of k targets per loss position. */
static inline size_t net_target_elems(const cnn_net *net)
{
    const size_t p = net->loss.positions > 1 ? (size_t)net->loss.positions : 1;
    if (net->loss.kind == CNN_LOSS_SPARSE_CE) return p;
    return p * (size_t)net->loss.k + (net->loss.weighted != 0); /* then the weight */
}
cnn_status net_loss_device(cnn_net *net, int n, float *sums);
/* loss_parts.c: several outputs (net->n_parts > 0) */
cnn_status net_parts_setup(cnn_net *net);
cnn_status net_parts_upload(cnn_net *net);
size_t net_part_target_width(const cnn_loss_part *p);
cnn_status net_loss_parts(cnn_net *net, int n, int scale_n, float *dy, float *sums);
/* the float sums s (n_sums) of a call added into total (the loss, the
 * correct count: with several outputs the weighted sum of their losses
 * plus s[0]) and, with several outputs, into parts (2 n_parts) */
void net_take_sums(const cnn_net *net, const float *s, double total[2], double *parts);
cnn_status net_optimizer_step(cnn_net *net, long rows, counters_state counted);
cnn_status net_run_forward(cnn_net *net, plan_kind which, const run_args *r);
cnn_status net_train_pass(cnn_net *net, const run_args *r);
cnn_status net_stage_batch(cnn_net *net, int n, const float *x_host, const int32_t *labels_host,
                           const float *targets_host);

/* profile.c: a mark of the profiled step's clock before the step named `next`
 * (NULL: the end) */
typedef struct net_profile net_profile;
cnn_status net_profile_mark(cnn_net *net, const char *next);

/* evaluate.c: evaluate, validation, predict */
cnn_status net_alloc_rows(cnn_net *net, long n, float **x_dev, void **t_dev);
long net_batch_count(const cnn_net *net, long n);
cnn_status net_check_targets_given(const cnn_net *net, const char *what,
                                   const int32_t *labels_host, const float *targets_host);
cnn_status net_fill_rows(cnn_net *net, long n, const cnn_host_array *x,
                         const int32_t *labels_host, const float *targets_host, float *x_dev,
                         void *t_dev);

/* fit.c: resident data and train_range */
void net_free_recording(cnn_net *net);
cnn_status net_upload_samples(cnn_net *net, float *dst, long n, const cnn_host_array *a);
cnn_status net_train_range(cnn_net *net, long start, long count, int batch);

/* The output that input k of layer i reads: the network's input (NCHW) or
 * a layer's. */
static inline float *net_layer_input(const cnn_net *net, int i, int k)
{
    const int j = net->layers[i].in[k];
    return j < 0 ? net->x : net->layers[j].y;
}

/* Whether the network has several inputs: its first layers are their
 * input_slice layers (shapes.c). */
static inline int net_has_slices(const cnn_net *net)
{
    return net->n_layers > 0 && net->layers[0].spec.kind == CNN_LAYER_INPUT_SLICE;
}

/* graph.c: a graph's inputs, checks, and backward */
int net_graph_weights_above(const cnn_net *net, int i);
cnn_status net_graph_inputs(cnn_net *net, int i);
cnn_status net_graph_plan(cnn_net *net);
cnn_status net_graph_plan_backward(const cnn_net *net, step_plan *p, int want_dx);
/* run.c: the backward of one layer's unfused step (see there). */
cnn_status net_backward_step(cnn_net *net, const step *st, int n, const float *in,
                             const float *dy, float *dx);
cnn_status net_graph_backward(cnn_net *net, plan_kind which, float **dx_out);
cnn_status net_concat_forward(cnn_net *net, int i, int n, float *y);

/* replica.c: data parallel */
cnn_status net_refuse_replica(const cnn_net *net, const char *what);

#endif
