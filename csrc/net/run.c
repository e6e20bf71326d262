/* run.c: executing the step plans (run_forward, run_backward) and what is
 * built on them: forward, backward, compute_gradients, a training step
 * (train_pass), apply_gradients, train_batch. */
#include <string.h>

#include "net_private.h"

cnn_status net_check_batch(const cnn_net *net, long n)
{
    if (n < 1 || n > net->max_batch)
        return cnn_set_error(CNN_ERR_VALUE,
                             "batch size must be in [1, %d] (the max_batch this network was "
                             "built for), got %ld",
                             net->max_batch, n);
    return CNN_OK;
}

/* Runs a forward plan on the n samples already in net->x; leaves the
 * output in the last layer's y. r->training: a training forward, which
 * moves the engine's forward counter on unless r->counted is
 * COUNTERS_MOVED (the step's gather_batch has); a plan that ends in the loss adds it to r->sums, its
 * gradient that of the mean over r->scale_n samples, into net->grad_a. */
cnn_status net_run_forward(cnn_net *net, plan_kind which, const run_args *r)
{
    const cnn_backend *be = net->be;
    cnn_ctx *ctx = net->ctx;
    const step_plan *p = &net->plans[which];
    const int n = r->n;
    net->last_n = 0; /* the activations a backward needs are being replaced */
    if (r->training && r->counted == COUNTERS_TO_MOVE)
        CNN_TRY(be->advance_counters(ctx, net->counters, 1, 0, 0));
    for (int k = 0; k < p->n; k++) {
        const step *st = &p->steps[k];
        if (net->prof) CNN_TRY(net_profile_mark(net, st->name));
        const int i = st->layer;
        layer *L = &net->layers[i];
        const cnn_layer_spec *s = &L->spec;
        const float *in = net_layer_input(net, i, 0);
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
                CNN_TRY(be->fused->conv2d_forward_col(ctx, &d, st->kind == STEP_CONV_FORWARD_COL_RELU,
                                               in, w, b, y, L->ws));
            else if (st->kind == STEP_CONV_FORWARD_RELU)
                CNN_TRY(be->fused->conv2d_forward_relu(ctx, &d, in, w, b, y, L->ws));
            else
                CNN_TRY(be->conv2d_forward(ctx, &d, in, w, b, y, L->ws));
            break;
        }
        case STEP_POOL_FORWARD: {
            cnn_pool_desc d = L->pool;
            d.n = n;
            CNN_TRY(be->pool_forward(ctx, &d, in, y, L->argmax));
            break;
        }
        case STEP_FLATTEN_FORWARD:
            CNN_TRY(be->nhwc_from_nchw(ctx, n, L->in_h, L->in_w, L->in_c, in, y));
            break;
        case STEP_DENSE_FORWARD:
            CNN_TRY(be->dense_forward(ctx, n, L->in_c, s->units, in, w, b, y));
            break;
        case STEP_DENSE_FORWARD_RELU: /* and the ReLU after it, into its output */
            CNN_TRY(be->fused->dense_forward_relu(ctx, n, L->in_c, s->units, in, w, b, y));
            break;
        case STEP_ACTIVATION_FORWARD:
            if (s->activation >= CNN_ACT_ELU) /* the elementwise ones, with parameters */
                CNN_TRY(be->elementwise_forward(ctx, &L->act, (long)n * (long)L->in_count, in, y));
            else
                CNN_TRY(be->activation_forward(ctx, s->activation, n, (int)L->in_count, in, y));
            break;
        case STEP_PRELU_FORWARD: {
            cnn_prelu_desc d = L->prelu;
            d.n = n;
            CNN_TRY(be->prelu_forward(ctx, &d, in, net->params + L->alpha_off, y));
            break;
        }
        case STEP_DROPOUT_FORWARD:
            CNN_TRY(be->dropout_forward(ctx, n, L->in_c, L->in_h, L->in_w,
                                        r->training ? s->rate : 0.0f, L->dropout_key,
                                        net->counters + CNN_COUNT_MASK, net->row0, in, y));
            break;
        case STEP_AUGMENT_FORWARD: {
            cnn_aug_desc d = L->aug;
            d.n = n;
            cnn_augment_fn *op = s->kind == CNN_LAYER_RANDOM_FLIP       ? be->random_flip
                                 : s->kind == CNN_LAYER_RANDOM_CONTRAST ? be->random_contrast
                                 : s->kind == CNN_LAYER_RANDOM_CROP     ? be->random_crop
                                                                        : be->random_affine;
            CNN_TRY(op(ctx, &d, r->training, net->counters + CNN_COUNT_MASK, net->row0, in, y));
            break;
        }
        case STEP_BATCHNORM_FORWARD: {
            cnn_bn_desc d = L->bn;
            d.n = n;
            /* frozen, or called with training=False: inference mode, as Keras 3 */
            if (r->training && !s->frozen && !s->inference)
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
        case STEP_SHAPE_FORWARD:
            CNN_TRY(net_shape_forward(net, L, n, r->training, in, y));
            break;
        case STEP_ADD_FORWARD: /* the inputs summed in their order */
            CNN_TRY(be->add(ctx, n, (int)L->out_count, in, net_layer_input(net, i, 1), y));
            for (int k = 2; k < L->n_in; k++)
                CNN_TRY(be->add(ctx, n, (int)L->out_count, y, net_layer_input(net, i, k), y));
            break;
        case STEP_CONCAT_FORWARD:
            CNN_TRY(net_concat_forward(net, i, n, y));
            break;
        case STEP_INPUT_SLICE:
            CNN_TRY(be->input_slice(ctx, n, net->in_c, s->input_offset, L->out_h, L->out_w,
                                    L->out_c, in, y));
            break;
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
                CNN_TRY(be->fused->dense_loss_head(
                    ctx, &d, L->in_c, net->head_softmax, net->head_relu, in, w, b, labels,
                    targets, r->scale_n, L->y, net->head_softmax ? net->layers[h + 1].y : NULL,
                    net->grads + L->w_off, b ? net->grads + L->b_off : NULL,
                    below >= 0 ? net->grad_a : NULL,
                    net->head_db_below ? net->grads + net->layers[below].b_off : NULL, r->sums,
                    net->head_ws));
            } else {
                if (st->kind == STEP_SOFTMAX_LOSS)
                    CNN_TRY(be->fused->softmax_loss_forward_backward(ctx, &d, in, last_y, labels,
                                                                     targets, r->scale_n,
                                                                     net->grad_a, r->sums));
                else
                    CNN_TRY(net_loss_rows(net, n, r->scale_n, net->grad_a, r->sums));
                /* dynamic loss scaling: the backward starts from S times
                 * the loss's gradient (plan_head keeps the head out) */
                if (net->loss_scaling)
                    CNN_TRY(be->loss_scale(ctx, net->hyper, (size_t)n * net->out_count,
                                           net->grad_a));
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

/* The backward of one layer's unfused step st (not a fused one, not a
 * convolution's data gradient after a pool: run_backward has those) over n
 * samples, from dy into dx (PReLU's: NULL where its input's gradient is not
 * wanted); in is the layer's input. Shared by the chain's executor below and
 * a graph's (graph.c). */
cnn_status net_backward_step(cnn_net *net, const step *st, int n, const float *in,
                             const float *dy, float *dx)
{
    const cnn_backend *be = net->be;
    cnn_ctx *ctx = net->ctx;
    layer *L = &net->layers[st->layer];
    const cnn_layer_spec *s = &L->spec;
    switch (st->kind) {
    case STEP_CONV_BACKWARD_FILTER: {
        cnn_conv_desc d = L->conv;
        d.n = n;
        return be->conv2d_backward_filter(ctx, &d, in, dy, net->grads + L->w_off,
                                          st->with_db ? net->grads + L->b_off : NULL, L->ws);
    }
    case STEP_CONV_BACKWARD_DATA: {
        cnn_conv_desc d = L->conv;
        d.n = n;
        return be->conv2d_backward_data(ctx, &d, dy, net->params + L->w_off, dx, L->ws);
    }
    case STEP_POOL_BACKWARD: {
        cnn_pool_desc d = L->pool;
        d.n = n;
        return be->pool_backward(ctx, &d, dy, L->argmax, dx);
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
    case STEP_ACTIVATION_BACKWARD:
        if (s->activation >= CNN_ACT_ELU) /* from its input and output */
            CNN_TRY(be->elementwise_backward(ctx, &L->act, (long)n * (long)L->in_count, in,
                                             L->y, dy, dx));
        else
            CNN_TRY(be->activation_backward(ctx, s->activation, n, (int)L->in_count, L->y,
                                            dy, dx));
        break;
    case STEP_PRELU_BACKWARD: {
        cnn_prelu_desc d = L->prelu;
        d.n = n;
        CNN_TRY(be->prelu_backward(ctx, &d, in, net->params + L->alpha_off, dy,
                                   dx, net->grads + L->alpha_off));
        break;
    }
    case STEP_DROPOUT_BACKWARD:
        CNN_TRY(be->dropout_backward(ctx, n, L->in_c, L->in_h, L->in_w, s->rate,
                                     L->dropout_key, net->counters + CNN_COUNT_MASK,
                                     net->row0, dy, dx));
        break;
    case STEP_BATCHNORM_BACKWARD: {
        cnn_bn_desc d = L->bn;
        d.n = n;
        if (L->spec.frozen) {
            CNN_TRY(be->batchnorm_backward_infer(ctx, &d, dy, net->params + L->gamma_off,
                                                 net->state + L->var_off, dx));
        } else if (L->spec.inference) {
            /* dgamma and dbeta: the training backward's, of the moving
             * statistics (its dx, written first, is then replaced) */
            CNN_TRY(be->batchnorm_infer_stats(ctx, &d, net->state + L->mean_off,
                                              net->state + L->var_off, L->save_mean,
                                              L->save_invstd));
            CNN_TRY(be->batchnorm_backward(ctx, &d, in, dy, net->params + L->gamma_off,
                                           L->save_mean, L->save_invstd, dx,
                                           net->grads + L->gamma_off,
                                           net->grads + L->beta_off));
            CNN_TRY(be->batchnorm_backward_infer(ctx, &d, dy, net->params + L->gamma_off,
                                                 net->state + L->var_off, dx));
        } else
            CNN_TRY(be->batchnorm_backward(ctx, &d, in, dy, net->params + L->gamma_off,
                                           L->save_mean, L->save_invstd, dx,
                                           net->grads + L->gamma_off,
                                           net->grads + L->beta_off));
        break;
    }
    case STEP_SHAPE_BACKWARD:
        CNN_TRY(net_shape_backward(net, L, n, dy, dx));
        break;
    default:
        return cnn_set_error(CNN_ERR_INTERNAL, "step %s: not a single layer's backward", st->name);
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
    if (net->graph) return net_graph_backward(net, which, dx_out);
    const step_plan *p = &net->plans[which];
    const int n = net->last_n;
    float *dy = net->grad_a, *dx = net->grad_b;
    for (int k = 0; k < p->n; k++) {
        const step *st = &p->steps[k];
        if (net->prof) CNN_TRY(net_profile_mark(net, st->name));
        const int i = st->layer;
        layer *L = &net->layers[i];
        const cnn_layer_spec *s = &L->spec;
        const float *in = net_layer_input(net, i, 0);
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
                /* in: the pool's output, this layer's input as its forward read it */
                CNN_TRY(be->fused->conv2d_backward_data_pool(ctx, &d, &pd, dy, net->params + L->w_off,
                                                      P->argmax,
                                                      relu ? net->layers[i - 2].y : NULL, in,
                                                      dx, L->ws));
            }
            break;
        }
        case STEP_POOL_BACKWARD:
        case STEP_POOL_BACKWARD_RELU: {
            cnn_pool_desc d = L->pool;
            d.n = n;
            if (st->kind == STEP_POOL_BACKWARD_RELU)
                /* the pool's and the ReLU's before it: dx is the ReLU's input gradient */
                CNN_TRY(be->fused->pool_backward_relu(ctx, &d, dy, L->argmax, in, dx));
            else
                CNN_TRY(be->pool_backward(ctx, &d, dy, L->argmax, dx));
            break;
        }
        case STEP_ACTIVATION_BACKWARD_BIAS: /* and the dense layer's db */
            CNN_TRY(be->fused->activation_backward_bias(ctx, s->activation, n, (int)L->in_count, L->y,
                                                 dy, dx, net->grads + net->layers[i - 1].b_off));
            break;
        case STEP_FLATTEN_BACKWARD:
        case STEP_DENSE_BACKWARD_FILTER:
        case STEP_DENSE_BACKWARD_DATA:
        case STEP_ACTIVATION_BACKWARD:
        case STEP_DROPOUT_BACKWARD:
        case STEP_BATCHNORM_BACKWARD:
        case STEP_SHAPE_BACKWARD:
            CNN_TRY(net_backward_step(net, st, n, in, dy, dx));
            break;
        case STEP_PRELU_BACKWARD: /* always run: it writes dalpha (dx where wanted: swap) */
            CNN_TRY(net_backward_step(net, st, n, in, dy, st->swap ? dx : NULL));
            break;
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
        return net->be->upload(net->ctx, net->labels, labels_host,
                               (size_t)n * net_target_elems(net) * sizeof(int32_t));
    }
    if (!targets_host)
        return cnn_set_error(CNN_ERR_VALUE, "this loss needs (batch, %d) targets", net->loss.k);
    return net->be->upload(net->ctx, net->targets, targets_host,
                           (size_t)n * net_target_elems(net) * sizeof(float));
}

/* The engine's op for the net's loss: the cross-entropies' or the
 * regression losses'. */
cnn_loss_forward_backward_fn *net_loss_op(const cnn_net *net)
{
    return CNN_LOSS_IS_REGRESSION(net->loss.kind) ? net->be->regression_loss_forward_backward
                                                  : net->be->loss_forward_backward;
}

/* The loss is taken along the output's last axis (an image output's
 * channels, at every position). */
cnn_status net_check_loss_ready(const cnn_net *net)
{
    if ((net->loss.kind == CNN_LOSS_SPARSE_CE || net->loss.kind == CNN_LOSS_CATEGORICAL_CE) &&
        net->loss.k < 2)
        return cnn_set_error(CNN_ERR_VALUE,
                             "categorical cross-entropy needs at least 2 outputs, the last layer "
                             "has %d: use binary cross-entropy",
                             net->loss.k);
    return CNN_OK;
}

/* Loss of the last layer's output against the staged targets, added to
 * sums (2); no gradient (evaluate: training steps go through train_pass). */
cnn_status net_loss_device(cnn_net *net, int n, float *sums)
{
    return net_loss_rows(net, n, n, NULL, sums);
}

/* The loss of the last layer's output (n samples) against the staged
 * targets, added to sums, and with dy (NULL: none) its gradient, that of the
 * mean over scale_n samples. An image output (NCHW) of several positions is
 * h w rows of c per sample in Keras's order: brought to NHWC rows in
 * y_stage, where the op also writes its gradient (dy may be y), which is
 * brought back to NCHW into dy; the op's scale counts rows. */
cnn_status net_loss_rows(cnn_net *net, int n, int scale_n, float *dy, float *sums)
{
    const cnn_backend *be = net->be;
    if (net->n_parts) return net_loss_parts(net, n, scale_n, dy, sums); /* several outputs */
    const layer *last = &net->layers[net->n_layers - 1];
    cnn_loss_desc d = net->loss;
    d.n = n;
    const int sparse = d.kind == CNN_LOSS_SPARSE_CE;
    const int32_t *labels = sparse ? net->labels : NULL;
    const float *targets = sparse ? NULL : net->targets;
    if (d.positions <= 1)
        return net_loss_op(net)(net->ctx, &d, last->y, labels, targets, scale_n, dy, sums);
    d.n = n * d.positions;
    CNN_TRY(be->nhwc_from_nchw(net->ctx, n, last->out_h, last->out_w, last->out_c, last->y,
                               net->y_stage));
    CNN_TRY(net_loss_op(net)(net->ctx, &d, net->y_stage, labels, targets, scale_n * d.positions,
                             dy ? net->y_stage : NULL, sums));
    if (dy)
        CNN_TRY(be->nchw_from_nhwc(net->ctx, n, last->out_h, last->out_w, last->out_c,
                                   net->y_stage, dy));
    return CNN_OK;
}

/* A training forward, the loss (added to args->sums, its gradient that of
 * the mean over args->scale_n samples) and the backward, of the args->n
 * samples in net->x against the staged targets; args->counted:
 * COUNTERS_MOVED where the step's gather_batch has moved the engine's
 * forward counter on (and, with gather_im2col, written the first
 * convolution's column matrix). The last dense layer, softmax and loss in
 * the engine's dense_loss_head where plan_head chose it; else, where the
 * last layer's softmax is fused into the loss, the forward stops before it
 * and the backward starts below it. */
cnn_status net_train_pass(cnn_net *net, const run_args *args)
{
    run_args r = *args;
    r.training = 1;
    const plan_kind forward =
        r.counted == COUNTERS_MOVED ? PLAN_TRAIN_FORWARD_GATHERED : PLAN_TRAIN_FORWARD;
    CNN_TRY(net_run_forward(net, forward, &r));
    return run_backward(net, PLAN_TRAIN_BACKWARD, NULL);
}

cnn_status cnn_net_forward(cnn_net *net, int n, const float *x_host, int training, float *y_host)
{
    CNN_TRY(net_check_batch(net, n));
    CNN_TRY(stage_input(net, n, x_host));
    CNN_TRY(net_run_forward(net, PLAN_FORWARD, &(run_args){.n = n, .training = training}));
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
    if (dx_host && net->aug_floor > 0)
        return cnn_set_error(CNN_ERR_VALUE,
                             "backward: the input's gradient is not computed through layer %d "
                             "(%s), %s (they pass no gradient back)",
                             net->aug_floor - 1,
                             net_kind_name(net->layers[net->aug_floor - 1].spec.kind),
                             net->layers[net->aug_floor - 1].spec.kind == CNN_LAYER_INPUT_SLICE
                                 ? "an input of several"
                                 : "an augmentation layer");
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

/* A training batch and its targets, checked, into net->x and the targets. */
cnn_status net_stage_batch(cnn_net *net, int n, const float *x_host, const int32_t *labels_host,
                           const float *targets_host)
{
    CNN_TRY(net_check_batch(net, n));
    CNN_TRY(net_check_loss_ready(net));
    CNN_TRY(stage_input(net, n, x_host));
    return stage_targets(net, n, labels_host, targets_host);
}

cnn_status cnn_net_compute_gradients(cnn_net *net, int n, const float *x_host,
                                     const int32_t *labels_host, const float *targets_host,
                                     float *loss_sum, float *correct)
{
    CNN_TRY(net_stage_batch(net, n, x_host, labels_host, targets_host));
    CNN_TRY(net->be->zero(net->ctx, net->sums, (size_t)net->n_sums * sizeof(float)));
    CNN_TRY(net_train_pass(net, &(run_args){.n = n, .scale_n = n, .sums = net->sums}));
    CNN_TRY(net_loss_unscale(net));
    CNN_TRY(net_regularize(net, (float)n, net->grads, net->sums));
    float sums[2 + 2 * CNN_MAX_OUTPUTS];
    CNN_TRY(net->be->download(net->ctx, sums, net->sums, (size_t)net->n_sums * sizeof(float)));
    double total[2] = {0.0, 0.0};
    memset(net->part_sums, 0, sizeof net->part_sums);
    net_take_sums(net, sums, total, net->part_sums);
    if (loss_sum) *loss_sum = (float)total[0];
    if (correct) *correct = (float)total[1];
    return CNN_OK;
}

/* The optimizer's step over params[off, off + count) and its slots'. */
static cnn_status optimizer_range(cnn_net *net, size_t off, size_t count)
{
    const cnn_backend *be = net->be;
    float *p = net->params + off, *g = net->grads + off;
    float *m = net->opt_m ? net->opt_m + off : NULL, *v = net->opt_v ? net->opt_v + off : NULL;
    float *a = net->opt_a ? net->opt_a + off : NULL;
    cnn_adam_step_fn *two_slots = NULL;
    switch (net->opt.kind) {
    case CNN_OPT_SGD: return be->sgd_step(net->ctx, net->hyper, count, p, g, m);
    case CNN_OPT_ADAGRAD: return be->adagrad_step(net->ctx, net->hyper, count, p, g, m);
    case CNN_OPT_RMSPROP: return be->rmsprop_step(net->ctx, net->hyper, count, p, g, m, v, a);
    case CNN_OPT_ADAM: two_slots = be->adam_step; break;
    case CNN_OPT_ADAMW: two_slots = be->adamw_step; break;
    case CNN_OPT_ADAMAX: two_slots = be->adamax_step; break;
    case CNN_OPT_NADAM: two_slots = be->nadam_step; break;
    case CNN_OPT_ADADELTA: two_slots = be->adadelta_step; break;
    default: return cnn_set_error(CNN_ERR_INTERNAL, "unknown optimizer kind %d", net->opt.kind);
    }
    return two_slots(net->ctx, net->hyper, net->counters + CNN_COUNT_STEPS, count, p, g, m, v);
}

typedef cnn_status range_fn(cnn_net *net, size_t off, size_t count);

/* fn over the trainable weights' runs of the parameter block, one call
 * each (a frozen layer's weights are skipped); all of the block in one call
 * when nothing is frozen */
static cnn_status trainable_runs(cnn_net *net, range_fn *fn)
{
    size_t start = 0, end = 0;
    for (int i = 0; i < net->n_weights; i++) {
        const cnn_weight_info *w = &net->weights[i];
        const size_t off = net_weight_offset(net, i);
        if (off == NO_OFFSET || !w->trainable) continue;
        if (off != end) {
            if (end > start) CNN_TRY(fn(net, start, end - start));
            start = off;
        }
        end = off + w->count;
    }
    return end > start ? fn(net, start, end - start) : CNN_OK;
}

static cnn_status unscale_range(cnn_net *net, size_t off, size_t count)
{
    return net->be->loss_unscale(net->ctx, net->hyper, count, net->grads + off);
}

/* Dynamic loss scaling, after the backward (before the regularizers add
 * theirs, unscaled): the trainable weights' gradients divided by S, and the
 * step marked to be skipped where one is not finite. Nothing without it. */
cnn_status net_loss_unscale(cnn_net *net)
{
    return net->loss_scaling ? trainable_runs(net, unscale_range) : CNN_OK;
}

/* One optimizer step; also moves the resident-data position on by `rows`,
 * unless `counted` (the step's gather_batch has moved the counters on).
 * Under loss scaling every optimizer skips a marked step, and the scale's
 * update (loss_scale_update) takes the step back off the engine's count. */
cnn_status net_optimizer_step(cnn_net *net, long rows, counters_state counted)
{
    if (counted == COUNTERS_TO_MOVE) CNN_TRY(net->be->advance_counters(net->ctx, net->counters, 0, 1, rows));
    net->steps++;
    CNN_TRY(trainable_runs(net, optimizer_range));
    if (net->loss_scaling) CNN_TRY(net->be->loss_scale_update(net->ctx, net->hyper, net->counters));
    return CNN_OK;
}


cnn_status cnn_net_apply_gradients(cnn_net *net)
{
    if (net->comm) return net_refuse_replica(net, "apply_gradients");
    return net_optimizer_step(net, 0, COUNTERS_TO_MOVE);
}

cnn_status cnn_net_train_batch(cnn_net *net, int n, const float *x_host,
                               const int32_t *labels_host, const float *targets_host,
                               float *loss_sum, float *correct)
{
    CNN_TRY(cnn_net_compute_gradients(net, n, x_host, labels_host, targets_host, loss_sum,
                                      correct));
    return cnn_net_apply_gradients(net);
}
