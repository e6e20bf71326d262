/* plan.c: the Net's switches (net_plan_switches, read once when it is made),
 * the planning rules (which fused entry runs where) and the step plans a
 * Net makes once: the lists run.c executes. */
#include "net_private.h"

/* The Net's switches (csrc/switches.c), read once, when it is made: the
 * planning rules below read the fusions', the recording of a step (fit.c)
 * reads graphs. CNNCUDA_FUSE=0 also turns the dense fusions off. */
cnn_status net_plan_switches(cnn_switches *sw)
{
    CNN_TRY(cnn_switches_read(sw));
    sw->fuse_dense = sw->fuse && sw->fuse_dense;
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
    return net->sw.fuse_dense && FUSED(net->be, dense_forward_relu) && i + 1 < top &&
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
    if (!net->sw.fuse_dense || !FUSED(net->be, activation_backward_bias) || i < 0 || i + 1 > top ||
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
    if (!FUSED(net->be, dense_loss_head) || !net->sw.fuse_head) return;
    /* loss scaling multiplies the loss's gradient, which the head never writes */
    if (net->loss_scaling) return;
    if (net->loss.kind != CNN_LOSS_SPARSE_CE && net->loss.kind != CNN_LOSS_CATEGORICAL_CE) return;
    if (net->loss.positions > 1) return;
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
        L->pool_col = net->sw.fuse_pool_col2im && FUSED(net->be, conv2d_backward_data_pool) &&
                      L->spec.kind == CNN_LAYER_CONV2D &&
                      (P->spec.kind == CNN_LAYER_MAXPOOL || P->spec.kind == CNN_LAYER_AVGPOOL) &&
                      p->ph <= p->sh && p->pw <= p->sw && p->pad_top >= 0 && p->pad_left >= 0;
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
    return net->sw.fuse_softmax && FUSED(net->be, softmax_loss_forward_backward) &&
           s->kind == CNN_LAYER_ACTIVATION && s->activation == CNN_ACT_SOFTMAX &&
           !net->loss.from_logits && net->loss.positions <= 1 &&
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
 * fused_softmax_loss) that puts one step where two would
 * be. */

static const char *step_suffix(step_kind k)
{
    switch (k) {
    case STEP_CONV_FORWARD: return "forward";
    case STEP_CONV_FORWARD_RELU: return "forward+relu";
    case STEP_CONV_FORWARD_COL: return "forward_col";
    case STEP_CONV_FORWARD_COL_RELU: return "forward_col+relu";
    case STEP_POOL_FORWARD: return "forward";
    case STEP_FLATTEN_FORWARD: return "forward";
    case STEP_DENSE_FORWARD: return "forward";
    case STEP_DENSE_FORWARD_RELU: return "forward+relu";
    case STEP_ACTIVATION_FORWARD: return "forward";
    case STEP_DROPOUT_FORWARD: return "forward";
    case STEP_BATCHNORM_FORWARD: return "forward";
    case STEP_AUGMENT_FORWARD: return "forward";
    case STEP_PRELU_FORWARD: return "forward";
    case STEP_SHAPE_FORWARD: return "forward";
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
    case STEP_PRELU_BACKWARD: return "backward";
    case STEP_SHAPE_BACKWARD: return "backward";
    case STEP_ADD_FORWARD: return "forward";
    case STEP_CONCAT_FORWARD: return "forward";
    case STEP_INPUT_SLICE: return "forward";
    case STEP_ADD_BACKWARD: return "backward";
    case STEP_CONCAT_BACKWARD: return "backward";
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
    snprintf(s->name, sizeof s->name, "%s_%d.%s", net_kind_name(net->layers[i].spec.kind), i,
             step_suffix(k));
    return s;
}

/* What a forward plan covers: layers [0, top); from_col, the first
 * convolution starts from its column matrix (gather_batch_im2col wrote it);
 * with_loss, the training step's loss (and the head, where plan_head chose
 * it) follows. */
typedef struct forward_span {
    int top;
    int from_col;
    int with_loss;
} forward_span;

/* What a backward plan covers: layers top, ..., 0; top_db, layer top is a
 * dense layer whose bias gradient is written already (the head's
 * db_below); want_dx, the input gradient is wanted. */
typedef struct backward_span {
    int top;
    int top_db;
    int want_dx;
} backward_span;

static void plan_forward(const cnn_net *net, step_plan *p, forward_span span)
{
    const cnn_backend *be = net->be;
    const int top = span.top;
    p->n = 0;
    for (int i = 0; i < top; i++) {
        const layer *L = &net->layers[i];
        const int col = span.from_col && i == 0; /* gather_batch_im2col wrote it */
        switch (L->spec.kind) {
        case CNN_LAYER_CONV2D: {
            const int relu = FUSED(be, conv2d_forward_relu) && i + 1 < top && fusable_relu(net, i + 1);
            const step_kind k = col ? (relu ? STEP_CONV_FORWARD_COL_RELU : STEP_CONV_FORWARD_COL)
                                    : (relu ? STEP_CONV_FORWARD_RELU : STEP_CONV_FORWARD);
            add_step(net, p, k, i, i + relu);
            i += relu;
            break;
        }
        case CNN_LAYER_MAXPOOL:
        case CNN_LAYER_AVGPOOL:
            add_step(net, p, STEP_POOL_FORWARD, i, i);
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
        case CNN_LAYER_RESCALING:
        case CNN_LAYER_RESHAPE:
        case CNN_LAYER_ZERO_PADDING:
        case CNN_LAYER_CROPPING:
        case CNN_LAYER_UPSAMPLING:
        case CNN_LAYER_SPATIAL_DROPOUT:
            add_step(net, p, STEP_SHAPE_FORWARD, i, i);
            break;
        case CNN_LAYER_PRELU: add_step(net, p, STEP_PRELU_FORWARD, i, i); break;
        case CNN_LAYER_ADD: add_step(net, p, STEP_ADD_FORWARD, i, i); break;
        case CNN_LAYER_CONCAT: add_step(net, p, STEP_CONCAT_FORWARD, i, i); break;
        case CNN_LAYER_INPUT_SLICE: add_step(net, p, STEP_INPUT_SLICE, i, i); break;
        default:
            if (cnn_layer_is_augment(L->spec.kind)) add_step(net, p, STEP_AUGMENT_FORWARD, i, i);
            break;
        }
    }
    if (!span.with_loss) return;
    if (net->head >= 0)
        add_step(net, p, STEP_DENSE_LOSS_HEAD, net->head, net->n_layers - 1);
    else if (top < net->n_layers) /* fused_softmax_loss */
        add_step(net, p, STEP_SOFTMAX_LOSS, net->n_layers - 1, net->n_layers - 1);
    else
        add_step(net, p, STEP_LOSS, net->n_layers - 1, net->n_layers - 1);
}

/* The backward over a span (see run_backward). */
static void plan_backward(const cnn_net *net, step_plan *p, backward_span span)
{
    const cnn_backend *be = net->be;
    const int top = span.top, top_db = span.top_db, want_dx = span.want_dx;
    /* below an augmentation layer no layer has weights: no gradient is
     * wanted there unless the input's is (which cnn_net_backward refuses) */
    const int floor = want_dx ? 0 : net->aug_floor;
    p->n = 0;
    for (int i = top; i >= floor; i--) {
        const layer *L = &net->layers[i];
        const cnn_layer_spec *s = &L->spec;
        const int need_dx = i > floor || want_dx;
        step *st = NULL; /* the step after which dy and dx change places */
        switch (s->kind) {
        case CNN_LAYER_CONV2D: {
            add_step(net, p, STEP_CONV_BACKWARD_FILTER, i, i)->with_db = s->use_bias;
            if (!need_dx) break;
            /* and the backward of the pool before it, in one call, where
             * plan_pool_col chose it and the pool's backward would run (as in
             * the pool's case below: with the ReLU before the pool where fused) */
            const int pool = L->pool_col;
            const int relu = pool && FUSED(be, pool_backward_relu) && fusable_relu(net, i - 2);
            if (pool && (relu || i - 1 > floor || want_dx)) {
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
            if (FUSED(be, pool_backward_relu) && fusable_relu(net, i - 1)) {
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
        case CNN_LAYER_PRELU:
            /* always run: it also writes dalpha (dx only where need_dx: swap) */
            st = add_step(net, p, STEP_PRELU_BACKWARD, i, i);
            break;
        case CNN_LAYER_RESCALING:
        case CNN_LAYER_RESHAPE:
        case CNN_LAYER_ZERO_PADDING:
        case CNN_LAYER_CROPPING:
        case CNN_LAYER_UPSAMPLING:
        case CNN_LAYER_SPATIAL_DROPOUT: /* no weights: only the input gradient */
            if (need_dx) st = add_step(net, p, STEP_SHAPE_BACKWARD, i, i);
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
        net->plans[k].steps = calloc((CNN_MAX_INPUTS + 2) * (size_t)n + 1, sizeof(step));
        if (!net->plans[k].steps)
            return cnn_set_error(CNN_ERR_MEMORY, "out of host memory creating a network");
    }
    plan_forward(net, &net->plans[PLAN_FORWARD], (forward_span){.top = n});
    plan_forward(net, &net->plans[PLAN_TRAIN_FORWARD],
                 (forward_span){.top = train_top, .with_loss = 1});
    plan_forward(net, &net->plans[PLAN_TRAIN_FORWARD_GATHERED],
                 (forward_span){.top = train_top, .from_col = net->gather_im2col,
                                .with_loss = 1});
    if (net->graph) { /* graph.c: every layer, no fusion planned */
        CNN_TRY(net_graph_plan_backward(net, &net->plans[PLAN_TRAIN_BACKWARD], 0));
        CNN_TRY(net_graph_plan_backward(net, &net->plans[PLAN_BACKWARD], 0));
        return net_graph_plan_backward(net, &net->plans[PLAN_BACKWARD_DX], 1);
    }
    plan_backward(net, &net->plans[PLAN_TRAIN_BACKWARD],
                  (backward_span){.top = train_below,
                                  .top_db = net->head >= 0 && net->head_db_below});
    plan_backward(net, &net->plans[PLAN_BACKWARD], (backward_span){.top = n - 1});
    plan_backward(net, &net->plans[PLAN_BACKWARD_DX],
                  (backward_span){.top = n - 1, .want_dx = 1});
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

/* A Flatten followed by a Dense layer (sw.fuse_flatten): the Flatten is no
 * step (layer.alias_in: its output is its input's buffer) and the dense
 * kernel's rows take the NCHW order instead of the Flatten transposing to
 * NHWC (layer.rows_c, rows_hw). Planned with the shapes, before the
 * buffers are sized. */
void net_plan_flatten(cnn_net *net)
{
    for (int i = 0; net->sw.fuse_flatten && i + 1 < net->n_layers; i++) {
        layer *F = &net->layers[i], *D = &net->layers[i + 1];
        if (F->spec.kind != CNN_LAYER_FLATTEN || D->spec.kind != CNN_LAYER_DENSE) continue;
        F->alias_in = 1;
        if (F->in_c > 1 && (size_t)F->in_h * F->in_w > 1) {
            D->rows_c = F->in_c;
            D->rows_hw = F->in_h * F->in_w;
        }
    }
}

/* Every other planning rule, then every plan, of a Net whose layers and engine
 * context are made (cnn_net_create). */
cnn_status net_plan(cnn_net *net)
{
    const cnn_backend *be = net->be;
    plan_head(net);
    plan_pool_col(net);
    net->gather_im2col = net->sw.fuse_gather_im2col && FUSED(be, gather_batch_im2col) &&
                         FUSED(be, conv2d_forward_col) && net->layers[0].spec.kind == CNN_LAYER_CONV2D;
    return plan_steps(net);
}
